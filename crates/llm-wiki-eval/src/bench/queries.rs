//! Query runs: every query of a set in one mode, timed, with its TREC lines and diagnostics.

use super::*;

/// Policy of the ranked lists: active vault only, no floor, `depth` results.
pub fn ranked_policy(depth: usize) -> RecallPolicy {
  let depth = llm_wiki_core::util::num::sat_u32(depth);
  RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: depth, max_results: depth }
}

/// The top of a list, for calibration.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopHit {
  pub id: String,
  /// Rounded to 6 decimals (as are `score` and `multiplier`).
  pub confidence: f64,
  pub score: f64,
  pub multiplier: f64,
  /// The unrounded final score (what the floor is compared with).
  #[serde(skip)]
  pub raw_score: f64,
}

/// One recall call.
#[derive(Debug, Clone)]
pub(super) struct Answer {
  pub(super) ids: Vec<String>,
  /// The first 10 results.
  pub(super) top: Vec<TopHit>,
  pub(super) used: RetrievalMode,
  pub(super) ms: f64,
  pub(super) diagnostics: Vec<String>,
  pub(super) trec: Vec<RunLine>,
  /// Stage times of the hybrid candidate phase, read from its trace line (empty in other modes).
  pub(super) stages: Vec<(&'static str, f64)>,
}

/// Stages the hybrid trace line times ("… (8.1 ms: lexical 1.2 ∥ query embedding 5.0 + vector
/// scan 0.9)"), in report order; `candidates` is the whole line, fusion included.
pub(super) const HYBRID_STAGES: [&str; 4] = ["candidates", "lexical", "query embedding", "vector scan"];

/// The hybrid stage times of one recall's trace.
fn hybrid_stages(trace: &[String]) -> Vec<(&'static str, f64)> {
  let Some(line) = trace.iter().find(|t| t.starts_with("hybrid:")) else { return Vec::new() };
  let number_after = |key: &str| -> Option<f64> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.trim_start().split(|c: char| !(c.is_ascii_digit() || c == '.')).next()?.parse().ok()
  };
  HYBRID_STAGES
    .iter()
    .filter_map(|&stage| {
      let key = match stage {
        "candidates" => "evidence-weighted (",
        "lexical" => "ms: lexical",
        other => other,
      };
      number_after(key).map(|v| (stage, v))
    })
    .collect()
}

pub(super) fn ask(paths: &VaultPaths, qid: &str, text: &str, opts: &RecallOptions) -> Result<Answer> {
  let started = Instant::now();
  let r = recall_wiki(paths, text, opts)?;
  let ms = ms_since(started);
  Ok(Answer {
    ids: r.results.iter().map(|x| x.id.clone()).collect(),
    top: r
      .results
      .iter()
      .take(10)
      .map(|x| TopHit {
        id: x.id.clone(),
        confidence: round6(x.confidence),
        score: round6(x.score),
        multiplier: round6(x.multiplier),
        raw_score: x.score,
      })
      .collect(),
    used: r.mode,
    ms,
    diagnostics: r.diagnostics.iter().map(|d| d.code.clone()).collect(),
    trec: llm_wiki_cli::trec::recall_run_lines(qid, &r.results),
    stages: hybrid_stages(&r.trace),
  })
}

/// Every query of a set in one mode: ranked lists (and automatic lists when asked).
pub(super) struct ModeRun {
  pub(super) mode: RetrievalMode,
  pub(super) ranked: HashMap<String, Answer>,
  pub(super) auto: HashMap<String, Answer>,
  /// Queries whose warm-up and timed lists differ.
  pub(super) nondeterministic: Vec<String>,
  pub(super) peak_rss: Option<u64>,
  pub(super) start_rss: Option<u64>,
  pub(super) wall_ms: f64,
  /// The first warm-up query's wall time: it opens the vault's reader (after a reindex in the
  /// same process, the manifest the writer committed is shared; otherwise it is parsed).
  pub(super) first_ms: f64,
}

impl ModeRun {
  pub(super) fn ids(answers: &HashMap<String, Answer>) -> HashMap<String, Vec<String>> {
    answers.iter().map(|(q, a)| (q.clone(), a.ids.clone())).collect()
  }

  pub(super) fn ranked_ids(&self) -> HashMap<String, Vec<String>> {
    Self::ids(&self.ranked)
  }

  pub(super) fn auto_ids(&self) -> HashMap<String, Vec<String>> {
    Self::ids(&self.auto)
  }

  pub(super) fn used(answers: &HashMap<String, Answer>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for a in answers.values() {
      *m.entry(a.used.as_str().to_string()).or_insert(0) += 1;
    }
    m
  }

  pub(super) fn latency_of(answers: &HashMap<String, Answer>) -> Latency {
    latency(&answers.values().map(|a| a.ms).collect::<Vec<_>>())
  }

  /// Median of each hybrid stage over the ranked answers that timed it (empty outside hybrid).
  pub(super) fn stage_medians(&self) -> Vec<(&'static str, f64)> {
    HYBRID_STAGES
      .iter()
      .filter_map(|&stage| {
        let v: Vec<f64> = self
          .ranked
          .values()
          .filter_map(|a| a.stages.iter().find(|(s, _)| *s == stage).map(|x| x.1))
          .collect();
        (!v.is_empty()).then(|| (stage, latency(&v).p50_ms))
      })
      .collect()
  }

