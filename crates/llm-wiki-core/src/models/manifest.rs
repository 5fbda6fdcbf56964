//! Model directory layout: `model.onnx`, `tokenizer.json` and `manifest.json` describing the
//! model (id, kind, dimensions, pooling, max length, prefixes, file checksums).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsutil::{read_json, JsonFile};

/// What a model does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
  /// Text → vector (bi-encoder).
  Embed,
  /// (query, passage) → relevance logit (cross-encoder).
  Rerank,
}

/// How token vectors become one text vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
  /// Attention-masked mean of the last hidden state.
  Mean,
  /// The first ([CLS]) token.
  Cls,
  /// No pooling (cross-encoders output logits).
  None,
}

/// Size and checksum of one model file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
  /// Lowercase hex SHA-256 of the file.
  pub sha256: String,
  /// Size in bytes.
  pub size: u64,
}

/// `manifest.json` of a model directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelManifest {
  /// Stable identity, e.g. `sentence-transformers/all-MiniLM-L6-v2:int8`. Vectors are valid only
  /// for the id that produced them.
  pub id: String,
  /// Embedding model or cross-encoder.
  pub kind: ModelKind,
  /// Output dimensions (1 for a cross-encoder).
  pub dims: usize,
  /// How token vectors become one vector.
  pub pooling: Pooling,
  /// Token limit (inputs are truncated to it).
  pub max_length: usize,
  /// Text prepended to queries before embedding (E5-style models).
  #[serde(default)]
  pub query_prefix: String,
  /// Text prepended to passages before embedding.
  #[serde(default)]
  pub document_prefix: String,
  /// L2-normalize pooled vectors (cosine = dot product).
  #[serde(default = "yes")]
  pub normalize: bool,
  /// Largest inference batch (default [`crate::models::EMBED_BATCH`]). `1` for a model whose
  /// vectors depend on the other texts of a batch, e.g. dynamic per-tensor int8 quantization
  /// (one activation scale for the whole padded batch): run alone, a text always gets the same
  /// vector, so an incremental reindex and a cold one agree.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub max_batch: Option<usize>,
  /// Embedding models: largest chunk, in the model's tokens, a reindex cuts for it (default: the
  /// engine's 200, and always within `maxLength`). Smaller chunks give this model's vectors finer
  /// passages: on conversational memory (locomo-dev) MiniLM ranked better with 96 and on
  /// SciFact's abstracts slightly worse, for twice the chunks (docs/DECISIONS.md, "Chunk size for
  /// the dense side"). Changing it re-chunks the vault once, and the cosine calibration should be
  /// refitted (`llm-wiki-retrieval calibrate`): more, shorter chunks move the best-chunk cosines.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub chunk_tokens: Option<usize>,
  /// Cross-encoders with a head of two or more classes: index of the "relevant" class (default
  /// 1, the usual `[not relevant, relevant]` order). A one-logit head is read as is.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub positive_class: Option<usize>,
  /// How the model's raw score becomes a confidence (fitted per model; see docs/CONFIDENCE.md).
  /// Absent: the built-in defaults (MiniLM's cosine mapping; the plain sigmoid of the logit).
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub calibration: Option<Calibration>,
  /// `model.onnx`, `tokenizer.json` (and possibly others) with sha256 + size.
  pub files: BTreeMap<String, FileInfo>,
  /// Where the files came from (repository and revision).
  #[serde(default)]
  pub source: String,
  /// SPDX license of the model.
  #[serde(default)]
  pub license: String,
}

/// Per-model mapping from a raw score to an absolute confidence in [0, 1].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Calibration {
  /// Embedding models: the cosine mapped to confidence 0 (`(cos − floor) / span`, clamped).
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub cosine_floor: Option<f64>,
  /// Embedding models: the cosine span mapped onto [0, 1].
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub cosine_span: Option<f64>,
  /// Cross-encoders: Platt scaling `sigmoid(scale × logit + bias)` of the positive-class log-odds.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub logit_scale: Option<f64>,
  /// Cross-encoders: Platt bias.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub logit_bias: Option<f64>,
  /// What the mapping was fitted on (collection, split, number of labelled pairs).
  #[serde(default)]
  pub fitted_on: String,
}

