//! Calibration as a procedure: fit the cosine → confidence mapping of the configured embedding
//! model on a labelled set and store it in the model's `manifest.json` (`calibration`), where
//! recall reads it ([`super::confidence::DenseCalibration::of_model`]).
//!
//! The labelled set is JSONL, one query per line (docs/CONFIDENCE.md, "Calibrating a model"):
//!
//! ```json
//! {"query": "how do we rotate TLS certificates?", "related": ["runbooks/tls-rotation"], "vault": "wiki"}
//! {"query": "best pasta recipe with anchovies", "related": []}
//! ```
//!
//! `related` lists the pages of the vault that answer the query; an empty list marks an
//! *unrelated* query (no page of that vault is about it). `vault` (optional) is a vault root,
//! relative to the labels file; without it the command's default vault is used.
//!
//! Evidence per query: the cosine of the vault's best chunk overall (top-1, what the confidence
//! floors see) and, for related queries, the best-chunk cosine of the best related page. The fit
//! ([`fit_dense`]) maps the *typical* unrelated top-1 cosine (the negatives' median) to 0 and the
//! cosine that only `max_negative_rate` of unrelated queries reach (default 0.5%) to the automatic
//! floor 0.50.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::dense::{dense_candidates, page_cosines};
use super::engine::{open_snapshot, Unavailable};
use crate::error::{Error, Result};
use crate::fsutil::write_json;
use crate::models::{self, Calibration, ModelManifest};
use crate::vault::VaultPaths;

/// Default share of unrelated queries allowed at or above the automatic floor.
pub const DEFAULT_MAX_NEGATIVE_RATE: f64 = 0.005;
/// Fewest related and unrelated queries a fit accepts.
pub const MIN_SAMPLES: usize = 20;

/// One labelled query of a calibration set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelledQuery {
  /// The query text.
  pub query: String,
  /// Page ids of the vault that answer it; empty for an unrelated query.
  #[serde(default)]
  pub related: Vec<String>,
  /// Vault root (relative to the labels file), else the default vault.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub vault: Option<String>,
  /// Kind of unrelated query (e.g. `chat questions`, `agent prompts`): the automatic-floor
  /// quantile is taken per group and the highest wins, so a small group of near-domain negatives
  /// is not drowned by many distant ones. Default: the vault.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub group: Option<String>,
}

impl LabelledQuery {
  /// The negative group of the query (its `group`, else its `vault`, else `default`).
  pub fn group_name(&self) -> &str {
    self.group.as_deref().or(self.vault.as_deref()).unwrap_or("default")
  }
}

/// Read a labels file (JSONL; blank lines are skipped). A malformed line is an invalid-input
/// error naming the line.
pub fn read_labels(path: &Path) -> Result<Vec<LabelledQuery>> {
  let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
  let mut out = Vec::new();
  for (i, line) in text.lines().enumerate() {
    if line.trim().is_empty() {
      continue;
    }
    let q: LabelledQuery =
      serde_json::from_str(line).map_err(|e| Error::invalid(format!("{}:{}: {e}", path.display(), i + 1)))?;
    if q.query.trim().is_empty() {
      return Err(Error::invalid(format!("{}:{}: empty query", path.display(), i + 1)));
    }
    out.push(q);
  }
  if out.is_empty() {
    return Err(Error::invalid(format!("{} has no labelled query", path.display())));
  }
  Ok(out)
}

/// The vault root of a labelled query: its `vault` relative to the labels file's directory, else
/// `default`.
pub fn vault_of(q: &LabelledQuery, labels: &Path, default: Option<&Path>) -> Result<PathBuf> {
  match (&q.vault, default) {
    (Some(v), _) => Ok(labels.parent().unwrap_or(Path::new(".")).join(v)),
    (None, Some(d)) => Ok(d.to_path_buf()),
    (None, None) => {
      Err(Error::invalid(format!("query {:?} names no vault and no default vault was given", q.query)))
    }
  }
}

/// Dense evidence of one query on one vault.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DenseEvidence {
  /// Best-chunk cosine of the vault's top page.
  pub top1: f64,
  /// Best-chunk cosine of the best related page (related queries whose pages have vectors).
  pub related_best: Option<f64>,
  /// The top page is a related one.
  pub top1_related: bool,
}

