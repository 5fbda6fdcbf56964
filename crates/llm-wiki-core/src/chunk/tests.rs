//! Unit tests of the chunker and the token counters.

use super::plain::{plain_offset, PlainEvent};
use super::tokens::split_words;
use super::*;

#[test]
fn token_estimate() {
  assert_eq!(estimate_tokens("hello world"), 2);
  assert_eq!(estimate_tokens("a, b."), 4);
  assert_eq!(estimate_tokens("卡片盒"), 3);
  assert_eq!(estimate_tokens("internationalization"), 3);
}

#[test]
fn sections_prefixes_and_lines() {
  let body = "Intro line.\n\n# Alpha\n\nText A.\n\n## Beta\n\nText B.\n\n# Gamma\nText C.\n";
  let c = chunk_page("T", body, 5, &ChunkConfig::default()).chunks;
  let prefixes: Vec<_> = c.iter().map(|c| c.prefix.as_str()).collect();
  assert_eq!(prefixes, vec!["T", "T › Alpha", "T › Alpha › Beta", "T › Gamma"]);
  assert_eq!(c[0].text, "Intro line.");
  assert_eq!((c[0].line_start, c[0].line_end), (5, 5));
  assert_eq!((c[1].line_start, c[1].line_end), (7, 9));
  assert_eq!(c[3].text, "Text C.");
  assert_eq!((c[3].line_start, c[3].line_end), (15, 16));
  assert_eq!(c.iter().map(|c| c.ordinal).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
}

#[test]
fn headings_inside_code_fences_are_not_sections() {
  let body = "# Real\n\n```sh\n# not a heading\necho hi\n```\n";
  let c = chunk_page("T", body, 1, &ChunkConfig::default()).chunks;
  assert_eq!(c.len(), 1);
  assert_eq!(c[0].prefix, "T › Real");
  assert!(c[0].text.contains("# not a heading"));
}

/// A heading's text keeps a wikilink as a pass without wikilinks reads it (the pass reads them
/// as links, for the link graph; heading texts, and so chunk ids, do not change with that).
#[test]
fn a_heading_keeps_its_wikilinks_as_written() {
  let body =
    "# About [[concepts/bm25|BM25]] and *ranking* `k1`\n\nText [[a]].\n\n## [[b#H|the *b* `c`]]\n\nMore.\n";
  let c = chunk_page("T", body, 1, &ChunkConfig::default()).chunks;
  let prefixes: Vec<_> = c.iter().map(|c| c.prefix.as_str()).collect();
  assert_eq!(
    prefixes,
    vec![
      "T › About [[concepts/bm25|BM25]] and ranking k1",
      "T › About [[concepts/bm25|BM25]] and ranking k1 › [[b#H|the b c]]"
    ]
  );
  // Every event of the one pass is observed, links included.
  let mut links = Vec::new();
  Chunker::estimate(ChunkConfig::default()).chunk_observing("T", body, 1, &mut |e, r| {
    if let Event::Start(Tag::Link { dest_url, .. }) = e {
      links.push((dest_url.to_string(), &body[r]));
    }
  });
  assert_eq!(
    links,
    vec![
      ("concepts/bm25".into(), "[[concepts/bm25|BM25]]"),
      ("a".into(), "[[a]]"),
      ("b#H".into(), "[[b#H|the *b* `c`]]")
    ]
  );
}

#[test]
fn long_sections_split_with_overlap_and_fit() {
  let sentence = "Retrieval systems rank passages by lexical and semantic evidence. ";
  let body = format!("# Long\n\n{}\n", sentence.repeat(60));
  let cfg = ChunkConfig::default();
  let c = chunk_page("T", &body, 1, &cfg).chunks;
  assert!(c.len() >= 4, "{}", c.len());
  for ch in &c {
    assert!(estimate_tokens(&ch.text) <= cfg.max_tokens, "{}", estimate_tokens(&ch.text));
  }
  // Overlap: each chunk after the first starts with the last sentence of the previous one.
  let last_sentence_of_first = c[0].text.rsplit(". ").next().unwrap();
  assert!(c[1].text.starts_with(last_sentence_of_first.trim_end_matches('.')), "{}", c[1].text);
}

#[test]
fn long_code_fence_is_refenced() {
  let code: String = (0..200).map(|i| format!("let variable_{i} = compute({i});\n")).collect();
  let body = format!("# Code\n\n```rust\n{code}```\n");
  let c = chunk_page("T", &body, 1, &ChunkConfig::default()).chunks;
  assert!(c.len() > 2);
  for ch in &c {
    assert!(ch.text.starts_with("```rust\n"), "{}", &ch.text[..20]);
    assert!(ch.text.ends_with("\n```"));
  }
  assert_eq!(c[0].line_start, 1);
  assert!(c.last().unwrap().line_end >= 200);
}

#[test]
fn ids_are_stable_and_local() {
  let a = chunk_page("T", "# A\n\none\n\n# B\n\ntwo\n", 1, &ChunkConfig::default()).chunks;
  let b = chunk_page("T", "# A\n\none\n\n# B\n\ntwo changed\n", 1, &ChunkConfig::default()).chunks;
  assert_eq!(a[0].id, b[0].id);
  assert_ne!(a[1].id, b[1].id);
  assert_eq!(a[0].id.len(), 16);
}

#[test]
fn empty_body_yields_title_chunk() {
  let c = chunk_page("Only Title", "", 4, &ChunkConfig::default()).chunks;
  assert_eq!(c.len(), 1);
  assert_eq!(c[0].embedding_text(), "Only Title");
}

#[test]
fn sections_group_chunks_and_split_when_huge() {
  let para = "Retrieval systems rank passages by lexical and semantic evidence. ".repeat(12);
  let body = format!("# A\n\n{para}\n\n{para}\n\n# B\n\nshort\n");
  let page = chunk_page("T", &body, 1, &ChunkConfig::default());
  assert_eq!(page.sections.len(), 2);
  assert!(page.chunks.len() >= 3);
  assert!(page.chunks.iter().all(|c| (c.section as usize) < page.sections.len()));
  assert_eq!(page.chunks.last().unwrap().section, 1);
  let huge = format!("# H\n\n{}", format!("{para}\n\n").repeat(20));
  let page = chunk_page("T", &huge, 1, &ChunkConfig::default());
  assert!(page.sections.len() >= 2, "{}", page.sections.len());
  for s in &page.sections {
    assert!(estimate_tokens(&s.plain) <= SECTION_MAX_TOKENS + 8);
  }
}

#[test]
fn over_long_words_and_code_lines_are_cut_to_the_window() {
  let cfg = ChunkConfig::default();
  let blob: String = (0..20_000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
  let long_punct = "-".repeat(5_000);
  let cjk = "卡片盒笔记法".repeat(300);
  for body in [
    format!("{blob} tail"),
    format!("```\n{blob}\n```\n"),
    format!("Intro.\n\n```js\nshort();\n{blob}\nend();\n```\n"),
    long_punct.clone(),
    format!("{cjk}{blob}"),
  ] {
    let page = chunk_page("T", &body, 1, &cfg);
    for c in &page.chunks {
      assert!(estimate_tokens(&c.text) <= cfg.max_tokens, "{} tokens", estimate_tokens(&c.text));
    }
    // Nothing is lost: the blob's characters all reach some chunk.
    let total: usize =
      page.chunks.iter().map(|c| c.text.matches(|ch: char| ch.is_alphanumeric()).count()).sum();
    assert!(total >= body.matches(|ch: char| ch.is_alphanumeric()).count(), "characters lost");
  }
  let code = chunk_page("T", &format!("```js\n{blob}\n```\n"), 1, &cfg).chunks;
  assert!(code.len() > 5 && code.iter().all(|c| c.text.starts_with("```js\n") && c.text.ends_with("\n```")));
}

#[test]
fn indented_code_is_not_refenced_with_its_first_line() {
  // Found by fuzzing: the first line of an indented code block was taken for a fence and
  // repeated in every part (and the part's line range did not contain it).
  let code: String = (0..40).map(|i| format!("    let variable_{i} = compute({i});\n")).collect();
  let body = format!("Intro.\n\n{code}");
  let c = chunk_page("T", &body, 1, &ChunkConfig { max_tokens: 40, overlap_tokens: 0 }).chunks;
  assert!(c.len() > 3);
  assert_eq!(c.iter().filter(|ch| ch.text.contains("variable_0 ")).count(), 1, "{c:#?}");
  for ch in &c {
    let first = ch.text.lines().next().unwrap().trim();
    let line = body.lines().nth(ch.line_start as usize - 1).unwrap();
    assert!(line.contains(first), "chunk starts with {first:?} but its range starts at {line:?}");
  }
}

#[test]
fn long_fence_lines_are_repeated_as_bare_markers_or_not_at_all() {
  // Found by fuzzing: a fence line with a long info string was repeated in every part and
  // pushed each part past the window.
  let cfg = ChunkConfig { max_tokens: 32, overlap_tokens: 0 };
  let code: String = (0..20).map(|i| format!("x{i} = {i};\n")).collect();
  let info = "rust ".to_string() + &"attr,".repeat(20);
  let c = chunk_page("T", &format!("```{info}\n{code}```\n"), 1, &cfg).chunks;
  assert!(c.len() > 1);
  for ch in &c {
    assert!(estimate_tokens(&ch.text) <= 32, "{}", ch.text);
    assert!(ch.text.starts_with("```\n") && ch.text.ends_with("\n```"), "{}", ch.text);
  }
  // A fence too long even as a bare marker: the block is split like prose.
  let ticks = "`".repeat(30);
  let c = chunk_page("T", &format!("{ticks}\n{code}{ticks}\n"), 1, &cfg).chunks;
  assert!(c.iter().all(|ch| estimate_tokens(&ch.text) <= 32));
}

#[test]
fn split_words_prefers_whitespace_and_respects_char_boundaries() {
  let text = "alpha beta gamma delta";
  let cuts = split_words(text, 0, text.len(), 2);
  assert_eq!(cuts.iter().map(|&(a, b)| &text[a..b]).collect::<Vec<_>>(), vec!["alpha beta", " gamma delta"]);
  let word = "é".repeat(40); // one 40-character word: 5 tokens
  let cuts = split_words(&word, 0, word.len(), 2);
  assert!(cuts.iter().all(|&(a, b)| estimate_tokens(&word[a..b]) <= 2 && word.is_char_boundary(a)));
  assert_eq!(cuts.iter().map(|&(a, b)| b - a).sum::<usize>(), word.len());
}

/// A counter with no relation to the estimate: one token per character of each word.
struct Chars;
impl TokenCounter for Chars {
  fn count(&self, text: &str) -> usize {
    text.split_whitespace().map(|w| w.chars().count()).sum()
  }
  fn label(&self) -> String {
    "chars".into()
  }
}

#[test]
fn split_by_count_cuts_before_words_and_inside_over_long_ones() {
  let text = "ab cd efghijklmn op";
  let cuts = split_by_count(&Chars, text, 0, text.len(), 4);
  let parts: Vec<&str> = cuts.iter().map(|&(a, b)| &text[a..b]).collect();
  assert_eq!(parts, vec!["ab cd", " efgh", "ijkl", "mn op"]);
  let word = "é".repeat(9);
  let cuts = split_by_count(&Chars, &word, 0, word.len(), 4);
  assert_eq!(cuts.iter().map(|&(a, b)| word[a..b].chars().count()).collect::<Vec<_>>(), vec![4, 4, 1]);
}

#[test]
fn chunks_are_sized_by_the_given_counter() {
  let cfg = ChunkConfig { max_tokens: 60, overlap_tokens: 8 };
  let code: String = (0..40).map(|i| format!("let value_{i} = compute({i});\n")).collect();
  let blob = "x".repeat(500);
  let body = format!(
    "# A\n\n{}\n\n```rust\n{code}```\n\n```\n{blob}\n```\n\n{blob} tail",
    "Words of a sentence here. ".repeat(40)
  );
  let by_chars = chunk_page_with("T", &body, 1, &cfg, &Chars).chunks;
  let by_estimate = chunk_page_with("T", &body, 1, &cfg, &Estimate).chunks;
  assert!(by_chars.len() > by_estimate.len(), "{} vs {}", by_chars.len(), by_estimate.len());
  for c in &by_chars {
    assert!(Chars.count(&c.text) <= cfg.max_tokens, "{} chars-tokens: {}", Chars.count(&c.text), c.text);
  }
  // The estimate path is `chunk_page`'s.
  assert_eq!(by_estimate, chunk_page("T", &body, 1, &cfg).chunks);
}

#[test]
fn plain_text_strips_markup() {
  assert_eq!(plain_text("**Bold** [link](http://x) `code`\n\n- item"), "Bold link code item");
}

/// The plain text as it was first written (every event's text after a space, separators added
/// freely, whitespace collapsed at the end): `plain_text` streams the words instead, and must
/// give the same string (chunk plain text is what is indexed and embedded).
fn plain_text_reference(markdown: &str) -> String {
  let mut out = String::new();
  for ev in Parser::new_ext(markdown, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
    match ev {
      Event::Text(t) | Event::Code(t) => {
        out.push(' ');
        out.push_str(&t);
      }
      Event::SoftBreak | Event::HardBreak | Event::End(_) | Event::Rule => out.push(' '),
      _ => {}
    }
  }
  out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn plain_text_streams_the_same_words_as_the_collapsing_reference() {
  let samples = [
    "",
    "   \n\n  ",
    "# Title\n\nSome *emph* and **strong** text_with_underscores and foo_bar_.\n",
    "A [link](http://x.y/z) and [[wiki/link|Label]], `code  span`, ~~struck~~.\n\n---\n\nNext\u{a0}word\ttab",
    "| a | b |\n|---|---|\n| 1 | two words |\n\n> quoted\n> lines\n\n- item one\n- item  two\n",
    "```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\n    indented code\n\nhard  \nbreak",
    "1. first\n2) second\n\n<div>html</div>\n\n&amp; &copy; \\*escaped\\* 卡片盒 text",
  ];
  for s in samples {
    assert_eq!(plain_text(s), plain_text_reference(s), "{s:?}");
    // The map's events: in order, each the words of its source range.
    let mut map = Vec::new();
    let plain = render_plain(s, Some(&mut map));
    assert_eq!(plain, plain_text(s));
    for (k, e) in map.iter().enumerate() {
      assert!(e.plain.0 < e.plain.1 && e.plain.1 <= plain.len() && e.src.0 < e.src.1 && e.src.1 <= s.len());
      assert!(k == 0 || (map[k - 1].plain.1 < e.plain.0 && map[k - 1].src.1 <= e.src.0), "{s:?}: {map:?}");
    }
  }
}

#[test]
fn finer_chunking_needs_enough_short_blocks() {
  let cfg = ChunkConfig::default();
  let small =
    ChunkConfig { max_tokens: SHORT_BLOCK_CHUNK_TOKENS, overlap_tokens: SHORT_BLOCK_CHUNK_TOKENS / 4 };
  let n = SHORT_BLOCK_SECTION_MIN_BLOCKS;
  assert_eq!(finer_chunking(&cfg, &mut vec![20; n - 1]), cfg, "too few blocks");
  assert_eq!(finer_chunking(&cfg, &mut vec![20; n]), small);
  assert_eq!(finer_chunking(&cfg, &mut vec![SHORT_BLOCK_TOKENS; n]), small, "the bound is inclusive");
  assert_eq!(finer_chunking(&cfg, &mut vec![SHORT_BLOCK_TOKENS + 1; n]), cfg, "median above the bound");
  // The median decides: a few long (or unsplittable) blocks among many short ones do not.
  let mut mixed = vec![10; n];
  mixed.extend([usize::MAX; 3]);
  assert_eq!(finer_chunking(&cfg, &mut mixed), small);
  let mut mostly_long = vec![usize::MAX; n];
  mostly_long.extend([10; 3]);
  assert_eq!(finer_chunking(&cfg, &mut mostly_long), cfg);
  // Smaller configured chunks stay as they are.
  let tiny = ChunkConfig { max_tokens: 64, overlap_tokens: 8 };
  assert_eq!(finer_chunking(&tiny, &mut vec![20; n]), tiny);
}

#[test]
fn a_conversation_is_chunked_finer_than_prose_of_the_same_length() {
  let turn = |i: usize| {
    format!(
      "{}: we talked about the trip to the lake and the painting class on day {i}.\n\n",
      ["Ann", "Bo"][i % 2]
    )
  };
  let chat: String = (0..40).map(turn).collect();
  let prose: String = (0..4)
    .map(|i| {
      let sentence =
        format!("The study {i} measured outcomes in several cohorts over many years of follow up. ");
      format!("{}\n\n", sentence.repeat(10))
    })
    .collect();
  let cfg = ChunkConfig::default();
  let chat_chunks = chunk_page("T", &format!("# Session\n\n{chat}"), 1, &cfg).chunks;
  let prose_chunks = chunk_page("T", &format!("# Study\n\n{prose}"), 1, &cfg).chunks;
  let most = |c: &[Chunk]| c.iter().map(|c| estimate_tokens(&c.text)).max().unwrap();
  assert!(most(&chat_chunks) <= SHORT_BLOCK_CHUNK_TOKENS, "chat chunks up to {}", most(&chat_chunks));
  assert!(most(&prose_chunks) > SHORT_BLOCK_CHUNK_TOKENS, "prose keeps the default size");
  // A bulleted list is one block, however many short items it has.
  let list: String = (0..40).map(|i| format!("- item {i}: the trip to the lake on day {i}\n")).collect();
  let list_chunks = chunk_page("T", &format!("# List\n\n{list}"), 1, &cfg).chunks;
  assert!(most(&list_chunks) > SHORT_BLOCK_CHUNK_TOKENS, "a list keeps the default size");
  assert!(chat_chunks.len() > 2 * estimate_tokens(&chat) / cfg.max_tokens, "{} chunks", chat_chunks.len());
  // Every turn is in some chunk, whole.
  for i in 0..40 {
    let t = turn(i);
    assert!(chat_chunks.iter().any(|c| c.text.contains(t.trim_end())), "turn {i}");
  }
}

/// Span invariants for every chunk of a page: inside its section's plain text, on char
/// boundaries, start ≤ end, starts non-decreasing within a section; a section of one chunk is
/// spanned whole. Returns each chunk's span text.
fn span_texts(page: &ChunkedPage) -> Vec<&str> {
  let mut last: Option<(u32, u32)> = None; // (section, start)
  let mut out = Vec::new();
  for c in &page.chunks {
    let plain = &page.sections[c.section as usize].plain;
    let (s, e) = (c.span.0 as usize, c.span.1 as usize);
    assert!(s <= e && e <= plain.len(), "chunk {} span {:?} of {}", c.ordinal, c.span, plain.len());
    assert!(plain.is_char_boundary(s) && plain.is_char_boundary(e), "chunk {} span {:?}", c.ordinal, c.span);
    if let Some((section, start)) = last.filter(|(section, _)| *section == c.section) {
      assert!(c.span.0 >= start, "chunk {} of section {section} starts before the previous one", c.ordinal);
    }
    if page.chunks.iter().filter(|d| d.section == c.section).count() == 1 {
      assert_eq!(c.span, (0, plain.len() as u32), "one-chunk section {}", c.section);
    }
    last = Some((c.section, c.span.0));
    out.push(&plain[s..e]);
  }
  out
}

/// Each chunk's span in its section's plain text holds exactly the chunk's plain text (its
/// Markdown renders the same alone), spans of one section start in chunk order (overlapping
/// where chunks overlap), and each section's chunks start over from its own text.
#[test]
fn spans_place_each_chunk_in_its_section() {
  let para: String =
    (0..40).map(|i| format!("Sentence {i} of the retrieval notes about ranking. ")).collect();
  let body = format!("Intro *line*.\n\n# A\n\n{para}\n\n{para}\n\n# B\n\nshort `code` here\n");
  let page = chunk_page("T", &body, 1, &ChunkConfig::default());
  assert!(page.chunks.iter().filter(|c| c.section == 1).count() >= 3);
  for (c, text) in page.chunks.iter().zip(span_texts(&page)) {
    assert_eq!(text, c.plain(), "chunk {}", c.ordinal);
  }
  // Within a section, starts strictly increase; overlapping chunks overlap in its text too.
  let spans: Vec<(u32, u32)> = page.chunks.iter().map(|c| c.span).collect();
  for k in 2..page.chunks.len() {
    if page.chunks[k].section == page.chunks[k - 1].section {
      assert!(spans[k].0 > spans[k - 1].0, "{:?}", spans);
    }
  }
  assert_eq!((page.chunks[1].section, page.chunks[2].section), (1, 1));
  assert!(spans[2].0 < spans[1].1, "{:?} {:?}", spans[1], spans[2]);
  // A page without body text: one empty chunk at the start of an empty section.
  let empty = chunk_page("T", "", 1, &ChunkConfig::default());
  assert_eq!(empty.chunks[0].span, (0, 0));
  assert_eq!(empty.chunks[0].plain(), "");
}

/// A paragraph whose sentences are cut into chunks with the same sentence many times over: each
/// chunk's span is its own place (not the first occurrence of its words).
#[test]
fn spans_of_repeated_sentences_are_their_own_places() {
  let para = "The same sentence again and again in this note. ".repeat(80);
  let page = chunk_page("T", &format!("# R\n\n{para}\n"), 1, &ChunkConfig::default());
  assert!(page.chunks.len() >= 4);
  let texts = span_texts(&page);
  for (c, text) in page.chunks.iter().zip(&texts) {
    assert_eq!(*text, c.plain(), "chunk {}", c.ordinal);
  }
  let last = page.chunks.last().unwrap();
  assert_eq!(last.span.1 as usize, page.sections[0].plain.len(), "the last chunk ends the section");
  assert!(page.chunks.windows(2).all(|w| w[0].span.0 < w[1].span.0));
}

/// Multibyte text cut by sentences (accented prose, CJK sentence ends) and inside over-long words
/// (a CJK run without punctuation, an accented blob): spans stay on char boundaries and hold each
/// chunk's plain text.
#[test]
fn spans_stay_on_char_boundaries_in_multibyte_text() {
  let accented: String =
    (0..60).map(|i| format!("Phrase {i} décrit l'été à Montréal, où ça gèle. ")).collect();
  let cjk_sentences: String = (0..120).map(|i| format!("卡片盒笔记法第{i}条。")).collect();
  let cjk_run = "卡片盒笔记法".repeat(300);
  let blob = "é".repeat(3000);
  for body in [
    format!("# É\n\n{accented}\n"),
    format!("# 卡\n\n{cjk_sentences}\n"),
    format!("Intro.\n\n{cjk_run}\n"),
    format!("Avant {blob} après.\n"),
  ] {
    let page = chunk_page("T", &body, 1, &ChunkConfig::default());
    assert!(page.chunks.len() >= 3, "{} chunks", page.chunks.len());
    for (c, text) in page.chunks.iter().zip(span_texts(&page)) {
      assert_eq!(text, c.plain(), "chunk {}", c.ordinal);
    }
  }
}

/// A fenced code block cut into re-fenced parts: each part's span is its code in the section's
/// plain text.
#[test]
fn spans_of_a_split_code_block_hold_each_parts_code() {
  let code: String = (0..200).map(|i| format!("let variable_{i} = compute({i});\n")).collect();
  let page = chunk_page(
    "T",
    &format!("# Code\n\nBefore.\n\n```rust\n{code}```\n\nAfter.\n"),
    1,
    &ChunkConfig::default(),
  );
  assert!(page.chunks.len() > 2);
  for (c, text) in page.chunks.iter().zip(span_texts(&page)) {
    assert_eq!(text, c.plain(), "chunk {}", c.ordinal);
  }
}

/// An emphasis opened in one chunk and closed in the next: blocks of a section are joined by a
/// newline, so the section renders it as emphasis, each chunk alone as a literal `*`. The span
/// holds the section's rendering of the chunk's words (no `*`).
#[test]
fn a_span_holds_the_sections_words_where_an_emphasis_is_cut() {
  let para = |i: usize| format!("Paragraph {i} of the ranking notes with several more words.");
  let body: String = (0..30)
    .map(|i| match i {
      5 => format!("*{}\n\n", para(i)),
      9 => format!("{}*\n\n", para(i)),
      _ => format!("{}\n\n", para(i)),
    })
    .collect();
  let page = chunk_page("T", &format!("# E\n\n{body}"), 1, &ChunkConfig::default());
  assert!(page.chunks.len() >= 3);
  let mut differ = 0;
  for (c, text) in page.chunks.iter().zip(span_texts(&page)) {
    assert_eq!(text, plain_text(&c.text.replace('*', "")), "chunk {}", c.ordinal);
    differ += usize::from(text != c.plain());
  }
  assert!(differ >= 2, "{differ} chunks render the cut emphasis differently alone");
}

/// A code fence whose marker is too long to repeat is split like prose: its lines are pieces
/// inside one code block of the section's text, one text event that chunk boundaries cut. Each
/// span holds exactly the chunk's code lines, as code (a middle chunk alone renders them as
/// prose: `*x1*` is emphasis there).
#[test]
fn spans_cut_inside_one_code_event_hold_the_chunks_lines() {
  let cfg = ChunkConfig { max_tokens: 32, overlap_tokens: 8 };
  let code: String = (0..30).map(|i| format!("*x{i}* = {i};\n")).collect();
  let ticks = "`".repeat(30);
  let page = chunk_page("T", &format!("{ticks}\n{code}{ticks}\n"), 1, &cfg);
  assert!(page.chunks.len() >= 3 && page.sections.len() == 1);
  let mut differ = 0;
  for (c, text) in page.chunks.iter().zip(span_texts(&page)) {
    let code_words: Vec<&str> =
      c.text.lines().filter(|l| !l.starts_with('`')).flat_map(str::split_whitespace).collect();
    assert_eq!(text, code_words.join(" "), "chunk {}", c.ordinal);
    differ += usize::from(text != c.plain());
  }
  assert!(differ >= 1, "every chunk renders its code alone as the section does");
}

/// A chunk boundary inside a text event: words match one to one where the source holds them as
/// they are (a boundary in whitespace goes to the next word's start or the previous word's end,
/// one inside a word to the same byte); otherwise (an escape, an entity) the offset is
/// interpolated, on a char boundary.
#[test]
fn plain_offsets_inside_an_event() {
  let source = "alpha  beta\tgamma";
  let mut map = Vec::new();
  let plain = render_plain(source, Some(&mut map));
  assert_eq!(plain, "alpha beta gamma");
  assert_eq!(map, vec![PlainEvent { src: (0, source.len()), plain: (0, plain.len()) }]);
  let e = &map[0];
  assert_eq!(plain_offset(source, &plain, e, 6, true), 6, "whitespace → next word's start");
  assert_eq!(plain_offset(source, &plain, e, 6, false), 5, "whitespace → previous word's end");
  assert_eq!(plain_offset(source, &plain, e, 9, true), 8, "inside a word: the same byte");
  assert_eq!(plain_span(source, &plain, &map, 6, 11), (6, 10));
  assert_eq!(plain_span(source, &plain, &map, 5, 6), (6, 6), "no words: empty");
  // An event whose text is not its source: interpolated inside the event, on a char boundary.
  let e = PlainEvent { src: (0, 10), plain: (0, 6) };
  let (source, plain) = ("&eacute;é!", "ééé");
  let at = plain_offset(source, plain, &e, 5, true);
  assert!(at <= plain.len() && plain.is_char_boundary(at), "{at}");
  // Markdown with escapes and entities cut into chunks stays within its sections.
  let para: String =
    (0..60).map(|i| format!("Item {i} costs \\*5\\* &amp; more &eacute;t&eacute;. ")).collect();
  let page = chunk_page("T", &format!("# X\n\n{para}\n"), 1, &ChunkConfig::default());
  assert!(page.chunks.len() >= 3);
  for (c, text) in page.chunks.iter().zip(span_texts(&page)) {
    let words: Vec<&str> = text.split(' ').collect();
    assert!(words.len() + 8 >= c.plain().split(' ').count(), "chunk {}: {text:?}", c.ordinal);
  }
}

/// A section of one chunk hands its own text to the chunk (parsed once); every chunk's plain
/// text is still exactly the plain text of its Markdown, single-chunk sections or not, and the
/// embedding text is the prefix and that plain text. A chunk of a multi-chunk section keeps no
/// plain text (rendered on demand).
#[test]
fn one_chunk_sections_share_their_plain_text_exactly() {
  let long: String = (0..40).map(|i| format!("Sentence {i} about *ranking* and [links](x.md). ")).collect();
  let body = format!(
    "Intro with **bold** and `code`.\n\n# A\n\n- one\n- two [ref]\n\n[ref]: https://example.org\n\n# B\n\n{long}\n\n{long}\n\n# C\n\n```rust\nfn main() {{}}\n```\n"
  );
  let page = chunk_page("T", &body, 1, &ChunkConfig::default());
  let mut single = 0;
  for (k, s) in page.sections.iter().enumerate() {
    let chunks: Vec<&Chunk> = page.chunks.iter().filter(|c| c.section as usize == k).collect();
    if chunks.len() == 1 {
      single += 1;
      assert_eq!(chunks[0].plain(), s.plain);
      assert_eq!(chunks[0].known_plain.as_deref(), Some(s.plain.as_str()));
      assert_eq!(chunks[0].span, (0, s.plain.len() as u32));
      assert_eq!(chunks[0].embedding_text(), format!("{}\n{}", chunks[0].prefix, s.plain));
    } else {
      assert!(chunks.iter().all(|c| c.known_plain.is_none()), "section {k}");
    }
  }
  assert!(single >= 3 && page.chunks.len() > page.sections.len(), "{single} of {:?}", page.sections.len());
  for (c, text) in page.chunks.iter().zip(span_texts(&page)) {
    assert_eq!(c.plain(), plain_text(&c.text), "chunk {}", c.ordinal);
    assert_eq!(c.embedding_text(), format!("{}\n{}", c.prefix, plain_text(&c.text)), "chunk {}", c.ordinal);
    assert_eq!(text, c.plain(), "chunk {}", c.ordinal);
  }
}

/// A paragraph of no-break spaces is a Markdown paragraph but carries no text: it makes no
/// (empty) chunk, and the chunks of the page's other sections are those of the page without it.
/// Found by the chunker fuzz target.
#[test]
fn a_paragraph_of_no_break_spaces_makes_no_empty_chunk() {
  let cfg = ChunkConfig::default();
  for nbsp in ["\u{a0}\u{a0}", "\u{a0}", "\u{2003} \u{a0}"] {
    let body = format!("# One\n\n{nbsp}\n\n# Two\n\nSome text about ranking.\n");
    let page = chunk_page("T", &body, 1, &cfg);
    assert!(page.chunks.iter().all(|c| !c.text.trim().is_empty()), "{nbsp:?}: {:?}", page.chunks);
    let plain = chunk_page("T", "# One\n\n# Two\n\nSome text about ranking.\n", 1, &cfg);
    let ids = |p: &ChunkedPage| p.chunks.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&page), ids(&plain), "{nbsp:?}");
    // Mixed with text, the paragraph does not change the section's chunk either.
    let mixed = chunk_page("T", &format!("Alpha.\n\n{nbsp}\n\nBeta.\n"), 1, &cfg);
    assert_eq!(mixed.chunks.len(), 1);
    assert!(!mixed.chunks[0].text.contains('\u{a0}'), "{:?}", mixed.chunks[0].text);
  }
}
