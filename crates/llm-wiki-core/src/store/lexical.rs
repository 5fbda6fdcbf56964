//! The tantivy side of a store generation: one document per chunk carrying the chunk text, its
//! heading path and the page fields (title, aliases, tags, description, id tokens), plus one
//! `commit` document whose `generation` tells a searcher which manifest it belongs to.

use std::path::Path;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
  Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

use crate::analysis::{wiki_analyzer, WIKI_ANALYZER};
use crate::chunk::Chunk;
use crate::error::{Error, Result};
use crate::vault::PageMeta;

/// Searchable fields and their BM25 boosts (a BM25F-lite: title/aliases count double).
pub const FIELD_BOOSTS: &[(&str, f32)] =
  &[("body", 1.0), ("heading", 1.0), ("title", 2.0), ("aliases", 2.0), ("tags", 1.0), ("desc", 1.0), ("ident", 1.0)];

/// Handles to every schema field.
#[derive(Debug, Clone)]
pub struct Fields {
  pub kind: Field,
  pub page_id: Field,
  pub chunk_id: Field,
  pub ordinal: Field,
  pub line_start: Field,
  pub line_end: Field,
  pub source: Field,
  pub heading_path: Field,
  pub generation: Field,
  /// Searchable fields in [`FIELD_BOOSTS`] order.
  pub searchable: Vec<(Field, f32)>,
}

fn schema() -> (Schema, Fields) {
  let mut b = Schema::builder();
  let text = TextOptions::default().set_indexing_options(
    TextFieldIndexing::default().set_tokenizer(WIKI_ANALYZER).set_index_option(IndexRecordOption::WithFreqs),
  );
  let kind = b.add_text_field("kind", STRING);
  let page_id = b.add_text_field("page_id", STRING | STORED);
  let chunk_id = b.add_text_field("chunk_id", STORED);
  let ordinal = b.add_u64_field("ordinal", NumericOptions::default().set_stored());
  let line_start = b.add_u64_field("line_start", NumericOptions::default().set_stored());
  let line_end = b.add_u64_field("line_end", NumericOptions::default().set_stored());
  let source = b.add_text_field("source", STORED);
  let heading_path = b.add_text_field("heading_path", STORED);
  let generation = b.add_u64_field("generation", NumericOptions::default().set_stored());
  let searchable = FIELD_BOOSTS.iter().map(|(name, boost)| (b.add_text_field(name, text.clone()), *boost)).collect();
  let schema = b.build();
  (schema, Fields { kind, page_id, chunk_id, ordinal, line_start, line_end, source, heading_path, generation, searchable })
}

/// Tokens of a page id useful for search: every path segment plus the file stem words.
fn ident_text(page_id: &str) -> String {
  page_id.replace(['/', '-', '_', '.'], " ")
}

/// An open tantivy index of one generation directory.
pub struct LexicalIndex {
  pub index: Index,
  pub fields: Fields,
  pub reader: IndexReader,
}

/// A chunk-level search hit.
#[derive(Debug, Clone)]
pub struct ChunkHit {
  pub score: f32,
  pub address: DocAddress,
  pub page_id: String,
}

impl LexicalIndex {
  fn finish(index: Index) -> Result<Self> {
    // Custom analyzers are not persisted by tantivy: register on every open.
    index.tokenizers().register(WIKI_ANALYZER, wiki_analyzer());
    let (_, fields) = schema();
    let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
    Ok(LexicalIndex { index, fields, reader })
  }

