//! Calibration suite (`bench calibration`): builds a labelled set disjoint from every query the
//! other suites report, fits the configured embedding model's cosine mapping on it with the same
//! procedure as the user `calibrate` command, and writes reliability curves (top-1 score bucket →
//! share of top-1 pages that are relevant) for the lexical and the dense modes.
//!
//! The set (written as `calibration-labels.jsonl`, the `calibrate` format, regenerated and not
//! committed — it carries the collection's text):
//! * **split vault**: every `stride`-th abstract of a BEIR set (by id) that no test query judges,
//!   with its title replaced by `Abstract <id>` (SciFact pages keep the title only in the
//!   frontmatter, so the body is the untouched abstract);
//! * **related** queries: each split abstract's original title, related = that abstract;
//! * **unrelated** queries: the questions of a second collection (e.g. locomo-dev) on the split
//!   vault, and the split titles on that collection's vault.

use super::*;
use llm_wiki_core::retrieve::calibrate::{collect_evidence, fit_evidence, unrelated_by_group, LabelledQuery};

/// Options of [`run_calibration`].
pub struct CalibrationOptions {
  /// BEIR-style set whose unjudged abstracts form the split (e.g. SciFact).
  pub beir: PathBuf,
  /// BEIR-style set of another domain: its questions and vault are the negatives (e.g. locomo-dev).
  pub negatives: PathBuf,
  /// Files of written unrelated queries (`calibrate` JSONL, `related` empty) run on the split
  /// vault; each query's `group` names its row in the per-group counts.
  pub extra_negatives: Vec<PathBuf>,
  /// Take every `stride`-th unjudged abstract.
  pub stride: usize,
  /// Share of unrelated queries allowed at or above the automatic floor.
  pub max_negative_rate: f64,
  pub common: BenchCommon,
}

/// Frontmatter `title` of a flat BEIR page and the page with its title replaced.
fn retitle(markdown: &str, id: &str) -> Option<(String, String)> {
  let rest = markdown.strip_prefix("---\n")?;
  let end = rest.find("\n---")?;
  let (front, body) = rest.split_at(end);
  let mut title = None;
  let mut lines = Vec::new();
  for l in front.lines() {
    if let Some(t) = l.strip_prefix("title:") {
      let t = t.trim();
      let t = serde_json::from_str::<String>(t).unwrap_or_else(|_| t.trim_matches('\'').to_string());
      title = Some(t);
      lines.push(format!("title: \"Abstract {id}\""));
    } else {
      lines.push(l.to_string());
    }
  }
  let title = title.filter(|t| t.split_whitespace().count() >= 3)?;
  Some((title, format!("---\n{}{}", lines.join("\n"), body)))
}

/// Top-1 score bucket → how many top-1 pages, how many relevant, how many from unrelated queries.
fn reliability(rows: &[(f64, bool, bool)]) -> Vec<(String, usize, usize, usize)> {
  (0..10)
    .map(|b| {
      let lo = b as f64 / 10.0;
      let hi = lo + 0.1;
      let inb: Vec<&(f64, bool, bool)> =
        rows.iter().filter(|(s, _, _)| *s >= lo && (*s < hi || (b == 9 && *s <= 1.0))).collect();
      let label = if b == 9 { "[0.9, 1.0]".to_string() } else { format!("[{lo:.1}, {hi:.1})") };
      (label, inb.len(), inb.iter().filter(|r| r.1).count(), inb.iter().filter(|r| r.2).count())
    })
    .collect()
}

/// Page ids and original titles of the split vault's abstracts.
type Titles = Vec<(String, String)>;

/// The split vault: every `stride`-th abstract of `opts.beir` judged by no test query,
/// retitled. Its directory's guard, the vault and the (id, original title) of each page.
fn split_vault(opts: &CalibrationOptions, beir: &BeirSet) -> Result<(TempDir, VaultPaths, Titles)> {
  let common = &opts.common;
  let judged: HashSet<&str> = beir.qrels.values().flat_map(|j| j.keys().map(String::as_str)).collect();
  let split_tmp = common.temp("calibration-split")?;
  let split = VaultPaths::new_layout(split_tmp.path());
  create_dir(&split.wiki)?;
  write_text_file(&split.config_file(), "{\"name\":\"calibration\"}")?;
  let src = opts.beir.join("vault");
  let mut names: Vec<String> = std::fs::read_dir(&src)
    .map_err(|e| Error::io("read directory", &src, e))?
    .filter_map(|e| e.ok())
    .map(|e| e.file_name().to_string_lossy().into_owned())
    .filter(|n| n.ends_with(".md"))
    .collect();
  names.sort();
  let mut titles: Vec<(String, String)> = Vec::new();
  let unjudged: Vec<&String> = names.iter().filter(|n| !judged.contains(n.trim_end_matches(".md"))).collect();
  for n in unjudged.iter().step_by(opts.stride.max(1)) {
    let id = n.trim_end_matches(".md");
    let text =
      std::fs::read_to_string(src.join(n.as_str())).map_err(|e| Error::io("read", src.join(n), e))?;
    if let Some((title, page)) = retitle(&text, id) {
      write_text_file(&split.wiki.join(n.as_str()), &page)?;
      titles.push((id.to_string(), title));
    }
  }
  common.say(format!("calibration split: {} of {} unjudged abstracts", titles.len(), unjudged.len()));
  Ok((split_tmp, split, titles))
}

