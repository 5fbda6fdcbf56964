//! Lexical automatic recall for long, natural prompts (issue 15): the salient terms of a prompt
//! decide, not the share of every word typed; the heaviest 64 terms are kept, not the first 64;
//! a page the prompt names is recalled; unrelated prompts still inject nothing.

use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode, Scoring};
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions};
use llm_wiki_core::testkit::{temp_vault, write_file, write_page};
use llm_wiki_core::vault::VaultPaths;

/// Build the vault's lexical index.
fn index_lexical(p: &VaultPaths) {
  let opts = ReindexOptions { components: vec![Component::Lexical], ..Default::default() };
  assert!(reindex_vault(p, &opts).ok);
}

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
  index_lexical(&p);
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

/// Seventeen abstract-like pages: each of the words "local", "document", "search" and "tool" is in
/// three quarters of them, and one page ("concepts/survey") has all four, twice each — a prompt of
/// those words is covered by it without being about anything specific to this vault.
fn common_words_vault() -> (tempfile::TempDir, VaultPaths) {
  let (t, p) = temp_vault();
  let common = ["local", "document", "search", "tool"];
  let topics = [
    "kinase",
    "ribosome",
    "insulin",
    "neuron",
    "antibody",
    "plasmid",
    "enzyme",
    "membrane",
    "peptide",
    "cytokine",
    "mitochondria",
    "chromatin",
    "receptor",
    "lipid",
    "vaccine",
    "telomere",
  ];
  for (i, topic) in topics.iter().enumerate() {
    let words: Vec<&str> =
      common.iter().enumerate().filter(|(j, _)| (i + j) % 4 != 0).map(|(_, w)| *w).collect();
    write_page(
      &p,
      &format!("sources/abstract-{i}"),
      &format!("Abstract {i}"),
      &format!("We measured {topic} activity in cultured cells; the assay used {}.", words.join(" and ")),
    );
  }
  write_page(
    &p,
    "concepts/survey",
    "Survey",
    "A local document search tool: the local tool builds a document index for search.",
  );
  index_lexical(&p);
  (t, p)
}

fn scored(p: &VaultPaths, q: &str, opts: &RecallOptions) -> Vec<(String, f64)> {
  recall_wiki(p, q, opts).unwrap().results.into_iter().map(|x| (x.id, x.score)).collect()
}

#[test]
fn a_prompt_of_words_common_in_the_vault_injects_nothing() {
  use llm_wiki_core::retrieve::confidence::AUTOMATIC_FLOOR;
  let (_t, p) = common_words_vault();
  let q = "the local document search tool";
  // Explicit recall finds the page that covers every word, above the automatic floor: the
  // explicit confidence alone would have injected it.
  let explicit = scored(&p, q, &RecallOptions::new(RecallPolicy::explicit(None), RetrievalMode::Lexical));
  assert_eq!(explicit.first().map(|x| x.0.as_str()), Some("concepts/survey"), "{explicit:?}");
  assert!(explicit[0].1 >= AUTOMATIC_FLOOR, "{explicit:?}");
  // Automatic recall: four words found in three quarters of the vault are no specific evidence.
  assert!(auto(&p, q).is_empty(), "{:?}", auto(&p, q));
}

#[test]
fn explicit_scores_are_not_scaled() {
  // The JS test "results respect maxResults and minScore": words found in every page of the vault.
  let (_t, p) = temp_vault();
  for i in 0..12 {
    write_page(
      &p,
      &format!("concepts/shared-{i}"),
      &format!("Shared {i}"),
      &format!("zxcommonvor zxotherword {}", "filler ".repeat(i)),
    );
  }
  index_lexical(&p);
  let policy = RecallPolicy { include_personal: false, min_score: 0.25, max_per_vault: 10, max_results: 4 };
  assert_eq!(Scoring::of_policy(&policy), Scoring::Explicit);
  assert_eq!(Scoring::of_policy(&RecallPolicy::automatic()), Scoring::Automatic);
  assert_eq!(Scoring::of_policy(&RecallPolicy::explicit(None)), Scoring::Explicit);
  let explicit_opts = RecallOptions::new(policy.clone(), RetrievalMode::Lexical);
  // The same lists scored as automatic recall, floor removed.
  let automatic_opts = RecallOptions {
    scoring: Scoring::Automatic,
    ..RecallOptions::new(RecallPolicy { min_score: 0.0, ..policy }, RetrievalMode::Lexical)
  };
  for (q, exempt) in [("zxcommonvor zxotherword", false), ("zxcommonvor", true)] {
    let explicit = scored(&p, q, &explicit_opts);
    assert_eq!(explicit.len(), 4, "{q}: {explicit:?}");
    let automatic = scored(&p, q, &automatic_opts);
    assert_eq!(
      automatic.iter().map(|x| &x.0).collect::<Vec<_>>(),
      explicit.iter().map(|x| &x.0).collect::<Vec<_>>(),
      "{q}: scoring does not change the ranking"
    );
    for ((_, e), (_, a)) in explicit.iter().zip(&automatic) {
      assert!(*e >= 0.25, "{q}: explicit {e}");
      if exempt {
        // A one-word query keeps its confidence in automatic recall too.
        assert_eq!(e, a, "{q}");
      } else {
        // Two words found in every page: the specificity factor takes almost all of it, and
        // explicit recall does not apply it.
        assert!(*a < 0.05, "{q}: explicit {e}, automatic {a}");
      }
    }
  }
}

