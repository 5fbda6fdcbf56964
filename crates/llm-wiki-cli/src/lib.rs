//! The user commands of `llm-wiki-retrieval` — `index`, `status`, `recall`, `run`, `memory`,
//! `neighbours`, `path`, `overview`, `graph`, `resolve`, `feedback`, `calibrate`, `watch` over a vault directory, and
//! `download` of a model. The npm package's `bin` runs them inside the addon ([`run`]); the
//! evaluation crate's development binary adds its `bench` and `reliability` subcommands to the
//! same [`Command`] enum.
//! Nothing here depends on the evaluation code, so the published addon does not contain it.

mod graph;
pub mod trec;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::memory::explore;
use llm_wiki_core::memory::{recall_memory, MemoryOptions};
use llm_wiki_core::models::fetch;
use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::{read_index_status, reindex_vault, Component, Progress, ReindexOptions, Scope};
use llm_wiki_core::vault::VaultPaths;
use llm_wiki_core::watch::{watch_wiki, WatchEvent, WatchEventKind, WatchOptions};

use crate::trec::{load_queries_jsonl, recall_run_lines, write_run};

/// The program name shown in help and errors (the npm `bin` and the development binary share it).
pub const PROGRAM: &str = "llm-wiki-retrieval";

#[derive(Parser, Debug)]
#[command(name = PROGRAM, version, about = "Hybrid retrieval over llm-wiki Markdown vaults")]
struct Cli {
  #[command(subcommand)]
  command: Command,
}

