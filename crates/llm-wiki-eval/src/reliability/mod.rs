//! Reliability harnesses behind `llm-wiki-retrieval reliability ...` (docs/RELIABILITY.md):
//!
//! * [`crash::run_crash`]: SIGKILLs a child `index` at random moments of the lexical and the
//!   vector phase of forced and incremental runs, and checks after every kill that status is
//!   sane, the next reindex succeeds, no page is lost and recall answers.
//! * [`events::run_events`]: the "1 GB events file" fault — rebuild and compaction of a huge
//!   `meta/events.jsonl` as child processes, their peak RSS, nothing lost, projection unchanged.
//! * [`soak::run_soak`]: two processes reindexing (incremental with edits / forced) and recalling
//!   the same vault for minutes, counting failures, empty answers and lock-busy results.
//!
//! Both work on a copy of a real vault (a BEIR-style directory such as SciFact, or a vault root)
//! in a temporary directory, drive the real CLI binary as child processes, take every random
//! choice from one seed, and write a Markdown report plus its JSON.

pub mod crash;
pub mod events;
pub mod soak;
pub mod soak_mixed;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::bench::{prepare_beir_vault, prepare_pi_vault, TempDir};
use super::synth::Rng;
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::store::generation::Generation;
use llm_wiki_core::store::StoreLayout;
use llm_wiki_core::util::hash::sha256_hex;
use llm_wiki_core::vault::{discover_pages, VaultPaths};

/// Settings shared by the harnesses.
#[derive(Debug, Clone)]
pub struct HarnessOptions {
  /// BEIR-style directory (e.g. SciFact) or a vault root.
  pub source: PathBuf,
  /// Pages kept from the source (0 = all).
  pub pages: usize,
  pub seed: u64,
  /// Pages revised before every (incremental) run.
  pub edits: usize,
  /// The CLI binary to run as children (default: this executable).
  pub bin: Option<PathBuf>,
  /// Markdown report (its JSON goes next to it).
  pub out: PathBuf,
  pub temp_root: Option<PathBuf>,
  pub keep_temp: bool,
}

/// A harness's copy of the source vault.
pub struct HarnessVault {
  /// Removed on drop unless kept.
  pub temp: TempDir,
  pub paths: VaultPaths,
  /// Page ids in id order at the start.
  pub ids: Vec<String>,
}

/// Copy `source` (a BEIR-style directory with `vault/`, or a vault root with `.llm-wiki/`) into a
/// temporary directory, keeping the first `pages` pages in id order (0 = all).
pub fn prepare_vault(
  source: &Path,
  pages: usize,
  temp_root: Option<&Path>,
  label: &str,
  keep: bool,
) -> Result<HarnessVault> {
  let root = temp_root.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
  let temp = TempDir::create(&root, label, keep)?;
  let vault_root = temp.path().join("vault");
  let (paths, _) = if source.join("vault").is_dir() && !source.join(".llm-wiki").exists() {
    prepare_beir_vault(source, &vault_root)?
  } else {
    prepare_pi_vault(source, &vault_root)?
  };
  let mut files = discover_pages(&paths.root, &paths.wiki).files;
  if pages > 0 && files.len() > pages {
    for f in files.drain(pages..) {
      std::fs::remove_file(&f.abs_path).map_err(|e| Error::io("remove", &f.abs_path, e))?;
    }
  }
  if files.is_empty() {
    return Err(Error::invalid(format!("{} holds no pages", source.display())));
  }
  let ids = files.into_iter().map(|f| f.id).collect();
  Ok(HarnessVault { temp, paths, ids })
}

/// The CLI binary to run as a child: `bin`, else this executable when it is the CLI.
pub fn resolve_bin(bin: Option<&Path>) -> Result<PathBuf> {
  if let Some(b) = bin {
    return Ok(b.to_path_buf());
  }
  let exe = std::env::current_exe().map_err(|e| Error::io("locate", "current executable", e))?;
  let is_cli = exe.file_stem().is_some_and(|s| s.to_string_lossy().starts_with("llm-wiki-retrieval"));
  if !is_cli {
    return Err(Error::invalid(format!(
      "{} is not the llm-wiki-retrieval binary; pass --bin <path to llm-wiki-retrieval>",
      exe.display()
    )));
  }
  Ok(exe)
}

