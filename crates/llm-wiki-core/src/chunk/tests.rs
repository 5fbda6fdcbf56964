//! Unit tests of the chunker and the token counters.

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

/// Each chunk's range in its section's plain text holds exactly the chunk's plain text, ranges
/// of one section start in chunk order (overlapping where chunks overlap), and each section's
/// chunks start over from its own text.
#[test]
fn chunk_spans_place_each_chunk_in_its_section() {
  let para: String =
    (0..40).map(|i| format!("Sentence {i} of the retrieval notes about ranking. ")).collect();
  let body = format!("Intro *line*.\n\n# A\n\n{para}\n\n{para}\n\n# B\n\nshort `code` here\n");
  let page = chunk_page("T", &body, 1, &ChunkConfig::default());
  let spans = chunk_spans(&page);
  assert_eq!(spans.len(), page.chunks.len());
  assert!(page.chunks.iter().filter(|c| c.section == 1).count() >= 3);
  let mut last: Option<(u32, u32)> = None;
  for (c, &(s, e)) in page.chunks.iter().zip(&spans) {
    let plain = &page.sections[c.section as usize].plain;
    assert_eq!(&plain[s as usize..e as usize], c.plain, "chunk {}", c.ordinal);
    if let Some((section, start)) = last.filter(|(section, _)| *section == c.section) {
      assert!(s > start, "chunk {} of section {section} starts before the previous one", c.ordinal);
    }
    last = Some((c.section, s));
  }
  // Overlapping chunks overlap in the section's text too.
  let (a, b) = (spans[1], spans[2]);
  assert_eq!((page.chunks[1].section, page.chunks[2].section), (1, 1));
  assert!(b.0 < a.1, "{a:?} {b:?}");
  // A page without body text: one empty chunk at the start of an empty section.
  let empty = chunk_page("T", "", 1, &ChunkConfig::default());
  assert_eq!(chunk_spans(&empty), vec![(0, 0)]);
}

/// A chunk whose text renders differently alone is placed by estimate, inside its section.
#[test]
fn chunk_spans_estimate_a_chunk_not_found_in_its_section() {
  let mut page = chunk_page("T", "# A\n\none two three four\n", 1, &ChunkConfig::default());
  page.chunks[0].plain = "*one two".into();
  let spans = chunk_spans(&page);
  let len = page.sections[0].plain.len() as u32;
  assert_eq!(spans, vec![(0, 8.min(len))]);
}

/// A section of one chunk hands its own text to the chunk (parsed once); every chunk's plain
/// text is still exactly the plain text of its Markdown, single-chunk sections or not.
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
      assert_eq!(chunks[0].plain, s.plain);
    }
  }
  assert!(single >= 3 && page.chunks.len() > page.sections.len(), "{single} of {:?}", page.sections.len());
  for c in &page.chunks {
    assert_eq!(c.plain, plain_text(&c.text), "chunk {}", c.ordinal);
  }
}
