//! Frontmatter rules of pi-llm-wiki's knowledge-document layer, enforced on the YAML *event*
//! stream (yaml-rust2's parser) so that limits are checked before any value tree is built:
//! 128 KiB of YAML, nesting depth 32, exactly one document, a mapping at the top, no
//! anchors/aliases, no custom tags, unique keys, and a non-empty string `type`.

use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Maximum size of the YAML text between the fences (`FRONTMATTER_MAX_BYTES`).
pub const FRONTMATTER_MAX_BYTES: usize = 128 * 1024;
/// Maximum nesting depth of collections; the top-level mapping is depth 1 (`FRONTMATTER_MAX_DEPTH`).
pub const FRONTMATTER_MAX_DEPTH: usize = 32;

/// Standard OKF fields; every other top-level key is an extension.
pub const STANDARD_FIELDS: &[&str] = &[
  "type",
  "title",
  "description",
  "resource",
  "tags",
  "sources",
  "generated",
  "verified",
  "status",
  "stale_after",
  "category",
  "domain",
  "aliases",
  "recall_triggers",
  "created",
  "updated",
  "summary",
  "raw_path",
  "source_id",
];

/// A YAML value under the core schema. Mappings keep their key order.
#[derive(Debug, Clone, PartialEq)]
pub enum YamlValue {
  /// `null`, `~` or empty.
  Null,
  /// `true` / `false`.
  Bool(bool),
  /// An integer scalar.
  Int(i64),
  /// A floating-point scalar.
  Float(f64),
  /// A string scalar.
  Str(String),
  /// A sequence.
  Seq(Vec<YamlValue>),
  /// A mapping, in document order.
  Map(Vec<(String, YamlValue)>),
}

impl YamlValue {
  /// The value as a string when it is a scalar string.
  pub fn as_str(&self) -> Option<&str> {
    match self {
      YamlValue::Str(s) => Some(s),
      _ => None,
    }
  }

  /// A scalar rendered as text (strings, numbers, booleans); `None` for null and collections.
  pub fn scalar_text(&self) -> Option<String> {
    match self {
      YamlValue::Str(s) => Some(s.clone()),
      YamlValue::Int(i) => Some(i.to_string()),
      YamlValue::Float(f) => Some(f.to_string()),
      YamlValue::Bool(b) => Some(b.to_string()),
      _ => None,
    }
  }

  /// A list of strings from either a sequence of scalars or a single scalar.
  pub fn string_list(&self) -> Vec<String> {
    match self {
      YamlValue::Seq(items) => items.iter().filter_map(|v| v.scalar_text()).collect(),
      other => other.scalar_text().into_iter().collect(),
    }
  }

  /// Look up a key of a mapping.
  pub fn get(&self, key: &str) -> Option<&YamlValue> {
    match self {
      YamlValue::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
      _ => None,
    }
  }

  /// Converts to JSON (for diagnostics and the Node API).
  pub fn to_json(&self) -> serde_json::Value {
    use serde_json::Value as J;
    match self {
      YamlValue::Null => J::Null,
      YamlValue::Bool(b) => J::Bool(*b),
      YamlValue::Int(i) => J::from(*i),
      YamlValue::Float(f) => serde_json::Number::from_f64(*f).map(J::Number).unwrap_or(J::Null),
      YamlValue::Str(s) => J::String(s.clone()),
      YamlValue::Seq(v) => J::Array(v.iter().map(|x| x.to_json()).collect()),
      YamlValue::Map(m) => J::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
    }
  }
}

/// Why a page was rejected (or, for [`super::page::Page::from_file_bytes`]'s warning, what was
/// repaired). `code` is the extension's diagnostic code, or one of ours (`page_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontmatterError {
  /// Stable diagnostic code.
  pub code: &'static str,
  /// Human-readable explanation.
  pub message: String,
  /// 1-based line in the page file, when known.
  pub line: Option<u32>,
  /// 1-based column, when known.
  pub column: Option<u32>,
}

