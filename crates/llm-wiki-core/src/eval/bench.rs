//! Benchmark harness behind the CLI's `bench` commands.
//!
//! * [`run_set_bench`]: one evaluation set, either a BEIR-style directory (`vault/` of flat
//!   `<docid>.md` pages, `queries.jsonl`, `qrels.tsv`) or the pi fixture (`fixture.json` with its
//!   sibling `vault/`). The vault is copied to a temporary directory, indexed (lexical phase, then
//!   the vectors phase when a dense mode is requested), every query runs in every requested mode,
//!   and per mode a TREC run (`<set>-<mode>.trec`) and a metrics JSON (`<set>-<mode>.json`) are
//!   written, plus one Markdown report (`<set>.md`). For the pi fixture the heuristic baseline
//!   (`baseline-runs.json`) is scored with the same metrics and the release gates are checked
//!   against it (`<set>-gates.json`).
//! * [`run_precision`]: automatic-recall precision with cross-collection negatives (SciFact
//!   queries on the pi vault, pi queries on the SciFact vault) beside the hit rates on positives,
//!   and a per-query top-1 confidence dump for calibration analysis.
//! * [`run_scale`]: a deterministic synthetic vault of N pages: cold index, no-op and edit
//!   reindexes, warm recall latency, peak RSS and disk size.
//!
//! Method notes (also written into every report):
//! * Latency: every query runs once untimed (warm-up: readers, caches and models loaded), then
//!   once timed; p50/p95 are nearest-rank percentiles of the timed pass. The lists of both passes
//!   are compared and any difference is reported as non-determinism.
//! * Peak RSS (Linux): `5` is written to `/proc/self/clear_refs` before a phase, which resets the
//!   high-water mark `VmHWM` to the current RSS; `VmHWM` is read from `/proc/self/status` after the
//!   phase. It therefore includes everything resident in the process at the start (the harness,
//!   loaded models) and file-backed pages of memory-mapped index files touched during the phase.
//! * Index size: bytes of the regular files under `<meta>/retrieval`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::datasets::{
  load_baseline_runs, load_beir_dir, load_pi_fixture, AutoExpectation, BeirSet, PiFixture, PiQuery, PiRuns,
  PiSplit,
};
use super::metrics::{
  pi_metrics_by_category, pi_query_scores, pi_report, query_scores, round6, PiMetrics, PiSliceReport,
  QueryScores, Slice, Summary,
};
use super::synth::{generate_vault, synth_queries, SynthOptions};
use super::trec::{write_run, RunLine};
use crate::error::{Error, Result};
use crate::fsutil::{atomic_write, dir_size, now_iso};
use crate::models::{self, Embedder};
use crate::retrieve::confidence::AUTOMATIC_FLOOR;
use crate::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RecallResult, RetrievalMode};
use crate::store::generation::Generation;
use crate::store::layout::{StoreLayout, ENGINE_NAME, ENGINE_VERSION, INDEX_FORMAT_VERSION};
use crate::store::manifest::Manifest;
use crate::store::{reindex_vault, Component, Progress, ProgressSink, ReindexOptions, ReindexResult, Scope};
use crate::vault::VaultPaths;

/// Schema tag of every JSON file the harness writes.
pub const SCHEMA: &str = "llm-wiki-bench/1";

/// Depth of the ranked lists (TREC runs and metrics).
pub const DEFAULT_DEPTH: usize = 100;

/// How peak RSS is measured (written into every report).
pub const PEAK_RSS_METHOD: &str = "Linux: before each phase `5` is written to /proc/self/clear_refs (resets VmHWM \
  to the current RSS); after the phase VmHWM is read from /proc/self/status. Includes memory already resident \
  at the phase start (harness, loaded models) and touched file-backed pages of memory-mapped index files.";

/// How latency is measured (written into every report).
pub const LATENCY_METHOD: &str =
  "Each query runs once untimed (warm-up), then once timed in the same process; \
  p50/p95 are nearest-rank percentiles of the timed pass, wall clock around recall_wiki.";

/// Every retrieval mode, in report order.
pub const ALL_MODES: [RetrievalMode; 4] =
  [RetrievalMode::Lexical, RetrievalMode::Hybrid, RetrievalMode::Adaptive, RetrievalMode::Quality];

/// Progress/log sink of a benchmark.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// Log lines to stderr, prefixed with `[bench]`.
pub fn stderr_log() -> Log {
  Arc::new(|m: &str| eprintln!("[bench] {m}"))
}

/// Discard log lines.
pub fn quiet_log() -> Log {
  Arc::new(|_: &str| {})
}

/// Parse a comma-separated mode list (`all` = every mode); duplicates are dropped, order kept.
pub fn parse_modes(spec: &str) -> Result<Vec<RetrievalMode>> {
  let mut out: Vec<RetrievalMode> = Vec::new();
  for part in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
    let modes = if part == "all" { ALL_MODES.to_vec() } else { vec![RetrievalMode::parse(part)?] };
    for m in modes {
      if !out.contains(&m) {
        out.push(m);
      }
    }
  }
  if out.is_empty() {
    return Err(Error::invalid("--modes names no retrieval mode"));
  }
  Ok(out)
}

/// Settings shared by every benchmark command.
#[derive(Clone)]
pub struct BenchCommon {
  pub modes: Vec<RetrievalMode>,
  /// Output directory (created when missing).
  pub out: PathBuf,
  /// Keep the temporary vaults (their paths are logged).
  pub keep_temp: bool,
  /// Where temporary vaults go (default: the system temp directory).
  pub temp_root: Option<PathBuf>,
  /// Quality mode rescoring by sentence windows (the opt-in ablation).
  pub sentence_rescore: bool,
  pub log: Log,
}

impl BenchCommon {
  /// Every mode, output to `out`, progress on stderr.
  pub fn new(out: impl Into<PathBuf>) -> Self {
    BenchCommon {
      modes: ALL_MODES.to_vec(),
      out: out.into(),
      keep_temp: false,
      temp_root: None,
      sentence_rescore: false,
      log: stderr_log(),
    }
  }

  /// Recall options of a benchmark pass.
  fn recall_options(&self, policy: RecallPolicy, mode: RetrievalMode) -> RecallOptions {
    RecallOptions { sentence_rescore: self.sentence_rescore, ..RecallOptions::new(policy, mode) }
  }

  fn say(&self, msg: impl AsRef<str>) {
    (self.log)(msg.as_ref())
  }

  fn needs_vectors(&self) -> bool {
    self.modes.iter().any(|m| *m != RetrievalMode::Lexical)
  }

  fn temp(&self, label: &str) -> Result<TempDir> {
    let root = match &self.temp_root {
      Some(r) => std::path::absolute(r).map_err(|e| Error::io("resolve", r, e))?,
      None => std::env::temp_dir(),
    };
    let t = TempDir::create(&root, label, self.keep_temp)?;
    if self.keep_temp {
      self.say(format!("temporary vault kept at {}", t.path().display()));
    }
    Ok(t)
  }
}

/// What a benchmark command wrote.
#[derive(Debug, Clone, Default)]
pub struct BenchOutput {
  pub files: Vec<PathBuf>,
  /// The Markdown report (also written to a file).
  pub markdown: String,
}

// ---------------------------------------------------------------------------------------------
// Small utilities: temp dirs, copying, files, machine context, RSS, latency
// ---------------------------------------------------------------------------------------------

/// A directory removed on drop (unless kept).
pub struct TempDir {
  path: PathBuf,
  keep: bool,
}

