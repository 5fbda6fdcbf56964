//! Node binding of the llm-wiki retrieval engine: a thin layer of `#[napi]` glue. Every export
//! validates its input and catches panics. The async ones (reindex, recall, status, downloads,
//! the CLI) run the engine on the addon's own job threads (`task.rs`; never the JS thread, never
//! libuv's pool) and reject with the engine's stable `err.code`; `configure`, `modelStatus`,
//! `addOnnxRuntimeCandidates`, `resolveVaultPaths`, `personalVaultPaths` and `engineInfo` are
//! synchronous and cheap (they never load or index anything, nor wait for a load).
#![deny(clippy::all)]

mod args;
pub mod audit;
mod error;
pub mod feedback;
pub mod graph_tools;
pub mod memory;
pub mod resolve;
mod session;
mod task;
#[cfg(feature = "test-hooks")]
mod test_hooks;
mod types;
pub mod watch;

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;

use llm_wiki_core::retrieve::{self as core_retrieve, RetrievalMode};
use llm_wiki_core::store::reindex::{reindex_wiki as core_reindex_wiki, VaultTarget};
use llm_wiki_core::store::status::{read_index_status_with, StatusOptions as CoreStatusOptions};
use llm_wiki_core::store::{Component, ProgressSink, ReindexOptions, ReindexProgressEvent, Scope};
use llm_wiki_core::util::num::sat_u32;
use llm_wiki_core::vault::paths as core_paths;

use crate::args::{cancel_flag, thread_count};
use crate::error::{core_err, invalid, Outcome};
use crate::types::*;

/// Reindex the vaults selected by `input.vault` (default: the active vault), sequentially.
/// Resolves with one result per vault; a busy lock, a cancellation or a failure is reported in
/// that vault's `result` (`ok: false`), not as a rejection.
#[napi(catch_unwind, ts_return_type = "Promise<WikiReindexResult>")]
pub fn reindex_wiki<'env>(
  env: &'env Env,
  active_paths: VaultPaths,
  input: Option<WikiReindexInput>,
) -> Result<PromiseRaw<'env, WikiReindexResult>> {
  let input = input.unwrap_or(WikiReindexInput {
    scope: None,
    components: None,
    force: None,
    vault: None,
    signal: None,
    on_progress: None,
    aborted: None,
    threads: None,
    removals_only: None,
  });
  let cancel = cancel_flag(input.signal.as_ref(), input.aborted.unwrap_or(false));
  let progress: Option<ProgressSink> = input.on_progress.map(|cb| {
    let cb = Arc::new(cb);
    Arc::new(move |event: ReindexProgressEvent| {
      cb.call(event, ThreadsafeFunctionCallMode::NonBlocking);
    }) as ProgressSink
  });
  let (scope, components, force, vault, threads) =
    (input.scope, input.components, input.force, input.vault, thread_count(input.threads));
  let removals_only = input.removals_only.unwrap_or(false);
  let job_cancel = cancel.clone();
  task::spawn(env, Some(&job_cancel), task::Priority::Background, move || {
    let paths = active_paths.resolve()?;
    let scope = Scope::parse(scope.as_deref().unwrap_or("changed")).map_err(core_err)?;
    let components = Component::parse_list(components.as_deref()).map_err(core_err)?;
    let target = VaultTarget::parse(vault.as_deref().unwrap_or("active")).map_err(core_err)?;
    let opts = ReindexOptions {
      scope,
      components,
      force: force.unwrap_or(false),
      cancel,
      progress,
      threads,
      removals_only,
      ..Default::default()
    };
    Ok(core_reindex_wiki(&paths, target, &opts))
  })
}

/// Status of a vault's index from its small state files (and a stat-only page scan); never opens
/// the index and never loads a model.
#[napi(catch_unwind, ts_return_type = "Promise<IndexStatus>")]
pub fn read_index_status<'env>(
  env: &'env Env,
  paths: VaultPaths,
  options: Option<StatusOptions>,
) -> Result<PromiseRaw<'env, IndexStatus>> {
  let check_pages = options.and_then(|o| o.check_pages).unwrap_or(true);
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    let opts = CoreStatusOptions { check_pages, ..Default::default() };
    Ok(read_index_status_with(&paths, &opts))
  })
}

