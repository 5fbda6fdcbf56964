//! Outbound links of a page body: Markdown links (`[text](../concepts/rag.md#claim)`) and
//! Obsidian wikilinks (`[[concepts/rag#Claim|RAG]]`, `[[rag^block]]`), found by pulldown-cmark
//! (so links inside code are not links). Targets are kept as written (decoded, `.md` removed,
//! anchor split off); they are resolved against the vault's page ids by [`super::graph`],
//! because a wikilink by bare name needs the whole id set.

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag};
use serde::{Deserialize, Serialize};

/// Most distinct link edges kept per page. Not fitted: a bound on work and manifest size (a
/// page with more distinct links is reported with `page_links_truncated`).
pub const MAX_LINKS_PER_PAGE: usize = 1_000;

/// How a link was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
  /// `[text](path.md)`.
  Markdown,
  /// `[[target]]`.
  Wiki,
}

/// One outbound link, unresolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawLink {
  /// Target as written: percent-decoded, `\` → `/`, without `.md` and without the anchor.
  /// Markdown targets are relative to the linking page's folder unless they start with `/`.
  #[serde(rename = "t")]
  pub target: String,
  /// Heading (`#Claim`) or block (`^abc`) anchor, without the `#`.
  #[serde(rename = "a", skip_serializing_if = "Option::is_none", default)]
  pub anchor: Option<String>,
  /// Markdown or wiki link.
  #[serde(rename = "k")]
  pub kind: LinkKind,
  /// 1-based line of the link in the page file.
  #[serde(rename = "l")]
  pub line: u32,
}

/// Links of one body, deduplicated by (target, anchor, kind) in first-seen order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractedLinks {
  /// The links kept.
  pub links: Vec<RawLink>,
  /// Distinct links dropped beyond [`MAX_LINKS_PER_PAGE`].
  pub dropped: usize,
}

/// Decode `%XX` escapes (invalid escapes stay as written; invalid UTF-8 is replaced).
fn percent_decode(s: &str) -> String {
  let b = s.as_bytes();
  let mut out = Vec::with_capacity(b.len());
  let mut i = 0;
  while i < b.len() {
    if b[i] == b'%' && i + 2 < b.len() {
      let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
      if let Some(v) = hex {
        out.push(v);
        i += 3;
        continue;
      }
    }
    out.push(b[i]);
    i += 1;
  }
  String::from_utf8_lossy(&out).into_owned()
}

/// A URL with a scheme (`https:`, `mailto:`, `obsidian:`) is not a page link.
fn has_scheme(s: &str) -> bool {
  match s.find(':') {
    Some(i) => {
      let scheme = &s[..i];
      !scheme.is_empty()
        && scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    }
    None => false,
  }
}

/// Split `dest` into (target, anchor) for a page link, or `None` when it does not name a page.
fn split_target(dest: &str, kind: LinkKind) -> Option<(String, Option<String>)> {
  let dest = dest.trim();
  if dest.is_empty() || has_scheme(dest) || dest.starts_with("//") {
    return None;
  }
  let decoded = if kind == LinkKind::Markdown { percent_decode(dest) } else { dest.to_string() };
  let decoded = decoded.replace('\\', "/");
  // Markdown links drop `?query`; wikilinks anchor with `#heading` or `#^block` / `^block`.
  let (path, anchor) = match decoded.find(['#', '^']).filter(|_| kind == LinkKind::Wiki) {
    Some(i) => (&decoded[..i], Some(decoded[i..].trim_start_matches('#').to_string())),
    None => match decoded.find('#') {
      Some(i) => (&decoded[..i], Some(decoded[i + 1..].to_string())),
      None => (decoded.as_str(), None),
    },
  };
  let path = if kind == LinkKind::Markdown { path.split('?').next().unwrap_or("") } else { path };
  let path = path.trim();
  if path.is_empty() {
    return None; // an anchor within the page itself
  }
  let lower = path.to_ascii_lowercase();
  let path = if lower.ends_with(".md") {
    &path[..path.len() - 3]
  } else if kind == LinkKind::Markdown && path.rsplit('/').next().is_some_and(|f| f.contains('.')) {
    return None; // an image, PDF or other file, not a page
  } else {
    path
  };
  let anchor = anchor.map(|a| a.trim().to_string()).filter(|a| !a.is_empty());
  Some((path.to_string(), anchor))
}