impl TempDir {
  /// Create `<root>/llm-wiki-bench-<label>-<uuid>`.
  pub fn create(root: &Path, label: &str, keep: bool) -> Result<TempDir> {
    let path = root.join(format!("llm-wiki-bench-{label}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&path).map_err(|e| Error::io("create directory", &path, e))?;
    Ok(TempDir { path, keep })
  }

  pub fn path(&self) -> &Path {
    &self.path
  }
}

impl Drop for TempDir {
  fn drop(&mut self) {
    if !self.keep {
      let _ = std::fs::remove_dir_all(&self.path);
    }
  }
}

fn ms_since(t: Instant) -> f64 {
  t.elapsed().as_secs_f64() * 1000.0
}

/// Round to 3 decimals (milliseconds → microsecond resolution in reports).
fn r3(x: f64) -> f64 {
  (x * 1000.0).round() / 1000.0
}

fn create_dir(p: &Path) -> Result<()> {
  std::fs::create_dir_all(p).map_err(|e| Error::io("create directory", p, e))
}

fn write_json_file(path: &Path, value: &Value) -> Result<()> {
  if let Some(dir) = path.parent() {
    create_dir(dir)?;
  }
  let mut bytes = serde_json::to_vec_pretty(value)
    .map_err(|e| Error::Index(format!("serialize {}: {e}", path.display())))?;
  bytes.push(b'\n');
  atomic_write(path, &bytes)
}

fn write_text_file(path: &Path, text: &str) -> Result<()> {
  if let Some(dir) = path.parent() {
    create_dir(dir)?;
  }
  atomic_write(path, text.as_bytes())
}

fn to_value<T: Serialize>(v: &T) -> Value {
  serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Copy the flat `<dir>/vault/*.md` pages of a BEIR-style set into `<root>/.llm-wiki/wiki/` and
/// write `<root>/.llm-wiki/config.json` `{"name":"bench"}`. Returns the vault and the page count.
pub fn prepare_beir_vault(beir_dir: &Path, root: &Path) -> Result<(VaultPaths, usize)> {
  let paths = VaultPaths::new_layout(root);
  create_dir(&paths.wiki)?;
  write_text_file(&paths.config_file(), "{\"name\":\"bench\"}")?;
  let src = beir_dir.join("vault");
  let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(&src)
    .map_err(|e| Error::io("read directory", &src, e))?
    .filter_map(|e| e.ok())
    .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
    .map(|e| e.file_name())
    .filter(|n| Path::new(n).extension().is_some_and(|x| x == "md"))
    .collect();
  names.sort();
  for n in &names {
    let (from, to) = (src.join(n), paths.wiki.join(n));
    std::fs::copy(&from, &to).map_err(|e| Error::io("copy", &from, e))?;
  }
  if names.is_empty() {
    return Err(Error::invalid(format!("{} holds no .md pages", src.display())));
  }
  Ok((paths, names.len()))
}

/// Copy a vault directory (with its `.llm-wiki/`) to `root`, leaving out any generated
/// `.llm-wiki/meta/` so the index is built cold. Returns the vault and its `.md` page count.
pub fn prepare_pi_vault(src_vault: &Path, root: &Path) -> Result<(VaultPaths, usize)> {
  let meta = Path::new(".llm-wiki").join("meta");
  let mut pages = 0;
  let walker = walkdir::WalkDir::new(src_vault)
    .sort_by_file_name()
    .into_iter()
    .filter_entry(|e| e.path().strip_prefix(src_vault).map_or(true, |rel| rel != meta));
  for entry in walker {
    let entry = entry.map_err(|e| Error::invalid(format!("walk {}: {e}", src_vault.display())))?;
    let rel = entry.path().strip_prefix(src_vault).unwrap_or(entry.path());
    let dst = root.join(rel);
    if entry.file_type().is_dir() {
      create_dir(&dst)?;
    } else if entry.file_type().is_file() {
      std::fs::copy(entry.path(), &dst).map_err(|e| Error::io("copy", entry.path(), e))?;
      if rel.extension().is_some_and(|x| x == "md") {
        pages += 1;
      }
    }
  }
  let paths = VaultPaths::for_root(root);
  if !paths.config_file().is_file() {
    return Err(Error::invalid(format!("{} has no .llm-wiki/config.json", src_vault.display())));
  }
  Ok((paths, pages))
}

fn read_opt(path: &str) -> Option<String> {
  std::fs::read_to_string(path).ok()
}

fn proc_status_kb(field: &str) -> Option<u64> {
  let text = read_opt("/proc/self/status")?;
  text.lines().find_map(|l| {
    let rest = l.strip_prefix(field)?.strip_prefix(':')?;
    rest.split_whitespace().next()?.parse::<u64>().ok().map(|kb| kb * 1024)
  })
}

/// Reset the process's RSS high-water mark (Linux); false where unsupported.
pub fn reset_peak_rss() -> bool {
  std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's RSS high-water mark in bytes (`VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
  proc_status_kb("VmHWM")
}

/// The process's current RSS in bytes (`VmRSS`), if known.
pub fn current_rss_bytes() -> Option<u64> {
  proc_status_kb("VmRSS")
}

fn shell_quote(arg: &str) -> String {
  let plain = !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
  if plain {
    arg.to_string()
  } else {
    format!("'{}'", arg.replace('\'', "'\\''"))
  }
}

/// Machine, engine and model context of a run, plus the exact command line.
pub fn machine_context() -> Value {
  let cpuinfo = read_opt("/proc/cpuinfo").unwrap_or_default();
  let field = |name: &str| {
    cpuinfo.lines().find_map(|l| {
      let (k, v) = l.split_once(':')?;
      (k.trim() == name).then(|| v.trim().to_string())
    })
  };
  let cpu_model = field("model name").or_else(|| field("Model")).or_else(|| field("Hardware"));
  let logical =
    cpuinfo.lines().filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor")).count();
  let physical: HashSet<(String, String)> = {
    let mut set = HashSet::new();
    let (mut phys, mut core) = (String::new(), String::new());
    for l in cpuinfo.lines() {
      if let Some((k, v)) = l.split_once(':') {
        match k.trim() {
          "physical id" => phys = v.trim().to_string(),
          "core id" => core = v.trim().to_string(),
          _ => {}
        }
      } else if l.trim().is_empty() && !core.is_empty() {
        set.insert((phys.clone(), core.clone()));
      }
    }
    if !core.is_empty() {
      set.insert((phys, core));
    }
    set
  };
  let ram = read_opt("/proc/meminfo").and_then(|m| {
    m.lines().find_map(|l| l.strip_prefix("MemTotal:")?.split_whitespace().next()?.parse::<u64>().ok())
  });
  let os = read_opt("/etc/os-release")
    .and_then(|t| {
      t.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
    })
    .unwrap_or_else(|| std::env::consts::OS.to_string());
  let kernel = read_opt("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string());
  let cfg = models::effective_config();
  let embed_dir = models::resolve_embed_dir(&cfg);
  let runtime = if cfg.disabled {
    None
  } else {
    models::runtime::locate(cfg.runtime_lib.as_deref(), &cfg.runtime_candidates, &cfg.model_roots).ok()
  };
  let available = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
  let args: Vec<String> = std::env::args().collect();
  let env: Map<String, Value> = [
    "LLM_WIKI_MODELS_DIR",
    "LLM_WIKI_THREADS",
    "LLM_WIKI_EMBED_MODEL",
    "LLM_WIKI_RERANK_MODEL",
    "LLM_WIKI_DENSE",
    "ORT_DYLIB_PATH",
  ]
  .iter()
  .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), Value::String(v))))
  .collect();
  json!({
    "cpuModel": cpu_model,
    "physicalCores": if physical.is_empty() { Value::Null } else { json!(physical.len()) },
    "logicalCpus": logical,
    "availableParallelism": available,
    "ramBytes": ram.map(|kb| kb * 1024),
    "os": os,
    "kernel": kernel,
    "arch": std::env::consts::ARCH,
    "engine": ENGINE_NAME,
    "engineVersion": ENGINE_VERSION,
    "indexFormatVersion": INDEX_FORMAT_VERSION,
    "buildProfile": if cfg!(debug_assertions) { "debug" } else { "release" },
    "models": {
      "embed": models::embed_model_id(&cfg),
      "embedDir": embed_dir.map(|d| d.display().to_string()),
      "rerank": models::rerank_model_id(&cfg),
      "runtimeLibrary": runtime.map(|p| p.display().to_string()),
      "denseDisabled": cfg.disabled,
    },
    "threads": {
      "inference": cfg.threads,
      "reindex": available.min(4),
    },
    "env": env,
    "commandLine": args,
    "command": args.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" "),
    "cwd": std::env::current_dir().ok().map(|d| d.display().to_string()),
    "startedAt": now_iso(),
    "loadAverageAtStart": read_opt("/proc/loadavg").map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
    "peakRssMethod": PEAK_RSS_METHOD,
    "latencyMethod": LATENCY_METHOD,
  })
}

fn context_markdown(ctx: &Value) -> String {
  let s = |k: &str| ctx.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
  let ram = ctx.get("ramBytes").and_then(Value::as_u64).map_or("?".into(), |b| format!("{:.1} GiB", gib(b)));
  let models = &ctx["models"];
  format!(
    "- Command: `{}`\n- Machine: {} · {} logical CPUs · {} RAM · {} (kernel {}, {}) · load average at start {}\n- Engine: {} {} ({} build) · \
     embedder {} · cross-encoder {} · inference threads {}\n- Started: {}\n",
    s("command"),
    s("cpuModel"),
    ctx["logicalCpus"],
    ram,
    s("os"),
    s("kernel"),
    s("arch"),
    s("loadAverageAtStart"),
    s("engine"),
    s("engineVersion"),
    s("buildProfile"),
    models["embed"].as_str().unwrap_or("none"),
    models["rerank"].as_str().unwrap_or("none"),
    ctx["threads"]["inference"],
    s("startedAt"),
  )
}

fn gib(b: u64) -> f64 {
  b as f64 / (1024.0 * 1024.0 * 1024.0)
}

fn mib(b: u64) -> f64 {
  b as f64 / (1024.0 * 1024.0)
}

fn fmt_mib(b: Option<u64>) -> String {
  b.map_or("n/a".into(), |b| format!("{:.1}", mib(b)))
}

/// `peak (start)` in MiB.
fn fmt_peak(peak: Option<u64>, start: Option<u64>) -> String {
  format!("{} ({})", fmt_mib(peak), fmt_mib(start))
}

/// Latency summary of a set of samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
  pub samples: usize,
  pub p50_ms: f64,
  pub p95_ms: f64,
  pub max_ms: f64,
  pub mean_ms: f64,
}

/// Nearest-rank percentiles (p50 = the ⌈0.5·n⌉-th smallest sample).
pub fn latency(samples: &[f64]) -> Latency {
  if samples.is_empty() {
    return Latency::default();
  }
  let mut s = samples.to_vec();
  s.sort_by(|a, b| a.total_cmp(b));
  let n = s.len();
  let pct = |p: f64| nearest_rank(&s, p);
  Latency {
    samples: n,
    p50_ms: r3(pct(0.50)),
    p95_ms: r3(pct(0.95)),
    max_ms: r3(s[n - 1]),
    mean_ms: r3(s.iter().sum::<f64>() / n as f64),
  }
}

/// Nearest-rank percentile `p` ∈ (0, 1] of ascending, non-empty `sorted`.
fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
  let n = sorted.len();
  sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1]
}

/// Distribution of top-1 scores of one query group: nearest-rank percentiles and the share at or
/// above the automatic floor.
fn score_distribution(values: &[f64], floor: f64) -> Value {
  if values.is_empty() {
    return json!({"queries": 0});
  }
  let mut s = values.to_vec();
  s.sort_by(|a, b| a.total_cmp(b));
  let at_floor = s.iter().filter(|v| **v >= floor).count();
  json!({
    "queries": s.len(),
    "p5": r3(nearest_rank(&s, 0.05)),
    "p25": r3(nearest_rank(&s, 0.25)),
    "p50": r3(nearest_rank(&s, 0.50)),
    "p75": r3(nearest_rank(&s, 0.75)),
    "p95": r3(nearest_rank(&s, 0.95)),
    "max": r3(s[s.len() - 1]),
    "atOrAboveFloor": at_floor,
  })
}

/// A progress sink that logs at most every 20 s (plus each stage's first event).
fn throttled_progress(log: Log, label: String) -> ProgressSink {
  let last: Mutex<(Option<Instant>, &'static str)> = Mutex::new((None, ""));
  Arc::new(move |p: Progress| {
    let mut g = last.lock().unwrap_or_else(|e| e.into_inner());
    let due = g.0.is_none_or(|t| t.elapsed() >= Duration::from_secs(20)) || g.1 != p.stage;
    if due {
      *g = (Some(Instant::now()), p.stage);
      let count = match (p.current, p.total) {
        (Some(c), Some(t)) => format!(" {c}/{t}"),
        _ => String::new(),
      };
      log(&format!("{label}: {} {}{count}", p.stage, p.message));
    }
  })
}

// ---------------------------------------------------------------------------------------------
// Index phases
// ---------------------------------------------------------------------------------------------

/// Wall time and peak RSS of one phase.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseCost {
  pub ms: f64,
  pub peak_rss_bytes: Option<u64>,
  /// RSS right after the high-water mark was reset (what was already resident).
  pub start_rss_bytes: Option<u64>,
}

/// The vectors phase.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorCost {
  /// Embedding model load (timed separately, before the phase).
  pub model_load_ms: f64,
  pub model: String,
  /// Wall time and peak RSS of the phase (same JSON keys as the lexical phase).
  #[serde(flatten)]
  pub cost: PhaseCost,
  pub generated: u32,
  pub skipped: u32,
  pub chunks_per_sec: f64,
}

/// Bytes of the store directory.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskUsage {
  /// Everything under `<meta>/retrieval`.
  pub total_bytes: u64,
  pub lexical_bytes: u64,
  pub vectors_bytes: u64,
  /// Manifests, state, pointer, lock.
  pub other_bytes: u64,
}

/// A reindex with nothing changed.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NoopCost {
  pub lexical_ms: f64,
  pub vectors_ms: Option<f64>,
  /// Pages indexed + updated + removed (expected 0).
  pub pages_changed: u32,
  pub vectors_generated: Option<u32>,
}

