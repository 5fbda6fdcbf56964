//! Recall feedback (spec "Feedback"): durable `recall_feedback` events in the vault's
//! append-only `meta/events.jsonl` ([`events`], written under the shared events lock [`crate::events_lock`]), a
//! rebuildable aggregate projection with a 90-day half-life ([`projection`]) that enters final
//! ranking as the bounded ±0.02 term of the multiplier, the per-session ledger of what recall
//! showed ([`ledger`], kept on disk per vault by [`persist`] for other processes: explicit
//! judgments are accepted only for pairs it holds, and automatic recall does not re-inject a
//! page it already injected), human-readable correction
//! observations ([`correction`]) and the cheap "is this prompt worth a recall?" gate
//! ([`shape`]).

pub mod archive;
pub mod compact;
pub mod correction;
pub mod events;
pub mod ledger;
pub mod persist;
pub mod projection;
pub mod record;
pub mod shape;
pub mod sums;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The spec's half-life of every feedback signal.
pub const HALF_LIFE_SECS: f64 = 90.0 * 86_400.0;
/// The spec's bound on the combined feedback term in the final multiplier.
pub const FEEDBACK_BOUND: f64 = 0.02;
/// The spec's bound on `shown_only` (per page and query, before decay).
pub const SHOWN_ONLY_BOUND: f64 = -0.005;

/// One feedback action (spec "Durable event format").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackAction {
  /// Recall delivered the result (context or links). Exposure only: no ranking signal.
  Shown,
  /// A later `read` resolved to a result shown in the active turn (weak positive).
  Opened,
  /// The assistant's output cited the shown page (moderate positive).
  Cited,
  /// Neither opened nor cited in the turn (engagement proxy, at most −0.005).
  ShownOnly,
  /// The user said the result was relevant (strong positive).
  Relevant,
  /// The user said the result was irrelevant (strong negative).
  Irrelevant,
  /// The user corrected the result; the correction lives in an observation page (strong negative
  /// for the corrected page on that query).
  Corrected,
  /// The user chose this page in a conflict resolution (strong positive).
  ConflictSelected,
}

impl FeedbackAction {
  /// Parse the wire name (`shown`, `opened`, ...).
  pub fn parse(s: &str) -> Result<Self> {
    Ok(match s {
      "shown" => Self::Shown,
      "opened" => Self::Opened,
      "cited" => Self::Cited,
      "shown_only" => Self::ShownOnly,
      "relevant" => Self::Relevant,
      "irrelevant" => Self::Irrelevant,
      "corrected" => Self::Corrected,
      "conflict_selected" => Self::ConflictSelected,
      o => {
        return Err(Error::invalid(format!(
          "feedback action must be one of shown | opened | cited | shown_only | relevant | irrelevant | corrected | conflict_selected, got {o:?}"
        )))
      }
    })
  }

  /// The wire name.
  pub fn as_str(self) -> &'static str {
    match self {
      Self::Shown => "shown",
      Self::Opened => "opened",
      Self::Cited => "cited",
      Self::ShownOnly => "shown_only",
      Self::Relevant => "relevant",
      Self::Irrelevant => "irrelevant",
      Self::Corrected => "corrected",
      Self::ConflictSelected => "conflict_selected",
    }
  }

  /// Implicit actions are the ones the `recallFeedback` setting turns off; explicit judgments,
  /// corrections and conflict choices are always recorded.
  pub fn is_implicit(self) -> bool {
    matches!(self, Self::Shown | Self::Opened | Self::Cited | Self::ShownOnly)
  }

  /// Explicit judgments need the pair in the active session's shown set.
  pub fn is_judgment(self) -> bool {
    matches!(self, Self::Relevant | Self::Irrelevant | Self::Corrected)
  }

  /// Signal of one event before decay. Strengths follow the spec's order (strong: corrections,
  /// conflict choices and explicit judgments; moderate: cited; weak: opened; `shown_only` at most
  /// −0.005; `shown` none). They are the spec's bounds, not fitted values.
  pub fn weight(self) -> f64 {
    match self {
      Self::Shown => 0.0,
      Self::Opened => 0.005,
      Self::Cited => 0.01,
      Self::ShownOnly => SHOWN_ONLY_BOUND,
      Self::Relevant | Self::ConflictSelected => FEEDBACK_BOUND,
      Self::Irrelevant | Self::Corrected => -FEEDBACK_BOUND,
    }
  }
}

/// SHA-256 (lowercase hex) of the normalized query: NFKC, whitespace collapsed, lowercased. The
/// raw query is never stored.
pub fn query_hash(raw_query: &str) -> String {
  let normalized = crate::retrieve::query::normalize_query(raw_query)
    .unwrap_or_else(|_| raw_query.split_whitespace().collect::<Vec<_>>().join(" "));
  crate::util::hash::sha256_hex(normalized.to_lowercase().as_bytes())
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn actions_round_trip_and_classify() {
    for a in [
      FeedbackAction::Shown,
      FeedbackAction::Opened,
      FeedbackAction::Cited,
      FeedbackAction::ShownOnly,
      FeedbackAction::Relevant,
      FeedbackAction::Irrelevant,
      FeedbackAction::Corrected,
      FeedbackAction::ConflictSelected,
    ] {
      assert_eq!(FeedbackAction::parse(a.as_str()).unwrap(), a);
      assert!(a.weight().abs() <= FEEDBACK_BOUND);
    }
    assert!(FeedbackAction::parse("liked").is_err());
    assert!(FeedbackAction::ShownOnly.is_implicit() && !FeedbackAction::Corrected.is_implicit());
    assert!(FeedbackAction::ShownOnly.weight() >= SHOWN_ONLY_BOUND);
  }

  #[test]
  fn query_hash_normalizes_and_hides_the_query() {
    let h = query_hash("  How   do we Deploy?");
    assert_eq!(h, query_hash("how do we deploy?"));
    assert_eq!(h.len(), 64);
    assert!(!h.contains("deploy"));
    assert_ne!(h, query_hash("how do we deploy"));
  }
}
