//! The graph-tools bench (`bench graph`): `graphQuery` and `linkPath` on written multi-hop
//! questions over the pi fixture, `graphQuery` on a synthetic vault whose answers are known by
//! construction, warm latency of `neighbours` and `graphQuery` at a larger synthetic size, and
//! `wikiIndex` output size and time at the largest size.
//!
//! pi: the fixture's vault has no links. The memory bench's [`RELATION_OVERLAY`] plus
//! [`GRAPH_OVERLAY`] (typed relations, written from the page texts alone, and a few plain links)
//! give it a graph; the questions (`bench-data/graph-questions-pi.json`) are ours and name page
//! ids only. No engine constant was fitted on them: dev questions were looked at while writing
//! the code, held-out ones only run.
//!
//! Synthetic: [`crate::synth`] pages (their own links and relations are noise) plus planted
//! clusters: a claim page with a unique word that is `derived_from` a basis page, which a root
//! page two hops from the claim `supports`; a rival the claim `contradicts`; an old page the claim
//! `supersedes`; a reading-list page linking the claim and 30 random pages; plain links from every
//! cluster page to random pages. The question of cluster `i` is its word; the answer is claim,
//! basis, root, rival (kept with the claim) and old (marked historical), all within the default
//! budget. Seeds come from lexical recall.

use super::*;
use llm_wiki_core::memory::explore::{self, NeighbourRequest};
use llm_wiki_core::memory::graph_query::{graph_query, GraphQueryOptions, GraphQueryResult};
use llm_wiki_core::memory::orientation::wiki_index;

/// `(page, relation type or "link", target)`: the graph overlay added to the copied pi vault (see
/// module docs); `link` adds a plain body link only.
pub const GRAPH_OVERLAY: &[(&str, &str, &str)] = &[
  ("syntheses/second-brain-retrieval", "derived_from", "entities/qmd"),
  ("syntheses/second-brain-retrieval", "derived_from", "concepts/canonical-memory-cards"),
  ("syntheses/second-brain-retrieval", "derived_from", "concepts/conflict-preservation"),
  ("syntheses/second-brain-retrieval", "derived_from", "concepts/retrieval-feedback"),
  ("entities/qmd", "related_to", "concepts/reciprocal-rank-fusion"),
  ("entities/qmd", "related_to", "concepts/hybrid-retrieval"),
  ("concepts/hybrid-retrieval", "related_to", "concepts/reciprocal-rank-fusion"),
  ("concepts/query-expansion", "related_to", "concepts/hybrid-retrieval"),
  ("analyses/qmd-adoption-decision", "related_to", "entities/qmd"),
  ("concepts/validated-index-mirror", "related_to", "entities/qmd"),
  ("concepts/wiki-reindex", "related_to", "concepts/validated-index-mirror"),
  ("sources/vault-audit", "supports", "syntheses/second-brain-retrieval"),
  ("concepts/zettelkasten", "related_to", "concepts/obsidian-graph-view"),
  ("concepts/canonical-memory-cards", "related_to", "concepts/zettelkasten"),
  ("sources/node-22-decision", "supports", "analyses/qmd-adoption-decision"),
  ("concepts/conflict-preservation", "link", "sources/new-conflicting-claim"),
];

/// A question of `bench-data/graph-questions-pi.json`.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct GraphQuestion {
  pub id: String,
  pub split: String,
  pub kind: String,
  #[serde(default)]
  pub query: String,
  #[serde(default)]
  pub answers: Vec<String>,
  #[serde(default)]
  pub from: String,
  #[serde(default)]
  pub to: String,
  #[serde(default)]
  pub hops: usize,
  #[serde(default)]
  pub via: Vec<String>,
}

#[derive(serde::Deserialize)]
struct QuestionFile {
  questions: Vec<GraphQuestion>,
}

/// Options of [`run_graph`].
#[derive(Clone)]
pub struct GraphBenchOptions {
  /// The pi fixture.json (its sibling vault/ is used); `None` skips the pi part.
  pub pi: Option<PathBuf>,
  /// The questions file.
  pub questions: PathBuf,
  /// Pages of the synthetic answer vault (0 skips).
  pub synth_pages: usize,
  /// Pages of the latency vault (0 skips).
  pub latency_pages: usize,
  /// Pages of the wikiIndex vault (0 skips).
  pub index_pages: usize,
  /// Planted clusters per synthetic vault.
  pub clusters: usize,
  pub common: BenchCommon,
}

/// One question's outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct Outcome {
  id: String,
  split: String,
  answered: bool,
  missing: Vec<String>,
  tokens_used: usize,
  ms: f64,
}

