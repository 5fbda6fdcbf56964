//! Retrieval modes and their fallback chains. Each mode produces one ranked list of pages per
//! vault with an absolute confidence per page; `trace` records what ran and why it fell back.
//!
//! | mode     | runs                                                         | on failure            |
//! |----------|--------------------------------------------------------------|-----------------------|
//! | lexical  | BM25                                                         | — (diagnostic)        |
//! | hybrid   | BM25 list + vector list of the query, RRF (k = 60)           | lexical               |
//! | adaptive | hybrid; quality when uncertain (margin, overlap, question…)  | lexical; keeps hybrid |
//! |          | and a second stage (cross-encoder / sentence windows) exists |                       |
//! | quality  | hybrid + PRF expansion (RM3 lexical, Rocchio dense), ≤ 40     | hybrid, then lexical  |
//! |          | candidates rescored by the cross-encoder when configured     |                       |
//! |          | (or, opt-in, by sentence-window embeddings)                   |                       |

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::confidence::{
  automatic_hybrid_confidence, CalibrationSource, DenseCalibration, DenseSupport, EXACT_MATCH_CONFIDENCE,
};
use super::dense::{dense_candidates, page_cosines, DenseCandidate};
use super::fusion::{evidence_fusion, rrf};
use super::lexical::{exact_match, lexical_candidates, proper_name_terms, LexicalCandidate};
use super::query::{identity_key, interrogative_prefix};
pub use super::ranking::{ModeContext, SubQuery, VaultHit};
use super::rescore;
use crate::analysis::{analyze, wiki_analyzer};
use crate::error::{Error, Result};
use crate::models::{self, Embedder};
use crate::store::vectors::{chunk_key, VectorIndex};

/// Candidates each list contributes before fusion (the design's `candidateLimit`).
pub const CANDIDATE_LIMIT: usize = 40;
/// Adaptive: escalate when the top-two confidence margin is below this.
pub const MARGIN_TRIGGER: f64 = 0.08;
/// Adaptive: escalate when lexical and dense top-5 pages overlap less than this (Jaccard).
pub const OVERLAP_TRIGGER: f64 = 0.40;
/// Adaptive: an exact identity match at least this confident skips escalation.
pub const EXACT_BYPASS: f64 = 0.80;
/// Quality: feedback pages for pseudo-relevance feedback.
pub const PRF_PAGES: usize = 3;
/// Quality: expansion terms added to the lexical query, and their weight.
pub const PRF_TERMS: usize = 10;
/// Weight of the pseudo-relevance-feedback expansion terms against the original query (RM3).
pub const PRF_WEIGHT: f32 = 0.5;
/// Quality: weight of the feedback centroid in the Rocchio query vector.
pub const ROCCHIO_WEIGHT: f32 = 0.5;

/// Retrieval modes of the design.
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "lowercase", skip_typescript))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetrievalMode {
  /// BM25 only; never loads a model.
  Lexical,
  /// BM25 + dense vectors fused by RRF.
  Hybrid,
  /// Hybrid, escalating to quality when the result looks uncertain.
  #[default]
  Adaptive,
  /// Candidate expansion and rescoring of at most 40 candidates.
  Quality,
}

impl RetrievalMode {
  /// Parse `lexical`, `hybrid`, `adaptive` or `quality`.
  pub fn parse(s: &str) -> Result<Self> {
    match s {
      "lexical" => Ok(RetrievalMode::Lexical),
      "hybrid" => Ok(RetrievalMode::Hybrid),
      "adaptive" => Ok(RetrievalMode::Adaptive),
      "quality" => Ok(RetrievalMode::Quality),
      o => Err(Error::invalid(format!(
        "unknown retrieval mode '{o}' (expected lexical | hybrid | adaptive | quality)"
      ))),
    }
  }
  /// The mode's name.
  pub fn as_str(self) -> &'static str {
    match self {
      RetrievalMode::Lexical => "lexical",
      RetrievalMode::Hybrid => "hybrid",
      RetrievalMode::Adaptive => "adaptive",
      RetrievalMode::Quality => "quality",
    }
  }
}

