//! A live index that follows a vault's edits (`watchWiki`, CLI `watch`).
//!
//! One watcher thread per watched vault receives the OS's file-system events (notify: inotify,
//! FSEvents, ReadDirectoryChangesW; or notify's `PollWatcher` — see [`Backend`]), keeps only the
//! paths page discovery would read ([`filter`]), coalesces them into debounced batches
//! ([`batch`]) and runs the lexical reindex for each batch; vectors follow in the background at
//! lowered priority once no edit is waiting, and a new edit cancels them (between embedding
//! batches, keeping the committed ones) so lexical updates never queue behind embedding.
//!
//! Faults:
//! * **Overflow** — the OS dropped events (inotify's `IN_Q_OVERFLOW`, notify's `Rescan` flag),
//!   the watcher reported an error, or our own event queue filled up: the next batch is a full
//!   scan and an `overflow` event says so. A change is never missed silently.
//! * **Busy lock** — an explicit `reindexWiki` (or another process) holds the writer lock: the
//!   batch is kept, merged with later changes and retried (100 ms doubling to 2 s); never dropped.
//! * **Vault gone** — `wiki/` deleted, moved or replaced (checked on events about it or its
//!   ancestors, and by one `stat` a second): a `vault_gone` event, the OS watch is dropped and the
//!   index is left alone (a reindex would empty it). When a directory is back at the same path
//!   the watcher re-arms (`started` with `rearmed: true`) and scans the whole vault.
//! * **No native events** (network filesystems, an exhausted inotify watch limit): `poll: true`
//!   uses notify's `PollWatcher` (one metadata walk per `poll_interval`); when the native watcher
//!   cannot be set up it is used automatically and `started` says why.

pub mod batch;
pub mod filter;
pub mod shape;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{CreateKind, EventKind, ModifyKind, RemoveKind};
use notify::{Event, RecursiveMode, Watcher as _};
use parking_lot::Mutex;

pub use batch::{Batch, Pending};
pub use filter::{classify, PathKind, Relevance};
pub use shape::{
  Backend, WatchEvent, WatchEventKind, WatchOptions, WatchSink, WatchStatus, DEFAULT_DEBOUNCE,
  DEFAULT_POLL_INTERVAL, MAX_EVENT_PATHS,
};

use crate::error::{Error, Result};
use crate::fsutil::now_iso;
use crate::store::{reindex_vault, CancelFlag, Component, IndexIssue, ReindexOptions, ReindexResult};
use crate::vault::VaultPaths;

/// OS events queued between the OS watcher and the watcher thread; a full queue is an overflow.
const QUEUE: usize = 65_536;
/// How often the watcher checks that `wiki/` is still the directory it watches.
const LIVENESS_INTERVAL: Duration = Duration::from_secs(1);
/// Retry delays after a busy lock (doubling) and after a failed reindex.
const BUSY_RETRY_FIRST: Duration = Duration::from_millis(100);
const BUSY_RETRY_MAX: Duration = Duration::from_secs(2);
const ERROR_RETRY: Duration = Duration::from_secs(10);

enum Msg {
  Fs(notify::Result<Event>),
  /// The vector phase finished (its result is in its job's slot).
  VectorsDone,
  Close,
}

/// Stops a watcher from any thread (an abort signal, an environment teardown). Cheap to clone.
#[derive(Clone)]
pub struct WatchCloser {
  closing: CancelFlag,
  tx: SyncSender<Msg>,
}

impl WatchCloser {
  /// Ask the watcher to stop: it cancels a running reindex (the last good index stays),
  /// emits `closed` and exits. Returns at once.
  pub fn close(&self) {
    self.closing.cancel();
    // A full queue still gets noticed: the thread checks the flag on every wake-up.
    let _ = self.tx.try_send(Msg::Close);
  }
}

/// A running watcher. Dropping it closes it (without waiting).
pub struct WatchHandle {
  closer: WatchCloser,
  status: Arc<Mutex<WatchStatus>>,
  thread: Option<JoinHandle<()>>,
}

