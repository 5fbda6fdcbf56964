//! Embedder and cross-encoder against golden values computed independently (a float64 numpy
//! BERT forward pass in scripts/fetch_models.py, never through ONNX). Needs the model root
//! produced by `scripts/fetch_models.py` (`.models/` at the repository root, or
//! `LLM_WIKI_MODELS_DIR`).

use std::path::PathBuf;

use llm_wiki_core::models::manifest::ModelDir;
use llm_wiki_core::models::onnx::SessionConfig;
use llm_wiki_core::models::runtime;
use llm_wiki_core::models::{CrossEncoder, Embedder, TextKind};
use llm_wiki_core::store::CancelFlag;

fn model_root() -> PathBuf {
  let root = std::env::var_os("LLM_WIKI_MODELS_DIR")
    .map(PathBuf::from)
    .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models"));
  assert!(
    root.join("runtime/runtime.json").is_file(),
    "model root {} missing: run scripts/fetch_models.py",
    root.display()
  );
  root
}

fn session(root: &std::path::Path) -> SessionConfig {
  SessionConfig { runtime_lib: runtime::locate(None, &[], &[root.to_path_buf()]).unwrap(), threads: 2 }
}

#[derive(serde::Deserialize)]
struct Golden {
  cases: Vec<Case>,
}
#[derive(serde::Deserialize)]
struct Case {
  text: String,
  input_ids: Vec<i64>,
  embedding: Vec<f64>,
}
#[derive(serde::Deserialize)]
struct GoldenPairs {
  cases: Vec<Pair>,
}
#[derive(serde::Deserialize)]
struct Pair {
  query: String,
  passage: String,
  logit: f64,
}

fn cosine(a: &[f32], b: &[f64]) -> f64 {
  let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * y).sum();
  let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
  let nb: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
  dot / (na * nb)
}

fn golden(root: &std::path::Path) -> Golden {
  serde_json::from_slice(&std::fs::read(root.join("golden/embeddings.json")).unwrap()).unwrap()
}

#[test]
fn fp32_embeddings_match_reference_forward_pass() {
  let root = model_root();
  let dir = ModelDir::open(&root.join("all-MiniLM-L6-v2-fp32")).unwrap();
  dir.verify().unwrap();
  let e = Embedder::load(&dir, &session(&root)).unwrap();
  let g = golden(&root);
  for case in &g.cases {
    // One text per call: matches how the reference was computed (no padding).
    let v = &e
      .embed(std::slice::from_ref(&case.text), TextKind::Document, &CancelFlag::new(), &mut |_| {})
      .unwrap()[0];
    let max_diff = v.iter().zip(&case.embedding).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max);
    assert!(max_diff < 1e-4, "{:?}: max |diff| {max_diff}", case.text);
    assert!(case.input_ids.len() >= 2);
  }
  // Batched (padded) inputs give the same vectors: masking is right.
  let texts: Vec<String> = g.cases.iter().map(|c| c.text.clone()).collect();
  let batch = e.embed(&texts, TextKind::Document, &CancelFlag::new(), &mut |_| {}).unwrap();
  for (v, case) in batch.iter().zip(&g.cases) {
    assert!(cosine(v, &case.embedding) > 0.99999, "{:?}", case.text);
  }
}

#[test]
fn int8_embeddings_stay_close_to_reference() {
  let root = model_root();
  let dir = ModelDir::open(&root.join("all-MiniLM-L6-v2-int8")).unwrap();
  let e = Embedder::load(&dir, &session(&root)).unwrap();
  for case in &golden(&root).cases {
    let v = &e
      .embed(std::slice::from_ref(&case.text), TextKind::Document, &CancelFlag::new(), &mut |_| {})
      .unwrap()[0];
    let c = cosine(v, &case.embedding);
    assert!(c > 0.975, "{:?}: cosine {c}", case.text);
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4);
  }
  // Related texts are closer than unrelated ones.
  let q = e.embed_query("how do I back up my photos").unwrap();
  let docs = e
    .embed(
      &[
        "Keep three copies of your data, one off site.".into(),
        "Feed the sourdough starter every day.".into(),
      ],
      TextKind::Document,
      &CancelFlag::new(),
      &mut |_| {},
    )
    .unwrap();
  let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
  assert!(dot(&q, &docs[0]) > dot(&q, &docs[1]) + 0.1);
}

#[test]
fn cross_encoder_logits_match_reference() {
  let root = model_root();
  let dir = ModelDir::open(&root.join("test-cross-encoder-int8")).unwrap();
  let ce = CrossEncoder::load(&dir, &session(&root)).unwrap();
  let g: GoldenPairs =
    serde_json::from_slice(&std::fs::read(root.join("golden/cross_encoder.json")).unwrap()).unwrap();
  for p in &g.cases {
    let l = ce.logits(&p.query, std::slice::from_ref(&p.passage), None).unwrap()[0];
    // int8 model vs float64 reference of the same weights.
    assert!((l as f64 - p.logit).abs() < 0.06, "{}: {l} vs {}", p.query, p.logit);
    let s = ce.score(&p.query, std::slice::from_ref(&p.passage), None).unwrap()[0];
    assert!((s - 1.0 / (1.0 + (-l).exp())).abs() < 1e-6);
  }
  // An expired deadline is a timeout, not a crash.
  let past = std::time::Instant::now() - std::time::Duration::from_secs(1);
  assert_eq!(ce.score("q", &["p".into()], Some(past)).unwrap_err().code(), "timeout");
  // Kind is checked.
  let embed_dir = ModelDir::open(&root.join("all-MiniLM-L6-v2-int8")).unwrap();
  assert_eq!(CrossEncoder::load(&embed_dir, &session(&root)).err().unwrap().code(), "model_unavailable");
}

#[test]
fn corrupt_model_is_a_typed_error() {
  let root = model_root();
  let t = tempfile::tempdir().unwrap();
  let src = root.join("all-MiniLM-L6-v2-int8");
  for f in ["manifest.json", "tokenizer.json"] {
    std::fs::copy(src.join(f), t.path().join(f)).unwrap();
  }
  // Same size as the real model, garbage content: the manifest check passes, loading fails.
  let size = std::fs::metadata(src.join("model.onnx")).unwrap().len() as usize;
  std::fs::write(t.path().join("model.onnx"), vec![7u8; size]).unwrap();
  let dir = ModelDir::open(t.path()).unwrap();
  assert_eq!(dir.verify().unwrap_err().code(), "model_unavailable");
  assert_eq!(Embedder::load(&dir, &session(&root)).err().unwrap().code(), "model_unavailable");
}

#[test]
fn missing_runtime_is_a_typed_error() {
  let err =
    runtime::locate(Some(std::path::Path::new("/nonexistent/libonnxruntime.so")), &[], &[]).unwrap_err();
  assert_eq!(err.code(), "onnx_runtime_unavailable");
  let err = runtime::locate(None, &[PathBuf::from("/nope/lib.so")], &[PathBuf::from("/nope")]);
  // ORT_DYLIB_PATH may be set in the environment; only assert the error type when it is not.
  if std::env::var_os("ORT_DYLIB_PATH").is_none() {
    assert_eq!(err.unwrap_err().code(), "onnx_runtime_unavailable");
  }
}
