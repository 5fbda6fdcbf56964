//! Heading-aware chunking. A page body is cut into sections at Markdown headings (found with
//! pulldown-cmark, so `#` lines inside code fences are not headings), and each section is packed
//! into chunks that fit a 256-token embedding window. Blocks are kept whole when they fit; a block
//! that does not is split at line, then sentence, then word boundaries, and a split code fence is
//! re-fenced so every chunk stays valid Markdown. Consecutive chunks of one section overlap.
//! A section of many short blocks (conversation turns, log entries) gets smaller chunks
//! ([`finer_chunking`]).
//!
//! Sizes are counted by a [`TokenCounter`]: the embedding model's own tokenizer when the reindex
//! has one configured (see `models::tokens`), else [`Estimate`], a tokenizer-free guess that the
//! lexical-only path keeps (chunking must work without any model, and lexical chunk documents
//! only need sizes of the right order).
//!
//! Every chunk carries a contextual prefix (`Title › Heading › Sub-heading`), its 1-based source
//! line range, a stable id: the hash of prefix + text, so unchanged chunks keep their id (and
//! their embedding) across edits elsewhere in the page, and its span: where its words lie in its
//! section's plain text, found from the section's one Markdown pass ([`Chunk::span`]).

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use pulldown_cmark::{CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};
use sha2::{Digest, Sha256};

pub mod plain;
pub mod tokens;

pub use plain::plain_text;
use plain::{plain_span, render_plain};
pub use tokens::{estimate_tokens, split_by_count, Estimate, TokenCounter, ESTIMATE_LABEL};

/// Separator between the title and heading levels in a chunk prefix.
pub const PREFIX_SEPARATOR: &str = " › ";

/// Chunk sizes, in tokens of the chunker's [`TokenCounter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkConfig {
  /// Upper bound for a chunk's text (the prefix adds a few more tokens; the model window is 256).
  pub max_tokens: usize,
  /// Tokens of the previous chunk repeated at the start of the next one within a section.
  pub overlap_tokens: usize,
}

impl Default for ChunkConfig {
  fn default() -> Self {
    ChunkConfig { max_tokens: 200, overlap_tokens: 32 }
  }
}

impl ChunkConfig {
  /// These sizes with chunks of at most `limit` tokens; the overlap is then at most a quarter of
  /// a chunk (an overlap sized for long chunks would make short ones mostly repetition).
  pub fn at_most(&self, limit: usize) -> ChunkConfig {
    let max_tokens = self.max_tokens.min(limit);
    ChunkConfig { max_tokens, overlap_tokens: self.overlap_tokens.min(max_tokens / 4) }
  }
}

/// Sections of at least this many top-level blocks (paragraphs, whole lists, tables, code blocks,
/// quotes) are checked for [`SHORT_BLOCK_TOKENS`]: a bulleted list is one block, so a list-heavy
/// note does not meet the rule; many short paragraphs do. Not fitted: chosen before the first measurement.
pub const SHORT_BLOCK_SECTION_MIN_BLOCKS: usize = 8;
/// A section whose median block is at most this many tokens — a conversation's turns, a log's
/// entries — is a run of small independent units: [`finer_chunking`] applies. Not fitted: chosen
/// before the first measurement (a chat turn is one to three sentences).
pub const SHORT_BLOCK_TOKENS: usize = 48;
/// Largest chunk of a section of short blocks. The best of 200 / 128 / 96 / 64 for every section
/// of locomo-dev (development data; hybrid nDCG@10 0.824 / 0.834 / 0.842 / 0.842); SciFact's
/// abstracts (single paragraphs) and the pi pages do not meet the rule (docs/DECISIONS.md,
/// "Chunk size for the dense side").
pub const SHORT_BLOCK_CHUNK_TOKENS: usize = 96;
/// Revision of the chunking rules, part of [`Chunker::label`]: a store chunked by other rules is
/// re-chunked once (its chunk ids would not match the texts the vector phase reads back).
/// 2: sections of short blocks get [`SHORT_BLOCK_CHUNK_TOKENS`] chunks.
pub const CHUNKING_RULES: u32 = 2;

