//! Loading models once per process and releasing idle or stale ones: the cache of loaded
//! embedders and cross-encoders, keyed by what a load depends on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::config::{
  effective_config, resolve_embed_dir, resolve_rerank_dir, settings, ConfigChange, ModelConfig,
};
use super::embed::Embedder;
use super::manifest::ModelDir;
use super::onnx::{self, SessionConfig};
use super::rerank::CrossEncoder;
use super::runtime;
use crate::error::{Error, Result};

/// Change the settings `change` names (the others keep their values), then release the loaded
/// models that no longer match the effective settings (another directory, thread count, or
/// dense retrieval switched off). Models that still match stay loaded.
pub fn configure(change: ConfigChange) {
  change.apply_to(&mut settings().write());
  let wanted = wanted_keys(&effective_config());
  cache().retain(|key| wanted.contains(key));
}

fn session_config(c: &ModelConfig) -> Result<SessionConfig> {
  let lib = runtime::locate(c.runtime_lib.as_deref(), &c.runtime_candidates, &c.model_roots)?;
  Ok(SessionConfig { runtime_lib: lib, threads: c.threads })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
  Embed,
  Rerank,
}

/// What a loaded model depends on. The runtime library is not part of it: ONNX Runtime is
/// loaded once per process, whatever is configured later.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LoadKey {
  kind: Kind,
  dir: PathBuf,
  threads: usize,
}

/// The keys of the models the settings `c` would use.
fn wanted_keys(c: &ModelConfig) -> Vec<LoadKey> {
  let embed = resolve_embed_dir(c).map(|dir| LoadKey { kind: Kind::Embed, dir, threads: c.threads });
  let rerank = resolve_rerank_dir(c).map(|dir| LoadKey { kind: Kind::Rerank, dir, threads: c.threads });
  embed.into_iter().chain(rerank).collect()
}

#[derive(Clone)]
enum Loaded {
  Embed(Arc<Embedder>),
  Rerank(Arc<CrossEncoder>),
}

impl Loaded {
  /// True while a caller still holds the model.
  fn in_use(&self) -> bool {
    match self {
      Loaded::Embed(m) => Arc::strong_count(m) > 1,
      Loaded::Rerank(m) => Arc::strong_count(m) > 1,
    }
  }
}

/// One cache entry: the model once loaded, and a lock that only callers loading the same key
/// wait on.
struct Slot<V> {
  model: OnceLock<V>,
  loading: Mutex<()>,
  last_used: Mutex<Instant>,
}

/// Models by key. The map's lock is held only to look up or change entries, never while a model
/// loads, so `loaded`, `retain` and lookups of other keys never wait for a load.
struct Cache<K, V> {
  slots: Mutex<HashMap<K, Arc<Slot<V>>>>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Cache<K, V> {
  fn new() -> Self {
    Cache { slots: Mutex::new(HashMap::new()) }
  }

  /// The value of `key`, loading it with `load` when absent. Concurrent callers of one key load
  /// it once; a failed load is retried by the next caller.
  fn get_or_load(&self, key: K, load: impl FnOnce() -> Result<V>) -> Result<V> {
    let slot = self
      .slots
      .lock()
      .entry(key)
      .or_insert_with(|| {
        Arc::new(Slot {
          model: OnceLock::new(),
          loading: Mutex::new(()),
          last_used: Mutex::new(Instant::now()),
        })
      })
      .clone();
    let hit = |slot: &Slot<V>| {
      slot.model.get().map(|m| {
        *slot.last_used.lock() = Instant::now();
        m.clone()
      })
    };
    if let Some(m) = hit(&slot) {
      return Ok(m);
    }
    let _loading = slot.loading.lock();
    if let Some(m) = hit(&slot) {
      return Ok(m);
    }
    let m = load()?;
    *slot.last_used.lock() = Instant::now();
    Ok(slot.model.get_or_init(|| m).clone())
  }

  /// Number of loaded values (entries still loading are not counted).
  fn loaded(&self) -> usize {
    self.slots.lock().values().filter(|s| s.model.get().is_some()).count()
  }

  /// Keep only the entries whose key passes `keep`. A load in progress for a dropped key still
  /// hands its value to its caller; it is just not cached.
  fn retain(&self, keep: impl Fn(&K) -> bool) {
    self.slots.lock().retain(|k, _| keep(k));
  }

  /// Drop values unused for `idle` that nobody holds (`in_use`), and entries whose load failed.
  fn release_idle(&self, idle: Duration, in_use: impl Fn(&V) -> bool) -> usize {
    let mut map = self.slots.lock();
    let before = map.len();
    map.retain(|_, slot| {
      if Arc::strong_count(slot) > 1 {
        return true; // a caller is loading or reading it right now
      }
      match slot.model.get() {
        Some(m) => in_use(m) || slot.last_used.lock().elapsed() < idle,
        None => false,
      }
    });
    before - map.len()
  }
}

fn cache() -> &'static Cache<LoadKey, Loaded> {
  static C: OnceLock<Cache<LoadKey, Loaded>> = OnceLock::new();
  C.get_or_init(|| {
    start_reaper();
    Cache::new()
  })
}

