//! Long-query suite (`bench long-queries`): each of our modes (`--modes`) against a **plain BM25** baseline on
//! the same documents — one document per page (title + body), tantivy's simple tokenizer,
//! lowercased, Lucene's English stop words removed, Snowball English stemming, BM25 with k1 1.2
//! and b 0.75 (tantivy's), every query token a clause (a repeated word counts again, as in
//! Lucene). Measured on a written set of long multi-sentence queries and on the collection's own
//! queries; nDCG@10, MRR@10 and Recall@100 with the same metric code as the other suites, and the
//! automatic policy's outcome per query (a relevant page injected, anything injected).

use super::*;
use crate::datasets::load_queries_jsonl;
use crate::metrics::{mrr, ndcg_at, recall_at};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
  IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value as _, STORED, STRING,
};
use tantivy::tokenizer::{Language, LowerCaser, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer};
use tantivy::{doc, Index, TantivyDocument, Term};

const PLAIN: &str = "plain_en";

/// The baseline's analyzer: simple tokenizer, lowercase, Lucene English stop words, Snowball.
fn plain_analyzer() -> TextAnalyzer {
  TextAnalyzer::builder(SimpleTokenizer::default())
    .filter(LowerCaser)
    .filter(StopWordFilter::new(Language::English).expect("tantivy ships English stop words"))
    .filter(Stemmer::new(Language::English))
    .build()
}

/// An in-memory plain BM25 index of a flat BEIR vault (`<id>.md` with `title` frontmatter).
pub struct PlainBm25 {
  index: Index,
  text: tantivy::schema::Field,
  id: tantivy::schema::Field,
}

/// Title (frontmatter `title:`) and body of a flat BEIR page.
fn title_and_body(md: &str) -> (String, String) {
  let Some(rest) = md.strip_prefix("---\n") else { return (String::new(), md.to_string()) };
  let Some(end) = rest.find("\n---") else { return (String::new(), md.to_string()) };
  let (front, body) = rest.split_at(end);
  let title = front
    .lines()
    .find_map(|l| l.strip_prefix("title:"))
    .map(|t| {
      let t = t.trim();
      serde_json::from_str::<String>(t).unwrap_or_else(|_| t.to_string())
    })
    .unwrap_or_default();
  (title, body.trim_start_matches("\n---").trim().to_string())
}

impl PlainBm25 {
  /// Index every `<dir>/vault/*.md` page (id = file stem).
  pub fn build(beir_dir: &Path) -> Result<Self> {
    let mut schema = Schema::builder();
    let opts = TextOptions::default().set_indexing_options(
      TextFieldIndexing::default().set_tokenizer(PLAIN).set_index_option(IndexRecordOption::WithFreqs),
    );
    let text = schema.add_text_field("text", opts);
    let id = schema.add_text_field("id", STRING | STORED);
    let index = Index::create_in_ram(schema.build());
    index.tokenizers().register(PLAIN, plain_analyzer());
    let te = |e: tantivy::TantivyError| Error::Index(format!("plain BM25: {e}"));
    let mut writer = index.writer_with_num_threads(1, 100_000_000).map_err(te)?;
    let src = beir_dir.join("vault");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&src)
      .map_err(|e| Error::io("read directory", &src, e))?
      .filter_map(|e| e.ok().map(|e| e.path()))
      .filter(|p| p.extension().is_some_and(|x| x == "md"))
      .collect();
    names.sort();
    for p in names {
      let md = std::fs::read_to_string(&p).map_err(|e| Error::io("read", &p, e))?;
      let (title, body) = title_and_body(&md);
      let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
      writer.add_document(doc!(text => format!("{title}\n{body}"), id => stem)).map_err(te)?;
    }
    writer.commit().map_err(te)?;
    Ok(PlainBm25 { index, text, id })
  }

  /// The top `k` page ids for `query`.
  pub fn search(&self, query: &str, k: usize) -> Result<Vec<String>> {
    let te = |e: tantivy::TantivyError| Error::Index(format!("plain BM25: {e}"));
    let mut analyzer = plain_analyzer();
    let mut stream = analyzer.token_stream(query);
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    while let Some(t) = stream.next() {
      let term = Term::from_field_text(self.text, &t.text);
      clauses.push((Occur::Should, Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))));
    }
    if clauses.is_empty() {
      return Ok(Vec::new());
    }
    let searcher = self.index.reader().map_err(te)?.searcher();
    let hits =
      searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(k).order_by_score()).map_err(te)?;
    let mut out = Vec::with_capacity(hits.len());
    for (_, addr) in hits {
      let d: TantivyDocument = searcher.doc(addr).map_err(te)?;
      out.push(d.get_first(self.id).and_then(|v| v.as_str()).unwrap_or_default().to_string());
    }
    Ok(out)
  }
}

