//! Automatic-recall precision suite: cross-collection negatives vs. hit rate on positives.

use super::*;

/// One query of the precision suite, with its relevance on the vault it runs against.
pub(super) struct ProbeQuery {
  pub(super) id: String,
  pub(super) text: String,
  /// `train`/`heldout` (pi) or `test` (SciFact).
  pub(super) split: String,
  /// Relevant page ids on this vault (empty = a negative).
  pub(super) relevant: HashSet<String>,
}

/// One (query set, vault) combination.
pub(super) struct Probe<'a> {
  pub(super) key: &'static str,
  pub(super) query_set: &'a str,
  pub(super) vault_name: &'a str,
  pub(super) paths: &'a VaultPaths,
  pub(super) queries: Vec<ProbeQuery>,
}

/// Injection counts of a group of queries.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InjectionStats {
  pub queries: usize,
  /// Queries with at least one injected result.
  pub injected: usize,
  pub injection_rate: f64,
  /// Positives only: queries with an injected relevant page.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub hits: Option<usize>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub hit_rate: Option<f64>,
  /// Positives only: queries with a relevant page among the first `maxResults` of the ranking
  /// with the floor removed — the hit rate a perfect confidence (any floor) could reach with
  /// this ranking.
  #[serde(skip_serializing_if = "Option::is_none")]
  pub ceiling: Option<usize>,
  #[serde(skip_serializing_if = "Option::is_none")]
  pub ceiling_rate: Option<f64>,
  pub modes_used: BTreeMap<String, usize>,
}

impl InjectionStats {
  /// One query: `hit` = (an injected page is relevant, a relevant page heads the unfloored
  /// ranking) for positives, `None` for negatives.
  pub(super) fn add(&mut self, injected: bool, hit: Option<(bool, bool)>, used: RetrievalMode) {
    self.queries += 1;
    self.injected += usize::from(injected);
    if let Some((h, c)) = hit {
      *self.hits.get_or_insert(0) += usize::from(h);
      *self.ceiling.get_or_insert(0) += usize::from(c);
    }
    *self.modes_used.entry(used.as_str().to_string()).or_insert(0) += 1;
  }

  pub(super) fn finish(mut self) -> Self {
    self.injection_rate = rate(self.injected, self.queries);
    self.hit_rate = self.hits.map(|h| rate(h, self.queries));
    self.ceiling_rate = self.ceiling.map(|c| rate(c, self.queries));
    self
  }
}

/// `ceiling/queries (rate)` of a positive group.
fn fmt_ceiling(s: &InjectionStats) -> String {
  format!("{}/{} ({})", s.ceiling.unwrap_or(0), s.queries, s.ceiling_rate.unwrap_or(0.0))
}

pub(super) fn fmt_rate(s: &InjectionStats, hits: bool) -> String {
  if hits {
    format!("{}/{} ({})", s.hits.unwrap_or(0), s.queries, s.hit_rate.unwrap_or(0.0))
  } else {
    format!("{}/{} ({})", s.injected, s.queries, s.injection_rate)
  }
}

/// The two collections of the precision suite: the pi fixture and a BEIR set.
struct PrecisionSources {
  fixture_path: PathBuf,
  pi_vault: PathBuf,
  beir_dir: PathBuf,
  beir_name: String,
  fixture: PiFixture,
  beir: BeirSet,
}

impl PrecisionSources {
  /// Check that `--pi` names the pi fixture and `--beir` a BEIR-style directory, and load both.
  fn load(pi_fixture: &Path, beir_dir: &Path) -> Result<Self> {
    let (fixture_path, pi_vault) = match detect_source(pi_fixture)? {
      BenchSource::Pi { fixture, vault } => (fixture, vault),
      BenchSource::Beir { .. } => return Err(Error::invalid("--pi must name the pi fixture.json")),
    };
    let beir_dir = match detect_source(beir_dir)? {
      BenchSource::Beir { dir } => dir,
      BenchSource::Pi { .. } => return Err(Error::invalid("--beir must name a BEIR-style directory")),
    };
    let beir_name = dir_label(&beir_dir, "beir");
    let fixture = load_pi_fixture(&fixture_path)?;
    let beir = load_beir_dir(&beir_dir)?;
    Ok(PrecisionSources { fixture_path, pi_vault, beir_dir, beir_name, fixture, beir })
  }

