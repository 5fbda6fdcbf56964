//! Which file-system events concern the index. Only what page discovery
//! ([`crate::vault::discover_pages`]) would read matters: `*.md` files under `wiki/` other than the
//! reserved `index.md` / `log.md`. Editors' scratch files (`.swp`, `~`, `.tmp`, vim's `4913`
//! probe), Obsidian's `.obsidian/*.json` churn and everything outside `wiki/` are ignored.
//! Folders matter too: renaming or deleting a folder moves or removes every page in it, and the
//! OS reports only the folder.

use std::path::{Component, Path};

use unicode_normalization::UnicodeNormalization;

/// What an event's path is, as far as the index is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relevance {
  /// A page file: its path relative to `wiki/`, `/`-separated, NFC (the manifest's form).
  Page(String),
  /// A folder under `wiki/` (relative, NFC): every page below it may have changed.
  Dir(String),
  /// `wiki/` itself or one of its ancestors: check that the vault is still there.
  Root,
  /// A path whose name is not UTF-8: discovery reports it; only a full scan sees it.
  Unnamed,
  /// Nothing the index reads.
  Ignore,
}

/// What the OS said the path was, when it said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
  /// A regular file.
  File,
  /// A directory.
  Folder,
  /// Not reported (renames, polling, some platforms).
  Unknown,
}

fn is_markdown(name: &str) -> bool {
  name.len() > 3 && name.as_bytes()[name.len() - 3..].eq_ignore_ascii_case(b".md")
}

fn is_reserved(name: &str) -> bool {
  name.eq_ignore_ascii_case("index.md") || name.eq_ignore_ascii_case("log.md")
}

/// Editors' scratch and backup files: never pages, never folders worth a scan.
fn is_scratch(name: &str) -> bool {
  let lower = name.to_ascii_lowercase();
  lower.ends_with('~')
    || lower.starts_with(".#")
    || (lower.starts_with('#') && lower.ends_with('#'))
    || [".swp", ".swo", ".swx", ".tmp", ".temp", ".part", ".crdownload", ".bak", ".orig"]
      .iter()
      .any(|ext| lower.ends_with(ext))
    // vim writes and deletes `4913` to probe a folder before saving.
    || lower == "4913"
}

/// True when `name` has an extension (`x.json`, not `.obsidian` nor `notes`).
fn has_extension(name: &str) -> bool {
  name.rfind('.').is_some_and(|i| i > 0 && i + 1 < name.len())
}