/// A reindex after editing pages (body text appended, mtime bumped).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EditCost {
  pub pages_edited: usize,
  /// The first edited page.
  pub page: String,
  pub lexical_ms: f64,
  pub vectors_ms: Option<f64>,
  pub documents_updated: u32,
  pub chunks_added: u32,
  pub chunks_removed: u32,
  /// Chunk keys present after the edit that were absent before.
  pub new_chunks: usize,
  pub vectors_generated: Option<u32>,
  /// vectors.generated == new chunks (None without a vectors phase).
  pub generated_equals_new_chunks: Option<bool>,
}

/// Index costs of one vault.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexReport {
  pub pages: u32,
  pub chunks: u32,
  /// Cold build, lexical component only.
  pub lexical: PhaseCost,
  /// Vectors component on the fresh index (None when no dense mode was requested or no model).
  pub vectors: Option<VectorCost>,
  pub disk: DiskUsage,
  pub noop: Option<NoopCost>,
  pub edit: Option<EditCost>,
  /// Warnings of the reindexes (code: message), de-duplicated.
  pub warnings: Vec<String>,
}

struct Phase {
  result: ReindexResult,
  cost: PhaseCost,
}

fn reindex_phase(
  paths: &VaultPaths,
  components: &[Component],
  progress: Option<ProgressSink>,
) -> Result<Phase> {
  reset_peak_rss();
  let start_rss = current_rss_bytes();
  let started = Instant::now();
  let opts =
    ReindexOptions { scope: Scope::Changed, components: components.to_vec(), progress, ..Default::default() };
  let result = reindex_vault(paths, &opts);
  let ms = ms_since(started);
  let peak = peak_rss_bytes();
  if !result.ok {
    let msg: Vec<String> = result.errors.iter().map(|e| format!("{}: {}", e.code, e.message)).collect();
    return Err(Error::Index(format!(
      "reindex ({}) of {} failed: {}",
      components.iter().map(|c| c.as_str()).collect::<Vec<_>>().join("+"),
      paths.root.display(),
      if msg.is_empty() { "cancelled".to_string() } else { msg.join("; ") }
    )));
  }
  Ok(Phase { result, cost: PhaseCost { ms: r3(ms), peak_rss_bytes: peak, start_rss_bytes: start_rss } })
}

fn note_warnings(report: &mut IndexReport, r: &ReindexResult) {
  for w in &r.warnings {
    let line = format!("{}: {}", w.code, w.message);
    if !report.warnings.contains(&line) && report.warnings.len() < 50 {
      report.warnings.push(line);
    }
  }
}

fn disk_usage(paths: &VaultPaths) -> DiskUsage {
  let layout = StoreLayout::new(paths.retrieval());
  let total = dir_size(&layout.dir);
  let (lexical, vectors) =
    layout.current().map_or((0, 0), |cur| (dir_size(&cur.lexical_dir()), dir_size(&cur.vectors_dir())));
  DiskUsage {
    total_bytes: total,
    lexical_bytes: lexical,
    vectors_bytes: vectors,
    other_bytes: total.saturating_sub(lexical + vectors),
  }
}

/// Drop this process's cached reader of a vault (its memory maps and caches).
fn release_reader(paths: &VaultPaths) {
  crate::retrieve::engine::evict(&paths.retrieval());
}

fn current_manifest(paths: &VaultPaths) -> Result<Arc<Manifest>> {
  Ok(Generation::open_live(&StoreLayout::new(paths.retrieval()))?.manifest)
}

/// A vault with its index and the embedder kept loaded for the whole run (a held reference
/// keeps the idle reaper from releasing it between phases).
struct Indexed {
  paths: VaultPaths,
  report: IndexReport,
  embedder: Option<Arc<Embedder>>,
}

fn build_index(paths: &VaultPaths, with_vectors: bool, label: &str, common: &BenchCommon) -> Result<Indexed> {
  let mut ix = build_lexical(paths, label, common)?;
  if with_vectors {
    add_vectors(&mut ix, label, common)?;
  }
  Ok(ix)
}

/// Cold build of the lexical component.
fn build_lexical(paths: &VaultPaths, label: &str, common: &BenchCommon) -> Result<Indexed> {
  let mut report = IndexReport::default();
  common.say(format!("{label}: cold index, lexical phase"));
  let lex = reindex_phase(
    paths,
    &[Component::Lexical],
    Some(throttled_progress(common.log.clone(), format!("{label} lexical"))),
  )?;
  note_warnings(&mut report, &lex.result);
  report.pages = lex.result.status.total_documents;
  report.chunks = lex.result.chunks.total;
  report.lexical = lex.cost;
  common.say(format!(
    "{label}: lexical {:.0} ms, {} pages, {} chunks, peak RSS {} MiB",
    report.lexical.ms,
    report.pages,
    report.chunks,
    fmt_mib(report.lexical.peak_rss_bytes)
  ));
  report.disk = disk_usage(paths);
  Ok(Indexed { paths: paths.clone(), report, embedder: None })
}

/// Load the embedder (timed) and run the vectors component.
fn add_vectors(ix: &mut Indexed, label: &str, common: &BenchCommon) -> Result<()> {
  let started = Instant::now();
  let e = match models::embedder() {
    Err(e) => {
      common.say(format!("{label}: no embedder ({e}); dense modes will fall back to lexical"));
      ix.report.warnings.push(format!("embedder_unavailable: {e}"));
      return Ok(());
    }
    Ok(e) => e,
  };
  let load_ms = ms_since(started);
  let model = e.id().to_string();
  ix.embedder = Some(e);
  common.say(format!("{label}: embedder {model} loaded in {load_ms:.0} ms; vectors phase"));
  let vec = reindex_phase(
    &ix.paths,
    &[Component::Vectors],
    Some(throttled_progress(common.log.clone(), format!("{label} vectors"))),
  )?;
  note_warnings(&mut ix.report, &vec.result);
  let generated = vec.result.vectors.generated;
  let secs = vec.cost.ms / 1000.0;
  let per_sec = if secs > 0.0 { generated as f64 / secs } else { 0.0 };
  ix.report.vectors = Some(VectorCost {
    model_load_ms: r3(load_ms),
    model,
    cost: vec.cost.clone(),
    generated,
    skipped: vec.result.vectors.skipped,
    chunks_per_sec: r3(per_sec),
  });
  common.say(format!(
    "{label}: vectors {:.0} ms, {generated} chunks embedded ({per_sec:.1} chunks/s), peak RSS {} MiB",
    vec.cost.ms,
    fmt_mib(vec.cost.peak_rss_bytes)
  ));
  ix.report.disk = disk_usage(&ix.paths);
  Ok(())
}

/// Run every requested mode: lexical first (before any model is loaded, so its query-phase RSS
/// is that of a lexical-only process), then the vectors phase when a dense mode is requested,
/// then the dense modes. Returned in the requested order.
fn run_modes(
  ix: &mut Indexed,
  queries: &[(String, String)],
  depth: usize,
  with_auto: bool,
  label: &str,
  common: &BenchCommon,
) -> Result<Vec<ModeRun>> {
  let mut runs: Vec<ModeRun> = Vec::new();
  if common.modes.contains(&RetrievalMode::Lexical) {
    runs.push(run_queries(&ix.paths, queries, RetrievalMode::Lexical, depth, with_auto, common)?);
  }
  if common.needs_vectors() {
    add_vectors(ix, label, common)?;
  }
  for &mode in common.modes.iter().filter(|m| **m != RetrievalMode::Lexical) {
    runs.push(run_queries(&ix.paths, queries, mode, depth, with_auto, common)?);
  }
  runs.sort_by_key(|r| common.modes.iter().position(|m| *m == r.mode));
  Ok(runs)
}

fn noop_reindex(ix: &mut Indexed, label: &str, common: &BenchCommon) -> Result<()> {
  let lex = reindex_phase(&ix.paths, &[Component::Lexical], None)?;
  note_warnings(&mut ix.report, &lex.result);
  let d = &lex.result.documents;
  let mut cost = NoopCost {
    lexical_ms: lex.cost.ms,
    pages_changed: d.indexed + d.updated + d.removed,
    ..Default::default()
  };
  if ix.embedder.is_some() {
    let vec = reindex_phase(&ix.paths, &[Component::Vectors], None)?;
    cost.vectors_ms = Some(vec.cost.ms);
    cost.vectors_generated = Some(vec.result.vectors.generated);
  }
  common.say(format!(
    "{label}: no-op reindex lexical {:.1} ms{}, {} pages changed",
    cost.lexical_ms,
    cost.vectors_ms.map(|v| format!(", vectors {v:.1} ms")).unwrap_or_default(),
    cost.pages_changed
  ));
  ix.report.noop = Some(cost);
  Ok(())
}

/// Page ids to edit: `count` ids spread evenly over the sorted manifest (the first for 1).
fn pick_pages(manifest: &Manifest, count: usize) -> Vec<String> {
  let ids: Vec<&String> = manifest.entries.keys().collect();
  if ids.is_empty() || count == 0 {
    return Vec::new();
  }
  let count = count.min(ids.len());
  let step = ids.len() / count;
  (0..count).map(|i| ids[i * step].clone()).collect()
}

/// Append a unique sentence to each page's body and push its mtime 5 s forward.
fn edit_pages(paths: &VaultPaths, manifest: &Manifest, ids: &[String], round: usize) -> Result<()> {
  for (i, id) in ids.iter().enumerate() {
    let entry = manifest.entries.get(id).ok_or_else(|| Error::Index(format!("page {id} not in manifest")))?;
    let file = paths.wiki.join(&entry.rel_path);
    let mut text = std::fs::read_to_string(&file).map_err(|e| Error::io("read", &file, e))?;
    if !text.ends_with('\n') {
      text.push('\n');
    }
    let _ = writeln!(
      text,
      "\nBenchmark edit {round}.{i}: this sentence was appended to page {id} to measure an incremental reindex."
    );
    let before =
      std::fs::metadata(&file).and_then(|m| m.modified()).map_err(|e| Error::io("stat", &file, e))?;
    std::fs::write(&file, text.as_bytes()).map_err(|e| Error::io("write", &file, e))?;
    let later = before.max(std::time::SystemTime::now()) + Duration::from_secs(5);
    std::fs::File::options()
      .write(true)
      .open(&file)
      .and_then(|f| f.set_modified(later))
      .map_err(|e| Error::io("set mtime", &file, e))?;
  }
  Ok(())
}

/// Edit `count` pages and reindex (lexical, then vectors when loaded).
fn edit_reindex(paths: &VaultPaths, count: usize, round: usize, with_vectors: bool) -> Result<EditCost> {
  let before = current_manifest(paths)?;
  let ids = pick_pages(&before, count);
  let keys_before = before.chunk_keys();
  edit_pages(paths, &before, &ids, round)?;
  drop(before);
  let lex = reindex_phase(paths, &[Component::Lexical], None)?;
  let after = current_manifest(paths)?;
  let new_chunks = after.chunk_keys().difference(&keys_before).count();
  let mut cost = EditCost {
    pages_edited: ids.len(),
    page: ids.first().cloned().unwrap_or_default(),
    lexical_ms: lex.cost.ms,
    documents_updated: lex.result.documents.updated,
    chunks_added: lex.result.chunks.added,
    chunks_removed: lex.result.chunks.removed,
    new_chunks,
    ..Default::default()
  };
  if with_vectors {
    let vec = reindex_phase(paths, &[Component::Vectors], None)?;
    cost.vectors_ms = Some(vec.cost.ms);
    cost.vectors_generated = Some(vec.result.vectors.generated);
    cost.generated_equals_new_chunks = Some(vec.result.vectors.generated as usize == new_chunks);
  }
  Ok(cost)
}

