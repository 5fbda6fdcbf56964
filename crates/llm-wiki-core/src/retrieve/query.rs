//! Query normalization (NFKC, trim, collapse whitespace; punctuation, paths and identifiers are
//! kept) and the small text checks the modes need.

use unicode_normalization::UnicodeNormalization;

use crate::error::{Error, Result};

/// A typed sub-query: `lex` feeds the lexical list, `vec` the dense list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubQuery {
  /// Text for the lexical list only.
  Lex(String),
  /// Text for the dense list only.
  Vec(String),
}

/// Longest accepted query (and sub-query), in characters of the normalized query. Longer
/// queries are rejected with `recall_query_too_long`, never truncated. The cap is checked twice:
/// first on the raw text, before anything is allocated for it ([`raw_chars`]: trimmed, each
/// whitespace run counted as one character — what whitespace collapsing leaves — against
/// [`RAW_CHARS_MAX`]), then on the normalized query (NFKC can expand a character up to 18
/// times, U+FDFA, or compose a decomposed sequence into one). A 50 MB paste is refused by the
/// first check without being normalized; a decomposed query that NFKC composes below the cap is
/// accepted.
pub const QUERY_MAX_CHARS: usize = 2_000;

/// Raw characters above which no query can normalize to [`QUERY_MAX_CHARS`] or fewer: NFKC
/// composes at most four code points into one (the longest canonical decomposition, e.g.
/// U+1F82), so 4× the cap. Normalizing what passes costs at most 18× of this (U+FDFA).
pub const RAW_CHARS_MAX: usize = 4 * QUERY_MAX_CHARS;

/// Most typed sub-queries one recall accepts (each costs a lexical search or an embedding).
pub const SUBQUERIES_MAX: usize = 10;

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

/// Characters of `raw` as whitespace collapsing counts them (trimmed, each whitespace run as
/// one), counted without allocating.
pub fn raw_chars(raw: &str) -> usize {
  let mut n = 0;
  let mut space = false;
  for c in raw.trim().chars() {
    if c.is_whitespace() {
      space = true;
    } else {
      n += 1 + space as usize;
      space = false;
    }
  }
  n
}

