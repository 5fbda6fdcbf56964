//! The tantivy side of a store generation. Three document kinds:
//! * `section`: a heading section (the BM25 unit) with the page fields — pages are ranked by
//!   their best section;
//! * `chunk`: an embedding-sized passage, stored for previews; it indexes no text of its own:
//!   the passage shown for a page is chosen from the positions of the query's terms in its
//!   sections (see [`LexicalIndex::best_chunk`]);
//! * `commit`: one document recording what the commit publishes ([`CommitInfo`]): its generation,
//!   the page manifest it uses and its vector segments.
//!
//! Scoring uses one combined field (`all`): body, headings, the title and aliases written twice,
//! tags, description and id tokens. Summing separate per-field BM25 scores over-rewards short
//! fields (each saturates on its own); putting weighted copies into one field is the BM25F-style
//! weighting that measured best (title ×2). The small fields are also indexed alone, without
//! frequencies, only to report where a term matched.
//!
//! Each document carries a `page_key` fast field (64-bit hash of the page id), so ranking never
//! touches the compressed document store.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;

use tantivy::collector::TopDocs;
use tantivy::directory::Directory;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
  Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

use super::vectors::VectorManifest;
use crate::analysis::{wiki_analyzer, WIKI_ANALYZER};
use crate::chunk::ChunkedPage;
use crate::error::{Error, Result};
use crate::util::hash::page_key;
use crate::vault::PageMeta;

mod write;

/// Copies of the title and of each alias in the scoring field (BM25F-style field weight).
pub const TITLE_WEIGHT: usize = 2;

/// Fields whose matches are reported; bit i of a match mask is `MATCH_FIELDS[i]`. `text` is the
/// combined scoring field, so a term in `text` but in no other field matched the body.
pub const MATCH_FIELDS: &[&str] = &["text", "heading", "title", "aliases", "tags", "desc", "ident"];

/// Handles to every schema field.
#[derive(Debug, Clone)]
pub struct Fields {
  /// `chunk` or `section` document.
  pub kind: Field,
  /// Page id (stored, indexed as one token).
  pub page_id: Field,
  /// Hash of the page id (fast field, for grouping hits by page).
  pub page_key: Field,
  /// Section ordinal within the page (stored and fast).
  pub section: Field,
  /// A byte range packed as `start << 32 | end` (fast field). A chunk: where its plain text lies
  /// in its section's ([`crate::chunk::Chunk::span`]). A section: where its heading path
  /// lies in its scoring text.
  pub span: Field,
  /// Content-derived chunk id.
  pub chunk_id: Field,
  /// Chunk ordinal within the page.
  pub ordinal: Field,
  /// First line in the page file.
  pub line_start: Field,
  /// Last line in the page file.
  pub line_end: Field,
  /// The chunk's Markdown (stored, shown as the preview).
  pub source: Field,
  /// Heading path of the chunk.
  pub heading_path: Field,
  /// Generation that wrote the document.
  pub generation: Field,
  /// Manifest generation of the commit (commit payload).
  pub manifest_generation: Field,
  /// Vector segment list of the commit (commit payload).
  pub vectors: Field,
  /// The scoring field (`MATCH_FIELDS[0]`).
  pub all: Field,
  /// All match fields in [`MATCH_FIELDS`] order (`all` first).
  pub matchable: Vec<Field>,
}