fn parse_mode(
  opts: &RecallWikiOptions,
  diagnostics: &mut Vec<core_retrieve::recall::RecallDiagnostic>,
) -> Outcome<RetrievalMode> {
  if let Some(m) = &opts.mode {
    return RetrievalMode::parse(m).map_err(core_err);
  }
  match opts.config.as_ref().and_then(|c| c.retrieval_mode.as_deref()) {
    None => Ok(RetrievalMode::default()),
    Some(m) => Ok(RetrievalMode::parse(m).unwrap_or_else(|_| {
      diagnostics.push(core_retrieve::recall::RecallDiagnostic {
        code: "config_invalid_retrieval_mode".into(),
        message: format!(
          "retrievalMode {m:?} is not one of lexical | hybrid | adaptive | quality; using adaptive"
        ),
      });
      RetrievalMode::default()
    })),
  }
}

/// Recall pages for a query under a policy. Empty `results` means no reliable memory was found.
/// An empty or over-long query (or sub-query) resolves with a diagnostic (`recall_query_empty`,
/// `recall_query_too_long`); invalid arguments (more than 10 sub-queries, an unknown mode)
/// reject with `invalid_argument`.
#[napi(catch_unwind, ts_return_type = "Promise<RecallResponse>")]
pub fn recall_wiki<'env>(
  env: &'env Env,
  paths: VaultPaths,
  raw_query: String,
  opts: RecallWikiOptions,
) -> Result<PromiseRaw<'env, RecallResponse>> {
  let cancel = cancel_flag(opts.signal.as_ref(), opts.aborted.unwrap_or(false));
  let mut config_diagnostics = Vec::new();
  let mode = parse_mode(&opts, &mut config_diagnostics);
  let subqueries: Outcome<Vec<core_retrieve::SubQuery>> = opts
    .subqueries
    .iter()
    .flatten()
    .map(|s| match s.r#type.as_str() {
      "lex" => Ok(core_retrieve::SubQuery::Lex(s.query.clone())),
      "vec" => Ok(core_retrieve::SubQuery::Vec(s.query.clone())),
      o => Err(invalid(format!("subquery type must be lex | vec, got {o:?}"))),
    })
    .collect();
  let sentence_rescore = opts.sentence_rescore.unwrap_or(false);
  let rerank_timeout = opts.rerank_timeout_ms.map(|ms| std::time::Duration::from_millis(ms as u64));
  let policy = opts.policy.clone();
  let feedback = opts.feedback.unwrap_or(true);
  let session = opts.session.clone().map(|s| s.check().map(|()| s)).transpose().map_err(core_err);
  let job_cancel = cancel.clone();
  task::spawn(env, Some(&job_cancel), task::Priority::Interactive, move || {
    #[cfg(feature = "test-hooks")]
    test_hooks::panic_on_marked_query(&raw_query);
    let paths = paths.resolve()?;
    let mode = mode?;
    let mut recall_opts =
      core_retrieve::RecallOptions { cancel, ..core_retrieve::RecallOptions::new(policy, mode) };
    recall_opts.subqueries = subqueries?;
    if let Some(t) = rerank_timeout {
      recall_opts.rerank_timeout = t;
    }
    recall_opts.sentence_rescore = sentence_rescore;
    recall_opts.feedback = feedback;
    recall_opts.session = session?;
    let mut response = core_retrieve::recall_wiki(&paths, &raw_query, &recall_opts).map_err(core_err)?;
    response.diagnostics.splice(0..0, config_diagnostics);
    Ok(response)
  })
}

/// The vault that applies to a working directory: the project vault found from `cwd`
/// (itself, `$WIKI_HOME`, or the nearest ancestor), else the personal vault.
#[napi(catch_unwind)]
pub fn resolve_vault_paths(cwd: String) -> Result<VaultPaths, crate::error::Code> {
  let p = absolute_path("cwd", &cwd)?;
  Ok(VaultPaths::from(&core_paths::resolve_vault_paths(&p)))
}

