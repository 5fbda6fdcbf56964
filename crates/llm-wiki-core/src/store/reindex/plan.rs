//! Planning a run: which store it updates (or whether it rebuilds), how chunks are counted,
//! which pages it looks at (a changed-paths hint's or a walk's) and how they pair with the
//! previous generation's records; and the run's threads and progress events.

use std::collections::{BTreeMap, HashSet};

use crate::chunk::Chunker;
use crate::models::ModelConfig;
use crate::store::generation::Generation;
use crate::store::job::{ReindexOptions, ReindexResult};
use crate::store::layout::StoreLayout;
use crate::store::manifest::Manifest;
use crate::store::{Component, IndexIssue, Progress, ReindexProgressEvent, Scope};
use crate::util::num::sat_u32;
use crate::vault::{discover_pages, PageFile, VaultPaths};

/// Send a progress event of the run (when it has a progress sink).
pub(super) fn emit(
  opts: &ReindexOptions,
  stage: &'static str,
  message: impl Into<String>,
  current: Option<u64>,
  total: Option<u64>,
) {
  if let Some(p) = &opts.progress {
    let (current, total) = (current.map(sat_u32), total.map(sat_u32));
    p(ReindexProgressEvent {
      vault: String::new(),
      progress: Progress { stage, message: message.into(), current, total },
    });
  }
}

/// The indexing threads of a run.
pub(super) fn threads(opts: &ReindexOptions) -> usize {
  if opts.threads > 0 {
    // Every caller (JS, CLI, Rust) gets the same bound: never more threads than cores.
    return crate::models::clamp_threads(opts.threads);
  }
  std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(4)
}

/// The published store a run updates (none: a full rebuild), with the run's chunker and the
/// vault's embedding model config. A forced lexical rebuild does not open it; a store whose
/// chunks were counted by another counter is rebuilt once.
pub(super) fn current_store(
  paths: &VaultPaths,
  layout: &StoreLayout,
  opts: &ReindexOptions,
  components: &[Component],
  vault_id: &str,
  res: &mut ReindexResult,
) -> (Option<Generation>, Chunker, ModelConfig) {
  let force_lexical = opts.force && !opts.removals_only && components.contains(&Component::Lexical);
  let opened = if force_lexical { None } else { open_current(layout, vault_id) };
  // The vault's embedding model (per-vault choice) decides how chunks are counted.
  let choice =
    crate::store::model_choice::choose_at_reindex(paths, layout, opened.as_ref().map(|g| &*g.manifest));
  let model_config = crate::store::model_choice::config_of(&choice);
  let chunker = run_chunker(opts, &model_config, res);
  let label = chunker.label();
  let current = match opened {
    // Chunks counted by another counter: rebuilt once, as a new store (vectors carried over, keyed
    // by chunk content); the new manifest records this counter, so the next run is incremental.
    Some(gen) if gen.manifest.chunker != label => {
      emit(opts, "mirror", format!("chunk sizes now counted by {label}: rebuilding"), None, None);
      // Not kept in the process's cache while the new store is built.
      crate::store::manifest::forget_store(&gen.dir);
      None
    }
    other => other,
  };
  (current, chunker, model_config)
}

/// The pages to look at: a changed-paths hint's (incremental runs trusting stat only), else a
/// walk of the whole vault (its diagnostics are the run's warnings).
pub(super) fn pages_to_scan(
  paths: &VaultPaths,
  opts: &ReindexOptions,
  current: Option<&Generation>,
  res: &mut ReindexResult,
) -> (Vec<PageFile>, Coverage) {
  let hinted = match (current, &opts.changed_paths) {
    (Some(gen), Some(hints)) if opts.scope == Scope::Changed => {
      match resolve_hints(paths, hints, &gen.manifest, res) {
        Hinted::Pages { files, gone } => Some((files, gone)),
        Hinted::Walk(why) => {
          emit(opts, "mirror", format!("walking the vault: {why}"), None, None);
          None
        }
      }
    }
    _ => None,
  };
  match hinted {
    Some((files, gone)) => (files, Coverage::Hinted { gone }),
    None => {
      let discovery = discover_pages(&paths.root, &paths.wiki);
      for d in &discovery.diagnostics {
        res.warnings.push(IndexIssue::new(&d.code, d.message.clone()).at(d.path.clone()));
      }
      (discovery.files, Coverage::Walk { unreadable: discovery.unreadable })
    }
  }
}