impl FrontmatterError {
  /// An error with `code` and `message`.
  pub fn new(code: &'static str, message: impl Into<String>) -> Self {
    FrontmatterError { code, message: message.into(), line: None, column: None }
  }
  fn at(mut self, mark: Marker, yaml_first_line: usize) -> Self {
    self.line = Some((mark.line() + yaml_first_line - 1) as u32);
    self.column = Some((mark.col() + 1) as u32);
    self
  }
}

/// A page split into validated frontmatter and body.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedFrontmatter {
  /// Top-level entries in document order.
  pub entries: Vec<(String, YamlValue)>,
  /// Text after the closing fence, with exactly one leading blank line removed; LF newlines.
  pub body: String,
  /// 1-based line number (in the LF-normalized file) where `body` starts.
  pub body_start_line: u32,
}

impl ParsedFrontmatter {
  /// Value of a top-level key.
  pub fn get(&self, key: &str) -> Option<&YamlValue> {
    self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
  }
}

/// Normalize CRLF / CR line endings to LF.
pub fn normalize_newlines(text: &str) -> String {
  if !text.contains('\r') {
    return text.to_string();
  }
  text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Split a page into frontmatter + body and validate the frontmatter.
pub fn parse_page_text(raw: &str) -> Result<ParsedFrontmatter, FrontmatterError> {
  parse_with(raw, true)
}

/// A note of a plain Markdown folder (Obsidian-style): frontmatter is optional (a file without
/// an opening fence is all body) and needs no `type`; a fenced block must still be one YAML
/// mapping within the size limit, or the page is reported and excluded.
pub fn parse_note_text(raw: &str) -> Result<ParsedFrontmatter, FrontmatterError> {
  // A UTF-8 BOM before the fence is skipped here: editors on Windows write one.
  let raw = raw.strip_prefix('\u{feff}').unwrap_or(raw);
  if !normalize_newlines(raw).starts_with("---\n") {
    return Ok(ParsedFrontmatter { entries: Vec::new(), body: normalize_newlines(raw), body_start_line: 1 });
  }
  parse_with(raw, false)
}

fn parse_with(raw: &str, require_type: bool) -> Result<ParsedFrontmatter, FrontmatterError> {
  // Like the extension, a UTF-8 BOM is not skipped: such a file has no opening fence.
  let text = normalize_newlines(raw);
  let Some(rest) = text.strip_prefix("---\n") else {
    return Err(FrontmatterError::new("frontmatter_missing", "Missing frontmatter opening delimiter"));
  };
  let (yaml, body, body_start_line) = split_fence(rest).ok_or_else(|| {
    FrontmatterError::new("frontmatter_parse_error", "Missing frontmatter closing delimiter")
  })?;
  if yaml.len() > FRONTMATTER_MAX_BYTES {
    return Err(FrontmatterError::new(
      "frontmatter_limit_bytes",
      format!("Frontmatter exceeds {FRONTMATTER_MAX_BYTES} bytes"),
    ));
  }
  let entries = match parse_yaml_events(yaml)? {
    Some(YamlValue::Map(entries)) => entries,
    // A note's empty block (`---` then `---`) is no metadata.
    None if !require_type => Vec::new(),
    // An empty or comment-only block holds zero documents.
    None => {
      return Err(FrontmatterError::new(
        "frontmatter_multiple_documents",
        "Multiple YAML documents in frontmatter",
      ))
    }
    Some(_) => {
      return Err(FrontmatterError::new("frontmatter_parse_error", "Frontmatter must be a YAML mapping"))
    }
  };
  let type_ok = entries
    .iter()
    .find(|(k, _)| k == "type")
    .and_then(|(_, v)| v.as_str())
    .is_some_and(|s| !s.trim().is_empty());
  if require_type && !type_ok {
    return Err(FrontmatterError::new("concept_missing_type", "Missing or empty type field"));
  }
  Ok(ParsedFrontmatter { entries, body, body_start_line })
}

/// Find the closing fence. Returns (yaml, body, 1-based body start line).
/// When the first `---` line directly follows a `...` line and a later `---` exists, the later
/// one closes the block (the first is an inner document marker), as in the extension.
fn split_fence(rest: &str) -> Option<(&str, String, u32)> {
  let lines: Vec<(usize, &str)> = line_offsets(rest);
  let fences: Vec<usize> =
    lines.iter().enumerate().filter(|(_, (_, l))| *l == "---").map(|(i, _)| i).collect();
  let first = *fences.first()?;
  let follows_doc_end = first > 0 && lines[first - 1].1 == "...";
  let close = if follows_doc_end && fences.len() >= 2 { fences[1] } else { first };
  let yaml = &rest[..lines[close].0];
  let after = lines.get(close + 1).map(|(o, _)| *o).unwrap_or(rest.len());
  let mut body = &rest[after.min(rest.len())..];
  // Line numbers: line 1 is the opening fence, yaml starts on line 2.
  let mut body_line = (close + 3) as u32;
  if let Some(stripped) = body.strip_prefix('\n') {
    body = stripped;
    body_line += 1;
  }
  Some((yaml, body.to_string(), body_line))
}

fn line_offsets(s: &str) -> Vec<(usize, &str)> {
  let mut out = Vec::new();
  let mut start = 0;
  for (i, b) in s.bytes().enumerate() {
    if b == b'\n' {
      out.push((start, &s[start..i]));
      start = i + 1;
    }
  }
  if start < s.len() {
    out.push((start, &s[start..]));
  }
  out
}

/// A collection being built while walking the event stream.
enum Frame {
  Seq(Vec<YamlValue>),
  Map { entries: Vec<(String, YamlValue)>, pending_key: Option<String>, key_mark: Marker },
}

const CORE_TAGS: &[&str] = &["str", "int", "float", "bool", "null", "seq", "map"];

fn check_tag(tag: &Option<Tag>, mark: Marker, first: usize) -> Result<(), FrontmatterError> {
  if let Some(t) = tag {
    let core =
      (t.handle == "!!" || t.handle == "tag:yaml.org,2002:") && CORE_TAGS.contains(&t.suffix.as_str());
    if !core {
      return Err(
        FrontmatterError::new(
          "frontmatter_custom_tag_forbidden",
          format!("Custom YAML tags are not allowed ('{}{}')", t.handle, t.suffix),
        )
        .at(mark, first),
      );
    }
  }
  Ok(())
}

/// Walk the event stream; `None` when the text holds no document at all.
fn parse_yaml_events(yaml: &str) -> Result<Option<YamlValue>, FrontmatterError> {
  const FIRST_LINE: usize = 2; // YAML text begins on line 2 of the page.
  let mut parser = Parser::new_from_str(yaml);
  let mut stack: Vec<Frame> = Vec::new();
  let mut root: Option<YamlValue> = None;
  let mut documents = 0usize;
  loop {
    let (event, mark) = parser.next_token().map_err(|e| {
      let m = *e.marker();
      FrontmatterError::new("frontmatter_parse_error", format!("YAML parse error: {}", e.info()))
        .at(m, FIRST_LINE)
    })?;
    let value = match event {
      Event::StreamStart | Event::Nothing | Event::DocumentEnd => continue,
      Event::StreamEnd => break,
      Event::DocumentStart => {
        documents += 1;
        if documents > 1 {
          return Err(
            FrontmatterError::new("frontmatter_multiple_documents", "Multiple YAML documents in frontmatter")
              .at(mark, FIRST_LINE),
          );
        }
        continue;
      }
      Event::Alias(_) => {
        return Err(
          FrontmatterError::new("frontmatter_alias_forbidden", "YAML aliases are not allowed")
            .at(mark, FIRST_LINE),
        )
      }
      Event::Scalar(text, style, anchor, tag) => {
        if anchor != 0 {
          return Err(
            FrontmatterError::new("frontmatter_alias_forbidden", "YAML aliases are not allowed")
              .at(mark, FIRST_LINE),
          );
        }
        check_tag(&tag, mark, FIRST_LINE)?;
        resolve_scalar(text, style, tag.as_ref())
      }
      ev @ (Event::SequenceStart(..) | Event::MappingStart(..)) => {
        let is_seq = matches!(ev, Event::SequenceStart(..));
        let (Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag)) = ev else {
          unreachable!()
        };
        if anchor != 0 {
          return Err(
            FrontmatterError::new("frontmatter_alias_forbidden", "YAML aliases are not allowed")
              .at(mark, FIRST_LINE),
          );
        }
        check_tag(&tag, mark, FIRST_LINE)?;
        if stack.len() >= FRONTMATTER_MAX_DEPTH {
          return Err(
            FrontmatterError::new(
              "frontmatter_limit_depth",
              format!("Frontmatter nesting exceeds {FRONTMATTER_MAX_DEPTH}"),
            )
            .at(mark, FIRST_LINE),
          );
        }
        if let Some(Frame::Map { pending_key: None, .. }) = stack.last() {
          return Err(
            FrontmatterError::new("frontmatter_parse_error", "mapping keys must be scalars")
              .at(mark, FIRST_LINE),
          );
        }
        stack.push(if is_seq {
          Frame::Seq(Vec::new())
        } else {
          Frame::Map { entries: Vec::new(), pending_key: None, key_mark: mark }
        });
        continue;
      }
      Event::SequenceEnd => match stack.pop() {
        Some(Frame::Seq(items)) => YamlValue::Seq(items),
        _ => return Err(FrontmatterError::new("frontmatter_parse_error", "unbalanced YAML sequence")),
      },
      Event::MappingEnd => match stack.pop() {
        Some(Frame::Map { entries, .. }) => YamlValue::Map(entries),
        _ => return Err(FrontmatterError::new("frontmatter_parse_error", "unbalanced YAML mapping")),
      },
    };
    // Attach the finished value to its parent (or make it the root).
    match stack.last_mut() {
      None => root = Some(value),
      Some(Frame::Seq(items)) => items.push(value),
      Some(Frame::Map { entries, pending_key, key_mark }) => match pending_key.take() {
        None => {
          let key = match value {
            YamlValue::Str(s) => s,
            YamlValue::Null => String::new(),
            other => other.scalar_text().unwrap_or_default(),
          };
          if entries.iter().any(|(k, _)| *k == key) {
            return Err(
              FrontmatterError::new("frontmatter_duplicate_key", format!("Duplicate key: {key}"))
                .at(mark, FIRST_LINE),
            );
          }
          *key_mark = mark;
          *pending_key = Some(key);
        }
        Some(key) => entries.push((key, value)),
      },
    }
  }
  Ok(if documents == 0 { None } else { Some(root.unwrap_or(YamlValue::Null)) })
}

