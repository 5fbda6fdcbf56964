//! Scale suite: a deterministic synthetic vault of N pages.

use super::*;

/// Options of [`run_scale`].
#[derive(Clone)]
pub struct ScaleOptions {
  pub pages: usize,
  /// Embed a separate vault of this many pages (same generator and seed) instead of the full one.
  pub vector_sample: Option<usize>,
  pub seed: u64,
  /// Synthetic queries per vault.
  pub queries: usize,
  pub common: BenchCommon,
}

pub(super) fn target_stats(queries: &[(String, String, String)], run: &ModeRun) -> Value {
  let mut at1 = 0;
  let mut at10 = 0;
  let mut rr = 0.0;
  for (qid, _, target) in queries {
    let ids = run.ranked.get(qid).map(|a| a.ids.as_slice()).unwrap_or(&[]);
    if let Some(p) = ids.iter().position(|id| id == target) {
      at1 += usize::from(p == 0);
      at10 += usize::from(p < 10);
      rr += 1.0 / (p as f64 + 1.0);
    }
  }
  let n = queries.len().max(1) as f64;
  json!({"targetAt1": round6(at1 as f64 / n), "targetAt10": round6(at10 as f64 / n), "targetMrr": round6(rr / n)})
}

pub(super) fn scale_mode_json(queries: &[(String, String, String)], run: &ModeRun) -> Value {
  json!({
    "latency": run.cost_json(),
    "modesUsed": run.modes_used_json(),
    "resultsPerQuery": run.result_counts(),
    "targets": target_stats(queries, run),
    "nondeterministicQueries": run.nondeterministic,
  })
}

pub(super) fn generate_timed(
  root: &Path,
  opts: &SynthOptions,
  common: &BenchCommon,
) -> Result<(VaultPaths, Value)> {
  common.say(format!("generating a synthetic vault of {} pages (seed {})", opts.pages, opts.seed));
  reset_peak_rss();
  let started = Instant::now();
  let report = generate_vault(root, opts)?;
  let ms = ms_since(started);
  common.say(format!("generated {} pages, {:.1} MiB in {:.0} ms", report.pages, mib(report.bytes), ms));
  Ok((
    VaultPaths::for_root(root),
    json!({
      "pages": report.pages,
      "bytes": report.bytes,
      "ms": r3(ms),
      "peakRssBytes": peak_rss_bytes(),
      "seed": opts.seed,
      "report": report,
    }),
  ))
}

/// Walk / no-op pairs the incremental floor times (medians reported).
const PAIRS: usize = 5;

/// The stat walk of the vault alone, in ms (its result is freed after the clock stops: a
/// reindex frees a walk's paths off its own path, `pool::drop_later`); `pages` gets its count.
fn timed_walk(paths: &VaultPaths, pages: &mut usize) -> f64 {
  let started = Instant::now();
  let found = llm_wiki_core::vault::discover_pages(&paths.root, &paths.wiki);
  let ms = ms_since(started);
  *pages = found.files.len();
  ms
}

