//! Prompt suite: long conversational agent prompts against one vault (`llm-wiki-prompts/1`):
//! automatic-recall hit rate on the prompts that name relevant pages, injection rate on the
//! unrelated ones, and MRR@10 of the ranked list, per mode.

use super::*;

/// A prompt set file.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct PromptSet {
  /// `llm-wiki-prompts/1`.
  pub schema: String,
  /// Free text: provenance of the prompts.
  #[serde(default)]
  pub description: String,
  pub prompts: Vec<Prompt>,
}

/// One prompt: `relevant` empty = a negative (nothing should be injected).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Prompt {
  pub id: String,
  pub text: String,
  #[serde(default)]
  pub relevant: Vec<String>,
}

/// Load and check a prompt set.
pub fn load_prompt_set(path: &Path) -> Result<PromptSet> {
  let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
  let set: PromptSet =
    serde_json::from_str(&text).map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
  if set.schema != "llm-wiki-prompts/1" {
    return Err(Error::invalid(format!("{}: unsupported schema {:?}", path.display(), set.schema)));
  }
  Ok(set)
}

/// One file of queries from another domain, every line a negative on the vault it is run against
/// (`bench prompts --unrelated`): `{"id","text"}` (a BEIR `queries.jsonl`, a written long-query
/// set) or `{"query", "related": []}` (a calibrate JSONL of unrelated prompts). Ids default to the
/// line number.
pub fn load_unrelated(path: &Path) -> Result<Vec<Prompt>> {
  let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
  let mut out = Vec::new();
  for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
    let v: Value = serde_json::from_str(line)
      .map_err(|e| Error::invalid(format!("{} line {}: {e}", path.display(), i + 1)))?;
    let Some(text) = v.get("text").or_else(|| v.get("query")).and_then(Value::as_str) else {
      return Err(Error::invalid(format!("{} line {}: no \"text\" or \"query\"", path.display(), i + 1)));
    };
    let id = v.get("id").and_then(Value::as_str).map_or_else(|| format!("{}", i + 1), str::to_string);
    out.push(Prompt { id, text: text.to_string(), relevant: Vec::new() });
  }
  Ok(out)
}

fn stem(p: &Path) -> String {
  p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "prompts".into())
}

/// The group an `--unrelated` file's rows are counted in: its stem, or for a BEIR set's
/// `queries.jsonl` the set's directory name (`scifact`).
fn group_of(p: &Path) -> String {
  let s = stem(p);
  match p.parent().and_then(Path::file_name) {
    Some(dir) if s == "queries" => dir.to_string_lossy().into_owned(),
    _ => s,
  }
}

/// Prompts with the group (file) each is counted in, in file order.
type Grouped = Vec<(String, Prompt)>;

/// The prompts of `prompts` and the negatives of `unrelated`, each with its group, in file order,
/// and one description per file for the report.
fn load_all(prompts: Option<&Path>, unrelated: &[PathBuf]) -> Result<(Grouped, Vec<String>)> {
  let mut all: Vec<(String, Prompt)> = Vec::new();
  let mut described = Vec::new();
  if let Some(p) = prompts {
    let set = load_prompt_set(p)?;
    described.push(format!(
      "`{}` ({} prompts; {})",
      report_path(p),
      set.prompts.len(),
      set.description.trim_end_matches('.')
    ));
    all.extend(set.prompts.into_iter().map(|x| (stem(p), x)));
  }
  for u in unrelated {
    let qs = load_unrelated(u)?;
    described.push(format!("`{}` ({} unrelated queries)", report_path(u), qs.len()));
    all.extend(qs.into_iter().map(|x| (group_of(u), x)));
  }
  if all.is_empty() {
    return Err(Error::invalid("bench prompts: nothing to ask (give --prompts and/or --unrelated)"));
  }
  Ok((all, described))
}

