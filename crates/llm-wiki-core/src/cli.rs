//! The `llm-wiki-retrieval` command line: index, status, recall, TREC runs and benchmarks over a
//! vault directory. The same entry point backs the npm package's `bin` (through the addon) and
//! the standalone Rust binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::error::{Error, Result};
use crate::eval::bench::{
  parse_modes, run_precision, run_scale, run_set_bench, stderr_log, BenchCommon, ScaleOptions,
  SetBenchOptions,
};
use crate::eval::trec::{write_run, RunLine};
use crate::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use crate::store::{read_index_status, reindex_vault, Component, Progress, ReindexOptions, Scope};
use crate::vault::VaultPaths;

#[derive(Parser, Debug)]
#[command(name = "llm-wiki-retrieval", version, about = "Hybrid retrieval over llm-wiki Markdown vaults")]
struct Cli {
  #[command(subcommand)]
  command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
  /// Build or update a vault's retrieval index (incremental unless --force).
  Index {
    /// Vault root (the directory containing .llm-wiki/).
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
  /// Benchmark an evaluation set (BEIR-style directory or the pi fixture), or run the
  /// `precision` / `scale` suites. Writes TREC runs, metrics JSON and Markdown under --out.
  Bench(BenchArgs),
  /// Reliability harnesses: crash injection and a concurrency soak (docs/RELIABILITY.md).
  Reliability {
    #[command(subcommand)]
    harness: ReliabilityCommand,
  },
}

/// Arguments every reliability harness takes.
#[derive(Args, Debug)]
struct HarnessArgs {
  /// A BEIR-style directory (e.g. SciFact) or a vault root; copied to a temporary directory.
  #[arg(long)]
  source: PathBuf,
  #[arg(long, default_value_t = 1)]
  seed: u64,
  /// The llm-wiki-retrieval binary to run as children (default: this executable).
  #[arg(long)]
  bin: Option<PathBuf>,
  /// Keep the temporary vault (its path is printed).
  #[arg(long)]
  keep_temp: bool,
  /// Where the temporary vault goes (default: the system temp directory).
  #[arg(long, value_name = "DIR")]
  temp_dir: Option<PathBuf>,
}

impl HarnessArgs {
  fn options(self, pages: usize, edits: usize, out: PathBuf) -> crate::eval::reliability::HarnessOptions {
    crate::eval::reliability::HarnessOptions {
      source: self.source,
      pages,
      seed: self.seed,
      edits,
      bin: self.bin,
      out,
      temp_root: self.temp_dir,
      keep_temp: self.keep_temp,
    }
  }
}

#[derive(Subcommand, Debug)]
enum ReliabilityCommand {
  /// SIGKILL a child `index` at random moments (lexical and vector phase, forced and
  /// incremental runs) and check the store after every kill.
  Crash {
    #[command(flatten)]
    harness: HarnessArgs,
    /// Pages kept from the source, in id order (0 = all). Forced vector kills re-embed every
    /// chunk, so the run time grows with this.
    #[arg(long, default_value_t = 500)]
    pages: usize,
    #[arg(long, default_value_t = 200)]
    kills: usize,
    /// Pages revised before every run.
    #[arg(long, default_value_t = 20)]
    edits: usize,
    /// Markdown report (the JSON is written next to it).
    #[arg(long, default_value = "bench-results/reliability/crash.md")]
    out: PathBuf,
    /// Seconds a recovery reindex may take before it counts as hung.
    #[arg(long, default_value_t = 1800)]
    recovery_timeout: u64,
  },
  /// Two processes reindexing (incremental with edits / forced) and recalling one vault.
  Soak {
    #[command(flatten)]
    harness: HarnessArgs,
    /// Pages kept from the source, in id order (0 = all).
    #[arg(long, default_value_t = 1000)]
    pages: usize,
    /// Duration in minutes.
    #[arg(long, default_value_t = 3.0)]
    minutes: f64,
    /// Pages revised before every incremental run.
    #[arg(long, default_value_t = 10)]
    edits: usize,
    /// Markdown report (the JSON is written next to it).
    #[arg(long, default_value = "bench-results/reliability/soak.md")]
    out: PathBuf,
  },
  /// One worker process of `soak` (started by it).
  #[command(hide = true)]
  SoakWorker {
    vault: PathBuf,
    #[arg(long)]
    plan: PathBuf,
    #[arg(long)]
    role: String,
    #[arg(long)]
    out: PathBuf,
  },
}

fn run_reliability(cmd: ReliabilityCommand, out: &mut impl Write) -> Result<()> {
  use crate::eval::reliability::{crash, soak};
  let files = match cmd {
    ReliabilityCommand::Crash { harness, pages, kills, edits, out, recovery_timeout } => {
      crash::run_crash(&crash::CrashOptions {
        harness: harness.options(pages, edits, out),
        kills,
        recovery_timeout: std::time::Duration::from_secs(recovery_timeout),
      })?
    }
    ReliabilityCommand::Soak { harness, pages, minutes, edits, out } => soak::run_soak(&soak::SoakOptions {
      harness: harness.options(pages, edits, out),
      seconds: (minutes * 60.0).round().max(1.0) as u64,
    })?,
    ReliabilityCommand::SoakWorker { vault, plan, role, out } => {
      let root = std::path::absolute(&vault).map_err(|e| Error::io("resolve", &vault, e))?;
      soak::run_soak_worker(&root, &plan, soak::Role::parse(&role)?, &out)?;
      Vec::new()
    }
  };
  for f in files {
    writeln!(out, "wrote {}", f.display()).ok();
  }
  Ok(())
}

/// `bench <SOURCE>` or `bench precision|scale ...`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct BenchArgs {
  #[command(subcommand)]
  suite: Option<BenchSuite>,
  /// A BEIR-style directory (vault/ of flat <docid>.md pages, queries.jsonl, qrels.tsv) or the pi
  /// fixture.json (or its directory; its sibling vault/ is used).
  #[arg(required = true)]
  source: Option<PathBuf>,
  /// Set name used in output file names (default: `pi`, or the directory name).
  #[arg(long)]
  set: Option<String>,
  /// The pi heuristic's per-query runs (default: baseline-runs.json next to the fixture).
  #[arg(long)]
  baseline: Option<PathBuf>,
  /// Depth of the ranked lists.
  #[arg(long, default_value_t = crate::eval::bench::DEFAULT_DEPTH)]
  depth: usize,
  #[command(flatten)]
  common: BenchCommonArgs,
}

