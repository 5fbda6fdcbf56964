//! The vector phase of a reindex: embed the live chunks that have no vector for the current
//! embedding model, commit them in batches (each batch is a new segment + a new generation, so a
//! cancelled or failed run keeps what it finished), and compact when superseded rows dominate.

use std::collections::HashSet;

use super::generation::Generation;
use super::journal::crash_point;
use super::layout::{GenDir, StoreLayout};
use super::manifest::Manifest;
use super::reindex::{gc_manifests, write_state, ReindexResult};
use super::vectors::{chunk_key, write_segment, SegmentRef, VectorIndex, VectorManifest};
use super::{Component, IndexIssue, Progress, ReindexOptions};
use crate::chunk::chunk_page;
use crate::error::{Error, Result};
use crate::fsutil::now_ms;
use crate::models::{self, TextKind};
use crate::vault::Page;

/// Chunks embedded per committed batch.
pub const VECTOR_COMMIT_BATCH: usize = 512;

fn emit(opts: &ReindexOptions, message: &str, current: u64, total: u64) {
  if let Some(p) = &opts.progress {
    p(Progress {
      vault: None,
      stage: "vectors",
      message: message.to_string(),
      current: Some(current),
      total: Some(total),
    });
  }
}

/// Copy the current generation's vector segments into a staging directory (a forced lexical
/// rebuild keeps vectors: they are keyed by chunk content).
pub fn carry_vectors(layout: &StoreLayout, staging: &GenDir, vault_id: &str) -> Option<VectorManifest> {
  let current = Generation::open(layout.current()).ok()?;
  if current.manifest.vault_id != vault_id {
    return None;
  }
  let vm = current.manifest.vectors.clone()?;
  std::fs::create_dir_all(staging.vectors_dir()).ok()?;
  for s in &vm.segments {
    std::fs::copy(current.dir.vectors_dir().join(&s.file), staging.vectors_dir().join(&s.file)).ok()?;
  }
  Some(vm)
}

/// Texts of the chunks in `wanted`, re-read from their (unchanged) pages.
fn chunk_texts(gen: &Generation, wanted: &HashSet<u64>, wiki: &std::path::Path) -> Vec<(u64, String)> {
  let mut out = Vec::new();
  let mut seen = HashSet::new();
  for (id, entry) in &gen.manifest.entries {
    if !entry.chunks.keys().any(|k| wanted.contains(&k)) {
      continue;
    }
    let path = crate::vault::discover::resolve_page_file(wiki, &entry.rel_path);
    let Ok(bytes) = std::fs::read(&path) else { continue };
    // A page edited since the lexical phase is picked up by the next reindex.
    if super::manifest::sha256_hex(&bytes) != entry.content_hash {
      continue;
    }
    let Ok(page) = Page::parse(id, path, &String::from_utf8_lossy(&bytes)) else {
      continue;
    };
    for c in chunk_page(&page.meta.title, &page.body, page.body_start_line, &Default::default()).chunks {
      let key = chunk_key(&c.id);
      if wanted.contains(&key) && seen.insert(key) {
        out.push((key, c.embedding_text()));
      }
    }
  }
  out
}

/// Publish `vectors` as a new generation of `gen` (commit document only; index unchanged).
fn commit_vectors(gen: &Generation, vectors: VectorManifest, store_id: &str) -> Result<u64> {
  let next = gen_next(gen)?;
  let manifest =
    Manifest { generation: next, built_at_ms: now_ms(), vectors: Some(vectors), ..(*gen.manifest).clone() };
  manifest.save(&gen.dir.manifest_file(next))?;
  let mut writer = gen.lexical.writer(1)?;
  gen.lexical.set_generation(&writer, next)?;
  crash_point("vectors-before-commit");
  if let Err(e) = writer.prepare_commit().and_then(|p| p.commit()) {
    let _ = writer.rollback();
    let _ = std::fs::remove_file(gen.dir.manifest_file(next));
    return Err(e.into());
  }
  write_state(&gen.dir, &manifest, store_id)?;
  gc_manifests(&gen.dir, next);
  Ok(next)
}

fn gen_next(gen: &Generation) -> Result<u64> {
  let searcher = gen.lexical.reader.searcher();
  Ok(gen.lexical.generation_of(&searcher)?.max(gen.generation) + 1)
}

/// Remove segment files no manifest of the last two generations references.
fn gc_segments(dir: &GenDir) {
  let mut referenced = HashSet::new();
  for g in dir.manifest_generations() {
    if let Ok(m) = Manifest::load(&dir.manifest_file(g), None) {
      for s in m.vectors.iter().flat_map(|v| v.segments.iter()) {
        referenced.insert(s.file.clone());
      }
    }
  }
  for e in std::fs::read_dir(dir.vectors_dir()).into_iter().flatten().flatten() {
    let name = e.file_name().to_string_lossy().into_owned();
    if name.ends_with(".vec") && !referenced.contains(&name) {
      let _ = std::fs::remove_file(e.path());
    }
  }
}