/// Process CPU time (user + system) in ms, `0` where unavailable: on a shared machine the wall
/// clock of a niced run measures the other processes as much as this one.
fn cpu_ms() -> f64 {
  cpu_times_ms().map_or(0.0, |(u, s)| u + s)
}

fn relative_link(from: &str, to: &str) -> String {
  format!("{}{to}.md", "../".repeat(from.matches('/').count()))
}

/// Typed entries through [`apply_overlay`] (one call: one `relations:` list per page), `link`
/// entries as a plain body link appended to the page.
fn apply_graph_overlay(paths: &VaultPaths, overlay: &[(&str, &str, &str)]) -> Result<()> {
  let typed: Vec<(&str, &str, &str)> = overlay.iter().copied().filter(|(_, t, _)| *t != "link").collect();
  apply_overlay(paths, &typed)?;
  for (page, _, target) in overlay.iter().filter(|(_, t, _)| *t == "link") {
    let file = paths.wiki.join(format!("{page}.md"));
    let text = std::fs::read_to_string(&file).map_err(|e| Error::io("read", &file, e))?;
    write_text_file(&file, &format!("{}\n[→]({})\n", text.trim_end(), relative_link(page, target)))?;
  }
  Ok(())
}

fn lexical_query(budget: Option<u64>) -> GraphQueryOptions {
  GraphQueryOptions { budget_tokens: budget, mode: RetrievalMode::Lexical, ..Default::default() }
}

fn graph_outcome(q: &GraphQuestion, r: &GraphQueryResult, ms: f64, must_be_historical: &[String]) -> Outcome {
  let mut missing: Vec<String> =
    q.answers.iter().filter(|a| !r.pages.iter().any(|p| &p.id == *a)).cloned().collect();
  for h in must_be_historical {
    if r.pages.iter().any(|p| &p.id == h && !p.historical) {
      missing.push(format!("{h} (not marked historical)"));
    }
  }
  Outcome {
    id: q.id.clone(),
    split: q.split.clone(),
    answered: missing.is_empty() && r.tokens_used <= r.budget_tokens,
    missing,
    tokens_used: r.tokens_used as usize,
    ms,
  }
}

fn summary(outcomes: &[Outcome], split: Option<&str>) -> Value {
  let o: Vec<&Outcome> = outcomes.iter().filter(|o| split.is_none_or(|s| o.split == s)).collect();
  let answered = o.iter().filter(|o| o.answered).count();
  let tokens: Vec<f64> = o.iter().map(|o| o.tokens_used as f64).collect();
  let t = latency(&tokens);
  json!({
    "questions": o.len(),
    "answered": answered,
    "share": if o.is_empty() { 0.0 } else { round6(answered as f64 / o.len() as f64) },
    "tokensUsed": { "p50": t.p50_ms, "p95": t.p95_ms, "max": t.max_ms },
    "latencyMs": to_value(&latency(&o.iter().map(|o| o.ms).collect::<Vec<_>>())),
  })
}

/// The pi part: every question twice (warm-up, timed).
fn run_pi(
  fixture: &Path,
  questions: &[GraphQuestion],
  common: &BenchCommon,
) -> Result<(Value, Vec<Outcome>)> {
  let src = fixture.parent().unwrap_or(Path::new(".")).join("vault");
  let (_tmp, paths, pages) = common.vault_copy(&src, "pi-graph")?;
  let overlay: Vec<(&str, &str, &str)> = RELATION_OVERLAY.iter().chain(GRAPH_OVERLAY).copied().collect();
  apply_graph_overlay(&paths, &overlay)?;
  let ix = build_lexical(&paths, "pi-graph", common)?;
  let lint: Vec<String> = ix.report.warnings.iter().filter(|w| w.starts_with("relation_")).cloned().collect();
  common.say(format!("pi-graph: {pages} pages, {} overlay entries, lint {lint:?}", overlay.len()));
  let mut outcomes = Vec::new();
  for q in questions {
    let run = || -> Result<Outcome> {
      if q.kind == "path" {
        let t = Instant::now();
        let p = explore::link_path(&paths, &q.from, &q.to, 4)?;
        let ms = ms_since(t);
        let ids: Vec<&str> = p.pages.iter().map(|x| x.id.as_str()).collect();
        let mut missing: Vec<String> = q.via.iter().filter(|v| !ids.contains(&v.as_str())).cloned().collect();
        if !p.found || p.hops.len() != q.hops {
          missing.push(format!("path of {} hops (found {}), expected {}", p.hops.len(), p.found, q.hops));
        }
        let tokens =
          llm_wiki_core::memory::graph_input::tokens(&serde_json::to_string(&p).unwrap_or_default());
        Ok(Outcome {
          id: q.id.clone(),
          split: q.split.clone(),
          answered: missing.is_empty(),
          missing,
          tokens_used: tokens,
          ms,
        })
      } else {
        let t = Instant::now();
        let r = graph_query(&paths, &q.query, &lexical_query(None))?;
        Ok(graph_outcome(q, &r, ms_since(t), &[]))
      }
    };
    run()?; // warm-up
    outcomes.push(run()?);
  }
  let value = json!({
    "pages": pages,
    "overlay": overlay.iter().map(|(p, t, x)| json!({"page": p, "type": t, "target": x})).collect::<Vec<_>>(),
    "overlayLint": lint,
    "all": summary(&outcomes, None),
    "dev": summary(&outcomes, Some("dev")),
    "heldout": summary(&outcomes, Some("heldout")),
    "questions": to_value(&outcomes),
  });
  Ok((value, outcomes))
}

