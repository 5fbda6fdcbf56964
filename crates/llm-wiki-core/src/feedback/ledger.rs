//! The per-session ledger: one record of what recall showed in a session, used for two things.
//! (1) Explicit judgments (`relevant` / `irrelevant` / `corrected`) are accepted only for a
//! (vault id, page id) pair it holds as shown, and their query hash, rank, mode and versions come
//! from it, never from caller text. (2) Session-aware automatic recall: a page already injected
//! in the session is not injected again unless its content changed, and the session's injections
//! share one character budget.
//!
//! A recall made with a session *offers* its results (pending); the host confirms delivery with
//! [`confirm_shown`] (the spec emits `shown` only after delivery), which moves them to the shown
//! set and charges their characters to the budget. In memory, per process; sessions and pages
//! are capped (least recently used session evicted). Confirmed entries are also written to the
//! vault's on-disk ledger ([`super::persist`]), which another process (an MCP server, a
//! restarted host) reads when this in-memory ledger has no entry for a pair.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Sessions kept per process (least recently used evicted).
pub const MAX_SESSIONS: usize = 256;
/// Shown pairs kept per session (oldest evicted).
pub const MAX_PAGES_PER_SESSION: usize = 4096;

/// One result recall showed (or offered) in a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShownEntry {
  /// Vault id of the page.
  pub vault_id: String,
  /// Page id.
  pub page_id: String,
  /// Hash of the normalized query that recalled it.
  pub query_hash: String,
  /// 0-based rank in the delivered list.
  pub rank: u32,
  /// Retrieval mode.
  pub mode: String,
  /// Index version of the answering store.
  pub index_version: String,
  /// Model identity of the answering store.
  pub model_version: String,
  /// sha256 of the page file when shown (a changed page may be injected again).
  pub content_hash: String,
  /// Characters this result took in the delivered context (charged on confirmation).
  pub chars: usize,
  /// Whether automatic recall injected it (re-injection is suppressed only for those).
  pub automatic: bool,
}

#[derive(Debug, Default)]
struct Session {
  pending: Vec<ShownEntry>,
  shown: Vec<ShownEntry>,
  injected_chars: usize,
  injections: u32,
  last_used: u64,
  /// The on-disk ledger's entries of the session were loaded ([`hydrate_once`]).
  hydrated: bool,
}

#[derive(Default)]
struct Ledger {
  sessions: HashMap<String, Session>,
  clock: u64,
}

fn ledger() -> &'static Mutex<Ledger> {
  static L: OnceLock<Mutex<Ledger>> = OnceLock::new();
  L.get_or_init(Default::default)
}

fn with_session<T>(id: &str, f: impl FnOnce(&mut Session) -> T) -> T {
  let mut l = ledger().lock();
  l.clock += 1;
  let clock = l.clock;
  if !l.sessions.contains_key(id) && l.sessions.len() >= MAX_SESSIONS {
    if let Some(old) = l.sessions.iter().min_by_key(|(_, s)| s.last_used).map(|(k, _)| k.clone()) {
      l.sessions.remove(&old);
    }
  }
  let s = l.sessions.entry(id.to_string()).or_default();
  s.last_used = clock;
  f(s)
}

/// Offer a recall's results (replaces the session's previous pending offer).
pub fn offer(session: &str, entries: Vec<ShownEntry>) {
  with_session(session, |s| s.pending = entries);
}

/// The session's pending (offered, not yet confirmed) entries.
pub fn pending(session: &str) -> Vec<ShownEntry> {
  let l = ledger().lock();
  l.sessions.get(session).map(|s| s.pending.clone()).unwrap_or_default()
}

/// Confirm delivery of the pending offer: it becomes shown (a pair shown again is updated to the
/// newer showing), its characters are charged. Returns the confirmed entries.
pub fn confirm_shown(session: &str) -> Vec<ShownEntry> {
  with_session(session, |s| {
    let confirmed = std::mem::take(&mut s.pending);
    if confirmed.iter().any(|e| e.automatic) {
      s.injections += 1;
    }
    for e in &confirmed {
      s.injected_chars += e.chars;
      s.shown.retain(|x| !(x.vault_id == e.vault_id && x.page_id == e.page_id));
      s.shown.push(e.clone());
    }
    let over = s.shown.len().saturating_sub(MAX_PAGES_PER_SESSION);
    s.shown.drain(..over);
    confirmed
  })
}

/// The shown entry of a pair in the session, if the session showed it.
pub fn shown_entry(session: &str, vault_id: &str, page_id: &str) -> Option<ShownEntry> {
  let l = ledger().lock();
  l.sessions.get(session)?.shown.iter().find(|e| e.vault_id == vault_id && e.page_id == page_id).cloned()
}