/// Embed what is missing in `current/`. Unavailable models are a warning (lexical keeps working).
/// `current` is the generation the lexical phase left open when it committed nothing (saves
/// reopening it); otherwise the committed one is opened here.
pub fn vector_phase(
  layout: &StoreLayout,
  opts: &ReindexOptions,
  current: Option<Generation>,
  res: &mut ReindexResult,
) -> Result<()> {
  // Missing models are a warning: the lexical index is up to date and recall degrades to it.
  let unavailable = |res: &mut ReindexResult, e: &Error| -> Result<()> {
    res.warnings.push(IndexIssue::new(
      "vectors_unavailable",
      format!("vectors were not updated: {e}; recall uses the lexical index"),
    ));
    Ok(())
  };
  // Identify the model from its manifest; it is only loaded when there is something to embed.
  let model = match models::resolve_embed_dir(&models::effective_config()).map(|d| models::ModelDir::open(&d))
  {
    Some(Ok(m)) => m.manifest,
    Some(Err(e)) => return unavailable(res, &e),
    None => return unavailable(res, &Error::ModelUnavailable("no embedding model configured".into())),
  };
  let (model_id, dims) = (model.id.as_str(), model.dims);
  let mut gen = match current {
    Some(g) => g,
    None => Generation::open(layout.current())?,
  };
  let store_id = gen.state.as_ref().map(|s| s.store_id.clone()).unwrap_or_default();
  let wiki = layout.dir.parent().and_then(|meta| meta.parent()).map(|d| d.join("wiki"));
  let live = gen.manifest.chunk_keys();
  let force = opts.force && opts.components.contains(&Component::Vectors);
  let compatible: Option<VectorManifest> =
    gen.manifest.vectors.clone().filter(|v| v.model == model_id && v.dims == dims && !force);
  let (mut segments, present, stored) = match &compatible {
    Some(vm) => {
      let idx = VectorIndex::open(&gen.dir.vectors_dir(), vm, &live)?;
      (vm.segments.clone(), idx.present().clone(), idx.stored_rows())
    }
    None => (Vec::new(), HashSet::new(), 0),
  };
  let missing: HashSet<u64> = live.difference(&present).copied().collect();
  res.vectors.skipped = present.len() as u32;
  let compact = compatible.as_ref().filter(|_| stored > 256 && stored > 2 * present.len());
  let model_changed = compatible.is_none() && gen.manifest.vectors.is_some();
  if missing.is_empty() && compact.is_none() && !model_changed {
    return Ok(());
  }
  let embedder = match models::embedder() {
    Ok(e) => e,
    Err(e @ (Error::ModelUnavailable(_) | Error::RuntimeUnavailable(_))) => return unavailable(res, &e),
    Err(e) => return Err(e),
  };
  // Compact when most stored rows are dead or superseded (one pass, before adding new rows).
  if let Some(vm) = compact {
    let idx = VectorIndex::open(&gen.dir.vectors_dir(), vm, &live)?;
    let vecs = idx.vectors(&present);
    let mut rows: Vec<(u64, Vec<f32>)> = vecs.into_iter().collect();
    rows.sort_by_key(|(k, _)| *k);
    let seg = write_segment(
      &gen.dir.vectors_dir(),
      &format!("seg-{}-compact.vec", gen_next(&gen)?),
      embedder.dims(),
      &rows,
    )?;
    segments = vec![seg];
    let vm =
      VectorManifest { model: embedder.id().to_string(), dims: embedder.dims(), segments: segments.clone() };
    commit_vectors(&gen, vm, &store_id)?;
    gen = Generation::open(layout.current())?;
  }
  if missing.is_empty() {
    if model_changed {
      // Model changed and nothing is live: publish an empty vector set for the new model.
      let vm =
        VectorManifest { model: embedder.id().to_string(), dims: embedder.dims(), segments: Vec::new() };
      commit_vectors(&gen, vm, &store_id)?;
    }
    return Ok(());
  }
  let Some(wiki) = wiki else {
    return Err(Error::Index("cannot locate the wiki directory of this store".into()));
  };
  let texts = chunk_texts(&gen, &missing, &wiki);
  let total = texts.len() as u64;
  emit(opts, "embedding chunks", 0, total);
  let mut done = 0u64;
  for batch in texts.chunks(VECTOR_COMMIT_BATCH) {
    opts.cancel.check()?;
    // Inference pads each batch to its longest text: embedding similar lengths together wastes
    // less compute on padding. Rows are keyed by chunk, so their order in a segment is free.
    let mut batch = batch.to_vec();
    batch.sort_by_key(|(_, t)| t.len());
    let strings: Vec<String> = batch.iter().map(|(_, t)| t.clone()).collect();
    let base = done;
    let vecs = embedder.embed(&strings, TextKind::Document, &opts.cancel, &mut |n| {
      emit(opts, "embedding chunks", base + n as u64, total)
    })?;
    let rows: Vec<(u64, Vec<f32>)> = batch.iter().map(|(k, _)| *k).zip(vecs).collect();
    let next = gen_next(&gen)?;
    let seg: SegmentRef =
      write_segment(&gen.dir.vectors_dir(), &format!("seg-{next}.vec"), embedder.dims(), &rows)?;
    segments.push(seg);
    let vm =
      VectorManifest { model: embedder.id().to_string(), dims: embedder.dims(), segments: segments.clone() };
    commit_vectors(&gen, vm, &store_id)?;
    super::bump_epoch(&layout.dir);
    res.generation = next;
    done += batch.len() as u64;
    res.vectors.generated += batch.len() as u32;
    gen = Generation::open(layout.current())?;
  }
  gc_segments(&gen.dir);
  Ok(())
}
