//! Evaluation sets: source detection, the `bench <SOURCE>` entry point and the BEIR collection bench.

use super::*;

/// Where a set's data lives.
#[derive(Debug, Clone, PartialEq)]
pub enum BenchSource {
  /// The pi fixture (`fixture.json`) and its vault directory.
  Pi { fixture: PathBuf, vault: PathBuf },
  /// A BEIR-style directory.
  Beir { dir: PathBuf },
}

/// Recognize a pi `fixture.json` (or a directory holding one) or a BEIR-style directory.
pub fn detect_source(p: &Path) -> Result<BenchSource> {
  let pi = |fixture: PathBuf| {
    let vault = fixture.parent().unwrap_or(Path::new(".")).join("vault");
    if !vault.is_dir() {
      return Err(Error::invalid(format!("{} has no sibling vault/ directory", fixture.display())));
    }
    Ok(BenchSource::Pi { fixture, vault })
  };
  if p.is_file() {
    return pi(p.to_path_buf());
  }
  if p.join("fixture.json").is_file() {
    return pi(p.join("fixture.json"));
  }
  if p.join("queries.jsonl").is_file() && p.join("qrels.tsv").is_file() && p.join("vault").is_dir() {
    return Ok(BenchSource::Beir { dir: p.to_path_buf() });
  }
  Err(Error::invalid(format!(
    "{}: expected a pi fixture.json (with a sibling vault/) or a BEIR-style directory (vault/, queries.jsonl, qrels.tsv)",
    p.display()
  )))
}

/// Options of [`run_set_bench`].
#[derive(Clone)]
pub struct SetBenchOptions {
  pub common: BenchCommon,
  /// Name used in output files (default `pi`, or the BEIR directory's name).
  pub set: Option<String>,
  /// The pi heuristic's runs (default: `baseline-runs.json` next to the fixture, when present).
  pub baseline: Option<PathBuf>,
  /// Ranked-list depth.
  pub depth: usize,
}

impl SetBenchOptions {
  pub fn new(common: BenchCommon) -> Self {
    SetBenchOptions { common, set: None, baseline: None, depth: DEFAULT_DEPTH }
  }
}

/// Benchmark one set (see the module docs).
pub fn run_set_bench(source: &Path, opts: &SetBenchOptions) -> Result<BenchOutput> {
  if opts.depth == 0 || opts.depth > 1000 {
    return Err(Error::invalid("depth must be within 1..=1000"));
  }
  match detect_source(source)? {
    BenchSource::Pi { fixture, vault } => run_pi(&fixture, &vault, opts),
    BenchSource::Beir { dir } => run_beir(&dir, opts),
  }
}

pub(super) fn index_markdown(md: &mut String, rows: &[(&str, &IndexReport)]) {
  md.push_str(
    "| vault | pages | chunks | cold lexical ms | lexical peak (start) RSS MiB | model load ms | embed ms | \
     chunks/s | embed peak (start) RSS MiB | index MiB (lexical / vectors) | no-op ms (lexical / vectors) | 1-page edit ms (lexical / \
     vectors) | edit vectors.generated / new chunks |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
  );
  for (name, r) in rows {
    let v = r.vectors.as_ref();
    let opt = |x: Option<f64>| x.map_or("–".to_string(), |x| format!("{x:.1}"));
    let _ = writeln!(
      md,
      "| {name} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {:.2} ({:.2} / {:.2}) | {} | {} | {} |",
      r.pages,
      r.chunks,
      r.lexical.ms,
      fmt_peak(r.lexical.peak_rss_bytes, r.lexical.start_rss_bytes),
      opt(v.map(|v| v.model_load_ms)),
      opt(v.map(|v| v.cost.ms)),
      opt(v.map(|v| v.chunks_per_sec)),
      v.map_or("–".into(), |v| fmt_peak(v.cost.peak_rss_bytes, v.cost.start_rss_bytes)),
      mib(r.disk.total_bytes),
      mib(r.disk.lexical_bytes),
      mib(r.disk.vectors_bytes),
      r.noop.as_ref().map_or("–".into(), |n| format!("{:.1} / {}", n.lexical_ms, opt(n.vectors_ms))),
      r.edit.as_ref().map_or("–".into(), |e| format!("{:.1} / {}", e.lexical_ms, opt(e.vectors_ms))),
      r.edit.as_ref().map_or("–".into(), |e| match e.vectors_generated {
        Some(g) => format!("{g} / {}{}", e.new_chunks, if g as usize == e.new_chunks { "" } else { " ✗" }),
        None => format!("– / {}", e.new_chunks),
      }),
    );
  }
}

