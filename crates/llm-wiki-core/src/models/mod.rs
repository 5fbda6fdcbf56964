//! ONNX models: where they are (configuration, model roots, environment variables), loading them
//! once per process, and releasing idle ones.
//!
//! Resolution (first match wins):
//! * embedder: `configure({embedModel})` → `LLM_WIKI_EMBED_MODEL` → `<root>/all-MiniLM-L6-v2-int8`
//!   for each model root (`configure({modelRoots})`, `LLM_WIKI_MODELS_DIR`, the roots the host
//!   layer added ([`add_model_roots`]: a source checkout's `.models/`), the user cache
//!   `$XDG_CACHE_HOME/llm-wiki-retrieval/models` or `~/.cache/llm-wiki-retrieval/models`);
//! * cross-encoder: `configure({rerankModel})` → `LLM_WIKI_RERANK_MODEL` (no default: no trained
//!   cross-encoder ships with the engine);
//! * ONNX Runtime: `configure({onnxRuntimePath})` → `ORT_DYLIB_PATH` → caller candidates (the
//!   `onnxruntime-node` package) → `runtime/runtime.json` in a model root.
//!
//! `LLM_WIKI_DENSE=off` disables dense retrieval entirely. Threads: `configure({threads})` or
//! `LLM_WIKI_THREADS`, default half the cores (1..=4), so a Node process never gets every core
//! of the host by surprise; any value is clamped to 1..=the number of logical CPUs.
//!
//! Settings change only through [`configure`] with a [`ConfigChange`] naming the settings to
//! change (the others keep their values), and [`add_runtime_candidates`], which only appends.
//! A change releases exactly the loaded models it makes stale (another directory or thread
//! count). Models load outside the cache's lock, so status and configuration calls never wait
//! for an ONNX load.

pub mod choice;
pub mod config;
pub mod embed;
pub mod fetch;
pub mod loaded;
pub mod manifest;
pub mod onnx;
pub mod rerank;
pub mod runtime;
pub mod tokens;

pub use config::{
  add_model_roots, add_runtime_candidates, clamp_threads, effective_config, embed_model_id, max_threads,
  rerank_model_id, resolve_embed_dir, user_model_root, ConfigChange, ModelConfig, Setting, DEFAULT_EMBED_DIR,
};
pub use embed::{Embedder, TextKind, EMBED_BATCH};
pub use loaded::{
  configure, cross_encoder, document_embedder, document_embedder_with, embedder, embedder_with,
  forget_loaded, loaded_models, release_idle,
};
pub use manifest::{Calibration, ModelDir, ModelKind, ModelManifest};
pub use rerank::CrossEncoder;