/// The floor of an incremental run and what a file watcher's changed-paths hint buys: the
/// whole-vault stat walk alone (what every run without a hint pays), a one-page edit reindexed
/// with the edited path as its hint (no walk), and a hint naming a page that did not change.
/// Each is timed three times (the median is reported); every edit is a new sentence. Then, in a
/// process that did not commit the store, its first two no-ops and [`PAIRS`] walk / no-op pairs.
fn incremental_floor(paths: &VaultPaths, common: &BenchCommon, label: &str) -> Result<Value> {
  let median = |mut v: Vec<f64>| {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
  };
  let mut walk = Vec::new();
  let mut pages = 0;
  for _ in 0..3 {
    walk.push(timed_walk(paths, &mut pages));
  }
  let manifest = current_manifest(paths)?;
  // The page in the middle of the vault (the walk edits take the first).
  let id = manifest.entries.keys().nth(manifest.entries.len() / 2).cloned().unwrap_or_default();
  let rel = paths.wiki.join(&manifest.entries[&id].rel_path);
  let rel = rel.strip_prefix(&paths.root).map(Path::to_path_buf).unwrap_or(rel);
  let hinted = |hint: &Path| -> Result<(f64, llm_wiki_core::store::ReindexResult)> {
    let opts = ReindexOptions {
      scope: Scope::Changed,
      components: vec![Component::Lexical],
      changed_paths: Some(vec![hint.to_path_buf()]),
      ..Default::default()
    };
    let started = Instant::now();
    let r = reindex_vault(paths, &opts);
    let ms = ms_since(started);
    if !r.ok {
      return Err(Error::Index(format!("hinted reindex failed: {:?}", r.errors)));
    }
    Ok((ms, r))
  };
  let mut edit = Vec::new();
  let mut same = Vec::new();
  for round in 0..3 {
    edit_pages(paths, &manifest, std::slice::from_ref(&id), 10 + round)?;
    let (ms, r) = hinted(&rel)?;
    if r.documents.updated != 1 {
      return Err(Error::Index(format!("hinted edit of {id} updated {} pages", r.documents.updated)));
    }
    edit.push(ms);
    let (ms, r) = hinted(&rel)?;
    if r.documents.updated + r.documents.indexed + r.documents.removed != 0 {
      return Err(Error::Index(format!("a hint naming unchanged {id} changed pages")));
    }
    same.push(ms);
  }
  // A process that did not commit this store (a fresh CLI or MCP process, the addon before its
  // first change): its first no-op parses the manifest, the next shares that copy. The bench's
  // own reference goes first, so the process holds one copy as such a process would.
  drop(manifest);
  llm_wiki_core::store::manifest::forget_committed();
  let noop = || -> Result<f64> {
    let phase = reindex_phase(paths, &[Component::Lexical], None)?;
    let d = &phase.result.documents;
    if d.updated + d.indexed + d.removed != 0 {
      return Err(Error::Index("a no-op reindex changed pages".into()));
    }
    Ok(phase.cost.ms)
  };
  let (parsing_noop, next_noop) = (noop()?, noop()?);
  // What a no-op costs beyond its walk, from adjacent pairs (walk alone, then a no-op): on a
  // shared machine the walk's time drifts by a third between minutes, and the difference of
  // medians taken minutes apart drifts with it.
  let (mut pair_walk, mut pair_noop, mut over) = (Vec::new(), Vec::new(), Vec::new());
  for _ in 0..PAIRS {
    let w = timed_walk(paths, &mut pages);
    let n = noop()?;
    pair_walk.push(w);
    pair_noop.push(n);
    over.push(n - w);
  }
  let out = json!({
    "noopParsingManifestMs": r3(parsing_noop),
    "noopAfterThatMs": r3(next_noop),
    "pairedWalkMs": r3(median(pair_walk.clone())),
    "pairedNoopMs": r3(median(pair_noop.clone())),
    "noopOverWalkMs": r3(median(over.clone())),
    "noopOverWalkRunsMs": over.iter().map(|m| r3(*m)).collect::<Vec<_>>(),
    "statWalkMs": r3(median(walk.clone())),
    "statWalkRunsMs": walk.iter().map(|m| r3(*m)).collect::<Vec<_>>(),
    "statWalkPages": pages,
    "hintedEditMs": r3(median(edit.clone())),
    "hintedEditRunsMs": edit.iter().map(|m| r3(*m)).collect::<Vec<_>>(),
    "hintedUnchangedMs": r3(median(same.clone())),
    "page": id,
  });
  common.say(format!(
    "{label}: stat walk {:.1} ms ({pages} pages); hinted one-page edit {:.1} ms; hint naming an unchanged page {:.1} ms (medians of 3); \
     no-op parsing the manifest {parsing_noop:.1} ms, the next {next_noop:.1} ms; {PAIRS} walk / no-op pairs: walk {:.1} ms, \
     no-op {:.1} ms, no-op beyond its walk {:.1} ms",
    median(walk),
    median(edit),
    median(same),
    median(pair_walk),
    median(pair_noop),
    median(over)
  ));
  Ok(out)
}

/// A synthetic vault generated, indexed (lexical phase), queried in every mode of `modes` and
/// reindexed (no-op, then a one-page edit, recorded in its index report).
struct SynthVault {
  paths: VaultPaths,
  generation: Value,
  ix: Indexed,
  queries: Vec<(String, String, String)>,
  runs: Vec<ModeRun>,
}

