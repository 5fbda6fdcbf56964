//! `reliability events`: the spec's "1 GB events file" fault (issue 14). Writes a synthetic
//! `meta/events.jsonl` of the requested size — `recall_feedback` events of every action spread
//! over two years, mixed with the client's own event kinds (10 % of the lines) and a few lines
//! over the 1 MiB line cap — into a small temporary vault, then runs the real CLI as child
//! processes and measures each one's wall time and peak RSS (`wait4`'s `ru_maxrss`):
//!
//! 1. `feedback rebuild` (full projection from the whole stream),
//! 2. `feedback status`,
//! 3. `feedback compact` (default cutoff, 360 days),
//! 4. `feedback rebuild` on the compacted stream.
//!
//! It checks that the client's lines survive byte-identical and in order (a hash of the
//! sequence before and after), that every moved line is in the archive, and that the projection
//! built after compaction equals the one built before (every key's value now within 1e-12).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;
use std::hash::Hasher;

use super::{resolve_bin, write_report};
use crate::bench::{SyntheticStream, TempDir};
use crate::synth::Rng;
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::feedback::events::events_path;
use llm_wiki_core::feedback::projection::{projection_path, Projection, MAX_LINE_BYTES};
use llm_wiki_core::feedback::{query_hash, FeedbackAction};
use llm_wiki_core::fsutil::iso_from_ms;

/// Options of [`run_events`].
#[derive(Debug, Clone)]
pub struct EventsOptions {
  /// Stream size to write.
  pub bytes: u64,
  pub seed: u64,
  pub bin: Option<PathBuf>,
  pub out: PathBuf,
  pub temp_root: Option<PathBuf>,
  pub keep_temp: bool,
}

/// One measured child run.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
  pub command: String,
  pub seconds: f64,
  pub peak_rss_mib: f64,
  pub output: serde_json::Value,
}

const PAGES: usize = 50;
const QUERIES: usize = 2000;

#[cfg(unix)]
fn run_child(bin: &Path, args: &[&str]) -> Result<Step> {
  let t = Instant::now();
  let child = Command::new(bin)
    .args(args)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::inherit())
    .spawn()
    .map_err(|e| Error::io("spawn", bin, e))?;
  let pid = child.id() as libc::pid_t;
  let mut stdout = child.stdout.expect("piped stdout");
  let reader = std::thread::spawn(move || {
    let mut s = String::new();
    let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
    s
  });
  let mut status = 0;
  // SAFETY: wait4 on our own child's pid with valid out-pointers; std's Child is never waited.
  let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
  let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
  if r != pid {
    return Err(Error::Index(format!("wait4 failed for {args:?}")));
  }
  let text = reader.join().unwrap_or_default();
  if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
    return Err(Error::Index(format!("{args:?} failed (status {status}): {text}")));
  }
  // Linux reports ru_maxrss in KiB (macOS in bytes).
  let kib = if cfg!(target_os = "macos") { usage.ru_maxrss as f64 / 1024.0 } else { usage.ru_maxrss as f64 };
  let output = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
  Ok(Step { command: args.join(" "), seconds: t.elapsed().as_secs_f64(), peak_rss_mib: kib / 1024.0, output })
}

/// Without `wait4` the peak RSS is not measured (reported as 0).
#[cfg(not(unix))]
fn run_child(bin: &Path, args: &[&str]) -> Result<Step> {
  let t = Instant::now();
  let out = Command::new(bin).args(args).output().map_err(|e| Error::io("spawn", bin, e))?;
  let text = String::from_utf8_lossy(&out.stdout).into_owned();
  if !out.status.success() {
    return Err(Error::Index(format!("{args:?} failed: {text}")));
  }
  let output = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
  Ok(Step { command: args.join(" "), seconds: t.elapsed().as_secs_f64(), peak_rss_mib: 0.0, output })
}

