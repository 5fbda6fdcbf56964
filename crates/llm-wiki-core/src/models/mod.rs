//! ONNX models: where they are (configuration, model roots, environment variables), loading them
//! once per process, and releasing idle ones.
//!
//! Resolution (first match wins):
//! * embedder: `configure({embedModel})` → `LLM_WIKI_EMBED_MODEL` → `<root>/all-MiniLM-L6-v2-int8`
//!   for each model root (`configure({modelRoots})`, `LLM_WIKI_MODELS_DIR`, the user cache
//!   `$XDG_CACHE_HOME/llm-wiki-retrieval/models` or `~/.cache/llm-wiki-retrieval/models`);
//! * cross-encoder: `configure({rerankModel})` → `LLM_WIKI_RERANK_MODEL` (no default: no trained
//!   cross-encoder ships with the engine);
//! * ONNX Runtime: `configure({onnxRuntimePath})` → `ORT_DYLIB_PATH` → caller candidates (the
//!   `onnxruntime-node` package) → `runtime/runtime.json` in a model root.
//!
//! `LLM_WIKI_DENSE=off` disables dense retrieval entirely. Threads: `configure({threads})` or
//! `LLM_WIKI_THREADS`, default half the cores (1..=4), so a Node process never gets every core
//! of the host by surprise.

pub mod embed;
pub mod fetch;
pub mod manifest;
pub mod onnx;
pub mod rerank;
pub mod runtime;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

pub use embed::{Embedder, TextKind, EMBED_BATCH};
pub use manifest::{ModelDir, ModelManifest};
pub use rerank::CrossEncoder;

use crate::error::{Error, Result};
use onnx::SessionConfig;

/// Directory name of the default embedder inside a model root.
pub const DEFAULT_EMBED_DIR: &str = "all-MiniLM-L6-v2-int8";

/// Engine-wide model settings.
#[derive(Debug, Clone, Default)]
pub struct ModelConfig {
  pub model_roots: Vec<PathBuf>,
  pub embed_model: Option<PathBuf>,
  pub rerank_model: Option<PathBuf>,
  pub runtime_lib: Option<PathBuf>,
  pub runtime_candidates: Vec<PathBuf>,
  /// Inference threads; 0 = default.
  pub threads: usize,
  /// Release models unused for this long (default 300 s).
  pub idle_release: Option<Duration>,
  /// Disable dense retrieval and never load a model.
  pub disabled: bool,
}

fn settings() -> &'static RwLock<ModelConfig> {
  static S: OnceLock<RwLock<ModelConfig>> = OnceLock::new();
  S.get_or_init(Default::default)
}

/// Replace the engine-wide model settings (loaded models that no longer match are released).
pub fn configure(cfg: ModelConfig) {
  *settings().write().unwrap_or_else(|p| p.into_inner()) = cfg;
  cache().lock().unwrap_or_else(|p| p.into_inner()).clear();
}

