//! Where a vault's files live: the new (`.llm-wiki/`) and legacy (`.wiki` sentinel) layouts,
//! and how the personal and project vaults are found. Mirrors pi-llm-wiki's `lib/utils.ts`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::PageModel;

/// The engine's folder in a plain Markdown folder ([`VaultPaths::plain`]).
pub const PLAIN_DIR: &str = ".llm-wiki-retrieval";

/// Absolute paths of one vault. Field names follow the extension's `VaultPaths`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VaultPaths {
  /// Vault root (the directory that contains `.llm-wiki/`).
  pub root: PathBuf,
  /// `<root>/.llm-wiki` (new layout) or `<root>/.wiki` (legacy); holds `config.json`.
  pub dot_wiki: PathBuf,
  /// Immutable source material.
  pub raw: PathBuf,
  /// `<raw>/sources`.
  pub raw_sources: PathBuf,
  /// `<raw>/trajectories`.
  pub raw_trajectories: PathBuf,
  /// Authoritative Markdown pages.
  pub wiki: PathBuf,
  /// Generated state (except `events.jsonl`).
  pub meta: PathBuf,
  /// Generated outputs.
  pub outputs: PathBuf,
  /// `.discoveries`.
  pub discoveries: PathBuf,
  /// `<meta>/qmd` (kept for compatibility with the TypeScript extension's shape).
  pub qmd: PathBuf,
  /// `<meta>/qmd/current`.
  pub qmd_current: PathBuf,
  /// `<meta>/qmd/documents`.
  pub qmd_documents: PathBuf,
  /// `<meta>/qmd/manifest.json`.
  pub qmd_manifest: PathBuf,
  /// `<meta>/qmd/swap.json`.
  pub qmd_swap: PathBuf,
}

/// The paths of one vault as a caller gives them (the Node addon's `VaultPaths`, absolute
/// paths). Only `root` is required; missing fields are derived from it (the new `.llm-wiki/`
/// layout, or the legacy `.wiki` or a plain folder when detected: [`VaultPaths::for_root`]).
#[cfg_attr(feature = "napi", napi_derive::napi(object, js_name = "VaultPaths"))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VaultPathsSpec {
  /// Vault root (contains `.llm-wiki/`).
  pub root: String,
  /// `<root>/.llm-wiki` (or `<root>/.wiki` in the legacy layout); holds `config.json`.
  pub dot_wiki: Option<String>,
  /// Immutable source material.
  pub raw: Option<String>,
  /// `<raw>/sources`.
  pub raw_sources: Option<String>,
  /// `<raw>/trajectories`.
  pub raw_trajectories: Option<String>,
  /// Authoritative Markdown pages.
  pub wiki: Option<String>,
  /// Generated state; the index store follows it (`<meta>/qmd`) unless `qmd` is given.
  pub meta: Option<String>,
  /// Generated outputs.
  pub outputs: Option<String>,
  /// `.discoveries`.
  pub discoveries: Option<String>,
  /// The index store directory (`<meta>/qmd` by default), where the extension looks for it.
  pub qmd: Option<String>,
  /// `<qmd>/current`.
  pub qmd_current: Option<String>,
  /// `<qmd>/documents`.
  pub qmd_documents: Option<String>,
  /// `<qmd>/manifest.json`.
  pub qmd_manifest: Option<String>,
  /// `<qmd>/swap.json`.
  pub qmd_swap: Option<String>,
}

