//! Release gates of the pi bench: each mode against the heuristic baseline.

use super::*;

pub(super) const EPS: f64 = 1e-9;

/// One mode's outcome on one gate.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateOutcome {
  pub value: f64,
  pub threshold: f64,
  pub pass: bool,
  /// Whether the gate binds this mode (otherwise reported for information).
  pub applies: bool,
  #[serde(skip_serializing_if = "Vec::is_empty")]
  pub failures: Vec<String>,
}

/// A release gate checked against the baseline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gate {
  pub id: &'static str,
  pub name: &'static str,
  pub rule: String,
  pub baseline: f64,
  pub threshold: f64,
  /// `≥` or `≤`.
  pub comparison: &'static str,
  pub note: String,
  /// Mode name → outcome, in run order.
  pub modes: Vec<(String, GateOutcome)>,
}

pub(super) fn relevant_in_top3(q: &PiQuery, ranked: &[String]) -> bool {
  let g = q.grades();
  ranked.iter().take(3).any(|id| g.get(id).is_some_and(|&x| x > 0))
}

/// A metric gate (b)–(f).
pub(super) struct GateSpec {
  pub(super) id: &'static str,
  pub(super) name: &'static str,
  pub(super) rule: &'static str,
  pub(super) slice: Slice,
  pub(super) metric: fn(&PiMetrics) -> f64,
  pub(super) threshold: f64,
  pub(super) at_least: bool,
  pub(super) applies: fn(RetrievalMode) -> bool,
}

/// The spec's release gates (a)–(f) for every mode against the baseline.
pub(super) fn release_gates(
  fixture: &PiFixture,
  baseline: &PiEval,
  modes: &[(RetrievalMode, &PiEval)],
) -> Vec<Gate> {
  let b_all = baseline.metrics(Slice::All);
  let b_held = baseline.metrics(Slice::Heldout);
  let mut gates = vec![exact_lookup_gate(fixture, baseline, modes)];
  for s in metric_gates(&b_all, &b_held) {
    let base = (s.metric)(&if s.slice == Slice::All { b_all } else { b_held });
    let mut g = Gate {
      id: s.id,
      name: s.name,
      rule: s.rule.to_string(),
      baseline: base,
      threshold: s.threshold,
      comparison: if s.at_least { "≥" } else { "≤" },
      note: format!("slice {}", s.slice.as_str()),
      modes: Vec::new(),
    };
    for (mode, ev) in modes {
      let value = (s.metric)(&ev.metrics(s.slice));
      let pass = if s.at_least { value >= s.threshold - EPS } else { value <= s.threshold + EPS };
      g.modes.push((
        mode.as_str().to_string(),
        GateOutcome {
          value,
          threshold: s.threshold,
          pass,
          applies: (s.applies)(*mode),
          failures: Vec::new(),
        },
      ));
    }
    gates.push(g);
  }
  gates
}

/// Gates (b)–(f): a metric of a slice against a threshold derived from the baseline's.
fn metric_gates(b_all: &PiMetrics, b_held: &PiMetrics) -> [GateSpec; 5] {
  [
    GateSpec {
      id: "b",
      name: "held-out nDCG@10 +10% (quality)",
      rule: "heldout ndcg10 ≥ baseline × 1.10, binding for quality mode",
      slice: Slice::Heldout,
      metric: |m| m.ndcg10,
      threshold: round6(b_held.ndcg10 * 1.10),
      at_least: true,
      applies: |m| m == RetrievalMode::Quality,
    },
    GateSpec {
      id: "c",
      name: "held-out MRR −2% at most",
      rule: "heldout mrr ≥ baseline × 0.98, binding for hybrid, adaptive and quality (lexical reported)",
      slice: Slice::Heldout,
      metric: |m| m.mrr,
      threshold: round6(b_held.mrr * 0.98),
      at_least: true,
      applies: |m| m != RetrievalMode::Lexical,
    },
    GateSpec {
      id: "d",
      name: "automatic false-positive rate −25%",
      rule: "all autoFalsePositiveRate ≤ baseline × 0.75",
      slice: Slice::All,
      metric: |m| m.auto_false_positive_rate,
      threshold: round6(b_all.auto_false_positive_rate * 0.75),
      at_least: false,
      applies: |_| true,
    },
    GateSpec {
      id: "e",
      name: "contradiction coverage 100%",
      rule: "all contradictionCoverage = 1.0",
      slice: Slice::All,
      metric: |m| m.contradiction_coverage,
      threshold: 1.0,
      at_least: true,
      applies: |_| true,
    },
    GateSpec {
      id: "f",
      name: "candidate Recall@20 −2 points at most",
      rule: "all candidateRecall20 ≥ baseline − 0.02",
      slice: Slice::All,
      metric: |m| m.candidate_recall20,
      threshold: round6(b_all.candidate_recall20 - 0.02),
      at_least: true,
      applies: |_| true,
    },
  ]
}

