//! The page manifest of one generation: page id → what was indexed for that page. It lets a
//! reindex skip unchanged files by size + mtime (then by content hash) without opening them, and
//! lets recall render results without re-reading pages.
//!
//! On disk a generation's manifest is a *base* (`manifest.<B>.json`, the whole manifest of
//! generation B) plus the records of `manifest.<B>.journal` up to the generation (one JSON line
//! per later page commit: the pages set and removed). A page commit appends one record — its cost
//! is the size of the change, not of the vault — and writes a new base (a checkpoint) only when
//! the journal has grown past a quarter of the base. See docs/STORE-FORMAT.md.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::layout::StoreDir;
use crate::error::{Error, Result};
use crate::fsutil::{parse_json, read_mapped, JsonFile};
use crate::memory::page_links::PageLinks;
use crate::util::hash::hex;
use crate::vault::{Diagnostic, PageMeta, Role};

mod journal;

/// Version of the manifest file format.
pub const MANIFEST_VERSION: u32 = 1;

/// The chunk ids of a page, stored as one string of concatenated 16-hex-digit ids: a manifest
/// of a large vault lists millions of chunks, and one string per page parses at memcpy speed
/// where an array of objects would dominate every reindex and reader reload.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChunkIds(String);

/// Length of one chunk id.
pub const CHUNK_ID_LEN: usize = 16;

impl ChunkIds {
  /// From ids in chunk order (each must be 16 hex digits).
  pub fn from_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> Self {
    ChunkIds(ids.into_iter().collect())
  }
  /// Number of chunks.
  pub fn len(&self) -> usize {
    self.0.len() / CHUNK_ID_LEN
  }
  /// True when the page has no chunk.
  pub fn is_empty(&self) -> bool {
    self.0.is_empty()
  }
  /// Ids in chunk order.
  pub fn iter(&self) -> impl Iterator<Item = &str> {
    (0..self.len()).map(|i| &self.0[i * CHUNK_ID_LEN..(i + 1) * CHUNK_ID_LEN])
  }
  /// Numeric keys (see [`super::vectors::chunk_key`]).
  pub fn keys(&self) -> impl Iterator<Item = u64> + '_ {
    self.iter().map(super::vectors::chunk_key)
  }
  fn valid(&self) -> bool {
    self.0.len().is_multiple_of(CHUNK_ID_LEN) && self.0.bytes().all(|b| b.is_ascii_hexdigit())
  }
}

/// What was indexed for one page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestEntry {
  /// Path relative to `wiki/`, `/`-separated.
  pub rel_path: String,
  /// File size in bytes when indexed.
  pub size: u64,
  /// Modification time (ns since the epoch) when indexed.
  pub mtime_ns: i64,
  /// Lowercase hex sha256 of the file bytes.
  pub content_hash: String,
  /// Canonical or evidence page.
  pub role: Role,
  /// Frontmatter fields used by retrieval. Boxed: 400 bytes of mostly empty optional fields,
  /// which a `BTreeMap` node would otherwise hold inline at about half occupancy (entries are
  /// inserted in id order) for every page of a vault.
  pub meta: Box<PageMeta>,
  /// Number of section documents in the lexical index.
  pub sections: u32,
  /// Ids of the page's chunks, in order.
  pub chunks: ChunkIds,
  /// Outbound links and validated relations (the link graph's per-page part).
  #[serde(default, skip_serializing_if = "PageLinks::is_empty")]
  pub links: PageLinks,
}

/// A page file that was excluded (malformed, too large, unreadable) and why. Recorded so that a
/// no-op reindex and status need not re-read it while it is unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExcludedEntry {
  /// Path under `wiki/`.
  pub rel_path: String,
  /// File size in bytes when examined.
  pub size: u64,
  /// Modification time (ns since the epoch) when examined.
  pub mtime_ns: i64,
  /// Why it is excluded.
  pub diagnostic: Diagnostic,
}

