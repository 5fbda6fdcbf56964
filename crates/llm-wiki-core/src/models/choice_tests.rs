use super::*;

fn sample(identified: usize, non_english: usize) -> LanguageSample {
  LanguageSample { vault_pages: identified, sampled: identified, identified, non_english }
}

/// A model root holding the given families (manifest.json only: enough to be found).
fn root_with(families: &[Family]) -> (tempfile::TempDir, ModelConfig) {
  let t = tempfile::tempdir().unwrap();
  for f in families {
    let d = t.path().join(f.dir_name());
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("manifest.json"), "{}").unwrap();
  }
  let c = ModelConfig { model_roots: vec![t.path().to_path_buf()], ..Default::default() };
  (t, c)
}

#[test]
fn pages_are_told_apart_by_language() {
  let en = "The vector store keeps one row per chunk, and a reindex embeds only the chunks \
            whose text changed since the last run, so small edits stay cheap.";
  let de = "Der Vektorspeicher enthält eine Zeile pro Abschnitt, und eine Neuindizierung \
            bettet nur die Abschnitte ein, deren Text sich seit dem letzten Lauf geändert hat.";
  let zh = "向量存储为每个片段保存一行，重新索引时只嵌入自上次运行以来文本发生变化的片段。";
  let ja =
    "ベクトルストアはチャンクごとに一行を保持し、再索引では前回から変わったチャンクだけを埋め込みます。";
  assert_eq!(page_language(en), Some(true));
  assert_eq!(page_language(de), Some(false));
  assert_eq!(page_language(zh), Some(false));
  assert_eq!(page_language(ja), Some(false));
  assert_eq!(page_language(""), None);
  // Frontmatter and code are not the page's language.
  let fm = format!(
    "---\ntitle: Vektorspeicher Übersicht für alle Nutzer\ntags: [a]\n---\n{en}\n```\nfn main() {{}}\n```\n"
  );
  assert_eq!(page_language(&fm), Some(true));
}

#[test]
fn a_sample_counts_identified_pages_only() {
  let mut s = LanguageSample::default();
  s.add("ok");
  s.add("これは日本語で書かれた短いメモです。検索の評価に使います。");
  s.add("This page explains how the search engine ranks pages by their content.");
  assert_eq!(s.sampled, 3);
  assert_eq!((s.identified, s.non_english), (2, 1));
  assert!((s.non_english_share() - 0.5).abs() < 1e-9);
  assert_eq!(LanguageSample::default().non_english_share(), 0.0);
}

#[test]
fn hysteresis_keeps_a_vault_between_the_thresholds() {
  // From English: only a majority switches.
  assert_eq!(family_of_sample(&sample(100, 50), None), Family::English);
  assert_eq!(family_of_sample(&sample(100, 51), None), Family::Multilingual);
  assert_eq!(family_of_sample(&sample(100, 51), Some(Family::English)), Family::Multilingual);
  // From multilingual: only below 30% goes back.
  assert_eq!(family_of_sample(&sample(100, 45), Some(Family::Multilingual)), Family::Multilingual);
  assert_eq!(family_of_sample(&sample(100, 30), Some(Family::Multilingual)), Family::Multilingual);
  assert_eq!(family_of_sample(&sample(100, 29), Some(Family::Multilingual)), Family::English);
  // A vault flipping around 50% between reindexes keeps its model.
  let mut fam = Some(Family::English);
  for n in [52, 48, 53, 47, 55, 40, 31] {
    fam = Some(family_of_sample(&sample(100, n), fam));
    assert_eq!(fam, Some(Family::Multilingual), "{n}% keeps the multilingual model");
  }
}