impl WatchHandle {
  /// A closer for other threads.
  pub fn closer(&self) -> WatchCloser {
    self.closer.clone()
  }
  /// Current status.
  pub fn status(&self) -> WatchStatus {
    self.status.lock().clone()
  }
  /// Stop and wait for the watcher thread to exit (its `closed` event is delivered first).
  pub fn close(&mut self) {
    self.closer.close();
    if let Some(t) = self.thread.take() {
      let _ = t.join();
    }
  }
  /// True once the watcher thread has exited.
  pub fn is_closed(&self) -> bool {
    self.thread.as_ref().is_none_or(|t| t.is_finished())
  }
}

impl Drop for WatchHandle {
  fn drop(&mut self) {
    self.closer.close();
  }
}

/// Identity of the watched directory (a replaced directory is another vault).
fn dir_identity(p: &Path) -> Option<(u64, u64)> {
  let m = std::fs::metadata(p).ok().filter(|m| m.is_dir())?;
  #[cfg(unix)]
  {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
  }
  #[cfg(not(unix))]
  {
    let _ = m;
    Some((0, 0))
  }
}

/// Start watching the vault of `paths`: a catch-up reindex runs first (changes made while nothing
/// watched), then every debounced batch of page changes is indexed. Fails (`invalid_argument`)
/// when the vault has no `wiki/` directory; a vault that disappears later is reported by events.
pub fn watch_wiki(paths: &VaultPaths, opts: WatchOptions, sink: WatchSink) -> Result<WatchHandle> {
  if dir_identity(&paths.wiki).is_none() {
    return Err(Error::invalid(format!("no wiki directory to watch at {}", paths.wiki.display())));
  }
  let mut opts = opts;
  if opts.components.is_empty() {
    return Err(Error::invalid("components must contain at least one of lexical | vectors"));
  }
  opts.components.sort();
  opts.components.dedup();
  let (tx, rx) = sync_channel(QUEUE);
  let closer = WatchCloser { closing: CancelFlag::new(), tx: tx.clone() };
  let status = Arc::new(Mutex::new(WatchStatus {
    state: "indexing",
    backend: if opts.poll { Backend::Poll } else { Backend::Native },
    pending_paths: 0,
    pending_full_scan: true,
    vectors_pending: false,
    reindexes: 0,
    overflows: 0,
    last_indexed_at: None,
    last_error: None,
  }));
  let mut worker = Worker {
    paths: paths.clone(),
    opts,
    sink,
    tx,
    rx,
    dropped: Arc::new(AtomicBool::new(false)),
    closing: closer.closing.clone(),
    status: status.clone(),
    os: None,
    identity: None,
    pending: Pending::new(),
    retry_at: None,
    busy_delay: BUSY_RETRY_FIRST,
    last_error_code: None,
    vectors_due: false,
    vectors_retry_at: None,
    vector_job: None,
    queued: Vec::new(),
  };
  // Arm before the thread starts so a vault that cannot be watched at all fails the call.
  worker.arm(false)?;
  let thread = std::thread::Builder::new()
    .name("llm-wiki-watch".into())
    .spawn(move || worker.run())
    .map_err(|e| Error::io("start a watcher thread for", paths.wiki.clone(), e))?;
  Ok(WatchHandle { closer, status, thread: Some(thread) })
}

/// The OS side of a watcher (dropping it stops its events).
#[allow(dead_code)] // held only to keep its watch alive
enum OsWatcher {
  Native(notify::RecommendedWatcher),
  Poll(notify::PollWatcher),
}

struct VectorJob {
  cancel: CancelFlag,
  thread: JoinHandle<()>,
  result: Arc<Mutex<Option<ReindexResult>>>,
}

struct Worker {
  paths: VaultPaths,
  opts: WatchOptions,
  sink: WatchSink,
  tx: SyncSender<Msg>,
  rx: Receiver<Msg>,
  /// Set by the OS side when the queue was full (events lost).
  dropped: Arc<AtomicBool>,
  closing: CancelFlag,
  status: Arc<Mutex<WatchStatus>>,
  os: Option<OsWatcher>,
  identity: Option<(u64, u64)>,
  pending: Pending,
  retry_at: Option<Instant>,
  busy_delay: Duration,
  last_error_code: Option<String>,
  vectors_due: bool,
  vectors_retry_at: Option<Instant>,
  vector_job: Option<VectorJob>,
  /// Events produced before the thread started (delivered first, from the thread).
  queued: Vec<WatchEvent>,
}