/// The chunk sizes for one section: `cfg`, or finer when the section is at least
/// [`SHORT_BLOCK_SECTION_MIN_BLOCKS`] blocks whose median is at most [`SHORT_BLOCK_TOKENS`]
/// (`blocks`: each block's tokens, `usize::MAX` for a block too long for one chunk; reordered).
/// A chunk of 200 tokens holds 10–20 turns of a conversation on several subjects, and its vector
/// is an average of them all; a question is about one turn. Prose paragraphs are left as they are:
/// there, finer chunks split one subject's evidence (SciFact with 96-token chunks everywhere:
/// hybrid nDCG@10 0.741 → 0.734).
pub fn finer_chunking(cfg: &ChunkConfig, blocks: &mut [usize]) -> ChunkConfig {
  if blocks.len() < SHORT_BLOCK_SECTION_MIN_BLOCKS {
    return *cfg;
  }
  let mid = blocks.len() / 2;
  let (_, median, _) = blocks.select_nth_unstable(mid);
  if *median > SHORT_BLOCK_TOKENS {
    return *cfg;
  }
  cfg.at_most(SHORT_BLOCK_CHUNK_TOKENS)
}

/// One retrievable passage of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
  /// Stable id: first 16 hex chars of sha256(prefix + "\n" + text).
  pub id: String,
  /// Position within the page (0-based).
  pub ordinal: u32,
  /// Ordinal of the section containing this chunk.
  pub section: u32,
  /// Heading path (without the title).
  pub headings: Vec<String>,
  /// `Title › H1 › H2`.
  pub prefix: String,
  /// Markdown source of the chunk.
  pub text: String,
  /// Where the chunk's words lie in its section's plain text ([`Section::plain`]): a byte range
  /// `(start, end)`, on char boundaries, starts non-decreasing over a section's chunks. Found
  /// from the section's own Markdown pass (each text event's source range and plain range), not
  /// by rendering the chunk: the lexical index stores it and places the section's term positions
  /// (byte offsets) into chunks with it. A section of one chunk: the whole plain text. Where the
  /// chunk's Markdown renders differently alone (a section joins blocks with a newline, so a
  /// table right after a paragraph, or an emphasis opened in one block and closed in the next,
  /// reads differently there), the span holds the section's rendering of the chunk's source,
  /// the text the index holds, not [`Chunk::plain`].
  pub span: (u32, u32),
  /// The plain text when it is known without another Markdown pass: a section of one chunk
  /// (its text is the section's) or a page without body text. See [`Chunk::plain`].
  known_plain: Option<String>,
  /// 1-based first line in the page file.
  pub line_start: u32,
  /// 1-based last line in the page file (inclusive).
  pub line_end: u32,
}

impl Chunk {
  /// Plain text of the chunk ([`plain_text`] of its Markdown `text`): the embedding model's
  /// input. Rendered on demand (the lexical index does not need it), except for a chunk that is
  /// its section's whole text, which keeps the section's.
  pub fn plain(&self) -> Cow<'_, str> {
    match &self.known_plain {
      Some(p) => Cow::Borrowed(p),
      None => Cow::Owned(plain_text(&self.text)),
    }
  }

  /// Text given to the embedding model: contextual prefix, then the passage.
  pub fn embedding_text(&self) -> String {
    let plain = self.plain();
    if plain.is_empty() {
      self.prefix.clone()
    } else {
      format!("{}\n{}", self.prefix, plain)
    }
  }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum BlockKind {
  Code,
  Other,
}

/// A top-level block: a heading or a content block, as a byte range of the body.
enum Block {
  Heading { level: usize, text: String, start: usize },
  Content { kind: BlockKind, start: usize, end: usize },
}

