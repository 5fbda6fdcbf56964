//! Which embedding model a vault uses: all-MiniLM-L6-v2 (English) or multilingual-e5-small,
//! chosen per vault from the language of its pages, with the reason status reports.
//!
//! Order (first match wins):
//! 1. dense retrieval off (`LLM_WIKI_DENSE=off`, `configure({disabled})`): no model;
//! 2. an explicit engine-wide model (`configure({embedModel})`, `LLM_WIKI_EMBED_MODEL`): that
//!    model for every vault;
//! 3. the vault's override, `retrieval.embedModel` in `.llm-wiki/config.json`: `"english"`,
//!    `"multilingual"` or `"auto"` (the default; anything else is reported and read as `auto`);
//! 4. auto: the language of a sample of at most [`SAMPLE_PAGES`] pages (evenly spaced over the
//!    pages sorted by path, the first [`SAMPLE_CHARS`] characters of each body), detected with
//!    `whatlang`. A vault indexed with MiniLM moves to the multilingual model when more than
//!    [`SWITCH_TO_MULTILINGUAL`] of its identified pages are not English, and one indexed with
//!    the multilingual model moves back only below [`SWITCH_BACK`]: between the two it keeps its
//!    model, so a vault near one threshold does not re-embed at every reindex.
//!
//! Mixed vaults (English pages beside others) stay on MiniLM until the non-English pages are the
//! majority: MiniLM measures better on English (docs/BENCHMARKS.md), lexical retrieval finds
//! pages in every script, and a vault of mostly English pages is better served by the English
//! model for most of its queries. The multilingual model is used when it is installed
//! ([`MULTILINGUAL_EMBED_DIR`] under a model root); otherwise the vault keeps MiniLM and the
//! reason says why. A choice never fails a reindex.
//!
//! The thresholds are design values, not fitted: a majority switches, and the 20-point band
//! keeps a vault from flipping when a few pages change.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ModelConfig, ModelDir, DEFAULT_EMBED_DIR};

/// Directory name of the multilingual embedder inside a model root.
pub const MULTILINGUAL_EMBED_DIR: &str = "multilingual-e5-small-int8";
/// Most pages whose language is detected.
pub const SAMPLE_PAGES: usize = 200;
/// Characters of a page body given to the language detector.
pub const SAMPLE_CHARS: usize = 2000;
/// A MiniLM vault moves to the multilingual model above this share of non-English pages.
pub const SWITCH_TO_MULTILINGUAL: f64 = 0.5;
/// A multilingual vault moves back to MiniLM below this share of non-English pages.
pub const SWITCH_BACK: f64 = 0.3;
/// The vault config key of the override (inside the `retrieval` object).
pub const OVERRIDE_KEY: &str = "embedModel";

/// The two model families a vault can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
  /// all-MiniLM-L6-v2 (the default model directory).
  English,
  /// multilingual-e5-small ([`MULTILINGUAL_EMBED_DIR`]).
  Multilingual,
}

impl Family {
  fn dir_name(self) -> &'static str {
    match self {
      Family::English => DEFAULT_EMBED_DIR,
      Family::Multilingual => MULTILINGUAL_EMBED_DIR,
    }
  }
}

/// The vault's `retrieval.embedModel` setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Override {
  /// Chosen from the pages' language.
  Auto,
  /// Always this family.
  Fixed(Family),
  /// A value that is none of the above (read as `Auto`; the reason says so).
  Invalid(String),
}

impl Override {
  /// The override in a vault config object (`{"retrieval": {"embedModel": "multilingual"}}`).
  pub fn of_config(config: &serde_json::Map<String, serde_json::Value>) -> Override {
    let Some(v) = config.get("retrieval").and_then(|r| r.get(OVERRIDE_KEY)) else {
      return Override::Auto;
    };
    match v.as_str().map(|s| s.trim().to_ascii_lowercase()) {
      Some(s) if s == "auto" || s.is_empty() => Override::Auto,
      Some(s) if s == "english" || s == "minilm" => Override::Fixed(Family::English),
      Some(s) if s == "multilingual" || s == "e5" => Override::Fixed(Family::Multilingual),
      _ => Override::Invalid(v.to_string()),
    }
  }
}

/// Languages of a page sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LanguageSample {
  /// Pages in the vault when sampled.
  pub vault_pages: usize,
  /// Pages read.
  pub sampled: usize,
  /// Pages whose language was identified (short or mixed pages may not be).
  pub identified: usize,
  /// Identified pages that are not English.
  pub non_english: usize,
}

