//! The feedback bench (`bench feedback --pi fixture.json`), three parts:
//!
//! 1. **Ablation** (spec ablation 7, "without feedback adjustments"): the pi vault ranked with
//!    and without the feedback term after a *simulated* user judged the results of the **train**
//!    queries only (held-out queries are never judged; their figures show what a judgment made
//!    for other queries does to them). Two simulated users: `consistent` (results judged by the
//!    fixture's train grades: graded → `relevant` + `cited`, ungraded → `irrelevant` +
//!    `shown_only`) and `noisy` (the same with every fifth judgment flipped). Every event goes
//!    through the real path: session ledger → `confirm_shown` → `record_feedback` → events lock →
//!    `meta/events.jsonl` → projection.
//! 2. **Latency**: recall p50/p95 with no stream, and with a generated stream of N events
//!    (default 100,000) — warm (projection cached), and the first recall of a process with and
//!    without the projection file.
//! 3. **Session savings** (issue 15 item 6): a scripted session (`bench-data/feedback/
//!    session-pi.json`, written by hand, not from the fixture's queries) through automatic
//!    `recallMemory`, without and with the session ledger: recalls run, injections, characters
//!    injected, pages injected again unchanged, time.
//!
//! Nothing is tuned here: the feedback constants are the spec's bounds (see `feedback`).

use super::*;
use llm_wiki_core::feedback::ledger;
use llm_wiki_core::feedback::projection;
use llm_wiki_core::feedback::record::{confirm_shown, rebuild_feedback, record_feedback};
use llm_wiki_core::feedback::{events, query_hash, FeedbackAction};
use llm_wiki_core::memory::bundle::DEFAULT_BUDGET_CHARS;
use llm_wiki_core::memory::{recall_memory, MemoryOptions};
use llm_wiki_core::retrieve::recall::SessionRecall;

/// Options of the feedback bench.
pub struct FeedbackBenchOptions {
  pub common: BenchCommon,
  /// Events in the generated stream of the latency part.
  pub events: usize,
  /// The scripted session (an `llm-wiki-session/1` file).
  pub session: PathBuf,
  /// Session budget of the savings part (characters).
  pub session_budget: usize,
}

#[derive(serde::Deserialize)]
struct SessionScript {
  turns: Vec<SessionTurn>,
}

#[derive(serde::Deserialize)]
struct SessionTurn {
  prompt: String,
  expect: String,
}

fn vault_id_of(paths: &VaultPaths) -> String {
  llm_wiki_core::retrieve::engine::open_snapshot(paths)
    .map(|s| s.manifest.vault_id.clone())
    .unwrap_or_default()
}

fn ranked_policy() -> RecallPolicy {
  RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 20, max_results: 20 }
}

fn rank_all(
  paths: &VaultPaths,
  fixture: &PiFixture,
  mode: RetrievalMode,
  feedback: bool,
  common: &BenchCommon,
) -> Result<HashMap<String, Vec<String>>> {
  let mut out = HashMap::new();
  for q in &fixture.queries {
    let opts = RecallOptions { feedback, ..common.recall_options(ranked_policy(), mode) };
    let r = recall_wiki(paths, &q.text, &opts)?;
    out.insert(q.id.clone(), r.results.into_iter().map(|r| r.id).collect());
  }
  Ok(out)
}

fn reset_feedback(paths: &VaultPaths) {
  let _ = std::fs::remove_file(events::events_path(&paths.meta));
  let _ = std::fs::remove_file(projection::projection_path(&paths.meta));
  projection::invalidate(&paths.meta);
}

