//! The pi fixture bench: IR metrics per slice, automatic-recall statistics, the report.

use super::*;

pub(super) fn pi_ir(fixture: &PiFixture, ranked: &HashMap<String, Vec<String>>, slice: Slice) -> Summary {
  let scores: Vec<QueryScores> = fixture
    .queries
    .iter()
    .filter(|q| slice.contains(q) && !q.judgments.is_empty())
    .map(|q| query_scores(ranked.get(&q.id).map(Vec::as_slice).unwrap_or(&[]), &q.grades()))
    .collect();
  Summary::from_scores(&scores).rounded()
}

/// Automatic-recall outcomes over a slice of the pi fixture.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoStats {
  /// Queries expecting an injection.
  pub positives: usize,
  pub injected_anything: usize,
  pub injected_anything_rate: f64,
  /// Positives with an injected page judged relevant.
  pub hits: usize,
  pub hit_rate: f64,
  /// Queries expecting no injection.
  pub negatives: usize,
  pub false_positives: usize,
  pub false_positive_rate: f64,
}

pub(super) fn rate(n: usize, d: usize) -> f64 {
  if d == 0 {
    0.0
  } else {
    round6(n as f64 / d as f64)
  }
}

pub(super) fn injected_relevant(q: &PiQuery, auto: &[String]) -> bool {
  let g = q.grades();
  auto.iter().any(|id| g.get(id).is_some_and(|&x| x > 0))
}

pub(super) fn pi_auto_stats(
  fixture: &PiFixture,
  auto: &HashMap<String, Vec<String>>,
  slice: Slice,
) -> AutoStats {
  let mut s = AutoStats::default();
  for q in fixture.queries.iter().filter(|q| slice.contains(q)) {
    let a = auto.get(&q.id).map(Vec::as_slice).unwrap_or(&[]);
    match q.auto_expectation {
      AutoExpectation::Hit => {
        s.positives += 1;
        s.injected_anything += usize::from(!a.is_empty());
        s.hits += usize::from(injected_relevant(q, a));
      }
      AutoExpectation::None => {
        s.negatives += 1;
        s.false_positives += usize::from(!a.is_empty());
      }
    }
  }
  s.injected_anything_rate = rate(s.injected_anything, s.positives);
  s.hit_rate = rate(s.hits, s.positives);
  s.false_positive_rate = rate(s.false_positives, s.negatives);
  s
}

/// Everything reported for one engine (a mode, or the baseline) on the pi fixture.
pub(super) struct PiEval {
  pub(super) name: String,
  pub(super) slices: Vec<PiSliceReport>,
  pub(super) ir: Vec<(Slice, Summary)>,
  pub(super) auto: Vec<(Slice, AutoStats)>,
  pub(super) ranked: HashMap<String, Vec<String>>,
}

impl PiEval {
  pub(super) fn new(
    name: &str,
    fixture: &PiFixture,
    ranked: HashMap<String, Vec<String>>,
    auto: &HashMap<String, Vec<String>>,
  ) -> Self {
    PiEval {
      name: name.to_string(),
      slices: pi_report(fixture, &ranked, auto),
      ir: Slice::EVERY.iter().map(|&s| (s, pi_ir(fixture, &ranked, s))).collect(),
      auto: Slice::EVERY.iter().map(|&s| (s, pi_auto_stats(fixture, auto, s))).collect(),
      ranked,
    }
  }

  pub(super) fn metrics(&self, slice: Slice) -> PiMetrics {
    self.slices.iter().find(|r| r.slice == slice).map(|r| r.metrics).unwrap_or_default()
  }

  pub(super) fn metrics_json(&self) -> Value {
    let mut m = Map::new();
    for r in &self.slices {
      m.insert(r.slice.as_str().to_string(), to_value(&r.metrics));
    }
    Value::Object(m)
  }

  pub(super) fn slice_map<T: Serialize>(items: &[(Slice, T)]) -> Value {
    let mut m = Map::new();
    for (s, v) in items {
      m.insert(s.as_str().to_string(), to_value(v));
    }
    Value::Object(m)
  }

  pub(super) fn json(&self, fixture: &PiFixture, auto: &HashMap<String, Vec<String>>) -> Value {
    let mut by_cat = Map::new();
    for (c, m) in pi_metrics_by_category(fixture, &self.ranked, auto, Slice::All) {
      by_cat.insert(c, to_value(&m));
    }
    json!({
      "metrics": self.metrics_json(),
      "sliceCounts": self.slices.iter().map(|r| (r.slice.as_str().to_string(), json!({"queries": r.queries, "judged": r.judged}))).collect::<Map<_, _>>(),
      "ir": Self::slice_map(&self.ir),
      "automatic": Self::slice_map(&self.auto),
      "byCategory": by_cat,
    })
  }
}