/// Page manifest of one store generation. Vector segments are listed by the commit document
/// (see [`super::lexical::CommitInfo`]), so embedding never rewrites this file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
  /// Manifest format version.
  pub version: u32,
  /// The vault's id.
  pub vault_id: String,
  /// Generation that wrote it.
  pub generation: u64,
  /// Unix time (ms) at which this generation was built; mtimes at or after it are re-hashed.
  pub built_at_ms: i64,
  /// Indexed pages by id. Entries are shared, never changed in place (a change replaces the
  /// page's `Arc`): a copy of the manifest — the writer's after a commit, a reader's advanced by
  /// the journal — copies the map, not every page's metadata, chunk ids and links, and a reader
  /// in the writer's process shares the committed manifest instead of parsing its own.
  pub entries: BTreeMap<String, Arc<ManifestEntry>>,
  /// Pages left out, by path, with their diagnostic.
  #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
  pub excluded: BTreeMap<String, ExcludedEntry>,
  /// What counted the chunk sizes ([`crate::chunk::TokenCounter::label`]): `estimate`, or
  /// `tokenizer:<embedding model id>`. A reindex whose counter differs rebuilds the store once.
  /// Manifests written before the field existed were chunked by the estimate.
  #[serde(default = "estimate_label")]
  pub chunker: String,
  /// Where this generation sits on disk (base + journal length); not serialized.
  #[serde(skip)]
  pub journal: JournalPos,
}

/// The on-disk position of a loaded or written manifest generation: its base file and the
/// length of the base's journal through this generation (later bytes are uncommitted records
/// of a run that did not commit, cut off by the next writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JournalPos {
  /// Generation of the base file.
  pub base: u64,
  /// Bytes of the base file.
  pub base_len: u64,
  /// Bytes of the base's journal that belong to this generation and the ones before it.
  pub len: u64,
}

/// Order-independent accumulator of [`Manifest::hash`]: the wrapping sum of a sha256 per entry
/// (id, content hash, role), so a commit updates it from the entries it sets and removes
/// instead of hashing the whole manifest again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HashAcc([u64; 4]);

impl HashAcc {
  fn digest(id: &str, e: &ManifestEntry) -> [u64; 4] {
    let mut h = Sha256::new();
    h.update(id.as_bytes());
    h.update([0]);
    h.update(e.content_hash.as_bytes());
    h.update([0]);
    h.update(e.role.as_str().as_bytes());
    let d = h.finalize();
    std::array::from_fn(|i| u64::from_le_bytes(d[i * 8..i * 8 + 8].try_into().expect("8 bytes")))
  }

  /// Count entry `id` in.
  pub fn add(&mut self, id: &str, e: &ManifestEntry) {
    let d = Self::digest(id, e);
    for (a, x) in self.0.iter_mut().zip(d) {
      *a = a.wrapping_add(x);
    }
  }

  /// Take entry `id` (as it was counted in) out.
  pub fn remove(&mut self, id: &str, e: &ManifestEntry) {
    let d = Self::digest(id, e);
    for (a, x) in self.0.iter_mut().zip(d) {
      *a = a.wrapping_sub(x);
    }
  }

  /// The manifest hash (hex sha256 of the version, vault id and the sum).
  pub fn finish(&self, version: u32, vault_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(format!("v{version}\0{vault_id}\0"));
    for x in self.0 {
      h.update(x.to_le_bytes());
    }
    hex(&h.finalize())
  }
}

/// One journal record: what a page commit changed relative to the generation before it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestDelta {
  /// Generation this record produces.
  pub generation: u64,
  /// Build time of that generation (see [`Manifest::built_at_ms`]).
  pub built_at_ms: i64,
  /// Pages added or changed (including size/mtime-only changes); shared with the manifest the
  /// record is applied to.
  #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
  pub set: BTreeMap<String, Arc<ManifestEntry>>,
  /// Pages removed.
  #[serde(default, skip_serializing_if = "Vec::is_empty")]
  pub del: Vec<String>,
  /// Excluded files added or changed.
  #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
  pub xset: BTreeMap<String, ExcludedEntry>,
  /// Excluded files no longer excluded (gone, or now indexed).
  #[serde(default, skip_serializing_if = "Vec::is_empty")]
  pub xdel: Vec<String>,
}

