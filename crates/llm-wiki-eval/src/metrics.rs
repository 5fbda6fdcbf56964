//! Ranking metrics.
//!
//! * Generic IR metrics over a ranked id list and graded judgments (grade > 0 = relevant):
//!   nDCG@k (gain 2^g − 1, discount log2(i + 2) with i 0-based), MRR, recall@k, precision@k,
//!   and a [`Summary`] of their means over the judged queries of a run.
//! * The pi benchmark metrics, exactly as the pi contract §8 defines them
//!   (test/helpers/retrieval-metrics.ts upstream): [`pi_metrics`] per slice, every value the
//!   mean over the qualifying queries (0 for none), rounded like JS `Number(x.toFixed(6))`.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::datasets::{AutoExpectation, PiFixture, PiQuery, PiSplit};
use super::trec::Qrels;
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::vault::page::Role;

// ---------------------------------------------------------------------------------------------
// Generic metrics
// ---------------------------------------------------------------------------------------------

fn grade_of<S: AsRef<str>>(judged: &HashMap<String, u32>, id: &S) -> u32 {
  judged.get(id.as_ref()).copied().unwrap_or(0)
}

/// Number of relevant (grade > 0) judged ids.
pub fn relevant_count(judged: &HashMap<String, u32>) -> usize {
  judged.values().filter(|&&g| g > 0).count()
}

fn gain(grade: u32) -> f64 {
  2f64.powi(grade.min(1000) as i32) - 1.0
}

fn discount(index: usize) -> f64 {
  (index as f64 + 2.0).log2()
}

/// DCG@k: Σ over the first k ranked ids of (2^grade − 1) / log2(i + 2), i 0-based. Unjudged ids
/// have grade 0; a repeated id counts at every position.
pub fn dcg_at<S: AsRef<str>>(ranked: &[S], judged: &HashMap<String, u32>, k: usize) -> f64 {
  ranked.iter().take(k).enumerate().map(|(i, id)| gain(grade_of(judged, id)) / discount(i)).sum()
}

/// Ideal DCG@k: all judged grades sorted descending, cut at k.
pub fn ideal_dcg_at(judged: &HashMap<String, u32>, k: usize) -> f64 {
  let mut grades: Vec<u32> = judged.values().copied().collect();
  grades.sort_unstable_by(|a, b| b.cmp(a));
  grades.iter().take(k).enumerate().map(|(i, &g)| gain(g) / discount(i)).sum()
}

/// nDCG@k = DCG@k / IDCG@k; 0 when nothing is relevant.
pub fn ndcg_at<S: AsRef<str>>(ranked: &[S], judged: &HashMap<String, u32>, k: usize) -> f64 {
  let ideal = ideal_dcg_at(judged, k);
  if ideal > 0.0 {
    dcg_at(ranked, judged, k) / ideal
  } else {
    0.0
  }
}

/// Reciprocal rank of the first relevant id within the first `k` ids (the whole list for
/// `None`); 0 if there is none.
pub fn mrr<S: AsRef<str>>(ranked: &[S], judged: &HashMap<String, u32>, k: Option<usize>) -> f64 {
  let k = k.unwrap_or(ranked.len());
  ranked.iter().take(k).position(|id| grade_of(judged, id) > 0).map_or(0.0, |i| 1.0 / (i as f64 + 1.0))
}

fn hits_in_top<'a, S: AsRef<str>>(ranked: &'a [S], k: usize, wanted: &HashSet<&str>) -> usize {
  let top: HashSet<&'a str> = ranked.iter().take(k).map(AsRef::as_ref).collect();
  wanted.iter().filter(|id| top.contains(*id)).count()
}

fn relevant_set(judged: &HashMap<String, u32>) -> HashSet<&str> {
  judged.iter().filter(|(_, &g)| g > 0).map(|(id, _)| id.as_str()).collect()
}

/// Recall@k: |top-k ∩ relevant| / |relevant| (distinct ids); 0 when nothing is relevant.
pub fn recall_at<S: AsRef<str>>(ranked: &[S], judged: &HashMap<String, u32>, k: usize) -> f64 {
  let relevant = relevant_set(judged);
  if relevant.is_empty() {
    return 0.0;
  }
  hits_in_top(ranked, k, &relevant) as f64 / relevant.len() as f64
}

/// Precision@k: |top-k ∩ relevant| / k (trec_eval's convention: a list shorter than k is padded
/// with non-relevant ids); 0 for k = 0.
pub fn precision_at<S: AsRef<str>>(ranked: &[S], judged: &HashMap<String, u32>, k: usize) -> f64 {
  if k == 0 {
    return 0.0;
  }
  hits_in_top(ranked, k, &relevant_set(judged)) as f64 / k as f64
}