fn yes() -> bool {
  true
}

/// Optional file of an embedding model directory: the same model as `model.onnx`, quantized for
/// queries only. A query is always embedded alone, so a graph whose activation scale is shared by
/// a whole batch (onnxruntime's dynamic quantization, several times fewer nodes than a per-row
/// graph) gives it the vector it would get anywhere; stored vectors always come from
/// `model.onnx`, whose checksum names the model id.
pub const QUERY_MODEL_FILE: &str = "query.onnx";

/// A model directory with its parsed manifest.
#[derive(Debug, Clone)]
pub struct ModelDir {
  /// The model directory.
  pub dir: PathBuf,
  /// Its validated `manifest.json`.
  pub manifest: ModelManifest,
}

impl ModelDir {
  /// Open `dir`: the manifest must parse, name `model.onnx` and `tokenizer.json`, and the files
  /// must exist with the recorded sizes (checksums are verified by [`ModelDir::verify`]).
  pub fn open(dir: &Path) -> Result<Self> {
    let manifest: ModelManifest = match read_json(&dir.join("manifest.json")) {
      JsonFile::Valid(m) => m,
      JsonFile::Missing => {
        return Err(Error::ModelUnavailable(format!("{} has no manifest.json", dir.display())))
      }
      JsonFile::Invalid(msg) => return Err(Error::ModelUnavailable(msg)),
    };
    if manifest.id.trim().is_empty() || manifest.dims == 0 || manifest.max_length == 0 {
      return Err(Error::ModelUnavailable(format!(
        "{}: manifest needs a non-empty id, dims > 0 and maxLength > 0",
        dir.display()
      )));
    }
    let query_graph = manifest.files.contains_key(QUERY_MODEL_FILE).then_some(QUERY_MODEL_FILE);
    for name in ["model.onnx", "tokenizer.json"].into_iter().chain(query_graph) {
      let info = manifest.files.get(name).ok_or_else(|| {
        Error::ModelUnavailable(format!("{}: manifest does not list {name}", dir.display()))
      })?;
      let path = dir.join(name);
      let size = std::fs::metadata(&path)
        .map_err(|e| Error::ModelUnavailable(format!("{} is missing: {e}", path.display())))?
        .len();
      if size != info.size {
        return Err(Error::ModelUnavailable(format!(
          "{} is {size} bytes but the manifest says {} (corrupt or partial download)",
          path.display(),
          info.size
        )));
      }
    }
    Ok(ModelDir { dir: dir.to_path_buf(), manifest })
  }

  /// Check every listed file's sha256.
  pub fn verify(&self) -> Result<()> {
    for (name, info) in &self.manifest.files {
      let path = self.dir.join(name);
      let actual = sha256_file(&path)?;
      if !actual.eq_ignore_ascii_case(&info.sha256) {
        return Err(Error::ModelUnavailable(format!(
          "{} has sha256 {actual}, expected {}",
          path.display(),
          info.sha256
        )));
      }
    }
    Ok(())
  }

  /// The ONNX model file.
  pub fn model_file(&self) -> PathBuf {
    self.dir.join("model.onnx")
  }

  /// Embedding models: the graph queries run on, when the manifest lists [`QUERY_MODEL_FILE`]
  /// (else queries run on [`ModelDir::model_file`]).
  pub fn query_model_file(&self) -> Option<PathBuf> {
    self.manifest.files.contains_key(QUERY_MODEL_FILE).then(|| self.dir.join(QUERY_MODEL_FILE))
  }

  /// The `tokenizer.json` of the model.
  pub fn tokenizer_file(&self) -> PathBuf {
    self.dir.join("tokenizer.json")
  }
}