impl LanguageSample {
  /// Share of identified pages that are not English (0 when none was identified).
  pub fn non_english_share(&self) -> f64 {
    if self.identified == 0 {
      0.0
    } else {
      self.non_english as f64 / self.identified as f64
    }
  }

  /// Add one page body.
  pub fn add(&mut self, text: &str) {
    self.sampled += 1;
    match page_language(text) {
      Some(true) => {
        self.identified += 1;
      }
      Some(false) => {
        self.identified += 1;
        self.non_english += 1;
      }
      None => {}
    }
  }
}

/// `Some(true)` when `text` is English, `Some(false)` when it is another language, `None` when
/// it cannot be told (too short, or a Latin-script text the detector is unsure of). A text in a
/// script English is not written in (CJK, Cyrillic, Arabic, ...) is not English whatever the
/// detector's confidence.
pub fn page_language(text: &str) -> Option<bool> {
  let body: String = body_of(text).chars().take(SAMPLE_CHARS).collect();
  let info = whatlang::detect(&body)?;
  if info.script() != whatlang::Script::Latin {
    return Some(false);
  }
  if info.lang() == whatlang::Lang::Eng {
    return Some(true);
  }
  info.is_reliable().then_some(false)
}

/// The page text after its YAML frontmatter, without fenced code blocks.
fn body_of(text: &str) -> String {
  let rest = match text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) {
    Some(r) => r.find("\n---").map_or(text, |end| &r[end + 4..]),
    None => text,
  };
  let mut out = String::with_capacity(rest.len().min(SAMPLE_CHARS * 4));
  let mut fenced = false;
  for line in rest.lines() {
    if line.trim_start().starts_with("```") {
      fenced = !fenced;
      continue;
    }
    if !fenced {
      out.push_str(line);
      out.push('\n');
    }
    if out.len() > SAMPLE_CHARS * 4 {
      break;
    }
  }
  out
}

/// At most [`SAMPLE_PAGES`] of `paths` (sorted), evenly spaced.
pub fn spaced_sample<T: Clone>(sorted: &[T]) -> Vec<T> {
  if sorted.len() <= SAMPLE_PAGES {
    return sorted.to_vec();
  }
  (0..SAMPLE_PAGES).map(|i| sorted[i * sorted.len() / SAMPLE_PAGES].clone()).collect()
}

/// Sample the languages of the pages at `files` (absolute paths, sorted), `vault_pages` in all.
pub fn sample_files(files: &[PathBuf], vault_pages: usize) -> LanguageSample {
  let mut s = LanguageSample { vault_pages, ..Default::default() };
  for f in spaced_sample(files) {
    // A page that cannot be read now is left out (the reindex reports it).
    if let Ok(bytes) = std::fs::read(&f) {
      s.add(&String::from_utf8_lossy(&bytes[..bytes.len().min(SAMPLE_CHARS * 8)]));
    }
  }
  s
}

/// A vault's embedding model and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbedChoice {
  /// The family wanted for the vault (what hysteresis continues from), `None` when no model is
  /// chosen per vault (dense off or an engine-wide model).
  pub family: Option<Family>,
  /// Model directory to use, `None` when none is available.
  #[serde(skip)]
  pub dir: Option<PathBuf>,
  /// Its manifest id ("" when none).
  pub model: String,
  /// Why, in one sentence.
  pub reason: String,
  /// The language sample the choice was made from (auto choices only).
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub sample: Option<LanguageSample>,
}

/// The installed model of `family` under the model roots of `c`.
pub fn family_dir(c: &ModelConfig, family: Family) -> Option<PathBuf> {
  c.model_roots.iter().map(|r| r.join(family.dir_name())).find(|d| d.join("manifest.json").is_file())
}

fn model_id(dir: &Path) -> Option<String> {
  ModelDir::open(dir).ok().map(|m| m.manifest.id)
}

/// The family a vault wants from its sample, continuing from `previous` (hysteresis).
pub fn family_of_sample(sample: &LanguageSample, previous: Option<Family>) -> Family {
  let share = sample.non_english_share();
  match previous.unwrap_or(Family::English) {
    Family::English if share > SWITCH_TO_MULTILINGUAL => Family::Multilingual,
    Family::Multilingual if share < SWITCH_BACK => Family::English,
    kept => kept,
  }
}

