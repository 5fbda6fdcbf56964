//! Frontmatter parser and page parsing (vault/frontmatter.rs, vault/page.rs).
//!
//! Input: the bytes of a page file, read the way reindex reads them (`Page::from_file_bytes`) and
//! parsed from their lossy text. An input starting with `!` is expanded instead: the rest is
//! repeated into a YAML block of 120 to 135 KiB (byte 1 picks the size), so both sides of the
//! 128 KiB limit are exercised without committing huge seeds.
//!
//! Invariants beyond "no panic": the result is deterministic; an accepted page starts with the
//! opening fence, its YAML block is within FRONTMATTER_MAX_BYTES, its nesting within
//! FRONTMATTER_MAX_DEPTH, its keys unique at every level, its `type` a non-empty string, its body a
//! suffix of the LF-normalized text starting on `body_start_line`; a rejected page carries one of
//! the contract's codes and a position inside the file; `Page::parse` agrees with the parser;
//! reading the bytes rejects exactly the files with a NUL byte (`page_binary`), warns exactly on
//! invalid UTF-8 (`page_invalid_utf8`) and otherwise parses like the text.

use llm_wiki_core::vault::frontmatter::{
  normalize_newlines, parse_page_text, YamlValue, FRONTMATTER_MAX_BYTES, FRONTMATTER_MAX_DEPTH,
};
use llm_wiki_core::vault::{Page, Role};

const CODES: &[&str] = &[
  "frontmatter_missing",
  "frontmatter_parse_error",
  "frontmatter_duplicate_key",
  "frontmatter_alias_forbidden",
  "frontmatter_custom_tag_forbidden",
  "frontmatter_multiple_documents",
  "frontmatter_limit_bytes",
  "frontmatter_limit_depth",
  "concept_missing_type",
];

fn page_bytes(data: &[u8]) -> Vec<u8> {
  if data.len() > 2 && data[0] == b'!' {
    let target = (120 + data[1] as usize % 16) * 1024;
    let unit = String::from_utf8_lossy(&data[2..]);
    let mut yaml = String::from("type: fuzz\n");
    while yaml.len() < target {
      yaml.push_str(&unit);
    }
    return format!("---\n{yaml}\n---\nbody\n").into_bytes();
  }
  data.to_vec()
}

/// Nesting depth of a value: scalars 0, a collection 1 + its deepest child.
fn depth(v: &YamlValue) -> usize {
  match v {
    YamlValue::Seq(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
    YamlValue::Map(entries) => 1 + entries.iter().map(|(_, v)| depth(v)).max().unwrap_or(0),
    _ => 0,
  }
}

fn keys_unique(entries: &[(String, YamlValue)]) -> bool {
  let mut seen = std::collections::HashSet::new();
  entries.iter().all(|(k, _)| seen.insert(k.as_str())) && entries.iter().all(|(_, v)| values_unique(v))
}

fn values_unique(v: &YamlValue) -> bool {
  match v {
    YamlValue::Seq(items) => items.iter().all(values_unique),
    YamlValue::Map(entries) => keys_unique(entries),
    _ => true,
  }
}

/// One input (panics on a violated invariant).
pub fn run(data: &[u8]) {
  let bytes = page_bytes(data);
  let read = Page::from_file_bytes("fuzz/page", "/fuzz/page.md".into(), &bytes);
  let text = String::from_utf8_lossy(&bytes).into_owned();
  let result = parse_page_text(&text);
  // Determinism (Debug text: NaN floats make PartialEq useless).
  assert_eq!(format!("{result:?}"), format!("{:?}", parse_page_text(&text)));
  let normalized = normalize_newlines(&text);
  let file_lines = normalized.matches('\n').count() + 1;
  let page = Page::parse("fuzz/page", "/fuzz/page.md".into(), &text);
  if bytes.contains(&0) {
    assert_eq!(read.as_ref().map(|_| ()).unwrap_err().code, "page_binary");
  } else {
    match (&read, &page) {
      (Ok((from_bytes, warning)), Ok(parsed)) => {
        assert_eq!(from_bytes.body, parsed.body);
        assert_eq!(warning.is_some(), std::str::from_utf8(&bytes).is_err());
        assert!(warning.as_ref().is_none_or(|w| w.code == "page_invalid_utf8" && w.line.is_some()));
      }
      (Err(a), Err(b)) => assert_eq!(a, b),
      _ => panic!("reading the bytes and parsing the text disagree"),
    }
  }
  match result {
    Ok(fm) => {
      assert!(normalized.starts_with("---\n"));
      assert!(normalized.ends_with(&fm.body), "body is not a suffix of the page");
      let body_offset = normalized.len() - fm.body.len();
      // "---\n" + YAML + "---" line (+ its newline, + at most one removed blank line).
      assert!(body_offset >= 7, "body starts inside the opening fence");
      assert!(body_offset <= 4 + FRONTMATTER_MAX_BYTES + 5, "YAML block over the limit was accepted");
      if !fm.body.is_empty() {
        let line = normalized[..body_offset].matches('\n').count() + 1;
        assert_eq!(fm.body_start_line as usize, line, "body_start_line does not point at the body");
      }
      assert!(fm.body_start_line >= 3);
      let top = YamlValue::Map(fm.entries.clone());
      assert!(depth(&top) <= FRONTMATTER_MAX_DEPTH, "nesting {} accepted", depth(&top));
      assert!(keys_unique(&fm.entries), "duplicate keys accepted");
      let ty = fm.get("type").and_then(|v| v.as_str()).expect("type is a string");
      assert!(!ty.trim().is_empty());
      let page = page.expect("Page::parse accepts what parse_page_text accepts");
      assert_eq!(page.body, fm.body);
      assert_eq!(page.body_start_line, fm.body_start_line);
      assert_eq!(page.role, Role::for_type(ty));
      assert_eq!(page.meta.page_type, ty.trim());
      assert!(!page.meta.title.is_empty());
      assert_eq!(page.meta.title, page.meta.title.trim());
      for list in [&page.meta.aliases, &page.meta.tags, &page.meta.recall_triggers] {
        assert!(list.iter().all(|s| !s.is_empty() && s == s.trim()));
      }
      assert!(page.meta.relations.iter().all(|r| !r.target.is_empty() && !r.relation_type.is_empty()));
      // Metadata must serialize (the manifest stores it as JSON).
      serde_json::to_string(&page.meta).expect("page metadata serializes");
      for (_, v) in &fm.entries {
        let _ = v.to_json();
      }
    }
    Err(e) => {
      assert!(CODES.contains(&e.code), "unknown code {}", e.code);
      assert!(!e.message.is_empty());
      if let Some(line) = e.line {
        assert!(
          line >= 1 && line as usize <= file_lines + 1,
          "error line {line} outside a {file_lines}-line file"
        );
      }
      if let Some(col) = e.column {
        assert!(col >= 1);
      }
      assert_eq!(page.expect_err("Page::parse rejects what parse_page_text rejects"), e);
    }
  }
}
