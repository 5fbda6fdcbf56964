//! A vault's embedding model ([`crate::models::choice`]) applied to its store: decided at each
//! reindex (the language sample is taken again when the number of pages has changed by more
//! than [`RESAMPLE_CHANGE`] since the last one, or no sample is recorded) and recorded in
//! `<store root>/embed-choice.json`, which status reads without sampling anything.
//!
//! A change of model changes the chunk counter (`tokenizer:<model id>`), so the next reindex
//! rebuilds the store once and embeds every chunk with the new model; the vectors record which
//! model made them, and recall embeds queries with that model while it is installed.

use std::path::PathBuf;

use super::layout::StoreLayout;
use super::manifest::Manifest;
use crate::models::choice::{self, EmbedChoice, LanguageSample, Override};
use crate::models::ModelConfig;
use crate::vault::config::read_config;
use crate::vault::discover::{discover_pages, resolve_page_file};
use crate::vault::VaultPaths;

/// Relative change of the page count that makes a reindex sample the pages' language again.
/// A design value: small edits reuse the sample (no 200 page reads per one-page reindex).
pub const RESAMPLE_CHANGE: f64 = 0.1;

/// The file the choice is recorded in.
pub fn choice_file(layout: &StoreLayout) -> PathBuf {
  layout.dir.join("embed-choice.json")
}

fn override_of(paths: &VaultPaths) -> Override {
  read_config(paths).map(|c| Override::of_config(&c)).unwrap_or(Override::Auto)
}

/// Absolute paths of the vault's pages, sorted by their path in `wiki/`: the indexed ones when
/// a manifest is at hand, else a walk of the vault.
fn page_files(paths: &VaultPaths, manifest: Option<&Manifest>) -> Vec<PathBuf> {
  let mut rel: Vec<String> = match manifest {
    Some(m) if !m.entries.is_empty() => m.entries.values().map(|e| e.rel_path.clone()).collect(),
    _ => discover_pages(&paths.root, &paths.wiki).files.into_iter().map(|f| f.rel_path).collect(),
  };
  rel.sort();
  rel.iter().map(|r| resolve_page_file(&paths.wiki, r)).collect()
}

fn stale_sample(recorded: &LanguageSample, pages: usize) -> bool {
  let before = recorded.vault_pages as f64;
  recorded.sampled == 0 || (pages as f64 - before).abs() > RESAMPLE_CHANGE * before.max(1.0)
}

/// Decide the vault's model for a reindex and record it. `manifest` is the live one, if any.
/// Never fails: a choice that cannot be recorded is decided again next time.
pub fn choose_at_reindex(
  paths: &VaultPaths,
  layout: &StoreLayout,
  manifest: Option<&Manifest>,
) -> EmbedChoice {
  let c = crate::models::effective_config();
  let over = override_of(paths);
  let file = choice_file(layout);
  let recorded = choice::read_recorded(&file);
  let previous = recorded.as_ref().and_then(|r| r.family);
  let sample = choice::needs_sample(&c).then(|| {
    let files = page_files(paths, manifest);
    match recorded.as_ref().and_then(|r| r.sample) {
      Some(s) if !stale_sample(&s, files.len()) => s,
      _ => choice::sample_files(&files, files.len()),
    }
  });
  let made = choice::decide(&c, &over, sample, previous);
  if recorded.as_ref() != Some(&made) && layout.dir.is_dir() {
    let _ = choice::record(&file, &made);
  }
  made
}

/// The vault's model as status reports it: the recorded sample under the current settings and
/// override (nothing is sampled; a vault never indexed reads as English).
pub fn current_choice(paths: &VaultPaths, layout: &StoreLayout) -> EmbedChoice {
  let c = crate::models::effective_config();
  let recorded = choice::read_recorded(&choice_file(layout));
  let previous = recorded.as_ref().and_then(|r| r.family);
  choice::decide(&c, &override_of(paths), recorded.and_then(|r| r.sample), previous)
}

/// The engine settings of a run for `choice`: its model directory, or dense retrieval off when
/// it has none.
pub fn config_of(choice: &EmbedChoice) -> ModelConfig {
  let mut c = crate::models::effective_config();
  match &choice.dir {
    Some(d) => c.embed_model = Some(d.clone()),
    None => c.disabled = true,
  }
  c
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn samples_are_reused_until_the_vault_grows_or_shrinks() {
    let s = LanguageSample { vault_pages: 100, sampled: 100, identified: 90, non_english: 60 };
    assert!(!stale_sample(&s, 100));
    assert!(!stale_sample(&s, 110));
    assert!(stale_sample(&s, 111));
    assert!(stale_sample(&s, 89));
    assert!(stale_sample(&LanguageSample::default(), 0), "an empty sample is taken again");
    let one = LanguageSample { vault_pages: 1, sampled: 1, identified: 1, non_english: 0 };
    assert!(stale_sample(&one, 3));
  }
}
