//! Watch suite (`bench watch`): how fast an edit becomes searchable with a watcher running
//! (`llm_wiki_core::watch`), alone and while the watcher digests a checkout-sized burst, and what
//! an idle watcher costs. On a deterministic synthetic vault (the scale suite's generator).
//!
//! * **Edit → searchable**: a new page with a unique made-up term is written; the clock runs
//!   from the write until a lexical recall (polled every 5 ms) returns the page. Edits are 300 ms
//!   apart, so each is its own batch.
//! * **Burst**: `burst` files written as fast as possible (half rewrites of existing pages, half
//!   new pages, like a branch checkout), then `edits` edits right away; reported: the lexical
//!   reindexes the burst took (coalescing), the time until the burst's last file is searchable,
//!   and the edit latencies while the watcher digests the burst.
//! * **Idle**: the process's CPU time (user + system, /proc/self/stat) over `idle_seconds` with
//!   the watcher running and nothing changing.

use std::sync::mpsc;

use llm_wiki_core::watch::{watch_wiki, WatchEvent, WatchEventKind, WatchHandle, WatchOptions};

use super::*;

/// Options of [`run_watch`].
#[derive(Clone)]
pub struct WatchBenchOptions {
  /// Pages of the synthetic vault.
  pub pages: usize,
  /// Single edits timed (and edits timed after the burst).
  pub edits: usize,
  /// Files written by the checkout-like burst.
  pub burst: usize,
  /// Seconds of idle watching whose CPU time is measured.
  pub idle_seconds: f64,
  /// The watcher's debounce.
  pub debounce_ms: u64,
  pub seed: u64,
  pub common: BenchCommon,
}

/// A made-up word per (i, salt): letters only, no English word.
fn term(i: usize, salt: char) -> String {
  let letters: String = i.to_string().bytes().map(|d| (b'b' + (d - b'0')) as char).collect();
  format!("zqw{salt}{letters}vor")
}

fn page(title: &str, body: &str) -> String {
  format!("---\ntype: concept\ntitle: {title}\n---\n# {title}\n\n{body}\n")
}

fn found(paths: &VaultPaths, query: &str, id: &str) -> bool {
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 10 };
  recall_wiki(paths, query, &RecallOptions::new(policy, RetrievalMode::Lexical))
    .map(|r| r.results.iter().any(|x| x.id == id))
    .unwrap_or(false)
}

/// Poll recall until `id` answers `query`; the time since `t0` in ms (`None` after 60 s).
fn until_found(paths: &VaultPaths, query: &str, id: &str, t0: Instant) -> Option<f64> {
  while t0.elapsed() < Duration::from_secs(60) {
    if found(paths, query, id) {
      return Some(ms_since(t0));
    }
    std::thread::sleep(Duration::from_millis(5));
  }
  None
}

/// User + system CPU time of this process in ms (Linux), `None` elsewhere.
fn cpu_ms() -> Option<f64> {
  cpu_times_ms().map(|(user, sys)| user + sys)
}

fn write(path: &Path, text: &str) -> Result<()> {
  if let Some(d) = path.parent() {
    create_dir(d)?;
  }
  std::fs::write(path, text).map_err(|e| Error::io("write", path, e))
}

/// Write the page `watch-bench/<name>.md` (titled `title`, its body naming `word`), wait until
/// recall finds it, then pause 300 ms (so that the next edit is its own batch): the ms from the
/// write until it was found (`None` after 60 s).
fn timed_edit(paths: &VaultPaths, name: &str, title: &str, word: &str) -> Result<Option<f64>> {
  let t0 = Instant::now();
  write(&paths.wiki.join(format!("watch-bench/{name}.md")), &page(title, &format!("note {word}")))?;
  let ms = until_found(paths, word, &format!("watch-bench/{name}"), t0);
  std::thread::sleep(Duration::from_millis(300));
  Ok(ms)
}

