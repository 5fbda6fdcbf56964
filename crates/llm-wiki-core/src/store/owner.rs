//! The content of a store's lock marker (`index.lock/owner.json`), read by the lock itself and by
//! the migration's check for the TypeScript release's writer.

use serde::{Deserialize, Serialize};

/// Content of `index.lock/owner.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockOwner {
  /// Process id of the holder.
  pub pid: u32,
  /// Host of the holder (for a human reading the file; never used to decide anything).
  pub hostname: String,
  /// When it was taken (RFC 3339).
  pub acquired_at: String,
  /// `llm-wiki-retrieval` in this engine's markers; absent in the TypeScript release's lock.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub engine: Option<String>,
}
