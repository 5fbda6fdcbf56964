//! A loaded ONNX text model: session + tokenizer with explicit padding/truncation. Shared by the
//! embedder (mean/CLS pooling) and the cross-encoder (pair logits).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;
use tokenizers::utils::padding::{PaddingDirection, PaddingParams, PaddingStrategy};
use tokenizers::utils::truncation::{TruncationDirection, TruncationParams, TruncationStrategy};
use tokenizers::{EncodeInput, Tokenizer};

use super::manifest::ModelDir;
use super::runtime;
use crate::error::{Error, Result};

/// Runtime settings of a session.
#[derive(Debug, Clone)]
pub struct SessionConfig {
  /// ONNX Runtime shared library.
  pub runtime_lib: std::path::PathBuf,
  /// Intra-op threads (never more than asked for; spinning disabled so idle sessions cost no CPU).
  pub threads: usize,
}

/// Batched token ids of a set of inputs, padded to the longest.
pub struct TokenBatch {
  /// Texts in the batch.
  pub batch: usize,
  /// Padded sequence length (tokens per text).
  pub seq: usize,
  /// Token ids, `batch × seq`, row-major.
  pub input_ids: Vec<i64>,
  /// 1 for real tokens, 0 for padding, `batch × seq`.
  pub attention_mask: Vec<i64>,
  /// Segment ids (0 for the first text, 1 for a pair's second), `batch × seq`.
  pub token_type_ids: Vec<i64>,
}

/// Session + tokenizer of one model directory.
pub struct OnnxModel {
  /// The model directory it was loaded from.
  pub dir: ModelDir,
  /// The model's graph (`model.onnx`): documents, pairs, and queries when there is no query
  /// graph. Opened by [`OnnxModel::load`] when it is the only graph; when the manifest lists a
  /// query graph, on first use (or [`OnnxModel::prepare`]), so a process that only recalls never
  /// holds it (for the default model ≈ 70 ms and ≈ 29 MiB: docs/DECISIONS.md).
  graph: LazyGraph,
  /// The manifest's query graph ([`ModelDir::query_model_file`]), opened on the first query so
  /// a process that only indexes never holds it.
  query_graph: Option<LazyGraph>,
  env: ort::environment::Environment,
  threads: usize,
  preferred_output: String,
  tokenizer: Tokenizer,
}

/// A graph file opened on first use. One that failed to open keeps its error: every use reports
/// it (the model is reloaded by `configure` or after its idle release).
struct LazyGraph {
  file: PathBuf,
  /// `None`: not opened yet.
  slot: Mutex<Option<std::result::Result<Graph, String>>>,
}

/// One ONNX session and what its graph takes and gives.
struct Graph {
  session: Session,
  uses_token_type_ids: bool,
  output_name: String,
}

fn ort_err(e: impl std::fmt::Display) -> Error {
  Error::Inference(e.to_string())
}

impl LazyGraph {
  fn new(file: PathBuf) -> Self {
    LazyGraph { file, slot: Mutex::new(None) }
  }
}