impl SynthVault {
  fn measure(
    root: &Path,
    synth: &SynthOptions,
    label: &str,
    queries: usize,
    modes: &BenchCommon,
    common: &BenchCommon,
  ) -> Result<Self> {
    let (paths, generation) = generate_timed(root, synth, common)?;
    let mut ix = build_lexical(&paths, label, common)?;
    let queries = synth_queries(synth, queries);
    let qpairs: Vec<(String, String)> = queries.iter().map(|(q, t, _)| (q.clone(), t.clone())).collect();
    let runs = run_modes(&mut ix, &qpairs, 10, false, label, modes)?;
    noop_reindex(&mut ix, label, common)?;
    let edit = edit_reindex(&paths, 1, 1, ix.embedder.is_some())?;
    common.say(edit_line(label, "one-page edit", &edit));
    ix.report.edit = Some(edit);
    Ok(SynthVault { paths, generation, ix, queries, runs })
  }

  /// Each mode's JSON; the runs (with their target hits) go to `rows` under `vault`.
  fn modes_json(&mut self, vault: String, rows: &mut Vec<(String, ModeRun, Value)>) -> Map<String, Value> {
    let mut modes = Map::new();
    for run in std::mem::take(&mut self.runs) {
      modes.insert(run.mode.as_str().to_string(), scale_mode_json(&self.queries, &run));
      let targets = target_stats(&self.queries, &run);
      rows.push((vault.clone(), run, targets));
    }
    modes
  }
}

/// The vectors of the scale suite on a separate `m`-page vault of the same generator: its JSON,
/// its index and its directory's guard; its runs go to `rows`.
fn vector_sample(
  opts: &ScaleOptions,
  m: usize,
  rows: &mut Vec<(String, ModeRun, Value)>,
) -> Result<(Value, Indexed, TempDir)> {
  let common = &opts.common;
  let n = opts.pages;
  let sopts = SynthOptions::new(m.max(1), opts.seed);
  let stmp = common.temp(&format!("scale-sample-{m}"))?;
  let slabel = format!("sample-{m}");
  let mut sample = SynthVault::measure(stmp.path(), &sopts, &slabel, opts.queries, common, common)?;
  let smodes = sample.modes_json(format!("{m}-page sample"), rows);
  release_reader(&sample.paths);
  let json = json!({
    "pages": m,
    "note": format!("the engine embeds every chunk of a vault, so vectors were measured on a separate {m}-page vault \
                     from the same generator and seed (not a subset of the {n}-page vault); dense-mode latency is on \
                     that vault"),
    "generation": sample.generation,
    "index": sample.ix.report,
    "modes": smodes,
  });
  Ok((json, sample.ix, stmp))
}

/// Run the scale benchmark (see the module docs).
pub fn run_scale(opts: &ScaleOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  if opts.pages == 0 {
    return Err(Error::invalid("--pages must be at least 1"));
  }
  let context = machine_context();
  let n = opts.pages;
  let synth = SynthOptions::new(n, opts.seed);
  let tmp = common.temp(&format!("scale-{n}"))?;
  let label = format!("scale-{n}");
  let dense = common.modes.iter().any(|m| *m != RetrievalMode::Lexical);
  let embed_full = dense && opts.vector_sample.is_none();
  let mut full_common = common.clone();
  if !embed_full {
    full_common.modes.retain(|m| *m == RetrievalMode::Lexical);
  }
  let mut main = SynthVault::measure(tmp.path(), &synth, &label, opts.queries, &full_common, common)?;
  let mut runs: Vec<(String, ModeRun, Value)> = Vec::new();
  let mode_json = main.modes_json(format!("{n} pages"), &mut runs);
  let paths = &main.paths;
  let pct = (n / 100).max(1);
  let edit_pct = edit_reindex(paths, pct, 2, main.ix.embedder.is_some())?;
  common.say(edit_line(&label, "1% edit", &edit_pct));
  let floor = incremental_floor(paths, common, &label)?;
  // The sample's memory figures should not include this vault's cached reader.
  release_reader(paths);

  let (sample_json, sample_ix, sample_tmp) = match (opts.vector_sample, dense) {
    (Some(m), true) => {
      let (json, ix, tmp) = vector_sample(opts, m, &mut runs)?;
      (json, Some(ix), Some(tmp))
    }
    _ => (Value::Null, None, None),
  };
  let doc = json!({
    "schema": SCHEMA,
    "kind": "scale",
    "context": context,
    "pages": n,
    "seed": opts.seed,
    "queries": opts.queries,
    "generation": main.generation,
    "index": main.ix.report,
    "editOnePercent": edit_pct,
    "incrementalFloor": floor,
    "modes": mode_json,
    "vectorSample": sample_json,
    "sampled": match (opts.vector_sample, dense) {
      (_, false) => "lexical only (no dense mode requested)".to_string(),
      (Some(m), true) => format!("vectors and dense modes on a separate {m}-page vault; lexical on all {n} pages"),
      (None, true) => format!("everything on all {n} pages"),
    },
  });
  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  record_json(&mut out, common.out.join(format!("scale-{n}.json")), &doc)?;
  let mut index_rows: Vec<(&str, &IndexReport)> = vec![(label.as_str(), &main.ix.report)];
  let sample_label = opts.vector_sample.map(|m| format!("sample-{m}")).unwrap_or_default();
  if let Some(six) = &sample_ix {
    index_rows.push((sample_label.as_str(), &six.report));
  }
  let md = scale_markdown(opts, &doc, &main.ix, &index_rows, &edit_pct, &runs);
  finish_report(&mut out, &common.out, &format!("scale-{n}"), md)?;
  drop(sample_ix);
  drop(sample_tmp);
  drop(tmp);
  Ok(out)
}

