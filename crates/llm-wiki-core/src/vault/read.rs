//! The one way a page file is read (indexing, embedding, recall excerpts, `neighbours`,
//! resolutions, correction observations): never through a symlink, only a regular file, at most
//! a byte cap.
//!
//! Indexing walks without following symlinks, but a page read later (at recall time, or after the
//! walk's stat) meets whatever is on disk then: a `git pull` can turn an indexed page into a
//! symlink to a file outside the vault, or put a FIFO in its place. So every read here
//! - refuses a path whose final component or any folder between `wiki/` and it is a symlink
//!   (`lstat` of each, and `O_NOFOLLOW` on the open on unix, so a swap between the two is refused
//!   too);
//! - opens without blocking (`O_NONBLOCK` on unix: a FIFO's open returns at once) and refuses
//!   anything but a regular file by the opened file's own metadata (FIFO, device, socket, folder);
//! - reads at most `cap + 1` bytes, so a file over the cap is refused (or cut, for a prefix read)
//!   without being read whole.

use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// Why a page file was not read.
#[derive(Debug, thiserror::Error)]
pub enum PageReadError {
  /// The page path, or a folder on its way from `wiki/`, is a symbolic link.
  #[error("{0} is a symbolic link (page reads never follow links)")]
  Symlink(PathBuf),
  /// The path names something other than a regular file (FIFO, device, socket, folder).
  #[error("{0} is not a regular file")]
  NotRegular(PathBuf),
  /// The path is not under the wiki folder it is read from.
  #[error("{0} is outside the knowledge folder")]
  OutsideWiki(PathBuf),
  /// The file is larger than the read's cap.
  #[error("{path} is over {cap} bytes")]
  TooLarge {
    /// The file.
    path: PathBuf,
    /// The cap of the read.
    cap: u64,
  },
  /// The operating system refused the open or the read.
  #[error("cannot read {path}: {source}")]
  Io {
    /// The file.
    path: PathBuf,
    /// The operating system's error.
    #[source]
    source: std::io::Error,
  },
}

impl PageReadError {
  /// A stable code for diagnostics.
  pub fn code(&self) -> &'static str {
    match self {
      PageReadError::Symlink(_) => "page_symlink_skipped",
      PageReadError::NotRegular(_) => "page_not_regular_file",
      PageReadError::OutsideWiki(_) => "link_path_escape",
      PageReadError::TooLarge { .. } => "page_too_large",
      PageReadError::Io { .. } => "page_read_failed",
    }
  }
}

impl From<PageReadError> for crate::error::Error {
  fn from(e: PageReadError) -> Self {
    match e {
      PageReadError::Io { path, source } => crate::error::Error::io("read", path, source),
      other => crate::error::Error::invalid(other.to_string()),
    }
  }
}

/// Open `path` (a file under `wiki`) for reading after the checks of the module doc.
pub fn open_page(wiki: &Path, path: &Path) -> Result<File, PageReadError> {
  let rel = path.strip_prefix(wiki).map_err(|_| PageReadError::OutsideWiki(path.to_path_buf()))?;
  // Every component from `wiki/` down must be a plain name, and no folder on the way a link
  // (`wiki/` itself is checked by discovery: it must physically live inside the vault).
  let mut at = wiki.to_path_buf();
  let mut components = rel.components().peekable();
  if components.peek().is_none() {
    return Err(PageReadError::NotRegular(path.to_path_buf()));
  }
  while let Some(c) = components.next() {
    let Component::Normal(name) = c else { return Err(PageReadError::OutsideWiki(path.to_path_buf())) };
    at.push(name);
    let meta =
      std::fs::symlink_metadata(&at).map_err(|source| PageReadError::Io { path: at.clone(), source })?;
    if meta.file_type().is_symlink() {
      return Err(PageReadError::Symlink(at));
    }
    let last = components.peek().is_none();
    if last && !meta.is_file() {
      return Err(PageReadError::NotRegular(at));
    }
    if !last && !meta.is_dir() {
      return Err(PageReadError::NotRegular(at));
    }
  }
  let file = open_no_follow(path).map_err(|source| {
    if is_loop(&source) {
      PageReadError::Symlink(path.to_path_buf())
    } else {
      PageReadError::Io { path: path.to_path_buf(), source }
    }
  })?;
  // What was opened decides (the path may have been swapped since the `lstat`).
  let meta = file.metadata().map_err(|source| PageReadError::Io { path: path.to_path_buf(), source })?;
  if !meta.is_file() {
    return Err(PageReadError::NotRegular(path.to_path_buf()));
  }
  Ok(file)
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
  use std::os::unix::fs::OpenOptionsExt;
  std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)
}

