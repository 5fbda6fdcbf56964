//! Where the models are and how they run: the engine-wide settings (`configure` changes them,
//! see the module docs of [`crate::models`]), model roots, environment variables, thread counts.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::RwLock;

use super::manifest::ModelDir;

/// Directory name of the default embedder inside a model root.
pub const DEFAULT_EMBED_DIR: &str = "all-MiniLM-L6-v2-int8";

/// Engine-wide model settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelConfig {
  /// Directories searched for model directories, in order.
  pub model_roots: Vec<PathBuf>,
  /// Explicit embedding model directory (else the first found under the roots).
  pub embed_model: Option<PathBuf>,
  /// Explicit cross-encoder directory (else none: no reranking).
  pub rerank_model: Option<PathBuf>,
  /// Explicit ONNX Runtime shared library.
  pub runtime_lib: Option<PathBuf>,
  /// Other places the runtime library is looked for (e.g. onnxruntime-node's).
  pub runtime_candidates: Vec<PathBuf>,
  /// Inference threads; 0 = default.
  pub threads: usize,
  /// Release models unused for this long (default 300 s).
  pub idle_release: Option<Duration>,
  /// Disable dense retrieval and never load a model.
  pub disabled: bool,
}

/// One setting of a [`ConfigChange`].
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Setting<T> {
  /// Leave the current value alone.
  #[default]
  Keep,
  /// Back to the default (environment variables, then built-in defaults).
  Reset,
  /// Use this value.
  Set(T),
}

impl<T: Default> Setting<T> {
  fn apply(self, slot: &mut T) {
    match self {
      Setting::Keep => {}
      Setting::Reset => *slot = T::default(),
      Setting::Set(v) => *slot = v,
    }
  }
}

impl<T> Setting<T> {
  /// The same change with the value converted by `f` (which may fail).
  pub fn try_map<U, E>(
    self,
    f: impl FnOnce(T) -> std::result::Result<U, E>,
  ) -> std::result::Result<Setting<U>, E> {
    Ok(match self {
      Setting::Keep => Setting::Keep,
      Setting::Reset => Setting::Reset,
      Setting::Set(v) => Setting::Set(f(v)?),
    })
  }

  /// The same change with the value converted by `f`.
  pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Setting<U> {
    match self.try_map(|v| Ok::<U, std::convert::Infallible>(f(v))) {
      Ok(s) => s,
      Err(never) => match never {},
    }
  }

  fn apply_opt(self, slot: &mut Option<T>) {
    match self {
      Setting::Keep => {}
      Setting::Reset => *slot = None,
      Setting::Set(v) => *slot = Some(v),
    }
  }
}

/// A change of the engine-wide settings: only the settings it names change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigChange {
  /// See [`ModelConfig::model_roots`].
  pub model_roots: Setting<Vec<PathBuf>>,
  /// See [`ModelConfig::embed_model`].
  pub embed_model: Setting<PathBuf>,
  /// See [`ModelConfig::rerank_model`].
  pub rerank_model: Setting<PathBuf>,
  /// See [`ModelConfig::runtime_lib`].
  pub runtime_lib: Setting<PathBuf>,
  /// See [`ModelConfig::runtime_candidates`].
  pub runtime_candidates: Setting<Vec<PathBuf>>,
  /// Inference threads (0 means the default, like `Reset`).
  pub threads: Setting<usize>,
  /// Release loaded models after this long unused.
  pub idle_release: Setting<Duration>,
  /// Disable dense retrieval and reranking (lexical only).
  pub disabled: Setting<bool>,
}

impl ConfigChange {
  pub(crate) fn apply_to(self, c: &mut ModelConfig) {
    self.model_roots.apply(&mut c.model_roots);
    self.embed_model.apply_opt(&mut c.embed_model);
    self.rerank_model.apply_opt(&mut c.rerank_model);
    self.runtime_lib.apply_opt(&mut c.runtime_lib);
    self.runtime_candidates.apply(&mut c.runtime_candidates);
    self.threads.apply(&mut c.threads);
    self.idle_release.apply_opt(&mut c.idle_release);
    self.disabled.apply(&mut c.disabled);
  }
}

pub(crate) fn settings() -> &'static RwLock<ModelConfig> {
  static S: OnceLock<RwLock<ModelConfig>> = OnceLock::new();
  S.get_or_init(Default::default)
}

/// Runtime libraries found by the host layer (the `onnxruntime-node` package); tried after the
/// configured candidates. Kept apart from the settings so that finding them changes nothing else.
fn detected_candidates() -> &'static RwLock<Vec<PathBuf>> {
  static D: OnceLock<RwLock<Vec<PathBuf>>> = OnceLock::new();
  D.get_or_init(Default::default)
}

