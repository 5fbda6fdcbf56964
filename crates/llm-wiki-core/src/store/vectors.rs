//! Chunk vectors of a generation: immutable segment files under `vectors/`, memory-mapped, listed
//! by the commit document of the lexical index. An update appends a segment with the newly
//! embedded chunks (a chunk id + model id pair is never embedded twice); rows whose chunk is no
//! longer live are skipped, and dropped when segments are merged. Segments are written (and
//! fsynced, with their directory) before the commit that lists them, so readers see whole
//! generations only.
//!
//! Segment format (little endian): 32-byte header `LWVEC001`, dims u32, rows u32, dtype u8
//! (1 = int8), padding; then `rows` chunk ids (u64), `rows` f32 scales, and `rows × dims` int8
//! components. A row's vector is `scale × i8[]` (symmetric per-row quantization; cosine error of
//! the stored unit vectors stays below 0.01).

use std::collections::{HashMap, HashSet};
use std::io::{BufWriter, Write};
use std::path::Path;

use std::sync::{Arc, OnceLock};

use memmap2::Mmap;
use serde::{Deserialize, Serialize};

use super::ann::{AnnFile, AnnMode, AnnRef};
use crate::error::{Error, Result};
use crate::fsutil::sync_dir;

const MAGIC: &[u8; 8] = b"LWVEC001";
const HEADER: usize = 32;
const DTYPE_I8: u8 = 1;

/// A segment listed in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentRef {
  /// File name inside `vectors/`.
  pub file: String,
  /// Vectors in the segment.
  pub rows: u32,
}

/// The vectors of a generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VectorManifest {
  /// Embedding model id the vectors belong to.
  pub model: String,
  /// Vector dimensions.
  pub dims: usize,
  /// Segments in write order (later rows win for a repeated chunk id).
  pub segments: Vec<SegmentRef>,
  /// The ANN index over (a past state of) these vectors, when one was built (`store::ann`).
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub ann: Option<AnnRef>,
}

/// Numeric form of a 16-hex-digit chunk id.
pub fn chunk_key(id: &str) -> u64 {
  u64::from_str_radix(id, 16).unwrap_or_else(|_| crate::util::hash::page_key(id))
}

/// Quantize a vector to int8 with one scale.
pub fn quantize(v: &[f32]) -> (f32, Vec<i8>) {
  let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
  if max == 0.0 {
    return (0.0, vec![0; v.len()]);
  }
  let scale = max / 127.0;
  (scale, v.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8).collect())
}

/// Write a segment file atomically (temp file, fsync, rename, fsync of the directory): the
/// 32-byte header for `rows` rows of `dims` dims, then what `body` writes (ids, scales, data).
fn write_segment_file(
  dir: &Path,
  file: &str,
  dims: usize,
  rows: usize,
  body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<SegmentRef> {
  if !dir.is_dir() {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    if let Some(parent) = dir.parent() {
      sync_dir(parent);
    }
  }
  let rows32 =
    u32::try_from(rows).map_err(|_| Error::Index(format!("{rows} rows do not fit one segment")))?;
  let path = dir.join(file);
  let tmp = dir.join(format!(".{file}.tmp-{}", std::process::id()));
  let written = (|| -> std::io::Result<()> {
    let mut w = BufWriter::new(std::fs::File::create(&tmp)?);
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(dims as u32).to_le_bytes());
    header.extend_from_slice(&rows32.to_le_bytes());
    header.push(DTYPE_I8);
    header.resize(HEADER, 0);
    w.write_all(&header)?;
    body(&mut w)?;
    let f = w.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()
  })();
  if let Err(e) = written {
    let _ = std::fs::remove_file(&tmp);
    return Err(Error::io("write", &tmp, e));
  }
  std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
  sync_dir(dir);
  Ok(SegmentRef { file: file.to_string(), rows: rows32 })
}

