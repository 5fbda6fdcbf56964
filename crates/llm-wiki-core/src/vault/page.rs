//! A parser-valid page: identity, the metadata recall needs, and its body.

use std::borrow::Cow;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::frontmatter::{
  parse_note_text, parse_page_text, FrontmatterError, ParsedFrontmatter, YamlValue, STANDARD_FIELDS,
};

/// Canonical types (reusable conclusions); every other type is evidence.
pub const CANONICAL_TYPES: &[&str] =
  &["concept", "entity", "analysis", "synthesis", "requirement", "skill", "case"];

/// Retrieval role of a page: a reviewed card or supporting evidence.
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "lowercase", skip_typescript))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
  /// A wiki note (concept, entity, analysis, ...).
  Canonical,
  /// Supporting material (sources and other evidence pages).
  Evidence,
}

impl Role {
  /// Role of a frontmatter `type` (compared trimmed and lowercased).
  pub fn for_type(page_type: &str) -> Role {
    if CANONICAL_TYPES.contains(&page_type.trim().to_lowercase().as_str()) {
      Role::Canonical
    } else {
      Role::Evidence
    }
  }

  /// `"canonical"` or `"evidence"`.
  pub fn as_str(self) -> &'static str {
    match self {
      Role::Canonical => "canonical",
      Role::Evidence => "evidence",
    }
  }
}

/// A typed relation (`relations:` profile extension): `{target, type, scope?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relation {
  /// Page id the relation points to.
  pub target: String,
  /// Kind of relation (`supports`, `contradicts`, ...).
  #[serde(rename = "type")]
  pub relation_type: String,
  /// Optional qualifier of the relation.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub scope: Option<String>,
}

/// Metadata of a page that retrieval and result rendering use.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageMeta {
  /// Frontmatter `title`.
  pub title: String,
  /// Frontmatter `type`.
  #[serde(rename = "type")]
  pub page_type: String,
  /// Frontmatter `status`.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub status: Option<String>,
  /// Frontmatter `aliases`.
  #[serde(skip_serializing_if = "Vec::is_empty", default)]
  pub aliases: Vec<String>,
  /// Frontmatter `tags`.
  #[serde(skip_serializing_if = "Vec::is_empty", default)]
  pub tags: Vec<String>,
  /// Frontmatter `description`.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub description: Option<String>,
  /// Frontmatter `summary`.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub summary: Option<String>,
  /// Frontmatter `domain`.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub domain: Option<String>,
  /// Frontmatter `category`.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub category: Option<String>,
  /// Frontmatter `recall_triggers`: phrases that should recall the page.
  #[serde(skip_serializing_if = "Vec::is_empty", default)]
  pub recall_triggers: Vec<String>,
  /// Frontmatter `relations`.
  #[serde(skip_serializing_if = "Vec::is_empty", default)]
  pub relations: Vec<Relation>,
  /// Frontmatter `stale_after` (the date after which the content is stale), as written.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub stale_after: Option<String>,
  /// `at` of the latest human verification event in `verified` (see [`human_verified_at`]).
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub verified_at: Option<String>,
  /// `generated.at`: when the current content was produced.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub generated_at: Option<String>,
  /// Frontmatter `created`, as written (a scalar).
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub created: Option<String>,
  /// Frontmatter `updated`, as written (a scalar).
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub updated: Option<String>,
  /// Frontmatter `scope` (a profile extension: where the page's claim applies), when a string.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub scope: Option<String>,
}

impl PageMeta {
  /// The page's date: `updated`, else `created` (as written). Memory items carry it so that
  /// competing claims can be compared by age.
  pub fn date(&self) -> Option<&str> {
    self.updated.as_deref().or(self.created.as_deref())
  }
}

/// `at` of the latest human verification event of a `verified` value (OKF: a list of
/// `{by, at}` events, or one such map). An event counts when it has a non-empty `by` and an
/// `at` that parses as a date or timestamp (see [`crate::util::time::parse_timestamp`]).
/// A `by` containing `/` is a tool identifier (`pi-llm-wiki/model`, the form `generated.by`
/// uses) — a machine confirmation, which gets no human-verification bonus.
pub fn human_verified_at(value: Option<&YamlValue>) -> Option<String> {
  let events: Vec<&YamlValue> = match value? {
    YamlValue::Seq(items) => items.iter().collect(),
    m @ YamlValue::Map(_) => vec![m],
    _ => return None,
  };
  events
    .into_iter()
    .filter_map(|e| {
      let by = e.get("by")?.scalar_text()?;
      let by = by.trim();
      if by.is_empty() || by.contains('/') {
        return None;
      }
      let at = e.get("at")?.scalar_text()?.trim().to_string();
      crate::util::time::parse_timestamp(&at).map(|t| (t, at))
    })
    .max_by_key(|(t, _)| *t)
    .map(|(_, at)| at)
}

