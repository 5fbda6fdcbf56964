//! Outbound links of a page body: Markdown links (`[text](../concepts/rag.md#claim)`) and
//! Obsidian wikilinks (`[[concepts/rag#Claim|RAG]]`, `[[rag^block]]`), found by pulldown-cmark
//! (so links inside code are not links). Targets are kept as written (decoded, `.md` removed,
//! anchor split off); they are resolved against the vault's page ids by [`super::graph`],
//! because a wikilink by bare name needs the whole id set.

use arcstr::ArcStr;
use std::ops::Range;

use pulldown_cmark::{Event, LinkType, Parser, Tag};
use serde::{Deserialize, Serialize};

/// Most distinct link edges kept per page. Not fitted: a bound on work and manifest size (a
/// page with more distinct links is reported with `page_links_truncated`).
pub const MAX_LINKS_PER_PAGE: usize = 1_000;

/// How a link was written.
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "lowercase", skip_typescript))]
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

/// One outbound link as held by a [`LinkList`]: the fields of a [`RawLink`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link<'a> {
  /// See [`RawLink::target`].
  pub target: &'a str,
  /// See [`RawLink::anchor`].
  pub anchor: Option<&'a str>,
  /// See [`RawLink::kind`].
  pub kind: LinkKind,
  /// See [`RawLink::line`].
  pub line: u32,
}

impl Link<'_> {
  /// An owned copy.
  pub fn to_raw(&self) -> RawLink {
    RawLink {
      target: self.target.to_string(),
      anchor: self.anchor.map(str::to_string),
      kind: self.kind,
      line: self.line,
    }
  }
}

/// One link of a [`LinkList`]: its interned target, where its anchor ends in
/// [`LinkList::anchors`], its line and kind.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PackedLink {
  /// The target, shared with every other link to the same target ([`crate::intern`]).
  target: ArcStr,
  /// End of the anchor (it starts where the previous link's anchor ends; equal to that start
  /// when there is none or it is empty).
  anchor_end: u32,
  /// The line in the low 30 bits; bit 30: a wiki link; bit 31: an anchor is present.
  line_flags: u32,
}

const LINE_MASK: u32 = (1 << 30) - 1;
const WIKI_BIT: u32 = 1 << 30;
const ANCHOR_BIT: u32 = 1 << 31;

/// The outbound links of one page, packed: 16 bytes per link (an interned target, the anchor's
/// end, line and kind) and the page's anchors in one string, where a `Vec<RawLink>` spends 56
/// bytes per link plus one or two heap strings (with the allocator's overhead each). A 100k-page
/// vault holds millions of links in its manifest for the whole of a build, and they name the
/// same pages again and again: each distinct target is held once ([`crate::intern`]).
/// Serialized exactly as a `Vec<RawLink>` (the manifest's `links` array,
/// docs/STORE-FORMAT.md), so the format does not change.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LinkList {
  anchors: Box<str>,
  links: Box<[PackedLink]>,
}

impl std::fmt::Debug for LinkList {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.debug_list().entries(self.iter()).finish()
  }
}

impl LinkList {
  /// Number of links.
  pub fn len(&self) -> usize {
    self.links.len()
  }

  /// True when there is no link.
  pub fn is_empty(&self) -> bool {
    self.links.is_empty()
  }

  /// The links in order.
  pub fn iter(&self) -> impl Iterator<Item = Link<'_>> + '_ {
    let mut start = 0usize;
    self.links.iter().map(move |l| {
      let end = l.anchor_end as usize;
      let link = Link {
        target: l.target.as_str(),
        anchor: (l.line_flags & ANCHOR_BIT != 0).then(|| &self.anchors[start..end]),
        kind: if l.line_flags & WIKI_BIT != 0 { LinkKind::Wiki } else { LinkKind::Markdown },
        line: l.line_flags & LINE_MASK,
      };
      start = end;
      link
    })
  }