/// Mean of the values; 0 for none.
pub fn mean(values: &[f64]) -> f64 {
  if values.is_empty() {
    0.0
  } else {
    values.iter().sum::<f64>() / values.len() as f64
  }
}

/// Scores of one query (the fields of [`Summary`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryScores {
  pub ndcg5: f64,
  pub ndcg10: f64,
  pub mrr10: f64,
  pub mrr: f64,
  pub recall20: f64,
  pub recall100: f64,
}

/// All [`Summary`] metrics of one ranked list.
pub fn query_scores<S: AsRef<str>>(ranked: &[S], judged: &HashMap<String, u32>) -> QueryScores {
  QueryScores {
    ndcg5: ndcg_at(ranked, judged, 5),
    ndcg10: ndcg_at(ranked, judged, 10),
    mrr10: mrr(ranked, judged, Some(10)),
    mrr: mrr(ranked, judged, None),
    recall20: recall_at(ranked, judged, 20),
    recall100: recall_at(ranked, judged, 100),
  }
}

/// Means over queries (not rounded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
  pub ndcg5: f64,
  pub ndcg10: f64,
  pub mrr10: f64,
  pub mrr: f64,
  pub recall20: f64,
  pub recall100: f64,
  /// Number of queries averaged.
  pub queries: usize,
}

impl Summary {
  /// Mean of per-query scores (all zero for none).
  pub fn from_scores(scores: &[QueryScores]) -> Summary {
    let m = |f: fn(&QueryScores) -> f64| mean(&scores.iter().map(f).collect::<Vec<_>>());
    Summary {
      ndcg5: m(|s| s.ndcg5),
      ndcg10: m(|s| s.ndcg10),
      mrr10: m(|s| s.mrr10),
      mrr: m(|s| s.mrr),
      recall20: m(|s| s.recall20),
      recall100: m(|s| s.recall100),
      queries: scores.len(),
    }
  }

  /// The same summary with every metric rounded like JS `Number(x.toFixed(6))`.
  pub fn rounded(&self) -> Summary {
    Summary {
      ndcg5: round6(self.ndcg5),
      ndcg10: round6(self.ndcg10),
      mrr10: round6(self.mrr10),
      mrr: round6(self.mrr),
      recall20: round6(self.recall20),
      recall100: round6(self.recall100),
      queries: self.queries,
    }
  }
}

/// Per-query scores of a run over every query of `qrels` with at least one relevant judgment
/// (BEIR/trec_eval convention); a query missing from `ranked` scores 0. Sorted by query id.
pub fn per_query_scores(ranked: &HashMap<String, Vec<String>>, qrels: &Qrels) -> Vec<(String, QueryScores)> {
  let mut out: Vec<(String, QueryScores)> = qrels
    .iter()
    .filter(|(_, judged)| relevant_count(judged) > 0)
    .map(|(qid, judged)| {
      let list = ranked.get(qid).map(Vec::as_slice).unwrap_or(&[]);
      (qid.clone(), query_scores(list, judged))
    })
    .collect();
  out.sort_by(|a, b| a.0.cmp(&b.0));
  out
}

/// Mean metrics of a run (see [`per_query_scores`] for which queries count).
pub fn summarize(ranked: &HashMap<String, Vec<String>>, qrels: &Qrels) -> Summary {
  let scores: Vec<QueryScores> = per_query_scores(ranked, qrels).into_iter().map(|(_, s)| s).collect();
  Summary::from_scores(&scores)
}

// ---------------------------------------------------------------------------------------------
// JS-compatible rounding
// ---------------------------------------------------------------------------------------------