/// The user commands (flattened into the development binary's command set).
#[derive(Subcommand, Debug)]
pub enum Command {
  /// Make a plain folder of Markdown notes indexable: creates only <folder>/.llm-wiki-retrieval/
  /// (config.json, .gitignore); the notes are never written. Once per folder.
  Init {
    /// The folder that holds the notes (an Obsidian vault, a docs/ folder).
    folder: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
  },
  /// Build or update a vault's retrieval index (incremental unless --force).
  Index {
    /// Vault root: a folder initialised with `init`, or one holding .llm-wiki/ (pi-llm-wiki).
    vault: PathBuf,
    /// Rebuild from scratch.
    #[arg(long)]
    force: bool,
    /// Re-hash every page instead of trusting size + mtime.
    #[arg(long)]
    all: bool,
    /// Components: lexical, vectors (repeatable; default both).
    #[arg(long = "component", value_name = "NAME")]
    components: Vec<String>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Write every progress event as a JSON line to stderr (used by the reliability harness).
    #[arg(long)]
    progress_events: bool,
  },
  /// Show the index status of a vault.
  Status {
    vault: PathBuf,
    #[arg(long)]
    json: bool,
  },
  /// Recall pages for a query (explicit policy unless --auto).
  Recall {
    vault: PathBuf,
    query: String,
    /// lexical | hybrid | adaptive | quality.
    #[arg(long, default_value = "adaptive")]
    mode: String,
    /// Maximum results (explicit policy: 1..=10).
    #[arg(long)]
    max: Option<usize>,
    /// Use the automatic (precision-first) policy.
    #[arg(long)]
    auto: bool,
    /// Print the response as JSON.
    #[arg(long)]
    json: bool,
    /// Show confidence, match reasons and the trace.
    #[arg(long)]
    explain: bool,
    /// Quality mode without a cross-encoder: rescore by sentence windows (opt-in).
    #[arg(long)]
    sentence_rescore: bool,
  },
  /// Run every query of a JSONL file ({"id","text"} per line) and write a TREC run.
  Run {
    vault: PathBuf,
    queries: PathBuf,
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value = "adaptive")]
    mode: String,
    /// Results per query.
    #[arg(long, default_value_t = 100)]
    depth: usize,
    /// Run tag (last TREC column).
    #[arg(long, default_value = "llm-wiki")]
    tag: String,
    /// Quality mode without a cross-encoder: rescore by sentence windows (opt-in).
    #[arg(long)]
    sentence_rescore: bool,
  },
  /// Recall memory bundles (card, evidence, competing claims) and print the packed context.
  Memory {
    vault: PathBuf,
    query: String,
    /// lexical | hybrid | adaptive | quality.
    #[arg(long, default_value = "adaptive")]
    mode: String,
    /// Use the automatic (precision-first) policy: 3 bundles, floor 0.50.
    #[arg(long)]
    auto: bool,
    /// Context budget in characters.
    #[arg(long, default_value_t = 8000)]
    budget: usize,
    /// Print the response as JSON.
    #[arg(long)]
    json: bool,
  },
  /// Record a user's conflict decision as one immutable resolution page (`wiki/analyses/`),
  /// then update the index. Repeating a decision is a no-op; changing one needs --replaces.
  Resolve {
    vault: PathBuf,
    /// The user-endorsed page id.
    selected: String,
    /// The competing page id.
    other: String,
    /// supersedes | qualifies | applies_under (selected → other).
    #[arg(long)]
    relation: String,
    /// Scope (required for applies_under, rejected otherwise).
    #[arg(long)]
    scope: Option<String>,
    /// Why; recorded in the page body.
    #[arg(long)]
    rationale: Option<String>,
    /// The pair's active resolution id this decision replaces.
    #[arg(long)]
    replaces: Option<String>,
    /// Do not update the index afterwards.
    #[arg(long)]
    no_index: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
  },
  /// The vault's recall-feedback stream: `status` (size, what compaction would move),
  /// `rebuild` (the projection from the archives and the whole stream, replaying corrections and
  /// resolutions whose event is missing), `compact` (explicit: move old `recall_feedback` lines
  /// into `meta/events-archive/`, every other line kept byte-identical).
  Feedback {
    /// status | rebuild | compact.
    action: String,
    vault: PathBuf,
    /// compact: move events older than this many days (default 360; 0 = all).
    #[arg(long)]
    older_than_days: Option<f64>,
    /// compact: count only, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
  },
  /// A page with its outbound and inbound links (zoom-out), typed relations labelled.
  Neighbours {
    vault: PathBuf,
    page: String,
    /// Hops from the page (1..=3).
    #[arg(long, default_value_t = 1)]
    depth: u32,
    /// outbound | inbound | both.
    #[arg(long, default_value = "both")]
    direction: String,
    /// Output budget in bytes.
    #[arg(long, default_value_t = 32768)]
    max_bytes: usize,
    /// Output budget in estimated tokens (default 2000, at most 10000; both budgets apply).
    #[arg(long)]
    budget_tokens: Option<u64>,
    /// Print the rendered text instead of JSON.
    #[arg(long)]
    text: bool,
  },
  /// Fit the configured embedding model's cosine → confidence mapping on a labelled set and,
  /// with --write, store it in the model's manifest.json (docs/CONFIDENCE.md). Labels: JSONL,
  /// one {"query", "related": [page ids] (empty = unrelated), "vault"?} per line.
  Calibrate {
    /// The labelled set (JSONL).
    labels: PathBuf,
    /// Vault of the lines without a "vault" field (theirs is relative to the labels file).
    #[arg(long)]
    vault: Option<PathBuf>,
    /// Share of unrelated queries allowed at or above the automatic floor (0.50).
    #[arg(long, default_value_t = llm_wiki_core::retrieve::calibrate::DEFAULT_MAX_NEGATIVE_RATE)]
    max_negative_rate: f64,
    /// Store the fit in the model's manifest.json (else only print it).
    #[arg(long)]
    write: bool,
    /// What the set is, recorded as `calibration.fittedOn` (default: the labels file name).
    #[arg(long)]
    fitted_on: Option<String>,
    /// Do not bring the vaults' indexes up to date first (they must already have vectors).
    #[arg(long)]
    no_index: bool,
    /// Print the fit as JSON.
    #[arg(long)]
    json: bool,
  },
  /// Keep a vault's index current while its files change, printing one line per event
  /// (Ctrl-C stops; an interrupted reindex keeps the last good index).
  Watch {
    vault: PathBuf,
    /// Components: lexical, vectors (repeatable; default both).
    #[arg(long = "component", value_name = "NAME")]
    components: Vec<String>,
    /// Quiet time before a batch of changes is indexed, in ms.
    #[arg(long, default_value_t = 200)]
    debounce_ms: u64,
    /// Poll instead of OS events (network filesystems).
    #[arg(long)]
    poll: bool,
    /// Polling interval in ms.
    #[arg(long, default_value_t = 2000)]
    poll_interval_ms: u64,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long = "for", value_name = "SECONDS")]
    duration: Option<f64>,
    /// Print events as JSON lines.
    #[arg(long)]
    json: bool,
  },
  /// Download a model into a model directory: by default all-MiniLM-L6-v2 (int8 ONNX) from the
  /// Hugging Face hub at a pinned commit, every file's sha256 verified, partial files resumed.
  /// For a directory already holding the id nothing is downloaded: the query prefix, chunk size
  /// and positive class given, and the batch limit, are written into its manifest (docs/INSTALL.md).
  Download(DownloadArgs),
  /// A shortest link path between two pages (links followed either way).
  Path {
    vault: PathBuf,
    from: String,
    to: String,
    /// Longest path searched (1..=8).
    #[arg(long, default_value_t = 4)]
    max_hops: u32,
  },
  /// Orientation from the index alone (no page file is read): page counts by type, folder,
  /// domain and tag, the most linked canonical pages, recent changes, unresolved conflicts.
  Overview {
    vault: PathBuf,
    /// Budget of the rendered text in estimated tokens (default 500, at most 4000).
    #[arg(long)]
    max_tokens: Option<u64>,
    /// Print the result as JSON (default: the rendered text).
    #[arg(long)]
    json: bool,
  },
  /// Multi-hop graph answer: the best recall hits as seeds, then typed relations before links,
  /// competing claims together, superseded pages marked historical, within a token budget.
  Graph {
    vault: PathBuf,
    query: String,
    /// Token budget (default 2000, at most 10000).
    #[arg(long)]
    budget_tokens: Option<u64>,
    /// Hops from the seeds (default 2, at most 4).
    #[arg(long)]
    hops: Option<u32>,
    /// Seeds taken from recall (default 3, 1..=10).
    #[arg(long)]
    seeds: Option<u32>,
    /// Seed recall mode: lexical | hybrid | adaptive | quality.
    #[arg(long, default_value = "adaptive")]
    mode: String,
    /// Print the result as JSON (default: the rendered text).
    #[arg(long)]
    json: bool,
  },
}