/// pulldown-cmark options of the one Markdown pass over a page body: its block structure for the
/// chunker, its links for the link graph ([`crate::memory::links::LinkCollector`]). Wikilinks
/// are events so that links can be read from the pass; a heading keeps a wikilink as written.
pub const BODY_MARKDOWN: Options = Options::ENABLE_TABLES
  .union(Options::ENABLE_STRIKETHROUGH)
  .union(Options::ENABLE_FOOTNOTES)
  .union(Options::ENABLE_WIKILINKS);

/// The heading text of a wikilink written in a heading: its text as a pass without wikilinks
/// reads it (the brackets and target as written, inline markup dropped), so that a heading's
/// text, and the ids of its chunks, do not depend on wikilinks being events.
fn wikilink_heading_text(link: &str) -> String {
  let without_wikilinks = BODY_MARKDOWN.difference(Options::ENABLE_WIKILINKS);
  let mut text = String::new();
  for ev in Parser::new_ext(link, without_wikilinks) {
    if let Event::Text(t) | Event::Code(t) = ev {
      text.push_str(&t);
    }
  }
  text
}

/// The top-level blocks of `body`; every event of the pass is shown to `observe` too.
fn top_level_blocks(body: &str, observe: &mut dyn FnMut(&Event<'_>, Range<usize>)) -> Vec<Block> {
  let mut blocks = Vec::new();
  let mut depth = 0usize;
  let mut heading: Option<(usize, usize, String)> = None;
  // Inside a wikilink of a heading: its text is the link as written, already taken.
  let mut in_wikilink = false;
  for (ev, range) in Parser::new_ext(body, BODY_MARKDOWN).into_offset_iter() {
    observe(&ev, range.clone());
    match ev {
      Event::Start(tag) => {
        if depth == 0 {
          match tag {
            Tag::Heading { level, .. } => heading = Some((level as usize, range.start, String::new())),
            // Only a fenced block has fence lines to repeat around its parts; an indented one is
            // split by lines like prose.
            Tag::CodeBlock(CodeBlockKind::Fenced(_)) => {
              blocks.push(Block::Content { kind: BlockKind::Code, start: range.start, end: range.end })
            }
            _ => blocks.push(Block::Content { kind: BlockKind::Other, start: range.start, end: range.end }),
          }
        } else if let (Some((_, _, text)), Tag::Link { link_type: LinkType::WikiLink { .. }, .. }) =
          (heading.as_mut(), &tag)
        {
          text.push_str(&wikilink_heading_text(&body[range]));
          in_wikilink = true;
        }
        depth += 1;
      }
      Event::End(end) => {
        depth = depth.saturating_sub(1);
        if matches!(end, TagEnd::Link) {
          in_wikilink = false;
        }
        if depth == 0 && matches!(end, TagEnd::Heading(_)) {
          if let Some((level, start, text)) = heading.take() {
            blocks.push(Block::Heading {
              level,
              text: text.split_whitespace().collect::<Vec<_>>().join(" "),
              start,
            });
          }
        }
      }
      Event::Text(t) | Event::Code(t) if heading.is_some() && !in_wikilink => {
        if let Some((_, _, text)) = heading.as_mut() {
          text.push_str(&t);
        }
      }
      Event::Rule | Event::Html(_) if depth == 0 => {
        blocks.push(Block::Content { kind: BlockKind::Other, start: range.start, end: range.end })
      }
      _ => {}
    }
  }
  blocks
}

/// A piece of a section: a source range and its text (re-fenced for split code blocks).
#[derive(Clone)]
struct Piece {
  start: usize,
  end: usize,
  text: String,
  tokens: usize,
}

fn piece(c: &dyn TokenCounter, body: &str, start: usize, end: usize) -> Piece {
  let text = body[start..end].trim_end().to_string();
  Piece { start, end, tokens: c.count(&text), text }
}

/// Split `[start, end)` at line boundaries (keeping each line's newline in the range).
fn line_ranges(body: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
  let mut out = Vec::new();
  let mut s = start;
  for (i, b) in body[start..end].bytes().enumerate() {
    if b == b'\n' {
      out.push((s, start + i + 1));
      s = start + i + 1;
    }
  }
  if s < end {
    out.push((s, end));
  }
  out
}

/// Split one over-long line at sentence ends, then at word boundaries if still too long.
fn split_line(c: &dyn TokenCounter, body: &str, start: usize, end: usize, max: usize) -> Vec<Piece> {
  let line = &body[start..end];
  let mut cuts = vec![0];
  let chars: Vec<(usize, char)> = line.char_indices().collect();
  for (k, &(i, c)) in chars.iter().enumerate() {
    let next_space = chars.get(k + 1).is_none_or(|&(_, n)| n.is_whitespace());
    if (matches!(c, '.' | '?' | '!' | ';') && next_space) || matches!(c, '。' | '？' | '！' | '；') {
      cuts.push(i + c.len_utf8());
    }
  }
  cuts.push(line.len());
  cuts.dedup();
  let mut out = Vec::new();
  for w in cuts.windows(2) {
    let (a, b) = (start + w[0], start + w[1]);
    if body[a..b].trim().is_empty() {
      continue;
    }
    let p = piece(c, body, a, b);
    if p.tokens <= max {
      out.push(p);
      continue;
    }
    // A sentence longer than a chunk: word-level pieces of about a quarter chunk, so that
    // consecutive chunks can still overlap by whole pieces.
    for (s, e) in c.split(body, a, b, (max / 4).max(8)) {
      if !body[s..e].trim().is_empty() {
        out.push(piece(c, body, s, e));
      }
    }
  }
  out
}

/// Cut a content block into pieces that each fit `max` tokens.
fn block_pieces(
  c: &dyn TokenCounter,
  body: &str,
  kind: BlockKind,
  start: usize,
  end: usize,
  max: usize,
) -> Vec<Piece> {
  let whole = piece(c, body, start, end);
  if whole.tokens <= max {
    return vec![whole];
  }
  let lines = line_ranges(body, start, end);
  if kind == BlockKind::Code && lines.len() >= 2 {
    let open_line = body[lines[0].0..lines[0].1].trim_end().to_string();
    let last = lines[lines.len() - 1];
    let closing = body[last.0..last.1].trim();
    let has_close = closing.starts_with("```") || closing.starts_with("~~~");
    let marker: String = open_line.trim_start().chars().take_while(|c| *c == '`' || *c == '~').collect();
    let close_line = if has_close { closing.to_string() } else { marker.clone() };
    // Every part repeats the fences: the original lines when they leave room for code, else the
    // bare marker (a long info string), else none (the block is split like prose).
    let fits = |(o, cl): &(String, String)| c.count(o) + c.count(cl) + 8 <= max;
    let fences = [(open_line, close_line), (marker.clone(), marker)].into_iter().find(fits);
    if let Some((fence_open, fence_close)) = fences {
      return fenced_pieces(c, body, &lines, has_close, &fence_open, &fence_close, max);
    }
  }
  let mut out = Vec::new();
  for (a, b) in lines {
    if body[a..b].trim().is_empty() {
      continue;
    }
    let p = piece(c, body, a, b);
    if p.tokens <= max {
      out.push(p);
    } else {
      out.extend(split_line(c, body, a, b, max));
    }
  }
  out
}

/// Parts of a fenced code block (`lines`, fences included), each re-fenced with `fence_open` /
/// `fence_close`, which leave room for at least 8 tokens of code in `max`.
fn fenced_pieces(
  c: &dyn TokenCounter,
  body: &str,
  lines: &[(usize, usize)],
  has_close: bool,
  fence_open: &str,
  fence_close: &str,
  max: usize,
) -> Vec<Piece> {
  let inner = if has_close { &lines[1..lines.len() - 1] } else { &lines[1..] };
  let budget = max.saturating_sub(c.count(fence_open) + c.count(fence_close)).max(8);
  let mut out = Vec::new();
  let mut cur: Vec<(usize, usize)> = Vec::new();
  let mut cur_tokens = 0;
  let flush = |cur: &mut Vec<(usize, usize)>, out: &mut Vec<Piece>| {
    if let (Some(f), Some(l)) = (cur.first(), cur.last()) {
      let code = body[f.0..l.1].trim_end_matches('\n');
      let text = format!("{fence_open}\n{code}\n{fence_close}");
      out.push(Piece { start: f.0, end: l.1, tokens: c.count(&text), text });
    }
    cur.clear();
  };
  // A code line longer than the budget (minified code, a data blob) is cut inside the line.
  let units = inner.iter().flat_map(|&(a, b)| {
    if c.count(&body[a..b]) > budget {
      c.split(body, a, b, budget)
    } else {
      vec![(a, b)]
    }
  });
  for (a, b) in units {
    let t = c.count(&body[a..b]);
    // A unit that continues a word cut by `split` is re-joined with it in the part's text: count
    // the joined text (a tokenizer's count of a whole word is not the sum of its parts').
    let joined = cur.last().is_some_and(|l| l.1 == a && !body[..a].ends_with(char::is_whitespace));
    let total = match cur.first() {
      Some(f) if joined => c.count(&body[f.0..b]),
      _ => cur_tokens + t,
    };
    if total > budget && !cur.is_empty() {
      flush(&mut cur, &mut out);
      cur_tokens = 0;
      cur.push((a, b));
      cur_tokens += t;
      continue;
    }
    cur.push((a, b));
    cur_tokens = total;
  }
  flush(&mut cur, &mut out);
  out
}

struct LineIndex {
  newlines: Vec<usize>,
  first_line: u32,
}

impl LineIndex {
  fn new(body: &str, first_line: u32) -> Self {
    LineIndex {
      newlines: body.bytes().enumerate().filter(|(_, b)| *b == b'\n').map(|(i, _)| i).collect(),
      first_line,
    }
  }
  fn line_of(&self, offset: usize) -> u32 {
    self.first_line + self.newlines.partition_point(|&n| n < offset) as u32
  }
}

/// Stable chunk id.
pub fn chunk_id(prefix: &str, text: &str) -> String {
  let mut h = Sha256::new();
  h.update(prefix.as_bytes());
  h.update(b"\n");
  h.update(text.as_bytes());
  const HEX: &[u8; 16] = b"0123456789abcdef";
  let mut id = String::with_capacity(16);
  for b in &h.finalize()[..8] {
    id.push(HEX[(b >> 4) as usize] as char);
    id.push(HEX[(b & 15) as usize] as char);
  }
  id
}

/// A heading section (or a part of a very long one): the unit of lexical (BM25) scoring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
  /// 0-based position of the section in the page.
  pub ordinal: u32,
  /// Heading path from the page's top heading down to this section.
  pub headings: Vec<String>,
  /// Plain text of the section.
  pub plain: String,
  /// First line of the section in the page file (1-based).
  pub line_start: u32,
  /// Last line of the section in the page file (1-based, inclusive).
  pub line_end: u32,
}