/// Write a segment of freshly embedded rows; returns its list entry.
pub fn write_segment(dir: &Path, file: &str, dims: usize, rows: &[(u64, Vec<f32>)]) -> Result<SegmentRef> {
  if let Some((_, v)) = rows.iter().find(|(_, v)| v.len() != dims) {
    return Err(Error::Index(format!("vector of {} dims in a {dims}-dim segment", v.len())));
  }
  let quantized: Vec<(f32, Vec<i8>)> = rows.iter().map(|(_, v)| quantize(v)).collect();
  write_segment_file(dir, file, dims, rows.len(), |w| {
    for (id, _) in rows {
      w.write_all(&id.to_le_bytes())?;
    }
    for (scale, _) in &quantized {
      w.write_all(&scale.to_le_bytes())?;
    }
    for (_, q) in &quantized {
      w.write_all(&q.iter().map(|x| *x as u8).collect::<Vec<u8>>())?;
    }
    Ok(())
  })
}

/// Merge `inputs` (in write order) into one segment `file`, keeping the latest row of each chunk
/// for which `keep` holds. Rows are copied as stored (no re-quantization), streamed from the
/// mapped inputs: memory holds the chosen row positions, not the vectors. Only a run of the
/// newest segments may be merged (a superseded row elsewhere would win again otherwise).
pub fn merge_segments(
  dir: &Path,
  inputs: &[SegmentRef],
  dims: usize,
  file: &str,
  keep: &dyn Fn(u64) -> bool,
) -> Result<SegmentRef> {
  let segs = inputs.iter().map(|s| Segment::open(dir, s, dims)).collect::<Result<Vec<_>>>()?;
  let mut seen = HashSet::new();
  let mut picks: Vec<(usize, usize)> = Vec::new();
  for (si, seg) in segs.iter().enumerate().rev() {
    for row in 0..seg.rows {
      let id = seg.id(row);
      if keep(id) && seen.insert(id) {
        picks.push((si, row));
      }
    }
  }
  drop(seen);
  // Sequential reads of each input.
  picks.sort_unstable();
  write_segment_file(dir, file, dims, picks.len(), |w| {
    for &(si, row) in &picks {
      w.write_all(&segs[si].id(row).to_le_bytes())?;
    }
    for &(si, row) in &picks {
      w.write_all(&segs[si].scale(row).to_le_bytes())?;
    }
    for &(si, row) in &picks {
      let data = segs[si].data(row, dims);
      // SAFETY: i8 and u8 have the same layout.
      w.write_all(unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, data.len()) })?;
    }
    Ok(())
  })
}

/// One mapped segment.
struct Segment {
  map: Mmap,
  rows: usize,
  /// Rows to search (live and not superseded), ascending.
  live: Vec<u32>,
}

/// The ANN side of an open [`VectorIndex`]: the file, and the live rows it does not cover.
struct AnnState {
  file: Arc<AnnFile>,
  /// Per segment, the live rows whose chunk the index does not hold (scanned exactly).
  delta: Vec<Vec<u32>>,
  /// Live rows the index holds.
  covered: usize,
}

/// A file name the vector writer produces: a plain `*.vec` name inside `vectors/`.
fn is_segment_name(name: &str) -> bool {
  name.ends_with(".vec")
    && name.len() > 4
    && !name.starts_with('.')
    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

impl Segment {
  /// Map `s` under `dir` and check its header against the list entry.
  fn open(dir: &Path, s: &SegmentRef, dims: usize) -> Result<Segment> {
    // The list comes from the store's own commit document, but a damaged or hand-edited store
    // must not make a reader map a path outside `vectors/` or block on a FIFO there.
    if !is_segment_name(&s.file) {
      return Err(Error::Index(format!("vector segment list names '{}', not a segment file", s.file)));
    }
    let path = dir.join(&s.file);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io("open", &path, e))?;
    if !meta.is_file() {
      return Err(Error::Index(format!("vector segment {} is not a regular file", path.display())));
    }
    let f = std::fs::File::open(&path).map_err(|e| Error::io("open", &path, e))?;
    // SAFETY: segment files are immutable once written (new data goes to new files).
    let map = unsafe { Mmap::map(&f) }.map_err(|e| Error::io("mmap", &path, e))?;
    let bad = |m: &str| Error::Index(format!("vector segment {}: {m}", path.display()));
    if map.len() < HEADER || &map[..8] != MAGIC {
      return Err(bad("bad header"));
    }
    let file_dims = u32::from_le_bytes(map[8..12].try_into().unwrap_or_default()) as usize;
    let rows = u32::from_le_bytes(map[12..16].try_into().unwrap_or_default()) as usize;
    if file_dims != dims
      || map[16] != DTYPE_I8
      || rows != s.rows as usize
      || map.len() != HEADER + rows * (12 + dims)
    {
      return Err(bad("size, dims or dtype do not match the segment list"));
    }
    Ok(Segment { map, rows, live: Vec::new() })
  }
  fn id(&self, row: usize) -> u64 {
    let o = HEADER + row * 8;
    u64::from_le_bytes(self.map[o..o + 8].try_into().unwrap_or_default())
  }
  fn scale(&self, row: usize) -> f32 {
    let o = HEADER + self.rows * 8 + row * 4;
    f32::from_le_bytes(self.map[o..o + 4].try_into().unwrap_or_default())
  }
  fn data(&self, row: usize, dims: usize) -> &[i8] {
    let o = HEADER + self.rows * 12 + row * dims;
    // SAFETY: u8 and i8 have the same layout.
    unsafe { std::slice::from_raw_parts(self.map[o..o + dims].as_ptr() as *const i8, dims) }
  }
}