/// Each file's record in `map` (by id) and the ids of `map` no file has. Files come sorted by id
/// (discovery sorts them; a hint's come from an ordered map), so the map is read in one ordered
/// pass beside them: at 100k pages, a tree lookup per page and use plus a hash set of the ids
/// met cost more than the no-op's other work after the walk (docs/DECISIONS.md). Files not
/// `sorted` (strictly, so no id twice) are matched by lookups instead: the same answer.
pub(super) fn match_by_id<'a, V>(
  files: &[PageFile],
  sorted: bool,
  map: &'a BTreeMap<String, V>,
) -> (Vec<Option<&'a V>>, Vec<&'a String>) {
  if !sorted {
    let met: HashSet<&str> = files.iter().map(|f| f.id.as_str()).collect();
    let gone = map.keys().filter(|k| !met.contains(k.as_str())).collect();
    return (files.iter().map(|f| map.get(&f.id)).collect(), gone);
  }
  let mut found = Vec::with_capacity(files.len());
  let mut gone = Vec::new();
  let mut ids = map.iter();
  // The map's next id not yet passed (one comparison per step: string comparisons of ids with
  // long shared prefixes were most of this pass).
  let mut next = ids.next();
  for f in files {
    let mut hit = None;
    while let Some((id, v)) = next {
      match id.as_str().cmp(&f.id) {
        std::cmp::Ordering::Less => gone.push(id),
        std::cmp::Ordering::Equal => hit = Some(v),
        std::cmp::Ordering::Greater => break,
      }
      next = ids.next();
      if hit.is_some() {
        break;
      }
    }
    found.push(hit);
  }
  gone.extend(next.into_iter().chain(ids).map(|(id, _)| id));
  (found, gone)
}

/// Which pages of the previous generation a scan accounts for: every one (a walk of the vault;
/// pages not met are removed, except where the walk could not read), or only those of a
/// changed-paths hint (plus the ids it names as gone).
pub(super) enum Coverage {
  Walk { unreadable: crate::vault::discover::Unreadable },
  Hinted { gone: Vec<String> },
}

/// The live store at its last commit, if it opens cleanly and matches this engine and vault.
pub(super) fn open_current(layout: &StoreLayout, vault_id: &str) -> Option<Generation> {
  let gen = Generation::open(layout.current()?).ok()?;
  let state = gen.state.as_ref()?;
  (state.is_current_format() && gen.manifest.vault_id == vault_id).then_some(gen)
}