pub(super) fn cost_markdown(md: &mut String, runs: &[ModeRun]) {
  let with_auto = runs.iter().any(|r| !r.auto.is_empty());
  md.push_str("| mode | ranked p50 ms | ranked p95 ms | ranked max ms |");
  if with_auto {
    md.push_str(" auto p50 ms | auto p95 ms |");
  }
  md.push_str(
    " query-phase peak (start) RSS MiB | results/query (mean, max) | modes used (ranked) |\n|---|---|---|---|",
  );
  if with_auto {
    md.push_str("---|---|");
  }
  md.push_str("---|---|---|\n");
  for r in runs {
    let l = ModeRun::latency_of(&r.ranked);
    let _ = write!(md, "| {} | {:.2} | {:.2} | {:.2} |", r.mode.as_str(), l.p50_ms, l.p95_ms, l.max_ms);
    if with_auto {
      let a = ModeRun::latency_of(&r.auto);
      let _ = write!(md, " {:.2} | {:.2} |", a.p50_ms, a.p95_ms);
    }
    let rc = r.result_counts();
    let _ = writeln!(
      md,
      " {} | {}, {} | {} |",
      fmt_peak(r.peak_rss, r.start_rss),
      rc["mean"],
      rc["max"],
      fmt_used(&ModeRun::used(&r.ranked))
    );
  }
}

/// Where a hybrid query's candidate phase goes: the median of each stage its trace times. Lexical
/// and dense sides run concurrently, so `candidates` is about the slower side plus fusion.
fn stage_markdown(md: &mut String, runs: &[ModeRun]) {
  for r in runs {
    let stages = r.stage_medians();
    if stages.is_empty() {
      if r.ranked.values().any(|a| a.used == RetrievalMode::Hybrid) {
        let _ = writeln!(md, "\n{}: no stage times found in the hybrid trace line.", r.mode.as_str());
      }
      continue;
    }
    let cells: Vec<String> = stages.iter().map(|(s, v)| format!("{s} {v:.2}")).collect();
    let _ = writeln!(md, "\n{} candidate phase, p50 ms per stage: {}.", r.mode.as_str(), cells.join(" · "));
  }
}

pub(super) fn nondeterminism_markdown(md: &mut String, runs: &[ModeRun]) {
  for r in runs.iter().filter(|r| !r.nondeterministic.is_empty()) {
    let mut q = r.nondeterministic.clone();
    q.sort();
    let _ = writeln!(
      md,
      "\n**Non-determinism** ({}): warm-up and timed lists differ for {} queries: {}",
      r.mode.as_str(),
      q.len(),
      q.join(", ")
    );
  }
}

// ---- BEIR -------------------------------------------------------------------------------------

