//! The `overview` (`wikiIndex`) and `graph` (`graphQuery`) commands: the rendered text by default
//! (diagnostics on stderr), the whole result with `--json`.

use std::io::Write;

use llm_wiki_core::error::Result;
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
