//! Rank fusion. Reciprocal rank `1/(60 + rank)` (rank 0-based) merges lists whose raw scores are
//! not comparable: the per-vault lists across vaults, and a vault's lists when typed sub-queries
//! add more of them. A vault's own lexical and dense list are fused by their evidence
//! ([`evidence_fusion`]).

/// RRF offset.
pub const RRF_K: f64 = 60.0;

/// Reciprocal-rank contribution of a 0-based rank.
pub fn reciprocal_rank(rank: usize) -> f64 {
  1.0 / (RRF_K + rank as f64)
}

/// Which vault a result came from; project wins ties and duplicate page ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VaultKind {
  /// The active (project) vault.
  Project,
  /// The user's personal vault.
  Personal,
}

impl VaultKind {
  /// Name in results and traces.
  pub fn as_str(self) -> &'static str {
    match self {
      VaultKind::Project => "project",
      VaultKind::Personal => "personal",
    }
  }
}

/// An item of a per-vault list entering cross-vault fusion.
#[derive(Debug, Clone)]
pub struct LayerItem<T> {
  /// The page.
  pub page_id: String,
  /// Which vault's list it comes from.
  pub vault: VaultKind,
  /// 0-based rank within its vault's list.
  pub rank: usize,
  /// Bounded multiplier applied to the reciprocal rank.
  pub multiplier: f64,
  /// What the caller carries through fusion (the hit).
  pub payload: T,
}

/// A fused item with its fusion key.
#[derive(Debug, Clone)]
pub struct Fused<T> {
  /// The item.
  pub item: LayerItem<T>,
  /// `multiplier / (60 + rank)`.
  pub key: f64,
}

/// Merge per-vault lists: duplicate page ids keep the project vault's item (the spec's rule);
/// order by `multiplier × 1/(60+rank)` desc, then lower rank, then project, then page id.
pub fn fuse_layers<T>(layers: Vec<Vec<LayerItem<T>>>) -> Vec<Fused<T>> {
  let mut items: Vec<LayerItem<T>> = layers.into_iter().flatten().collect();
  // Project precedence on duplicates, independent of rank.
  items.sort_by(|a, b| a.page_id.cmp(&b.page_id).then(a.vault.cmp(&b.vault)).then(a.rank.cmp(&b.rank)));
  items.dedup_by(|later, earlier| later.page_id == earlier.page_id);
  let mut fused: Vec<Fused<T>> =
    items.into_iter().map(|i| Fused { key: i.multiplier * reciprocal_rank(i.rank), item: i }).collect();
  fused.sort_by(|a, b| {
    b.key
      .partial_cmp(&a.key)
      .unwrap_or(std::cmp::Ordering::Equal)
      .then(a.item.rank.cmp(&b.item.rank))
      .then(a.item.vault.cmp(&b.item.vault))
      .then(a.item.page_id.cmp(&b.item.page_id))
  });
  fused
}

/// Plain RRF of several ranked id lists (k = 60); equal scores are ordered by id.
pub fn rrf(lists: &[Vec<String>]) -> Vec<(String, f64)> {
  let weighted: Vec<(&[String], f64)> = lists.iter().map(|l| (l.as_slice(), 1.0)).collect();
  weighted_rrf(&weighted)
}

/// RRF with a weight per list: `Σ weight / (60 + rank)`; ties by page id.
pub fn weighted_rrf(lists: &[(&[String], f64)]) -> Vec<(String, f64)> {
  let mut scores: Vec<(String, f64)> = Vec::new();
  let mut index = std::collections::HashMap::new();
  for (list, weight) in lists {
    for (rank, id) in list.iter().enumerate() {
      let i = *index.entry(id.clone()).or_insert_with(|| {
        scores.push((id.clone(), 0.0));
        scores.len() - 1
      });
      scores[i].1 += weight * reciprocal_rank(rank);
    }
  }
  scores.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
  scores
}