/// `Number(x.toFixed(digits))` of JavaScript, exactly (digits ≤ 20).
///
/// `toFixed` rounds the exact binary value of `x` to `digits` decimals, choosing the larger
/// magnitude on an exact tie (so half away from zero on the true value: `(0.0078125).toFixed(6)`
/// is `"0.007813"`, while `(0.0000005).toFixed(6)` is `"0.000000"` because that double is
/// slightly below 5e-7). `|x| ≥ 1e21` and non-finite values are returned unchanged.
pub fn js_round(x: f64, digits: u32) -> f64 {
  assert!(digits <= 20, "js_round supports at most 20 digits");
  if !x.is_finite() || x.abs() >= 1e21 {
    return x;
  }
  let bits = x.abs().to_bits();
  let exp = ((bits >> 52) & 0x7ff) as i32;
  let frac = bits & ((1u64 << 52) - 1);
  let (mantissa, e) = if exp == 0 { (frac, -1074) } else { (frac | (1u64 << 52), exp - 1075) };
  if e >= 0 {
    // |x| is an integer: toFixed only appends zeros.
    return x;
  }
  let scale = 10u128.pow(digits);
  // |x| = mantissa · 2^e; n = |x| · 10^digits rounded, ties to the larger n.
  let num = u128::from(mantissa) * scale; // < 2^53 · 10^20 < 2^120
  let shift = e.unsigned_abs();
  let n = if shift >= 128 {
    0 // num < 2^120 < half of 2^shift
  } else {
    let q = num >> shift;
    let r = num & ((1u128 << shift) - 1);
    if r >= (1u128 << (shift - 1)) {
      q + 1
    } else {
      q
    }
  };
  let text = format!(
    "{}{}.{:0width$}",
    if x.is_sign_negative() { "-" } else { "" },
    n / scale,
    n % scale,
    width = digits as usize
  );
  text.parse().expect("formatted decimal parses")
}

/// `Number(x.toFixed(6))`.
pub fn round6(x: f64) -> f64 {
  js_round(x, 6)
}

// ---------------------------------------------------------------------------------------------
// pi benchmark metrics (pi contract §8)
// ---------------------------------------------------------------------------------------------

/// A slice of the pi fixture's queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Slice {
  All,
  Train,
  Heldout,
}

impl Slice {
  /// Every slice, in report order.
  pub const EVERY: [Slice; 3] = [Slice::All, Slice::Train, Slice::Heldout];

  /// `"all"`, `"train"` or `"heldout"`.
  pub fn as_str(self) -> &'static str {
    match self {
      Slice::All => "all",
      Slice::Train => "train",
      Slice::Heldout => "heldout",
    }
  }

  /// Whether the query belongs to this slice.
  pub fn contains(self, q: &PiQuery) -> bool {
    match self {
      Slice::All => true,
      Slice::Train => q.split == PiSplit::Train,
      Slice::Heldout => q.split == PiSplit::Heldout,
    }
  }
}

impl std::str::FromStr for Slice {
  type Err = Error;

  fn from_str(s: &str) -> Result<Slice> {
    match s {
      "all" => Ok(Slice::All),
      "train" => Ok(Slice::Train),
      "heldout" | "held-out" | "held_out" => Ok(Slice::Heldout),
      other => Err(Error::invalid(format!("unknown slice {other:?} (expected all, train or heldout)"))),
    }
  }
}

/// The pi benchmark metrics of one slice (means over qualifying queries, rounded to 6 decimals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiMetrics {
  pub candidate_recall20: f64,
  pub mrr: f64,
  pub ndcg5: f64,
  pub ndcg10: f64,
  pub canonical_at3: f64,
  pub evidence_recall20: f64,
  pub contradiction_coverage: f64,
  pub auto_false_positive_rate: f64,
}

/// One query's contributions to [`PiMetrics`]; `None` where the query does not qualify.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiQueryScores {
  pub candidate_recall20: Option<f64>,
  pub mrr: Option<f64>,
  pub ndcg5: Option<f64>,
  pub ndcg10: Option<f64>,
  pub canonical_at3: Option<f64>,
  pub evidence_recall20: Option<f64>,
  pub contradiction_coverage: Option<f64>,
  pub auto_false_positive_rate: Option<f64>,
}

fn indicator(b: bool) -> f64 {
  if b {
    1.0
  } else {
    0.0
  }
}

/// Recall@k restricted to relevant ids of a role (the denominator counts those ids only).
fn role_recall(query: &PiQuery, role: Role, ranked: &[String], k: usize) -> f64 {
  let wanted: HashSet<&str> =
    query.judgments.iter().filter(|j| j.role == role && j.grade > 0).map(|j| j.page_id.as_str()).collect();
  if wanted.is_empty() {
    return 0.0;
  }
  hits_in_top(ranked, k, &wanted) as f64 / wanted.len() as f64
}

