//! The `relations` profile extension, parsed strictly as the spec defines it: a sequence of
//! mappings with exactly `target`, `type` and optional `scope`; `target` a normalized
//! folder-qualified page id without a fragment; `scope` required for `applies_under` and
//! forbidden for the other first-release types. Invalid entries are reported and dropped;
//! unknown types are kept but inert. Page-level rules only: target existence and the body-link
//! rule need the whole vault and live in [`super::graph`].

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use crate::vault::frontmatter::YamlValue;

/// Relation types that may admit a page during typed-link expansion.
pub const EXPANDING_TYPES: &[&str] =
  &["supports", "contradicts", "qualifies", "supersedes", "applies_under", "derived_from"];
/// Every first-release relation type (`related_to` is a browsing link only).
pub const KNOWN_TYPES: &[&str] =
  &["supports", "contradicts", "qualifies", "supersedes", "applies_under", "derived_from", "related_to"];
/// Most relations read from one page; more are reported (`relation_invalid`) and ignored. Not
/// fitted: a bound on work for hostile pages.
pub const MAX_RELATIONS_PER_PAGE: usize = 256;

/// A validated relation of one page.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TypedRelation {
  /// Normalized folder-qualified target page id.
  pub target: String,
  /// Relation type as written (lowercase).
  #[serde(rename = "type")]
  pub relation_type: String,
  /// Scope of an `applies_under` relation.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub scope: Option<String>,
}

impl TypedRelation {
  /// True for the six types that take part in expansion.
  pub fn is_expanding(&self) -> bool {
    EXPANDING_TYPES.contains(&self.relation_type.as_str())
  }
  /// True for the seven first-release types.
  pub fn is_known(&self) -> bool {
    KNOWN_TYPES.contains(&self.relation_type.as_str())
  }
}

/// A lint finding about a page's relations or links.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelationIssue {
  /// Stable code (`relation_*`, `page_links_truncated`).
  pub code: String,
  /// Human-readable explanation.
  pub message: String,
}

impl RelationIssue {
  /// An issue with `code` and `message`.
  pub fn new(code: &str, message: impl Into<String>) -> Self {
    RelationIssue { code: code.to_string(), message: message.into() }
  }
}

/// `target` in normalized form, or why it is not a page id. Normalized = NFC, `/`-separated,
/// no leading or trailing `/`, no `.`/`..`/empty segment, no `.md`, no `#`/`^` fragment.
pub fn normalize_target(raw: &str) -> Result<String, &'static str> {
  let t: String = raw.trim().nfc().collect();
  if t.is_empty() {
    return Err("is empty");
  }
  if t.contains('#') || t.contains('^') {
    return Err("has a heading or block fragment (anchors belong on the body link)");
  }
  if t.contains('\\') || t.starts_with('/') || t.ends_with('/') {
    return Err("is not a folder-qualified page id ('/'-separated, relative to wiki/)");
  }
  if t.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
    return Err("has an empty, '.' or '..' segment");
  }
  if t.to_ascii_lowercase().ends_with(".md") {
    return Err("ends in .md (use the page id)");
  }
  Ok(t)
}