pub(super) fn run_beir(dir: &Path, opts: &SetBenchOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  let context = machine_context();
  let set = opts.set.clone().unwrap_or_else(|| dir_label(dir, "beir"));
  let data: BeirSet = load_beir_dir(dir)?;
  let judged = data.judged_queries().len();
  common.say(format!("{set}: {} queries ({judged} judged)", data.queries.len()));
  let (tmp, paths, pages) = common.beir_copy(dir, &set)?;
  common.say(format!("{set}: copied {pages} pages to {}", paths.wiki.display()));
  let mut ix = build_lexical(&paths, &set, common)?;
  let runs = run_modes(&mut ix, &data.queries, opts.depth, false, &set, common)?;
  noop_reindex(&mut ix, &set, common)?;
  let edit = edit_reindex(&paths, 1, 1, ix.embedder.is_some())?;
  common.say(edit_line(&set, "one-page edit", &edit));
  ix.report.edit = Some(edit);

  let mut out = BenchOutput::default();
  create_dir(&common.out)?;
  let mut summaries: Vec<(RetrievalMode, Summary)> = Vec::new();
  for run in &runs {
    let ranked = run.ranked_ids();
    let mut per_query = Vec::new();
    let mut scores: Vec<QueryScores> = Vec::new();
    for (qid, _) in &data.queries {
      let a = &run.ranked[qid];
      let judged_q = data.qrels.get(qid).filter(|j| j.values().any(|&g| g > 0));
      let s = judged_q.map(|j| query_scores(&ranked[qid], j));
      if let Some(s) = s {
        scores.push(s);
      }
      per_query.push(json!({
        "id": qid,
        "modeUsed": a.used.as_str(),
        "latencyMs": r3(a.ms),
        "results": a.ids.len(),
        "top": &a.top[..a.top.len().min(3)],
        "scores": s,
      }));
    }
    let summary = Summary::from_scores(&scores).rounded();
    summaries.push((run.mode, summary));
    let trec_path = common.out.join(format!("{set}-{}.trec", run.mode.as_str()));
    write_run(&trec_path, &format!("llm-wiki-{}", run.mode.as_str()), &run.trec(&data.queries))?;
    let doc = json!({
      "schema": SCHEMA,
      "kind": "beir",
      "set": set,
      "mode": run.mode.as_str(),
      "context": context,
      "source": report_path(dir),
      "depth": opts.depth,
      "policy": {"includePersonal": false, "minScore": 0.0, "maxPerVault": opts.depth, "maxResults": opts.depth},
      "queryCounts": {"queries": data.queries.len(), "judged": judged},
      "metrics": summary,
      "modesUsed": run.modes_used_json(),
      "resultsPerQuery": run.result_counts(),
      "latency": run.cost_json(),
      "index": ix.report,
      "nondeterministicQueries": run.nondeterministic,
      "diagnostics": run.diagnostics(),
      "perQuery": per_query,
    });
    let json_path = common.out.join(format!("{set}-{}.json", run.mode.as_str()));
    write_json_file(&json_path, &doc)?;
    out.files.push(trec_path);
    out.files.push(json_path);
  }

  let mut md = String::new();
  let _ = writeln!(md, "# Benchmark: {set}\n");
  md.push_str(&context_markdown(&context));
  let _ = writeln!(
    md,
    "- Set: {} ({} pages, {} queries, {judged} judged); ranked list = recall with {{includePersonal:false, \
     minScore:0, maxPerVault:{d}, maxResults:{d}}}\n",
    report_path(dir),
    pages,
    data.queries.len(),
    d = opts.depth
  );
  md.push_str("## Quality (means over judged queries)\n\n");
  md.push_str(
    "| mode | nDCG@5 | nDCG@10 | MRR@10 | MRR | Recall@20 | Recall@100 |\n|---|---|---|---|---|---|---|\n",
  );
  for (mode, s) in &summaries {
    let _ = writeln!(
      md,
      "| {} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} |",
      mode.as_str(),
      s.ndcg5,
      s.ndcg10,
      s.mrr10,
      s.mrr,
      s.recall20,
      s.recall100
    );
  }
  md.push_str("\n## Query cost (warm)\n\n");
  cost_markdown(&mut md, &runs);
  stage_markdown(&mut md, &runs);
  nondeterminism_markdown(&mut md, &runs);
  md.push_str("\n## Index cost\n\n");
  index_markdown(&mut md, &[(set.as_str(), &ix.report)]);
  finish_report(&mut out, &common.out, &set, md)?;
  release_reader(&paths);
  drop(tmp);
  Ok(out)
}

/// The end every collection and scale report shares: the method notes, then `<dir>/<set>.md` written and
/// recorded in `out` (files and markdown).
pub(super) fn finish_report(out: &mut BenchOutput, dir: &Path, set: &str, mut md: String) -> Result<()> {
  method_notes(&mut md);
  record_markdown(out, dir.join(format!("{set}.md")), md)
}

pub(super) fn method_notes(md: &mut String) {
  let _ = writeln!(
    md,
    "\nMethod: {LATENCY_METHOD} Peak RSS: {PEAK_RSS_METHOD} Index size: bytes of the regular files under \
     `<meta>/qmd`. Embed time excludes the model load (timed separately). Edits append one sentence to the \
     page body and move its mtime 5 s forward."
  );
}