/// Model roots found by the host layer (a source checkout's `.models/`, where
/// `scripts/fetch_models.py` builds the models); searched after the configured roots and
/// `LLM_WIKI_MODELS_DIR`, before the user cache. Kept apart from the settings, like
/// [`detected_candidates`].
fn detected_roots() -> &'static RwLock<Vec<PathBuf>> {
  static D: OnceLock<RwLock<Vec<PathBuf>>> = OnceLock::new();
  D.get_or_init(Default::default)
}

/// Append model roots searched after the configured ones and `LLM_WIKI_MODELS_DIR`, before the
/// user cache (duplicates ignored). Never removes a root or changes another setting; models
/// already loaded stay loaded.
pub fn add_model_roots(paths: impl IntoIterator<Item = PathBuf>) {
  let mut list = detected_roots().write();
  for p in paths {
    if !list.contains(&p) {
      list.push(p);
    }
  }
}

/// Append ONNX Runtime library candidates (duplicates ignored). Never removes a candidate,
/// changes another setting or releases a model.
pub fn add_runtime_candidates(paths: impl IntoIterator<Item = PathBuf>) {
  let mut list = detected_candidates().write();
  for p in paths {
    if !list.contains(&p) {
      list.push(p);
    }
  }
}

pub(crate) fn env_path(var: &str) -> Option<PathBuf> {
  std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The user cache root for models.
pub fn user_model_root() -> PathBuf {
  let cache = env_path("XDG_CACHE_HOME").unwrap_or_else(|| {
    env_path("HOME").or_else(|| env_path("USERPROFILE")).unwrap_or_else(|| PathBuf::from(".")).join(".cache")
  });
  cache.join("llm-wiki-retrieval").join("models")
}

/// Most threads any caller gets: the number of logical CPUs. More threads than cores only add
/// contention, and a thread count from JS must never spawn thousands of OS threads.
pub fn max_threads() -> usize {
  std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// A requested thread count clamped to 1..=[`max_threads`].
pub fn clamp_threads(requested: usize) -> usize {
  requested.clamp(1, max_threads())
}

/// Effective settings: configured values, then environment variables.
pub fn effective_config() -> ModelConfig {
  let mut c = settings().read().clone();
  for p in detected_candidates().read().iter() {
    if !c.runtime_candidates.contains(p) {
      c.runtime_candidates.push(p.clone());
    }
  }
  if let Some(r) = env_path("LLM_WIKI_MODELS_DIR") {
    c.model_roots.push(r);
  }
  for r in detected_roots().read().iter() {
    if !c.model_roots.contains(r) {
      c.model_roots.push(r.clone());
    }
  }
  c.model_roots.push(user_model_root());
  if c.embed_model.is_none() {
    c.embed_model = env_path("LLM_WIKI_EMBED_MODEL");
  }
  if c.rerank_model.is_none() {
    c.rerank_model = env_path("LLM_WIKI_RERANK_MODEL");
  }
  if c.threads == 0 {
    c.threads = std::env::var("LLM_WIKI_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
  }
  c.threads = if c.threads == 0 { (max_threads() / 2).clamp(1, 4) } else { clamp_threads(c.threads) };
  if std::env::var("LLM_WIKI_DENSE").is_ok_and(|v| v == "off" || v == "0") {
    c.disabled = true;
  }
  c
}

/// Directory of the embedder to use, if any.
pub fn resolve_embed_dir(c: &ModelConfig) -> Option<PathBuf> {
  if c.disabled {
    return None;
  }
  if let Some(p) = &c.embed_model {
    return Some(p.clone());
  }
  c.model_roots.iter().map(|r| r.join(DEFAULT_EMBED_DIR)).find(|d| d.join("manifest.json").is_file())
}

/// Directory of the cross-encoder to use, if any.
pub(crate) fn resolve_rerank_dir(c: &ModelConfig) -> Option<PathBuf> {
  c.rerank_model.clone().filter(|_| !c.disabled)
}

/// Id of the embedder recall would use (reads its manifest only; loads nothing).
pub fn embed_model_id(c: &ModelConfig) -> Option<String> {
  resolve_embed_dir(c).and_then(|d| ModelDir::open(&d).ok()).map(|m| m.manifest.id)
}

/// Id of the configured cross-encoder, if any (manifest only).
pub fn rerank_model_id(c: &ModelConfig) -> Option<String> {
  resolve_rerank_dir(c).and_then(|d| ModelDir::open(&d).ok()).map(|m| m.manifest.id)
}