/// Gate (a): every exact-lookup query with a relevant page in the baseline's top 3 keeps one in
/// the top 3.
fn exact_lookup_gate(fixture: &PiFixture, baseline: &PiEval, modes: &[(RetrievalMode, &PiEval)]) -> Gate {
  let eligible: Vec<&PiQuery> = fixture
    .queries
    .iter()
    .filter(|q| {
      q.category == "exact_lookup"
        && relevant_in_top3(q, baseline.ranked.get(&q.id).map(Vec::as_slice).unwrap_or(&[]))
    })
    .collect();
  let mut a = Gate {
    id: "a",
    name: "exact-lookup top-3 preserved",
    rule: "every exact_lookup query with a relevant page in the baseline's top 3 keeps one in the top 3"
      .into(),
    baseline: 1.0,
    threshold: 1.0,
    comparison: "≥",
    note: format!(
      "{} eligible queries: {}",
      eligible.len(),
      eligible.iter().map(|q| q.id.as_str()).collect::<Vec<_>>().join(", ")
    ),
    modes: Vec::new(),
  };
  for (mode, ev) in modes {
    let failures: Vec<String> = eligible
      .iter()
      .filter(|q| !relevant_in_top3(q, ev.ranked.get(&q.id).map(Vec::as_slice).unwrap_or(&[])))
      .map(|q| q.id.clone())
      .collect();
    let kept = eligible.len() - failures.len();
    a.modes.push((
      mode.as_str().to_string(),
      GateOutcome {
        value: if eligible.is_empty() { 1.0 } else { round6(kept as f64 / eligible.len() as f64) },
        threshold: 1.0,
        pass: failures.is_empty(),
        applies: true,
        failures,
      },
    ));
  }
  a
}

pub(super) fn gates_json(gates: &[Gate]) -> Value {
  Value::Array(
    gates
      .iter()
      .map(|g| {
        let modes: Map<String, Value> = g.modes.iter().map(|(m, o)| (m.clone(), to_value(o))).collect();
        json!({
          "id": g.id,
          "name": g.name,
          "rule": g.rule,
          "baseline": g.baseline,
          "threshold": g.threshold,
          "comparison": g.comparison,
          "note": g.note,
          "modes": modes,
        })
      })
      .collect(),
  )
}

pub(super) fn gate_summary(gates: &[Gate], modes: &[RetrievalMode]) -> Value {
  let mut m = Map::new();
  for mode in modes {
    let name = mode.as_str();
    let outcomes: Vec<(&Gate, &GateOutcome)> =
      gates.iter().filter_map(|g| g.modes.iter().find(|(n, _)| n == name).map(|(_, o)| (g, o))).collect();
    let binding: Vec<&(&Gate, &GateOutcome)> = outcomes.iter().filter(|(_, o)| o.applies).collect();
    let failed: Vec<&str> = binding.iter().filter(|(_, o)| !o.pass).map(|(g, _)| g.id).collect();
    m.insert(
      name.to_string(),
      json!({
        "binding": binding.len(),
        "passed": binding.len() - failed.len(),
        "failed": failed,
        "allBindingPass": failed.is_empty(),
      }),
    );
  }
  Value::Object(m)
}

pub(super) fn gates_markdown(md: &mut String, gates: &[Gate], modes: &[RetrievalMode]) {
  md.push_str("| gate | rule | baseline | threshold |");
  for m in modes {
    let _ = write!(md, " {} |", m.as_str());
  }
  md.push_str("\n|---|---|---|---|");
  for _ in modes {
    md.push_str("---|");
  }
  md.push('\n');
  for g in gates {
    let _ = write!(
      md,
      "| ({}) {} | {} | {} | {} {} |",
      g.id, g.name, g.rule, g.baseline, g.comparison, g.threshold
    );
    for m in modes {
      let cell = g.modes.iter().find(|(n, _)| n == m.as_str()).map_or("–".to_string(), |(_, o)| {
        let verdict = match (o.applies, o.pass) {
          (true, true) => "**PASS**",
          (true, false) => "**FAIL**",
          (false, true) => "pass (info)",
          (false, false) => "fail (info)",
        };
        let extra =
          if o.failures.is_empty() { String::new() } else { format!(" lost: {}", o.failures.join(", ")) };
        format!("{verdict} {}{extra}", o.value)
      });
      let _ = write!(md, " {cell} |");
    }
    md.push('\n');
  }
  let _ = writeln!(md, "\n(a) eligible queries — {}", gates.first().map(|g| g.note.as_str()).unwrap_or(""));
}