#[derive(Args, Debug)]
struct BenchCommonArgs {
  /// Comma-separated retrieval modes (lexical, hybrid, adaptive, quality; `all`).
  #[arg(long, default_value = "lexical,hybrid,adaptive,quality")]
  modes: String,
  /// Output directory.
  #[arg(long, default_value = "bench-results")]
  out: PathBuf,
  /// Keep the temporary vault copies (their paths are printed).
  #[arg(long)]
  keep_temp: bool,
  /// Where temporary vaults are created (default: the system temp directory).
  #[arg(long, value_name = "DIR")]
  temp_dir: Option<PathBuf>,
  /// Quality mode without a cross-encoder: rescore by sentence windows (the opt-in ablation).
  #[arg(long)]
  sentence_rescore: bool,
}

impl BenchCommonArgs {
  fn common(&self) -> Result<BenchCommon> {
    Ok(BenchCommon {
      modes: parse_modes(&self.modes)?,
      out: self.out.clone(),
      keep_temp: self.keep_temp,
      temp_root: self.temp_dir.clone(),
      sentence_rescore: self.sentence_rescore,
      log: stderr_log(),
    })
  }
}

#[derive(Subcommand, Debug)]
enum BenchSuite {
  /// Automatic-recall precision: cross-collection negatives vs. hit rate on positives.
  Precision {
    /// The pi fixture.json (its sibling vault/ is used).
    #[arg(long)]
    pi: PathBuf,
    /// A BEIR-style directory (e.g. SciFact).
    #[arg(long)]
    beir: PathBuf,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
  /// Scale: a deterministic synthetic vault of N pages.
  Scale {
    /// Pages of the synthetic vault.
    #[arg(long)]
    pages: usize,
    /// Embed a separate M-page vault of the same generator instead of all N pages.
    #[arg(long, value_name = "M")]
    vector_sample: Option<usize>,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Synthetic queries per vault.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
}

fn run_bench(args: BenchArgs, out: &mut impl Write) -> Result<()> {
  let started = Instant::now();
  let output = match args.suite {
    Some(BenchSuite::Precision { pi, beir, common }) => run_precision(&pi, &beir, &common.common()?)?,
    Some(BenchSuite::Scale { pages, vector_sample, seed, queries, common }) => {
      run_scale(&ScaleOptions { pages, vector_sample, seed, queries, common: common.common()? })?
    }
    None => {
      let source = args.source.ok_or_else(|| Error::invalid("bench needs a SOURCE"))?;
      let opts = SetBenchOptions {
        common: args.common.common()?,
        set: args.set,
        baseline: args.baseline,
        depth: args.depth,
      };
      run_set_bench(&source, &opts)?
    }
  };
  writeln!(out, "{}", output.markdown).ok();
  for f in &output.files {
    writeln!(out, "wrote {}", f.display()).ok();
  }
  writeln!(out, "bench finished in {:.1} s", started.elapsed().as_secs_f64()).ok();
  Ok(())
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

fn vault_paths(root: &Path) -> Result<VaultPaths> {
  let abs = std::path::absolute(root).map_err(|e| Error::io("resolve", root, e))?;
  Ok(VaultPaths::for_root(abs))
}

/// Read `{"id","text"}` lines.
pub fn read_queries(path: &Path) -> Result<Vec<(String, String)>> {
  let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
  let mut out = Vec::new();
  for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
    let v: serde_json::Value =
      serde_json::from_str(line).map_err(|e| Error::invalid(format!("{}:{}: {e}", path.display(), i + 1)))?;
    let id = v
      .get("id")
      .or_else(|| v.get("_id"))
      .and_then(|x| x.as_str().map(str::to_string).or_else(|| Some(x.to_string())));
    let q = v.get("text").or_else(|| v.get("query")).and_then(|x| x.as_str());
    match (id, q) {
      (Some(id), Some(q)) => out.push((id, q.to_string())),
      _ => return Err(Error::invalid(format!("{}:{}: expected {{\"id\",\"text\"}}", path.display(), i + 1))),
    }
  }
  Ok(out)
}

fn execute(cli: Cli) -> Result<()> {
  let mut out = std::io::stdout().lock();
  match cli.command {
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
    Command::Status { vault, json } => {
      let s = read_index_status(&vault_paths(&vault)?);
      if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&s).unwrap_or_default()).ok();
      } else {
        writeln!(out, "state: {}\ndocuments: {} ({} canonical, {} evidence)\nchunks: {}\nembeddings pending: {}\nengine: {}",
          s.state.as_str(), s.total_documents, s.canonical_documents, s.evidence_documents, s.total_chunks, s.needs_embedding, s.engine_version).ok();
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
      let queries = read_queries(&queries)?;
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
        lines.extend(run_lines(qid, &r.results));
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
    Command::Bench(args) => run_bench(args, &mut out)?,
    Command::Reliability { harness } => run_reliability(harness, &mut out)?,
  }
  Ok(())
}

/// TREC lines of one query. Scores are the fusion keys, forced strictly decreasing so that
/// scorers that sort by score (trec_eval) see exactly our rank order.
pub fn run_lines(qid: &str, results: &[crate::retrieve::RecallResult]) -> Vec<RunLine> {
  let mut prev = f64::INFINITY;
  results
    .iter()
    .enumerate()
    .map(|(i, res)| {
      let score = res.fusion_score.min(prev - 1e-6);
      prev = score;
      RunLine { qid: qid.to_string(), docid: res.id.clone(), rank: i as u32 + 1, score }
    })
    .collect()
}

/// Run the CLI with `args` (without the program name). Returns the process exit code.
pub fn run<I: IntoIterator<Item = String>>(args: I) -> i32 {
  let argv = std::iter::once("llm-wiki-retrieval".to_string()).chain(args);
  let cli = match Cli::try_parse_from(argv) {
    Ok(c) => c,
    Err(e) => {
      let _ = e.print();
      return if e.use_stderr() { 2 } else { 0 };
    }
  };
  match crate::error::catch_panic(|| execute(cli)) {
    Ok(()) => 0,
    Err(e) => {
      eprintln!("error [{}]: {e}", e.code());
      1
    }
  }
}