/// A background thread that drops models idle for longer than the configured time. Native
/// threads do not keep Node's event loop alive, so this never delays process exit.
fn start_reaper() {
  let _ = std::thread::Builder::new().name("llm-wiki-model-reaper".into()).spawn(|| loop {
    std::thread::sleep(Duration::from_secs(15));
    release_idle();
  });
}

/// Drop cached models idle for longer than the configured time (and not in use).
pub fn release_idle() -> usize {
  let idle = effective_config().idle_release.unwrap_or(Duration::from_secs(300));
  cache().release_idle(idle, Loaded::in_use)
}

/// Drop the cached models loaded from `dir` (after its manifest changed in place): the next use
/// loads them again with the new manifest. A caller holding one keeps it until it lets go.
pub fn forget_loaded(dir: &Path) {
  let target = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
  cache().retain(|k| k.dir.canonicalize().unwrap_or_else(|_| k.dir.clone()) != target);
}

/// Number of models currently loaded (models still loading are not counted; never waits).
pub fn loaded_models() -> usize {
  cache().loaded()
}

/// The model of `kind` in `dir` under the settings `c`: from the cache, else loaded (outside the
/// cache's lock) and cached.
fn load_cached(kind: Kind, dir: PathBuf, c: &ModelConfig) -> Result<Loaded> {
  let key = LoadKey { kind, dir: dir.clone(), threads: c.threads };
  cache().get_or_load(key, || {
    onnx::quiet_tokenizer_threads();
    let md = ModelDir::open(&dir)?;
    let session = session_config(c)?;
    Ok(match kind {
      Kind::Embed => Loaded::Embed(Arc::new(Embedder::load(&md, &session)?)),
      Kind::Rerank => Loaded::Rerank(Arc::new(CrossEncoder::load(&md, &session)?)),
    })
  })
}

/// The embedder (loaded once, then cached). `Err` when none is configured or it cannot load.
pub fn embedder() -> Result<Arc<Embedder>> {
  embedder_with(&effective_config())
}

/// The embedder the settings `c` name (a vault's choice, see [`choice`]): loaded once, cached.
pub fn embedder_with(c: &ModelConfig) -> Result<Arc<Embedder>> {
  let dir = resolve_embed_dir(c).ok_or_else(|| {
    Error::ModelUnavailable("no embedding model configured or found in the model roots".into())
  })?;
  match load_cached(Kind::Embed, dir, c)? {
    Loaded::Embed(m) => Ok(m),
    Loaded::Rerank(_) => unreachable!("cache keys carry the model kind"),
  }
}

/// [`embedder`] with the graph documents are embedded on open ([`Embedder::prepare_documents`]):
/// for indexing, which learns before its first batch whether the model can run, and for load
/// timings that should include that graph.
pub fn document_embedder() -> Result<Arc<Embedder>> {
  document_embedder_with(&effective_config())
}

/// [`document_embedder`] for the settings `c`.
pub fn document_embedder_with(c: &ModelConfig) -> Result<Arc<Embedder>> {
  let e = embedder_with(c)?;
  e.prepare_documents()?;
  Ok(e)
}