/// Dense evidence of `query` on an indexed vault with the configured embedding model (the
/// vault's vectors must have been built with it).
pub fn dense_evidence(paths: &VaultPaths, query: &str, related: &[String]) -> Result<DenseEvidence> {
  let snap = open_snapshot(paths).map_err(|u| match u {
    Unavailable::NotReady(n) => Error::Index(format!("{}: {}", n.code, n.message)),
    Unavailable::Failed(e) => e,
  })?;
  let embedder = models::embedder()?;
  let vectors = snap
    .data
    .vectors()?
    .filter(|v| !v.present().is_empty())
    .ok_or_else(|| Error::Index("the vault has no vectors; index it with the vectors component".into()))?;
  if vectors.model != embedder.id() {
    return Err(Error::Index(format!(
      "the vault's vectors were built with {} but the configured model is {}; reindex",
      vectors.model,
      embedder.id()
    )));
  }
  let q = embedder.embed_query(query)?;
  let top = dense_candidates(&snap, &vectors, &q, 1)?;
  let (top1, top_page) =
    top.first().map(|c| (c.cosine as f64, c.page_id.clone())).unwrap_or((0.0, String::new()));
  let related_best = if related.is_empty() {
    None
  } else {
    page_cosines(&snap, &vectors, &q, related).values().map(|(c, _)| *c as f64).reduce(f64::max)
  };
  Ok(DenseEvidence { top1, related_best, top1_related: related.contains(&top_page) })
}

/// Dense evidence of every labelled query (each on its own vault; see [`vault_of`]).
pub fn collect_evidence(
  labels: &[LabelledQuery],
  labels_path: &Path,
  default_vault: Option<&Path>,
) -> Result<Vec<DenseEvidence>> {
  labels
    .iter()
    .map(|q| {
      let root = vault_of(q, labels_path, default_vault)?;
      let abs = std::path::absolute(&root).map_err(|e| Error::io("resolve", &root, e))?;
      dense_evidence(&VaultPaths::for_root(abs), &q.query, &q.related)
    })
    .collect()
}

/// Fit [`fit_dense`] on collected evidence: related queries contribute their best related page's
/// cosine, unrelated ones their top-1 cosine.
pub fn fit_evidence(
  labels: &[LabelledQuery],
  evidence: &[DenseEvidence],
  max_negative_rate: f64,
) -> Result<DenseFit> {
  let pos: Vec<f64> = labels
    .iter()
    .zip(evidence)
    .filter(|(q, _)| !q.related.is_empty())
    .filter_map(|(_, e)| e.related_best)
    .collect();
  let groups = unrelated_by_group(labels, evidence.iter().map(|e| e.top1));
  fit_dense_grouped(&pos, &groups, max_negative_rate)
}

/// The `values` (one per label, in order) of the unrelated queries, grouped by
/// [`LabelledQuery::group_name`], groups in the order they first appear.
pub fn unrelated_by_group<T>(
  labels: &[LabelledQuery],
  values: impl IntoIterator<Item = T>,
) -> Vec<(String, Vec<T>)> {
  let mut groups: Vec<(String, Vec<T>)> = Vec::new();
  for (q, v) in labels.iter().zip(values).filter(|(q, _)| q.related.is_empty()) {
    match groups.iter_mut().find(|(g, _)| g == q.group_name()) {
      Some((_, vs)) => vs.push(v),
      None => groups.push((q.group_name().to_string(), vec![v])),
    }
  }
  groups
}

/// A fitted cosine mapping and what it was fitted on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DenseFit {
  /// Cosine mapped to confidence 0: the median top-1 cosine of the unrelated queries.
  pub cosine_floor: f64,
  /// Cosine span mapped onto [0, 1]: twice the distance from the floor to `cosine_at_auto`.
  pub cosine_span: f64,
  /// Cosine mapped to the automatic floor ([`super::confidence::AUTOMATIC_FLOOR`], 0.50): the unrelated queries' top-1 quantile
  /// `1 − max_negative_rate` (nearest rank).
  pub cosine_at_auto: f64,
  /// Related queries (best related page's cosine) and unrelated queries (top-1 cosine) used.
  pub positives: usize,
  /// Unrelated queries used.
  pub negatives: usize,
  /// Share of unrelated queries whose top-1 reaches the automatic floor under the fit.
  pub negative_pass_rate: f64,
  /// Share of related queries whose best related page reaches the automatic floor.
  pub positive_pass_rate: f64,
  /// Share of related queries whose best related page reaches the explicit floor (0.25).
  pub positive_explicit_rate: f64,
  /// The target share of unrelated queries at or above the automatic floor.
  pub max_negative_rate: f64,
}

/// Nearest-rank quantile of sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
  let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
  sorted[rank - 1]
}