/// YAML 1.2 core-schema resolution of a scalar.
fn resolve_scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> YamlValue {
  if let Some(t) = tag {
    return match t.suffix.as_str() {
      "str" => YamlValue::Str(text),
      "null" => YamlValue::Null,
      "bool" => match text.as_str() {
        "true" | "True" | "TRUE" => YamlValue::Bool(true),
        "false" | "False" | "FALSE" => YamlValue::Bool(false),
        _ => YamlValue::Str(text),
      },
      "int" => text.parse::<i64>().map(YamlValue::Int).unwrap_or(YamlValue::Str(text)),
      "float" => text.parse::<f64>().map(YamlValue::Float).unwrap_or(YamlValue::Str(text)),
      _ => YamlValue::Str(text),
    };
  }
  if style != TScalarStyle::Plain {
    return YamlValue::Str(text);
  }
  match text.as_str() {
    "" | "~" | "null" | "Null" | "NULL" => return YamlValue::Null,
    "true" | "True" | "TRUE" => return YamlValue::Bool(true),
    "false" | "False" | "FALSE" => return YamlValue::Bool(false),
    ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return YamlValue::Float(f64::INFINITY),
    "-.inf" | "-.Inf" | "-.INF" => return YamlValue::Float(f64::NEG_INFINITY),
    ".nan" | ".NaN" | ".NAN" => return YamlValue::Float(f64::NAN),
    _ => {}
  }
  if is_core_int(&text) {
    if let Ok(i) = text.parse::<i64>() {
      return YamlValue::Int(i);
    }
  }
  if let Some(hex) = text.strip_prefix("0x") {
    if let Ok(i) = i64::from_str_radix(hex, 16) {
      return YamlValue::Int(i);
    }
  }
  if let Some(oct) = text.strip_prefix("0o") {
    if let Ok(i) = i64::from_str_radix(oct, 8) {
      return YamlValue::Int(i);
    }
  }
  if is_core_float(&text) {
    if let Ok(f) = text.parse::<f64>() {
      return YamlValue::Float(f);
    }
  }
  YamlValue::Str(text)
}

