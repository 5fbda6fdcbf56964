//! Index phases of a benchmark: cold lexical and vector builds, no-op and edit reindexes, their costs.

use super::*;

/// Wall time and peak RSS of one phase.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseCost {
  pub ms: f64,
  pub peak_rss_bytes: Option<u64>,
  /// RSS right after the high-water mark was reset (what was already resident).
  pub start_rss_bytes: Option<u64>,
  /// User CPU time of the whole process during the phase (every thread), ms.
  pub user_cpu_ms: Option<f64>,
  /// System CPU time of the whole process during the phase, ms.
  pub sys_cpu_ms: Option<f64>,
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
  /// Everything under the store directory (`<meta>/qmd`).
  pub total_bytes: u64,
  pub lexical_bytes: u64,
  pub vectors_bytes: u64,
  /// Manifests, state, pointer, lock.
  pub other_bytes: u64,
  /// Segments of the live lexical index (tantivy's `meta.json`): more segments, more per-query
  /// work; the cold writer's merge policy decides how many a build leaves.
  pub lexical_segments: u32,
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

pub(super) struct Phase {
  pub(super) result: ReindexResult,
  pub(super) cost: PhaseCost,
}

pub(super) fn reindex_phase(
  paths: &VaultPaths,
  components: &[Component],
  progress: Option<ProgressSink>,
) -> Result<Phase> {
  reset_peak_rss();
  let start_rss = current_rss_bytes();
  let cpu_before = cpu_times_ms();
  let started = Instant::now();
  let opts =
    ReindexOptions { scope: Scope::Changed, components: components.to_vec(), progress, ..Default::default() };
  let result = reindex_vault(paths, &opts);
  let ms = ms_since(started);
  let cpu = cpu_before.zip(cpu_times_ms()).map(|((u0, s0), (u1, s1))| (r3(u1 - u0), r3(s1 - s0)));
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
  Ok(Phase {
    result,
    cost: PhaseCost {
      ms: r3(ms),
      peak_rss_bytes: peak,
      start_rss_bytes: start_rss,
      user_cpu_ms: cpu.map(|c| c.0),
      sys_cpu_ms: cpu.map(|c| c.1),
    },
  })
}

pub(super) fn note_warnings(report: &mut IndexReport, r: &ReindexResult) {
  for w in &r.warnings {
    let line = format!("{}: {}", w.code, w.message);
    if !report.warnings.contains(&line) && report.warnings.len() < 50 {
      report.warnings.push(line);
    }
  }
}

pub(super) fn disk_usage(paths: &VaultPaths) -> DiskUsage {
  let layout = StoreLayout::new(paths.retrieval());
  let total = dir_size(&layout.dir);
  let (lexical, vectors) =
    layout.current().map_or((0, 0), |cur| (dir_size(&cur.lexical_dir()), dir_size(&cur.vectors_dir())));
  DiskUsage {
    total_bytes: total,
    lexical_bytes: lexical,
    vectors_bytes: vectors,
    other_bytes: total.saturating_sub(lexical + vectors),
    lexical_segments: layout.current().map_or(0, |cur| lexical_segments(&cur.lexical_dir())),
  }
}

/// Segments listed in a tantivy index's `meta.json` (0 when unreadable).
fn lexical_segments(dir: &Path) -> u32 {
  std::fs::read(dir.join("meta.json"))
    .ok()
    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    .and_then(|v| v["segments"].as_array().map(|a| a.len() as u32))
    .unwrap_or(0)
}

/// Drop this process's cached reader of a vault (its memory maps and caches).
pub(super) fn release_reader(paths: &VaultPaths) {
  llm_wiki_core::retrieve::engine::evict(&paths.retrieval());
}

pub(super) fn current_manifest(paths: &VaultPaths) -> Result<Arc<Manifest>> {
  Ok(Generation::open_live(&StoreLayout::new(paths.retrieval()))?.manifest)
}

/// A vault with its index and the embedder kept loaded for the whole run (a held reference
/// keeps the idle reaper from releasing it between phases).
pub(super) struct Indexed {
  pub(super) paths: VaultPaths,
  pub(super) report: IndexReport,
  pub(super) embedder: Option<Arc<Embedder>>,
}

pub(super) fn build_index(
  paths: &VaultPaths,
  with_vectors: bool,
  label: &str,
  common: &BenchCommon,
) -> Result<Indexed> {
  let mut ix = build_lexical(paths, label, common)?;
  if with_vectors {
    add_vectors(&mut ix, label, common)?;
  }
  Ok(ix)
}

/// A phase's CPU time: `user U s + system S s`, or `n/a`.
pub(super) fn fmt_cpu(cost: &PhaseCost) -> String {
  match cost.user_cpu_ms.zip(cost.sys_cpu_ms) {
    Some((u, s)) => format!("user {:.1} s + system {:.1} s", u / 1000.0, s / 1000.0),
    None => "n/a".to_string(),
  }
}

/// Cold build of the lexical component.
pub(super) fn build_lexical(paths: &VaultPaths, label: &str, common: &BenchCommon) -> Result<Indexed> {
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
    "{label}: lexical {:.0} ms, {} pages, {} chunks, peak RSS {} MiB, CPU {}",
    report.lexical.ms,
    report.pages,
    report.chunks,
    fmt_mib(report.lexical.peak_rss_bytes),
    fmt_cpu(&report.lexical)
  ));
  report.disk = disk_usage(paths);
  Ok(Indexed { paths: paths.clone(), report, embedder: None })
}

/// Load the embedder with its document graph (timed) and run the vectors component.
pub(super) fn add_vectors(ix: &mut Indexed, label: &str, common: &BenchCommon) -> Result<()> {
  let started = Instant::now();
  let e = match models::document_embedder() {
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
pub(super) fn run_modes(
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

pub(super) fn noop_reindex(ix: &mut Indexed, label: &str, common: &BenchCommon) -> Result<()> {
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
pub(super) fn pick_pages(manifest: &Manifest, count: usize) -> Vec<String> {
  let ids: Vec<&String> = manifest.entries.keys().collect();
  if ids.is_empty() || count == 0 {
    return Vec::new();
  }
  let count = count.min(ids.len());
  let step = ids.len() / count;
  (0..count).map(|i| ids[i * step].clone()).collect()
}

/// Append a unique sentence to each page's body and push its mtime 5 s forward.
pub(super) fn edit_pages(
  paths: &VaultPaths,
  manifest: &Manifest,
  ids: &[String],
  round: usize,
) -> Result<()> {
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
pub(super) fn edit_reindex(
  paths: &VaultPaths,
  count: usize,
  round: usize,
  with_vectors: bool,
) -> Result<EditCost> {
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

pub(super) fn edit_line(label: &str, what: &str, c: &EditCost) -> String {
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

#[cfg(test)]
mod tests {
  use super::*;
  use crate::synth::{generate_vault, SynthOptions};

  #[test]
  fn disk_usage_counts_the_live_lexical_segments() {
    let dir = tempfile::tempdir().unwrap();
    generate_vault(dir.path(), &SynthOptions { pages: 40, cjk_fraction: 0.0, ..Default::default() }).unwrap();
    let paths = VaultPaths::for_root(dir.path());
    assert_eq!(disk_usage(&paths).lexical_segments, 0, "no index yet");
    reindex_phase(&paths, &[Component::Lexical], None).unwrap();
    let disk = disk_usage(&paths);
    assert!(disk.lexical_bytes > 0);
    let segments = disk.lexical_segments;
    // 40 pages fit one writer flush; the count comes from the live generation's meta.json.
    assert!((1..=4).contains(&segments), "{segments} segments");
  }
}