/// [`fit_dense`] with the unrelated queries in groups: the floor is the median of all of them, the
/// automatic-floor cosine the highest of the groups' `1 − max_negative_rate` quantiles (a group
/// of n queries contributes at most its largest cosine when n × rate < 1).
pub fn fit_dense_grouped(
  positives: &[f64],
  groups: &[(String, Vec<f64>)],
  max_negative_rate: f64,
) -> Result<DenseFit> {
  let all: Vec<f64> = groups.iter().flat_map(|(_, v)| v.iter().copied()).collect();
  let mut fit = fit_dense(positives, &all, max_negative_rate)?;
  let mut at_auto = fit.cosine_at_auto;
  for (_, v) in groups {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
      continue;
    }
    v.sort_by(f64::total_cmp);
    at_auto = at_auto.max(quantile(&v, 1.0 - max_negative_rate));
  }
  if at_auto > fit.cosine_at_auto {
    let floor = fit.cosine_floor;
    let span = 2.0 * (at_auto - floor);
    let share = |v: &[f64], min: f64| v.iter().filter(|c| **c > min).count() as f64 / v.len() as f64;
    fit.cosine_at_auto = at_auto;
    fit.cosine_span = span;
    fit.negative_pass_rate = share(&all, at_auto);
    fit.positive_pass_rate = share(positives, at_auto);
    fit.positive_explicit_rate = share(positives, floor + span * super::confidence::EXPLICIT_FLOOR - 1e-12);
  }
  Ok(fit)
}

/// Fit the linear cosine mapping: floor = median unrelated top-1 cosine (confidence 0), the
/// unrelated quantile `1 − max_negative_rate` → confidence 0.50 (the automatic floor), so
/// `span = 2 × (that cosine − floor)`. Needs [`MIN_SAMPLES`] of each kind and a quantile above the
/// median.
pub fn fit_dense(positives: &[f64], negatives: &[f64], max_negative_rate: f64) -> Result<DenseFit> {
  if positives.len() < MIN_SAMPLES || negatives.len() < MIN_SAMPLES {
    return Err(Error::invalid(format!(
      "calibration needs at least {MIN_SAMPLES} related and {MIN_SAMPLES} unrelated queries (got {} and {})",
      positives.len(),
      negatives.len()
    )));
  }
  if !(0.0..0.5).contains(&max_negative_rate) {
    return Err(Error::invalid("max negative rate must be in [0, 0.5)"));
  }
  let mut neg: Vec<f64> = negatives.iter().copied().filter(|x| x.is_finite()).collect();
  neg.sort_by(f64::total_cmp);
  let floor = quantile(&neg, 0.5);
  let at_auto = quantile(&neg, 1.0 - max_negative_rate);
  if at_auto <= floor {
    return Err(Error::invalid("unrelated cosines do not spread above their median; cannot fit"));
  }
  let span = 2.0 * (at_auto - floor);
  // The quantile itself maps to exactly the automatic floor: what lies strictly above it passes
  // (the stored mapping is rounded to 4 decimals, so a tie is not a reliable pass either way).
  let share = |v: &[f64], min: f64| v.iter().filter(|c| **c > min).count() as f64 / v.len() as f64;
  let above_auto = |v: &[f64]| share(v, at_auto);
  let explicit = floor + span * (super::confidence::EXPLICIT_FLOOR);
  Ok(DenseFit {
    cosine_floor: floor,
    cosine_span: span,
    cosine_at_auto: at_auto,
    positives: positives.len(),
    negatives: neg.len(),
    negative_pass_rate: above_auto(&neg),
    positive_pass_rate: above_auto(positives),
    positive_explicit_rate: share(positives, explicit - 1e-12),
    max_negative_rate,
  })
}

/// Write a fitted mapping into a model directory's `manifest.json` (`calibration.cosineFloor`,
/// `cosineSpan`, `fittedOn`), keeping every other field; the write is atomic. Returns the new
/// manifest.
pub fn store_calibration(model_dir: &Path, fit: &DenseFit, fitted_on: &str) -> Result<ModelManifest> {
  let dir = models::ModelDir::open(model_dir)?;
  let mut manifest = dir.manifest;
  if manifest.kind != models::ModelKind::Embed {
    return Err(Error::invalid(format!("{} is not an embedding model", model_dir.display())));
  }
  let mut cal = manifest.calibration.take().unwrap_or(Calibration {
    cosine_floor: None,
    cosine_span: None,
    logit_scale: None,
    logit_bias: None,
    fitted_on: String::new(),
  });
  cal.cosine_floor = Some(round4(fit.cosine_floor));
  cal.cosine_span = Some(round4(fit.cosine_span));
  cal.fitted_on = fitted_on.to_string();
  manifest.calibration = Some(cal);
  write_json(&model_dir.join("manifest.json"), &manifest)?;
  Ok(manifest)
}