  pub(super) fn diagnostics(&self) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for a in self.ranked.values().chain(self.auto.values()) {
      for d in &a.diagnostics {
        *m.entry(d.clone()).or_insert(0) += 1;
      }
    }
    m
  }

  pub(super) fn result_counts(&self) -> Value {
    let n: Vec<usize> = self.ranked.values().map(|a| a.ids.len()).collect();
    let mean = if n.is_empty() { 0.0 } else { n.iter().sum::<usize>() as f64 / n.len() as f64 };
    json!({
      "mean": r3(mean),
      "min": n.iter().min().copied().unwrap_or(0),
      "max": n.iter().max().copied().unwrap_or(0),
    })
  }

  pub(super) fn trec(&self, order: &[(String, String)]) -> Vec<RunLine> {
    order.iter().filter_map(|(q, _)| self.ranked.get(q)).flat_map(|a| a.trec.iter().cloned()).collect()
  }

  pub(super) fn cost_json(&self) -> Value {
    json!({
      "ranked": Self::latency_of(&self.ranked),
      "automatic": if self.auto.is_empty() { Value::Null } else { to_value(&Self::latency_of(&self.auto)) },
      "queryPhasePeakRssBytes": self.peak_rss,
      "queryPhaseStartRssBytes": self.start_rss,
      "queryPhaseWallMs": r3(self.wall_ms),
      "firstQueryMs": r3(self.first_ms),
      "hybridStageP50Ms": self.stage_medians().into_iter().map(|(s, v)| (s.to_string(), json!(r3(v)))).collect::<serde_json::Map<_, _>>(),
    })
  }

  pub(super) fn modes_used_json(&self) -> Value {
    json!({
      "ranked": Self::used(&self.ranked),
      "automatic": if self.auto.is_empty() { Value::Null } else { to_value(&Self::used(&self.auto)) },
    })
  }
}

pub(super) fn fmt_used(m: &BTreeMap<String, usize>) -> String {
  m.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
}

pub(super) fn run_queries(
  paths: &VaultPaths,
  queries: &[(String, String)],
  mode: RetrievalMode,
  depth: usize,
  with_auto: bool,
  common: &BenchCommon,
) -> Result<ModeRun> {
  let ranked_opts = common.recall_options(ranked_policy(depth), mode);
  let auto_opts = common.recall_options(RecallPolicy::automatic(), mode);
  let started = Instant::now();
  reset_peak_rss();
  let start_rss = current_rss_bytes();
  common.say(format!("{}: warm-up pass over {} queries", mode.as_str(), queries.len()));
  let mut warm: HashMap<&str, (Vec<String>, Vec<String>)> = HashMap::new();
  let mut first_ms = None;
  for (qid, text) in queries {
    let asked = Instant::now();
    let r = ask(paths, qid, text, &ranked_opts)?;
    first_ms.get_or_insert_with(|| ms_since(asked));
    let a = if with_auto { ask(paths, qid, text, &auto_opts)?.ids } else { Vec::new() };
    warm.insert(qid, (r.ids, a));
  }
  common.say(format!("{}: timed pass", mode.as_str()));
  let mut run = ModeRun {
    mode,
    ranked: HashMap::new(),
    auto: HashMap::new(),
    nondeterministic: Vec::new(),
    peak_rss: None,
    start_rss,
    wall_ms: 0.0,
    first_ms: first_ms.unwrap_or(0.0),
  };
  for (qid, text) in queries {
    let r = ask(paths, qid, text, &ranked_opts)?;
    let a = if with_auto { Some(ask(paths, qid, text, &auto_opts)?) } else { None };
    let (wr, wa) = &warm[qid.as_str()];
    if *wr != r.ids || a.as_ref().is_some_and(|a| *wa != a.ids) {
      run.nondeterministic.push(qid.clone());
    }
    run.ranked.insert(qid.clone(), r);
    if let Some(a) = a {
      run.auto.insert(qid.clone(), a);
    }
  }
  run.peak_rss = peak_rss_bytes();
  run.wall_ms = ms_since(started);
  let lat = ModeRun::latency_of(&run.ranked);
  common.say(format!(
    "{}: ranked p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms; modes used {}{}",
    mode.as_str(),
    lat.p50_ms,
    lat.p95_ms,
    lat.max_ms,
    fmt_used(&ModeRun::used(&run.ranked)),
    if run.nondeterministic.is_empty() {
      String::new()
    } else {
      format!("; {} non-deterministic queries", run.nondeterministic.len())
    }
  ));
  Ok(run)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn hybrid_stage_times_are_read_from_the_trace_line() {
    let trace = vec![
      "query:6 terms".to_string(),
      "hybrid: 40 lexical + 40 dense candidates from 2 list(s), evidence-weighted (8.4 ms: lexical 1.2 \
       ∥ query embedding 5.0 + vector scan 0.9)"
        .to_string(),
    ];
    assert_eq!(
      hybrid_stages(&trace),
      vec![("candidates", 8.4), ("lexical", 1.2), ("query embedding", 5.0), ("vector scan", 0.9)]
    );
    assert!(hybrid_stages(&["lexical: 10 candidates".to_string()]).is_empty());
  }
}