impl VaultPathsSpec {
  /// The vault's paths: every path checked ([`crate::fsutil::absolute_path`]; `invalid_argument`
  /// names the field, e.g. `paths.rawSources`), the missing ones derived from `root`; a given
  /// `meta` or `qmd` moves the store's files with it.
  pub fn resolve(&self) -> crate::Result<VaultPaths> {
    use crate::fsutil::absolute_path;
    let mut p = VaultPaths::for_root(absolute_path("paths.root", &self.root)?);
    let set = |slot: &mut PathBuf, name: &str, v: &Option<String>| -> crate::Result<()> {
      if let Some(v) = v {
        *slot = absolute_path(&format!("paths.{name}"), v)?;
      }
      Ok(())
    };
    set(&mut p.dot_wiki, "dotWiki", &self.dot_wiki)?;
    set(&mut p.raw, "raw", &self.raw)?;
    set(&mut p.raw_sources, "rawSources", &self.raw_sources)?;
    set(&mut p.raw_trajectories, "rawTrajectories", &self.raw_trajectories)?;
    set(&mut p.wiki, "wiki", &self.wiki)?;
    set(&mut p.meta, "meta", &self.meta)?;
    set(&mut p.outputs, "outputs", &self.outputs)?;
    set(&mut p.discoveries, "discoveries", &self.discoveries)?;
    if self.meta.is_some() || self.qmd.is_some() {
      let qmd = match &self.qmd {
        Some(v) => absolute_path("paths.qmd", v)?,
        None => p.meta.join("qmd"),
      };
      p.set_store(qmd);
    }
    set(&mut p.qmd_current, "qmdCurrent", &self.qmd_current)?;
    set(&mut p.qmd_documents, "qmdDocuments", &self.qmd_documents)?;
    set(&mut p.qmd_manifest, "qmdManifest", &self.qmd_manifest)?;
    set(&mut p.qmd_swap, "qmdSwap", &self.qmd_swap)?;
    Ok(p)
  }
}

impl From<&VaultPaths> for VaultPathsSpec {
  fn from(p: &VaultPaths) -> Self {
    let s = |p: &Path| Some(p.to_string_lossy().into_owned());
    VaultPathsSpec {
      root: p.root.to_string_lossy().into_owned(),
      dot_wiki: s(&p.dot_wiki),
      raw: s(&p.raw),
      raw_sources: s(&p.raw_sources),
      raw_trajectories: s(&p.raw_trajectories),
      wiki: s(&p.wiki),
      meta: s(&p.meta),
      outputs: s(&p.outputs),
      discoveries: s(&p.discoveries),
      qmd: s(&p.qmd),
      qmd_current: s(&p.qmd_current),
      qmd_documents: s(&p.qmd_documents),
      qmd_manifest: s(&p.qmd_manifest),
      qmd_swap: s(&p.qmd_swap),
    }
  }
}

impl VaultPaths {
  /// New layout: everything under `<root>/.llm-wiki`.
  pub fn new_layout(root: impl Into<PathBuf>) -> Self {
    let root = root.into();
    let dot_wiki = root.join(".llm-wiki");
    let raw = dot_wiki.join("raw");
    let meta = dot_wiki.join("meta");
    Self::assemble(
      root.clone(),
      dot_wiki.clone(),
      raw,
      dot_wiki.join("wiki"),
      meta,
      dot_wiki.join("outputs"),
      dot_wiki.join(".discoveries"),
    )
  }

  /// Legacy layout: sentinel `<root>/.wiki`, content directories directly under the root.
  pub fn legacy(root: impl Into<PathBuf>) -> Self {
    let root = root.into();
    Self::assemble(
      root.clone(),
      root.join(".wiki"),
      root.join("raw"),
      root.join("wiki"),
      root.join("meta"),
      root.join("outputs"),
      root.join(".discoveries"),
    )
  }

  fn assemble(
    root: PathBuf,
    dot_wiki: PathBuf,
    raw: PathBuf,
    wiki: PathBuf,
    meta: PathBuf,
    outputs: PathBuf,
    discoveries: PathBuf,
  ) -> Self {
    let qmd = meta.join("qmd");
    let mut p = VaultPaths {
      raw_sources: raw.join("sources"),
      raw_trajectories: raw.join("trajectories"),
      qmd_current: PathBuf::new(),
      qmd_documents: PathBuf::new(),
      qmd_manifest: PathBuf::new(),
      qmd_swap: PathBuf::new(),
      qmd: PathBuf::new(),
      root,
      dot_wiki,
      raw,
      wiki,
      meta,
      outputs,
      discoveries,
    };
    p.set_store(qmd);
    p
  }

  /// Put the index store at `qmd`, with its `current`, `documents`, `manifest.json` and
  /// `swap.json`.
  pub fn set_store(&mut self, qmd: PathBuf) {
    self.qmd_current = qmd.join("current");
    self.qmd_documents = qmd.join("documents");
    self.qmd_manifest = qmd.join("manifest.json");
    self.qmd_swap = qmd.join("swap.json");
    self.qmd = qmd;
  }

