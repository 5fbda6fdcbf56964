//! One error type for the whole engine. Every variant maps to a stable, documented
//! `code` string; the Node binding copies that string into `err.code`, so callers can
//! branch on it without parsing messages.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure the engine can report to a caller.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
  /// A caller passed an argument the engine cannot use (relative path, unknown enum value, ...).
  #[error("{0}")]
  InvalidArgument(String),
  /// `.llm-wiki/config.json` is missing, unreadable, malformed or not an object.
  #[error("vault config {path} is invalid: {message}")]
  ConfigInvalid {
    /// The config file.
    path: PathBuf,
    /// What is wrong with it.
    message: String,
  },
  /// `vault_id` in config.json exists but is not a v4 UUID string.
  #[error("vault config {path} has an invalid vault_id: {message}")]
  ConfigInvalidVaultId {
    /// The config file.
    path: PathBuf,
    /// What is wrong with the id.
    message: String,
  },
  /// Another reindex (in this or another process) holds the vault's index lock.
  #[error("retrieval index is being written by another reindex ({0})")]
  IndexBusy(PathBuf),
  /// The index on disk cannot be used (corrupt, unreadable, inconsistent).
  #[error("retrieval index error: {0}")]
  Index(String),
  /// The persisted page manifest failed validation.
  #[error("retrieval manifest is invalid: {0}")]
  ManifestInvalid(String),
  /// The caller's AbortSignal fired; work stopped between batches.
  #[error("operation cancelled")]
  Cancelled,
  /// A filesystem operation failed.
  #[error("{op} {path}: {source}")]
  Io {
    /// The operation (`read`, `write`, `rename`, ...).
    op: &'static str,
    /// The path it was applied to.
    path: PathBuf,
    /// The operating system's error.
    #[source]
    source: std::io::Error,
  },
  /// The recall query is empty after normalization.
  #[error("recall query is empty")]
  QueryEmpty,
  /// The recall query is longer than the accepted maximum (never truncated).
  #[error("recall query has {chars} characters; the maximum is {max}")]
  QueryTooLong {
    /// Characters counted: of the raw text (trimmed, whitespace runs as one) when that is over
    /// the cap, else of the normalized query.
    chars: usize,
    /// The accepted maximum.
    max: usize,
  },
  /// No ONNX Runtime shared library could be found or loaded.
  #[error("ONNX Runtime unavailable: {0}")]
  RuntimeUnavailable(String),
  /// A model directory, manifest or file is missing, corrupt or incompatible.
  #[error("model unavailable: {0}")]
  ModelUnavailable(String),
  /// Running a model failed (tokenization, inference, unexpected output shape).
  #[error("model inference failed: {0}")]
  Inference(String),
  /// Downloading a model file failed (network, HTTP status, checksum).
  #[error("download failed: {0}")]
  Download(String),
  /// A model file is larger than its declared size (or than the cap of an undeclared one): the
  /// download stopped as soon as the bytes said so.
  #[error("download too large: {0}")]
  DownloadTooLarge(String),
  /// A time budget ran out (for example the reranker's).
  #[error("timed out: {0}")]
  Timeout(String),
  /// The vault's events lock (`meta/events.lock`) stayed busy for the whole wait.
  #[error("feedback events lock is busy: {0}")]
  FeedbackLockBusy(String),
  /// An explicit judgment named a (vault id, page id) pair the active session did not show.
  #[error("page {page_id} of vault {vault_id} was not shown in this session")]
  FeedbackNotShown {
    /// Vault id of the pair.
    vault_id: String,
    /// Page id of the pair.
    page_id: String,
  },
  /// A Rust panic was caught at the API boundary.
  #[error("internal error (panic): {0}")]
  Panic(String),
  /// `resolveConflict` refused a request; `code` is one of the stable `resolution_*` codes of
  /// [`crate::memory::resolve::codes`].
  #[error("{message}")]
  Resolution {
    /// The rule that refused the request.
    code: &'static str,
    /// Human-readable explanation naming the page ids involved.
    message: String,
  },
  /// The vault's events lock (`meta/events.lock`) stayed held by another writer past the wait.
  #[error("events lock is busy: {0}")]
  EventsLockBusy(String),
  /// An explicit feedback compaction could not run or settle an interrupted one (the stream and
  /// every archive are left in place).
  #[error("feedback compaction failed: {0}")]
  FeedbackCompaction(String),
  /// A graph request named a page of another vault (`<vault id>:<page>`, `personal:` from the
  /// project vault): links, paths and traversals never cross vaults.
  #[error("{0}")]
  CrossVault(String),
  /// `init` refused a folder; `code` is one of [`crate::vault::init::codes`] (nothing written).
  #[error("{message}")]
  VaultInit {
    /// Why: `vault_init_not_found`, `vault_init_not_directory`, `vault_init_unreadable`,
    /// `vault_init_no_markdown` or `vault_init_inside_vault`.
    code: &'static str,
    /// Human-readable explanation naming the folder.
    message: String,
  },
}

impl Error {
  /// The stable machine-readable code of this error (becomes `err.code` in Node).
  pub fn code(&self) -> &'static str {
    match self {
      Error::InvalidArgument(_) => "invalid_argument",
      Error::ConfigInvalid { .. } => "config_invalid",
      Error::ConfigInvalidVaultId { .. } => "config_invalid_vault_id",
      Error::IndexBusy(_) => "qmd_index_busy",
      Error::Index(_) => "qmd_index_error",
      Error::ManifestInvalid(_) => "qmd_manifest_invalid",
      Error::Cancelled => "cancelled",
      Error::Io { .. } => "io_error",
      Error::QueryEmpty => "recall_query_empty",
      Error::QueryTooLong { .. } => "recall_query_too_long",
      Error::RuntimeUnavailable(_) => "onnx_runtime_unavailable",
      Error::ModelUnavailable(_) => "model_unavailable",
      Error::Inference(_) => "model_inference_failed",
      Error::Download(_) => "model_download_failed",
      Error::DownloadTooLarge(_) => "model_download_too_large",
      Error::Timeout(_) => "timeout",
      Error::FeedbackLockBusy(_) => "feedback_lock_busy",
      Error::FeedbackNotShown { .. } => "feedback_not_shown",
      Error::Panic(_) => "internal_panic",
      Error::Resolution { code, .. } => code,
      Error::EventsLockBusy(_) => "events_lock_busy",
      Error::FeedbackCompaction(_) => "feedback_compaction_failed",
      Error::VaultInit { code, .. } => code,
      Error::CrossVault(_) => "graph_cross_vault",
    }
  }

  /// Shorthand for an I/O error with the operation and path that failed.
  pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
    Error::Io { op, path: path.into(), source }
  }

  /// Shorthand for an [`Error::InvalidArgument`].
  pub fn invalid(msg: impl Into<String>) -> Self {
    Error::InvalidArgument(msg.into())
  }
}

impl From<tantivy::TantivyError> for Error {
  fn from(e: tantivy::TantivyError) -> Self {
    Error::Index(e.to_string())
  }
}

/// Run `f`, turning a panic into [`Error::Panic`] so no API call can abort the host.
pub fn catch_panic<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
  std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
    .unwrap_or_else(|payload| Err(Error::Panic(panic_message(payload.as_ref()))))
}

/// The message a caught panic carries (`panic!` with a literal or a formatted string), or
/// "unknown panic".
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
  payload
    .downcast_ref::<&str>()
    .map(|s| s.to_string())
    .or_else(|| payload.downcast_ref::<String>().cloned())
    .unwrap_or_else(|| "unknown panic".into())
}
