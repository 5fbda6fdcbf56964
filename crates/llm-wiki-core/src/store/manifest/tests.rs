use super::*;

fn entry(hash: &str) -> ManifestEntry {
  ManifestEntry {
    rel_path: "a/b.md".into(),
    size: 1,
    mtime_ns: 2,
    content_hash: hash.repeat(64 / hash.len()),
    role: Role::Canonical,
    meta: Box::new(PageMeta { title: "B".into(), page_type: "concept".into(), ..Default::default() }),
    sections: 0,
    chunks: ChunkIds::default(),
    links: PageLinks::default(),
  }
}

#[test]
fn hash_tracks_content_not_mtime() {
  let mut m = Manifest::empty("v");
  m.entries.insert("a/b".into(), entry("a").into());
  let h1 = m.hash();
  Arc::make_mut(m.entries.get_mut("a/b").unwrap()).mtime_ns = 99;
  assert_eq!(h1, m.hash());
  Arc::make_mut(m.entries.get_mut("a/b").unwrap()).content_hash = "b".repeat(64);
  assert_ne!(h1, m.hash());
}

/// A page whose links (packed in memory, an array on disk) depend on its hash, so records that
/// change a page change its links too.
fn page(hash: &str, id: &str) -> ManifestEntry {
  let body = format!("[[{id}-{hash}#h]] [x](../{hash}/y.md) [[b^blk|B]] [e](e.md#)\n\n[[{hash}]]");
  let links = crate::memory::links::extract_links(&body, 4).links;
  assert_eq!(links.len(), 5);
  let links = PageLinks { links: crate::memory::links::LinkList::from_raw(&links), ..Default::default() };
  ManifestEntry { rel_path: format!("{id}.md"), links, ..entry(hash) }
}

fn excluded(path: &str) -> ExcludedEntry {
  ExcludedEntry {
    rel_path: path.into(),
    size: 3,
    mtime_ns: 4,
    diagnostic: Diagnostic::error("page_too_large", path, "too large"),
  }
}

/// Commit `delta` as the next generation of `dir` after `m` (the writer's path): a journal
/// record, or a new base when `checkpoint`.
fn commit(dir: &StoreDir, m: &mut Manifest, mut delta: ManifestDelta, checkpoint: bool) {
  delta.generation = m.generation + 1;
  delta.built_at_ms = 1000 + delta.generation as i64;
  let prior = m.journal;
  m.apply(&delta);
  if checkpoint {
    m.journal = m.write_generation(dir, Some(prior), None).unwrap();
  } else {
    m.journal = m.write_generation(dir, Some(prior), Some(&delta)).unwrap();
  }
}

/// What a reader holding `held` ends with at `generation`: the records since, applied, when
/// `journal_since` allows it, else a whole load. Asserts it equals a fresh whole load (entries,
/// exclusions, generation, build time and journal position) and returns whether the journal
/// was followed.
fn follow(dir: &StoreDir, held: &Manifest, generation: u64) -> (Manifest, bool) {
  let fresh = Manifest::load_generation(dir, generation, Some("v")).unwrap();
  let (m, followed) = match held.journal_since(dir, generation) {
    Some((records, pos)) => {
      let mut m = held.clone();
      for d in &records {
        m.apply(d);
      }
      m.journal = pos;
      (m, true)
    }
    None => (fresh.clone(), false),
  };
  assert_eq!(m, fresh, "reader at {} following to {generation}", held.generation);
  (m, followed)
}

fn set(items: &[(&str, &str)]) -> ManifestDelta {
  ManifestDelta {
    set: items.iter().map(|(id, h)| (id.to_string(), page(h, id).into())).collect(),
    ..Default::default()
  }
}