/// Simulate one user over the train queries; returns (explicit judgments, implicit events).
fn simulate(
  paths: &VaultPaths,
  fixture: &PiFixture,
  mode: RetrievalMode,
  flip_every: Option<usize>,
  judged: &dyn Fn(&PiQuery) -> bool,
  common: &BenchCommon,
) -> Result<(usize, usize)> {
  let (mut explicit, mut implicit, mut n) = (0usize, 0usize, 0usize);
  let vault_id = vault_id_of(paths);
  for q in
    fixture.queries.iter().filter(|q| q.split == PiSplit::Train && !q.judgments.is_empty() && judged(q))
  {
    let session = format!("sim-{}", q.id);
    let opts = RecallOptions {
      session: Some(SessionRecall { id: session.clone(), budget_chars: None }),
      ..common.recall_options(RecallPolicy::explicit(Some(5)), mode)
    };
    let r = recall_wiki(paths, &q.text, &opts)?;
    confirm_shown(paths, &session, true)?;
    implicit += r.results.len();
    let grades = q.grades();
    for res in &r.results {
      let mut relevant = grades.get(&res.id).is_some_and(|&g| g > 0);
      n += 1;
      if flip_every.is_some_and(|k| n % k == 0) {
        relevant = !relevant;
      }
      let (judgment, engagement) = if relevant {
        (FeedbackAction::Relevant, FeedbackAction::Cited)
      } else {
        (FeedbackAction::Irrelevant, FeedbackAction::ShownOnly)
      };
      record_feedback(paths, &session, &vault_id, &res.id, engagement, None, true)?;
      record_feedback(paths, &session, &vault_id, &res.id, judgment, None, true)?;
      explicit += 1;
      implicit += 1;
    }
    ledger::end(&session);
  }
  Ok((explicit, implicit))
}

/// Train groups in order of first appearance; `cross_topic_judged` = the even ones.
fn train_groups(fixture: &PiFixture) -> Vec<String> {
  let mut g: Vec<String> = Vec::new();
  for q in fixture.queries.iter().filter(|q| q.split == PiSplit::Train) {
    if !g.contains(&q.group) {
      g.push(q.group.clone());
    }
  }
  g
}

fn subset_ir(
  fixture: &PiFixture,
  ranked: &HashMap<String, Vec<String>>,
  keep: &dyn Fn(&PiQuery) -> bool,
) -> Summary {
  let scores: Vec<QueryScores> = fixture
    .queries
    .iter()
    .filter(|q| keep(q) && !q.judgments.is_empty())
    .map(|q| query_scores(ranked.get(&q.id).map(Vec::as_slice).unwrap_or(&[]), &q.grades()))
    .collect();
  Summary::from_scores(&scores).rounded()
}

fn ir_row(md: &mut String, label: &str, fixture: &PiFixture, ranked: &HashMap<String, Vec<String>>) -> Value {
  let mut v = Map::new();
  let mut cells = Vec::new();
  for s in Slice::EVERY {
    let sum = pi_ir(fixture, ranked, s);
    cells.push(format!("{:.4} / {:.4}", sum.ndcg10, sum.mrr));
    v.insert(s.as_str().to_string(), to_value(&sum));
  }
  let _ = writeln!(md, "| {label} | {} |", cells.join(" | "));
  Value::Object(v)
}

/// The fixed part of a synthetic feedback stream's events: vault, mode, versions and the actions
/// drawn from (repeat one to make it more frequent). Shared by this bench and the 1 GiB
/// events reliability run.
pub struct SyntheticStream<'a> {
  /// Vault id every event names.
  pub vault_id: &'a str,
  /// Retrieval mode recorded.
  pub mode: &'a str,
  /// Index version recorded.
  pub index_version: &'a str,
  /// Model version recorded.
  pub model_version: &'a str,
  /// Actions drawn uniformly.
  pub actions: &'a [FeedbackAction],
}

impl SyntheticStream<'_> {
  /// One `recall_feedback` event on `page_id` for `query_hash` at `at_ms`; the random `draw`
  /// picks the shown rank (0–4) and the action.
  pub fn event(&self, page_id: String, query_hash: String, at_ms: i64, draw: u64) -> events::FeedbackEvent {
    events::FeedbackEvent {
      schema: events::SCHEMA,
      timestamp: llm_wiki_core::fsutil::iso_from_ms(at_ms),
      visibility: "internal".into(),
      kind: events::KIND.into(),
      vault_id: self.vault_id.into(),
      page_id,
      query_hash,
      mode: self.mode.into(),
      index_version: self.index_version.into(),
      model_version: self.model_version.into(),
      shown_rank: Some((draw % 5) as u32),
      action: self.actions[((draw / 5) % self.actions.len() as u64) as usize],
      observation: None,
      resolution: None,
    }
  }
}