/// Write the vault and the stream; returns (hash of the non-feedback lines in order, lines,
/// feedback lines, long lines).
fn generate(root: &Path, bytes: u64, seed: u64) -> Result<(String, u64, u64, u64)> {
  let dot = root.join(".llm-wiki");
  let wiki = dot.join("wiki").join("concepts");
  std::fs::create_dir_all(&wiki).map_err(|e| Error::io("create directory", &wiki, e))?;
  let vault_id = "6f2b8a4e-5c1d-4e7a-9b3f-2a1c0d9e8f71";
  std::fs::write(
    dot.join("config.json"),
    format!("{{\"name\":\"events bench\",\"vault_id\":\"{vault_id}\"}}"),
  )
  .map_err(|e| Error::io("write", &dot, e))?;
  for i in 0..PAGES {
    let p = wiki.join(format!("page-{i}.md"));
    std::fs::write(&p, format!("---\ntype: concept\ntitle: \"Page {i}\"\n---\n\nBody of page {i}.\n"))
      .map_err(|e| Error::io("write", &p, e))?;
  }
  let meta = dot.join("meta");
  std::fs::create_dir_all(&meta).map_err(|e| Error::io("create directory", &meta, e))?;
  let path = events_path(&meta);
  let mut w =
    BufWriter::with_capacity(1 << 20, File::create(&path).map_err(|e| Error::io("create", &path, e))?);
  let mut rng = Rng::new(seed);
  let hashes: Vec<String> = (0..QUERIES).map(|q| query_hash(&format!("synthetic query {q}"))).collect();
  let stream = SyntheticStream {
    vault_id,
    mode: "hybrid",
    index_version: "5:12",
    model_version: "tokenizer:all-MiniLM-L6-v2-int8",
    actions: &[
      FeedbackAction::Shown,
      FeedbackAction::Shown,
      FeedbackAction::Shown,
      FeedbackAction::Opened,
      FeedbackAction::Cited,
      FeedbackAction::ShownOnly,
      FeedbackAction::Relevant,
      FeedbackAction::Irrelevant,
    ],
  };
  let now_ms = llm_wiki_core::fsutil::now_ms();
  let span_ms: u64 = 720 * 86_400_000;
  let mut others = std::collections::hash_map::DefaultHasher::new();
  let (mut written, mut lines, mut feedback, mut long) = (0u64, 0u64, 0u64, 0u64);
  let mut line = Vec::with_capacity(512);
  while written < bytes {
    line.clear();
    let r = rng.next_u64();
    if r.is_multiple_of(10) {
      // The client's own kinds, with their own spelling.
      writeln!(
        line,
        "{{\"kind\": \"observe\", \"slug\": \"obs-{lines}\", \"at\": \"{}\", \"note\": \"caf\u{e9} {r:x}\"}}",
        iso_from_ms(now_ms - (r % span_ms) as i64)
      )
      .ok();
      others.write(&line);
    } else if lines % 400_000 == 7 {
      // An ingest event over the line cap: skipped by readers, kept by compaction.
      line.extend_from_slice(b"{\"kind\":\"ingest\",\"blob\":\"");
      line.resize(line.len() + MAX_LINE_BYTES + 1000, b'x');
      line.extend_from_slice(b"\"}\n");
      others.write(&line);
      long += 1;
    } else {
      let at = now_ms - (rng.next_u64() % span_ms) as i64;
      let page = format!("concepts/page-{}", rng.next_u64() % PAGES as u64);
      let qh = hashes[(rng.next_u64() % QUERIES as u64) as usize].clone();
      let e = stream.event(page, qh, at, rng.next_u64());
      serde_json::to_writer(&mut line, &e).map_err(|e| Error::invalid(e.to_string()))?;
      line.push(b'\n');
      feedback += 1;
    }
    w.write_all(&line).map_err(|e| Error::io("write", &path, e))?;
    written += line.len() as u64;
    lines += 1;
  }
  w.flush().map_err(|e| Error::io("write", &path, e))?;
  Ok((format!("{:016x}", others.finish()), lines, feedback, long))
}

