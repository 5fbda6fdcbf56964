//! Hostile vaults: pages and trees a real user's disk can hold (huge pages, binary files named
//! `.md`, invalid UTF-8, Unicode-equivalent and case-colliding names, symlink loops and escapes,
//! 50,000 files in one folder, 200-level nesting and paths beyond PATH_MAX, frontmatter-only and
//! empty pages, a 100,000-character line, over-limit frontmatter). Each hostile file gets its typed
//! diagnostic (the contract's code where one exists, else a documented `page_*` code — see
//! docs/RELIABILITY.md); every other page is indexed and recallable; nothing panics or hangs.
//! (Peak memory of a CLI reindex of the big pages: the evaluation crate's `cli_memory` test.)

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use llm_wiki_core::chunk::estimate_tokens;
use llm_wiki_core::retrieve::{recall_wiki, RecallOptions, RecallPolicy, RetrievalMode};
use llm_wiki_core::store::manifest::Manifest;
use llm_wiki_core::store::status::IndexState;
use llm_wiki_core::store::{
  reindex_vault, Component, IndexIssue, ReindexOptions, ReindexResult, StoreLayout,
};
use llm_wiki_core::vault::VaultPaths;

use llm_wiki_core::testkit::{page_text, temp_vault as vault, write_file as write};

/// Ordinary pages that must survive every hostile neighbour: `normal/p<i>` holds `normaltoken<i>`.
fn normal_pages(p: &VaultPaths, n: usize) {
  for i in 0..n {
    write(
      &p.wiki.join(format!("normal/p{i}.md")),
      page_text(&format!("Normal {i}"), &format!("Plain page normaltoken{i}.")),
    );
  }
}

fn lexical() -> ReindexOptions {
  ReindexOptions { components: vec![Component::Lexical], ..Default::default() }
}

fn reindex(p: &VaultPaths) -> ReindexResult {
  let r = reindex_vault(p, &lexical());
  assert!(r.ok, "reindex failed: {:?}", r.errors);
  r
}

fn recall_ids(p: &VaultPaths, query: &str) -> Vec<(String, String)> {
  let policy = RecallPolicy { include_personal: false, min_score: 0.0, max_per_vault: 10, max_results: 10 };
  let r = recall_wiki(p, query, &RecallOptions::new(policy, RetrievalMode::Lexical)).unwrap();
  r.results.into_iter().map(|x| (x.id, x.path)).collect()
}

/// Problems found, reported together so one run shows every failing case.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
  fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
    if !ok {
      self.0.push(what());
    }
  }

  /// The page `id` is the top result for `query`, and the result's path is the file on disk.
  fn recalled(&mut self, p: &VaultPaths, query: &str, id: &str) {
    let hits = recall_ids(p, query);
    match hits.first() {
      None => self.0.push(format!("no result for {query:?}")),
      Some((top, _)) if top != id => self.0.push(format!("query {query:?}: expected {id}, got {hits:?}")),
      Some((_, path)) if !Path::new(path).is_file() => {
        self.0.push(format!("result path {path:?} of {id} is not the page file"))
      }
      Some(_) => {}
    }
  }

  fn assert_none(self) {
    assert!(self.0.is_empty(), "{} problem(s):\n{}", self.0.len(), self.0.join("\n"));
  }
}

fn assert_recalled(p: &VaultPaths, query: &str, id: &str) {
  let mut problems = Problems::default();
  problems.recalled(p, query, id);
  problems.assert_none();
}

/// Warnings by path → codes.
fn warnings(r: &ReindexResult) -> BTreeMap<String, Vec<String>> {
  let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
  for IndexIssue { code, path, .. } in &r.warnings {
    m.entry(path.clone().unwrap_or_default()).or_default().push(code.clone());
  }
  m
}

fn manifest(p: &VaultPaths) -> Manifest {
  let current = StoreLayout::new(p.retrieval()).current().expect("a published store");
  let gen = llm_wiki_core::store::generation::Generation::open(current).unwrap().commit.manifest_generation;
  Manifest::load_generation(&StoreLayout::new(p.retrieval()).current().unwrap(), gen, None).unwrap()
}