fn round4(x: f64) -> f64 {
  (x * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn fit_maps_median_to_zero_and_the_tail_to_the_automatic_floor() {
    // 200 negatives spread over [0.10, 0.50), 40 positives over [0.45, 0.85).
    let neg: Vec<f64> = (0..200).map(|i| 0.10 + 0.002 * i as f64).collect();
    let pos: Vec<f64> = (0..40).map(|i| 0.45 + 0.01 * i as f64).collect();
    let f = fit_dense(&pos, &neg, 0.01).unwrap();
    assert!((f.cosine_floor - quantile(&neg, 0.5)).abs() < 1e-12);
    assert!((f.cosine_at_auto - neg[197]).abs() < 1e-12, "{}", f.cosine_at_auto);
    assert!((f.cosine_span - 2.0 * (f.cosine_at_auto - f.cosine_floor)).abs() < 1e-12);
    assert!(f.negative_pass_rate <= 0.01);
    assert!(f.positive_pass_rate > 0.8 && f.positive_pass_rate < 1.0, "{}", f.positive_pass_rate);
    assert_eq!(f.positive_explicit_rate, 1.0);
    // A stricter rate moves the automatic point up.
    let g = fit_dense(&pos, &neg, 0.0).unwrap();
    assert!(g.cosine_at_auto > f.cosine_at_auto);
    assert_eq!(g.negative_pass_rate, 0.0);
  }

  #[test]
  fn unrelated_values_are_grouped_by_name_in_first_seen_order() {
    let q = |related: &[&str], group: Option<&str>, vault: Option<&str>| LabelledQuery {
      query: "q".into(),
      related: related.iter().map(|r| r.to_string()).collect(),
      vault: vault.map(String::from),
      group: group.map(String::from),
    };
    let labels = [
      q(&[], Some("b"), None),
      q(&["p"], Some("b"), None),
      q(&[], None, Some("v")),
      q(&[], Some("b"), None),
      q(&[], None, None),
    ];
    let groups = unrelated_by_group(&labels, [1, 2, 3, 4, 5]);
    assert_eq!(groups, vec![("b".into(), vec![1, 4]), ("v".into(), vec![3]), ("default".into(), vec![5])]);
  }

  #[test]
  fn the_hardest_group_sets_the_automatic_point() {
    let far: Vec<f64> = (0..400).map(|i| 0.05 + 0.0005 * i as f64).collect();
    let near: Vec<f64> = (0..30).map(|i| 0.20 + 0.01 * i as f64).collect();
    let pos: Vec<f64> = (0..40).map(|i| 0.45 + 0.01 * i as f64).collect();
    let pooled: Vec<f64> = far.iter().chain(&near).copied().collect();
    let p = fit_dense(&pos, &pooled, 0.005).unwrap();
    let g = fit_dense_grouped(&pos, &[("far".into(), far), ("near".into(), near.clone())], 0.005).unwrap();
    assert_eq!(g.cosine_floor, p.cosine_floor, "the floor is the pooled median");
    assert_eq!(g.cosine_at_auto, near[29], "a group of 30 contributes its maximum");
    assert!(g.cosine_at_auto > p.cosine_at_auto);
    assert_eq!(g.negative_pass_rate, 0.0);
  }

  #[test]
  fn fit_refuses_too_little_or_degenerate_data() {
    let few = vec![0.5; 5];
    let many = vec![0.3; 50];
    assert!(fit_dense(&few, &many, 0.005).is_err());
    assert!(fit_dense(&many, &few, 0.005).is_err());
    // All negatives equal: no spread above the median.
    assert!(fit_dense(&many, &many, 0.005).is_err());
    assert!(fit_dense(&many, &many, 0.7).is_err());
  }

  #[test]
  fn labels_parse_with_line_numbers() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("labels.jsonl");
    std::fs::write(&p, "{\"query\":\"a b\",\"related\":[\"x\"],\"vault\":\"v\"}\n\n{\"query\":\"c\"}\n")
      .unwrap();
    let l = read_labels(&p).unwrap();
    assert_eq!(l.len(), 2);
    assert!(l[1].related.is_empty());
    assert_eq!(vault_of(&l[0], &p, None).unwrap(), t.path().join("v"));
    assert!(vault_of(&l[1], &p, None).is_err());
    assert_eq!(vault_of(&l[1], &p, Some(Path::new("/d"))).unwrap(), PathBuf::from("/d"));
    std::fs::write(&p, "{\"query\":\"a\"}\nnot json\n").unwrap();
    let e = read_labels(&p).unwrap_err().to_string();
    assert!(e.contains(":2:"), "{e}");
  }
}
