//! Lexical automatic recall for long, natural prompts (issue 15): the salient terms of a prompt
//! decide, not the share of every word typed; the heaviest 64 terms are kept, not the first 64;
//! a page the prompt names is recalled; unrelated prompts still inject nothing.

use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions};
use llm_wiki_core::testkit::{temp_vault, write_page};
use llm_wiki_core::vault::VaultPaths;

fn vault() -> (tempfile::TempDir, VaultPaths) {
  let (t, p) = temp_vault();
  write_page(
    &p,
    "concepts/backups",
    "Nightly Backups",
    "Backups are copied to an offsite bucket every night; restores are rehearsed monthly.",
  );
  write_page(
    &p,
    "concepts/sourdough",
    "Sourdough Starter",
    "The sourdough starter is fed with rye flour twice a day and kept at room temperature.",
  );
  write_page(
    &p,
    "concepts/certificates",
    "Certificate Renewal",
    "TLS certificates are renewed by the ACME client thirty days before expiry.",
  );
  write_page(
    &p,
    "entities/quokka",
    "Quokka",
    "Quokka is the internal deployment tool; it promotes builds from staging to production.",
  );
  write_page(
    &p,
    "concepts/standups",
    "Standup Notes",
    "Daily standup notes list blockers, owners and the next step for each task.",
  );
  write_page(
    &p,
    "concepts/reviews",
    "Code Review Policy",
    "Every change needs one approving review; reviewers check tests and naming.",
  );
  let opts = ReindexOptions { components: vec![Component::Lexical], ..Default::default() };
  assert!(reindex_vault(&p, &opts).ok);
  (t, p)
}

fn auto(p: &VaultPaths, q: &str) -> Vec<String> {
  let r = recall_wiki(p, q, &RecallOptions::new(RecallPolicy::automatic(), RetrievalMode::Lexical)).unwrap();
  r.results.into_iter().map(|x| x.id).collect()
}

#[test]
fn a_long_conversational_prompt_recalls_its_page_lexically() {
  let (_t, p) = vault();
  let prompt = "hey, before I touch the baking schedule again, can you remind me how often we feed the \
                sourdough starter and which flour we settled on last time?";
  assert_eq!(auto(&p, prompt).first().map(String::as_str), Some("concepts/sourdough"), "{prompt}");
  // Named in a longer prompt: the page's title is a phrase of the query.
  let named = auto(&p, "could you check whether quokka already shipped yesterday's hotfix everywhere please");
  assert!(named.contains(&"entities/quokka".to_string()), "{named:?}");
}

#[test]
fn unrelated_long_prompts_inject_nothing() {
  let (_t, p) = vault();
  for q in [
    "please write a polite email to the landlord asking when the broken heating in the apartment gets repaired",
    "convert this python dictionary comprehension into a plain for loop so the junior developers can read it",
    "what is a good vegetarian lasagna recipe that can be prepared the evening before and baked the next day",
    // Shares only digits with the release note.
    "Inositol lipid 3-phosphatase PTEN converts Ptdlns(3,4)P 2 into phosphatidylinositol 4-phosphate.",
  ] {
    assert!(auto(&p, q).is_empty(), "{q}: {:?}", auto(&p, q));
  }
}

#[test]
fn the_heaviest_terms_are_kept_not_the_first() {
  let (_t, p) = vault();
  // 70 distinct words absent from the vault, then the one word that matters at the end.
  let filler: Vec<String> = (0..70).map(|i| format!("zq{i}x")).collect();
  let q = format!("{} certificates renewal", filler.join(" "));
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 10 };
  let r = recall_wiki(&p, &q, &RecallOptions::new(policy, RetrievalMode::Lexical)).unwrap();
  assert_eq!(r.results.first().map(|x| x.id.as_str()), Some("concepts/certificates"));
}
