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
  // (group, prompt) in file order.
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
  let name = prompts.map_or_else(|| "unrelated".to_string(), stem);
  // The vault copy is labelled like the set benches' (`pi`, or the directory name), so that with
  // --reuse-dir they share it.
  let dir_name =
    |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "vault".into());
  let (tmp, paths) = match detect_source(vault) {
    Ok(BenchSource::Beir { dir }) => {
      let tmp = common.temp(&dir_name(&dir))?;
      let paths = prepare_beir_vault(&dir, tmp.path())?.0;
      (tmp, paths)
    }
    Ok(BenchSource::Pi { vault, .. }) => {
      let tmp = common.temp("pi")?;
      let paths = prepare_pi_vault(&vault, tmp.path())?.0;
      (tmp, paths)
    }
    Err(_) => {
      let tmp = common.temp(&format!("prompts-{}", dir_name(vault)))?;
      let paths = prepare_pi_vault(vault, tmp.path())?.0;
      (tmp, paths)
    }
  };
  let ix = build_index(&paths, common.needs_vectors(), &name, common)?;
  let floor = RecallPolicy::automatic().min_score;
  let mut rows = Vec::new();
  let mut group_rows = Vec::new();
  let mut per_mode = Map::new();
  for &mode in &common.modes {
    let auto_opts = common.recall_options(RecallPolicy::automatic(), mode);
    let ranked_opts = common.recall_options(ranked_policy(10), mode);
    let (mut pos, mut hits, mut neg, mut injected_neg, mut rr_sum) = (0usize, 0usize, 0usize, 0usize, 0.0f64);
    // Per group: [positives, hits, negatives, negatives injected], groups in file order.
    let mut groups: Vec<(String, [usize; 4])> = Vec::new();
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let mut entries = Vec::new();
    for (group, p) in &all {
      let auto = ask(&paths, &p.id, &p.text, &auto_opts)?;
      let ranked = ask(&paths, &p.id, &p.text, &ranked_opts)?;
      *used.entry(auto.used.as_str().to_string()).or_insert(0) += 1;
      let relevant: HashSet<&str> = p.relevant.iter().map(String::as_str).collect();
      let hit = auto.ids.iter().any(|id| relevant.contains(id.as_str()));
      let first = ranked.ids.iter().position(|id| relevant.contains(id.as_str()));
      if groups.last().is_none_or(|(g, _)| g != group) {
        groups.push((group.clone(), [0; 4]));
      }
      let g = &mut groups.last_mut().expect("pushed above").1;
      if relevant.is_empty() {
        neg += 1;
        injected_neg += usize::from(!auto.ids.is_empty());
        g[2] += 1;
        g[3] += usize::from(!auto.ids.is_empty());
      } else {
        pos += 1;
        hits += usize::from(hit);
        rr_sum += first.map_or(0.0, |r| 1.0 / (r + 1) as f64);
        g[0] += 1;
        g[1] += usize::from(hit);
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
    let mrr = if pos == 0 { 0.0 } else { round6(rr_sum / pos as f64) };
    common.say(format!(
      "prompts {}: positives hit {hits}/{pos}, negatives injected {injected_neg}/{neg}, MRR@10 {mrr}",
      mode.as_str()
    ));
    rows.push(vec![
      mode.as_str().to_string(),
      format!("{hits}/{pos} ({})", rate(hits, pos)),
      format!("{injected_neg}/{neg} ({})", rate(injected_neg, neg)),
      format!("{mrr:.4}"),
      fmt_used(&used),
    ]);
    let mut by_group = Map::new();
    for (g, [gp, gh, gn, gi]) in &groups {
      group_rows.push(vec![
        mode.as_str().to_string(),
        g.clone(),
        format!("{gi}/{gn} ({})", rate(*gi, *gn)),
        format!("{gh}/{gp}"),
      ]);
      by_group.insert(
        g.clone(),
        json!({"positives": gp, "hits": gh, "negatives": gn, "negativesInjected": gi,
               "negativeInjectionRate": rate(*gi, *gn)}),
      );
    }
    per_mode.insert(
      mode.as_str().to_string(),
      json!({
        "positives": pos, "hits": hits, "hitRate": rate(hits, pos),
        "negatives": neg, "negativesInjected": injected_neg, "negativeInjectionRate": rate(injected_neg, neg),
        "mrr10": mrr, "modesUsed": used, "groups": by_group, "prompts": entries,
      }),
    );
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
  let path = common.out.join(format!("prompts-{name}.json"));
  write_json_file(&path, &doc)?;
  out.files.push(path);
  let mut md = format!("# Prompt suite: {name}\n\n");
  md.push_str(&context_markdown(&context));
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
  for r in &rows {
    let _ = writeln!(md, "| {} |", r.join(" | "));
  }
  md.push_str("\nPer file:\n\n| mode | set | negatives: injected | positives: hit |\n|---|---|---|---|\n");
  for r in &group_rows {
    let _ = writeln!(md, "| {} |", r.join(" | "));
  }
  let path = common.out.join(format!("prompts-{name}.md"));
  write_text_file(&path, &md)?;
  out.files.push(path);
  out.markdown = md;
  release_reader(&paths);
  drop(tmp);
  Ok(out)
}
