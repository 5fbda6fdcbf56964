//! Chunk sizes counted with the embedding model's tokenizer: chunks fit the model's window by the
//! model's own count, a change of counter rebuilds the store exactly once, and a tokenizer that
//! cannot be loaded falls back to the estimate with a warning. Needs the tokenizer of the model
//! root produced by `scripts/fetch_models.py` (`.models/` at the repository root, or
//! `LLM_WIKI_MODELS_DIR`); the tests are skipped, with a message, when it is absent. This file is
//! its own test process: the engine-wide model settings it changes reach no other test.

use std::fs;
use std::path::{Path, PathBuf};

use llm_wiki_core::chunk::{estimate_tokens, ChunkConfig, Chunker, Estimate, TokenCounter, CHUNKING_RULES};
use llm_wiki_core::models::manifest::ModelDir;
use llm_wiki_core::models::tokens::TokenizerCounter;
use llm_wiki_core::models::{configure, ConfigChange, Setting, DEFAULT_EMBED_DIR};
use llm_wiki_core::store::manifest::Manifest;
use llm_wiki_core::store::{reindex_vault, Component, ReindexOptions, StoreLayout};
use llm_wiki_core::vault::VaultPaths;

fn model_root() -> Option<PathBuf> {
  let root = std::env::var_os("LLM_WIKI_MODELS_DIR")
    .map(PathBuf::from)
    .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models"));
  if !root.join(DEFAULT_EMBED_DIR).join("tokenizer.json").is_file() {
    eprintln!("SKIPPED: no model root at {} (run scripts/fetch_models.py)", root.display());
    return None;
  }
  Some(root)
}

/// Pages that stress the count: prose, numbers and identifiers (which the estimate undercounts),
/// code, a minified line, CJK, a table, accented and mixed-script text.
fn hostile_bodies() -> Vec<String> {
  let prose = "Retrieval systems rank passages by lexical and semantic evidence gathered from notes. ";
  let ids: String =
    (0..400).map(|i| format!("v{i}.{}-rc{} 0x{:x}{:x} ", i * 7, i % 9, i * 31, i * 977)).collect();
  let urls: String = (0..120).map(|i| format!("https://ex.org/a/{i}?q=k{i}&x=y_{i}#s{i} ")).collect();
  // Wiki and Markdown links: words met once whose pieces repeat (the counter's cache sees pieces).
  let links: String = (0..150)
    .map(|i| format!("[[concepts/00{}/foo-bar-{i}]]. [Bar {i}](../../b/{i}/x-y_{i}.md), (`z_{i}`) ", i % 7))
    .collect();
  let code: String = (0..150).map(|i| format!("let v_{i} = f({i}, \"s{i}\")?.g()[{i}];\n")).collect();
  let minified: String = (0..3000).map(|i| format!("a{i}=b[{i}];")).collect();
  let cjk = "卡片盒笔记法是一种个人知识管理方法。".repeat(80);
  let table: String = (0..120).map(|i| format!("| r{i} | {} | x{i}y |\n", i * 13)).collect();
  let accents = "Ça été déjà très naïve, Œuvre ü ß ÆØÅ Ελληνικά кириллица ".repeat(60);
  vec![
    format!("# Prose\n\n{}\n", prose.repeat(80)),
    format!("# Ids\n\n{ids}\n"),
    format!("# Links\n\n{urls}\n"),
    format!("# Wiki links\n\n{links}\n"),
    format!("# Code\n\n```rust\n{code}```\n"),
    format!("# Minified\n\n```js\n{minified}\n```\n\n{minified}\n"),
    format!("# CJK\n\n{cjk}\n"),
    format!("# Table\n\n| a | b | c |\n|---|---|---|\n{table}\n"),
    format!("# Accents\n\n{accents}\n"),
  ]
}

