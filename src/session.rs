//! The host session a recall belongs to, as JavaScript passes it.

use napi_derive::napi;

use crate::error::Outcome;

/// The host session a recall belongs to (`recallWiki` / `recallMemory` option `session`).
#[napi(object)]
pub struct RecallSession {
  /// Host session id (any non-empty string, stable for the session).
  pub id: String,
  /// Characters all automatic injections of the session may take together (default: no cap).
  pub budget_chars: Option<u32>,
}

impl RecallSession {
  pub(crate) fn to_core(&self) -> Outcome<llm_wiki_core::retrieve::recall::SessionRecall> {
    if self.id.trim().is_empty() {
      return Err(crate::error::invalid("session.id must be a non-empty string"));
    }
    Ok(llm_wiki_core::retrieve::recall::SessionRecall {
      id: self.id.clone(),
      budget_chars: self.budget_chars.map(|b| b as usize),
    })
  }
}
