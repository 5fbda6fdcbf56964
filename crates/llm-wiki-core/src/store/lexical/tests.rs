use super::*;

fn commit_doc(idx: &LexicalIndex, w: &mut IndexWriter, generation: u64) {
  idx.set_commit(w, &CommitInfo { generation, manifest_generation: generation, vectors: None }).unwrap();
}

/// A new index in `dir` with generation 1 committed, and its writer.
fn committed_index(dir: &Path) -> (LexicalIndex, IndexWriter) {
  let idx = LexicalIndex::create(dir).unwrap();
  let mut w = idx.writer(1).unwrap();
  commit_doc(&idx, &mut w, 1);
  w.commit().unwrap();
  (idx, w)
}

/// A writer killed inside `commit()` leaves the files it wrote before `meta.json`, among them
/// `<segment>.<opstamp>.del`, registered in `.managed.json`. The next writer replays the same
/// operations from the same opstamp, so it must not find those names taken (found by the crash
/// harness: every later reindex failed with `FileAlreadyExists` until the vault changed). The
/// leftovers are planted as a dying writer leaves them, for the opstamps the replay can use.
#[test]
fn files_of_a_writer_that_died_mid_commit_do_not_block_the_next_commit() {
  let t = tempfile::tempdir().unwrap();
  let (idx, w) = committed_index(t.path());
  w.wait_merging_threads().unwrap();
  drop(idx);

  let meta: serde_json::Value =
    serde_json::from_slice(&std::fs::read(t.path().join("meta.json")).unwrap()).unwrap();
  let opstamp = meta["opstamp"].as_u64().unwrap();
  let segment = meta["segments"][0]["segment_id"].as_str().unwrap().replace('-', "");
  let managed_path = t.path().join(".managed.json");
  let mut managed: Vec<String> = serde_json::from_slice(&std::fs::read(&managed_path).unwrap()).unwrap();
  for stamp in opstamp..opstamp + 8 {
    let name = format!("{segment}.{stamp}.del");
    std::fs::write(t.path().join(&name), b"partial").unwrap();
    managed.push(name);
  }
  std::fs::write(&managed_path, serde_json::to_vec(&managed).unwrap()).unwrap();

  let idx = LexicalIndex::open(t.path()).unwrap();
  let mut w = idx.writer(1).unwrap();
  commit_doc(&idx, &mut w, 2);
  w.commit().expect("the next writer commits over a dead writer's files");
  w.wait_merging_threads().unwrap();
  let reader = idx.index.reader().unwrap();
  assert_eq!(idx.commit_of(&reader.searcher()).unwrap().unwrap().generation, 2);
}

/// Index pages (id, Markdown body) in one commit; their chunked forms are returned.
fn indexed(dir: &Path, pages: &[(&str, &str)]) -> (LexicalIndex, Vec<ChunkedPage>) {
  let idx = LexicalIndex::create(dir).unwrap();
  let mut w = idx.writer(1).unwrap();
  let mut chunked = Vec::new();
  for (id, body) in pages {
    let meta = PageMeta { title: format!("Page {id}"), ..Default::default() };
    let page = crate::chunk::chunk_page(&meta.title, body, 1, &crate::chunk::ChunkConfig::default());
    idx.add_page(&w, id, &meta, &page).unwrap();
    chunked.push(page);
  }
  commit_doc(&idx, &mut w, 1);
  w.commit().unwrap();
  idx.reader.reload().unwrap();
  (idx, chunked)
}

/// The ordinal of the chunk `best_chunk` picks for a query.
fn best(idx: &LexicalIndex, page: &str, query: &str) -> Option<u32> {
  let terms = crate::analysis::analyze(&mut crate::analysis::wiki_analyzer(), query);
  let searcher = idx.reader.searcher();
  idx.best_chunk(&searcher, page, &terms).unwrap().map(|a| idx.chunk_doc(&searcher, a).unwrap().ordinal)
}