fn schema() -> (Schema, Fields) {
  let mut b = Schema::builder();
  let indexing = |opt| {
    TextOptions::default()
      .set_indexing_options(TextFieldIndexing::default().set_tokenizer(WIKI_ANALYZER).set_index_option(opt))
  };
  let kind = b.add_text_field("kind", STRING);
  let page_id = b.add_text_field("page_id", STRING | STORED);
  let page_key = b.add_u64_field("page_key", NumericOptions::default().set_fast());
  let section = b.add_u64_field("section", NumericOptions::default().set_stored().set_fast());
  let span = b.add_u64_field("span", NumericOptions::default().set_fast());
  let chunk_id = b.add_text_field("chunk_id", STRING | STORED);
  let ordinal = b.add_u64_field("ordinal", NumericOptions::default().set_stored());
  let line_start = b.add_u64_field("line_start", NumericOptions::default().set_stored());
  let line_end = b.add_u64_field("line_end", NumericOptions::default().set_stored());
  let source = b.add_text_field("source", STORED);
  let heading_path = b.add_text_field("heading_path", STORED);
  let generation = b.add_u64_field("generation", NumericOptions::default().set_stored());
  let manifest_generation = b.add_u64_field("manifest_generation", NumericOptions::default().set_stored());
  let vectors = b.add_text_field("vectors", STORED);
  // Positions (byte offsets, see `analysis`) place the query's terms in a section's chunks.
  let all = b.add_text_field(MATCH_FIELDS[0], indexing(IndexRecordOption::WithFreqsAndPositions));
  let mut matchable = vec![all];
  for name in &MATCH_FIELDS[1..] {
    matchable.push(b.add_text_field(name, indexing(IndexRecordOption::Basic)));
  }
  let fields = Fields {
    kind,
    page_id,
    page_key,
    section,
    span,
    chunk_id,
    ordinal,
    line_start,
    line_end,
    source,
    heading_path,
    generation,
    manifest_generation,
    vectors,
    all,
    matchable,
  };
  (b.build(), fields)
}

/// A byte range as one fast-field value, `start << 32 | end` (a page is far below 4 GiB).
fn pack_span(start: usize, end: usize) -> u64 {
  let clamp = |v: usize| v.min(u32::MAX as usize) as u64;
  (clamp(start) << 32) | clamp(end)
}

fn unpack_span(v: u64) -> std::ops::Range<u32> {
  (v >> 32) as u32..v as u32
}

/// BM25's term-frequency saturation and length normalization (tantivy's values), for the passage
/// choice of [`LexicalIndex::best_chunk`].
const BM25_K1: f32 = 1.2;
const BM25_B: f32 = 0.75;

/// Occurrences of each query term in one section's scoring text (byte offsets, ascending) and
/// where its heading path lies in that text.
struct SectionOccurrences {
  headings: std::ops::Range<u32>,
  positions: Vec<Vec<u32>>,
}

impl SectionOccurrences {
  /// Occurrences of term `t` in `range` of the section's plain text, plus in its heading path
  /// (a chunk's indexed text was once its heading path and plain text; the counts are the same).
  fn term_freq(&self, t: usize, range: &std::ops::Range<u32>) -> u32 {
    let count = |r: &std::ops::Range<u32>| {
      let p = &self.positions[t];
      (p.partition_point(|&x| x < r.end) - p.partition_point(|&x| x < r.start)) as u32
    };
    count(range) + count(&self.headings)
  }
}

/// The commit document of a snapshot, read through its fields `kind`, `generation`,
/// `manifest_generation` and `vectors` (in that order).
fn read_commit(searcher: &Searcher, fields: [Field; 4]) -> Result<Option<CommitInfo>> {
  let [kind, generation, manifest_generation, vectors] = fields;
  let q = TermQuery::new(Term::from_field_text(kind, "commit"), IndexRecordOption::Basic);
  let top = searcher.search(&q, &TopDocs::with_limit(1).order_by_score())?;
  let Some((_, addr)) = top.first() else {
    return Ok(None);
  };
  let doc: TantivyDocument = searcher.doc(*addr)?;
  let num = |field| doc.get_first(field).and_then(|v| v.as_u64()).unwrap_or(0);
  let vectors = match doc.get_first(vectors).and_then(|v| v.as_str()) {
    None => None,
    Some(json) => Some(
      serde_json::from_str(json)
        .map_err(|e| Error::Index(format!("malformed vector list in the commit: {e}")))?,
    ),
  };
  Ok(Some(CommitInfo { generation: num(generation), manifest_generation: num(manifest_generation), vectors }))
}

