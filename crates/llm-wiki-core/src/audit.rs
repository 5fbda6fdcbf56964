//! The audit ledger of agent tool calls (issue 42 item 8; seed 004's `logCall`): one JSON line
//! per call of a wiki tool through MCP or Pi, local to the vault, in
//! `<meta>/audit/tool-calls.jsonl`. A line holds the tool's name, a hash of its arguments, a
//! hash of its query, the query's length, the duration and the outcome (and error code) — never
//! argument or query text, so the ledger can be kept without keeping what was asked. It is for
//! the operator's own analysis and goes to no human-facing log (not `meta/log.md`, not the OKF
//! log, not stderr).
//!
//! Bounded and rotated: when the file passes [`MAX_BYTES`] it becomes `tool-calls.1.jsonl`
//! (the previous `.1` becomes `.2`, the previous `.2` is dropped), so the ledger never holds
//! more than `(ROTATIONS + 1) × MAX_BYTES` plus one line. Appends and rotations hold the advisory
//! lock `<meta>/audit/audit.lock` at most [`LOCK_WAIT`]; a busy lock drops the line (`dropped`),
//! an I/O error is a diagnostic: recording never fails the tool call.
//!
//! Off switch: the vault's `config.json` key `"toolAudit": false`, or the environment variable
//! `LLM_WIKI_TOOL_AUDIT` set to `0`, `off` or `false` (any vault) — then nothing is written.
//!
//! The constants are chosen, not fitted: 1 MiB holds ≈ 4,000 lines of ≈ 250 bytes.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::diagnostic::RecallDiagnostic;
use crate::util::file_lock::{lock_within, HeldLock};
use crate::util::hash::hex;
use crate::vault::VaultPaths;

/// Directory of the audit ledger under `meta/`.
pub const AUDIT_DIR: &str = "audit";
/// The live file.
pub const AUDIT_FILE: &str = "tool-calls.jsonl";
/// Size past which the live file is rotated.
pub const MAX_BYTES: u64 = 1 << 20;
/// Rotated files kept (`tool-calls.1.jsonl` … `tool-calls.<ROTATIONS>.jsonl`).
pub const ROTATIONS: u32 = 2;
/// Longest wait for the ledger's lock.
pub const LOCK_WAIT: Duration = Duration::from_millis(100);
/// Longest tool name or error code kept (longer ones are cut).
const MAX_NAME_CHARS: usize = 64;
/// Environment variable that turns the ledger off for every vault (`0`, `off`, `false`).
pub const ENV_SWITCH: &str = "LLM_WIKI_TOOL_AUDIT";
/// Vault config key that turns the ledger off for the vault (`false`).
pub const CONFIG_KEY: &str = "toolAudit";

/// One tool call of an agent (MCP or Pi), as the host reports it (`recordToolCall`).
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_to_js = false, js_name = "ToolCallInput"))]
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
  /// Tool name (`wiki_recall`, …; at most 64 characters are kept); must not be blank.
  pub tool: String,
  /// The call's arguments: hashed (sha256 of their canonical JSON, 16 hex characters), never
  /// stored. Absent: hashed as `null`.
  pub args: Option<Value>,
  /// The call's query, when it has one: stored as the feedback stream's query hash and its
  /// length, never as text.
  pub query: Option<String>,
  /// Wall time of the call in milliseconds.
  pub duration_ms: f64,
  /// `ok` or `error` (anything else is recorded as `error`).
  #[cfg_attr(feature = "napi", napi(ts_type = "'ok' | 'error'"))]
  pub outcome: String,
  /// The error's stable code, when the call failed.
  pub code: Option<String>,
  /// The calling surface (`mcp`, `pi`).
  pub surface: Option<String>,
}

impl ToolCall {
  /// `invalid_argument` for a call without a tool name (the one thing a line cannot do without).
  pub fn check(&self) -> crate::Result<()> {
    if self.tool.trim().is_empty() {
      return Err(crate::Error::invalid("tool must be a non-empty string"));
    }
    Ok(())
  }
}

/// One line of the ledger.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditLine {
  /// When the call was recorded (RFC 3339).
  pub ts: String,
  /// Tool name (≤ 64 characters).
  pub tool: String,
  /// `mcp` / `pi`, when given.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub surface: Option<String>,
  /// First 16 hex characters of sha256 of the arguments' canonical JSON (keys sorted).
  pub args_hash: String,
  /// The feedback stream's query hash of the query (joinable with `recall_feedback` events).
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub query_hash: Option<String>,
  /// Characters of the query.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub query_chars: Option<usize>,
  /// Duration in milliseconds (rounded).
  pub duration_ms: u64,
  /// `ok` or `error`.
  pub outcome: String,
  /// Error code.
  #[serde(default, skip_serializing_if = "Option::is_none")]
  pub code: Option<String>,
}

