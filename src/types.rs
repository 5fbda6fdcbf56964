//! JavaScript-facing objects the engine does not declare itself: inputs that carry JS values
//! (callbacks, abort signals; napi objects cannot flatten, so their data fields sit beside them
//! here and the exports map them onto the engine's options) and results the engine has no struct
//! for. Every other shape (`VaultPaths`, reindex and recall results, index status, policies, …)
//! is the engine's own, from the core's `napi` feature. Field names follow the pi-llm-wiki
//! contract; every doc comment here becomes JSDoc in `index.d.ts`.

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;

pub use llm_wiki_core::retrieve::recall::{RecallPolicy, RecallResponse};
pub use llm_wiki_core::store::job::WikiReindexResult;
pub use llm_wiki_core::store::status::IndexStatus;
pub use llm_wiki_core::store::ReindexProgressEvent;

pub use llm_wiki_core::models::fetch::{
  DownloadProgress as DownloadProgressEvent, RemoteFileRequest as RemoteModelFile,
};
pub use llm_wiki_core::vault::paths::VaultPathsSpec as VaultPaths;

/// Input of `reindexWiki` (the `wiki_reindex` tool's parameters).
#[napi(object, object_to_js = false)]
pub struct WikiReindexInput {
  /// `changed` (default) trusts size + mtime; `all` re-hashes every page.
  #[napi(ts_type = "'changed' | 'all'")]
  pub scope: Option<String>,
  /// Components to update; default `["lexical", "vectors"]`; must not be empty.
  #[napi(ts_type = "Array<'lexical' | 'vectors'>")]
  pub components: Option<Vec<String>>,
  /// Rebuild the selected components from scratch (default false).
  pub force: Option<bool>,
  /// Which vaults: `active` (default), `personal`, `project` or `all`.
  #[napi(ts_type = "'active' | 'personal' | 'project' | 'all'")]
  pub vault: Option<String>,
  /// Cancels cooperatively between batches; the last good index stays intact.
  pub signal: Option<AbortSignal>,
  /// Progress events, delivered on the JS thread.
  pub on_progress:
    Option<ThreadsafeFunction<ReindexProgressEvent, (), ReindexProgressEvent, Status, false, true>>,
  /// Treat the call as already cancelled (set by the JS wrapper when `signal` was already aborted).
  pub aborted: Option<bool>,
  /// Worker threads for parsing and indexing (0 or absent: the available cores, at most 4).
  /// Clamped to 1..=the number of logical CPUs.
  pub threads: Option<u32>,
  /// Only take unsafe pages out of the index (default false): pages whose file is gone and
  /// indexed pages that no longer validate are removed; no page is added or updated, no vectors
  /// are written, nothing is built where no index is published, `force` is ignored.
  pub removals_only: Option<bool>,
}

/// Options of `readIndexStatus`.
// Not the engine's `StatusOptions`: that one also carries the embedding and reranker model ids a
// status compares with (the fuzz harness pins them), which JavaScript does not set.
#[napi(object)]
pub struct StatusOptions {
  /// Compare pages on disk with the index (stat only, no reads). Default true.
  pub check_pages: Option<bool>,
}

/// The subset of the extension's `TaskConfig` recall reads.
#[napi(object)]
pub struct RecallConfig {
  /// `lexical`, `hybrid`, `adaptive` (default) or `quality`. An invalid value falls back to the
  /// default with a `config_invalid_retrieval_mode` diagnostic (it never disables recall).
  pub retrieval_mode: Option<String>,
}