  /// Pack links (in order). Fails when a line does not fit in 30 bits or the anchors of one page
  /// exceed 4 GiB (neither can come from a page within [`crate::vault::read::MAX_PAGE_BYTES`]).
  pub fn try_from_links<'a>(links: impl IntoIterator<Item = Link<'a>>) -> Result<LinkList, String> {
    let mut p = Packer::default();
    for l in links {
      p.push(l)?;
    }
    Ok(p.finish())
  }

  /// Pack extracted links (lines of a page within the size limit always fit).
  pub fn from_raw(links: &[RawLink]) -> LinkList {
    let view = links.iter().map(|l| Link {
      target: &l.target,
      anchor: l.anchor.as_deref(),
      kind: l.kind,
      line: l.line.min(LINE_MASK),
    });
    Self::try_from_links(view).expect("lines clamped; a page's anchors are far below 4 GiB")
  }

  /// Owned copies of the links.
  pub fn to_raw(&self) -> Vec<RawLink> {
    self.iter().map(|l| l.to_raw()).collect()
  }
}

/// The JSON form of one link, borrowed (serialization without copying into [`RawLink`]s).
#[derive(Serialize)]
struct LinkOut<'a> {
  #[serde(rename = "t")]
  target: &'a str,
  #[serde(rename = "a", skip_serializing_if = "Option::is_none")]
  anchor: Option<&'a str>,
  #[serde(rename = "k")]
  kind: LinkKind,
  #[serde(rename = "l")]
  line: u32,
}

impl Serialize for LinkList {
  fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(self.iter().map(|l| LinkOut {
      target: l.target,
      anchor: l.anchor,
      kind: l.kind,
      line: l.line,
    }))
  }
}

impl<'de> Deserialize<'de> for LinkList {
  fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
    struct Visit;
    impl<'de> serde::de::Visitor<'de> for Visit {
      type Value = LinkList;
      fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of links")
      }
      fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<LinkList, A::Error> {
        // One link at a time: never a whole page's `Vec<RawLink>`, and strings borrowed from the
        // input where they have no escapes (a fresh process parses millions of links at 100k
        // pages; two heap strings per link were a third of that parse).
        let mut p = Packer::default();
        while let Some(l) = seq.next_element::<LinkIn>()? {
          let view = Link { target: &l.target, anchor: l.anchor.as_deref(), kind: l.kind, line: l.line };
          p.push(view).map_err(serde::de::Error::custom)?;
        }
        Ok(p.finish())
      }
    }
    d.deserialize_seq(Visit)
  }
}

/// A [`RawLink`] as read: its strings borrowed from the input when it has them unescaped.
#[derive(Deserialize)]
struct LinkIn<'a> {
  #[serde(rename = "t", borrow)]
  target: std::borrow::Cow<'a, str>,
  #[serde(rename = "a", borrow, default)]
  anchor: Option<std::borrow::Cow<'a, str>>,
  #[serde(rename = "k")]
  kind: LinkKind,
  #[serde(rename = "l")]
  line: u32,
}

/// Builds a [`LinkList`] one link at a time.
#[derive(Default)]
struct Packer {
  anchors: String,
  links: Vec<PackedLink>,
}

impl Packer {
  fn push(&mut self, l: Link<'_>) -> Result<(), String> {
    if l.line > LINE_MASK {
      return Err(format!("link line {} out of range", l.line));
    }
    self.anchors.push_str(l.anchor.unwrap_or(""));
    let Ok(anchor_end) = u32::try_from(self.anchors.len()) else {
      return Err("anchors of one page exceed 4 GiB".into());
    };
    let flags =
      if l.kind == LinkKind::Wiki { WIKI_BIT } else { 0 } | if l.anchor.is_some() { ANCHOR_BIT } else { 0 };
    self.links.push(PackedLink {
      target: crate::intern::intern(l.target),
      anchor_end,
      line_flags: l.line | flags,
    });
    Ok(())
  }

