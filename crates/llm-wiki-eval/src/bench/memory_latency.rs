//! Warm latency of `recallMemory` against plain recall on a BEIR collection (`bench memory
//! --beir <dir>`; the issue 13 goal: memory p50 ≤ hybrid recall p50 + 3 ms on SciFact).
//!
//! Both calls go through the engine in one warm process, on the same index, with the same
//! policy, interleaved query by query (so that background load hits both alike): `recall_wiki`
//! then `recall_memory`. Two policies: automatic (3 results / bundles, floor 0.50) and explicit
//! (5 results / bundles, floor 0.25). A BEIR collection has no relations or links, so this
//! measures the assembly's fixed cost — a second snapshot, excerpts read from the page files,
//! the (cached) link graph — not relation admissions; those are measured on the pi vault.

use super::*;
use llm_wiki_core::memory::bundle::DEFAULT_BUDGET_CHARS;
use llm_wiki_core::memory::{recall_memory, MemoryOptions};

/// Latency of one mode × policy.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryLatencyRow {
  pub mode: String,
  pub policy: String,
  pub recall_wiki: Latency,
  pub recall_memory: Latency,
  /// `recall_memory` p50 − `recall_wiki` p50, ms.
  pub p50_overhead_ms: f64,
  /// Mean bundles per query, mean results per query.
  pub mean_bundles: f64,
  pub mean_results: f64,
}

/// Goal of issue 13: warm `recallMemory` p50 at most this much over hybrid recall p50.
pub const MEMORY_OVERHEAD_GOAL_MS: f64 = 3.0;

/// Run the latency comparison on `beir_dir`; writes `<set>-memory-latency.{json,md}`.
pub fn run_memory_latency(beir_dir: &Path, common: &BenchCommon) -> Result<BenchOutput> {
  let set = dir_label(beir_dir, "beir");
  let beir = load_beir_dir(beir_dir)?;
  let queries = beir.judged_queries();
  let (_tmp, paths, pages) = common.beir_copy(beir_dir, &set)?;
  common.say(format!("{set}-memory-latency: {pages} pages, {} queries", queries.len()));
  let mut ix = build_lexical(&paths, &set, common)?;
  if common.needs_vectors() {
    add_vectors(&mut ix, &set, common)?;
  }
  let policies = [("automatic", RecallPolicy::automatic()), ("explicit5", RecallPolicy::explicit(Some(5)))];
  let mut rows = Vec::new();
  for &mode in &common.modes {
    for (name, policy) in &policies {
      let plain = common.recall_options(policy.clone(), mode);
      let mem =
        MemoryOptions { recall: plain.clone(), budget_chars: DEFAULT_BUDGET_CHARS, typed_expansion: true };
      for (_, q) in &queries {
        let _ = recall_wiki(&paths, q, &plain)?;
        let _ = recall_memory(&paths, q, &mem)?;
      }
      let (mut tw, mut tm) = (Vec::new(), Vec::new());
      let (mut bundles, mut results) = (0usize, 0usize);
      for (_, q) in &queries {
        let t = Instant::now();
        let r = recall_wiki(&paths, q, &plain)?;
        tw.push(ms_since(t));
        results += r.results.len();
        let t = Instant::now();
        let m = recall_memory(&paths, q, &mem)?;
        tm.push(ms_since(t));
        bundles += m.bundles.len();
      }
      let (w, m) = (latency(&tw), latency(&tm));
      let n = queries.len().max(1) as f64;
      common.say(format!(
        "{set} {} {name}: recallWiki p50 {:.2} ms, recallMemory p50 {:.2} ms",
        mode.as_str(),
        w.p50_ms,
        m.p50_ms
      ));
      rows.push(MemoryLatencyRow {
        mode: mode.as_str().to_string(),
        policy: name.to_string(),
        p50_overhead_ms: r3(m.p50_ms - w.p50_ms),
        recall_wiki: w,
        recall_memory: m,
        mean_bundles: r3(bundles as f64 / n),
        mean_results: r3(results as f64 / n),
      });
    }
  }
  let mut md = String::new();
  let _ = writeln!(
    md,
    "# {set}: recallMemory vs recallWiki, warm\n\n{pages} pages, {} judged queries. Goal: recallMemory p50 ≤ hybrid recallWiki p50 + {MEMORY_OVERHEAD_GOAL_MS} ms.\n",
    queries.len()
  );
  let _ = writeln!(md, "| mode | policy | recallWiki p50 / p95 ms | recallMemory p50 / p95 ms | p50 overhead ms | results / bundles per query |");
  let _ = writeln!(md, "|---|---|---|---|---|---|");
  for r in &rows {
    let _ = writeln!(
      md,
      "| {} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:+.2} | {:.2} / {:.2} |",
      r.mode,
      r.policy,
      r.recall_wiki.p50_ms,
      r.recall_wiki.p95_ms,
      r.recall_memory.p50_ms,
      r.recall_memory.p95_ms,
      r.p50_overhead_ms,
      r.mean_results,
      r.mean_bundles
    );
  }
  let _ = writeln!(
    md,
    "\nMethod: one untimed pass of every query (both calls), then a timed pass calling recallWiki then \
     recallMemory for each query, same process, same index, same policy; nearest-rank percentiles; wall \
     clock around each engine call (no napi layer). The collection has no relations: this is the fixed cost \
     of assembly."
  );
  let value = json!({
    "schema": SCHEMA,
    "suite": format!("{set}-memory-latency"),
    "engine": { "name": ENGINE_NAME, "version": ENGINE_VERSION, "indexFormat": INDEX_FORMAT_VERSION },
    "pages": pages,
    "queries": queries.len(),
    "goalMs": MEMORY_OVERHEAD_GOAL_MS,
    "rows": to_value(&rows),
    "machine": machine_context(),
    "createdAt": now_iso(),
  });
  create_dir(&common.out)?;
  let (jf, mf) = (
    common.out.join(format!("{set}-memory-latency.json")),
    common.out.join(format!("{set}-memory-latency.md")),
  );
  write_json_file(&jf, &value)?;
  write_text_file(&mf, &md)?;
  Ok(BenchOutput { files: vec![jf, mf], markdown: md })
}