/// Options of `recallWiki`.
#[napi(object, object_to_js = false)]
pub struct RecallWikiOptions {
  pub policy: RecallPolicy,
  pub config: Option<RecallConfig>,
  /// Overrides `config.retrievalMode`; an unknown value rejects with `invalid_argument`.
  #[napi(ts_type = "'lexical' | 'hybrid' | 'adaptive' | 'quality'")]
  pub mode: Option<String>,
  pub signal: Option<AbortSignal>,
  /// Treat the call as already cancelled (set by the JS wrapper when `signal` was already aborted).
  pub aborted: Option<bool>,
  /// Typed sub-queries: `lex` texts feed the lexical list, `vec` texts the dense list (hybrid and
  /// later modes). Confidence is always computed against `rawQuery`. At most 10 (more rejects
  /// with `invalid_argument`); each text is checked like `rawQuery` (an empty or over-long one
  /// resolves with `recall_query_empty` / `recall_query_too_long` and no results).
  pub subqueries: Option<Vec<SubQuery>>,
  /// Time budget of the cross-encoder in quality mode (default 2000 ms); on expiry the fused
  /// ranking is kept with a `reranker_timeout` diagnostic.
  pub rerank_timeout_ms: Option<u32>,
  /// Quality mode without a cross-encoder: rescore the top 20 candidates by their best
  /// two-sentence window's embedding (default false: it measured below the fused ranking on
  /// SciFact and the pi benchmark, and costs ~0.5 s per query on 2 cores). Shares the
  /// `rerankTimeoutMs` budget.
  pub sentence_rescore: Option<bool>,
  /// Apply the bounded feedback term (default true; false = the "without feedback" ablation).
  pub feedback: Option<bool>,
  /// The host session: results are offered to its ledger (`confirmRecallShown` marks them
  /// delivered); automatic recall also skips prompts that are not recall-shaped, does not
  /// re-inject an unchanged page, and shares `budgetChars` across the session.
  pub session: Option<crate::session::RecallSession>,
}

/// A typed sub-query.
#[napi(object)]
pub struct SubQuery {
  #[napi(ts_type = "'lex' | 'vec'")]
  pub r#type: String,
  pub query: String,
}

/// Versions and limits of the engine.
#[napi(object)]
pub struct EngineInfo {
  pub name: String,
  pub version: String,
  pub index_format_version: u32,
  /// Longest accepted recall query (characters).
  pub query_max_chars: u32,
  pub explicit_floor: f64,
  pub automatic_floor: f64,
}

/// Engine-wide model and runtime settings (`configure`). Only the options given change: an
/// omitted option keeps its current value and `null` resets it to its default. Defaults come
/// from environment variables (`LLM_WIKI_MODELS_DIR`, `LLM_WIKI_EMBED_MODEL`,
/// `LLM_WIKI_RERANK_MODEL`, `ORT_DYLIB_PATH`, `LLM_WIKI_THREADS`, `LLM_WIKI_DENSE=off`) and then
/// built-in values.
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // the TypeScript shape only: `configure` reads the raw object to tell `null` from absent
pub struct EngineOptions {
  /// Directories searched for the default embedder (`all-MiniLM-L6-v2-int8/`) and for
  /// `runtime/runtime.json`; the user cache `~/.cache/llm-wiki-retrieval/models` is always last.
  /// Replaces the earlier list; `[]` or `null` clears it.
  #[napi(ts_type = "Array<string> | null")]
  pub model_roots: Option<Vec<String>>,
  /// Embedding model directory (overrides the model roots); `null` goes back to the model roots.
  #[napi(ts_type = "string | null")]
  pub embed_model: Option<String>,
  /// Cross-encoder directory; quality mode rescores with it when set. No default.
  #[napi(ts_type = "string | null")]
  pub rerank_model: Option<String>,
  /// ONNX Runtime shared library (`libonnxruntime.so.*`, `.dylib`, `onnxruntime.dll`). The first
  /// library loaded stays loaded for the life of the process.
  #[napi(ts_type = "string | null")]
  pub onnx_runtime_path: Option<String>,
  /// Further library candidates, tried before the ones `addOnnxRuntimeCandidates` added (the
  /// `onnxruntime-node` package's library). Replaces the earlier list.
  #[napi(ts_type = "Array<string> | null")]
  pub onnx_runtime_candidates: Option<Vec<String>>,
  /// Inference threads per model (default: half the cores, 1..=4; `0` or `null` = default).
  /// Clamped to 1..=the number of logical CPUs.
  #[napi(ts_type = "number | null")]
  pub threads: Option<u32>,
  /// Release models unused for this many seconds (default 300).
  #[napi(ts_type = "number | null")]
  pub idle_release_seconds: Option<u32>,
  /// `false` disables dense retrieval: nothing is ever loaded, every mode runs lexical.
  /// `true` or `null` enables it again (unless `LLM_WIKI_DENSE=off`).
  #[napi(ts_type = "boolean | null")]
  pub dense: Option<bool>,
}

