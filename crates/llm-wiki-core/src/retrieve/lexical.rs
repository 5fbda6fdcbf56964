//! Lexical candidates of one vault: BM25 (OR semantics, field boosts) over chunk documents,
//! aggregated to one candidate per page (its best chunk), with coverage-based confidence and
//! exact identity detection.

use std::collections::HashMap;

use tantivy::DocAddress;

use super::confidence::{
  automatic_lexical_confidence, bm25_strength, lexical_confidence, NAMED_PAGE_CONFIDENCE,
  NAMED_PAGE_MIN_UNITS,
};
use super::engine::Snapshot;
use super::query::{identity_key, is_proper_name, written_names};
use super::salience::{count_terms, SalientTerms};
use crate::analysis::{analyze, wiki_analyzer};
use crate::error::Result;
use crate::store::lexical::MATCH_FIELDS;
use crate::store::manifest::ManifestEntry;

/// Most analyzed query tokens kept (repeats included) before the salient terms are chosen; a
/// 2,000-character query stays far below it.
pub const MAX_ANALYZED_TOKENS: usize = 1_024;

/// Kind of exact identity match between the query and a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExactMatch {
  /// The query is the page title.
  Title,
  /// The query is one of the page's aliases.
  Alias,
  /// The query is the page id.
  Id,
  /// The query is the page's file name.
  Filename,
}

impl ExactMatch {
  /// The match reason shown with the result.
  pub fn reason(self) -> &'static str {
    match self {
      ExactMatch::Title => "exact_title",
      ExactMatch::Alias => "exact_alias",
      ExactMatch::Id => "exact_id",
      ExactMatch::Filename => "exact_filename",
    }
  }
}

/// Exact identity of the query with a page's id, title, alias or file name (case, `-`/`_` and
/// whitespace insensitive). `q` is the query's [`identity_key`], taken once per query.
pub fn exact_match(q: &str, page_id: &str, entry: &ManifestEntry) -> Option<ExactMatch> {
  if q.is_empty() {
    return None;
  }
  if identity_key(page_id) == q {
    return Some(ExactMatch::Id);
  }
  if identity_key(&entry.meta.title) == q {
    return Some(ExactMatch::Title);
  }
  if entry.meta.aliases.iter().any(|a| identity_key(a) == q) {
    return Some(ExactMatch::Alias);
  }
  let stem = page_id.rsplit('/').next().unwrap_or(page_id);
  (identity_key(stem) == q).then_some(ExactMatch::Filename)
}

/// Analyzed query: its terms in order, repeats kept (query-term frequency counts), capped at
/// [`MAX_ANALYZED_TOKENS`]. Which distinct terms are used is decided per vault by weight
/// ([`SalientTerms::select`]).
pub fn query_terms(query: &str) -> Vec<String> {
  let mut analyzer = wiki_analyzer();
  let mut out = analyze(&mut analyzer, query);
  out.truncate(MAX_ANALYZED_TOKENS);
  out
}

/// Analyzed terms of the words the user wrote as names ([`written_names`]), words only
/// (`is_word`), each once.
pub fn written_name_terms(query: &str) -> Vec<String> {
  name_terms(written_names(query))
}

/// [`written_name_terms`] of the proper names only ([`is_proper_name`]).
pub fn proper_name_terms(query: &str) -> Vec<String> {
  name_terms(written_names(query).into_iter().filter(|w| is_proper_name(w)).collect())
}

fn name_terms(names: Vec<&str>) -> Vec<String> {
  let mut out: Vec<String> = Vec::new();
  for t in names.into_iter().flat_map(query_terms) {
    if is_word(&t) && !out.contains(&t) {
      out.push(t);
    }
  }
  out
}