impl ManifestDelta {
  /// True when the record changes no page and no exclusion.
  pub fn is_empty(&self) -> bool {
    self.set.is_empty() && self.del.is_empty() && self.xset.is_empty() && self.xdel.is_empty()
  }
}

fn estimate_label() -> String {
  crate::chunk::ESTIMATE_LABEL.to_string()
}

impl Manifest {
  /// An empty manifest of `vault_id`.
  pub fn empty(vault_id: &str) -> Self {
    Manifest {
      version: MANIFEST_VERSION,
      vault_id: vault_id.to_string(),
      generation: 0,
      built_at_ms: 0,
      entries: BTreeMap::new(),
      excluded: BTreeMap::new(),
      chunker: estimate_label(),
      journal: JournalPos::default(),
    }
  }

  /// Apply a journal record (the generation and build time become the record's).
  pub fn apply(&mut self, d: &ManifestDelta) {
    for id in &d.del {
      self.entries.remove(id);
    }
    for (id, e) in &d.set {
      self.entries.insert(id.clone(), e.clone());
    }
    for id in &d.xdel {
      self.excluded.remove(id);
    }
    for (id, x) in &d.xset {
      self.excluded.insert(id.clone(), x.clone());
    }
    self.generation = d.generation;
    self.built_at_ms = d.built_at_ms;
  }

  /// SHA-256 over the identity of what is indexed: version, vault id and the sum of one sha256
  /// per page over its id, content hash and role ([`HashAcc`], updatable per commit). Moving the
  /// vault does not change it.
  pub fn hash(&self) -> String {
    let acc = self.entries.iter().fold(HashAcc::default(), |mut a, (id, e)| {
      a.add(id, e);
      a
    });
    acc.finish(self.version, &self.vault_id)
  }

  /// `(canonical, evidence)` page counts.
  pub fn count_roles(&self) -> (u32, u32) {
    let canonical = self.entries.values().filter(|e| e.role == Role::Canonical).count() as u32;
    (canonical, self.entries.len() as u32 - canonical)
  }

  /// Numeric keys of every live chunk.
  pub fn chunk_keys(&self) -> std::collections::HashSet<u64> {
    self.entries.values().flat_map(|e| e.chunks.keys()).collect()
  }

  /// Chunks over every page.
  pub fn total_chunks(&self) -> u32 {
    self.counts().chunks
  }

  /// Its counts, by a pass over every entry ([`counts_of`] keeps them for a shared manifest).
  pub fn counts(&self) -> ManifestCounts {
    let (sections, chunks) = self
      .entries
      .values()
      .fold((0u64, 0u32), |(s, c), e| (s + e.sections as u64, c + e.chunks.len() as u32));
    ManifestCounts::new(sections, chunks)
  }

  /// Load and validate a manifest file.
  pub fn load(path: &Path, expected_vault: Option<&str>) -> Result<Manifest> {
    #[cfg(test)]
    LOADS.with(|n| n.set(n.get() + 1));
    let m: Manifest = match read_mapped(path, |bytes| Manifest::parse(path, bytes)) {
      JsonFile::Valid(m) => m,
      JsonFile::Missing => return Err(Error::ManifestInvalid(format!("{} is missing", path.display()))),
      JsonFile::Invalid(msg) => return Err(Error::ManifestInvalid(msg)),
    };
    m.validate(expected_vault)?;
    Ok(m)
  }

