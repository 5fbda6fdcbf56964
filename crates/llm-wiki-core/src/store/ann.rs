//! Approximate nearest-neighbour index over a store's chunk vectors, for stores too large for the
//! exact scan to stay fast (see [`ANN_MIN_ROWS`]). The graph is an HNSW built by `usearch` over
//! the int8 rows exactly as the segments store them (cosine is scale-free, so the per-row scales
//! are not needed); it is only a candidate generator: every candidate is rescored with the exact
//! integer dot product of the segments, so scores equal the exact scan's.
//!
//! The index covers the vectors as of its build. A chunk's vector is a pure function of its
//! content id and the model, so the index stays valid for later generations of the same model:
//! rows added since are scanned exactly (the delta), rows no longer live are filtered out of the
//! graph search (tombstones), and the vector phase rebuilds the index when delta + tombstones pass
//! [`REBUILD_FRACTION`] of it. Results are therefore always those of the current vectors.
//!
//! File `vectors/ann-<generation>.ann` (little endian), listed by the commit document
//! (`VectorManifest::ann`) like a segment and written the same way (temp file, fsync, rename,
//! fsync of the directory) before the commit that lists it:
//! - header, 4,096 bytes: magic `LWANN001`, dims u32, 4 reserved bytes, keys u64, blob length u64,
//!   CRC-32 u32 of everything after the header, model id length u32, model id (UTF-8);
//! - `keys` chunk ids (u64, ascending), zero padding to a multiple of 4,096 bytes;
//! - the usearch index as `save_to_buffer` wrote it (viewed in place from the mapped file).
//!
//! A missing, truncated, corrupt or mismatched file is never used: the reader falls back to the
//! exact scan and reports why ([`AnnError`]).

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use memmap2::{Mmap, MmapMut};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsutil::sync_dir;

const MAGIC: &[u8; 8] = b"LWANN001";
const HEADER: usize = 4096;
/// Graph degree (usearch's default, 16): recall@10 ≥ 0.97 at 0.06 % of the rows visited on
/// SciFact (see docs/BENCHMARKS.md).
const CONNECTIVITY: usize = 16;
/// Candidate list while building (usearch's default, 128).
const EXPANSION_ADD: usize = 128;
/// Candidate list while searching: at least this, and at least twice the hits asked for
/// (fitted on the synthetic 100k-page set and SciFact's dev queries, docs/BENCHMARKS.md).
pub const EXPANSION_SEARCH: usize = 128;

/// Concurrent searches one open index serves (recalls run on a blocking pool; a few per core).
const SEARCH_THREADS: usize = 32;

/// Live rows from which [`AnnMode::Auto`] uses (and the vector phase builds) the index. The exact
/// scan costs ~90 ns per row on the loaded 2-core bench machine (332k rows: 29 ms p50,
/// `bench vectors-scale`), so below 100k rows it stays under ~10 ms of the 60 ms hybrid budget and
/// exact results are worth more than the few ms an approximate search would save.
pub const ANN_MIN_ROWS: usize = 100_000;

/// The index is rebuilt when rows added since its build plus rows it holds that are no longer
/// live exceed this fraction of its size: the delta scan stays ≤ 10 % of a full exact scan and
/// filtered-out tombstones stay too few to hurt the graph search, while rebuilds happen after
/// geometric growth only (total build work stays proportional to n log n).
pub const REBUILD_FRACTION: f64 = 0.10;

/// Whether searches use the ANN index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnMode {
  /// Above [`ANN_MIN_ROWS`] live rows, when a valid index exists (the default).
  Auto,
  /// Whenever a valid index exists, and the vector phase builds one at any size.
  On,
  /// Never: exact scan only, and the vector phase builds none.
  Off,
}