/// A match of one exact term, without frequencies (a filter clause).
fn exact_term(field: Field, value: &str) -> Box<dyn Query> {
  Box::new(TermQuery::new(Term::from_field_text(field, value), IndexRecordOption::Basic))
}

/// Tokens of a page id useful for search: every path segment plus the file stem words.
fn ident_text(page_id: &str) -> String {
  page_id.replace(['/', '-', '_', '.'], " ")
}

/// BM25 statistics restricted to one document kind. Sections and chunks share an index, and
/// tantivy would otherwise count every document in N and in the average length of fields only
/// one kind carries, distorting length normalization.
struct KindStats<'a> {
  index: &'a LexicalIndex,
  searcher: &'a Searcher,
  docs: u64,
}

impl tantivy::query::Bm25StatisticsProvider for KindStats<'_> {
  fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
    self.searcher.total_num_tokens(field)
  }
  fn total_num_docs(&self) -> tantivy::Result<u64> {
    Ok(self.docs)
  }
  fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
    self.index.doc_freq_of(self.searcher, term)
  }
}

/// Document frequencies of one index state (segments and their deletes): a recall asks the
/// frequency of every query term in every segment for the page list, again for the passage of
/// each of its pages, and the next query asks again for most of the same terms.
#[derive(Default)]
struct DocFreqMemo {
  segments: std::collections::BTreeMap<tantivy::index::SegmentId, Option<tantivy::Opstamp>>,
  freqs: HashMap<Term, u64>,
}

/// Most terms [`DocFreqMemo`] keeps before it starts over (a few MB at most; not fitted).
const DOC_FREQ_MEMO_MAX: usize = 65_536;

/// What a commit publishes, recorded in its `commit` document. Vector batches change only the
/// segment list, so they commit without writing a page manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitInfo {
  /// Generation of this commit (one more than the previous commit of the store).
  pub generation: u64,
  /// Generation whose `manifest.<N>.json` describes the pages of this commit.
  pub manifest_generation: u64,
  /// Vector segments of this commit (absent until a vectors run).
  pub vectors: Option<VectorManifest>,
}

/// An open tantivy index of one store directory.
pub struct LexicalIndex {
  /// The tantivy index.
  pub index: Index,
  /// Its schema fields.
  pub fields: Fields,
  /// Reader, reloaded when a commit changed `meta.json` ([`Self::reload_if_changed`]).
  pub reader: IndexReader,
  /// `meta.json` as read before the reader's last (re)load.
  loaded_meta: Mutex<Option<Vec<u8>>>,
  /// Document frequencies of the latest searcher asked ([`Self::doc_freq_of`]).
  doc_freqs: Mutex<DocFreqMemo>,
  /// Per segment: total plain-text bytes of its chunks and their count ([`Self::mean_chunk_len`]).
  chunk_lengths: Mutex<HashMap<tantivy::index::SegmentId, (u64, u64)>>,
}

/// tantivy's commit record, replaced by an atomic rename on every commit.
const META_FILE: &str = "meta.json";

/// A section-level search hit.
#[derive(Debug, Clone)]
pub struct SectionHit {
  /// BM25 score.
  pub score: f32,
  /// The section document.
  pub address: DocAddress,
  /// [`page_key`] of the page.
  pub page_key: u64,
}

/// Stored fields of one chunk document.
#[derive(Debug, Clone)]
pub struct StoredChunk {
  /// The page.
  pub page_id: String,
  /// Content-derived chunk id.
  pub chunk_id: String,
  /// Chunk ordinal within the page.
  pub ordinal: u32,
  /// Section ordinal within the page.
  pub section: u32,
  /// First line in the page file.
  pub line_start: u32,
  /// Last line in the page file.
  pub line_end: u32,
  /// The chunk's Markdown.
  pub source: String,
  /// Heading path of the chunk.
  pub heading_path: String,
}