/// Validated relations of `page_id` from its `relations` value, with the issues found.
pub fn parse_relations(page_id: &str, value: Option<&YamlValue>) -> (Vec<TypedRelation>, Vec<RelationIssue>) {
  let mut rels: Vec<TypedRelation> = Vec::new();
  let mut issues = Vec::new();
  let items = match value {
    None | Some(YamlValue::Null) => return (rels, issues),
    Some(YamlValue::Seq(items)) => items,
    Some(_) => {
      issues
        .push(RelationIssue::new("relation_invalid", "relations must be a list of {target, type, scope?}"));
      return (rels, issues);
    }
  };
  if items.len() > MAX_RELATIONS_PER_PAGE {
    issues.push(RelationIssue::new(
      "relation_invalid",
      format!("{} relations; only the first {MAX_RELATIONS_PER_PAGE} are read", items.len()),
    ));
  }
  for (i, item) in items.iter().take(MAX_RELATIONS_PER_PAGE).enumerate() {
    let at = format!("relations[{i}]");
    let YamlValue::Map(entries) = item else {
      issues.push(RelationIssue::new("relation_invalid", format!("{at} is not a mapping")));
      continue;
    };
    if let Some((k, _)) = entries.iter().find(|(k, _)| !["target", "type", "scope"].contains(&k.as_str())) {
      issues.push(RelationIssue::new("relation_invalid", format!("{at} has an unexpected key '{k}'")));
      continue;
    }
    let Some(target_raw) = item.get("target").and_then(|v| v.as_str()) else {
      issues.push(RelationIssue::new("relation_invalid", format!("{at}.target must be a string")));
      continue;
    };
    let target = match normalize_target(target_raw) {
      Ok(t) => t,
      Err(why) => {
        issues
          .push(RelationIssue::new("relation_invalid_target", format!("{at}.target '{target_raw}' {why}")));
        continue;
      }
    };
    let Some(ty) = item.get("type").and_then(|v| v.as_str()).map(|s| s.trim().to_lowercase()) else {
      issues.push(RelationIssue::new("relation_invalid", format!("{at}.type must be a string")));
      continue;
    };
    if ty.is_empty() {
      issues.push(RelationIssue::new("relation_invalid", format!("{at}.type is empty")));
      continue;
    }
    let scope = match item.get("scope") {
      None | Some(YamlValue::Null) => None,
      Some(YamlValue::Str(s)) => Some(s.trim().to_string()),
      Some(_) => {
        issues.push(RelationIssue::new("relation_invalid_scope", format!("{at}.scope must be a string")));
        continue;
      }
    };
    let rel = TypedRelation { target, relation_type: ty, scope };
    if !rel.is_known() {
      issues.push(RelationIssue::new(
        "relation_unknown_type",
        format!("{at}.type '{}' is not a known relation type; it is kept but ignored", rel.relation_type),
      ));
    } else if rel.relation_type == "applies_under" && rel.scope.as_deref().is_none_or(str::is_empty) {
      issues.push(RelationIssue::new(
        "relation_invalid_scope",
        format!("{at}: applies_under requires a non-empty scope"),
      ));
      continue;
    } else if rel.relation_type != "applies_under" && rel.scope.is_some() {
      issues.push(RelationIssue::new(
        "relation_invalid_scope",
        format!("{at}: scope is only allowed on applies_under, not {}", rel.relation_type),
      ));
      continue;
    }
    if rel.target.to_lowercase() == page_id.to_lowercase() {
      issues.push(RelationIssue::new("relation_self_link", format!("{at} points to the page itself")));
      continue;
    }
    if rels.contains(&rel) {
      issues.push(RelationIssue::new(
        "relation_duplicate",
        format!("{at} repeats {} → {}", rel.relation_type, rel.target),
      ));
      continue;
    }
    rels.push(rel);
  }
  (rels, issues)
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::vault::frontmatter::parse_page_text;

  fn parse(yaml: &str) -> (Vec<TypedRelation>, Vec<String>) {
    let fm = parse_page_text(&format!("---\ntype: concept\n{yaml}---\n")).unwrap();
    let (r, i) = parse_relations("concepts/a", fm.get("relations"));
    (r, i.into_iter().map(|i| i.code).collect())
  }

  #[test]
  fn valid_shapes() {
    let (r, i) = parse(
      "relations:\n  - target: concepts/b\n    type: Contradicts\n  - target: concepts/c\n    type: applies_under\n    scope: offline\n",
    );
    assert!(i.is_empty(), "{i:?}");
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].relation_type, "contradicts");
    assert_eq!(r[1].scope.as_deref(), Some("offline"));
    assert!(r[0].is_expanding());
  }

  #[test]
  fn each_rule_has_its_code() {
    let cases = [
      ("relations: x\n", "relation_invalid"),
      ("relations:\n  - concepts/b\n", "relation_invalid"),
      ("relations:\n  - target: concepts/b\n    type: supports\n    weight: 2\n", "relation_invalid"),
      ("relations:\n  - type: supports\n", "relation_invalid"),
      ("relations:\n  - target: concepts/b#claim\n    type: supports\n", "relation_invalid_target"),
      ("relations:\n  - target: ../b\n    type: supports\n", "relation_invalid_target"),
      ("relations:\n  - target: concepts/b.md\n    type: supports\n", "relation_invalid_target"),
      ("relations:\n  - target: concepts/b\n    type: applies_under\n", "relation_invalid_scope"),
      ("relations:\n  - target: concepts/b\n    type: supports\n    scope: x\n", "relation_invalid_scope"),
      ("relations:\n  - target: Concepts/A\n    type: supports\n", "relation_self_link"),
      ("relations:\n  - target: concepts/b\n    type: refutes\n", "relation_unknown_type"),
      (
        "relations:\n  - target: concepts/b\n    type: supports\n  - target: concepts/b\n    type: supports\n",
        "relation_duplicate",
      ),
    ];
    for (yaml, code) in cases {
      let (_, i) = parse(yaml);
      assert_eq!(i, vec![code.to_string()], "{yaml}");
    }
  }

  #[test]
  fn unknown_types_are_kept_inert_and_invalid_entries_dropped() {
    let (r, _) =
      parse("relations:\n  - target: concepts/b\n    type: refutes\n  - target: x#y\n    type: supports\n");
    assert_eq!(r.len(), 1);
    assert!(!r[0].is_known() && !r[0].is_expanding());
  }

  #[test]
  fn relation_count_is_bounded() {
    let many: String = (0..1000).map(|i| format!("  - target: p/{i}\n    type: supports\n")).collect();
    let (r, i) = parse(&format!("relations:\n{many}"));
    assert_eq!(r.len(), MAX_RELATIONS_PER_PAGE);
    assert_eq!(i, vec!["relation_invalid".to_string()]);
  }
}
