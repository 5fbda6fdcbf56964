//! Timing probe (ignored): per-commit cost of hinted one-page edits on a synthetic vault.
//! `LLM_WIKI_PROBE_PAGES=5000 cargo test --profile ci --test commit_cost -- --ignored --nocapture`

use std::fs;
use std::time::Instant;

use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions};
use llm_wiki_core::testkit::temp_vault as vault;

#[test]
#[ignore]
fn hinted_edit_cost() {
  let n: usize = std::env::var("LLM_WIKI_PROBE_PAGES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
  let (_t, p) = vault();
  for i in 0..n {
    let f = p.wiki.join(format!("concepts/p{i:06}.md"));
    fs::create_dir_all(f.parent().unwrap()).unwrap();
    let body = format!(
      "Page {i} about topic w{} and w{}. See [next](p{:06}.md) and [[p{:06}]].\n\nMore text {i} here with words alpha beta gamma.",
      i % 97,
      i % 31,
      (i + 1) % n,
      (i * 7) % n
    );
    fs::write(&f, format!("---\ntype: concept\ntitle: P{i}\n---\n{body}\n")).unwrap();
  }
  let opts = ReindexOptions { components: vec![Component::Lexical], ..Default::default() };
  let t = Instant::now();
  let r = reindex_vault(&p, &opts);
  assert!(r.ok, "{:?}", r.errors);
  eprintln!("cold {n} pages: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
  for k in 0..6 {
    let id = format!("p{:06}", (k * 131) % n);
    let f = p.wiki.join(format!("concepts/{id}.md"));
    fs::write(&f, format!("---\ntype: concept\ntitle: {id}\n---\nEdited {k} body zq{k}x.\n")).unwrap();
    let hint = f.strip_prefix(&p.root).unwrap().to_path_buf();
    let t = Instant::now();
    let r = reindex_vault(&p, &ReindexOptions { changed_paths: Some(vec![hint.clone()]), ..opts.clone() });
    assert!(r.ok, "{:?}", r.errors);
    assert_eq!(r.documents.updated, 1);
    eprintln!("hinted edit {k}: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    let r = reindex_vault(&p, &ReindexOptions { changed_paths: Some(vec![hint]), ..opts.clone() });
    assert!(r.ok, "{:?}", r.errors);
    eprintln!("hinted unchanged {k}: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
  }
}