impl Graph {
  /// A session of `file` on `threads` intra-op threads, without spinning; its inputs checked and
  /// its output chosen (`preferred_output`, else the first).
  fn open(
    env: &ort::environment::Environment,
    file: &Path,
    threads: usize,
    preferred_output: &str,
  ) -> Result<Self> {
    let build = || -> std::result::Result<Session, String> {
      let b = Session::builder(env).map_err(|e| e.to_string())?;
      let b = b.with_optimization_level(GraphOptimizationLevel::Level3).map_err(|e| e.to_string())?;
      let b = b.with_intra_threads(threads.max(1)).map_err(|e| e.to_string())?;
      let b = b.with_inter_threads(1).map_err(|e| e.to_string())?;
      let b = b.with_memory_pattern(false).map_err(|e| e.to_string())?;
      let b = b.with_config_entry("session.intra_op.allow_spinning", "0").map_err(|e| e.to_string())?;
      let mut b = b.with_config_entry("session.inter_op.allow_spinning", "0").map_err(|e| e.to_string())?;
      b.commit_from_file(file).map_err(|e| e.to_string())
    };
    let session = std::panic::catch_unwind(std::panic::AssertUnwindSafe(build))
      .unwrap_or_else(|_| Err("ONNX Runtime panicked while loading the model".into()))
      .map_err(|e| Error::ModelUnavailable(format!("{}: {e}", file.display())))?;
    let inputs: Vec<String> = session.inputs().iter().map(|i| i.name().to_string()).collect();
    for required in ["input_ids", "attention_mask"] {
      if !inputs.iter().any(|i| i == required) {
        return Err(Error::ModelUnavailable(format!("{} has no '{required}' input", file.display())));
      }
    }
    let outputs: Vec<String> = session.outputs().iter().map(|o| o.name().to_string()).collect();
    let output_name = outputs
      .iter()
      .find(|o| *o == preferred_output)
      .or_else(|| outputs.first())
      .cloned()
      .ok_or_else(|| Error::ModelUnavailable(format!("{} has no outputs", file.display())))?;
    Ok(Graph { session, uses_token_type_ids: inputs.iter().any(|i| i == "token_type_ids"), output_name })
  }

  /// Run on a batch; returns the output's shape and values.
  fn run(&mut self, t: &TokenBatch) -> Result<(Vec<usize>, Vec<f32>)> {
    let shape = vec![t.batch as i64, t.seq as i64];
    let ids = Tensor::from_array((shape.clone(), t.input_ids.clone())).map_err(ort_err)?;
    let mask = Tensor::from_array((shape.clone(), t.attention_mask.clone())).map_err(ort_err)?;
    let outputs = if self.uses_token_type_ids {
      let types = Tensor::from_array((shape, t.token_type_ids.clone())).map_err(ort_err)?;
      self.session.run(ort::inputs!["input_ids" => ids, "attention_mask" => mask, "token_type_ids" => types])
    } else {
      self.session.run(ort::inputs!["input_ids" => ids, "attention_mask" => mask])
    }
    .map_err(ort_err)?;
    let value = outputs
      .get(self.output_name.as_str())
      .ok_or_else(|| Error::Inference(format!("output '{}' missing", self.output_name)))?;
    let (shape, data) = value.try_extract_tensor::<f32>().map_err(ort_err)?;
    Ok((shape.iter().map(|&d| d.max(0) as usize).collect(), data.to_vec()))
  }
}

impl OnnxModel {
  /// Load `dir` on the shared ORT environment: manifest checked, tokenizer opened, and the
  /// model's graph unless the manifest lists a query graph (then on first use, see `graph`).
  pub fn load(dir: &ModelDir, cfg: &SessionConfig, preferred_output: &str) -> Result<Self> {
    let env = runtime::environment(&cfg.runtime_lib)?;
    // The tokenizer as shipped may pad/truncate to a fixed 128: override both.
    let mut tokenizer = Tokenizer::from_file(dir.tokenizer_file())
      .map_err(|e| Error::ModelUnavailable(format!("{}: {e}", dir.tokenizer_file().display())))?;
    let pad_token =
      tokenizer.get_padding().map(|p| p.pad_token.clone()).unwrap_or_else(|| "[PAD]".to_string());
    let pad_id = tokenizer.token_to_id(&pad_token).unwrap_or(0);
    tokenizer.with_padding(Some(PaddingParams {
      strategy: PaddingStrategy::BatchLongest,
      direction: PaddingDirection::Right,
      pad_to_multiple_of: None,
      pad_id,
      pad_type_id: 0,
      pad_token,
    }));
    tokenizer
      .with_truncation(Some(TruncationParams {
        direction: TruncationDirection::Right,
        max_length: dir.manifest.max_length,
        strategy: TruncationStrategy::LongestFirst,
        stride: 0,
      }))
      .map_err(|e| Error::ModelUnavailable(format!("tokenizer truncation: {e}")))?;
    let query_graph = dir.query_model_file().map(LazyGraph::new);
    let model = OnnxModel {
      dir: dir.clone(),
      graph: LazyGraph::new(dir.model_file()),
      query_graph,
      env,
      threads: cfg.threads,
      preferred_output: preferred_output.to_string(),
      tokenizer,
    };
    if model.query_graph.is_none() {
      // Every use needs this graph: a model that cannot run fails here, as it always did.
      model.prepare()?;
    }
    Ok(model)
  }

