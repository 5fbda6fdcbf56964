//! A resolution record as a page carries it: the `resolution` frontmatter of a
//! `conflict-resolution` page, its rules, its semantic id, and reading it from a parsed page.

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use crate::error::Error;
use crate::memory::relations::{normalize_target, RelationIssue};
use crate::util::hash::sha256_hex;
use crate::vault::frontmatter::YamlValue;
use crate::vault::Page;

/// The three relations a user may choose.
pub const RELATIONS: &[&str] = &["supersedes", "qualifies", "applies_under"];
/// `category` of a resolution page.
pub const CATEGORY: &str = "conflict-resolution";
/// Folder of resolution pages under `wiki/`.
pub const FOLDER: &str = "analyses";
/// Longest scope in characters. Not fitted: a scope is a short phrase; the bound keeps ids and
/// frontmatter small.
pub const MAX_SCOPE_CHARS: usize = 500;
/// Longest rationale in characters. Not fitted: a bound on the page size.
pub const MAX_RATIONALE_CHARS: usize = 20_000;
/// Hex digits of the hash in a resolution id (128 bits).
const ID_HEX: usize = 32;

pub(crate) fn reject(code: &'static str, message: impl Into<String>) -> Error {
  Error::Resolution { code, message: message.into() }
}

/// The `resolution` frontmatter of a resolution page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolutionRecord {
  /// `resolution-<32 hex>`: the semantic hash (also the file name).
  pub id: String,
  /// The user-endorsed page id.
  pub selected: String,
  /// The other page id.
  pub other: String,
  /// `supersedes`, `qualifies` or `applies_under`.
  pub relation: String,
  /// Scope of `applies_under`.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub scope: Option<String>,
  /// Always `user`.
  pub decided_by: String,
  /// RFC 3339 time of the decision.
  pub decided_at: String,
  /// Id of the resolution this one replaces.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub replaces: Option<String>,
}

/// Scope as stored: NFC, whitespace collapsed, trimmed; `None` when empty.
pub fn clean_scope(scope: Option<&str>) -> Option<String> {
  let s: String = scope?.nfc().collect::<String>().split_whitespace().collect::<Vec<_>>().join(" ");
  (!s.is_empty()).then_some(s)
}

/// Scope as hashed: [`clean_scope`] lowercased (so `Offline` and ` offline ` are one decision).
pub fn normalized_scope(scope: Option<&str>) -> String {
  clean_scope(scope).map(|s| s.to_lowercase()).unwrap_or_default()
}

/// The semantic id of a decision: a hash of vault id, selected and other page id (in that order:
/// the relation has a direction), relation, normalized scope and replaced id.
pub fn resolution_id(
  vault_id: &str,
  selected: &str,
  other: &str,
  relation: &str,
  scope: Option<&str>,
  replaces: Option<&str>,
) -> String {
  let key = [
    "llm-wiki-resolution/1",
    vault_id,
    selected,
    other,
    relation,
    &normalized_scope(scope),
    replaces.unwrap_or(""),
  ]
  .join("\u{0}");
  format!("resolution-{}", &sha256_hex(key.as_bytes())[..ID_HEX])
}

/// Page id of the resolution page of `id`.
pub fn page_id_of(id: &str) -> String {
  format!("{FOLDER}/{id}")
}

/// A record's fields, checked against the rules (except the id, which needs the vault id).
pub(crate) fn check_fields(r: &ResolutionRecord) -> std::result::Result<(), String> {
  if !RELATIONS.contains(&r.relation.as_str()) {
    return Err(format!("relation '{}' is not supersedes | qualifies | applies_under", r.relation));
  }
  for (name, v) in [("selected", &r.selected), ("other", &r.other)] {
    if normalize_target(v).as_deref() != Ok(v.as_str()) {
      return Err(format!("{name} '{v}' is not a normalized page id"));
    }
  }
  if r.selected.to_lowercase() == r.other.to_lowercase() {
    return Err("selected and other are the same page".into());
  }
  match (r.relation.as_str(), &r.scope) {
    ("applies_under", None) => return Err("applies_under requires a non-empty scope".into()),
    ("applies_under", Some(_)) | (_, None) => {}
    (rel, Some(_)) => return Err(format!("scope is only allowed with applies_under, not {rel}")),
  }
  if r.decided_by != "user" {
    return Err(format!("decided_by is '{}', expected user", r.decided_by));
  }
  if crate::util::time::parse_timestamp(&r.decided_at).is_none() {
    return Err(format!("decided_at '{}' is not an ISO timestamp", r.decided_at));
  }
  Ok(())
}

/// The resolution record of a page whose `category` is `conflict-resolution`, with the findings
/// about it (`resolution_invalid`). Other pages: `(None, [])`.
pub fn parse_resolution(page: &Page) -> (Option<ResolutionRecord>, Vec<RelationIssue>) {
  let value = page.extensions.iter().find(|(k, _)| k == "resolution").map(|(_, v)| v);
  if page.meta.category.as_deref() != Some(CATEGORY) {
    return (None, vec![]);
  }
  let bad = |m: String| (None, vec![RelationIssue::new("resolution_invalid", m)]);
  let Some(YamlValue::Map(entries)) = value else {
    return bad("a conflict-resolution page needs a `resolution` mapping".into());
  };
  const KEYS: &[&str] =
    &["id", "selected", "other", "relation", "scope", "decided_by", "decided_at", "replaces"];
  if let Some((k, _)) = entries.iter().find(|(k, _)| !KEYS.contains(&k.as_str())) {
    return bad(format!("resolution has an unexpected key '{k}'"));
  }
  let get = |k: &str| -> std::result::Result<Option<String>, String> {
    match value.and_then(|v| v.get(k)) {
      None | Some(YamlValue::Null) => Ok(None),
      Some(YamlValue::Str(s)) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
      Some(_) => Err(format!("resolution.{k} must be a string")),
    }
  };
  let need = |k: &str| -> std::result::Result<String, String> {
    get(k)?.ok_or_else(|| format!("resolution.{k} is missing"))
  };
  let record = (|| -> std::result::Result<ResolutionRecord, String> {
    let scope_raw = get("scope")?;
    let r = ResolutionRecord {
      id: need("id")?,
      selected: need("selected")?,
      other: need("other")?,
      relation: need("relation")?,
      scope: clean_scope(scope_raw.as_deref()),
      decided_by: need("decided_by")?,
      decided_at: need("decided_at")?,
      replaces: get("replaces")?,
    };
    check_fields(&r)?;
    Ok(r)
  })();
  match record {
    Ok(r) => (Some(r), vec![]),
    Err(m) => bad(m),
  }
}