/// Segments below this many documents form the lowest merge level of an incremental writer (not
/// fitted: a one-page commit writes a segment of a few to a few dozen documents).
pub const SMALL_LAYER_DOCS: u32 = 100;

/// Largest segment (documents) an incremental writer merges (not fitted: bounds a merge to eight
/// segments of at most this size, a few tens of milliseconds; the cold build's segments are far
/// larger and are never touched by incremental commits).
pub const MAX_INCREMENTAL_MERGE_DOCS: usize = 5_000;

/// Indexing memory of each thread of a writer over an existing index (page and vector commits
/// index a few pages at a time; tantivy's own default is about this size).
pub const WRITER_BUDGET_PER_THREAD: usize = 40_000_000;

/// Indexing memory of a full rebuild's writer, shared by its threads: a thread flushes a segment
/// when its share is full, so the budget sets the segment count of a cold build, which nothing
/// merges later (see [`LexicalIndex::cold_writer`]). Chosen on the 100k-page synthetic vault of
/// `bench scale` (not fitted on retrieval data): 2 × 120 MB leaves 8 segments where 2 × 80 MB
/// left 12 and 2 × 40 MB 30 (a query visits every segment: 30 made warm lexical recall 60–80 %
/// slower than 9); each 80 MB more or less moves the build's peak RSS by about as much.
pub const COLD_WRITER_BUDGET: usize = 240_000_000;