/// Hash (SipHash, line by line) of the stream's lines that are not `recall_feedback` events, streaming.
fn other_lines_sha(path: &Path) -> Result<String> {
  let mut r = BufReader::with_capacity(1 << 20, File::open(path).map_err(|e| Error::io("open", path, e))?);
  let mut h = std::collections::hash_map::DefaultHasher::new();
  let mut line = Vec::new();
  loop {
    line.clear();
    let n = r.read_until(b'\n', &mut line).map_err(|e| Error::io("read", path, e))?;
    if n == 0 {
      break;
    }
    let is_feedback = line.len() < 4096 && line.windows(19).any(|w| w == b"\"kind\":\"recall_feed");
    if !is_feedback {
      h.write(&line);
    }
  }
  Ok(format!("{:016x}", h.finish()))
}

/// Largest difference between two projections' key values *now* (what ranking reads: the
/// scaled sums times today's decay; the term's bound is 0.02), and keys present in one only.
fn max_diff_now(a: &Projection, b: &Projection) -> (f64, usize) {
  // The projection's epoch (2025-01-01T00:00:00Z) and the spec's 90-day half-life.
  let now = llm_wiki_core::retrieve::trust::now_secs();
  let decay = (-((now - 1_735_689_600) as f64) / llm_wiki_core::feedback::HALF_LIFE_SECS).exp2();
  let mut worst = 0.0f64;
  let mut missing = 0usize;
  for (x, y) in [(&a.pages, &b.pages), (&a.queries, &b.queries), (&a.global, &b.global)] {
    let ys: &HashMap<String, _> = y;
    for (k, s) in x {
      match ys.get(k) {
        Some(t) => {
          for (u, v) in [(s.signal, t.signal), (s.shown_only, t.shown_only)] {
            worst = worst.max((u - v).abs() * decay);
          }
        }
        None => missing += 1,
      }
    }
    missing += ys.keys().filter(|k| !x.contains_key(*k)).count();
  }
  (worst, missing)
}

fn read_projection(meta: &Path) -> Result<Projection> {
  let p = projection_path(meta);
  serde_json::from_slice(&std::fs::read(&p).map_err(|e| Error::io("read", &p, e))?)
    .map_err(|e| Error::Index(format!("{}: {e}", p.display())))
}