/// The passage is the chunk holding the query's words, placed by the section's positions:
/// a word of one chunk only, a word of one chunk next to words of every chunk, a word of one
/// section's heading path; nothing found → the first chunk; a page of one chunk → that chunk.
#[test]
fn best_chunk_follows_the_query_terms_positions() {
  let t = tempfile::tempdir().unwrap();
  let filler = |word: &str| -> String {
    (0..16).map(|i| format!("Sentence {i} mentions {word} among ordinary notes. ")).collect()
  };
  let body = format!(
    "# Storage\n\n{}\n\n{}\n\n{}\n\n# Zephyr cache\n\n{}\n",
    filler("alpha"),
    filler("bravo"),
    filler("charlie"),
    filler("delta")
  );
  let (idx, pages) = indexed(t.path(), &[("p", &body), ("q", "A single short paragraph about gamma.")]);
  let page = &pages[0];
  assert!(page.chunks.len() >= 4, "{} chunks", page.chunks.len());
  // The chunk holding a word (each paragraph fits one chunk, two do not).
  let of_word = |w: &str| {
    let holding: Vec<u32> = page.chunks.iter().filter(|c| c.plain().contains(w)).map(|c| c.ordinal).collect();
    assert_eq!(holding.len(), 1, "{w} in chunks {holding:?}");
    holding[0]
  };
  let (bravo, charlie, delta) = (of_word("bravo"), of_word("charlie"), of_word("delta"));
  assert!(bravo > 0 && charlie > bravo && page.chunks[delta as usize].section == 1);
  assert_eq!(best(&idx, "p", "bravo"), Some(bravo));
  assert_eq!(best(&idx, "p", "charlie notes"), Some(charlie));
  // A word only in the second section's heading path picks that section's chunk.
  assert_eq!(best(&idx, "p", "zephyr"), Some(delta));
  assert_eq!(best(&idx, "p", "nothing matches this"), Some(0));
  assert_eq!(best(&idx, "q", "gamma"), Some(0));
  assert_eq!(best(&idx, "missing", "gamma"), None);
}

/// A page edited in a later commit lives in another segment: its passage is still placed by
/// its own section's positions, and the deleted version is not read.
#[test]
fn best_chunk_reads_the_live_version_of_an_edited_page() {
  let t = tempfile::tempdir().unwrap();
  let para = |w: &str| -> String { (0..20).map(|i| format!("Line {i} is about {w} today. ")).collect() };
  let (idx, _) = indexed(t.path(), &[("p", &format!("{}\n\n{}\n", para("alpha"), para("bravo")))]);
  let mut w = idx.writer(1).unwrap();
  idx.delete_page(&w, "p");
  let body = format!("{}\n\n{}\n", para("bravo"), para("alpha"));
  let meta = PageMeta { title: "Page p".into(), ..Default::default() };
  let page = crate::chunk::chunk_page(&meta.title, &body, 1, &crate::chunk::ChunkConfig::default());
  idx.add_page(&w, "p", &meta, &page).unwrap();
  commit_doc(&idx, &mut w, 2);
  w.commit().unwrap();
  w.wait_merging_threads().unwrap();
  idx.reader.reload().unwrap();
  assert_eq!(page.chunks.len(), 2);
  assert!(page.chunks[0].plain().contains("bravo") && page.chunks[1].plain().contains("alpha"));
  assert_eq!(best(&idx, "p", "alpha"), Some(1));
  assert_eq!(best(&idx, "p", "bravo"), Some(0));
}

/// The commit of an index of another schema (an older store format: other fields, other
/// field order) is read by field name, so a rebuild can carry that store's vectors over; the
/// current schema refuses to open it.
#[test]
fn the_commit_of_an_index_of_another_schema_is_read_by_field_name() {
  let t = tempfile::tempdir().unwrap();
  let mut b = Schema::builder();
  let chunk_body = b.add_text_field("chunk_body", tantivy::schema::TEXT);
  let vectors = b.add_text_field("vectors", STORED);
  let kind = b.add_text_field("kind", STRING);
  let generation = b.add_u64_field("generation", NumericOptions::default().set_stored());
  let manifest_generation = b.add_u64_field("manifest_generation", NumericOptions::default().set_stored());
  let index = Index::create_in_dir(t.path(), b.build()).unwrap();
  let mut w: IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
  w.add_document(tantivy::doc!(kind => "chunk", chunk_body => "old text")).unwrap();
  let list = VectorManifest { model: "m".into(), dims: 4, segments: Vec::new(), ann: None };
  w.add_document(tantivy::doc!(
    kind => "commit",
    generation => 7u64,
    manifest_generation => 6u64,
    vectors => serde_json::to_string(&list).unwrap()
  ))
  .unwrap();
  w.commit().unwrap();
  drop(w);
  let commit = LexicalIndex::commit_in(t.path()).unwrap().expect("a commit");
  assert_eq!((commit.generation, commit.manifest_generation), (7, 6));
  assert_eq!(commit.vectors, Some(list));
  assert!(LexicalIndex::open(t.path()).is_err(), "the current schema opened an index of another");
  // An index without the commit fields is an error, not a panic.
  let other = tempfile::tempdir().unwrap();
  let mut b = Schema::builder();
  b.add_text_field("kind", STRING);
  Index::create_in_dir(other.path(), b.build()).unwrap();
  assert!(LexicalIndex::commit_in(other.path()).is_err());
}