/// The flags of `download` (the manifest's settings, as `downloadModel`'s options).
#[derive(clap::Args, Debug)]
pub struct DownloadArgs {
  /// Model directory (default: the user model root's all-MiniLM-L6-v2-int8).
  #[arg(long)]
  dir: Option<PathBuf>,
  /// Server root (default https://huggingface.co, or $HF_ENDPOINT).
  #[arg(long)]
  base_url: Option<String>,
  /// Repository (owner/name).
  #[arg(long)]
  repo: Option<String>,
  /// Commit id to fetch from (40 hex digits; branch and tag names are refused).
  #[arg(long)]
  revision: Option<String>,
  /// A file of another model, `REMOTE:LOCAL:SHA256` (repeatable), e.g.
  /// `onnx/model.onnx:model.onnx:<64 hex digits>`.
  #[arg(long = "file", value_name = "REMOTE:LOCAL:SHA256")]
  files: Vec<String>,
  /// Model id written to the manifest (vectors are tied to it).
  #[arg(long)]
  id: Option<String>,
  /// embed | rerank.
  #[arg(long)]
  kind: Option<String>,
  /// Output dimensions (embedding models).
  #[arg(long)]
  dims: Option<usize>,
  /// mean | cls | none.
  #[arg(long)]
  pooling: Option<String>,
  /// Longest input in tokens.
  #[arg(long)]
  max_length: Option<usize>,
  /// Largest inference batch (1 for models with per-batch activation scales).
  #[arg(long)]
  max_batch: Option<usize>,
  /// Cross-encoders with a multi-class head: index of the "relevant" class.
  #[arg(long)]
  positive_class: Option<usize>,
  /// Text prepended to queries before embedding (E5: "query: ").
  #[arg(long)]
  query_prefix: Option<String>,
  /// Text prepended to chunks before embedding (E5: "passage: ").
  #[arg(long)]
  document_prefix: Option<String>,
  /// Largest chunk in the model's tokens (at least 16; 0 = the engine's default, 200).
  #[arg(long)]
  chunk_tokens: Option<usize>,
  /// Print the model directory and its manifest as JSON.
  #[arg(long)]
  json: bool,
}

impl DownloadArgs {
  /// The engine's download request, with the `--file` arguments parsed.
  fn request(&self) -> Result<fetch::DownloadRequest> {
    let files = match self.files.is_empty() {
      true => None,
      false => Some(self.files.iter().map(|f| parse_remote_file(f)).collect::<Result<Vec<_>>>()?),
    };
    Ok(fetch::DownloadRequest {
      base_url: self.base_url.clone(),
      repo: self.repo.clone(),
      revision: self.revision.clone(),
      files,
      id: self.id.clone(),
      kind: self.kind.clone(),
      dims: self.dims,
      pooling: self.pooling.clone(),
      max_length: self.max_length,
      max_batch: self.max_batch,
      positive_class: self.positive_class,
      query_prefix: self.query_prefix.clone(),
      document_prefix: self.document_prefix.clone(),
      chunk_tokens: self.chunk_tokens,
    })
  }
}

fn parse_components(names: &[String]) -> Result<Vec<Component>> {
  if names.is_empty() {
    return Ok(vec![Component::Lexical, Component::Vectors]);
  }
  names.iter().map(|n| Component::parse(n)).collect()
}