#[test]
fn a_reader_following_the_journal_holds_what_a_whole_load_holds() {
  let t = tempfile::tempdir().unwrap();
  let dir = StoreDir::new(t.path().to_path_buf());
  let mut m = Manifest::empty("v");
  m.generation = 1;
  for id in ["a", "b", "c/d"] {
    m.entries.insert(id.into(), page("a", id).into());
  }
  m.journal = m.write_generation(&dir, None, None).unwrap();
  let first = Manifest::load_generation(&dir, 1, Some("v")).unwrap();
  let mut readers = vec![first.clone()];
  // Add, update, delete, rename (delete + add), an exclusion added, then removed.
  let steps = vec![
    set(&[("e", "b")]),
    set(&[("a", "c")]),
    ManifestDelta { del: vec!["b".into()], ..Default::default() },
    ManifestDelta { del: vec!["c/d".into()], ..set(&[("c/renamed", "a")]) },
    ManifestDelta { xset: [("bad.md".to_string(), excluded("bad.md"))].into(), ..Default::default() },
    ManifestDelta { xdel: vec!["bad.md".into()], ..set(&[("bad", "d")]) },
  ];
  for delta in steps {
    commit(&dir, &mut m, delta, false);
    let g = m.generation;
    assert_eq!(dir.manifest_generations(), vec![1], "no checkpoint expected");
    // Every reader (one per earlier generation) reaches g through the records since it.
    for r in &mut readers {
      let (next, followed) = follow(&dir, r, g);
      assert!(followed, "generation {} → {g} needed a whole load", r.generation);
      *r = next;
    }
    readers.push(Manifest::load_generation(&dir, g, Some("v")).unwrap());
  }
  assert_eq!(m.entries.keys().collect::<Vec<_>>(), ["a", "bad", "c/renamed", "e"]);
  assert!(m.excluded.is_empty());
  // A reader from the first generation jumps all the records at once.
  assert!(follow(&dir, &first, m.generation).1);
  // Not later: nothing to follow (an old generation is never reached backwards).
  assert!(m.journal_since(&dir, m.generation).is_none());
  assert!(readers[3].journal_since(&dir, 2).is_none());
}

/// A store directory holding generation 1 (page `a`) as a base, and that manifest.
fn one_page_base() -> (tempfile::TempDir, StoreDir, Manifest) {
  let t = tempfile::tempdir().unwrap();
  let dir = StoreDir::new(t.path().to_path_buf());
  let mut m = Manifest::empty("v");
  m.generation = 1;
  m.entries.insert("a".into(), page("a", "a").into());
  m.journal = m.write_generation(&dir, None, None).unwrap();
  (t, dir, m)
}

#[test]
fn torn_records_checkpoints_and_changed_bases_fall_back_to_a_whole_load() {
  let (_t, dir, mut m) = one_page_base();
  let held = Manifest::load_generation(&dir, 1, Some("v")).unwrap();
  commit(&dir, &mut m, set(&[("b", "b")]), false);
  // A crashed writer's torn record after the committed one: ignored up to generation 2, and
  // generation 3 (never committed) cannot be followed.
  let jpath = dir.journal_file(1);
  let mut bytes = std::fs::read(&jpath).unwrap();
  let committed_len = bytes.len();
  bytes.extend_from_slice(b"{\"generation\":3,\"set\":{\"c\"");
  std::fs::write(&jpath, &bytes).unwrap();
  assert!(follow(&dir, &held, 2).1);
  assert!(held.journal_since(&dir, 3).is_none());
  // An unparsable line before the target: no follow (the whole load reports the error).
  let mut bad = bytes[..committed_len].to_vec();
  bad.extend_from_slice(b"garbage\n{\"generation\":3}\n");
  std::fs::write(&jpath, &bad).unwrap();
  assert!(held.journal_since(&dir, 3).is_none());
  assert!(Manifest::load_generation(&dir, 3, None).is_err());
  // An invalid entry in a record: no follow.
  let mut invalid = bytes[..committed_len].to_vec();
  invalid.extend_from_slice(
    format!(
      "{}\n",
      serde_json::to_string(&ManifestDelta { generation: 3, ..set(&[("../x", "c")]) }).unwrap()
    )
    .as_bytes(),
  );
  std::fs::write(&jpath, &invalid).unwrap();
  assert!(held.journal_since(&dir, 3).is_none());
  assert!(Manifest::load_generation(&dir, 3, None).is_err());
  // The next writer cuts the leftovers off and commits generation 3; then a checkpoint writes
  // generation 4 as a new base: a reader of base 1 loads it whole, a reader of base 4 follows
  // its journal.
  commit(&dir, &mut m, set(&[("c", "c")]), false);
  let at3 = follow(&dir, &held, 3).0;
  commit(&dir, &mut m, ManifestDelta { del: vec!["a".into()], ..Default::default() }, true);
  assert_eq!(dir.manifest_generations(), vec![1, 4]);
  assert!(!follow(&dir, &at3, 4).1, "a new base cannot be followed");
  let at4 = Manifest::load_generation(&dir, 4, Some("v")).unwrap();
  commit(&dir, &mut m, set(&[("d", "d")]), false);
  assert!(follow(&dir, &at4, 5).1);
  assert!(!follow(&dir, &at3, 5).1);
  // A base file that changed under the reader: no follow.
  let mut rewritten = Manifest::load_generation(&dir, 4, None).unwrap();
  rewritten.entries.insert("zz".into(), page("e", "zz").into());
  rewritten.save(&dir.manifest_file(4)).unwrap();
  assert!(at4.journal_since(&dir, 5).is_none());
}