/// Score one query (`ranked` = the ranked list, `auto` = the automatic-recall list).
pub fn pi_query_scores(query: &PiQuery, ranked: &[String], auto: &[String]) -> PiQueryScores {
  let mut s = PiQueryScores::default();
  if !query.judgments.is_empty() {
    let grades = query.grades();
    s.candidate_recall20 = Some(recall_at(ranked, &grades, 20));
    s.mrr = Some(mrr(ranked, &grades, None));
    s.ndcg5 = Some(ndcg_at(ranked, &grades, 5));
    s.ndcg10 = Some(ndcg_at(ranked, &grades, 10));
  }
  if query.judgments.iter().any(|j| j.role == Role::Canonical) {
    let top3: HashSet<&str> = ranked.iter().take(3).map(String::as_str).collect();
    let hit = query
      .judgments
      .iter()
      .any(|j| j.role == Role::Canonical && j.grade > 0 && top3.contains(j.page_id.as_str()));
    s.canonical_at3 = Some(indicator(hit));
  }
  if query.judgments.iter().any(|j| j.role == Role::Evidence) {
    s.evidence_recall20 = Some(role_recall(query, Role::Evidence, ranked, 20));
  }
  if !query.expected_conflicts.is_empty() {
    let top20: HashSet<&str> = ranked.iter().take(20).map(String::as_str).collect();
    s.contradiction_coverage =
      Some(indicator(query.expected_conflicts.iter().all(|id| top20.contains(id.as_str()))));
  }
  if query.auto_expectation == AutoExpectation::None {
    s.auto_false_positive_rate = Some(indicator(!auto.is_empty()));
  }
  s
}

/// Aggregate per-query scores: the rounded mean of each metric over the queries where it is set.
pub fn aggregate_pi(scores: &[PiQueryScores]) -> PiMetrics {
  let m =
    |f: fn(&PiQueryScores) -> Option<f64>| round6(mean(&scores.iter().filter_map(f).collect::<Vec<_>>()));
  PiMetrics {
    candidate_recall20: m(|s| s.candidate_recall20),
    mrr: m(|s| s.mrr),
    ndcg5: m(|s| s.ndcg5),
    ndcg10: m(|s| s.ndcg10),
    canonical_at3: m(|s| s.canonical_at3),
    evidence_recall20: m(|s| s.evidence_recall20),
    contradiction_coverage: m(|s| s.contradiction_coverage),
    auto_false_positive_rate: m(|s| s.auto_false_positive_rate),
  }
}

fn scores_where(
  fixture: &PiFixture,
  ranked: &HashMap<String, Vec<String>>,
  auto: &HashMap<String, Vec<String>>,
  keep: impl Fn(&PiQuery) -> bool,
) -> Vec<PiQueryScores> {
  fixture
    .queries
    .iter()
    .filter(|q| keep(q))
    .map(|q| {
      let r = ranked.get(&q.id).map(Vec::as_slice).unwrap_or(&[]);
      let a = auto.get(&q.id).map(Vec::as_slice).unwrap_or(&[]);
      pi_query_scores(q, r, a)
    })
    .collect()
}

/// The pi metrics of a slice. `ranked` / `auto` map query ids to page ids (a missing query counts
/// as an empty list). MRR uses the whole ranked list; recall and coverage its top 20.
pub fn pi_metrics(
  fixture: &PiFixture,
  ranked: &HashMap<String, Vec<String>>,
  auto: &HashMap<String, Vec<String>>,
  slice: Slice,
) -> PiMetrics {
  aggregate_pi(&scores_where(fixture, ranked, auto, |q| slice.contains(q)))
}

/// The pi metrics of each category within a slice, in the fixture's category order (categories
/// with no query in the slice are left out).
pub fn pi_metrics_by_category(
  fixture: &PiFixture,
  ranked: &HashMap<String, Vec<String>>,
  auto: &HashMap<String, Vec<String>>,
  slice: Slice,
) -> Vec<(String, PiMetrics)> {
  let mut order: Vec<&str> = fixture.categories.iter().map(String::as_str).collect();
  for q in &fixture.queries {
    if !order.contains(&q.category.as_str()) {
      order.push(&q.category);
    }
  }
  order
    .into_iter()
    .filter(|c| fixture.queries.iter().any(|q| slice.contains(q) && q.category == *c))
    .map(|c| {
      (
        c.to_string(),
        aggregate_pi(&scores_where(fixture, ranked, auto, |q| slice.contains(q) && q.category == c)),
      )
    })
    .collect()
}

/// One row of the benchmark table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiSliceReport {
  pub slice: Slice,
  pub queries: usize,
  /// Queries with at least one judgment.
  pub judged: usize,
  pub metrics: PiMetrics,
}