  /// A plain folder of Markdown notes (an Obsidian vault, a `docs/` folder): the pages are the
  /// folder's own `.md` files ([`PageModel::Note`]), and everything the engine writes lives in
  /// `<root>/.llm-wiki-retrieval/` (`config.json`, `meta/` with the index). Created by
  /// [`crate::vault::init::init_vault`].
  pub fn plain(root: impl Into<PathBuf>) -> Self {
    let root = root.into();
    let dot_wiki = root.join(PLAIN_DIR);
    let meta = dot_wiki.join("meta");
    Self::assemble(
      root.clone(),
      dot_wiki.clone(),
      dot_wiki.join("raw"),
      root.clone(),
      meta,
      dot_wiki.join("outputs"),
      dot_wiki.join(".discoveries"),
    )
  }

  /// `.llm-wiki/` → new layout; else `.wiki/` → legacy; else `.llm-wiki-retrieval/` → a plain
  /// folder ([`VaultPaths::plain`]); else the new layout (whose missing `config.json` is then
  /// reported, naming `llm-wiki-retrieval init`).
  pub fn for_root(root: impl Into<PathBuf>) -> Self {
    let root = root.into();
    if root.join(".wiki").is_dir() && !root.join(".llm-wiki").exists() {
      Self::legacy(root)
    } else if root.join(PLAIN_DIR).is_dir() && !root.join(".llm-wiki").exists() {
      Self::plain(root)
    } else {
      Self::new_layout(root)
    }
  }

  /// True for a plain folder of notes: the pages live directly in the root.
  pub fn is_plain(&self) -> bool {
    self.wiki == self.root
  }

  /// How this vault's files are read as pages.
  pub fn page_model(&self) -> PageModel {
    if self.is_plain() {
      PageModel::Note
    } else {
      PageModel::Wiki
    }
  }

  /// `<dotWiki>/config.json`.
  pub fn config_file(&self) -> PathBuf {
    self.dot_wiki.join("config.json")
  }

  /// Our index store: the directory the extension's `VaultPaths.qmd` names (`<meta>/qmd` by
  /// default), where the extension's status, lint and tools look for the generated index. A
  /// store of the TypeScript release (QMD) in the same directory stays readable until this
  /// engine publishes its own index, then is removed (see `store::migrate`).
  pub fn retrieval(&self) -> PathBuf {
    self.qmd.clone()
  }
}

/// Personal root: `$WIKI_HOME` when set and non-empty, else the user's home directory.
pub fn personal_root() -> PathBuf {
  if let Some(h) = std::env::var_os("WIKI_HOME").filter(|v| !v.is_empty()) {
    return PathBuf::from(h);
  }
  home_dir()
}

fn home_dir() -> PathBuf {
  for var in ["HOME", "USERPROFILE"] {
    if let Some(h) = std::env::var_os(var).filter(|v| !v.is_empty()) {
      return PathBuf::from(h);
    }
  }
  PathBuf::from("/")
}

/// The personal vault always uses the new layout.
pub fn personal_vault_paths() -> VaultPaths {
  VaultPaths::new_layout(personal_root())
}

/// True when `dir` holds a vault of any layout (`.llm-wiki/`, `.wiki/`, `.llm-wiki-retrieval/`).
pub fn has_vault(dir: &Path) -> bool {
  dir.join(".llm-wiki").is_dir() || dir.join(".wiki").is_dir() || dir.join(PLAIN_DIR).is_dir()
}