  /// The list, without spare capacity.
  fn finish(self) -> LinkList {
    LinkList { anchors: self.anchors.into_boxed_str(), links: self.links.into_boxed_slice() }
  }
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

/// Outbound page links of `body` (whose first line is line `body_start_line` of the file), from
/// a Markdown pass of its own. The reindex reads them from the chunker's pass instead
/// ([`LinkCollector`] fed by [`crate::chunk::Chunker::chunk_observing`]): the same events, so
/// the same links.
pub fn extract_links(body: &str, body_start_line: u32) -> ExtractedLinks {
  let mut links = LinkCollector::new(body, body_start_line);
  for (event, range) in Parser::new_ext(body, crate::chunk::BODY_MARKDOWN).into_offset_iter() {
    links.observe(&event, range);
  }
  links.finish()
}

/// Collects the links of a body from the events of a Markdown pass over it (with
/// [`crate::chunk::BODY_MARKDOWN`], so that wikilinks are events).
pub struct LinkCollector<'b> {
  body: &'b str,
  body_start_line: u32,
  /// Offsets where the body's lines start, made when the first link needs its line.
  line_starts: Vec<usize>,
  seen: std::collections::HashSet<(String, Option<String>, LinkKind)>,
  out: ExtractedLinks,
}

impl<'b> LinkCollector<'b> {
  /// A collector for `body`, whose first line is line `body_start_line` of the file.
  pub fn new(body: &'b str, body_start_line: u32) -> Self {
    LinkCollector {
      body,
      body_start_line,
      line_starts: Vec::new(),
      seen: Default::default(),
      out: Default::default(),
    }
  }

  /// Take in one event of the pass and its source range in the body.
  pub fn observe(&mut self, event: &Event<'_>, range: Range<usize>) {
    let Event::Start(Tag::Link { link_type, dest_url, .. }) = event else {
      return;
    };
    let kind = match link_type {
      LinkType::WikiLink { .. } => LinkKind::Wiki,
      LinkType::Inline | LinkType::Reference | LinkType::Collapsed | LinkType::Shortcut => LinkKind::Markdown,
      _ => return, // autolinks and e-mail addresses
    };
    let Some((target, anchor)) = split_target(dest_url, kind) else {
      return;
    };
    if !self.seen.insert((target.clone(), anchor.clone(), kind)) {
      return;
    }
    if self.out.links.len() >= MAX_LINKS_PER_PAGE {
      self.out.dropped += 1;
      return;
    }
    if self.line_starts.is_empty() {
      self.line_starts =
        std::iter::once(0).chain(self.body.match_indices('\n').map(|(i, _)| i + 1)).collect();
    }
    let idx = self.line_starts.partition_point(|s| *s <= range.start).saturating_sub(1);
    let line = self.body_start_line.saturating_add(idx as u32);
    self.out.links.push(RawLink { target, anchor, kind, line });
  }

  /// The links met, in first-seen order.
  pub fn finish(self) -> ExtractedLinks {
    self.out
  }
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

  /// The reindex reads a body's links from the chunker's pass: the same links, lines and
  /// truncation as a pass of their own. A footnote (`[^1]: …`) is not a link reference.
  #[test]
  fn links_from_the_chunkers_pass_are_the_links_of_the_body() {
    let many: String = (0..1_200).map(|i| format!("[[p{i}]] ")).collect();
    let bodies = [
      "See [RAG](../concepts/rag.md#claim).\n\n# Head [[h1]]\n\n| a | [[t/cell]] |\n|---|---|\n| ~~[x](x.md)~~ | y |\n".to_string(),
      "Note[^1] and [ref][r].\n\n[^1]: ../sources/paper.md\n\n[r]: ../sources/other.md\n".to_string(),
      "```\n[[not/a/link]]\n```\n".to_string(),
      many,
    ];
    for body in &bodies {
      let mut links = LinkCollector::new(body, 3);
      crate::chunk::Chunker::estimate(Default::default())
        .chunk_observing("T", body, 3, &mut |e, r| links.observe(e, r));
      assert_eq!(links.finish(), extract_links(body, 3), "{body}");
    }
    let t = targets(&bodies[1]);
    assert_eq!(t, vec![("../sources/other".into(), None, LinkKind::Markdown, 5)]);
    assert_eq!(extract_links(&bodies[3], 1).dropped, 200);
  }

