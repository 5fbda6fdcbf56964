//! Query normalization (NFKC, trim, collapse whitespace; punctuation, paths and identifiers are
//! kept) and the small text checks the modes need.

use unicode_normalization::UnicodeNormalization;

use crate::error::{Error, Result};

/// Longest accepted query, in characters after normalization. Longer queries are rejected with
/// `recall_query_too_long`, never truncated.
pub const QUERY_MAX_CHARS: usize = 2_000;

/// Words that make a query a question (adaptive mode escalates on them).
pub const INTERROGATIVE_PREFIXES: &[&str] = &[
  "who",
  "what",
  "when",
  "where",
  "why",
  "how",
  "which",
  "compare",
  "explain",
  "什么",
  "为什么",
  "如何",
  "怎么",
  "哪",
];

/// NFKC, trim, collapse whitespace runs to one space.
pub fn normalize_query(raw: &str) -> Result<String> {
  let nfkc: String = raw.nfkc().collect();
  let q = nfkc.split_whitespace().collect::<Vec<_>>().join(" ");
  if q.is_empty() {
    return Err(Error::QueryEmpty);
  }
  let chars = q.chars().count();
  if chars > QUERY_MAX_CHARS {
    return Err(Error::QueryTooLong { chars, max: QUERY_MAX_CHARS });
  }
  Ok(q)
}

/// Canonical form for identity comparison: lowercase, `-`/`_` as spaces, single spaces.
pub fn identity_key(s: &str) -> String {
  let nfkc: String = s.nfkc().collect();
  nfkc.to_lowercase().replace(['-', '_'], " ").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// True when the query starts with an interrogative word (or a CJK question word).
pub fn interrogative_prefix(query: &str) -> bool {
  let lower = query.trim().to_lowercase();
  let first = lower.split_whitespace().next().unwrap_or("");
  INTERROGATIVE_PREFIXES.iter().any(|p| {
    if p.is_ascii() {
      first.trim_end_matches(|c: char| !c.is_alphanumeric()) == *p
    } else {
      lower.starts_with(p)
    }
  })
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn normalizes_but_keeps_identifiers() {
    assert_eq!(
      normalize_query("  ｗｉｋｉ_reindex   `src/a.rs`\n\t\"q\" ").unwrap(),
      "wiki_reindex `src/a.rs` \"q\""
    );
    assert_eq!(normalize_query(" \n\t ").unwrap_err().code(), "recall_query_empty");
    assert_eq!(normalize_query(&"a".repeat(2000)).unwrap().len(), 2000);
    assert_eq!(normalize_query(&"a".repeat(2001)).unwrap_err().code(), "recall_query_too_long");
    // Counted after normalization: 2,001 spaces collapse away.
    assert!(normalize_query(&format!("{}x", " ".repeat(2001))).is_ok());
  }

  #[test]
  fn identity() {
    assert_eq!(identity_key(" Wiki_Reindex  Tool "), "wiki reindex tool");
    assert_eq!(identity_key("QMD"), identity_key("qmd"));
  }

  #[test]
  fn interrogatives() {
    assert!(interrogative_prefix("who designed the cache"));
    assert!(interrogative_prefix("What? the cache"));
    assert!(interrogative_prefix("什么是卡片盒笔记法"));
    assert!(!interrogative_prefix("cached response design"));
    assert!(!interrogative_prefix("however"));
  }
}
