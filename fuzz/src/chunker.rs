//! Chunker (chunk.rs) on the body of a real page parse, as reindex feeds it.
//!
//! Input: byte 0 chooses the chunk sizes (even: the production default; odd: a small window
//! from byte 1, which makes splitting, overlap and re-fencing happen on short inputs); the rest
//! is the page body. A body starting with `!` is expanded instead: the next byte picks a size in
//! KiB (1 to 8) and the remainder is repeated to that size (long lines, huge sections).
//!
//! Invariants: chunking is deterministic (same ids, texts, ranges); every chunk and section lies
//! within the page's lines and after its frontmatter; a chunk lies within its section; ordinals
//! are dense; ids are `chunk_id(prefix, text)`; prefixes are `Title › headings`; every line of a
//! chunk's text (except synthetic code fences) occurs in the page lines its range names; `plain`
//! is the plain text of `text`; chunks fit the token window.

use llm_wiki_core::chunk::{
  chunk_id, chunk_page, estimate_tokens, plain_text, ChunkConfig, PREFIX_SEPARATOR, SECTION_MAX_TOKENS,
};
use llm_wiki_core::vault::frontmatter::normalize_newlines;
use llm_wiki_core::vault::Page;

fn body_text(data: &[u8]) -> String {
  if data.len() > 2 && data[0] == b'!' {
    let target = (data[1] as usize % 8 + 1) * 1024;
    let unit = String::from_utf8_lossy(&data[2..]);
    let mut body = String::new();
    while body.len() < target {
      body.push_str(&unit);
    }
    return body;
  }
  String::from_utf8_lossy(data).into_owned()
}

/// One input (panics on a violated invariant).
pub fn run(data: &[u8]) {
  if data.len() < 2 {
    return;
  }
  let cfg = if data[0].is_multiple_of(2) {
    ChunkConfig::default()
  } else {
    let max_tokens = 16 + (data[1] as usize % 64);
    ChunkConfig { max_tokens, overlap_tokens: data[0] as usize % (max_tokens / 2) }
  };
  let file = format!("---\ntype: note\ntitle: Fuzz\n---\n{}", body_text(&data[2..]));
  let Ok(page) = Page::parse("fuzz", "/fuzz.md".into(), &file) else {
    return;
  };
  let normalized = normalize_newlines(&file);
  let lines: Vec<&str> = normalized.split('\n').collect();
  let last_line = lines.len() as u32;

  let a = chunk_page(&page.meta.title, &page.body, page.body_start_line, &cfg);
  let b = chunk_page(&page.meta.title, &page.body, page.body_start_line, &cfg);
  assert_eq!(a.chunks, b.chunks, "chunking is not deterministic");
  assert_eq!(a.sections, b.sections, "sectioning is not deterministic");
  assert!(!a.chunks.is_empty() && !a.sections.is_empty());

  // The closing fence is the earliest line an (empty-body) chunk may point at.
  let first_allowed = page.body_start_line.saturating_sub(1).max(1);
  for (i, s) in a.sections.iter().enumerate() {
    assert_eq!(s.ordinal as usize, i);
    assert!(
      first_allowed <= s.line_start && s.line_start <= s.line_end && s.line_end <= last_line,
      "section {i} lines {}-{} outside {first_allowed}-{last_line}",
      s.line_start,
      s.line_end
    );
    assert!(
      estimate_tokens(&s.plain) <= SECTION_MAX_TOKENS + cfg.max_tokens,
      "section {i} has {} tokens",
      estimate_tokens(&s.plain)
    );
  }
  for (i, c) in a.chunks.iter().enumerate() {
    assert_eq!(c.ordinal as usize, i);
    let s = a.sections.get(c.section as usize).expect("chunk names an existing section");
    assert!(i == 0 || c.section >= a.chunks[i - 1].section, "sections out of order");
    assert!(
      s.line_start <= c.line_start && c.line_start <= c.line_end && c.line_end <= s.line_end,
      "chunk {i} lines {}-{} outside its section {}-{}",
      c.line_start,
      c.line_end,
      s.line_start,
      s.line_end
    );
    assert_eq!(c.headings, s.headings);
    let (start, end) = (c.span.0 as usize, c.span.1 as usize);
    assert!(start <= end && end <= s.plain.len(), "chunk {i} span {:?} outside its section", c.span);
    assert!(s.plain.is_char_boundary(start) && s.plain.is_char_boundary(end), "chunk {i} span {:?}", c.span);
    assert!(
      i == 0 || a.chunks[i - 1].section != c.section || a.chunks[i - 1].span.0 <= c.span.0,
      "chunk {i} starts before the previous chunk of its section"
    );
    assert_eq!(c.id, chunk_id(&c.prefix, &c.text));
    assert_eq!(c.id.len(), 16);
    assert!(c.id.bytes().all(|b| b.is_ascii_hexdigit()));
    let prefix: Vec<&str> =
      std::iter::once(page.meta.title.as_str()).chain(c.headings.iter().map(String::as_str)).collect();
    assert_eq!(c.prefix, prefix.join(PREFIX_SEPARATOR));
    assert_eq!(c.plain(), plain_text(&c.text));
    assert!(!c.text.is_empty() || a.chunks.len() == 1, "empty chunk text in a multi-chunk page");
    assert!(
      estimate_tokens(&c.text) <= cfg.max_tokens,
      "chunk {i} has {} tokens (window {})",
      estimate_tokens(&c.text),
      cfg.max_tokens
    );
    // Every line of the chunk's text comes from the lines its range names.
    let window = lines[c.line_start as usize - 1..c.line_end as usize].join("\n");
    for l in c.text.lines().map(str::trim).filter(|l| !l.is_empty()) {
      if l.starts_with("```") || l.starts_with("~~~") {
        continue; // a split code block is re-fenced with copies of its fence lines
      }
      assert!(window.contains(l), "chunk {i} line {l:?} is not within lines {}-{}", c.line_start, c.line_end);
    }
  }
}
