//! Counting tokens: the estimator chunking uses without a model ([`Estimate`]), the
//! [`TokenCounter`] interface a model's tokenizer implements, and splitting text by a count.

pub(crate) fn is_cjk(c: char) -> bool {
  matches!(c as u32,
    0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xAC00..=0xD7AF | 0x20000..=0x2FA1F)
}

/// Estimate WordPiece tokens without a tokenizer: a word is one token plus one per 8 further
/// characters (long words split into pieces), punctuation and CJK characters are one each.
pub fn estimate_tokens(text: &str) -> usize {
  let mut tokens = 0;
  let mut word = 0usize;
  let flush = |word: &mut usize, tokens: &mut usize| {
    if *word > 0 {
      *tokens += 1 + (*word - 1) / 8;
      *word = 0;
    }
  };
  for c in text.chars() {
    if is_cjk(c) {
      flush(&mut word, &mut tokens);
      tokens += 1;
    } else if c.is_alphanumeric() {
      word += 1;
    } else {
      flush(&mut word, &mut tokens);
      if !c.is_whitespace() {
        tokens += 1;
      }
    }
  }
  flush(&mut word, &mut tokens);
  tokens
}

/// Counts tokens for the chunker. Implemented by [`Estimate`] (no model) and by the embedding
/// model's tokenizer (`models::tokens::TokenizerCounter`). The chunker relies on counts being
/// additive over whitespace-separated words (the count of `"a b"` is the count of `"a"` plus
/// that of `"b"`): pieces are counted once and packed by summing.
pub trait TokenCounter: Send + Sync {
  /// Tokens of `text` (no special tokens).
  fn count(&self, text: &str) -> usize;
  /// What counted the sizes: `estimate` or `tokenizer:<model id>`, the first part of
  /// [`Chunker::label`] (recorded in the page manifest; chunks are rebuilt when it changes).
  fn label(&self) -> String;
  /// Cut `body[start..end]` into consecutive ranges of at most `max` tokens, preferring
  /// whitespace, cutting inside a word only when one word alone is longer than `max`.
  fn split(&self, body: &str, start: usize, end: usize, max: usize) -> Vec<(usize, usize)> {
    split_by_count(self, body, start, end, max)
  }
}

/// Label of the [`Estimate`] counter in the page manifest.
pub const ESTIMATE_LABEL: &str = "estimate";

/// The tokenizer-free counter ([`estimate_tokens`]), used when no embedding model is configured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Estimate;

impl TokenCounter for Estimate {
  fn count(&self, text: &str) -> usize {
    estimate_tokens(text)
  }
  fn label(&self) -> String {
    ESTIMATE_LABEL.to_string()
  }
  fn split(&self, body: &str, start: usize, end: usize, max: usize) -> Vec<(usize, usize)> {
    split_words(body, start, end, max)
  }
}

/// [`TokenCounter::split`] for any counter: words (with the whitespace before them) are added
/// while they fit; a word longer than `max` on its own is cut at the longest prefix that fits
/// (binary search over its characters; counts are not always monotone in the prefix, so any
/// prefix that fits is taken, at least one character).
pub fn split_by_count<C: TokenCounter + ?Sized>(
  c: &C,
  body: &str,
  start: usize,
  end: usize,
  max: usize,
) -> Vec<(usize, usize)> {
  let mut out = Vec::new();
  let mut from = start;
  let mut tokens = 0;
  let text = &body[start..end];
  let mut words = Vec::new(); // (whitespace start, word start, word end), absolute
  let mut ws = start;
  let mut word: Option<usize> = None;
  for (off, ch) in text.char_indices() {
    let i = start + off;
    match (ch.is_whitespace(), word) {
      (true, Some(w)) => {
        words.push((ws, w, i));
        word = None;
        ws = i;
      }
      (false, None) => word = Some(i),
      _ => {}
    }
  }
  if let Some(w) = word {
    words.push((ws, w, end));
  }
  for (ws, w, e) in words {
    let t = c.count(&body[w..e]);
    if tokens + t > max && tokens > 0 && ws > from {
      out.push((from, ws));
      (from, tokens) = (ws, 0);
    }
    if t <= max {
      tokens += t;
      continue;
    }
    // One word longer than `max`: cut it where a prefix fits. Each cut searches the next
    // characters only (doubling from `max` characters, then bisecting), so a long blob costs
    // O(log) counts of about a chunk's text per cut, never counts of the whole blob.
    let ends: Vec<usize> = body[from..e].char_indices().map(|(k, _)| from + k).skip(1).chain([e]).collect();
    let last = ends.len() - 1;
    let fits = |s: usize, i: usize| c.count(&body[s..ends[i]]) <= max;
    let (mut s, mut first) = (from, 0); // ends[first..] are the cut candidates after `s`
    loop {
      let mut fit = None; // largest candidate known to fit
      let mut probe = (first + max.max(1) - 1).min(last);
      let over = loop {
        if !fits(s, probe) {
          break Some(probe);
        }
        fit = Some(probe);
        if probe == last {
          break None;
        }
        probe = (first + 2 * (probe - first) + 1).min(last);
      };
      let Some(over) = over else { break }; // the rest of the word fits
                                            // Largest fitting candidate below `over` (one character when none fits).
      let (mut a, mut b) = (fit.unwrap_or(first), over.saturating_sub(1).max(fit.unwrap_or(first)));
      while a < b {
        let mid = (a + b).div_ceil(2);
        if fits(s, mid) {
          a = mid;
        } else {
          b = mid - 1;
        }
      }
      out.push((s, ends[a]));
      (s, first) = (ends[a], a + 1);
    }
    from = s;
    tokens = c.count(&body[s..e]);
  }
  if from < end {
    out.push((from, end));
  }
  out
}

/// Cut `[start, end)` into ranges of at most `max` estimated tokens ([`estimate_tokens`]): before
/// whitespace or a CJK character when the range has one, inside an over-long word (a pasted
/// blob, a minified line) otherwise, always at a character boundary.
pub(crate) fn split_words(body: &str, start: usize, end: usize, max: usize) -> Vec<(usize, usize)> {
  let mut out = Vec::new();
  let mut from = start;
  let mut tokens = 0; // estimate of body[from..i]
  let mut word = 0; // length of the word run ending at i
  let mut boundary: Option<usize> = None; // latest cut point after `from`
  for (off, c) in body[start..end].char_indices() {
    let i = start + off;
    let cjk = is_cjk(c);
    let cost = if cjk {
      1
    } else if c.is_alphanumeric() {
      usize::from(word % 8 == 0)
    } else {
      usize::from(!c.is_whitespace())
    };
    if tokens + cost > max && i > from {
      let cut = boundary.filter(|b| *b > from).unwrap_or(i);
      out.push((from, cut));
      from = cut;
      tokens = estimate_tokens(&body[from..i]);
      word = body[from..i].chars().rev().take_while(|c| c.is_alphanumeric() && !is_cjk(*c)).count();
      boundary = None;
      if tokens + cost > max && i > from {
        out.push((from, i));
        (from, tokens, word) = (i, 0, 0);
      }
    }
    if cjk || c.is_whitespace() {
      boundary = Some(i);
    }
    tokens += cost;
    word = if c.is_alphanumeric() && !cjk { word + 1 } else { 0 };
  }
  if from < end {
    out.push((from, end));
  }
  out
}