fn progress_bar() -> (ProgressBar, Arc<dyn Fn(Progress) + Send + Sync>) {
  let bar = ProgressBar::new(0);
  bar.set_style(
    ProgressStyle::with_template("{spinner} {prefix:>8} [{bar:30}] {pos}/{len} {msg}")
      .unwrap_or_else(|_| ProgressStyle::default_bar())
      .progress_chars("=> "),
  );
  let b = bar.clone();
  let sink = Arc::new(move |p: Progress| {
    b.set_prefix(p.stage);
    if let (Some(c), Some(t)) = (p.current, p.total) {
      b.set_length(t);
      b.set_position(c);
    }
    b.set_message(p.message);
  });
  (bar, sink)
}

/// `REMOTE:LOCAL:SHA256` of `download --file` (split from the right: a local name and a
/// checksum never contain a colon).
fn parse_remote_file(arg: &str) -> Result<fetch::RemoteFile> {
  let mut parts = arg.rsplitn(3, ':');
  match (parts.next(), parts.next(), parts.next()) {
    (Some(sha256), Some(local), Some(remote)) if !remote.is_empty() && !local.is_empty() => {
      Ok(fetch::RemoteFile { remote: remote.into(), local: local.into(), sha256: sha256.into(), size: None })
    }
    _ => Err(Error::invalid(format!("--file {arg:?} must be REMOTE:LOCAL:SHA256"))),
  }
}

fn vault_paths(root: &Path) -> Result<VaultPaths> {
  let abs = std::path::absolute(root).map_err(|e| Error::io("resolve", root, e))?;
  Ok(VaultPaths::for_root(abs))
}

