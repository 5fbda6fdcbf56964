//! The page manifest of one generation: page id → what was indexed for that page. It lets a
//! reindex skip unchanged files by size + mtime (then by content hash) without opening them, and
//! lets recall render results without re-reading pages.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::fsutil::{read_json, JsonFile};
use crate::memory::graph::PageLinks;
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
  /// Frontmatter fields used by retrieval.
  pub meta: PageMeta,
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
  /// Indexed pages by id.
  pub entries: BTreeMap<String, ManifestEntry>,
  /// Pages left out, by path, with their diagnostic.
  #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
  pub excluded: BTreeMap<String, ExcludedEntry>,
  /// What counted the chunk sizes ([`crate::chunk::TokenCounter::label`]): `estimate`, or
  /// `tokenizer:<embedding model id>`. A reindex whose counter differs rebuilds the store once.
  /// Manifests written before the field existed were chunked by the estimate.
  #[serde(default = "estimate_label")]
  pub chunker: String,
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
    }
  }

  /// SHA-256 over the identity of what is indexed: vault id and, per page in id order, its id,
  /// content hash and role. Moving the vault does not change it.
  pub fn hash(&self) -> String {
    let mut h = Sha256::new();
    h.update(format!("v{}\0{}\0", self.version, self.vault_id));
    for (id, e) in &self.entries {
      h.update(id.as_bytes());
      h.update([0]);
      h.update(e.content_hash.as_bytes());
      h.update([0]);
      h.update(e.role.as_str().as_bytes());
      h.update([0]);
    }
    hex(&h.finalize())
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
    self.entries.values().map(|e| e.chunks.len() as u32).sum()
  }

  /// Documents the lexical index must hold for this manifest: sections + chunks + the commit doc.
  pub fn expected_documents(&self) -> u64 {
    self.entries.values().map(|e| e.sections as u64 + e.chunks.len() as u64).sum::<u64>() + 1
  }

  /// Load and validate a manifest file.
  pub fn load(path: &Path, expected_vault: Option<&str>) -> Result<Manifest> {
    let m: Manifest = match read_json(path) {
      JsonFile::Valid(m) => m,
      JsonFile::Missing => return Err(Error::ManifestInvalid(format!("{} is missing", path.display()))),
      JsonFile::Invalid(msg) => return Err(Error::ManifestInvalid(msg)),
    };
    m.validate(expected_vault)?;
    Ok(m)
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
    for (id, e) in &self.entries {
      let safe = !id.is_empty()
        && !id.starts_with('/')
        && !id.contains('\\')
        && !id.split('/').any(|s| s == ".." || s == "." || s.is_empty());
      if !safe || e.rel_path != format!("{id}.md") && !e.rel_path.eq_ignore_ascii_case(&format!("{id}.md")) {
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
    }
    Ok(())
  }

  /// Compact JSON: manifests of large vaults are read on every reindex and recall reload.
  pub fn save(&self, path: &Path) -> Result<()> {
    let bytes = serde_json::to_vec(self).map_err(|e| Error::Index(format!("serialize manifest: {e}")))?;
    crate::fsutil::atomic_write(path, &bytes)
  }
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
  const DIGITS: &[u8; 16] = b"0123456789abcdef";
  let mut s = String::with_capacity(bytes.len() * 2);
  for b in bytes {
    s.push(DIGITS[(b >> 4) as usize] as char);
    s.push(DIGITS[(b & 15) as usize] as char);
  }
  s
}

/// sha256 of bytes as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
  hex(&Sha256::digest(bytes))
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
      meta: PageMeta { title: "B".into(), page_type: "concept".into(), ..Default::default() },
      sections: 0,
      chunks: ChunkIds::default(),
      links: PageLinks::default(),
    }
  }

  #[test]
  fn hash_tracks_content_not_mtime() {
    let mut m = Manifest::empty("v");
    m.entries.insert("a/b".into(), entry("a"));
    let h1 = m.hash();
    m.entries.get_mut("a/b").unwrap().mtime_ns = 99;
    assert_eq!(h1, m.hash());
    m.entries.get_mut("a/b").unwrap().content_hash = "b".repeat(64);
    assert_ne!(h1, m.hash());
  }

  #[test]
  fn validation() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("m.json");
    let mut m = Manifest::empty("v");
    m.entries.insert("a/b".into(), entry("a"));
    m.save(&p).unwrap();
    assert!(Manifest::load(&p, Some("v")).is_ok());
    assert_eq!(Manifest::load(&p, Some("w")).unwrap_err().code(), "qmd_manifest_invalid");
    m.entries.insert("../x".into(), ManifestEntry { rel_path: "../x.md".into(), ..entry("a") });
    m.save(&p).unwrap();
    assert!(Manifest::load(&p, None).is_err());
    std::fs::write(&p, "{").unwrap();
    assert!(Manifest::load(&p, None).is_err());
  }
}