  /// The pi queries, with their relevant pages when they run on the pi vault (`on_pi`).
  fn pi_queries(&self, on_pi: bool) -> Vec<ProbeQuery> {
    self
      .fixture
      .queries
      .iter()
      .map(|q| ProbeQuery {
        id: q.id.clone(),
        text: q.text.clone(),
        split: match q.split {
          PiSplit::Train => "train".into(),
          PiSplit::Heldout => "heldout".into(),
        },
        relevant: if on_pi {
          q.judgments.iter().filter(|j| j.grade > 0).map(|j| j.page_id.clone()).collect()
        } else {
          HashSet::new()
        },
      })
      .collect()
  }

  /// The BEIR queries, with their relevant pages when they run on the BEIR vault (`on_beir`).
  fn beir_queries(&self, on_beir: bool) -> Vec<ProbeQuery> {
    self
      .beir
      .queries
      .iter()
      .map(|(id, text)| ProbeQuery {
        id: id.clone(),
        text: text.clone(),
        split: "test".into(),
        relevant: if on_beir {
          self
            .beir
            .qrels
            .get(id)
            .map(|j| j.iter().filter(|(_, &g)| g > 0).map(|(d, _)| d.clone()).collect())
            .unwrap_or_default()
        } else {
          HashSet::new()
        },
      })
      .collect()
  }

  /// Every (query set, vault) combination: each set on its own vault and on the other.
  fn probes<'a>(&'a self, pi_paths: &'a VaultPaths, beir_paths: &'a VaultPaths) -> [Probe<'a>; 4] {
    let beir_name = self.beir_name.as_str();
    [
      Probe {
        key: "piOnPi",
        query_set: "pi",
        vault_name: "pi",
        paths: pi_paths,
        queries: self.pi_queries(true),
      },
      Probe {
        key: "beirOnPi",
        query_set: beir_name,
        vault_name: "pi",
        paths: pi_paths,
        queries: self.beir_queries(false),
      },
      Probe {
        key: "piOnBeir",
        query_set: "pi",
        vault_name: beir_name,
        paths: beir_paths,
        queries: self.pi_queries(false),
      },
      Probe {
        key: "beirOnBeir",
        query_set: beir_name,
        vault_name: beir_name,
        paths: beir_paths,
        queries: self.beir_queries(true),
      },
    ]
  }

  /// Positives of the pi fixture are its judged queries; its `autoExpectation: none` queries
  /// are negatives on the pi vault.
  fn pi_negatives(&self) -> HashSet<&str> {
    self
      .fixture
      .queries
      .iter()
      .filter(|q| q.auto_expectation == AutoExpectation::None)
      .map(|q| q.id.as_str())
      .collect()
  }
}

/// What one mode measured over every probe.
#[derive(Default)]
struct ModeCounts {
  groups: BTreeMap<String, InjectionStats>,
  /// Automatic lists that are not the floored ranking (`probe:query`).
  mismatches: Vec<String>,
  /// Queries whose injected pages are not the head of the ranking (`probe:query`).
  non_prefix: Vec<String>,
  /// Top-1 score (what the floor compares) per group: negatives pooled, positives per set.
  top1: BTreeMap<&'static str, Vec<f64>>,
}

/// The recall options of one mode: the automatic policy, and the same without its floor.
struct ModeOptions {
  auto: RecallOptions,
  top: RecallOptions,
}

impl ModeOptions {
  fn new(mode: RetrievalMode, common: &BenchCommon) -> Self {
    let auto = common.recall_options(RecallPolicy::automatic(), mode);
    // The automatic policy without its floor and with 10 results: the same per-vault candidates.
    let top_policy = RecallPolicy { min_score: 0.0, max_results: 10, ..RecallPolicy::automatic() };
    // Scored as automatic recall (its floor lowered to 0 would otherwise mean explicit scoring).
    let top = RecallOptions { scoring: Scoring::Automatic, ..common.recall_options(top_policy, mode) };
    ModeOptions { auto, top }
  }
}

