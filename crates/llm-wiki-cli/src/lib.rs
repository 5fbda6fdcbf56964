//! The user commands of `llm-wiki-retrieval` — `index`, `status`, `recall`, `run`, `memory`,
//! `neighbours`, `path`, `overview`, `graph`, `resolve`, `feedback`, `calibrate`, `watch` over a vault directory, and
//! `download` of a model. The npm package's `bin` runs them inside the addon ([`run`]); the
//! evaluation crate's development binary adds its `bench` and `reliability` subcommands to the
//! same [`Command`] enum.
//! Nothing here depends on the evaluation code, so the published addon does not contain it.

mod calibrate;
mod download;
mod graph;
mod index;
mod recall;
mod record;
pub mod trec;
mod watch;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::memory::explore;
use llm_wiki_core::memory::resolve::ResolveRequest;
use llm_wiki_core::memory::MemoryOptions;
use llm_wiki_core::retrieve::{RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::vault::VaultPaths;

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

fn vault_paths(root: &Path) -> Result<VaultPaths> {
  let abs = std::path::absolute(root).map_err(|e| Error::io("resolve", root, e))?;
  Ok(VaultPaths::for_root(abs))
}

/// Run one user command, writing its report to `out`: the command line becomes the engine's
/// request here, and each command's module runs it and prints the result.
pub fn execute(command: Command, out: &mut impl Write) -> Result<()> {
  match command {
    Command::Init { folder, json } => index::init(&folder, json, out),
    Command::Index { vault, force, all, components, json, progress_events } => {
      index::index(&vault_paths(&vault)?, force, all, &components, json, progress_events, out)
    }
    Command::Status { vault, json } => index::status(&vault_paths(&vault)?, json, out),
    Command::Recall { vault, query, mode, max, auto, json, explain, sentence_rescore } => {
      let paths = vault_paths(&vault)?;
      let policy = if auto { RecallPolicy::automatic() } else { RecallPolicy::explicit(max) };
      let opts =
        RecallOptions { sentence_rescore, ..RecallOptions::new(policy, RetrievalMode::parse(&mode)?) };
      recall::recall(&paths, &query, &opts, json, explain, out)
    }
    Command::Run { vault, queries, out: out_path, mode, depth, tag, sentence_rescore } => {
      let paths = vault_paths(&vault)?;
      let depth = llm_wiki_core::util::num::sat_u32(depth);
      let policy =
        RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: depth, max_results: depth };
      let opts =
        RecallOptions { sentence_rescore, ..RecallOptions::new(policy, RetrievalMode::parse(&mode)?) };
      recall::run_queries(&paths, &queries, &out_path, &tag, &opts, out)
    }
    Command::Memory { vault, query, mode, auto, budget, json } => {
      let paths = vault_paths(&vault)?;
      let policy = if auto { RecallPolicy::automatic() } else { RecallPolicy::explicit(None) };
      let recall = RecallOptions::new(policy, RetrievalMode::parse(&mode)?);
      let opts = MemoryOptions { recall, budget_chars: budget, typed_expansion: true };
      recall::memory(&paths, &query, &opts, json, out)
    }
    Command::Resolve { vault, selected, other, relation, scope, rationale, replaces, no_index, json } => {
      let paths = vault_paths(&vault)?;
      let req = ResolveRequest {
        vault: record::vault_label(&paths).into(),
        selected,
        other,
        relation,
        scope,
        rationale,
        replaces,
        update_index: Some(!no_index),
      };
      record::resolve(&paths, &req, json, out)
    }
    Command::Feedback { action, vault, older_than_days, dry_run, json } => {
      record::feedback(&vault_paths(&vault)?, &action, older_than_days, dry_run, json, out)
    }
    Command::Neighbours { vault, page, depth, direction, max_bytes, budget_tokens, text } => {
      let paths = vault_paths(&vault)?;
      let req = explore::NeighbourRequest {
        depth: Some(depth),
        direction: Some(direction),
        max_bytes: Some(llm_wiki_core::util::num::sat_u32(max_bytes)),
        // A whole number either way; budgets are capped at 10,000 tokens.
        budget_tokens: budget_tokens.map(|t| t as f64),
      };
      graph::neighbours(&paths, &page, &req, text, out)
    }
    Command::Overview { vault, max_tokens, json } => {
      graph::overview(&vault_paths(&vault)?, max_tokens, json, out)
    }
    Command::Graph { vault, query, budget_tokens, hops, seeds, mode, json } => {
      let opts = llm_wiki_core::memory::graph_query::GraphQueryOptions {
        budget_tokens,
        hops,
        seeds,
        mode: RetrievalMode::parse(&mode)?,
        ..Default::default()
      };
      graph::graph(&vault_paths(&vault)?, &query, &opts, json, out)
    }
    Command::Calibrate { labels, vault, max_negative_rate, write, fitted_on, no_index, json } => {
      calibrate::calibrate(
        &labels,
        vault.as_deref(),
        max_negative_rate,
        write,
        fitted_on,
        no_index,
        json,
        out,
      )
    }
    Command::Watch { vault, components, debounce_ms, poll, poll_interval_ms, duration, json } => {
      watch::watch(&vault, &components, debounce_ms, poll, poll_interval_ms, duration, json, out)
    }
    Command::Download(args) => download::download(args, out),
    Command::Path { vault, from, to, max_hops } => {
      graph::path(&vault_paths(&vault)?, &from, &to, max_hops, out)
    }
  }
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
mod tests;