/// The configured cross-encoder, `Ok(None)` when none is configured.
pub fn cross_encoder() -> Result<Option<Arc<CrossEncoder>>> {
  let c = effective_config();
  let Some(dir) = resolve_rerank_dir(&c) else {
    return Ok(None);
  };
  match load_cached(Kind::Rerank, dir, &c)? {
    Loaded::Rerank(m) => Ok(Some(m)),
    Loaded::Embed(_) => unreachable!("cache keys carry the model kind"),
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::models::config::*;
  use std::sync::atomic::{AtomicUsize, Ordering};
  use std::sync::mpsc;

  #[test]
  fn a_change_touches_only_the_settings_it_names() {
    let mut c = ModelConfig {
      model_roots: vec![PathBuf::from("/models")],
      embed_model: Some(PathBuf::from("/e")),
      threads: 3,
      disabled: true,
      ..Default::default()
    };
    ConfigChange { threads: Setting::Set(2), ..Default::default() }.apply_to(&mut c);
    assert_eq!(c.threads, 2);
    assert_eq!(c.model_roots, vec![PathBuf::from("/models")]);
    assert_eq!(c.embed_model, Some(PathBuf::from("/e")));
    assert!(c.disabled);
    ConfigChange { embed_model: Setting::Reset, disabled: Setting::Reset, ..Default::default() }
      .apply_to(&mut c);
    assert_eq!(c.embed_model, None);
    assert!(!c.disabled);
    assert_eq!(c.threads, 2);
    let before = c.clone();
    ConfigChange::default().apply_to(&mut c);
    assert_eq!(c, before, "an empty change changes nothing");
  }

  #[test]
  fn added_roots_follow_the_configured_ones_and_precede_the_user_cache() {
    let checkout = PathBuf::from("/checkout/.models");
    add_model_roots([checkout.clone(), checkout.clone()]);
    let roots = effective_config().model_roots;
    let at = roots.iter().position(|r| r == &checkout).expect("added root searched");
    assert_eq!(roots.iter().filter(|r| **r == checkout).count(), 1, "duplicates ignored");
    assert_eq!(roots.last(), Some(&user_model_root()), "the user cache stays last");
    assert!(at < roots.len() - 1);
    if let Some(env) = env_path("LLM_WIKI_MODELS_DIR") {
      assert!(roots.iter().position(|r| r == &env).unwrap() < at, "LLM_WIKI_MODELS_DIR first");
    }
  }

  #[test]
  fn thread_counts_are_clamped_to_the_cpus() {
    assert_eq!(clamp_threads(0), 1);
    assert_eq!(clamp_threads(usize::MAX), max_threads());
    assert_eq!(clamp_threads(u32::MAX as usize), max_threads());
    assert_eq!(clamp_threads(1), 1);
  }

  #[test]
  fn lookups_and_status_never_wait_for_a_load() {
    let cache: Arc<Cache<&'static str, u32>> = Arc::new(Cache::new());
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let c = cache.clone();
    let loader = std::thread::spawn(move || {
      c.get_or_load("slow", || {
        started_tx.send(()).unwrap();
        release_rx.recv().unwrap(); // a long ONNX load
        Ok(7)
      })
    });
    started_rx.recv().unwrap();
    // While "slow" loads: status, another key and retain all proceed.
    assert_eq!(cache.loaded(), 0);
    assert_eq!(cache.get_or_load("fast", || Ok(1)).unwrap(), 1);
    assert_eq!(cache.loaded(), 1);
    cache.retain(|_| true);
    assert_eq!(
      cache.release_idle(Duration::ZERO, |_| false),
      1,
      "the idle loaded value goes; the loading one stays"
    );
    release_tx.send(()).unwrap();
    assert_eq!(loader.join().unwrap().unwrap(), 7);
    assert_eq!(cache.loaded(), 1);
  }

  #[test]
  fn one_load_per_key_and_failures_retry() {
    let cache: Arc<Cache<u8, u32>> = Arc::new(Cache::new());
    let loads = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..8)
      .map(|_| {
        let (cache, loads) = (cache.clone(), loads.clone());
        std::thread::spawn(move || {
          cache
            .get_or_load(1, || {
              loads.fetch_add(1, Ordering::SeqCst);
              std::thread::sleep(Duration::from_millis(20));
              Ok(42)
            })
            .unwrap()
        })
      })
      .collect();
    for w in workers {
      assert_eq!(w.join().unwrap(), 42);
    }
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    assert!(cache.get_or_load(2, || Err(Error::ModelUnavailable("bad".into()))).is_err());
    assert_eq!(cache.loaded(), 1);
    assert_eq!(cache.get_or_load(2, || Ok(3)).unwrap(), 3, "a failed load is retried");
    cache.retain(|k| *k == 2);
    assert_eq!(cache.loaded(), 1);
  }
}