  /// A base file's manifest. A base written with one entry per line ([`Manifest::save`]) is
  /// parsed by blocks of whole lines on rayon's pool — on one thread a 100k-page manifest took
  /// about 2 s, mostly interning link targets (waiting on memory), and it is the first thing a
  /// fresh process's recall, status or reindex does; any other layout of the same JSON (bases
  /// written before) by one serde pass. The pool's tasks take no lock but the interner's shards,
  /// so a caller may hold its own (a reader's snapshot holds its generation cache while it
  /// loads) as long as no pool job waits on that lock: none takes a snapshot.
  fn parse(path: &Path, bytes: &[u8]) -> JsonFile<Manifest> {
    let Some((head, lines, tail)) = entry_lines(bytes) else {
      return parse_json(path, bytes);
    };
    let malformed = |e: serde_json::Error| JsonFile::Invalid(format!("{} is malformed: {e}", path.display()));
    let mut shell = Vec::with_capacity(head.len() + tail.len());
    shell.extend_from_slice(head);
    shell.extend_from_slice(tail);
    let mut m: Manifest = match serde_json::from_slice(&shell) {
      Ok(m) => m,
      Err(e) => return malformed(e),
    };
    crate::pool::global();
    let blocks: Vec<&[u8]> = line_blocks(lines, PARSE_BLOCK_BYTES).collect();
    let parsed: serde_json::Result<Vec<Vec<EntryPair>>> =
      blocks.par_iter().map(|block| parse_entry_block(block)).collect();
    match parsed {
      // Blocks are in file order and the file in id order: the tree is built in one pass.
      Ok(parsed) => m.entries = parsed.into_iter().flatten().collect(),
      Err(e) => return malformed(e),
    }
    JsonFile::Valid(m)
  }

  pub(crate) fn validate(&self, expected_vault: Option<&str>) -> Result<()> {
    let bad = |msg: String| Err(Error::ManifestInvalid(msg));
    if self.version != MANIFEST_VERSION {
      return bad(format!("unsupported manifest version {}", self.version));
    }
    if let Some(v) = expected_vault {
      if v != self.vault_id {
        return bad(format!("manifest belongs to vault {}, expected {v}", self.vault_id));
      }
    }
    // The checks of 100k entries (every chunk id's hex digits) took a tenth of a load.
    self.entries.par_iter().try_for_each(|(id, e)| validate_entry(id, e))
  }

  /// Compact JSON, one entry per line (a reader parses the lines in parallel, see
  /// `Manifest::parse`): manifests of large vaults are read on every reindex and recall reload.
  pub fn save(&self, path: &Path) -> Result<()> {
    // Everything but the entries, as serde writes it; its empty `"entries":{}` is where the
    // entries go, one per line (`Manifest::parse` splits the lines; the JSON is the same as a
    // serde pass over the whole manifest, whitespace aside). The first occurrence is the field:
    // inside a string value its quotes would be escaped.
    let shell = Manifest {
      version: self.version,
      vault_id: self.vault_id.clone(),
      generation: self.generation,
      built_at_ms: self.built_at_ms,
      entries: BTreeMap::new(),
      excluded: self.excluded.clone(),
      chunker: self.chunker.clone(),
      journal: self.journal,
    };
    let shell = serde_json::to_vec(&shell).map_err(serialize_error)?;
    let open = find(&shell, ENTRIES_EMPTY).expect("a manifest serializes its entries") + ENTRIES_OPEN.len();
    // Streamed: a 100k-page manifest is hundreds of MB of JSON.
    crate::fsutil::atomic_write_with(path, |w| {
      let io = |e: std::io::Error| Error::io("write", path, e);
      w.write_all(&shell[..open]).map_err(io)?;
      w.write_all(b"\n").map_err(io)?;
      let last = self.entries.len().saturating_sub(1);
      for (i, (id, e)) in self.entries.iter().enumerate() {
        serde_json::to_writer(&mut *w, id).map_err(serialize_error)?;
        w.write_all(b":").map_err(io)?;
        serde_json::to_writer(&mut *w, e).map_err(serialize_error)?;
        w.write_all(if i < last { b",\n" } else { b"\n" }).map_err(io)?;
      }
      w.write_all(&shell[open..]).map_err(io)
    })
  }
}

/// A page id and its entry, as a manifest's entries are read back in file order before the tree
/// is built from them in one pass.
pub(crate) type EntryPair = (String, Arc<ManifestEntry>);

fn serialize_error(e: serde_json::Error) -> Error {
  Error::Index(format!("serialize manifest: {e}"))
}