fn env_path(var: &str) -> Option<PathBuf> {
  std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The user cache root for models.
pub fn user_model_root() -> PathBuf {
  let cache = env_path("XDG_CACHE_HOME").unwrap_or_else(|| {
    env_path("HOME").or_else(|| env_path("USERPROFILE")).unwrap_or_else(|| PathBuf::from(".")).join(".cache")
  });
  cache.join("llm-wiki-retrieval").join("models")
}

/// Effective settings: configured values, then environment variables.
pub fn effective_config() -> ModelConfig {
  let mut c = settings().read().unwrap_or_else(|p| p.into_inner()).clone();
  if let Some(r) = env_path("LLM_WIKI_MODELS_DIR") {
    c.model_roots.push(r);
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
  if c.threads == 0 {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    c.threads = (cores / 2).clamp(1, 4);
  }
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

/// Id of the embedder recall would use (reads its manifest only; loads nothing).
pub fn embed_model_id(c: &ModelConfig) -> Option<String> {
  resolve_embed_dir(c).and_then(|d| ModelDir::open(&d).ok()).map(|m| m.manifest.id)
}

/// Id of the configured cross-encoder, if any (manifest only).
pub fn rerank_model_id(c: &ModelConfig) -> Option<String> {
  c.rerank_model.as_ref().filter(|_| !c.disabled).and_then(|d| ModelDir::open(d).ok()).map(|m| m.manifest.id)
}

fn session_config(c: &ModelConfig) -> Result<SessionConfig> {
  let lib = runtime::locate(c.runtime_lib.as_deref(), &c.runtime_candidates, &c.model_roots)?;
  Ok(SessionConfig { runtime_lib: lib, threads: c.threads })
}

enum Loaded {
  Embed(Arc<Embedder>),
  Rerank(Arc<CrossEncoder>),
}

struct Entry {
  model: Loaded,
  last_used: Instant,
}

fn cache() -> &'static Mutex<HashMap<PathBuf, Entry>> {
  static C: OnceLock<Mutex<HashMap<PathBuf, Entry>>> = OnceLock::new();
  C.get_or_init(|| {
    start_reaper();
    Default::default()
  })
}

/// A background thread that drops models idle for longer than the configured time. Native
/// threads do not keep Node's event loop alive, so this never delays process exit.
fn start_reaper() {
  let _ = std::thread::Builder::new().name("llm-wiki-model-reaper".into()).spawn(|| loop {
    std::thread::sleep(Duration::from_secs(15));
    release_idle();
  });
}

/// Drop cached models idle for longer than the configured time (and not in use).
pub fn release_idle() -> usize {
  let idle = effective_config().idle_release.unwrap_or(Duration::from_secs(300));
  let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
  let before = map.len();
  map.retain(|_, e| {
    let in_use = match &e.model {
      Loaded::Embed(m) => Arc::strong_count(m) > 1,
      Loaded::Rerank(m) => Arc::strong_count(m) > 1,
    };
    in_use || e.last_used.elapsed() < idle
  });
  before - map.len()
}

/// Number of models currently loaded.
pub fn loaded_models() -> usize {
  cache().lock().map(|m| m.len()).unwrap_or(0)
}

/// The embedder (loaded once, then cached). `Err` when none is configured or it cannot load.
pub fn embedder() -> Result<Arc<Embedder>> {
  let c = effective_config();
  let dir = resolve_embed_dir(&c).ok_or_else(|| {
    Error::ModelUnavailable("no embedding model configured or found in the model roots".into())
  })?;
  let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
  if let Some(e) = map.get_mut(&dir) {
    if let Loaded::Embed(m) = &e.model {
      e.last_used = Instant::now();
      return Ok(m.clone());
    }
  }
  onnx::quiet_tokenizer_threads();
  let md = ModelDir::open(&dir)?;
  let m = Arc::new(Embedder::load(&md, &session_config(&c)?)?);
  map.insert(dir, Entry { model: Loaded::Embed(m.clone()), last_used: Instant::now() });
  Ok(m)
}

/// The configured cross-encoder, `Ok(None)` when none is configured.
pub fn cross_encoder() -> Result<Option<Arc<CrossEncoder>>> {
  let c = effective_config();
  let Some(dir) = c.rerank_model.clone().filter(|_| !c.disabled) else {
    return Ok(None);
  };
  let mut map = cache().lock().unwrap_or_else(|p| p.into_inner());
  if let Some(e) = map.get_mut(&dir) {
    if let Loaded::Rerank(m) = &e.model {
      e.last_used = Instant::now();
      return Ok(Some(m.clone()));
    }
  }
  onnx::quiet_tokenizer_threads();
  let md = ModelDir::open(&dir)?;
  let m = Arc::new(CrossEncoder::load(&md, &session_config(&c)?)?);
  map.insert(dir, Entry { model: Loaded::Rerank(m.clone()), last_used: Instant::now() });
  Ok(Some(m))
}
