//! Concurrency soak: two worker processes share one vault for a fixed time. Each runs a writer
//! thread and a reader thread:
//!
//! * the `incremental` worker edits pages (one in ten of the vault is editable) and reindexes
//!   lexical + vectors incrementally, over and over;
//! * the `forced` worker rebuilds the lexical index from scratch (`force`, vectors carried), over
//!   and over;
//! * both readers recall known queries (titles of pages nobody edits, ranked first on the initial
//!   index), alternating lexical and hybrid mode, with their warm readers.
//!
//! Counted: reindex outcomes (ok, `qmd_index_busy`, other errors by code) and recall outcomes
//! (hit, miss, empty with its diagnostic codes, error). A known query must never come back
//! empty or in error. After the time is up, one more reindex must succeed, status must be
//! `ready`, the index must hold exactly the pages on disk and every known query must hit.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{
  check_page_set, index_command, known_queries, percentile, prepare_vault, recall_check, require_embedder,
  resolve_bin, say, split_mutable, write_report, Editor, HarnessOptions, RecallCheck, RunningIndex,
};
use crate::bench::machine_context;
use crate::synth::{derive_seed, Rng};
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::retrieve::RetrievalMode;
use llm_wiki_core::store::status::{read_index_status, IndexState};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions};
use llm_wiki_core::vault::VaultPaths;

/// Options of `reliability soak`.
#[derive(Debug, Clone)]
pub struct SoakOptions {
  pub harness: HarnessOptions,
  pub seconds: u64,
  /// Issue 43's mix of writers (roles `watcher` and `writer`, see [`super::soak_mixed`]).
  pub mixed: bool,
}

/// What a worker does besides recalling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
  Incremental,
  Forced,
  /// A watcher on the vault, page edits and explicit incremental reindexes.
  Watcher,
  /// Explicit reindexes (every fifth forced), conflict resolutions and recall feedback.
  Writer,
}

impl Role {
  pub fn parse(s: &str) -> Result<Role> {
    match s {
      "incremental" => Ok(Role::Incremental),
      "forced" => Ok(Role::Forced),
      "watcher" => Ok(Role::Watcher),
      "writer" => Ok(Role::Writer),
      o => Err(Error::invalid(format!(
        "unknown soak role '{o}' (expected incremental | forced | watcher | writer)"
      ))),
    }
  }
}

/// The plan the parent hands to its workers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SoakPlan {
  pub seconds: u64,
  pub seed: u64,
  pub edits: usize,
  pub mutable: Vec<String>,
  /// (query, expected page id).
  pub queries: Vec<(String, String)>,
}

/// Counts of one worker.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerReport {
  pub role: Option<Role>,
  pub reindex_runs: u64,
  pub reindex_ok: u64,
  pub reindex_busy: u64,
  /// Other reindex errors: code → count.
  pub reindex_errors: BTreeMap<String, u64>,
  pub reindex_error_samples: Vec<String>,
  pub reindex_ms: Vec<f64>,
  pub edits: u64,
  pub recalls: u64,
  pub recall_hits: u64,
  pub recall_misses: u64,
  /// Empty answers: diagnostic codes (or "none") → count.
  pub recall_empty: BTreeMap<String, u64>,
  /// recall_wiki errors: code → count.
  pub recall_errors: BTreeMap<String, u64>,
  pub recall_samples: Vec<String>,
  pub recall_ms: Vec<f64>,
  /// Vault ids seen (config.json before each recall, and each reindex result): must be one.
  #[serde(default)]
  pub vault_ids: std::collections::BTreeSet<String>,
  /// Mixed roles: the other operations' outcomes (operation → code or "ok" → count).
  #[serde(default)]
  pub ops: BTreeMap<String, BTreeMap<String, u64>>,
  #[serde(default)]
  pub op_samples: Vec<String>,
}

impl WorkerReport {
  /// Count one outcome of operation `op` (`ok` or an error code), keeping a few samples.
  pub fn op(&mut self, op: &str, outcome: &str, sample: impl FnOnce() -> String) {
    *self.ops.entry(op.to_string()).or_default().entry(outcome.to_string()).or_default() += 1;
    if !outcome.starts_with("ok") && self.op_samples.len() < 30 {
      self.op_samples.push(format!("{op} {outcome}: {}", sample()));
    }
  }
}

