//! The development binary's command line: the user commands of [`llm_wiki_cli`] plus `bench`
//! (the benchmark suites) and `reliability` (crash injection, concurrency soak).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};

use crate::bench::{
  parse_modes, run_ann_recall, run_calibration, run_feedback, run_graph, run_long_queries, run_memory,
  run_memory_latency, run_precision, run_prompts, run_scale, run_set_bench, run_vectors_scale, run_watch,
  stderr_log, BenchCommon, BenchOutput, CalibrationOptions, FeedbackBenchOptions, GraphBenchOptions,
  LongQueryOptions, ScaleOptions, SetBenchOptions, VectorsScaleOptions, WatchBenchOptions,
};
use llm_wiki_core::error::{Error, Result};

#[derive(Parser, Debug)]
#[command(name = llm_wiki_cli::PROGRAM, version, about = "Hybrid retrieval over llm-wiki Markdown vaults (development build: benchmarks and reliability harnesses)")]
struct Cli {
  #[command(subcommand)]
  command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
  #[command(flatten)]
  User(llm_wiki_cli::Command),
  /// Benchmark an evaluation set (BEIR-style directory or the pi fixture), or run the
  /// `precision` / `scale` suites. Writes TREC runs, metrics JSON and Markdown under --out.
  Bench(Box<BenchArgs>),
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
  fn options(self, pages: usize, edits: usize, out: PathBuf) -> crate::reliability::HarnessOptions {
    crate::reliability::HarnessOptions {
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
    /// Issue 43's mix: one process runs a watcher while it edits pages and reindexes
    /// explicitly, the other reindexes (every fifth run forced), resolves conflicts and records
    /// recall feedback; both recall and report the vault ids they see.
    #[arg(long)]
    mixed: bool,
  },
  /// The "1 GB events file" fault: a synthetic `meta/events.jsonl` of `--bytes`, then
  /// `feedback rebuild`, `status`, `compact`, `rebuild` as child processes with their time and
  /// peak RSS; checks that nothing is lost and the projection is unchanged.
  Events {
    /// Stream size in bytes (default 1 GiB).
    #[arg(long, default_value_t = 1 << 30)]
    bytes: u64,
    #[arg(long, default_value_t = 14)]
    seed: u64,
    /// The CLI binary to run (default: this executable).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Markdown report (the JSON is written next to it).
    #[arg(long, default_value = "bench-results/feedback/events-1gb.md")]
    out: PathBuf,
    /// Where the temporary vault goes (default: the system temp dir).
    #[arg(long)]
    temp_root: Option<PathBuf>,
    #[arg(long)]
    keep_temp: bool,
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
  use crate::reliability::{crash, soak};
  let files = match cmd {
    ReliabilityCommand::Crash { harness, pages, kills, edits, out, recovery_timeout } => {
      crash::run_crash(&crash::CrashOptions {
        harness: harness.options(pages, edits, out),
        kills,
        recovery_timeout: std::time::Duration::from_secs(recovery_timeout),
      })?
    }
    ReliabilityCommand::Soak { harness, pages, minutes, edits, out, mixed } => {
      soak::run_soak(&soak::SoakOptions {
        harness: harness.options(pages, edits, out),
        seconds: (minutes * 60.0).round().max(1.0) as u64,
        mixed,
      })?
    }
    ReliabilityCommand::Events { bytes, seed, bin, out, temp_root, keep_temp } => {
      crate::reliability::events::run_events(&crate::reliability::events::EventsOptions {
        bytes,
        seed,
        bin,
        out,
        temp_root,
        keep_temp,
      })?
    }
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

/// `bench <SOURCE>` or `bench precision|prompts|scale ...`.
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
  #[arg(long, default_value_t = crate::bench::DEFAULT_DEPTH)]
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
  /// Keep the vault copies under DIR and reuse them on the next run (incremental reindex: the
  /// vectors of unchanged chunks are kept). Indexing figures are then not cold.
  #[arg(long, value_name = "DIR")]
  reuse_dir: Option<PathBuf>,
  /// Write every recall's evidence to FILE, one JSON line per vault pass (lexical candidates,
  /// dense list, hits with both confidences: `llm_wiki_core::retrieve::evidence`), for replaying
  /// confidence rules offline (scripts/evidence_replay.py). Each query appears once per pass of
  /// the suite (warm-up and timed).
  #[arg(long, value_name = "FILE")]
  evidence: Option<PathBuf>,
}

impl BenchCommonArgs {
  /// The suite's options; starts the evidence recording when `--evidence` asks for it (every
  /// suite builds its options here once, before its first recall).
  fn common(&self) -> Result<BenchCommon> {
    if let Some(path) = &self.evidence {
      llm_wiki_core::retrieve::evidence::record_to(path)?;
    }
    Ok(BenchCommon {
      modes: parse_modes(&self.modes)?,
      out: self.out.clone(),
      keep_temp: self.keep_temp,
      temp_root: self.temp_dir.clone(),
      sentence_rescore: self.sentence_rescore,
      reuse_dir: self.reuse_dir.clone(),
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
  /// Graph tools: graphQuery/linkPath on written multi-hop questions over the pi fixture, a
  /// synthetic vault with answers known by construction, neighbours/graphQuery latency at a
  /// larger size, wikiIndex size and time at the largest.
  Graph {
    /// The pi fixture.json (its sibling vault/ is used).
    #[arg(long)]
    pi: Option<PathBuf>,
    /// The questions over the pi fixture.
    #[arg(long, default_value = "bench-data/graph-questions-pi.json")]
    questions: PathBuf,
    /// Pages of the synthetic answer vault (0 = skip).
    #[arg(long, default_value_t = 2_000)]
    synth_pages: usize,
    /// Pages of the latency vault (0 = skip).
    #[arg(long, default_value_t = 20_000)]
    latency_pages: usize,
    /// Pages of the wikiIndex vault (0 = skip).
    #[arg(long, default_value_t = 0)]
    index_pages: usize,
    /// Planted clusters (questions) per synthetic vault.
    #[arg(long, default_value_t = 40)]
    clusters: usize,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
  /// Memory bundles on the pi vault (curated relation overlay), with the typed-link ablation;
  /// with `--beir`, warm recallMemory vs recallWiki latency on that collection.
  Memory {
    /// The pi fixture.json (its sibling vault/ is used).
    #[arg(long, required_unless_present = "beir")]
    pi: Option<PathBuf>,
    /// A BEIR-style directory (e.g. SciFact): warm latency of recallMemory against recallWiki.
    #[arg(long)]
    beir: Option<PathBuf>,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
  /// Recall feedback on the pi vault: the "without feedback" ablation with simulated judgments
  /// of the train queries, recall latency with a large event stream, session-ledger savings on
  /// a scripted session.
  Feedback {
    /// The pi fixture.json (its sibling vault/ is used).
    #[arg(long)]
    pi: PathBuf,
    /// Events in the generated stream (latency part).
    #[arg(long, default_value_t = 100_000)]
    events: usize,
    /// The scripted session.
    #[arg(long, default_value = "bench-data/feedback/session-pi.json")]
    session: PathBuf,
    /// Session budget in characters (savings part).
    #[arg(long, default_value_t = 24_000)]
    session_budget: usize,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
  /// Long conversational prompts (an `llm-wiki-prompts/1` file) and/or query sets of another
  /// domain (`--unrelated`) against one vault: automatic hit rate on positives, injections on
  /// negatives (per file), MRR@10.
  Prompts {
    /// The prompt set (e.g. bench-data/prompts-pi.json).
    #[arg(long)]
    prompts: Option<PathBuf>,
    /// Queries of another domain, each a negative on this vault (repeatable; counted per file):
    /// JSONL with `text` (a BEIR queries.jsonl, bench-data/long-queries-scifact.jsonl) or `query`
    /// (a calibrate JSONL such as bench-data/short-negatives.jsonl) on every line.
    #[arg(long)]
    unrelated: Vec<PathBuf>,
    /// The vault (a directory with .llm-wiki/, the pi fixture, or a BEIR-style directory).
    #[arg(long)]
    vault: PathBuf,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
  /// Calibration: fit the embedding model's cosine mapping (the `calibrate` procedure) on unjudged
  /// abstracts of a BEIR set queried by their titles plus cross-domain negatives, and write
  /// reliability curves (top-1 score bucket → precision) per mode.
  Calibration {
    /// BEIR-style set whose abstracts judged by no test query form the split (e.g. SciFact).
    #[arg(long)]
    beir: PathBuf,
    /// BEIR-style set of another domain for the unrelated queries (e.g. locomo-dev).
    #[arg(long)]
    negatives: PathBuf,
    /// Written unrelated prompts (calibrate JSONL, `related` empty) run on the split vault
    /// (repeatable: each file's `group` fields name its rows in the per-group counts).
    #[arg(long)]
    extra_negatives: Vec<PathBuf>,
    /// Every N-th unjudged abstract.
    #[arg(long, default_value_t = 8)]
    stride: usize,
    /// Share of unrelated queries allowed at or above the automatic floor.
    #[arg(long, default_value_t = llm_wiki_core::retrieve::calibrate::DEFAULT_MAX_NEGATIVE_RATE)]
    max_negative_rate: f64,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
  /// Long multi-sentence queries: each mode of --modes vs plain BM25 (Snowball + stop words, k1
  /// 1.2, b 0.75) on a written query set and on the collection's own queries, with the automatic
  /// policy's hits.
  LongQueries {
    /// BEIR-style directory (e.g. SciFact).
    #[arg(long)]
    beir: PathBuf,
    /// Written queries, {"id","text"} JSONL (e.g. bench-data/long-queries-scifact.jsonl).
    #[arg(long)]
    queries: PathBuf,
    /// Their judgments, BEIR qrels TSV.
    #[arg(long)]
    qrels: PathBuf,
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
  /// Watch: edit → searchable latency with a watcher running (single edits, edits while a
  /// checkout-sized burst is digested) and an idle watcher's CPU time; on a synthetic vault.
  Watch {
    /// Pages of the synthetic vault.
    #[arg(long, default_value_t = 2000)]
    pages: usize,
    /// Edits timed (alone, and again right after the burst).
    #[arg(long, default_value_t = 20)]
    edits: usize,
    /// Files written by the checkout-like burst.
    #[arg(long, default_value_t = 5000)]
    burst: usize,
    /// Seconds of idle watching measured.
    #[arg(long, default_value_t = 10.0)]
    idle_seconds: f64,
    /// The watcher's debounce (ms).
    #[arg(long, default_value_t = 200)]
    debounce_ms: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
  /// ANN vs exact dense search over an indexed vault's own vectors (indexed with
  /// `LLM_WIKI_ANN=on`, or large enough), with a BEIR set's queries: latency and recall@10/@64.
  AnnRecall {
    /// The vault (its live store must list an ANN index).
    #[arg(long)]
    vault: PathBuf,
    /// BEIR-style directory whose queries.jsonl is embedded.
    #[arg(long)]
    beir: PathBuf,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
  /// Vectors at scale: full embedding of a synthetic vault (time, RSS, disk curve) and/or warm
  /// recall over the real number of (synthetic) vectors, and the exact scan alone.
  VectorsScale {
    /// Pages of the synthetic vault.
    #[arg(long)]
    pages: usize,
    /// Largest page file of the generator (default 50,000 ≈ 17 chunks/page; 4,000 ≈ 2).
    #[arg(long, default_value_t = 50_000)]
    max_bytes: usize,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Synthetic queries.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Run the real vector phase over every chunk.
    #[arg(long)]
    embed: bool,
    /// Stop the vector phase after this many seconds (committed batches are kept; the report
    /// extrapolates, labelled).
    #[arg(long, value_name = "SECS")]
    embed_budget: Option<f64>,
    /// Give every chunk a synthetic vector (real count) and time warm lexical + hybrid recall.
    #[arg(long)]
    synthetic_vectors: bool,
    /// Also time the exact scan over N synthetic rows (no vault).
    #[arg(long, value_name = "N")]
    scan_rows: Option<usize>,
    /// Synthetic vectors around C seeded centres instead of uniformly random (0 = uniform, the
    /// worst case for an ANN graph).
    #[arg(long, value_name = "C", default_value_t = 0)]
    vector_clusters: usize,
    #[command(flatten)]
    common: BenchCommonArgs,
  },
}

fn run_bench(args: BenchArgs, out: &mut impl Write) -> Result<()> {
  let started = Instant::now();
  let output = match args.suite {
    Some(BenchSuite::Precision { pi, beir, common }) => run_precision(&pi, &beir, &common.common()?)?,
    Some(BenchSuite::Graph { pi, questions, synth_pages, latency_pages, index_pages, clusters, common }) => {
      run_graph(&GraphBenchOptions {
        pi,
        questions,
        synth_pages,
        latency_pages,
        index_pages,
        clusters,
        common: common.common()?,
      })?
    }
    Some(BenchSuite::Memory { pi, beir, common }) => {
      let common = common.common()?;
      let mut output = BenchOutput::default();
      for run in [pi.map(|p| run_memory(&p, &common)), beir.map(|b| run_memory_latency(&b, &common))] {
        if let Some(o) = run.transpose()? {
          output.files.extend(o.files);
          output.markdown.push_str(&o.markdown);
        }
      }
      output
    }
    Some(BenchSuite::Feedback { pi, events, session, session_budget, common }) => {
      run_feedback(&pi, &FeedbackBenchOptions { common: common.common()?, events, session, session_budget })?
    }
    Some(BenchSuite::Prompts { prompts, unrelated, vault, common }) => {
      run_prompts(prompts.as_deref(), &unrelated, &vault, &common.common()?)?
    }
    Some(BenchSuite::Calibration { beir, negatives, extra_negatives, stride, max_negative_rate, common }) => {
      run_calibration(&CalibrationOptions {
        beir,
        negatives,
        extra_negatives,
        stride,
        max_negative_rate,
        common: common.common()?,
      })?
    }
    Some(BenchSuite::LongQueries { beir, queries, qrels, common }) => {
      run_long_queries(&LongQueryOptions { beir, queries, qrels, common: common.common()? })?
    }
    Some(BenchSuite::Scale { pages, vector_sample, seed, queries, common }) => {
      run_scale(&ScaleOptions { pages, vector_sample, seed, queries, common: common.common()? })?
    }
    Some(BenchSuite::Watch { pages, edits, burst, idle_seconds, debounce_ms, seed, common }) => {
      run_watch(&WatchBenchOptions {
        pages,
        edits,
        burst,
        idle_seconds,
        debounce_ms,
        seed,
        common: common.common()?,
      })?
    }
    Some(BenchSuite::AnnRecall { vault, beir, common }) => run_ann_recall(&vault, &beir, &common.common()?)?,
    Some(BenchSuite::VectorsScale {
      pages,
      max_bytes,
      seed,
      queries,
      embed,
      embed_budget,
      synthetic_vectors,
      scan_rows,
      vector_clusters,
      common,
    }) => run_vectors_scale(&VectorsScaleOptions {
      pages,
      max_bytes,
      seed,
      queries,
      embed,
      embed_budget_secs: embed_budget,
      synthetic: synthetic_vectors,
      scan_rows,
      vector_clusters,
      common: common.common()?,
    })?,
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
  llm_wiki_core::retrieve::evidence::finish()?;
  writeln!(out, "{}", output.markdown).ok();
  for f in &output.files {
    writeln!(out, "wrote {}", f.display()).ok();
  }
  writeln!(out, "bench finished in {:.1} s", started.elapsed().as_secs_f64()).ok();
  Ok(())
}

/// Run the development CLI with `args` (without the program name). Returns the process exit code.
pub fn run<I: IntoIterator<Item = String>>(args: I) -> i32 {
  llm_wiki_cli::run_with(args, |cli: Cli| {
    let mut out = std::io::stdout().lock();
    match cli.command {
      Command::User(command) => llm_wiki_cli::execute(command, &mut out),
      Command::Bench(args) => run_bench(*args, &mut out),
      Command::Reliability { harness } => run_reliability(harness, &mut out),
    }
  })
}
