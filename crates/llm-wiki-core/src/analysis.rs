//! Text analysis shared by indexing and querying: Unicode word runs are lowercased, ASCII-folded,
//! stripped of English stop words and Snowball-stemmed; CJK runs become overlapping bigrams
//! (a lone CJK character stays a unigram), so Chinese queries match Chinese aliases and text
//! without a dictionary segmenter.

use tantivy::tokenizer::{
  AsciiFoldingFilter, Language, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token, TokenStream,
  Tokenizer,
};

/// Name under which the analyzer is registered in every tantivy index.
pub const WIKI_ANALYZER: &str = "wiki";

/// English stop words removed at index and query time. Broader than Lucene's 33 words: question
/// words and auxiliaries ("what", "how", "does", "should") carry no topic, and leaving them in
/// would make coverage-based confidence punish every question for words no note contains.
pub const STOP_WORDS: &[&str] = &[
  "a",
  "about",
  "above",
  "after",
  "again",
  "against",
  "all",
  "am",
  "an",
  "and",
  "any",
  "are",
  "as",
  "at",
  "be",
  "because",
  "been",
  "before",
  "being",
  "below",
  "between",
  "both",
  "but",
  "by",
  "can",
  "could",
  "did",
  "do",
  "does",
  "doing",
  "down",
  "during",
  "each",
  "few",
  "for",
  "from",
  "further",
  "had",
  "has",
  "have",
  "having",
  "he",
  "her",
  "here",
  "hers",
  "herself",
  "him",
  "himself",
  "his",
  "how",
  "i",
  "if",
  "in",
  "into",
  "is",
  "it",
  "its",
  "itself",
  "just",
  "me",
  "might",
  "more",
  "most",
  "must",
  "my",
  "myself",
  "no",
  "nor",
  "not",
  "now",
  "of",
  "off",
  "on",
  "once",
  "only",
  "or",
  "other",
  "ought",
  "our",
  "ours",
  "ourselves",
  "out",
  "over",
  "own",
  "same",
  "shall",
  "she",
  "should",
  "so",
  "some",
  "such",
  "than",
  "that",
  "the",
  "their",
  "theirs",
  "them",
  "themselves",
  "then",
  "there",
  "these",
  "they",
  "this",
  "those",
  "through",
  "to",
  "too",
  "under",
  "until",
  "up",
  "very",
  "was",
  "we",
  "were",
  "what",
  "when",
  "where",
  "which",
  "while",
  "who",
  "whom",
  "why",
  "will",
  "with",
  "would",
  "you",
  "your",
  "yours",
  "yourself",
  "yourselves",
];

fn is_cjk(c: char) -> bool {
  matches!(c as u32,
    0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xAC00..=0xD7AF | 0x20000..=0x2FA1F)
}

/// Splits text into lowercased alphanumeric runs and CJK bigrams.
#[derive(Clone, Default)]
pub struct WikiTokenizer {
  tokens: Vec<Token>,
}

/// Stream over pre-split tokens.
pub struct WikiTokenStream<'a> {
  tokens: &'a mut [Token],
  index: usize,
}

impl TokenStream for WikiTokenStream<'_> {
  fn advance(&mut self) -> bool {
    if self.index < self.tokens.len() {
      self.index += 1;
      true
    } else {
      false
    }
  }
  fn token(&self) -> &Token {
    &self.tokens[self.index - 1]
  }
  fn token_mut(&mut self) -> &mut Token {
    &mut self.tokens[self.index - 1]
  }
}

impl WikiTokenizer {
  fn push(&mut self, from: usize, to: usize, text: String) {
    let position = self.tokens.len();
    self.tokens.push(Token { offset_from: from, offset_to: to, position, text, position_length: 1 });
  }

  fn split(&mut self, text: &str) {
    self.tokens.clear();
    let mut word_start: Option<usize> = None;
    let mut cjk: Vec<(usize, char)> = Vec::new();
    let flush_word = |this: &mut Self, start: &mut Option<usize>, end: usize| {
      if let Some(s) = start.take() {
        this.push(s, end, text[s..end].to_lowercase());
      }
    };
    let flush_cjk = |this: &mut Self, run: &mut Vec<(usize, char)>| {
      if run.len() == 1 {
        let (o, c) = run[0];
        this.push(o, o + c.len_utf8(), c.to_string());
      } else {
        for w in run.windows(2) {
          let (o1, c1) = w[0];
          let (o2, c2) = w[1];
          this.push(o1, o2 + c2.len_utf8(), format!("{c1}{c2}"));
        }
      }
      run.clear();
    };
    for (i, c) in text.char_indices() {
      if is_cjk(c) {
        flush_word(self, &mut word_start, i);
        cjk.push((i, c));
      } else if c.is_alphanumeric() {
        if !cjk.is_empty() {
          flush_cjk(self, &mut cjk);
        }
        word_start.get_or_insert(i);
      } else {
        flush_word(self, &mut word_start, i);
        if !cjk.is_empty() {
          flush_cjk(self, &mut cjk);
        }
      }
    }
    flush_word(self, &mut word_start, text.len());
    if !cjk.is_empty() {
      flush_cjk(self, &mut cjk);
    }
  }
}

impl Tokenizer for WikiTokenizer {
  type TokenStream<'a> = WikiTokenStream<'a>;
  fn token_stream<'a>(&'a mut self, text: &'a str) -> WikiTokenStream<'a> {
    self.split(text);
    WikiTokenStream { tokens: &mut self.tokens, index: 0 }
  }
}

/// The full analyzer: split → drop over-long tokens → ASCII folding → stop words → stemming.
pub fn wiki_analyzer() -> TextAnalyzer {
  TextAnalyzer::builder(WikiTokenizer::default())
    .filter(RemoveLongFilter::limit(48))
    .filter(AsciiFoldingFilter)
    .filter(StopWordFilter::remove(STOP_WORDS.iter().map(|w| w.to_string())))
    .filter(Stemmer::new(Language::English))
    .build()
}

/// Analyze text into terms (in order, duplicates kept).
pub fn analyze(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
  let mut out = Vec::new();
  let mut stream = analyzer.token_stream(text);
  while stream.advance() {
    out.push(stream.token().text.clone());
  }
  out
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn english_stems_and_stops() {
    let mut a = wiki_analyzer();
    assert_eq!(analyze(&mut a, "What is the Rebuilding of Indexes?"), vec!["rebuild", "index"]);
    assert_eq!(analyze(&mut a, "wiki_reindex café-2.5.3"), vec!["wiki", "reindex", "cafe", "2", "5", "3"]);
  }

  #[test]
  fn cjk_bigrams() {
    let mut a = wiki_analyzer();
    assert_eq!(analyze(&mut a, "卡片盒"), vec!["卡片", "片盒"]);
    assert_eq!(analyze(&mut a, "zettelkasten是搜索"), vec!["zettelkasten", "是搜", "搜索"]);
    assert_eq!(analyze(&mut a, "A 法 b"), vec!["法", "b"]);
  }
}
