//! Text analysis shared by indexing and querying: Unicode word runs are lowercased, ASCII-folded,
//! stripped of English stop words and Snowball-stemmed; CJK runs become overlapping bigrams
//! (a lone CJK character stays a unigram), so Chinese queries match Chinese aliases and text
//! without a dictionary segmenter.

use tantivy::tokenizer::{
  AsciiFoldingFilter, Language, RawTokenizer, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
  TokenStream, Tokenizer,
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

/// Longest raw token (bytes) whose term is cached; longer ones are analysed every time (the
/// filter chain drops tokens of 48 bytes and more anyway).
const MAX_CACHED_TOKEN: usize = 64;
/// Most raw tokens cached per thread (about 5 MB at the worst key sizes); past it, new tokens
/// are analysed without being cached, so a vault of random identifiers cannot grow the cache
/// without bound. Not fitted: a vault's working vocabulary (with case variants) is far smaller.
const TERM_CACHE_CAPACITY: usize = 1 << 16;

/// Token buffers a [`WikiTokenizer`] keeps between texts (indexed texts are at most a section
/// of about a thousand tokens; a longer text's extra buffers are freed).
const KEPT_TOKEN_BUFFERS: usize = 4096;

/// The per-token filter chain of the analyzer, applied to one token: drop over-long tokens →
/// ASCII folding → stop words → English stemming. Each filter maps or drops one token on its own
/// (no filter looks at a neighbour), so a token's term depends on its text alone.
fn token_filters() -> TextAnalyzer {
  TextAnalyzer::builder(RawTokenizer::default())
    .filter(RemoveLongFilter::limit(48))
    .filter(AsciiFoldingFilter)
    .filter(StopWordFilter::remove(STOP_WORDS.iter().map(|w| w.to_string())))
    .filter(Stemmer::new(Language::English))
    .build()
}

/// Raw token → its term (`None`: dropped), one per thread. Indexing analyses every section's
/// text and again every chunk's (the same words), and a vault repeats its words: the filter
/// chain (stemming above all) runs once per distinct raw token and thread instead of once per
/// occurrence. Exact: a miss runs the same filters.
struct TermCache {
  terms: crate::fnv::FnvMap<Box<str>, Option<Box<str>>>,
  filters: TextAnalyzer,
  lowered: String,
}

impl TermCache {
  /// The term of `raw` written into `out` (false when the filters drop it). A word run is
  /// lowercased first; a CJK unigram or bigram goes to the filters as it is.
  fn term(&mut self, raw: &str, word: bool, out: &mut String) -> bool {
    let cacheable = raw.len() <= MAX_CACHED_TOKEN;
    if cacheable {
      if let Some(t) = self.terms.get(raw) {
        out.clear();
        return t.as_deref().is_some_and(|t| {
          out.push_str(t);
          true
        });
      }
    }
    self.lowered.clear();
    if word {
      self.lowered.push_str(&raw.to_lowercase());
    } else {
      self.lowered.push_str(raw);
    }
    let mut stream = self.filters.token_stream(&self.lowered);
    let kept = stream.advance();
    out.clear();
    if kept {
      out.push_str(&stream.token().text);
    }
    drop(stream);
    if cacheable && self.terms.len() < TERM_CACHE_CAPACITY {
      self.terms.insert(raw.into(), kept.then(|| out.as_str().into()));
    }
    kept
  }
}

thread_local! {
  static TERMS: std::cell::RefCell<TermCache> = std::cell::RefCell::new(TermCache {
    terms: Default::default(),
    filters: token_filters(),
    lowered: String::new(),
  });
}

/// The analyzer: splits text into lowercased alphanumeric runs and CJK bigrams and maps each
/// through [`token_filters`] (by way of the thread's term cache). A token's position is its byte
/// offset in the text: the lexical index records positions in the scoring field only to place a
/// term's occurrences in the chunks of a section (byte ranges of its text), and nothing searches
/// phrases.
#[derive(Clone, Default)]
pub struct WikiTokenizer {
  /// Token buffers, reused across texts (`len` of them are this text's).
  tokens: Vec<Token>,
  len: usize,
  /// A CJK unigram or bigram being looked up.
  gram: String,
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
  /// Look up the term of one split token and append it (unless the filters drop it).
  fn push(&mut self, cache: &mut TermCache, from: usize, to: usize, raw: &str, word: bool) {
    if self.len == self.tokens.len() {
      self.tokens.push(Token::default());
    }
    let token = &mut self.tokens[self.len];
    if cache.term(raw, word, &mut token.text) {
      token.offset_from = from;
      token.offset_to = to;
      token.position = from;
      token.position_length = 1;
      self.len += 1;
    }
  }

  fn push_gram(&mut self, cache: &mut TermCache, from: usize, to: usize, chars: &[char]) {
    let mut gram = std::mem::take(&mut self.gram);
    gram.clear();
    gram.extend(chars);
    self.push(cache, from, to, &gram, false);
    self.gram = gram;
  }

  fn split(&mut self, text: &str, cache: &mut TermCache) {
    // The buffers a huge text left are not kept for the next one.
    self.tokens.truncate(KEPT_TOKEN_BUFFERS);
    self.len = 0;
    let mut word_start: Option<usize> = None;
    let mut cjk: Vec<(usize, char)> = Vec::new();
    let flush_word = |this: &mut Self, cache: &mut TermCache, start: &mut Option<usize>, end: usize| {
      if let Some(s) = start.take() {
        this.push(cache, s, end, &text[s..end], true);
      }
    };
    let flush_cjk = |this: &mut Self, cache: &mut TermCache, run: &mut Vec<(usize, char)>| {
      if run.len() == 1 {
        let (o, c) = run[0];
        this.push_gram(cache, o, o + c.len_utf8(), &[c]);
      } else {
        for w in run.windows(2) {
          let (o1, c1) = w[0];
          let (o2, c2) = w[1];
          this.push_gram(cache, o1, o2 + c2.len_utf8(), &[c1, c2]);
        }
      }
      run.clear();
    };
    for (i, c) in text.char_indices() {
      if is_cjk(c) {
        flush_word(self, cache, &mut word_start, i);
        cjk.push((i, c));
      } else if c.is_alphanumeric() {
        if !cjk.is_empty() {
          flush_cjk(self, cache, &mut cjk);
        }
        word_start.get_or_insert(i);
      } else {
        flush_word(self, cache, &mut word_start, i);
        if !cjk.is_empty() {
          flush_cjk(self, cache, &mut cjk);
        }
      }
    }
    flush_word(self, cache, &mut word_start, text.len());
    if !cjk.is_empty() {
      flush_cjk(self, cache, &mut cjk);
    }
  }
}

impl Tokenizer for WikiTokenizer {
  type TokenStream<'a> = WikiTokenStream<'a>;
  fn token_stream<'a>(&'a mut self, text: &'a str) -> WikiTokenStream<'a> {
    TERMS.with(|cache| self.split(text, &mut cache.borrow_mut()));
    WikiTokenStream { tokens: &mut self.tokens[..self.len], index: 0 }
  }
}

/// The full analyzer: split → drop over-long tokens → ASCII folding → stop words → stemming
/// (the filters through the thread's term cache, see [`WikiTokenizer`]).
pub fn wiki_analyzer() -> TextAnalyzer {
  TextAnalyzer::from(WikiTokenizer::default())
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

  /// The analyzer as a chain of tantivy's own filters, for non-CJK text (where splitting at
  /// non-alphanumeric characters is `SimpleTokenizer`'s, and lowercasing without a final capital
  /// sigma is `LowerCaser`'s): what the term cache must reproduce, token for token, each with
  /// its byte offset.
  fn reference(text: &str) -> Vec<(String, usize)> {
    use tantivy::tokenizer::{LowerCaser, SimpleTokenizer};
    let mut a = TextAnalyzer::builder(SimpleTokenizer::default())
      .filter(LowerCaser)
      .filter(RemoveLongFilter::limit(48))
      .filter(AsciiFoldingFilter)
      .filter(StopWordFilter::remove(STOP_WORDS.iter().map(|w| w.to_string())))
      .filter(Stemmer::new(Language::English))
      .build();
    let mut out = Vec::new();
    let mut s = a.token_stream(text);
    while s.advance() {
      out.push((s.token().text.clone(), s.token().offset_from));
    }
    out
  }

  /// Terms and positions, checking that a position is the token's byte offset.
  fn cached(a: &mut TextAnalyzer, text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut s = a.token_stream(text);
    while s.advance() {
      assert_eq!(s.token().position, s.token().offset_from);
      out.push((s.token().text.clone(), s.token().position));
    }
    out
  }

  #[test]
  fn the_term_cache_gives_the_filter_chains_terms_and_positions() {
    let long = "x".repeat(47);
    let longer = "y".repeat(48);
    let text = format!(
      "The Rebuilding of INDEXES, rebuilding indexes; Café naïve ÉTÉ Œuvre straße İstanbul        running RUNS ran {long} {longer} {long}é wiki_reindex 2.5.3 What does it do?        Ελληνικά кириллица generously GENERATIONS the and of"
    );
    let expected = reference(&text);
    assert!(expected.len() > 20 && expected.iter().any(|(t, _)| t == "rebuild"));
    let mut a = wiki_analyzer();
    // First pass fills the cache, the second reads it; a fresh analyzer shares it (per thread).
    assert_eq!(cached(&mut a, &text), expected);
    assert_eq!(cached(&mut a, &text), expected);
    assert_eq!(cached(&mut wiki_analyzer(), &text), expected);
    // Past the cache's capacity, tokens are analysed uncached, with the same result.
    let many: String = (0..TERM_CACHE_CAPACITY + 5_000).map(|i| format!("Word{i}ing the ")).collect();
    assert_eq!(cached(&mut a, &many), reference(&many));
    assert_eq!(cached(&mut a, &text), expected);
  }

  #[test]
  fn cjk_bigrams() {
    let mut a = wiki_analyzer();
    assert_eq!(analyze(&mut a, "卡片盒"), vec!["卡片", "片盒"]);
    assert_eq!(analyze(&mut a, "zettelkasten是搜索"), vec!["zettelkasten", "是搜", "搜索"]);
    assert_eq!(analyze(&mut a, "A 法 b"), vec!["法", "b"]);
  }
}