/// `scale-<n>.md` (before the method notes): generation, index cost, edits, the incremental
/// floor and warm recall per vault and mode.
fn scale_markdown(
  opts: &ScaleOptions,
  doc: &Value,
  ix: &Indexed,
  index_rows: &[(&str, &IndexReport)],
  edit_pct: &EditCost,
  runs: &[(String, ModeRun, Value)],
) -> String {
  let (n, generation, floor) = (opts.pages, &doc["generation"], &doc["incrementalFloor"]);
  let label = format!("scale-{n}");
  let mut md = String::new();
  let _ = writeln!(md, "# Scale: {n} synthetic pages (seed {})\n", opts.seed);
  md.push_str(&context_markdown(&doc["context"]));
  let _ = writeln!(
    md,
    "- Generated {} pages, {:.1} MiB in {:.0} ms; sampled: {}\n",
    generation["pages"],
    mib(generation["bytes"].as_u64().unwrap_or(0)),
    generation["ms"].as_f64().unwrap_or(0.0),
    doc["sampled"].as_str().unwrap_or("")
  );
  md.push_str("## Index cost\n\n");
  index_markdown(&mut md, index_rows);
  let _ = writeln!(
    md,
    "\n{label}: cold lexical phase CPU (whole process, every thread): {} over {:.1} s wall; {} lexical segments after it",
    fmt_cpu(&ix.report.lexical),
    ix.report.lexical.ms / 1000.0,
    ix.report.disk.lexical_segments
  );
  let _ = writeln!(md, "\n{}", edit_line(&label, "1%-of-pages edit", edit_pct));
  let _ = writeln!(
    md,
    "\n{label}: incremental floor (lexical, medians of 3): stat walk alone {} ms ({} pages; every reindex without a \
     changed-paths hint pays it); one-page edit with a changed-paths hint (no walk) {} ms; a hint naming an unchanged \
     page {} ms (page {}); in a process that did not commit the store (a fresh CLI or MCP process), a no-op that parses \
     the manifest {} ms and the no-op after it {} ms; then {PAIRS} pairs of a walk alone and a no-op (medians): walk {} ms, \
     no-op {} ms, the no-op beyond its walk {} ms",
    floor["statWalkMs"],
    floor["statWalkPages"],
    floor["hintedEditMs"],
    floor["hintedUnchangedMs"],
    floor["page"],
    floor["noopParsingManifestMs"],
    floor["noopAfterThatMs"],
    floor["pairedWalkMs"],
    floor["pairedNoopMs"],
    floor["noopOverWalkMs"]
  );
  md.push_str("\n## Warm recall (top 10, synthetic queries)\n\n");
  md.push_str(
    "| vault | mode | p50 ms | p95 ms | max ms | first query ms (opens the reader) | query-phase peak (start) RSS MiB | modes used | target@1 | target@10 |\n\
     |---|---|---|---|---|---|---|---|---|---|\n",
  );
  for (vault, run, t) in runs {
    let l = ModeRun::latency_of(&run.ranked);
    let _ = writeln!(
      md,
      "| {vault} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {} | {} | {} | {} |",
      run.mode.as_str(),
      l.p50_ms,
      l.p95_ms,
      l.max_ms,
      run.first_ms,
      fmt_peak(run.peak_rss, run.start_rss),
      fmt_used(&ModeRun::used(&run.ranked)),
      t["targetAt1"],
      t["targetAt10"]
    );
  }
  md
}
