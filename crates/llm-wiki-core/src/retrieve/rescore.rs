//! Second-stage rescoring of the quality pool. With a cross-encoder configured, its (query +
//! intent, passage) probabilities reorder the pool. Without one, sentence windows of each
//! candidate's passage are embedded at query time and the best window's cosine — a finer grain
//! than the ≤256-token chunk vectors — is fused with the first-stage order.
//!
//! Either way a failure or an exhausted time budget keeps the fused list (the spec's fallback).

use std::collections::HashMap;
use std::time::Instant;

use unicode_segmentation::UnicodeSegmentation;

use super::fusion::weighted_rrf;
use super::ranking::{ModeContext, VaultHit};
use crate::error::{Error, Result};
use crate::models::{CrossEncoder, Embedder, TextKind, EMBED_BATCH};
use crate::util::CancelFlag;

/// Pages whose passages are cut into sentence windows (the top of the pool, where nDCG@10 and the
/// automatic list are decided; each page costs ~8 short inferences).
pub const SENTENCE_POOL: usize = 20;
/// Consecutive sentences per window.
pub const WINDOW_SENTENCES: usize = 2;
/// Windows embedded per page at most (a chunk is ≤256 tokens, so this is rarely reached).
pub const MAX_WINDOWS_PER_PAGE: usize = 12;
/// Sentences shorter than this many words are glued to the next one (list items, headings).
const MIN_SENTENCE_WORDS: usize = 4;
/// Weight of the first-stage order against the sentence order in the final fusion: the window
/// score refines the ranking, it does not replace it.
pub const FIRST_STAGE_WEIGHT: f64 = 2.0;

/// The passage each pool page is judged by: its chosen chunk (or best lexical chunk), with the
/// page title when `with_title`.
fn pool_passages(ctx: &ModeContext, hits: &[VaultHit], with_title: bool) -> Result<Vec<String>> {
  let lex = &ctx.snap.reader.lexical;
  let mut passages = Vec::with_capacity(hits.len());
  for h in hits {
    let addr = match h.chunk {
      Some(a) => Some(a),
      None => lex.best_chunk(&ctx.snap.searcher, &h.page_id, ctx.terms)?,
    };
    let text = match addr {
      Some(a) => {
        let c = lex.chunk_doc(&ctx.snap.searcher, a)?;
        match ctx.snap.manifest.entries.get(&h.page_id).filter(|_| with_title) {
          Some(e) => format!("{}\n{}", e.meta.title, c.source),
          None => c.source,
        }
      }
      None => String::new(),
    };
    passages.push(text);
  }
  Ok(passages)
}

/// Rescore the first `pool` hits with a cross-encoder; `Err` leaves `hits` untouched.
pub(super) fn cross_encoder(
  ctx: &ModeContext,
  ce: &CrossEncoder,
  hits: &mut [VaultHit],
  pool: usize,
  trace: &mut Vec<String>,
) -> Result<()> {
  let started = Instant::now();
  let pool = hits.len().min(pool);
  let passages = pool_passages(ctx, &hits[..pool], true)?;
  let query = match &ctx.intent {
    Some(i) => format!("{i}\n\n{}", ctx.query),
    None => ctx.query.to_string(),
  };
  let scores = ce.score(&query, &passages, Some(started + ctx.rerank_timeout))?;
  for (h, s) in hits.iter_mut().zip(&scores) {
    h.confidence = if h.exact.is_some() { h.confidence.max(*s as f64) } else { *s as f64 };
    // The cross-encoder reads the whole passage: its probability replaces both confidences.
    h.automatic_confidence = h.confidence;
    h.engine_score = *s as f64;
    h.reasons.push(format!("cross-encoder {}: {:.3}", ce.id(), s));
  }
  // Only the pool is reordered; the stable sort keeps the fused order among ties.
  hits[..pool].sort_by(|a, b| b.engine_score.total_cmp(&a.engine_score));
  renumber(hits);
  trace.push(format!(
    "quality: cross-encoder rescored {} pairs{} ({:.1} ms)",
    scores.len(),
    if ctx.intent.is_some() { " with the vault's intent" } else { "" },
    started.elapsed().as_secs_f64() * 1000.0
  ));
  Ok(())
}