/// Whether the live store holds pages (indexed or excluded) below the folder `rel` of `wiki/`:
/// how a path that is gone is known to have been a folder (false when no store is readable).
fn indexed_folder(paths: &VaultPaths, rel: &str) -> bool {
  let Ok(snapshot) = crate::retrieve::engine::open_snapshot(paths) else { return false };
  let prefix = format!("{rel}/");
  let m = &snapshot.manifest;
  m.entries.range(prefix.clone()..).next().is_some_and(|(k, _)| k.starts_with(&prefix))
    || m.excluded.range(prefix.clone()..).next().is_some_and(|(k, _)| k.starts_with(&prefix))
}

fn event_kind(kind: &EventKind) -> PathKind {
  match kind {
    EventKind::Create(CreateKind::Folder) | EventKind::Remove(RemoveKind::Folder) => PathKind::Folder,
    EventKind::Create(CreateKind::File) | EventKind::Remove(RemoveKind::File) => PathKind::File,
    EventKind::Modify(ModifyKind::Data(_)) => PathKind::File,
    _ => PathKind::Unknown,
  }
}

impl Worker {
  fn emit(&self, e: WatchEvent) {
    (self.sink)(e);
  }

  fn max_wait(&self) -> Duration {
    self.opts.max_wait.unwrap_or_else(|| (self.opts.debounce * 10).max(Duration::from_secs(1)))
  }

  /// Set up the OS watch on `wiki/` (native, else polling) and schedule a full scan.
  fn arm(&mut self, rearmed: bool) -> Result<()> {
    let tx = self.tx.clone();
    let dropped = self.dropped.clone();
    let overflow = self.opts.simulate_overflow;
    let handler = move |res: notify::Result<Event>| {
      let res = match res {
        Ok(ev) if overflow && !ev.need_rescan() => {
          Ok(Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan))
        }
        other => other,
      };
      match tx.try_send(Msg::Fs(res)) {
        Ok(()) => {}
        Err(TrySendError::Full(_)) => dropped.store(true, Ordering::SeqCst),
        Err(TrySendError::Disconnected(_)) => {}
      }
    };
    let wiki = self.paths.wiki.clone();
    let mut reason = None;
    let os = if self.opts.poll {
      OsWatcher::Poll(poll_watcher(handler, &wiki, self.opts.poll_interval)?)
    } else {
      let native = notify::recommended_watcher(handler.clone()).and_then(|mut w| {
        w.watch(&wiki, RecursiveMode::Recursive)?;
        Ok(w)
      });
      match native {
        Ok(w) => OsWatcher::Native(w),
        Err(e) => {
          reason = Some(format!(
            "native file events unavailable ({e}); polling every {:?}",
            self.opts.poll_interval
          ));
          OsWatcher::Poll(poll_watcher(handler, &wiki, self.opts.poll_interval)?)
        }
      }
    };
    let backend = match os {
      OsWatcher::Native(_) => Backend::Native,
      OsWatcher::Poll(_) => Backend::Poll,
    };
    self.os = Some(os);
    self.identity = dir_identity(&wiki);
    self.pending.full_scan(Instant::now(), true);
    {
      let mut s = self.status.lock();
      s.backend = backend;
      s.state = "indexing";
    }
    let mut ev = WatchEvent::new(WatchEventKind::Started);
    ev.backend = Some(backend);
    ev.rearmed = rearmed;
    if let Some(r) = reason {
      ev = ev.with_code("watch_polling_fallback", r);
    }
    self.queued.push(ev);
    Ok(())
  }
}

fn poll_watcher(
  handler: impl notify::EventHandler,
  wiki: &Path,
  interval: Duration,
) -> Result<notify::PollWatcher> {
  let config = notify::Config::default().with_poll_interval(interval);
  let mut w = notify::PollWatcher::new(handler, config).map_err(notify_err(wiki))?;
  w.watch(wiki, RecursiveMode::Recursive).map_err(notify_err(wiki))?;
  Ok(w)
}

fn notify_err(wiki: &Path) -> impl FnOnce(notify::Error) -> Error + '_ {
  move |e| Error::io("watch", wiki, std::io::Error::other(e.to_string()))
}

/// Lower the calling thread's CPU priority (Linux: nice +10); threads it starts inherit it.
fn lower_priority() {
  #[cfg(target_os = "linux")]
  // SAFETY: plain syscalls on the calling thread's own id.
  unsafe {
    let _ = libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
  }
}