/// A vault's root as the labelled set names it (absolute: the file is not portable).
fn vault_str(p: &VaultPaths) -> String {
  p.root.to_string_lossy().into_owned()
}

/// The labelled set, in the `calibrate` format: the split titles (related to their abstract),
/// the negatives' questions on the split vault, the titles on the negatives' vault, and the
/// extra written negatives on the split vault. Also the number of extra negatives.
fn labelled_set(
  opts: &CalibrationOptions,
  titles: &[(String, String)],
  neg_set: &BeirSet,
  split: &VaultPaths,
  neg_vault: &VaultPaths,
) -> Result<(Vec<LabelledQuery>, usize)> {
  let mut labels: Vec<LabelledQuery> = Vec::new();
  for (id, title) in titles {
    labels.push(LabelledQuery {
      query: title.clone(),
      related: vec![id.clone()],
      vault: Some(vault_str(split)),
      group: None,
    });
  }
  for (_, q) in &neg_set.queries {
    labels.push(LabelledQuery {
      query: q.clone(),
      related: vec![],
      vault: Some(vault_str(split)),
      group: Some("chat questions on abstracts".into()),
    });
  }
  for (_, title) in titles {
    labels.push(LabelledQuery {
      query: title.clone(),
      related: vec![],
      vault: Some(vault_str(neg_vault)),
      group: Some("abstract titles on chats".into()),
    });
  }
  let mut extra = 0;
  for p in &opts.extra_negatives {
    for q in llm_wiki_core::retrieve::calibrate::read_labels(p)? {
      if !q.related.is_empty() {
        return Err(Error::invalid(format!("{}: extra negatives must have no related page", p.display())));
      }
      labels.push(LabelledQuery {
        query: q.query,
        related: vec![],
        vault: Some(vault_str(split)),
        group: Some(q.group.unwrap_or_else(|| "written prompts on abstracts".into())),
      });
      extra += 1;
    }
  }
  Ok((labels, extra))
}

/// Write the labelled set to `<out>/calibration-labels.jsonl`; its absolute path.
fn write_labels(out: &Path, labels: &[LabelledQuery]) -> Result<PathBuf> {
  create_dir(out)?;
  let labels_path =
    std::path::absolute(out.join("calibration-labels.jsonl")).map_err(|e| Error::io("resolve", out, e))?;
  let jsonl: String =
    labels.iter().map(|l| serde_json::to_string(l).unwrap_or_default() + "\n").collect::<Vec<_>>().concat();
  write_text_file(&labels_path, &jsonl)?;
  Ok(labels_path)
}

/// The report's title, machine context and description of the labelled set.
fn calibration_header(
  opts: &CalibrationOptions,
  context: &Value,
  split_pages: usize,
  neg_set: &BeirSet,
  extra: usize,
) -> String {
  let mut md = String::from("# Calibration: cosine mapping fit and reliability curves\n\n");
  md.push_str(&context_markdown(context));
  let _ = writeln!(
    md,
    "- Split vault: every {}th abstract of `{}` judged by no test query ({} pages), title replaced by \
     `Abstract <id>`.\n- Related queries: each split abstract's original title ({}). Unrelated queries: the {} \
     questions of `{}` on the split vault, the {} titles on that collection's vault, and {} written \
     unrelated prompts{} on the split vault.\n",
    opts.stride,
    report_path(&opts.beir),
    split_pages,
    split_pages,
    neg_set.queries.len(),
    report_path(&opts.negatives),
    split_pages,
    extra,
    if opts.extra_negatives.is_empty() {
      String::new()
    } else {
      format!(" ({})", opts.extra_negatives.iter().map(|p| format!("`{}`", report_path(p))).collect::<Vec<_>>().join(", "))
    }
  );
  md
}

