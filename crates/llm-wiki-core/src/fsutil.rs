//! Small filesystem helpers shared by the store: atomic writes and JSON files.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// Write `bytes` to `path` atomically: temp file in the same directory, fsync, rename, fsync dir.
/// A reader sees either the old or the new content, never a torn file.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
  let dir = path.parent().ok_or_else(|| Error::invalid(format!("{} has no parent", path.display())))?;
  fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
  let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
  let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
  let res = (|| {
    let mut f = File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
    f.write_all(bytes).map_err(|e| Error::io("write", &tmp, e))?;
    f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| Error::io("rename", path, e))?;
    sync_dir(dir);
    Ok(())
  })();
  if res.is_err() {
    let _ = fs::remove_file(&tmp);
  }
  res
}

/// Best-effort fsync of a directory so a rename inside it is durable (no-op where unsupported).
pub fn sync_dir(dir: &Path) {
  #[cfg(unix)]
  if let Ok(d) = File::open(dir) {
    let _ = d.sync_all();
  }
  #[cfg(not(unix))]
  let _ = dir;
}

/// Serialize `value` as pretty JSON and write it atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
  let bytes = serde_json::to_vec_pretty(value).map_err(|e| Error::Index(format!("serialize {}: {e}", path.display())))?;
  atomic_write(path, &bytes)
}

/// Outcome of reading an optional JSON artifact.
#[derive(Debug)]
pub enum JsonFile<T> {
  /// The file does not exist.
  Missing,
  /// The file exists but cannot be read or parsed; the message says why.
  Invalid(String),
  /// Parsed content.
  Valid(T),
}

/// Read and parse a JSON artifact, distinguishing missing from invalid.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> JsonFile<T> {
  match fs::read(path) {
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => JsonFile::Missing,
    Err(e) => JsonFile::Invalid(format!("cannot read {}: {e}", path.display())),
    Ok(bytes) => match serde_json::from_slice(&bytes) {
      Ok(v) => JsonFile::Valid(v),
      Err(e) => JsonFile::Invalid(format!("{} is malformed: {e}", path.display())),
    },
  }
}

/// Remove a directory tree, ignoring "not found".
pub fn remove_dir_all_if_exists(path: &Path) -> Result<()> {
  match fs::remove_dir_all(path) {
    Ok(()) => Ok(()),
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
    Err(e) => Err(Error::io("remove", path, e)),
  }
}

/// Total size in bytes of the regular files under `dir`.
pub fn dir_size(dir: &Path) -> u64 {
  walkdir::WalkDir::new(dir)
    .into_iter()
    .filter_map(|e| e.ok())
    .filter(|e| e.file_type().is_file())
    .filter_map(|e| e.metadata().ok())
    .map(|m| m.len())
    .sum()
}