/// A 10 MB page of prose ending in `bigpagetoken`.
fn ten_mb_page() -> String {
  let para =
    "Retrieval systems rank passages by lexical and semantic evidence gathered from notes. ".repeat(8);
  let mut body = String::with_capacity(10_500_000);
  let mut i = 0;
  while body.len() < 10 * 1024 * 1024 {
    body.push_str(&format!("## Part {i}\n\n{para}\n\n"));
    i += 1;
  }
  body.push_str("The closing paragraph names bigpagetoken.");
  page_text("Big Page", &body)
}

#[test]
fn hostile_pages_get_typed_diagnostics_and_the_rest_is_indexed() {
  let (_t, p) = vault();
  normal_pages(&p, 20);
  let w = &p.wiki;
  write(&w.join("big.md"), ten_mb_page());
  // Over the 16 MiB page limit (sparse: cheap to create).
  let huge = fs::File::create(w.join("huge.md")).unwrap();
  huge.set_len(17 * 1024 * 1024).unwrap();
  drop(huge);
  // A PNG renamed .md, and a binary blob behind a valid frontmatter.
  write(&w.join("image.md"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x06\0\0\0\x1f\xf3\xffa");
  let mut blob = b"---\ntype: source\ntitle: Blob\n---\n".to_vec();
  blob.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
  blob.extend(b" binarytoken ");
  write(&w.join("blob.md"), blob);
  // Latin-1 bytes in an otherwise valid page: indexed (U+FFFD replaces them) with a warning.
  write(&w.join("latin1.md"), b"---\ntype: source\ntitle: Latin\n---\nCaf\xe9 cr\xe8me latintoken.\n");
  write(
    &w.join("fm-only.md"),
    "---\ntype: concept\ntitle: Frontmatteronly Card\naliases: [fmonlyalias]\n---\n",
  );
  write(&w.join("empty.md"), "");
  let long_line: String = (0..16_000).map(|i| format!("w{i} ")).collect::<String>() + "longlinetoken";
  assert!(long_line.chars().count() >= 100_000);
  write(&w.join("long-line.md"), page_text("Long Line", &long_line));
  // One 100,000-character "word" (a pasted blob without spaces), then a normal word.
  let word: String = (0..100_000).map(|i| (b'a' + (i % 26) as u8) as char).collect();
  write(&w.join("long-word.md"), page_text("Long Word", &format!("{word} longwordtoken")));
  write(&w.join("fm-bytes.md"), format!("---\ntype: a\npad: \"{}\"\n---\nbody\n", "y".repeat(130 * 1024)));
  write(
    &w.join("fm-depth.md"),
    format!("---\ntype: a\nx: {}{}\n---\nbody\n", "[".repeat(40), "]".repeat(40)),
  );
  // A name written in NFD: its id is NFC, and its file must still be found where the filesystem
  // keeps names as written (Linux).
  write(&w.join("nai\u{308}ve.md"), page_text("Naive", "naivetoken"));

  let r = reindex(&p);
  let warn = warnings(&r);
  let mut problems = Problems::default();
  let mut expect = |path: &str, code: &str| {
    let found = warn.get(path).is_some_and(|c| c.iter().any(|x| x == code));
    problems.check(found, || format!("expected {code} for {path}; got {:?}", warn.get(path)));
  };
  expect("huge.md", "page_too_large");
  expect("image.md", "page_binary");
  expect("blob.md", "page_binary");
  expect("latin1.md", "page_invalid_utf8");
  expect("empty.md", "frontmatter_missing");
  expect("fm-bytes.md", "frontmatter_limit_bytes");
  expect("fm-depth.md", "frontmatter_limit_depth");
  // Nothing else is flagged.
  let flagged: usize = warn.values().map(Vec::len).sum();
  problems.check(flagged == 7, || format!("{flagged} warnings, expected 7: {warn:#?}"));

  let m = manifest(&p);
  for i in 0..20 {
    problems.check(m.entries.contains_key(&format!("normal/p{i}")), || format!("normal/p{i} not indexed"));
  }
  for id in ["big", "latin1", "fm-only", "long-line", "long-word", "naïve"] {
    problems.check(m.entries.contains_key(id), || format!("{id} not indexed"));
  }
  problems.check(m.entries.len() == 26, || {
    format!("{} pages indexed: {:?}", m.entries.len(), m.entries.keys().collect::<Vec<_>>())
  });
  problems.check(r.status.state == IndexState::Ready, || format!("status {:?}", r.status.issues));

  for i in [0, 7, 19] {
    problems.recalled(&p, &format!("normaltoken{i}"), &format!("normal/p{i}"));
  }
  problems.recalled(&p, "bigpagetoken", "big");
  problems.recalled(&p, "latintoken", "latin1");
  problems.recalled(&p, "Frontmatteronly Card", "fm-only");
  problems.recalled(&p, "fmonlyalias", "fm-only");
  problems.recalled(&p, "longlinetoken", "long-line");
  problems.recalled(&p, "longwordtoken", "long-word");
  problems.recalled(&p, "naivetoken", "naïve");
  problems.check(recall_ids(&p, "binarytoken").is_empty(), || "the binary blob was indexed".into());

  // The 100k-character line and word are cut into chunks that fit the embedding window.
  for (id, min_chunks) in [("long-line", 80), ("long-word", 60)] {
    let file = w.join(format!("{id}.md"));
    let page =
      llm_wiki_core::vault::Page::parse(id, file.clone(), &fs::read_to_string(&file).unwrap()).unwrap();
    let chunks = llm_wiki_core::chunk::chunk_page(
      &page.meta.title,
      &page.body,
      page.body_start_line,
      &Default::default(),
    );
    problems.check(chunks.chunks.len() >= min_chunks, || format!("{} chunks for {id}", chunks.chunks.len()));
    let over: Vec<usize> =
      chunks.chunks.iter().map(|c| estimate_tokens(&c.text)).filter(|t| *t > 200).collect();
    problems.check(over.is_empty(), || format!("{id}: {} chunks over 200 tokens: {over:?}", over.len()));
    let lines: Vec<(u32, u32)> = chunks.chunks.iter().map(|c| (c.line_start, c.line_end)).collect();
    problems.check(lines.iter().all(|l| *l == (5, 5)), || format!("{id}: chunk lines {lines:?}"));
  }
  problems.assert_none();

  // A second run changes nothing and reports the same excluded files again (the decoding warning
  // of an indexed page is reported when the page is indexed, not on every run).
  let again = reindex(&p);
  assert_eq!(again.documents.unchanged, 26);
  let mut excluded_only = warn.clone();
  excluded_only.remove("latin1.md");
  assert_eq!(warnings(&again), excluded_only);
}

/// Names only a case-sensitive, normalization-preserving filesystem (Linux) can hold side by side:
/// NFC/NFD twins, case twins (files and folders), and a name that is not UTF-8.
#[cfg(target_os = "linux")]
#[test]
fn colliding_and_unencodable_names_get_diagnostics() {
  use std::os::unix::ffi::OsStrExt;
  let (_t, p) = vault();
  normal_pages(&p, 3);
  let w = &p.wiki;
  write(&w.join("caf\u{e9}.md"), page_text("Cafe NFC", "nfctoken"));
  write(&w.join("cafe\u{301}.md"), page_text("Cafe NFD", "nfdtoken"));
  write(&w.join("Case.md"), page_text("Case upper", "caseuppertoken"));
  write(&w.join("case.md"), page_text("Case lower", "caselowertoken"));
  write(&w.join("Dir/x.md"), page_text("Dir upper", "dirupper"));
  write(&w.join("dir/x.md"), page_text("Dir lower", "dirlower"));
  write(&w.join(std::ffi::OsStr::from_bytes(b"bad-name-\xff.md")), page_text("Bad name", "badnametoken"));

  let r = reindex(&p);
  let mut problems = Problems::default();
  let codes: Vec<(String, String)> =
    r.warnings.iter().map(|w| (w.path.clone().unwrap_or_default(), w.code.clone())).collect();
  let want: Vec<(String, String)> = [
    ("bad-name-\u{fffd}.md", "page_name_invalid_utf8"),
    // The NFD twin, reported under its NFC path (the message names the normalization).
    ("caf\u{e9}.md", "concept_identity_collision"),
    ("case.md", "concept_identity_collision"),
    ("dir/x.md", "concept_identity_collision"),
  ]
  .iter()
  .map(|(p, c)| (p.to_string(), c.to_string()))
  .collect();
  let mut got = codes.clone();
  got.sort();
  problems.check(got == want, || format!("warnings {got:?}, expected {want:?}"));
  let m = manifest(&p);
  let ids: Vec<&str> = m.entries.keys().map(String::as_str).collect();
  problems
    .check(ids == ["Case", "Dir/x", "café", "normal/p0", "normal/p1", "normal/p2"], || format!("{ids:?}"));
  problems.recalled(&p, "nfctoken", "café");
  problems.recalled(&p, "caseuppertoken", "Case");
  problems.recalled(&p, "dirupper", "Dir/x");
  problems.recalled(&p, "normaltoken2", "normal/p2");
  for word in ["nfdtoken", "caselowertoken", "dirlower", "badnametoken"] {
    problems.check(recall_ids(&p, word).is_empty(), || format!("{word} was indexed"));
  }
  problems.assert_none();
}

#[cfg(unix)]
#[test]
fn symlink_loops_and_escapes_are_skipped_with_diagnostics() {
  use std::os::unix::fs::symlink;
  let (t, p) = vault();
  normal_pages(&p, 5);
  let w = &p.wiki;
  let outside = t.path().join("outside");
  write(&outside.join("secret.md"), page_text("Secret", "secrettoken"));
  symlink(outside.join("secret.md"), w.join("escape.md")).unwrap();
  symlink(&outside, w.join("escape-dir")).unwrap();
  symlink("loop.md", w.join("loop.md")).unwrap(); // points at itself
  fs::create_dir_all(w.join("sub")).unwrap();
  symlink("..", w.join("sub/up")).unwrap(); // a directory cycle
  symlink("ping.md", w.join("pong.md")).unwrap();
  symlink("pong.md", w.join("ping.md")).unwrap();
  symlink(w.join("normal/p0.md"), w.join("alias-of-p0.md")).unwrap(); // inside the vault
  symlink("missing-target.md", w.join("dangling.md")).unwrap();
  symlink(outside.join("secret.md"), w.join("notes.txt")).unwrap(); // not a page name: ignored

  let r = reindex(&p);
  let warn = warnings(&r);
  let codes = |path: &str| warn.get(path).cloned().unwrap_or_default();
  assert_eq!(codes("escape.md"), vec!["link_path_escape"], "{warn:#?}");
  assert_eq!(codes("escape-dir"), vec!["link_path_escape"], "{warn:#?}");
  for path in ["loop.md", "sub/up", "ping.md", "pong.md", "alias-of-p0.md", "dangling.md"] {
    assert_eq!(codes(path), vec!["page_symlink_skipped"], "{path}: {warn:#?}");
  }
  assert_eq!(warn.len(), 8, "{warn:#?}");
  assert_eq!(manifest(&p).entries.len(), 5);
  assert!(recall_ids(&p, "secrettoken").is_empty());
  assert_recalled(&p, "normaltoken3", "normal/p3");
}

/// Create `depth` nested directories named `name` below `base` with fd-relative calls, so the
/// chain can go past PATH_MAX, and put `page` in the innermost one.
#[cfg(target_os = "linux")]
fn nest(base: &Path, name: &str, depth: usize, page: &str) {
  use std::ffi::CString;
  use std::os::unix::ffi::OsStrExt;
  let c = |s: &[u8]| CString::new(s).unwrap();
  unsafe {
    let mut fd = libc::open(c(base.as_os_str().as_bytes()).as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY);
    assert!(fd >= 0);
    let dir = c(name.as_bytes());
    for _ in 0..depth {
      assert_eq!(libc::mkdirat(fd, dir.as_ptr(), 0o755), 0, "{}", std::io::Error::last_os_error());
      let next = libc::openat(fd, dir.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY);
      assert!(next >= 0);
      libc::close(fd);
      fd = next;
    }
    let file = libc::openat(fd, c(b"deep.md").as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644);
    assert!(file >= 0);
    assert_eq!(libc::write(file, page.as_ptr().cast(), page.len()), page.len() as isize);
    libc::close(file);
    libc::close(fd);
  }
}

#[cfg(target_os = "linux")]
#[test]
fn fifty_thousand_files_and_deep_trees() {
  let (_t, p) = vault();
  normal_pages(&p, 5);
  let flat = p.wiki.join("flat");
  fs::create_dir_all(&flat).unwrap();
  for i in 0..50_000 {
    fs::write(flat.join(format!("f{i:05}.md")), format!("---\ntype: source\n---\nflat{i:05}\n")).unwrap();
  }
  // 200 levels, the deepest page path about 2,000 bytes below the wiki: readable.
  let within: PathBuf = p.wiki.join("within");
  fs::create_dir_all(&within).unwrap();
  nest(&within, "level-dir", 200, &page_text("Deep within", "deepwithintoken"));
  // 200 levels of 24-byte names: about 5,000 bytes, past PATH_MAX (4,096).
  let beyond = p.wiki.join("beyond");
  fs::create_dir_all(&beyond).unwrap();
  nest(&beyond, "a-directory-name-of-24-b", 200, &page_text("Deep beyond", "deepbeyondtoken"));

  let r = reindex(&p);
  let warn = warnings(&r);
  let m = manifest(&p);
  assert_eq!(m.entries.keys().filter(|k| k.starts_with("flat/")).count(), 50_000);
  let deep_id = format!("within/{}deep", "level-dir/".repeat(200));
  assert!(m.entries.contains_key(&deep_id));
  assert_recalled(&p, "deepwithintoken", &deep_id);
  assert_recalled(&p, "flat31337", "flat/f31337");
  assert_recalled(&p, "normaltoken4", "normal/p4");
  // The part of the tree past PATH_MAX cannot be opened: one scan diagnostic, nothing else.
  assert_eq!(warn.len(), 1, "{warn:#?}");
  let (path, codes) = warn.iter().next().unwrap();
  assert!(path.starts_with("beyond/a-directory-name-of-24-b/"), "{path}");
  assert_eq!(codes, &vec!["frontmatter_parse_error".to_string()]);
  assert_eq!(m.entries.len(), 50_000 + 5 + 1);
}

/// The vector phase re-reads pages by their manifest path, which is NFC: a page whose file name
/// is stored in NFD (as macOS writes it) must still get its vectors. Needs the model root made by
/// `scripts/fetch_models.py` (`.models/` or `LLM_WIKI_MODELS_DIR`).
#[test]
fn pages_with_nfd_file_names_get_vectors() {
  // The repository's model root first; LLM_WIKI_MODELS_DIR and the user cache follow.
  llm_wiki_core::models::configure(llm_wiki_core::models::ConfigChange {
    model_roots: llm_wiki_core::models::Setting::Set(vec![
      PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.models")
    ]),
    threads: llm_wiki_core::models::Setting::Set(1),
    ..Default::default()
  });
  let config = llm_wiki_core::models::effective_config();
  assert!(
    llm_wiki_core::models::embed_model_id(&config).is_some(),
    "no embedding model: run scripts/fetch_models.py"
  );
  let (_t, p) = vault();
  write(&p.wiki.join("nai\u{308}ve.md"), page_text("Naive", "A page whose file name is decomposed."));
  write(&p.wiki.join("plain.md"), page_text("Plain", "An ordinary page."));
  let r = reindex_vault(
    &p,
    &ReindexOptions { components: vec![Component::Lexical, Component::Vectors], ..Default::default() },
  );
  assert!(r.ok, "{:?}", r.errors);
  assert!(r.warnings.is_empty(), "{:?}", r.warnings);
  assert_eq!(r.chunks.total, 2);
  assert_eq!(r.vectors.generated, 2, "{}", serde_json::to_string_pretty(&r).unwrap());
  assert_eq!(r.status.needs_embedding, 0);
  assert!(r.status.has_vector_index);
}