/// The dense fit (the `calibrate` procedure) on the labelled set: its section of the report and
/// its `fit` / `model` fields of the JSON.
fn dense_fit(
  opts: &CalibrationOptions,
  embedder: &Embedder,
  labels: &[LabelledQuery],
  labels_path: &Path,
  md: &mut String,
  doc: &mut Value,
) -> Result<()> {
  let evidence = collect_evidence(labels, labels_path, None)?;
  let fit = fit_evidence(labels, &evidence, opts.max_negative_rate)?;
  let model = embedder.id().to_string();
  opts.common.say(format!(
    "fit {model}: floor {:.4} span {:.4} (auto at {:.4}); pos pass {:.3}, neg pass {:.4}",
    fit.cosine_floor, fit.cosine_span, fit.cosine_at_auto, fit.positive_pass_rate, fit.negative_pass_rate
  ));
  let pos: Vec<f64> = labels
    .iter()
    .zip(&evidence)
    .filter(|(l, _)| !l.related.is_empty())
    .filter_map(|(_, e)| e.related_best)
    .collect();
  let neg: Vec<f64> =
    labels.iter().zip(&evidence).filter(|(l, _)| l.related.is_empty()).map(|(_, e)| e.top1).collect();
  let _ = writeln!(
    md,
    "## Dense: fitted cosine mapping ({model})\n\nSame procedure as `llm-wiki-retrieval calibrate` \
     (max unrelated rate at the automatic floor {}):\n\n| cosine floor (→ 0) | span | cosine at 0.50 | related \
     queries | unrelated queries | related ≥ 0.50 | unrelated ≥ 0.50 | related ≥ 0.25 |\n|---|---|---|---|---|---|---|---|\n\
     | {:.4} | {:.4} | {:.4} | {} | {} | {:.3} | {:.4} | {:.3} |\n",
    opts.max_negative_rate,
    fit.cosine_floor,
    fit.cosine_span,
    fit.cosine_at_auto,
    fit.positives,
    fit.negatives,
    fit.positive_pass_rate,
    fit.negative_pass_rate,
    fit.positive_explicit_rate
  );
  let _ =
    writeln!(md, "| cosines | n | p5 | p25 | p50 | p75 | p95 | max |\n|---|---|---|---|---|---|---|---|");
  // One row of the cosine table: a group's size and its score distribution.
  let row = |md: &mut String, name: &str, v: &[f64]| {
    let d = score_distribution(v, 1.0);
    let g = |k: &str| d.get(k).and_then(Value::as_f64).map_or("—".into(), |x| format!("{x:.3}"));
    let cells: Vec<String> = ["p5", "p25", "p50", "p75", "p95", "max"].iter().map(|k| g(k)).collect();
    let _ = writeln!(md, "| {name} | {} | {} |", v.len(), cells.join(" | "));
  };
  for (name, v) in [("related: best related page", &pos), ("unrelated: top-1", &neg)] {
    row(md, name, v);
  }
  for (name, v) in &unrelated_by_group(labels, evidence.iter().map(|e| e.top1)) {
    row(md, &format!("unrelated: {name}"), v);
  }
  md.push('\n');
  doc["fit"] = to_value(&fit);
  doc["model"] = json!(model);
  Ok(())
}

/// The reliability curve of `mode` (automatic scoring): its section of the report and its JSON.
fn reliability_curve(
  mode: RetrievalMode,
  labels: &[LabelledQuery],
  split: &VaultPaths,
  neg_vault: &VaultPaths,
  common: &BenchCommon,
  md: &mut String,
) -> Result<Value> {
  // Scored as automatic recall: the curve is what the automatic floor acts on.
  let ranked = RecallOptions { scoring: Scoring::Automatic, ..common.recall_options(ranked_policy(3), mode) };
  let mut rows: Vec<(f64, bool, bool)> = Vec::new();
  let mut used: BTreeMap<String, usize> = BTreeMap::new();
  for (i, l) in labels.iter().enumerate() {
    let paths = if l.vault.as_deref() == Some(vault_str(split).as_str()) { split } else { neg_vault };
    let a = ask(paths, &format!("c{i}"), &l.query, &ranked)?;
    *used.entry(a.used.as_str().to_string()).or_insert(0) += 1;
    let top = a.top.first();
    let score = top.map_or(0.0, |t| t.raw_score);
    let relevant = top.is_some_and(|t| l.related.contains(&t.id));
    rows.push((score, relevant, l.related.is_empty()));
  }
  let curve = reliability(&rows);
  let _ = writeln!(
    md,
    "## Reliability: {}, automatic scoring (modes used: {})\n\n| top-1 score | queries | top-1 relevant | precision | of which unrelated queries |\n|---|---|---|---|---|",
    mode.as_str(),
    fmt_used(&used)
  );
  for (label, n, rel, neg) in &curve {
    let p = if *n == 0 { "—".to_string() } else { format!("{:.2}", *rel as f64 / *n as f64) };
    let _ = writeln!(md, "| {label} | {n} | {rel} | {p} | {neg} |");
  }
  let above: Vec<&(f64, bool, bool)> = rows.iter().filter(|r| r.0 >= AUTOMATIC_FLOOR).collect();
  let _ = writeln!(
    md,
    "\nAt or above the automatic floor ({AUTOMATIC_FLOOR}): {} top-1 pages, {} relevant, {} from unrelated queries \
     ({} of {} unrelated queries).\n",
    above.len(),
    above.iter().filter(|r| r.1).count(),
    above.iter().filter(|r| r.2).count(),
    above.iter().filter(|r| r.2).count(),
    rows.iter().filter(|r| r.2).count()
  );
  let _ = writeln!(md, "| unrelated group | queries | top-1 at or above {AUTOMATIC_FLOOR} |\n|---|---|---|");
  for (g, scores) in unrelated_by_group(labels, rows.iter().map(|r| r.0)) {
    let above = scores.iter().filter(|s| **s >= AUTOMATIC_FLOOR).count();
    let _ = writeln!(md, "| {g} | {} | {above} |", scores.len());
  }
  md.push('\n');
  Ok(json!(curve
    .iter()
    .map(|(l, n, r, g)| json!({"bucket": l, "queries": n, "relevant": r, "unrelated": g}))
    .collect::<Vec<_>>()))
}