  #[test]
  fn duplicates_collapse_and_many_links_are_bounded() {
    assert_eq!(targets("[[a]] [[a]] [a](a.md) [[a#h]]").len(), 3);
    let body: String = (0..10_000).map(|i| format!("[[p{i}]] ")).collect();
    let e = extract_links(&body, 1);
    assert_eq!(e.links.len(), MAX_LINKS_PER_PAGE);
    assert_eq!(e.dropped, 10_000 - MAX_LINKS_PER_PAGE);
  }

  /// The packed list holds exactly what a `Vec<RawLink>` holds, and its JSON is the same bytes
  /// (the manifest format does not change): both directions, including an empty anchor, which
  /// extraction never produces but a manifest on disk may hold.
  #[test]
  fn packed_links_round_trip_as_raw_links() {
    let mut raw = extract_links(
      "See [RAG](../concepts/rag.md#claim), [[concepts/bm25#Scope|BM25]], [[note^blk]], [[ü/é]], [x](a%20b.md).\n\n[[z]]",
      3,
    )
    .links;
    raw.push(RawLink {
      target: "t".into(),
      anchor: Some(String::new()),
      kind: LinkKind::Wiki,
      line: (1 << 30) - 1,
    });
    raw.push(RawLink { target: String::new(), anchor: None, kind: LinkKind::Markdown, line: 0 });
    let packed = LinkList::from_raw(&raw);
    assert_eq!(packed.len(), raw.len());
    assert_eq!(packed.to_raw(), raw);
    let json = serde_json::to_string(&raw).unwrap();
    assert_eq!(serde_json::to_string(&packed).unwrap(), json);
    let back: LinkList = serde_json::from_str(&json).unwrap();
    assert_eq!(back, packed);
    assert_eq!(
      back.iter().nth(1).map(|l| (l.target, l.anchor, l.kind)),
      Some(("concepts/bm25", Some("Scope"), LinkKind::Wiki))
    );
    let empty: LinkList = serde_json::from_str("[]").unwrap();
    assert!(empty.is_empty() && empty == LinkList::default());
    // A line that does not fit is refused on read (a corrupt manifest), clamped on extraction.
    assert!(serde_json::from_str::<LinkList>(r#"[{"t":"a","k":"wiki","l":1073741824}]"#).is_err());
    let big = RawLink { target: "a".into(), anchor: None, kind: LinkKind::Wiki, line: u32::MAX };
    assert_eq!(LinkList::from_raw(&[big]).iter().next().unwrap().line, (1 << 30) - 1);
    // Strings with escapes are read into owned copies, the others borrowed: the same links.
    let escaped =
      r#"[{"t":"a\"b\\c\u00e9","a":"x\ny","k":"markdown","l":2},{"t":"plain","a":"h","k":"wiki","l":3}]"#;
    let read: LinkList = serde_json::from_str(escaped).unwrap();
    let want = [
      RawLink { target: "a\"b\\cé".into(), anchor: Some("x\ny".into()), kind: LinkKind::Markdown, line: 2 },
      RawLink { target: "plain".into(), anchor: Some("h".into()), kind: LinkKind::Wiki, line: 3 },
    ];
    assert_eq!(read.to_raw(), want);
    let from_reader: LinkList = serde_json::from_reader(escaped.as_bytes()).unwrap();
    assert_eq!(from_reader, read);
    // Every list naming a target shares one copy of it, however it was built.
    let again: LinkList = serde_json::from_str(&json).unwrap();
    for (a, b) in packed.links.iter().zip(again.links.iter()) {
      assert!(a.target.is_empty() || ArcStr::ptr_eq(&a.target, &b.target));
    }
    assert_eq!(std::mem::size_of::<PackedLink>(), 16);
  }

  #[test]
  fn percent_decoding_is_lenient() {
    assert_eq!(percent_decode("a%20b%zz%"), "a b%zz%");
    assert_eq!(percent_decode("%E2%9C%93"), "✓");
  }
}
