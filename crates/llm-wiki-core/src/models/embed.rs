//! The embedder: texts → L2-normalized vectors with masked mean (or CLS) pooling, in batches,
//! with the manifest's query/document prefixes.

use super::manifest::{ModelDir, ModelKind, Pooling};
use super::onnx::{OnnxModel, SessionConfig};
use crate::error::{Error, Result};
use crate::util::CancelFlag;

/// Texts per inference batch (measured fastest on 2 cores, and light on memory).
pub const EMBED_BATCH: usize = 8;

/// Whether a text embedded inside a padded batch gets bit-for-bit the vector it gets alone: measured
/// on x86 (AVX-512 VNNI and AVX2) for the default models; on an emulated ARM Cortex-A72 it did not.
const BATCHES_ARE_EXACT: bool = cfg!(any(target_arch = "x86_64", target_arch = "x86"));

/// Whether a text is a query or a document (different prefixes for asymmetric models).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
  /// A search query (the model's query prefix, if any).
  Query,
  /// A passage being indexed (the model's document prefix, if any).
  Document,
}

/// A loaded embedding model.
pub struct Embedder {
  model: OnnxModel,
}

impl Embedder {
  /// Load the model and tokenizer of `dir` with the session settings `cfg`.
  pub fn load(dir: &ModelDir, cfg: &SessionConfig) -> Result<Self> {
    if dir.manifest.kind != ModelKind::Embed {
      return Err(Error::ModelUnavailable(format!("{} is not an embedding model", dir.manifest.id)));
    }
    Ok(Embedder { model: OnnxModel::load(dir, cfg, "last_hidden_state")? })
  }

  /// Open the graph documents are embedded on, if it is not open yet: a model whose manifest lists
  /// a query graph opens it on first use, so a process that only recalls never holds it.
  /// Indexing calls this before its first batch to learn early that the model cannot run.
  pub fn prepare_documents(&self) -> Result<()> {
    self.model.prepare()
  }

  /// Whether the graph documents are embedded on is open (see [`Embedder::prepare_documents`]).
  pub fn documents_graph_is_open(&self) -> bool {
    self.model.graph_is_open()
  }

  /// Model id (vectors are only comparable within one id).
  pub fn id(&self) -> &str {
    &self.model.dir.manifest.id
  }

  /// The model's manifest (calibration, prefixes, limits).
  pub fn manifest(&self) -> &super::ModelManifest {
    &self.model.dir.manifest
  }

  /// Dimensions of the vectors this model produces.
  pub fn dims(&self) -> usize {
    self.model.dir.manifest.dims
  }

  /// Texts per inference run: [`EMBED_BATCH`], or less when the manifest says so. On CPUs other
  /// than x86 one text per run: there, ONNX Runtime's float kernels were measured to give a text
  /// padded inside a batch a slightly different vector than the same text alone (see
  /// docs/DECISIONS.md, "Embedding quantization"), and a text must always get the same vector.
  pub fn batch_size(&self) -> usize {
    let limit = if BATCHES_ARE_EXACT { EMBED_BATCH } else { 1 };
    self.model.dir.manifest.max_batch.unwrap_or(limit).clamp(1, limit)
  }

  /// Embed texts in batches; `on_batch(done)` after each batch; cancellation between batches.
  pub fn embed(
    &self,
    texts: &[String],
    kind: TextKind,
    cancel: &CancelFlag,
    on_batch: &mut dyn FnMut(usize),
  ) -> Result<Vec<Vec<f32>>> {
    self.embed_on(texts, kind, cancel, on_batch, false)
  }

  /// [`Embedder::embed`]; `query_graph`: one text per run on the model's query graph
  /// ([`OnnxModel::run_query`]).
  fn embed_on(
    &self,
    texts: &[String],
    kind: TextKind,
    cancel: &CancelFlag,
    on_batch: &mut dyn FnMut(usize),
    query_graph: bool,
  ) -> Result<Vec<Vec<f32>>> {
    let m = &self.model.dir.manifest;
    let prefix = match kind {
      TextKind::Query => &m.query_prefix,
      TextKind::Document => &m.document_prefix,
    };
    let mut out = Vec::with_capacity(texts.len());
    let batch_size = if query_graph { 1 } else { self.batch_size() };
    for batch in texts.chunks(batch_size) {
      cancel.check()?;
      let inputs: Vec<String> = batch.iter().map(|t| format!("{prefix}{t}")).collect();
      let tokens = self.model.tokenize(inputs)?;
      let (shape, data) =
        if query_graph { self.model.run_query(&tokens)? } else { self.model.run(&tokens)? };
      let (b, s, d) = match shape.as_slice() {
        [b, s, d] => (*b, *s, *d),
        other => return Err(Error::Inference(format!("expected [batch, seq, dims] output, got {other:?}"))),
      };
      if b != tokens.batch || d != m.dims || s != tokens.seq {
        return Err(Error::Inference(format!(
          "output shape {shape:?} does not match batch {} / dims {}",
          tokens.batch, m.dims
        )));
      }
      for i in 0..b {
        let mut v = vec![0f32; d];
        match m.pooling {
          Pooling::Cls => v.copy_from_slice(&data[i * s * d..i * s * d + d]),
          _ => {
            let mut count = 0f32;
            for j in 0..s {
              if tokens.attention_mask[i * s + j] == 0 {
                continue;
              }
              count += 1.0;
              let row = &data[(i * s + j) * d..(i * s + j + 1) * d];
              for (acc, x) in v.iter_mut().zip(row) {
                *acc += x;
              }
            }
            let count = count.max(1.0);
            v.iter_mut().for_each(|x| *x /= count);
          }
        }
        if m.normalize {
          let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
          v.iter_mut().for_each(|x| *x /= norm);
        }
        out.push(v);
      }
      on_batch(out.len());
    }
    Ok(out)
  }

  /// Embed one query (on the model's query graph when its manifest lists one).
  pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
    let mut v =
      self.embed_on(&[query.to_string()], TextKind::Query, &CancelFlag::new(), &mut |_| {}, true)?;
    v.pop().ok_or_else(|| Error::Inference("no vector returned".into()))
  }
}