/// Physical path with symlinks resolved; the input itself when it does not exist.
pub fn real_path(p: &Path) -> PathBuf {
  std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Project vault for `cwd`: (1) `cwd` itself if it holds a vault, (2) `$WIKI_HOME` if set,
/// (3) the nearest ancestor with a vault that is not the personal vault, else `None`.
pub fn resolve_project_vault_root(cwd: &Path) -> Option<PathBuf> {
  if has_vault(cwd) {
    return Some(cwd.to_path_buf());
  }
  if let Some(h) = std::env::var_os("WIKI_HOME").filter(|v| !v.is_empty()) {
    return Some(PathBuf::from(h));
  }
  let personal = real_path(&personal_root());
  let mut cur = cwd.parent();
  while let Some(dir) = cur {
    if has_vault(dir) && real_path(dir) != personal {
      return Some(dir.to_path_buf());
    }
    cur = dir.parent();
  }
  None
}

/// Like [`resolve_project_vault_root`], falling back to the (real) personal root.
pub fn resolve_vault_root(cwd: &Path) -> PathBuf {
  resolve_project_vault_root(cwd).unwrap_or_else(|| real_path(&personal_root()))
}

/// Paths of the vault that applies to `cwd`.
pub fn resolve_vault_paths(cwd: &Path) -> VaultPaths {
  VaultPaths::for_root(resolve_vault_root(cwd))
}

/// True when `paths.root` is physically the personal root (symlinks resolved).
pub fn is_personal_vault(paths: &VaultPaths) -> bool {
  match (std::fs::canonicalize(&paths.root), std::fs::canonicalize(personal_root())) {
    (Ok(a), Ok(b)) => a == b,
    _ => false,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn new_layout_fields() {
    let p = VaultPaths::new_layout("/v");
    assert_eq!(p.dot_wiki, Path::new("/v/.llm-wiki"));
    assert_eq!(p.wiki, Path::new("/v/.llm-wiki/wiki"));
    assert_eq!(p.meta, Path::new("/v/.llm-wiki/meta"));
    assert_eq!(p.raw_trajectories, Path::new("/v/.llm-wiki/raw/trajectories"));
    assert_eq!(p.discoveries, Path::new("/v/.llm-wiki/.discoveries"));
    assert_eq!(p.qmd_swap, Path::new("/v/.llm-wiki/meta/qmd/swap.json"));
    assert_eq!(p.retrieval(), Path::new("/v/.llm-wiki/meta/qmd"));
    assert_eq!(p.config_file(), Path::new("/v/.llm-wiki/config.json"));
  }

  #[test]
  fn spec_derives_missing_paths_and_moves_the_store_with_meta_or_qmd() {
    let spec = |meta: Option<&str>, qmd: Option<&str>| VaultPathsSpec {
      root: "/v".into(),
      meta: meta.map(Into::into),
      qmd: qmd.map(Into::into),
      ..Default::default()
    };
    assert_eq!(spec(None, None).resolve().unwrap(), VaultPaths::for_root("/v"));
    let m = spec(Some("/elsewhere/meta"), None).resolve().unwrap();
    assert_eq!(m.meta, Path::new("/elsewhere/meta"));
    assert_eq!(m.qmd_manifest, Path::new("/elsewhere/meta/qmd/manifest.json"));
    let q = spec(Some("/elsewhere/meta"), Some("/store")).resolve().unwrap();
    assert_eq!(
      (q.qmd.as_path(), q.qmd_current.as_path()),
      (Path::new("/store"), Path::new("/store/current"))
    );
    let back = VaultPathsSpec::from(&q);
    assert_eq!(back.resolve().unwrap(), q);
  }

  #[test]
  fn spec_paths_must_be_absolute_without_parent_steps() {
    for (root, raw) in [("v", None), ("", None), ("/v/../w", None), ("/v", Some("raw"))] {
      let spec = VaultPathsSpec { root: root.into(), raw: raw.map(Into::into), ..Default::default() };
      let e = spec.resolve().unwrap_err();
      assert_eq!(e.code(), "invalid_argument", "{root:?} {raw:?}");
      let field = if raw.is_some() { "paths.raw" } else { "paths.root" };
      assert!(e.to_string().starts_with(field), "{e}");
    }
  }

  #[test]
  fn legacy_layout_fields() {
    let p = VaultPaths::legacy("/v");
    assert_eq!(p.dot_wiki, Path::new("/v/.wiki"));
    assert_eq!(p.wiki, Path::new("/v/wiki"));
    assert_eq!(p.qmd, Path::new("/v/meta/qmd"));
    assert_eq!(p.config_file(), Path::new("/v/.wiki/config.json"));
  }

  #[test]
  fn for_root_picks_legacy_only_without_new_dir() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join(".wiki")).unwrap();
    assert_eq!(VaultPaths::for_root(t.path()).dot_wiki, t.path().join(".wiki"));
    std::fs::create_dir(t.path().join(".llm-wiki")).unwrap();
    assert_eq!(VaultPaths::for_root(t.path()).dot_wiki, t.path().join(".llm-wiki"));
  }
}