/// Run one user command, writing its report to `out`.
pub fn execute(command: Command, out: &mut impl Write) -> Result<()> {
  match command {
    Command::Index { vault, force, all, components, json, progress_events } => {
      let paths = vault_paths(&vault)?;
      let (bar, sink) = progress_bar();
      let events: Arc<dyn Fn(Progress) + Send + Sync> = Arc::new(|p: Progress| {
        eprintln!("{}", serde_json::to_string(&p).unwrap_or_default());
      });
      let progress = if progress_events { Some(events) } else { (!json).then_some(sink) };
      let opts = ReindexOptions {
        scope: if all { Scope::All } else { Scope::Changed },
        components: parse_components(&components)?,
        force,
        progress,
        ..Default::default()
      };
      let r = reindex_vault(&paths, &opts);
      bar.finish_and_clear();
      if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
      } else {
        writeln!(
          out,
          "{}: {} indexed, {} updated, {} unchanged, {} removed; {} chunks; {:.0} ms; status {}",
          if r.ok { "ok" } else { "failed" },
          r.documents.indexed,
          r.documents.updated,
          r.documents.unchanged,
          r.documents.removed,
          r.chunks.total,
          r.elapsed_ms,
          r.status.state.as_str()
        )
        .ok();
        for w in &r.warnings {
          writeln!(
            out,
            "warning {}: {}{}",
            w.code,
            w.message,
            w.path.as_deref().map(|p| format!(" ({p})")).unwrap_or_default()
          )
          .ok();
        }
        for e in &r.errors {
          writeln!(out, "error {}: {}", e.code, e.message).ok();
        }
      }
      if !r.ok {
        return Err(Error::Index(
          r.errors.first().map(|e| e.message.clone()).unwrap_or_else(|| "cancelled".into()),
        ));
      }
    }
    Command::Init { folder, json } => {
      let r = llm_wiki_core::vault::init::init_vault(&folder)?;
      if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
      } else if r.created.is_empty() {
        writeln!(
          out,
          "{} already is a vault ({} layout, {} notes); nothing created",
          r.root.display(),
          r.layout,
          r.pages
        )
        .ok();
      } else {
        writeln!(out, "initialised {} ({} Markdown notes); created:", r.root.display(), r.pages).ok();
        for p in &r.created {
          writeln!(out, "  {}", p.display()).ok();
        }
        writeln!(out, "next: {PROGRAM} index {}", r.root.display()).ok();
      }
    }
    Command::Status { vault, json } => {
      let s = read_index_status(&vault_paths(&vault)?);
      if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&s).unwrap_or_default()).ok();
      } else {
        writeln!(out, "state: {}\ndocuments: {} ({} canonical, {} evidence)\nchunks: {}\nembeddings pending: {}\nengine: {}",
          s.state.as_str(), s.counts.total_documents, s.counts.canonical_documents, s.counts.evidence_documents, s.counts.total_chunks, s.counts.needs_embedding, s.engine_version).ok();
        for i in &s.issues {
          writeln!(out, "issue {}: {}", i.code, i.message).ok();
        }
      }
    }
    Command::Recall { vault, query, mode, max, auto, json, explain, sentence_rescore } => {
      let paths = vault_paths(&vault)?;
      let policy = if auto { RecallPolicy::automatic() } else { RecallPolicy::explicit(max) };
      let opts =
        RecallOptions { sentence_rescore, ..RecallOptions::new(policy, RetrievalMode::parse(&mode)?) };
      let started = Instant::now();
      let r = recall_wiki(&paths, &query, &opts)?;
      let ms = started.elapsed().as_secs_f64() * 1000.0;
      if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
        return Ok(());
      }
      if r.results.is_empty() {
        writeln!(out, "No reliable memory found for {query:?} ({ms:.1} ms, mode {}).", r.mode.as_str()).ok();
      }
      for (i, res) in r.results.iter().enumerate() {
        writeln!(
          out,
          "{}. [[{}]] {} — {} (score {:.2}){}",
          i + 1,
          res.id,
          res.page_type,
          res.title,
          res.score,
          res.vault_label.as_deref().map(|l| format!(" {l}")).unwrap_or_default()
        )
        .ok();
        writeln!(out, "   {}", res.preview).ok();
        if explain {
          writeln!(
            out,
            "   confidence {:.3} × multiplier {:.2}; lines {}-{}; {}",
            res.confidence,
            res.multiplier,
            res.line_start,
            res.line_end,
            res.match_reasons.join("; ")
          )
          .ok();
        }
      }
      for d in &r.diagnostics {
        writeln!(out, "diagnostic {}: {}", d.code, d.message).ok();
      }
      if explain {
        writeln!(out, "mode used: {} ({ms:.1} ms)", r.mode.as_str()).ok();
        for t in &r.trace {
          writeln!(out, "trace: {t}").ok();
        }
      }
    }
    Command::Run { vault, queries, out: out_path, mode, depth, tag, sentence_rescore } => {
      let paths = vault_paths(&vault)?;
      let queries = load_queries_jsonl(&queries)?;
      let policy =
        RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: depth, max_results: depth };
      let opts =
        RecallOptions { sentence_rescore, ..RecallOptions::new(policy, RetrievalMode::parse(&mode)?) };
      let mut lines = Vec::new();
      let mut times = Vec::with_capacity(queries.len());
      for (qid, text) in &queries {
        let started = Instant::now();
        let r = recall_wiki(&paths, text, &opts)?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        lines.extend(recall_run_lines(qid, &r.results));
      }
      write_run(&out_path, &tag, &lines)?;
      times.sort_by(|a, b| a.total_cmp(b));
      let pct = |p: f64| times.get(((times.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0);
      writeln!(
        out,
        "wrote {} lines for {} queries to {} (per query: p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms)",
        lines.len(),
        queries.len(),
        out_path.display(),
        pct(0.5),
        pct(0.95),
        pct(1.0)
      )
      .ok();
    }
    Command::Memory { vault, query, mode, auto, budget, json } => {
      let paths = vault_paths(&vault)?;
      let policy = if auto { RecallPolicy::automatic() } else { RecallPolicy::explicit(None) };
      let recall = RecallOptions::new(policy, RetrievalMode::parse(&mode)?);
      let opts = MemoryOptions { recall, budget_chars: budget, typed_expansion: true };
      let r = recall_memory(&paths, &query, &opts)?;
      if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
      } else if r.bundles.is_empty() && r.context.is_empty() {
        writeln!(out, "No reliable memory found for {query:?} (mode {}).", r.mode.as_str()).ok();
      } else {
        write!(out, "{}", r.context).ok();
      }
      for d in &r.diagnostics {
        writeln!(out, "diagnostic {}: {}", d.code, d.message).ok();
      }
    }
    Command::Resolve { vault, selected, other, relation, scope, rationale, replaces, no_index, json } => {
      use llm_wiki_core::memory::resolve::{resolve_in, ResolveRequest};
      let paths = vault_paths(&vault)?;
      let label = if llm_wiki_core::vault::paths::is_personal_vault(&paths) { "personal" } else { "project" };
      let req = ResolveRequest {
        vault: label.into(),
        selected,
        other,
        relation,
        scope,
        rationale,
        replaces,
        update_index: !no_index,
      };
      let r = resolve_in(&paths, None, &req)?;
      if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&r).unwrap_or_default()).ok();
      } else {
        let res = &r.resolution;
        let scope = res.scope.as_deref().map(|s| format!(" under {s:?}")).unwrap_or_default();
        writeln!(
          out,
          "{} {}: {} {} {}{scope}",
          if r.created { "recorded" } else { "already recorded" },
          res.id,
          res.selected_page_id,
          res.relation,
          res.other_page_id
        )
        .ok();
        writeln!(out, "page: {}", r.path).ok();
        for i in &r.index.issues {
          writeln!(out, "index {}: {}", i.code, i.message).ok();
        }
        for w in &r.warnings {
          writeln!(out, "warning {}: {}", w.code, w.message).ok();
        }
      }
    }
    Command::Feedback { action, vault, older_than_days, dry_run, json } => {
      use llm_wiki_core::feedback::{compact, record};
      let paths = vault_paths(&vault)?;
      let mut progress = |read: u64, total: u64| {
        if !json && total >= 64 << 20 {
          eprintln!("{} / {} MiB", read >> 20, total >> 20);
        }
      };
      let value = match action.as_str() {
        "status" => serde_json::to_value(compact::stream_status(&paths.meta)),
        "rebuild" => serde_json::to_value(record::rebuild_feedback_with(&paths, &mut progress)?),
        "compact" => {
          let mut opts = compact::CompactOptions { dry_run, ..Default::default() };
          if let Some(d) = older_than_days {
            opts.older_than_days = d;
          }
          serde_json::to_value(record::compact_feedback(&paths, &opts, &mut progress)?)
        }
        other => {
          return Err(llm_wiki_core::error::Error::invalid(format!(
            "feedback action must be status | rebuild | compact, got {other:?}"
          )))
        }
      }
      .unwrap_or_default();
      if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&value).unwrap_or_default()).ok();
      } else if let Some(map) = value.as_object() {
        for (k, v) in map {
          writeln!(out, "{k}: {v}").ok();
        }
      }
    }
    Command::Neighbours { vault, page, depth, direction, max_bytes, budget_tokens, text } => {
      let paths = vault_paths(&vault)?;
      let req = explore::NeighbourRequest {
        depth: Some(depth),
        direction: Some(explore::Direction::parse(&direction)?),
        max_bytes: Some(max_bytes),
        budget_tokens,
      };
      let n = explore::neighbours(&paths, &page, &req)?;
      if text {
        writeln!(out, "{}", n.text).ok();
      } else {
        writeln!(out, "{}", serde_json::to_string_pretty(&n).unwrap_or_default()).ok();
      }
    }
    Command::Overview { vault, max_tokens, json } => {
      graph::overview(&vault_paths(&vault)?, max_tokens, json, out)?
    }
    Command::Graph { vault, query, budget_tokens, hops, seeds, mode, json } => {
      let opts = llm_wiki_core::memory::graph_query::GraphQueryOptions {
        budget_tokens,
        hops,
        seeds,
        mode: RetrievalMode::parse(&mode)?,
        ..Default::default()
      };
      graph::graph(&vault_paths(&vault)?, &query, &opts, json, out)?
    }
    Command::Calibrate { labels, vault, max_negative_rate, write, fitted_on, no_index, json } => {
      calibrate(&labels, vault.as_deref(), max_negative_rate, write, fitted_on, no_index, json, out)?;
    }
    Command::Watch { vault, components, debounce_ms, poll, poll_interval_ms, duration, json } => {
      watch(&vault, &components, debounce_ms, poll, poll_interval_ms, duration, json, out)?;
    }
    Command::Download(args) => {
      let spec = fetch::DownloadSpec::from_request(args.request()?)?;
      let json = args.json;
      let dir = match args.dir {
        Some(d) => std::path::absolute(&d).map_err(|e| Error::io("resolve", &d, e))?,
        None => fetch::default_download_dir(),
      };
      let bar = if json { ProgressBar::hidden() } else { ProgressBar::new(0) };
      bar.set_style(
        ProgressStyle::with_template("{prefix:>16} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}")
          .unwrap_or_else(|_| ProgressStyle::default_bar())
          .progress_chars("=> "),
      );
      let model = fetch::download_model(&spec, &dir, &llm_wiki_core::store::CancelFlag::new(), &mut |p| {
        bar.set_prefix(p.file);
        bar.set_length(p.total.unwrap_or(p.downloaded));
        bar.set_position(p.downloaded);
      });
      bar.finish_and_clear();
      let model = model?;
      let m = &model.manifest;
      if json {
        let report = serde_json::json!({ "dir": model.dir, "manifest": m });
        writeln!(out, "{}", serde_json::to_string_pretty(&report).unwrap_or_default()).ok();
      } else {
        let chunks = m.chunk_tokens.map_or("engine default".to_string(), |n| n.to_string());
        writeln!(
          out,
          "{} ready in {}: {}, {} dims, chunks {chunks}, query prefix {:?}, document prefix {:?}",
          m.id,
          model.dir.display(),
          format!("{:?}", m.kind).to_lowercase(),
          m.dims,
          m.query_prefix,
          m.document_prefix
        )
        .ok();
      }
    }
    Command::Path { vault, from, to, max_hops } => {
      let paths = vault_paths(&vault)?;
      let p = explore::link_path(&paths, &from, &to, max_hops)?;
      writeln!(out, "{}", serde_json::to_string_pretty(&p).unwrap_or_default()).ok();
    }
  }
  Ok(())
}

