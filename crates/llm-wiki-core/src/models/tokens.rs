//! Chunk sizes counted with the embedding model's own tokenizer (`tokenizer.json` only: no ONNX
//! Runtime, no model weights), so a chunk fits the model's window by the model's count rather
//! than by an estimate.
//!
//! Counting is per whitespace-separated word, with a cache (word → tokens) shared by every
//! thread of the process (and a copy of what each thread met in its own lock-free cache): vault text repeats its words, so a cold index tokenizes each distinct
//! word once (the words a text misses in one tokenizer call) instead of every piece the chunker
//! measures. With BERT's pre-tokenizer the cache holds the pieces of a word between ASCII
//! punctuation (link targets, paths and identifiers are words met once, their pieces repeat).
//! A text's count is the sum of its words' counts. That is exact
//! for tokenizers that split at whitespace before their model runs — BERT's WordPiece (the
//! default all-MiniLM-L6-v2 models), and any `Whitespace`/`WhitespaceSplit` pre-tokenizer — since
//! their model never sees two words at once. For other tokenizers (SentencePiece `Metaspace`,
//! byte-level BPE) a word's tokens can depend on the space before it, and the sum is an
//! approximation (typically within a token per word); [`TokenizerCounter::is_exact`] says which.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::Tokenizer;

use super::manifest::ModelDir;
use crate::chunk::{ChunkConfig, TokenCounter};
use crate::error::{Error, Result};
use crate::fnv::FnvMap;

/// Cache shards (one lock each): indexing threads rarely wait on each other.
const SHARDS: usize = 16;
/// Most words cached per shard; past it, words are counted without being cached (a vault of
/// random identifiers must not grow the cache without bound).
const SHARD_CAPACITY: usize = 1 << 16;
/// Longest word cached, in bytes (longer ones are rare and counted each time).
const MAX_CACHED_WORD: usize = 64;

/// Tokens left in the model window for the chunk prefix (`Title › Heading`), the document prefix
/// and the special tokens: the 56 the default chunk size (200) leaves in a 256-token window.
pub const WINDOW_RESERVE: usize = 56;

/// Smallest chunk a model's window or `chunkTokens` can ask for (a few words of text).
pub const MIN_CHUNK_TOKENS: usize = 16;

/// A [`TokenCounter`] over a model's `tokenizer.json`.
pub struct TokenizerCounter {
  tokenizer: Tokenizer,
  label: String,
  window: usize,
  /// The manifest's `chunkTokens`: the largest chunk this model wants, if it says.
  chunk_tokens: Option<usize>,
  exact: bool,
  /// The pre-tokenizer is BERT's, which also isolates every punctuation character: a word is
  /// counted as its pieces between ASCII punctuation (see [`bert_pieces`]).
  bert: bool,
  cache: Vec<Mutex<WordMap>>,
  /// This counter's identity (from [`NEXT_COUNTER_ID`]) for the threads' own caches.
  id: u64,
}

impl TokenizerCounter {
  /// Load the tokenizer of `dir` (no truncation, no padding).
  pub fn load(dir: &ModelDir) -> Result<Self> {
    let path = dir.tokenizer_file();
    let unavailable = |e: &dyn std::fmt::Display| Error::ModelUnavailable(format!("{}: {e}", path.display()));
    let mut tokenizer = Tokenizer::from_file(&path).map_err(|e| unavailable(&e))?;
    tokenizer.with_padding(None);
    tokenizer.with_truncation(None).map_err(|e| unavailable(&e))?;
    let bert = matches!(tokenizer.get_pre_tokenizer(), Some(PreTokenizerWrapper::BertPreTokenizer(_)));
    let exact = bert
      || matches!(
        tokenizer.get_pre_tokenizer(),
        Some(PreTokenizerWrapper::Whitespace(_)) | Some(PreTokenizerWrapper::WhitespaceSplit(_))
      );
    Ok(TokenizerCounter {
      tokenizer,
      label: format!("tokenizer:{}", dir.manifest.id),
      window: dir.manifest.max_length,
      chunk_tokens: dir.manifest.chunk_tokens,
      exact,
      bert,
      cache: (0..SHARDS).map(|_| Mutex::new(WordMap::default())).collect(),
      id: NEXT_COUNTER_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    })
  }

  /// The model's token window (`maxLength` of its manifest).
  pub fn window(&self) -> usize {
    self.window
  }

  /// True when [`TokenCounter::count`] equals the tokenizer's count of the whole text (its
  /// pre-tokenizer splits at whitespace), false when it is the per-word approximation.
  pub fn is_exact(&self) -> bool {
    self.exact
  }