/// Evidence-weighted fusion of one vault's lexical and dense lists (the hybrid ranking):
///
/// ```text
/// score(p) = lexical_trust × BM25(p) / BM25(best) + dense_confidence(p)
/// ```
///
/// `lexical` holds `(page, BM25)` in lexical rank order, `dense` `(page, calibrated dense
/// confidence)` for every page of either list (a lexical-only page with its best-chunk cosine's
/// confidence). `lexical_trust` is the lexical list's own confidence (that of its most confident
/// page): a list whose best page covers the query well counts in full, one that matched only
/// stray words hardly counts. The dense side is already absolute (calibrated cosine), so a weak
/// dense list (cosines bunched near the floor) moves little, and a confident one dominates;
/// equal-weight RRF instead lets a weak list pull a strong one down. Ties: by page id.
pub fn evidence_fusion(
  lexical: &[(String, f64)],
  lexical_trust: f64,
  dense: &[(String, f64)],
) -> Vec<(String, f64)> {
  let best = lexical.iter().map(|(_, s)| *s).fold(0.0f64, f64::max);
  let mut scores: Vec<(String, f64)> = Vec::new();
  let mut index = std::collections::HashMap::new();
  let mut add = |id: &String, v: f64| {
    let i = *index.entry(id.clone()).or_insert_with(|| {
      scores.push((id.clone(), 0.0));
      scores.len() - 1
    });
    scores[i].1 += v;
  };
  for (id, bm25) in lexical {
    add(id, if best > 0.0 { lexical_trust.clamp(0.0, 1.0) * bm25 / best } else { 0.0 });
  }
  for (id, conf) in dense {
    add(id, conf.clamp(0.0, 1.0));
  }
  scores.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
  scores
}

#[cfg(test)]
mod tests {
  use super::*;

  fn item(id: &str, vault: VaultKind, rank: usize, multiplier: f64) -> LayerItem<()> {
    LayerItem { page_id: id.into(), vault, rank, multiplier, payload: () }
  }

  #[test]
  fn project_wins_duplicates_even_at_worse_rank() {
    let fused = fuse_layers(vec![
      vec![item("a", VaultKind::Project, 3, 1.0)],
      vec![item("a", VaultKind::Personal, 0, 1.0), item("b", VaultKind::Personal, 1, 1.0)],
    ]);
    assert_eq!(fused.len(), 2);
    let a = fused.iter().find(|f| f.item.page_id == "a").unwrap();
    assert_eq!(a.item.vault, VaultKind::Project);
    assert_eq!(fused[0].item.page_id, "b");
  }

  #[test]
  fn ties_by_rank_then_project_then_id() {
    let fused = fuse_layers(vec![
      vec![item("p0", VaultKind::Project, 0, 1.0), item("p1", VaultKind::Project, 1, 1.0)],
      vec![item("q0", VaultKind::Personal, 0, 1.0), item("a1", VaultKind::Personal, 1, 1.0)],
    ]);
    let ids: Vec<_> = fused.iter().map(|f| f.item.page_id.as_str()).collect();
    assert_eq!(ids, vec!["p0", "q0", "p1", "a1"]);
    assert!((fused[0].key - 1.0 / 60.0).abs() < 1e-12);
  }

  #[test]
  fn multiplier_can_lift_a_canonical_card() {
    let fused = fuse_layers(vec![vec![
      item("evidence", VaultKind::Project, 0, 0.98),
      item("card", VaultKind::Project, 1, 1.03),
    ]]);
    assert_eq!(fused[0].item.page_id, "card");
  }

  #[test]
  fn rrf_sums_ranks() {
    let r = rrf(&[vec!["a".into(), "b".into()], vec!["b".into(), "c".into()]]);
    assert_eq!(r[0].0, "b");
    assert!((r[0].1 - (1.0 / 61.0 + 1.0 / 60.0)).abs() < 1e-12);
  }

  #[test]
  fn weighted_rrf_lets_the_heavier_list_win() {
    let first: Vec<String> = vec!["a".into(), "b".into()];
    let second: Vec<String> = vec!["b".into(), "a".into()];
    let r = weighted_rrf(&[(first.as_slice(), 2.0), (second.as_slice(), 1.0)]);
    assert_eq!(r[0].0, "a");
    assert!((r[0].1 - (2.0 / 60.0 + 1.0 / 61.0)).abs() < 1e-12);
  }

  #[test]
  fn evidence_fusion_follows_the_confident_list() {
    let lex: Vec<(String, f64)> = vec![("a".into(), 10.0), ("b".into(), 5.0)];
    // A confident lexical list and a weak dense one: the lexical order survives.
    let weak: Vec<(String, f64)> = vec![("b".into(), 0.30), ("a".into(), 0.25), ("c".into(), 0.28)];
    let r = evidence_fusion(&lex, 0.9, &weak);
    assert_eq!(r[0].0, "a");
    assert!((r[0].1 - (0.9 + 0.25)).abs() < 1e-12);
    // An unsure lexical list yields to a confident dense list.
    let strong: Vec<(String, f64)> = vec![("c".into(), 0.8), ("b".into(), 0.35), ("a".into(), 0.2)];
    let r = evidence_fusion(&lex, 0.2, &strong);
    assert_eq!(r.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(), vec!["c", "b", "a"]);
    // No lexical evidence: the dense order; ties by id.
    let r = evidence_fusion(&[], 0.9, &[("z".into(), 0.5), ("y".into(), 0.5)]);
    assert_eq!(r[0].0, "y");
  }
}