/// The query as int16 for integer dot products with int8 rows, with its scale. The scale keeps
/// every sum of `dims` products inside i32 (|q| ≤ i32::MAX / (127 · dims), at most i16::MAX):
/// 15 bits of resolution up to 528 dims, 14 up to 1,056 — a cosine error of order 1e-5, far
/// below the int8 rows' own. Integer sums are exact, so every CPU ranks identically.
pub fn quantize_query(q: &[f32]) -> (f32, Vec<i16>) {
  let max = q.iter().fold(0f32, |m, x| m.max(x.abs()));
  if max == 0.0 || q.is_empty() {
    return (0.0, vec![0; q.len()]);
  }
  let limit = (i32::MAX as f64 / (127.0 * q.len() as f64)).min(i16::MAX as f64).floor() as f32;
  let scale = max / limit;
  (scale, q.iter().map(|x| (x / scale).round().clamp(-limit, limit) as i16).collect())
}

/// Integer dot product of an int16 query with an int8 row. Written as independent lanes so the
/// compiler vectorizes it (SIMD multiply-add of 16-bit pairs) on every target; on x86-64 with
/// AVX2 (checked once at run time) the same code compiled for AVX2 runs instead — twice the
/// lanes. Integer sums are exact, so both give the same result on every CPU.
#[inline]
pub fn dot_i16_i8(q: &[i16], row: &[i8]) -> i32 {
  #[cfg(target_arch = "x86_64")]
  {
    if has_avx2() {
      // SAFETY: the CPU supports AVX2 (checked above).
      return unsafe { dot_i16_i8_avx2(q, row) };
    }
  }
  dot_i16_i8_lanes(q, row)
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
  use std::sync::atomic::{AtomicU8, Ordering};
  // 0 = unknown, 1 = no, 2 = yes.
  static AVX2: AtomicU8 = AtomicU8::new(0);
  match AVX2.load(Ordering::Relaxed) {
    0 => {
      let yes = std::arch::is_x86_feature_detected!("avx2");
      AVX2.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
      yes
    }
    v => v == 2,
  }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_i16_i8_avx2(q: &[i16], row: &[i8]) -> i32 {
  dot_i16_i8_lanes(q, row)
}

#[inline(always)]
fn dot_i16_i8_lanes(q: &[i16], row: &[i8]) -> i32 {
  const LANES: usize = 16;
  let mut acc = [0i32; LANES];
  let chunks = q.len().min(row.len()) / LANES;
  for c in 0..chunks {
    let qs = &q[c * LANES..(c + 1) * LANES];
    let rs = &row[c * LANES..(c + 1) * LANES];
    for l in 0..LANES {
      acc[l] += qs[l] as i32 * rs[l] as i32;
    }
  }
  let mut sum: i32 = acc.iter().sum();
  for i in chunks * LANES..q.len().min(row.len()) {
    sum += q[i] as i32 * row[i] as i32;
  }
  sum
}

/// Rows scanned per parallel task: large enough that a task's cost (~0.1 ms) dwarfs rayon's
/// scheduling, small enough that two cores share a 20k-row store.
const SCAN_BLOCK: usize = 8192;
/// Below this many live rows the scan runs on the calling thread (SciFact's 11.5k rows scan in
/// ~0.5 ms; splitting them would cost more in wake-ups than it saves).
pub const PARALLEL_SCAN_ROWS: usize = 32_768;

/// A scored row, ordered best first: higher score, then lower chunk id (a total order, so the
/// top k is the same however the rows were split across threads).
#[derive(Clone, Copy, Debug)]
struct Hit(f32, u64);

impl PartialEq for Hit {
  fn eq(&self, o: &Self) -> bool {
    self.cmp(o) == std::cmp::Ordering::Equal
  }
}
impl Eq for Hit {}
impl PartialOrd for Hit {
  fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
    Some(self.cmp(o))
  }
}
impl Ord for Hit {
  /// `Less` = better (so a max-heap's top is the worst hit kept).
  fn cmp(&self, o: &Self) -> std::cmp::Ordering {
    o.0.total_cmp(&self.0).then(self.1.cmp(&o.1))
  }
}

