//! The `init`, `index` and `status` commands.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressStyle};
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::store::{
  read_index_status, reindex_vault, Component, ProgressSink, ReindexOptions, ReindexProgressEvent, Scope,
};
use llm_wiki_core::vault::VaultPaths;

use crate::PROGRAM;

/// `init <folder>`: the files that make a folder of notes a vault.
pub(crate) fn init(folder: &Path, json: bool, out: &mut impl Write) -> Result<()> {
  let r = llm_wiki_core::vault::init::init_vault(folder)?;
  if json {
    writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
  } else if r.created.is_empty() {
    writeln!(out, "{} already is a vault ({} layout, {} notes); nothing created", r.root, r.layout, r.pages)
      .ok();
  } else {
    writeln!(out, "initialised {} ({} Markdown notes); created:", r.root, r.pages).ok();
    for p in &r.created {
      writeln!(out, "  {p}").ok();
    }
    writeln!(out, "next: {PROGRAM} index {}", r.root).ok();
  }
  Ok(())
}

/// `index <vault>`: reindex it, with a progress bar (or JSON progress events on stderr), and
/// report the counts, warnings and errors; a failed run is an error.
pub(crate) fn index(
  paths: &VaultPaths,
  force: bool,
  all: bool,
  components: &[String],
  json: bool,
  progress_events: bool,
  out: &mut impl Write,
) -> Result<()> {
  let (bar, sink) = progress_bar();
  // One vault: the event's `vault` is empty; the line is its progress alone.
  let events: ProgressSink = Arc::new(|e: ReindexProgressEvent| {
    eprintln!("{}", serde_json::to_string(&e.progress).unwrap_or_default());
  });
  let progress = if progress_events { Some(events) } else { (!json).then_some(sink) };
  let opts = ReindexOptions {
    scope: if all { Scope::All } else { Scope::Changed },
    components: parse_components(components)?,
    force,
    progress,
    ..Default::default()
  };
  let r = reindex_vault(paths, &opts);
  bar.finish_and_clear();
  if json {
    writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
  } else {
    writeln!(
      out,
      "{}: {} indexed, {} updated, {} unchanged, {} removed; {} chunks; {:.0} ms; status {}",
      if r.ok { "ok" } else { "failed" },
      r.documents.indexed,
      r.documents.updated,
      r.documents.unchanged,
      r.documents.removed,
      r.chunks.total,
      r.elapsed_ms,
      r.status.state.as_str()
    )
    .ok();
    for w in &r.warnings {
      writeln!(
        out,
        "warning {}: {}{}",
        w.code,
        w.message,
        w.path.as_deref().map(|p| format!(" ({p})")).unwrap_or_default()
      )
      .ok();
    }
    for e in &r.errors {
      writeln!(out, "error {}: {}", e.code, e.message).ok();
    }
  }
  if !r.ok {
    return Err(Error::Index(
      r.errors.first().map(|e| e.message.clone()).unwrap_or_else(|| "cancelled".into()),
    ));
  }
  Ok(())
}

/// `status <vault>`: the index's state, counts and issues.
pub(crate) fn status(paths: &VaultPaths, json: bool, out: &mut impl Write) -> Result<()> {
  let s = read_index_status(paths);
  if json {
    writeln!(out, "{}", serde_json::to_string_pretty(&s).unwrap_or_default()).ok();
  } else {
    writeln!(
      out,
      "state: {}\ndocuments: {} ({} canonical, {} evidence)\nchunks: {}\nembeddings pending: {}\nengine: {}",
      s.state.as_str(),
      s.total_documents,
      s.canonical_documents,
      s.evidence_documents,
      s.total_chunks,
      s.needs_embedding,
      s.engine_version
    )
    .ok();
    for i in &s.issues {
      writeln!(out, "issue {}: {}", i.code, i.message).ok();
    }
  }
  Ok(())
}

/// The components named by `--component` (both when none is named).
pub(crate) fn parse_components(names: &[String]) -> Result<Vec<Component>> {
  if names.is_empty() {
    return Ok(vec![Component::Lexical, Component::Vectors]);
  }
  names.iter().map(|n| Component::parse(n)).collect()
}

/// A progress bar, and the sink that moves it with a run's progress events.
fn progress_bar() -> (ProgressBar, ProgressSink) {
  let bar = ProgressBar::new(0);
  bar.set_style(
    ProgressStyle::with_template("{spinner} {prefix:>8} [{bar:30}] {pos}/{len} {msg}")
      .unwrap_or_else(|_| ProgressStyle::default_bar())
      .progress_chars("=> "),
  );
  let b = bar.clone();
  let sink = Arc::new(move |e: ReindexProgressEvent| {
    let p = e.progress;
    b.set_prefix(p.stage);
    if let (Some(c), Some(t)) = (p.current, p.total) {
      b.set_length(t.into());
      b.set_position(c.into());
    }
    b.set_message(p.message);
  });
  (bar, sink)
}
