//! The human-readable correction observation (spec "Feedback"): a `source` page under
//! `wiki/sources/` with `status: observation`, `category: recall-correction`, `corrected_page`,
//! `vault_id` and `query_hash`, holding the user's correction and a Markdown link to the
//! corrected page. It is written before the `corrected` event (temp file + parser validation +
//! atomic rename) and is authoritative: a metadata rebuild replays an observation whose event is
//! missing ([`replayable`]).

use std::collections::HashSet;
use std::path::Path;

use super::events::{FeedbackEvent, KIND, SCHEMA};
use super::FeedbackAction;
use crate::error::{Error, Result};
use crate::fsutil::{atomic_write, iso_from_ms, now_ms};
use crate::util::hash::sha256_hex;
use crate::vault::frontmatter::parse_page_text;

/// `category` of a correction observation.
pub const CATEGORY: &str = "recall-correction";
/// Longest accepted correction text.
pub const MAX_CORRECTION_CHARS: usize = 20_000;

/// What a correction observation records.
#[derive(Debug, Clone, PartialEq)]
pub struct Correction {
  /// Vault id of the corrected page.
  pub vault_id: String,
  /// Corrected page id.
  pub page_id: String,
  /// Title of the corrected page (for the observation's title).
  pub page_title: String,
  /// Query hash from the session ledger.
  pub query_hash: String,
  /// The user's correction.
  pub text: String,
}

fn yaml_str(s: &str) -> String {
  // A JSON string is a valid YAML double-quoted scalar.
  serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Write the observation into `wiki`; returns its page id (`sources/obs-...`).
pub fn write_observation(wiki: &Path, c: &Correction) -> Result<String> {
  let text = c.text.trim();
  if text.is_empty() {
    return Err(Error::invalid("correction must be a non-empty text for corrected"));
  }
  if text.chars().count() > MAX_CORRECTION_CHARS {
    return Err(Error::invalid(format!("correction is longer than {MAX_CORRECTION_CHARS} characters")));
  }
  let ms = now_ms();
  let iso = iso_from_ms(ms);
  let day = &iso[..10];
  let digest =
    sha256_hex(format!("{}\n{}\n{}\n{}\n{ms}", c.vault_id, c.page_id, c.query_hash, text).as_bytes());
  let slug = format!("obs-{day}-recall-correction-{}", &digest[..12]);
  let title = format!("Observation: Recall correction for {}", c.page_title);
  let link_target = format!("../{}.md", c.page_id);
  let link = if link_target.contains(' ') { format!("<{link_target}>") } else { link_target };
  let page = format!(
    "---\ntype: source\ntitle: {}\nslug: {slug}\nstatus: observation\ncategory: {CATEGORY}\ncorrected_page: {}\nvault_id: {}\nquery_hash: {}\ncreated: {day}\nupdated: {day}\nrelevance: high\nobserved_at: {iso}\n---\n\n# 📝 {}\n\n{text}\n\nCorrects [{}]({link}).\n\n---\n*Observed: {iso}*\n",
    yaml_str(&title),
    yaml_str(&c.page_id),
    yaml_str(&c.vault_id),
    yaml_str(&c.query_hash),
    title.replace('\n', " "),
    c.page_title.replace(['[', ']', '\n'], " "),
  );
  // The same parser every page goes through must accept it, with the fields replay reads.
  let parsed =
    parse_page_text(&page).map_err(|e| Error::invalid(format!("correction observation: {e:?}")))?;
  if parsed.get("corrected_page").and_then(|v| v.as_str()) != Some(c.page_id.as_str()) {
    return Err(Error::invalid("correction observation does not round-trip its corrected_page"));
  }
  // Never through a linked `sources/` (the page would land outside the vault).
  let path = crate::vault::read::page_folder(wiki, "sources")?.join(format!("{slug}.md"));
  crate::store::swap::crash_point("correction_before_write");
  atomic_write(&path, page.as_bytes())?;
  Ok(format!("sources/{slug}"))
}

/// Correction observations under `wiki/sources/` whose `corrected` event is not in the stream
/// (`recorded` = observation ids the stream's events name), as events to replay.
pub fn replayable(wiki: &Path, recorded: &HashSet<String>) -> Vec<FeedbackEvent> {
  let Ok(dir) = std::fs::read_dir(wiki.join("sources")) else { return vec![] };
  let mut names: Vec<String> = dir
    .flatten()
    .filter_map(|e| e.file_name().to_str().map(str::to_string))
    .filter(|n| n.starts_with("obs-") && n.ends_with(".md"))
    .collect();
  names.sort();
  let mut out = Vec::new();
  for name in names {
    let id = format!("sources/{}", &name[..name.len() - 3]);
    if recorded.contains(&id) {
      continue;
    }
    let file = wiki.join("sources").join(&name);
    let Ok(bytes) = crate::vault::read::read_page_at(wiki, &file, crate::vault::read::MAX_PAGE_BYTES) else {
      continue;
    };
    let Ok(text) = String::from_utf8(bytes) else { continue };
    let Ok(fm) = parse_page_text(&text) else { continue };
    let get = |k: &str| fm.get(k).and_then(|v| v.scalar_text());
    if get("category").as_deref() != Some(CATEGORY) || get("status").as_deref() != Some("observation") {
      continue;
    }
    let (Some(page_id), Some(vault_id), Some(query_hash)) =
      (get("corrected_page"), get("vault_id"), get("query_hash"))
    else {
      continue;
    };
    out.push(FeedbackEvent {
      schema: SCHEMA,
      timestamp: get("observed_at").unwrap_or_else(crate::fsutil::now_iso),
      visibility: "internal".into(),
      kind: KIND.into(),
      vault_id,
      page_id,
      query_hash,
      mode: String::new(),
      index_version: String::new(),
      model_version: String::new(),
      shown_rank: None,
      action: FeedbackAction::Corrected,
      observation: Some(id),
      resolution: None,
    });
  }
  out
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn observation_round_trips_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let wiki = dir.path().join("wiki");
    std::fs::create_dir(&wiki).unwrap();
    let c = Correction {
      vault_id: "11111111-2222-4333-8444-555555555555".into(),
      page_id: "concepts/deploy \"blue\"".into(),
      page_title: "Deploy: \"blue\" [green]".into(),
      query_hash: super::super::query_hash("how do we deploy"),
      text: "We moved to canary deploys in March; blue/green is retired.".into(),
    };
    let id = write_observation(&wiki, &c).unwrap();
    assert!(id.starts_with("sources/obs-"));
    let text = std::fs::read_to_string(wiki.join(format!("{id}.md"))).unwrap();
    assert!(text.contains("canary deploys") && text.contains("category: recall-correction"));
    assert!(!text.contains("how do we deploy"), "the raw query is never stored");
    let events = replayable(&wiki, &HashSet::new());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].page_id, c.page_id);
    assert_eq!(events[0].action, FeedbackAction::Corrected);
    let recorded: HashSet<String> = [id].into_iter().collect();
    assert!(replayable(&wiki, &recorded).is_empty());
    assert!(write_observation(&wiki, &Correction { text: "  ".into(), ..c }).is_err());
  }
}