fn edit_line(label: &str, what: &str, c: &EditCost) -> String {
  format!(
    "{label}: {what} ({} page(s), first {}): lexical {:.1} ms ({} updated, chunks +{} −{}, {} new chunk keys){}",
    c.pages_edited,
    c.page,
    c.lexical_ms,
    c.documents_updated,
    c.chunks_added,
    c.chunks_removed,
    c.new_chunks,
    match (c.vectors_ms, c.vectors_generated) {
      (Some(ms), Some(g)) => format!(
        "; vectors {ms:.1} ms, vectors.generated = {g} ({} new chunks: {})",
        c.new_chunks,
        if g as usize == c.new_chunks { "equal" } else { "MISMATCH" }
      ),
      _ => String::new(),
    }
  )
}

// ---------------------------------------------------------------------------------------------
// Query runs
// ---------------------------------------------------------------------------------------------

/// Policy of the ranked lists: active vault only, no floor, `depth` results.
pub fn ranked_policy(depth: usize) -> RecallPolicy {
  RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: depth, max_results: depth }
}

/// The top of a list, for calibration.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopHit {
  pub id: String,
  /// Rounded to 6 decimals (as are `score` and `multiplier`).
  pub confidence: f64,
  pub score: f64,
  pub multiplier: f64,
  /// The unrounded final score (what the floor is compared with).
  #[serde(skip)]
  pub raw_score: f64,
}

/// One recall call.
#[derive(Debug, Clone)]
struct Answer {
  ids: Vec<String>,
  /// The first 10 results.
  top: Vec<TopHit>,
  used: RetrievalMode,
  ms: f64,
  diagnostics: Vec<String>,
  trec: Vec<RunLine>,
}

/// TREC lines of one query: scores are the fusion keys forced strictly decreasing, so scorers
/// that sort by score see exactly the rank order.
fn trec_lines(qid: &str, results: &[RecallResult]) -> Vec<RunLine> {
  let mut prev = f64::INFINITY;
  results
    .iter()
    .enumerate()
    .map(|(i, r)| {
      let score = r.fusion_score.min(prev - 1e-6);
      prev = score;
      RunLine::new(qid, r.id.clone(), u32::try_from(i + 1).unwrap_or(u32::MAX), score)
    })
    .collect()
}

fn ask(paths: &VaultPaths, qid: &str, text: &str, opts: &RecallOptions) -> Result<Answer> {
  let started = Instant::now();
  let r = recall_wiki(paths, text, opts)?;
  let ms = ms_since(started);
  Ok(Answer {
    ids: r.results.iter().map(|x| x.id.clone()).collect(),
    top: r
      .results
      .iter()
      .take(10)
      .map(|x| TopHit {
        id: x.id.clone(),
        confidence: round6(x.confidence),
        score: round6(x.score),
        multiplier: round6(x.multiplier),
        raw_score: x.score,
      })
      .collect(),
    used: r.mode,
    ms,
    diagnostics: r.diagnostics.iter().map(|d| d.code.clone()).collect(),
    trec: trec_lines(qid, &r.results),
  })
}

/// Every query of a set in one mode: ranked lists (and automatic lists when asked).
struct ModeRun {
  mode: RetrievalMode,
  ranked: HashMap<String, Answer>,
  auto: HashMap<String, Answer>,
  /// Queries whose warm-up and timed lists differ.
  nondeterministic: Vec<String>,
  peak_rss: Option<u64>,
  start_rss: Option<u64>,
  wall_ms: f64,
}

impl ModeRun {
  fn ids(answers: &HashMap<String, Answer>) -> HashMap<String, Vec<String>> {
    answers.iter().map(|(q, a)| (q.clone(), a.ids.clone())).collect()
  }

  fn ranked_ids(&self) -> HashMap<String, Vec<String>> {
    Self::ids(&self.ranked)
  }

  fn auto_ids(&self) -> HashMap<String, Vec<String>> {
    Self::ids(&self.auto)
  }

  fn used(answers: &HashMap<String, Answer>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for a in answers.values() {
      *m.entry(a.used.as_str().to_string()).or_insert(0) += 1;
    }
    m
  }

  fn latency_of(answers: &HashMap<String, Answer>) -> Latency {
    latency(&answers.values().map(|a| a.ms).collect::<Vec<_>>())
  }

  fn diagnostics(&self) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for a in self.ranked.values().chain(self.auto.values()) {
      for d in &a.diagnostics {
        *m.entry(d.clone()).or_insert(0) += 1;
      }
    }
    m
  }

  fn result_counts(&self) -> Value {
    let n: Vec<usize> = self.ranked.values().map(|a| a.ids.len()).collect();
    let mean = if n.is_empty() { 0.0 } else { n.iter().sum::<usize>() as f64 / n.len() as f64 };
    json!({
      "mean": r3(mean),
      "min": n.iter().min().copied().unwrap_or(0),
      "max": n.iter().max().copied().unwrap_or(0),
    })
  }

  fn trec(&self, order: &[(String, String)]) -> Vec<RunLine> {
    order.iter().filter_map(|(q, _)| self.ranked.get(q)).flat_map(|a| a.trec.iter().cloned()).collect()
  }

  fn cost_json(&self) -> Value {
    json!({
      "ranked": Self::latency_of(&self.ranked),
      "automatic": if self.auto.is_empty() { Value::Null } else { to_value(&Self::latency_of(&self.auto)) },
      "queryPhasePeakRssBytes": self.peak_rss,
      "queryPhaseStartRssBytes": self.start_rss,
      "queryPhaseWallMs": r3(self.wall_ms),
    })
  }

  fn modes_used_json(&self) -> Value {
    json!({
      "ranked": Self::used(&self.ranked),
      "automatic": if self.auto.is_empty() { Value::Null } else { to_value(&Self::used(&self.auto)) },
    })
  }
}

fn fmt_used(m: &BTreeMap<String, usize>) -> String {
  m.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
}

fn run_queries(
  paths: &VaultPaths,
  queries: &[(String, String)],
  mode: RetrievalMode,
  depth: usize,
  with_auto: bool,
  common: &BenchCommon,
) -> Result<ModeRun> {
  let ranked_opts = common.recall_options(ranked_policy(depth), mode);
  let auto_opts = common.recall_options(RecallPolicy::automatic(), mode);
  let started = Instant::now();
  reset_peak_rss();
  let start_rss = current_rss_bytes();
  common.say(format!("{}: warm-up pass over {} queries", mode.as_str(), queries.len()));
  let mut warm: HashMap<&str, (Vec<String>, Vec<String>)> = HashMap::new();
  for (qid, text) in queries {
    let r = ask(paths, qid, text, &ranked_opts)?;
    let a = if with_auto { ask(paths, qid, text, &auto_opts)?.ids } else { Vec::new() };
    warm.insert(qid, (r.ids, a));
  }
  common.say(format!("{}: timed pass", mode.as_str()));
  let mut run = ModeRun {
    mode,
    ranked: HashMap::new(),
    auto: HashMap::new(),
    nondeterministic: Vec::new(),
    peak_rss: None,
    start_rss,
    wall_ms: 0.0,
  };
  for (qid, text) in queries {
    let r = ask(paths, qid, text, &ranked_opts)?;
    let a = if with_auto { Some(ask(paths, qid, text, &auto_opts)?) } else { None };
    let (wr, wa) = &warm[qid.as_str()];
    if *wr != r.ids || a.as_ref().is_some_and(|a| *wa != a.ids) {
      run.nondeterministic.push(qid.clone());
    }
    run.ranked.insert(qid.clone(), r);
    if let Some(a) = a {
      run.auto.insert(qid.clone(), a);
    }
  }
  run.peak_rss = peak_rss_bytes();
  run.wall_ms = ms_since(started);
  let lat = ModeRun::latency_of(&run.ranked);
  common.say(format!(
    "{}: ranked p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms; modes used {}{}",
    mode.as_str(),
    lat.p50_ms,
    lat.p95_ms,
    lat.max_ms,
    fmt_used(&ModeRun::used(&run.ranked)),
    if run.nondeterministic.is_empty() {
      String::new()
    } else {
      format!("; {} non-deterministic queries", run.nondeterministic.len())
    }
  ));
  Ok(run)
}

// ---------------------------------------------------------------------------------------------
// Evaluation sets
// ---------------------------------------------------------------------------------------------

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