/// The vault copy, labelled like the set benches' (`pi`, or the directory name) so that with
/// --reuse-dir they share it.
fn copy_vault(vault: &Path, common: &BenchCommon) -> Result<(TempDir, VaultPaths)> {
  let (tmp, paths, _) = match detect_source(vault) {
    Ok(BenchSource::Beir { dir }) => common.beir_copy(&dir, &dir_label(&dir, "vault"))?,
    Ok(BenchSource::Pi { vault, .. }) => common.vault_copy(&vault, "pi")?,
    Err(_) => common.vault_copy(vault, &format!("prompts-{}", dir_label(vault, "vault")))?,
  };
  Ok((tmp, paths))
}

/// The counts of one group of prompts (one file).
#[derive(Default)]
struct GroupCounts {
  positives: usize,
  hits: usize,
  negatives: usize,
  negatives_injected: usize,
}

/// Ask every prompt in `mode`: its report row, its per-file rows (added to `group_rows`) and its
/// JSON.
fn measure_mode(
  mode: RetrievalMode,
  all: &[(String, Prompt)],
  paths: &VaultPaths,
  common: &BenchCommon,
  group_rows: &mut Vec<Vec<String>>,
) -> Result<(Vec<String>, Value)> {
  let auto_opts = common.recall_options(RecallPolicy::automatic(), mode);
  let ranked_opts = common.recall_options(ranked_policy(10), mode);
  let mut total = GroupCounts::default();
  let mut rr_sum = 0.0f64;
  // Groups in file order.
  let mut groups: Vec<(String, GroupCounts)> = Vec::new();
  let mut used: BTreeMap<String, usize> = BTreeMap::new();
  let mut entries = Vec::new();
  for (group, p) in all {
    let auto = ask(paths, &p.id, &p.text, &auto_opts)?;
    let ranked = ask(paths, &p.id, &p.text, &ranked_opts)?;
    *used.entry(auto.used.as_str().to_string()).or_insert(0) += 1;
    let relevant: HashSet<&str> = p.relevant.iter().map(String::as_str).collect();
    let hit = auto.ids.iter().any(|id| relevant.contains(id.as_str()));
    let first = ranked.ids.iter().position(|id| relevant.contains(id.as_str()));
    if groups.last().is_none_or(|(g, _)| g != group) {
      groups.push((group.clone(), GroupCounts::default()));
    }
    let g = &mut groups.last_mut().expect("pushed above").1;
    for c in [&mut total, g] {
      if relevant.is_empty() {
        c.negatives += 1;
        c.negatives_injected += usize::from(!auto.ids.is_empty());
      } else {
        c.positives += 1;
        c.hits += usize::from(hit);
      }
    }
    if !relevant.is_empty() {
      rr_sum += first.map_or(0.0, |r| 1.0 / (r + 1) as f64);
    }
    entries.push(json!({
      "id": p.id,
      "group": group,
      "polarity": if relevant.is_empty() { "negative" } else { "positive" },
      "injected": auto.ids,
      "hit": if relevant.is_empty() { Value::Null } else { json!(hit) },
      "firstRelevantRank": first.map(|r| r + 1),
      "top3": ranked.top.iter().take(3).map(|h| json!({"id": h.id, "score": h.score})).collect::<Vec<_>>(),
    }));
  }
  let GroupCounts { positives: pos, hits, negatives: neg, negatives_injected: injected_neg } = total;
  let mrr = if pos == 0 { 0.0 } else { round6(rr_sum / pos as f64) };
  common.say(format!(
    "prompts {}: positives hit {hits}/{pos}, negatives injected {injected_neg}/{neg}, MRR@10 {mrr}",
    mode.as_str()
  ));
  let row = vec![
    mode.as_str().to_string(),
    format!("{hits}/{pos} ({})", rate(hits, pos)),
    format!("{injected_neg}/{neg} ({})", rate(injected_neg, neg)),
    format!("{mrr:.4}"),
    fmt_used(&used),
  ];
  let mut by_group = Map::new();
  for (g, c) in &groups {
    let (gp, gh, gn, gi) = (c.positives, c.hits, c.negatives, c.negatives_injected);
    group_rows.push(vec![
      mode.as_str().to_string(),
      g.clone(),
      format!("{gi}/{gn} ({})", rate(gi, gn)),
      format!("{gh}/{gp}"),
    ]);
    by_group.insert(
      g.clone(),
      json!({"positives": gp, "hits": gh, "negatives": gn, "negativesInjected": gi,
             "negativeInjectionRate": rate(gi, gn)}),
    );
  }
  let json = json!({
    "positives": pos, "hits": hits, "hitRate": rate(hits, pos),
    "negatives": neg, "negativesInjected": injected_neg, "negativeInjectionRate": rate(injected_neg, neg),
    "mrr10": mrr, "modesUsed": used, "groups": by_group, "prompts": entries,
  });
  Ok((row, json))
}