/// One watch event as a line of text.
fn watch_line(e: &WatchEvent) -> String {
  let mut line = e.kind.as_str().to_string();
  if let Some(phase) = e.phase {
    line.push_str(&format!(" {phase}"));
  }
  if let Some(b) = e.backend {
    line.push_str(&format!(" backend={}", b.as_str()));
  }
  if e.rearmed {
    line.push_str(" rearmed");
  }
  if e.kind == WatchEventKind::Indexed {
    if e.full_scan {
      line.push_str(" full scan");
    } else {
      line.push_str(&format!(" {} path(s)", e.path_count));
    }
    if let Some(d) = &e.documents {
      line.push_str(&format!(" +{} ~{} -{}", d.indexed, d.updated, d.removed));
    }
    if let Some(ms) = e.ms {
      line.push_str(&format!(" in {ms:.0} ms"));
    }
    if !e.paths.is_empty() {
      line.push_str(&format!(": {}", e.paths.iter().take(5).cloned().collect::<Vec<_>>().join(", ")));
      if e.path_count > 5 {
        line.push_str(&format!(" (+{} more)", e.path_count - 5));
      }
    }
  }
  if let (Some(code), Some(msg)) = (&e.code, &e.message) {
    line.push_str(&format!(" [{code}] {msg}"));
  }
  line
}