pub(super) fn pi_metric_row(name: &str, r: &PiSliceReport) -> String {
  let m = &r.metrics;
  format!(
    "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
    r.queries,
    r.judged,
    m.candidate_recall20,
    m.mrr,
    m.ndcg5,
    m.ndcg10,
    m.canonical_at3,
    m.evidence_recall20,
    m.contradiction_coverage,
    m.auto_false_positive_rate
  )
}

/// The pi heuristic's runs: the file (`--baseline`, else `baseline-runs.json` next to the
/// fixture, when present) and what it holds.
struct Baseline {
  path: Option<PathBuf>,
  runs: Option<PiRuns>,
}

impl Baseline {
  fn load(fixture_path: &Path, opts: &SetBenchOptions) -> Result<Self> {
    let path = opts.baseline.clone().or_else(|| {
      let p = fixture_path.parent().unwrap_or(Path::new(".")).join("baseline-runs.json");
      p.is_file().then_some(p)
    });
    let runs: Option<PiRuns> = path.as_deref().map(load_baseline_runs).transpose()?;
    Ok(Baseline { path, runs })
  }

  /// The baseline scored like a mode, with its automatic lists.
  fn eval(&self, fixture: &PiFixture) -> Option<(PiEval, HashMap<String, Vec<String>>)> {
    self.runs.as_ref().map(|b| {
      let auto = b.auto_map();
      (PiEval::new("baseline", fixture, b.ranked_map(), &auto), auto)
    })
  }

  /// The baseline's JSON: its metrics and where its runs come from.
  fn json(&self, eval: &(PiEval, HashMap<String, Vec<String>>), fixture: &PiFixture) -> Value {
    let (e, auto) = eval;
    let mut v = e.json(fixture, auto);
    v["engine"] = json!(self.runs.as_ref().map(|b| b.engine.clone()));
    v["source"] = json!(self.path.as_ref().map(|p| report_path(p)));
    v["rankedCall"] = json!(self.runs.as_ref().map(|b| b.ranked_call.clone()));
    v["autoCall"] = json!(self.runs.as_ref().map(|b| b.auto_call.clone()));
    v
  }
}

/// What every file of a pi run names: the set, the fixture, the machine, the options.
struct PiContext<'a> {
  set: &'a str,
  fixture: &'a PiFixture,
  fixture_path: &'a Path,
  context: &'a Value,
  opts: &'a SetBenchOptions,
}