/// Bytes of whole entry lines one task of a base's parallel parse takes (about 300 pages of the
/// synthetic vault). Not fitted: large enough that a task outweighs its scheduling, small enough
/// that a 100k-page base makes hundreds of tasks for the threads to share evenly.
const PARSE_BLOCK_BYTES: usize = 1 << 20;
/// The key that opens the entries object (a newline follows it in a base written by
/// [`Manifest::save`]).
const ENTRIES_OPEN: &[u8] = b"\"entries\":{";
/// The entries object of a manifest without entries, as serde writes it.
const ENTRIES_EMPTY: &[u8] = b"\"entries\":{}";

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
  haystack.windows(needle.len()).position(|w| w == needle)
}

/// A base in the line layout split into what precedes its entries (through `"entries":{`), the
/// entry lines (each ends with a newline; every line but the last with `,` before it) and what
/// follows (from the `}` closing the entries). `None` for any other layout. The entries end at
/// the file's last line break: serde writes no line break (it escapes them in strings), so the
/// only ones are those [`Manifest::save`] puts after `"entries":{` and after each entry; found
/// from the end, it costs the tail, not a scan of the whole file.
fn entry_lines(bytes: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
  // The entries key follows the version, vault id, generation and build time: within the first
  // KB of a base in this layout.
  let head = &bytes[..bytes.len().min(1024)];
  let open = find(head, ENTRIES_OPEN)? + ENTRIES_OPEN.len();
  if bytes.get(open) != Some(&b'\n') {
    return None;
  }
  let close = bytes.iter().rposition(|b| *b == b'\n')? + 1;
  if bytes.get(close) != Some(&b'}') {
    return None;
  }
  Some((&bytes[..open], &bytes[open + 1..close], &bytes[close..]))
}

/// `lines` cut into blocks of whole lines of about `size` bytes.
fn line_blocks(lines: &[u8], size: usize) -> impl Iterator<Item = &[u8]> {
  let mut rest = lines;
  std::iter::from_fn(move || {
    if rest.is_empty() {
      return None;
    }
    let end = match rest.get(size..) {
      Some(after) => after.iter().position(|b| *b == b'\n').map_or(rest.len(), |p| size + p + 1),
      None => rest.len(),
    };
    let (block, tail) = rest.split_at(end);
    rest = tail;
    Some(block)
  })
}

/// The entries of a block of entry lines, parsed as one JSON object (the block between braces,
/// the comma after its last entry dropped).
fn parse_entry_block(block: &[u8]) -> serde_json::Result<Vec<EntryPair>> {
  let mut end = block.len();
  while end > 0 && block[end - 1].is_ascii_whitespace() {
    end -= 1;
  }
  if end > 0 && block[end - 1] == b',' {
    end -= 1;
  }
  let mut object = Vec::with_capacity(end + 2);
  object.push(b'{');
  object.extend_from_slice(&block[..end]);
  object.push(b'}');
  let map: BTreeMap<String, Arc<ManifestEntry>> = serde_json::from_slice(&object)?;
  Ok(map.into_iter().collect())
}

/// Check one manifest entry: a safe id matching its path, a well-formed hash and chunk ids, a type
/// — or none for a card: an untyped note of a plain folder (`vault::PageModel::Note`) is the
/// user's own card, and a wiki page without a type never reaches the index.
fn validate_entry(id: &str, e: &ManifestEntry) -> Result<()> {
  let bad = |msg: String| Err(Error::ManifestInvalid(msg));
  let safe = !id.is_empty()
    && !id.starts_with('/')
    && !id.contains('\\')
    && !id.split('/').any(|s| s == ".." || s == "." || s.is_empty());
  // The page's file name: its id with `.md` in any case (compared without building it).
  let file_of_id = e.rel_path.len() == id.len() + 3 && {
    let (stem, ext) = e.rel_path.as_bytes().split_at(id.len());
    stem.eq_ignore_ascii_case(id.as_bytes()) && ext.eq_ignore_ascii_case(b".md")
  };
  if !safe || !file_of_id {
    return bad(format!("manifest entry '{id}' has an unsafe id or path"));
  }
  if e.content_hash.len() != 64 || !e.content_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
    return bad(format!("manifest entry '{id}' has a malformed content hash"));
  }
  if !e.chunks.valid() {
    return bad(format!("manifest entry '{id}' has malformed chunk ids"));
  }
  if e.meta.page_type.trim().is_empty() && e.role != Role::Canonical {
    return bad(format!("manifest entry '{id}' has an empty type and is not a card"));
  }
  Ok(())
}