/// A busy tantivy writer lock (a forked child still holding the lock file's descriptor, a
/// writer still closing) is waited out briefly; one held longer is an error, as before.
#[test]
fn a_briefly_busy_writer_lock_is_waited_out() {
  let t = tempfile::tempdir().unwrap();
  let idx = LexicalIndex::create(t.path()).unwrap();
  let held = idx.writer(1).unwrap();
  let released = std::thread::spawn(move || {
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(held);
  });
  let started = std::time::Instant::now();
  let w = idx.writer(1).expect("the lock is free within the wait");
  assert!(started.elapsed() >= std::time::Duration::from_millis(200));
  released.join().unwrap();
  let started = std::time::Instant::now();
  assert!(idx.writer(1).is_err(), "a lock held past the wait is an error");
  assert!(started.elapsed() >= WRITER_LOCK_WAIT);
  drop(w);
}

/// Incremental writers merge the small segments page commits leave, never a large segment of
/// the cold build; documents deleted from it stay invisible.
#[test]
fn incremental_commits_merge_small_segments_only() {
  let t = tempfile::tempdir().unwrap();
  let idx = LexicalIndex::create(t.path()).unwrap();
  let kind = idx.fields.kind;
  let page = idx.fields.page_id;
  let mut w = idx.cold_writer(1).unwrap();
  for i in 0..(MAX_INCREMENTAL_MERGE_DOCS + 50) {
    w.add_document(tantivy::doc!(kind => "chunk", page => format!("p{i}"))).unwrap();
  }
  commit_doc(&idx, &mut w, 1);
  w.commit().unwrap();
  w.wait_merging_threads().unwrap();
  let big = idx.index.searchable_segment_ids().unwrap();
  assert_eq!(big.len(), 1);
  for g in 2..40u64 {
    let mut w = idx.writer(1).unwrap();
    // A page edit: its old documents deleted (from the big segment), new ones added.
    idx.delete_page(&w, &format!("p{g}"));
    w.add_document(tantivy::doc!(kind => "chunk", page => format!("n{g}"))).unwrap();
    commit_doc(&idx, &mut w, g);
    w.commit().unwrap();
    w.wait_merging_threads().unwrap();
  }
  let now = idx.index.searchable_segment_ids().unwrap();
  assert!(now.contains(&big[0]), "the large segment was merged by an incremental writer");
  // 38 one-page commits, merged eight at a time: far fewer segments than commits.
  assert!(now.len() < 12, "{} segments: small segments were not merged", now.len());
  let reader = idx.index.reader().unwrap();
  let searcher = reader.searcher();
  let count = |id: &str| {
    let q = TermQuery::new(Term::from_field_text(page, id), tantivy::schema::IndexRecordOption::Basic);
    searcher.search(&q, &tantivy::collector::Count).unwrap()
  };
  assert_eq!(count("p5"), 0, "a deleted document is visible");
  assert_eq!(count("p45"), 1);
  assert_eq!(count("n39"), 1);
  assert_eq!(idx.commit_of(&searcher).unwrap().unwrap().generation, 39);
}

