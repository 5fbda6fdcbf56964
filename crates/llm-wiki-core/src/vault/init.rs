//! `init`: the one explicit step that makes a plain folder of Markdown notes (an Obsidian vault,
//! a `docs/` folder) indexable. It creates `<folder>/.llm-wiki-retrieval/` holding `config.json`
//! (the vault's identity) and a `.gitignore` (the index is generated), and nothing else: the
//! notes are never written. The index itself appears under `.llm-wiki-retrieval/meta/` on the
//! first `index`. A folder that already is a vault (any layout) is left alone.

use std::path::Path;

use serde::Serialize;

use super::discover::discover_pages;
use super::paths::{has_vault, personal_root, real_path, VaultPaths, PLAIN_DIR};
use crate::error::{Error, Result};
use crate::fsutil::atomic_write;
use crate::util::num::sat_u32;

/// Stable codes of [`Error::VaultInit`].
pub mod codes {
  /// The folder does not exist.
  pub const NOT_FOUND: &str = "vault_init_not_found";
  /// The path is a file (or something else), not a folder.
  pub const NOT_DIRECTORY: &str = "vault_init_not_directory";
  /// The folder cannot be listed (permissions).
  pub const UNREADABLE: &str = "vault_init_unreadable";
  /// The folder holds no Markdown note (`*.md` outside dot folders and `node_modules`).
  pub const NO_MARKDOWN: &str = "vault_init_no_markdown";
  /// The folder lies inside another vault (an ancestor holds `.llm-wiki/`, `.wiki/` or
  /// `.llm-wiki-retrieval/`); index that vault instead.
  pub const INSIDE_VAULT: &str = "vault_init_inside_vault";
}

/// What `initVault` ([`init_vault`]) did. Paths are strings (as JavaScript and the CLI's JSON
/// show them).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false, js_name = "InitVaultResult"))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitOutcome {
  /// The folder (absolute).
  pub root: String,
  /// `plain` (a plain folder of notes, created or found), `llm-wiki` (`.llm-wiki/`) or `legacy`
  /// (`.wiki/`): an existing vault is reported and left alone.
  #[cfg_attr(feature = "napi", napi(ts_type = "'plain' | 'llm-wiki' | 'legacy'"))]
  pub layout: String,
  /// Absolute paths created, in order (`<root>/.llm-wiki-retrieval/`, its `.gitignore` and
  /// `config.json`); empty when the folder already was a vault.
  pub created: Vec<String>,
  /// Markdown notes found (what a reindex will read).
  pub pages: u32,
}

fn path_string(p: &Path) -> String {
  p.to_string_lossy().into_owned()
}

fn refuse(code: &'static str, message: String) -> Error {
  Error::VaultInit { code, message }
}

/// Make `folder` an indexable plain folder of notes (see the module docs). Idempotent: a folder
/// that already holds a vault is reported (`created` empty) and not touched. Errors
/// ([`codes`]) write nothing.
pub fn init_vault(folder: &Path) -> Result<InitOutcome> {
  let root = std::path::absolute(folder).map_err(|e| Error::io("resolve", folder, e))?;
  let meta = match std::fs::metadata(&root) {
    Ok(m) => m,
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
      return Err(refuse(codes::NOT_FOUND, format!("{} does not exist", root.display())))
    }
    Err(e) => return Err(refuse(codes::UNREADABLE, format!("{} cannot be read: {e}", root.display()))),
  };
  if !meta.is_dir() {
    return Err(refuse(
      codes::NOT_DIRECTORY,
      format!("{} is not a folder: init takes the folder that holds the notes", root.display()),
    ));
  }
  if let Err(e) = std::fs::read_dir(&root) {
    return Err(refuse(codes::UNREADABLE, format!("{} cannot be listed: {e}", root.display())));
  }
  let existing = |layout: &str| InitOutcome {
    root: path_string(&root),
    layout: layout.into(),
    created: Vec::new(),
    pages: sat_u32(count_pages(&VaultPaths::for_root(&root))),
  };
  if root.join(".llm-wiki").is_dir() {
    return Ok(existing("llm-wiki"));
  }
  if root.join(".wiki").is_dir() {
    return Ok(existing("legacy"));
  }
  let store = root.join(PLAIN_DIR);
  if store.join("config.json").is_file() {
    return Ok(existing("plain"));
  }
  let personal = real_path(&personal_root());
  let real = real_path(&root);
  for ancestor in real.ancestors().skip(1) {
    if has_vault(ancestor) && ancestor != personal {
      return Err(refuse(
        codes::INSIDE_VAULT,
        format!(
          "{} is inside the vault at {}: index that vault instead (llm-wiki-retrieval index {})",
          root.display(),
          ancestor.display(),
          ancestor.display()
        ),
      ));
    }
  }
  let paths = VaultPaths::plain(&root);
  let pages = count_pages(&paths);
  if pages == 0 {
    return Err(refuse(
      codes::NO_MARKDOWN,
      format!(
        "{} holds no Markdown notes (*.md outside dot folders and node_modules); nothing was created",
        root.display()
      ),
    ));
  }
  let mut created = Vec::new();
  if !store.is_dir() {
    std::fs::create_dir(&store).map_err(|e| Error::io("create", &store, e))?;
    created.push(store.clone());
  }
  let ignore = store.join(".gitignore");
  if !ignore.exists() {
    atomic_write(&ignore, b"# Generated by llm-wiki-retrieval (the search index); safe to delete.\n*\n")?;
    created.push(ignore);
  }
  let config = serde_json::json!({ "vault_id": uuid::Uuid::new_v4().to_string(), "layout": "plain" });
  let text = serde_json::to_string_pretty(&config).map_err(|e| Error::Index(e.to_string()))?;
  atomic_write(&paths.config_file(), text.as_bytes())?;
  created.push(paths.config_file());
  Ok(InitOutcome {
    root: path_string(&root),
    layout: "plain".into(),
    created: created.iter().map(|p| path_string(p)).collect(),
    pages: sat_u32(pages),
  })
}

fn count_pages(paths: &VaultPaths) -> usize {
  discover_pages(&paths.root, &paths.wiki).files.len()
}

/// The message of a vault whose `config.json` is missing: for a folder that holds no vault at
/// all, the command that makes it one.
pub fn missing_config_hint(paths: &VaultPaths) -> String {
  if !has_vault(&paths.root) {
    format!(
      "{} is not initialised for llm-wiki-retrieval: run `llm-wiki-retrieval init {}` (JS: initVault) \
       once; it creates only {}/{PLAIN_DIR}/ and leaves the notes untouched",
      paths.root.display(),
      paths.root.display(),
      paths.root.display()
    )
  } else {
    "config.json is missing; cannot confirm or create a vault identity".into()
  }
}