impl PiContext<'_> {
  /// `<set>-<mode>.json`: the mode's metrics, the baseline's, cost and every query's lists.
  fn mode_doc(
    &self,
    run: &ModeRun,
    eval: &(PiEval, HashMap<String, Vec<String>>),
    baseline_json: &Option<Value>,
    index: &IndexReport,
  ) -> Value {
    let (ev, auto) = eval;
    let per_query: Vec<Value> = self
      .fixture
      .queries
      .iter()
      .map(|q| {
        let r = &run.ranked[&q.id];
        let a = &run.auto[&q.id];
        json!({
          "id": q.id,
          "split": q.split,
          "category": q.category,
          "autoExpectation": q.auto_expectation,
          "modeUsed": r.used.as_str(),
          "autoModeUsed": a.used.as_str(),
          "latencyMs": r3(r.ms),
          "autoLatencyMs": r3(a.ms),
          "top10": r.ids.iter().take(10).collect::<Vec<_>>(),
          "top": &r.top[..r.top.len().min(3)],
          "auto": a.top,
          "scores": pi_query_scores(q, &r.ids, &a.ids),
        })
      })
      .collect();
    let depth = self.opts.depth;
    let mut doc = json!({
      "schema": SCHEMA,
      "kind": "pi",
      "set": self.set,
      "mode": run.mode.as_str(),
      "context": self.context,
      "fixture": report_path(self.fixture_path),
      "depth": depth,
      "policy": {
        "ranked": {"includePersonal": false, "minScore": 0.0, "maxPerVault": depth, "maxResults": depth},
        "automatic": {"includePersonal": false, "minScore": AUTOMATIC_FLOOR, "maxPerVault": 10, "maxResults": 3},
      },
    });
    if let (Value::Object(d), Value::Object(e)) = (&mut doc, ev.json(self.fixture, auto)) {
      d.extend(e);
    }
    doc["baseline"] = baseline_json.clone().unwrap_or(Value::Null);
    doc["modesUsed"] = run.modes_used_json();
    doc["resultsPerQuery"] = run.result_counts();
    doc["latency"] = run.cost_json();
    doc["index"] = to_value(index);
    doc["nondeterministicQueries"] = json!(run.nondeterministic);
    doc["diagnostics"] = to_value(&run.diagnostics());
    doc["perQuery"] = Value::Array(per_query);
    doc
  }

  /// Check the release gates against the baseline, write `<set>-gates.json` and log each gate.
  fn gates(
    &self,
    out: &mut BenchOutput,
    baseline: &Baseline,
    base_eval: &PiEval,
    modes: &[(RetrievalMode, &PiEval)],
  ) -> Result<Vec<Gate>> {
    let common = &self.opts.common;
    let g = release_gates(self.fixture, base_eval, modes);
    let doc = json!({
      "schema": SCHEMA,
      "kind": "pi-gates",
      "set": self.set,
      "context": self.context,
      "baseline": baseline.path.as_ref().map(|p| report_path(p)),
      "comparisonTolerance": EPS,
      "gates": gates_json(&g),
      "summary": gate_summary(&g, &common.modes),
    });
    record_json(out, common.out.join(format!("{}-gates.json", self.set)), &doc)?;
    for gate in &g {
      let cells: Vec<String> = gate
        .modes
        .iter()
        .map(|(m, o)| {
          format!("{m} {}{}", if o.pass { "PASS" } else { "FAIL" }, if o.applies { "" } else { " (info)" })
        })
        .collect();
      common.say(format!("gate ({}) {}: {}", gate.id, gate.name, cells.join(", ")));
    }
    Ok(g)
  }

  /// The report's title and description of the run.
  fn header(&self, pages: usize, queries: usize, baseline: &Baseline) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmark: {} (pi fixture)\n", self.set);
    md.push_str(&context_markdown(self.context));
    let _ = writeln!(
      md,
      "- Fixture: {} ({} pages, {} queries); ranked list = recall {{includePersonal:false, minScore:0, \
       maxPerVault:{d}, maxResults:{d}}}; automatic list = RecallPolicy::automatic() (floor {AUTOMATIC_FLOOR}, 3 \
       results){}\n",
      report_path(self.fixture_path),
      pages,
      queries,
      baseline
        .path
        .as_ref()
        .map(|p| format!("; baseline = heuristic runs from {} (its ranked lists stop at 20)", report_path(p)))
        .unwrap_or_default(),
      d = self.opts.depth
    );
    md
  }
}

/// The quality sections of the report: the pi contract's metrics per slice, the IR metrics and
/// the automatic recall of every engine (the baseline first).
fn engine_tables(md: &mut String, engines: &[&PiEval]) {
  md.push_str("## Quality: pi contract §8 metrics\n");
  for slice in Slice::EVERY {
    let _ = writeln!(md, "\n### Slice `{}`\n", slice.as_str());
    md.push_str(
      "| engine | queries | judged | Recall@20 | MRR | nDCG@5 | nDCG@10 | canonical@3 | evidence R@20 | \
       contradiction | auto FP |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for e in engines {
      if let Some(r) = e.slices.iter().find(|r| r.slice == slice) {
        let _ = writeln!(md, "{}", pi_metric_row(&e.name, r));
      }
    }
  }
  md.push_str("\n## IR metrics over judged queries (slice `all`; held-out in parentheses)\n\n");
  md.push_str(
    "| engine | nDCG@5 | nDCG@10 | MRR@10 | MRR | Recall@20 | Recall@100 |\n|---|---|---|---|---|---|---|\n",
  );
  for e in engines {
    let all = e.ir.iter().find(|(s, _)| *s == Slice::All).map(|(_, s)| *s).unwrap_or_default();
    let held = e.ir.iter().find(|(s, _)| *s == Slice::Heldout).map(|(_, s)| *s).unwrap_or_default();
    let _ = writeln!(
      md,
      "| {} | {:.4} ({:.4}) | {:.4} ({:.4}) | {:.4} ({:.4}) | {:.4} ({:.4}) | {:.4} ({:.4}) | {:.4} ({:.4}) |",
      e.name,
      all.ndcg5,
      held.ndcg5,
      all.ndcg10,
      held.ndcg10,
      all.mrr10,
      held.mrr10,
      all.mrr,
      held.mrr,
      all.recall20,
      held.recall20,
      all.recall100,
      held.recall100
    );
  }
  md.push_str("\n## Automatic recall (slice `all`)\n\n");
  md.push_str(
    "| engine | positives | injected anything | hit (injected page judged relevant) | negatives | false positives |\n\
     |---|---|---|---|---|---|\n",
  );
  for e in engines {
    let a = e.auto.iter().find(|(s, _)| *s == Slice::All).map(|(_, a)| a.clone()).unwrap_or_default();
    let _ = writeln!(
      md,
      "| {} | {} | {} ({}) | {} ({}) | {} | {} ({}) |",
      e.name,
      a.positives,
      a.injected_anything,
      a.injected_anything_rate,
      a.hits,
      a.hit_rate,
      a.negatives,
      a.false_positives,
      a.false_positive_rate
    );
  }
}

