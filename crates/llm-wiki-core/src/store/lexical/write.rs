//! Writing the lexical index: writers (incremental and cold budgets), a page's documents, their
//! deletion, and the commit document.

use super::*;

impl LexicalIndex {
  /// A writer over an existing index (a page commit, a vector commit): a bounded thread count,
  /// [`WRITER_BUDGET_PER_THREAD`] per thread, and a merge policy that merges only small segments,
  /// so a commit never re-merges (or waits for a merge of) the large segments of the cold build.
  /// Small segments — each page commit adds one — all share one level below
  /// [`SMALL_LAYER_DOCS`] documents and are merged eight at a time; a segment above
  /// [`MAX_INCREMENTAL_MERGE_DOCS`] is never merged again by these writers (deleted documents in
  /// it stay as tombstones, invisible to search, until a full rebuild compacts the index).
  pub fn writer(&self, threads: usize) -> Result<IndexWriter> {
    let threads = threads.clamp(1, 4);
    let w = self.open_writer(threads, threads * WRITER_BUDGET_PER_THREAD)?;
    let mut policy = tantivy::merge_policy::LogMergePolicy::default();
    policy.set_min_layer_size(SMALL_LAYER_DOCS);
    policy.set_max_docs_before_merge(MAX_INCREMENTAL_MERGE_DOCS);
    policy.set_min_num_segments(8);
    w.set_merge_policy(Box::new(policy));
    Ok(w)
  }

  /// The writer of a full rebuild (a new store): at most two indexing threads sharing
  /// [`COLD_WRITER_BUDGET`], and no merges. Each thread flushes a segment when its share of the
  /// budget is full, so the build ends with about (indexed text ÷ share) segments of similar
  /// size — 8 for the 100k-page synthetic vault — whatever the machine: more threads would mean
  /// smaller shares, more segments and slower queries for the life of the store. Merging while
  /// the build ran (tantivy's default policy over the 40 MB-per-thread segments the build used
  /// to write) cost a share of its CPU and, through the merged segments' memory maps, a quarter
  /// of its peak RSS. One thread with the whole budget leaves 3 segments and queries 20 % faster,
  /// but bounds the build by that thread (+10 % wall on two cores, more on larger machines);
  /// docs/DECISIONS.md, "Cold build: one writer budget, no merges".
  pub fn cold_writer(&self, threads: usize) -> Result<IndexWriter> {
    let w = self.open_writer(threads.clamp(1, 2), COLD_WRITER_BUDGET)?;
    w.set_merge_policy(Box::new(tantivy::merge_policy::NoMergePolicy));
    Ok(w)
  }

  fn open_writer(&self, threads: usize, budget: usize) -> Result<IndexWriter> {
    // tantivy's writer lock is an advisory file lock taken without waiting. Callers hold the
    // store's writer lock, so a busy one is transient: a process forked by this one (Node's
    // child processes, a test's) inherits the lock file's descriptor until it execs, or the
    // previous writer of this process is still closing. Retried briefly instead of failing.
    let started = std::time::Instant::now();
    let w = loop {
      match self.index.writer_with_num_threads(threads, budget) {
        Err(tantivy::TantivyError::LockFailure(tantivy::directory::error::LockError::LockBusy, _))
          if started.elapsed() < WRITER_LOCK_WAIT =>
        {
          std::thread::sleep(std::time::Duration::from_millis(10))
        }
        other => break other?,
      }
    };
    // A writer killed mid-commit leaves files meta.json never adopted; tantivy collects them only
    // after a later commit, but that commit replays the same opstamps and would find their names
    // taken. We hold the store's writer lock, so nothing else can be writing them.
    w.garbage_collect_files().wait()?;
    Ok(w)
  }

  /// Add the section and chunk documents of a page.
  pub fn add_page(&self, w: &IndexWriter, page_id: &str, meta: &PageMeta, page: &ChunkedPage) -> Result<()> {
    let f = &self.fields;
    let key = page_key(page_id);
    let aliases = meta.aliases.join("\n");
    let tags = meta.tags.join("\n");
    let desc = [meta.description.as_deref(), meta.summary.as_deref()]
      .into_iter()
      .flatten()
      .chain(meta.recall_triggers.iter().map(String::as_str))
      .collect::<Vec<_>>()
      .join("\n");
    let ident = ident_text(page_id);
    let weighted =
      format!("{}\n", meta.title).repeat(TITLE_WEIGHT) + &format!("{aliases}\n").repeat(TITLE_WEIGHT);
    // Fields every document of the page carries.
    let base = |kind: &str, section: u32, lines: (u32, u32)| {
      let mut d = TantivyDocument::default();
      d.add_text(f.kind, kind);
      d.add_text(f.page_id, page_id);
      d.add_u64(f.page_key, key);
      d.add_u64(f.section, section as u64);
      d.add_u64(f.line_start, lines.0 as u64);
      d.add_u64(f.line_end, lines.1 as u64);
      d
    };
    for sec in &page.sections {
      let mut d = base("section", sec.ordinal, (sec.line_start, sec.line_end));
      let headings = sec.headings.join("\n");
      // The scoring text starts with the plain text, then the heading path (what `best_chunk`
      // reads positions against).
      let heading_start = sec.plain.len() + 1;
      d.add_u64(f.span, pack_span(heading_start, heading_start + headings.len()));
      d.add_text(f.all, [sec.plain.as_str(), &headings, &weighted, &tags, &desc, &ident].join("\n"));
      for (field, value) in
        f.matchable[1..].iter().zip([&headings, &meta.title, &aliases, &tags, &desc, &ident])
      {
        if !value.is_empty() {
          d.add_text(*field, value);
        }
      }
      w.add_document(d)?;
    }
    for c in &page.chunks {
      let mut d = base("chunk", c.section, (c.line_start, c.line_end));
      d.add_u64(f.span, pack_span(c.span.0 as usize, c.span.1 as usize));
      d.add_text(f.chunk_id, &c.id);
      d.add_u64(f.ordinal, c.ordinal as u64);
      d.add_text(f.source, &c.text);
      d.add_text(f.heading_path, c.headings.join(" › "));
      w.add_document(d)?;
    }
    Ok(())
  }

  /// Delete every document of a page.
  pub fn delete_page(&self, w: &IndexWriter, page_id: &str) {
    w.delete_term(Term::from_field_text(self.fields.page_id, page_id));
  }

  /// Replace the commit document so the next commit records `commit`.
  pub fn set_commit(&self, w: &IndexWriter, commit: &CommitInfo) -> Result<()> {
    w.delete_term(Term::from_field_text(self.fields.kind, "commit"));
    let mut d = TantivyDocument::default();
    d.add_text(self.fields.kind, "commit");
    d.add_u64(self.fields.generation, commit.generation);
    d.add_u64(self.fields.manifest_generation, commit.manifest_generation);
    if let Some(v) = &commit.vectors {
      let json = serde_json::to_string(v).map_err(|e| Error::Index(format!("serialize vector list: {e}")))?;
      d.add_text(self.fields.vectors, json);
    }
    w.add_document(d)?;
    Ok(())
  }
}