/// Result of a mode on one vault.
pub struct ModeOutcome {
  /// Pages ranked by the mode.
  pub hits: Vec<VaultHit>,
  /// The mode that produced them (after fallbacks).
  pub used: RetrievalMode,
  /// `(code, message)` of every fallback or failure.
  pub diagnostics: Vec<(&'static str, String)>,
}

/// The dense side of one vault: the embedder and matching vectors, or why there is none.
struct Dense {
  embedder: Arc<Embedder>,
  vectors: Arc<VectorIndex>,
  /// The embedder's cosine → confidence mapping (its manifest's; MiniLM's built-in one for the
  /// default model; none for another model).
  calibration: DenseCalibration,
}

/// What explicit recall says when no embedding model is installed yet: one line, the command.
pub const NO_MODEL_YET: &str =
  "no embedding model is installed yet, so recall is lexical; fetch the default \
  model (23 MB) with `npx llm-wiki-retrieval download` or `downloadModel()`";

/// The dense side of a vault, or why there is none: `Err(None)` when dense retrieval is turned
/// off (`configure({dense: false})`, a deliberate lexical-only install: trace only, no
/// diagnostic), `Err(Some(..))` when it is on but cannot run here — no model installed yet
/// included, whose diagnostic names the one command that fetches the default model.
fn dense_side(ctx: &ModeContext) -> std::result::Result<Dense, Option<(&'static str, String)>> {
  let config = models::effective_config();
  if config.disabled {
    return Err(None);
  }
  if !models::choice::any_model(&config) {
    return Err(Some(("dense_unavailable", NO_MODEL_YET.into())));
  }
  let vectors = match ctx.snap.data.vectors() {
    Ok(Some(v)) if !v.present().is_empty() => v,
    Ok(_) => {
      return Err(Some((
        "qmd_vectors_missing",
        "this vault has no vectors yet; run wiki_reindex with components [\"vectors\"]".into(),
      )))
    }
    Err(e) => return Err(Some(("qmd_index_error", format!("vectors cannot open: {e}")))),
  };
  // Queries are embedded by the model the vault's vectors were built with (its per-vault
  // choice), or by the one model set for every vault.
  let Some(dir) = models::choice::dir_for_model(&config, &vectors.model) else {
    return Err(Some((
      "qmd_vectors_stale",
      format!("vectors were built with {}, which is not installed; run wiki_reindex", vectors.model),
    )));
  };
  let vault_config = models::ModelConfig { embed_model: Some(dir), ..config };
  let embedder = models::embedder_with(&vault_config)
    .map_err(|e| Some(("dense_unavailable", format!("embedding model unavailable: {e}"))))?;
  if embedder.id() != vectors.model || embedder.dims() != vectors.dims {
    return Err(Some((
      "qmd_vectors_stale",
      format!(
        "vectors were built with {} but the embedding model is now {}; run wiki_reindex",
        vectors.model,
        embedder.id()
      ),
    )));
  }
  let calibration = DenseCalibration::of_model(embedder.manifest());
  Ok(Dense { embedder, vectors, calibration })
}

/// Diagnostic for a partially embedded vault (dense still runs over what exists).
fn incomplete_vectors(ctx: &ModeContext, dense: &Dense) -> Option<(&'static str, String)> {
  let live = ctx.snap.data.pages.total_chunks();
  let have = dense.vectors.present().len();
  (have < live).then(|| {
    (
      "qmd_vectors_incomplete",
      format!("{have} of {live} chunks have vectors; the rest are found lexically until the next reindex"),
    )
  })
}

fn lexical_hits(cands: Vec<LexicalCandidate>) -> Vec<VaultHit> {
  cands
    .into_iter()
    .map(|c| {
      let mut reasons = Vec::new();
      if let Some(e) = c.exact {
        reasons.push(e.reason().to_string());
      }
      if c.named {
        reasons.push("named_in_query".into());
      }
      reasons
        .push(format!("lexical: {}/{} terms, coverage {:.2}", c.matched_terms, c.total_terms, c.coverage));
      reasons.extend(c.matched_fields.iter().map(|f| format!("field:{f}")));
      VaultHit {
        page_id: c.page_id,
        rank: c.rank,
        confidence: c.confidence,
        automatic_confidence: c.automatic_confidence,
        exact: c.exact,
        reasons,
        chunk: None,
        engine_score: c.bm25 as f64,
      }
    })
    .collect()
}

/// Texts of the sub-queries of one kind (`lexical` or not); the query itself when there are none.
fn sub_texts(ctx: &ModeContext, lexical: bool) -> Vec<String> {
  let texts: Vec<String> = ctx
    .subqueries
    .iter()
    .filter_map(|s| match (s, lexical) {
      (SubQuery::Lex(t), true) | (SubQuery::Vec(t), false) => Some(t.clone()),
      _ => None,
    })
    .collect();
  if texts.is_empty() {
    vec![ctx.query.to_string()]
  } else {
    texts
  }
}

/// Lists of one hybrid pass, kept for adaptive triggers and quality expansion.
struct HybridLists {
  /// The fused hybrid order (page, fusion score).
  fused: Vec<(String, f64)>,
  lexical: Vec<LexicalCandidate>,
  dense: Vec<DenseCandidate>,
  query_vec: Vec<f32>,
}

fn jaccard(a: &[String], b: &[String]) -> f64 {
  let a: HashSet<&String> = a.iter().collect();
  let b: HashSet<&String> = b.iter().collect();
  let union = a.union(&b).count();
  if union == 0 {
    1.0
  } else {
    a.intersection(&b).count() as f64 / union as f64
  }
}

/// Pages that hold a proper name the user wrote in the query; `None` when the query has none.
fn pages_with_a_written_name(ctx: &ModeContext) -> Result<Option<HashSet<String>>> {
  let names = proper_name_terms(ctx.query);
  if names.is_empty() {
    return Ok(None);
  }
  let keys = ctx.snap.reader.lexical.pages_with_any(&ctx.snap.searcher, &names)?;
  Ok(Some(keys.iter().filter_map(|k| ctx.snap.keys.get(k).cloned()).collect()))
}

/// Fuse ranked page lists (RRF) and attach confidence from the original query's signals.
fn fuse_hits(
  ctx: &ModeContext,
  dense: &Dense,
  fused: Vec<(String, f64)>,
  lexical: &[LexicalCandidate],
  dense_list: &[DenseCandidate],
  qvec: &[f32],
) -> Result<Vec<VaultHit>> {
  let pages: Vec<String> = fused.iter().take(ctx.limit).map(|(p, _)| p.clone()).collect();
  let lex_by: HashMap<&str, &LexicalCandidate> = lexical.iter().map(|c| (c.page_id.as_str(), c)).collect();
  let dense_by: HashMap<&str, &DenseCandidate> = dense_list.iter().map(|c| (c.page_id.as_str(), c)).collect();
  let missing: Vec<String> = pages.iter().filter(|p| !dense_by.contains_key(p.as_str())).cloned().collect();
  let extra = page_cosines(ctx.snap, &dense.vectors, qvec, &missing);
  let lexidx = &ctx.snap.reader.lexical;
  let query_key = identity_key(ctx.query);
  let named_pages = pages_with_a_written_name(ctx)?;
  Ok(
    fused
      .into_iter()
      .take(ctx.limit)
      .enumerate()
      .map(|(rank, (page_id, score))| {
        let lx = lex_by.get(page_id.as_str());
        let (cos, chunk_id) = match dense_by.get(page_id.as_str()) {
          Some(d) => (d.cosine, Some(d.chunk_id.clone())),
          None => extra.get(&page_id).map(|(c, id)| (*c, Some(id.clone()))).unwrap_or((0.0, None)),
        };
        let exact = lx.and_then(|c| c.exact).or_else(|| {
          ctx.snap.manifest.entries.get(&page_id).and_then(|e| exact_match(&query_key, &page_id, e))
        });
        let named = lx.is_some_and(|c| c.named);
        // An uncalibrated model's cosine is no evidence for the floors: the page keeps its lexical
        // confidence (as in lexical mode; an exact match stays certain).
        let combine = |lex_conf: f64, support: DenseSupport| {
          let dense_evidence = dense.calibration.evidence(cos as f64);
          if dense.calibration.source == CalibrationSource::Uncalibrated {
            let c = if exact.is_some() { lex_conf.max(EXACT_MATCH_CONFIDENCE) } else { lex_conf };
            c.max(dense_evidence)
          } else {
            automatic_hybrid_confidence(lex_conf, dense_evidence, exact.is_some(), named, support)
          }
        };
        let confidence = combine(lx.map_or(0.0, |c| c.confidence), DenseSupport::default());
        // Automatic recall: the lexical lift counts by the lexical match's specificity, the dense
        // evidence by what the lexical side says of the page (`automatic_hybrid_confidence`).
        let support = DenseSupport {
          unmatched: lx.is_none_or(|c| !c.specificity_exempt && c.matched_units.is_some_and(|u| u <= 0.0)),
          lacks_every_name: named_pages.as_ref().is_some_and(|p| !p.contains(&page_id)),
        };
        let automatic_confidence = combine(lx.map_or(0.0, |c| c.automatic_confidence), support);
        let mut reasons = Vec::new();
        if let Some(e) = exact {
          reasons.push(e.reason().to_string());
        }
        if let Some(c) = lx {
          reasons.push(format!(
            "lexical: rank {}, {}/{} terms, coverage {:.2}",
            c.rank + 1,
            c.matched_terms,
            c.total_terms,
            c.coverage
          ));
          reasons.extend(c.matched_fields.iter().map(|f| format!("field:{f}")));
          if c.named {
            reasons.push("named_in_query".into());
          }
        }
        if let Some(d) = dense_by.get(page_id.as_str()) {
          reasons.push(format!("dense: rank {}, cosine {:.3}", d.rank + 1, d.cosine));
        } else if cos > 0.0 {
          reasons.push(format!("dense: cosine {cos:.3}"));
        }
        // Show the passage the dense side matched when it is a real match, else the lexical one.
        let chunk = chunk_id
          .filter(|_| lx.is_none() || cos as f64 >= dense.calibration.floor)
          .and_then(|cid| lexidx.chunk_by_id(&ctx.snap.searcher, &page_id, &cid).ok().flatten());
        VaultHit {
          page_id,
          rank,
          confidence,
          automatic_confidence,
          exact,
          reasons,
          chunk,
          engine_score: score,
        }
      })
      .collect(),
  )
}

/// [`evidence_fusion`] of a vault's lexical and dense list: the lexical list weighted by its own
/// confidence, every page's dense confidence from its best-chunk cosine (looked up for pages only
/// the lexical list found).
fn evidence_fusion_of(
  ctx: &ModeContext,
  dense: &Dense,
  lexical: &[LexicalCandidate],
  dense_list: &[DenseCandidate],
  qvec: &[f32],
) -> Vec<(String, f64)> {
  let in_dense: HashSet<&str> = dense_list.iter().map(|d| d.page_id.as_str()).collect();
  let missing: Vec<String> =
    lexical.iter().filter(|c| !in_dense.contains(c.page_id.as_str())).map(|c| c.page_id.clone()).collect();
  let extra = page_cosines(ctx.snap, &dense.vectors, qvec, &missing);
  let cal = &dense.calibration;
  let mut dense_conf: Vec<(String, f64)> =
    dense_list.iter().map(|d| (d.page_id.clone(), cal.confidence(d.cosine as f64))).collect();
  dense_conf.extend(
    missing.iter().map(|p| (p.clone(), extra.get(p).map_or(0.0, |(c, _)| cal.confidence(*c as f64)))),
  );
  let trust = lexical.iter().map(|c| c.confidence).fold(0.0, f64::max);
  let lex: Vec<(String, f64)> = lexical.iter().map(|c| (c.page_id.clone(), c.bm25 as f64)).collect();
  evidence_fusion(&lex, trust, &dense_conf)
}

/// The dense half of a hybrid pass: one list per vector sub-query, the first list and the
/// original query's vector, and where the time went.
struct DenseSide {
  lists: Vec<Vec<String>>,
  first: Vec<DenseCandidate>,
  query_vec: Vec<f32>,
  embed_ms: f64,
  scan_ms: f64,
}

/// Milliseconds since `t` (for the trace).
fn ms(t: Instant) -> f64 {
  t.elapsed().as_secs_f64() * 1000.0
}

fn hybrid(ctx: &ModeContext, dense: &Dense, trace: &mut Vec<String>) -> Result<(Vec<VaultHit>, HybridLists)> {
  let n = ctx.limit.max(CANDIDATE_LIMIT);
  let started = Instant::now();
  // The lexical lists need no model and the dense side is mostly query embedding (ONNX): run
  // them at once, so a hybrid query costs about the slower of the two, not their sum. The dense
  // side (the slower) runs on the calling thread at once and the lexical side is handed to
  // rayon's pool: `rayon::join` from a thread outside the pool queued both and waited for pool
  // workers to wake (measured ~5 ms of waiting at load 8 on 2 cores, docs/DECISIONS.md).
  let lexical_job = || -> Result<(Vec<Vec<String>>, Vec<LexicalCandidate>, f64)> {
    let t = Instant::now();
    let mut lists = Vec::new();
    let mut first = Vec::new();
    for (i, text) in sub_texts(ctx, true).iter().enumerate() {
      let terms = if text == ctx.query { ctx.terms.to_vec() } else { super::lexical::query_terms(text) };
      let c = lexical_candidates(ctx.snap, ctx.query, &terms, &[], n)?;
      lists.push(c.iter().map(|c| c.page_id.clone()).collect());
      if i == 0 {
        first = c;
      }
    }
    Ok((lists, first, ms(t)))
  };
  let dense_job = || -> Result<DenseSide> {
    let (mut embed_ms, mut scan_ms) = (0.0, 0.0);
    let mut lists = Vec::new();
    let (mut first, mut first_vec) = (Vec::new(), Vec::new());
    let texts = sub_texts(ctx, false);
    for (i, text) in texts.iter().enumerate() {
      ctx.cancel.check()?;
      let t = Instant::now();
      let q = dense.embedder.embed_query(text)?;
      embed_ms += ms(t);
      let t = Instant::now();
      let c = dense_candidates(ctx.snap, &dense.vectors, &q, n)?;
      scan_ms += ms(t);
      lists.push(c.iter().map(|c| c.page_id.clone()).collect());
      if i == 0 {
        first = c;
        first_vec = q;
      }
    }
    // Confidence always refers to the original query's vector.
    if texts[0] != ctx.query {
      let t = Instant::now();
      first_vec = dense.embedder.embed_query(ctx.query)?;
      embed_ms += ms(t);
    }
    Ok(DenseSide { lists, first, query_vec: first_vec, embed_ms, scan_ms })
  };
  let mut lexical_side = None;
  crate::pool::global();
  let dense_side = rayon::in_place_scope(|s| {
    s.spawn(|_| lexical_side = Some(lexical_job()));
    dense_job()
  });
  let lexical_side = lexical_side.unwrap_or_else(|| Err(Error::Index("the lexical list did not run".into())));
  let (mut lists, lexical, lexical_ms) = lexical_side?;
  let DenseSide { lists: dense_lists, first: dense_list, query_vec: qvec, embed_ms, scan_ms } = dense_side?;
  lists.extend(dense_lists);
  // One lexical and one dense list: fuse by their evidence. Typed sub-queries add lists whose
  // scores are not on one scale: reciprocal ranks then.
  let (fused, how) = if lists.len() == 2 {
    (evidence_fusion_of(ctx, dense, &lexical, &dense_list, &qvec), "evidence-weighted")
  } else {
    (rrf(&lists), "rrf k=60")
  };
  let hits = fuse_hits(ctx, dense, fused.clone(), &lexical, &dense_list, &qvec)?;
  #[cfg(feature = "evidence")]
  super::evidence::record(&ctx.snap.reader.layout.dir, ctx.query, "hybrid", &lexical, &dense_list, &hits);
  trace.push(format!(
    "hybrid: {} lexical + {} dense candidates from {} list(s), {how} ({:.1} ms: lexical {lexical_ms:.1} \
     ∥ query embedding {embed_ms:.1} + vector scan {scan_ms:.1})",
    lexical.len(),
    dense_list.len(),
    lists.len(),
    ms(started)
  ));
  Ok((hits, HybridLists { fused, lexical, dense: dense_list, query_vec: qvec }))
}

/// True when quality mode can change the hybrid ranking: a cross-encoder is configured (its
/// manifest opens) or sentence-window rescoring was asked for.
fn second_stage_configured(ctx: &ModeContext) -> bool {
  ctx.sentence_rescore || models::rerank_model_id(&models::effective_config()).is_some()
}

/// Adaptive triggers that fired (empty = stay hybrid).
fn escalation_triggers(ctx: &ModeContext, hits: &[VaultHit], lists: &HybridLists) -> Vec<String> {
  let mut fired = Vec::new();
  if let (Some(a), Some(b)) = (hits.first(), hits.get(1)) {
    if (a.confidence - b.confidence).abs() < MARGIN_TRIGGER {
      fired.push(format!("margin {:.3} < {MARGIN_TRIGGER}", (a.confidence - b.confidence).abs()));
    }
  }
  let lex5: Vec<String> = lists.lexical.iter().take(5).map(|c| c.page_id.clone()).collect();
  let vec5: Vec<String> = lists.dense.iter().take(5).map(|c| c.page_id.clone()).collect();
  let j = jaccard(&lex5, &vec5);
  if j < OVERLAP_TRIGGER {
    fired.push(format!("lexical/dense top-5 jaccard {j:.2} < {OVERLAP_TRIGGER}"));
  }
  if interrogative_prefix(ctx.query) {
    fired.push("interrogative query".into());
  }
  // A validated contradiction-type edge among the top candidates.
  let top: HashSet<&str> = hits.iter().take(10).map(|h| h.page_id.as_str()).collect();
  let edge = hits.iter().take(5).any(|h| {
    ctx.snap.manifest.entries.get(&h.page_id).is_some_and(|e| {
      e.meta.relations.iter().any(|r| {
        matches!(r.relation_type.as_str(), "contradicts" | "supersedes" | "qualifies")
          && top.contains(r.target.as_str())
      })
    })
  });
  if edge {
    fired.push("contradiction edge among candidates".into());
  }
  fired
}

/// RM3-style expansion terms: the highest tf·idf terms of the feedback pages' best passages.
fn rm3_terms(ctx: &ModeContext, feedback: &[String]) -> Result<Vec<(String, f32)>> {
  let lex = &ctx.snap.reader.lexical;
  let mut analyzer = wiki_analyzer();
  let mut tf: HashMap<String, f32> = HashMap::new();
  for page in feedback {
    if let Some(addr) = lex.best_chunk(&ctx.snap.searcher, page, ctx.terms)? {
      let chunk = lex.chunk_doc(&ctx.snap.searcher, addr)?;
      let terms = analyze(&mut analyzer, &chunk.source);
      let n = terms.len().max(1) as f32;
      for t in terms {
        *tf.entry(t).or_default() += 1.0 / n;
      }
    }
  }
  let n_docs = lex.kind_count(&ctx.snap.searcher, "section")?;
  let mut scored: Vec<(String, f32)> = tf
    .into_iter()
    .filter(|(t, _)| {
      !ctx.terms.contains(t) && t.chars().count() > 2 && !t.chars().all(|c| c.is_ascii_digit())
    })
    .map(|(t, w)| {
      let df = lex.doc_freq(&ctx.snap.searcher, &t).unwrap_or(0);
      let idf = super::confidence::idf(df, n_docs) as f32;
      (t, w * idf)
    })
    .collect();
  scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
  Ok(scored.into_iter().take(PRF_TERMS).map(|(t, _)| (t, PRF_WEIGHT)).collect())
}

/// Rocchio: the query vector moved toward the centroid of the top dense pages' chunks.
fn rocchio(dense: &Dense, lists: &HybridLists) -> Vec<f32> {
  let keys: HashSet<u64> = lists.dense.iter().take(5).map(|d| chunk_key(&d.chunk_id)).collect();
  let vecs = dense.vectors.vectors(&keys);
  let mut q = lists.query_vec.clone();
  if !vecs.is_empty() {
    let w = ROCCHIO_WEIGHT / vecs.len() as f32;
    for v in vecs.values() {
      for (a, b) in q.iter_mut().zip(v) {
        *a += w * b;
      }
    }
  }
  let norm = q.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
  q.into_iter().map(|x| x / norm).collect()
}

fn quality(
  ctx: &ModeContext,
  dense: &Dense,
  first_pass: (Vec<VaultHit>, HybridLists),
  trace: &mut Vec<String>,
  diags: &mut Vec<(&'static str, String)>,
) -> Result<Vec<VaultHit>> {
  let (hybrid_hits, lists) = first_pass;
  ctx.cancel.check()?;
  let started = Instant::now();
  let n = CANDIDATE_LIMIT;
  let feedback: Vec<String> = hybrid_hits.iter().take(PRF_PAGES).map(|h| h.page_id.clone()).collect();
  let expansion = rm3_terms(ctx, &feedback)?;
  let lex_prf = lexical_candidates(ctx.snap, ctx.query, ctx.terms, &expansion, n)?;
  let qr = rocchio(dense, &lists);
  let dense_prf = dense_candidates(ctx.snap, &dense.vectors, &qr, n)?;
  // Without a reranker, expansion must not disturb the hybrid ranking (PRF is a recall lever, not
  // a reliable precision gain): the hybrid order comes first and PRF-only pages fill the pool.
  // With a reranker, the pool is what it rescores.
  let page_ids = |v: &[LexicalCandidate]| v.iter().map(|c| c.page_id.clone()).collect::<Vec<_>>();
  let dense_ids = |v: &[DenseCandidate]| v.iter().map(|c| c.page_id.clone()).collect::<Vec<_>>();
  let mut pool = lists.fused.clone();
  let seen: HashSet<String> = pool.iter().map(|(p, _)| p.clone()).collect();
  let floor = pool.last().map(|(_, s)| *s).unwrap_or(0.0);
  let expanded: Vec<(String, f64)> = rrf(&[page_ids(&lex_prf), dense_ids(&dense_prf)])
    .into_iter()
    .filter(|(p, _)| !seen.contains(p))
    .map(|(p, s)| (p, floor * s / (s + 1.0)))
    .collect();
  let added = expanded.len();
  // PRF-only pages enter the first `n` (the rescoring pool); the hybrid tail stays after them.
  let head: Vec<(String, f64)> = pool.iter().take(n).cloned().collect();
  let tail: Vec<(String, f64)> = pool.iter().skip(n).cloned().collect();
  pool = head.into_iter().chain(expanded).chain(tail).collect();
  let sub = ModeContext {
    snap: ctx.snap,
    query: ctx.query,
    terms: ctx.terms,
    subqueries: ctx.subqueries,
    limit: n.max(ctx.limit),
    intent: ctx.intent.clone(),
    rerank_timeout: ctx.rerank_timeout,
    sentence_rescore: ctx.sentence_rescore,
    cancel: ctx.cancel,
  };
  let mut hits = fuse_hits(&sub, dense, pool, &lists.lexical, &lists.dense, &lists.query_vec)?;
  trace.push(format!(
    "quality: prf {} expansion terms [{}], rocchio over {} pages; {} candidates ({} from expansion) ({:.1} ms)",
    expansion.len(),
    expansion.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join(" "),
    lists.dense.len().min(5),
    hits.len(),
    added.min(hits.len()),
    ms(started)
  ));
  let outcome = match models::cross_encoder() {
    Ok(Some(ce)) => rescore::cross_encoder(ctx, &ce, &mut hits, n, trace).err().map(|e| ("reranker", e)),
    Ok(None) if ctx.sentence_rescore => {
      trace.push("quality: no cross-encoder configured; rescoring by sentence windows".into());
      rescore::sentence_windows(ctx, &dense.embedder, &lists.query_vec, &mut hits, trace)
        .err()
        .map(|e| ("sentence rescoring", e))
    }
    Ok(None) => {
      trace.push("quality: no cross-encoder configured; ranking by expanded fusion".into());
      None
    }
    Err(e) => {
      diags.push(("reranker_unavailable", format!("cross-encoder unavailable: {e}; kept the fused ranking")));
      trace.push("quality: cross-encoder failed to load; kept the fused ranking".into());
      None
    }
  };
  if let Some((stage, e)) = outcome {
    if matches!(e, Error::Cancelled) {
      return Err(e);
    }
    let code = if matches!(e, Error::Timeout(_)) { "reranker_timeout" } else { "reranker_failed" };
    diags.push((code, format!("{stage}: {e}; kept the fused ranking")));
    trace.push(format!("quality: {code}; kept the fused ranking"));
  }
  hits.truncate(ctx.limit);
  Ok(hits)
}

/// Run `mode` on one vault with the design's fallbacks.
pub fn run_mode(ctx: &ModeContext, mode: RetrievalMode, trace: &mut Vec<String>) -> Result<ModeOutcome> {
  let mut diagnostics = Vec::new();
  let lexical = |trace: &mut Vec<String>| -> Result<Vec<VaultHit>> {
    let started = Instant::now();
    let terms: Vec<String> = ctx.terms.to_vec();
    let c = lexical_candidates(ctx.snap, ctx.query, &terms, &[], ctx.limit)?;
    trace.push(format!("lexical: {} candidates ({:.1} ms)", c.len(), ms(started)));
    #[cfg(feature = "evidence")]
    let hits = {
      let hits = lexical_hits(c.clone());
      super::evidence::record(&ctx.snap.reader.layout.dir, ctx.query, "lexical", &c, &[], &hits);
      hits
    };
    #[cfg(not(feature = "evidence"))]
    let hits = lexical_hits(c);
    Ok(hits)
  };
  if mode == RetrievalMode::Lexical {
    return Ok(ModeOutcome { hits: lexical(trace)?, used: RetrievalMode::Lexical, diagnostics });
  }
  let dense = match dense_side(ctx) {
    Ok(d) => d,
    Err(why) => {
      let reason = why.as_ref().map(|d| d.0).unwrap_or("dense retrieval turned off");
      trace.push(format!("fallback:{}->lexical ({reason})", mode.as_str()));
      diagnostics.extend(why);
      return Ok(ModeOutcome { hits: lexical(trace)?, used: RetrievalMode::Lexical, diagnostics });
    }
  };
  diagnostics.extend(incomplete_vectors(ctx, &dense));
  if let Some(why) = dense.vectors.ann_diagnostic() {
    diagnostics.push(("qmd_ann_unavailable", why));
  }
  match dense.calibration.source {
    CalibrationSource::Uncalibrated => {
      let id = dense.embedder.id();
      trace.push(format!("calibration: {id} has none; confidence from lexical evidence only"));
      diagnostics.push((
        "dense_uncalibrated",
        format!(
          "embedding model {id} has no cosine calibration in its manifest: its results rank but only \
           lexical evidence counts for the score floors; run `llm-wiki-retrieval calibrate` (docs/CONFIDENCE.md)"
        ),
      ));
    }
    CalibrationSource::BuiltInMiniLm => trace.push(format!(
      "calibration: built-in all-MiniLM-L6-v2 (cosine floor {:.3}, span {:.3})",
      dense.calibration.floor, dense.calibration.span
    )),
    CalibrationSource::BuiltInE5 => trace.push(format!(
      "calibration: built-in multilingual-e5-small (cosine floor {:.3}, span {:.3})",
      dense.calibration.floor, dense.calibration.span
    )),
    CalibrationSource::Manifest => trace.push(format!(
      "calibration: model manifest (cosine floor {:.3}, span {:.3})",
      dense.calibration.floor, dense.calibration.span
    )),
  }
  let dense_run = |trace: &mut Vec<String>,
                   diags: &mut Vec<(&'static str, String)>|
   -> Result<(Vec<VaultHit>, RetrievalMode)> {
    match mode {
      RetrievalMode::Hybrid => Ok((hybrid(ctx, &dense, trace)?.0, RetrievalMode::Hybrid)),
      RetrievalMode::Quality => {
        let first = hybrid(ctx, &dense, trace)?;
        Ok((quality(ctx, &dense, first, trace, diags)?, RetrievalMode::Quality))
      }
      _ => {
        let (hits, lists) = hybrid(ctx, &dense, trace)?;
        if let Some(top) = hits.first().filter(|h| h.exact.is_some() && h.confidence >= EXACT_BYPASS) {
          trace.push(format!("adaptive: exact match {} bypasses escalation", top.page_id));
          return Ok((hits, RetrievalMode::Hybrid));
        }
        // Quality without a second stage (cross-encoder or sentence rescoring) returns the hybrid
        // order (PRF only widens the pool below it): escalating would cost time for nothing.
        if !second_stage_configured(ctx) {
          trace.push(
            "adaptive: stayed hybrid (no second stage configured: no cross-encoder, sentence rescoring off)"
              .into(),
          );
          return Ok((hits, RetrievalMode::Hybrid));
        }
        let fired = escalation_triggers(ctx, &hits, &lists);
        if fired.is_empty() {
          trace.push("adaptive: confident; stayed hybrid".into());
          return Ok((hits, RetrievalMode::Hybrid));
        }
        trace.push(format!("adaptive: escalating to quality ({})", fired.join("; ")));
        match quality(ctx, &dense, (hits.clone(), lists), trace, diags) {
          Ok(q) => Ok((q, RetrievalMode::Quality)),
          Err(Error::Cancelled) => Err(Error::Cancelled),
          Err(e) => {
            trace.push(format!("fallback:quality->hybrid ({})", e.code()));
            Ok((hits, RetrievalMode::Hybrid))
          }
        }
      }
    }
  };
  match dense_run(trace, &mut diagnostics) {
    Ok((hits, used)) => Ok(ModeOutcome { hits, used, diagnostics }),
    Err(Error::Cancelled) => Err(Error::Cancelled),
    Err(e) => {
      // Model failure at query time: the chain ends at lexical.
      diagnostics.push(("dense_failed", format!("{e}; fell back to lexical")));
      trace.push(format!("fallback:{}->lexical ({})", mode.as_str(), e.code()));
      Ok(ModeOutcome { hits: lexical(trace)?, used: RetrievalMode::Lexical, diagnostics })
    }
  }
}