/// A page that passed the frontmatter rules.
#[derive(Debug, Clone)]
pub struct Page {
  /// Folder-qualified id, e.g. `concepts/rag` (NFC, `/`-separated, no `.md`).
  pub id: String,
  /// Absolute path of the file.
  pub path: PathBuf,
  /// Canonical or evidence page.
  pub role: Role,
  /// Frontmatter fields used by retrieval.
  pub meta: PageMeta,
  /// Top-level keys that are not standard fields (kept verbatim).
  pub extensions: Vec<(String, YamlValue)>,
  /// Markdown after the frontmatter.
  pub body: String,
  /// 1-based line where the body starts in the file.
  pub body_start_line: u32,
}

fn text_field(fm: &ParsedFrontmatter, key: &str) -> Option<String> {
  fm.get(key).and_then(|v| v.scalar_text()).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn list_field(fm: &ParsedFrontmatter, key: &str) -> Vec<String> {
  fm.get(key)
    .map(|v| v.string_list())
    .unwrap_or_default()
    .into_iter()
    .map(|s| s.trim().to_string())
    .filter(|s| !s.is_empty())
    .collect()
}

/// Relations are read leniently: entries that are not `{target, type}` maps are ignored here
/// (shape validation belongs to lint), so a bad relation never hides a page.
fn relations(value: Option<&YamlValue>) -> Vec<Relation> {
  let Some(YamlValue::Seq(items)) = value else {
    return Vec::new();
  };
  items
    .iter()
    .filter_map(|item| {
      let target = item.get("target")?.as_str()?.trim().to_string();
      let relation_type = item.get("type")?.as_str()?.trim().to_string();
      let scope = item.get("scope").and_then(|s| s.as_str()).map(|s| s.trim().to_string());
      (!target.is_empty() && !relation_type.is_empty()).then_some(Relation { target, relation_type, scope })
    })
    .collect()
}

/// Decode a page file's bytes. Binary content (a NUL byte: images, archives, UTF-16 text) is
/// rejected with `page_binary`. Invalid UTF-8 sequences are replaced by U+FFFD, as the
/// extension's reader (Node's UTF-8 decoding) does, and reported with `page_invalid_utf8` at the
/// first one, so one stray Latin-1 byte does not hide a page.
pub fn decode_page_bytes(bytes: &[u8]) -> Result<(Cow<'_, str>, Option<FrontmatterError>), FrontmatterError> {
  if let Some(at) = bytes.iter().position(|b| *b == 0) {
    let (line, column) = position_of(bytes, at);
    return Err(FrontmatterError {
      line: Some(line),
      column: Some(column),
      ..FrontmatterError::new(
        "page_binary",
        "Page contains NUL bytes (a binary or UTF-16 file); only UTF-8 text pages are indexed",
      )
    });
  }
  match std::str::from_utf8(bytes) {
    Ok(text) => Ok((Cow::Borrowed(text), None)),
    Err(e) => {
      let (line, column) = position_of(bytes, e.valid_up_to());
      let warning = FrontmatterError {
        line: Some(line),
        column: Some(column),
        ..FrontmatterError::new(
          "page_invalid_utf8",
          "Page is not valid UTF-8; invalid bytes were replaced by U+FFFD (re-save it as UTF-8)",
        )
      };
      Ok((String::from_utf8_lossy(bytes), Some(warning)))
    }
  }
}

/// 1-based line and column (in characters of the valid prefix) of byte `at`.
fn position_of(bytes: &[u8], at: usize) -> (u32, u32) {
  let before = &bytes[..at];
  let line_start = before.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
  let line = before.iter().filter(|b| **b == b'\n').count() + 1;
  let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
  (line.min(u32::MAX as usize) as u32, column.min(u32::MAX as usize) as u32)
}

/// How a vault's files are read as pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PageModel {
  /// pi-llm-wiki pages: frontmatter with a `type` is required (strict validation).
  #[default]
  Wiki,
  /// Notes of a plain Markdown folder (Obsidian-style): frontmatter optional, title from
  /// `title:`, else the first `# ` heading, else the file name; tags from `tags:` and inline
  /// `#tags`; a note without a `type` is a card ([`Role::Canonical`]): it is the user's own note.
  Note,
}