/// Fail early when the vector phase could not run (it needs an embedding model).
pub fn require_embedder() -> Result<String> {
  let c = llm_wiki_core::models::effective_config();
  llm_wiki_core::models::embed_model_id(&c).ok_or_else(|| {
    Error::ModelUnavailable(
      "the vector phase needs an embedding model: run scripts/fetch_models.py (it builds the checkout's .models/, which this binary searches) or set LLM_WIKI_MODELS_DIR"
        .into(),
    )
  })
}

/// Arguments of a child `index` run.
pub fn index_command(bin: &Path, paths: &VaultPaths, force: bool) -> Command {
  let mut cmd = Command::new(bin);
  cmd.arg("index").arg(&paths.root).arg("--json").arg("--progress-events");
  if force {
    cmd.arg("--force");
  }
  cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
  cmd
}

/// A progress event of a child, as seen by the harness.
#[derive(Debug, Clone)]
pub struct Seen {
  pub at: Duration,
  pub stage: String,
}

/// A running child `index` with its progress events collected in the background.
pub struct RunningIndex {
  pub child: Child,
  pub started: Instant,
  pub events: Arc<Mutex<Vec<Seen>>>,
  pub stderr_lines: Arc<Mutex<Vec<String>>>,
  stdout: Option<std::thread::JoinHandle<String>>,
  stderr: Option<std::thread::JoinHandle<()>>,
}

/// How a child run ended.
#[derive(Debug, Clone)]
pub struct Finished {
  pub success: bool,
  /// Killed by the harness's timeout.
  pub timed_out: bool,
  pub elapsed: Duration,
  pub stdout: String,
  pub stderr: String,
}

impl RunningIndex {
  /// Spawn `cmd` (stdout and stderr piped).
  pub fn spawn(mut cmd: Command) -> Result<Self> {
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| Error::io("spawn", format!("{cmd:?}"), e))?;
    let events: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let stderr_lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let out = child.stdout.take();
    let err = child.stderr.take();
    let stdout = out.map(|mut o| {
      std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut o, &mut s);
        s
      })
    });
    let (ev, lines) = (events.clone(), stderr_lines.clone());
    let stderr = err.map(|e| {
      std::thread::spawn(move || {
        for line in BufReader::new(e).lines().map_while(|l| l.ok()) {
          let stage = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v.get("stage").and_then(|s| s.as_str()).map(str::to_string));
          match stage {
            Some(stage) => {
              ev.lock().unwrap_or_else(|p| p.into_inner()).push(Seen { at: started.elapsed(), stage })
            }
            None => lines.lock().unwrap_or_else(|p| p.into_inner()).push(line),
          }
        }
      })
    });
    Ok(RunningIndex { child, started, events, stderr_lines, stdout, stderr })
  }

  /// Time of the first event of `stage`, if seen.
  pub fn first(&self, stage: &str) -> Option<Duration> {
    self.events.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|e| e.stage == stage).map(|e| e.at)
  }

  /// Stage of the latest event ("startup" before the first).
  pub fn last_stage(&self) -> String {
    self
      .events
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .last()
      .map(|e| e.stage.clone())
      .unwrap_or_else(|| "startup".into())
  }

  /// True once the child has exited.
  pub fn exited(&mut self) -> bool {
    matches!(self.child.try_wait(), Ok(Some(_)))
  }

  /// SIGKILL (Unix) / TerminateProcess (Windows). False when it had already exited.
  pub fn kill(&mut self) -> bool {
    if self.exited() {
      return false;
    }
    self.child.kill().is_ok()
  }

  /// Wait for the exit (killing the child after `timeout`) and collect its output.
  pub fn finish(mut self, timeout: Duration) -> Finished {
    let mut timed_out = false;
    let status = loop {
      match self.child.try_wait() {
        Ok(Some(s)) => break Some(s),
        Ok(None) if self.started.elapsed() > timeout => {
          timed_out = true;
          let _ = self.child.kill();
          break self.child.wait().ok();
        }
        Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        Err(_) => break None,
      }
    };
    let elapsed = self.started.elapsed();
    let stdout = self.stdout.take().and_then(|h| h.join().ok()).unwrap_or_default();
    if let Some(h) = self.stderr.take() {
      let _ = h.join();
    }
    let stderr = self.stderr_lines.lock().unwrap_or_else(|p| p.into_inner()).join("\n");
    Finished {
      success: status.is_some_and(|s| s.success()) && !timed_out,
      timed_out,
      elapsed,
      stdout,
      stderr,
    }
  }
}

/// Sleep until `deadline` (relative to `started`), returning early when `stop` says so.
pub fn sleep_until(started: Instant, deadline: Duration, mut stop: impl FnMut() -> bool) {
  while started.elapsed() < deadline {
    if stop() {
      return;
    }
    std::thread::sleep(Duration::from_millis(1));
  }
}