/// Ask every query of every probe in `mode`; counts go to the returned [`ModeCounts`], one
/// calibration entry per counted query to `calibration`.
fn measure_mode(
  mode: RetrievalMode,
  probes: &[Probe],
  pi_negatives: &HashSet<&str>,
  common: &BenchCommon,
  calibration: &mut Vec<Value>,
) -> Result<ModeCounts> {
  let opts = ModeOptions::new(mode, common);
  let mut counts = ModeCounts::default();
  for probe in probes {
    common.say(format!(
      "precision {}: {} queries of {} on the {} vault",
      mode.as_str(),
      probe.queries.len(),
      probe.query_set,
      probe.vault_name
    ));
    for q in &probe.queries {
      if let Some(entry) = measure_query(mode, probe, q, pi_negatives, &opts, &mut counts)? {
        calibration.push(entry);
      }
    }
  }
  counts.groups = std::mem::take(&mut counts.groups).into_iter().map(|(k, v)| (k, v.finish())).collect();
  Ok(counts)
}

/// One query of a probe: counted in its groups; its calibration entry, or `None` for a query
/// that is neither positive nor negative.
fn measure_query(
  mode: RetrievalMode,
  probe: &Probe,
  q: &ProbeQuery,
  pi_negatives: &HashSet<&str>,
  opts: &ModeOptions,
  counts: &mut ModeCounts,
) -> Result<Option<Value>> {
  let floor = RecallPolicy::automatic().min_score;
  let auto_max = RecallPolicy::automatic().max_results as usize;
  let auto = ask(probe.paths, &q.id, &q.text, &opts.auto)?;
  let top = ask(probe.paths, &q.id, &q.text, &opts.top)?;
  // Consistency: the automatic list must be the floor-0 list filtered by the floor, cut at 3.
  let expected_auto: Vec<&String> =
    top.top.iter().filter(|h| h.raw_score >= floor).map(|h| &h.id).take(auto_max).collect();
  if expected_auto != auto.ids.iter().collect::<Vec<_>>() {
    counts.mismatches.push(format!("{}:{}", probe.key, q.id));
  }
  // Injected pages that are not simply the head of the ranking (a higher-ranked page fell
  // under the floor): the confidence is not monotone in rank.
  let head: Vec<&String> = top.top.iter().take(auto.ids.len()).map(|h| &h.id).collect();
  let head_differs = head != auto.ids.iter().collect::<Vec<_>>();
  if head_differs {
    counts.non_prefix.push(format!("{}:{}", probe.key, q.id));
  }
  let injected = !auto.ids.is_empty();
  let is_negative = q.relevant.is_empty();
  let hit = auto.ids.iter().any(|id| q.relevant.contains(id));
  let ceiling = top.top.iter().take(auto_max).any(|h| q.relevant.contains(&h.id));
  let groups = &mut counts.groups;
  let group = match (probe.key, is_negative) {
    ("piOnPi", false) => {
      let g = groups.entry(format!("piOnPi.{}", q.split)).or_default();
      g.add(injected, Some((hit, ceiling)), auto.used);
      "piOnPi".to_string()
    }
    ("piOnPi", true) => {
      if !pi_negatives.contains(q.id.as_str()) {
        // A judged query without a relevant judgment would land here; none exist today.
        return Ok(None);
      }
      "piNegativesOnPi".to_string()
    }
    ("beirOnBeir", true) => return Ok(None), // unjudged BEIR queries: neither positive nor negative
    (key, _) => key.to_string(),
  };
  groups.entry(group.clone()).or_default().add(injected, (!is_negative).then_some((hit, ceiling)), auto.used);
  let top1_group = match (is_negative, probe.key) {
    (true, _) => "negatives (pooled)",
    (false, "piOnPi") => "pi positives",
    (false, _) => "beir positives",
  };
  counts.top1.entry(top1_group).or_default().push(top.top.first().map_or(0.0, |h| h.raw_score));
  if is_negative {
    groups.entry("pooledNegatives".into()).or_default().add(injected, None, auto.used);
  }
  Ok(Some(json!({
    "mode": mode.as_str(),
    "modeUsed": auto.used.as_str(),
    "querySet": probe.query_set,
    "vault": probe.vault_name,
    "queryId": q.id,
    "split": q.split,
    "polarity": if is_negative { "negative" } else { "positive" },
    "top1": top.top.first().map(|h| json!({
      "id": h.id, "confidence": h.confidence, "score": h.score, "multiplier": h.multiplier,
      "relevant": q.relevant.contains(&h.id),
    })),
    "top10": top.top.iter().map(|h| json!({"id": h.id, "confidence": h.confidence, "score": h.score, "relevant": q.relevant.contains(&h.id)})).collect::<Vec<_>>(),
    "injectedNotHeadOfRanking": head_differs,
    "injected": auto.ids,
    "hit": if is_negative { Value::Null } else { json!(hit) },
  })))
}

