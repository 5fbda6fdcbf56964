//! Crash injection: a child `index` is SIGKILLed at random moments, and after every kill the
//! store must be usable without manual repair.
//!
//! Kills cycle through four cells: the lexical or the vector phase of a forced (`--force`) or an
//! incremental run (with edits applied before every run, so incremental runs have work in both
//! phases). A lexical kill lands uniformly within the calibrated lexical time of that run kind
//! (from spawn: start-up, scan, commit, staging build and swap); a vector kill waits for the first
//! `vectors` progress event and lands uniformly within the calibrated vector time. A child that
//! finishes before its kill is a miss and the cell is tried again (with new edits).
//!
//! After each kill: (1) status must be `ready` or `stale` (never `error`, `missing` or
//! `recovering`), and recall must answer a known query from the generation `CURRENT` names (store
//! format 2: readers never see a store being swapped); (2) an incremental `index` must succeed; (3) status must be `ready`
//! with every chunk embedded; (4) the index must hold exactly the pages on disk, each with the
//! file's sha256; (5) recall must find the page of the iteration's newest edit by its token
//! (lexical, in this process whose warm reader outlived the child's writes), answer a known query
//! in hybrid mode, and answer it in a fresh child process.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use super::{
  check_page_set, index_command, known_queries, percentile, prepare_vault, recall_check, require_embedder,
  resolve_bin, say, sleep_until, split_mutable, write_report, Editor, HarnessOptions, RecallCheck,
  RunningIndex,
};
use crate::bench::machine_context;
use crate::synth::{derive_seed, Rng};
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::retrieve::RetrievalMode;
use llm_wiki_core::store::status::{read_index_status, IndexState};

/// Options of `reliability crash`.
#[derive(Debug, Clone)]
pub struct CrashOptions {
  pub harness: HarnessOptions,
  pub kills: usize,
  /// Longest a recovery reindex may take before it counts as hung.
  pub recovery_timeout: Duration,
}

/// Which run and phase a kill targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cell {
  LexicalForced,
  LexicalIncremental,
  VectorsForced,
  VectorsIncremental,
}

impl Cell {
  const ALL: [Cell; 4] =
    [Cell::LexicalIncremental, Cell::VectorsIncremental, Cell::LexicalForced, Cell::VectorsForced];

  fn forced(self) -> bool {
    matches!(self, Cell::LexicalForced | Cell::VectorsForced)
  }
  fn vectors(self) -> bool {
    matches!(self, Cell::VectorsForced | Cell::VectorsIncremental)
  }
  fn label(self) -> &'static str {
    match self {
      Cell::LexicalForced => "lexical phase, forced",
      Cell::LexicalIncremental => "lexical phase, incremental",
      Cell::VectorsForced => "vector phase, forced",
      Cell::VectorsIncremental => "vector phase, incremental",
    }
  }
}

/// Calibrated durations of one run kind: until the first `vectors` event, and after it.
#[derive(Debug, Clone, Copy, Serialize)]
struct Timing {
  lexical_ms: f64,
  vectors_ms: f64,
}

/// Everything recorded about one kill.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KillRecord {
  pub iteration: usize,
  pub seed: u64,
  pub cell: Cell,
  /// Kill time after spawn.
  pub kill_ms: f64,
  /// Last progress stage the child reported before the kill (`startup` = none yet).
  pub stage: String,
  pub status_after_kill: String,
  pub status_issues: Vec<String>,
  pub recall_after_kill: String,
  pub recovery_ok: bool,
  pub recovery_ms: f64,
  pub recovery_detail: String,
  pub status_after_recovery: String,
  pub needs_embedding: u32,
  pub pages: String,
  pub recall_edit: String,
  pub recall_hybrid: String,
  pub recall_child: String,
  pub failures: Vec<String>,
}