/// Options of [`run_long_queries`].
pub struct LongQueryOptions {
  /// BEIR-style directory (vault/, queries.jsonl, qrels.tsv).
  pub beir: PathBuf,
  /// The written long queries (`{"id","text"}` JSONL) and their judgments (BEIR qrels TSV).
  pub queries: PathBuf,
  pub qrels: PathBuf,
  pub common: BenchCommon,
}

struct SetScores {
  n: usize,
  ndcg10: f64,
  mrr10: f64,
  r100: f64,
}

fn score_set(runs: &HashMap<String, Vec<String>>, qrels: &super::super::trec::Qrels) -> SetScores {
  let judged: Vec<(&String, &HashMap<String, u32>)> =
    qrels.iter().filter(|(_, j)| j.values().any(|g| *g > 0)).collect();
  let empty = Vec::new();
  let (mut n, mut a, mut b, mut c) = (0usize, 0.0, 0.0, 0.0);
  for (q, j) in judged {
    let r = runs.get(q).unwrap_or(&empty);
    n += 1;
    a += ndcg_at(r, j, 10);
    b += mrr(r, j, Some(10));
    c += recall_at(r, j, 100);
  }
  let d = n.max(1) as f64;
  SetScores { n, ndcg10: round6(a / d), mrr10: round6(b / d), r100: round6(c / d) }
}

/// One mode on one query set: its scores, and the automatic policy's outcome (queries with a
/// relevant page injected, with anything injected).
struct ModeScores {
  mode: RetrievalMode,
  scores: SetScores,
  hits: usize,
  injected: usize,
}

/// One query set: plain BM25's scores and each mode's.
struct SetRow {
  name: &'static str,
  plain: SetScores,
  modes: Vec<ModeScores>,
}

/// Plain BM25 and every mode on the judged queries of one set; for the written set, each
/// query's nDCG@10 per engine goes to `per_query`.
fn measure_set(
  name: &'static str,
  queries: &[(String, String)],
  qrels: &super::super::trec::Qrels,
  plain: &PlainBm25,
  paths: &VaultPaths,
  common: &BenchCommon,
  per_query: &mut Map<String, Value>,
) -> Result<SetRow> {
  let judged: Vec<&(String, String)> = queries.iter().filter(|(qid, _)| qrels.contains_key(qid)).collect();
  let mut base: HashMap<String, Vec<String>> = HashMap::new();
  for (qid, text) in &judged {
    base.insert(qid.clone(), plain.search(text, 100)?);
  }
  let b = score_set(&base, qrels);
  let mut modes = Vec::new();
  for &mode in &common.modes {
    let ranked = common.recall_options(ranked_policy(100), mode);
    let automatic = common.recall_options(RecallPolicy::automatic(), mode);
    let mut ours: HashMap<String, Vec<String>> = HashMap::new();
    let (mut hits, mut injected) = (0usize, 0usize);
    for (qid, text) in &judged {
      ours.insert(qid.clone(), ask(paths, qid, text, &ranked)?.ids);
      let auto = ask(paths, qid, text, &automatic)?.ids;
      injected += usize::from(!auto.is_empty());
      hits += usize::from(auto.iter().any(|id| qrels[qid].get(id).is_some_and(|g| *g > 0)));
    }
    let o = score_set(&ours, qrels);
    common.say(format!(
      "{name}: {} nDCG@10 {} vs plain BM25 {} ({} queries), automatic: relevant injected {hits}, anything {injected}",
      mode.as_str(),
      o.ndcg10,
      b.ndcg10,
      o.n
    ));
    if name.starts_with("written") {
      for (qid, _) in &judged {
        let entry = per_query
          .entry(qid.clone())
          .or_insert_with(|| json!({"plainBm25": round6(ndcg_at(&base[qid], &qrels[qid], 10))}));
        entry[mode.as_str()] = json!(round6(ndcg_at(&ours[qid], &qrels[qid], 10)));
      }
    }
    modes.push(ModeScores { mode, scores: o, hits, injected });
  }
  Ok(SetRow { name, plain: b, modes })
}

