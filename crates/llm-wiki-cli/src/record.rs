//! The commands that write a vault's memory: `resolve` (a conflict resolution page) and
//! `feedback` (the feedback log's status, rebuild and compaction).

use std::io::Write;

use llm_wiki_core::error::Result;
use llm_wiki_core::feedback::{compact, record};
use llm_wiki_core::memory::resolve::{resolve_in, ResolveRequest};
use llm_wiki_core::vault::VaultPaths;

/// The label a resolution records for the vault at `paths`.
pub(crate) fn vault_label(paths: &VaultPaths) -> &'static str {
  if llm_wiki_core::vault::paths::is_personal_vault(paths) {
    "personal"
  } else {
    "project"
  }
}

/// `resolve <vault> <selected> <other> --relation R`: record the resolution, report its page.
pub(crate) fn resolve(
  paths: &VaultPaths,
  req: &ResolveRequest,
  json: bool,
  out: &mut impl Write,
) -> Result<()> {
  let r = resolve_in(paths, None, req)?;
  if json {
    writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
  } else {
    let res = &r.resolution;
    let scope = res.scope.as_deref().map(|s| format!(" under {s:?}")).unwrap_or_default();
    writeln!(
      out,
      "{} {}: {} {} {}{scope}",
      if r.created { "recorded" } else { "already recorded" },
      res.id,
      res.selected_page_id,
      res.relation,
      res.other_page_id
    )
    .ok();
    writeln!(out, "page: {}", r.path).ok();
    for i in &r.index.issues {
      writeln!(out, "index {}: {}", i.code, i.message).ok();
    }
    for w in &r.warnings {
      writeln!(out, "warning {}: {}", w.code, w.message).ok();
    }
  }
  Ok(())
}

/// `feedback <status|rebuild|compact> <vault>`: the feedback log's report, key by key.
pub(crate) fn feedback(
  paths: &VaultPaths,
  action: &str,
  older_than_days: Option<f64>,
  dry_run: bool,
  json: bool,
  out: &mut impl Write,
) -> Result<()> {
  let mut progress = |read: u64, total: u64| {
    if !json && total >= 64 << 20 {
      eprintln!("{} / {} MiB", read >> 20, total >> 20);
    }
  };
  let value = match action {
    "status" => serde_json::to_value(compact::stream_status(&paths.meta)),
    "rebuild" => serde_json::to_value(record::rebuild_feedback_with(paths, &mut progress)?),
    "compact" => {
      let mut opts = compact::CompactOptions { dry_run, ..Default::default() };
      if let Some(d) = older_than_days {
        opts.older_than_days = d;
      }
      serde_json::to_value(record::compact_feedback(paths, &opts, &mut progress)?)
    }
    other => {
      return Err(llm_wiki_core::error::Error::invalid(format!(
        "feedback action must be status | rebuild | compact, got {other:?}"
      )))
    }
  }
  .unwrap_or_default();
  if json {
    writeln!(out, "{}", serde_json::to_string_pretty(&value).unwrap_or_default()).ok();
  } else if let Some(map) = value.as_object() {
    for (k, v) in map {
      writeln!(out, "{k}: {v}").ok();
    }
  }
  Ok(())
}