/// Planted cluster `i` of a synthetic vault with `n` pages: `(page id, text)` pairs and its question.
fn cluster(i: usize, n: usize, synth_ids: &[String]) -> (Vec<(String, String)>, GraphQuestion) {
  let word = format!("kq{i:04}x");
  let c = |s: &str| format!("graphq/c{i:04}/{s}");
  // Plain links to pseudo-random synthetic pages (integer mixing: deterministic).
  let noise = |salt: usize, k: usize| -> String {
    (0..k)
      .map(|j| {
        let h = (i.wrapping_mul(2_654_435_761) ^ salt.wrapping_mul(40_503) ^ j.wrapping_mul(97)) % n.max(1);
        format!("[[{}]]", synth_ids[h % synth_ids.len()])
      })
      .collect::<Vec<_>>()
      .join(" ")
  };
  let page = |ty: &str, title: &str, rels: &[(&str, String)], body: String| {
    let mut fm = format!("---\ntype: {ty}\ntitle: \"{title}\"\nstatus: stable\n");
    if !rels.is_empty() {
      fm.push_str("relations:\n");
      for (t, target) in rels {
        fm.push_str(&format!("  - target: {target}\n    type: {t}\n"));
      }
    }
    format!("{fm}---\n{body}\n")
  };
  let pages = vec![
    (
      c("claim"),
      page(
        "concept",
        &format!("Keystone claim {word}"),
        &[("derived_from", c("basis")), ("contradicts", c("rival")), ("supersedes", c("old"))],
        format!(
          "The keystone claim {word} holds for this cluster. Based on [[{}]]; disputed by [[{}]]; replaces [[{}]]. See also {}.",
          c("basis"),
          c("rival"),
          c("old"),
          noise(1, 8)
        ),
      ),
    ),
    (c("basis"), page("concept", &format!("Basis of cluster {i}"), &[], format!("The basis. Related: {}.", noise(2, 8)))),
    (
      c("root"),
      page("source", &format!("Root evidence {i}"), &[("supports", c("basis"))], format!("Measured evidence for [[{}]]. Also {}.", c("basis"), noise(3, 8))),
    ),
    (c("rival"), page("concept", &format!("Rival view {i}"), &[], format!("A competing view. Mentions {}.", noise(4, 8)))),
    (c("old"), page("concept", &format!("Old view {i}"), &[], format!("An earlier view. Mentions {}.", noise(5, 8)))),
    (
      c("see-also"),
      page("source", &format!("Reading list {i}"), &[], format!("Reading around [[{}]]: {}.", c("claim"), noise(6, 30))),
    ),
  ];
  let q = GraphQuestion {
    id: format!("synth-{i:04}"),
    split: "synthetic".into(),
    kind: "graph".into(),
    query: format!("{word} keystone claim"),
    answers: vec![c("claim"), c("basis"), c("root"), c("rival"), c("old")],
    from: String::new(),
    to: String::new(),
    hops: 2,
    via: vec![],
  };
  (pages, q)
}