/// Rescore the first `SENTENCE_POOL` hits by their best sentence window's cosine to `query_vec`;
/// `Err` (timeout, cancel, inference) leaves `hits` untouched. Confidence is not changed: the
/// maximum over many windows is biased upward, so it would not stay comparable across queries.
pub(super) fn sentence_windows(
  ctx: &ModeContext,
  embedder: &Embedder,
  query_vec: &[f32],
  hits: &mut [VaultHit],
  trace: &mut Vec<String>,
) -> Result<()> {
  let started = Instant::now();
  let deadline = started + ctx.rerank_timeout;
  let pool = hits.len().min(SENTENCE_POOL);
  let passages = pool_passages(ctx, &hits[..pool], false)?;
  // (page index, window text), embedded shortest first so each batch pads little.
  let mut windows: Vec<(usize, String)> = passages
    .iter()
    .enumerate()
    .flat_map(|(i, p)| split_windows(p).into_iter().take(MAX_WINDOWS_PER_PAGE).map(move |w| (i, w)))
    .collect();
  windows.sort_by_key(|(_, w)| w.len());
  let mut best = vec![f32::NEG_INFINITY; pool];
  for batch in windows.chunks(EMBED_BATCH) {
    ctx.cancel.check()?;
    if Instant::now() > deadline {
      return Err(Error::Timeout(format!(
        "sentence-window rescoring exceeded its {} ms budget",
        ctx.rerank_timeout.as_millis()
      )));
    }
    let texts: Vec<String> = batch.iter().map(|(_, w)| w.clone()).collect();
    let vecs = embedder.embed(&texts, TextKind::Document, &CancelFlag::new(), &mut |_| {})?;
    for ((page, _), v) in batch.iter().zip(&vecs) {
      let cos: f32 = v.iter().zip(query_vec).map(|(a, b)| a * b).sum();
      best[*page] = best[*page].max(cos);
    }
  }
  let first: Vec<String> = hits[..pool].iter().map(|h| h.page_id.clone()).collect();
  let mut by_window: Vec<usize> = (0..pool).filter(|i| best[*i].is_finite()).collect();
  by_window.sort_by(|a, b| best[*b].total_cmp(&best[*a]));
  let window_order: Vec<String> = by_window.iter().map(|i| first[*i].clone()).collect();
  let fused = weighted_rrf(&[(first.as_slice(), FIRST_STAGE_WEIGHT), (window_order.as_slice(), 1.0)]);
  let position: HashMap<&str, usize> = fused.iter().enumerate().map(|(i, (p, _))| (p.as_str(), i)).collect();
  for (h, b) in hits[..pool].iter_mut().zip(&best) {
    if b.is_finite() {
      h.reasons.push(format!("sentence window cosine {b:.3}"));
    }
  }
  hits[..pool].sort_by_key(|h| position.get(h.page_id.as_str()).copied().unwrap_or(usize::MAX));
  renumber(hits);
  trace.push(format!(
    "quality: sentence windows rescored {} pages ({} windows, {:.1} ms)",
    pool,
    windows.len(),
    started.elapsed().as_secs_f64() * 1000.0
  ));
  Ok(())
}

fn renumber(hits: &mut [VaultHit]) {
  for (i, h) in hits.iter_mut().enumerate() {
    h.rank = i;
  }
}

/// Windows of `WINDOW_SENTENCES` consecutive sentences (stride 1) of a passage, with Unicode
/// sentence boundaries (UAX #29, which also breaks at line ends) and short fragments glued to the
/// next sentence. A passage of one sentence is one window.
pub fn split_windows(passage: &str) -> Vec<String> {
  let mut sentences: Vec<String> = Vec::new();
  let mut pending = String::new();
  for s in passage.unicode_sentences() {
    let s = s.trim();
    if s.is_empty() {
      continue;
    }
    if !pending.is_empty() {
      pending.push(' ');
    }
    pending.push_str(s);
    // CJK text has no spaces between words: count characters there instead.
    let words = pending.split_whitespace().count().max(pending.chars().filter(|c| !c.is_ascii()).count() / 2);
    if words >= MIN_SENTENCE_WORDS {
      sentences.push(std::mem::take(&mut pending));
    }
  }
  if !pending.is_empty() {
    match sentences.last_mut() {
      Some(last) => {
        last.push(' ');
        last.push_str(&pending);
      }
      None => sentences.push(pending),
    }
  }
  if sentences.len() <= WINDOW_SENTENCES {
    return if sentences.is_empty() { Vec::new() } else { vec![sentences.join(" ")] };
  }
  sentences.windows(WINDOW_SENTENCES).map(|w| w.join(" ")).collect()
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn windows_pair_consecutive_sentences() {
    let w = split_windows("Alpha beta gamma delta. Second sentence is here now. Third one ends the text.");
    assert_eq!(
      w,
      vec![
        "Alpha beta gamma delta. Second sentence is here now.",
        "Second sentence is here now. Third one ends the text."
      ]
    );
  }

  #[test]
  fn short_fragments_join_the_next_sentence() {
    let w = split_windows("## Setup\nRun the installer with default options. Then restart the shell please.");
    assert_eq!(w.len(), 1);
    assert!(w[0].starts_with("## Setup Run the installer"), "{w:?}");
  }

  #[test]
  fn single_sentence_and_empty_passages() {
    assert_eq!(split_windows("Only one sentence lives here."), vec!["Only one sentence lives here."]);
    assert!(split_windows("  \n ").is_empty());
  }

  #[test]
  fn cjk_sentences_split_on_full_stops() {
    let w = split_windows(
      "检索增强生成把外部知识放进上下文。向量检索按语义相似度排序文档。关键词检索依靠词频统计。",
    );
    assert_eq!(w.len(), 2, "{w:?}");
  }
}