/// What `modelStatus` reports (reads manifests; loads nothing).
#[napi(object)]
pub struct ModelStatus {
  /// Id of the embedder recall would use, if one is found.
  pub embed_model: Option<String>,
  pub embed_dir: Option<String>,
  pub rerank_model: Option<String>,
  /// ONNX Runtime library that would be (or was) loaded, if found.
  pub onnx_runtime_path: Option<String>,
  /// Why no runtime library is available, if so.
  pub onnx_runtime_error: Option<String>,
  pub loaded_models: u32,
  pub threads: u32,
  pub dense_enabled: bool,
}

/// Options of `downloadModel`; defaults fetch all-MiniLM-L6-v2 (int8 ONNX) from the hub.
///
/// Calling it again for a `dir` that already holds the same `id` (files present and verified)
/// downloads nothing: `queryPrefix`, `chunkTokens` and `positiveClass`, when given, are written
/// into its manifest (options left out keep the manifest's values; a fitted calibration is kept),
/// and so is `maxBatch` (its default as below: 1 for the default model, unlimited for custom
/// `files`, unless given), while other `files` or another
/// `dims`, `pooling`, `maxLength` or `documentPrefix` reject with `invalid_argument` — stored
/// vectors are tied to the id, so such a model needs a new `id`.
#[napi(object, object_to_js = false)]
pub struct DownloadModelOptions {
  /// Target model directory (absolute). Default: `<user cache>/all-MiniLM-L6-v2-int8`.
  pub dir: Option<String>,
  /// Server root (default `https://huggingface.co`, or `HF_ENDPOINT`).
  pub base_url: Option<String>,
  pub repo: Option<String>,
  /// Commit id (40 hex digits) to fetch from; branch and tag names reject with
  /// `invalid_argument` (their files can change). Default: the pinned commit of the default model.
  pub revision: Option<String>,
  /// Files to fetch, each with its sha256. Default: the default model's files with their known
  /// checksums.
  pub files: Option<Vec<RemoteModelFile>>,
  /// Model id written to the manifest (vectors are tied to it).
  pub id: Option<String>,
  #[napi(ts_type = "'embed' | 'rerank'")]
  pub kind: Option<String>,
  pub dims: Option<u32>,
  #[napi(ts_type = "'mean' | 'cls' | 'none'")]
  pub pooling: Option<String>,
  pub max_length: Option<u32>,
  /// Largest inference batch written to the manifest (`maxBatch`). Set it to 1 for models
  /// quantized with per-batch (dynamic) activation scales so a text's vector never depends on its
  /// batch neighbours. Default: 1 for the default model, unlimited for others.
  pub max_batch: Option<u32>,
  /// Cross-encoders with a head of two or more classes: index of the "relevant" class, written
  /// to the manifest (`positiveClass`). Default 1 (`[not relevant, relevant]`).
  pub positive_class: Option<u32>,
  /// Text prepended to every query before embedding (`queryPrefix`; E5 models: `"query: "`).
  /// Default empty.
  pub query_prefix: Option<String>,
  /// Text prepended to every chunk before embedding (`documentPrefix`; E5: `"passage: "`).
  /// Stored vectors depend on it: it cannot change under an id already in `dir`. Default empty.
  pub document_prefix: Option<String>,
  /// Embedding models: the largest chunk, in the model's tokens, a reindex cuts for it
  /// (`chunkTokens`, at least 16; `0` = the engine's default, 200). A change re-chunks each vault
  /// once on its next reindex; refit the calibration afterwards (docs/INSTALL.md).
  pub chunk_tokens: Option<u32>,
  pub on_progress:
    Option<ThreadsafeFunction<DownloadProgressEvent, (), DownloadProgressEvent, Status, false, true>>,
  pub signal: Option<AbortSignal>,
  /// Set by the JS wrapper when `signal` was already aborted.
  pub aborted: Option<bool>,
}

/// A model directory ready to use.
#[napi(object)]
pub struct DownloadedModel {
  pub id: String,
  pub dir: String,
  #[napi(ts_type = "'embed' | 'rerank'")]
  pub kind: String,
  pub dims: u32,
}