/// The query names the page: its title or an alias occurs in the (longer) query as a whole
/// phrase (identity-key comparison on word boundaries), and the name carries at least
/// [`NAMED_PAGE_MIN_UNITS`] of salient weight (a name made of common vault words does not count).
pub fn names_page(query_key: &str, entry: &ManifestEntry, salient: &SalientTerms) -> bool {
  let padded = format!(" {query_key} ");
  std::iter::once(&entry.meta.title).chain(entry.meta.aliases.iter()).any(|name| {
    let key = identity_key(name);
    // CJK text has no spaces between words: a CJK name matches as a substring.
    let cjk = key.chars().any(|c| !c.is_ascii() && c.is_alphabetic() && c > '\u{2E80}');
    let contained = if cjk { query_key.contains(&key) } else { padded.contains(&format!(" {key} ")) };
    key.chars().count() >= 3
      && key != query_key
      && contained
      && salient.units_of(&query_terms(name)) >= NAMED_PAGE_MIN_UNITS
  })
}

/// Share of the salient weight at which a page covers the whole query (coverage is a sum of
/// weights, compared with a tolerance for rounding).
const FULL_COVERAGE: f64 = 1.0 - 1e-9;

/// The page covers the whole query (`coverage`, capped salient weight) and one of the terms it
/// matched is a name the user wrote ([`written_names`]). Such a match is specific whatever the
/// vault's statistics: a question about a person of a conversation ("When did Melanie go to the
/// museum?") is made of words common in a chat vault — the speakers' names, everyday verbs — and
/// the automatic specificity factor alone would scale it below the floor, while a generic prompt
/// covered by chance has no name in it (the written short generic prompts have none) and a
/// prompt naming something the page does not cover fully keeps the factor.
fn covers_a_written_name(coverage: f64, matched: &[bool], is_name: &[bool]) -> bool {
  coverage >= FULL_COVERAGE && matched.iter().zip(is_name).any(|(m, n)| *m && *n)
}

/// A term that can carry meaning alone: at least two characters, not only digits.
fn is_word(t: &str) -> bool {
  t.chars().count() >= 2 && !t.chars().all(|c| c.is_ascii_digit())
}

/// One page found by the lexical engine.
#[derive(Debug, Clone)]
pub struct LexicalCandidate {
  /// The page.
  pub page_id: String,
  /// 0-based rank in the vault's lexical list.
  pub rank: usize,
  /// BM25 score of the best chunk.
  pub bm25: f32,
  /// Best-scoring section document of the page.
  pub best_section: DocAddress,
  /// Share of the query's salient weight the page matches (see [`SalientTerms::coverage`]).
  pub coverage: f64,
  /// Absolute confidence (see `confidence`).
  pub confidence: f64,
  /// Confidence where the automatic floor decides: `confidence` scaled by the match's specificity
  /// ([`super::confidence::automatic_lexical_confidence`]).
  pub automatic_confidence: f64,
  /// Exact title / alias / id / file-name match, if any.
  pub exact: Option<ExactMatch>,
  /// The longer query names the page (title or alias phrase inside it).
  pub named: bool,
  /// Names of fields in which some query term matched.
  pub matched_fields: Vec<&'static str>,
  /// Salient query terms found in the page.
  pub matched_terms: usize,
  /// Salient query terms (distinct, at most 64).
  pub total_terms: usize,
  /// Salient weight the page matched, in units ([`SalientTerms::matched_units`]); `None` on a
  /// vault too small to measure it.
  pub matched_units: Option<f64>,
  /// How much the query says in the same units ([`SalientTerms::query_units`]: every distinct
  /// term, absent ones included, each word at most one unit); `None` where matched units are.
  pub query_units: Option<f64>,
  /// The automatic specificity factor does not apply (exact, named, one-word query, or a full
  /// match of a written name).
  pub specificity_exempt: bool,
}