/// Run the soak: prepare the vault, index it, run both workers, check the end state, report.
pub fn run_soak(soak: &SoakOptions) -> Result<Vec<PathBuf>> {
  let opts = &soak.harness;
  let bin = resolve_bin(opts.bin.as_deref())?;
  require_embedder()?;
  let vault = prepare_vault(&opts.source, opts.pages, opts.temp_root.as_deref(), "soak", opts.keep_temp)?;
  let paths = vault.paths.clone();
  say(format!("vault {} ({} pages): initial build", paths.root.display(), vault.ids.len()));
  let first = RunningIndex::spawn(index_command(&bin, &paths, true))?.finish(Duration::from_secs(6 * 3600));
  if !first.success {
    return Err(Error::Index(format!("initial index failed: {}", first.stderr)));
  }
  let (mutable, stable) = split_mutable(&vault.ids);
  let queries = known_queries(&paths, &stable, 20)?;
  let plan =
    SoakPlan { seconds: soak.seconds, seed: opts.seed, edits: opts.edits, mutable, queries: queries.clone() };
  let plan_file = vault.temp.path().join("soak-plan.json");
  llm_wiki_core::fsutil::write_json(&plan_file, &plan)?;

  say(format!("two workers for {} s", soak.seconds));
  let mut workers = Vec::new();
  let roles = if soak.mixed { ["watcher", "writer"] } else { ["incremental", "forced"] };
  for role in roles {
    let report = vault.temp.path().join(format!("soak-{role}.json"));
    let child = std::process::Command::new(&bin)
      .args(["reliability", "soak-worker"])
      .arg(&paths.root)
      .arg("--plan")
      .arg(&plan_file)
      .args(["--role", role])
      .arg("--out")
      .arg(&report)
      .stdin(std::process::Stdio::null())
      .spawn()
      .map_err(|e| Error::io("spawn", &bin, e))?;
    workers.push((role, child, report));
  }
  let mut reports = Vec::new();
  for (role, mut child, report) in workers {
    let status = child.wait().map_err(|e| Error::io("wait", &bin, e))?;
    let parsed: Option<WorkerReport> =
      std::fs::read(&report).ok().and_then(|b| serde_json::from_slice(&b).ok());
    match parsed {
      Some(r) if status.success() => reports.push(r),
      _ => return Err(Error::Index(format!("soak worker {role} failed ({status})"))),
    }
  }

  // End state.
  let mut failures = Vec::new();
  let last = RunningIndex::spawn(index_command(&bin, &paths, false))?.finish(Duration::from_secs(6 * 3600));
  let last_ok = serde_json::from_str::<serde_json::Value>(&last.stdout).ok().and_then(|v| v["ok"].as_bool());
  if !last.success || last_ok != Some(true) {
    failures.push(format!("final reindex failed: {}", last.stderr));
  }
  let st = read_index_status(&paths);
  if st.state != IndexState::Ready {
    failures.push(format!("final status {} ({:?})", st.state.as_str(), st.issues));
  }
  let pages = check_page_set(&paths);
  if !pages.ok() {
    failures.push(format!("page set: {}", pages.summary()));
  }
  for (q, id) in &queries {
    let r = recall_check(&paths, q, id, RetrievalMode::Hybrid);
    if !matches!(r, RecallCheck::Hit(_)) {
      failures.push(format!("final recall of {q:?}: {}", r.label()));
    }
  }
  let mut vault_ids: std::collections::BTreeSet<String> =
    reports.iter().flat_map(|r| r.vault_ids.iter().cloned()).collect();
  vault_ids.extend(super::soak_mixed::config_vault_id(&paths));
  if vault_ids.len() != 1 {
    failures.push(format!("{} distinct vault ids seen: {vault_ids:?}", vault_ids.len()));
  }
  let md = render(soak, vault.ids.len(), &reports, &failures, &pages.summary());
  let json = json!({
    "schema": "llm-wiki-reliability-soak/1",
    "context": machine_context(),
    "options": { "source": opts.source, "pages": vault.ids.len(), "seconds": soak.seconds, "seed": opts.seed, "edits": opts.edits, "mixed": soak.mixed },
    "workers": reports,
    "endState": { "failures": failures, "pages": pages, "vaultIds": vault_ids },
  });
  write_report(&opts.out, &md, &json)
}