fn is_busy(r: &ReindexResult) -> bool {
  r.errors.iter().any(|e| e.code == "qmd_index_busy")
}

fn is_cancelled(r: &ReindexResult) -> bool {
  !r.ok && r.errors.is_empty()
}

impl Worker {
  fn run(mut self) {
    for e in std::mem::take(&mut self.queued) {
      self.emit(e);
    }
    let mut next_liveness = Instant::now() + LIVENESS_INTERVAL;
    loop {
      if self.closing.is_cancelled() {
        break;
      }
      let now = Instant::now();
      let wait = self.next_wake(now).min(next_liveness.saturating_duration_since(now));
      let mut check_root = false;
      match self.rx.recv_timeout(wait) {
        Ok(m) => {
          if self.handle(m, &mut check_root) {
            break;
          }
          // Take whatever else is queued now: one wake-up per burst, not per event.
          let mut closed = false;
          while let Ok(m) = self.rx.try_recv() {
            if self.handle(m, &mut check_root) {
              closed = true;
              break;
            }
          }
          if closed {
            break;
          }
        }
        Err(RecvTimeoutError::Timeout) => {}
        Err(RecvTimeoutError::Disconnected) => break,
      }
      if self.closing.is_cancelled() {
        break;
      }
      if self.dropped.swap(false, Ordering::SeqCst) {
        self.overflow("watch_queue_full", "more file events than the watcher could queue");
      }
      let now = Instant::now();
      if check_root || now >= next_liveness {
        next_liveness = now + LIVENESS_INTERVAL;
        self.check_liveness();
      }
      if self.os.is_none() {
        continue; // gone: only liveness checks until it is back
      }
      self.poll_vectors();
      self.maybe_flush();
      self.maybe_start_vectors();
      self.publish_status();
    }
    self.stop_vectors();
    self.os = None;
    self.status.lock().state = "closed";
    self.emit(WatchEvent::new(WatchEventKind::Closed));
  }

  /// Time until something is due: a batch, a retry or the vector phase.
  fn next_wake(&self, now: Instant) -> Duration {
    let mut wait = LIVENESS_INTERVAL;
    if let Some(d) = self.pending.due_in(now, self.opts.debounce, self.max_wait()) {
      let retry = self.retry_at.map_or(Duration::ZERO, |r| r.saturating_duration_since(now));
      wait = wait.min(d.max(retry));
    } else if self.vectors_due && self.vector_job.is_none() {
      wait = wait.min(self.vectors_retry_at.map_or(Duration::ZERO, |r| r.saturating_duration_since(now)));
    }
    wait
  }

  /// Handle one message; true when the watcher must stop.
  fn handle(&mut self, m: Msg, check_root: &mut bool) -> bool {
    match m {
      Msg::Close => return true,
      Msg::VectorsDone => self.poll_vectors(),
      Msg::Fs(Err(e)) => self.overflow("watch_error", format!("the file watcher reported an error: {e}")),
      Msg::Fs(Ok(ev)) => {
        if self.os.is_none() {
          return false; // events of a dropped watch
        }
        if ev.need_rescan() {
          self.overflow("watch_overflow", "the operating system dropped file events");
          return false;
        }
        if matches!(ev.kind, EventKind::Access(_)) {
          return false;
        }
        let kind = event_kind(&ev.kind);
        let now = Instant::now();
        let mut relevant = false;
        let indexed_folder = |rel: &str| indexed_folder(&self.paths, rel);
        for p in &ev.paths {
          match classify(&self.paths.wiki, p, kind, &indexed_folder) {
            Relevance::Page(rel) => {
              self.pending.add_page(rel, now);
              relevant = true;
            }
            Relevance::Dir(rel) => {
              self.pending.add_dir(rel, now);
              relevant = true;
            }
            Relevance::Unnamed => {
              self.pending.full_scan(now, false);
              relevant = true;
            }
            Relevance::Root => *check_root = true,
            Relevance::Ignore => {}
          }
        }
        if relevant {
          // Lexical first: a running vector phase yields (between its batches).
          if let Some(job) = &self.vector_job {
            job.cancel.cancel();
          }
        }
      }
    }
    false
  }