/// Run the suite: plain BM25 and our lexical mode on the written long queries and on the
/// collection's own queries.
pub fn run_long_queries(opts: &LongQueryOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  let context = machine_context();
  let set = load_beir_dir(&opts.beir)?;
  let long_q = load_queries_jsonl(&opts.queries)?;
  let long_qrels = super::super::trec::parse_beir_qrels(
    &std::fs::read_to_string(&opts.qrels).map_err(|e| Error::io("read", &opts.qrels, e))?,
  )?;
  common.say("plain BM25: indexing");
  let plain = PlainBm25::build(&opts.beir)?;
  let (tmp, paths, _) = common.beir_copy(&opts.beir, &dir_label(&opts.beir, "beir"))?;
  let _ix = build_index(&paths, common.needs_vectors(), "long-queries", common)?;
  let mut doc = json!({"schema": SCHEMA, "kind": "long-queries", "context": context,
    "beir": report_path(&opts.beir), "queries": report_path(&opts.queries), "qrels": report_path(&opts.qrels)});
  let mut per_query = Map::new();
  let mut rows = Vec::new();
  for (name, queries, qrels) in
    [("written long queries", &long_q, &long_qrels), ("collection queries", &set.queries, &set.qrels)]
  {
    rows.push(measure_set(name, queries, qrels, &plain, &paths, common, &mut per_query)?);
  }
  doc["perQueryNdcg10"] = Value::Object(per_query);
  let mut md = String::from("# Long multi-sentence queries: our modes vs plain BM25\n\n");
  md.push_str(&context_markdown(&context));
  let _ = writeln!(
    md,
    "- Collection: `{}`. Written queries: `{}` ({} queries), judgments `{}`.\n- Plain BM25: one document per \
     page (title + body), simple tokenizer, lowercase, Lucene English stop words, Snowball English stemmer, \
     k1 1.2, b 0.75, one clause per query token. Ours: `recallWiki` in each mode, depth 100, floor 0; \
     automatic: the automatic policy (floor 0.50, 3 results) — queries with a relevant page injected / with \
     anything injected.\n",
    report_path(&opts.beir),
    report_path(&opts.queries),
    long_q.len(),
    report_path(&opts.qrels)
  );
  doc["summary"] = Value::Object(summary_table(&mut md, &rows));
  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  record_json(&mut out, common.out.join("long-queries.json"), &doc)?;
  record_markdown(&mut out, common.out.join("long-queries.md"), md)?;
  release_reader(&paths);
  drop(tmp);
  Ok(out)
}

/// The results table (appended to `md`) and its JSON: per query set, plain BM25 and each mode.
fn summary_table(md: &mut String, rows: &[SetRow]) -> Map<String, Value> {
  md.push_str(
    "| query set | mode | queries | nDCG@10 | plain BM25 nDCG@10 | Δ | MRR@10 | BM25 MRR@10 | R@100 | BM25 R@100 | \
     automatic: relevant / anything injected |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
  );
  let mut summary = Map::new();
  for SetRow { name, plain: b, modes } in rows {
    let mut per_mode = Map::new();
    for ModeScores { mode, scores: o, hits, injected } in modes {
      let _ = writeln!(
        md,
        "| {name} | {} | {} | {:.4} | {:.4} | {:+.4} | {:.4} | {:.4} | {:.4} | {:.4} | {hits} / {injected} |",
        mode.as_str(),
        o.n,
        o.ndcg10,
        b.ndcg10,
        o.ndcg10 - b.ndcg10,
        o.mrr10,
        b.mrr10,
        o.r100,
        b.r100
      );
      per_mode.insert(
        mode.as_str().to_string(),
        json!({"ndcg10": o.ndcg10, "mrr10": o.mrr10, "recall100": o.r100,
               "automaticHits": hits, "automaticInjected": injected}),
      );
    }
    let mut entry =
      json!({"queries": b.n, "plainBm25": {"ndcg10": b.ndcg10, "mrr10": b.mrr10, "recall100": b.r100}});
    // Earlier reports' key for our lexical mode.
    if let Some(l) = per_mode.get("lexical") {
      entry["lexical"] = json!({"ndcg10": l["ndcg10"], "mrr10": l["mrr10"], "recall100": l["recall100"]});
    }
    entry["modes"] = Value::Object(per_mode);
    summary.insert(name.to_string(), entry);
  }
  summary
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn plain_bm25_ranks_the_matching_page_first() {
    let t = tempfile::tempdir().unwrap();
    let v = t.path().join("vault");
    std::fs::create_dir_all(&v).unwrap();
    std::fs::write(
      v.join("1.md"),
      "---\ntitle: \"Running shoes\"\nid: \"1\"\n---\n\nCushioned shoes for marathon runners.",
    )
    .unwrap();
    std::fs::write(
      v.join("2.md"),
      "---\ntitle: \"Baking bread\"\nid: \"2\"\n---\n\nSourdough loaves need a starter.",
    )
    .unwrap();
    let b = PlainBm25::build(t.path()).unwrap();
    assert_eq!(b.search("Which shoes are best for running a marathon?", 10).unwrap(), vec!["1".to_string()]);
    assert_eq!(b.search("sourdough starter for my loaves", 10).unwrap()[0], "2");
    assert!(b.search("the and of", 10).unwrap().is_empty(), "stop words only");
  }
}