/// Write `n` feedback events over the vault's pages and a mix of query hashes (train query
/// texts' hashes among random ones), spread over the last 365 days.
fn generate_stream(paths: &VaultPaths, fixture: &PiFixture, vault_id: &str, n: usize) -> Result<()> {
  use std::io::Write as _;
  std::fs::create_dir_all(&paths.meta).map_err(|e| Error::io("create directory", &paths.meta, e))?;
  let path = events::events_path(&paths.meta);
  let f = std::fs::File::create(&path).map_err(|e| Error::io("create", &path, e))?;
  let mut w = std::io::BufWriter::new(f);
  let hashes: Vec<String> = fixture.queries.iter().map(|q| query_hash(&q.text)).collect();
  let stream = SyntheticStream {
    vault_id,
    mode: "lexical",
    index_version: "1:1",
    model_version: "estimate",
    actions: &[
      FeedbackAction::Shown,
      FeedbackAction::Opened,
      FeedbackAction::Cited,
      FeedbackAction::ShownOnly,
      FeedbackAction::Relevant,
      FeedbackAction::Irrelevant,
    ],
  };
  let now = llm_wiki_core::fsutil::now_ms();
  let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
  let mut next = || {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    state
  };
  for i in 0..n {
    let page = &fixture.pages[(next() % fixture.pages.len() as u64) as usize].id;
    let qh = if i % 4 == 0 {
      hashes[(next() % hashes.len() as u64) as usize].clone()
    } else {
      format!("{:064x}", next())
    };
    let at = now - (next() % (365 * 86_400_000)) as i64;
    let e = stream.event(page.clone(), qh, at, next());
    serde_json::to_writer(&mut w, &e).map_err(|e| Error::invalid(e.to_string()))?;
    w.write_all(b"\n").map_err(|e| Error::io("write", &path, e))?;
  }
  w.flush().map_err(|e| Error::io("write", &path, e))?;
  Ok(())
}

fn time_queries(
  paths: &VaultPaths,
  fixture: &PiFixture,
  mode: RetrievalMode,
  reps: usize,
  common: &BenchCommon,
) -> Result<Latency> {
  let mut samples = Vec::new();
  for _ in 0..reps {
    for q in &fixture.queries {
      let opts = common.recall_options(RecallPolicy::explicit(Some(5)), mode);
      let t = Instant::now();
      let _ = recall_wiki(paths, &q.text, &opts)?;
      samples.push(ms_since(t));
    }
  }
  Ok(latency(&samples))
}

/// Part 1 for one mode: the ranking without feedback, with a consistent and a noisy simulated
/// user's judgments (rows added to `md`), and the train-only cross-topic protocol (its row
/// returned). The mode's JSON goes to `ablation`.
fn ablation_mode(
  paths: &VaultPaths,
  fixture: &PiFixture,
  mode: RetrievalMode,
  common: &BenchCommon,
  md: &mut String,
  ablation: &mut Map<String, Value>,
) -> Result<String> {
  reset_feedback(paths);
  let off = rank_all(paths, fixture, mode, false, common)?;
  let mut m = Map::new();
  m.insert(
    "withoutFeedback".into(),
    ir_row(md, &format!("{} · without feedback", mode.as_str()), fixture, &off),
  );
  for (label, flip) in [("consistent", None), ("noisy", Some(5))] {
    reset_feedback(paths);
    let (explicit, implicit) = simulate(paths, fixture, mode, flip, &|_| true, common)?;
    let on = rank_all(paths, fixture, mode, true, common)?;
    let row = ir_row(
      md,
      &format!("{} · {label} user ({explicit} judgments, {implicit} implicit events)", mode.as_str()),
      fixture,
      &on,
    );
    let moved = fixture.queries.iter().filter(|q| off.get(&q.id) != on.get(&q.id)).count();
    m.insert(label.into(), json!({ "ir": row, "explicitJudgments": explicit, "implicitEvents": implicit, "queriesReordered": moved }));
  }
  // Train only: judge the even train groups, evaluate the odd ones (topics never judged) —
  // the protocol that decides how far a judgment reaches other queries.
  let groups = train_groups(fixture);
  let judged_group = |q: &PiQuery| groups.iter().position(|g| *g == q.group).is_some_and(|i| i % 2 == 0);
  reset_feedback(paths);
  let (explicit, _) = simulate(paths, fixture, mode, None, &judged_group, common)?;
  let cross = rank_all(paths, fixture, mode, true, common)?;
  let unjudged = |q: &PiQuery| q.split == PiSplit::Train && !judged_group(q);
  let (b, a) = (subset_ir(fixture, &off, &unjudged), subset_ir(fixture, &cross, &unjudged));
  let cross_row = format!(
    "| {} | {explicit} | {} | {:.4} / {:.4} | {:.4} / {:.4} |",
    mode.as_str(),
    b.queries,
    b.ndcg10,
    b.mrr,
    a.ndcg10,
    a.mrr
  );
  m.insert(
    "crossTopicTrain".into(),
    json!({ "judgments": explicit, "withoutFeedback": to_value(&b), "withFeedback": to_value(&a) }),
  );
  ablation.insert(mode.as_str().to_string(), Value::Object(m));
  Ok(cross_row)
}