  /// Open the model's graph now if it is not open yet (indexing calls this before its first
  /// batch, so a graph that cannot open is reported as an unavailable model, not mid-run).
  pub fn prepare(&self) -> Result<()> {
    self.with_graph(&self.graph, |_| Ok(()))
  }

  /// Run `f` on `lazy`'s graph, opening it first if needed.
  fn with_graph<R>(&self, lazy: &LazyGraph, f: impl FnOnce(&mut Graph) -> Result<R>) -> Result<R> {
    let mut slot = lazy.slot.lock().unwrap_or_else(|p| p.into_inner());
    let graph = slot.get_or_insert_with(|| {
      Graph::open(&self.env, &lazy.file, self.threads, &self.preferred_output).map_err(|e| match e {
        Error::ModelUnavailable(msg) => msg,
        other => other.to_string(),
      })
    });
    match graph {
      Ok(graph) => f(graph),
      Err(msg) => Err(Error::ModelUnavailable(msg.clone())),
    }
  }

  /// Tokenize single texts or (query, passage) pairs into one padded batch.
  pub fn tokenize<'s, E: Into<EncodeInput<'s>> + Send>(&self, inputs: Vec<E>) -> Result<TokenBatch> {
    let enc =
      self.tokenizer.encode_batch(inputs, true).map_err(|e| Error::Inference(format!("tokenize: {e}")))?;
    let batch = enc.len();
    let seq = enc.iter().map(|e| e.get_ids().len()).max().unwrap_or(0).max(1);
    let mut t = TokenBatch {
      batch,
      seq,
      input_ids: Vec::with_capacity(batch * seq),
      attention_mask: Vec::with_capacity(batch * seq),
      token_type_ids: Vec::with_capacity(batch * seq),
    };
    for e in &enc {
      let pad = seq - e.get_ids().len();
      t.input_ids.extend(e.get_ids().iter().map(|&x| x as i64).chain(std::iter::repeat_n(0, pad)));
      t.attention_mask
        .extend(e.get_attention_mask().iter().map(|&x| x as i64).chain(std::iter::repeat_n(0, pad)));
      t.token_type_ids.extend(e.get_type_ids().iter().map(|&x| x as i64).chain(std::iter::repeat_n(0, pad)));
    }
    Ok(t)
  }

  /// Run the model; returns the output's shape and values.
  pub fn run(&self, t: &TokenBatch) -> Result<(Vec<usize>, Vec<f32>)> {
    self.with_graph(&self.graph, |g| g.run(t))
  }

  /// [`OnnxModel::run`] for one query: on the manifest's query graph when it lists one
  /// (opened on first use), else on the model itself.
  pub fn run_query(&self, t: &TokenBatch) -> Result<(Vec<usize>, Vec<f32>)> {
    self.with_graph(self.query_graph.as_ref().unwrap_or(&self.graph), |g| g.run(t))
  }

  /// Whether the model's own graph (`model.onnx`) is open.
  pub fn graph_is_open(&self) -> bool {
    matches!(*self.graph.slot.lock().unwrap_or_else(|p| p.into_inner()), Some(Ok(_)))
  }
}

/// Disable the tokenizer's own thread pool: batches are small and our callers already control
/// parallelism (a library must not spawn a thread per core by surprise).
pub fn quiet_tokenizer_threads() {
  tokenizers::utils::parallelism::set_parallelism(false);
}
