//! What the agent-facing graph tools (`wikiIndex`, `neighbours`, `graphQuery`, `linkPath`) share:
//! page-id checks (malformed ids, ids of another vault), token budgets (default, cap, 0 and
//! absurd values), the token estimate and cutting text at sentence ends.

use crate::error::{Error, Result};
use crate::store::manifest::Manifest;
use crate::util::diagnostic::RecallDiagnostic;

/// A budget request resolved to the value used, with the diagnostic a clamp produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
  /// Tokens the answer may take.
  pub tokens: usize,
  /// True when the request was above the cap and was lowered to it.
  pub clamped: bool,
}

/// A JavaScript number given as a token budget or count: a non-negative integer (10⁹ and more
/// are accepted, for [`budget`] and the callers' caps to clamp; `Infinity` is the largest);
/// NaN, negative or fractional values are `invalid_argument`.
pub fn whole(name: &str, v: Option<f64>) -> Result<Option<u64>> {
  match v {
    None => Ok(None),
    // A float-to-int `as` saturates: 1e300 becomes u64::MAX.
    Some(x) if x.is_finite() && x >= 0.0 && x.fract() == 0.0 => Ok(Some(x as u64)),
    Some(x) if x == f64::INFINITY => Ok(Some(u64::MAX)),
    Some(x) => Err(Error::invalid(format!("{name} must be a whole number of at least 0, got {x}"))),
  }
}

/// `requested` tokens (`None` → `default`), at most `max`. A budget of 0 is an
/// `invalid_argument` (an answer of no tokens is never what a caller means); a budget above
/// `max` (10⁹, say) is clamped to `max` and reported by the caller as `budget_clamped`.
pub fn budget(name: &str, requested: Option<u64>, default: usize, max: usize) -> Result<Budget> {
  match requested {
    None => Ok(Budget { tokens: default.min(max), clamped: false }),
    Some(0) => {
      Err(Error::invalid(format!("{name} must be at least 1 token (default {default}, at most {max})")))
    }
    Some(n) if n > max as u64 => Ok(Budget { tokens: max, clamped: true }),
    Some(n) => Ok(Budget { tokens: n as usize, clamped: false }),
  }
}

impl Budget {
  /// The `budget_clamped` diagnostic, when the request was lowered.
  pub fn diagnostic(&self, name: &str, max: usize) -> Option<RecallDiagnostic> {
    self.clamped.then(|| {
      RecallDiagnostic::new("budget_clamped", format!("{name} is capped at {max} tokens; {max} used"))
    })
  }
}

/// A token count as the graph tools report it (their budgets are at most 10,000 tokens).
pub(crate) fn reported(n: usize) -> u32 {
  u32::try_from(n).unwrap_or(u32::MAX)
}

/// Estimated tokens of `text` (the engine's WordPiece estimate, [`crate::chunk::estimate_tokens`]).
pub fn tokens(text: &str) -> usize {
  crate::chunk::estimate_tokens(text)
}

/// The longest prefix of `text` that ends at a sentence end (`.`, `!`, `?`, `。`, `！`, `？`
/// followed by white space or the end, or a line break) and has at most `max_tokens` tokens; the
/// whole text when it fits. When not even the first sentence fits, the longest prefix ending at
/// a word boundary is taken (a cut inside a word would be noise). Returns (prefix, cut).
pub fn cut_at_sentence(text: &str, max_tokens: usize) -> (&str, bool) {
  if tokens(text) <= max_tokens {
    return (text, false);
  }
  let mut best = 0usize;
  let mut word_best = 0usize;
  let chars: Vec<(usize, char)> = text.char_indices().collect();
  for (k, &(i, c)) in chars.iter().enumerate() {
    let end = i + c.len_utf8();
    let next_ws = chars.get(k + 1).is_none_or(|(_, n)| n.is_whitespace());
    let sentence_end = matches!(c, '。' | '！' | '？' | '\n') || (matches!(c, '.' | '!' | '?') && next_ws);
    let word_end = c.is_whitespace() || sentence_end;
    if !sentence_end && !word_end {
      continue;
    }
    // Tokens grow with the prefix: stop at the first end past the budget.
    if tokens(&text[..end]) > max_tokens {
      break;
    }
    if sentence_end {
      best = end;
    }
    word_best = if c.is_whitespace() { i } else { end };
  }
  let cut = if best > 0 { best } else { word_best };
  (text[..cut].trim_end(), true)
}