/// Part 1: ranking with and without the feedback term, every mode (the vectors are added to
/// `ix` before the first dense mode). Its section goes to `md`; returns its JSON.
fn ablation(
  paths: &VaultPaths,
  ix: &mut Indexed,
  fixture: &PiFixture,
  common: &BenchCommon,
  md: &mut String,
) -> Result<Map<String, Value>> {
  let _ = writeln!(md, "## 1. Ablation: ranking with and without the feedback term\n");
  let _ = writeln!(md, "Simulated users judged the top-5 explicit results of the {} judged **train** queries (held-out queries were never judged). Cells: nDCG@10 / MRR over 20 results, no floor.\n", fixture.queries.iter().filter(|q| q.split == PiSplit::Train && !q.judgments.is_empty()).count());
  let _ = writeln!(md, "| mode · run | all | train | heldout |\n|---|---|---|---|");
  let mut ablation = Map::new();
  let mut cross_rows: Vec<String> = Vec::new();
  let mut vectors_added = false;
  for &mode in &common.modes {
    if mode != RetrievalMode::Lexical && !vectors_added {
      add_vectors(ix, "pi-feedback", common)?;
      vectors_added = true;
    }
    cross_rows.push(ablation_mode(paths, fixture, mode, common, md, &mut ablation)?);
  }
  let _ = writeln!(md, "\n**Cross-topic, train only** (the protocol that sets how far a judgment reaches other queries): the even train groups judged by the consistent user, the odd train groups (topics never judged) evaluated. nDCG@10 / MRR:\n");
  let _ = writeln!(
    md,
    "| mode | judgments | evaluated queries | without feedback | with feedback |\n|---|---|---|---|---|"
  );
  for r in &cross_rows {
    let _ = writeln!(md, "{r}");
  }
  let _ = writeln!(md, "\nThe term is bounded to ±0.02 of the multiplier (spec), so it can swap neighbours, not lift a page from deep in the list. Judgments carry the query hash: a repeated query gets the term, another query gets `OTHER_QUERY_SHARE` ({}) of the page's signal — set by the train-only cross-topic protocol above.\n", projection::OTHER_QUERY_SHARE);
  Ok(ablation)
}