/// Outcome of a recall check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RecallCheck {
  /// The expected page is at this 1-based rank.
  Hit(usize),
  /// Results, but not the expected page.
  Miss,
  /// No result at all (the diagnostic codes say why).
  Empty(Vec<String>),
  /// recall_wiki returned an error with this code.
  Error(String),
}

impl RecallCheck {
  pub fn label(&self) -> String {
    match self {
      RecallCheck::Hit(r) => format!("hit@{r}"),
      RecallCheck::Miss => "miss".into(),
      RecallCheck::Empty(codes) if codes.is_empty() => "empty".into(),
      RecallCheck::Empty(codes) => format!("empty ({})", codes.join(",")),
      RecallCheck::Error(code) => format!("error {code}"),
    }
  }
}

/// Recall `query` (floor 0, 10 results, active vault only) and look for `expect`.
pub fn recall_check(
  paths: &VaultPaths,
  query: &str,
  expect: &str,
  mode: llm_wiki_core::retrieve::RetrievalMode,
) -> RecallCheck {
  let policy = llm_wiki_core::retrieve::RecallPolicy {
    include_personal: false,
    min_score: 0.0,
    max_per_vault: 10,
    max_results: 10,
  };
  match llm_wiki_core::retrieve::recall_wiki(
    paths,
    query,
    &llm_wiki_core::retrieve::RecallOptions::new(policy, mode),
  ) {
    Err(e) => RecallCheck::Error(e.code().to_string()),
    Ok(r) if r.results.is_empty() => RecallCheck::Empty(r.diagnostics.into_iter().map(|d| d.code).collect()),
    Ok(r) => match r.results.iter().position(|x| x.id == expect) {
      Some(i) => RecallCheck::Hit(i + 1),
      None => RecallCheck::Miss,
    },
  }
}

/// Indexed pages compared with the pages on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PageSetCheck {
  pub on_disk: usize,
  pub indexed: usize,
  /// On disk, not in the index.
  pub lost: Vec<String>,
  /// Indexed with another content hash than the file's.
  pub stale: Vec<String>,
  /// In the index, no longer on disk.
  pub ghosts: Vec<String>,
  /// The current generation could not be opened.
  pub unreadable: Option<String>,
}

impl PageSetCheck {
  pub fn ok(&self) -> bool {
    self.lost.is_empty() && self.stale.is_empty() && self.ghosts.is_empty() && self.unreadable.is_none()
  }

  pub fn summary(&self) -> String {
    if let Some(e) = &self.unreadable {
      return format!("index unreadable: {e}");
    }
    let few = |v: &[String]| v.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    format!(
      "{} on disk, {} indexed; lost {} [{}], stale {} [{}], ghosts {} [{}]",
      self.on_disk,
      self.indexed,
      self.lost.len(),
      few(&self.lost),
      self.stale.len(),
      few(&self.stale),
      self.ghosts.len(),
      few(&self.ghosts)
    )
  }
}

/// Compare the committed generation's manifest with the page files (ids and sha256).
pub fn check_page_set(paths: &VaultPaths) -> PageSetCheck {
  let mut check = PageSetCheck::default();
  let disk: BTreeMap<String, String> = discover_pages(&paths.root, &paths.wiki)
    .files
    .into_iter()
    .filter_map(|f| std::fs::read(&f.abs_path).ok().map(|b| (f.id, sha256_hex(&b))))
    .collect();
  check.on_disk = disk.len();
  let generation = match Generation::open_live(&StoreLayout::new(paths.retrieval())) {
    Ok(g) => g,
    Err(e) => {
      check.unreadable = Some(e.to_string());
      return check;
    }
  };
  let entries = &generation.manifest.entries;
  check.indexed = entries.len();
  for (id, hash) in &disk {
    match entries.get(id) {
      None => check.lost.push(id.clone()),
      Some(e) if &e.content_hash != hash => check.stale.push(id.clone()),
      Some(_) => {}
    }
  }
  check.ghosts = entries.keys().filter(|id| !disk.contains_key(*id)).cloned().collect();
  check
}

/// Edits between runs: a revision line with a unique token replaces the previous one, so
/// incremental runs have work and recall can find exactly the new text.
pub struct Editor {
  /// Ids the harness may edit or delete.
  pub mutable: Vec<String>,
  pub next_new: usize,
}

/// One edit and the token only the edited page holds afterwards.
#[derive(Debug, Clone, Serialize)]
pub struct Edit {
  pub id: String,
  pub token: String,
  pub kind: &'static str,
}