/// A page cut into sections (lexical units) and chunks (embedding units, ≤ one model window).
#[derive(Debug, Clone, Default)]
pub struct ChunkedPage {
  /// Sections in page order (lexical section documents).
  pub sections: Vec<Section>,
  /// Chunks in page order (lexical chunk documents and embedding inputs).
  pub chunks: Vec<Chunk>,
}

/// Sections longer than this many tokens are split (at block boundaries) for lexical scoring,
/// so one huge page does not become a single diluted BM25 document.
pub const SECTION_MAX_TOKENS: usize = 1024;

/// Greedy packing of pieces into groups of at most `max` tokens; each new group starts with the
/// trailing pieces of the previous one that fit in `overlap` tokens. A group is a run of
/// consecutive pieces: its range of indices into `pieces`.
fn pack(pieces: &[Piece], max: usize, overlap: usize) -> Vec<Range<usize>> {
  let mut groups = Vec::new();
  let mut from = 0; // first piece of the current group
  let mut cur_tokens = 0;
  let mut fresh = 0; // pieces of the current group that are not overlap
  for (i, p) in pieces.iter().enumerate() {
    if cur_tokens + p.tokens > max && fresh > 0 {
      let (mut carried, mut ot) = (i, 0);
      while carried > from {
        let q = &pieces[carried - 1];
        if ot + q.tokens > overlap || ot + q.tokens + p.tokens > max {
          break;
        }
        ot += q.tokens;
        carried -= 1;
      }
      groups.push(from..i);
      (from, cur_tokens, fresh) = (carried, ot, 0);
    }
    cur_tokens += p.tokens;
    fresh += 1;
  }
  if fresh > 0 {
    groups.push(from..pieces.len());
  }
  groups
}

