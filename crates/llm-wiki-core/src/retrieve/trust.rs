//! Verification and freshness of a recalled page (OKF `verified`, `generated`, `stale_after`).
//!
//! - **Verified**: the page carries a human verification event (see
//!   [`crate::vault::page::human_verified_at`]) that is current — not older than `generated.at`
//!   when both are known. It earns the spec's `+0.02` inside the bounded multiplier's clamp
//!   ([`super::confidence::bounded_multiplier`]).
//! - **Verification outdated**: the latest human verification predates `generated.at`: no bonus
//!   and a `verification_outdated` warning.
//! - **Stale**: `now >= stale_after` (a date means 00:00 UTC of that day): a `stale` warning. No
//!   score penalty — the spec gives no constant for it, and constants change only through
//!   benchmarked code — and a stale page is never dropped.
//! - **Deprecated** (`status: deprecated`): a `deprecated` warning (its −0.08 is in the
//!   multiplier).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::util::time::parse_timestamp;
use crate::vault::PageMeta;

/// Trust state of a page at a point in time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trust {
  /// Current human verification (earns the verification bonus).
  pub verified: bool,
  /// Warning codes, in a fixed order: `stale`, `verification_outdated`, `deprecated`.
  pub warnings: Vec<&'static str>,
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> i64 {
  SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Trust state of `meta` at `now` (seconds since the epoch). Unparseable dates are ignored
/// (no bonus, no warning): lint reports them, recall never hides a page because of them.
pub fn trust_of(meta: &PageMeta, now: i64) -> Trust {
  let mut t = Trust::default();
  if let Some(stale) = meta.stale_after.as_deref().and_then(parse_timestamp) {
    if now >= stale {
      t.warnings.push("stale");
    }
  }
  if let Some(v) = meta.verified_at.as_deref().and_then(parse_timestamp) {
    match meta.generated_at.as_deref().and_then(parse_timestamp) {
      Some(g) if v < g => t.warnings.push("verification_outdated"),
      _ => t.verified = true,
    }
  }
  if meta.status.as_deref() == Some("deprecated") {
    t.warnings.push("deprecated");
  }
  t
}

#[cfg(test)]
mod tests {
  use super::*;

  fn meta(
    stale: Option<&str>,
    verified: Option<&str>,
    generated: Option<&str>,
    status: Option<&str>,
  ) -> PageMeta {
    PageMeta {
      stale_after: stale.map(str::to_string),
      verified_at: verified.map(str::to_string),
      generated_at: generated.map(str::to_string),
      status: status.map(str::to_string),
      ..PageMeta::default()
    }
  }

  #[test]
  fn freshness_and_verification() {
    let now = parse_timestamp("2026-12-01T12:00:00Z").unwrap();
    assert_eq!(trust_of(&meta(None, None, None, None), now), Trust::default());
    // Stale from 00:00 UTC of the stale_after day on; not before.
    assert_eq!(trust_of(&meta(Some("2026-12-01"), None, None, None), now).warnings, vec!["stale"]);
    assert!(trust_of(&meta(Some("2026-12-02"), None, None, None), now).warnings.is_empty());
    assert!(trust_of(&meta(Some("never"), None, None, None), now).warnings.is_empty());
    // Verification counts when it is not older than the generation.
    let v = trust_of(&meta(None, Some("2026-08-02T11:00:00Z"), Some("2026-08-02T10:00:00Z"), None), now);
    assert_eq!(v, Trust { verified: true, warnings: vec![] });
    assert!(trust_of(&meta(None, Some("2026-08-02"), None, None), now).verified);
    let old = trust_of(&meta(None, Some("2026-08-01"), Some("2026-08-02T10:00:00Z"), None), now);
    assert_eq!(old, Trust { verified: false, warnings: vec!["verification_outdated"] });
    let all =
      trust_of(&meta(Some("2020-01-01"), Some("2026-08-01"), Some("2026-08-02"), Some("deprecated")), now);
    assert_eq!(all.warnings, vec!["stale", "verification_outdated", "deprecated"]);
  }
}