/// A lexical watcher on the vault and its events; returns once its start-up scan is indexed.
fn start_watcher(paths: &VaultPaths, debounce_ms: u64) -> Result<(WatchHandle, mpsc::Receiver<WatchEvent>)> {
  let (tx, rx) = mpsc::channel::<WatchEvent>();
  let tx = std::sync::Mutex::new(tx);
  let wopts = WatchOptions {
    components: vec![Component::Lexical],
    debounce: Duration::from_millis(debounce_ms),
    ..Default::default()
  };
  let handle = watch_wiki(
    paths,
    wopts,
    Arc::new(move |e| {
      if let Ok(t) = tx.lock() {
        let _ = t.send(e);
      }
    }),
  )?;
  loop {
    let e = rx.recv_timeout(Duration::from_secs(600)).map_err(|_| Error::Index("no start-up scan".into()))?;
    if lexical(&e) {
      break;
    }
  }
  Ok((handle, rx))
}

/// A lexical reindex of the watcher.
fn lexical(e: &WatchEvent) -> bool {
  e.kind == WatchEventKind::Indexed && e.phase == Some("lexical")
}

/// What the single edits measured.
struct SingleEdits {
  /// Edit → searchable, ms.
  samples: Vec<f64>,
  /// The watcher's lexical reindexes, ms.
  reindex_ms: Vec<f64>,
}

/// `edits` edits, each its own batch; counts the edits never found in `missed`.
fn single_edits(
  paths: &VaultPaths,
  edits: usize,
  rx: &mpsc::Receiver<WatchEvent>,
  missed: &mut usize,
) -> Result<SingleEdits> {
  let mut samples = Vec::new();
  for i in 0..edits {
    match timed_edit(paths, &format!("edit-{i}"), &format!("Edit {i}"), &term(i, 'e'))? {
      Some(ms) => samples.push(ms),
      None => *missed += 1,
    }
  }
  let reindex_ms: Vec<f64> = rx.try_iter().filter(lexical).filter_map(|e| e.ms).collect();
  Ok(SingleEdits { samples, reindex_ms })
}

/// What the checkout-like burst measured.
struct Burst {
  rewritten: usize,
  added: usize,
  write_ms: f64,
  /// When the burst's last new file became searchable (ms after the burst began).
  searchable_ms: Option<f64>,
  /// Edit → searchable of the edits timed while the burst is digested, ms.
  during: Vec<f64>,
  /// The lexical reindexes after the burst began, and the ms of those that held burst files.
  reindexes: usize,
  burst_reindex_ms: Vec<f64>,
  burst_reindexes: usize,
}

/// Write the burst's files: half rewrites of existing pages, half new pages (like a branch
/// checkout). Returns the number rewritten and added.
fn write_burst(paths: &VaultPaths, burst: usize) -> Result<(usize, usize)> {
  let existing: Vec<PathBuf> = walkdir::WalkDir::new(&paths.wiki)
    .into_iter()
    .flatten()
    .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "md"))
    .map(|e| e.into_path())
    .take(burst / 2)
    .collect();
  for (i, p) in existing.iter().enumerate() {
    write(p, &page(&format!("Rewritten {i}"), &format!("rewritten by the checkout {}", term(i, 'r'))))?;
  }
  let new_files = burst - existing.len();
  for i in 0..new_files {
    write(
      &paths.wiki.join(format!("checkout/d{}/new-{i}.md", i % 50)),
      &page(&format!("New {i}"), &format!("added by the checkout {}", term(i, 'n'))),
    )?;
  }
  Ok((existing.len(), new_files))
}