/// The best `k` hits seen so far: a max-heap of the worst kept on top, O(k) memory.
struct TopK {
  k: usize,
  heap: std::collections::BinaryHeap<Hit>,
}

impl TopK {
  fn new(k: usize) -> Self {
    TopK { k, heap: std::collections::BinaryHeap::with_capacity(k + 1) }
  }
  #[inline]
  fn push(&mut self, h: Hit) {
    if self.heap.len() < self.k {
      self.heap.push(h);
    } else if let Some(worst) = self.heap.peek() {
      if h < *worst {
        self.heap.pop();
        self.heap.push(h);
      }
    }
  }
  fn merge(mut self, other: TopK) -> TopK {
    for h in other.heap {
      self.push(h);
    }
    self
  }
  fn into_sorted(self) -> Vec<(u64, f32)> {
    self.heap.into_sorted_vec().into_iter().map(|Hit(s, id)| (id, s)).collect()
  }
}

/// Memory-mapped vectors of one generation, searchable by exact dot product.
pub struct VectorIndex {
  /// Embedding model id of the vectors.
  pub model: String,
  /// Vector dimensions.
  pub dims: usize,
  segments: Vec<Segment>,
  /// Chunk ids that have a vector.
  present: HashSet<u64>,
  /// Where each present chunk's live row is (segment index, row): a lookup of a few chunks (the
  /// pages a lexical list found) costs O(chunks asked), not a pass over every row.
  locations: HashMap<u64, (u32, u32)>,
  /// Directory and list entry of the ANN file, when the commit lists one.
  ann_ref: Option<(std::path::PathBuf, AnnRef)>,
  mode: AnnMode,
  /// Opened on the first search that wants it (lexical paths that open the vectors for counts
  /// never pay for it); `Err` holds why it is not used.
  ann: OnceLock<std::result::Result<AnnState, String>>,
}

impl VectorIndex {
  /// Map the segments of `vm` under `dir`, keeping only rows of `live` chunks (latest row wins);
  /// searches use the ANN index as `LLM_WIKI_ANN` says ([`AnnMode::from_env`]).
  pub fn open(dir: &Path, vm: &VectorManifest, live: &HashSet<u64>) -> Result<Self> {
    Self::open_with(dir, vm, live, AnnMode::from_env())
  }

  /// [`Self::open`] with an explicit ANN mode.
  pub fn open_with(dir: &Path, vm: &VectorManifest, live: &HashSet<u64>, mode: AnnMode) -> Result<Self> {
    let mut segments =
      vm.segments.iter().map(|s| Segment::open(dir, s, vm.dims)).collect::<Result<Vec<_>>>()?;
    // Latest segment wins for a repeated chunk id.
    let mut present = HashSet::new();
    let mut locations = HashMap::new();
    for (si, seg) in segments.iter_mut().enumerate().rev() {
      let mut live_rows = Vec::new();
      for row in 0..seg.rows {
        let id = seg.id(row);
        if live.contains(&id) && present.insert(id) {
          live_rows.push(row as u32);
          locations.insert(id, (si as u32, row as u32));
        }
      }
      seg.live = live_rows;
    }
    Ok(VectorIndex {
      model: vm.model.clone(),
      dims: vm.dims,
      segments,
      present,
      locations,
      ann_ref: vm.ann.clone().map(|a| (dir.to_path_buf(), a)),
      mode,
      ann: OnceLock::new(),
    })
  }

  /// Whether searches go through the ANN index (the mode wants it for this many rows); it may
  /// still turn out unusable ([`Self::ann_diagnostic`]), then the exact scan runs.
  pub fn ann_wanted(&self) -> bool {
    self.mode.wanted(self.live_rows())
  }

