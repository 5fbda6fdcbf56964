//! Page discovery: a sorted walk of `wiki/` that never leaves the vault. Symlinks are skipped (with
//! a diagnostic when they look like pages or folders), `index.md` / `log.md` are reserved at any
//! depth, ids are NFC and compared case-insensitively, and names that are not UTF-8 are reported
//! instead of being indexed under a mangled id.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ffi::OsStr;
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
  /// Absolute path of the file.
  pub abs_path: PathBuf,
  /// Size in bytes at discovery.
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

/// Order of directory entries: by NFC code points (the contract's order); names equal in NFC put
/// the one already in NFC first, so it is the one indexed when two files collide.
fn entry_order(a: &OsStr, b: &OsStr) -> Ordering {
  match (a.to_str(), b.to_str()) {
    (Some(x), Some(y)) if x.is_ascii() && y.is_ascii() => x.cmp(y),
    (Some(x), Some(y)) => {
      let (nx, ny) = (nfc(x.to_string()), nfc(y.to_string()));
      nx.cmp(&ny).then_with(|| (nx != x).cmp(&(ny != y))).then_with(|| x.cmp(y))
    }
    _ => a.cmp(b),
  }
}

/// The file of a page on disk. Manifests record NFC paths (page ids are NFC), but a file's name
/// may be stored in another normalization form (NFD, as macOS writes it) on a filesystem that
/// does not normalize (Linux): such a path is found by comparing the NFC forms of the entries
/// along it. Falls back to the plain join when nothing matches.
pub fn resolve_page_file(wiki_dir: &Path, rel_path: &str) -> PathBuf {
  let direct = wiki_dir.join(rel_path);
  if rel_path.is_ascii() || std::fs::symlink_metadata(&direct).is_ok() {
    return direct;
  }
  let mut path = wiki_dir.to_path_buf();
  for component in rel_path.split('/') {
    let exact = path.join(component);
    if std::fs::symlink_metadata(&exact).is_ok() {
      path = exact;
      continue;
    }
    let found = std::fs::read_dir(&path).ok().and_then(|entries| {
      entries
        .flatten()
        .find(|e| e.file_name().to_str().is_some_and(|n| !n.is_ascii() && nfc(n.to_string()) == component))
    });
    match found {
      Some(e) => path = e.path(),
      None => return direct,
    }
  }
  path
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
    // The final list is sorted by id below; the walk order decides which of two colliding files
    // is indexed.
    .sort_by(|a, b| entry_order(a.file_name(), b.file_name()));
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
    let name = entry.file_name().to_string_lossy();
    let Ok(rel) = entry.path().strip_prefix(wiki_dir) else {
      continue;
    };
    if ft.is_symlink() {
      if !is_reserved(&name) {
        out.diagnostics.extend(symlink_diagnostic(
          &real_root,
          entry.path(),
          &nfc(rel_string(rel)),
          is_markdown(&name),
        ));
      }
      continue;
    }
    if !ft.is_file() || !is_markdown(&name) || is_reserved(&name) {
      continue;
    }
    if rel.to_str().is_none() {
      out.diagnostics.push(Diagnostic::error(
        "page_name_invalid_utf8",
        &rel_string(rel),
        "Page path is not valid UTF-8; it cannot have a page id and is not indexed (rename the file)",
      ));
      continue;
    }
    let rel_path = nfc(rel_string(rel));
    let id = rel_path[..rel_path.len() - 3].to_string();
    let key = lowercase(&id);
    if let Some(existing) = seen.get(&key) {
      let why =
        if *existing == rel_path { " (the same name in another Unicode normalization form)" } else { "" };
      out.diagnostics.push(Diagnostic::error(
        "concept_identity_collision",
        &rel_path,
        &format!("Identity collision between {existing} and {rel_path}{why}"),
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

/// The diagnostic of a symlink met by the walk (symlinks are never followed). Links that could
/// be pages (a `.md` name) or folders are reported so a missing page is explained: a target
/// outside the vault is `link_path_escape`, anything else (inside the vault, dangling, a loop)
/// `page_symlink_skipped`. Links to other files are not pages and pass silently.
fn symlink_diagnostic(
  real_root: &Path,
  link: &Path,
  rel_path: &str,
  markdown_name: bool,
) -> Option<Diagnostic> {
  let (code, message) = match std::fs::canonicalize(link) {
    Ok(target) => {
      if !markdown_name && !target.is_dir() {
        return None;
      }
      if target.starts_with(real_root) {
        (
          "page_symlink_skipped",
          "Symlink not followed: pages must be regular files inside the knowledge directory".to_string(),
        )
      } else {
        ("link_path_escape", "Symlink points outside the vault; it was not followed".to_string())
      }
    }
    Err(e) if markdown_name || e.raw_os_error() == Some(libc_eloop()) => {
      ("page_symlink_skipped", format!("Symlink not followed (its target cannot be resolved: {e})"))
    }
    Err(_) => return None,
  };
  Some(Diagnostic::warning(code, rel_path, &message))
}

/// ELOOP ("too many levels of symbolic links"); 40 on Linux, 62 on macOS and the BSDs.
fn libc_eloop() -> i32 {
  #[cfg(unix)]
  {
    libc::ELOOP
  }
  #[cfg(not(unix))]
  {
    -1
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
    let codes: Vec<_> = d.diagnostics.iter().map(|x| (x.code.as_str(), x.path.as_str())).collect();
    #[cfg(unix)]
    // outside.md is outside wiki/ but inside the vault root: skipped, not an escape.
    assert_eq!(codes, vec![("concept_identity_collision", "b.md"), ("page_symlink_skipped", "link.md")]);
    #[cfg(not(unix))]
    assert_eq!(codes, vec![("concept_identity_collision", "b.md")]);
  }

  /// Needs a filesystem that keeps NFC and NFD names apart (Linux; macOS normalizes).
  #[cfg(target_os = "linux")]
  #[test]
  fn unicode_twins_keep_the_nfc_name_and_nfd_files_resolve() {
    let t = tempfile::tempdir().unwrap();
    let wiki = t.path().join("wiki");
    write(&wiki.join("cafe\u{301}.md"), "nfd");
    write(&wiki.join("caf\u{e9}.md"), "nfc");
    write(&wiki.join("nai\u{308}ve/p.md"), "nfd dir");
    // NFC code-point order, not byte order: "é" (U+E9) sorts after "f".
    write(&wiki.join("f.md"), "f");
    let d = discover_pages(t.path(), &wiki);
    let files: Vec<_> =
      d.files.iter().map(|f| (f.id.as_str(), std::fs::read_to_string(&f.abs_path).unwrap())).collect();
    assert_eq!(
      files,
      vec![("café", "nfc".to_string()), ("f", "f".to_string()), ("naïve/p", "nfd dir".to_string())]
    );
    assert_eq!(d.diagnostics.len(), 1);
    assert!(d.diagnostics[0].message.contains("Unicode normalization"), "{}", d.diagnostics[0].message);
    assert_eq!(entry_order(OsStr::new("f"), OsStr::new("\u{e9}")), Ordering::Less);
    // The manifest's NFC path finds the NFD file on a filesystem that keeps names as written.
    let resolved = resolve_page_file(&wiki, "naïve/p.md");
    assert_eq!(std::fs::read_to_string(resolved).unwrap(), "nfd dir");
    assert_eq!(resolve_page_file(&wiki, "missing/é.md"), wiki.join("missing/é.md"));
  }

  /// Needs a filesystem that accepts names that are not UTF-8 (Linux; macOS refuses them).
  #[cfg(target_os = "linux")]
  #[test]
  fn names_that_are_not_utf8_are_reported() {
    use std::os::unix::ffi::OsStrExt;
    let t = tempfile::tempdir().unwrap();
    let wiki = t.path().join("wiki");
    write(&wiki.join(OsStr::from_bytes(b"bad-\xff.md")), "x");
    write(&wiki.join(OsStr::from_bytes(b"dir-\xfe/ok.md")), "x");
    write(&wiki.join("good.md"), "x");
    let d = discover_pages(t.path(), &wiki);
    assert_eq!(d.files.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(), vec!["good"]);
    let codes: Vec<_> = d.diagnostics.iter().map(|x| (x.code.as_str(), x.path.as_str())).collect();
    assert_eq!(
      codes,
      vec![("page_name_invalid_utf8", "bad-\u{fffd}.md"), ("page_name_invalid_utf8", "dir-\u{fffd}/ok.md")]
    );
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