/// How long opening a writer waits out a busy tantivy writer lock (see [`LexicalIndex::writer`]).
const WRITER_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl LexicalIndex {
  fn finish(index: Index) -> Result<Self> {
    // Custom analyzers are not persisted by tantivy: register on every open.
    index.tokenizers().register(WIKI_ANALYZER, wiki_analyzer());
    let (_, fields) = schema();
    // Read before the reader opens, so the reader is at least as new as these bytes.
    let meta = index.directory().atomic_read(Path::new(META_FILE)).ok();
    let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
    Ok(LexicalIndex {
      index,
      fields,
      reader,
      loaded_meta: Mutex::new(meta),
      doc_freqs: Mutex::default(),
      chunk_lengths: Mutex::default(),
    })
  }

  /// `searcher.doc_freq(term)`, memoized for the searcher's index state. The state is the
  /// searcher's segments and their delete opstamps, which fix every frequency whichever reader
  /// the searcher came from; a searcher of another state starts the memo over.
  fn doc_freq_of(&self, searcher: &Searcher, term: &Term) -> tantivy::Result<u64> {
    let segments = searcher.generation().segments();
    {
      let memo = self.doc_freqs.lock().unwrap_or_else(|p| p.into_inner());
      if memo.segments == *segments {
        if let Some(&n) = memo.freqs.get(term) {
          return Ok(n);
        }
      }
    }
    let n = searcher.doc_freq(term)?;
    let mut memo = self.doc_freqs.lock().unwrap_or_else(|p| p.into_inner());
    if memo.segments != *segments || memo.freqs.len() >= DOC_FREQ_MEMO_MAX {
      memo.segments = segments.clone();
      memo.freqs.clear();
    }
    memo.freqs.insert(term.clone(), n);
    Ok(n)
  }

  /// Reload the reader if the index has a newer commit. A reload takes tantivy's meta lock,
  /// re-opens every segment reader and starts a searcher with cold document-store caches — a
  /// tenth of a millisecond or more that every recall paid (docs/DECISIONS.md, "Identity keys,
  /// reloads and document frequencies") —, so it is skipped while `meta.json` holds the bytes
  /// read before the last reload: every commit rewrites it (new segment list, opstamp and
  /// payload) by atomic rename.
  /// Reading the bytes before reloading means a commit landing in between is picked up by the
  /// next call, never missed.
  pub fn reload_if_changed(&self) -> Result<()> {
    let meta = self
      .index
      .directory()
      .atomic_read(Path::new(META_FILE))
      .map_err(|e| Error::Index(format!("cannot read the lexical index's {META_FILE}: {e}")))?;
    let mut loaded = self.loaded_meta.lock().unwrap_or_else(|p| p.into_inner());
    if loaded.as_deref() == Some(meta.as_slice()) {
      return Ok(());
    }
    self.reader.reload()?;
    *loaded = Some(meta);
    Ok(())
  }

  /// Create an empty index in `dir` (created if missing).
  pub fn create(dir: &Path) -> Result<Self> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    let (schema, _) = schema();
    Self::finish(Index::create_in_dir(dir, schema)?)
  }

  /// Open an existing index.
  pub fn open(dir: &Path) -> Result<Self> {
    let index =
      Index::open_in_dir(dir).map_err(|e| Error::Index(format!("cannot open {}: {e}", dir.display())))?;
    let (expected, _) = schema();
    if index.schema() != expected {
      return Err(Error::Index(format!("{} has an incompatible schema", dir.display())));
    }
    Self::finish(index)
  }

  /// What the commit in a searcher's snapshot records (`None` when the index was never committed).
  pub fn commit_of(&self, searcher: &Searcher) -> Result<Option<CommitInfo>> {
    let f = &self.fields;
    read_commit(searcher, [f.kind, f.generation, f.manifest_generation, f.vectors])
  }

  /// What the last commit of the index in `dir` records, whatever the index's schema: its fields
  /// are found by name. A rebuild reads the store it replaces this way to carry its vectors over,
  /// also when that store is of an older format (whose schema [`Self::open`] refuses).
  pub fn commit_in(dir: &Path) -> Result<Option<CommitInfo>> {
    let index =
      Index::open_in_dir(dir).map_err(|e| Error::Index(format!("cannot open {}: {e}", dir.display())))?;
    let schema = index.schema();
    let mut fields = [Field::from_field_id(0); 4];
    for (slot, name) in fields.iter_mut().zip(["kind", "generation", "manifest_generation", "vectors"]) {
      *slot = schema
        .get_field(name)
        .map_err(|_| Error::Index(format!("{} has no `{name}` field", dir.display())))?;
    }
    let reader: IndexReader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
    read_commit(&reader.searcher(), fields)
  }

  /// Number of documents of a kind (`section` or `chunk`), at least 1.
  pub fn kind_count(&self, searcher: &Searcher, kind: &str) -> Result<u64> {
    Ok(self.doc_freq_of(searcher, &Term::from_field_text(self.fields.kind, kind))?.max(1))
  }

  /// BM25 (OR semantics) over the scoring field; the top `limit` sections. Only section documents
  /// carry that field, so chunks and the commit doc never match.
  pub fn search(&self, searcher: &Searcher, terms: &[String], limit: usize) -> Result<Vec<SectionHit>> {
    let weighted: Vec<(String, f32)> = terms.iter().map(|t| (t.clone(), 1.0)).collect();
    self.search_weighted(searcher, &weighted, limit)
  }

  /// [`LexicalIndex::search`] with a weight per term (expansion terms count less).
  pub fn search_weighted(
    &self,
    searcher: &Searcher,
    terms: &[(String, f32)],
    limit: usize,
  ) -> Result<Vec<SectionHit>> {
    if terms.is_empty() || limit == 0 {
      return Ok(Vec::new());
    }
    let clauses: Vec<(Occur, Box<dyn Query>)> = terms
      .iter()
      .map(|(t, w)| {
        let q: Box<dyn Query> =
          Box::new(TermQuery::new(Term::from_field_text(self.fields.all, t), IndexRecordOption::WithFreqs));
        let q: Box<dyn Query> = if *w == 1.0 { q } else { Box::new(tantivy::query::BoostQuery::new(q, *w)) };
        (Occur::Should, q)
      })
      .collect();
    let stats = KindStats { index: self, searcher, docs: self.kind_count(searcher, "section")? };
    let top = searcher.search_with_statistics_provider(
      &BooleanQuery::new(clauses),
      &TopDocs::with_limit(limit).order_by_score(),
      &stats,
    )?;
    let mut columns: HashMap<u32, tantivy::columnar::Column<u64>> = HashMap::new();
    let mut hits = Vec::with_capacity(top.len());
    for (score, address) in top {
      let col = match columns.entry(address.segment_ord) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => {
          v.insert(searcher.segment_reader(address.segment_ord).fast_fields().u64("page_key")?)
        }
      };
      hits.push(SectionHit { score, address, page_key: col.first(address.doc_id).unwrap_or(0) });
    }
    Ok(hits)
  }

  /// Documents of one kind (`section`, `chunk`) of a page, in index order (a page's documents
  /// are added together, in page order).
  fn page_docs(&self, searcher: &Searcher, page_id: &str, kind: &str) -> Result<Vec<DocAddress>> {
    let f = &self.fields;
    let query = BooleanQuery::new(vec![
      (Occur::Must, exact_term(f.page_id, page_id)),
      (Occur::Must, exact_term(f.kind, kind)),
    ]);
    let mut docs: Vec<DocAddress> =
      searcher.search(&query, &tantivy::collector::DocSetCollector)?.into_iter().collect();
    docs.sort_unstable();
    Ok(docs)
  }

  /// Mean length (plain-text bytes) of the chunks in a searcher's segments: BM25's average
  /// document length for [`Self::best_chunk`]. A segment never changes, so its sum is computed
  /// once (one pass over its chunk documents' `span` values) and kept while it is live.
  fn mean_chunk_len(&self, searcher: &Searcher) -> Result<f32> {
    use tantivy::DocSet;
    let mut memo = self.chunk_lengths.lock().unwrap_or_else(|p| p.into_inner());
    let live: Vec<tantivy::index::SegmentId> =
      searcher.segment_readers().iter().map(|s| s.segment_id()).collect();
    memo.retain(|id, _| live.contains(id));
    let (mut bytes, mut chunks) = (0u64, 0u64);
    for seg in searcher.segment_readers() {
      let (b, n) = match memo.get(&seg.segment_id()) {
        Some(&v) => v,
        None => {
          let spans = seg.fast_fields().u64("span")?;
          let term = Term::from_field_text(self.fields.kind, "chunk");
          let postings = seg
            .inverted_index(self.fields.kind)?
            .read_postings(&term, IndexRecordOption::Basic)
            .map_err(|e| Error::Index(e.to_string()))?;
          let (mut b, mut n) = (0u64, 0u64);
          if let Some(mut p) = postings {
            while p.doc() != tantivy::TERMINATED {
              b += unpack_span(spans.first(p.doc()).unwrap_or(0)).len() as u64;
              n += 1;
              p.advance();
            }
          }
          memo.insert(seg.segment_id(), (b, n));
          (b, n)
        }
      };
      bytes += b;
      chunks += n;
    }
    Ok((bytes as f32 / chunks.max(1) as f32).max(1.0))
  }

  /// The best chunk of a page for `terms`: BM25 over each chunk's text, ties (and no term found)
  /// → the earliest chunk. Chunks index no text (their words are their section's): a chunk's term
  /// frequency is the count of the term's positions in its section's scoring text that fall in
  /// the chunk's range of the section's plain text or in the section's heading path, read from
  /// the section's postings. Document frequencies are the sections'; lengths are plain-text bytes
  /// against the mean chunk of the index. Measured against
  /// indexing every chunk's text again: docs/DECISIONS.md, "Cold build CPU: chunks placed by
  /// their sections' positions".
  pub fn best_chunk(
    &self,
    searcher: &Searcher,
    page_id: &str,
    terms: &[String],
  ) -> Result<Option<DocAddress>> {
    let chunks = self.page_docs(searcher, page_id, "chunk")?;
    if chunks.len() < 2 || terms.is_empty() {
      return Ok(chunks.first().copied());
    }
    let mut distinct: Vec<&str> = Vec::with_capacity(terms.len());
    for t in terms {
      if !distinct.contains(&t.as_str()) {
        distinct.push(t);
      }
    }
    let n = self.kind_count(searcher, "section")? as f32;
    let idf = distinct
      .iter()
      .map(|t| {
        let df = self.doc_freq(searcher, t)? as f32;
        Ok((1.0 + (n - df + 0.5) / (df + 0.5)).ln())
      })
      .collect::<Result<Vec<f32>>>()?;
    let f = &self.fields;
    let mut columns: HashMap<u32, (tantivy::columnar::Column<u64>, tantivy::columnar::Column<u64>)> =
      HashMap::new();
    let mut fast = |addr: DocAddress| -> Result<(u64, std::ops::Range<u32>)> {
      let (section, span) = match columns.entry(addr.segment_ord) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => {
          let ff = searcher.segment_reader(addr.segment_ord).fast_fields();
          v.insert((ff.u64("section")?, ff.u64("span")?))
        }
      };
      Ok((section.first(addr.doc_id).unwrap_or(0), unpack_span(span.first(addr.doc_id).unwrap_or(0))))
    };
    use tantivy::postings::Postings;
    use tantivy::DocSet;
    // The page's sections in index order: each term's postings are read once per segment and
    // seeked forward through them.
    let section_docs = self.page_docs(searcher, page_id, "section")?;
    let mut positions: Vec<Vec<Vec<u32>>> = vec![vec![Vec::new(); distinct.len()]; section_docs.len()];
    for (t, word) in distinct.iter().enumerate() {
      let term = Term::from_field_text(f.all, word);
      let mut postings: Option<(u32, Option<tantivy::postings::SegmentPostings>)> = None;
      for (k, addr) in section_docs.iter().enumerate() {
        if postings.as_ref().is_none_or(|(segment, _)| *segment != addr.segment_ord) {
          let read = searcher
            .segment_reader(addr.segment_ord)
            .inverted_index(f.all)?
            .read_postings(&term, IndexRecordOption::WithFreqsAndPositions)
            .map_err(|e| Error::Index(e.to_string()))?;
          postings = Some((addr.segment_ord, read));
        }
        if let Some((_, Some(p))) = postings.as_mut() {
          if p.doc() <= addr.doc_id && p.seek(addr.doc_id) == addr.doc_id {
            p.positions(&mut positions[k][t]);
          }
        }
      }
    }
    let mut sections: HashMap<u64, SectionOccurrences> = HashMap::new();
    for (addr, positions) in section_docs.into_iter().zip(positions) {
      let (ordinal, headings) = fast(addr)?;
      sections.insert(ordinal, SectionOccurrences { headings, positions });
    }
    let placed = chunks
      .iter()
      .map(|&addr| {
        let (ordinal, range) = fast(addr)?;
        let len = range.len() as f32;
        Ok((addr, sections.get(&ordinal), range, len))
      })
      .collect::<Result<Vec<_>>>()?;
    let mean_len = self.mean_chunk_len(searcher)?;
    let mut best: Option<(f32, DocAddress)> = None;
    for (addr, occ, range, len) in placed {
      let score = occ.map_or(0.0, |o| {
        let norm = BM25_K1 * (1.0 - BM25_B + BM25_B * len / mean_len);
        idf
          .iter()
          .enumerate()
          .map(|(t, idf)| {
            let tf = o.term_freq(t, &range) as f32;
            idf * tf * (BM25_K1 + 1.0) / (tf + norm)
          })
          .sum()
      });
      // Chunks come in page order: a later chunk must score higher to win.
      if best.is_none_or(|(s, _)| score > s + 1e-6) {
        best = Some((score, addr));
      }
    }
    Ok(best.map(|(_, a)| a))
  }

  /// The chunk document with this chunk id in a page.
  pub fn chunk_by_id(
    &self,
    searcher: &Searcher,
    page_id: &str,
    chunk_id: &str,
  ) -> Result<Option<DocAddress>> {
    let f = &self.fields;
    let query = BooleanQuery::new(vec![
      (Occur::Must, exact_term(f.chunk_id, chunk_id)),
      (Occur::Must, exact_term(f.page_id, page_id)),
    ]);
    Ok(searcher.search(&query, &TopDocs::with_limit(1).order_by_score())?.first().map(|(_, a)| *a))
  }

  /// Stored fields of a chunk document.
  pub fn chunk_doc(&self, searcher: &Searcher, addr: DocAddress) -> Result<StoredChunk> {
    let doc: TantivyDocument = searcher.doc(addr)?;
    let f = &self.fields;
    let text = |field| doc.get_first(field).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let num = |field| doc.get_first(field).and_then(|v| v.as_u64()).unwrap_or(0) as u32;
    Ok(StoredChunk {
      page_id: text(f.page_id),
      chunk_id: text(f.chunk_id),
      ordinal: num(f.ordinal),
      section: num(f.section),
      line_start: num(f.line_start),
      line_end: num(f.line_end),
      source: text(f.source),
      heading_path: text(f.heading_path),
    })
  }

  /// Document frequency of a term among sections (scoring field).
  pub fn doc_freq(&self, searcher: &Searcher, term: &str) -> Result<u64> {
    Ok(self.doc_freq_of(searcher, &Term::from_field_text(self.fields.all, term))?)
  }

  /// Keys of the pages with a section that holds any of `terms` (scoring field, analyzed
  /// terms). Reads each term's postings once per segment; deleted documents do not count.
  pub fn pages_with_any(&self, searcher: &Searcher, terms: &[String]) -> Result<HashSet<u64>> {
    use tantivy::DocSet;
    let mut keys = HashSet::new();
    for seg in searcher.segment_readers() {
      let page_keys = seg.fast_fields().u64("page_key")?;
      let inverted = seg.inverted_index(self.fields.all)?;
      let alive = seg.alive_bitset();
      for t in terms {
        let term = Term::from_field_text(self.fields.all, t);
        let postings =
          inverted.read_postings(&term, IndexRecordOption::Basic).map_err(|e| Error::Index(e.to_string()))?;
        let Some(mut postings) = postings else { continue };
        while postings.doc() != tantivy::TERMINATED {
          let doc = postings.doc();
          if alive.is_none_or(|a| a.is_alive(doc)) {
            keys.extend(page_keys.first(doc));
          }
          postings.advance();
        }
      }
    }
    Ok(keys)
  }

  /// For each document in `addrs` and each of `terms`, a bit mask of the [`MATCH_FIELDS`] in
  /// which the term occurs. Reads each term's postings once per segment and seeks through the
  /// sorted documents: no re-analysis of stored text.
  pub fn term_fields(
    &self,
    searcher: &Searcher,
    addrs: &[DocAddress],
    terms: &[String],
  ) -> Result<Vec<Vec<u8>>> {
    use tantivy::DocSet;
    let mut masks = vec![vec![0u8; terms.len()]; addrs.len()];
    let mut by_segment: HashMap<u32, Vec<(u32, usize)>> = HashMap::new();
    for (i, a) in addrs.iter().enumerate() {
      by_segment.entry(a.segment_ord).or_default().push((a.doc_id, i));
    }
    for (seg_ord, mut docs) in by_segment {
      docs.sort_unstable();
      let seg = searcher.segment_reader(seg_ord);
      for (bit, field) in self.fields.matchable.iter().enumerate() {
        let inverted = seg.inverted_index(*field)?;
        for (ti, t) in terms.iter().enumerate() {
          let term = Term::from_field_text(*field, t);
          let postings = inverted
            .read_postings(&term, IndexRecordOption::Basic)
            .map_err(|e| Error::Index(e.to_string()))?;
          let Some(mut postings) = postings else { continue };
          for &(doc, i) in &docs {
            if postings.doc() <= doc && postings.seek(doc) == doc {
              masks[i][ti] |= 1 << bit;
            }
          }
        }
      }
    }
    Ok(masks)
  }
}

#[cfg(test)]
mod tests;
