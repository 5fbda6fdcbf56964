//! Mapping of engine errors to JavaScript errors: the engine's stable code becomes `err.code`.

use napi::bindgen_prelude::*;

/// A status whose string form is the engine's error code (napi puts it in `err.code`).
pub struct Code(pub String);

impl AsRef<str> for Code {
  fn as_ref(&self) -> &str {
    &self.0
  }
}

impl From<Status> for Code {
  fn from(s: Status) -> Self {
    Code(s.as_ref().to_string())
  }
}

/// Result of engine work in the binding.
pub type Outcome<T> = std::result::Result<T, Failure>;

/// A failure carried from a worker thread to the JS thread.
#[derive(Debug, Clone)]
pub struct Failure {
  pub code: String,
  pub message: String,
}

impl From<llm_wiki_core::Error> for Failure {
  fn from(e: llm_wiki_core::Error) -> Self {
    Failure { code: e.code().to_string(), message: e.to_string() }
  }
}

impl Failure {
  /// A JS error value with `code` set, ready to reject a promise with.
  pub fn to_napi(&self, env: &Env) -> Error {
    let err = Error::new(Code(self.code.clone()), self.message.clone());
    Error::from_unknown_without_coercion(JsError::from(err).into_unknown(*env))
  }

  /// For synchronous functions: an error whose `code` is the engine code.
  pub fn into_sync(self) -> Error<Code> {
    Error::new(Code(self.code), self.message)
  }
}

/// An `invalid_argument` failure: the caller passed a value the engine refuses.
pub(crate) fn invalid(message: impl Into<String>) -> Failure {
  Failure { code: "invalid_argument".into(), message: message.into() }
}

pub(crate) fn core_err(e: llm_wiki_core::Error) -> Failure {
  Failure::from(e)
}
