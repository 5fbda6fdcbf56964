//! `.llm-wiki/config.json`: vault identity (`vault_id`, backfilled once) and the `topic` /
//! `mode` strings that form a recall intent.

use serde_json::{Map, Value};

use super::VaultPaths;
use crate::error::{Error, Result};
use crate::fsutil::atomic_write;

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

/// Return the vault's id, backfilling a new v4 UUID once when absent. The rewrite is atomic and
/// keeps every other key in order (2-space JSON, no trailing newline, like the extension).
pub fn ensure_vault_id(paths: &VaultPaths) -> Result<String> {
  let mut config = read_config(paths)?;
  if let Some(id) = vault_id_of(paths, &config)? {
    return Ok(id);
  }
  let id = uuid::Uuid::new_v4().to_string();
  config.insert("vault_id".into(), Value::String(id.clone()));
  let text = serde_json::to_string_pretty(&Value::Object(config)).map_err(|e| Error::Index(e.to_string()))?;
  atomic_write(&paths.config_file(), text.as_bytes())?;
  Ok(id)
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

  #[test]
  fn intent() {
    let (_t, p) = vault(r#"{"topic":" AI memory ","mode":""}"#);
    assert_eq!(intent_of(&read_config(&p).unwrap()).as_deref(), Some("AI memory"));
    let (_t, p) = vault(r#"{}"#);
    assert_eq!(intent_of(&read_config(&p).unwrap()), None);
  }
}
