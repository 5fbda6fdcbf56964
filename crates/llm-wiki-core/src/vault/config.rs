//! `.llm-wiki/config.json`: vault identity (`vault_id`, backfilled once) and the `topic` /
//! `mode` strings that form a recall intent.

use serde_json::{Map, Value};

use super::VaultPaths;
use crate::error::{Error, Result};
use crate::fsutil::atomic_write;
use crate::util::file_lock::open_lock_file;

/// True for a v4 UUID in canonical text form (case-insensitive).
pub fn is_v4_uuid(s: &str) -> bool {
  let b = s.as_bytes();
  if b.len() != 36 {
    return false;
  }
  for (i, &c) in b.iter().enumerate() {
    let ok = match i {
      8 | 13 | 18 | 23 => c == b'-',
      14 => c == b'4',
      19 => matches!(c.to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b'),
      _ => c.is_ascii_hexdigit(),
    };
    if !ok {
      return false;
    }
  }
  true
}

/// Read config.json as a JSON object.
pub fn read_config(paths: &VaultPaths) -> Result<Map<String, Value>> {
  let path = paths.config_file();
  let bytes = match std::fs::read(&path) {
    Ok(b) => b,
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
      return Err(Error::ConfigInvalid { path, message: super::init::missing_config_hint(paths) })
    }
    Err(e) => {
      return Err(Error::ConfigInvalid {
        path,
        message: format!("config.json is unreadable or malformed: {e}"),
      })
    }
  };
  match serde_json::from_slice::<Value>(&bytes) {
    Ok(Value::Object(map)) => Ok(map),
    Ok(_) => {
      Err(Error::ConfigInvalid { path, message: "config.json must be a JSON object with a vault_id".into() })
    }
    Err(e) => {
      Err(Error::ConfigInvalid { path, message: format!("config.json is unreadable or malformed: {e}") })
    }
  }
}

/// The valid `vault_id` of a config object, an error for an invalid one, `None` when absent.
pub fn vault_id_of(paths: &VaultPaths, config: &Map<String, Value>) -> Result<Option<String>> {
  match config.get("vault_id") {
    None => Ok(None),
    Some(Value::String(s)) if is_v4_uuid(s) => Ok(Some(s.clone())),
    Some(Value::String(_)) => Err(Error::ConfigInvalidVaultId {
      path: paths.config_file(),
      message: "config.json contains an invalid vault_id".into(),
    }),
    Some(_) => Err(Error::ConfigInvalidVaultId {
      path: paths.config_file(),
      message: "config.json contains a non-string vault_id".into(),
    }),
  }
}

/// Name of the lock file beside `config.json` that serializes its writers.
pub const CONFIG_LOCK: &str = ".config.lock";

/// Writers of config.json in this process (the OS lock below covers other processes; this one
/// makes threads wait their turn whatever the platform's lock granularity).
fn in_process() -> &'static std::sync::Mutex<()> {
  static LOCK: std::sync::OnceLock<std::sync::Mutex<()>> = std::sync::OnceLock::new();
  LOCK.get_or_init(Default::default)
}

/// The one writer of config.json: read it, let `edit` change the object, and write it back (only
/// when it changed) atomically — temp file, fsync, rename — all under an exclusive OS lock on
/// `.config.lock` beside it (`flock` / `LockFileEx`, as the store's writer lock; released by the
/// OS when the holder dies, so it is never stale). Every writer of the file goes through here, so
/// two read-modify-writes never interleave and none loses the other's keys. The JSON keeps every
/// key in order (2-space indentation, no trailing newline, like the extension).
pub fn update_config<T>(
  paths: &VaultPaths,
  edit: impl FnOnce(&mut Map<String, Value>) -> Result<T>,
) -> Result<T> {
  let path = paths.config_file();
  let lock_path = path.with_file_name(CONFIG_LOCK);
  let _threads = in_process().lock().unwrap_or_else(|p| p.into_inner());
  if !path.is_file() {
    // Report a missing config as such (the lock file is not created in a folder without one).
    read_config(paths)?;
  }
  let lock = open_lock_file(&lock_path).map_err(|e| Error::io("open lock file", &lock_path, e))?;
  lock.lock().map_err(|e| Error::io("lock", &lock_path, e))?;
  let mut config = read_config(paths)?;
  let before = config.clone();
  let out = edit(&mut config)?;
  if config != before {
    let text =
      serde_json::to_string_pretty(&Value::Object(config)).map_err(|e| Error::Index(e.to_string()))?;
    atomic_write(&path, text.as_bytes())?;
  }
  drop(lock);
  Ok(out)
}

/// Return the vault's id, backfilling a new v4 UUID once when absent (through [`update_config`]:
/// concurrent backfills agree on one id and keep every other key).
pub fn ensure_vault_id(paths: &VaultPaths) -> Result<String> {
  if let Some(id) = vault_id_of(paths, &read_config(paths)?)? {
    return Ok(id);
  }
  update_config(paths, |config| {
    // Another writer may have backfilled it since the read above.
    if let Some(id) = vault_id_of(paths, config)? {
      return Ok(id);
    }
    let id = uuid::Uuid::new_v4().to_string();
    config.insert("vault_id".into(), Value::String(id.clone()));
    Ok(id)
  })
}