/// Part 2: recall latency without a feedback stream, with a generated one of `opts.events`
/// events (projection cached, first recall folding the stream, first recall reading the
/// projection file) and without it again. Its section goes to `md`; returns its JSON.
fn stream_latency(
  paths: &VaultPaths,
  fixture: &PiFixture,
  vault_id: &str,
  opts: &FeedbackBenchOptions,
  md: &mut String,
) -> Result<Value> {
  let common = &opts.common;
  let lat_mode = common.modes.first().copied().unwrap_or(RetrievalMode::Lexical);
  reset_feedback(paths);
  let _ = time_queries(paths, fixture, lat_mode, 1, common)?; // warm-up
  let none = time_queries(paths, fixture, lat_mode, 5, common)?;
  common.say(format!("pi-feedback: generating {} events", opts.events));
  generate_stream(paths, fixture, vault_id, opts.events)?;
  let bytes = events::events_len(&paths.meta);
  // The first recall after the projection is dropped: it reads the stream, or the rebuilt file.
  let first_recall_ms = || -> Result<f64> {
    projection::invalidate(&paths.meta);
    let t = Instant::now();
    recall_wiki(
      paths,
      &fixture.queries[0].text,
      &common.recall_options(RecallPolicy::explicit(Some(5)), lat_mode),
    )?;
    Ok(ms_since(t))
  };
  let cold_scan_ms = first_recall_ms()?;
  let warm = time_queries(paths, fixture, lat_mode, 5, common)?;
  let t = Instant::now();
  let rebuilt = rebuild_feedback(paths)?;
  let rebuild_ms = ms_since(t);
  let cold_file_ms = first_recall_ms()?;
  let proj_bytes = std::fs::metadata(projection::projection_path(&paths.meta)).map(|m| m.len()).unwrap_or(0);
  // A–B–A: the stream-free timing again, after the stream run, as the noise reference.
  let stash = paths.meta.join("events.jsonl.bench-stash");
  let stash_proj = paths.meta.join("recall-feedback.json.bench-stash");
  std::fs::rename(events::events_path(&paths.meta), &stash).map_err(|e| Error::io("rename", &stash, e))?;
  std::fs::rename(projection::projection_path(&paths.meta), &stash_proj)
    .map_err(|e| Error::io("rename", &stash_proj, e))?;
  projection::invalidate(&paths.meta);
  let none_again = time_queries(paths, fixture, lat_mode, 5, common)?;
  let _ = std::fs::remove_file(&stash);
  let _ = std::fs::remove_file(&stash_proj);
  let _ =
    writeln!(md, "## 2. Recall latency with a {}-event stream ({} mode)\n", opts.events, lat_mode.as_str());
  let _ = writeln!(md, "| stream | samples | p50 ms | p95 ms | mean ms |\n|---|---|---|---|---|");
  let row = |md: &mut String, label: &str, l: &Latency| {
    let _ =
      writeln!(md, "| {label} | {} | {:.2} | {:.2} | {:.2} |", l.samples, l.p50_ms, l.p95_ms, l.mean_ms);
  };
  row(md, "none", &none);
  row(md, &format!("{} events ({:.1} MiB), projection cached", opts.events, bytes as f64 / 1048576.0), &warm);
  row(md, "none, again (after the stream run)", &none_again);
  let _ = writeln!(md, "\nFirst recall of a process: {cold_scan_ms:.0} ms when it must fold the whole stream (no projection file), {cold_file_ms:.0} ms with the projection file ({:.1} KiB) written by `rebuildFeedback` ({rebuild_ms:.0} ms, {} events, {} pages with a signal).\n", proj_bytes as f64 / 1024.0, rebuilt.events, rebuilt.pages);
  let latency_json = json!({
    "mode": lat_mode.as_str(), "events": opts.events, "streamBytes": bytes,
    "none": to_value(&none), "stream": to_value(&warm), "noneAgain": to_value(&none_again),
    "firstRecallFoldMs": r3(cold_scan_ms), "firstRecallWithProjectionFileMs": r3(cold_file_ms),
    "rebuildMs": r3(rebuild_ms), "projectionBytes": proj_bytes,
  });
  reset_feedback(paths);
  Ok(latency_json)
}

/// Part 3 for one mode, with or without the session ledger: the scripted session's turns as
/// automatic memory recalls. Its row goes to `md`; returns its JSON.
fn run_session(
  paths: &VaultPaths,
  script: &SessionScript,
  mode: RetrievalMode,
  with_ledger: bool,
  opts: &FeedbackBenchOptions,
  md: &mut String,
) -> Result<Value> {
  let sid = format!("bench-session-{}-{with_ledger}", mode.as_str());
  ledger::end(&sid);
  let (mut runs, mut skipped, mut injections, mut chars, mut repeats, mut ms) = (0, 0, 0, 0usize, 0, 0.0);
  let mut gate_misses = Vec::new();
  let mut seen: HashSet<String> = HashSet::new();
  for turn in &script.turns {
    let mut recall = opts.common.recall_options(RecallPolicy::automatic(), mode);
    if with_ledger {
      recall.session = Some(SessionRecall {
        id: sid.clone(),
        budget_chars: Some(u32::try_from(opts.session_budget).unwrap_or(u32::MAX)),
      });
    }
    let mopts = MemoryOptions { recall, budget_chars: DEFAULT_BUDGET_CHARS, typed_expansion: true };
    let t = Instant::now();
    let r = recall_memory(paths, &turn.prompt, &mopts)?;
    ms += ms_since(t);
    let gate = r.diagnostics.iter().any(|d| d.code.starts_with("recall_skipped"));
    if gate {
      skipped += 1;
    } else {
      runs += 1;
    }
    if with_ledger && (gate != (turn.expect != "recall")) {
      gate_misses.push(turn.prompt.chars().take(60).collect::<String>());
    }
    if !r.context.is_empty() {
      injections += 1;
      chars += r.context.chars().count();
      for b in &r.bundles {
        for i in b.card.iter().chain(&b.evidence).chain(&b.conflicts) {
          if !seen.insert(i.page_id.clone()) {
            repeats += 1;
          }
        }
      }
      if with_ledger {
        confirm_shown(paths, &sid, false)?;
      }
    }
  }
  let label = if with_ledger { "session ledger" } else { "no ledger" };
  let _ = writeln!(
    md,
    "| {} · {label} | {runs} | {skipped} | {injections} | {chars} | {repeats} | {ms:.0} |",
    mode.as_str()
  );
  ledger::end(&sid);
  Ok(
    json!({ "recallsRun": runs, "skipped": skipped, "injections": injections, "charsInjected": chars, "pagesReinjected": repeats, "totalRecallMs": r3(ms), "gateDisagreements": gate_misses }),
  )
}