/// Run the calibration suite.
pub fn run_calibration(opts: &CalibrationOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  let context = machine_context();
  let beir = load_beir_dir(&opts.beir)?;
  let neg_set = load_beir_dir(&opts.negatives)?;
  let (split_tmp, split, titles) = split_vault(opts, &beir)?;
  let (neg_tmp, neg_vault, _) = common.beir_copy(&opts.negatives, "calibration-negatives")?;

  // Vectors (and the dense fit) only when a dense mode is asked for: a lexical-only run (the
  // reliability of lexical confidence) needs no embedding.
  let with_vectors = common.needs_vectors();
  let split_ix = build_index(&split, with_vectors, "calibration-split", common)?;
  let neg_ix = build_index(&neg_vault, with_vectors, "calibration-negatives", common)?;

  let (labels, extra) = labelled_set(opts, &titles, &neg_set, &split, &neg_vault)?;
  let labels_path = write_labels(&common.out, &labels)?;
  let mut out = BenchOutput::default();
  out.files.push(labels_path.clone());
  let mut md = calibration_header(opts, &context, titles.len(), &neg_set, extra);
  let mut doc = json!({
    "schema": SCHEMA, "kind": "calibration", "context": context,
    "beir": report_path(&opts.beir), "negatives": report_path(&opts.negatives),
    "stride": opts.stride, "splitPages": titles.len(),
  });
  match &split_ix.embedder {
    Some(embedder) => dense_fit(opts, embedder, &labels, &labels_path, &mut md, &mut doc)?,
    None => md.push_str("No embedding model, or lexical modes only: no dense fit.\n\n"),
  }
  let mut curves = Map::new();
  for &mode in &common.modes {
    let curve = reliability_curve(mode, &labels, &split, &neg_vault, common, &mut md)?;
    curves.insert(mode.as_str().to_string(), curve);
  }
  doc["reliability"] = Value::Object(curves);
  doc["index"] = json!({"split": to_value(&split_ix.report), "negatives": to_value(&neg_ix.report)});
  record_json(&mut out, common.out.join("calibration.json"), &doc)?;
  record_markdown(&mut out, common.out.join("calibration.md"), md)?;
  release_reader(&split);
  release_reader(&neg_vault);
  drop((split_tmp, neg_tmp));
  Ok(out)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn retitle_replaces_only_the_title() {
    let md = "---\ntitle: \"A long enough title.\"\nid: \"7\"\ntype: source\n---\n\nBody text.";
    let (t, page) = retitle(md, "7").unwrap();
    assert_eq!(t, "A long enough title.");
    assert_eq!(page, "---\ntitle: \"Abstract 7\"\nid: \"7\"\ntype: source\n---\n\nBody text.");
    assert!(retitle("---\ntitle: Short\n---\nx", "1").is_none());
    assert!(retitle("no frontmatter", "1").is_none());
  }

  #[test]
  fn reliability_buckets() {
    let rows = [(0.05, false, true), (0.55, true, false), (0.58, false, false), (1.0, true, false)];
    let c = reliability(&rows);
    assert_eq!(c[0], ("[0.0, 0.1)".into(), 1, 0, 1));
    assert_eq!(c[5], ("[0.5, 0.6)".into(), 2, 1, 0));
    assert_eq!(c[9], ("[0.9, 1.0]".into(), 1, 1, 0));
  }
}