/// Check a page id given by a caller and return it as a page id of this vault (`.md` dropped):
/// empty ids, ids with a `.`/`..` segment, absolute paths, backslashes or NUL are
/// `invalid_argument`; an id prefixed by another vault (`<vault id>:<page>`, `personal:<page>` /
/// `project:<page>` naming a vault other than this one) is `graph_cross_vault`. A prefix naming
/// this vault (its id) is dropped. Whether the page exists is the caller's question.
pub fn check_page_id(raw: &str, vault_id: &str, vault_kind: Option<&str>) -> Result<String> {
  let id = raw.trim();
  if id.is_empty() {
    return Err(Error::invalid("page id is empty"));
  }
  if id.contains('\0') || id.contains('\\') {
    return Err(Error::invalid(format!(
      "page id {id:?} contains a backslash or NUL; page ids are '/'-separated"
    )));
  }
  if id.starts_with('/') || id.starts_with('~') || id.as_bytes().get(1) == Some(&b':') && id.len() > 2 {
    // `C:` drive paths too (a one-letter "vault" prefix is no vault id).
    return Err(Error::invalid(format!(
      "page id {id:?} is an absolute path; page ids are relative to the vault's wiki/ folder"
    )));
  }
  let id = match id.split_once(':') {
    Some((prefix, rest)) if is_vault_prefix(prefix) => {
      let ours = prefix == vault_id || vault_kind == Some(prefix);
      if !ours {
        return Err(Error::CrossVault(format!(
          "page id {id:?} names vault {prefix:?}; this request is answered in vault {vault_id} only (the graph never crosses vaults)"
        )));
      }
      rest
    }
    _ => id,
  };
  let id = id.strip_suffix(".md").or_else(|| id.strip_suffix(".MD")).unwrap_or(id);
  if id.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
    return Err(Error::invalid(format!("page id {id:?} has an empty, '.' or '..' segment")));
  }
  Ok(id.to_string())
}

/// True for a prefix that names a vault: `project`, `personal` or a vault id (a UUID).
fn is_vault_prefix(p: &str) -> bool {
  p == "project" || p == "personal" || (p.len() == 36 && p.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
}

/// The manifest's page id for `id`: exact, else case-insensitive (the greatest of several).
pub fn find_page<'a>(manifest: &'a Manifest, id: &str) -> Option<&'a str> {
  if let Some((k, _)) = manifest.entries.get_key_value(id) {
    return Some(k);
  }
  let lower = id.to_lowercase();
  manifest.entries.keys().filter(|k| k.to_lowercase() == lower).max().map(String::as_str)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn budgets_default_cap_and_reject_zero() {
    assert_eq!(budget("b", None, 2000, 10_000).unwrap(), Budget { tokens: 2000, clamped: false });
    assert_eq!(
      budget("b", Some(1_000_000_000), 2000, 10_000).unwrap(),
      Budget { tokens: 10_000, clamped: true }
    );
    assert!(!budget("b", Some(10_000), 2000, 10_000).unwrap().clamped);
    assert_eq!(budget("b", Some(0), 2000, 10_000).unwrap_err().code(), "invalid_argument");
  }

  #[test]
  fn cuts_at_sentence_ends() {
    let t = "First sentence here. Second one is longer than that! Third? Yes.";
    assert_eq!(cut_at_sentence(t, 1000), (t, false));
    let (c, cut) = cut_at_sentence(t, 6);
    assert!(cut);
    assert_eq!(c, "First sentence here.");
    let (c, _) = cut_at_sentence(t, 12);
    assert_eq!(c, "First sentence here. Second one is longer than that!");
    // No sentence end within the budget: a word boundary.
    let (c, cut) = cut_at_sentence("alpha beta gamma delta epsilon", 2);
    assert!(cut);
    assert_eq!(c, "alpha beta");
    // Decimal points and version numbers are no sentence end.
    let (c, _) = cut_at_sentence("Version 2.5.3 is out. More text follows here and here.", 9);
    assert_eq!(c, "Version 2.5.3 is out.");
    assert_eq!(cut_at_sentence("", 0), ("", false));
    let (c, _) = cut_at_sentence("中文句子。第二句很长很长很长。", 6);
    assert_eq!(c, "中文句子。");
  }

  #[test]
  fn page_ids_are_checked() {
    let v = "0b4f5a52-95a4-4b1e-9b7e-0e4a7f7f2c11";
    assert_eq!(check_page_id(" concepts/a.md ", v, None).unwrap(), "concepts/a");
    assert_eq!(check_page_id(&format!("{v}:concepts/a"), v, None).unwrap(), "concepts/a");
    assert_eq!(check_page_id("project:concepts/a", v, Some("project")).unwrap(), "concepts/a");
    for bad in ["", "../x", "a/../../b", "/etc/passwd", "C:/x", "a\\b", "a//b", "./a", "~/x"] {
      assert_eq!(check_page_id(bad, v, None).unwrap_err().code(), "invalid_argument", "{bad:?}");
    }
    let other = "11111111-2222-4333-8444-555555555555:concepts/a";
    assert_eq!(check_page_id(other, v, None).unwrap_err().code(), "graph_cross_vault");
    assert_eq!(
      check_page_id("personal:concepts/a", v, Some("project")).unwrap_err().code(),
      "graph_cross_vault"
    );
    // A colon that names no vault is part of the id.
    assert_eq!(check_page_id("notes/a:b", v, None).unwrap(), "notes/a:b");
  }
}