  /// The ANN state, opened on first use.
  fn ann_state(&self) -> std::result::Result<&AnnState, &str> {
    self
      .ann
      .get_or_init(|| {
        let Some((dir, r)) = &self.ann_ref else {
          return Err(
            "no ANN index has been built for these vectors yet (the next vector reindex builds it); \
                      searching exactly"
              .to_string(),
          );
        };
        let file =
          AnnFile::open(dir, r, &self.model, self.dims).map_err(|e| format!("{e}; searching exactly"))?;
        let delta: Vec<Vec<u32>> = self
          .segments
          .iter()
          .map(|seg| seg.live.iter().copied().filter(|&row| !file.contains(seg.id(row as usize))).collect())
          .collect();
        let covered = self.live_rows() - delta.iter().map(Vec::len).sum::<usize>();
        Ok(AnnState { file, delta, covered })
      })
      .as_ref()
      .map_err(String::as_str)
  }

  /// Why the ANN index wanted for this store is not used, if it is not (a fallback diagnostic).
  pub fn ann_diagnostic(&self) -> Option<String> {
    if !self.ann_wanted() {
      return None;
    }
    self.ann_state().err().map(str::to_string)
  }

  /// `(rows added since the ANN build, rows it holds that are no longer live, rows it holds)`,
  /// or `None` when there is no usable index (opens it).
  pub fn ann_staleness(&self) -> Option<(usize, usize, usize)> {
    let a = self.ann_state().ok()?;
    let delta = a.delta.iter().map(Vec::len).sum();
    Some((delta, a.file.len() - a.covered, a.file.len()))
  }

  /// Every live row as stored: (chunk id, int8 components), for building an ANN index.
  pub fn live_row_data(&self) -> Vec<(u64, &[i8])> {
    self
      .segments
      .iter()
      .flat_map(|seg| seg.live.iter().map(move |&r| (seg.id(r as usize), seg.data(r as usize, self.dims))))
      .collect()
  }

  /// Chunks with a vector.
  pub fn present(&self) -> &HashSet<u64> {
    &self.present
  }

  /// Rows stored, including superseded and dead ones (for compaction decisions).
  pub fn stored_rows(&self) -> usize {
    self.segments.iter().map(|s| s.rows).sum()
  }

  /// Live rows (searchable vectors).
  pub fn live_rows(&self) -> usize {
    self.segments.iter().map(|s| s.live.len()).sum()
  }

  /// The top `k` chunks by cosine (dot product of unit vectors), best first (ties: lower chunk
  /// id first). Exact: every live row is scored with an integer dot product; above
  /// [`PARALLEL_SCAN_ROWS`] rows, blocks of rows are scored on rayon's threads, each keeping its
  /// own top `k` (memory O(k) per block, never O(rows)).
  ///
  /// When the ANN index is wanted ([`Self::ann_wanted`]) and usable, it supplies the candidates
  /// instead (see [`Self::search_ann`]); otherwise, or if it fails, the exact scan runs.
  pub fn search(&self, query: &[f32], k: usize) -> Vec<(u64, f32)> {
    if self.ann_wanted() {
      if let Some(hits) = self.search_ann(query, k) {
        return hits;
      }
    }
    self.search_exact(query, k)
  }

  /// The exact scan (parallel above [`PARALLEL_SCAN_ROWS`] rows), whatever the ANN mode.
  pub fn search_exact(&self, query: &[f32], k: usize) -> Vec<(u64, f32)> {
    self.search_with(query, k, self.live_rows() >= PARALLEL_SCAN_ROWS)
  }