/// Source text of a run of pieces: joined with the original separator (blank line between
/// blocks, newline within one), trimmed; and the byte range of each piece's text in it (clipped
/// by the trim). The text of a sub-run is the trimmed slice from its first piece's start to its
/// last piece's end (the separators depend on neighbouring pieces only).
fn join_pieces(body: &str, group: &[Piece]) -> (String, Vec<(usize, usize)>) {
  let mut text = String::with_capacity(group.iter().map(|p| p.text.len() + 2).sum());
  let mut at = Vec::with_capacity(group.len());
  for (k, p) in group.iter().enumerate() {
    if k > 0 {
      let prev = &group[k - 1];
      let gap = if prev.end <= p.start { &body[prev.end..p.start] } else { "\n\n" };
      text.push_str(if gap.contains("\n\n") || gap.is_empty() { "\n\n" } else { "\n" });
    }
    at.push((text.len(), text.len() + p.text.len()));
    text.push_str(&p.text);
  }
  text.truncate(text.trim_end().len());
  let lead = text.len() - text.trim_start().len();
  text.drain(..lead);
  let len = text.len();
  for r in &mut at {
    *r = (r.0.saturating_sub(lead).min(len), r.1.saturating_sub(lead).min(len));
  }
  (text, at)
}

fn make_prefix(title: &str, headings: &[String]) -> String {
  std::iter::once(title).chain(headings.iter().map(String::as_str)).collect::<Vec<_>>().join(PREFIX_SEPARATOR)
}

