//! The link graph's commands: `overview` (`wikiIndex`) and `graph` (`graphQuery`), the rendered
//! text by default (diagnostics on stderr), the whole result with `--json`; `neighbours` and
//! `path`.

use std::io::Write;

use llm_wiki_core::error::Result;
use llm_wiki_core::memory::explore;
use llm_wiki_core::memory::graph_query::{graph_query, GraphQueryOptions};
use llm_wiki_core::memory::orientation::wiki_index;
use llm_wiki_core::retrieve::recall::RecallDiagnostic;
use llm_wiki_core::vault::VaultPaths;

fn print(
  value: serde_json::Result<String>,
  text: &str,
  diagnostics: &[RecallDiagnostic],
  json: bool,
  out: &mut impl Write,
) {
  if json {
    writeln!(out, "{}", value.unwrap_or_default()).ok();
  } else {
    writeln!(out, "{text}").ok();
    for d in diagnostics {
      eprintln!("{}: {}", d.code, d.message);
    }
  }
}

/// `overview <vault> [--max-tokens N] [--json]`.
pub(crate) fn overview(
  paths: &VaultPaths,
  max_tokens: Option<u64>,
  json: bool,
  out: &mut impl Write,
) -> Result<()> {
  let ix = wiki_index(paths, max_tokens)?;
  print(serde_json::to_string_pretty(&ix), &ix.text, &ix.diagnostics, json, out);
  Ok(())
}

/// `graph <vault> <query> [--budget-tokens N] [--hops N] [--seeds N] [--mode M] [--json]`.
pub(crate) fn graph(
  paths: &VaultPaths,
  query: &str,
  opts: &GraphQueryOptions,
  json: bool,
  out: &mut impl Write,
) -> Result<()> {
  let r = graph_query(paths, query, opts)?;
  print(serde_json::to_string_pretty(&r), &r.text, &r.diagnostics, json, out);
  Ok(())
}

/// `neighbours <vault> <page>`: the pages around one page (JSON, or its text with `text`).
pub(crate) fn neighbours(
  paths: &VaultPaths,
  page: &str,
  req: &explore::NeighbourRequest,
  text: bool,
  out: &mut impl Write,
) -> Result<()> {
  let n = explore::neighbours(paths, page, req)?;
  if text {
    writeln!(out, "{}", n.text).ok();
  } else {
    writeln!(out, "{}", serde_json::to_string_pretty(&n).unwrap_or_default()).ok();
  }
  Ok(())
}

/// `path <vault> <from> <to>`: the shortest link path between two pages, as JSON.
pub(crate) fn path(
  paths: &VaultPaths,
  from: &str,
  to: &str,
  max_hops: u32,
  out: &mut impl Write,
) -> Result<()> {
  let p = explore::link_path(paths, from, to, max_hops)?;
  writeln!(out, "{}", serde_json::to_string_pretty(&p).unwrap_or_default()).ok();
  Ok(())
}