/// Lexical candidates (at most `limit` pages) of a snapshot.
/// `expansion` adds weighted feedback terms (quality mode) to the ranking query; confidence is
/// always computed on the query's own `terms`.
pub fn lexical_candidates(
  snap: &Snapshot,
  query: &str,
  terms: &[String],
  expansion: &[(String, f32)],
  limit: usize,
) -> Result<Vec<LexicalCandidate>> {
  let lex = &snap.reader.lexical;
  let searcher = &snap.searcher;
  let n = lex.kind_count(searcher, "section")?;
  let counted = count_terms(terms);
  let df: Vec<u64> = counted.iter().map(|(t, _)| lex.doc_freq(searcher, t)).collect::<Result<_>>()?;
  let salient = SalientTerms::select(&counted, &df, n);
  // A one-word query is exempt from the automatic specificity factor.
  let one_word = counted.len() == 1;
  let terms = &salient.terms;
  let mut ranking = salient.ranking();
  ranking.extend(expansion.iter().filter(|(t, _)| !terms.contains(t)).cloned());
  // Several sections of one page can outrank other pages: fetch more sections than pages.
  let mut hits = lex.search_weighted(searcher, &ranking, (limit * 3).max(30))?;
  // Equal scores are ordered by page id: document order inside tantivy depends on how indexing
  // threads split the work, and rankings must not change between identical builds.
  let id_of = |k: u64| snap.keys.get(&k).map(String::as_str).unwrap_or("");
  hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| id_of(a.page_key).cmp(id_of(b.page_key))));

  // Group section hits by page, in rank order.
  let mut pages: Vec<(u64, f32, DocAddress, Vec<usize>)> = Vec::new();
  let mut index: HashMap<u64, usize> = HashMap::new();
  for (i, h) in hits.iter().enumerate() {
    match index.get(&h.page_key) {
      Some(&p) => pages[p].3.push(i),
      None if pages.len() < limit => {
        index.insert(h.page_key, pages.len());
        pages.push((h.page_key, h.score, h.address, vec![i]));
      }
      None => {}
    }
  }
  let addrs: Vec<DocAddress> = hits.iter().map(|h| h.address).collect();
  let masks = lex.term_fields(searcher, &addrs, terms)?;
  let query_key = identity_key(query);
  // Kept terms the user wrote as a name (see `covers_a_written_name`).
  let name_terms = written_name_terms(query);
  let is_name: Vec<bool> = terms.iter().map(|t| name_terms.contains(t)).collect();
  // How much the query says: one figure for every candidate (the factor and the record).
  let query_units = salient.query_units();
  let mut out = Vec::with_capacity(pages.len());
  for (key, bm25, best, members) in pages {
    let Some(page_id) = snap.keys.get(&key) else {
      continue;
    };
    let Some(entry) = snap.manifest.entries.get(page_id) else {
      continue;
    };
    // Coverage over everything the page matched (all its matching sections).
    let mut mask = vec![0u8; terms.len()];
    for &i in &members {
      for (m, x) in mask.iter_mut().zip(&masks[i]) {
        *m |= x;
      }
    }
    let matched: Vec<bool> = mask.iter().map(|m| *m != 0).collect();
    // Numbers and one-character tokens alone do not make a page about the query ("3-phosphatase
    // … 4-phosphate" shares only digits with a "2.5.3 release" note): without a matched word,
    // coverage is 0.
    let word_matched = matched.iter().zip(terms).any(|(m, t)| *m && is_word(t));
    let cov = if word_matched { salient.coverage(&matched) } else { 0.0 };
    let exact = exact_match(&query_key, page_id, entry);
    let named = exact.is_none() && names_page(&query_key, entry, &salient);
    let all = mask.iter().fold(0u8, |a, m| a | m);
    let matched_fields =
      MATCH_FIELDS.iter().enumerate().filter(|(i, _)| all & (1 << i) != 0).map(|(_, n)| *n).collect();
    let confidence = {
      let c =
        lexical_confidence(cov, bm25_strength(bm25 as f64, salient.reference_weight()), exact.is_some());
      if named {
        c.max(NAMED_PAGE_CONFIDENCE)
      } else {
        c
      }
    };
    let units = if word_matched { salient.matched_units(&matched) } else { Some(0.0) };
    let name_covered = covers_a_written_name(cov, &matched, &is_name);
    let specificity_exempt = exact.is_some() || named || one_word || name_covered;
    out.push(LexicalCandidate {
      rank: out.len(),
      page_id: page_id.clone(),
      bm25,
      best_section: best,
      coverage: cov,
      confidence,
      automatic_confidence: automatic_lexical_confidence(
        confidence,
        units,
        query_units.unwrap_or(0.0),
        specificity_exempt,
      ),
      exact,
      named,
      matched_fields,
      matched_terms: matched.iter().filter(|m| **m).count(),
      total_terms: terms.len(),
      matched_units: units,
      query_units,
      specificity_exempt,
    });
  }
  Ok(out)
}