/// Run the prompt suite: `prompts` (a prompt set file) and/or `unrelated` query files (every line a
/// negative, see [`load_unrelated`]) against `vault` (a vault directory with `.llm-wiki/`, e.g. the
/// pi fixture's `vault/`, or a BEIR-style directory). Counts are reported in total and per file
/// ([`group_of`] names it); reports are named after the prompt set, else `unrelated`.
pub fn run_prompts(
  prompts: Option<&Path>,
  unrelated: &[PathBuf],
  vault: &Path,
  common: &BenchCommon,
) -> Result<BenchOutput> {
  let context = machine_context();
  let (all, described) = load_all(prompts, unrelated)?;
  let name = prompts.map_or_else(|| "unrelated".to_string(), stem);
  let (tmp, paths) = copy_vault(vault, common)?;
  let ix = build_index(&paths, common.needs_vectors(), &name, common)?;
  let floor = RecallPolicy::automatic().min_score;
  let mut rows = Vec::new();
  let mut group_rows = Vec::new();
  let mut per_mode = Map::new();
  for &mode in &common.modes {
    let (row, json) = measure_mode(mode, &all, &paths, common, &mut group_rows)?;
    rows.push(row);
    per_mode.insert(mode.as_str().to_string(), json);
  }
  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  let doc = json!({
    "schema": SCHEMA,
    "kind": "prompts",
    "context": context,
    "prompts": prompts.map(report_path),
    "unrelated": unrelated.iter().map(|u| report_path(u)).collect::<Vec<_>>(),
    "vault": report_path(vault),
    "automaticPolicy": {"includePersonal": false, "minScore": floor, "maxPerVault": 10, "maxResults": 3},
    "modes": per_mode,
    "index": ix.report,
  });
  record_json(&mut out, common.out.join(format!("prompts-{name}.json")), &doc)?;
  let md = prompts_markdown(&name, &context, &described, vault, &rows, &group_rows);
  record_markdown(&mut out, common.out.join(format!("prompts-{name}.md")), md)?;
  release_reader(&paths);
  drop(tmp);
  Ok(out)
}

/// `prompts-<name>.md`: the method, the table per mode and the table per file.
fn prompts_markdown(
  name: &str,
  context: &Value,
  described: &[String],
  vault: &Path,
  rows: &[Vec<String>],
  group_rows: &[Vec<String>],
) -> String {
  let floor = RecallPolicy::automatic().min_score;
  let mut md = format!("# Prompt suite: {name}\n\n");
  md.push_str(&context_markdown(context));
  let _ = writeln!(
    md,
    "- Prompts: {}. Vault: `{}`.\n- Automatic policy: floor {floor}, 3 results; a positive is a \
     hit when an injected page is one of its `relevant` pages, a negative (every query of an `--unrelated` file) \
     counts when anything is injected. MRR@10 of the first relevant page in the ranked list (floor 0).\n",
    described.join("; "),
    report_path(vault)
  );
  md.push_str(
    "| mode | positives: hit | negatives: injected | MRR@10 | modes used |\n|---|---|---|---|---|\n",
  );
  for r in rows {
    let _ = writeln!(md, "| {} |", r.join(" | "));
  }
  md.push_str("\nPer file:\n\n| mode | set | negatives: injected | positives: hit |\n|---|---|---|---|\n");
  for r in group_rows {
    let _ = writeln!(md, "| {} |", r.join(" | "));
  }
  md
}