  /// Top `k` through the ANN index, or `None` when there is no usable one. Candidates: the
  /// graph's 2`k` (at least `k` + 16) nearest live chunks (rows no longer live are filtered out during the graph
  /// search) plus every live row added since the build (scanned exactly); all are scored with the
  /// exact integer dot product, so a returned score equals the exact scan's and only recall is
  /// approximate.
  pub fn search_ann(&self, query: &[f32], k: usize) -> Option<Vec<(u64, f32)>> {
    if query.len() != self.dims || k == 0 {
      return Some(Vec::new());
    }
    let ann = self.ann_state().ok()?;
    let (_, q8) = quantize(query);
    // More candidates than hits: the graph ranks by the int8 query's cosine, the rescoring by the
    // finer int16 one, so near-ties at the k-th place can swap.
    let keys = ann.file.search(&q8, (2 * k).max(k + 16), &|key| self.present.contains(&key)).ok()?;
    let (qscale, q) = quantize_query(query);
    let mut top = TopK::new(k);
    for key in keys {
      if let Some(&(si, row)) = self.locations.get(&key) {
        let (seg, row) = (&self.segments[si as usize], row as usize);
        top.push(Hit(seg.scale(row) * qscale * dot_i16_i8(&q, seg.data(row, self.dims)) as f32, key));
      }
    }
    let delta: Vec<(&Segment, &[u32])> =
      self.segments.iter().zip(&ann.delta).map(|(s, d)| (s, d.as_slice())).collect();
    let rows: usize = ann.delta.iter().map(Vec::len).sum();
    top = top.merge(self.scan(&q, qscale, k, &delta, rows >= PARALLEL_SCAN_ROWS));
    Some(top.into_sorted())
  }

  /// [`Self::search`] with the parallel scan forced on or off (benches and tests compare both).
  pub fn search_with(&self, query: &[f32], k: usize, parallel: bool) -> Vec<(u64, f32)> {
    if query.len() != self.dims || k == 0 {
      return Vec::new();
    }
    let (qscale, q) = quantize_query(query);
    let parts: Vec<(&Segment, &[u32])> = self.segments.iter().map(|s| (s, s.live.as_slice())).collect();
    self.scan(&q, qscale, k, &parts, parallel).into_sorted()
  }

  /// Exact top `k` over the given rows of each segment (blocks of rows on rayon's threads when
  /// `parallel`, each keeping its own top `k`).
  fn scan(&self, q: &[i16], qscale: f32, k: usize, parts: &[(&Segment, &[u32])], parallel: bool) -> TopK {
    let scan = |seg: &Segment, rows: &[u32]| -> TopK {
      let mut top = TopK::new(k);
      for &row in rows {
        let row = row as usize;
        let dot = dot_i16_i8(q, seg.data(row, self.dims));
        top.push(Hit(seg.scale(row) * qscale * dot as f32, seg.id(row)));
      }
      top
    };
    if parallel {
      use rayon::prelude::*;
      crate::pool::global();
      let blocks: Vec<(&Segment, &[u32])> =
        parts.iter().flat_map(|&(seg, rows)| rows.chunks(SCAN_BLOCK).map(move |b| (seg, b))).collect();
      blocks.par_iter().map(|(seg, rows)| scan(seg, rows)).reduce(|| TopK::new(k), TopK::merge)
    } else {
      parts.iter().map(|&(seg, rows)| scan(seg, rows)).fold(TopK::new(k), TopK::merge)
    }
  }

  /// Dequantized vectors of the given chunks (for rescoring and compaction).
  pub fn vectors(&self, ids: &HashSet<u64>) -> HashMap<u64, Vec<f32>> {
    ids
      .iter()
      .filter_map(|id| {
        let &(si, row) = self.locations.get(id)?;
        let (seg, row) = (&self.segments[si as usize], row as usize);
        let s = seg.scale(row);
        Some((*id, seg.data(row, self.dims).iter().map(|x| *x as f32 * s).collect()))
      })
      .collect()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
  }

  #[test]
  fn quantization_keeps_cosine() {
    let a = unit((0..384).map(|i| ((i * 7919) % 97) as f32 - 48.0).collect());
    let (s, q) = quantize(&a);
    let back: Vec<f32> = q.iter().map(|x| *x as f32 * s).collect();
    let cos =
      a.iter().zip(&back).map(|(x, y)| x * y).sum::<f32>() / back.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!(cos > 0.999, "{cos}");
    assert_eq!(quantize(&[0.0, 0.0]).0, 0.0);
  }

