//! Page discovery: a sorted walk of `wiki/` that never leaves the vault. Symlinks are skipped,
//! `index.md` / `log.md` are reserved at any depth, ids are compared case-insensitively.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use unicode_normalization::UnicodeNormalization;
use walkdir::WalkDir;

use super::Diagnostic;

/// A candidate page file (not yet read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageFile {
  /// Folder-qualified page id.
  pub id: String,
  /// Path relative to `wiki/`, `/`-separated, NFC.
  pub rel_path: String,
  pub abs_path: PathBuf,
  pub size: u64,
  /// Modification time in nanoseconds since the Unix epoch.
  pub mtime_ns: i64,
}

/// Result of a discovery walk.
#[derive(Debug, Default)]
pub struct Discovery {
  /// Pages sorted by id (code point order).
  pub files: Vec<PageFile>,
  /// Scan diagnostics (unreadable directories, id collisions, escapes).
  pub diagnostics: Vec<Diagnostic>,
}

fn is_reserved(name: &str) -> bool {
  name.eq_ignore_ascii_case("index.md") || name.eq_ignore_ascii_case("log.md")
}

fn is_markdown(name: &str) -> bool {
  name.len() > 3 && name.as_bytes()[name.len() - 3..].eq_ignore_ascii_case(b".md")
}

/// NFC form (ASCII is already NFC: no allocation-heavy normalization on the common path).
fn nfc(s: String) -> String {
  if s.is_ascii() {
    s
  } else {
    s.nfc().collect()
  }
}

fn lowercase(s: &str) -> String {
  if s.is_ascii() {
    s.to_ascii_lowercase()
  } else {
    s.to_lowercase()
  }
}

/// Modification time of file metadata as ns since the epoch (0 when unavailable).
pub fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
  meta
    .modified()
    .ok()
    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
    .map(|d| d.as_nanos().min(i64::MAX as u128) as i64)
    .unwrap_or(0)
}

/// Walk `wiki_dir` (inside `vault_root`) and list page files.
pub fn discover_pages(vault_root: &Path, wiki_dir: &Path) -> Discovery {
  let mut out = Discovery::default();
  if !wiki_dir.exists() {
    return out;
  }
  // The wiki directory itself must physically live inside the vault: a symlinked `wiki/`
  // pointing elsewhere would make us read files outside the vault.
  let (Ok(real_root), Ok(real_wiki)) = (std::fs::canonicalize(vault_root), std::fs::canonicalize(wiki_dir))
  else {
    out.diagnostics.push(Diagnostic::error(
      "frontmatter_parse_error",
      ".",
      "Failed to scan knowledge directory",
    ));
    return out;
  };
  if !real_wiki.starts_with(&real_root)
    || std::fs::symlink_metadata(wiki_dir).map(|m| m.is_symlink()).unwrap_or(true)
  {
    out.diagnostics.push(Diagnostic::error(
      "link_path_escape",
      ".",
      "Knowledge directory resolves outside the vault; nothing was read",
    ));
    return out;
  }
  let mut seen: HashMap<String, String> = HashMap::new();
  let walker = WalkDir::new(wiki_dir)
    .follow_links(false)
    .follow_root_links(false)
    // Byte order keeps the walk deterministic without normalizing names in every comparison; the
    // final list is sorted by NFC id below.
    .sort_by(|a, b| a.file_name().cmp(b.file_name()));
  for entry in walker {
    let entry = match entry {
      Ok(e) => e,
      Err(err) => {
        let rel = err
          .path()
          .and_then(|p| p.strip_prefix(wiki_dir).ok())
          .map(rel_string)
          .unwrap_or_else(|| ".".to_string());
        out.diagnostics.push(Diagnostic::error(
          "frontmatter_parse_error",
          &rel,
          &format!("Failed to scan knowledge directory: {err}"),
        ));
        continue;
      }
    };
    let ft = entry.file_type();
    if ft.is_symlink() || !ft.is_file() {
      continue;
    }
    let name = entry.file_name().to_string_lossy();
    if !is_markdown(&name) || is_reserved(&name) {
      continue;
    }
    let Ok(rel) = entry.path().strip_prefix(wiki_dir) else {
      continue;
    };
    let rel_path = nfc(rel_string(rel));
    let id = rel_path[..rel_path.len() - 3].to_string();
    let key = lowercase(&id);
    if let Some(existing) = seen.get(&key) {
      out.diagnostics.push(Diagnostic::error(
        "concept_identity_collision",
        &rel_path,
        &format!("Identity collision between {existing} and {rel_path}"),
      ));
      continue;
    }
    seen.insert(key, rel_path.clone());
    out.files.push(PageFile { id, rel_path, abs_path: entry.into_path(), size: 0, mtime_ns: 0 });
  }
  stat_all(&mut out);
  out.files.sort_by(|a, b| a.id.cmp(&b.id));
  out
}

