//! Generic BERT-style cross-encoder: (query, passage) pairs → the relevance log-odds of its head
//! → a calibrated probability. Works with any ONNX pair classifier taking `input_ids`,
//! `attention_mask` and (when present) `token_type_ids`, whose `logits` are `[batch]`,
//! `[batch, 1]` (one relevance logit, e.g. MS MARCO MiniLM rerankers) or `[batch, n]` with one
//! column per class (e.g. `[not relevant, relevant]` NLI-style heads).
//!
//! For an n-class head the relevance log-odds is `logit[positive] − logsumexp(other logits)`, so
//! its sigmoid is exactly the softmax probability of the positive class (for two classes:
//! `logit[1] − logit[0]`). The positive class is the manifest's `positiveClass` (default 1).
//! The probability is then Platt-scaled with the manifest's `calibration.logitScale` /
//! `logitBias` (default 1 / 0: the plain sigmoid), and that calibrated probability is the
//! confidence the recall floors act on.

use std::time::Instant;

use super::manifest::{ModelDir, ModelKind};
use super::onnx::{OnnxModel, SessionConfig};
use crate::error::{Error, Result};

/// Pairs per inference batch.
pub const RERANK_BATCH: usize = 8;

/// Positive ("relevant") class of a multi-class head when the manifest does not say.
pub const DEFAULT_POSITIVE_CLASS: usize = 1;

/// A loaded cross-encoder.
pub struct CrossEncoder {
  model: OnnxModel,
  positive: usize,
  scale: f64,
  bias: f64,
}

/// Logistic function.
pub fn sigmoid(x: f32) -> f32 {
  1.0 / (1.0 + (-x).exp())
}

/// Relevance log-odds of one row of logits: the single logit of a one-class head, else
/// `row[positive] − logsumexp(row without positive)`. `None` when `positive` is out of range.
pub fn relevance_log_odds(row: &[f32], positive: usize) -> Option<f32> {
  match row.len() {
    0 => None,
    1 => Some(row[0]),
    _ => {
      let p = *row.get(positive)?;
      let others = row.iter().enumerate().filter(|(i, _)| *i != positive).map(|(_, x)| *x);
      let max = others.clone().fold(f32::NEG_INFINITY, f32::max);
      let lse = max + others.map(|x| (x - max).exp()).sum::<f32>().ln();
      Some(p - lse)
    }
  }
}

impl CrossEncoder {
  /// Load the cross-encoder and tokenizer of `dir` with the session settings `cfg`.
  pub fn load(dir: &ModelDir, cfg: &SessionConfig) -> Result<Self> {
    if dir.manifest.kind != ModelKind::Rerank {
      return Err(Error::ModelUnavailable(format!("{} is not a reranker (kind rerank)", dir.manifest.id)));
    }
    let cal = dir.manifest.calibration.as_ref();
    let scale = cal.and_then(|c| c.logit_scale).unwrap_or(1.0);
    let bias = cal.and_then(|c| c.logit_bias).unwrap_or(0.0);
    if !scale.is_finite() || scale <= 0.0 || !bias.is_finite() {
      return Err(Error::ModelUnavailable(format!(
        "{}: calibration needs a finite logitScale > 0 and a finite logitBias",
        dir.manifest.id
      )));
    }
    Ok(CrossEncoder {
      positive: dir.manifest.positive_class.unwrap_or(DEFAULT_POSITIVE_CLASS),
      scale,
      bias,
      model: OnnxModel::load(dir, cfg, "logits")?,
    })
  }

  /// Model id (its directory name), as reported by status.
  pub fn id(&self) -> &str {
    &self.model.dir.manifest.id
  }

  /// Relevance log-odds of `(query, passage)` pairs (see the module documentation), within
  /// `deadline` (checked between batches).
  pub fn logits(&self, query: &str, passages: &[String], deadline: Option<Instant>) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(passages.len());
    for batch in passages.chunks(RERANK_BATCH) {
      if deadline.is_some_and(|d| Instant::now() > d) {
        return Err(Error::Timeout(format!(
          "reranker exceeded its time budget after {} of {} pairs",
          out.len(),
          passages.len()
        )));
      }
      let pairs: Vec<(String, String)> = batch.iter().map(|p| (query.to_string(), p.clone())).collect();
      let tokens = self.model.tokenize(pairs)?;
      let (shape, data) = self.model.run(&tokens)?;
      let per = match shape.as_slice() {
        [b] if *b == tokens.batch => 1,
        [b, n] if *b == tokens.batch && *n >= 1 => *n,
        other => return Err(Error::Inference(format!("expected logits [batch, n], got {other:?}"))),
      };
      for i in 0..tokens.batch {
        let row = &data[i * per..(i + 1) * per];
        out.push(relevance_log_odds(row, self.positive).ok_or_else(|| {
          Error::Inference(format!("positiveClass {} is out of range for a {per}-class head", self.positive))
        })?);
      }
    }
    Ok(out)
  }

  /// Calibrated probability of one relevance log-odds: `sigmoid(scale × x + bias)`.
  pub fn calibrate(&self, log_odds: f32) -> f32 {
    sigmoid((self.scale * log_odds as f64 + self.bias) as f32)
  }

  /// Calibrated probabilities of `(query, passage)` relevance.
  pub fn score(&self, query: &str, passages: &[String], deadline: Option<Instant>) -> Result<Vec<f32>> {
    Ok(self.logits(query, passages, deadline)?.into_iter().map(|l| self.calibrate(l)).collect())
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn log_odds_of_one_two_and_three_class_heads() {
    assert_eq!(relevance_log_odds(&[1.5], 1), Some(1.5));
    // Two classes: logit[1] − logit[0]; its sigmoid is the softmax probability of class 1.
    let l = relevance_log_odds(&[0.5, 2.0], 1).unwrap();
    assert!((l - 1.5).abs() < 1e-6);
    let softmax1 = 2f32.exp() / (0.5f32.exp() + 2f32.exp());
    assert!((sigmoid(l) - softmax1).abs() < 1e-6);
    // The other class is the mirror image.
    assert!((relevance_log_odds(&[0.5, 2.0], 0).unwrap() + 1.5).abs() < 1e-6);
    let three = [0.1f32, 0.2, 3.0];
    let p = 3f32.exp() / three.iter().map(|x| x.exp()).sum::<f32>();
    assert!((sigmoid(relevance_log_odds(&three, 2).unwrap()) - p).abs() < 1e-6);
    assert_eq!(relevance_log_odds(&[0.5, 2.0], 2), None);
    assert_eq!(relevance_log_odds(&[], 0), None);
  }
}