/// Remove the bases and journals no generation in `keep` is read from (a reader may still hold
/// the previous commit, so callers keep the last two commits' generations).
pub fn gc_generations(dir: &StoreDir, keep: &[u64]) {
  let bases = dir.manifest_generations();
  let needed: Vec<u64> = keep.iter().filter_map(|k| bases.iter().copied().rfind(|b| b <= k)).collect();
  for b in bases {
    if !needed.contains(&b) {
      let _ = std::fs::remove_file(dir.manifest_file(b));
      let _ = std::fs::remove_file(dir.journal_file(b));
    }
  }
}

#[cfg(test)]
thread_local! {
  /// Whole manifests this thread parsed from disk (tests check that a path reads none back).
  pub(crate) static LOADS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The manifest a store's last commit or load left, shared by everything in the process that
/// needs that generation: the writer's next reindex (a watcher, the CLI's loops, the bench),
/// `status`, and readers. Without it a process that never committed (a fresh CLI or MCP
/// process, the addon before its first change) parsed the whole manifest on every no-op
/// reindex and status: 2–3 s at 100k pages. One entry per store directory, for the two most
/// recently used vaults (a project and a personal vault); an entry is trusted only while the
/// base file's length and mtime and the journal's length are what its commit or load saw (a file
/// changed behind our back is read again).
struct CachedManifest {
  dir: PathBuf,
  stamp: (u64, i64, u64),
  manifest: Arc<Manifest>,
  /// Its counts, once known (from the writer's tally, or one pass on first use, counted outside
  /// the cache's lock: a pass over a large manifest does not hold up other vaults).
  counts: Arc<std::sync::OnceLock<ManifestCounts>>,
}

/// Counts a store's consistency check and reindex results need, which take a pass over every
/// entry (≈ 13 ms a no-op reindex at 100k pages spent on each open, docs/DECISIONS.md): known
/// once per shared manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestCounts {
  /// Chunks over every page.
  pub chunks: u32,
  /// Documents the lexical index must hold: sections + chunks + the commit document.
  pub documents: u64,
}

impl ManifestCounts {
  /// The counts of a manifest with `sections` sections and `chunks` chunks over its pages.
  pub fn new(sections: u64, chunks: u32) -> Self {
    ManifestCounts { chunks, documents: sections + chunks as u64 + 1 }
  }
}

/// The counts of `manifest`: the cached copy's when it is the one this process shares, computed
/// once; else a pass over it.
pub fn counts_of(manifest: &Arc<Manifest>) -> ManifestCounts {
  let known = || {
    let cache = MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner());
    cache.iter().find(|c| Arc::ptr_eq(&c.manifest, manifest)).map(|c| c.counts.clone())
  };
  match known() {
    Some(counts) => *counts.get_or_init(|| manifest.counts()),
    None => manifest.counts(),
  }
}

/// Vaults whose manifest is kept (most recently used first). Unit tests run many vaults on
/// parallel threads of one process and count parses: there, room for all of them.
const CACHED_STORES: usize = if cfg!(test) { 64 } else { 2 };

static MANIFEST_CACHE: Mutex<Vec<CachedManifest>> = Mutex::new(Vec::new());

fn stamp(dir: &StoreDir, pos: &JournalPos) -> Option<(u64, i64, u64)> {
  stamp_of(dir, pos.base, pos.len > 0)
}

/// The base file `generation` of `dir` is read from: the newest at or below it.
fn base_generation(dir: &StoreDir, generation: u64) -> Option<u64> {
  dir.manifest_generations().into_iter().rfind(|g| *g <= generation)
}

/// The stamp of the files `generation` of `dir` is read from, before reading them.
fn stamp_before_load(dir: &StoreDir, generation: u64) -> Option<(u64, i64, u64)> {
  let base = base_generation(dir, generation)?;
  stamp_of(dir, base, base < generation)
}