/// The precision report's rows and per-mode JSON, filled mode by mode.
#[derive(Default)]
struct PrecisionTables {
  per_mode: Map<String, Value>,
  md_rows: Vec<Vec<String>>,
  dist_rows: Vec<Vec<String>>,
  ceiling_rows: Vec<Vec<String>>,
}

impl PrecisionTables {
  /// Log `mode`'s summary and add its rows and JSON.
  fn add(
    &mut self,
    mode: RetrievalMode,
    c: &ModeCounts,
    beir_name: &str,
    started: Instant,
    common: &BenchCommon,
  ) {
    let floor = RecallPolicy::automatic().min_score;
    let g = |k: &str| c.groups.get(k).cloned().unwrap_or_default();
    common.say(format!(
      "precision {}: negatives injected {} ({beir_name}→pi {}, pi→{beir_name} {}); pi positives hit {}, {beir_name} \
       positives hit {} ({:.0} ms); {} queries inject pages that are not the head of the ranking; {} automatic lists \
       differ from the floored ranking",
      mode.as_str(),
      fmt_rate(&g("pooledNegatives"), false),
      fmt_rate(&g("beirOnPi"), false),
      fmt_rate(&g("piOnBeir"), false),
      fmt_rate(&g("piOnPi"), true),
      fmt_rate(&g("beirOnBeir"), true),
      ms_since(started),
      c.non_prefix.len(),
      c.mismatches.len()
    ));
    self.md_rows.push(vec![
      mode.as_str().to_string(),
      fmt_rate(&g("beirOnPi"), false),
      fmt_rate(&g("piOnBeir"), false),
      fmt_rate(&g("piNegativesOnPi"), false),
      fmt_rate(&g("pooledNegatives"), false),
      fmt_rate(&g("piOnPi"), true),
      fmt_rate(&g("piOnPi"), false),
      fmt_rate(&g("piOnPi.heldout"), true),
      fmt_rate(&g("beirOnBeir"), true),
      fmt_rate(&g("beirOnBeir"), false),
      fmt_used(&g("pooledNegatives").modes_used),
      c.non_prefix.len().to_string(),
    ]);
    self.ceiling_rows.push(vec![
      mode.as_str().to_string(),
      fmt_rate(&g("piOnPi"), true),
      fmt_ceiling(&g("piOnPi")),
      fmt_rate(&g("piOnPi.heldout"), true),
      fmt_ceiling(&g("piOnPi.heldout")),
      fmt_rate(&g("beirOnBeir"), true),
      fmt_ceiling(&g("beirOnBeir")),
    ]);
    for (group, values) in &c.top1 {
      let d = score_distribution(values, floor);
      let f = |k: &str| d.get(k).and_then(Value::as_f64).map_or("–".into(), |v| format!("{v:.3}"));
      self.dist_rows.push(vec![
        mode.as_str().to_string(),
        group.replace("beir", beir_name),
        values.len().to_string(),
        f("p5"),
        f("p25"),
        f("p50"),
        f("p75"),
        f("p95"),
        f("max"),
        format!("{}/{}", d["atOrAboveFloor"], values.len()),
      ]);
    }
    self.per_mode.insert(
      mode.as_str().to_string(),
      json!({
        "negatives": {
          format!("{beir_name}OnPi"): g("beirOnPi"),
          format!("piOn{}", capitalize(beir_name)): g("piOnBeir"),
          "piNegativesOnPi": g("piNegativesOnPi"),
          "pooled": g("pooledNegatives"),
        },
        "positives": {
          "piOnPi": {"all": g("piOnPi"), "train": g("piOnPi.train"), "heldout": g("piOnPi.heldout")},
          format!("{beir_name}On{}", capitalize(beir_name)): g("beirOnBeir"),
        },
        "injectedNotHeadOfRanking": {"count": c.non_prefix.len(), "queries": c.non_prefix},
        "top1ScoreDistribution": c.top1.iter().map(|(k, v)| (k.replace("beir", beir_name), score_distribution(v, floor))).collect::<Map<String, Value>>(),
        "automaticVsFlooredRankingMismatches": c.mismatches,
        "wallMs": r3(ms_since(started)),
      }),
    );
  }
}

