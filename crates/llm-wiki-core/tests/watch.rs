//! The live index (`watch`): edits, renames, deletes and editors' atomic saves become searchable;
//! scratch files and app state cost nothing; a burst coalesces into few reindexes; and the faults —
//! OS overflow (injected), a busy writer lock, the vault deleted while watched, the polling
//! backend — never lose a change.

use std::fs;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::{lock, Component, StoreLayout};
use llm_wiki_core::testkit::{page_text, temp_vault, write_file, write_page};
use llm_wiki_core::vault::VaultPaths;
use llm_wiki_core::watch::{watch_wiki, Backend, WatchEvent, WatchEventKind, WatchHandle, WatchOptions};

/// Generous: CI is a slow, shared 2-core machine.
const WAIT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Log {
  events: Mutex<Vec<WatchEvent>>,
  cv: Condvar,
}

impl Log {
  fn count(&self, pred: impl Fn(&WatchEvent) -> bool) -> usize {
    self.events.lock().unwrap().iter().filter(|e| pred(e)).count()
  }
  /// Wait until `pred` holds for some event; panics after [`WAIT`].
  fn wait_for(&self, what: &str, pred: impl Fn(&WatchEvent) -> bool) -> WatchEvent {
    let deadline = Instant::now() + WAIT;
    let mut events = self.events.lock().unwrap();
    loop {
      if let Some(e) = events.iter().find(|e| pred(e)) {
        return e.clone();
      }
      let now = Instant::now();
      assert!(now < deadline, "timed out waiting for {what}; events: {:#?}", *events);
      events = self.cv.wait_timeout(events, deadline - now).unwrap().0;
    }
  }
}

fn lexical_opts() -> WatchOptions {
  WatchOptions {
    components: vec![Component::Lexical],
    debounce: Duration::from_millis(100),
    threads: 1,
    ..Default::default()
  }
}

fn start(p: &VaultPaths, opts: WatchOptions) -> (WatchHandle, Arc<Log>) {
  let log = Arc::new(Log::default());
  let sink = log.clone();
  let h = watch_wiki(
    p,
    opts,
    Arc::new(move |e| {
      sink.events.lock().unwrap().push(e);
      sink.cv.notify_all();
    }),
  )
  .expect("watch starts");
  // The catch-up scan at start.
  log.wait_for("the start-up scan", |e| e.kind == WatchEventKind::Indexed && e.full_scan);
  (h, log)
}

fn lexical_batches(log: &Log) -> usize {
  log.count(|e| e.kind == WatchEventKind::Indexed && e.phase == Some("lexical"))
}

/// Page ids lexical recall returns for `term`.
fn hits(p: &VaultPaths, term: &str) -> Vec<String> {
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 10 };
  match recall_wiki(p, term, &RecallOptions::new(policy, RetrievalMode::Lexical)) {
    Ok(r) => r.results.into_iter().map(|r| r.id).collect(),
    Err(_) => vec![],
  }
}

/// Wait until recall for `term` returns exactly `want`.
fn wait_hits(p: &VaultPaths, term: &str, want: &[&str]) {
  let deadline = Instant::now() + WAIT;
  loop {
    let got = hits(p, term);
    if got == want {
      return;
    }
    assert!(Instant::now() < deadline, "recall '{term}': {got:?}, expected {want:?}");
    std::thread::sleep(Duration::from_millis(50));
  }
}

#[test]
fn edits_renames_and_deletes_follow_the_files() {
  let (_t, p) = temp_vault();
  write_page(&p, "concepts/old", "Old", "an existing page about zqxvalpha");
  let (mut h, log) = start(&p, lexical_opts());
  wait_hits(&p, "zqxvalpha", &["concepts/old"]);

  write_page(&p, "concepts/new", "New", "a fresh page about zqxvbravo");
  wait_hits(&p, "zqxvbravo", &["concepts/new"]);
  let e = log.wait_for("the edit's batch", |e| e.paths.iter().any(|x| x == "concepts/new.md"));
  assert!(!e.full_scan && e.latency_ms.is_some());

  fs::rename(p.wiki.join("concepts/new.md"), p.wiki.join("concepts/renamed.md")).unwrap();
  wait_hits(&p, "zqxvbravo", &["concepts/renamed"]);

  // A folder renamed: the OS reports the folder only.
  fs::rename(p.wiki.join("concepts"), p.wiki.join("topics")).unwrap();
  wait_hits(&p, "zqxvalpha", &["topics/old"]);

  fs::remove_file(p.wiki.join("topics/old.md")).unwrap();
  wait_hits(&p, "zqxvalpha", &[]);

  h.close();
  assert!(h.is_closed());
  assert_eq!(log.count(|e| e.kind == WatchEventKind::Closed), 1);
  assert_eq!(h.status().state, "closed");
}