/// Outbound page links of `body` (whose first line is line `body_start_line` of the file).
pub fn extract_links(body: &str, body_start_line: u32) -> ExtractedLinks {
  let mut out = ExtractedLinks::default();
  let mut seen = std::collections::HashSet::new();
  let line_starts: Vec<usize> =
    std::iter::once(0).chain(body.match_indices('\n').map(|(i, _)| i + 1)).collect();
  let line_of = |offset: usize| -> u32 {
    let idx = line_starts.partition_point(|s| *s <= offset).saturating_sub(1);
    body_start_line.saturating_add(idx as u32)
  };
  let parser = Parser::new_ext(body, Options::ENABLE_WIKILINKS | Options::ENABLE_TABLES);
  for (event, range) in parser.into_offset_iter() {
    let Event::Start(Tag::Link { link_type, dest_url, .. }) = event else {
      continue;
    };
    let kind = match link_type {
      LinkType::WikiLink { .. } => LinkKind::Wiki,
      LinkType::Inline | LinkType::Reference | LinkType::Collapsed | LinkType::Shortcut => LinkKind::Markdown,
      _ => continue, // autolinks and e-mail addresses
    };
    let Some((target, anchor)) = split_target(&dest_url, kind) else {
      continue;
    };
    if !seen.insert((target.clone(), anchor.clone(), kind)) {
      continue;
    }
    if out.links.len() >= MAX_LINKS_PER_PAGE {
      out.dropped += 1;
      continue;
    }
    out.links.push(RawLink { target, anchor, kind, line: line_of(range.start) });
  }
  out
}

#[cfg(test)]
mod tests {
  use super::*;

  fn targets(body: &str) -> Vec<(String, Option<String>, LinkKind, u32)> {
    extract_links(body, 5).links.into_iter().map(|l| (l.target, l.anchor, l.kind, l.line)).collect()
  }

  #[test]
  fn markdown_and_wiki_links_with_anchors() {
    let body = "See [RAG](../concepts/rag.md#claim) and [[concepts/bm25#Scope|BM25]].\n\n[[note^blk]] \
                [x](https://example.com) [y](img.png) [z](#local) [[self#h]]\n\n```\n[no](code.md)\n```\n\
                [sp](my%20page.md?x=1)\n";
    let t = targets(body);
    assert_eq!(
      t,
      vec![
        ("../concepts/rag".into(), Some("claim".into()), LinkKind::Markdown, 5),
        ("concepts/bm25".into(), Some("Scope".into()), LinkKind::Wiki, 5),
        ("note".into(), Some("^blk".into()), LinkKind::Wiki, 7),
        ("self".into(), Some("h".into()), LinkKind::Wiki, 7),
        ("my page".into(), None, LinkKind::Markdown, 12),
      ]
    );
  }

  #[test]
  fn duplicates_collapse_and_many_links_are_bounded() {
    assert_eq!(targets("[[a]] [[a]] [a](a.md) [[a#h]]").len(), 3);
    let body: String = (0..10_000).map(|i| format!("[[p{i}]] ")).collect();
    let e = extract_links(&body, 1);
    assert_eq!(e.links.len(), MAX_LINKS_PER_PAGE);
    assert_eq!(e.dropped, 10_000 - MAX_LINKS_PER_PAGE);
  }

  #[test]
  fn percent_decoding_is_lenient() {
    assert_eq!(percent_decode("a%20b%zz%"), "a b%zz%");
    assert_eq!(percent_decode("%E2%9C%93"), "✓");
  }
}