/// Streamed sha256 of a file.
pub fn sha256_file(path: &Path) -> Result<String> {
  use sha2::Digest;
  use std::io::Read;
  let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
  let mut h = sha2::Sha256::new();
  let mut buf = vec![0u8; 1 << 16];
  loop {
    let n = f.read(&mut buf).map_err(|e| Error::io("read", path, e))?;
    if n == 0 {
      break;
    }
    h.update(&buf[..n]);
  }
  Ok(crate::util::hash::hex(&h.finalize()))
}

#[cfg(test)]
mod tests {
  use super::*;

  fn write_model(dir: &Path, model: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("model.onnx"), model).unwrap();
    std::fs::write(dir.join("tokenizer.json"), b"{}").unwrap();
    let files = [("model.onnx", model), ("tokenizer.json", b"{}".as_slice())]
      .iter()
      .map(|(n, b)| {
        (n.to_string(), FileInfo { sha256: crate::util::hash::sha256_hex(b), size: b.len() as u64 })
      })
      .collect();
    let m = ModelManifest {
      id: "test/model".into(),
      kind: ModelKind::Embed,
      dims: 4,
      pooling: Pooling::Mean,
      max_length: 16,
      query_prefix: String::new(),
      document_prefix: String::new(),
      normalize: true,
      max_batch: None,
      chunk_tokens: None,
      positive_class: None,
      calibration: None,
      files,
      source: String::new(),
      license: String::new(),
    };
    std::fs::write(dir.join("manifest.json"), serde_json::to_vec(&m).unwrap()).unwrap();
  }

  #[test]
  fn open_and_verify() {
    let t = tempfile::tempdir().unwrap();
    write_model(t.path(), b"onnx-bytes");
    let m = ModelDir::open(t.path()).unwrap();
    m.verify().unwrap();
    std::fs::write(t.path().join("model.onnx"), b"onnx-bytez").unwrap();
    assert_eq!(m.verify().unwrap_err().code(), "model_unavailable");
    std::fs::write(t.path().join("model.onnx"), b"short").unwrap();
    assert_eq!(ModelDir::open(t.path()).unwrap_err().code(), "model_unavailable");
    assert_eq!(ModelDir::open(&t.path().join("nope")).unwrap_err().code(), "model_unavailable");
  }

  /// A query graph is used only when the manifest lists it, and a listed one is checked like the
  /// model itself (size on open, checksum on verify).
  #[test]
  fn a_listed_query_graph_is_checked_like_the_model() {
    let t = tempfile::tempdir().unwrap();
    write_model(t.path(), b"onnx-bytes");
    std::fs::write(t.path().join(QUERY_MODEL_FILE), b"query-bytes").unwrap();
    assert_eq!(ModelDir::open(t.path()).unwrap().query_model_file(), None, "present but not listed");
    let path = t.path().join("manifest.json");
    let mut m: ModelManifest = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let info = FileInfo { sha256: crate::util::hash::sha256_hex(b"query-bytes"), size: 11 };
    m.files.insert(QUERY_MODEL_FILE.into(), info);
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
    let dir = ModelDir::open(t.path()).unwrap();
    assert_eq!(dir.query_model_file(), Some(t.path().join(QUERY_MODEL_FILE)));
    dir.verify().unwrap();
    std::fs::write(t.path().join(QUERY_MODEL_FILE), b"query-bytez").unwrap();
    assert_eq!(dir.verify().unwrap_err().code(), "model_unavailable");
    std::fs::write(t.path().join(QUERY_MODEL_FILE), b"short").unwrap();
    assert_eq!(ModelDir::open(t.path()).unwrap_err().code(), "model_unavailable");
    std::fs::remove_file(t.path().join(QUERY_MODEL_FILE)).unwrap();
    assert_eq!(ModelDir::open(t.path()).unwrap_err().code(), "model_unavailable");
  }
}
