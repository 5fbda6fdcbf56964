//! Fuzz targets of the engine's parsers and readers, as plain functions (`<target>::run(bytes)`,
//! which panics on a violated invariant). Built on stable as a member of the workspace; the
//! libFuzzer entries in fuzz_targets/ (feature `libfuzzer`, nightly) call the same functions, and
//! [`smoke`] runs them from `cargo test`. See docs/RELIABILITY.md.

use std::path::{Path, PathBuf};

pub mod ann_file;
pub mod chunker;
pub mod feedback_files;
pub mod frontmatter;
pub mod journal;
pub mod query;
pub mod smoke;
pub mod store_files;

/// A fuzz target: checks its invariants on one input (panics on a violation).
pub type Target = fn(&[u8]);

/// Every target: its name (the folder of its seeds, fuzz/seeds/<name>) and its function.
pub const TARGETS: &[(&str, Target)] = &[
  ("frontmatter", frontmatter::run),
  ("chunker", chunker::run),
  ("query", query::run),
  ("store_files", store_files::run),
  ("journal", journal::run),
  ("feedback_files", feedback_files::run),
  ("ann_file", ann_file::run),
];

/// The line separating the parts of a multi-file input.
pub const SEPARATOR: &[u8] = b"\n#--\n";

/// `data` cut at [`SEPARATOR`] into exactly `n` parts (missing ones empty, the last keeps the rest).
pub fn split(data: &[u8], n: usize) -> Vec<&[u8]> {
  let mut parts = Vec::new();
  let mut rest = data;
  while parts.len() + 1 < n {
    match rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
      Some(i) => {
        parts.push(&rest[..i]);
        rest = &rest[i + SEPARATOR.len()..];
      }
      None => break,
    }
  }
  parts.push(rest);
  parts.resize(n, &[]);
  parts
}

/// Write `bytes` to `path` (creating its folder), or remove `path` when `bytes` is empty.
pub fn put(path: &Path, bytes: &[u8]) {
  if bytes.is_empty() {
    let _ = std::fs::remove_file(path);
  } else {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
  }
}

/// A fresh scratch folder of one target in this process (in memory when /dev/shm exists).
pub fn scratch_dir(target: &str) -> PathBuf {
  let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
  let root = base.join(format!("llm-wiki-fuzz-{target}-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&root);
  std::fs::create_dir_all(&root).unwrap();
  root
}