#[test]
fn atomic_saves_index_and_scratch_files_cost_nothing() {
  let (_t, p) = temp_vault();
  write_page(&p, "a", "A", "first version zqxvcharlie");
  // Obsidian's folder exists before (a new folder is scanned once: it could hold pages).
  fs::create_dir_all(p.wiki.join(".obsidian")).unwrap();
  let (mut h, log) = start(&p, lexical_opts());
  let before = lexical_batches(&log);

  // Editors' and apps' churn that is not a page: no reindex at all.
  write_file(&p.wiki.join(".a.md.swp"), "swap");
  write_file(&p.wiki.join("a.md~"), "backup");
  write_file(&p.wiki.join("4913"), "");
  fs::remove_file(p.wiki.join("4913")).unwrap();
  for i in 0..20 {
    write_file(&p.wiki.join(".obsidian/workspace.json"), format!("{{\"n\":{i}}}"));
  }
  write_file(&p.root.join(".obsidian/app.json"), "{}");
  std::thread::sleep(Duration::from_millis(1500));
  assert_eq!(lexical_batches(&log), before, "scratch files triggered a reindex");
  assert_eq!(h.status().pending_paths, 0);

  // Atomic save: write a temp file beside the page, rename it over the page.
  let tmp = p.wiki.join(".a.md.tmp-1234");
  write_file(&tmp, page_text("A", "second version zqxvdelta"));
  fs::rename(&tmp, p.wiki.join("a.md")).unwrap();
  wait_hits(&p, "zqxvdelta", &["a"]);
  wait_hits(&p, "zqxvcharlie", &[]);
  h.close();
}

#[test]
fn a_checkout_sized_burst_coalesces_into_few_reindexes() {
  let (_t, p) = temp_vault();
  let (mut h, log) = start(&p, lexical_opts());
  let before = lexical_batches(&log);
  const N: usize = 2_000;
  for i in 0..N {
    write_file(
      &p.wiki.join(format!("d{}/p{i}.md", i % 20)),
      page_text(&format!("P{i}"), &format!("burst page {i}")),
    );
  }
  write_page(&p, "last", "Last", "the burst's end zqxvecho");
  wait_hits(&p, "zqxvecho", &["last"]);
  // A commit is searchable a moment before its `indexed` event is emitted: wait for the events
  // to account for every page (or time out and show what came).
  let indexed_by_batches = || -> usize {
    let events = log.events.lock().unwrap();
    let done = events.iter().filter(|e| e.kind == WatchEventKind::Indexed && !e.full_scan);
    done.map(|e| e.documents.as_ref().map_or(0, |d| d.indexed as usize)).sum()
  };
  let deadline = Instant::now() + WAIT;
  while indexed_by_batches() < N + 1 && Instant::now() < deadline {
    std::thread::sleep(Duration::from_millis(20));
  }
  assert_eq!(indexed_by_batches(), N + 1);
  let batches = lexical_batches(&log) - before;
  // The writes take well under a second each way; a batch flushes at most every max_wait (1 s),
  // plus one for the tail.
  assert!((1..=10).contains(&batches), "{batches} reindexes for a burst of {N} files");
  h.close();
}

#[test]
fn an_os_overflow_falls_back_to_a_full_scan() {
  let (_t, p) = temp_vault();
  // Every OS event is replaced by an overflow notice: only the full scan can find the page.
  let (mut h, log) = start(&p, WatchOptions { simulate_overflow: true, ..lexical_opts() });
  write_page(&p, "lost", "Lost", "an event the kernel dropped zqxvfoxtrot");
  log.wait_for("an overflow", |e| {
    e.kind == WatchEventKind::Overflow && e.code.as_deref() == Some("watch_overflow")
  });
  wait_hits(&p, "zqxvfoxtrot", &["lost"]);
  let scan = log.wait_for("the fallback scan", |e| {
    e.kind == WatchEventKind::Indexed && e.full_scan && e.documents.as_ref().is_some_and(|d| d.indexed == 1)
  });
  assert_eq!(scan.path_count, 0);
  assert!(h.status().overflows >= 1);
  h.close();
}