impl AnnMode {
  /// From `LLM_WIKI_ANN` (`auto`, `on`, `off`; anything else or unset is `auto`).
  pub fn from_env() -> AnnMode {
    match std::env::var("LLM_WIKI_ANN").as_deref() {
      Ok("on") | Ok("1") => AnnMode::On,
      Ok("off") | Ok("0") => AnnMode::Off,
      _ => AnnMode::Auto,
    }
  }

  /// Whether an index is wanted for `rows` live rows.
  pub fn wanted(self, rows: usize) -> bool {
    match self {
      AnnMode::Auto => rows >= ANN_MIN_ROWS,
      AnnMode::On => rows > 0,
      AnnMode::Off => false,
    }
  }
}

/// An ANN file listed in a commit document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnnRef {
  /// File name inside `vectors/`.
  pub file: String,
  /// Vectors the index holds.
  pub rows: u64,
}

/// Why an ANN file was not used (the search fell back to the exact scan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnError(pub String);

impl std::fmt::Display for AnnError {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.0)
  }
}

/// A file name the ANN writer produces: a plain `ann-*.ann` name inside `vectors/`.
pub fn is_ann_name(name: &str) -> bool {
  name.starts_with("ann-")
    && name.ends_with(".ann")
    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

fn options(dims: usize) -> usearch::IndexOptions {
  usearch::IndexOptions {
    dimensions: dims,
    metric: usearch::MetricKind::Cos,
    quantization: usearch::ScalarKind::I8,
    connectivity: CONNECTIVITY,
    expansion_add: EXPANSION_ADD,
    expansion_search: EXPANSION_SEARCH,
    multi: false,
  }
}

fn keys_len(n: usize) -> usize {
  (n * 8).div_ceil(HEADER) * HEADER
}

/// Build an index over `rows` (chunk id, int8 vector as stored) and write it to `dir/file`
/// atomically. Rows are added on rayon's threads above 20k rows (the graph then depends on
/// scheduling; recall does not, measurably); below, in order, so small builds are reproducible.
/// Memory: the in-memory index (≈ dims + 150 bytes per row) until it is written.
pub fn build(dir: &Path, file: &str, model: &str, dims: usize, rows: &[(u64, &[i8])]) -> Result<AnnRef> {
  let fail = |what: &str, e: &dyn std::fmt::Display| Error::Index(format!("ANN index {what}: {e}"));
  if !is_ann_name(file) {
    return Err(Error::Index(format!("'{file}' is not an ANN file name")));
  }
  if model.len() > HEADER - 64 {
    return Err(Error::Index("model id too long for the ANN header".into()));
  }
  if rows.iter().any(|(_, v)| v.len() != dims) {
    return Err(Error::Index(format!("ANN rows must have {dims} dims")));
  }
  let index = usearch::Index::new(&options(dims)).map_err(|e| fail("create", &e))?;
  crate::pool::global();
  let threads = if rows.len() > 20_000 { rayon::current_num_threads().max(1) } else { 1 };
  index.reserve_capacity_and_threads(rows.len().max(1), threads).map_err(|e| fail("reserve", &e))?;
  if threads > 1 {
    use rayon::prelude::*;
    rows.par_iter().try_for_each(|(k, v)| index.add::<i8>(*k, v)).map_err(|e| fail("add", &e))?;
  } else {
    for (k, v) in rows {
      index.add::<i8>(*k, v).map_err(|e| fail("add", &e))?;
    }
  }
  let mut keys: Vec<u64> = rows.iter().map(|(k, _)| *k).collect();
  keys.sort_unstable();
  keys.dedup();
  let blob = index.serialized_length();
  let klen = keys_len(keys.len());
  let total = HEADER + klen + blob;
  let path = dir.join(file);
  let tmp = dir.join(format!(".{file}.tmp-{}", std::process::id()));
  let written = (|| -> std::result::Result<(), String> {
    let f = std::fs::OpenOptions::new()
      .read(true)
      .write(true)
      .create(true)
      .truncate(true)
      .open(&tmp)
      .map_err(|e| e.to_string())?;
    f.set_len(total as u64).map_err(|e| e.to_string())?;
    // SAFETY: the temp file is ours alone until it is renamed into place.
    let mut map = unsafe { MmapMut::map_mut(&f) }.map_err(|e| e.to_string())?;
    for (i, k) in keys.iter().enumerate() {
      map[HEADER + i * 8..HEADER + i * 8 + 8].copy_from_slice(&k.to_le_bytes());
    }
    index.save_to_buffer(&mut map[HEADER + klen..]).map_err(|e| e.to_string())?;
    let crc = crc32fast::hash(&map[HEADER..]);
    let mut h = Vec::with_capacity(HEADER);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&(dims as u32).to_le_bytes());
    h.extend_from_slice(&[0; 4]);
    h.extend_from_slice(&(keys.len() as u64).to_le_bytes());
    h.extend_from_slice(&(blob as u64).to_le_bytes());
    h.extend_from_slice(&crc.to_le_bytes());
    h.extend_from_slice(&(model.len() as u32).to_le_bytes());
    h.extend_from_slice(model.as_bytes());
    map[..h.len()].copy_from_slice(&h);
    map.flush().map_err(|e| e.to_string())?;
    drop(map);
    f.sync_all().map_err(|e| e.to_string())
  })();
  drop(index);
  if let Err(e) = written {
    let _ = std::fs::remove_file(&tmp);
    return Err(Error::Index(format!("ANN index {}: {e}", tmp.display())));
  }
  std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
  sync_dir(dir);
  Ok(AnnRef { file: file.to_string(), rows: keys.len() as u64 })
}

