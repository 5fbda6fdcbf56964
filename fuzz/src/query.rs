//! Query normalizer (retrieve/query.rs), analyzer (analysis.rs) and lexical query terms
//! (retrieve/lexical.rs `query_terms`).
//!
//! Invariants: `normalize_query` is idempotent, returns trimmed single-spaced text of at most
//! QUERY_MAX_CHARS characters, and rejects exactly the empty and the over-long queries with their
//! codes; `identity_key` is idempotent; the tokenizer's offsets are ordered char boundaries of the
//! input and its positions the tokens' byte offsets; analyzed terms are non-empty and contain no whitespace;
//! `query_terms` are the analyzed terms in order (repeats kept), at most MAX_ANALYZED_TOKENS, and
//! deterministic.

use llm_wiki_core::analysis::{analyze, wiki_analyzer, WikiTokenizer};
use llm_wiki_core::retrieve::lexical::{query_terms, MAX_ANALYZED_TOKENS};
use llm_wiki_core::retrieve::query::{identity_key, interrogative_prefix, normalize_query, QUERY_MAX_CHARS};
use tantivy::tokenizer::{TokenStream, Tokenizer};
use unicode_normalization::UnicodeNormalization;

/// One input (panics on a violated invariant).
pub fn run(data: &[u8]) {
  let raw = String::from_utf8_lossy(data);

  // Oracle: NFKC, then whitespace runs collapsed to one space and trimmed.
  let nfkc: String = raw.nfkc().collect();
  let expected = nfkc.split_whitespace().collect::<Vec<_>>().join(" ");
  match normalize_query(&raw) {
    Ok(q) => {
      assert_eq!(q, expected);
      assert!(!q.is_empty());
      assert_eq!(q, q.trim(), "normalized query has outer whitespace");
      assert!(!q.contains("  "), "normalized query has a double space");
      assert!(
        !q.chars().any(|c| c.is_whitespace() && c != ' '),
        "normalized query keeps non-space whitespace"
      );
      assert!(q.chars().count() <= QUERY_MAX_CHARS);
      assert_eq!(normalize_query(&q).ok().as_deref(), Some(q.as_str()), "normalize_query is not idempotent");
      let _ = interrogative_prefix(&q);
      check_terms(&q);
    }
    Err(e) => match e.code() {
      "recall_query_empty" => assert!(expected.is_empty(), "non-blank query rejected as empty"),
      "recall_query_too_long" => {
        assert!(expected.chars().count() > QUERY_MAX_CHARS, "short query rejected as too long")
      }
      other => panic!("unexpected error code {other}"),
    },
  }

  let k = identity_key(&raw);
  assert_eq!(identity_key(&k), k, "identity_key is not idempotent");

  // Tokenizer offsets and positions on arbitrary text (indexing side).
  let mut tok = WikiTokenizer::default();
  let mut stream = tok.token_stream(&raw);
  let mut prev_from = 0;
  while stream.advance() {
    let t = stream.token();
    assert!(t.offset_from < t.offset_to && t.offset_to <= raw.len(), "bad offsets {t:?}");
    assert!(raw.is_char_boundary(t.offset_from) && raw.is_char_boundary(t.offset_to));
    assert!(t.offset_from >= prev_from, "tokens out of order");
    assert_eq!(t.position, t.offset_from, "a position is the token's byte offset");
    assert!(!t.text.is_empty());
    prev_from = t.offset_from;
  }
}

fn check_terms(q: &str) {
  let terms = query_terms(q);
  assert_eq!(terms, query_terms(q), "query_terms is not deterministic");
  assert!(terms.len() <= MAX_ANALYZED_TOKENS);
  let analyzed = analyze(&mut wiki_analyzer(), q);
  assert!(
    analyzed.iter().all(|t| !t.is_empty() && !t.chars().any(char::is_whitespace)),
    "bad term in {analyzed:?}"
  );
  // query_terms = the analyzed terms in order, repeats kept (term frequency), capped.
  let mut prefix = analyzed;
  prefix.truncate(MAX_ANALYZED_TOKENS);
  assert_eq!(terms, prefix);
}