/// NFKC, trim, collapse whitespace runs to one space. The raw text's length is checked against
/// [`RAW_CHARS_MAX`] before it is normalized, the normalized query's against [`QUERY_MAX_CHARS`]
/// after.
pub fn normalize_query(raw: &str) -> Result<String> {
  // Text of at most the raw cap in bytes cannot be over it in characters: no scan needed.
  if raw.len() > RAW_CHARS_MAX {
    let chars = raw_chars(raw);
    if chars > RAW_CHARS_MAX {
      return Err(Error::QueryTooLong { chars, max: QUERY_MAX_CHARS });
    }
  }
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

/// Sub-queries normalized like the query itself. More than [`SUBQUERIES_MAX`] is an
/// `invalid_argument`; an empty or over-long text fails like the query does
/// (`recall_query_empty`, `recall_query_too_long`) with `position` set to its index.
pub fn normalize_subqueries(
  subqueries: &[SubQuery],
) -> std::result::Result<Vec<SubQuery>, (Option<usize>, Error)> {
  if subqueries.len() > SUBQUERIES_MAX {
    return Err((
      None,
      Error::invalid(format!("subqueries has {} entries; the maximum is {SUBQUERIES_MAX}", subqueries.len())),
    ));
  }
  subqueries
    .iter()
    .enumerate()
    .map(|(i, s)| {
      match s {
        SubQuery::Lex(t) => normalize_query(t).map(SubQuery::Lex),
        SubQuery::Vec(t) => normalize_query(t).map(SubQuery::Vec),
      }
      .map_err(|e| (Some(i), e))
    })
    .collect()
}

/// Canonical form for identity comparison: NFKC, lowercase, `-`/`_` as spaces, single spaces.
pub fn identity_key(s: &str) -> String {
  // Lexical recall takes the key of every candidate's id, title and aliases on each query; NFKC
  // leaves ASCII unchanged, so ASCII text (most names) skips the two normalization passes, which
  // were most of a lexical query's CPU (docs/DECISIONS.md, "Identity keys").
  if s.is_ascii() {
    return join_words(&s.to_ascii_lowercase());
  }
  // Lowercasing can leave a decomposable pair (`T\u{308}` has no precomposed capital; its lowercase
  // `t\u{308}` composes to `ẗ`), so normalize again after it: the key of a key is the key.
  let lower: String = s.nfkc().collect::<String>().to_lowercase().nfkc().collect();
  join_words(&lower)
}

/// The words of `s` (split at whitespace, `-` and `_`) joined by single spaces.
fn join_words(s: &str) -> String {
  let mut out = String::with_capacity(s.len());
  for word in s.split(|c: char| c.is_whitespace() || c == '-' || c == '_').filter(|w| !w.is_empty()) {
    if !out.is_empty() {
      out.push(' ');
    }
    out.push_str(word);
  }
  out
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

/// Words the user wrote as names: capitalized where no sentence begins ("when did Melanie go to
/// the museum?"), or with a capital after the first letter ("QMD", "iPhone", "PTEN"); the
/// punctuation around a word is not part of it. Case says nothing in a query without a
/// lowercase-initial word (all capitals, Title Case: "How To Fix The Build"): no names there. A
/// sentence begins at the start and after a word ending in `.`, `?`, `!`, `:` or `;`.
pub fn written_names(query: &str) -> Vec<&str> {
  let mut names = Vec::new();
  let mut cased = false;
  let mut sentence_start = true;
  for raw in query.split_whitespace() {
    let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
    let mut chars = word.chars();
    let Some(first) = chars.next() else { continue };
    cased |= first.is_lowercase();
    // The pronoun is capitalized everywhere ("so I've tried", "I'll"): it and its contractions
    // are not names.
    let pronoun = first == 'I' && chars.clone().next().is_none_or(|c| c == '\'' || c == '\u{2019}');
    if !pronoun && ((first.is_uppercase() && !sentence_start) || chars.any(char::is_uppercase)) {
      names.push(word);
    }
    sentence_start = raw.ends_with(['.', '?', '!', ':', ';']);
  }
  if cased {
    names
  } else {
    Vec::new()
  }
}

/// A written name in the case of a proper noun — a person, place, day, product ("Sarah",
/// "Monday", "Zürich", "Jean-Luc", "O'Brien"): each part capitalized, the rest lowercase letters.
/// Acronyms and identifiers ("IBP", "Bcl2", "aPKCz", "SHP-2") are names too, but technical text
/// spells them many ways (Bcl-2, PKCζ), which an exact term cannot follow.
pub fn is_proper_name(word: &str) -> bool {
  let word = ["'s", "\u{2019}s", "'", "\u{2019}"].iter().find_map(|p| word.strip_suffix(p)).unwrap_or(word);
  word.chars().any(char::is_lowercase)
    && word.split(['-', '\'', '\u{2019}']).all(|part| {
      let mut c = part.chars();
      c.next().is_some_and(char::is_uppercase) && c.all(char::is_lowercase)
    })
}

#[cfg(test)]
mod tests {
  use super::*;

  /// Found by the `query` fuzz target.
  #[test]
  fn identity_key_is_idempotent_when_lowercasing_makes_a_composable_pair() {
    let k = identity_key("T\u{308}ON");
    assert_eq!(k, "\u{1e97}on");
    assert_eq!(identity_key(&k), k);
  }

  /// Issue 43, item 8: the raw text is measured before NFKC (U+FDFA expands 18×), so an
  /// over-long paste is refused with its own length, not normalized first.
  #[test]
  fn raw_length_is_checked_before_normalizing() {
    let paste = "\u{fdfa}".repeat(200_000);
    match normalize_query(&paste) {
      Err(Error::QueryTooLong { chars, max }) => assert_eq!((chars, max), (200_000, QUERY_MAX_CHARS)),
      other => panic!("{other:?}"),
    }
    // Whitespace runs count once, surrounding whitespace not at all.
    assert_eq!(raw_chars("  a \n\t b  "), 3);
    let spaced = format!("  {}  ", ["word"; 400].join("     "));
    assert!(spaced.len() > QUERY_MAX_CHARS && normalize_query(&spaced).is_ok());
    // Decomposed text that NFKC composes under the cap is accepted (4,000 raw, 2,000 composed;
    // the longest canonical decomposition, 4 code points, at the raw cap).
    assert_eq!(normalize_query(&"e\u{301}".repeat(2000)).unwrap().chars().count(), 2000);
    assert_eq!(normalize_query(&"\u{3b1}\u{313}\u{300}\u{345}".repeat(2000)).unwrap().chars().count(), 2000);
    // Under the raw cap, over it once expanded: refused after normalizing.
    match normalize_query(&"\u{fdfa}".repeat(200)) {
      Err(Error::QueryTooLong { chars, .. }) => assert_eq!(chars, 200 * 18),
      other => panic!("{other:?}"),
    }
    // Each sub-query the same.
    let subs = [SubQuery::Lex("ok".into()), SubQuery::Vec(paste)];
    match normalize_subqueries(&subs) {
      Err((Some(1), Error::QueryTooLong { chars, .. })) => assert_eq!(chars, 200_000),
      other => panic!("{other:?}"),
    }
  }

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
  fn subqueries_follow_the_query_rules() {
    let ok = normalize_subqueries(&[SubQuery::Lex("  a \t b ".into()), SubQuery::Vec("ｃ".into())]).unwrap();
    assert_eq!(ok, vec![SubQuery::Lex("a b".into()), SubQuery::Vec("c".into())]);
    let long = [SubQuery::Lex("x".into()), SubQuery::Vec("a".repeat(2001))];
    let (at, e) = normalize_subqueries(&long).unwrap_err();
    assert_eq!((at, e.code()), (Some(1), "recall_query_too_long"));
    let (at, e) = normalize_subqueries(&[SubQuery::Lex(" ".into())]).unwrap_err();
    assert_eq!((at, e.code()), (Some(0), "recall_query_empty"));
    let many = vec![SubQuery::Lex("x".into()); SUBQUERIES_MAX + 1];
    let (at, e) = normalize_subqueries(&many).unwrap_err();
    assert_eq!((at, e.code()), (None, "invalid_argument"));
    assert_eq!(normalize_subqueries(&many[..SUBQUERIES_MAX]).unwrap().len(), SUBQUERIES_MAX);
  }

  #[test]
  fn identity() {
    assert_eq!(identity_key(" Wiki_Reindex  Tool "), "wiki reindex tool");
    assert_eq!(identity_key("QMD"), identity_key("qmd"));
    assert_eq!(identity_key("-_ \t\u{b}\u{c}\r\n"), "");
    // Full-width letters and hyphen fold to ASCII (NFKC) before the separators are read.
    assert_eq!(identity_key("Ｗiki－Tool"), "wiki tool");
  }

  /// The ASCII shortcut gives the key the full path (NFKC, Unicode lowercase, NFKC) gives.
  #[test]
  fn ascii_keys_match_the_unicode_path() {
    let full = |s: &str| {
      let lower: String = s.nfkc().collect::<String>().to_lowercase().nfkc().collect();
      lower.replace(['-', '_'], " ").split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let every_ascii: String = (0u8..128).map(char::from).collect();
    let mut samples = vec![every_ascii.clone(), every_ascii.chars().rev().collect()];
    // Every pair of ASCII characters, in a context: separators, case and controls side by side.
    for a in 0u8..128 {
      for b in 0u8..128 {
        samples.push(format!("x{}{}Y", char::from(a), char::from(b)));
      }
    }
    samples.extend(
      ["  Wiki_Reindex--Tool  ", "src/a.rs", "QMD v2.5_beta", "\u{b}tab\u{c}feed\u{1c}"].map(String::from),
    );
    for s in &samples {
      assert!(s.is_ascii());
      assert_eq!(identity_key(s), full(s), "{s:?}");
    }
  }

  #[test]
  fn names_are_read_from_the_case_the_user_wrote() {
    assert_eq!(written_names("When did Melanie go to the museum?"), vec!["Melanie"]);
    assert_eq!(written_names("why QMD alone is not enough for the iPhone app"), vec!["QMD", "iPhone"]);
    // A capital that begins a sentence is not a name; one after a comma is.
    assert_eq!(written_names("It works. Then Anna left, Bob stayed"), vec!["Anna", "Bob"]);
    assert_eq!(written_names("does (PTEN) convert it?"), vec!["PTEN"]);
    // The pronoun and its contractions are capitalized everywhere: no names.
    assert!(written_names("so I've tried, and I'll retry what I\u{2019}d done as I said").is_empty());
    assert_eq!(written_names("did Ian go"), vec!["Ian"]);
    // No lowercase-initial word: the case is a style, not names.
    assert!(written_names("How To Fix The Build").is_empty());
    assert!(written_names("WHY IS MY BUILD FAILING").is_empty());
    assert!(written_names("when did melanie go to the museum").is_empty());
    assert!(written_names("").is_empty());
    assert_eq!(written_names("Über den Zürich-Bericht"), vec!["Zürich-Bericht"]);
  }

  #[test]
  fn proper_names_are_capitalized_words() {
    for w in ["Sarah", "Monday", "Zürich", "Jean-Luc", "O'Brien", "Sarah\u{2019}s"] {
      assert!(is_proper_name(w), "{w}");
    }
    for w in ["IBP", "Bcl2", "aPKCz", "SHP-2", "AI", "I", "TatAd", "iPhone", "", "-", "A-"] {
      assert!(!is_proper_name(w), "{w}");
    }
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