/// Run the harness; returns the report files.
pub fn run_events(opts: &EventsOptions) -> Result<Vec<PathBuf>> {
  let bin = resolve_bin(opts.bin.as_deref())?;
  let root_dir = opts.temp_root.clone().unwrap_or_else(std::env::temp_dir);
  let temp = TempDir::create(&root_dir, "events", opts.keep_temp)?;
  let root = temp.path().join("vault");
  let t = Instant::now();
  let (others_before, lines, feedback_lines, long_lines) = generate(&root, opts.bytes, opts.seed)?;
  let gen_s = t.elapsed().as_secs_f64();
  let meta = root.join(".llm-wiki").join("meta");
  let stream_bytes = llm_wiki_core::feedback::events::events_len(&meta);
  eprintln!("events: wrote {stream_bytes} bytes ({lines} lines) in {gen_s:.1} s");
  let vault = root.to_string_lossy().into_owned();
  let rebuild = run_child(&bin, &["feedback", "rebuild", &vault, "--json"])?;
  let before = read_projection(&meta)?;
  let status = run_child(&bin, &["feedback", "status", &vault, "--json"])?;
  let compact = run_child(&bin, &["feedback", "compact", &vault, "--json"])?;
  let after_compact = read_projection(&meta)?;
  let rebuild_after = run_child(&bin, &["feedback", "rebuild", &vault, "--json"])?;
  let after = read_projection(&meta)?;
  let others_after = other_lines_sha(&events_path(&meta))?;
  let (diff, missing) = max_diff_now(&before, &after);
  let (diff_c, missing_c) = max_diff_now(&before, &after_compact);
  let bytes_after = llm_wiki_core::feedback::events::events_len(&meta);
  let archive_dir = meta.join(llm_wiki_core::feedback::compact::ARCHIVE_DIR);
  let archived_bytes: u64 = std::fs::read_dir(&archive_dir)
    .map(|d| {
      d.flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
    })
    .unwrap_or(0);
  let moved_bytes = compact.output.get("movedBytes").and_then(|v| v.as_u64()).unwrap_or(0);
  let checks = serde_json::json!({
    "otherLinesIdentical": others_before == others_after,
    "archiveHoldsMovedBytes": archived_bytes == moved_bytes,
    "streamPlusArchiveEqualsBefore": bytes_after + archived_bytes == stream_bytes,
    "eventsBefore": before.events,
    "eventsAfter": after.events,
    "projectionMaxDiffNow": diff,
    "projectionMissingKeys": missing,
    "projectionAfterCompactMaxDiffNow": diff_c,
    "projectionAfterCompactMissingKeys": missing_c,
  });
  let ok = others_before == others_after
    && archived_bytes == moved_bytes
    && bytes_after + archived_bytes == stream_bytes
    && before.events == after.events
    && diff < 1e-12
    && missing == 0
    && diff_c < 1e-12
    && missing_c == 0;
  let lock_ms = compact.output.get("lockMs").and_then(|v| v.as_u64()).unwrap_or(0);
  let mut steps = [rebuild, status, compact, rebuild_after];
  for s in &mut steps {
    s.command = s.command.replace(&vault, "<vault>");
  }
  let steps = &steps;
  let mut md = String::new();
  use std::fmt::Write as _;
  let _ = writeln!(
    md,
    "# Feedback events stream: {:.2} GiB (issue 14 fault)\n",
    stream_bytes as f64 / (1u64 << 30) as f64
  );
  let _ = writeln!(
    md,
    "`{}`\n",
    std::env::args().collect::<Vec<_>>().join(" ").replace(&*root_dir.to_string_lossy(), "<tmp>")
  );
  let _ = writeln!(md, "Synthetic stream: {lines} lines ({feedback_lines} `recall_feedback` events over 720 days, {PAGES} pages × {QUERIES} queries; {long_lines} lines over the 1 MiB cap; the rest the client's own kind), written in {gen_s:.1} s. Each step is a child process of the CLI; peak RSS is its `ru_maxrss`.\n");
  let _ = writeln!(md, "| step | seconds | peak RSS (MiB) |\n|---|---:|---:|");
  for s in steps {
    let _ = writeln!(md, "| `{}` | {:.1} | {:.1} |", s.command, s.seconds, s.peak_rss_mib);
  }
  let _ = writeln!(
    md,
    "\nStream {stream_bytes} → {bytes_after} bytes; archive {archived_bytes} bytes; events lock held {lock_ms} ms by the compaction.\n"
  );
  let _ = writeln!(md, "Checks ({}): client lines identical and in order: {}; archive = moved bytes: {}; stream + archive = original size: {}; projection rebuilt after compaction vs before: largest difference of a key's value now {diff:.1e} (the term's bound is 0.02), {missing} keys missing (directly after compaction: {diff_c:.1e}, {missing_c}).", if ok { "all passed" } else { "FAILED" }, others_before == others_after, archived_bytes == moved_bytes, bytes_after + archived_bytes == stream_bytes);
  let json = serde_json::json!({
    "streamBytes": stream_bytes, "lines": lines, "feedbackLines": feedback_lines, "longLines": long_lines,
    "generateSeconds": gen_s, "steps": steps, "bytesAfter": bytes_after, "archivedBytes": archived_bytes,
    "checks": checks, "ok": ok,
  });
  let files = write_report(&opts.out, &md, &json)?;
  if !ok {
    return Err(Error::Index(format!("events harness checks failed: {checks}")));
  }
  Ok(files)
}