#[cfg(windows)]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
  use std::os::windows::fs::OpenOptionsExt;
  // FILE_FLAG_OPEN_REPARSE_POINT: open a link itself, never its target (then refused as not a
  // regular file by the caller's metadata check).
  const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
  let f = std::fs::OpenOptions::new().read(true).custom_flags(FILE_FLAG_OPEN_REPARSE_POINT).open(path)?;
  if f.metadata()?.file_type().is_symlink() {
    return Err(std::io::Error::other("symbolic link"));
  }
  Ok(f)
}

#[cfg(not(any(unix, windows)))]
fn open_no_follow(path: &Path) -> std::io::Result<File> {
  File::open(path)
}

#[cfg(unix)]
fn is_loop(e: &std::io::Error) -> bool {
  e.raw_os_error() == Some(libc::ELOOP)
}

#[cfg(not(unix))]
fn is_loop(e: &std::io::Error) -> bool {
  e.to_string() == "symbolic link"
}

/// Largest page file that is indexed (and read); bigger files are excluded with
/// `page_too_large`.
pub const MAX_PAGE_BYTES: u64 = 16 * 1024 * 1024;

/// The bytes of the page file at `path` (under `wiki`); a file over `cap` bytes is refused with
/// [`PageReadError::TooLarge`] after reading at most `cap + 1` bytes.
pub fn read_page_at(wiki: &Path, path: &Path, cap: u64) -> Result<Vec<u8>, PageReadError> {
  let (bytes, cut) = read_prefix_at(wiki, path, cap)?;
  if cut {
    return Err(PageReadError::TooLarge { path: path.to_path_buf(), cap });
  }
  Ok(bytes)
}

/// At most the first `max` bytes of the page file at `path` (under `wiki`), and whether the file
/// has more.
pub fn read_prefix_at(wiki: &Path, path: &Path, max: u64) -> Result<(Vec<u8>, bool), PageReadError> {
  let file = open_page(wiki, path)?;
  let hint = file.metadata().map(|m| m.len().min(max.saturating_add(1))).unwrap_or(0);
  let mut bytes = Vec::with_capacity(hint as usize);
  file
    .take(max.saturating_add(1))
    .read_to_end(&mut bytes)
    .map_err(|source| PageReadError::Io { path: path.to_path_buf(), source })?;
  let cut = bytes.len() as u64 > max;
  bytes.truncate(max.min(bytes.len() as u64) as usize);
  Ok((bytes, cut))
}

/// [`read_page_at`] of page file `rel_path` (relative to `wiki`, as manifests record it; see
/// [`super::discover::resolve_page_file`]).
pub fn read_page(wiki: &Path, rel_path: &str, cap: u64) -> Result<Vec<u8>, PageReadError> {
  read_page_at(wiki, &super::discover::resolve_page_file(wiki, rel_path), cap)
}

