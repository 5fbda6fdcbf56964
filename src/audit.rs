//! Audit export: `recordToolCall`, the host's line in the vault's tool-call audit ledger
//! (`llm_wiki_core::audit`: hashed arguments and query, duration, outcome; bounded, rotated,
//! off with the vault's `"toolAudit": false` or `LLM_WIKI_TOOL_AUDIT=off`).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::audit::{self as core_audit, ToolCall as ToolCallInput};

use crate::task;
use crate::types::VaultPaths;

/// Record one agent tool call in the vault's audit ledger `meta/audit/tool-calls.jsonl`
/// (rotated at 1 MiB, two rotated files kept). Resolves `disabled` when the ledger is off and
/// `dropped` with a diagnostic when it cannot be written: it never rejects for the ledger's
/// state, so a tool wrapper can await it without changing the tool's outcome.
#[napi(catch_unwind, ts_return_type = "Promise<ToolAuditOutcome>")]
pub fn record_tool_call<'env>(
  env: &'env Env,
  paths: VaultPaths,
  call: ToolCallInput,
) -> Result<PromiseRaw<'env, core_audit::AuditOutcome>> {
  task::spawn(env, None, task::Priority::Interactive, move || {
    let paths = paths.resolve()?;
    call.check()?;
    Ok(core_audit::record_tool_call(&paths, &call))
  })
}
