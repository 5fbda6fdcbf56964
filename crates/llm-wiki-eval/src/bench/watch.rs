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

use llm_wiki_core::watch::{watch_wiki, WatchEvent, WatchEventKind, WatchOptions};

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

  let (tx, rx) = mpsc::channel::<WatchEvent>();
  let tx = std::sync::Mutex::new(tx);
  let wopts = WatchOptions {
    components: vec![Component::Lexical],
    debounce: Duration::from_millis(opts.debounce_ms),
    ..Default::default()
  };
  let mut handle = watch_wiki(
    &paths,
    wopts,
    Arc::new(move |e| {
      if let Ok(t) = tx.lock() {
        let _ = t.send(e);
      }
    }),
  )?;
  let lexical = |e: &WatchEvent| e.kind == WatchEventKind::Indexed && e.phase == Some("lexical");
  loop {
    let e = rx.recv_timeout(Duration::from_secs(600)).map_err(|_| Error::Index("no start-up scan".into()))?;
    if lexical(&e) {
      break;
    }
  }

  // Single edits.
  let mut single = Vec::new();
  let mut missed = 0usize;
  for i in 0..opts.edits {
    let word = term(i, 'e');
    let t0 = Instant::now();
    write(
      &paths.wiki.join(format!("watch-bench/edit-{i}.md")),
      &page(&format!("Edit {i}"), &format!("note {word}")),
    )?;
    match until_found(&paths, &word, &format!("watch-bench/edit-{i}"), t0) {
      Some(ms) => single.push(ms),
      None => missed += 1,
    }
    std::thread::sleep(Duration::from_millis(300));
  }
  let single_events: Vec<WatchEvent> = rx.try_iter().filter(|e| lexical(e)).collect();
  let reindex_ms: Vec<f64> = single_events.iter().filter_map(|e| e.ms).collect();
  common.say(format!("single edits: {:?}", latency(&single)));

  // Checkout-like burst, then edits right away.
  let existing: Vec<PathBuf> = walkdir::WalkDir::new(&paths.wiki)
    .into_iter()
    .flatten()
    .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "md"))
    .map(|e| e.into_path())
    .take(opts.burst / 2)
    .collect();
  let t_burst = Instant::now();
  for (i, p) in existing.iter().enumerate() {
    write(p, &page(&format!("Rewritten {i}"), &format!("rewritten by the checkout {}", term(i, 'r'))))?;
  }
  let new_files = opts.burst - existing.len();
  for i in 0..new_files {
    write(
      &paths.wiki.join(format!("checkout/d{}/new-{i}.md", i % 50)),
      &page(&format!("New {i}"), &format!("added by the checkout {}", term(i, 'n'))),
    )?;
  }
  let burst_write_ms = ms_since(t_burst);
  let last_word = term(new_files.saturating_sub(1), 'n');
  let last_id = format!("checkout/d{}/new-{}", new_files.saturating_sub(1) % 50, new_files.saturating_sub(1));
  let mut during = Vec::new();
  // The burst's last file is awaited on its own thread while the edits are timed.
  let burst_searchable_ms = std::thread::scope(|scope| -> Result<Option<f64>> {
    let (p, w, id) = (&paths, &last_word, &last_id);
    let waiter = scope.spawn(move || if new_files > 0 { until_found(p, w, id, t_burst) } else { None });
    for i in 0..opts.edits {
      let word = term(i, 'b');
      let t0 = Instant::now();
      write(
        &paths.wiki.join(format!("watch-bench/burst-edit-{i}.md")),
        &page(&format!("Burst edit {i}"), &format!("note {word}")),
      )?;
      match until_found(&paths, &word, &format!("watch-bench/burst-edit-{i}"), t0) {
        Some(ms) => during.push(ms),
        None => missed += 1,
      }
      std::thread::sleep(Duration::from_millis(300));
    }
    Ok(waiter.join().unwrap_or(None))
  })?;
  let after_burst: Vec<WatchEvent> = rx.try_iter().filter(|e| lexical(e)).collect();
  // Batches holding burst files (the timed edits' own batches hold one `watch-bench/` path).
  let burst_events: Vec<&WatchEvent> = after_burst
    .iter()
    .filter(|e| {
      e.full_scan
        || e.path_count as usize > e.paths.len()
        || e.paths.iter().any(|p| !p.starts_with("watch-bench/"))
    })
    .collect();
  common.say(format!(
    "burst of {} files written in {burst_write_ms:.0} ms: {} lexical reindexes held burst files ({} in all); edits during: {:?}",
    opts.burst,
    burst_events.len(),
    after_burst.len(),
    latency(&during)
  ));

  // Idle.
  std::thread::sleep(Duration::from_millis(500));
  let _ = rx.try_iter().count();
  let (c0, t0) = (cpu_ms(), Instant::now());
  std::thread::sleep(Duration::from_secs_f64(opts.idle_seconds));
  let idle_cpu = c0.and_then(|c0| cpu_ms().map(|c1| c1 - c0));
  let idle_wall = ms_since(t0);
  let idle_events = rx.try_iter().filter(|e| lexical(e)).count();
  handle.close();

  let single_lat = latency(&single);
  let during_lat = latency(&during);
  let doc = json!({
    "schema": SCHEMA,
    "suite": "watch",
    "context": context,
    "pages": n,
    "seed": opts.seed,
    "debounceMs": opts.debounce_ms,
    "coldLexicalMs": r3(cold.elapsed_ms),
    "singleEdit": { "latency": single_lat, "reindexMs": latency(&reindex_ms), "samplesMs": single },
    "burst": {
      "files": opts.burst,
      "rewritten": existing.len(),
      "added": new_files,
      "writeMs": r3(burst_write_ms),
      "lexicalReindexes": burst_events.len(),
      "lexicalReindexesWithTheEdits": after_burst.len(),
      "reindexMs": burst_events.iter().filter_map(|e| e.ms).map(r3).collect::<Vec<_>>(),
      "lastFileSearchableMs": burst_searchable_ms.map(r3),
      "editsDuringDigest": { "latency": during_lat, "samplesMs": during },
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
  let json_path = dir.join(format!("watch-{n}.json"));
  write_json_file(&json_path, &doc)?;
  out.files.push(json_path);

  let mut md = String::new();
  let _ = writeln!(md, "# Watch: edit → searchable on {n} synthetic pages (seed {})\n", opts.seed);
  md.push_str(&context_markdown(&doc["context"]));
  let _ = writeln!(
    md,
    "- Watcher: lexical, debounce {} ms; cold lexical index {:.0} ms\n",
    opts.debounce_ms, cold.elapsed_ms
  );
  let _ = writeln!(md, "| case | samples | p50 ms | p95 ms | max ms |\n|---|---:|---:|---:|---:|");
  for (name, l) in [("single edit", &single_lat), ("edit while a burst is digested", &during_lat)] {
    let _ = writeln!(md, "| {name} | {} | {:.0} | {:.0} | {:.0} |", l.samples, l.p50_ms, l.p95_ms, l.max_ms);
  }
  let _ = writeln!(
    md,
    "\n- Single-edit reindex (the watcher's lexical batch): p50 {:.0} ms, p95 {:.0} ms",
    latency(&reindex_ms).p50_ms,
    latency(&reindex_ms).p95_ms
  );
  let _ = writeln!(
    md,
    "- Burst: {} files ({} rewritten, {} added) written in {:.0} ms → {} lexical reindexes held burst files \
     ({} in all with the {} timed edits' own); last burst file searchable {} after the burst began",
    opts.burst,
    existing.len(),
    new_files,
    burst_write_ms,
    burst_events.len(),
    after_burst.len(),
    opts.edits,
    burst_searchable_ms.map_or("—".to_string(), |ms| format!("{ms:.0} ms")),
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
  let md_path = dir.join(format!("watch-{n}.md"));
  write_text_file(&md_path, &md)?;
  out.files.push(md_path);
  out.markdown = md;
  Ok(out)
}