/// Run the precision suite: pi fixture + a BEIR set (SciFact), every mode of `common`.
pub fn run_precision(pi_fixture: &Path, beir_dir: &Path, common: &BenchCommon) -> Result<BenchOutput> {
  let context = machine_context();
  let src = PrecisionSources::load(pi_fixture, beir_dir)?;
  let beir_name = src.beir_name.as_str();
  // Labels as in the set benches: with --reuse-dir, the same vault copies (and vectors) serve both.
  let (pi_tmp, pi_paths, _) = common.vault_copy(&src.pi_vault, "pi")?;
  let (beir_tmp, beir_paths, _) = common.beir_copy(&src.beir_dir, beir_name)?;
  let pi_ix = build_index(&pi_paths, common.needs_vectors(), "pi", common)?;
  let beir_ix = build_index(&beir_paths, common.needs_vectors(), beir_name, common)?;
  let probes = src.probes(&pi_paths, &beir_paths);
  let pi_negatives = src.pi_negatives();
  let mut calibration: Vec<Value> = Vec::new();
  let mut tables = PrecisionTables::default();
  for &mode in &common.modes {
    let started = Instant::now();
    let counts = measure_mode(mode, &probes, &pi_negatives, common, &mut calibration)?;
    tables.add(mode, &counts, beir_name, started, common);
  }
  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  let index = json!({"pi": pi_ix.report, beir_name: beir_ix.report});
  record_json(
    &mut out,
    common.out.join("precision.json"),
    &precision_json(&src, &context, &tables.per_mode, index),
  )?;
  record_json(
    &mut out,
    common.out.join("precision-calibration.json"),
    &calibration_json(&context, calibration),
  )?;
  let index_rows = [("pi", &pi_ix.report), (beir_name, &beir_ix.report)];
  let md = precision_markdown(&context, beir_name, &tables, &index_rows);
  record_markdown(&mut out, common.out.join("precision.md"), md)?;
  release_reader(&pi_paths);
  release_reader(&beir_paths);
  drop((pi_tmp, beir_tmp));
  Ok(out)
}

/// `precision.json`: the policy, the definitions, every mode's counts and the index cost.
fn precision_json(
  src: &PrecisionSources,
  context: &Value,
  per_mode: &Map<String, Value>,
  index: Value,
) -> Value {
  let floor = RecallPolicy::automatic().min_score;
  let beir_name = &src.beir_name;
  json!({
    "schema": SCHEMA,
    "kind": "precision",
    "context": context,
    "fixture": report_path(&src.fixture_path),
    "beir": report_path(&src.beir_dir),
    "automaticPolicy": {"includePersonal": false, "minScore": floor, "maxPerVault": 10, "maxResults": 3},
    "definitions": {
      "injectionRate": "share of queries whose automatic list (RecallPolicy::automatic) is non-empty",
      "hitRate": "share of positive queries with an injected page judged relevant (pi: grade > 0; BEIR: qrels)",
      "ceilingRate": "share of positive queries with a relevant page among the first maxResults of the ranking with the floor removed (what any floor could reach with this ranking)",
      "negatives": format!("{beir_name} queries on the pi vault, pi queries on the {beir_name} vault (no relevant page there), and the pi fixture's autoExpectation:none queries on the pi vault"),
      "positives": format!("pi judged queries on the pi vault; {beir_name} judged queries on the {beir_name} vault"),
    },
    "modes": per_mode,
    "index": index,
  })
}