#[test]
fn a_busy_writer_lock_delays_the_batch_without_dropping_it() {
  let (_t, p) = temp_vault();
  let (mut h, log) = start(&p, lexical_opts());
  let held = lock::acquire(&StoreLayout::new(p.retrieval())).expect("the test takes the writer lock");
  write_page(&p, "waiting", "Waiting", "written while the lock is held zqxvgolf");
  let deadline = Instant::now() + WAIT;
  while h.status().state != "retrying" {
    assert!(Instant::now() < deadline, "the watcher never retried: {:?}", h.status());
    std::thread::sleep(Duration::from_millis(20));
  }
  assert_eq!(hits(&p, "zqxvgolf"), Vec::<String>::new());
  assert_eq!(h.status().pending_paths, 1);
  assert_eq!(h.status().last_error.unwrap().code, "qmd_index_busy");
  assert_eq!(log.count(|e| e.kind == WatchEventKind::Error), 0, "busy is not an error");
  drop(held);
  wait_hits(&p, "zqxvgolf", &["waiting"]);
  h.close();
}

#[test]
fn a_deleted_vault_is_reported_and_rearmed_when_it_comes_back() {
  let (_t, p) = temp_vault();
  write_page(&p, "kept", "Kept", "indexed before zqxvhotel");
  let (mut h, log) = start(&p, lexical_opts());
  wait_hits(&p, "zqxvhotel", &["kept"]);
  fs::remove_dir_all(&p.wiki).unwrap();
  log.wait_for("vault_gone", |e| e.kind == WatchEventKind::VaultGone);
  assert_eq!(h.status().state, "gone");
  // The index is left alone while the vault is gone.
  std::thread::sleep(Duration::from_millis(500));
  assert_eq!(hits(&p, "zqxvhotel"), vec!["kept".to_string()]);

  write_page(&p, "back", "Back", "the vault came back zqxvindia");
  log.wait_for("the re-arm", |e| e.kind == WatchEventKind::Started && e.rearmed);
  wait_hits(&p, "zqxvindia", &["back"]);
  wait_hits(&p, "zqxvhotel", &[]);
  // Watching again: a later edit is seen.
  write_page(&p, "later", "Later", "after the re-arm zqxvjuliet");
  wait_hits(&p, "zqxvjuliet", &["later"]);
  h.close();
}

#[test]
fn the_polling_backend_sees_edits() {
  let (_t, p) = temp_vault();
  let opts = WatchOptions { poll: true, poll_interval: Duration::from_millis(200), ..lexical_opts() };
  let (mut h, log) = start(&p, opts);
  let started = log.wait_for("started", |e| e.kind == WatchEventKind::Started);
  assert_eq!(started.backend, Some(Backend::Poll));
  write_page(&p, "polled", "Polled", "seen by polling zqxvkilo");
  wait_hits(&p, "zqxvkilo", &["polled"]);
  h.close();
}

#[test]
fn watching_a_vault_without_a_wiki_directory_fails() {
  let t = tempfile::tempdir().unwrap();
  let p = VaultPaths::new_layout(t.path().join("none"));
  let err = watch_wiki(&p, lexical_opts(), Arc::new(|_| {})).err().expect("no wiki directory");
  assert_eq!(err.code(), "invalid_argument");
}

/// A folder moved out of `wiki/` (Move to Trash) arrives as a rename of a path that no longer
/// exists. Whatever its name — a dot in it, a scratch-like suffix — it is a folder when the store
/// indexed pages under it, and its pages leave recall.
#[test]
fn folders_moved_out_with_dotted_or_scratch_names_take_their_pages_along() {
  let (t, p) = temp_vault();
  let names = ["release-1.2", "2024.05", "x.bak", "notes.tmp"];
  for (i, dir) in names.iter().enumerate() {
    write_page(&p, &format!("{dir}/page"), "Page", &format!("a page about zqxvfolder{i}"));
  }
  let (mut h, _log) = start(&p, lexical_opts());
  for (i, dir) in names.iter().enumerate() {
    let term = format!("zqxvfolder{i}");
    wait_hits(&p, &term, &[&format!("{dir}/page")]);
  }
  let trash = t.path().join("trash");
  fs::create_dir_all(&trash).unwrap();
  for (i, dir) in names.iter().enumerate() {
    fs::rename(p.wiki.join(dir), trash.join(dir)).unwrap();
    wait_hits(&p, &format!("zqxvfolder{i}"), &[]);
  }
  h.close();
}
