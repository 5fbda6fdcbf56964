//! The `recall`, `run` (a TREC run file for a query set) and `memory` commands.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use llm_wiki_core::error::Result;
use llm_wiki_core::memory::{recall_memory, MemoryOptions};
use llm_wiki_core::retrieve::{recall_wiki, RecallOptions};
use llm_wiki_core::vault::VaultPaths;

use crate::trec::{load_queries_jsonl, recall_run_lines, write_run};

/// `recall <vault> <query>`: the results, one line and a preview each (with `explain`, the
/// scores, lines and reasons, and the trace).
pub(crate) fn recall(
  paths: &VaultPaths,
  query: &str,
  opts: &RecallOptions,
  json: bool,
  explain: bool,
  out: &mut impl Write,
) -> Result<()> {
  let started = Instant::now();
  let r = recall_wiki(paths, query, opts)?;
  let ms = started.elapsed().as_secs_f64() * 1000.0;
  if json {
    writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
    return Ok(());
  }
  if r.results.is_empty() {
    writeln!(out, "No reliable memory found for {query:?} ({ms:.1} ms, mode {}).", r.mode.as_str()).ok();
  }
  for (i, res) in r.results.iter().enumerate() {
    writeln!(
      out,
      "{}. [[{}]] {} — {} (score {:.2}){}",
      i + 1,
      res.id,
      res.page_type,
      res.title,
      res.score,
      res.vault_label.as_deref().map(|l| format!(" {l}")).unwrap_or_default()
    )
    .ok();
    writeln!(out, "   {}", res.preview).ok();
    if explain {
      writeln!(
        out,
        "   confidence {:.3} × multiplier {:.2}; lines {}-{}; {}",
        res.confidence,
        res.multiplier,
        res.line_start,
        res.line_end,
        res.match_reasons.join("; ")
      )
      .ok();
    }
  }
  for d in &r.diagnostics {
    writeln!(out, "diagnostic {}: {}", d.code, d.message).ok();
  }
  if explain {
    writeln!(out, "mode used: {} ({ms:.1} ms)", r.mode.as_str()).ok();
    for t in &r.trace {
      writeln!(out, "trace: {t}").ok();
    }
  }
  Ok(())
}

/// `run <vault> <queries> --out <file>`: recall every query of a JSONL set and write the TREC
/// run file tagged `tag`, with the per-query times.
pub(crate) fn run_queries(
  paths: &VaultPaths,
  queries: &Path,
  out_path: &Path,
  tag: &str,
  opts: &RecallOptions,
  out: &mut impl Write,
) -> Result<()> {
  let queries = load_queries_jsonl(queries)?;
  let mut lines = Vec::new();
  let mut times = Vec::with_capacity(queries.len());
  for (qid, text) in &queries {
    let started = Instant::now();
    let r = recall_wiki(paths, text, opts)?;
    times.push(started.elapsed().as_secs_f64() * 1000.0);
    lines.extend(recall_run_lines(qid, &r.results));
  }
  write_run(out_path, tag, &lines)?;
  times.sort_by(|a, b| a.total_cmp(b));
  let pct = |p: f64| times.get(((times.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0);
  writeln!(
    out,
    "wrote {} lines for {} queries to {} (per query: p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms)",
    lines.len(),
    queries.len(),
    out_path.display(),
    pct(0.5),
    pct(0.95),
    pct(1.0)
  )
  .ok();
  Ok(())
}

/// `memory <vault> <query>`: the context bundle's text.
pub(crate) fn memory(
  paths: &VaultPaths,
  query: &str,
  opts: &MemoryOptions,
  json: bool,
  out: &mut impl Write,
) -> Result<()> {
  let r = recall_memory(paths, query, opts)?;
  if json {
    writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
  } else if r.bundles.is_empty() && r.context.is_empty() {
    writeln!(out, "No reliable memory found for {query:?} (mode {}).", r.mode.as_str()).ok();
  } else {
    write!(out, "{}", r.context).ok();
  }
  for d in &r.diagnostics {
    writeln!(out, "diagnostic {}: {}", d.code, d.message).ok();
  }
  Ok(())
}
