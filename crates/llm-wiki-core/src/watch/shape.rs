//! What a watcher is given and what it tells: options, backends, events and status.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::store::job::DocumentCounts;
use crate::store::{Component, IndexIssue};

/// Default quiet time before a batch is indexed.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);
/// Default interval of the polling backend.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);
/// Paths listed in one event (the count is always exact).
pub const MAX_EVENT_PATHS: usize = 100;

/// Which OS mechanism delivers events.
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "lowercase", skip_typescript))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
  /// inotify (Linux), FSEvents (macOS), ReadDirectoryChangesW (Windows).
  Native,
  /// A metadata walk every `poll_interval` (network filesystems, no watch slots left).
  Poll,
}

impl Backend {
  /// `native` or `poll`.
  pub fn as_str(self) -> &'static str {
    match self {
      Backend::Native => "native",
      Backend::Poll => "poll",
    }
  }
}

/// Options of [`watch_wiki`].
#[derive(Clone)]
pub struct WatchOptions {
  /// Components to keep current: lexical first, then vectors in the background.
  pub components: Vec<Component>,
  /// Quiet time before a batch is indexed.
  pub debounce: Duration,
  /// Longest wait after a batch's first event, however busy the stream (default 10 × debounce,
  /// at least 1 s).
  pub max_wait: Option<Duration>,
  /// Force the polling backend.
  pub poll: bool,
  /// Interval of the polling backend.
  pub poll_interval: Duration,
  /// Worker threads of each reindex (0 = engine default).
  pub threads: usize,
  /// Fault injection for tests: every OS event is replaced by an overflow notice, as the kernel
  /// does when its queue overflows (the changes are only found by the full scan).
  #[doc(hidden)]
  pub simulate_overflow: bool,
}

impl Default for WatchOptions {
  fn default() -> Self {
    WatchOptions {
      components: vec![Component::Lexical, Component::Vectors],
      debounce: DEFAULT_DEBOUNCE,
      max_wait: None,
      poll: false,
      poll_interval: DEFAULT_POLL_INTERVAL,
      threads: 0,
      simulate_overflow: false,
    }
  }
}

/// What a [`WatchEvent`] reports.
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "snake_case", skip_typescript))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchEventKind {
  /// The OS watch is armed (at start, and again after the vault came back).
  Started,
  /// A batch is searchable (lexical) or its vectors are written (`phase: vectors`).
  Indexed,
  /// Events were lost (OS overflow, watcher error, full queue): a full scan follows.
  Overflow,
  /// A reindex failed (kept and retried) or the watcher reported a problem.
  Error,
  /// `wiki/` disappeared or was replaced; the watch is re-armed when it is back.
  VaultGone,
  /// The watcher stopped (last event).
  Closed,
}

impl WatchEventKind {
  /// The kind's name (`started`, `indexed`, `overflow`, `error`, `vault_gone`, `closed`).
  pub fn as_str(self) -> &'static str {
    match self {
      WatchEventKind::Started => "started",
      WatchEventKind::Indexed => "indexed",
      WatchEventKind::Overflow => "overflow",
      WatchEventKind::Error => "error",
      WatchEventKind::VaultGone => "vault_gone",
      WatchEventKind::Closed => "closed",
    }
  }
}

/// One event of a watcher, delivered in order from its thread.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchEvent {
  /// `started` (watch armed; again with `rearmed` after the vault came back), `indexed` (a batch
  /// is searchable: `phase: 'lexical'`; its vectors written: `phase: 'vectors'`), `overflow`
  /// (events were lost: a full scan follows), `error` (a reindex failed: kept and retried),
  /// `vault_gone` (the wiki directory was deleted, moved or replaced), `closed` (last event).
  #[cfg_attr(
    feature = "napi",
    napi(ts_type = "'started' | 'indexed' | 'overflow' | 'error' | 'vault_gone' | 'closed'")
  )]
  pub kind: WatchEventKind,
  /// `lexical` or `vectors` for `indexed`.
  #[serde(skip_serializing_if = "Option::is_none")]
  #[cfg_attr(feature = "napi", napi(ts_type = "'lexical' | 'vectors'"))]
  pub phase: Option<&'static str>,
  /// Changed paths relative to `wiki/` (at most [`MAX_EVENT_PATHS`]; folders included).
  pub paths: Vec<String>,
  /// Number of changed paths in the batch.
  pub path_count: u32,
  /// The batch was a full scan (start-up, overflow, re-arm, too many paths).
  pub full_scan: bool,
  /// Time of the reindex, in ms.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub ms: Option<f64>,
  /// From the batch's first event to searchable, in ms (`indexed`, lexical).
  #[serde(skip_serializing_if = "Option::is_none")]
  pub latency_ms: Option<f64>,
  /// Page counts of the reindex.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub documents: Option<DocumentCounts>,
  /// Store generation after the reindex.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub generation: Option<i64>,
  /// Backend in use (`started`).
  #[serde(skip_serializing_if = "Option::is_none")]
  #[cfg_attr(feature = "napi", napi(ts_type = "'native' | 'poll'"))]
  pub backend: Option<Backend>,
  /// Stable code of an `error` / `overflow` / `vault_gone` event.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub code: Option<String>,
  /// Human-readable detail.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub message: Option<String>,
  /// `started` after the vault came back.
  pub rearmed: bool,
}

impl WatchEvent {
  pub(crate) fn new(kind: WatchEventKind) -> Self {
    WatchEvent {
      kind,
      phase: None,
      paths: Vec::new(),
      path_count: 0,
      full_scan: false,
      ms: None,
      latency_ms: None,
      documents: None,
      generation: None,
      backend: None,
      code: None,
      message: None,
      rearmed: false,
    }
  }
  pub(crate) fn with_code(mut self, code: &str, message: impl Into<String>) -> Self {
    self.code = Some(code.to_string());
    self.message = Some(message.into());
    self
  }
  pub(crate) fn with_batch(mut self, b: &super::batch::Batch) -> Self {
    self.paths = b.paths.iter().chain(b.dirs.iter()).take(MAX_EVENT_PATHS).cloned().collect();
    self.path_count = b.len() as u32;
    self.full_scan = b.full_scan;
    self
  }
}

/// Receiver of watch events; called on the watcher thread, in order.
pub type WatchSink = Arc<dyn Fn(WatchEvent) + Send + Sync>;

/// What a watcher is doing, for status displays.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchStatus {
  /// `watching`, `indexing`, `retrying` (busy lock or failure), `gone` or `closed`.
  #[cfg_attr(feature = "napi", napi(ts_type = "'watching' | 'indexing' | 'retrying' | 'gone' | 'closed'"))]
  pub state: &'static str,
  /// Backend in use.
  #[cfg_attr(feature = "napi", napi(ts_type = "'native' | 'poll'"))]
  pub backend: Backend,
  /// Changed paths waiting for their reindex.
  pub pending_paths: u32,
  /// The next reindex is a full scan.
  pub pending_full_scan: bool,
  /// Lexical changes whose vectors are not written yet.
  pub vectors_pending: bool,
  /// Reindexes run (lexical batches).
  pub reindexes: i64,
  /// Overflows seen.
  pub overflows: i64,
  /// When the last batch became searchable (RFC 3339).
  pub last_indexed_at: Option<String>,
  /// The last reindex failure, until a reindex succeeds.
  pub last_error: Option<IndexIssue>,
}
