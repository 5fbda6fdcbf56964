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

/// Run the prompt suite: `prompts` (a prompt set file) against `vault` (a vault directory with
/// `.llm-wiki/`, e.g. the pi fixture's `vault/`, or a BEIR-style directory).
pub fn run_prompts(prompts: &Path, vault: &Path, common: &BenchCommon) -> Result<BenchOutput> {
  let context = machine_context();
  let set = load_prompt_set(prompts)?;
  let name =
    prompts.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "prompts".into());
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
  let mut per_mode = Map::new();
  for &mode in &common.modes {
    let auto_opts = common.recall_options(RecallPolicy::automatic(), mode);
    let ranked_opts = common.recall_options(ranked_policy(10), mode);
    let (mut pos, mut hits, mut neg, mut injected_neg, mut rr_sum) = (0usize, 0usize, 0usize, 0usize, 0.0f64);
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let mut entries = Vec::new();
    for p in &set.prompts {
      let auto = ask(&paths, &p.id, &p.text, &auto_opts)?;
      let ranked = ask(&paths, &p.id, &p.text, &ranked_opts)?;
      *used.entry(auto.used.as_str().to_string()).or_insert(0) += 1;
      let relevant: HashSet<&str> = p.relevant.iter().map(String::as_str).collect();
      let hit = auto.ids.iter().any(|id| relevant.contains(id.as_str()));
      let first = ranked.ids.iter().position(|id| relevant.contains(id.as_str()));
      if relevant.is_empty() {
        neg += 1;
        injected_neg += usize::from(!auto.ids.is_empty());
      } else {
        pos += 1;
        hits += usize::from(hit);
        rr_sum += first.map_or(0.0, |r| 1.0 / (r + 1) as f64);
      }
      entries.push(json!({
        "id": p.id,
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
    per_mode.insert(
      mode.as_str().to_string(),
      json!({
        "positives": pos, "hits": hits, "hitRate": rate(hits, pos),
        "negatives": neg, "negativesInjected": injected_neg, "negativeInjectionRate": rate(injected_neg, neg),
        "mrr10": mrr, "modesUsed": used, "prompts": entries,
      }),
    );
  }
  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  let doc = json!({
    "schema": SCHEMA,
    "kind": "prompts",
    "context": context,
    "prompts": report_path(prompts),
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
    "- Prompts: `{}` ({} prompts; {}). Vault: `{}`.\n- Automatic policy: floor {floor}, 3 results; a positive is a \
     hit when an injected page is one of its `relevant` pages. MRR@10 of the first relevant page in the ranked list \
     (floor 0).\n",
    report_path(prompts),
    set.prompts.len(),
    set.description.trim_end_matches('.'),
    report_path(vault)
  );
  md.push_str(
    "| mode | positives: hit | negatives: injected | MRR@10 | modes used |\n|---|---|---|---|---|\n",
  );
  for r in &rows {
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