/// The folder `wiki/<name>` the engine writes pages into (`sources` for correction observations,
/// `analyses` for resolution records), created when missing: refused when it is a symbolic link
/// or resolves anywhere but directly under the real `wiki/` (a page written through a linked
/// folder would land outside the vault). `wiki` must exist.
pub fn page_folder(wiki: &Path, name: &str) -> Result<PathBuf, PageReadError> {
  let io = |path: &Path| {
    let path = path.to_path_buf();
    move |source| PageReadError::Io { path, source }
  };
  let real_wiki = std::fs::canonicalize(wiki).map_err(io(wiki))?;
  let dir = wiki.join(name);
  match std::fs::create_dir(&dir) {
    Ok(()) => {}
    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
    Err(e) => return Err(PageReadError::Io { path: dir, source: e }),
  }
  let meta = std::fs::symlink_metadata(&dir).map_err(io(&dir))?;
  if meta.file_type().is_symlink() {
    return Err(PageReadError::Symlink(dir));
  }
  if !meta.is_dir() {
    return Err(PageReadError::NotRegular(dir));
  }
  let real = std::fs::canonicalize(&dir).map_err(io(&dir))?;
  if real.parent() != Some(real_wiki.as_path()) {
    return Err(PageReadError::OutsideWiki(dir));
  }
  Ok(dir)
}

#[cfg(all(test, unix))]
mod tests {
  use super::*;

  fn wiki() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let wiki = t.path().join("vault/wiki");
    std::fs::create_dir_all(wiki.join("concepts")).unwrap();
    (t, wiki)
  }

  #[test]
  fn reads_a_regular_page_and_caps_it() {
    let (_t, wiki) = wiki();
    std::fs::write(wiki.join("concepts/a.md"), b"0123456789").unwrap();
    assert_eq!(read_page(&wiki, "concepts/a.md", 10).unwrap(), b"0123456789");
    assert!(matches!(read_page(&wiki, "concepts/a.md", 9), Err(PageReadError::TooLarge { cap: 9, .. })));
    let (head, cut) = read_prefix_at(&wiki, &wiki.join("concepts/a.md"), 4).unwrap();
    assert_eq!((head.as_slice(), cut), (&b"0123"[..], true));
  }

  #[test]
  fn refuses_symlinked_pages_and_folders() {
    let (t, wiki) = wiki();
    let secret = t.path().join("secret.md");
    std::fs::write(&secret, "SECRET").unwrap();
    std::os::unix::fs::symlink(&secret, wiki.join("concepts/a.md")).unwrap();
    assert!(matches!(read_page(&wiki, "concepts/a.md", 100), Err(PageReadError::Symlink(_))));
    std::fs::create_dir(t.path().join("elsewhere")).unwrap();
    std::fs::write(t.path().join("elsewhere/b.md"), "SECRET").unwrap();
    std::os::unix::fs::symlink(t.path().join("elsewhere"), wiki.join("linked")).unwrap();
    assert!(matches!(read_page(&wiki, "linked/b.md", 100), Err(PageReadError::Symlink(_))));
    assert!(matches!(read_page_at(&wiki, &secret, 100), Err(PageReadError::OutsideWiki(_))));
    assert!(matches!(read_page(&wiki, "../secret.md", 100), Err(PageReadError::OutsideWiki(_))));
  }

  /// Issue 43, small item d: pages are never written through a linked `sources`/`analyses`.
  #[test]
  fn page_folders_must_be_real_folders_of_the_wiki() {
    let (t, wiki) = wiki();
    assert_eq!(page_folder(&wiki, "sources").unwrap(), wiki.join("sources"));
    assert!(wiki.join("sources").is_dir());
    std::fs::create_dir(t.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(t.path().join("elsewhere"), wiki.join("analyses")).unwrap();
    assert!(matches!(page_folder(&wiki, "analyses"), Err(PageReadError::Symlink(_))));
  }

  #[test]
  fn refuses_a_fifo_without_blocking() {
    let (_t, wiki) = wiki();
    let fifo = wiki.join("concepts/f.md");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let w = wiki.clone();
    std::thread::spawn(move || tx.send(read_page(&w, "concepts/f.md", 100).map(|_| ())).unwrap());
    let got = rx.recv_timeout(std::time::Duration::from_secs(5)).expect("a FIFO read blocked");
    assert!(matches!(got, Err(PageReadError::NotRegular(_))), "{got:?}");
    assert!(matches!(read_page(&wiki, "concepts", 100), Err(PageReadError::NotRegular(_))));
  }
}