  /// Chunk sizes for this model: `cfg`, capped so that a chunk plus [`WINDOW_RESERVE`] fits the
  /// window (the default 200 tokens is unchanged for a 256-token model) and by the manifest's
  /// `chunkTokens` when it has one (never below [`MIN_CHUNK_TOKENS`]); the overlap is at most a
  /// quarter of the chunk.
  pub fn chunking(&self, cfg: &ChunkConfig) -> ChunkConfig {
    let wanted = self.chunk_tokens.map_or(usize::MAX, |n| n.max(MIN_CHUNK_TOKENS));
    cfg.at_most(wanted.min(self.window.saturating_sub(WINDOW_RESERVE).max(MIN_CHUNK_TOKENS)))
  }

  /// Tokens of `text` as one input, without special tokens (what [`TokenCounter::count`]
  /// approximates, or equals when [`TokenizerCounter::is_exact`]).
  pub fn count_whole(&self, text: &str) -> usize {
    self
      .tokenizer
      .encode_fast(text, false)
      .map(|e| e.len())
      .unwrap_or_else(|_| crate::chunk::estimate_tokens(text))
  }

  /// [`TokenCounter::count`] with the calling thread's cache `local`.
  fn count_with(&self, local: &mut WordMap, text: &str) -> usize {
    let mut total = 0;
    let mut missing: Vec<&str> = Vec::new();
    for w in text.split_whitespace() {
      if self.bert {
        bert_pieces(w, &mut |p| self.look(local, p, &mut total, &mut missing));
      } else {
        self.look(local, w, &mut total, &mut missing);
      }
    }
    if missing.is_empty() {
      return total;
    }
    for (w, n) in missing.iter().zip(self.count_words(&missing)) {
      total += n;
      if w.len() <= MAX_CACHED_WORD {
        let mut map = self.cache[shard_of(w)].lock();
        if map.len() < SHARD_CAPACITY {
          map.insert((*w).into(), n as u32);
        }
        if local.len() < LOCAL_CAPACITY {
          local.insert((*w).into(), n as u32);
        }
      }
    }
    total
  }

  /// Add the cached count of `word` to `total`, or queue it in `missing`: the thread's own
  /// cache first (no lock), then the shared one (a hit there is copied into the thread's).
  fn look<'a>(&self, local: &mut WordMap, word: &'a str, total: &mut usize, missing: &mut Vec<&'a str>) {
    if word.len() > MAX_CACHED_WORD {
      missing.push(word);
      return;
    }
    if let Some(n) = local.get(word) {
      *total += *n as usize;
      return;
    }
    match self.cache[shard_of(word)].lock().get(word).copied() {
      Some(n) => {
        if local.len() < LOCAL_CAPACITY {
          local.insert(word.into(), n);
        }
        *total += n as usize;
      }
      None => missing.push(word),
    }
  }

  /// Token counts of `words` (whitespace-free) from one encoding of the words joined by spaces:
  /// each token is credited to the word its offsets start in. One tokenizer call per text instead
  /// of one per word (a call costs ~17 µs whatever its length: per-word calls made cold SciFact
  /// chunking 5× slower than the estimate).
  fn count_words(&self, words: &[&str]) -> Vec<usize> {
    let mut joined = String::with_capacity(words.iter().map(|w| w.len() + 1).sum());
    let mut starts = Vec::with_capacity(words.len());
    for w in words {
      if !joined.is_empty() {
        joined.push(' ');
      }
      starts.push(joined.len());
      joined.push_str(w);
    }
    let mut counts = vec![0usize; words.len()];
    match self.tokenizer.encode(joined.as_str(), false) {
      Ok(enc) => {
        for &(a, _) in enc.get_offsets() {
          let i = starts.partition_point(|&s| s <= a).saturating_sub(1);
          counts[i] += 1;
        }
      }
      Err(_) => counts.iter_mut().zip(words).for_each(|(n, w)| *n = self.count_whole(w)),
    }
    counts
  }
}

type WordMap = FnvMap<Box<str>, u32>;

/// Most words in a thread's own cache (see [`TokenizerCounter::count`]); the same bound as a
/// shard of the shared cache (not fitted).
const LOCAL_CAPACITY: usize = SHARD_CAPACITY;

/// Identity of each loaded counter: a thread's cache belongs to one counter at a time.
static NEXT_COUNTER_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

thread_local! {
  /// The calling thread's word counts, for the counter whose id it carries: a counted word is
  /// looked up without taking a shard's lock (the indexing threads count every word of a vault).
  static LOCAL: std::cell::RefCell<(u64, WordMap)> = std::cell::RefCell::new((0, WordMap::default()));
}

fn shard_of(word: &str) -> usize {
  use std::hash::Hasher;
  let mut h = crate::fnv::Fnv::default();
  h.write(word.as_bytes());
  (h.finish() >> 32) as usize % SHARDS
}