/// What a changed-paths hint resolves to.
enum Hinted {
  /// Look at these page files, and remove these ids (when indexed or excluded).
  Pages { files: Vec<PageFile>, gone: Vec<String> },
  /// The hint cannot be followed page by page: walk the vault.
  Walk(&'static str),
}

/// NFC form of a path string (page ids and manifest paths are NFC).
fn nfc(s: &str) -> String {
  use unicode_normalization::UnicodeNormalization;
  if s.is_ascii() {
    s.to_string()
  } else {
    s.nfc().collect()
  }
}

fn is_page_name(name: &str) -> bool {
  name.len() > 3
    && name.as_bytes()[name.len() - 3..].eq_ignore_ascii_case(b".md")
    && !name.eq_ignore_ascii_case("index.md")
    && !name.eq_ignore_ascii_case("log.md")
}

/// Resolve a changed-paths hint against the previous generation (see
/// [`ReindexOptions::changed_paths`]).
fn resolve_hints(
  paths: &VaultPaths,
  hints: &[std::path::PathBuf],
  prior: &Manifest,
  res: &mut ReindexResult,
) -> Hinted {
  use std::path::Component as C;
  let mut files: BTreeMap<String, PageFile> = BTreeMap::new();
  let mut gone: Vec<String> = Vec::new();
  for hint in hints {
    let rel = if hint.is_absolute() { hint.strip_prefix(&paths.root).ok() } else { Some(hint.as_path()) };
    let rel = rel.filter(|r| r.components().all(|c| matches!(c, C::Normal(_) | C::CurDir)));
    let Some(rel) = rel else {
      res.warnings.push(
        IndexIssue::new(
          "reindex_hint_outside_vault",
          format!("changed path {} is not inside the vault; ignored", hint.display()),
        )
        .at(hint.to_string_lossy().into_owned()),
      );
      continue;
    };
    let abs = paths.root.join(rel);
    // Not under wiki/: names no page (meta files, .obsidian/, editors' files elsewhere).
    let Ok(in_wiki) = abs.strip_prefix(&paths.wiki) else { continue };
    let parts: Vec<&str> = match in_wiki
      .components()
      .filter(|c| !matches!(c, C::CurDir))
      .map(|c| c.as_os_str().to_str())
      .collect()
    {
      Some(p) => p,
      None => return Hinted::Walk("a changed path is not valid UTF-8"),
    };
    if parts.is_empty() {
      return Hinted::Walk("the knowledge directory itself changed");
    }
    // A symlinked folder on the way is never entered by the walk: such a path names no page.
    let mut under_link = false;
    let mut at = paths.wiki.clone();
    for part in &parts[..parts.len() - 1] {
      at.push(part);
      if std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_symlink()) {
        under_link = true;
        break;
      }
    }
    let rel_path = nfc(&parts.join("/"));
    let name = parts[parts.len() - 1];
    let page_id = is_page_name(name).then(|| rel_path[..rel_path.len() - 3].to_string());
    match std::fs::symlink_metadata(&abs) {
      Ok(m) if m.is_dir() && !under_link => return Hinted::Walk("a changed path is a directory"),
      Ok(m) if m.is_file() && !under_link => {
        let Some(id) = page_id else { continue };
        let known = prior.entries.contains_key(&id) || prior.excluded.contains_key(&id);
        if !known {
          let lower = id.to_lowercase();
          let twin = prior
            .entries
            .keys()
            .chain(prior.excluded.keys())
            .any(|k| k.len() == id.len() && k.to_lowercase() == lower);
          if twin {
            return Hinted::Walk("a new page's id collides with an indexed one");
          }
        }
        let file = PageFile {
          id: id.clone(),
          rel_path,
          abs_path: abs.clone(),
          size: m.len(),
          mtime_ns: crate::vault::discover::mtime_ns(&m),
        };
        files.insert(id, file);
      }
      Ok(_) => gone.extend(page_id),
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
        gone.extend(page_id);
        // A folder that is gone takes its pages with it.
        let prefix = format!("{rel_path}/");
        for map_keys in [
          prior
            .entries
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .cloned()
            .collect::<Vec<_>>(),
          prior
            .excluded
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&prefix))
            .cloned()
            .collect(),
        ] {
          gone.extend(map_keys);
        }
      }
      Err(_) => return Hinted::Walk("a changed path cannot be inspected"),
    }
  }
  gone.retain(|id| !files.contains_key(id));
  Hinted::Pages { files: files.into_values().collect(), gone }
}

/// The chunker of a run: the configured embedding model's tokenizer counts chunk sizes (capped to
/// its window), so chunks fit the model by its own count; without a model (lexical only, or dense
/// retrieval off) the estimate does. A tokenizer that cannot be loaded falls back to the estimate
/// with a `tokenizer_unavailable` warning, never an error (the vector phase reports the model).
fn run_chunker(
  opts: &ReindexOptions,
  models: &crate::models::ModelConfig,
  res: &mut ReindexResult,
) -> Chunker {
  match crate::models::tokens::chunk_counter(models) {
    None => Chunker::estimate(opts.chunking),
    Some(Ok(t)) => Chunker { config: t.chunking(&opts.chunking), counter: t },
    Some(Err(e)) => {
      res.warnings.push(IndexIssue::new(
        "tokenizer_unavailable",
        format!("chunk sizes are estimated: the embedding model's tokenizer cannot be loaded ({e})"),
      ));
      Chunker::estimate(opts.chunking)
    }
  }
}
