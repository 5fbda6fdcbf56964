//! The index's vocabulary shared by its parts: components, scopes, progress events and the
//! structured issues an index operation reports.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A structured warning or error of an index operation: `{code, message, path?}`.
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexIssue {
  /// Stable code.
  pub code: String,
  /// Human-readable explanation.
  pub message: String,
  /// Page path it concerns, if any.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub path: Option<String>,
}

impl IndexIssue {
  /// An issue with `code` and `message`.
  pub fn new(code: &str, message: impl Into<String>) -> Self {
    IndexIssue { code: code.to_string(), message: message.into(), path: None }
  }
  /// The same issue about `path`.
  pub fn at(mut self, path: impl Into<String>) -> Self {
    self.path = Some(path.into());
    self
  }
  /// The issue of an engine error (its stable code and message).
  pub fn from_error(e: &Error) -> Self {
    IndexIssue::new(e.code(), e.to_string())
  }
}

/// An index component a reindex can target.
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "lowercase", skip_typescript))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Component {
  /// The BM25 index (always built).
  Lexical,
  /// Chunk embeddings.
  Vectors,
}

impl Component {
  /// The component's name.
  pub fn as_str(self) -> &'static str {
    match self {
      Component::Lexical => "lexical",
      Component::Vectors => "vectors",
    }
  }
  /// Parse `lexical` or `vectors`.
  pub fn parse(s: &str) -> Result<Self> {
    match s {
      "lexical" => Ok(Component::Lexical),
      "vectors" => Ok(Component::Vectors),
      other => Err(Error::invalid(format!("unknown component '{other}' (expected lexical | vectors)"))),
    }
  }
  /// The components a caller names (`reindexWiki`, `watchWiki`): both when `None`; an empty list
  /// or an unknown name is `invalid_argument`.
  pub fn parse_list(names: Option<&[String]>) -> Result<Vec<Self>> {
    match names {
      None => Ok(vec![Component::Lexical, Component::Vectors]),
      Some([]) => Err(Error::invalid("components must contain at least one of lexical | vectors")),
      Some(names) => names.iter().map(|s| Component::parse(s)).collect(),
    }
  }
}

/// Which pages a reindex examines closely: `changed` trusts size + mtime, `all` re-hashes every page.
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "lowercase", skip_typescript))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
  /// Trust size + mtime.
  #[default]
  Changed,
  /// Re-hash every page.
  All,
}

impl Scope {
  /// The scope's name.
  pub fn as_str(self) -> &'static str {
    match self {
      Scope::Changed => "changed",
      Scope::All => "all",
    }
  }
  /// Parse `changed` or `all`.
  pub fn parse(s: &str) -> Result<Self> {
    match s {
      "changed" => Ok(Scope::Changed),
      "all" => Ok(Scope::All),
      other => Err(Error::invalid(format!("unknown scope '{other}' (expected changed | all)"))),
    }
  }
}

/// A progress event of a long operation.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false, js_name = "IndexProgress"))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
  /// `mirror` (scan + parse), `copy`, `lexical`, `vectors`, `validate` or `swap`.
  #[cfg_attr(
    feature = "napi",
    napi(ts_type = "'mirror' | 'copy' | 'lexical' | 'vectors' | 'validate' | 'swap'")
  )]
  pub stage: &'static str,
  /// Human-readable progress.
  pub message: String,
  /// Items (pages or chunks) done in this stage.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub current: Option<u32>,
  /// Items of this stage.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub total: Option<u32>,
}

/// A progress event of a reindex with the vault it concerns (`onProgress` payload of
/// `reindexWiki`).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReindexProgressEvent {
  /// Root of the vault being indexed (set by [`crate::store::reindex::reindex_wiki`]; empty
  /// when a single vault is reindexed directly).
  pub vault: String,
  /// Its progress.
  pub progress: Progress,
}

/// Receiver of progress events; called from worker threads.
pub type ProgressSink = Arc<dyn Fn(ReindexProgressEvent) + Send + Sync>;

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn component_lists_default_to_both_and_reject_empty_or_unknown() {
    assert_eq!(Component::parse_list(None).unwrap(), [Component::Lexical, Component::Vectors]);
    assert_eq!(Component::parse_list(Some(&["vectors".into()])).unwrap(), [Component::Vectors]);
    for bad in [&[][..], &["lexical".into(), "bm25".into()][..]] {
      assert_eq!(Component::parse_list(Some(bad)).unwrap_err().code(), "invalid_argument");
    }
  }
}
