//! The `calibrate` command: the dense confidence fitted on a labelled query set.

use std::io::Write;
use std::path::{Path, PathBuf};

use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions};

use crate::vault_paths;

/// The `calibrate` command: index the labelled set's vaults (vectors), collect each query's dense
/// evidence, fit, print, and with `write` store the fit in the embedding model's manifest.
#[allow(clippy::too_many_arguments)]
pub(crate) fn calibrate(
  labels_path: &Path,
  default_vault: Option<&Path>,
  max_negative_rate: f64,
  write: bool,
  fitted_on: Option<String>,
  no_index: bool,
  json: bool,
  out: &mut impl Write,
) -> Result<()> {
  use llm_wiki_core::retrieve::calibrate as cal;
  let model_dir = llm_wiki_core::models::resolve_embed_dir(&llm_wiki_core::models::effective_config())
    .ok_or_else(|| Error::ModelUnavailable("no embedding model is configured".into()))?;
  let labels = cal::read_labels(labels_path)?;
  if !no_index {
    let mut roots: Vec<PathBuf> = Vec::new();
    for q in &labels {
      let r = cal::vault_of(q, labels_path, default_vault)?;
      if !roots.contains(&r) {
        roots.push(r);
      }
    }
    for root in roots {
      let opts =
        ReindexOptions { components: vec![Component::Lexical, Component::Vectors], ..Default::default() };
      let r = reindex_vault(&vault_paths(&root)?, &opts);
      if !r.ok {
        return Err(Error::Index(format!(
          "{}: {}",
          root.display(),
          r.errors.first().map(|e| e.message.clone()).unwrap_or_else(|| "reindex failed".into())
        )));
      }
    }
  }
  let evidence = cal::collect_evidence(&labels, labels_path, default_vault)?;
  let fit = cal::fit_evidence(&labels, &evidence, max_negative_rate)?;
  let model = llm_wiki_core::models::ModelDir::open(&model_dir)?.manifest.id;
  let fitted_on = fitted_on.unwrap_or_else(|| {
    let name = labels_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{name}: {} related, {} unrelated queries", fit.positives, fit.negatives)
  });
  if write {
    cal::store_calibration(&model_dir, &fit, &fitted_on)?;
  }
  if json {
    let v = serde_json::json!({ "model": model, "fit": fit, "fittedOn": fitted_on, "written": write });
    writeln!(out, "{}", serde_json::to_string_pretty(&v).unwrap_or_default()).ok();
    return Ok(());
  }
  writeln!(
    out,
    "{model}: cosine floor {:.4}, span {:.4} (automatic floor 0.50 at cosine {:.4})\n\
     fitted on {} related / {} unrelated queries; at the automatic floor {:.1}% of related and \
     {:.1}% of unrelated queries pass (explicit floor: {:.1}% of related)",
    fit.cosine_floor,
    fit.cosine_span,
    fit.cosine_at_auto,
    fit.positives,
    fit.negatives,
    100.0 * fit.positive_pass_rate,
    100.0 * fit.negative_pass_rate,
    100.0 * fit.positive_explicit_rate
  )
  .ok();
  if write {
    writeln!(out, "stored in {}", model_dir.join("manifest.json").display()).ok();
  } else {
    writeln!(out, "not stored (run with --write to store it in the model's manifest.json)").ok();
  }
  Ok(())
}