/// Recall intent: non-empty `topic` and `mode` joined by a space, at most 256 characters.
pub fn intent_of(config: &Map<String, Value>) -> Option<String> {
  let parts: Vec<&str> = ["topic", "mode"]
    .iter()
    .filter_map(|k| config.get(*k).and_then(|v| v.as_str()))
    .map(str::trim)
    .filter(|s| !s.is_empty())
    .collect();
  let joined = parts.join(" ");
  (!joined.is_empty()).then(|| joined.chars().take(256).collect())
}

#[cfg(test)]
mod tests {
  use super::*;

  fn vault(config: &str) -> (tempfile::TempDir, VaultPaths) {
    let t = tempfile::tempdir().unwrap();
    let p = VaultPaths::new_layout(t.path());
    std::fs::create_dir_all(&p.dot_wiki).unwrap();
    std::fs::write(p.config_file(), config).unwrap();
    (t, p)
  }

  #[test]
  fn uuid_check() {
    assert!(is_v4_uuid("123e4567-e89b-42d3-a456-426614174000"));
    assert!(is_v4_uuid("123E4567-E89B-42D3-B456-426614174000"));
    assert!(!is_v4_uuid("123e4567-e89b-12d3-a456-426614174000"));
    assert!(!is_v4_uuid("123e4567-e89b-42d3-c456-426614174000"));
    assert!(!is_v4_uuid("nope"));
  }

  #[test]
  fn backfill_preserves_keys_and_is_stable() {
    let (_t, p) = vault(r#"{"name":"X","mode":"m","nested":{"a":[1,2]}}"#);
    let id = ensure_vault_id(&p).unwrap();
    assert!(is_v4_uuid(&id));
    let text = std::fs::read_to_string(p.config_file()).unwrap();
    assert!(text.starts_with("{\n  \"name\": \"X\",\n  \"mode\": \"m\""));
    assert!(!text.ends_with('\n'));
    assert!(text.contains("\"nested\": {"));
    assert_eq!(ensure_vault_id(&p).unwrap(), id);
  }

  #[test]
  fn invalid_configs() {
    let (_t, p) = vault("[1]");
    assert_eq!(ensure_vault_id(&p).unwrap_err().code(), "config_invalid");
    let (_t, p) = vault("{bad");
    assert_eq!(ensure_vault_id(&p).unwrap_err().code(), "config_invalid");
    let (_t, p) = vault(r#"{"vault_id":"x"}"#);
    assert_eq!(ensure_vault_id(&p).unwrap_err().code(), "config_invalid_vault_id");
    let (_t, p) = vault(r#"{"vault_id":null}"#);
    assert_eq!(ensure_vault_id(&p).unwrap_err().code(), "config_invalid_vault_id");
    let t = tempfile::tempdir().unwrap();
    assert_eq!(ensure_vault_id(&VaultPaths::new_layout(t.path())).unwrap_err().code(), "config_invalid");
  }

  /// An old vault (no `vault_id`) backfilled by several writers at once — a watcher's catch-up
  /// reindex, `resolveConflict`, the `ensureVaultId` export — ends with one id, the one every
  /// caller returned.
  #[test]
  fn concurrent_backfills_agree_on_one_id() {
    for round in 0..20 {
      let (_t, p) = vault(r#"{"name":"X"}"#);
      let barrier = std::sync::Barrier::new(6);
      let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
          .map(|_| {
            s.spawn(|| {
              barrier.wait();
              ensure_vault_id(&p).unwrap()
            })
          })
          .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
      });
      let on_disk = vault_id_of(&p, &read_config(&p).unwrap()).unwrap().unwrap();
      assert!(ids.iter().all(|id| *id == on_disk), "round {round}: {ids:?} vs {on_disk}");
    }
  }

  /// Another key edited through [`update_config`] while the id is backfilled is kept.
  #[test]
  fn a_concurrent_edit_of_another_key_is_not_lost() {
    for round in 0..20 {
      let (_t, p) = vault(r#"{"name":"X"}"#);
      let barrier = std::sync::Barrier::new(4);
      std::thread::scope(|s| {
        for i in 0..4 {
          let (p, barrier) = (&p, &barrier);
          s.spawn(move || {
            barrier.wait();
            if i % 2 == 0 {
              ensure_vault_id(p).unwrap();
            } else {
              update_config(p, |c| {
                c.insert(format!("k{i}"), Value::from(i));
                Ok(())
              })
              .unwrap();
            }
          });
        }
      });
      let c = read_config(&p).unwrap();
      assert!(vault_id_of(&p, &c).unwrap().is_some(), "round {round}: {c:?}");
      assert_eq!((c.get("k1"), c.get("k3")), (Some(&Value::from(1)), Some(&Value::from(3))), "round {round}");
      assert_eq!(c.get("name"), Some(&Value::from("X")));
    }
  }

  #[test]
  fn intent() {
    let (_t, p) = vault(r#"{"topic":" AI memory ","mode":""}"#);
    assert_eq!(intent_of(&read_config(&p).unwrap()).as_deref(), Some("AI memory"));
    let (_t, p) = vault(r#"{}"#);
    assert_eq!(intent_of(&read_config(&p).unwrap()), None);
  }
}