/// Packed links are written as the format's `links` array of `{t, a, k, l}` objects, in the
/// base and in journal records, and read back equal.
#[test]
fn links_on_disk_keep_the_raw_link_array_form() {
  let (_t, dir, mut m) = one_page_base();
  commit(&dir, &mut m, set(&[("b", "b")]), false);
  let raw = |e: &ManifestEntry| serde_json::to_value(e.links.links.to_raw()).unwrap();
  let base: serde_json::Value =
    serde_json::from_slice(&std::fs::read(dir.manifest_file(1)).unwrap()).unwrap();
  assert_eq!(base["entries"]["a"]["links"]["links"], raw(&m.entries["a"]));
  assert_eq!(
    base["entries"]["a"]["links"]["links"][0],
    serde_json::json!({"t": "a-a", "a": "h", "k": "wiki", "l": 4})
  );
  let journal = std::fs::read_to_string(dir.journal_file(1)).unwrap();
  let record: serde_json::Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
  assert_eq!(record["set"]["b"]["links"]["links"], raw(&m.entries["b"]));
  assert_eq!(Manifest::load_generation(&dir, 2, Some("v")).unwrap().entries, m.entries);
}

#[test]
fn validation() {
  let t = tempfile::tempdir().unwrap();
  let p = t.path().join("m.json");
  let mut m = Manifest::empty("v");
  m.entries.insert("a/b".into(), entry("a").into());
  m.save(&p).unwrap();
  assert!(Manifest::load(&p, Some("v")).is_ok());
  assert_eq!(Manifest::load(&p, Some("w")).unwrap_err().code(), "qmd_manifest_invalid");
  // A page's file is its id with `.md`, compared without regard to ASCII case.
  let with_path = |rel: &str| {
    let mut m = Manifest::empty("v");
    m.entries.insert("a/b".into(), ManifestEntry { rel_path: rel.into(), ..entry("a") }.into());
    m.save(&p).unwrap();
    Manifest::load(&p, None).is_ok()
  };
  assert!(with_path("a/b.md") && with_path("A/b.MD"));
  assert!(!with_path("a/c.md") && !with_path("a/b.mdx") && !with_path("a/b") && !with_path("a/bb.md"));
  m.entries.insert("../x".into(), ManifestEntry { rel_path: "../x.md".into(), ..entry("a") }.into());
  m.save(&p).unwrap();
  assert!(Manifest::load(&p, None).is_err());
  std::fs::write(&p, "{").unwrap();
  assert!(Manifest::load(&p, None).is_err());
}

/// A manifest over the size read through a memory map loads as the same manifest, and a
/// malformed one of that size is refused.
#[test]
fn a_large_manifest_is_read_through_a_map_as_it_was_saved() {
  let t = tempfile::tempdir().unwrap();
  let p = t.path().join("m.json");
  let mut m = Manifest::empty("v");
  for i in 0..4000 {
    let id = format!("p{i:05}");
    m.entries.insert(id.clone(), page("a", &id).into());
  }
  m.save(&p).unwrap();
  let bytes = std::fs::read(&p).unwrap();
  assert!(bytes.len() > 1 << 20, "{} bytes: not over the mapping threshold", bytes.len());
  let loaded = Manifest::load(&p, Some("v")).unwrap();
  let read: Manifest = serde_json::from_slice(&bytes).unwrap();
  assert_eq!(loaded.entries, read.entries);
  assert_eq!(loaded.entries.len(), 4000);
  assert_eq!(loaded.hash(), m.hash());
  std::fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
  assert_eq!(Manifest::load(&p, None).unwrap_err().code(), "qmd_manifest_invalid");
}