fn is_core_int(s: &str) -> bool {
  let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
  !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn is_core_float(s: &str) -> bool {
  // [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
  let b = s.strip_prefix(['-', '+']).unwrap_or(s).as_bytes();
  let mut i = 0;
  let int_start = i;
  while i < b.len() && b[i].is_ascii_digit() {
    i += 1;
  }
  let int_digits = i - int_start;
  let mut frac_digits = 0;
  if i < b.len() && b[i] == b'.' {
    i += 1;
    let f = i;
    while i < b.len() && b[i].is_ascii_digit() {
      i += 1;
    }
    frac_digits = i - f;
  }
  if int_digits == 0 && frac_digits == 0 {
    return false;
  }
  if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
    i += 1;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
      i += 1;
    }
    let e = i;
    while i < b.len() && b[i].is_ascii_digit() {
      i += 1;
    }
    if i == e {
      return false;
    }
  }
  i == b.len()
}

#[cfg(test)]
mod tests {
  use super::*;

  fn code(text: &str) -> &'static str {
    parse_page_text(text).unwrap_err().code
  }

  #[test]
  fn parses_mapping_and_body() {
    let p = parse_page_text(
      "---\ntype: concept\ntitle: \"RAG\"\ntags: [a, b]\nn: 3\nf: 1.5\nok: true\nz: ~\n---\n\n# Head\nbody\n",
    )
    .unwrap();
    assert_eq!(p.get("type"), Some(&YamlValue::Str("concept".into())));
    assert_eq!(p.get("tags").unwrap().string_list(), vec!["a", "b"]);
    assert_eq!(p.get("n"), Some(&YamlValue::Int(3)));
    assert_eq!(p.get("f"), Some(&YamlValue::Float(1.5)));
    assert_eq!(p.get("ok"), Some(&YamlValue::Bool(true)));
    assert_eq!(p.get("z"), Some(&YamlValue::Null));
    assert_eq!(p.body, "# Head\nbody\n");
    assert_eq!(p.body_start_line, 11);
  }

  #[test]
  fn body_without_blank_line_and_crlf() {
    let p = parse_page_text("---\r\ntype: source\r\n---\r\nline one\r\n").unwrap();
    assert_eq!(p.body, "line one\n");
    assert_eq!(p.body_start_line, 4);
    let p = parse_page_text("---\ntype: x\n---").unwrap();
    assert_eq!(p.body, "");
    let p = parse_page_text("---\ntype: x\n---\n\n\nBody").unwrap();
    assert_eq!(p.body, "\nBody");
    // `...` then `---` closes at the first fence when nothing follows.
    let p = parse_page_text("---\ntype: a\n...\n---\nbody").unwrap();
    assert_eq!(p.body, "body");
  }

  #[test]
  fn diagnostics() {
    assert_eq!(code("no fence\n"), "frontmatter_missing");
    assert_eq!(code("\u{feff}---\ntype: x\n---\n"), "frontmatter_missing");
    assert_eq!(code("--- \ntype: x\n---\n"), "frontmatter_missing");
    assert_eq!(code("---\ntype: a\n"), "frontmatter_parse_error");
    assert_eq!(code("---\ntype: a\ntype: b\n---\n"), "frontmatter_duplicate_key");
    assert_eq!(code("---\ntype: a\nx: &a 1\ny: *a\n---\n"), "frontmatter_alias_forbidden");
    assert_eq!(code("---\ntype: a\nx: !custom 1\n---\n"), "frontmatter_custom_tag_forbidden");
    assert_eq!(code("---\ntype: a\n...\n---\nb: 1\n---\nbody"), "frontmatter_multiple_documents");
    assert_eq!(code("---\ntitle: x\n---\n"), "concept_missing_type");
    assert_eq!(code("---\ntype: \"  \"\n---\n"), "concept_missing_type");
    assert_eq!(code("---\ntype: 3\n---\n"), "concept_missing_type");
    assert_eq!(code("---\n---\n"), "frontmatter_multiple_documents");
    assert_eq!(code("---\n# only a comment\n---\n"), "frontmatter_multiple_documents");
    assert_eq!(code("---\n~\n---\n"), "frontmatter_parse_error");
    assert_eq!(code("---\ntype: a\nx: &anchor 1\n---\n"), "frontmatter_alias_forbidden");
    assert_eq!(code("---\ntype: a\nx:\n  y: 1\n  y: 2\n---\n"), "frontmatter_duplicate_key");
    assert_eq!(code("---\n- a\n- b\n---\n"), "frontmatter_parse_error");
    assert_eq!(code("---\ntype: [unclosed\n---\n"), "frontmatter_parse_error");
    let big = format!("---\ntype: a\nx: \"{}\"\n---\n", "y".repeat(FRONTMATTER_MAX_BYTES));
    assert_eq!(code(&big), "frontmatter_limit_bytes");
  }

  #[test]
  fn depth_limit_counts_top_mapping_as_one() {
    let nest = |depth: usize| {
      // top-level mapping (1) + (depth-1) nested flow sequences
      format!("---\ntype: a\nx: {}{}\n---\n", "[".repeat(depth - 1), "]".repeat(depth - 1))
    };
    assert!(parse_page_text(&nest(FRONTMATTER_MAX_DEPTH)).is_ok());
    assert_eq!(code(&nest(FRONTMATTER_MAX_DEPTH + 1)), "frontmatter_limit_depth");
  }

  #[test]
  fn core_schema_scalars() {
    let p = parse_page_text("---\ntype: a\nq: \"3\"\nh: 0x1F\no: 0o17\ne: 1e3\nv: 1.2.3\ns: !!str 5\n---\n")
      .unwrap();
    assert_eq!(p.get("q"), Some(&YamlValue::Str("3".into())));
    assert_eq!(p.get("h"), Some(&YamlValue::Int(31)));
    assert_eq!(p.get("o"), Some(&YamlValue::Int(15)));
    assert_eq!(p.get("e"), Some(&YamlValue::Float(1000.0)));
    assert_eq!(p.get("v"), Some(&YamlValue::Str("1.2.3".into())));
    assert_eq!(p.get("s"), Some(&YamlValue::Str("5".into())));
  }

  #[test]
  fn error_positions_are_page_lines() {
    let e = parse_page_text("---\ntype: a\ntype: b\n---\n").unwrap_err();
    assert_eq!(e.line, Some(3));
  }
}