/// Whether the choice needs the vault's pages sampled: not when dense retrieval is off or one
/// model is set for every vault. (A vault override still records the sample, so that removing
/// the override needs no new one.)
pub fn needs_sample(c: &ModelConfig) -> bool {
  !c.disabled && c.embed_model.is_none()
}

/// Decide the vault's model. `sample` is the language sample (auto choices), `previous` the
/// family the vault used so far.
pub fn decide(
  c: &ModelConfig,
  over: &Override,
  sample: Option<LanguageSample>,
  previous: Option<Family>,
) -> EmbedChoice {
  if c.disabled {
    return EmbedChoice {
      family: None,
      dir: None,
      model: String::new(),
      reason: "dense retrieval is off".into(),
      sample: None,
    };
  }
  if let Some(dir) = &c.embed_model {
    return EmbedChoice {
      family: None,
      dir: Some(dir.clone()),
      model: model_id(dir).unwrap_or_default(),
      reason: "the engine's embedModel setting (or LLM_WIKI_EMBED_MODEL) applies to every vault".into(),
      sample: None,
    };
  }
  let (wanted, why) = match over {
    Override::Fixed(f) => (*f, format!("the vault config sets retrieval.{OVERRIDE_KEY}")),
    Override::Auto | Override::Invalid(_) if sample.is_none() => (
      previous.unwrap_or(Family::English),
      "the pages' language is sampled at the next reindex (until then the vault keeps its model)".to_string(),
    ),
    Override::Auto | Override::Invalid(_) => {
      let s = sample.unwrap_or_default();
      let f = family_of_sample(&s, previous);
      let share = s.non_english_share();
      let mut why = format!(
        "{} of {} identified pages ({:.0}%) of a {}-page sample are not English",
        s.non_english,
        s.identified,
        100.0 * share,
        s.sampled
      );
      if previous == Some(f) && (SWITCH_BACK..=SWITCH_TO_MULTILINGUAL).contains(&share) {
        why.push_str(&format!(
          " (kept: a vault switches above {:.0}% and back below {:.0}%)",
          100.0 * SWITCH_TO_MULTILINGUAL,
          100.0 * SWITCH_BACK
        ));
      }
      if let Override::Invalid(v) = over {
        why.push_str(&format!("; retrieval.{OVERRIDE_KEY} = {v} is not english, multilingual or auto"));
      }
      (f, why)
    }
  };
  let (dir, reason) = match (wanted, family_dir(c, wanted)) {
    (_, Some(d)) => (Some(d), why),
    (Family::Multilingual, None) => (
      family_dir(c, Family::English),
      format!(
        "{why}, but the multilingual model ({MULTILINGUAL_EMBED_DIR}) is not installed in any model root: \
         using the English model (python3 scripts/fetch_models.py builds it)"
      ),
    ),
    (Family::English, None) => (None, format!("{why}, but no embedding model is installed")),
  };
  let model = dir.as_deref().and_then(model_id).unwrap_or_default();
  EmbedChoice { family: Some(wanted), dir, model, reason, sample }
}

/// The directory of the installed model whose manifest id is `id`: the engine-wide model when
/// one is configured (whatever its id), else one of the two families under the model roots.
/// Recall uses the model a vault's vectors were built with.
pub fn dir_for_model(c: &ModelConfig, id: &str) -> Option<PathBuf> {
  if c.disabled {
    return None;
  }
  if let Some(dir) = &c.embed_model {
    return Some(dir.clone());
  }
  [Family::English, Family::Multilingual]
    .into_iter()
    .filter_map(|f| family_dir(c, f))
    .find(|d| model_id(d).as_deref() == Some(id))
}

/// True when some embedding model is set up (engine-wide or either family installed).
pub fn any_model(c: &ModelConfig) -> bool {
  !c.disabled
    && (c.embed_model.is_some()
      || family_dir(c, Family::English).is_some()
      || family_dir(c, Family::Multilingual).is_some())
}

/// The choice recorded by the last reindex (`<store root>/embed-choice.json`), if any.
pub fn read_recorded(file: &Path) -> Option<EmbedChoice> {
  serde_json::from_slice(&std::fs::read(file).ok()?).ok()
}

/// Record a choice (atomic replace).
pub fn record(file: &Path, choice: &EmbedChoice) -> crate::error::Result<()> {
  let text = serde_json::to_vec_pretty(choice).map_err(|e| crate::error::Error::Index(e.to_string()))?;
  crate::fsutil::atomic_write(file, &text)
}

#[cfg(test)]
#[path = "choice_tests.rs"]
mod tests;