#[test]
fn the_vault_override_is_read_from_its_config() {
  let cfg = |v: serde_json::Value| v.as_object().unwrap().clone();
  assert_eq!(Override::of_config(&cfg(serde_json::json!({}))), Override::Auto);
  assert_eq!(
    Override::of_config(&cfg(serde_json::json!({"retrieval": {"embedModel": "Multilingual"}}))),
    Override::Fixed(Family::Multilingual)
  );
  assert_eq!(
    Override::of_config(&cfg(serde_json::json!({"retrieval": {"embedModel": "english"}}))),
    Override::Fixed(Family::English)
  );
  assert_eq!(
    Override::of_config(&cfg(serde_json::json!({"retrieval": {"embedModel": "auto"}}))),
    Override::Auto
  );
  assert!(matches!(
    Override::of_config(&cfg(serde_json::json!({"retrieval": {"embedModel": 3}}))),
    Override::Invalid(_)
  ));
}

#[test]
fn a_missing_multilingual_model_falls_back_with_a_reason() {
  let (_t, c) = root_with(&[Family::English]);
  let ch = decide(&c, &Override::Auto, Some(sample(10, 9)), None);
  assert_eq!(ch.family, Some(Family::Multilingual));
  assert_eq!(ch.dir, family_dir(&c, Family::English), "MiniLM is used instead");
  assert!(ch.reason.contains("not installed"), "{}", ch.reason);
  assert!(ch.reason.contains("9 of 10"), "{}", ch.reason);
  // Installed: used.
  let (_t2, c2) = root_with(&[Family::English, Family::Multilingual]);
  let ch = decide(&c2, &Override::Auto, Some(sample(10, 9)), None);
  assert_eq!(ch.dir, family_dir(&c2, Family::Multilingual));
  assert!(!ch.reason.contains("not installed"));
  // An English vault stays English.
  let ch = decide(&c2, &Override::Auto, Some(sample(10, 1)), None);
  assert_eq!((ch.family, ch.dir.clone()), (Some(Family::English), family_dir(&c2, Family::English)));
  // The override wins over the sample; no model at all is no failure.
  let ch = decide(&c2, &Override::Fixed(Family::English), Some(sample(10, 10)), None);
  assert_eq!(ch.family, Some(Family::English));
  assert!(ch.reason.contains("retrieval.embedModel"));
  let (_t3, none) = root_with(&[]);
  let ch = decide(&none, &Override::Auto, Some(sample(10, 1)), None);
  assert_eq!(ch.dir, None);
  assert!(!any_model(&none));
}

#[test]
fn engine_settings_win_over_the_vault() {
  let (_t, mut c) = root_with(&[Family::English, Family::Multilingual]);
  c.embed_model = Some(PathBuf::from("/somewhere/else"));
  let ch = decide(&c, &Override::Fixed(Family::Multilingual), None, None);
  assert_eq!(ch.dir, Some(PathBuf::from("/somewhere/else")));
  assert_eq!(ch.family, None);
  assert!(!needs_sample(&c));
  assert_eq!(dir_for_model(&c, "any id"), Some(PathBuf::from("/somewhere/else")));
  c.embed_model = None;
  c.disabled = true;
  assert_eq!(decide(&c, &Override::Auto, None, None).dir, None);
  assert!(!any_model(&c));
}

#[test]
fn a_recorded_choice_round_trips() {
  let t = tempfile::tempdir().unwrap();
  let f = t.path().join("embed-choice.json");
  assert!(read_recorded(&f).is_none());
  let (_r, c) = root_with(&[Family::English]);
  let ch = decide(&c, &Override::Auto, Some(sample(4, 3)), None);
  record(&f, &ch).unwrap();
  let back = read_recorded(&f).unwrap();
  assert_eq!((back.family, back.sample, back.reason.clone()), (ch.family, ch.sample, ch.reason));
  std::fs::write(&f, "{broken").unwrap();
  assert!(read_recorded(&f).is_none(), "a damaged record is ignored (re-sampled)");
}

#[test]
fn samples_are_evenly_spaced_and_bounded() {
  let v: Vec<usize> = (0..1000).collect();
  let s = spaced_sample(&v);
  assert_eq!(s.len(), SAMPLE_PAGES);
  assert_eq!((s[0], s[1], *s.last().unwrap()), (0, 5, 995));
  assert_eq!(spaced_sample(&v[..7]).len(), 7);
}