/// The first ATX level-1 heading of a body outside code fences (`# Title`), trimmed.
fn first_heading(body: &str) -> Option<String> {
  let mut fence: Option<&str> = None;
  for line in body.lines() {
    let t = line.trim_start();
    for marker in ["```", "~~~"] {
      if t.starts_with(marker) {
        fence = match fence {
          Some(m) if m == marker => None,
          None => Some(marker),
          other => other,
        };
      }
    }
    if fence.is_none() {
      if let Some(h) = t.strip_prefix("# ") {
        let h = h.trim().trim_end_matches('#').trim();
        if !h.is_empty() {
          return Some(h.to_string());
        }
      }
    }
  }
  None
}

/// Inline `#tags` of a body (Obsidian's rule: `#` at the start or after whitespace, then letters,
/// digits, `_`, `-` or `/`, at least one not a digit), outside code fences and inline code;
/// headings (`# `) are not tags. First occurrence order, without the `#`.
pub fn inline_tags(body: &str) -> Vec<String> {
  let mut out: Vec<String> = Vec::new();
  let mut in_fence = false;
  for line in body.lines() {
    let t = line.trim_start();
    if t.starts_with("```") || t.starts_with("~~~") {
      in_fence = !in_fence;
      continue;
    }
    if in_fence {
      continue;
    }
    let mut in_code = false;
    let mut prev: Option<char> = None;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
      let c = chars[i];
      if c == '`' {
        in_code = !in_code;
      } else if c == '#' && !in_code && prev.is_none_or(char::is_whitespace) {
        let tag: String = chars[i + 1..]
          .iter()
          .take_while(|ch| ch.is_alphanumeric() || matches!(ch, '_' | '-' | '/'))
          .collect();
        if !tag.is_empty() && !tag.chars().all(|ch| ch.is_ascii_digit()) {
          if !out.iter().any(|o| o.eq_ignore_ascii_case(&tag)) {
            out.push(tag.clone());
          }
          i += 1 + tag.chars().count();
          prev = Some('x');
          continue;
        }
      }
      prev = Some(c);
      i += 1;
    }
  }
  out
}

impl Page {
  /// Parse a page file's bytes (see [`decode_page_bytes`]); the second value is the decoding
  /// warning of a page that was indexed despite invalid UTF-8.
  pub fn from_file_bytes(
    id: &str,
    path: PathBuf,
    bytes: &[u8],
  ) -> Result<(Page, Option<FrontmatterError>), FrontmatterError> {
    Page::from_file_bytes_as(PageModel::Wiki, id, path, bytes)
  }

  /// [`Page::from_file_bytes`] under a [`PageModel`].
  pub fn from_file_bytes_as(
    model: PageModel,
    id: &str,
    path: PathBuf,
    bytes: &[u8],
  ) -> Result<(Page, Option<FrontmatterError>), FrontmatterError> {
    let (text, warning) = decode_page_bytes(bytes)?;
    Ok((Page::parse_as(model, id, path, &text)?, warning))
  }

  /// Parse a page's text. `id` is the folder-qualified id, `path` its absolute file path.
  pub fn parse(id: &str, path: PathBuf, text: &str) -> Result<Page, FrontmatterError> {
    Page::parse_as(PageModel::Wiki, id, path, text)
  }