  fn overflow(&mut self, code: &str, message: impl Into<String>) {
    self.pending.full_scan(Instant::now(), false);
    self.status.lock().overflows += 1;
    if let Some(job) = &self.vector_job {
      job.cancel.cancel();
    }
    self.emit(WatchEvent::new(WatchEventKind::Overflow).with_code(code, message));
  }

  /// `wiki/` still the directory armed? Gone → drop the watch; back → re-arm.
  fn check_liveness(&mut self) {
    let now = dir_identity(&self.paths.wiki);
    if self.os.is_some() {
      if now.is_some() && now == self.identity {
        return;
      }
      self.os = None;
      self.stop_vectors();
      self.pending.clear();
      self.retry_at = None;
      self.vectors_due = false;
      self.status.lock().state = "gone";
      self.publish_status();
      let what =
        if now.is_some() { "was replaced by another directory" } else { "is gone (deleted or moved)" };
      self.emit(WatchEvent::new(WatchEventKind::VaultGone).with_code(
        "watch_vault_gone",
        format!("{} {what}; watching for it to come back", self.paths.wiki.display()),
      ));
      // A replacement is already there: take it on at once.
      if now.is_some() {
        self.rearm();
      }
    } else if now.is_some() {
      self.rearm();
    }
  }

  fn rearm(&mut self) {
    match self.arm(true) {
      Ok(()) => {
        for e in std::mem::take(&mut self.queued) {
          self.emit(e);
        }
      }
      Err(e) => self.emit(
        WatchEvent::new(WatchEventKind::Error).with_code(e.code(), format!("cannot re-arm the watch: {e}")),
      ),
    }
  }

  fn reindex_options(&self, components: Vec<Component>, cancel: CancelFlag) -> ReindexOptions {
    ReindexOptions { components, cancel, threads: self.opts.threads, ..Default::default() }
  }

  /// The lexical reindex of one batch, restricted to the batch's paths (the reindex's
  /// `changed_paths` hint skips the whole-vault stat walk); a full-scan batch (overflow, re-arm,
  /// too many paths) walks the vault.
  fn reindex_batch(&self, batch: &Batch) -> ReindexResult {
    let mut opts = self.reindex_options(vec![Component::Lexical], self.closing.clone());
    // Batch paths are relative to wiki/; the hint takes absolute paths inside the vault root.
    opts.changed_paths =
      batch.changed_paths().map(|rel| rel.iter().map(|p| self.paths.wiki.join(p)).collect());
    reindex_vault(&self.paths, &opts)
  }

  fn maybe_flush(&mut self) {
    let now = Instant::now();
    if self.pending.due_in(now, self.opts.debounce, self.max_wait()) != Some(Duration::ZERO) {
      return;
    }
    if self.retry_at.is_some_and(|r| now < r) {
      return;
    }
    self.stop_vectors();
    let first_seen = self.pending.first_seen().unwrap_or(now);
    let batch = self.pending.take();
    self.status.lock().state = "indexing";
    self.publish_status();
    let r = self.reindex_batch(&batch);
    let done = Instant::now();
    if r.ok {
      self.retry_at = None;
      self.busy_delay = BUSY_RETRY_FIRST;
      self.last_error_code = None;
      self.vectors_due |= self.opts.components.contains(&Component::Vectors);
      self.vectors_retry_at = None;
      {
        let mut s = self.status.lock();
        s.reindexes += 1;
        s.last_indexed_at = Some(now_iso());
        s.last_error = None;
        s.state = "watching";
      }
      let mut ev = WatchEvent::new(WatchEventKind::Indexed).with_batch(&batch);
      ev.phase = Some("lexical");
      ev.ms = Some(r.elapsed_ms);
      ev.latency_ms = Some((done - first_seen).as_secs_f64() * 1000.0);
      ev.documents = Some(r.documents.clone());
      ev.generation = Some(r.generation);
      self.emit(ev);
    } else if self.closing.is_cancelled() || is_cancelled(&r) {
      self.pending.restore(batch, first_seen);
    } else {
      self.pending.restore(batch, first_seen);
      let busy = is_busy(&r);
      let delay = if busy {
        let d = self.busy_delay;
        self.busy_delay = (self.busy_delay * 2).min(BUSY_RETRY_MAX);
        d
      } else {
        ERROR_RETRY
      };
      self.retry_at = Some(Instant::now() + delay);
      let issue =
        r.errors.first().cloned().unwrap_or_else(|| IndexIssue::new("qmd_index_error", "reindex failed"));
      {
        let mut s = self.status.lock();
        s.state = "retrying";
        s.last_error = Some(issue.clone());
      }
      // A busy lock is cooperation, not an error; a failure is reported once per code.
      if !busy && self.last_error_code.as_deref() != Some(issue.code.as_str()) {
        self.last_error_code = Some(issue.code.clone());
        let mut ev = WatchEvent::new(WatchEventKind::Error).with_code(&issue.code, issue.message.clone());
        ev = ev.with_batch(self.pending.batch());
        self.emit(ev);
      }
    }
  }