/// A base holds one entry per line and loads, by blocks in parallel, as the same manifest a
/// serde pass over the file (or over a base written before, without the lines) gives; ids
/// that need escaping, exclusions and an empty manifest included; a damaged line is refused.
#[test]
fn a_base_of_entry_lines_loads_as_the_whole_json_does() {
  let t = tempfile::tempdir().unwrap();
  let p = t.path().join("m.json");
  let mut m = Manifest::empty("v \"entries\":{} \n");
  m.chunker = "tokenizer:x@96+24/r2".into();
  m.excluded.insert("bad.md".into(), excluded("bad.md"));
  let ids = ["a/quote\"d", "b/new\nline", "c/ünïcödé", "d/brace}{", "e/plain"];
  for id in ids {
    m.entries.insert(id.into(), page("a", id).into());
  }
  for i in 0..3000 {
    let id = format!("f/p{i:05}");
    m.entries.insert(id.clone(), page("b", &id).into());
  }
  m.save(&p).unwrap();
  let bytes = std::fs::read(&p).unwrap();
  let text = std::str::from_utf8(&bytes).unwrap();
  assert_eq!(text.lines().count(), m.entries.len() + 2, "one line per entry, the head and the tail");
  let whole: Manifest = serde_json::from_slice(&bytes).unwrap();
  let loaded = Manifest::load(&p, None).unwrap();
  assert_eq!(loaded.entries, whole.entries);
  assert_eq!(loaded.entries, m.entries);
  assert_eq!((&loaded.vault_id, &loaded.chunker, &loaded.excluded), (&m.vault_id, &m.chunker, &m.excluded));
  // Small blocks: many tasks, each of whole lines.
  let (_, lines, _) = entry_lines(&bytes).expect("the line layout");
  let blocks: Vec<&[u8]> = line_blocks(lines, 4096).collect();
  assert!(blocks.len() > 100);
  assert_eq!(blocks.iter().map(|b| b.len()).sum::<usize>(), lines.len());
  let entries: Vec<_> = blocks.iter().flat_map(|b| parse_entry_block(b).unwrap()).collect();
  assert_eq!(entries.into_iter().collect::<BTreeMap<_, _>>(), m.entries);

  // A base written in one serde pass (before the line layout) loads the same.
  std::fs::write(&p, serde_json::to_vec(&m).unwrap()).unwrap();
  assert!(entry_lines(&std::fs::read(&p).unwrap()).is_none());
  assert_eq!(Manifest::load(&p, None).unwrap().entries, m.entries);

  // A base cut short inside its entries (no tail) is refused.
  std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
  assert_eq!(Manifest::load(&p, None).unwrap_err().code(), "qmd_manifest_invalid");

  // A damaged entry line is refused, not skipped.
  let damaged = text.replacen("\"f/p01500\":{", "\"f/p01500\":{{", 1);
  assert_ne!(damaged, text);
  std::fs::write(&p, damaged).unwrap();
  assert_eq!(Manifest::load(&p, None).unwrap_err().code(), "qmd_manifest_invalid");

  // No entries.
  let empty = Manifest::empty("v");
  empty.save(&p).unwrap();
  assert_eq!(Manifest::load(&p, Some("v")).unwrap(), empty);
}

/// The writer's counts of a committed generation come from its tally, advanced by each
/// record: they must be what counting the manifest after the record gives.
#[test]
fn counts_advanced_by_a_record_equal_a_count_of_the_result() {
  let sized = |hash: &str, sections: u32, chunks: &[&str]| {
    Arc::new(ManifestEntry { sections, chunks: ChunkIds::from_ids(chunks.iter().copied()), ..entry(hash) })
  };
  let mut m = Manifest::empty("v");
  m.entries.insert("a".into(), sized("a", 2, &["00000000000000a1", "00000000000000a2"]));
  m.entries.insert("b".into(), sized("b", 1, &["00000000000000b1"]));
  m.entries.insert("c".into(), sized("c", 3, &[]));
  let tally = crate::store::state::Tally::of(&m);
  assert_eq!(tally.counts(), m.counts());
  assert_eq!(m.counts(), ManifestCounts { chunks: 3, documents: 6 + 3 + 1 });
  assert_eq!(m.total_chunks(), 3);
  let delta = ManifestDelta {
    generation: 1,
    set: [
      ("a".to_string(), sized("a2", 5, &["00000000000000a3"])),
      ("d".into(), sized("d", 1, &["00000000000000d1"])),
    ]
    .into_iter()
    .collect(),
    del: vec!["b".into()],
    ..Default::default()
  };
  let advanced = tally.advance(&m, &delta);
  m.apply(&delta);
  assert_eq!(advanced.counts(), m.counts());
  assert_eq!(m.counts(), ManifestCounts { chunks: 2, documents: 9 + 2 + 1 });
}