#[test]
fn specific_queries_still_inject() {
  let (_t, p) = vault();
  // A short query of words specific to one page.
  assert_eq!(auto(&p, "sourdough starter rye flour").first().map(String::as_str), Some("concepts/sourdough"));
  // One word found in one page of a two-page vault (the JS test "automatic recall searches only
  // the active vault").
  let (_t2, small) = temp_vault();
  write_page(&small, "concepts/shared", "Shared project copy", "zxsharedvor project");
  write_page(&small, "concepts/proj", "Proj", "zxprojvor");
  index_lexical(&small);
  assert_eq!(auto(&small, "zxprojvor"), vec!["concepts/proj".to_string()]);
}

/// A prompt about the subject of a small vault, whose words are in most of its pages (the
/// pi-extension example's "when do zephyrcache entries expire" on the pages that disagree about
/// it): specific, so it injects — on two pages (too small to measure specificity) and as the
/// vault grows with unrelated pages (the unit is a word found in two sections, which the
/// subject's words are).
#[test]
fn a_prompt_about_a_small_vaults_subject_injects() {
  let (_t, p) = temp_vault();
  // The example's pages, byte for byte (resolve.test.ts).
  write_file(
    &p.wiki.join("concepts/cache-ttl.md"),
    "---\ntype: \"concept\"\ntitle: \"Cache TTL is five minutes\"\nrelations:\n  - target: concepts/cache-forever\n    type: contradicts\n---\n\n## Claim\n\nThe zephyrcache entries expire after five minutes.\n\nDisputed by [forever](cache-forever.md).\n",
  );
  write_file(
    &p.wiki.join("concepts/cache-forever.md"),
    "---\ntype: \"concept\"\ntitle: \"Entries are kept forever\"\n---\n\n## Claim\n\nzephyrcache entries are kept until the process restarts.\n",
  );
  let extra = [
    ("concepts/deploy", "Deploy checklist", "Tag the release, build the image, roll out to staging first."),
    ("concepts/logging", "Logging format", "Logs are JSON lines with a timestamp, a level and a message."),
    ("entities/postgres", "Postgres", "The primary database; backups run nightly."),
  ];
  for n in 0..=extra.len() {
    if n > 0 {
      let (id, title, body) = extra[n - 1];
      write_page(&p, id, title, body);
    }
    index_lexical(&p);
    let got = auto(&p, "when do zephyrcache entries expire");
    assert_eq!(got.first().map(String::as_str), Some("concepts/cache-ttl"), "{} pages: {got:?}", n + 2);
  }
}

/// Twelve chat sessions between Melanie and Caroline: both names, and everyday words, are in
/// every session ("go" too), "museum" is in two of them, one of which has the museum visit.
fn chat_vault() -> (tempfile::TempDir, VaultPaths) {
  let (t, p) = temp_vault();
  let days = [
    "we cooked pasta and watched a film",
    "the kids played football after school",
    "work was busy, I stayed late again",
    "we walked the dog by the river",
    "I started reading a new novel",
    "my sister called about the holidays",
    "we painted the kitchen blue",
    "I tried a yoga class downtown",
    "the garden needs water every day",
    "we planned a trip to the coast, but the museum there was closed",
    "I baked bread for the neighbours",
  ];
  for (i, day) in days.iter().enumerate() {
    write_page(
      &p,
      &format!("sessions/session-{i}"),
      &format!("Session {i}"),
      &format!("Melanie: Hi Caroline, {day}.\n\nCaroline: That sounds lovely, Melanie. How did it go?"),
    );
  }
  write_page(
    &p,
    "sessions/session-museum",
    "Session 11",
    "Melanie: Hi Caroline, we go to the museum every summer; yesterday we went with the kids.\n\n\
     Caroline: That sounds lovely, Melanie. How did it go?",
  );
  index_lexical(&p);
  (t, p)
}

#[test]
fn a_question_naming_someone_the_page_covers_fully_is_specific() {
  let (_t, p) = chat_vault();
  // Every word of the question is in the session, and the user wrote Melanie as a name.
  let named = auto(&p, "When did Melanie go to the museum?");
  assert_eq!(named.first().map(String::as_str), Some("sessions/session-museum"), "{named:?}");
  // The same question without the capital names nobody: its words are common in the vault
  // (the names are in every session), so the specificity factor keeps it below the floor.
  assert!(auto(&p, "when did melanie go to the museum?").is_empty());
  // A name the page does not cover fully keeps the factor.
  assert!(auto(&p, "When did Melanie go to the museum in Paris?").is_empty());
  // Explicit recall never sees either: the same scores whatever the case.
  let explicit =
    |q: &str| scored(&p, q, &RecallOptions::new(RecallPolicy::explicit(None), RetrievalMode::Lexical));
  assert_eq!(explicit("When did Melanie go to the museum?"), explicit("when did melanie go to the museum?"));
}