/// A synthetic vault of `pages` pages plus `clusters` clusters, indexed (lexical).
fn synth_vault(
  label: &str,
  pages: usize,
  clusters: usize,
  common: &BenchCommon,
) -> Result<(TempDir, VaultPaths, Vec<GraphQuestion>)> {
  let tmp = common.temp(label)?;
  let opts = SynthOptions { max_bytes: 8_000, ..SynthOptions::new(pages, 42) };
  let report = generate_vault(tmp.path(), &opts)?;
  let paths = VaultPaths::for_root(tmp.path());
  let synth_ids: Vec<String> = walkdir::WalkDir::new(&paths.wiki)
    .sort_by_file_name()
    .into_iter()
    .filter_map(|e| e.ok())
    .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
    .filter_map(|e| {
      e.path()
        .strip_prefix(&paths.wiki)
        .ok()
        .map(|r| r.with_extension("").to_string_lossy().replace('\\', "/"))
    })
    .collect();
  let mut questions = Vec::new();
  for i in 0..clusters {
    let (ps, q) = cluster(i, pages, &synth_ids);
    for (id, text) in ps {
      let f = paths.wiki.join(format!("{id}.md"));
      if let Some(d) = f.parent() {
        create_dir(d)?;
      }
      write_text_file(&f, &text)?;
    }
    questions.push(q);
  }
  common.say(format!("{label}: {} synthetic pages + {} cluster pages", report.pages, clusters * 6));
  build_lexical(&paths, label, common)?;
  Ok((tmp, paths, questions))
}

/// Every question (warm-up, then timed) and the mean CPU ms per timed call.
fn answer_synth(paths: &VaultPaths, questions: &[GraphQuestion]) -> Result<(Vec<Outcome>, f64)> {
  let mut out = Vec::new();
  for q in questions {
    let _ = graph_query(paths, &q.query, &lexical_query(None))?;
  }
  let cpu = cpu_ms();
  for q in questions {
    let t = Instant::now();
    let r = graph_query(paths, &q.query, &lexical_query(None))?;
    let old = q.answers.iter().filter(|a| a.ends_with("/old")).cloned().collect::<Vec<_>>();
    out.push(graph_outcome(q, &r, ms_since(t), &old));
  }
  Ok((out, r3((cpu_ms() - cpu) / questions.len().max(1) as f64)))
}

/// Warm latency of `neighbours` on `n` pages spread over the vault (depth 1, default budgets).
fn neighbours_latency(paths: &VaultPaths, n: usize) -> Result<Value> {
  let snap = llm_wiki_core::retrieve::engine::open_snapshot(paths)
    .map_err(|_| Error::invalid("latency vault has no index"))?;
  let ids: Vec<String> = snap.manifest.entries.keys().cloned().collect();
  let step = (ids.len() / n.max(1)).max(1);
  let pick: Vec<&String> = ids.iter().step_by(step).take(n).collect();
  let t = Instant::now();
  explore::neighbours(paths, pick[0], &NeighbourRequest::default())?;
  let cold = ms_since(t);
  for id in &pick {
    explore::neighbours(paths, id, &NeighbourRequest::default())?;
  }
  let cpu = cpu_ms();
  let mut samples = Vec::new();
  for id in &pick {
    let t = Instant::now();
    explore::neighbours(paths, id, &NeighbourRequest::default())?;
    samples.push(ms_since(t));
  }
  let cpu_per_call = r3((cpu_ms() - cpu) / pick.len().max(1) as f64);
  Ok(
    json!({ "firstCallMs": r3(cold), "warm": to_value(&latency(&samples)), "meanCpuMsPerCall": cpu_per_call }),
  )
}

/// `wikiIndex` on a vault of `pages` synthetic pages: first call (graph of links counted) and a
/// repeat (cached per generation), output size.
fn index_size(pages: usize, common: &BenchCommon) -> Result<Value> {
  let (_tmp, paths, _) = synth_vault(&format!("graph-index-{pages}"), pages, 0, common)?;
  let (t, cpu) = (Instant::now(), cpu_ms());
  let ix = wiki_index(&paths, None)?;
  let (first, first_cpu) = (ms_since(t), cpu_ms() - cpu);
  let t = Instant::now();
  let again = wiki_index(&paths, None)?;
  let repeat = ms_since(t);
  assert_eq!(ix.text, again.text);
  Ok(json!({
    "pages": ix.pages,
    "firstCallMs": r3(first),
    "firstCallCpuMs": r3(first_cpu),
    "repeatMs": r3(repeat),
    "textTokens": ix.tokens_used,
    "textBytes": ix.text.len(),
    "jsonBytes": serde_json::to_string(&ix).map_or(0, |s| s.len()),
    "truncated": ix.truncated,
  }))
}