fn index_markdown(md: &mut String, rows: &[(&str, &IndexReport)]) {
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

fn cost_markdown(md: &mut String, runs: &[ModeRun]) {
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

fn nondeterminism_markdown(md: &mut String, runs: &[ModeRun]) {
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

fn run_beir(dir: &Path, opts: &SetBenchOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  let context = machine_context();
  let set = opts.set.clone().unwrap_or_else(|| {
    dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "beir".into())
  });
  let data: BeirSet = load_beir_dir(dir)?;
  let judged = data.judged_queries().len();
  common.say(format!("{set}: {} queries ({judged} judged)", data.queries.len()));
  let tmp = common.temp(&set)?;
  let (paths, pages) = prepare_beir_vault(dir, tmp.path())?;
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
      "source": dir.display().to_string(),
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
    dir.display(),
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
  nondeterminism_markdown(&mut md, &runs);
  md.push_str("\n## Index cost\n\n");
  index_markdown(&mut md, &[(set.as_str(), &ix.report)]);
  method_notes(&mut md);
  let md_path = common.out.join(format!("{set}.md"));
  write_text_file(&md_path, &md)?;
  out.files.push(md_path);
  out.markdown = md;
  release_reader(&paths);
  drop(tmp);
  Ok(out)
}

fn method_notes(md: &mut String) {
  let _ = writeln!(
    md,
    "\nMethod: {LATENCY_METHOD} Peak RSS: {PEAK_RSS_METHOD} Index size: bytes of the regular files under \
     `<meta>/retrieval`. Embed time excludes the model load (timed separately). Edits append one sentence to the \
     page body and move its mtime 5 s forward."
  );
}

// ---- pi fixture --------------------------------------------------------------------------------

fn pi_ir(fixture: &PiFixture, ranked: &HashMap<String, Vec<String>>, slice: Slice) -> Summary {
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

fn rate(n: usize, d: usize) -> f64 {
  if d == 0 {
    0.0
  } else {
    round6(n as f64 / d as f64)
  }
}

fn injected_relevant(q: &PiQuery, auto: &[String]) -> bool {
  let g = q.grades();
  auto.iter().any(|id| g.get(id).is_some_and(|&x| x > 0))
}

fn pi_auto_stats(fixture: &PiFixture, auto: &HashMap<String, Vec<String>>, slice: Slice) -> AutoStats {
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
struct PiEval {
  name: String,
  slices: Vec<PiSliceReport>,
  ir: Vec<(Slice, Summary)>,
  auto: Vec<(Slice, AutoStats)>,
  ranked: HashMap<String, Vec<String>>,
}

impl PiEval {
  fn new(
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

  fn metrics(&self, slice: Slice) -> PiMetrics {
    self.slices.iter().find(|r| r.slice == slice).map(|r| r.metrics).unwrap_or_default()
  }

  fn metrics_json(&self) -> Value {
    let mut m = Map::new();
    for r in &self.slices {
      m.insert(r.slice.as_str().to_string(), to_value(&r.metrics));
    }
    Value::Object(m)
  }

  fn slice_map<T: Serialize>(items: &[(Slice, T)]) -> Value {
    let mut m = Map::new();
    for (s, v) in items {
      m.insert(s.as_str().to_string(), to_value(v));
    }
    Value::Object(m)
  }

  fn json(&self, fixture: &PiFixture, auto: &HashMap<String, Vec<String>>) -> Value {
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

const EPS: f64 = 1e-9;

/// One mode's outcome on one gate.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateOutcome {
  pub value: f64,
  pub threshold: f64,
  pub pass: bool,
  /// Whether the gate binds this mode (otherwise reported for information).
  pub applies: bool,
  #[serde(skip_serializing_if = "Vec::is_empty")]
  pub failures: Vec<String>,
}

/// A release gate checked against the baseline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gate {
  pub id: &'static str,
  pub name: &'static str,
  pub rule: String,
  pub baseline: f64,
  pub threshold: f64,
  /// `≥` or `≤`.
  pub comparison: &'static str,
  pub note: String,
  /// Mode name → outcome, in run order.
  pub modes: Vec<(String, GateOutcome)>,
}

fn relevant_in_top3(q: &PiQuery, ranked: &[String]) -> bool {
  let g = q.grades();
  ranked.iter().take(3).any(|id| g.get(id).is_some_and(|&x| x > 0))
}

/// A metric gate (b)–(f).
struct GateSpec {
  id: &'static str,
  name: &'static str,
  rule: &'static str,
  slice: Slice,
  metric: fn(&PiMetrics) -> f64,
  threshold: f64,
  at_least: bool,
  applies: fn(RetrievalMode) -> bool,
}

/// The spec's release gates (a)–(f) for every mode against the baseline.
fn release_gates(fixture: &PiFixture, baseline: &PiEval, modes: &[(RetrievalMode, &PiEval)]) -> Vec<Gate> {
  let eligible: Vec<&PiQuery> = fixture
    .queries
    .iter()
    .filter(|q| {
      q.category == "exact_lookup"
        && relevant_in_top3(q, baseline.ranked.get(&q.id).map(Vec::as_slice).unwrap_or(&[]))
    })
    .collect();
  let b_all = baseline.metrics(Slice::All);
  let b_held = baseline.metrics(Slice::Heldout);
  let specs = [
    GateSpec {
      id: "b",
      name: "held-out nDCG@10 +10% (quality)",
      rule: "heldout ndcg10 ≥ baseline × 1.10, binding for quality mode",
      slice: Slice::Heldout,
      metric: |m| m.ndcg10,
      threshold: round6(b_held.ndcg10 * 1.10),
      at_least: true,
      applies: |m| m == RetrievalMode::Quality,
    },
    GateSpec {
      id: "c",
      name: "held-out MRR −2% at most",
      rule: "heldout mrr ≥ baseline × 0.98, binding for hybrid, adaptive and quality (lexical reported)",
      slice: Slice::Heldout,
      metric: |m| m.mrr,
      threshold: round6(b_held.mrr * 0.98),
      at_least: true,
      applies: |m| m != RetrievalMode::Lexical,
    },
    GateSpec {
      id: "d",
      name: "automatic false-positive rate −25%",
      rule: "all autoFalsePositiveRate ≤ baseline × 0.75",
      slice: Slice::All,
      metric: |m| m.auto_false_positive_rate,
      threshold: round6(b_all.auto_false_positive_rate * 0.75),
      at_least: false,
      applies: |_| true,
    },
    GateSpec {
      id: "e",
      name: "contradiction coverage 100%",
      rule: "all contradictionCoverage = 1.0",
      slice: Slice::All,
      metric: |m| m.contradiction_coverage,
      threshold: 1.0,
      at_least: true,
      applies: |_| true,
    },
    GateSpec {
      id: "f",
      name: "candidate Recall@20 −2 points at most",
      rule: "all candidateRecall20 ≥ baseline − 0.02",
      slice: Slice::All,
      metric: |m| m.candidate_recall20,
      threshold: round6(b_all.candidate_recall20 - 0.02),
      at_least: true,
      applies: |_| true,
    },
  ];
  let mut gates = Vec::new();
  // (a) exact lookups.
  let mut a = Gate {
    id: "a",
    name: "exact-lookup top-3 preserved",
    rule: "every exact_lookup query with a relevant page in the baseline's top 3 keeps one in the top 3"
      .into(),
    baseline: 1.0,
    threshold: 1.0,
    comparison: "≥",
    note: format!(
      "{} eligible queries: {}",
      eligible.len(),
      eligible.iter().map(|q| q.id.as_str()).collect::<Vec<_>>().join(", ")
    ),
    modes: Vec::new(),
  };
  for (mode, ev) in modes {
    let failures: Vec<String> = eligible
      .iter()
      .filter(|q| !relevant_in_top3(q, ev.ranked.get(&q.id).map(Vec::as_slice).unwrap_or(&[])))
      .map(|q| q.id.clone())
      .collect();
    let kept = eligible.len() - failures.len();
    a.modes.push((
      mode.as_str().to_string(),
      GateOutcome {
        value: if eligible.is_empty() { 1.0 } else { round6(kept as f64 / eligible.len() as f64) },
        threshold: 1.0,
        pass: failures.is_empty(),
        applies: true,
        failures,
      },
    ));
  }
  gates.push(a);
  for s in specs {
    let base = (s.metric)(&if s.slice == Slice::All { b_all } else { b_held });
    let mut g = Gate {
      id: s.id,
      name: s.name,
      rule: s.rule.to_string(),
      baseline: base,
      threshold: s.threshold,
      comparison: if s.at_least { "≥" } else { "≤" },
      note: format!("slice {}", s.slice.as_str()),
      modes: Vec::new(),
    };
    for (mode, ev) in modes {
      let value = (s.metric)(&ev.metrics(s.slice));
      let pass = if s.at_least { value >= s.threshold - EPS } else { value <= s.threshold + EPS };
      g.modes.push((
        mode.as_str().to_string(),
        GateOutcome {
          value,
          threshold: s.threshold,
          pass,
          applies: (s.applies)(*mode),
          failures: Vec::new(),
        },
      ));
    }
    gates.push(g);
  }
  gates
}

fn gates_json(gates: &[Gate]) -> Value {
  Value::Array(
    gates
      .iter()
      .map(|g| {
        let modes: Map<String, Value> = g.modes.iter().map(|(m, o)| (m.clone(), to_value(o))).collect();
        json!({
          "id": g.id,
          "name": g.name,
          "rule": g.rule,
          "baseline": g.baseline,
          "threshold": g.threshold,
          "comparison": g.comparison,
          "note": g.note,
          "modes": modes,
        })
      })
      .collect(),
  )
}

fn gate_summary(gates: &[Gate], modes: &[RetrievalMode]) -> Value {
  let mut m = Map::new();
  for mode in modes {
    let name = mode.as_str();
    let outcomes: Vec<(&Gate, &GateOutcome)> =
      gates.iter().filter_map(|g| g.modes.iter().find(|(n, _)| n == name).map(|(_, o)| (g, o))).collect();
    let binding: Vec<&(&Gate, &GateOutcome)> = outcomes.iter().filter(|(_, o)| o.applies).collect();
    let failed: Vec<&str> = binding.iter().filter(|(_, o)| !o.pass).map(|(g, _)| g.id).collect();
    m.insert(
      name.to_string(),
      json!({
        "binding": binding.len(),
        "passed": binding.len() - failed.len(),
        "failed": failed,
        "allBindingPass": failed.is_empty(),
      }),
    );
  }
  Value::Object(m)
}

fn gates_markdown(md: &mut String, gates: &[Gate], modes: &[RetrievalMode]) {
  md.push_str("| gate | rule | baseline | threshold |");
  for m in modes {
    let _ = write!(md, " {} |", m.as_str());
  }
  md.push_str("\n|---|---|---|---|");
  for _ in modes {
    md.push_str("---|");
  }
  md.push('\n');
  for g in gates {
    let _ = write!(
      md,
      "| ({}) {} | {} | {} | {} {} |",
      g.id, g.name, g.rule, g.baseline, g.comparison, g.threshold
    );
    for m in modes {
      let cell = g.modes.iter().find(|(n, _)| n == m.as_str()).map_or("–".to_string(), |(_, o)| {
        let verdict = match (o.applies, o.pass) {
          (true, true) => "**PASS**",
          (true, false) => "**FAIL**",
          (false, true) => "pass (info)",
          (false, false) => "fail (info)",
        };
        let extra =
          if o.failures.is_empty() { String::new() } else { format!(" lost: {}", o.failures.join(", ")) };
        format!("{verdict} {}{extra}", o.value)
      });
      let _ = write!(md, " {cell} |");
    }
    md.push('\n');
  }
  let _ = writeln!(md, "\n(a) eligible queries — {}", gates.first().map(|g| g.note.as_str()).unwrap_or(""));
}

fn pi_metric_row(name: &str, r: &PiSliceReport) -> String {
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

fn run_pi(fixture_path: &Path, vault: &Path, opts: &SetBenchOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  let context = machine_context();
  let set = opts.set.clone().unwrap_or_else(|| "pi".into());
  let fixture = load_pi_fixture(fixture_path)?;
  let baseline_path = opts.baseline.clone().or_else(|| {
    let p = fixture_path.parent().unwrap_or(Path::new(".")).join("baseline-runs.json");
    p.is_file().then_some(p)
  });
  let baseline_runs: Option<PiRuns> = baseline_path.as_deref().map(load_baseline_runs).transpose()?;
  let queries: Vec<(String, String)> =
    fixture.queries.iter().map(|q| (q.id.clone(), q.text.clone())).collect();
  common.say(format!("{set}: {} pages, {} queries", fixture.pages.len(), queries.len()));
  let tmp = common.temp(&set)?;
  let (paths, pages) = prepare_pi_vault(vault, tmp.path())?;
  common.say(format!("{set}: copied {pages} pages to {}", paths.wiki.display()));
  let mut ix = build_lexical(&paths, &set, common)?;
  let runs = run_modes(&mut ix, &queries, opts.depth, true, &set, common)?;
  noop_reindex(&mut ix, &set, common)?;
  let edit = edit_reindex(&paths, 1, 1, ix.embedder.is_some())?;
  common.say(edit_line(&set, "one-page edit", &edit));
  ix.report.edit = Some(edit);

  let baseline = baseline_runs.as_ref().map(|b| {
    let auto = b.auto_map();
    (PiEval::new("baseline", &fixture, b.ranked_map(), &auto), auto)
  });
  let evals: Vec<(PiEval, HashMap<String, Vec<String>>)> = runs
    .iter()
    .map(|r| {
      let auto = r.auto_ids();
      (PiEval::new(r.mode.as_str(), &fixture, r.ranked_ids(), &auto), auto)
    })
    .collect();
  let baseline_json = baseline.as_ref().map(|(e, auto)| {
    let mut v = e.json(&fixture, auto);
    v["engine"] = json!(baseline_runs.as_ref().map(|b| b.engine.clone()));
    v["source"] = json!(baseline_path.as_ref().map(|p| p.display().to_string()));
    v["rankedCall"] = json!(baseline_runs.as_ref().map(|b| b.ranked_call.clone()));
    v["autoCall"] = json!(baseline_runs.as_ref().map(|b| b.auto_call.clone()));
    v
  });

  let mut out = BenchOutput::default();
  create_dir(&common.out)?;
  for (run, (ev, auto)) in runs.iter().zip(&evals) {
    let per_query: Vec<Value> = fixture
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
    let mut doc = json!({
      "schema": SCHEMA,
      "kind": "pi",
      "set": set,
      "mode": run.mode.as_str(),
      "context": context,
      "fixture": fixture_path.display().to_string(),
      "depth": opts.depth,
      "policy": {
        "ranked": {"includePersonal": false, "minScore": 0.0, "maxPerVault": opts.depth, "maxResults": opts.depth},
        "automatic": {"includePersonal": false, "minScore": AUTOMATIC_FLOOR, "maxPerVault": 10, "maxResults": 3},
      },
    });
    if let (Value::Object(d), Value::Object(e)) = (&mut doc, ev.json(&fixture, auto)) {
      d.extend(e);
    }
    doc["baseline"] = baseline_json.clone().unwrap_or(Value::Null);
    doc["modesUsed"] = run.modes_used_json();
    doc["resultsPerQuery"] = run.result_counts();
    doc["latency"] = run.cost_json();
    doc["index"] = to_value(&ix.report);
    doc["nondeterministicQueries"] = json!(run.nondeterministic);
    doc["diagnostics"] = to_value(&run.diagnostics());
    doc["perQuery"] = Value::Array(per_query);
    let trec_path = common.out.join(format!("{set}-{}.trec", run.mode.as_str()));
    write_run(&trec_path, &format!("llm-wiki-{}", run.mode.as_str()), &run.trec(&queries))?;
    let json_path = common.out.join(format!("{set}-{}.json", run.mode.as_str()));
    write_json_file(&json_path, &doc)?;
    out.files.push(trec_path);
    out.files.push(json_path);
  }
  if let Some(b) = &baseline_json {
    let path = common.out.join(format!("{set}-baseline.json"));
    let doc = json!({"schema": SCHEMA, "kind": "pi-baseline", "set": set, "context": context, "baseline": b});
    write_json_file(&path, &doc)?;
    out.files.push(path);
  }
  let gates = baseline.as_ref().map(|(b, _)| {
    let modes: Vec<(RetrievalMode, &PiEval)> =
      runs.iter().map(|r| r.mode).zip(evals.iter().map(|(e, _)| e)).collect();
    release_gates(&fixture, b, &modes)
  });
  if let Some(g) = &gates {
    let doc = json!({
      "schema": SCHEMA,
      "kind": "pi-gates",
      "set": set,
      "context": context,
      "baseline": baseline_path.as_ref().map(|p| p.display().to_string()),
      "comparisonTolerance": EPS,
      "gates": gates_json(g),
      "summary": gate_summary(g, &common.modes),
    });
    let path = common.out.join(format!("{set}-gates.json"));
    write_json_file(&path, &doc)?;
    out.files.push(path);
    for gate in g {
      let cells: Vec<String> = gate
        .modes
        .iter()
        .map(|(m, o)| {
          format!("{m} {}{}", if o.pass { "PASS" } else { "FAIL" }, if o.applies { "" } else { " (info)" })
        })
        .collect();
      common.say(format!("gate ({}) {}: {}", gate.id, gate.name, cells.join(", ")));
    }
  }

  // Markdown.
  let mut md = String::new();
  let _ = writeln!(md, "# Benchmark: {set} (pi fixture)\n");
  md.push_str(&context_markdown(&context));
  let _ = writeln!(
    md,
    "- Fixture: {} ({} pages, {} queries); ranked list = recall {{includePersonal:false, minScore:0, \
     maxPerVault:{d}, maxResults:{d}}}; automatic list = RecallPolicy::automatic() (floor {AUTOMATIC_FLOOR}, 3 \
     results){}\n",
    fixture_path.display(),
    pages,
    queries.len(),
    baseline_path
      .as_ref()
      .map(|p| format!("; baseline = heuristic runs from {} (its ranked lists stop at 20)", p.display()))
      .unwrap_or_default(),
    d = opts.depth
  );
  md.push_str("## Quality: pi contract §8 metrics\n");
  for slice in Slice::EVERY {
    let _ = writeln!(md, "\n### Slice `{}`\n", slice.as_str());
    md.push_str(
      "| engine | queries | judged | Recall@20 | MRR | nDCG@5 | nDCG@10 | canonical@3 | evidence R@20 | \
       contradiction | auto FP |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let rows = baseline.iter().map(|(e, _)| e).chain(evals.iter().map(|(e, _)| e));
    for e in rows {
      if let Some(r) = e.slices.iter().find(|r| r.slice == slice) {
        let _ = writeln!(md, "{}", pi_metric_row(&e.name, r));
      }
    }
  }
  md.push_str("\n## IR metrics over judged queries (slice `all`; held-out in parentheses)\n\n");
  md.push_str(
    "| engine | nDCG@5 | nDCG@10 | MRR@10 | MRR | Recall@20 | Recall@100 |\n|---|---|---|---|---|---|---|\n",
  );
  for e in baseline.iter().map(|(e, _)| e).chain(evals.iter().map(|(e, _)| e)) {
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
  for e in baseline.iter().map(|(e, _)| e).chain(evals.iter().map(|(e, _)| e)) {
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
  md.push_str("\n## Modes actually used\n\n| mode | ranked lists | automatic lists |\n|---|---|---|\n");
  for r in &runs {
    let _ = writeln!(
      md,
      "| {} | {} | {} |",
      r.mode.as_str(),
      fmt_used(&ModeRun::used(&r.ranked)),
      fmt_used(&ModeRun::used(&r.auto))
    );
  }
  md.push_str("\n## Query cost (warm)\n\n");
  cost_markdown(&mut md, &runs);
  nondeterminism_markdown(&mut md, &runs);
  md.push_str("\n## Index cost\n\n");
  index_markdown(&mut md, &[(set.as_str(), &ix.report)]);
  if let Some(g) = &gates {
    md.push_str("\n## Release gates (against the heuristic baseline)\n\n");
    gates_markdown(&mut md, g, &common.modes);
  } else {
    md.push_str("\n## Release gates\n\nNo baseline runs found: gates not checked.\n");
  }
  method_notes(&mut md);
  let md_path = common.out.join(format!("{set}.md"));
  write_text_file(&md_path, &md)?;
  out.files.push(md_path);
  out.markdown = md;
  release_reader(&paths);
  drop(tmp);
  Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Automatic-recall precision suite
// ---------------------------------------------------------------------------------------------

/// One query of the precision suite, with its relevance on the vault it runs against.
struct ProbeQuery {
  id: String,
  text: String,
  /// `train`/`heldout` (pi) or `test` (SciFact).
  split: String,
  /// Relevant page ids on this vault (empty = a negative).
  relevant: HashSet<String>,
}

/// One (query set, vault) combination.
struct Probe<'a> {
  key: &'static str,
  query_set: &'a str,
  vault_name: &'a str,
  paths: &'a VaultPaths,
  queries: Vec<ProbeQuery>,
}

/// Injection counts of a group of queries.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InjectionStats {
  pub queries: usize,
  /// Queries with at least one injected result.
  pub injected: usize,
  pub injection_rate: f64,
  /// Positives only: queries with an injected relevant page.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub hits: Option<usize>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub hit_rate: Option<f64>,
  pub modes_used: BTreeMap<String, usize>,
}

impl InjectionStats {
  fn add(&mut self, injected: bool, hit: Option<bool>, used: RetrievalMode) {
    self.queries += 1;
    self.injected += usize::from(injected);
    if let Some(h) = hit {
      *self.hits.get_or_insert(0) += usize::from(h);
    }
    *self.modes_used.entry(used.as_str().to_string()).or_insert(0) += 1;
  }

  fn finish(mut self) -> Self {
    self.injection_rate = rate(self.injected, self.queries);
    self.hit_rate = self.hits.map(|h| rate(h, self.queries));
    self
  }
}

fn fmt_rate(s: &InjectionStats, hits: bool) -> String {
  if hits {
    format!("{}/{} ({})", s.hits.unwrap_or(0), s.queries, s.hit_rate.unwrap_or(0.0))
  } else {
    format!("{}/{} ({})", s.injected, s.queries, s.injection_rate)
  }
}

/// Run the precision suite: pi fixture + a BEIR set (SciFact), every mode of `common`.
pub fn run_precision(pi_fixture: &Path, beir_dir: &Path, common: &BenchCommon) -> Result<BenchOutput> {
  let context = machine_context();
  let (fixture_path, pi_vault_src) = match detect_source(pi_fixture)? {
    BenchSource::Pi { fixture, vault } => (fixture, vault),
    BenchSource::Beir { .. } => return Err(Error::invalid("--pi must name the pi fixture.json")),
  };
  let beir_dir = match detect_source(beir_dir)? {
    BenchSource::Beir { dir } => dir,
    BenchSource::Pi { .. } => return Err(Error::invalid("--beir must name a BEIR-style directory")),
  };
  let beir_name =
    beir_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "beir".to_string());
  let fixture = load_pi_fixture(&fixture_path)?;
  let beir = load_beir_dir(&beir_dir)?;

  let pi_tmp = common.temp("precision-pi")?;
  let (pi_paths, _) = prepare_pi_vault(&pi_vault_src, pi_tmp.path())?;
  let beir_tmp = common.temp(&format!("precision-{beir_name}"))?;
  let (beir_paths, _) = prepare_beir_vault(&beir_dir, beir_tmp.path())?;
  let pi_ix = build_index(&pi_paths, common.needs_vectors(), "pi", common)?;
  let beir_ix = build_index(&beir_paths, common.needs_vectors(), &beir_name, common)?;

  let pi_queries = |on_pi: bool| -> Vec<ProbeQuery> {
    fixture
      .queries
      .iter()
      .map(|q| ProbeQuery {
        id: q.id.clone(),
        text: q.text.clone(),
        split: match q.split {
          PiSplit::Train => "train".into(),
          PiSplit::Heldout => "heldout".into(),
        },
        relevant: if on_pi {
          q.judgments.iter().filter(|j| j.grade > 0).map(|j| j.page_id.clone()).collect()
        } else {
          HashSet::new()
        },
      })
      .collect()
  };
  let beir_queries = |on_beir: bool| -> Vec<ProbeQuery> {
    beir
      .queries
      .iter()
      .map(|(id, text)| ProbeQuery {
        id: id.clone(),
        text: text.clone(),
        split: "test".into(),
        relevant: if on_beir {
          beir
            .qrels
            .get(id)
            .map(|j| j.iter().filter(|(_, &g)| g > 0).map(|(d, _)| d.clone()).collect())
            .unwrap_or_default()
        } else {
          HashSet::new()
        },
      })
      .collect()
  };
  let probes = [
    Probe { key: "piOnPi", query_set: "pi", vault_name: "pi", paths: &pi_paths, queries: pi_queries(true) },
    Probe {
      key: "beirOnPi",
      query_set: &beir_name,
      vault_name: "pi",
      paths: &pi_paths,
      queries: beir_queries(false),
    },
    Probe {
      key: "piOnBeir",
      query_set: "pi",
      vault_name: &beir_name,
      paths: &beir_paths,
      queries: pi_queries(false),
    },
    Probe {
      key: "beirOnBeir",
      query_set: &beir_name,
      vault_name: &beir_name,
      paths: &beir_paths,
      queries: beir_queries(true),
    },
  ];
  // Positives of the pi fixture are its judged queries; its `autoExpectation: none` queries
  // are negatives on the pi vault.
  let pi_negatives: HashSet<&str> = fixture
    .queries
    .iter()
    .filter(|q| q.auto_expectation == AutoExpectation::None)
    .map(|q| q.id.as_str())
    .collect();

  let floor = RecallPolicy::automatic().min_score;
  let auto_max = RecallPolicy::automatic().max_results;
  let mut calibration: Vec<Value> = Vec::new();
  let mut per_mode = Map::new();
  let mut md_rows: Vec<Vec<String>> = Vec::new();
  let mut dist_rows: Vec<Vec<String>> = Vec::new();
  for &mode in &common.modes {
    let auto_opts = common.recall_options(RecallPolicy::automatic(), mode);
    // The automatic policy without its floor and with 10 results: the same per-vault candidates.
    let top_policy = RecallPolicy { min_score: 0.0, max_results: 10, ..RecallPolicy::automatic() };
    let top_opts = common.recall_options(top_policy, mode);
    let mut groups: BTreeMap<String, InjectionStats> = BTreeMap::new();
    let mut mismatches: Vec<String> = Vec::new();
    let mut non_prefix: Vec<String> = Vec::new();
    // Top-1 score (what the floor compares) per group: negatives pooled, positives per set.
    let mut top1: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let started = Instant::now();
    for probe in &probes {
      common.say(format!(
        "precision {}: {} queries of {} on the {} vault",
        mode.as_str(),
        probe.queries.len(),
        probe.query_set,
        probe.vault_name
      ));
      for q in &probe.queries {
        let auto = ask(probe.paths, &q.id, &q.text, &auto_opts)?;
        let top = ask(probe.paths, &q.id, &q.text, &top_opts)?;
        // Consistency: the automatic list must be the floor-0 list filtered by the floor, cut at 3.
        let expected_auto: Vec<&String> =
          top.top.iter().filter(|h| h.raw_score >= floor).map(|h| &h.id).take(auto_max).collect();
        if expected_auto != auto.ids.iter().collect::<Vec<_>>() {
          mismatches.push(format!("{}:{}", probe.key, q.id));
        }
        // Injected pages that are not simply the head of the ranking (a higher-ranked page fell
        // under the floor): the confidence is not monotone in rank.
        let head: Vec<&String> = top.top.iter().take(auto.ids.len()).map(|h| &h.id).collect();
        let head_differs = head != auto.ids.iter().collect::<Vec<_>>();
        if head_differs {
          non_prefix.push(format!("{}:{}", probe.key, q.id));
        }
        let injected = !auto.ids.is_empty();
        let is_negative = q.relevant.is_empty();
        let hit = auto.ids.iter().any(|id| q.relevant.contains(id));
        let group = match (probe.key, is_negative) {
          ("piOnPi", false) => {
            let g = groups.entry(format!("piOnPi.{}", q.split)).or_default();
            g.add(injected, Some(hit), auto.used);
            "piOnPi".to_string()
          }
          ("piOnPi", true) => {
            if !pi_negatives.contains(q.id.as_str()) {
              // A judged query without a relevant judgment would land here; none exist today.
              continue;
            }
            "piNegativesOnPi".to_string()
          }
          ("beirOnBeir", true) => continue, // unjudged BEIR queries: neither positive nor negative
          (key, _) => key.to_string(),
        };
        groups.entry(group.clone()).or_default().add(injected, (!is_negative).then_some(hit), auto.used);
        let top1_group = match (is_negative, probe.key) {
          (true, _) => "negatives (pooled)",
          (false, "piOnPi") => "pi positives",
          (false, _) => "beir positives",
        };
        top1.entry(top1_group).or_default().push(top.top.first().map_or(0.0, |h| h.raw_score));
        if is_negative {
          groups.entry("pooledNegatives".into()).or_default().add(injected, None, auto.used);
        }
        calibration.push(json!({
          "mode": mode.as_str(),
          "modeUsed": auto.used.as_str(),
          "querySet": probe.query_set,
          "vault": probe.vault_name,
          "queryId": q.id,
          "split": q.split,
          "polarity": if is_negative { "negative" } else { "positive" },
          "top1": top.top.first().map(|h| json!({
            "id": h.id, "confidence": h.confidence, "score": h.score, "multiplier": h.multiplier,
            "relevant": q.relevant.contains(&h.id),
          })),
          "top10": top.top.iter().map(|h| json!({"id": h.id, "confidence": h.confidence, "score": h.score, "relevant": q.relevant.contains(&h.id)})).collect::<Vec<_>>(),
          "injectedNotHeadOfRanking": head_differs,
          "injected": auto.ids,
          "hit": if is_negative { Value::Null } else { json!(hit) },
        }));
      }
    }
    let groups: BTreeMap<String, InjectionStats> = groups.into_iter().map(|(k, v)| (k, v.finish())).collect();
    let g = |k: &str| groups.get(k).cloned().unwrap_or_default();
    common.say(format!(
      "precision {}: negatives injected {} ({beir_name}→pi {}, pi→{beir_name} {}); pi positives hit {}, {beir_name} \
       positives hit {} ({:.0} ms); {} queries inject pages that are not the head of the ranking; {} automatic lists \
       differ from the floored ranking",
      mode.as_str(),
      fmt_rate(&g("pooledNegatives"), false),
      fmt_rate(&g("beirOnPi"), false),
      fmt_rate(&g("piOnBeir"), false),
      fmt_rate(&g("piOnPi"), true),
      fmt_rate(&g("beirOnBeir"), true),
      ms_since(started),
      non_prefix.len(),
      mismatches.len()
    ));
    md_rows.push(vec![
      mode.as_str().to_string(),
      fmt_rate(&g("beirOnPi"), false),
      fmt_rate(&g("piOnBeir"), false),
      fmt_rate(&g("piNegativesOnPi"), false),
      fmt_rate(&g("pooledNegatives"), false),
      fmt_rate(&g("piOnPi"), true),
      fmt_rate(&g("piOnPi"), false),
      fmt_rate(&g("piOnPi.heldout"), true),
      fmt_rate(&g("beirOnBeir"), true),
      fmt_rate(&g("beirOnBeir"), false),
      fmt_used(&g("pooledNegatives").modes_used),
      non_prefix.len().to_string(),
    ]);
    for (group, values) in &top1 {
      let d = score_distribution(values, floor);
      let f = |k: &str| d.get(k).and_then(Value::as_f64).map_or("–".into(), |v| format!("{v:.3}"));
      dist_rows.push(vec![
        mode.as_str().to_string(),
        group.replace("beir", &beir_name),
        values.len().to_string(),
        f("p5"),
        f("p25"),
        f("p50"),
        f("p75"),
        f("p95"),
        f("max"),
        format!("{}/{}", d["atOrAboveFloor"], values.len()),
      ]);
    }
    per_mode.insert(
      mode.as_str().to_string(),
      json!({
        "negatives": {
          format!("{beir_name}OnPi"): g("beirOnPi"),
          format!("piOn{}", capitalize(&beir_name)): g("piOnBeir"),
          "piNegativesOnPi": g("piNegativesOnPi"),
          "pooled": g("pooledNegatives"),
        },
        "positives": {
          "piOnPi": {"all": g("piOnPi"), "train": g("piOnPi.train"), "heldout": g("piOnPi.heldout")},
          format!("{beir_name}On{}", capitalize(&beir_name)): g("beirOnBeir"),
        },
        "injectedNotHeadOfRanking": {"count": non_prefix.len(), "queries": non_prefix},
        "top1ScoreDistribution": top1.iter().map(|(k, v)| (k.replace("beir", &beir_name), score_distribution(v, floor))).collect::<Map<String, Value>>(),
        "automaticVsFlooredRankingMismatches": mismatches,
        "wallMs": r3(ms_since(started)),
      }),
    );
  }

  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  let index = json!({"pi": pi_ix.report, beir_name.clone(): beir_ix.report});
  let doc = json!({
    "schema": SCHEMA,
    "kind": "precision",
    "context": context,
    "fixture": fixture_path.display().to_string(),
    "beir": beir_dir.display().to_string(),
    "automaticPolicy": {"includePersonal": false, "minScore": floor, "maxPerVault": 10, "maxResults": 3},
    "definitions": {
      "injectionRate": "share of queries whose automatic list (RecallPolicy::automatic) is non-empty",
      "hitRate": "share of positive queries with an injected page judged relevant (pi: grade > 0; BEIR: qrels)",
      "negatives": format!("{beir_name} queries on the pi vault, pi queries on the {beir_name} vault (no relevant page there), and the pi fixture's autoExpectation:none queries on the pi vault"),
      "positives": format!("pi judged queries on the pi vault; {beir_name} judged queries on the {beir_name} vault"),
    },
    "modes": per_mode,
    "index": index,
  });
  let path = common.out.join("precision.json");
  write_json_file(&path, &doc)?;
  out.files.push(path);
  let cal = json!({
    "schema": SCHEMA,
    "kind": "precision-calibration",
    "context": context,
    "floor": floor,
    "note": "top1/top10 come from the automatic policy with the floor removed (minScore 0, maxPerVault 10, 10 \
             results); `injected` is the real automatic list; injectedNotHeadOfRanking marks queries whose injected \
             pages are not the first ones of that ranking (a higher-ranked page fell under the floor). Entries with split \"heldout\" are pi held-out \
             queries: measure only, never tune thresholds on them.",
    "entries": calibration,
  });
  let path = common.out.join("precision-calibration.json");
  write_json_file(&path, &cal)?;
  out.files.push(path);

  let mut md = String::new();
  md.push_str("# Automatic-recall precision\n\n");
  md.push_str(&context_markdown(&context));
  let _ = writeln!(
    md,
    "- Automatic policy: active vault only, floor {floor}, maxPerVault 10, 3 results. Cells: count/queries (rate).\n"
  );
  let b = &beir_name;
  let _ = writeln!(
    md,
    "| mode | neg: {b} q → pi vault | neg: pi q → {b} vault | neg: pi negatives | neg: pooled injection | pos: pi \
     hit | pos: pi injected anything | pos: pi held-out hit | pos: {b} hit | pos: {b} injected anything | modes used \
     (negatives) | injected ≠ head of ranking |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
  );
  for row in &md_rows {
    let _ = writeln!(md, "| {} |", row.join(" | "));
  }
  let _ = writeln!(
    md,
    "\n## Top-1 score distribution\n\nScore of the first page of the automatic policy's list with the floor removed \
     (nearest-rank percentiles; a query with no candidate counts as 0).\n\n| mode | query group | n | p5 | p25 | p50 | p75 | \
     p95 | max | ≥ floor {floor} |\n|---|---|---|---|---|---|---|---|---|---|"
  );
  for row in &dist_rows {
    let _ = writeln!(md, "| {} |", row.join(" | "));
  }
  md.push_str("\n## Index cost\n\n");
  index_markdown(&mut md, &[("pi", &pi_ix.report), (beir_name.as_str(), &beir_ix.report)]);
  let _ = writeln!(
    md,
    "\nThe per-query top-1 confidence dump is `precision-calibration.json` (split marked; pi held-out is for \
     measuring only)."
  );
  let path = common.out.join("precision.md");
  write_text_file(&path, &md)?;
  out.files.push(path);
  out.markdown = md;
  release_reader(&pi_paths);
  release_reader(&beir_paths);
  drop((pi_tmp, beir_tmp));
  Ok(out)
}

fn capitalize(s: &str) -> String {
  let mut c = s.chars();
  c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Scale
// ---------------------------------------------------------------------------------------------

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

fn target_stats(queries: &[(String, String, String)], run: &ModeRun) -> Value {
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

fn scale_mode_json(queries: &[(String, String, String)], run: &ModeRun) -> Value {
  json!({
    "latency": run.cost_json(),
    "modesUsed": run.modes_used_json(),
    "resultsPerQuery": run.result_counts(),
    "targets": target_stats(queries, run),
    "nondeterministicQueries": run.nondeterministic,
  })
}

fn generate_timed(root: &Path, opts: &SynthOptions, common: &BenchCommon) -> Result<(VaultPaths, Value)> {
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
  let (paths, generation) = generate_timed(tmp.path(), &synth, common)?;
  let label = format!("scale-{n}");
  let dense_modes: Vec<RetrievalMode> =
    common.modes.iter().copied().filter(|m| *m != RetrievalMode::Lexical).collect();
  let embed_full = !dense_modes.is_empty() && opts.vector_sample.is_none();
  let mut ix = build_lexical(&paths, &label, common)?;
  let queries = synth_queries(&synth, opts.queries);
  let qpairs: Vec<(String, String)> = queries.iter().map(|(q, t, _)| (q.clone(), t.clone())).collect();
  let mut mode_json = Map::new();
  let mut runs: Vec<(String, ModeRun, Value)> = Vec::new();
  let mut full_common = common.clone();
  if !embed_full {
    full_common.modes.retain(|m| *m == RetrievalMode::Lexical);
  }
  for run in run_modes(&mut ix, &qpairs, 10, false, &label, &full_common)? {
    mode_json.insert(run.mode.as_str().to_string(), scale_mode_json(&queries, &run));
    let targets = target_stats(&queries, &run);
    runs.push((format!("{n} pages"), run, targets));
  }
  noop_reindex(&mut ix, &label, common)?;
  let edit1 = edit_reindex(&paths, 1, 1, ix.embedder.is_some())?;
  common.say(edit_line(&label, "one-page edit", &edit1));
  let pct = (n / 100).max(1);
  let edit_pct = edit_reindex(&paths, pct, 2, ix.embedder.is_some())?;
  common.say(edit_line(&label, "1% edit", &edit_pct));
  ix.report.edit = Some(edit1);
  // The sample's memory figures should not include this vault's cached reader.
  release_reader(&paths);

  // Vectors on a sample vault.
  let mut sample_json = Value::Null;
  let mut sample_ix: Option<Indexed> = None;
  let mut sample_tmp = None;
  if let (Some(m), false) = (opts.vector_sample, dense_modes.is_empty()) {
    let sopts = SynthOptions::new(m.max(1), opts.seed);
    let stmp = common.temp(&format!("scale-sample-{m}"))?;
    let (spaths, sgen) = generate_timed(stmp.path(), &sopts, common)?;
    let slabel = format!("sample-{m}");
    let mut six = build_lexical(&spaths, &slabel, common)?;
    let squeries = synth_queries(&sopts, opts.queries);
    let spairs: Vec<(String, String)> = squeries.iter().map(|(q, t, _)| (q.clone(), t.clone())).collect();
    let mut smodes = Map::new();
    for run in run_modes(&mut six, &spairs, 10, false, &slabel, common)? {
      smodes.insert(run.mode.as_str().to_string(), scale_mode_json(&squeries, &run));
      let targets = target_stats(&squeries, &run);
      runs.push((format!("{m}-page sample"), run, targets));
    }
    noop_reindex(&mut six, &slabel, common)?;
    let sedit = edit_reindex(&spaths, 1, 1, six.embedder.is_some())?;
    common.say(edit_line(&slabel, "one-page edit", &sedit));
    six.report.edit = Some(sedit);
    release_reader(&spaths);
    sample_json = json!({
      "pages": m,
      "note": format!("the engine embeds every chunk of a vault, so vectors were measured on a separate {m}-page vault \
                       from the same generator and seed (not a subset of the {n}-page vault); dense-mode latency is on \
                       that vault"),
      "generation": sgen,
      "index": six.report,
      "modes": smodes,
    });
    sample_ix = Some(six);
    sample_tmp = Some(stmp);
  }

  let doc = json!({
    "schema": SCHEMA,
    "kind": "scale",
    "context": context,
    "pages": n,
    "seed": opts.seed,
    "queries": opts.queries,
    "generation": generation,
    "index": ix.report,
    "editOnePercent": edit_pct,
    "modes": mode_json,
    "vectorSample": sample_json,
    "sampled": match (opts.vector_sample, dense_modes.is_empty()) {
      (_, true) => "lexical only (no dense mode requested)".to_string(),
      (Some(m), false) => format!("vectors and dense modes on a separate {m}-page vault; lexical on all {n} pages"),
      (None, false) => format!("everything on all {n} pages"),
    },
  });
  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  let json_path = common.out.join(format!("scale-{n}.json"));
  write_json_file(&json_path, &doc)?;
  out.files.push(json_path);

  let mut md = String::new();
  let _ = writeln!(md, "# Scale: {n} synthetic pages (seed {})\n", opts.seed);
  md.push_str(&context_markdown(&context));
  let _ = writeln!(
    md,
    "- Generated {} pages, {:.1} MiB in {:.0} ms; sampled: {}\n",
    generation["pages"],
    mib(generation["bytes"].as_u64().unwrap_or(0)),
    generation["ms"].as_f64().unwrap_or(0.0),
    doc["sampled"].as_str().unwrap_or("")
  );
  md.push_str("## Index cost\n\n");
  let mut rows: Vec<(&str, &IndexReport)> = vec![(label.as_str(), &ix.report)];
  let sample_label = opts.vector_sample.map(|m| format!("sample-{m}")).unwrap_or_default();
  if let Some(six) = &sample_ix {
    rows.push((sample_label.as_str(), &six.report));
  }
  index_markdown(&mut md, &rows);
  let _ = writeln!(md, "\n{}", edit_line(&label, "1%-of-pages edit", &edit_pct));
  md.push_str("\n## Warm recall (top 10, synthetic queries)\n\n");
  md.push_str(
    "| vault | mode | p50 ms | p95 ms | max ms | query-phase peak (start) RSS MiB | modes used | target@1 | target@10 |\n\
     |---|---|---|---|---|---|---|---|---|\n",
  );
  for (vault, run, t) in &runs {
    let l = ModeRun::latency_of(&run.ranked);
    let _ = writeln!(
      md,
      "| {vault} | {} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |",
      run.mode.as_str(),
      l.p50_ms,
      l.p95_ms,
      l.max_ms,
      fmt_peak(run.peak_rss, run.start_rss),
      fmt_used(&ModeRun::used(&run.ranked)),
      t["targetAt1"],
      t["targetAt10"]
    );
  }
  method_notes(&mut md);
  let md_path = common.out.join(format!("scale-{n}.md"));
  write_text_file(&md_path, &md)?;
  out.files.push(md_path);
  out.markdown = md;
  drop(sample_ix);
  drop(sample_tmp);
  drop(tmp);
  Ok(out)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn modes_parse() {
    assert_eq!(parse_modes("all").unwrap(), ALL_MODES.to_vec());
    assert_eq!(
      parse_modes("quality, lexical,quality").unwrap(),
      vec![RetrievalMode::Quality, RetrievalMode::Lexical]
    );
    assert!(parse_modes("").is_err());
    assert!(parse_modes("fast").is_err());
  }

  #[test]
  fn score_distribution_counts_the_floor() {
    let d = score_distribution(&[0.1, 0.9, 0.5, 0.3], 0.5);
    assert_eq!(d["queries"], 4);
    assert_eq!((d["p25"].as_f64(), d["p50"].as_f64(), d["max"].as_f64()), (Some(0.1), Some(0.3), Some(0.9)));
    assert_eq!(d["atOrAboveFloor"], 2);
    assert_eq!(score_distribution(&[], 0.5)["queries"], 0);
  }

  #[test]
  fn nearest_rank_percentiles() {
    let l = latency(&[5.0, 1.0, 3.0, 2.0, 4.0]);
    assert_eq!((l.samples, l.p50_ms, l.p95_ms, l.max_ms, l.mean_ms), (5, 3.0, 5.0, 5.0, 3.0));
    let v: Vec<f64> = (1..=100).map(f64::from).collect();
    let l = latency(&v);
    assert_eq!((l.p50_ms, l.p95_ms), (50.0, 95.0));
    assert_eq!(latency(&[]), Latency::default());
  }

  #[test]
  fn quoting() {
    assert_eq!(shell_quote("bench"), "bench");
    assert_eq!(shell_quote("a b"), "'a b'");
    assert_eq!(shell_quote("it's"), "'it'\\''s'");
  }
}
