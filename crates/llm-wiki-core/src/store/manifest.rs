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
use crate::memory::graph::PageLinks;
use crate::util::hash::hex;
use crate::vault::{Diagnostic, PageMeta, Role};

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

/// A journal may grow to this fraction of its base (plus [`JOURNAL_SLACK`]) before the next page
/// commit writes a new base instead: replaying it stays cheaper than a quarter of a base load, and
/// a checkpoint (O(vault)) happens once per that many bytes of changes.
const JOURNAL_FRACTION: u64 = 4;
/// Journal bytes always allowed before a checkpoint (small vaults: one base, many records).
const JOURNAL_SLACK: u64 = 64 * 1024;

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

  /// Load generation `generation` of the store directory `dir`: the newest base at or below it,
  /// then its journal's records through `generation` (records after it are ignored: they belong
  /// to a run that never committed). The generation must be present exactly.
  pub fn load_generation(dir: &StoreDir, generation: u64, expected_vault: Option<&str>) -> Result<Manifest> {
    let base = base_generation(dir, generation)
      .ok_or_else(|| Error::ManifestInvalid(format!("manifest of generation {generation} is missing")))?;
    let base_path = dir.manifest_file(base);
    let mut m = Manifest::load(&base_path, expected_vault)?;
    if m.generation != base {
      return Err(Error::ManifestInvalid(format!(
        "{} holds generation {}",
        base_path.display(),
        m.generation
      )));
    }
    let base_len = std::fs::metadata(&base_path).map(|md| md.len()).unwrap_or(0);
    let mut len = 0u64;
    if base < generation {
      let jpath = dir.journal_file(base);
      let mut bytes = Vec::new();
      std::fs::File::open(&jpath)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::ManifestInvalid(format!("{}: {e}", jpath.display())))?;
      let mut at = 0usize;
      // Stop at the asked generation: later records belong to a run that never committed and
      // may be anything (an earlier number included).
      while m.generation != generation {
        let Some(nl) = bytes[at..].iter().position(|b| *b == b'\n') else { break };
        let line = &bytes[at..at + nl];
        // A line that does not parse can only be the torn tail of an uncommitted record.
        let Ok(d) = serde_json::from_slice::<ManifestDelta>(line) else { break };
        if d.generation > generation {
          break;
        }
        if d.generation <= m.generation {
          return Err(Error::ManifestInvalid(format!(
            "{}: record of generation {} after generation {}",
            jpath.display(),
            d.generation,
            m.generation
          )));
        }
        for (id, e) in &d.set {
          validate_entry(id, e)?;
        }
        m.apply(&d);
        at += nl + 1;
      }
      len = at as u64;
      if m.generation != generation {
        return Err(Error::ManifestInvalid(format!(
          "{} has no record of generation {generation}",
          jpath.display()
        )));
      }
    }
    m.journal = JournalPos { base, base_len, len };
    Ok(m)
  }

  /// The journal records that take `self` (a generation of `dir` as loaded or written, at
  /// [`Manifest::journal`]) to the later generation `generation`, and the position they end at:
  /// what a reader holding `self` applies instead of loading the whole manifest again. `None`
  /// when that cannot be done exactly — `generation` is not later, it is read from another base
  /// (a checkpoint), the base file changed, the journal is shorter than `self`'s position, a
  /// record does not parse or is out of order, an entry is invalid, or no record of
  /// `generation` is there — and the caller loads the generation whole
  /// ([`Manifest::load_generation`], which reports the error when there is one).
  ///
  /// Exact because a journal's bytes up to a committed generation never change: a writer cuts
  /// off only records after the last commit (at or after `self`'s) before it appends.
  pub fn journal_since(&self, dir: &StoreDir, generation: u64) -> Option<(Vec<ManifestDelta>, JournalPos)> {
    let pos = self.journal;
    if generation <= self.generation {
      return None;
    }
    let base = dir.manifest_generations().into_iter().rfind(|g| *g <= generation)?;
    if base != pos.base || std::fs::metadata(dir.manifest_file(base)).ok()?.len() != pos.base_len {
      return None;
    }
    let mut f = std::fs::File::open(dir.journal_file(base)).ok()?;
    if f.metadata().ok()?.len() < pos.len {
      return None;
    }
    f.seek(SeekFrom::Start(pos.len)).ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    let (mut records, mut at, mut last) = (Vec::new(), 0usize, self.generation);
    while last < generation {
      let nl = bytes[at..].iter().position(|b| *b == b'\n')?;
      let d = serde_json::from_slice::<ManifestDelta>(&bytes[at..at + nl]).ok()?;
      if d.generation <= last || d.generation > generation {
        return None;
      }
      if d.set.iter().any(|(id, e)| validate_entry(id, e).is_err()) {
        return None;
      }
      last = d.generation;
      at += nl + 1;
      records.push(d);
    }
    Some((records, JournalPos { base, base_len: pos.base_len, len: pos.len + at as u64 }))
  }

  /// Write this manifest (already at its new generation) as the next generation of `dir`:
  /// `delta` appended to the journal of the base of `prior` when the journal stays small, else
  /// (and without `prior` or `delta`) a new base. Files and records of generations after
  /// `prior` (left by a run that did not commit) are removed first. Fsynced before returning;
  /// the caller's tantivy commit then publishes it. Returns the new [`Manifest::journal`] for
  /// the caller to store (the manifest is only read: other threads may read it meanwhile).
  pub fn write_generation(
    &self,
    dir: &StoreDir,
    prior: Option<JournalPos>,
    delta: Option<&ManifestDelta>,
  ) -> Result<JournalPos> {
    if let Some(p) = prior {
      for g in dir.manifest_generations().into_iter().filter(|g| *g > p.base && *g >= self.generation) {
        let _ = std::fs::remove_file(dir.manifest_file(g));
        let _ = std::fs::remove_file(dir.journal_file(g));
      }
    }
    if let (Some(p), Some(d)) = (prior, delta) {
      let mut line =
        serde_json::to_vec(d).map_err(|e| Error::Index(format!("serialize manifest record: {e}")))?;
      line.push(b'\n');
      if p.len + line.len() as u64 <= p.base_len / JOURNAL_FRACTION + JOURNAL_SLACK {
        let jpath = dir.journal_file(p.base);
        let existed = jpath.exists();
        let write = || -> std::io::Result<()> {
          let mut f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&jpath)?;
          // Cut off records of runs that never committed.
          f.set_len(p.len)?;
          f.seek(SeekFrom::Start(p.len))?;
          f.write_all(&line)?;
          f.sync_all()
        };
        write().map_err(|e| Error::io("append to", &jpath, e))?;
        if !existed {
          crate::fsutil::sync_dir(&dir.dir);
        }
        return Ok(JournalPos { base: p.base, base_len: p.base_len, len: p.len + line.len() as u64 });
      }
    }
    let path = dir.manifest_file(self.generation);
    self.save(&path)?;
    let _ = std::fs::remove_file(dir.journal_file(self.generation));
    let base_len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    Ok(JournalPos { base: self.generation, base_len, len: 0 })
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

  fn validate(&self, expected_vault: Option<&str>) -> Result<()> {
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

/// Check one manifest entry: a safe id matching its path, a well-formed hash and chunk ids, a type.
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
  if e.meta.page_type.trim().is_empty() {
    return bad(format!("manifest entry '{id}' has an empty type"));
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
mod tests {
  use super::*;

  fn entry(hash: &str) -> ManifestEntry {
    ManifestEntry {
      rel_path: "a/b.md".into(),
      size: 1,
      mtime_ns: 2,
      content_hash: hash.repeat(64 / hash.len()),
      role: Role::Canonical,
      meta: Box::new(PageMeta { title: "B".into(), page_type: "concept".into(), ..Default::default() }),
      sections: 0,
      chunks: ChunkIds::default(),
      links: PageLinks::default(),
    }
  }

  #[test]
  fn hash_tracks_content_not_mtime() {
    let mut m = Manifest::empty("v");
    m.entries.insert("a/b".into(), entry("a").into());
    let h1 = m.hash();
    Arc::make_mut(m.entries.get_mut("a/b").unwrap()).mtime_ns = 99;
    assert_eq!(h1, m.hash());
    Arc::make_mut(m.entries.get_mut("a/b").unwrap()).content_hash = "b".repeat(64);
    assert_ne!(h1, m.hash());
  }

  /// A page whose links (packed in memory, an array on disk) depend on its hash, so records that
  /// change a page change its links too.
  fn page(hash: &str, id: &str) -> ManifestEntry {
    let body = format!("[[{id}-{hash}#h]] [x](../{hash}/y.md) [[b^blk|B]] [e](e.md#)\n\n[[{hash}]]");
    let links = crate::memory::links::extract_links(&body, 4).links;
    assert_eq!(links.len(), 5);
    let links = PageLinks { links: crate::memory::links::LinkList::from_raw(&links), ..Default::default() };
    ManifestEntry { rel_path: format!("{id}.md"), links, ..entry(hash) }
  }

  fn excluded(path: &str) -> ExcludedEntry {
    ExcludedEntry {
      rel_path: path.into(),
      size: 3,
      mtime_ns: 4,
      diagnostic: Diagnostic::error("page_too_large", path, "too large"),
    }
  }

  /// Commit `delta` as the next generation of `dir` after `m` (the writer's path): a journal
  /// record, or a new base when `checkpoint`.
  fn commit(dir: &StoreDir, m: &mut Manifest, mut delta: ManifestDelta, checkpoint: bool) {
    delta.generation = m.generation + 1;
    delta.built_at_ms = 1000 + delta.generation as i64;
    let prior = m.journal;
    m.apply(&delta);
    if checkpoint {
      m.journal = m.write_generation(dir, Some(prior), None).unwrap();
    } else {
      m.journal = m.write_generation(dir, Some(prior), Some(&delta)).unwrap();
    }
  }

  /// What a reader holding `held` ends with at `generation`: the records since, applied, when
  /// `journal_since` allows it, else a whole load. Asserts it equals a fresh whole load (entries,
  /// exclusions, generation, build time and journal position) and returns whether the journal
  /// was followed.
  fn follow(dir: &StoreDir, held: &Manifest, generation: u64) -> (Manifest, bool) {
    let fresh = Manifest::load_generation(dir, generation, Some("v")).unwrap();
    let (m, followed) = match held.journal_since(dir, generation) {
      Some((records, pos)) => {
        let mut m = held.clone();
        for d in &records {
          m.apply(d);
        }
        m.journal = pos;
        (m, true)
      }
      None => (fresh.clone(), false),
    };
    assert_eq!(m, fresh, "reader at {} following to {generation}", held.generation);
    (m, followed)
  }

  fn set(items: &[(&str, &str)]) -> ManifestDelta {
    ManifestDelta {
      set: items.iter().map(|(id, h)| (id.to_string(), page(h, id).into())).collect(),
      ..Default::default()
    }
  }

  #[test]
  fn a_reader_following_the_journal_holds_what_a_whole_load_holds() {
    let t = tempfile::tempdir().unwrap();
    let dir = StoreDir::new(t.path().to_path_buf());
    let mut m = Manifest::empty("v");
    m.generation = 1;
    for id in ["a", "b", "c/d"] {
      m.entries.insert(id.into(), page("a", id).into());
    }
    m.journal = m.write_generation(&dir, None, None).unwrap();
    let first = Manifest::load_generation(&dir, 1, Some("v")).unwrap();
    let mut readers = vec![first.clone()];
    // Add, update, delete, rename (delete + add), an exclusion added, then removed.
    let steps = vec![
      set(&[("e", "b")]),
      set(&[("a", "c")]),
      ManifestDelta { del: vec!["b".into()], ..Default::default() },
      ManifestDelta { del: vec!["c/d".into()], ..set(&[("c/renamed", "a")]) },
      ManifestDelta { xset: [("bad.md".to_string(), excluded("bad.md"))].into(), ..Default::default() },
      ManifestDelta { xdel: vec!["bad.md".into()], ..set(&[("bad", "d")]) },
    ];
    for delta in steps {
      commit(&dir, &mut m, delta, false);
      let g = m.generation;
      assert_eq!(dir.manifest_generations(), vec![1], "no checkpoint expected");
      // Every reader (one per earlier generation) reaches g through the records since it.
      for r in &mut readers {
        let (next, followed) = follow(&dir, r, g);
        assert!(followed, "generation {} → {g} needed a whole load", r.generation);
        *r = next;
      }
      readers.push(Manifest::load_generation(&dir, g, Some("v")).unwrap());
    }
    assert_eq!(m.entries.keys().collect::<Vec<_>>(), ["a", "bad", "c/renamed", "e"]);
    assert!(m.excluded.is_empty());
    // A reader from the first generation jumps all the records at once.
    assert!(follow(&dir, &first, m.generation).1);
    // Not later: nothing to follow (an old generation is never reached backwards).
    assert!(m.journal_since(&dir, m.generation).is_none());
    assert!(readers[3].journal_since(&dir, 2).is_none());
  }

  /// A store directory holding generation 1 (page `a`) as a base, and that manifest.
  fn one_page_base() -> (tempfile::TempDir, StoreDir, Manifest) {
    let t = tempfile::tempdir().unwrap();
    let dir = StoreDir::new(t.path().to_path_buf());
    let mut m = Manifest::empty("v");
    m.generation = 1;
    m.entries.insert("a".into(), page("a", "a").into());
    m.journal = m.write_generation(&dir, None, None).unwrap();
    (t, dir, m)
  }

  #[test]
  fn torn_records_checkpoints_and_changed_bases_fall_back_to_a_whole_load() {
    let (_t, dir, mut m) = one_page_base();
    let held = Manifest::load_generation(&dir, 1, Some("v")).unwrap();
    commit(&dir, &mut m, set(&[("b", "b")]), false);
    // A crashed writer's torn record after the committed one: ignored up to generation 2, and
    // generation 3 (never committed) cannot be followed.
    let jpath = dir.journal_file(1);
    let mut bytes = std::fs::read(&jpath).unwrap();
    let committed_len = bytes.len();
    bytes.extend_from_slice(b"{\"generation\":3,\"set\":{\"c\"");
    std::fs::write(&jpath, &bytes).unwrap();
    assert!(follow(&dir, &held, 2).1);
    assert!(held.journal_since(&dir, 3).is_none());
    // An unparsable line before the target: no follow (the whole load reports the error).
    let mut bad = bytes[..committed_len].to_vec();
    bad.extend_from_slice(b"garbage\n{\"generation\":3}\n");
    std::fs::write(&jpath, &bad).unwrap();
    assert!(held.journal_since(&dir, 3).is_none());
    assert!(Manifest::load_generation(&dir, 3, None).is_err());
    // An invalid entry in a record: no follow.
    let mut invalid = bytes[..committed_len].to_vec();
    invalid.extend_from_slice(
      format!(
        "{}\n",
        serde_json::to_string(&ManifestDelta { generation: 3, ..set(&[("../x", "c")]) }).unwrap()
      )
      .as_bytes(),
    );
    std::fs::write(&jpath, &invalid).unwrap();
    assert!(held.journal_since(&dir, 3).is_none());
    assert!(Manifest::load_generation(&dir, 3, None).is_err());
    // The next writer cuts the leftovers off and commits generation 3; then a checkpoint writes
    // generation 4 as a new base: a reader of base 1 loads it whole, a reader of base 4 follows
    // its journal.
    commit(&dir, &mut m, set(&[("c", "c")]), false);
    let at3 = follow(&dir, &held, 3).0;
    commit(&dir, &mut m, ManifestDelta { del: vec!["a".into()], ..Default::default() }, true);
    assert_eq!(dir.manifest_generations(), vec![1, 4]);
    assert!(!follow(&dir, &at3, 4).1, "a new base cannot be followed");
    let at4 = Manifest::load_generation(&dir, 4, Some("v")).unwrap();
    commit(&dir, &mut m, set(&[("d", "d")]), false);
    assert!(follow(&dir, &at4, 5).1);
    assert!(!follow(&dir, &at3, 5).1);
    // A base file that changed under the reader: no follow.
    let mut rewritten = Manifest::load_generation(&dir, 4, None).unwrap();
    rewritten.entries.insert("zz".into(), page("e", "zz").into());
    rewritten.save(&dir.manifest_file(4)).unwrap();
    assert!(at4.journal_since(&dir, 5).is_none());
  }

  /// Packed links are written as the format's `links` array of `{t, a, k, l}` objects, in the
  /// base and in journal records, and read back equal.
  #[test]
  fn links_on_disk_keep_the_raw_link_array_form() {
    let (_t, dir, mut m) = one_page_base();
    commit(&dir, &mut m, set(&[("b", "b")]), false);
    let raw = |e: &ManifestEntry| serde_json::to_value(e.links.links.to_raw()).unwrap();
    let base: serde_json::Value =
      serde_json::from_slice(&std::fs::read(dir.manifest_file(1)).unwrap()).unwrap();
    assert_eq!(base["entries"]["a"]["links"]["links"], raw(&m.entries["a"]));
    assert_eq!(
      base["entries"]["a"]["links"]["links"][0],
      serde_json::json!({"t": "a-a", "a": "h", "k": "wiki", "l": 4})
    );
    let journal = std::fs::read_to_string(dir.journal_file(1)).unwrap();
    let record: serde_json::Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
    assert_eq!(record["set"]["b"]["links"]["links"], raw(&m.entries["b"]));
    assert_eq!(Manifest::load_generation(&dir, 2, Some("v")).unwrap().entries, m.entries);
  }

  #[test]
  fn validation() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("m.json");
    let mut m = Manifest::empty("v");
    m.entries.insert("a/b".into(), entry("a").into());
    m.save(&p).unwrap();
    assert!(Manifest::load(&p, Some("v")).is_ok());
    assert_eq!(Manifest::load(&p, Some("w")).unwrap_err().code(), "qmd_manifest_invalid");
    // A page's file is its id with `.md`, compared without regard to ASCII case.
    let with_path = |rel: &str| {
      let mut m = Manifest::empty("v");
      m.entries.insert("a/b".into(), ManifestEntry { rel_path: rel.into(), ..entry("a") }.into());
      m.save(&p).unwrap();
      Manifest::load(&p, None).is_ok()
    };
    assert!(with_path("a/b.md") && with_path("A/b.MD"));
    assert!(!with_path("a/c.md") && !with_path("a/b.mdx") && !with_path("a/b") && !with_path("a/bb.md"));
    m.entries.insert("../x".into(), ManifestEntry { rel_path: "../x.md".into(), ..entry("a") }.into());
    m.save(&p).unwrap();
    assert!(Manifest::load(&p, None).is_err());
    std::fs::write(&p, "{").unwrap();
    assert!(Manifest::load(&p, None).is_err());
  }

  /// A manifest over the size read through a memory map loads as the same manifest, and a
  /// malformed one of that size is refused.
  #[test]
  fn a_large_manifest_is_read_through_a_map_as_it_was_saved() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("m.json");
    let mut m = Manifest::empty("v");
    for i in 0..4000 {
      let id = format!("p{i:05}");
      m.entries.insert(id.clone(), page("a", &id).into());
    }
    m.save(&p).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    assert!(bytes.len() > 1 << 20, "{} bytes: not over the mapping threshold", bytes.len());
    let loaded = Manifest::load(&p, Some("v")).unwrap();
    let read: Manifest = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(loaded.entries, read.entries);
    assert_eq!(loaded.entries.len(), 4000);
    assert_eq!(loaded.hash(), m.hash());
    std::fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
    assert_eq!(Manifest::load(&p, None).unwrap_err().code(), "qmd_manifest_invalid");
  }

  /// A base holds one entry per line and loads, by blocks in parallel, as the same manifest a
  /// serde pass over the file (or over a base written before, without the lines) gives; ids
  /// that need escaping, exclusions and an empty manifest included; a damaged line is refused.
  #[test]
  fn a_base_of_entry_lines_loads_as_the_whole_json_does() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("m.json");
    let mut m = Manifest::empty("v \"entries\":{} \n");
    m.chunker = "tokenizer:x@96+24/r2".into();
    m.excluded.insert("bad.md".into(), excluded("bad.md"));
    let ids = ["a/quote\"d", "b/new\nline", "c/ünïcödé", "d/brace}{", "e/plain"];
    for id in ids {
      m.entries.insert(id.into(), page("a", id).into());
    }
    for i in 0..3000 {
      let id = format!("f/p{i:05}");
      m.entries.insert(id.clone(), page("b", &id).into());
    }
    m.save(&p).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let text = std::str::from_utf8(&bytes).unwrap();
    assert_eq!(text.lines().count(), m.entries.len() + 2, "one line per entry, the head and the tail");
    let whole: Manifest = serde_json::from_slice(&bytes).unwrap();
    let loaded = Manifest::load(&p, None).unwrap();
    assert_eq!(loaded.entries, whole.entries);
    assert_eq!(loaded.entries, m.entries);
    assert_eq!((&loaded.vault_id, &loaded.chunker, &loaded.excluded), (&m.vault_id, &m.chunker, &m.excluded));
    // Small blocks: many tasks, each of whole lines.
    let (_, lines, _) = entry_lines(&bytes).expect("the line layout");
    let blocks: Vec<&[u8]> = line_blocks(lines, 4096).collect();
    assert!(blocks.len() > 100);
    assert_eq!(blocks.iter().map(|b| b.len()).sum::<usize>(), lines.len());
    let entries: Vec<_> = blocks.iter().flat_map(|b| parse_entry_block(b).unwrap()).collect();
    assert_eq!(entries.into_iter().collect::<BTreeMap<_, _>>(), m.entries);

    // A base written in one serde pass (before the line layout) loads the same.
    std::fs::write(&p, serde_json::to_vec(&m).unwrap()).unwrap();
    assert!(entry_lines(&std::fs::read(&p).unwrap()).is_none());
    assert_eq!(Manifest::load(&p, None).unwrap().entries, m.entries);

    // A base cut short inside its entries (no tail) is refused.
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(Manifest::load(&p, None).unwrap_err().code(), "qmd_manifest_invalid");

    // A damaged entry line is refused, not skipped.
    let damaged = text.replacen("\"f/p01500\":{", "\"f/p01500\":{{", 1);
    assert_ne!(damaged, text);
    std::fs::write(&p, damaged).unwrap();
    assert_eq!(Manifest::load(&p, None).unwrap_err().code(), "qmd_manifest_invalid");

    // No entries.
    let empty = Manifest::empty("v");
    empty.save(&p).unwrap();
    assert_eq!(Manifest::load(&p, Some("v")).unwrap(), empty);
  }

  /// The writer's counts of a committed generation come from its tally, advanced by each
  /// record: they must be what counting the manifest after the record gives.
  #[test]
  fn counts_advanced_by_a_record_equal_a_count_of_the_result() {
    let sized = |hash: &str, sections: u32, chunks: &[&str]| {
      Arc::new(ManifestEntry { sections, chunks: ChunkIds::from_ids(chunks.iter().copied()), ..entry(hash) })
    };
    let mut m = Manifest::empty("v");
    m.entries.insert("a".into(), sized("a", 2, &["00000000000000a1", "00000000000000a2"]));
    m.entries.insert("b".into(), sized("b", 1, &["00000000000000b1"]));
    m.entries.insert("c".into(), sized("c", 3, &[]));
    let tally = crate::store::state::Tally::of(&m);
    assert_eq!(tally.counts(), m.counts());
    assert_eq!(m.counts(), ManifestCounts { chunks: 3, documents: 6 + 3 + 1 });
    assert_eq!(m.total_chunks(), 3);
    let delta = ManifestDelta {
      generation: 1,
      set: [
        ("a".to_string(), sized("a2", 5, &["00000000000000a3"])),
        ("d".into(), sized("d", 1, &["00000000000000d1"])),
      ]
      .into_iter()
      .collect(),
      del: vec!["b".into()],
      ..Default::default()
    };
    let advanced = tally.advance(&m, &delta);
    m.apply(&delta);
    assert_eq!(advanced.counts(), m.counts());
    assert_eq!(m.counts(), ManifestCounts { chunks: 2, documents: 9 + 2 + 1 });
  }
}
