//! Small filesystem helpers shared by the store: atomic writes and JSON files.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// A path a caller hands over (an argument of the Node addon, a model directory): it must be
/// absolute and free of `..`, else `invalid_argument` naming `name`. The engine's one rule for
/// caller paths.
pub fn absolute_path(name: &str, value: &str) -> Result<std::path::PathBuf> {
  let p = std::path::PathBuf::from(value);
  if value.is_empty() || !p.is_absolute() {
    return Err(Error::invalid(format!("{name} must be an absolute path, got {value:?}")));
  }
  if p.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
    return Err(Error::invalid(format!("{name} must not contain '..': {value:?}")));
  }
  Ok(p)
}

/// Write `bytes` to `path` atomically: temp file in the same directory, fsync, rename, fsync dir.
/// A reader sees either the old or the new content, never a torn file.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
  atomic_write_with(path, |w| w.write_all(bytes).map_err(|e| Error::io("write", path, e)))
}

/// [`atomic_write`] of what `fill` writes into a buffered writer, so a large file (a 100k-page
/// manifest is hundreds of MB) is streamed to disk instead of first built in memory.
pub fn atomic_write_with(path: &Path, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
  replace_with(path, true, fill)
}

/// Replace `path` with `bytes` (temp file and rename, no fsync) for a cache file whose reader
/// checks what it holds and recomputes it when missing or stale: a crash may lose the new content
/// or leave an empty file, never one file torn between two contents.
pub fn replace_cache_file(path: &Path, bytes: &[u8]) -> Result<()> {
  replace_with(path, false, |w| w.write_all(bytes).map_err(|e| Error::io("write", path, e)))
}

/// Write through a temp file in `path`'s directory renamed over `path`; `durable`: fsync the file
/// before the rename and the directory after it.
fn replace_with(path: &Path, durable: bool, fill: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
  let dir = path.parent().ok_or_else(|| Error::invalid(format!("{} has no parent", path.display())))?;
  fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
  let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
  let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), uuid::Uuid::new_v4().simple()));
  let res = (|| {
    let f = File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
    fill(&mut w)?;
    let f = w.into_inner().map_err(|e| Error::io("write", &tmp, e.into_error()))?;
    if durable {
      f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
    }
    drop(f);
    fs::rename(&tmp, path).map_err(|e| Error::io("rename", path, e))?;
    if durable {
      sync_dir(dir);
    }
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
  let bytes = serde_json::to_vec_pretty(value)
    .map_err(|e| Error::Index(format!("serialize {}: {e}", path.display())))?;
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
    Err(e) => unreadable(path, e),
    Ok(bytes) => parse_json(path, &bytes),
  }
}

fn unreadable<T>(path: &Path, e: std::io::Error) -> JsonFile<T> {
  if e.kind() == std::io::ErrorKind::NotFound {
    JsonFile::Missing
  } else {
    JsonFile::Invalid(format!("cannot read {}: {e}", path.display()))
  }
}

pub(crate) fn parse_json<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> JsonFile<T> {
  match serde_json::from_slice(bytes) {
    Ok(v) => JsonFile::Valid(v),
    Err(e) => JsonFile::Invalid(format!("{} is malformed: {e}", path.display())),
  }
}

/// [`read_json`] of a large file that is never changed in place (written by [`atomic_write`] and
/// replaced whole): parsed from a read-only memory map of it instead of a copy read into the heap
/// first — a 100k-page manifest is 300 MB, and the copy was a fifth of its parse. Small files are
/// read as [`read_json`] does.
pub fn read_json_mapped<T: DeserializeOwned>(path: &Path) -> JsonFile<T> {
  read_mapped(path, |bytes| parse_json(path, bytes))
}

/// The bytes of a file that is never changed in place (see [`read_json_mapped`]) given to
/// `parse`: a read-only memory map of a large file, a heap copy of a small one.
pub fn read_mapped<T>(path: &Path, parse: impl FnOnce(&[u8]) -> JsonFile<T>) -> JsonFile<T> {
  const MAP_FROM_BYTES: u64 = 1 << 20;
  use std::io::Read;
  let mut file = match File::open(path) {
    Err(e) => return unreadable(path, e),
    Ok(f) => f,
  };
  if file.metadata().is_ok_and(|m| m.len() >= MAP_FROM_BYTES) {
    // SAFETY: the map is read-only and dropped before this returns; the files read this way are
    // only ever replaced by a rename (a new inode), so the mapped bytes do not change under it.
    if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
      return parse(&map);
    }
  }
  let mut bytes = Vec::new();
  match file.read_to_end(&mut bytes) {
    Err(e) => unreadable(path, e),
    Ok(_) => parse(&bytes),
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

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
  std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .map(|d| d.as_millis() as i64)
    .unwrap_or(0)
}

/// RFC 3339 UTC timestamp (`2026-01-02T03:04:05.678Z`) of a Unix time in milliseconds.
pub fn iso_from_ms(ms: i64) -> String {
  let secs = ms.div_euclid(1000);
  let millis = ms.rem_euclid(1000);
  let days = secs.div_euclid(86_400);
  let rem = secs.rem_euclid(86_400);
  // Civil-from-days (Howard Hinnant's algorithm).
  let z = days + 719_468;
  let era = z.div_euclid(146_097);
  let doe = z.rem_euclid(146_097);
  let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
  let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  let mp = (5 * doy + 2) / 153;
  let d = doy - (153 * mp + 2) / 5 + 1;
  let m = if mp < 10 { mp + 3 } else { mp - 9 };
  let y = yoe + era * 400 + i64::from(m <= 2);
  format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Current time as RFC 3339.
pub fn now_iso() -> String {
  iso_from_ms(now_ms())
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn iso_dates() {
    assert_eq!(iso_from_ms(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(iso_from_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
    assert_eq!(iso_from_ms(1_798_761_599_000), "2026-12-31T23:59:59.000Z");
  }

  #[test]
  fn atomic_write_replaces() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("a/b.json");
    atomic_write(&p, b"1").unwrap();
    atomic_write(&p, b"2").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"2");
    assert_eq!(std::fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
  }

  /// A streamed write larger than its buffer lands whole; one whose filler fails leaves the old
  /// file and no temporary file behind.
  #[test]
  fn streamed_atomic_write_is_all_or_nothing() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("m.json");
    let big: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    atomic_write_with(&p, |w| {
      for part in big.chunks(7_000) {
        w.write_all(part).map_err(|e| Error::io("write", &p, e))?;
      }
      Ok(())
    })
    .unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), big);
    let failed = atomic_write_with(&p, |w| {
      w.write_all(b"partial").map_err(|e| Error::io("write", &p, e))?;
      Err(Error::Index("serializer failed".into()))
    });
    assert!(failed.is_err());
    assert_eq!(std::fs::read(&p).unwrap(), big, "a failed write replaced the file");
    assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1, "a temporary file was left behind");
  }
}