/// Paths of the personal vault (`$WIKI_HOME` or the home directory, new layout).
#[napi(catch_unwind)]
pub fn personal_vault_paths() -> VaultPaths {
  VaultPaths::from(&core_paths::personal_vault_paths())
}

/// Engine name, versions and limits.
#[napi]
pub fn engine_info() -> EngineInfo {
  EngineInfo {
    name: llm_wiki_core::store::layout::ENGINE_NAME.into(),
    version: llm_wiki_core::store::layout::ENGINE_VERSION.into(),
    index_format_version: llm_wiki_core::store::layout::INDEX_FORMAT_VERSION,
    query_max_chars: core_retrieve::query::QUERY_MAX_CHARS as u32,
    explicit_floor: core_retrieve::confidence::EXPLICIT_FLOOR,
    automatic_floor: core_retrieve::confidence::AUTOMATIC_FLOOR,
  }
}

/// Run the command-line interface with `args` (without the program name) on a job thread.
/// Resolves with the process exit code; output goes to the process's stdout/stderr.
#[napi(catch_unwind, ts_return_type = "Promise<number>")]
pub fn run_cli<'env>(env: &'env Env, args: Vec<String>) -> Result<PromiseRaw<'env, i32>> {
  #[cfg(feature = "test-hooks")]
  if let Some(n) = test_hooks::cli_hook(&args) {
    return task::spawn(env, None, task::Priority::Interactive, move || Ok(n));
  }
  task::spawn(env, None, task::Priority::Interactive, move || Ok(llm_wiki_cli::run(args)))
}

/// [`llm_wiki_core::fsutil::absolute_path`] for a synchronous export.
fn absolute_path(name: &str, v: &str) -> Result<std::path::PathBuf, crate::error::Code> {
  llm_wiki_core::fsutil::absolute_path(name, v).map_err(|e| core_err(e).into_sync())
}

/// Change engine-wide model and runtime options. Only the options present in `options` change:
/// an omitted (or `undefined`) option keeps its value, `null` resets it to its default
/// (environment variable, then built-in default), so `configure({})` changes nothing. Loaded
/// models that the change makes stale (another model directory, another thread count, dense
/// retrieval switched off) are released; the others stay loaded. Synchronous and cheap: nothing is
/// loaded here, and it never waits for a model that is loading.
#[napi(catch_unwind, ts_args_type = "options: EngineOptions")]
pub fn configure(env: &Env, options: Object) -> Result<(), crate::error::Code> {
  use llm_wiki_core::models::{ConfigChange, Setting};
  // Read the raw object: `null` (reset) and an absent key (keep) must stay apart, and
  // `EngineOptions` only declares the shape for TypeScript.
  fn option<T: FromNapiValue>(
    env: &Env,
    options: &Object,
    key: &str,
  ) -> Result<Setting<T>, crate::error::Code> {
    let bad = |e: Error| invalid(format!("configure: {key}: {}", e.reason)).into_sync();
    let value: Unknown = options.get_named_property(key).map_err(bad)?;
    Ok(match value.get_type().map_err(bad)? {
      ValueType::Undefined => Setting::Keep,
      ValueType::Null => Setting::Reset,
      // SAFETY: `value` is a live value of this call's environment.
      _ => Setting::Set(unsafe { T::from_napi_value(env.raw(), value.raw()) }.map_err(bad)?),
    })
  }
  let paths = |key: &str| {
    option::<Vec<String>>(env, &options, key)?.try_map(|v| v.iter().map(|p| absolute_path(key, p)).collect())
  };
  let path = |key: &str| option::<String>(env, &options, key)?.try_map(|p| absolute_path(key, &p));
  let change = ConfigChange {
    model_roots: paths("modelRoots")?,
    embed_model: path("embedModel")?,
    rerank_model: path("rerankModel")?,
    runtime_lib: path("onnxRuntimePath")?,
    runtime_candidates: paths("onnxRuntimeCandidates")?,
    threads: match option::<u32>(env, &options, "threads")? {
      Setting::Set(0) => Setting::Reset,
      t => t.map(|t| thread_count(Some(t))),
    },
    idle_release: option::<u32>(env, &options, "idleReleaseSeconds")?
      .map(|s| std::time::Duration::from_secs(s as u64)),
    disabled: option::<bool>(env, &options, "dense")?.map(|dense| !dense),
  };
  llm_wiki_core::models::configure(change);
  Ok(())
}