  /// [`Page::parse`] under a [`PageModel`].
  pub fn parse_as(model: PageModel, id: &str, path: PathBuf, text: &str) -> Result<Page, FrontmatterError> {
    let note = model == PageModel::Note;
    let fm = if note { parse_note_text(text)? } else { parse_page_text(text)? };
    let page_type = text_field(&fm, "type").unwrap_or_default();
    let file_name = || id.rsplit('/').next().unwrap_or(id).to_string();
    let title = text_field(&fm, "title")
      .or_else(|| if note { first_heading(&fm.body) } else { None })
      .unwrap_or_else(file_name);
    let mut tags = list_field(&fm, "tags");
    if note {
      for t in inline_tags(&fm.body) {
        if !tags.iter().any(|o| o.eq_ignore_ascii_case(&t)) {
          tags.push(t);
        }
      }
    }
    let role = if note && page_type.is_empty() { Role::Canonical } else { Role::for_type(&page_type) };
    let extensions: Vec<(String, YamlValue)> =
      fm.entries.iter().filter(|(k, _)| !STANDARD_FIELDS.contains(&k.as_str())).cloned().collect();
    let meta = PageMeta {
      title,
      status: text_field(&fm, "status").map(|s| s.to_lowercase()),
      aliases: list_field(&fm, "aliases"),
      tags,
      description: text_field(&fm, "description"),
      summary: text_field(&fm, "summary"),
      domain: text_field(&fm, "domain"),
      category: text_field(&fm, "category"),
      recall_triggers: list_field(&fm, "recall_triggers"),
      relations: relations(extensions.iter().find(|(k, _)| k == "relations").map(|(_, v)| v)),
      stale_after: text_field(&fm, "stale_after"),
      verified_at: human_verified_at(fm.get("verified")),
      generated_at: fm
        .get("generated")
        .and_then(|g| g.get("at"))
        .and_then(|v| v.scalar_text())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty()),
      created: text_field(&fm, "created"),
      updated: text_field(&fm, "updated"),
      scope: text_field(&fm, "scope"),
      page_type: page_type.clone(),
    };
    Ok(Page {
      id: id.to_string(),
      path,
      role,
      meta,
      extensions,
      body: fm.body,
      body_start_line: fm.body_start_line,
    })
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn notes_of_a_plain_folder_need_no_frontmatter() {
    let text = "Intro line\n\n```\n# not a heading #nottag\n```\n# Backup plan\nKeep #backup and #ops/rotation, not #123 or a#b; `#code` [[rag|RAG]] #Backup\n";
    let p = Page::parse_as(PageModel::Note, "notes/Backup", PathBuf::from("/n.md"), text).unwrap();
    assert_eq!(p.meta.title, "Backup plan", "title from the first heading outside code");
    assert_eq!(p.meta.tags, vec!["backup", "ops/rotation"]);
    assert_eq!(p.role, Role::Canonical, "an untyped note is the user's own card");
    assert_eq!(p.body_start_line, 1);
    let fm = "---\ntags: [a, b]\naliases: [x]\n---\nNo heading here #b #c\n";
    let p = Page::parse_as(PageModel::Note, "dir/My Note", PathBuf::from("/m.md"), fm).unwrap();
    assert_eq!(
      (p.meta.title.as_str(), p.meta.tags.clone()),
      ("My Note", vec!["a".into(), "b".into(), "c".into()])
    );
    let typed =
      Page::parse_as(PageModel::Note, "s", PathBuf::from("/s.md"), "---\ntype: source\n---\nx").unwrap();
    assert_eq!(typed.role, Role::Evidence, "a declared type keeps its role");
    assert!(Page::parse_as(PageModel::Note, "e", PathBuf::from("/e.md"), "---\n---\nbody").is_ok());
    let broken = Page::parse_as(PageModel::Note, "b", PathBuf::from("/b.md"), "---\n: [\n---\n").unwrap_err();
    assert_eq!(broken.code, "frontmatter_parse_error");
    // The same text is rejected by the strict pi-llm-wiki model.
    assert_eq!(
      Page::parse("notes/Backup", PathBuf::from("/n.md"), text).unwrap_err().code,
      "frontmatter_missing"
    );
  }

  #[test]
  fn roles() {
    assert_eq!(Role::for_type(" Concept "), Role::Canonical);
    assert_eq!(Role::for_type("skill"), Role::Canonical);
    assert_eq!(Role::for_type("source"), Role::Evidence);
    assert_eq!(Role::for_type("weird"), Role::Evidence);
  }

