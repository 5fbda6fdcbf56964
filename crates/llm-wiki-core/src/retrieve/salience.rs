//! Salient query terms: which analyzed terms of a (possibly long, conversational) query carry
//! its meaning, and how much each weighs.
//!
//! A term weighs `qtf × idf` — how often the user wrote it times how rare it is in the vault —
//! the query side of BM25. A long prompt keeps its heaviest [`MAX_QUERY_TERMS`] terms (not its
//! first ones), the ranking query repeats each kept term `qtf` times (its clause is boosted by
//! `qtf`, as plain BM25 scores a repeated query word), and lexical confidence measures coverage
//! of the query's *salient* weight: the matched weight against the total weight capped at
//! [`SALIENT_WEIGHT_CAP`] "rare-term units", so the filler words of a 25-word prompt cannot dilute
//! a page that matches everything the prompt is about, while a short query still has to be
//! covered completely.

use std::collections::HashMap;

use super::confidence::idf;

/// Most distinct query terms used for ranking and confidence (the heaviest ones).
pub const MAX_QUERY_TERMS: usize = 64;

/// Salient weight (in units of a term absent from the vault, i.e. the largest possible idf)
/// beyond which a query's weight stops growing for coverage and strength: a page matching this
/// much of the query's weight is fully covered. A 2–3-word query stays below it (every word must
/// match); a conversational prompt of 15–30 words reaches it with its first few rare words.
/// Chosen on the pi **train** queries, the written dev prompts (bench-data/prompts-pi.json) and the
/// cross-collection negatives of SciFact train/dev; never on the pi held-out split.
pub const SALIENT_WEIGHT_CAP: f64 = 2.5;

/// Sections a word of one topic is found in, at least: a page's lead and one of its sections, or
/// two pages on the subject. A word in that many sections weighs one unit of
/// [`SalientTerms::matched_units`]. Not one section: on a vault of a few pages a word in one
/// section against two is the whole range of idf, so a unit of "unique to a section" would make
/// a word shared by the two pages of a topic weigh little (a prompt about the vault's topic could
/// never be specific); on large vaults the two units differ by about 6 %.
pub const TOPIC_SECTIONS: u64 = 2;

/// Below this idf of the unit (a vault of two sections or fewer) the specificity of a
/// lexical match is not measured ([`SalientTerms::matched_units`] is `None`).
const MIN_TOPIC_IDF: f64 = 0.25;

/// Distinct terms of an analyzed query in first-seen order, each with its frequency in the query.
pub fn count_terms(analyzed: &[String]) -> Vec<(String, u32)> {
  let mut order: Vec<(String, u32)> = Vec::new();
  let mut index: HashMap<&str, usize> = HashMap::new();
  for t in analyzed {
    match index.get(t.as_str()) {
      Some(&i) => order[i].1 += 1,
      None => {
        index.insert(t.as_str(), order.len());
        order.push((t.clone(), 1));
      }
    }
  }
  order
}

/// The weighted query terms of one vault.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SalientTerms {
  /// Kept distinct terms, in query order.
  pub terms: Vec<String>,
  /// Frequency of each kept term in the query.
  pub qtf: Vec<u32>,
  /// `qtf × idf` of each kept term.
  pub weights: Vec<f64>,
  /// The idf of a term absent from the vault (the unit of [`SALIENT_WEIGHT_CAP`]).
  pub unit: f64,
  /// The idf of a term found in [`TOPIC_SECTIONS`] sections (the unit of
  /// [`SalientTerms::matched_units`]).
  pub topic: f64,
  /// `Σ qtf × idf` of every distinct query term, kept or not (absent ones weigh the most).
  pub total: f64,
  /// `Σ qtf × min(idf, topic)` of every distinct query term: the query's weight with each word
  /// counting at most one unit of [`SalientTerms::matched_units`] ([`SalientTerms::query_units`]).
  pub total_in_units: f64,
}