fn stamp_of(dir: &StoreDir, base: u64, with_journal: bool) -> Option<(u64, i64, u64)> {
  let meta = std::fs::metadata(dir.manifest_file(base)).ok()?;
  let journal = if with_journal { std::fs::metadata(dir.journal_file(base)).ok()?.len() } else { 0 };
  Some((meta.len(), crate::vault::discover::mtime_ns(&meta), journal))
}

/// [`Manifest::load_generation`] through the process's manifest cache (a cached copy of another
/// vault than `expected_vault` is not taken; the load then reports the mismatch).
pub fn load_generation_cached(
  dir: &StoreDir,
  generation: u64,
  expected_vault: Option<&str>,
) -> Result<Arc<Manifest>> {
  load_generation_counted(dir, generation, expected_vault).map(|(m, _)| m)
}

/// [`load_generation_cached`], also saying whether a cached copy was taken (`true`) or the
/// generation parsed from disk (readers count the two). A parsed generation is cached.
pub fn load_generation_counted(
  dir: &StoreDir,
  generation: u64,
  expected_vault: Option<&str>,
) -> Result<(Arc<Manifest>, bool)> {
  match committed(dir, generation).filter(|m| expected_vault.is_none_or(|v| m.vault_id == v)) {
    Some(m) => Ok((m, true)),
    None => {
      // The stamp is taken before the parse: a commit of another process in between makes it
      // stale (the entry is then read again), never wrongly fresh.
      let before = stamp_before_load(dir, generation);
      let m = Arc::new(Manifest::load_generation(dir, generation, expected_vault)?);
      if before.is_some() && before == stamp(dir, &m.journal) {
        remember(dir, m.clone(), before, None);
      }
      Ok((m, false))
    }
  }
}

/// The cached manifest of `generation` of `dir` when its files are as its commit or load left
/// them: shared, not parsed again.
pub fn committed(dir: &StoreDir, generation: u64) -> Option<Arc<Manifest>> {
  let mut cache = MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner());
  let at = cache.iter().position(|c| c.dir == dir.dir && c.manifest.generation == generation)?;
  if stamp(dir, &cache[at].manifest.journal) != Some(cache[at].stamp) {
    return None;
  }
  let entry = cache.remove(at);
  let manifest = entry.manifest.clone();
  cache.insert(0, entry);
  Some(manifest)
}

/// Keep `manifest` (just committed in `dir`, with its `counts` from the writer's tally) as the
/// store's cached copy.
pub fn remember_committed(dir: &StoreDir, manifest: Arc<Manifest>, counts: ManifestCounts) {
  let now = stamp(dir, &manifest.journal);
  remember(dir, manifest, now, Some(counts));
}

/// Whether two store directories belong to one vault (siblings under its `meta/qmd`): a rebuild's
/// new store replaces the old one's entry instead of pinning a manifest nobody reads any more.
fn same_vault(a: &Path, b: &Path) -> bool {
  a.parent() == b.parent()
}

fn remember(
  dir: &StoreDir,
  manifest: Arc<Manifest>,
  stamp: Option<(u64, i64, u64)>,
  counts: Option<ManifestCounts>,
) {
  let counts = Arc::new(counts.map_or_else(std::sync::OnceLock::new, std::sync::OnceLock::from));
  let mut cache = MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner());
  cache.retain(|c| !same_vault(&c.dir, &dir.dir));
  if let Some(stamp) = stamp {
    cache.insert(0, CachedManifest { dir: dir.dir.clone(), stamp, manifest, counts });
    cache.truncate(CACHED_STORES);
  }
}

/// Drop the cached manifest of `dir`'s vault (before the writer changes it in place, or when a
/// rebuild of the store failed).
pub fn forget_store(dir: &StoreDir) {
  MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner()).retain(|c| !same_vault(&c.dir, &dir.dir));
}

/// Drop every cached manifest (as in a fresh process).
pub fn forget_committed() {
  MANIFEST_CACHE.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

#[cfg(test)]
mod tests;