#[test]
fn chunks_fit_the_model_window_by_the_real_tokenizer() {
  let Some(root) = model_root() else { return };
  let dir = ModelDir::open(&root.join(DEFAULT_EMBED_DIR)).unwrap();
  let counter = std::sync::Arc::new(TokenizerCounter::load(&dir).unwrap());
  assert!(counter.is_exact(), "the default model's WordPiece pre-tokenizer splits at whitespace");
  let cfg = counter.chunking(&ChunkConfig::default());
  assert_eq!(cfg.max_tokens, 200, "a 256-token window keeps the default size");
  let chunker = Chunker { config: cfg, counter: counter.clone() };
  let real = |t: &str| counter.count_whole(t);
  let mut estimate_over = 0;
  for body in hostile_bodies() {
    let page = chunker.chunk("A title", &body, 1);
    assert!(page.chunks.len() > 1);
    for c in &page.chunks {
      let n = real(&c.text);
      // The per-word sum the chunker packs by is the tokenizer's count of the whole text.
      assert_eq!(chunker.counter.count(&c.text), n, "{:?}", &c.text[..c.text.len().min(80)]);
      assert!(n <= cfg.max_tokens, "{n} tokens: {:?}", &c.text[..c.text.len().min(80)]);
      // What the model gets: [CLS] prefix + plain text [SEP], inside its 256-token window.
      assert!(real(&c.embedding_text()) + 2 <= dir.manifest.max_length);
    }
    // Nothing is lost to the count (the heading line is the chunks' prefix, not their text).
    let kept: usize = page.chunks.iter().map(|c| c.text.matches(char::is_alphanumeric).count()).sum();
    let content: usize = body.lines().skip(1).map(|l| l.matches(char::is_alphanumeric).count()).sum();
    assert!(kept >= content, "{kept} of {content} characters kept");
    // The same pages chunked by the estimate: some chunks are over the window by the model's count.
    for c in llm_wiki_core::chunk::chunk_page("A title", &body, 1, &ChunkConfig::default()).chunks {
      assert!(estimate_tokens(&c.text) <= 200);
      if real(&c.text) > 200 {
        estimate_over += 1;
      }
    }
  }
  assert!(estimate_over > 0, "the estimate never undercounted: this test shows nothing");
}

fn write(p: &VaultPaths, id: &str, body: &str) {
  let f = p.wiki.join(format!("{id}.md"));
  fs::create_dir_all(f.parent().unwrap()).unwrap();
  fs::write(f, format!("---\ntype: concept\ntitle: {id}\n---\n{body}\n")).unwrap();
}

fn manifest(p: &VaultPaths) -> Manifest {
  let current = StoreLayout::new(p.retrieval()).current().expect("a published store");
  let gen = llm_wiki_core::store::generation::Generation::open(current).unwrap().commit.manifest_generation;
  Manifest::load_generation(&StoreLayout::new(p.retrieval()).current().unwrap(), gen, None).unwrap()
}

/// A copy of the default model's directory whose manifest asks for chunks of at most `tokens`.
fn model_with_chunk_tokens(root: &Path, dir: &Path, tokens: usize) -> PathBuf {
  let from = root.join(DEFAULT_EMBED_DIR);
  let m = dir.join(format!("chunk-{tokens}"));
  fs::create_dir_all(&m).unwrap();
  for name in ["model.onnx", "tokenizer.json", "query.onnx"] {
    fs::copy(from.join(name), m.join(name)).unwrap();
  }
  let mut manifest: serde_json::Value =
    serde_json::from_slice(&fs::read(from.join("manifest.json")).unwrap()).unwrap();
  manifest["chunkTokens"] = serde_json::json!(tokens);
  fs::write(m.join("manifest.json"), manifest.to_string()).unwrap();
  m
}

#[test]
fn a_model_asking_for_smaller_chunks_gets_them_within_its_count() {
  let Some(root) = model_root() else { return };
  let t = tempfile::tempdir().unwrap();
  let dir = ModelDir::open(&model_with_chunk_tokens(&root, t.path(), 96)).unwrap();
  let counter = std::sync::Arc::new(TokenizerCounter::load(&dir).unwrap());
  let cfg = counter.chunking(&ChunkConfig::default());
  assert_eq!(
    (cfg.max_tokens, cfg.overlap_tokens),
    (96, 24),
    "chunkTokens caps the size, the overlap follows"
  );
  let chunker = Chunker { config: cfg, counter: counter.clone() };
  assert_eq!(chunker.label(), format!("tokenizer:{}@96+24/r{CHUNKING_RULES}", dir.manifest.id));
  let plain = std::sync::Arc::new(
    TokenizerCounter::load(&ModelDir::open(&root.join(DEFAULT_EMBED_DIR)).unwrap()).unwrap(),
  );
  let default = Chunker { config: plain.chunking(&ChunkConfig::default()), counter: plain };
  let (mut small, mut large) = (0, 0);
  for body in hostile_bodies() {
    let page = chunker.chunk("A title", &body, 1);
    for c in &page.chunks {
      assert!(counter.count_whole(&c.text) <= 96, "{:?}", &c.text[..c.text.len().min(80)]);
    }
    small += page.chunks.len();
    large += default.chunk("A title", &body, 1).chunks.len();
  }
  assert!(small > large * 3 / 2, "96-token chunks: {small}, default: {large}");
  // A request below the smallest chunk is raised to it; a larger one than the window allows is
  // held to the window.
  for (asked, got) in [(1, 16), (100_000, 200)] {
    let d = ModelDir::open(&model_with_chunk_tokens(&root, t.path(), asked)).unwrap();
    let c = TokenizerCounter::load(&d).unwrap().chunking(&ChunkConfig::default());
    assert_eq!(c.max_tokens, got, "chunkTokens {asked}");
  }
}