  #[test]
  fn integer_dot_is_exact_and_the_quantized_query_keeps_the_cosine() {
    let q: Vec<i16> = (0..37).map(|i| (i * 1000 - 18_000) as i16).collect();
    let r: Vec<i8> = (0..37).map(|i| (i as i8) - 18).collect();
    let naive: i32 = q.iter().zip(&r).map(|(a, b)| *a as i32 * *b as i32).sum();
    assert_eq!(dot_i16_i8(&q, &r), naive);
    // Extreme rows cannot overflow: 2,048 dims of ±limit × ±127.
    let (_, big) = quantize_query(&vec![1.0; 2048]);
    assert_eq!(dot_i16_i8(&big, &vec![127; 2048]) as i64, big[0] as i64 * 127 * 2048);
    assert_eq!(dot_i16_i8(&big, &vec![-127; 2048]) as i64, -(big[0] as i64) * 127 * 2048);
    // Against the f32 dot of the dequantized query: error far below the rows' int8 step.
    let a = unit((0..384).map(|i| ((i * 7919) % 97) as f32 - 48.0).collect());
    let b = unit((0..384).map(|i| ((i * 104_729) % 89) as f32 - 44.0).collect());
    let (rs, row) = quantize(&b);
    let (qs, qi) = quantize_query(&a);
    let exact: f32 = a.iter().zip(&row).map(|(x, y)| x * *y as f32 * rs).sum();
    let int = dot_i16_i8(&qi, &row) as f32 * qs * rs;
    assert!((exact - int).abs() < 1e-4, "{exact} vs {int}");
    assert_eq!(quantize_query(&[0.0, 0.0]), (0.0, vec![0, 0]));
  }