/// What happened to a call's line.
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_from_js = false, js_name = "ToolAuditOutcome"))]
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditOutcome {
  /// `recorded`, `disabled` (the vault's `toolAudit: false` or `LLM_WIKI_TOOL_AUDIT=off`) or
  /// `dropped` (the ledger's lock stayed busy 100 ms, or it could not be written).
  #[cfg_attr(feature = "napi", napi(ts_type = "'recorded' | 'disabled' | 'dropped'"))]
  pub status: String,
  /// Why a line was not written.
  pub diagnostics: Vec<RecallDiagnostic>,
}

/// `<meta>/audit`.
pub fn audit_dir(meta: &Path) -> PathBuf {
  meta.join(AUDIT_DIR)
}

/// The live ledger file.
pub fn audit_path(meta: &Path) -> PathBuf {
  audit_dir(meta).join(AUDIT_FILE)
}

/// Rotated file `n` (1 = newest).
pub fn rotated_path(meta: &Path, n: u32) -> PathBuf {
  audit_dir(meta).join(format!("tool-calls.{n}.jsonl"))
}

/// Canonical JSON of `v` (object keys sorted at every level).
fn canonical(v: &Value) -> Value {
  match v {
    Value::Object(m) => {
      let mut keys: Vec<&String> = m.keys().collect();
      keys.sort();
      Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&m[k]))).collect())
    }
    Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
    other => other.clone(),
  }
}

/// First 16 hex characters of sha256 of the canonical JSON of `args`.
pub fn args_hash(args: &Value) -> String {
  let text = serde_json::to_string(&canonical(args)).unwrap_or_default();
  hex(&Sha256::digest(text.as_bytes()))[..16].to_string()
}

fn short(s: &str) -> String {
  s.chars().filter(|c| !c.is_control()).take(MAX_NAME_CHARS).collect()
}

/// Whether the ledger is on for `paths` (the environment switch, then the vault's config).
pub fn enabled(paths: &VaultPaths) -> bool {
  if let Ok(v) = std::env::var(ENV_SWITCH) {
    if matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "off" | "false") {
      return false;
    }
  }
  match crate::vault::config::read_config(paths) {
    Ok(cfg) => cfg.get(CONFIG_KEY) != Some(&Value::Bool(false)),
    Err(_) => true,
  }
}

/// The line of `call` at `ts`.
pub fn line_of(call: &ToolCall, ts: String) -> AuditLine {
  AuditLine {
    ts,
    tool: short(&call.tool),
    surface: call.surface.as_deref().map(short),
    args_hash: args_hash(call.args.as_ref().unwrap_or(&Value::Null)),
    query_hash: call.query.as_deref().map(crate::feedback::query_hash),
    query_chars: call.query.as_deref().map(|q| q.chars().count()),
    duration_ms: if call.duration_ms.is_finite() && call.duration_ms > 0.0 {
      call.duration_ms.round().min(u64::MAX as f64) as u64
    } else {
      0
    },
    outcome: if call.outcome == "ok" { "ok".into() } else { "error".into() },
    code: call.code.as_deref().map(short),
  }
}

fn lock(dir: &Path) -> std::result::Result<HeldLock, String> {
  lock_within(&dir.join("audit.lock"), LOCK_WAIT)
}

fn dropped(code: &str, message: String) -> AuditOutcome {
  AuditOutcome {
    status: "dropped".into(),
    diagnostics: vec![RecallDiagnostic { code: code.into(), message }],
  }
}

/// Rotate when the live file is past [`MAX_BYTES`] (lock held).
fn rotate_if_full(meta: &Path) -> std::io::Result<()> {
  let live = audit_path(meta);
  let size = match std::fs::metadata(&live) {
    Ok(m) => m.len(),
    Err(_) => return Ok(()),
  };
  if size < MAX_BYTES {
    return Ok(());
  }
  for n in (1..ROTATIONS).rev() {
    let from = rotated_path(meta, n);
    if from.exists() {
      std::fs::rename(&from, rotated_path(meta, n + 1))?;
    }
  }
  std::fs::rename(&live, rotated_path(meta, 1))
}

/// Append `call` to the vault's ledger (rotating first when the live file is full), unless the
/// ledger is off. Never fails.
pub fn record_tool_call(paths: &VaultPaths, call: &ToolCall) -> AuditOutcome {
  if !enabled(paths) {
    return AuditOutcome { status: "disabled".into(), diagnostics: vec![] };
  }
  let line = line_of(call, crate::fsutil::now_iso());
  let mut text = match serde_json::to_string(&line) {
    Ok(t) => t,
    Err(e) => return dropped("tool_audit_unwritable", e.to_string()),
  };
  text.push('\n');
  let dir = audit_dir(&paths.meta);
  let _held = match lock(&dir) {
    Ok(h) => h,
    Err(e) => return dropped("tool_audit_busy", format!("the tool call was not audited ({e})")),
  };
  let res = rotate_if_full(&paths.meta).and_then(|()| {
    let mut f = OpenOptions::new().create(true).append(true).open(audit_path(&paths.meta))?;
    f.write_all(text.as_bytes())
  });
  match res {
    Ok(()) => AuditOutcome { status: "recorded".into(), diagnostics: vec![] },
    Err(e) => dropped("tool_audit_unwritable", format!("the tool call was not audited: {e}")),
  }
}