/// The burst, then `edits` edits timed right away while the burst's last file is awaited on its
/// own thread; counts the edits never found in `missed`.
fn burst_and_edits(
  paths: &VaultPaths,
  opts: &WatchBenchOptions,
  rx: &mpsc::Receiver<WatchEvent>,
  missed: &mut usize,
) -> Result<Burst> {
  let t_burst = Instant::now();
  let (rewritten, added) = write_burst(paths, opts.burst)?;
  let write_ms = ms_since(t_burst);
  let last = added.saturating_sub(1);
  let (last_word, last_id) = (term(last, 'n'), format!("checkout/d{}/new-{last}", last % 50));
  let mut during = Vec::new();
  let searchable_ms = std::thread::scope(|scope| -> Result<Option<f64>> {
    let (w, id) = (&last_word, &last_id);
    let waiter = scope.spawn(move || if added > 0 { until_found(paths, w, id, t_burst) } else { None });
    for i in 0..opts.edits {
      match timed_edit(paths, &format!("burst-edit-{i}"), &format!("Burst edit {i}"), &term(i, 'b'))? {
        Some(ms) => during.push(ms),
        None => *missed += 1,
      }
    }
    Ok(waiter.join().unwrap_or(None))
  })?;
  let after_burst: Vec<WatchEvent> = rx.try_iter().filter(lexical).collect();
  // Batches holding burst files (the timed edits' own batches hold one `watch-bench/` path).
  let burst_events: Vec<&WatchEvent> = after_burst
    .iter()
    .filter(|e| {
      e.full_scan
        || e.path_count as usize > e.paths.len()
        || e.paths.iter().any(|p| !p.starts_with("watch-bench/"))
    })
    .collect();
  Ok(Burst {
    rewritten,
    added,
    write_ms,
    searchable_ms,
    during,
    reindexes: after_burst.len(),
    burst_reindex_ms: burst_events.iter().filter_map(|e| e.ms).map(r3).collect(),
    burst_reindexes: burst_events.len(),
  })
}

/// The idle watcher's cost: wall ms, CPU ms of the process, reindexes.
fn idle(seconds: f64, rx: &mpsc::Receiver<WatchEvent>) -> (f64, Option<f64>, usize) {
  std::thread::sleep(Duration::from_millis(500));
  let _ = rx.try_iter().count();
  let (c0, t0) = (cpu_ms(), Instant::now());
  std::thread::sleep(Duration::from_secs_f64(seconds));
  let idle_cpu = c0.and_then(|c0| cpu_ms().map(|c1| c1 - c0));
  let idle_wall = ms_since(t0);
  let idle_events = rx.try_iter().filter(lexical).count();
  (idle_wall, idle_cpu, idle_events)
}

/// Run the watch benchmark (see the module docs).
pub fn run_watch(opts: &WatchBenchOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  if opts.pages == 0 || opts.edits == 0 {
    return Err(Error::invalid("--pages and --edits must be at least 1"));
  }
  let context = machine_context();
  let n = opts.pages;
  let tmp = common.temp(&format!("watch-{n}"))?;
  let synth = SynthOptions::new(n, opts.seed);
  common.say(format!("generating a synthetic vault of {n} pages (seed {})", opts.seed));
  generate_vault(tmp.path(), &synth)?;
  let paths = VaultPaths::for_root(tmp.path());
  let cold =
    reindex_vault(&paths, &ReindexOptions { components: vec![Component::Lexical], ..Default::default() });
  if !cold.ok {
    return Err(Error::Index(format!("cold index failed: {:?}", cold.errors)));
  }
  common.say(format!("cold lexical index: {:.0} ms", cold.elapsed_ms));
  let (mut handle, rx) = start_watcher(&paths, opts.debounce_ms)?;
  let mut missed = 0usize;
  let single = single_edits(&paths, opts.edits, &rx, &mut missed)?;
  common.say(format!("single edits: {:?}", latency(&single.samples)));
  let burst = burst_and_edits(&paths, opts, &rx, &mut missed)?;
  common.say(format!(
    "burst of {} files written in {:.0} ms: {} lexical reindexes held burst files ({} in all); edits during: {:?}",
    opts.burst,
    burst.write_ms,
    burst.burst_reindexes,
    burst.reindexes,
    latency(&burst.during)
  ));
  let (idle_wall, idle_cpu, idle_events) = idle(opts.idle_seconds, &rx);
  handle.close();
  let doc = json!({
    "schema": SCHEMA,
    "suite": "watch",
    "context": context,
    "pages": n,
    "seed": opts.seed,
    "debounceMs": opts.debounce_ms,
    "coldLexicalMs": r3(cold.elapsed_ms),
    "singleEdit": { "latency": latency(&single.samples), "reindexMs": latency(&single.reindex_ms), "samplesMs": single.samples },
    "burst": {
      "files": opts.burst,
      "rewritten": burst.rewritten,
      "added": burst.added,
      "writeMs": r3(burst.write_ms),
      "lexicalReindexes": burst.burst_reindexes,
      "lexicalReindexesWithTheEdits": burst.reindexes,
      "reindexMs": burst.burst_reindex_ms,
      "lastFileSearchableMs": burst.searchable_ms.map(r3),
      "editsDuringDigest": { "latency": latency(&burst.during), "samplesMs": burst.during },
    },
    "idle": { "seconds": opts.idle_seconds, "wallMs": r3(idle_wall), "cpuMs": idle_cpu, "reindexes": idle_events },
    "missedEdits": missed,
    "method": "edit → searchable: from the page write to the first lexical recall (polled every 5 ms) that \
      returns it; nearest-rank percentiles. Idle CPU: utime + stime of the whole bench process from \
      /proc/self/stat (10 ms ticks).",
  });
  let dir = common.out.join("watch");
  create_dir(&dir)?;
  let mut out = BenchOutput::default();
  record_json(&mut out, dir.join(format!("watch-{n}.json")), &doc)?;
  let md =
    watch_markdown(opts, &doc, cold.elapsed_ms, &single, &burst, (idle_wall, idle_cpu, idle_events), missed);
  record_markdown(&mut out, dir.join(format!("watch-{n}.md")), md)?;
  Ok(out)
}