/// Chunk sizes and the counter that measures them: what a reindex chunks every page with (the
/// lexical phase and the vector phase must agree, chunk ids depend on both).
#[derive(Clone)]
pub struct Chunker {
  /// Chunk sizes, in the counter's tokens.
  pub config: ChunkConfig,
  /// The token counter.
  pub counter: Arc<dyn TokenCounter>,
}

impl Chunker {
  /// `config` counted by [`Estimate`].
  pub fn estimate(config: ChunkConfig) -> Self {
    Chunker { config, counter: Arc::new(Estimate) }
  }
  /// What cut the chunks, recorded in the page manifest (`chunker`): the counter's label, the
  /// sizes when they are not the default, and the rules' revision
  /// (`tokenizer:<id>@96+24/r2`), so that a change of any of them re-chunks the vault once.
  pub fn label(&self) -> String {
    let c = &self.config;
    let sizes = if *c == ChunkConfig::default() {
      String::new()
    } else {
      format!("@{}+{}", c.max_tokens, c.overlap_tokens)
    };
    format!("{}{sizes}/r{CHUNKING_RULES}", self.counter.label())
  }
  /// Chunk a page body (see [`chunk_page_with`]).
  pub fn chunk(&self, title: &str, body: &str, body_start_line: u32) -> ChunkedPage {
    self.chunk_observing(title, body, body_start_line, &mut |_, _| {})
  }
  /// [`Chunker::chunk`], showing `observe` every event of the body's Markdown pass (with
  /// [`BODY_MARKDOWN`]) and its source range: what else a reindex reads from a body (its links)
  /// comes from the same pass.
  pub fn chunk_observing(
    &self,
    title: &str,
    body: &str,
    body_start_line: u32,
    observe: &mut dyn FnMut(&Event<'_>, Range<usize>),
  ) -> ChunkedPage {
    chunk_body(title, body, body_start_line, &self.config, self.counter.as_ref(), observe)
  }
}

impl std::fmt::Debug for Chunker {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.debug_struct("Chunker").field("config", &self.config).field("counter", &self.label()).finish()
  }
}

