//! Audit export: `recordToolCall`, the host's line in the vault's tool-call audit ledger
//! (`llm_wiki_core::audit`: hashed arguments and query, duration, outcome; bounded, rotated,
//! off with the vault's `"toolAudit": false` or `LLM_WIKI_TOOL_AUDIT=off`).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use llm_wiki_core::audit as core_audit;

use crate::types::VaultPaths;
use crate::{invalid, task};

/// One tool call of an agent (MCP or Pi).
#[napi(object, object_to_js = false)]
pub struct ToolCallInput {
  /// Tool name (`wiki_recall`, …; at most 64 characters are kept).
  pub tool: String,
  /// The call's arguments: hashed (sha256 of their canonical JSON, 16 hex characters), never
  /// stored.
  pub args: Option<serde_json::Value>,
  /// The call's query, when it has one: stored as the feedback stream's query hash and its
  /// length, never as text.
  pub query: Option<String>,
  /// Wall time of the call in milliseconds.
  pub duration_ms: f64,
  /// `ok` or `error` (anything else is recorded as `error`).
  #[napi(ts_type = "'ok' | 'error'")]
  pub outcome: String,
  /// The error's stable code, when the call failed.
  pub code: Option<String>,
  /// The calling surface (`mcp`, `pi`).
  pub surface: Option<String>,
}

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
    if call.tool.trim().is_empty() {
      return Err(invalid("tool must be a non-empty string"));
    }
    Ok(core_audit::record_tool_call(
      &paths,
      &core_audit::ToolCall {
        tool: call.tool,
        args: call.args.unwrap_or(serde_json::Value::Null),
        query: call.query,
        duration_ms: call.duration_ms,
        outcome: call.outcome,
        code: call.code,
        surface: call.surface,
      },
    ))
  })
}