/// One worker process: a writer thread (by role) and a reader thread until the plan's time is up.
pub fn run_soak_worker(root: &Path, plan_file: &Path, role: Role, out: &Path) -> Result<()> {
  let plan: SoakPlan =
    serde_json::from_slice(&std::fs::read(plan_file).map_err(|e| Error::io("read", plan_file, e))?)
      .map_err(|e| Error::invalid(format!("{}: {e}", plan_file.display())))?;
  let paths = VaultPaths::for_root(root);
  let deadline = Instant::now() + Duration::from_secs(plan.seconds);
  let report = Arc::new(Mutex::new(WorkerReport { role: Some(role), ..Default::default() }));
  let stop = Arc::new(AtomicBool::new(false));
  let stream = if role == Role::Incremental { 10 } else { 20 };

  let reader = {
    let (paths, plan, report, stop) = (paths.clone(), plan.clone(), report.clone(), stop.clone());
    std::thread::spawn(move || {
      let mut rng = Rng::new(derive_seed(plan.seed, stream + 1, 0));
      let mut i = 0usize;
      while !stop.load(Ordering::SeqCst) {
        let (q, id) = &plan.queries[rng.below(plan.queries.len())];
        let mode = if i.is_multiple_of(2) { RetrievalMode::Lexical } else { RetrievalMode::Hybrid };
        let seen = super::soak_mixed::config_vault_id(&paths);
        let started = Instant::now();
        let r = recall_check(&paths, q, id, mode);
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let mut rep = report.lock().unwrap_or_else(|p| p.into_inner());
        rep.vault_ids.extend(seen);
        rep.recalls += 1;
        rep.recall_ms.push(ms);
        match &r {
          RecallCheck::Hit(_) => rep.recall_hits += 1,
          RecallCheck::Miss => rep.recall_misses += 1,
          RecallCheck::Empty(codes) => {
            let key = if codes.is_empty() { "none".to_string() } else { codes.join(",") };
            *rep.recall_empty.entry(key).or_default() += 1;
          }
          RecallCheck::Error(code) => *rep.recall_errors.entry(code.clone()).or_default() += 1,
        }
        if !matches!(r, RecallCheck::Hit(_)) && rep.recall_samples.len() < 20 {
          rep.recall_samples.push(format!("{} {:?} ({}): {}", mode.as_str(), q, id, r.label()));
        }
        drop(rep);
        i += 1;
        std::thread::sleep(Duration::from_millis(10));
      }
    })
  };

  let mut rng = Rng::new(derive_seed(plan.seed, stream, 0));
  let mut editor = Editor { mutable: plan.mutable.clone(), next_new: 0 };
  let mut run = 0u64;
  let watcher = match role {
    Role::Watcher => Some(super::soak_mixed::start_watcher(&paths, report.clone())?),
    _ => None,
  };
  while Instant::now() < deadline {
    if role == Role::Writer {
      super::soak_mixed::writer_ops(&paths, &plan, &mut rng, run, &report);
    }
    let opts = match role {
      Role::Incremental => {
        let churn = rng.percent(10);
        let edits = editor.apply(&paths, &mut rng, plan.edits, churn, &format!("soak{run}"))?;
        report.lock().unwrap_or_else(|p| p.into_inner()).edits += edits.len() as u64;
        ReindexOptions { components: vec![Component::Lexical, Component::Vectors], ..Default::default() }
      }
      Role::Forced => {
        ReindexOptions { components: vec![Component::Lexical], force: true, ..Default::default() }
      }
      Role::Watcher => {
        // Edits the watcher picks up; every third round an explicit reindex races it.
        let churn = rng.percent(10);
        let edits = editor.apply(&paths, &mut rng, plan.edits, churn, &format!("soakw{run}"))?;
        report.lock().unwrap_or_else(|p| p.into_inner()).edits += edits.len() as u64;
        if !run.is_multiple_of(3) {
          run += 1;
          std::thread::sleep(Duration::from_millis(300 + rng.below(700) as u64));
          continue;
        }
        ReindexOptions { components: vec![Component::Lexical], ..Default::default() }
      }
      Role::Writer => ReindexOptions {
        components: vec![Component::Lexical],
        force: run.is_multiple_of(5),
        ..Default::default()
      },
    };
    let started = Instant::now();
    let r = reindex_vault(&paths, &opts);
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let busy = r.errors.iter().any(|e| e.code == "qmd_index_busy");
    {
      let mut rep = report.lock().unwrap_or_else(|p| p.into_inner());
      rep.vault_ids.extend(r.vault_id.clone());
      rep.reindex_runs += 1;
      rep.reindex_ms.push(ms);
      if r.ok {
        rep.reindex_ok += 1;
      } else if busy {
        rep.reindex_busy += 1;
      } else {
        for e in &r.errors {
          *rep.reindex_errors.entry(e.code.clone()).or_default() += 1;
          if rep.reindex_error_samples.len() < 20 {
            rep.reindex_error_samples.push(format!("{}: {}", e.code, e.message));
          }
        }
      }
    }
    run += 1;
    // Pacing, so the other process gets the lock too (a busy result retries sooner).
    let pause = if busy { rng.below(200) } else { rng.below(500) };
    std::thread::sleep(Duration::from_millis(pause as u64));
  }
  if let Some(mut w) = watcher {
    w.close();
  }
  stop.store(true, Ordering::SeqCst);
  let _ = reader.join();
  let rep = report.lock().unwrap_or_else(|p| p.into_inner()).clone();
  llm_wiki_core::fsutil::write_json(out, &rep)
}