/// Fill size and mtime of every file, in parallel: on large vaults the stat calls dominate a
/// no-op reindex. A file that cannot be inspected is dropped with a diagnostic.
fn stat_all(out: &mut Discovery) {
  let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 4);
  let per = out.files.len().div_ceil(threads).max(1);
  let failures: Vec<(usize, String)> = std::thread::scope(|s| {
    let handles: Vec<_> = out
      .files
      .chunks_mut(per)
      .enumerate()
      .map(|(c, part)| {
        s.spawn(move || {
          let mut failed = Vec::new();
          for (i, f) in part.iter_mut().enumerate() {
            match std::fs::symlink_metadata(&f.abs_path) {
              Ok(m) => {
                f.size = m.len();
                f.mtime_ns = mtime_ns(&m);
              }
              Err(e) => failed.push((c * per + i, e.to_string())),
            }
          }
          failed
        })
      })
      .collect();
    handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
  });
  for (i, err) in failures.iter().rev() {
    let f = out.files.remove(*i);
    out.diagnostics.push(Diagnostic::error(
      "frontmatter_parse_error",
      &f.rel_path,
      &format!("Failed to inspect knowledge path: {err}"),
    ));
  }
}

fn rel_string(p: &Path) -> String {
  p.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::fs;

  fn write(p: &Path, s: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, s).unwrap();
  }

  #[test]
  fn walks_sorted_skipping_reserved_symlinks_and_collisions() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let wiki = root.join(".llm-wiki/wiki");
    write(&wiki.join("b.md"), "x");
    write(&wiki.join("A/c.MD"), "x");
    write(&wiki.join("a/Index.md"), "x");
    write(&wiki.join("log.md"), "x");
    write(&wiki.join(".hidden/h.md"), "x");
    write(&wiki.join("notes.txt"), "x");
    write(&wiki.join("B.md"), "x"); // collides with b.md case-insensitively
    let outside = root.join("outside.md");
    write(&outside, "secret");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, wiki.join("link.md")).unwrap();
    let d = discover_pages(root, &wiki);
    let ids: Vec<_> = d.files.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, vec![".hidden/h", "A/c", "B"]);
    assert_eq!(d.diagnostics.len(), 1);
    assert_eq!(d.diagnostics[0].code, "concept_identity_collision");
    assert_eq!(d.diagnostics[0].path, "b.md");
  }

  #[cfg(unix)]
  #[test]
  fn symlinked_wiki_dir_outside_vault_is_not_read() {
    let t = tempfile::tempdir().unwrap();
    let elsewhere = t.path().join("elsewhere");
    write(&elsewhere.join("p.md"), "---\ntype: a\n---\n");
    let root = t.path().join("vault");
    fs::create_dir_all(root.join(".llm-wiki")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join(".llm-wiki/wiki")).unwrap();
    let d = discover_pages(&root, &root.join(".llm-wiki/wiki"));
    assert!(d.files.is_empty());
    assert_eq!(d.diagnostics[0].code, "link_path_escape");
  }
}