  /// Deterministic pseudo-random unit vectors (xorshift; no RNG crate needed).
  pub(crate) fn random_units(seed: u64, n: usize, dims: usize) -> Vec<Vec<f32>> {
    let mut x = seed.max(1);
    let mut next = move || {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      (x >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    (0..n).map(|_| unit((0..dims).map(|_| next()).collect())).collect()
  }

  #[test]
  fn dispatched_dot_equals_the_portable_one() {
    let rows = random_units(7, 50, 389);
    let (_, q) = quantize_query(&rows[0]);
    for r in &rows {
      let (_, row) = quantize(r);
      let naive: i32 = q.iter().zip(&row).map(|(a, b)| *a as i32 * *b as i32).sum();
      assert_eq!(dot_i16_i8(&q, &row), naive);
      assert_eq!(dot_i16_i8_lanes(&q, &row), naive);
    }
  }

  #[test]
  fn parallel_scan_returns_the_sequential_top_k() {
    let t = tempfile::tempdir().unwrap();
    let dims = 48;
    let vecs = random_units(42, 30_000, dims);
    // Three segments; the last one supersedes 1,000 chunks of the first; chunk ids 0..29,999.
    let rows: Vec<(u64, Vec<f32>)> = vecs.iter().cloned().enumerate().map(|(i, v)| (i as u64, v)).collect();
    let s1 = write_segment(t.path(), "a.vec", dims, &rows[..12_000]).unwrap();
    let s2 = write_segment(t.path(), "b.vec", dims, &rows[12_000..]).unwrap();
    let newer: Vec<(u64, Vec<f32>)> =
      random_units(9, 1_000, dims).into_iter().enumerate().map(|(i, v)| (i as u64 * 3, v)).collect();
    let s3 = write_segment(t.path(), "c.vec", dims, &newer).unwrap();
    let vm = VectorManifest { model: "m".into(), dims, segments: vec![s1, s2, s3], ann: None };
    // Every tenth chunk is dead.
    let live: HashSet<u64> = (0..30_000u64).filter(|i| i % 10 != 0).collect();
    let idx = VectorIndex::open(t.path(), &vm, &live).unwrap();
    assert_eq!(idx.live_rows(), 27_000);
    for (qi, query) in random_units(5, 20, dims).iter().enumerate() {
      let k = [1, 10, 64, 500][qi % 4];
      let seq = idx.search_with(query, k, false);
      let par = idx.search_with(query, k, true);
      assert_eq!(seq, par, "query {qi}");
      assert_eq!(seq.len(), k);
      // Against a brute force over the dequantized live vectors, in the same order.
      let all = idx.vectors(&live);
      let (qs, qq) = quantize_query(query);
      let mut brute: Vec<(u64, f32)> = live
        .iter()
        .map(|id| {
          let &(si, row) = idx.locations.get(id).unwrap();
          let seg = &idx.segments[si as usize];
          (*id, seg.scale(row as usize) * qs * dot_i16_i8(&qq, seg.data(row as usize, dims)) as f32)
        })
        .collect();
      brute.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
      brute.truncate(k);
      assert_eq!(seq, brute, "query {qi}");
      assert!(seq.iter().all(|(id, _)| all.contains_key(id) && id % 10 != 0));
      assert!(seq.windows(2).all(|w| w[0].1 >= w[1].1));
    }
  }

  fn v(x: f32, y: f32) -> Vec<f32> {
    unit(vec![x, y, 0.0, 0.0])
  }

  /// Segment a.vec with chunks 1, 2, 3, then b.vec with a newer vector of chunk 2.
  fn two_segments(dir: &Path) -> VectorManifest {
    let s1 = write_segment(dir, "a.vec", 4, &[(1, v(1.0, 0.0)), (2, v(0.0, 1.0)), (3, v(1.0, 1.0))]).unwrap();
    let s2 = write_segment(dir, "b.vec", 4, &[(2, v(1.0, 0.1))]).unwrap();
    VectorManifest { model: "m".into(), dims: 4, segments: vec![s1, s2], ann: None }
  }

  #[test]
  fn segment_list_names_outside_vectors_dir_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("vectors");
    std::fs::create_dir_all(&dir).unwrap();
    let good = two_segments(&dir);
    // A valid segment outside `vectors/`, reachable by a relative or an absolute path.
    let outside = write_segment(root.path(), "x.vec", 4, &[(1, v(1.0, 0.0))]).unwrap();
    let live: HashSet<u64> = [1, 2].into_iter().collect();
    for name in ["../x.vec".to_string(), root.path().join("x.vec").to_string_lossy().into_owned(), "".into()]
    {
      let vm = VectorManifest {
        segments: vec![SegmentRef { file: name.clone(), ..outside.clone() }],
        ..good.clone()
      };
      assert!(VectorIndex::open(&dir, &vm, &live).is_err(), "{name:?} was opened");
    }
    // A directory (or, on Unix, a FIFO) under a segment name is not mapped.
    std::fs::create_dir(dir.join("d.vec")).unwrap();
    let vm =
      VectorManifest { segments: vec![SegmentRef { file: "d.vec".into(), ..outside }], ..good.clone() };
    assert!(VectorIndex::open(&dir, &vm, &live).is_err());
    assert!(VectorIndex::open(&dir, &good, &live).is_ok());
  }

  #[test]
  fn segments_latest_wins_and_dead_rows_skipped() {
    let t = tempfile::tempdir().unwrap();
    let vm = two_segments(t.path());
    let live: HashSet<u64> = [1, 2].into_iter().collect();
    let idx = VectorIndex::open(t.path(), &vm, &live).unwrap();
    assert_eq!(idx.present().len(), 2);
    assert_eq!(idx.stored_rows(), 4);
    let hits = idx.search(&v(1.0, 0.0), 5);
    assert_eq!(hits.len(), 2);
    // chunk 2's latest vector points along x, so both are close to the query.
    assert!(hits.iter().all(|(_, s)| *s > 0.9), "{hits:?}");
    let bad = VectorManifest { dims: 8, ..vm.clone() };
    assert!(VectorIndex::open(t.path(), &bad, &live).is_err());
  }

  #[test]
  fn merging_keeps_the_latest_kept_rows_byte_for_byte() {
    let t = tempfile::tempdir().unwrap();
    let both = two_segments(t.path());
    let merged = merge_segments(t.path(), &both.segments, 4, "m.vec", &|id| id != 3).unwrap();
    assert_eq!(merged.rows, 2, "chunk 3 dropped, chunk 2 once");
    let one = VectorManifest { segments: vec![merged], ..both.clone() };
    let live: HashSet<u64> = [1, 2, 3].into_iter().collect();
    let ids: HashSet<u64> = [1, 2].into_iter().collect();
    let before = VectorIndex::open(t.path(), &both, &live).unwrap().vectors(&ids);
    let after = VectorIndex::open(t.path(), &one, &live).unwrap().vectors(&ids);
    assert_eq!(before, after);
    assert!(!VectorIndex::open(t.path(), &one, &live).unwrap().present().contains(&3));
    // Nothing but the segment files is left in the directory (temp files are renamed away).
    let mut names: Vec<String> = std::fs::read_dir(t.path())
      .unwrap()
      .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
      .collect();
    names.sort();
    assert_eq!(names, ["a.vec", "b.vec", "m.vec"]);
  }
}