/// The cost sections of the report: modes used, query cost, index cost.
fn cost_tables(md: &mut String, runs: &[ModeRun], set: &str, index: &IndexReport) {
  md.push_str("\n## Modes actually used\n\n| mode | ranked lists | automatic lists |\n|---|---|---|\n");
  for r in runs {
    let _ = writeln!(
      md,
      "| {} | {} | {} |",
      r.mode.as_str(),
      fmt_used(&ModeRun::used(&r.ranked)),
      fmt_used(&ModeRun::used(&r.auto))
    );
  }
  md.push_str("\n## Query cost (warm)\n\n");
  cost_markdown(md, runs);
  nondeterminism_markdown(md, runs);
  md.push_str("\n## Index cost\n\n");
  index_markdown(md, &[(set, index)]);
}

pub(super) fn run_pi(fixture_path: &Path, vault: &Path, opts: &SetBenchOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  let context = machine_context();
  let set = opts.set.clone().unwrap_or_else(|| "pi".into());
  let fixture = load_pi_fixture(fixture_path)?;
  let baseline = Baseline::load(fixture_path, opts)?;
  let queries: Vec<(String, String)> =
    fixture.queries.iter().map(|q| (q.id.clone(), q.text.clone())).collect();
  common.say(format!("{set}: {} pages, {} queries", fixture.pages.len(), queries.len()));
  let (tmp, paths, pages) = common.vault_copy(vault, &set)?;
  common.say(format!("{set}: copied {pages} pages to {}", paths.wiki.display()));
  let mut ix = build_lexical(&paths, &set, common)?;
  let runs = run_modes(&mut ix, &queries, opts.depth, true, &set, common)?;
  noop_reindex(&mut ix, &set, common)?;
  let edit = edit_reindex(&paths, 1, 1, ix.embedder.is_some())?;
  common.say(edit_line(&set, "one-page edit", &edit));
  ix.report.edit = Some(edit);

  let base_eval = baseline.eval(&fixture);
  let evals: Vec<(PiEval, HashMap<String, Vec<String>>)> = runs
    .iter()
    .map(|r| {
      let auto = r.auto_ids();
      (PiEval::new(r.mode.as_str(), &fixture, r.ranked_ids(), &auto), auto)
    })
    .collect();
  let baseline_json = base_eval.as_ref().map(|e| baseline.json(e, &fixture));
  let pc = PiContext { set: &set, fixture: &fixture, fixture_path, context: &context, opts };

  let mut out = BenchOutput::default();
  create_dir(&common.out)?;
  for (run, eval) in runs.iter().zip(&evals) {
    let doc = pc.mode_doc(run, eval, &baseline_json, &ix.report);
    let trec_path = common.out.join(format!("{set}-{}.trec", run.mode.as_str()));
    write_run(&trec_path, &format!("llm-wiki-{}", run.mode.as_str()), &run.trec(&queries))?;
    out.files.push(trec_path);
    record_json(&mut out, common.out.join(format!("{set}-{}.json", run.mode.as_str())), &doc)?;
  }
  if let Some(b) = &baseline_json {
    let doc = json!({"schema": SCHEMA, "kind": "pi-baseline", "set": set, "context": context, "baseline": b});
    record_json(&mut out, common.out.join(format!("{set}-baseline.json")), &doc)?;
  }
  let gates = match &base_eval {
    Some((b, _)) => {
      let modes: Vec<(RetrievalMode, &PiEval)> =
        runs.iter().map(|r| r.mode).zip(evals.iter().map(|(e, _)| e)).collect();
      Some(pc.gates(&mut out, &baseline, b, &modes)?)
    }
    None => None,
  };

  let mut md = pc.header(pages, queries.len(), &baseline);
  let engines: Vec<&PiEval> = base_eval.iter().map(|(e, _)| e).chain(evals.iter().map(|(e, _)| e)).collect();
  engine_tables(&mut md, &engines);
  cost_tables(&mut md, &runs, &set, &ix.report);
  if let Some(g) = &gates {
    md.push_str("\n## Release gates (against the heuristic baseline)\n\n");
    gates_markdown(&mut md, g, &common.modes);
  } else {
    md.push_str("\n## Release gates\n\nNo baseline runs found: gates not checked.\n");
  }
  finish_report(&mut out, &common.out, &set, md)?;
  release_reader(&paths);
  drop(tmp);
  Ok(out)
}
