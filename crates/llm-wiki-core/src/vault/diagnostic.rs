//! Knowledge diagnostics: what discovery, parsing and lint say about a page.

use serde::{Deserialize, Serialize};

use super::frontmatter;

/// Severity of a [`Diagnostic`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
  /// The page is indexed anyway.
  Warning,
  /// The page is excluded.
  Error,
}

/// A knowledge diagnostic with the extension's shape `{severity, code, path, message, line?, column?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
  /// Warning or error.
  pub severity: Severity,
  /// Stable code (the contract's where one exists).
  pub code: String,
  /// Path relative to `wiki/` (or `.` for the directory itself).
  pub path: String,
  /// Human-readable explanation.
  pub message: String,
  /// Line in the page file (1-based), when known.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub line: Option<u32>,
  /// Column (1-based), when known.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub column: Option<u32>,
}

impl Diagnostic {
  /// An error-severity diagnostic.
  pub fn error(code: &str, path: &str, message: &str) -> Self {
    Diagnostic {
      severity: Severity::Error,
      code: code.to_string(),
      path: path.to_string(),
      message: message.to_string(),
      line: None,
      column: None,
    }
  }

  /// A warning-severity diagnostic.
  pub fn warning(code: &str, path: &str, message: &str) -> Self {
    Diagnostic { severity: Severity::Warning, ..Diagnostic::error(code, path, message) }
  }

  /// From a frontmatter failure of the page at `path`.
  pub fn from_frontmatter(path: &str, e: &frontmatter::FrontmatterError) -> Self {
    Diagnostic { line: e.line, column: e.column, ..Diagnostic::error(e.code, path, &e.message) }
  }
}