impl SalientTerms {
  /// Weigh the `counted` terms with their document frequencies (`df[i]` for `counted[i]`) among
  /// `n` sections and keep the heaviest [`MAX_QUERY_TERMS`] of those the vault contains (ties:
  /// earlier in the query), in query order. Terms absent from the vault cannot match anything:
  /// they take no slot, but their weight counts in [`SalientTerms::total`] (they make a short
  /// query that shares one word with a page stay low).
  pub fn select(counted: &[(String, u32)], df: &[u64], n: u64) -> Self {
    let full: Vec<f64> = counted.iter().zip(df).map(|((_, q), d)| *q as f64 * idf(*d, n)).collect();
    let topic = idf(TOPIC_SECTIONS, n);
    let total_in_units = counted.iter().zip(df).map(|((_, q), d)| *q as f64 * idf(*d, n).min(topic)).sum();
    let mut order: Vec<usize> = (0..counted.len()).filter(|i| df[*i] > 0).collect();
    order.sort_by(|a, b| full[*b].total_cmp(&full[*a]).then(a.cmp(b)));
    order.truncate(MAX_QUERY_TERMS);
    order.sort_unstable();
    SalientTerms {
      terms: order.iter().map(|i| counted[*i].0.clone()).collect(),
      qtf: order.iter().map(|i| counted[*i].1).collect(),
      weights: order.iter().map(|i| full[*i]).collect(),
      unit: idf(0, n),
      topic,
      total: full.iter().sum(),
      total_in_units,
    }
  }

  /// The weight coverage and strength are measured against: the total, capped at
  /// [`SALIENT_WEIGHT_CAP`] units.
  pub fn reference_weight(&self) -> f64 {
    self.total.min(SALIENT_WEIGHT_CAP * self.unit)
  }

  /// Share of the reference weight the `matched` terms carry, in [0, 1].
  pub fn coverage(&self, matched: &[bool]) -> f64 {
    let reference = self.reference_weight();
    if reference <= 0.0 {
      return 0.0;
    }
    let m: f64 = self.weights.iter().zip(matched).filter(|(_, m)| **m).map(|(w, _)| w).sum();
    (m / reference).clamp(0.0, 1.0)
  }

  /// Weight of the `matched` kept terms (`qtf × idf` each) in units of a term found in
  /// [`TOPIC_SECTIONS`] sections ([`SalientTerms::topic`]), whatever the vault's size (see
  /// [`super::confidence::specificity`]). `None` when the vault is too small for that unit to
  /// weigh anything (a word in every one of its two sections has idf ≈ 0): there, how rare a word
  /// is in the vault says nothing about whether the prompt is specific.
  pub fn matched_units(&self, matched: &[bool]) -> Option<f64> {
    if self.topic < MIN_TOPIC_IDF {
      return None;
    }
    Some(self.weights.iter().zip(matched).filter(|(_, m)| **m).map(|(w, _)| w).sum::<f64>() / self.topic)
  }

  /// How much the query says, in the units of [`SalientTerms::matched_units`]: every distinct term,
  /// absent ones included, each written word counting at most one unit (a word the vault lacks
  /// weighs its idf, which on a small vault is several topic units: a long prompt's filler words
  /// would otherwise outweigh everything a page can match). `None` where matched units are.
  pub fn query_units(&self) -> Option<f64> {
    (self.topic >= MIN_TOPIC_IDF).then(|| self.total_in_units / self.topic)
  }

  /// Weight of a set of terms (each counted once, with its query weight; absent terms weigh 0),
  /// in units.
  pub fn units_of(&self, terms: &[String]) -> f64 {
    if self.unit <= 0.0 {
      return 0.0;
    }
    let mut seen = std::collections::HashSet::new();
    terms
      .iter()
      .filter(|t| seen.insert(t.as_str()))
      .filter_map(|t| self.terms.iter().position(|x| x == t))
      .map(|i| self.weights[i] / self.qtf[i] as f64 / self.unit)
      .sum()
  }

  /// The ranking query: each kept term boosted by its query frequency.
  pub fn ranking(&self) -> Vec<(String, f32)> {
    self.terms.iter().zip(&self.qtf).map(|(t, q)| (t.clone(), *q as f32)).collect()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
  }

  #[test]
  fn counts_keep_first_seen_order() {
    assert_eq!(
      count_terms(&s(&["b", "a", "b", "c", "b"])),
      vec![("b".into(), 3), ("a".into(), 1), ("c".into(), 1)]
    );
  }

  #[test]
  fn keeps_the_heaviest_terms_not_the_first() {
    // 70 common terms, then one rare term: the rare one survives the cap.
    let mut counted: Vec<(String, u32)> = (0..70).map(|i| (format!("w{i}"), 1)).collect();
    counted.push(("rare".into(), 1));
    let mut df = vec![500u64; 70];
    df.push(1);
    let st = SalientTerms::select(&counted, &df, 1000);
    assert_eq!(st.terms.len(), MAX_QUERY_TERMS);
    assert!(st.terms.contains(&"rare".to_string()));
    assert_eq!(st.terms.last().unwrap(), "rare", "query order is kept");
    assert!(!st.terms.contains(&"w69".to_string()), "the latest equally common term is dropped");
    assert!(st.total > st.weights.iter().sum::<f64>(), "dropped terms still weigh in the total");
  }

