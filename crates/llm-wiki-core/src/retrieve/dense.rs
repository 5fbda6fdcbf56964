//! Dense candidates of one vault: exact search over the generation's chunk vectors, aggregated to
//! pages by their best chunk (confidence comes from the embedder's calibration, in `modes`).

use std::collections::HashMap;

use super::engine::Snapshot;
use crate::error::Result;
use crate::store::vectors::{chunk_key, VectorIndex};

/// One page found by the dense engine.
#[derive(Debug, Clone)]
pub struct DenseCandidate {
  /// The page.
  pub page_id: String,
  /// 0-based rank in the vault's dense list.
  pub rank: usize,
  /// Cosine of the best chunk.
  pub cosine: f32,
  /// Id of the best chunk.
  pub chunk_id: String,
}

/// Dense candidates (at most `limit` pages) for a unit query vector.
pub fn dense_candidates(
  snap: &Snapshot,
  vectors: &VectorIndex,
  query: &[f32],
  limit: usize,
) -> Result<Vec<DenseCandidate>> {
  // Several chunks of a page can rank high: fetch more chunks than pages.
  let hits = vectors.search(query, (limit * 4).max(64));
  let chunk_pages = snap.data.chunk_pages();
  let mut out: Vec<DenseCandidate> = Vec::new();
  let mut seen = std::collections::HashSet::new();
  for (key, cosine) in hits {
    for (page_id, chunk_id) in chunk_pages.get(&key).into_iter().flatten() {
      if out.len() < limit && seen.insert(page_id.clone()) {
        out.push(DenseCandidate {
          page_id: page_id.clone(),
          rank: out.len(),
          cosine,
          chunk_id: chunk_id.clone(),
        });
      }
    }
  }
  Ok(out)
}

/// Best chunk cosine of each given page (for pages a lexical list found but the dense list did not).
pub fn page_cosines(
  snap: &Snapshot,
  vectors: &VectorIndex,
  query: &[f32],
  pages: &[String],
) -> HashMap<String, (f32, String)> {
  let mut keys = std::collections::HashSet::new();
  let mut owner: HashMap<u64, Vec<(String, String)>> = HashMap::new();
  for p in pages {
    if let Some(e) = snap.manifest.entries.get(p) {
      for c in e.chunks.iter() {
        let k = chunk_key(c);
        keys.insert(k);
        owner.entry(k).or_default().push((p.clone(), c.to_string()));
      }
    }
  }
  let mut out: HashMap<String, (f32, String)> = HashMap::new();
  for (k, v) in vectors.vectors(&keys) {
    let cos: f32 = v.iter().zip(query).map(|(a, b)| a * b).sum();
    for (p, cid) in owner.get(&k).into_iter().flatten() {
      let e = out.entry(p.clone()).or_insert((f32::MIN, cid.clone()));
      if cos > e.0 {
        *e = (cos, cid.clone());
      }
    }
  }
  out
}