/// `precision-calibration.json`: the per-query top-1 confidence dump.
fn calibration_json(context: &Value, entries: Vec<Value>) -> Value {
  json!({
    "schema": SCHEMA,
    "kind": "precision-calibration",
    "context": context,
    "floor": RecallPolicy::automatic().min_score,
    "note": "top1/top10 come from the automatic policy with the floor removed (minScore 0, maxPerVault 10, 10 \
             results); `injected` is the real automatic list; injectedNotHeadOfRanking marks queries whose injected \
             pages are not the first ones of that ranking (a higher-ranked page fell under the floor). Entries with split \"heldout\" are pi held-out \
             queries: measure only, never tune thresholds on them.",
    "entries": entries,
  })
}

/// `precision.md`: the injection table, the top-1 score distribution, the hit-rate ceiling and
/// the index cost.
fn precision_markdown(
  context: &Value,
  b: &str,
  tables: &PrecisionTables,
  index_rows: &[(&str, &IndexReport)],
) -> String {
  let floor = RecallPolicy::automatic().min_score;
  let auto_max = RecallPolicy::automatic().max_results;
  let rows = |md: &mut String, rows: &[Vec<String>]| {
    for row in rows {
      let _ = writeln!(md, "| {} |", row.join(" | "));
    }
  };
  let mut md = String::new();
  md.push_str("# Automatic-recall precision\n\n");
  md.push_str(&context_markdown(context));
  let _ = writeln!(
    md,
    "- Automatic policy: active vault only, floor {floor}, maxPerVault 10, 3 results. Cells: count/queries (rate).\n"
  );
  let _ = writeln!(
    md,
    "| mode | neg: {b} q → pi vault | neg: pi q → {b} vault | neg: pi negatives | neg: pooled injection | pos: pi \
     hit | pos: pi injected anything | pos: pi held-out hit | pos: {b} hit | pos: {b} injected anything | modes used \
     (negatives) | injected ≠ head of ranking |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
  );
  rows(&mut md, &tables.md_rows);
  let _ = writeln!(
    md,
    "\n## Top-1 score distribution\n\nScore of the first page of the automatic policy's list with the floor removed \
     (nearest-rank percentiles; a query with no candidate counts as 0).\n\n| mode | query group | n | p5 | p25 | p50 | p75 | \
     p95 | max | ≥ floor {floor} |\n|---|---|---|---|---|---|---|---|---|---|"
  );
  rows(&mut md, &tables.dist_rows);
  let _ = writeln!(
    md,
    "\n## Hit-rate ceiling\n\nA positive's *ceiling* is a relevant page among the first {auto_max} pages of the \
     ranking with the floor removed: the hit rate a perfect confidence (any floor) could reach without a better \
     ranking.\n\n| mode | pi hit | pi ceiling | pi held-out hit | pi held-out ceiling | {b} hit | {b} ceiling |\n\
     |---|---|---|---|---|---|---|"
  );
  rows(&mut md, &tables.ceiling_rows);
  md.push_str("\n## Index cost\n\n");
  index_markdown(&mut md, index_rows);
  let _ = writeln!(
    md,
    "\nThe per-query top-1 confidence dump is `precision-calibration.json` (split marked; pi held-out is for \
     measuring only)."
  );
  md
}

pub(super) fn capitalize(s: &str) -> String {
  let mut c = s.chars();
  c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}