/// Add ONNX Runtime library candidates, tried after `configure({onnxRuntimeCandidates})`. Only
/// adds (duplicates are ignored): it never changes another setting or releases a model. The
/// package entry point passes the `onnxruntime-node` package's library here when it is installed.
#[napi(catch_unwind)]
pub fn add_onnx_runtime_candidates(paths: Vec<String>) -> Result<(), crate::error::Code> {
  let paths = paths.iter().map(|p| absolute_path("paths", p)).collect::<Result<Vec<_>, _>>()?;
  llm_wiki_core::models::add_runtime_candidates(paths);
  Ok(())
}

/// Add model roots, searched after `configure({modelRoots})` and `LLM_WIKI_MODELS_DIR`, before
/// the user cache. Only adds (duplicates are ignored). The package entry point passes a source
/// checkout's `.models/` here when it exists (where `scripts/fetch_models.py` builds the models),
/// so the demo, tests, CLI and examples run from a checkout find them without a variable.
#[napi(catch_unwind)]
pub fn add_model_roots(paths: Vec<String>) -> Result<(), crate::error::Code> {
  let paths = paths.iter().map(|p| absolute_path("paths", p)).collect::<Result<Vec<_>, _>>()?;
  llm_wiki_core::models::add_model_roots(paths);
  Ok(())
}

/// Which models and ONNX Runtime library the engine would use; reads manifests only.
#[napi(catch_unwind)]
pub fn model_status() -> ModelStatus {
  use llm_wiki_core::models as m;
  let c = m::effective_config();
  let runtime = m::runtime::locate(c.runtime_lib.as_deref(), &c.runtime_candidates, &c.model_roots);
  ModelStatus {
    embed_model: m::embed_model_id(&c),
    embed_dir: m::resolve_embed_dir(&c).map(|d| d.to_string_lossy().into_owned()),
    rerank_model: m::rerank_model_id(&c),
    onnx_runtime_path: runtime.as_ref().ok().map(|p| p.to_string_lossy().into_owned()),
    onnx_runtime_error: runtime.err().map(|e| e.to_string()),
    loaded_models: sat_u32(m::loaded_models()),
    threads: sat_u32(c.threads),
    dense_enabled: !c.disabled,
  }
}

/// Download a model (default: all-MiniLM-L6-v2 int8 ONNX from the Hugging Face hub, pinned to a
/// commit with known sha256s) into a model directory, resuming partial files and verifying every
/// file's sha256; a complete verified directory of the same id is reused without network access
/// (its manifest updated with the settings that keep vectors valid; see `DownloadModelOptions`).
/// A revision
/// that is not a commit id, a file without a sha256 or a `local` name outside the model
/// directory rejects with `invalid_argument` before anything is fetched.
#[napi(catch_unwind, ts_return_type = "Promise<DownloadedModel>")]
pub fn download_model<'env>(
  env: &'env Env,
  options: Option<DownloadModelOptions>,
) -> Result<PromiseRaw<'env, DownloadedModel>> {
  use llm_wiki_core::models::fetch;
  let o = options.unwrap_or(DownloadModelOptions {
    dir: None,
    base_url: None,
    repo: None,
    revision: None,
    files: None,
    id: None,
    kind: None,
    dims: None,
    pooling: None,
    max_length: None,
    max_batch: None,
    positive_class: None,
    query_prefix: None,
    document_prefix: None,
    chunk_tokens: None,
    on_progress: None,
    signal: None,
    aborted: None,
  });
  let cancel = cancel_flag(o.signal.as_ref(), o.aborted.unwrap_or(false));
  let progress = o.on_progress.map(Arc::new);
  let dir = o.dir;
  let request = fetch::DownloadRequest {
    base_url: o.base_url,
    repo: o.repo,
    revision: o.revision,
    files: o.files,
    id: o.id,
    kind: o.kind,
    dims: o.dims.map(|d| d as usize),
    pooling: o.pooling,
    max_length: o.max_length.map(|m| m as usize),
    max_batch: o.max_batch.map(|b| b as usize),
    positive_class: o.positive_class.map(|c| c as usize),
    query_prefix: o.query_prefix,
    document_prefix: o.document_prefix,
    chunk_tokens: o.chunk_tokens.map(|n| n as usize),
  };
  let job_cancel = cancel.clone();
  task::spawn(env, Some(&job_cancel), task::Priority::Background, move || {
    let spec = fetch::DownloadSpec::from_request(request).map_err(core_err)?;
    let dir = match dir {
      Some(d) => llm_wiki_core::fsutil::absolute_path("dir", &d).map_err(core_err)?,
      None => fetch::default_download_dir(),
    };
    let md = fetch::download_model(&spec, &dir, &cancel, &mut |p| {
      if let Some(cb) = &progress {
        cb.call(p, ThreadsafeFunctionCallMode::NonBlocking);
      }
    })
    .map_err(core_err)?;
    Ok(DownloadedModel {
      id: md.manifest.id.clone(),
      dir: md.dir.to_string_lossy().into_owned(),
      kind: format!("{:?}", md.manifest.kind).to_lowercase(),
      dims: sat_u32(md.manifest.dims),
    })
  })
}

