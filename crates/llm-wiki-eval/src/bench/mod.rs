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
//! * [`run_memory`]: `recallMemory` on the pi vault with a curated relation overlay: bundle
//!   metrics per slice, the "without typed-link assembly" ablation, assembly latency.
//! * [`run_calibration`]: fits the embedding model's cosine mapping on a split disjoint from the
//!   reported queries and writes reliability curves (top-1 score bucket → precision) per mode.
//! * [`run_long_queries`]: lexical mode vs a plain BM25 baseline on written long queries and on a
//!   collection's own queries.
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
//! * Index size: bytes of the regular files under the store directory (`<meta>/qmd`).

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
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::fsutil::{atomic_write, dir_size, now_iso};
use llm_wiki_core::models::{self, Embedder};
use llm_wiki_core::retrieve::confidence::AUTOMATIC_FLOOR;
use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode, Scoring};
use llm_wiki_core::store::generation::Generation;
use llm_wiki_core::store::layout::{StoreLayout, ENGINE_NAME, ENGINE_VERSION, INDEX_FORMAT_VERSION};
use llm_wiki_core::store::manifest::Manifest;
use llm_wiki_core::store::{
  reindex_vault, Component, ProgressSink, ReindexOptions, ReindexProgressEvent, ReindexResult, Scope,
};
use llm_wiki_core::vault::page::Role;
use llm_wiki_core::vault::VaultPaths;

mod calibration;
mod collection;
mod feedback;
mod gates;
mod graph;
mod index;
mod longq;
mod memory;
mod memory_latency;
mod pi;
mod precision;
mod prompts;
mod queries;
mod report;
mod scale;
mod vectors_scale;
mod watch;

pub use self::{
  calibration::*, collection::*, feedback::*, gates::*, graph::*, index::*, longq::*, memory::*,
  memory_latency::*, pi::*, precision::*, prompts::*, queries::*, report::*, scale::*, vectors_scale::*,
  watch::*,
};

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
  p50/p95 are nearest-rank percentiles of the timed pass, wall clock around recall_wiki; the first \
  query (where reported) is the warm-up pass's first, which opens the vault's reader.";

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
  /// Keep vault copies under this directory, one per label, and reuse them: a rerun reindexes
  /// incrementally (unchanged chunks keep their vectors), so indexing figures are not cold.
  pub reuse_dir: Option<PathBuf>,
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
      reuse_dir: None,
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
    if let Some(dir) = &self.reuse_dir {
      let path = std::path::absolute(dir).map_err(|e| Error::io("resolve", dir, e))?.join(label);
      create_dir(&path)?;
      self.say(format!(
        "reusing vault copy at {} (indexing figures are incremental, not cold)",
        path.display()
      ));
      return Ok(TempDir { path, keep: true });
    }
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

  /// A BEIR set's pages copied into a vault in [`Self::temp`]`(label)` ([`prepare_beir_vault`]):
  /// the directory's guard, the vault and its page count.
  fn beir_copy(&self, beir_dir: &Path, label: &str) -> Result<(TempDir, VaultPaths, usize)> {
    let tmp = self.temp(label)?;
    let (paths, pages) = prepare_beir_vault(beir_dir, tmp.path())?;
    Ok((tmp, paths, pages))
  }

  /// A vault directory copied into [`Self::temp`]`(label)` ([`prepare_pi_vault`]): the
  /// directory's guard, the vault and its page count.
  fn vault_copy(&self, vault: &Path, label: &str) -> Result<(TempDir, VaultPaths, usize)> {
    let tmp = self.temp(label)?;
    let (paths, pages) = prepare_pi_vault(vault, tmp.path())?;
    Ok((tmp, paths, pages))
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

/// Write `doc` to `path` and list the file in `out`.
fn record_json(out: &mut BenchOutput, path: PathBuf, doc: &Value) -> Result<()> {
  write_json_file(&path, doc)?;
  out.files.push(path);
  Ok(())
}

/// Write the report `md` to `path`, list the file in `out` and make `md` its Markdown.
fn record_markdown(out: &mut BenchOutput, path: PathBuf, md: String) -> Result<()> {
  write_text_file(&path, &md)?;
  out.files.push(path);
  out.markdown = md;
  Ok(())
}

/// A directory's name as a label (a set's name in file names and vault copies), `default` for a
/// path without one.
fn dir_label(dir: &Path, default: &str) -> String {
  dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| default.to_string())
}

fn to_value<T: Serialize>(v: &T) -> Value {
  serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Copy the flat `<dir>/vault/*.md` pages of a BEIR-style set into `<root>/.llm-wiki/wiki/` and
/// write `<root>/.llm-wiki/config.json` `{"name":"bench"}` unless one exists (a reused copy).
/// Returns the vault and the page count.
pub fn prepare_beir_vault(beir_dir: &Path, root: &Path) -> Result<(VaultPaths, usize)> {
  let paths = VaultPaths::new_layout(root);
  create_dir(&paths.wiki)?;
  // A reused copy keeps its config: the engine backfilled a `vault_id` into it, and a new id
  // would make the kept index another vault's (a cold rebuild instead of an incremental one).
  if !paths.config_file().is_file() {
    write_text_file(&paths.config_file(), "{\"name\":\"bench\"}")?;
  }
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