impl Editor {
  /// Apply `n` edits (revisions; with `churn`, also one deletion and one new page) and return
  /// them. `tag` makes the tokens unique (e.g. the iteration number).
  pub(crate) fn apply(
    &mut self,
    paths: &VaultPaths,
    rng: &mut Rng,
    n: usize,
    churn: bool,
    tag: &str,
  ) -> Result<Vec<Edit>> {
    let mut edits = Vec::new();
    if self.mutable.is_empty() {
      return Ok(edits);
    }
    for k in 0..n {
      let id = self.mutable[rng.below(self.mutable.len())].clone();
      let token = format!("zqrev{tag}k{k}");
      let file = llm_wiki_core::vault::discover::resolve_page_file(&paths.wiki, &format!("{id}.md"));
      let text = std::fs::read_to_string(&file).map_err(|e| Error::io("read", &file, e))?;
      let base = match text.rfind("\n\nRevision ") {
        Some(i) => &text[..i],
        None => text.trim_end(),
      };
      let next = format!("{base}\n\nRevision {token} of this page.\n");
      llm_wiki_core::fsutil::atomic_write(&file, next.as_bytes())?;
      edits.push(Edit { id, token, kind: "revision" });
    }
    if churn && self.mutable.len() > 1 {
      let gone = self.mutable.swap_remove(rng.below(self.mutable.len()));
      let file = paths.wiki.join(format!("{gone}.md"));
      std::fs::remove_file(&file).map_err(|e| Error::io("remove", &file, e))?;
      edits.retain(|e| e.id != gone);
      let id = format!("harness-added-{}", self.next_new);
      self.next_new += 1;
      let token = format!("zqnew{tag}");
      let page = format!(
        "---\ntype: source\ntitle: Harness page {id}\n---\n\nA page the harness added; it carries {token}.\n"
      );
      llm_wiki_core::fsutil::atomic_write(&paths.wiki.join(format!("{id}.md")), page.as_bytes())?;
      self.mutable.push(id.clone());
      edits.push(Edit { id, token, kind: "added" });
    }
    Ok(edits)
  }
}

/// One page in ten may be edited or deleted by a harness (first list); the others never change
/// and answer the known queries (second list).
pub fn split_mutable(ids: &[String]) -> (Vec<String>, Vec<String>) {
  let (mut mutable, mut stable) = (Vec::new(), Vec::new());
  for (i, id) in ids.iter().enumerate() {
    if i % 10 == 0 {
      mutable.push(id.clone());
    } else {
      stable.push(id.clone());
    }
  }
  (mutable, stable)
}

/// Titles of pages that the harness never edits and that recall ranks first for their own title
/// on the initial index: queries whose answer must never change.
pub fn known_queries(paths: &VaultPaths, stable: &[String], want: usize) -> Result<Vec<(String, String)>> {
  let generation = Generation::open_live(&StoreLayout::new(paths.retrieval()))?;
  let mut out = Vec::new();
  for id in stable {
    let Some(entry) = generation.manifest.entries.get(id) else { continue };
    let title = entry.meta.title.clone();
    if title.chars().count() < 12 {
      continue;
    }
    if recall_check(paths, &title, id, llm_wiki_core::retrieve::RetrievalMode::Lexical) == RecallCheck::Hit(1)
    {
      out.push((title, id.clone()));
    }
    if out.len() == want {
      break;
    }
  }
  if out.is_empty() {
    return Err(Error::invalid("no page of the vault is recalled first for its own title"));
  }
  Ok(out)
}

/// Nearest-rank percentile of sorted milliseconds.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
  if sorted.is_empty() {
    return 0.0;
  }
  sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Write `markdown` to `out` and its JSON next to it (`.json`).
pub fn write_report(out: &Path, markdown: &str, json: &serde_json::Value) -> Result<Vec<PathBuf>> {
  if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
  }
  llm_wiki_core::fsutil::atomic_write(out, markdown.as_bytes())?;
  let json_path = out.with_extension("json");
  let mut bytes = serde_json::to_vec_pretty(json).map_err(|e| Error::Index(e.to_string()))?;
  bytes.push(b'\n');
  llm_wiki_core::fsutil::atomic_write(&json_path, &bytes)?;
  Ok(vec![out.to_path_buf(), json_path])
}

/// Log line to stderr, prefixed with `[reliability]`.
pub fn say(msg: impl AsRef<str>) {
  eprintln!("[reliability] {}", msg.as_ref());
}