/// Run the bench; writes `graph.json` and `graph.md` under the output directory.
pub fn run_graph(o: &GraphBenchOptions) -> Result<BenchOutput> {
  let common = &o.common;
  let mut doc = Map::new();
  let mut md = String::from("# Graph tools bench\n\n");
  if let Some(pi) = &o.pi {
    let text = std::fs::read_to_string(&o.questions).map_err(|e| Error::io("read", &o.questions, e))?;
    let qf: QuestionFile =
      serde_json::from_str(&text).map_err(|e| Error::invalid(format!("questions: {e}")))?;
    let (v, _) = run_pi(pi, &qf.questions, common)?;
    let _ = writeln!(
      md,
      "pi fixture + overlays, {} questions (graphQuery default budget 2,000 tokens, lexical seeds; linkPath max 4 hops): answered {} / {} (dev {} / {}, held-out {} / {}); tokens p50 {} / p95 {}.\n",
      v["all"]["questions"], v["all"]["answered"], v["all"]["questions"], v["dev"]["answered"], v["dev"]["questions"],
      v["heldout"]["answered"], v["heldout"]["questions"], v["all"]["tokensUsed"]["p50"], v["all"]["tokensUsed"]["p95"]
    );
    doc.insert("pi".into(), v);
  }
  for (key, pages) in [("synthetic", o.synth_pages), ("latency", o.latency_pages)] {
    if pages == 0 {
      continue;
    }
    let (_tmp, paths, questions) = synth_vault(&format!("graph-{key}-{pages}"), pages, o.clusters, common)?;
    let (outcomes, gq_cpu) = answer_synth(&paths, &questions)?;
    let mut s = summary(&outcomes, None);
    s["meanCpuMsPerCall"] = json!(gq_cpu);
    let mut v = json!({ "pages": pages + o.clusters * 6, "clusters": o.clusters, "graphQuery": s.clone(), "failed": to_value(&outcomes.iter().filter(|o| !o.answered).take(5).collect::<Vec<_>>()) });
    let _ = writeln!(
      md,
      "{key}: {} pages ({} clusters): answered {} / {}; tokens p50 {} / p95 {}; graphQuery warm p50 {} ms / p95 {} ms (wall), mean CPU {} ms per call.",
      pages + o.clusters * 6, o.clusters, s["answered"], s["questions"], s["tokensUsed"]["p50"], s["tokensUsed"]["p95"],
      s["latencyMs"]["p50Ms"], s["latencyMs"]["p95Ms"], s["meanCpuMsPerCall"]
    );
    if key == "latency" {
      let n = neighbours_latency(&paths, 200)?;
      let _ = writeln!(
        md,
        "neighbours (200 pages, depth 1, default budgets): warm p50 {} ms / p95 {} ms (wall), mean CPU {} ms per call; first call {} ms (the graph was already built by the graphQuery runs).",
        n["warm"]["p50Ms"], n["warm"]["p95Ms"], n["meanCpuMsPerCall"], n["firstCallMs"]
      );
      v["neighbours"] = n;
    }
    md.push('\n');
    doc.insert(key.into(), v);
  }
  if o.index_pages > 0 {
    let v = index_size(o.index_pages, common)?;
    let _ = writeln!(
      md,
      "wikiIndex at {} pages: first call {} ms (CPU {} ms), repeat {} ms; text {} tokens ({} bytes), JSON {} bytes.\n",
      v["pages"], v["firstCallMs"], v["firstCallCpuMs"], v["repeatMs"], v["textTokens"], v["textBytes"], v["jsonBytes"]
    );
    doc.insert("wikiIndex".into(), v);
  }
  let _ = writeln!(
    md,
    "Seeds by lexical recall (no model). The path weights (`graph_query::LINK_WEIGHT` 5 against `TYPED_WEIGHT` 2) were chosen on the synthetic 2,000-page vault; no constant was fitted on the pi questions. Latency: each call once untimed (warm-up), then once timed in the same process, wall clock around graph_query / neighbours; nearest-rank p50/p95. Load average at start: {}.",
    machine_context()["loadAverageAtStart"]
  );
  doc.insert("schema".into(), json!(SCHEMA));
  doc.insert("suite".into(), json!("graph"));
  doc.insert("engine".into(), json!({ "name": ENGINE_NAME, "version": ENGINE_VERSION }));
  doc.insert("machine".into(), machine_context());
  doc.insert("createdAt".into(), json!(now_iso()));
  create_dir(&common.out)?;
  let (jf, mf) = (common.out.join("graph.json"), common.out.join("graph.md"));
  write_json_file(&jf, &Value::Object(doc))?;
  write_text_file(&mf, &md)?;
  Ok(BenchOutput { files: vec![jf, mf], markdown: md })
}
