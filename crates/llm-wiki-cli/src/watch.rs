//! The `watch` command: the index kept current while it runs, one line (or JSON object) per event.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use llm_wiki_core::error::Result;
use llm_wiki_core::watch::{watch_wiki, WatchEvent, WatchEventKind, WatchOptions};

use crate::index::parse_components;
use crate::vault_paths;

/// One watch event as a line of text.
fn watch_line(e: &WatchEvent) -> String {
  let mut line = e.kind.as_str().to_string();
  if let Some(phase) = e.phase {
    line.push_str(&format!(" {phase}"));
  }
  if let Some(b) = e.backend {
    line.push_str(&format!(" backend={}", b.as_str()));
  }
  if e.rearmed {
    line.push_str(" rearmed");
  }
  if e.kind == WatchEventKind::Indexed {
    if e.full_scan {
      line.push_str(" full scan");
    } else {
      line.push_str(&format!(" {} path(s)", e.path_count));
    }
    if let Some(d) = &e.documents {
      line.push_str(&format!(" +{} ~{} -{}", d.indexed, d.updated, d.removed));
    }
    if let Some(ms) = e.ms {
      line.push_str(&format!(" in {ms:.0} ms"));
    }
    if !e.paths.is_empty() {
      line.push_str(&format!(": {}", e.paths.iter().take(5).cloned().collect::<Vec<_>>().join(", ")));
      if e.path_count > 5 {
        line.push_str(&format!(" (+{} more)", e.path_count - 5));
      }
    }
  }
  if let (Some(code), Some(msg)) = (&e.code, &e.message) {
    line.push_str(&format!(" [{code}] {msg}"));
  }
  line
}

/// The `watch` command: events are printed by the calling thread as they arrive.
#[allow(clippy::too_many_arguments)]
pub(crate) fn watch(
  vault: &Path,
  components: &[String],
  debounce_ms: u64,
  poll: bool,
  poll_interval_ms: u64,
  duration: Option<f64>,
  json: bool,
  out: &mut impl Write,
) -> Result<()> {
  let paths = vault_paths(vault)?;
  let opts = WatchOptions {
    components: parse_components(components)?,
    debounce: std::time::Duration::from_millis(debounce_ms.min(60_000)),
    poll,
    poll_interval: std::time::Duration::from_millis(poll_interval_ms.max(100)),
    ..Default::default()
  };
  let (tx, rx) = std::sync::mpsc::channel::<WatchEvent>();
  let tx = std::sync::Mutex::new(tx);
  let mut handle = watch_wiki(
    &paths,
    opts,
    Arc::new(move |e| {
      if let Ok(t) = tx.lock() {
        let _ = t.send(e);
      }
    }),
  )?;
  let deadline = duration.map(|s| Instant::now() + std::time::Duration::from_secs_f64(s.max(0.0)));
  let mut print = |e: &WatchEvent| {
    let text = if json { serde_json::to_string(e).unwrap_or_default() } else { watch_line(e) };
    writeln!(out, "{text}").ok();
    out.flush().ok();
  };
  loop {
    let wait =
      deadline.map_or(std::time::Duration::from_secs(3600), |d| d.saturating_duration_since(Instant::now()));
    if deadline.is_some() && wait.is_zero() {
      break;
    }
    match rx.recv_timeout(wait) {
      Ok(e) => print(&e),
      Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
      Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
    }
  }
  handle.close();
  while let Ok(e) = rx.try_recv() {
    print(&e);
  }
  Ok(())
}