fn broken_model(dir: &Path) -> PathBuf {
  let m = dir.join("broken-model");
  fs::create_dir_all(&m).unwrap();
  fs::write(m.join("model.onnx"), b"not a model").unwrap();
  fs::write(m.join("tokenizer.json"), b"{ not json").unwrap();
  let manifest = serde_json::json!({
    "id": "test/broken", "kind": "embed", "dims": 4, "pooling": "mean", "maxLength": 256,
    "files": {
      "model.onnx": { "sha256": "00", "size": 11 },
      "tokenizer.json": { "sha256": "00", "size": 10 }
    }
  });
  fs::write(m.join("manifest.json"), manifest.to_string()).unwrap();
  m
}

#[test]
fn a_counter_change_rebuilds_once_and_an_unloadable_tokenizer_falls_back() {
  let Some(root) = model_root() else { return };
  let t = tempfile::tempdir().unwrap();
  let p = llm_wiki_core::testkit::init_vault(&t.path().join("v"), "T");
  for (i, body) in hostile_bodies().iter().enumerate() {
    write(&p, &format!("concepts/p{i}"), body);
  }
  // The hostile bodies are mostly not English: pin the vault to the default (English) model, whose
  // counter this test follows, whether or not multilingual-e5-small is installed beside it.
  let mut config: serde_json::Value = serde_json::from_slice(&fs::read(p.config_file()).unwrap()).unwrap();
  config["retrieval"] = serde_json::json!({ "embedModel": "english" });
  fs::write(p.config_file(), config.to_string()).unwrap();
  let lexical = ReindexOptions { components: vec![Component::Lexical], threads: 2, ..Default::default() };
  let run = || {
    let r = reindex_vault(&p, &lexical);
    assert!(r.ok, "{:?}", r.errors);
    r
  };
  let id = ModelDir::open(&root.join(DEFAULT_EMBED_DIR)).unwrap().manifest.id;
  // The manifest records the chunker's label: counter, non-default sizes, rules' revision.
  let estimate_label = format!("{}/r{CHUNKING_RULES}", Estimate.label());
  let tokenizer_label = format!("tokenizer:{id}/r{CHUNKING_RULES}");
  let small_label = format!("tokenizer:{id}@96+24/r{CHUNKING_RULES}");
  let steps: Vec<(&str, ConfigChange, String)> = vec![
    ("no model", ConfigChange { disabled: Setting::Set(true), ..Default::default() }, estimate_label.clone()),
    (
      "model root",
      ConfigChange {
        disabled: Setting::Set(false),
        model_roots: Setting::Set(vec![root.clone()]),
        threads: Setting::Set(1),
        ..Default::default()
      },
      tokenizer_label.clone(),
    ),
    (
      "broken tokenizer",
      ConfigChange { embed_model: Setting::Set(broken_model(t.path())), ..Default::default() },
      estimate_label.clone(),
    ),
    (
      "model asking for 96-token chunks",
      ConfigChange {
        embed_model: Setting::Set(model_with_chunk_tokens(&root, t.path(), 96)),
        ..Default::default()
      },
      small_label.clone(),
    ),
    (
      "model root again",
      ConfigChange { embed_model: Setting::Reset, ..Default::default() },
      tokenizer_label.clone(),
    ),
  ];
  let mut chunks_by_label = std::collections::HashMap::new();
  for (name, change, label) in steps {
    configure(change);
    let first = run();
    assert!(first.full_rebuild, "{name}: a new counter rebuilds");
    let m = manifest(&p);
    assert_eq!(m.chunker, label, "{name}");
    let unavailable = first.warnings.iter().filter(|w| w.code == "tokenizer_unavailable").count();
    assert_eq!(unavailable, usize::from(name == "broken tokenizer"), "{name}: {:?}", first.warnings);
    let total = first.chunks.total;
    if let Some(prev) = chunks_by_label.insert(label.clone(), total) {
      assert_eq!(prev, total, "{name}: the same counter chunks the same way");
    }
    assert_eq!(first.documents.indexed as usize, hostile_bodies().len(), "{name}: every page rechunked");
    // Exactly once: the next runs are incremental and change nothing.
    for _ in 0..2 {
      let again = run();
      assert!(!again.full_rebuild, "{name}: rebuilt twice");
      assert_eq!(again.generation, first.generation, "{name}: nothing committed");
      assert_eq!(again.documents.unchanged as usize, hostile_bodies().len());
      assert_eq!(manifest(&p).chunker, label);
    }
  }
  // The rebuild did rechunk: the counters, and the sizes, cut these pages differently.
  assert_eq!(chunks_by_label.len(), 3);
  assert_ne!(chunks_by_label[&estimate_label], chunks_by_label[&tokenizer_label], "{chunks_by_label:?}");
  assert!(chunks_by_label[&small_label] > chunks_by_label[&tokenizer_label], "{chunks_by_label:?}");
}