/// The `watch` command: events are printed by the calling thread as they arrive.
#[allow(clippy::too_many_arguments)]
fn watch(
  vault: &Path,
  components: &[String],
  debounce_ms: u64,
  poll: bool,
  poll_interval_ms: u64,
  duration: Option<f64>,
  json: bool,
  out: &mut impl Write,
) -> Result<()> {
  let paths = vault_paths(vault)?;
  let opts = WatchOptions {
    components: parse_components(components)?,
    debounce: std::time::Duration::from_millis(debounce_ms.min(60_000)),
    poll,
    poll_interval: std::time::Duration::from_millis(poll_interval_ms.max(100)),
    ..Default::default()
  };
  let (tx, rx) = std::sync::mpsc::channel::<WatchEvent>();
  let tx = std::sync::Mutex::new(tx);
  let mut handle = watch_wiki(
    &paths,
    opts,
    Arc::new(move |e| {
      if let Ok(t) = tx.lock() {
        let _ = t.send(e);
      }
    }),
  )?;
  let deadline = duration.map(|s| Instant::now() + std::time::Duration::from_secs_f64(s.max(0.0)));
  let mut print = |e: &WatchEvent| {
    let text = if json { serde_json::to_string(e).unwrap_or_default() } else { watch_line(e) };
    writeln!(out, "{text}").ok();
    out.flush().ok();
  };
  loop {
    let wait =
      deadline.map_or(std::time::Duration::from_secs(3600), |d| d.saturating_duration_since(Instant::now()));
    if deadline.is_some() && wait.is_zero() {
      break;
    }
    match rx.recv_timeout(wait) {
      Ok(e) => print(&e),
      Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
      Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
    }
  }
  handle.close();
  while let Ok(e) = rx.try_recv() {
    print(&e);
  }
  Ok(())
}