  /// Create an empty index in `dir` (created if missing).
  pub fn create(dir: &Path) -> Result<Self> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    let (schema, _) = schema();
    Self::finish(Index::create_in_dir(dir, schema)?)
  }

  /// Open an existing index.
  pub fn open(dir: &Path) -> Result<Self> {
    let index = Index::open_in_dir(dir).map_err(|e| Error::Index(format!("cannot open {}: {e}", dir.display())))?;
    let (expected, _) = schema();
    if index.schema() != expected {
      return Err(Error::Index(format!("{} has an incompatible schema", dir.display())));
    }
    Self::finish(index)
  }

  /// A writer with a bounded thread count and memory budget.
  pub fn writer(&self, threads: usize) -> Result<IndexWriter> {
    let threads = threads.clamp(1, 4);
    Ok(self.index.writer_with_num_threads(threads, threads * 40_000_000)?)
  }

  /// Add one document per chunk of a page.
  pub fn add_page(&self, w: &IndexWriter, page_id: &str, meta: &PageMeta, chunks: &[Chunk]) -> Result<()> {
    let f = &self.fields;
    let aliases = meta.aliases.join("\n");
    let tags = meta.tags.join("\n");
    let desc = [meta.description.as_deref(), meta.summary.as_deref()]
      .into_iter()
      .flatten()
      .chain(meta.recall_triggers.iter().map(String::as_str))
      .collect::<Vec<_>>()
      .join("\n");
    let ident = ident_text(page_id);
    for c in chunks {
      let mut d = TantivyDocument::default();
      d.add_text(f.kind, "chunk");
      d.add_text(f.page_id, page_id);
      d.add_text(f.chunk_id, &c.id);
      d.add_u64(f.ordinal, c.ordinal as u64);
      d.add_u64(f.line_start, c.line_start as u64);
      d.add_u64(f.line_end, c.line_end as u64);
      d.add_text(f.source, &c.text);
      d.add_text(f.heading_path, c.headings.join(" › "));
      let values = [&c.plain, &c.headings.join("\n"), &meta.title, &aliases, &tags, &desc, &ident];
      for ((field, _), value) in f.searchable.iter().zip(values) {
        if !value.is_empty() {
          d.add_text(*field, value);
        }
      }
      w.add_document(d)?;
    }
    Ok(())
  }

  /// Delete every chunk document of a page.
  pub fn delete_page(&self, w: &IndexWriter, page_id: &str) {
    w.delete_term(Term::from_field_text(self.fields.page_id, page_id));
  }

  /// Replace the commit document so the next commit carries `generation`.
  pub fn set_generation(&self, w: &IndexWriter, generation: u64) -> Result<()> {
    w.delete_term(Term::from_field_text(self.fields.kind, "commit"));
    let mut d = TantivyDocument::default();
    d.add_text(self.fields.kind, "commit");
    d.add_u64(self.fields.generation, generation);
    w.add_document(d)?;
    Ok(())
  }

  /// Generation stored in a searcher's snapshot (0 when the index was never committed).
  pub fn generation_of(&self, searcher: &Searcher) -> Result<u64> {
    let q = TermQuery::new(Term::from_field_text(self.fields.kind, "commit"), IndexRecordOption::Basic);
    let top = searcher.search(&q, &TopDocs::with_limit(1).order_by_score())?;
    let Some((_, addr)) = top.first() else { return Ok(0) };
    let doc: TantivyDocument = searcher.doc(*addr)?;
    Ok(doc.get_first(self.fields.generation).and_then(|v| v.as_u64()).unwrap_or(0))
  }

  /// Number of chunk documents visible to `searcher`.
  pub fn chunk_count(&self, searcher: &Searcher) -> u64 {
    searcher.num_docs().saturating_sub(1)
  }

  /// OR query over every searchable field for each term; returns the top `limit` chunks.
  pub fn search(&self, searcher: &Searcher, terms: &[String], limit: usize) -> Result<Vec<ChunkHit>> {
    if terms.is_empty() || limit == 0 {
      return Ok(Vec::new());
    }
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::with_capacity(terms.len() * self.fields.searchable.len());
    for t in terms {
      for (field, boost) in &self.fields.searchable {
        let q: Box<dyn Query> =
          Box::new(TermQuery::new(Term::from_field_text(*field, t), IndexRecordOption::WithFreqs));
        clauses.push((Occur::Should, if *boost == 1.0 { q } else { Box::new(BoostQuery::new(q, *boost)) }));
      }
    }
    let query = BooleanQuery::new(clauses);
    let top = searcher.search(&query, &TopDocs::with_limit(limit).order_by_score())?;
    let mut hits = Vec::with_capacity(top.len());
    for (score, address) in top {
      let page_id = self.stored_text(searcher, address, self.fields.page_id)?;
      hits.push(ChunkHit { score, address, page_id });
    }
    Ok(hits)
  }

  fn stored_text(&self, searcher: &Searcher, addr: DocAddress, field: Field) -> Result<String> {
    let doc: TantivyDocument = searcher.doc(addr)?;
    Ok(doc.get_first(field).and_then(|v| v.as_str()).unwrap_or_default().to_string())
  }

  /// Stored fields of a chunk document.
  pub fn chunk_doc(&self, searcher: &Searcher, addr: DocAddress) -> Result<StoredChunk> {
    let doc: TantivyDocument = searcher.doc(addr)?;
    let f = &self.fields;
    let text = |field| doc.get_first(field).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let num = |field| doc.get_first(field).and_then(|v| v.as_u64()).unwrap_or(0);
    Ok(StoredChunk {
      page_id: text(f.page_id),
      chunk_id: text(f.chunk_id),
      ordinal: num(f.ordinal) as u32,
      line_start: num(f.line_start) as u32,
      line_end: num(f.line_end) as u32,
      source: text(f.source),
      heading_path: text(f.heading_path),
    })
  }

  /// Document frequency of a term in the field where it is most frequent.
  pub fn doc_freq(&self, searcher: &Searcher, term: &str) -> Result<u64> {
    let mut best = 0;
    for (field, _) in &self.fields.searchable {
      best = best.max(searcher.doc_freq(&Term::from_field_text(*field, term))?);
    }
    Ok(best)
  }

  /// Which of `terms` occur (in any searchable field) in the document at `addr`.
  pub fn terms_in_doc(&self, searcher: &Searcher, addr: DocAddress, terms: &[String]) -> Result<Vec<bool>> {
    use tantivy::postings::Postings;
    use tantivy::DocSet;
    let seg = searcher.segment_reader(addr.segment_ord);
    let mut present = vec![false; terms.len()];
    for (field, _) in &self.fields.searchable {
      let inverted = seg.inverted_index(*field)?;
      for (i, t) in terms.iter().enumerate() {
        if present[i] {
          continue;
        }
        let term = Term::from_field_text(*field, t);
        if let Some(mut postings) = inverted.read_postings(&term, IndexRecordOption::Basic).map_err(|e| Error::Index(e.to_string()))? {
          if postings.seek(addr.doc_id) == addr.doc_id && postings.term_freq() > 0 {
            present[i] = true;
          }
        }
      }
    }
    Ok(present)
  }
}

/// Stored fields of one chunk document.
#[derive(Debug, Clone)]
pub struct StoredChunk {
  pub page_id: String,
  pub chunk_id: String,
  pub ordinal: u32,
  pub line_start: u32,
  pub line_end: u32,
  pub source: String,
  pub heading_path: String,
}
