//! Plain text of Markdown, and where each of its words came from in the Markdown.

use pulldown_cmark::{Event, Options, Parser};

/// Plain text of Markdown: the words of every text and code event, joined by single spaces.
/// Events are never joined into one word (each starts a new word), and whitespace inside an
/// event's text is collapsed.
pub fn plain_text(markdown: &str) -> String {
  render_plain(markdown, None)
}

/// One text or code event of a Markdown text that has words: its byte range in the Markdown and
/// the byte range of its words in the plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlainEvent {
  pub(crate) src: (usize, usize),
  pub(crate) plain: (usize, usize),
}

/// [`plain_text`], and, given `map`, each event with words appended to it (in event order).
pub(crate) fn render_plain(markdown: &str, mut map: Option<&mut Vec<PlainEvent>>) -> String {
  let mut out = String::with_capacity(markdown.len());
  let opts = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
  for (ev, range) in Parser::new_ext(markdown, opts).into_offset_iter() {
    if let Event::Text(t) | Event::Code(t) = ev {
      let mut first = None;
      for w in t.split_whitespace() {
        if !out.is_empty() {
          out.push(' ');
        }
        first.get_or_insert(out.len());
        out.push_str(w);
      }
      if let (Some(map), Some(start)) = (map.as_deref_mut(), first) {
        map.push(PlainEvent { src: (range.start, range.end), plain: (start, out.len()) });
      }
    }
  }
  out
}

/// The byte range in `plain` (rendered from `source`, `events` its [`render_plain`] map) of the
/// words of `source[a..b]`: from the first event ending after `a` to the last one starting
/// before `b`, an event cut by `a` or `b` entered at the cut ([`plain_offset`]). Always inside
/// `plain`, on char boundaries, start ≤ end (empty where the range has no words).
pub(crate) fn plain_span(source: &str, plain: &str, events: &[PlainEvent], a: usize, b: usize) -> (u32, u32) {
  let start = match events.iter().find(|e| e.src.1 > a) {
    Some(e) if e.src.0 < a => plain_offset(source, plain, e, a, true),
    Some(e) => e.plain.0,
    None => plain.len(),
  };
  let end = match events.iter().rev().find(|e| e.src.0 < b) {
    Some(e) if e.src.1 > b => plain_offset(source, plain, e, b, false),
    Some(e) => e.plain.1,
    None => 0,
  };
  let start = start.min(plain.len());
  (start as u32, end.clamp(start, plain.len()) as u32)
}

/// Where source offset `pos`, strictly inside event `e`, falls in `plain`: a chunk boundary
/// inside one event. Rare (pieces are joined by blank lines or newlines, which end text events):
/// the lines of a code fence split like prose, which the section reads as one code block. Where
/// the event's source holds its words as they are (prose without escapes or entities: the usual
/// case), words match one to one: a
/// `pos` in whitespace goes to the next word's start (`start`) or the previous word's end, a
/// `pos` inside a word to the same byte of it. Otherwise the offset is interpolated over the
/// event's two lengths. Floored to a char boundary.
pub(crate) fn plain_offset(source: &str, plain: &str, e: &PlainEvent, pos: usize, start: bool) -> usize {
  let src = &source[e.src.0..e.src.1];
  let rel = pos - e.src.0;
  let words = &plain[e.plain.0..e.plain.1];
  let mut at = if src.split_whitespace().eq(words.split(' ')) {
    let (mut p, mut prev_end) = (e.plain.0, e.plain.0);
    let mut found = None;
    for w in src.split_whitespace() {
      let off = w.as_ptr() as usize - src.as_ptr() as usize;
      if rel < off {
        found = Some(if start { p } else { prev_end });
        break;
      }
      if rel < off + w.len() {
        found = Some(p + (rel - off));
        break;
      }
      prev_end = p + w.len();
      p = prev_end + 1;
    }
    found.unwrap_or(prev_end)
  } else {
    e.plain.0 + rel * (e.plain.1 - e.plain.0) / src.len().max(1)
  };
  at = at.min(plain.len());
  while !plain.is_char_boundary(at) {
    at -= 1;
  }
  at
}
