//! Manifest journal (store/manifest.rs): `Manifest::load_generation` and `journal_since`.
//!
//! Input: three parts separated by the line `#--`: a base manifest (written as
//! `manifest.<its generation>.json`, generation 1 when it names none), the bytes of its journal
//! (`manifest.<base>.journal`) and the generation asked for (decimal; the base's + 1 when absent).
//!
//! Invariants beyond "no panic": a generation that loads is the one asked for, its entries are
//! safe ids with valid hashes and chunk ids, and its journal position lies within the journal;
//! bytes after the record of the asked generation never change the result (records after it
//! belong to a run that never committed — an out-of-order record there must not make the load
//! fail); reading forward from the base with `journal_since` gives the same manifest.

use std::sync::OnceLock;

use llm_wiki_core::store::layout::StoreDir;
use llm_wiki_core::store::manifest::{Manifest, ManifestDelta};

use crate::{put, scratch_dir, split};

fn store() -> &'static StoreDir {
  static DIR: OnceLock<StoreDir> = OnceLock::new();
  DIR.get_or_init(|| StoreDir::new(scratch_dir("journal")))
}

fn generation_of(base: &[u8]) -> u64 {
  serde_json::from_slice::<serde_json::Value>(base)
    .ok()
    .and_then(|v| v.get("generation")?.as_u64())
    .filter(|g| *g < 1 << 40)
    .unwrap_or(1)
}

/// The journal cut after the first record of `generation` (None when no record of it parses
/// before an unparsable line).
fn through(journal: &[u8], generation: u64) -> Option<usize> {
  let mut at = 0;
  while let Some(nl) = journal[at..].iter().position(|b| *b == b'\n') {
    let d = serde_json::from_slice::<ManifestDelta>(&journal[at..at + nl]).ok()?;
    at += nl + 1;
    if d.generation == generation {
      return Some(at);
    }
  }
  None
}

fn write(dir: &StoreDir, base_gen: u64, base: &[u8], journal: &[u8]) {
  let _ = std::fs::remove_dir_all(&dir.dir);
  std::fs::create_dir_all(&dir.dir).unwrap();
  put(&dir.manifest_file(base_gen), base);
  put(&dir.journal_file(base_gen), journal);
}

/// One input (panics on a violated invariant).
pub fn run(data: &[u8]) {
  let dir = store();
  let parts = split(data, 3);
  let base_gen = generation_of(parts[0]);
  let asked = std::str::from_utf8(parts[2])
    .ok()
    .and_then(|s| s.trim().parse::<u64>().ok())
    .filter(|g| *g < 1 << 40)
    .unwrap_or(base_gen + 1);
  let journal = parts[1];

  write(dir, base_gen, parts[0], journal);
  let full = Manifest::load_generation(dir, asked, None);
  let journal_len = journal.len() as u64;
  if let Ok(m) = &full {
    assert_eq!(m.generation, asked, "loaded generation {} for {asked}", m.generation);
    assert!(m.journal.len <= journal_len, "journal position {} past its {journal_len} bytes", m.journal.len);
    for (id, e) in &m.entries {
      assert!(!id.is_empty() && !id.starts_with('/') && !id.contains('\\'), "unsafe id {id:?}");
      assert!(!id.split('/').any(|s| s.is_empty() || s == "." || s == ".."), "unsafe id {id:?}");
      assert_eq!(e.content_hash.len(), 64);
      assert!(e.chunks.iter().all(|c| c.len() == 16 && c.bytes().all(|b| b.is_ascii_hexdigit())));
    }
    let again = Manifest::load_generation(dir, asked, None).expect("loads again");
    assert_eq!(&again, m, "load_generation is not deterministic");
    // Forward from the base, as a reader holding the base would.
    if asked > base_gen {
      if let Ok(mut b) = Manifest::load_generation(dir, base_gen, None) {
        if let Some((records, pos)) = b.journal_since(dir, asked) {
          for r in &records {
            b.apply(r);
          }
          b.journal = pos;
          assert_eq!(&b, m, "journal_since and load_generation disagree");
        }
      }
    }
  }

  // Bytes after the asked generation's record never change what it loads as.
  if asked > base_gen {
    if let Some(cut) = through(journal, asked).filter(|c| *c < journal.len()) {
      write(dir, base_gen, parts[0], &journal[..cut]);
      if let Ok(short) = Manifest::load_generation(dir, asked, None) {
        match &full {
          Ok(m) => assert_eq!(&short, m, "records after generation {asked} changed its manifest"),
          Err(e) => panic!("records after generation {asked} made it unreadable: {e}"),
        }
      }
    }
  }
}