/// Run the crash-injection harness and write its report.
pub fn run_crash(crash: &CrashOptions) -> Result<Vec<PathBuf>> {
  let opts = &crash.harness;
  let bin = resolve_bin(opts.bin.as_deref())?;
  let embed_model = require_embedder()?;
  let vault = prepare_vault(&opts.source, opts.pages, opts.temp_root.as_deref(), "crash", opts.keep_temp)?;
  let paths = vault.paths.clone();
  say(format!("vault {} ({} pages), binary {}", paths.root.display(), vault.ids.len(), bin.display()));

  let (mutable, stable) = split_mutable(&vault.ids);
  let mut editor = Editor { mutable, next_new: 0 };
  let mut rng = Rng::new(derive_seed(opts.seed, 1, 0));

  say("calibrating: cold build (lexical + vectors)");
  let forced = calibrate(&bin, &paths, true)?;
  editor.apply(&paths, &mut rng, opts.edits, false, "cal")?;
  say("calibrating: incremental run after edits");
  let incremental = calibrate(&bin, &paths, false)?;
  say(format!(
    "forced: lexical {:.0} ms, vectors {:.0} ms; incremental: lexical {:.0} ms, vectors {:.0} ms",
    forced.lexical_ms, forced.vectors_ms, incremental.lexical_ms, incremental.vectors_ms
  ));
  let queries = known_queries(&paths, &stable, 20)?;

  let mut records: Vec<KillRecord> = Vec::new();
  let mut misses: BTreeMap<Cell, usize> = BTreeMap::new();
  let mut attempt = 0usize;
  while records.len() < crash.kills && attempt < crash.kills * 4 {
    let cell = Cell::ALL[records.len() % 4];
    let seed = derive_seed(opts.seed, 2, attempt as u64);
    let mut rng = Rng::new(seed);
    attempt += 1;
    let churn = rng.percent(20);
    let edits = editor.apply(&paths, &mut rng, opts.edits, churn, &attempt.to_string())?;
    let timing = if cell.forced() { forced } else { incremental };
    let mut child = RunningIndex::spawn(index_command(&bin, &paths, cell.forced()))?;
    let window = if cell.vectors() { timing.vectors_ms } else { timing.lexical_ms };
    let delay = Duration::from_secs_f64(window * unit(&mut rng) / 1000.0);
    let killed = if cell.vectors() {
      // Wait for the vector phase, then a random part of it.
      sleep_until(child.started, Duration::from_secs(3600), || {
        child.first("vectors").is_some() || child.exited()
      });
      match child.first("vectors") {
        Some(at) => {
          sleep_until(child.started, at + delay, || child.exited());
          child.kill()
        }
        None => false,
      }
    } else {
      sleep_until(child.started, delay, || child.exited());
      child.kill()
    };
    let kill_ms = child.started.elapsed().as_secs_f64() * 1000.0;
    let stage = child.last_stage();
    let end = child.finish(crash.recovery_timeout);
    if !killed {
      *misses.entry(cell).or_default() += 1;
      if !end.success {
        say(format!("attempt {attempt}: a run that was not killed failed: {}", end.stderr));
      }
      continue;
    }
    let iteration = records.len();
    let record =
      after_kill(&bin, &paths, crash, iteration, seed, cell, kill_ms, stage, &edits, &queries, &embed_model);
    say(format!(
      "kill {}/{} [{}] at {:.0} ms in {}: status {}, recovery {} ({:.0} ms){}",
      iteration + 1,
      crash.kills,
      cell.label(),
      record.kill_ms,
      record.stage,
      record.status_after_kill,
      if record.recovery_ok { "ok" } else { "FAILED" },
      record.recovery_ms,
      if record.failures.is_empty() {
        String::new()
      } else {
        format!(" — FAILURES: {}", record.failures.join("; "))
      }
    ));
    records.push(record);
  }
  let report = render(crash, &bin, &vault.ids.len(), forced, incremental, &records, &misses, attempt);
  let json = json!({
    "schema": "llm-wiki-reliability-crash/1",
    "context": machine_context(),
    "options": { "source": opts.source, "pages": vault.ids.len(), "kills": crash.kills, "seed": opts.seed, "edits": opts.edits },
    "calibration": { "forced": forced, "incremental": incremental },
    "attempts": attempt,
    "misses": misses.iter().map(|(c, n)| (format!("{c:?}"), *n)).collect::<BTreeMap<_, _>>(),
    "kills": records,
  });
  write_report(&opts.out, &report, &json)
}