/// Bytes of usearch's dense-index head (`index_dense_head_buffer_t`).
const USEARCH_HEAD: usize = 64;
/// Bytes of usearch's graph header (`index_serialized_header_t`: size, connectivity,
/// connectivity_base, max_level, entry_slot).
const GRAPH_HEADER: usize = 40;
/// Levels a graph may claim: HNSW levels grow with log(rows) / log(connectivity) (about 5 for a
/// billion rows at connectivity 16); more is a crafted file.
const MAX_LEVEL: u64 = 64;

/// Check that the usearch serialization `blob` (as `save_to_buffer` writes a dense index: rows and
/// columns as u32, the int8 vectors, the 64-byte head, the graph header, one i16 level per node,
/// then the nodes: key, level, and per level a u32 neighbour count and that level's slots)
/// describes `n` rows of `dims` bytes and that every node and neighbour lies within it. usearch's
/// `view` checks the node sizes against the buffer but trusts the vector width, the neighbour
/// counts and the slots, so a crafted file with a valid checksum would otherwise make a search
/// read outside the mapping. One pass over the graph (about 1/4 of the CRC's cost).
fn check_graph(blob: &[u8], n: u64, dims: usize) -> std::result::Result<(), String> {
  let short = || "usearch data shorter than it describes".to_string();
  let slice = |at: usize, len: usize| at.checked_add(len).and_then(|end| blob.get(at..end)).ok_or_else(short);
  let u32_at = |at: usize| slice(at, 4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()));
  let u64_at = |at: usize| slice(at, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
  let (rows, cols) = (u32_at(0)? as u64, u32_at(4)? as usize);
  if rows != n || cols != dims {
    return Err(format!("usearch vectors are {rows} x {cols}, the header says {n} x {dims}"));
  }
  let vectors = (rows as usize).checked_mul(cols).ok_or_else(short)?;
  let mut at = 8usize.checked_add(vectors).and_then(|x| x.checked_add(USEARCH_HEAD)).ok_or_else(short)?;
  let (size, conn, base, max_level, entry) =
    (u64_at(at)?, u64_at(at + 8)?, u64_at(at + 16)?, u64_at(at + 24)?, u64_at(at + 32)?);
  if size != n || conn != CONNECTIVITY as u64 || base != 2 * CONNECTIVITY as u64 || max_level > MAX_LEVEL {
    return Err(format!(
      "usearch graph of {size} nodes, connectivity {conn}/{base}, {max_level} levels is not one this engine writes"
    ));
  }
  if size > 0 && entry >= size {
    return Err(format!("usearch entry node {entry} of {size}"));
  }
  at += GRAPH_HEADER;
  let levels = slice(at, n as usize * 2)?;
  at += levels.len();
  let (conn, base) = (conn as usize, base as usize);
  for (i, l) in levels.chunks_exact(2).enumerate() {
    let level = i16::from_le_bytes([l[0], l[1]]);
    if level < 0 || level as u64 > max_level {
      return Err(format!("usearch node {i} at level {level}"));
    }
    // Key (u64) and level (i16), then the neighbour lists of levels 0..=level.
    if slice(at + 8, 2)? != l {
      return Err(format!("usearch node {i} does not repeat its level"));
    }
    at += 10;
    for cap in std::iter::once(base).chain(std::iter::repeat_n(conn, level as usize)) {
      let count = u32_at(at)? as usize;
      if count > cap {
        return Err(format!("usearch node {i} lists {count} neighbours (at most {cap})"));
      }
      let slots = slice(at + 4, cap * 4)?;
      if slots[..count * 4].chunks_exact(4).any(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as u64 >= n)
      {
        return Err(format!("usearch node {i} names a neighbour outside the graph"));
      }
      at += 4 + cap * 4;
    }
  }
  if at != blob.len() {
    return Err(format!("usearch data of {} bytes, the graph describes {at}", blob.len()));
  }
  Ok(())
}