  /// Vectors once no lexical change waits: their own thread at lowered priority.
  fn maybe_start_vectors(&mut self) {
    if !self.vectors_due || self.vector_job.is_some() || !self.pending.is_empty() {
      return;
    }
    if self.vectors_retry_at.is_some_and(|r| Instant::now() < r) {
      return;
    }
    let cancel = CancelFlag::new();
    let opts = self.reindex_options(vec![Component::Lexical, Component::Vectors], cancel.clone());
    let (paths, tx, closing) = (self.paths.clone(), self.tx.clone(), self.closing.clone());
    let result = Arc::new(Mutex::new(None));
    let slot = result.clone();
    let spawned = std::thread::Builder::new().name("llm-wiki-watch-vectors".into()).spawn(move || {
      lower_priority();
      if !closing.is_cancelled() {
        *slot.lock() = Some(reindex_vault(&paths, &opts));
      }
      // Only a wake-up: the result is in the slot, so a full queue loses nothing (the watcher
      // also looks at finished jobs on every wake-up).
      let _ = tx.try_send(Msg::VectorsDone);
    });
    match spawned {
      Ok(thread) => {
        self.vectors_due = false;
        self.vector_job = Some(VectorJob { cancel, thread, result });
      }
      Err(e) => {
        self.vectors_retry_at = Some(Instant::now() + ERROR_RETRY);
        self.emit(
          WatchEvent::new(WatchEventKind::Error)
            .with_code("watch_error", format!("cannot start the vector phase: {e}")),
        );
      }
    }
  }

  /// Collect a finished vector phase.
  fn poll_vectors(&mut self) {
    if self.vector_job.as_ref().is_some_and(|j| j.thread.is_finished()) {
      self.finish_vectors();
    }
  }

  /// Join the vector job and report its result.
  fn finish_vectors(&mut self) {
    let Some(job) = self.vector_job.take() else { return };
    let _ = job.thread.join();
    let result = job.result.lock().take();
    match result {
      Some(r) => self.vectors_done(r),
      None => self.vectors_due = true,
    }
  }

  fn vectors_done(&mut self, r: ReindexResult) {
    if r.ok {
      let mut ev = WatchEvent::new(WatchEventKind::Indexed);
      ev.phase = Some("vectors");
      ev.ms = Some(r.elapsed_ms);
      ev.documents = Some(r.documents.clone());
      ev.generation = Some(r.generation);
      self.emit(ev);
    } else if is_busy(&r) {
      self.vectors_due = true;
      self.vectors_retry_at = Some(Instant::now() + BUSY_RETRY_MAX);
    } else if is_cancelled(&r) {
      self.vectors_due = true; // yielded to a lexical batch; resumes after it
    } else {
      // Not retried until the next change (a missing model stays missing).
      let issue = r
        .errors
        .first()
        .cloned()
        .unwrap_or_else(|| IndexIssue::new("qmd_index_error", "vector phase failed"));
      self.emit(WatchEvent::new(WatchEventKind::Error).with_code(&issue.code, issue.message));
    }
  }

  /// Cancel a running vector phase and wait for it (it stops at its next batch boundary; the
  /// batches it committed stay).
  fn stop_vectors(&mut self) {
    if let Some(job) = &self.vector_job {
      job.cancel.cancel();
    }
    self.finish_vectors();
  }

  fn publish_status(&self) {
    let mut s = self.status.lock();
    let b = self.pending.batch();
    s.pending_paths = b.len() as u32;
    s.pending_full_scan = b.full_scan;
    s.vectors_pending = self.vectors_due || self.vector_job.is_some();
    if s.state == "indexing" && self.pending.is_empty() && self.os.is_some() {
      s.state = "watching";
    }
  }
}