/// A page of every block kind the chunker cuts: nested headings, lists, a table, fenced and
/// indented code, a long paragraph, front-loaded links.
fn mixed_body() -> String {
  let para = "Notes link [[concepts/alpha-beta]] and [a page](../b/c.md) while `inline_code()` stays. ";
  let list: String = (0..60).map(|i| format!("- item {i}: {}\n", "word ".repeat(i % 13))).collect();
  let indented: String = (0..40).map(|i| format!("    line_{i} = value_{i}\n")).collect();
  format!(
    "Intro {}\n\n# One\n\n{}\n\n## One.A\n\n{list}\n### Deep\n\n| k | v |\n|---|---|\n| a | 1 |\n\n\
     # Two\n\n{indented}\n```py\n# not a heading\nprint('x')\n```\n\n---\n\n{}\n",
    para,
    para.repeat(50),
    para.repeat(7)
  )
}

/// Everything a page's chunking decides, hashed: sections (ordinal, headings, plain text, lines)
/// and chunks (id, ordinal, section, prefix, text, plain text, lines).
fn chunking_digest(chunker: &Chunker) -> String {
  use sha2::Digest;
  let mut h = sha2::Sha256::new();
  let mut bodies = hostile_bodies();
  bodies.push(mixed_body());
  for body in bodies {
    let page = chunker.chunk("A title", &body, 3);
    for s in &page.sections {
      h.update(format!("S{}|{:?}|{}|{}-{}\n", s.ordinal, s.headings, s.plain, s.line_start, s.line_end));
    }
    for c in &page.chunks {
      h.update(format!(
        "C{}|{}|{}|{}|{}|{}|{}-{}\n",
        c.id,
        c.ordinal,
        c.section,
        c.prefix,
        c.text,
        c.plain(),
        c.line_start,
        c.line_end
      ));
    }
  }
  h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Chunk ids key the vectors users have embedded: the chunker's output for the same inputs and
/// the same counter must not change unless the store format says so. Digests recorded with the
/// chunker of commit 1721eca (before the cold-build CPU work).
#[test]
fn chunking_is_unchanged_for_the_same_inputs_and_counter() {
  let estimate = Chunker::estimate(ChunkConfig::default());
  assert_eq!(chunking_digest(&estimate), ESTIMATE_DIGEST, "chunks by the estimate changed");
  let Some(root) = model_root() else { return };
  let dir = ModelDir::open(&root.join(DEFAULT_EMBED_DIR)).unwrap();
  let counter = std::sync::Arc::new(TokenizerCounter::load(&dir).unwrap());
  let chunker = Chunker { config: counter.chunking(&ChunkConfig::default()), counter };
  assert_eq!(chunking_digest(&chunker), TOKENIZER_DIGEST, "chunks by the model's tokenizer changed");
}

const ESTIMATE_DIGEST: &str = "48b378d5fbd293a33452300220c6138c3cda87f6b4b23e619c25578ac968899f";
const TOKENIZER_DIGEST: &str = "7504cb5991038f739cec25dfd156e20bf0093de2b35faca1a25004faa99229ab";