/// An open ANN file: the usearch graph viewed in place from the mapped file, and its key set.
pub struct AnnFile {
  // Declared before `map`: dropped first, while the bytes it views are still mapped.
  index: usearch::Index,
  keys: HashSet<u64>,
  /// Embedding model id the file was built for.
  pub model: String,
  /// Vector dimensions.
  pub dims: usize,
  #[allow(dead_code)]
  map: Mmap,
}

/// Open files, shared by every generation that lists them (a file is never rewritten in place:
/// each build writes a new name), so the checksum and the key set are paid once per process.
static OPEN: Mutex<Vec<(std::path::PathBuf, u64, Weak<AnnFile>)>> = Mutex::new(Vec::new());

impl AnnFile {
  /// Map and check `dir/r.file` for `model` / `dims` (cached while any reader holds it).
  pub fn open(
    dir: &Path,
    r: &AnnRef,
    model: &str,
    dims: usize,
  ) -> std::result::Result<Arc<AnnFile>, AnnError> {
    if !is_ann_name(&r.file) {
      return Err(AnnError(format!("the commit names '{}', not an ANN file", r.file)));
    }
    let path = dir.join(&r.file);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| AnnError(format!("{}: {e}", path.display())))?;
    if !meta.is_file() {
      return Err(AnnError(format!("{} is not a regular file", path.display())));
    }
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    open.retain(|(_, _, w)| w.strong_count() > 0);
    if let Some(f) =
      open.iter().find(|(p, len, _)| *p == path && *len == meta.len()).and_then(|(_, _, w)| w.upgrade())
    {
      if f.model == model && f.dims == dims && f.keys.len() as u64 == r.rows {
        return Ok(f);
      }
    }
    let f = Arc::new(Self::open_uncached(&path, r, model, dims)?);
    open.push((path, meta.len(), Arc::downgrade(&f)));
    Ok(f)
  }

  fn open_uncached(
    path: &Path,
    r: &AnnRef,
    model: &str,
    dims: usize,
  ) -> std::result::Result<AnnFile, AnnError> {
    let bad = |m: String| AnnError(format!("ANN file {}: {m}", path.display()));
    let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    if f.metadata().map_err(|e| bad(e.to_string()))?.len() < HEADER as u64 {
      return Err(bad("bad header (shorter than one)".into()));
    }
    // SAFETY: ANN files are immutable once renamed into place (each build writes a new name).
    let map = unsafe { Mmap::map(&f) }.map_err(|e| bad(e.to_string()))?;
    if map.len() < HEADER || &map[..8] != MAGIC {
      return Err(bad("bad header".into()));
    }
    let u32_at = |o: usize| u32::from_le_bytes(map[o..o + 4].try_into().unwrap_or_default());
    let u64_at = |o: usize| u64::from_le_bytes(map[o..o + 8].try_into().unwrap_or_default());
    let (file_dims, n, blob, crc, mlen) =
      (u32_at(8) as usize, u64_at(16), u64_at(24), u32_at(32), u32_at(36));
    let mlen = mlen as usize;
    if mlen > HEADER - 40 {
      return Err(bad("bad header".into()));
    }
    let file_model = String::from_utf8_lossy(&map[40..40 + mlen]).into_owned();
    if file_model != model || file_dims != dims {
      return Err(bad(format!(
        "built for {file_model} ({file_dims} dims), the vectors are {model} ({dims} dims)"
      )));
    }
    if n != r.rows {
      return Err(bad(format!("holds {n} rows, the commit lists {}", r.rows)));
    }
    let klen = keys_len(n as usize);
    let expected = (HEADER as u64).checked_add(klen as u64).and_then(|x| x.checked_add(blob));
    if expected != Some(map.len() as u64) {
      return Err(bad(format!("{} bytes, the header describes {expected:?} (truncated?)", map.len())));
    }
    if crc32fast::hash(&map[HEADER..]) != crc {
      return Err(bad("checksum mismatch (corrupt)".into()));
    }
    let blob = &map[HEADER + klen..];
    let meta = usearch::Index::metadata_from_buffer(blob).map_err(|e| bad(e.to_string()))?;
    if meta.dimensions as usize != dims
      || meta.quantization != usearch::ScalarKind::I8
      || meta.metric != usearch::MetricKind::Cos
      || meta.count_present != n
    {
      return Err(bad("index metadata do not match its header".into()));
    }
    check_graph(blob, n, dims).map_err(bad)?;
    let index = usearch::Index::new(&options(dims)).map_err(|e| bad(e.to_string()))?;
    // Search contexts: a view keeps the thread count reserved before it. A search finding all of
    // them busy fails, and that search falls back to the exact scan.
    index.reserve_capacity_and_threads(1, SEARCH_THREADS).map_err(|e| bad(e.to_string()))?;
    // SAFETY: `map` lives in the same struct and is dropped after `index`; the file is immutable.
    unsafe { index.view_from_buffer(blob) }.map_err(|e| bad(e.to_string()))?;
    index.change_expansion_search(EXPANSION_SEARCH);
    let keys: HashSet<u64> = (0..n as usize)
      .map(|i| u64::from_le_bytes(map[HEADER + i * 8..HEADER + i * 8 + 8].try_into().unwrap_or_default()))
      .collect();
    Ok(AnnFile { index, keys, model: model.to_string(), dims, map })
  }

  /// Whether the index holds `key`.
  pub fn contains(&self, key: u64) -> bool {
    self.keys.contains(&key)
  }

  /// Rows the index holds.
  pub fn len(&self) -> usize {
    self.keys.len()
  }

  /// Whether the index holds no row.
  pub fn is_empty(&self) -> bool {
    self.keys.is_empty()
  }

  /// Up to `k` keys near the int8 query among those `keep` accepts (approximate; unordered use).
  pub fn search(
    &self,
    query: &[i8],
    k: usize,
    keep: &dyn Fn(u64) -> bool,
  ) -> std::result::Result<Vec<u64>, AnnError> {
    if k == 0 || self.keys.is_empty() {
      return Ok(Vec::new());
    }
    let m = self
      .index
      .filtered_search::<i8, _>(query, k, |key: u64| keep(key))
      .map_err(|e| AnnError(e.to_string()))?;
    Ok(m.keys)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  const DIMS: usize = 16;

  fn rows(n: usize) -> Vec<(u64, Vec<i8>)> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n as u64)
      .map(|k| {
        let v = (0..DIMS)
          .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 56) as i8
          })
          .collect();
        (k + 1, v)
      })
      .collect()
  }

  fn built(dir: &Path, file: &str, model: &str, n: usize) -> AnnRef {
    let rows = rows(n);
    let refs: Vec<(u64, &[i8])> = rows.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    build(dir, file, model, DIMS, &refs).unwrap()
  }

  /// Rewrite `file` with `edit` applied and a valid checksum (what a crafted file would carry).
  fn crafted(dir: &Path, file: &str, edit: impl FnOnce(&mut [u8], usize)) {
    let path = dir.join(file);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
    // The first node's neighbour count: after the keys, the vectors, usearch's head and graph
    // header, and the levels, past the node's key and level.
    let node0 = HEADER + keys_len(n) + 8 + n * DIMS + USEARCH_HEAD + GRAPH_HEADER + 2 * n + 10;
    edit(&mut bytes, node0);
    let crc = crc32fast::hash(&bytes[HEADER..]);
    bytes[32..36].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
  }

  #[test]
  fn a_crafted_graph_with_a_valid_checksum_is_refused_before_usearch_views_it() {
    let t = tempfile::tempdir().unwrap();
    let good = built(t.path(), "ann-1.ann", "m", 300);
    assert!(AnnFile::open(t.path(), &good, "m", DIMS).is_ok(), "a genuine file opens");

    // A neighbour slot far outside the graph (a search would read past the mapping).
    let r = built(t.path(), "ann-2.ann", "m", 300);
    crafted(t.path(), "ann-2.ann", |b, at| {
      assert!(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) > 0, "node 0 has neighbours");
      b[at + 4..at + 8].copy_from_slice(&0x7fff_ff00u32.to_le_bytes());
    });
    let e = AnnFile::open(t.path(), &r, "m", DIMS).err().expect("refused");
    assert!(e.0.contains("outside the graph"), "{e}");

    // A neighbour count past the node's capacity (the slots would run into the next nodes and
    // past the end).
    let r = built(t.path(), "ann-3.ann", "m", 300);
    crafted(t.path(), "ann-3.ann", |b, at| b[at..at + 4].copy_from_slice(&100_000u32.to_le_bytes()));
    let e = AnnFile::open(t.path(), &r, "m", DIMS).err().expect("refused");
    assert!(e.0.contains("neighbours (at most"), "{e}");

    // Vector rows narrower than the dimensions (distances would read past the matrix).
    let r = built(t.path(), "ann-4.ann", "m", 300);
    crafted(t.path(), "ann-4.ann", |b, _| {
      let at = HEADER + keys_len(300) + 4;
      b[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
    });
    assert!(AnnFile::open(t.path(), &r, "m", DIMS).is_err());
  }

  #[test]
  fn a_model_id_longer_than_the_header_holds_is_refused_and_one_that_fits_round_trips() {
    let t = tempfile::tempdir().unwrap();
    let rows = rows(10);
    let refs: Vec<(u64, &[i8])> = rows.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    for len in [HEADER - 63, 4096, 5000] {
      let e = build(t.path(), "ann-9.ann", &"x".repeat(len), DIMS, &refs).expect_err("refused");
      assert!(e.to_string().contains("too long"), "{e}");
    }
    let model = "y".repeat(HEADER - 64);
    let r = build(t.path(), "ann-8.ann", &model, DIMS, &refs).unwrap();
    let f = AnnFile::open(t.path(), &r, &model, DIMS).unwrap();
    assert_eq!(f.model, model);
  }
}