/// `watch/watch-<n>.md`.
fn watch_markdown(
  opts: &WatchBenchOptions,
  doc: &Value,
  cold_ms: f64,
  single: &SingleEdits,
  burst: &Burst,
  (idle_wall, idle_cpu, idle_events): (f64, Option<f64>, usize),
  missed: usize,
) -> String {
  let mut md = String::new();
  let _ = writeln!(md, "# Watch: edit → searchable on {} synthetic pages (seed {})\n", opts.pages, opts.seed);
  md.push_str(&context_markdown(&doc["context"]));
  let _ = writeln!(
    md,
    "- Watcher: lexical, debounce {} ms; cold lexical index {:.0} ms\n",
    opts.debounce_ms, cold_ms
  );
  let _ = writeln!(md, "| case | samples | p50 ms | p95 ms | max ms |\n|---|---:|---:|---:|---:|");
  let (single_lat, during_lat) = (latency(&single.samples), latency(&burst.during));
  for (name, l) in [("single edit", &single_lat), ("edit while a burst is digested", &during_lat)] {
    let _ = writeln!(md, "| {name} | {} | {:.0} | {:.0} | {:.0} |", l.samples, l.p50_ms, l.p95_ms, l.max_ms);
  }
  let _ = writeln!(
    md,
    "\n- Single-edit reindex (the watcher's lexical batch): p50 {:.0} ms, p95 {:.0} ms",
    latency(&single.reindex_ms).p50_ms,
    latency(&single.reindex_ms).p95_ms
  );
  let _ = writeln!(
    md,
    "- Burst: {} files ({} rewritten, {} added) written in {:.0} ms → {} lexical reindexes held burst files \
     ({} in all with the {} timed edits' own); last burst file searchable {} after the burst began",
    opts.burst,
    burst.rewritten,
    burst.added,
    burst.write_ms,
    burst.burst_reindexes,
    burst.reindexes,
    opts.edits,
    burst.searchable_ms.map_or("—".to_string(), |ms| format!("{ms:.0} ms")),
  );
  let _ = writeln!(
    md,
    "- Idle watcher: {} CPU ms over {:.0} s, {} reindexes",
    idle_cpu.map_or("n/a".to_string(), |c| format!("{c:.0}")),
    idle_wall / 1000.0,
    idle_events
  );
  if missed > 0 {
    let _ = writeln!(md, "- **{missed} edits were not searchable within 60 s**");
  }
  md
}