// ── Client compatibility (issue 12): recovery and vault identity ───────────────────────────

/// Start-up recovery of the active vault's store (the extension's `recoverQmdIndex`): under the
/// writer lock, removes what an interrupted writer left and checks the published store. Resolves
/// `{ok: false}` with `qmd_index_busy` (and `qmd_migration_deferred` when the TypeScript
/// release's writer holds a QMD store) when the store is busy; never rebuilds anything.
#[napi(catch_unwind, ts_return_type = "Promise<RecoverResult>")]
pub fn recover_index<'env>(
  env: &'env Env,
  paths: VaultPaths,
) -> Result<PromiseRaw<'env, llm_wiki_core::store::recover::RecoverResult>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    Ok(llm_wiki_core::store::recover::recover_index(&paths))
  })
}

/// The vault's stable id from `config.json`, backfilled once (atomically, other keys kept) when
/// absent. Rejects with `config_invalid` (missing, unreadable, malformed or non-object config)
/// or `config_invalid_vault_id` (a `vault_id` that is not a v4 UUID), never touching the file.
#[napi(catch_unwind, ts_return_type = "Promise<string>")]
pub fn ensure_vault_id<'env>(env: &'env Env, paths: VaultPaths) -> Result<PromiseRaw<'env, String>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    llm_wiki_core::vault::config::ensure_vault_id(&paths).map_err(core_err)
  })
}

/// Make a plain folder of Markdown notes (an Obsidian vault, a `docs/` folder) indexable: the one
/// explicit step before `reindexWiki({root})` on a folder without `.llm-wiki/`. Creates only
/// `<root>/.llm-wiki-retrieval/` (`config.json`, `.gitignore`; the index goes under its `meta/`)
/// and never writes a note. Notes need no frontmatter: the title is `title:`, else the first
/// `# ` heading, else the file name; `[[wikilinks]]`, `tags:` and inline `#tags` count; dot
/// folders (`.obsidian/`, `.trash/`, `.git/`) and `node_modules/` are skipped. Idempotent.
/// Rejects, writing nothing, with `vault_init_not_found`, `vault_init_not_directory`,
/// `vault_init_unreadable`, `vault_init_no_markdown` or `vault_init_inside_vault`;
/// `invalid_argument` for a relative path.
#[napi(catch_unwind, ts_return_type = "Promise<InitVaultResult>")]
pub fn init_vault<'env>(
  env: &'env Env,
  root: String,
) -> Result<PromiseRaw<'env, llm_wiki_core::vault::init::InitOutcome>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let root = llm_wiki_core::fsutil::absolute_path("root", &root).map_err(core_err)?;
    llm_wiki_core::vault::init::init_vault(&root).map_err(core_err)
  })
}