  #[test]
  fn parses_metadata_and_extensions() {
    let text = "---\ntype: concept\ntitle: \"  RAG \"\nstatus: Stable\naliases: [\"Retrieval augmented\", 7]\ntags: x\nrecall_triggers:\n  - how to rag\nrelations:\n  - target: concepts/b\n    type: supports\n  - bad\ncustom: 1\n---\nbody\n";
    let p = Page::parse("concepts/rag", PathBuf::from("/v/concepts/rag.md"), text).unwrap();
    assert_eq!(p.meta.title, "RAG");
    assert_eq!(p.meta.status.as_deref(), Some("stable"));
    assert_eq!(p.meta.aliases, vec!["Retrieval augmented", "7"]);
    assert_eq!(p.meta.tags, vec!["x"]);
    assert_eq!(p.meta.recall_triggers, vec!["how to rag"]);
    assert_eq!(p.meta.relations.len(), 1);
    assert_eq!(p.meta.relations[0].relation_type, "supports");
    assert_eq!(p.extensions.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), vec!["relations", "custom"]);
    assert_eq!(p.role, Role::Canonical);
  }

  #[test]
  fn binary_and_invalid_utf8_bytes() {
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    let e = Page::from_file_bytes("i", PathBuf::from("/i.md"), png).unwrap_err();
    assert_eq!((e.code, e.line, e.column), ("page_binary", Some(3), Some(1)));
    // A valid frontmatter does not make a binary blob a page.
    let e = Page::from_file_bytes("b", PathBuf::from("/b.md"), b"---\ntype: a\n---\n\0\x01").unwrap_err();
    assert_eq!(e.code, "page_binary");
    // UTF-16 text is binary to us (every ASCII character has a NUL byte).
    let e = Page::from_file_bytes("u", PathBuf::from("/u.md"), b"\xff\xfe-\0-\0-\0").unwrap_err();
    assert_eq!(e.code, "page_binary");
    let (page, warning) =
      Page::from_file_bytes("l", PathBuf::from("/l.md"), b"---\ntype: a\n---\nCaf\xe9 ok\n").unwrap();
    assert_eq!(page.body, "Caf\u{fffd} ok\n");
    let w = warning.unwrap();
    assert_eq!((w.code, w.line, w.column), ("page_invalid_utf8", Some(4), Some(4)));
    let (_, warning) =
      Page::from_file_bytes("v", PathBuf::from("/v.md"), "---\ntype: a\n---\nCafé\n".as_bytes()).unwrap();
    assert!(warning.is_none());
    // Frontmatter errors still win over a decoding warning.
    assert_eq!(
      Page::from_file_bytes("x", PathBuf::from("/x.md"), b"\xe9").unwrap_err().code,
      "frontmatter_missing"
    );
  }

  #[test]
  fn verification_and_freshness_fields() {
    let text = "---\ntype: concept\nstale_after: 2026-01-01\ngenerated:\n  by: pi-llm-wiki/model\n  at: 2026-08-02T10:00:00Z\nverified:\n  - by: reviewer@example.com\n    at: 2026-08-02T11:00:00Z\n  - by: Ada\n    at: 2026-08-03\n  - by: pi-llm-wiki/checker\n    at: 2026-09-01T00:00:00Z\n  - by: Bob\n    at: not a date\n---\nbody\n";
    let p = Page::parse("concepts/v", PathBuf::from("/v.md"), text).unwrap();
    assert_eq!(p.meta.stale_after.as_deref(), Some("2026-01-01"));
    assert_eq!(p.meta.generated_at.as_deref(), Some("2026-08-02T10:00:00Z"));
    // The latest human event; the tool's later confirmation and the unparseable one do not count.
    assert_eq!(p.meta.verified_at.as_deref(), Some("2026-08-03"));
    let one = "---\ntype: concept\nverified:\n  by: reviewer@example.com\n  at: 2026-08-02T11:00:00Z\n---\n";
    let p = Page::parse("concepts/w", PathBuf::from("/w.md"), one).unwrap();
    assert_eq!(p.meta.verified_at.as_deref(), Some("2026-08-02T11:00:00Z"));
    for bad in [
      "verified: true",
      "verified: []",
      "verified:\n  - at: 2026-08-02",
      "verified:\n  - by: pi/tool\n    at: 2026-08-02",
    ] {
      let t = format!("---\ntype: concept\n{bad}\n---\n");
      assert_eq!(Page::parse("c/x", PathBuf::from("/x.md"), &t).unwrap().meta.verified_at, None, "{bad}");
    }
  }

  #[test]
  fn date_and_scope_fields() {
    let text =
      "---\ntype: concept\ncreated: 2026-01-02\nupdated: 2026-03-04\nscope: Linux hosts\n---\nbody\n";
    let p = Page::parse("concepts/d", PathBuf::from("/d.md"), text).unwrap();
    assert_eq!(p.meta.date(), Some("2026-03-04"));
    assert_eq!(p.meta.scope.as_deref(), Some("Linux hosts"));
    let p =
      Page::parse("c/e", PathBuf::from("/e.md"), "---\ntype: concept\ncreated: 2026-01-02\n---\n").unwrap();
    assert_eq!(p.meta.date(), Some("2026-01-02"));
    // Non-scalar or empty values are absent, never a guessed date.
    let p = Page::parse("c/f", PathBuf::from("/f.md"), "---\ntype: concept\nupdated: []\nscope: ''\n---\n")
      .unwrap();
    assert_eq!((p.meta.date(), p.meta.scope.as_deref()), (None, None));
  }

  #[test]
  fn title_defaults_to_last_segment() {
    let p = Page::parse("sources/a-b", PathBuf::from("/x"), "---\ntype: source\n---\n").unwrap();
    assert_eq!(p.meta.title, "a-b");
    assert_eq!(p.role, Role::Evidence);
  }
}