impl TokenCounter for TokenizerCounter {
  fn count(&self, text: &str) -> usize {
    LOCAL.with(|local| match local.try_borrow_mut() {
      Ok(mut local) => {
        if local.0 != self.id {
          // Another counter (another tokenizer) used this thread last: its counts do not apply.
          *local = (self.id, WordMap::default());
        }
        self.count_with(&mut local.1, text)
      }
      // A count nested in another on this thread (the tokenizer running a job of the caller's
      // pool): the shared cache alone.
      Err(_) => self.count_with(&mut WordMap::default(), text),
    })
  }
  fn label(&self) -> String {
    self.label.clone()
  }
}

/// Call `f` with the pieces of a whitespace-free `word` that BERT's pre-tokenizer counts apart:
/// each ASCII punctuation character alone and the runs between them. BERT's pre-tokenizer
/// isolates every punctuation character and its normalizer works character by character, so a
/// word's tokens are the sum of its pieces' tokens (exact). Counting pieces lets the word cache
/// hit on link targets, paths and identifiers (`[[concepts/0002/foo-bar-12]].` is a word met
/// once, its pieces are met everywhere): on a synthetic 4,000-page sample, 136k distinct words
/// (87k of them met once) are 27k distinct pieces.
fn bert_pieces<'a>(word: &'a str, f: &mut impl FnMut(&'a str)) {
  let mut from = 0;
  for (i, b) in word.bytes().enumerate() {
    if b.is_ascii_punctuation() {
      if from < i {
        f(&word[from..i]);
      }
      f(&word[i..i + 1]);
      from = i + 1;
    }
  }
  if from < word.len() {
    f(&word[from..]);
  }
}

/// The counter of the embedding model the settings `c` resolve to: `None` when no model is
/// configured (or dense retrieval is off), `Some(Err)` when its tokenizer cannot be loaded. The
/// last one loaded is kept (with its word cache) while its `tokenizer.json` is unchanged.
pub fn chunk_counter(c: &super::ModelConfig) -> Option<Result<Arc<TokenizerCounter>>> {
  let dir = super::resolve_embed_dir(c)?;
  Some(load_cached(dir))
}

fn load_cached(dir: PathBuf) -> Result<Arc<TokenizerCounter>> {
  /// The last counter loaded, with the identity of its tokenizer file.
  type Last = Mutex<Option<(String, Arc<TokenizerCounter>)>>;
  static LAST: OnceLock<Last> = OnceLock::new();
  let md = ModelDir::open(&dir)?;
  let meta = std::fs::metadata(md.tokenizer_file())
    .map_err(|e| Error::ModelUnavailable(format!("{}: {e}", md.tokenizer_file().display())))?;
  let key = format!("{}|{}|{}|{:?}", dir.display(), md.manifest.id, meta.len(), meta.modified().ok());
  let last = LAST.get_or_init(|| Mutex::new(None));
  if let Some((k, counter)) = last.lock().as_ref() {
    if *k == key {
      return Ok(counter.clone());
    }
  }
  super::onnx::quiet_tokenizer_threads();
  let counter = Arc::new(TokenizerCounter::load(&md)?);
  *last.lock() = Some((key, counter.clone()));
  Ok(counter)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn bert_pieces_isolate_ascii_punctuation() {
    let mut out = Vec::new();
    bert_pieces("[[concepts/0002/foo-bar]].", &mut |p| out.push(p));
    assert_eq!(out, ["[", "[", "concepts", "/", "0002", "/", "foo", "-", "bar", "]", "]", "."]);
    out.clear();
    bert_pieces("café", &mut |p| out.push(p));
    assert_eq!(out, ["café"]);
    out.clear();
    bert_pieces("", &mut |p| out.push(p));
    assert!(out.is_empty());
  }

  #[test]
  fn an_unreadable_tokenizer_is_model_unavailable() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("model.onnx"), b"not a model").unwrap();
    std::fs::write(t.path().join("tokenizer.json"), b"{ not json").unwrap();
    let manifest = serde_json::json!({
      "id": "test/broken", "kind": "embed", "dims": 4, "pooling": "mean", "maxLength": 256,
      "files": {
        "model.onnx": { "sha256": "00", "size": 11 },
        "tokenizer.json": { "sha256": "00", "size": 10 }
      }
    });
    std::fs::write(t.path().join("manifest.json"), manifest.to_string()).unwrap();
    let c = super::super::ModelConfig { embed_model: Some(t.path().to_path_buf()), ..Default::default() };
    match chunk_counter(&c) {
      Some(Err(Error::ModelUnavailable(m))) => assert!(m.contains("tokenizer.json"), "{m}"),
      Some(Err(e)) => panic!("wrong error {e:?}"),
      Some(Ok(_)) => panic!("a broken tokenizer loaded"),
      None => panic!("a configured model was not seen"),
    }
    let off = super::super::ModelConfig { disabled: true, ..c };
    assert!(chunk_counter(&off).is_none());
  }
}
