//! The `{code, message}` diagnostic that recall, memory tools, the session ledger and the tool
//! audit report (declared here, on the ground floor, so each of them can use it without an
//! upward import).

use serde::Serialize;

/// `{code, message}` diagnostic of a recall.
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecallDiagnostic {
  /// Stable code.
  pub code: String,
  /// Human-readable explanation.
  pub message: String,
}

impl RecallDiagnostic {
  pub(crate) fn new(code: &str, message: impl Into<String>) -> Self {
    RecallDiagnostic { code: code.to_string(), message: message.into() }
  }
}