/// Uniform in [0, 1).
fn unit(rng: &mut Rng) -> f64 {
  (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Run `index` to completion and measure its phases from the progress events.
fn calibrate(bin: &Path, paths: &llm_wiki_core::vault::VaultPaths, force: bool) -> Result<Timing> {
  let run = RunningIndex::spawn(index_command(bin, paths, force))?;
  let events = run.events.clone();
  let end = run.finish(Duration::from_secs(6 * 3600));
  if !end.success {
    return Err(Error::Index(format!("calibration run failed: {}\n{}", end.stderr, end.stdout)));
  }
  let total = end.elapsed.as_secs_f64() * 1000.0;
  let first_vectors =
    events.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|e| e.stage == "vectors").map(|e| e.at);
  let Some(v) = first_vectors else {
    return Err(Error::Index("calibration run had no vector phase (nothing to embed?)".into()));
  };
  let lexical_ms = v.as_secs_f64() * 1000.0;
  Ok(Timing { lexical_ms, vectors_ms: (total - lexical_ms).max(1.0) })
}

/// The incremental reindex after a kill, in a child process: whether it succeeded, its warnings
/// (or why it failed, also added to `failures`) and its time in ms.
fn recovery_reindex(
  bin: &Path,
  paths: &llm_wiki_core::vault::VaultPaths,
  crash: &CrashOptions,
  failures: &mut Vec<String>,
) -> (bool, String, f64) {
  let mut recovery_ok = false;
  let mut recovery_detail = String::new();
  let mut recovery_ms = 0.0;
  match RunningIndex::spawn(index_command(bin, paths, false)) {
    Err(e) => failures.push(format!("recovery could not start: {e}")),
    Ok(run) => {
      let end = run.finish(crash.recovery_timeout);
      recovery_ms = end.elapsed.as_secs_f64() * 1000.0;
      let result: Option<serde_json::Value> = serde_json::from_str(&end.stdout).ok();
      let ok = result.as_ref().and_then(|r| r["ok"].as_bool()).unwrap_or(false);
      let errors = result.as_ref().map(|r| r["errors"].to_string()).unwrap_or_default();
      let warnings: Vec<String> = result
        .as_ref()
        .and_then(|r| r["warnings"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|w| w["code"].as_str().map(str::to_string))
        .collect();
      recovery_detail = format!("warnings {warnings:?}");
      recovery_ok = end.success && ok;
      if !recovery_ok {
        recovery_detail = format!(
          "exit ok {}, timed out {}, errors {errors}; stderr: {}",
          end.success,
          end.timed_out,
          end.stderr.chars().take(400).collect::<String>()
        );
        failures.push(format!("recovery reindex failed: {recovery_detail}"));
      }
    }
  }
  (recovery_ok, recovery_detail, recovery_ms)
}

#[allow(clippy::too_many_arguments)]
fn after_kill(
  bin: &Path,
  paths: &llm_wiki_core::vault::VaultPaths,
  crash: &CrashOptions,
  iteration: usize,
  seed: u64,
  cell: Cell,
  kill_ms: f64,
  stage: String,
  edits: &[super::Edit],
  queries: &[(String, String)],
  embed_model: &str,
) -> KillRecord {
  let mut failures = Vec::new();
  let (query, query_page) = &queries[iteration % queries.len()];

  // 1. Status and recall right after the kill (the killed child still "holds" its lock).
  let st = read_index_status(paths);
  let status_after_kill = st.state.as_str().to_string();
  let status_issues: Vec<String> = st.issues.iter().map(|i| i.code.clone()).collect();
  if !matches!(st.state, IndexState::Ready | IndexState::Stale) {
    failures.push(format!("status after kill is {status_after_kill} ({:?})", st.issues));
  }
  let recall_after_kill = recall_check(paths, query, query_page, RetrievalMode::Lexical);
  if !matches!(recall_after_kill, RecallCheck::Hit(_)) {
    failures.push(format!("recall after kill: {}", recall_after_kill.label()));
  }
  let recall_after_kill = recall_after_kill.label();

  // 2. The next (incremental) reindex succeeds.
  let (recovery_ok, recovery_detail, recovery_ms) = recovery_reindex(bin, paths, crash, &mut failures);

  // 3. Status after recovery: ready, every chunk embedded with the configured model.
  let st = read_index_status(paths);
  let status_after_recovery = st.state.as_str().to_string();
  if st.state != IndexState::Ready {
    failures.push(format!("status after recovery is {status_after_recovery} ({:?})", st.issues));
  }
  if st.needs_embedding > 0 || !st.has_vector_index || st.models.embed != embed_model {
    failures.push(format!(
      "vectors after recovery: {} chunks pending, vector index {}",
      st.needs_embedding, st.has_vector_index
    ));
  }

  // 4. No page lost.
  let pages = check_page_set(paths);
  if !pages.ok() {
    failures.push(format!("page set: {}", pages.summary()));
  }

  // 5. Recall answers.
  let recall_edit = match edits.last() {
    Some(e) => {
      let r = recall_check(paths, &e.token, &e.id, RetrievalMode::Lexical);
      if r != RecallCheck::Hit(1) {
        failures.push(format!("recall of edit token {} (page {}): {}", e.token, e.id, r.label()));
      }
      r.label()
    }
    None => "no edit".into(),
  };
  let hybrid = recall_check(paths, query, query_page, RetrievalMode::Hybrid);
  if !matches!(hybrid, RecallCheck::Hit(_)) {
    failures.push(format!("hybrid recall of {query:?}: {}", hybrid.label()));
  }
  let recall_child = child_recall(bin, paths, query, query_page);
  if !recall_child.starts_with("hit") {
    failures.push(format!("recall in a fresh process: {recall_child}"));
  }
  KillRecord {
    iteration,
    seed,
    cell,
    kill_ms,
    stage,
    status_after_kill,
    status_issues,
    recall_after_kill,
    recovery_ok,
    recovery_ms,
    recovery_detail,
    status_after_recovery,
    needs_embedding: st.needs_embedding,
    pages: pages.summary(),
    recall_edit,
    recall_hybrid: hybrid.label(),
    recall_child,
    failures,
  }
}

/// Lexical recall through a fresh CLI process (cold reader).
fn child_recall(bin: &Path, paths: &llm_wiki_core::vault::VaultPaths, query: &str, expect: &str) -> String {
  let out = std::process::Command::new(bin)
    .arg("recall")
    .arg(&paths.root)
    .arg(query)
    .args(["--mode", "lexical", "--max", "10", "--json"])
    .stdin(std::process::Stdio::null())
    .output();
  let Ok(out) = out else { return "could not run".into() };
  let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
    return format!("no JSON (exit {:?}): {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
  };
  let results = v["results"].as_array().cloned().unwrap_or_default();
  match results.iter().position(|r| r["id"] == expect) {
    Some(i) => format!("hit@{}", i + 1),
    None if results.is_empty() => format!("empty {}", v["diagnostics"]),
    None => "miss".into(),
  }
}

#[allow(clippy::too_many_arguments)]
fn render(
  crash: &CrashOptions,
  bin: &Path,
  pages: &usize,
  forced: Timing,
  incremental: Timing,
  records: &[KillRecord],
  misses: &BTreeMap<Cell, usize>,
  attempts: usize,
) -> String {
  let opts = &crash.harness;
  let mut md = String::new();
  let failed: Vec<&KillRecord> = records.iter().filter(|r| !r.failures.is_empty()).collect();
  let _ = writeln!(md, "# Crash injection\n");
  let _ = writeln!(
    md,
    "Command: `llm-wiki-retrieval reliability crash --source {} --pages {} --kills {} --seed {} --edits {}` \
     (binary `{}`), {}.\n",
    crate::bench::report_path(&opts.source),
    opts.pages,
    crash.kills,
    opts.seed,
    opts.edits,
    bin.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
    llm_wiki_core::fsutil::now_iso()
  );
  let _ = writeln!(
    md,
    "Vault: {pages} pages. Calibration (ms from spawn): forced run lexical {:.0}, vectors {:.0}; incremental \
     run ({} edits) lexical {:.0}, vectors {:.0}. {} kills in {attempts} attempts ({} runs finished before \
     their kill and were retried).\n",
    forced.lexical_ms,
    forced.vectors_ms,
    opts.edits,
    incremental.lexical_ms,
    incremental.vectors_ms,
    records.len(),
    misses.values().sum::<usize>()
  );
  let _ = writeln!(md, "**Result: {} of {} kills left a failure.**\n", failed.len(), records.len());
  let _ = writeln!(md, "| cell | kills | stage at kill | status after kill | recall after kill (before recovery) | recovery p50 / max ms | failures |");
  let _ = writeln!(md, "|---|---|---|---|---|---|---|");
  for cell in Cell::ALL {
    let rs: Vec<&KillRecord> = records.iter().filter(|r| r.cell == cell).collect();
    if rs.is_empty() {
      continue;
    }
    let hist = |f: &dyn Fn(&KillRecord) -> String| {
      let mut m: BTreeMap<String, usize> = BTreeMap::new();
      for r in &rs {
        *m.entry(f(r)).or_default() += 1;
      }
      m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    };
    let mut rec: Vec<f64> = rs.iter().map(|r| r.recovery_ms).collect();
    rec.sort_by(f64::total_cmp);
    let _ = writeln!(
      md,
      "| {} | {} | {} | {} | {} | {:.0} / {:.0} | {} |",
      cell.label(),
      rs.len(),
      hist(&|r| r.stage.clone()),
      hist(&|r| r.status_after_kill.clone()),
      hist(&|r| if r.recall_after_kill.starts_with("hit") {
        "answered".into()
      } else {
        r.recall_after_kill.clone()
      }),
      percentile(&rec, 0.5),
      percentile(&rec, 1.0),
      rs.iter().filter(|r| !r.failures.is_empty()).count()
    );
  }
  let _ = writeln!(
    md,
    "\nChecks after every kill: status ∈ {{ready, stale}} and recall answers a known query; the next incremental `index` succeeds; \
     then status `ready` with 0 chunks pending; the index holds exactly the pages on disk with their sha256; \
     recall finds the newest edit by its token (lexical, warm reader of the harness process), answers a known \
     query in hybrid mode and in a fresh process.\n"
  );
  if !failed.is_empty() {
    let _ = writeln!(md, "## Failures\n");
    for r in &failed {
      let _ = writeln!(
        md,
        "- kill {} ({}, seed {}): killed at {:.0} ms in stage `{}`; {}",
        r.iteration,
        r.cell.label(),
        r.seed,
        r.kill_ms,
        r.stage,
        r.failures.join("; ")
      );
    }
    let _ = writeln!(
      md,
      "\nReproduce: rerun the command above (same `--seed`): edits and kill delays repeat; the moment a delay \
       falls on depends on the machine's speed."
    );
  }
  md
}