/// Put an entry another process recorded (read from the on-disk ledger) into the session's
/// shown set, uncharged, unless the session already holds the pair.
pub fn remember(session: &str, entry: ShownEntry) {
  with_session(session, |s| {
    if !s.shown.iter().any(|x| x.vault_id == entry.vault_id && x.page_id == entry.page_id) {
      s.shown.push(entry);
      let over = s.shown.len().saturating_sub(MAX_PAGES_PER_SESSION);
      s.shown.drain(..over);
    }
  });
}

/// Load the session's shown pairs another process recorded (`load`: the on-disk ledger, read at
/// most once per process and session, outside the ledger's lock) into the shown set: a pair the
/// session does not hold yet joins it, and an automatic one charges its characters to the
/// session budget, so a restarted host neither re-injects an unchanged page nor gets a fresh
/// budget.
pub fn hydrate_once(session: &str, load: impl FnOnce() -> Vec<ShownEntry>) {
  if ledger().lock().sessions.get(session).is_some_and(|s| s.hydrated) {
    return;
  }
  let entries = load();
  with_session(session, |s| {
    if s.hydrated {
      return;
    }
    s.hydrated = true;
    for e in entries {
      if !s.shown.iter().any(|x| x.vault_id == e.vault_id && x.page_id == e.page_id) {
        if e.automatic {
          s.injected_chars += e.chars;
        }
        s.shown.push(e);
      }
    }
    let over = s.shown.len().saturating_sub(MAX_PAGES_PER_SESSION);
    s.shown.drain(..over);
  });
}

/// Whether automatic recall already injected this page, unchanged, in the session.
pub fn already_injected(session: &str, vault_id: &str, page_id: &str, content_hash: &str) -> bool {
  let l = ledger().lock();
  l.sessions.get(session).is_some_and(|s| {
    s.shown.iter().any(|e| {
      e.automatic && e.vault_id == vault_id && e.page_id == page_id && e.content_hash == content_hash
    })
  })
}

/// Characters left of a session budget of `budget` after its confirmed injections.
pub fn remaining_budget(session: &str, budget: usize) -> usize {
  let l = ledger().lock();
  budget.saturating_sub(l.sessions.get(session).map_or(0, |s| s.injected_chars))
}

/// A session's totals: (confirmed injections, characters charged, shown pairs).
pub fn stats(session: &str) -> (u32, usize, usize) {
  let l = ledger().lock();
  l.sessions.get(session).map_or((0, 0, 0), |s| (s.injections, s.injected_chars, s.shown.len()))
}

/// Forget a session (the host's session ended).
pub fn end(session: &str) -> bool {
  ledger().lock().sessions.remove(session).is_some()
}

#[cfg(test)]
mod tests {
  use super::*;

  fn entry(page: &str, hash: &str, chars: usize) -> ShownEntry {
    ShownEntry {
      vault_id: "v".into(),
      page_id: page.into(),
      query_hash: "q".into(),
      rank: 0,
      mode: "lexical".into(),
      index_version: "1:1".into(),
      model_version: "estimate".into(),
      content_hash: hash.into(),
      chars,
      automatic: true,
    }
  }

  #[test]
  fn offer_confirm_budget_and_reinjection() {
    let s = "ledger-test-1";
    offer(s, vec![entry("a", "h1", 300), entry("b", "h2", 200)]);
    // Offered is not shown.
    assert!(shown_entry(s, "v", "a").is_none());
    assert!(!already_injected(s, "v", "a", "h1"));
    assert_eq!(confirm_shown(s).len(), 2);
    assert!(shown_entry(s, "v", "a").is_some());
    assert!(already_injected(s, "v", "a", "h1"));
    // Changed content may be injected again.
    assert!(!already_injected(s, "v", "a", "h1-changed"));
    assert_eq!(remaining_budget(s, 1000), 500);
    assert_eq!(remaining_budget(s, 100), 0);
    assert_eq!(stats(s), (1, 500, 2));
    // An unconfirmed offer charges nothing; confirming an empty offer twice is a no-op.
    offer(s, vec![entry("c", "h3", 50)]);
    assert_eq!(remaining_budget(s, 1000), 500);
    confirm_shown(s);
    assert!(confirm_shown(s).is_empty());
    assert!(end(s));
    assert!(shown_entry(s, "v", "a").is_none());
  }

  #[test]
  fn sessions_are_isolated() {
    offer("ledger-test-2", vec![entry("a", "h", 1)]);
    confirm_shown("ledger-test-2");
    assert!(shown_entry("ledger-test-3", "v", "a").is_none());
    end("ledger-test-2");
  }
}