/// The all/train/heldout table.
pub fn pi_report(
  fixture: &PiFixture,
  ranked: &HashMap<String, Vec<String>>,
  auto: &HashMap<String, Vec<String>>,
) -> Vec<PiSliceReport> {
  Slice::EVERY
    .iter()
    .map(|&slice| {
      let qs: Vec<&PiQuery> = fixture.queries.iter().filter(|q| slice.contains(q)).collect();
      PiSliceReport {
        slice,
        queries: qs.len(),
        judged: qs.iter().filter(|q| !q.judgments.is_empty()).count(),
        metrics: pi_metrics(fixture, ranked, auto, slice),
      }
    })
    .collect()
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::datasets::{fixtures_dir, load_baseline_runs, load_pi_fixture, shared_dir, PiJudgment};

  fn judged(pairs: &[(&str, u32)]) -> HashMap<String, u32> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
  }

  fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
  }

  #[test]
  fn ndcg_binary() {
    // Relevant: a, b (grade 1, gain 1). Ranked: x a y b.
    // DCG@5 = 1/log2(3) + 1/log2(5); IDCG@5 = 1/log2(2) + 1/log2(3) = 1 + 0.6309297536
    // = (0.6309297536 + 0.4306765581) / 1.6309297536 = 0.6509209298
    let j = judged(&[("a", 1), ("b", 1)]);
    let r = ["x", "a", "y", "b"];
    assert!(close(ndcg_at(&r, &j, 5), (1.0 / 3f64.log2() + 1.0 / 5f64.log2()) / (1.0 + 1.0 / 3f64.log2())));
    assert!((ndcg_at(&r, &j, 5) - 0.650_920_929_8).abs() < 1e-9);
    // Cut at 2: DCG = 1/log2(3); IDCG = 1 + 1/log2(3).
    assert!((ndcg_at(&r, &j, 2) - 0.386_852_807_2).abs() < 1e-9);
    assert_eq!(ndcg_at(&["a", "b"], &j, 10), 1.0);
    assert_eq!(ndcg_at(&r, &j, 0), 0.0);
    assert_eq!(ndcg_at(&r, &judged(&[]), 10), 0.0);
    assert_eq!(ndcg_at(&r, &judged(&[("x", 0)]), 10), 0.0);
    assert_eq!(ndcg_at::<&str>(&[], &j, 10), 0.0);
  }

  #[test]
  fn ndcg_graded() {
    // Judgments: a=3, b=2, c=1. Ranked: c, x, a, b.
    // Gains 2^g − 1: a 7, b 3, c 1.
    // DCG@10 = 1/log2(2) + 0/log2(3) + 7/log2(4) + 3/log2(5)
    //        = 1 + 0 + 3.5 + 3/2.321928095 = 4.5 + 1.292029674 = 5.792029674
    // IDCG@10 = 7/1 + 3/log2(3) + 1/log2(4) = 7 + 1.892789261 + 0.5 = 9.392789261
    // nDCG@10 = 5.792029674 / 9.392789261 = 0.6166464 → 0.616646
    // nDCG@2: DCG = 1, IDCG = 7 + 1.892789261 = 8.892789261 → 0.1124507 → 0.112451
    let j = judged(&[("a", 3), ("b", 2), ("c", 1)]);
    let r = ["c", "x", "a", "b"];
    let dcg = 1.0 + 3.5 + 3.0 / 5f64.log2();
    let idcg = 7.0 + 3.0 / 3f64.log2() + 0.5;
    assert!(close(dcg_at(&r, &j, 10), dcg));
    assert!(close(ideal_dcg_at(&j, 10), idcg));
    let v = ndcg_at(&r, &j, 10);
    assert!((v - 5.792_029_674 / 9.392_789_261).abs() < 1e-9, "{v}");
    assert_eq!(round6(v), 0.616646);
    assert_eq!(round6(ndcg_at(&r, &j, 2)), 0.112451);
    // Perfect order is 1.
    assert!(close(ndcg_at(&["a", "b", "c"], &j, 10), 1.0));
    // Ideal counts judged grades even when the list is short: only a at rank 1, k = 3:
    // DCG 7, IDCG 7 + 1.892789261 + 0.5 = 9.392789261 → 0.7452525 → 0.745253
    assert_eq!(round6(ndcg_at(&["a"], &j, 3)), 0.745253);
  }

  #[test]
  fn mrr_recall_precision() {
    let j = judged(&[("a", 2), ("b", 1), ("n", 0)]);
    let r = ["n", "x", "b", "a"];
    // First relevant at rank 3 (n has grade 0).
    assert!(close(mrr(&r, &j, None), 1.0 / 3.0));
    assert!(close(mrr(&r, &j, Some(3)), 1.0 / 3.0));
    assert_eq!(mrr(&r, &j, Some(2)), 0.0);
    assert_eq!(mrr(&["a"], &j, Some(10)), 1.0);
    assert_eq!(mrr::<&str>(&[], &j, None), 0.0);
    // Recall: 2 relevant; top-3 has b → 0.5; top-4 has both → 1.
    assert_eq!(recall_at(&r, &j, 3), 0.5);
    assert_eq!(recall_at(&r, &j, 4), 1.0);
    assert_eq!(recall_at(&r, &j, 100), 1.0);
    assert_eq!(recall_at(&r, &judged(&[("n", 0)]), 10), 0.0);
    // Duplicates count once.
    assert_eq!(recall_at(&["b", "b"], &j, 2), 0.5);
    // Precision: top-4 has 2 relevant → 0.5; top-10 of a 4-list → 0.2; top-1 → 0.
    assert_eq!(precision_at(&r, &j, 4), 0.5);
    assert_eq!(precision_at(&r, &j, 10), 0.2);
    assert_eq!(precision_at(&r, &j, 1), 0.0);
    assert_eq!(precision_at(&r, &j, 0), 0.0);
  }

  #[test]
  fn summary_means() {
    let mut qrels = Qrels::new();
    qrels.insert("q1".into(), judged(&[("a", 1)]));
    qrels.insert("q2".into(), judged(&[("b", 1)]));
    qrels.insert("q3".into(), judged(&[("c", 0)])); // no relevant: not counted
    let mut ranked = HashMap::new();
    ranked.insert("q1".to_string(), vec!["a".to_string()]);
    // q2 ranks b at 11: mrr10 0, mrr 1/11, recall20 1, ndcg10 0.
    let mut l: Vec<String> = (0..10).map(|i| format!("x{i}")).collect();
    l.push("b".into());
    ranked.insert("q2".to_string(), l);
    let s = summarize(&ranked, &qrels);
    assert_eq!(s.queries, 2);
    assert_eq!(s.ndcg10, 0.5);
    assert_eq!(s.ndcg5, 0.5);
    assert_eq!(s.mrr10, 0.5);
    assert!(close(s.mrr, (1.0 + 1.0 / 11.0) / 2.0));
    assert_eq!(s.recall20, 1.0);
    assert_eq!(s.recall100, 1.0);
    assert_eq!(s.rounded().mrr, 0.545455);
    // A query missing from the run scores 0.
    ranked.remove("q1");
    assert_eq!(summarize(&ranked, &qrels).recall20, 0.5);
    assert_eq!(summarize(&HashMap::new(), &Qrels::new()), Summary::default());
    let json = serde_json::to_string(&s.rounded()).unwrap();
    assert!(json.starts_with("{\"ndcg5\":0.5,\"ndcg10\":0.5,\"mrr10\":0.5,\"mrr\":0.545455"), "{json}");
  }

  #[test]
  fn rounding_matches_js_to_fixed() {
    // Expected values printed by node: Number(x.toFixed(6)).
    let cases: &[(f64, f64)] = &[
      (0.0000005, 0.0), // the double is 4.99999999999999977e-7
      (1.0000005, 1.000001),
      (0.1234565, 0.123456),
      (0.1234575, 0.123457),
      (0.0000015, 0.000002),
      (0.0000025, 0.000003),
      (0.0000035, 0.000003),
      (0.9999995, 1.0),
      (0.6826285, 0.682628),
      (0.7253535, 0.725353),
      (1.0 / 3.0, 0.333333),
      (2.0 / 3.0, 0.666667),
      (0.0078125, 0.007813), // exact tie → larger (half-even would give 0.007812)
      (-0.0078125, -0.007813),
      (0.0234375, 0.023438),
      (123456789.1234565, 123456789.123456),
      (4503599627370495.5, 4503599627370495.5),
      (5e-324, 0.0),
      (0.85, 0.85),
      (8.5, 8.5),
      (0.0, 0.0),
      (1e21, 1e21),
    ];
    for &(x, want) in cases {
      assert_eq!(round6(x), want, "round6({x:e})");
    }
    assert!(round6(-0.0000005).is_sign_negative());
    assert!(round6(f64::NAN).is_nan());
    assert_eq!(js_round(2.345, 2), 2.35); // 2.345 is 2.34500000000000019984
    assert_eq!(js_round(1.005, 2), 1.0); // 1.005 is 1.00499999999999989342
    assert_eq!(js_round(2.5, 0), 3.0);
  }

  fn query(id: &str, split: PiSplit, judgments: &[(&str, u32, Role)]) -> PiQuery {
    PiQuery {
      id: id.into(),
      group: id.into(),
      index_in_group: 1,
      text: id.into(),
      category: "c".into(),
      split,
      held_out: split == PiSplit::Heldout,
      auto_expectation: if judgments.is_empty() { AutoExpectation::None } else { AutoExpectation::Hit },
      judgments: judgments
        .iter()
        .map(|(p, g, r)| PiJudgment { page_id: p.to_string(), grade: *g, role: *r })
        .collect(),
      expected_conflicts: vec![],
    }
  }

  #[test]
  fn pi_metrics_by_hand() {
    use Role::{Canonical as C, Evidence as E};
    let mut q1 = query("q1", PiSplit::Train, &[("c1", 3, C), ("e1", 2, E), ("e2", 1, E)]);
    q1.category = "a".into();
    let mut q2 = query("q2", PiSplit::Heldout, &[("c2", 3, C)]);
    q2.expected_conflicts = vec!["c2".into(), "z".into()];
    let q3 = query("q3", PiSplit::Train, &[]);
    let q4 = query("q4", PiSplit::Train, &[("e3", 2, E)]);
    let fixture = PiFixture {
      schema: "pi-benchmark-fixture/1".into(),
      source: serde_json::Value::Null,
      grade_scale: Default::default(),
      categories: vec!["c".into(), "a".into()],
      vault_config: crate::datasets::PiVaultConfig { name: "t".into(), knowledge_format: "legacy".into() },
      counts: serde_json::Value::Null,
      pages: vec![],
      queries: vec![q1, q2, q3, q4],
    };
    let l = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut ranked = HashMap::new();
    // q1: c1 at 4, e1 at 1, e2 missing.
    ranked.insert("q1".to_string(), l(&["e1", "x", "y", "c1"]));
    // q2: c2 at 2; z at 21 (outside top 20) → conflict not covered.
    let mut l2 = l(&["x", "c2"]);
    l2.extend((0..18).map(|i| format!("f{i}")));
    l2.push("z".into());
    ranked.insert("q2".to_string(), l2);
    ranked.insert("q3".to_string(), l(&["x"]));
    // q4 missing entirely → empty list.
    let mut auto = HashMap::new();
    auto.insert("q3".to_string(), l(&["x"]));

    // Per query:
    // q1: recall20 = 2/3; mrr = 1 (e1 relevant at 1);
    //     DCG@5 = 3/1 + 0 + 0 + 7/log2(5) = 3 + 3.014735907 = 6.014735907
    //     IDCG  = 7 + 3/log2(3) + 1/2 = 9.392789261 → ndcg5 = ndcg10 = 0.640356...
    //     canonical@3 = 0 (c1 at 4); evidence recall = 1/2.
    // q2: recall 1; mrr 0.5; ndcg = (7/log2(3)) / 7 = 0.630930; canonical@3 = 1; conflict 0.
    // q3: negative, auto non-empty → FP 1.
    // q4: all 0; evidence recall 0.
    let q1_ndcg = (3.0 + 7.0 / 5f64.log2()) / (7.0 + 3.0 / 3f64.log2() + 0.5);
    let q2_ndcg = 1.0 / 3f64.log2();
    let all = pi_metrics(&fixture, &ranked, &auto, Slice::All);
    assert_eq!(all.candidate_recall20, round6((2.0 / 3.0 + 1.0 + 0.0) / 3.0));
    assert_eq!(all.candidate_recall20, 0.555556);
    assert_eq!(all.mrr, 0.5);
    assert_eq!(all.ndcg5, round6((q1_ndcg + q2_ndcg) / 3.0));
    assert_eq!(all.ndcg10, all.ndcg5);
    assert_eq!(all.canonical_at3, 0.5);
    assert_eq!(all.evidence_recall20, 0.25);
    assert_eq!(all.contradiction_coverage, 0.0);
    assert_eq!(all.auto_false_positive_rate, 1.0);

    let train = pi_metrics(&fixture, &ranked, &auto, Slice::Train);
    assert_eq!(train.candidate_recall20, round6(1.0 / 3.0));
    assert_eq!(train.canonical_at3, 0.0);
    assert_eq!(train.contradiction_coverage, 0.0); // no qualifying query
    let held = pi_metrics(&fixture, &ranked, &auto, Slice::Heldout);
    assert_eq!(held.mrr, 0.5);
    assert_eq!(held.ndcg10, round6(q2_ndcg));
    assert_eq!(held.ndcg10, 0.63093);
    assert_eq!(held.evidence_recall20, 0.0); // no qualifying query
    assert_eq!(held.auto_false_positive_rate, 0.0);

    let by_cat = pi_metrics_by_category(&fixture, &ranked, &auto, Slice::All);
    assert_eq!(by_cat.iter().map(|(c, _)| c.as_str()).collect::<Vec<_>>(), ["c", "a"]);
    assert_eq!(by_cat[1].1.evidence_recall20, 0.5);
    let report = pi_report(&fixture, &ranked, &auto);
    assert_eq!((report[0].queries, report[0].judged), (4, 3));
    assert_eq!((report[1].queries, report[1].judged), (3, 2));
    let json = serde_json::to_string(&all).unwrap();
    assert_eq!(
      json,
      "{\"candidateRecall20\":0.555556,\"mrr\":0.5,\"ndcg5\":0.423762,\"ndcg10\":0.423762,\"canonicalAt3\":0.5,\
       \"evidenceRecall20\":0.25,\"contradictionCoverage\":0.0,\"autoFalsePositiveRate\":1.0}"
    );
  }

  #[test]
  fn slice_parse() {
    assert_eq!("heldout".parse::<Slice>().unwrap(), Slice::Heldout);
    assert_eq!("all".parse::<Slice>().unwrap().as_str(), "all");
    assert!("dev".parse::<Slice>().is_err());
  }

  fn row(v: [f64; 8]) -> PiMetrics {
    PiMetrics {
      candidate_recall20: v[0],
      mrr: v[1],
      ndcg5: v[2],
      ndcg10: v[3],
      canonical_at3: v[4],
      evidence_recall20: v[5],
      contradiction_coverage: v[6],
      auto_false_positive_rate: v[7],
    }
  }

  /// Checks `pi_report` (and `pi_metrics`, its per-slice form) against expected rows of
  /// `(slice, queries, judged, metrics)`.
  fn assert_pi_report(
    fixture: &PiFixture,
    ranked: &HashMap<String, Vec<String>>,
    auto: &HashMap<String, Vec<String>>,
    expected: [(Slice, usize, usize, PiMetrics); 3],
  ) {
    let report = pi_report(fixture, ranked, auto);
    assert_eq!(report.len(), expected.len());
    for (got, (slice, queries, judged, metrics)) in report.iter().zip(expected) {
      assert_eq!(got.slice, slice);
      assert_eq!((got.queries, got.judged), (queries, judged), "{slice:?} counts");
      assert_eq!(got.metrics, metrics, "{slice:?}");
      assert_eq!(pi_metrics(fixture, ranked, auto, slice), metrics, "{slice:?} pi_metrics");
    }
  }

  /// The metrics of a run set equal the values computed for it by an independent implementation
  /// of the contract's definitions (a Python script, not this code) on the in-repository mini
  /// fixture.
  #[test]
  fn mini_fixture_metrics_match_independent_computation() {
    let dir = fixtures_dir().join("mini-pi");
    let fixture = load_pi_fixture(&dir.join("fixture.json")).unwrap();
    let runs = load_baseline_runs(&dir.join("baseline-runs.json")).unwrap();
    let (ranked, auto) = (runs.ranked_map(), runs.auto_map());
    let expected = [
      (Slice::All, 7, 6, row([1.0, 0.791667, 0.787874, 0.787874, 0.833333, 1.0, 1.0, 1.0])),
      (Slice::Train, 5, 4, row([1.0, 0.6875, 0.692854, 0.692854, 0.75, 1.0, 0.0, 1.0])),
      (Slice::Heldout, 2, 2, row([1.0, 1.0, 0.977915, 0.977915, 1.0, 1.0, 1.0, 0.0])),
    ];
    assert_pi_report(&fixture, &ranked, &auto, expected);
  }

  /// The committed phase-1 baseline (pi contract §8) from the heuristic's per-query runs.
  #[test]
  #[ignore = "needs the shared benchmark data (../shared): npm run test:shared"]
  fn reproduces_committed_pi_baseline() {
    let shared = shared_dir();
    let fixture = load_pi_fixture(&shared.join("bench/pi/fixture.json")).unwrap();
    let runs = load_baseline_runs(&shared.join("bench/pi/baseline-runs.json")).unwrap();
    let (ranked, auto) = (runs.ranked_map(), runs.auto_map());
    let expected = [
      (Slice::All, 60, 55, row([0.921212, 0.725354, 0.682629, 0.736589, 0.781818, 0.85, 0.6, 0.4])),
      (Slice::Train, 45, 40, row([0.9625, 0.749444, 0.69355, 0.749919, 0.825, 0.88, 0.0, 0.4])),
      (Slice::Heldout, 15, 15, row([0.811111, 0.661111, 0.653508, 0.701043, 0.666667, 0.7, 0.6, 0.0])),
    ];
    assert_pi_report(&fixture, &ranked, &auto, expected);
    let by_cat = pi_metrics_by_category(&fixture, &ranked, &auto, Slice::All);
    assert_eq!(by_cat.len(), 12);
    let neg = &by_cat.iter().find(|(c, _)| c == "negative").unwrap().1;
    assert_eq!(neg.auto_false_positive_rate, 0.4);
    assert_eq!(neg.mrr, 0.0);
  }
}