/// Chunk a page body with the tokenizer-free [`Estimate`]. `body_start_line` is the 1-based file
/// line where the body begins.
pub fn chunk_page(title: &str, body: &str, body_start_line: u32, cfg: &ChunkConfig) -> ChunkedPage {
  chunk_page_with(title, body, body_start_line, cfg, &Estimate)
}

/// Chunk a page body, sizes counted by `counter`.
pub fn chunk_page_with(
  title: &str,
  body: &str,
  body_start_line: u32,
  cfg: &ChunkConfig,
  counter: &dyn TokenCounter,
) -> ChunkedPage {
  chunk_body(title, body, body_start_line, cfg, counter, &mut |_, _| {})
}

/// One body being chunked: what every section of it is cut with.
struct Body<'a> {
  title: &'a str,
  text: &'a str,
  cfg: &'a ChunkConfig,
  lines: LineIndex,
}

/// [`chunk_page_with`], every event of the body's pass shown to `observe`.
fn chunk_body(
  title: &str,
  body: &str,
  body_start_line: u32,
  cfg: &ChunkConfig,
  counter: &dyn TokenCounter,
  observe: &mut dyn FnMut(&Event<'_>, Range<usize>),
) -> ChunkedPage {
  let b = Body { title, text: body, cfg, lines: LineIndex::new(body, body_start_line) };
  let mut out = ChunkedPage::default();
  let mut headings: Vec<(usize, String)> = Vec::new();
  let mut section_start: Option<usize> = None;
  let mut pieces: Vec<Piece> = Vec::new();
  // Tokens of each block of the current section (see `finer_chunking`).
  let mut blocks: Vec<usize> = Vec::new();

  for block in top_level_blocks(body, observe) {
    match block {
      Block::Heading { level, text, start } => {
        emit_section(&b, &headings, section_start, &mut pieces, &mut blocks, &mut out);
        while headings.last().is_some_and(|(l, _)| *l >= level) {
          headings.pop();
        }
        headings.push((level, text));
        section_start = Some(start);
      }
      Block::Content { kind, start, end } => {
        let mut parts = block_pieces(counter, body, kind, start, end, cfg.max_tokens);
        // Whitespace Markdown does not treat as blank (a paragraph of no-break spaces) would
        // make an empty chunk: such parts are dropped, a block left without text is skipped.
        parts.retain(|p| !p.text.trim().is_empty());
        if parts.is_empty() {
          continue;
        }
        // A block that fits a chunk is one piece: its count is the block's.
        blocks.push(if parts.len() == 1 { parts[0].tokens } else { usize::MAX });
        pieces.extend(parts);
      }
    }
  }
  emit_section(&b, &headings, section_start, &mut pieces, &mut blocks, &mut out);
  if out.chunks.is_empty() {
    title_only(&b, body_start_line, headings, &mut out);
  }
  out
}

/// Cut the section under `headings` (starting at `start`, of `pieces`, whose blocks counted
/// `blocks` tokens) into sections of at most [`SECTION_MAX_TOKENS`] and those into chunks, and
/// empty `pieces` and `blocks` for the next section.
fn emit_section(
  b: &Body,
  headings: &[(usize, String)],
  start: Option<usize>,
  pieces: &mut Vec<Piece>,
  blocks: &mut Vec<usize>,
  out: &mut ChunkedPage,
) {
  let (body, lines) = (b.text, &b.lines);
  let sizes = finer_chunking(b.cfg, blocks);
  blocks.clear();
  if pieces.is_empty() {
    return;
  }
  let heads: Vec<String> = headings.iter().map(|(_, t)| t.clone()).collect();
  let prefix = make_prefix(b.title, &heads);
  for (pi, range) in pack(pieces, SECTION_MAX_TOKENS, 0).into_iter().enumerate() {
    let part = &pieces[range];
    let s = if pi == 0 { start.unwrap_or(part[0].start).min(part[0].start) } else { part[0].start };
    let e = part.iter().map(|p| p.end).max().unwrap_or(s).max(s + 1);
    let section = out.sections.len() as u32;
    let (section_text, at) = join_pieces(body, part);
    let groups = pack(part, sizes.max_tokens, sizes.overlap_tokens);
    // A section of one chunk: the chunk is every piece of the section, so its text and plain
    // text are the section's (the Markdown is not parsed a second time). Otherwise the one
    // pass over the section's text also maps its events, which place each chunk's words.
    let whole = groups.len() == 1;
    let mut events = Vec::new();
    let section_plain = render_plain(&section_text, (!whole).then_some(&mut events));
    for (gi, group) in groups.into_iter().enumerate() {
      let (text, span, known_plain) = if whole {
        (section_text.clone(), (0, section_plain.len() as u32), Some(section_plain.clone()))
      } else {
        let run = &section_text[at[group.start].0..at[group.end - 1].1];
        let text = run.trim();
        let a = at[group.start].0 + (run.len() - run.trim_start().len());
        (text.to_string(), plain_span(&section_text, &section_plain, &events, a, a + text.len()), None)
      };
      let cs = if gi == 0 { s } else { part[group.start].start };
      let ce = part[group].iter().map(|p| p.end).max().unwrap_or(cs).max(cs + 1);
      out.chunks.push(Chunk {
        id: chunk_id(&prefix, &text),
        ordinal: out.chunks.len() as u32,
        section,
        headings: heads.clone(),
        prefix: prefix.clone(),
        text,
        span,
        known_plain,
        line_start: lines.line_of(cs),
        line_end: lines.line_of(ce - 1),
      });
    }
    out.sections.push(Section {
      ordinal: section,
      headings: heads.clone(),
      plain: section_plain,
      line_start: lines.line_of(s),
      line_end: lines.line_of(e - 1),
    });
  }
  pieces.clear();
}

/// The one section and chunk of a page without body text: its title and metadata must still be
/// searchable.
fn title_only(b: &Body, body_start_line: u32, headings: Vec<(usize, String)>, out: &mut ChunkedPage) {
  let body = b.text;
  let heads: Vec<String> = headings.into_iter().map(|(_, h)| h).collect();
  let prefix = make_prefix(b.title, &heads);
  // An empty body starts after the last line of the file: point at the closing fence instead.
  let start = if body.is_empty() { body_start_line.saturating_sub(1).max(1) } else { body_start_line };
  let line_end = if body.is_empty() { start } else { b.lines.line_of(body.len() - 1).max(start) };
  out.sections.push(Section {
    ordinal: 0,
    headings: heads.clone(),
    plain: String::new(),
    line_start: start,
    line_end,
  });
  out.chunks.push(Chunk {
    id: chunk_id(&prefix, ""),
    ordinal: 0,
    section: 0,
    headings: heads,
    prefix,
    text: String::new(),
    span: (0, 0),
    known_plain: Some(String::new()),
    line_start: start,
    line_end,
  });
}

#[cfg(test)]
mod tests;