fn render(
  soak: &SoakOptions,
  pages: usize,
  reports: &[WorkerReport],
  failures: &[String],
  pages_summary: &str,
) -> String {
  let opts = &soak.harness;
  let mut md = String::new();
  let _ = writeln!(md, "# Concurrency soak\n");
  let _ = writeln!(
    md,
    "Command: `llm-wiki-retrieval reliability soak --source {} --pages {} --minutes {} --seed {} --edits {}{}`, {}.\n",
    crate::bench::report_path(&opts.source),
    opts.pages,
    soak.seconds as f64 / 60.0,
    opts.seed,
    opts.edits,
    if soak.mixed { " --mixed" } else { "" },
    llm_wiki_core::fsutil::now_iso()
  );
  let _ = writeln!(md, "Vault: {pages} pages; two worker processes for {} s.\n", soak.seconds);
  let _ = writeln!(md, "| worker | reindex runs | ok | busy | errors | reindex p50 / max ms | edits | recalls | hits | misses | empty | recall errors | recall p50 / p99 / max ms |");
  let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  let fmt_map = |m: &BTreeMap<String, u64>| {
    if m.is_empty() {
      "0".to_string()
    } else {
      m.iter().map(|(k, v)| format!("{v} ({k})")).collect::<Vec<_>>().join(", ")
    }
  };
  for r in reports {
    let mut rm = r.reindex_ms.clone();
    rm.sort_by(f64::total_cmp);
    let mut qm = r.recall_ms.clone();
    qm.sort_by(f64::total_cmp);
    let _ = writeln!(
      md,
      "| {} | {} | {} | {} | {} | {:.0} / {:.0} | {} | {} | {} | {} | {} | {} | {:.1} / {:.1} / {:.1} |",
      r.role
        .map(|x| match x {
          Role::Incremental => "incremental + edits",
          Role::Forced => "forced (lexical)",
          Role::Watcher => "watcher + edits + reindex",
          Role::Writer => "reindex (1 in 5 forced) + resolve + feedback",
        })
        .unwrap_or("?"),
      r.reindex_runs,
      r.reindex_ok,
      r.reindex_busy,
      fmt_map(&r.reindex_errors),
      percentile(&rm, 0.5),
      percentile(&rm, 1.0),
      r.edits,
      r.recalls,
      r.recall_hits,
      r.recall_misses,
      fmt_map(&r.recall_empty),
      fmt_map(&r.recall_errors),
      percentile(&qm, 0.5),
      percentile(&qm, 0.99),
      percentile(&qm, 1.0)
    );
  }
  let bad: u64 = reports
    .iter()
    .map(|r| {
      r.recall_empty.values().sum::<u64>()
        + r.recall_errors.values().sum::<u64>()
        + r.reindex_errors.values().sum::<u64>()
    })
    .sum();
  let _ = writeln!(
    md,
    "\n**Result: {bad} bad outcomes (empty answers, recall errors, reindex errors other than busy); end state {}.**\n",
    if failures.is_empty() { "ok".to_string() } else { format!("FAILED: {}", failures.join("; ")) }
  );
  let _ = writeln!(md, "End state: {pages_summary}.\n");
  for r in reports.iter().filter(|r| !r.ops.is_empty()) {
    let _ = writeln!(
      md,
      "Other operations of {:?}: {}.\n",
      r.role,
      serde_json::to_string(&r.ops).unwrap_or_default()
    );
  }
  let ids: std::collections::BTreeSet<&String> = reports.iter().flat_map(|r| r.vault_ids.iter()).collect();
  let _ = writeln!(md, "Distinct vault ids seen by the workers: {}.\n", ids.len());
  for r in reports {
    for s in r.reindex_error_samples.iter().chain(&r.recall_samples).chain(&r.op_samples) {
      let _ = writeln!(md, "- {s}");
    }
  }
  md
}
