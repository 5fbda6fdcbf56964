//! Generic BERT-style cross-encoder: (query, passage) pairs → `logits[:, 0]` → sigmoid
//! probability. Works with any ONNX pair classifier taking `input_ids`, `attention_mask` and
//! (when present) `token_type_ids`.

use std::time::Instant;

use super::manifest::{ModelDir, ModelKind};
use super::onnx::{OnnxModel, SessionConfig};
use crate::error::{Error, Result};

/// Pairs per inference batch.
pub const RERANK_BATCH: usize = 8;

/// A loaded cross-encoder.
pub struct CrossEncoder {
  model: OnnxModel,
}

/// Logistic function.
pub fn sigmoid(x: f32) -> f32 {
  1.0 / (1.0 + (-x).exp())
}

impl CrossEncoder {
  /// Load the cross-encoder and tokenizer of `dir` with the session settings `cfg`.
  pub fn load(dir: &ModelDir, cfg: &SessionConfig) -> Result<Self> {
    if dir.manifest.kind != ModelKind::Rerank {
      return Err(Error::ModelUnavailable(format!("{} is not a reranker (kind rerank)", dir.manifest.id)));
    }
    Ok(CrossEncoder { model: OnnxModel::load(dir, cfg, "logits")? })
  }

  /// Model id (its directory name), as reported by status.
  pub fn id(&self) -> &str {
    &self.model.dir.manifest.id
  }

  /// Raw logits of `(query, passage)` pairs, within `deadline` (checked between batches).
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
      out.extend((0..tokens.batch).map(|i| data[i * per]));
    }
    Ok(out)
  }

  /// Sigmoid probabilities of `(query, passage)` relevance.
  pub fn score(&self, query: &str, passages: &[String], deadline: Option<Instant>) -> Result<Vec<f32>> {
    Ok(self.logits(query, passages, deadline)?.into_iter().map(sigmoid).collect())
  }
}