  #[test]
  fn frequency_weighs_and_coverage_is_capped() {
    let counted = vec![("a".to_string(), 2), ("b".to_string(), 1)];
    let st = SalientTerms::select(&counted, &[10, 10], 1000);
    assert!((st.weights[0] - 2.0 * st.weights[1]).abs() < 1e-12);
    assert_eq!(st.ranking(), vec![("a".to_string(), 2.0), ("b".to_string(), 1.0)]);
    // Short query: below the cap, coverage is the plain weighted share.
    assert!((st.coverage(&[true, false]) - 2.0 / 3.0).abs() < 1e-12);
    // Long prompt of many rare terms (one section each): matching 2.5 units of them is enough.
    let counted: Vec<(String, u32)> = (0..20).map(|i| (format!("t{i}"), 1)).collect();
    let st = SalientTerms::select(&counted, &[1; 20], 1000);
    let u = idf(1, 1000) / idf(0, 1000);
    let mut m = vec![false; 20];
    m[0] = true;
    m[1] = true;
    assert!((st.coverage(&m) - 2.0 * u / SALIENT_WEIGHT_CAP).abs() < 1e-9);
    m[2] = true;
    m[3] = true;
    assert_eq!(st.coverage(&m), 1.0);
    assert!((st.units_of(&s(&["t0", "t1", "zz", "t0"])) - 2.0 * u).abs() < 1e-9);
    assert_eq!(SalientTerms::default().coverage(&[]), 0.0);
    // Four words found in one section each: each weighs a bit more than a topic word.
    let per_word = idf(1, 1000) / idf(TOPIC_SECTIONS, 1000);
    assert!(per_word > 1.0 && per_word < 1.2);
    assert!((st.matched_units(&m).unwrap() - 4.0 * per_word).abs() < 1e-9);
    assert_eq!(SalientTerms::default().matched_units(&[]), None);
    assert_eq!(SalientTerms::default().query_units(), None);
    // Every word counts at most one unit in the query's weight: twenty words found in one section
    // each of 1,000 weigh 20 units (matched, each weighs a bit more than a unit).
    assert!((st.query_units().unwrap() - 20.0).abs() < 1e-9, "{:?}", st.query_units());
    assert!(st.matched_units(&[true; 20]).unwrap() > 20.0);
    // On a small vault a word it does not contain weighs far more than a topic word (its idf
    // against the unit's): still one unit of the query's weight, so a long prompt's filler words
    // absent from a 6-section vault do not make its page's match look small.
    let counted: Vec<(String, u32)> =
      ["zephyrcache", "expire", "standup", "staging"].iter().map(|t| (t.to_string(), 1)).collect();
    let small = SalientTerms::select(&counted, &[2, 2, 0, 0], 6);
    assert!(small.unit / small.topic > 2.0);
    assert!((small.query_units().unwrap() - 4.0).abs() < 1e-9, "{:?}", small.query_units());
    // A repeated word counts once per time it is written.
    let twice = SalientTerms::select(&[("zephyrcache".to_string(), 2)], &[0], 6);
    assert!((twice.query_units().unwrap() - 2.0).abs() < 1e-9);
    // Two sections: a word in both weighs nothing, so specificity is not measured; from three
    // sections on it is.
    let two = SalientTerms::select(&s(&["a"]).into_iter().map(|t| (t, 1)).collect::<Vec<_>>(), &[1], 2);
    assert_eq!(two.matched_units(&[true]), None);
    let three = SalientTerms::select(&[("a".to_string(), 1)], &[1], 3);
    assert!(three.matched_units(&[true]).unwrap() > 1.0);
    // Absent terms take no slot but weigh in the total: one shared word of four stays low.
    let counted: Vec<(String, u32)> =
      ["hotel", "trial", "balance", "audit"].iter().map(|t| (t.to_string(), 1)).collect();
    let st = SalientTerms::select(&counted, &[0, 0, 0, 3], 1000);
    assert_eq!(st.terms, vec!["audit".to_string()]);
    assert!(st.coverage(&[true]) < 0.35, "{}", st.coverage(&[true]));
  }
}