/// The `calibrate` command: index the labelled set's vaults (vectors), collect each query's dense
/// evidence, fit, print, and with `write` store the fit in the embedding model's manifest.
#[allow(clippy::too_many_arguments)]
fn calibrate(
  labels_path: &Path,
  default_vault: Option<&Path>,
  max_negative_rate: f64,
  write: bool,
  fitted_on: Option<String>,
  no_index: bool,
  json: bool,
  out: &mut impl Write,
) -> Result<()> {
  use llm_wiki_core::retrieve::calibrate as cal;
  let model_dir = llm_wiki_core::models::resolve_embed_dir(&llm_wiki_core::models::effective_config())
    .ok_or_else(|| Error::ModelUnavailable("no embedding model is configured".into()))?;
  let labels = cal::read_labels(labels_path)?;
  if !no_index {
    let mut roots: Vec<PathBuf> = Vec::new();
    for q in &labels {
      let r = cal::vault_of(q, labels_path, default_vault)?;
      if !roots.contains(&r) {
        roots.push(r);
      }
    }
    for root in roots {
      let opts =
        ReindexOptions { components: vec![Component::Lexical, Component::Vectors], ..Default::default() };
      let r = reindex_vault(&vault_paths(&root)?, &opts);
      if !r.ok {
        return Err(Error::Index(format!(
          "{}: {}",
          root.display(),
          r.errors.first().map(|e| e.message.clone()).unwrap_or_else(|| "reindex failed".into())
        )));
      }
    }
  }
  let evidence = cal::collect_evidence(&labels, labels_path, default_vault)?;
  let fit = cal::fit_evidence(&labels, &evidence, max_negative_rate)?;
  let model = llm_wiki_core::models::ModelDir::open(&model_dir)?.manifest.id;
  let fitted_on = fitted_on.unwrap_or_else(|| {
    let name = labels_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{name}: {} related, {} unrelated queries", fit.positives, fit.negatives)
  });
  if write {
    cal::store_calibration(&model_dir, &fit, &fitted_on)?;
  }
  if json {
    let v = serde_json::json!({ "model": model, "fit": fit, "fittedOn": fitted_on, "written": write });
    writeln!(out, "{}", serde_json::to_string_pretty(&v).unwrap_or_default()).ok();
    return Ok(());
  }
  writeln!(
    out,
    "{model}: cosine floor {:.4}, span {:.4} (automatic floor 0.50 at cosine {:.4})\n\
     fitted on {} related / {} unrelated queries; at the automatic floor {:.1}% of related and \
     {:.1}% of unrelated queries pass (explicit floor: {:.1}% of related)",
    fit.cosine_floor,
    fit.cosine_span,
    fit.cosine_at_auto,
    fit.positives,
    fit.negatives,
    100.0 * fit.positive_pass_rate,
    100.0 * fit.negative_pass_rate,
    100.0 * fit.positive_explicit_rate
  )
  .ok();
  if write {
    writeln!(out, "stored in {}", model_dir.join("manifest.json").display()).ok();
  } else {
    writeln!(out, "not stored (run with --write to store it in the model's manifest.json)").ok();
  }
  Ok(())
}

/// Run the user CLI with `args` (without the program name). Returns the process exit code.
pub fn run<I: IntoIterator<Item = String>>(args: I) -> i32 {
  run_with(args, |cli: Cli| execute(cli.command, &mut std::io::stdout().lock()))
}

/// Parse `args` as the command line `C` and run it with `exec`, panics caught: clap's own output
/// (help, version, usage errors) and exit codes (0 / 2), `error [code]: message` and 1 on failure.
pub fn run_with<C: Parser, I: IntoIterator<Item = String>>(
  args: I,
  exec: impl FnOnce(C) -> Result<()>,
) -> i32 {
  let argv = std::iter::once(PROGRAM.to_string()).chain(args);
  let cli = match C::try_parse_from(argv) {
    Ok(c) => c,
    Err(e) => {
      let _ = e.print();
      return if e.use_stderr() { 2 } else { 0 };
    }
  };
  match llm_wiki_core::error::catch_panic(|| exec(cli)) {
    Ok(()) => 0,
    Err(e) => {
      eprintln!("error [{}]: {e}", e.code());
      1
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn watch_prints_events_until_its_time_is_up() {
    let t = tempfile::tempdir().unwrap();
    let p = VaultPaths::new_layout(t.path().join("v"));
    std::fs::create_dir_all(&p.wiki).unwrap();
    std::fs::write(p.config_file(), r#"{"name":"T"}"#).unwrap();
    std::fs::write(p.wiki.join("a.md"), "---\ntype: concept\ntitle: A\n---\nzqxwatchcli\n").unwrap();
    let cmd = Command::Watch {
      vault: p.root.clone(),
      components: vec!["lexical".into()],
      debounce_ms: 50,
      poll: false,
      poll_interval_ms: 2000,
      duration: Some(3.0),
      json: false,
    };
    let mut out = Vec::new();
    execute(cmd, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("started backend=native"), "{text}");
    assert!(lines.iter().any(|l| l.starts_with("indexed lexical full scan +1 ~0 -0")), "{text}");
    assert_eq!(lines.last().copied(), Some("closed"), "{text}");
  }
}