/// Part 3: session-aware automatic recall on the scripted session, every mode, without and with
/// the ledger. Its section goes to `md`; returns its JSON.
fn session_savings(
  paths: &VaultPaths,
  opts: &FeedbackBenchOptions,
  md: &mut String,
) -> Result<Map<String, Value>> {
  let script: SessionScript =
    serde_json::from_slice(&std::fs::read(&opts.session).map_err(|e| Error::io("read", &opts.session, e))?)
      .map_err(|e| Error::invalid(format!("{}: {e}", opts.session.display())))?;
  let mut session_json = Map::new();
  let _ = writeln!(md, "## 3. Session-aware automatic recall: scripted session\n");
  let _ = writeln!(md, "`{}`: {} turns ({} topical, {} chatter/trace by the writer's label), automatic policy, recallMemory, per-turn budget {DEFAULT_BUDGET_CHARS} chars; session budget {} chars.\n", report_path(&opts.session), script.turns.len(), script.turns.iter().filter(|t| t.expect == "recall").count(), script.turns.iter().filter(|t| t.expect != "recall").count(), opts.session_budget);
  let _ = writeln!(md, "| mode · ledger | recalls run | skipped (gate) | injections | chars injected | pages re-injected unchanged | total recall ms |\n|---|---|---|---|---|---|---|");
  for &mode in &opts.common.modes {
    for with_ledger in [false, true] {
      let v = run_session(paths, &script, mode, with_ledger, opts, md)?;
      session_json.insert(format!("{}:{}", mode.as_str(), if with_ledger { "ledger" } else { "none" }), v);
    }
  }
  let _ = writeln!(md, "\n`pages re-injected unchanged` counts bundle items whose page was already injected earlier in the session (a page edited in between would be allowed again). Gate disagreements with the writer's labels are listed in the JSON.\n");
  Ok(session_json)
}

/// Run the feedback bench; writes `feedback.json` and `feedback.md` under `<out>/feedback/`.
pub fn run_feedback(fixture_path: &Path, opts: &FeedbackBenchOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  let fixture = load_pi_fixture(fixture_path)?;
  let src = fixture_path.parent().unwrap_or(Path::new(".")).join("vault");
  let (_tmp, paths, pages) = common.vault_copy(&src, "pi-feedback")?;
  common.say(format!("pi-feedback: {pages} pages"));
  let mut ix = build_lexical(&paths, "pi-feedback", common)?;
  let vault_id = vault_id_of(&paths);
  let mut md = String::new();
  let _ = writeln!(md, "# Feedback bench (pi vault)\n");
  let ablation = ablation(&paths, &mut ix, &fixture, common, &mut md)?;
  let latency_json = stream_latency(&paths, &fixture, &vault_id, opts, &mut md)?;
  let session_json = session_savings(&paths, opts, &mut md)?;
  let value = json!({
    "schema": SCHEMA,
    "suite": "pi-feedback",
    "engine": { "name": ENGINE_NAME, "version": ENGINE_VERSION, "indexFormat": INDEX_FORMAT_VERSION },
    "ablation": ablation,
    "latency": latency_json,
    "session": session_json,
    "machine": machine_context(),
    "createdAt": now_iso(),
  });
  let dir = common.out.join("feedback");
  create_dir(&dir)?;
  let (jf, mf) = (dir.join("feedback.json"), dir.join("feedback.md"));
  write_json_file(&jf, &value)?;
  write_text_file(&mf, &md)?;
  Ok(BenchOutput { files: vec![jf, mf], markdown: md })
}