/// Classify `path` (absolute) against the vault's `wiki` directory. `kind` is what the OS reported.
/// A folder is a folder whatever its name (`release-1.2`, `x.bak`): discovery walks them all. For
/// a path that no longer exists and whose kind is unknown (a rename's old name, a folder moved to
/// the trash, a poll), what the store knows decides: `indexed_folder(rel)` says whether the index
/// holds pages below it (then its pages must go). Failing that, a name without an extension that
/// is not an editor's scratch name is taken for a folder too: a missed folder would miss its
/// pages, a spurious one costs a look-up of a path that is gone.
pub fn classify(
  wiki: &Path,
  path: &Path,
  kind: PathKind,
  indexed_folder: &dyn Fn(&str) -> bool,
) -> Relevance {
  let Ok(rel) = path.strip_prefix(wiki) else {
    return if wiki.starts_with(path) { Relevance::Root } else { Relevance::Ignore };
  };
  let mut parts = Vec::new();
  for c in rel.components() {
    match c {
      Component::Normal(s) => match s.to_str() {
        Some(s) => parts.push(s),
        None => return Relevance::Unnamed,
      },
      _ => return Relevance::Ignore,
    }
  }
  let Some(name) = parts.last().copied() else {
    return Relevance::Root;
  };
  let joined = parts.join("/");
  let rel = if joined.is_ascii() { joined } else { joined.nfc().collect() };
  let folder = match kind {
    PathKind::Folder => true,
    PathKind::File => false,
    PathKind::Unknown => match std::fs::symlink_metadata(path) {
      Ok(m) => m.is_dir(),
      Err(_) => (!is_markdown(name) && !has_extension(name) && !is_scratch(name)) || indexed_folder(&rel),
    },
  };
  if folder {
    Relevance::Dir(rel)
  } else if is_scratch(name) || is_reserved(name) {
    Relevance::Ignore
  } else if is_markdown(name) {
    Relevance::Page(rel)
  } else {
    Relevance::Ignore
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn c(rel: &str, kind: PathKind) -> Relevance {
    let wiki = Path::new("/nonexistent-vault/.llm-wiki/wiki");
    classify(wiki, &wiki.join(rel), kind, &|_| false)
  }

  #[test]
  fn pages_are_relevant_in_nfc() {
    assert_eq!(c("concepts/tls.md", PathKind::File), Relevance::Page("concepts/tls.md".into()));
    assert_eq!(c("A.MD", PathKind::Unknown), Relevance::Page("A.MD".into()));
    // NFD on disk, NFC in the manifest.
    assert_eq!(c("cafe\u{301}.md", PathKind::File), Relevance::Page("caf\u{e9}.md".into()));
  }

  #[test]
  fn editor_scratch_and_app_state_are_ignored() {
    for rel in [
      "concepts/.tls.md.swp",
      "concepts/tls.md~",
      "concepts/tls.md.tmp",
      "concepts/.#tls.md",
      "concepts/#tls.md#",
      "concepts/4913",
      ".obsidian/workspace.json",
      ".obsidian/plugins/x/data.json",
      "index.md",
      "sub/LOG.md",
      "image.png",
    ] {
      assert_eq!(c(rel, PathKind::Unknown), Relevance::Ignore, "{rel}");
      assert_eq!(c(rel, PathKind::File), Relevance::Ignore, "{rel}");
    }
  }

  #[test]
  fn folders_are_relevant() {
    assert_eq!(c("concepts", PathKind::Folder), Relevance::Dir("concepts".into()));
    // A vanished name without an extension may have been a folder (a rename's old name).
    assert_eq!(c("old-folder", PathKind::Unknown), Relevance::Dir("old-folder".into()));
    assert_eq!(c("old-folder", PathKind::File), Relevance::Ignore);
  }

  #[test]
  fn a_vanished_folder_is_known_by_the_pages_indexed_below_it_not_by_its_name() {
    let wiki = Path::new("/nonexistent-vault/.llm-wiki/wiki");
    let indexed = |rel: &str| ["release-1.2", "2024.05", "x.bak", "a/b.tmp"].contains(&rel);
    for rel in ["release-1.2", "2024.05", "x.bak", "a/b.tmp"] {
      assert_eq!(classify(wiki, &wiki.join(rel), PathKind::Unknown, &indexed), Relevance::Dir(rel.into()));
    }
    // Reported as folders: folders, whatever the name.
    assert_eq!(c("x.bak", PathKind::Folder), Relevance::Dir("x.bak".into()));
    assert_eq!(c("v2.tmp", PathKind::Folder), Relevance::Dir("v2.tmp".into()));
    // Nothing indexed below: scratch files and dotted names stay ignored.
    assert_eq!(c("release-1.3", PathKind::Unknown), Relevance::Ignore);
    assert_eq!(c("x.md.tmp", PathKind::Unknown), Relevance::Ignore);
  }

  #[test]
  fn outside_and_root() {
    let wiki = Path::new("/v/.llm-wiki/wiki");
    assert_eq!(
      classify(wiki, Path::new("/v/.llm-wiki/meta/qmd/x"), PathKind::File, &|_| false),
      Relevance::Ignore
    );
    assert_eq!(
      classify(wiki, Path::new("/v/.obsidian/workspace.json"), PathKind::File, &|_| false),
      Relevance::Ignore
    );
    assert_eq!(classify(wiki, wiki, PathKind::Folder, &|_| false), Relevance::Root);
    assert_eq!(classify(wiki, Path::new("/v"), PathKind::Folder, &|_| false), Relevance::Root);
  }

  #[cfg(unix)]
  #[test]
  fn non_utf8_names_need_a_scan() {
    use std::os::unix::ffi::OsStrExt;
    let wiki = Path::new("/v/wiki");
    let p = wiki.join(std::ffi::OsStr::from_bytes(b"bad\xff.md"));
    assert_eq!(classify(wiki, &p, PathKind::File, &|_| false), Relevance::Unnamed);
  }
}