/// A full rebuild's segments are never merged: not by the cold writer while it builds, and not
/// by the writers of later page or vector commits, even when eight of them are of one size (the
/// level at which tantivy's default policy merges them all, mapping the whole index at once).
#[test]
fn cold_build_segments_are_never_merged() {
  let t = tempfile::tempdir().unwrap();
  let idx = LexicalIndex::create(t.path()).unwrap();
  let kind = idx.fields.kind;
  let page = idx.fields.page_id;
  let mut w = idx.cold_writer(1).unwrap();
  // A commit per segment stands for a flush of a full budget.
  for s in 0..9 {
    for i in 0..(MAX_INCREMENTAL_MERGE_DOCS + 10) {
      w.add_document(tantivy::doc!(kind => "chunk", page => format!("s{s}p{i}"))).unwrap();
    }
    commit_doc(&idx, &mut w, s + 1);
    w.commit().unwrap();
  }
  w.wait_merging_threads().unwrap();
  let built = idx.index.searchable_segment_ids().unwrap();
  assert_eq!(built.len(), 9, "the cold writer merged segments");
  let mut w = idx.writer(1).unwrap();
  commit_doc(&idx, &mut w, 10);
  w.commit().unwrap();
  w.wait_merging_threads().unwrap();
  let after = idx.index.searchable_segment_ids().unwrap();
  assert!(built.iter().all(|s| after.contains(s)), "a commit's writer merged the cold build's segments");
}

/// Recall reloads the reader only for a new commit: an unchanged index keeps its searcher
/// (segment readers, document-store caches), a commit by another index handle — another
/// process's writer — is seen by the next call, and so is a commit that only replaces the
/// commit record (how a vector batch publishes its segments).
#[test]
fn the_reader_reloads_only_when_a_commit_changed_the_index() {
  let t = tempfile::tempdir().unwrap();
  let (writer_side, mut w) = committed_index(t.path());
  let reader_side = LexicalIndex::open(t.path()).unwrap();
  let generation_of = |idx: &LexicalIndex| idx.reader.searcher().generation().generation_id();
  let before = generation_of(&reader_side);
  for _ in 0..3 {
    reader_side.reload_if_changed().unwrap();
  }
  assert_eq!(generation_of(&reader_side), before, "an unchanged index was reloaded");

  let page = writer_side.fields.page_id;
  w.add_document(tantivy::doc!(writer_side.fields.kind => "chunk", page => "new")).unwrap();
  commit_doc(&writer_side, &mut w, 2);
  w.commit().unwrap();
  reader_side.reload_if_changed().unwrap();
  let searcher = reader_side.reader.searcher();
  assert_ne!(searcher.generation().generation_id(), before);
  assert_eq!(reader_side.commit_of(&searcher).unwrap().unwrap().generation, 2);
  let q = TermQuery::new(Term::from_field_text(page, "new"), tantivy::schema::IndexRecordOption::Basic);
  assert_eq!(searcher.search(&q, &tantivy::collector::Count).unwrap(), 1);

  // The commit record alone.
  let after_docs = generation_of(&reader_side);
  writer_side.set_commit(&w, &CommitInfo { generation: 3, manifest_generation: 2, vectors: None }).unwrap();
  w.commit().unwrap();
  reader_side.reload_if_changed().unwrap();
  assert_ne!(generation_of(&reader_side), after_docs);
  assert_eq!(reader_side.commit_of(&reader_side.reader.searcher()).unwrap().unwrap().generation, 3);
  w.wait_merging_threads().unwrap();
}

/// Memoized document frequencies belong to an index state: a searcher of a newer commit (more
/// documents, or deletes) and a searcher still held from an older one each get their own.
#[test]
fn memoized_document_frequencies_follow_the_searchers_index_state() {
  let t = tempfile::tempdir().unwrap();
  let (idx, mut w) = committed_index(t.path());
  let (kind, page) = (idx.fields.kind, idx.fields.page_id);
  // Adds chunk documents, commits them as `generation` and returns the reloaded searcher.
  let mut commit_chunks = |ids: &[&str], generation: u64| {
    for id in ids {
      w.add_document(tantivy::doc!(kind => "chunk", page => *id)).unwrap();
    }
    commit_doc(&idx, &mut w, generation);
    w.commit().unwrap();
    idx.reload_if_changed().unwrap();
    idx.reader.searcher()
  };
  let old = commit_chunks(&["a"], 2);
  assert_eq!(idx.kind_count(&old, "chunk").unwrap(), 1);
  assert_eq!(idx.kind_count(&old, "chunk").unwrap(), 1, "asked twice");
  let new = commit_chunks(&["b", "c"], 3);
  assert_eq!(idx.kind_count(&new, "chunk").unwrap(), 3);
  assert_eq!(idx.kind_count(&old, "chunk").unwrap(), 1, "the older searcher's state");
  assert_eq!(idx.kind_count(&new, "chunk").unwrap(), 3);
  w.wait_merging_threads().unwrap();
}