/// The ledger's lines, oldest first (rotated files, then the live one); unparsable lines skipped.
pub fn read_lines(meta: &Path) -> Vec<AuditLine> {
  let mut files: Vec<PathBuf> = (1..=ROTATIONS).rev().map(|n| rotated_path(meta, n)).collect();
  files.push(audit_path(meta));
  let mut out = Vec::new();
  for f in files {
    if let Ok(text) = std::fs::read_to_string(&f) {
      out.extend(text.lines().filter_map(|l| serde_json::from_str::<AuditLine>(l).ok()));
    }
  }
  out
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::testkit::temp_vault;
  use serde_json::json;

  fn call(query: &str) -> ToolCall {
    ToolCall {
      tool: "wiki_recall".into(),
      args: Some(json!({"query": query, "max_results": 5})),
      query: Some(query.into()),
      duration_ms: 12.4,
      outcome: "ok".into(),
      code: None,
      surface: Some("mcp".into()),
    }
  }

  #[test]
  fn lines_hold_hashes_never_argument_or_query_text() {
    let (_t, p) = temp_vault();
    let secret = "rotate the prod-db-7 password hunter2";
    assert_eq!(record_tool_call(&p, &call(secret)).status, "recorded");
    let mut failed = call("x");
    failed.outcome = "failed".into();
    failed.code = Some("feedback_not_shown".into());
    failed.args = Some(json!({"page_id": "private/salary-2026", "vault_id": "v"}));
    record_tool_call(&p, &failed);
    let text = std::fs::read_to_string(audit_path(&p.meta)).unwrap();
    for raw in ["hunter2", "prod-db-7", "rotate", "salary", "private/"] {
      assert!(!text.contains(raw), "{raw} in {text}");
    }
    let lines = read_lines(&p.meta);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].tool, "wiki_recall");
    assert_eq!(lines[0].query_hash.as_deref(), Some(crate::feedback::query_hash(secret).as_str()));
    assert_eq!(lines[0].query_chars, Some(secret.chars().count()));
    assert_eq!(lines[0].duration_ms, 12);
    assert_eq!((lines[1].outcome.as_str(), lines[1].code.as_deref()), ("error", Some("feedback_not_shown")));
    // The argument hash ignores key order and changes with any value.
    assert_eq!(
      args_hash(&json!({"a": 1, "b": [2, {"d": 1, "c": 2}]})),
      args_hash(&json!({"b": [2, {"c": 2, "d": 1}], "a": 1}))
    );
    assert_ne!(args_hash(&json!({"a": 1})), args_hash(&json!({"a": 2})));
    assert_eq!(lines[0].args_hash, args_hash(&json!({"max_results": 5, "query": secret})));
  }

  #[test]
  fn rotation_bounds_the_ledger() {
    let (_t, p) = temp_vault();
    let big = "q".repeat(100);
    let mut n = 0;
    // Enough lines for several rotations.
    while !rotated_path(&p.meta, ROTATIONS).exists() || n < 3 * (MAX_BYTES as usize / 200) {
      let mut c = call(&big);
      c.tool = format!("wiki_tool_{}", n % 7);
      assert_eq!(record_tool_call(&p, &c).status, "recorded");
      n += 1;
    }
    let total: u64 = (1..=ROTATIONS)
      .map(|k| rotated_path(&p.meta, k))
      .chain([audit_path(&p.meta)])
      .filter_map(|f| std::fs::metadata(f).ok())
      .map(|m| m.len())
      .sum();
    assert!(total <= (ROTATIONS as u64 + 1) * MAX_BYTES + 1024, "{total}");
    assert!(!rotated_path(&p.meta, ROTATIONS + 1).exists());
    // The newest line is the live file's last.
    let last = read_lines(&p.meta).pop().unwrap();
    assert_eq!(last.tool, format!("wiki_tool_{}", (n - 1) % 7));
  }

  #[test]
  fn the_vault_setting_turns_it_off_and_a_busy_lock_drops_the_line() {
    let (_t, p) = temp_vault();
    let cfg_path = p.config_file();
    let mut cfg: serde_json::Map<String, Value> =
      serde_json::from_slice(&std::fs::read(&cfg_path).unwrap()).unwrap();
    cfg.insert(CONFIG_KEY.into(), Value::Bool(false));
    std::fs::write(&cfg_path, serde_json::to_vec(&cfg).unwrap()).unwrap();
    assert_eq!(record_tool_call(&p, &call("a")).status, "disabled");
    assert!(!audit_dir(&p.meta).exists());
    cfg.insert(CONFIG_KEY.into(), Value::Bool(true));
    std::fs::write(&cfg_path, serde_json::to_vec(&cfg).unwrap()).unwrap();
    let held = lock(&audit_dir(&p.meta)).unwrap();
    let out = record_tool_call(&p, &call("a"));
    assert_eq!((out.status.as_str(), out.diagnostics[0].code.as_str()), ("dropped", "tool_audit_busy"));
    drop(held);
    assert_eq!(record_tool_call(&p, &call("a")).status, "recorded");
  }
}
