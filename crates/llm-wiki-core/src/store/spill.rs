//! A full build's page manifest entries, kept in a file of the new store directory while the
//! build scans, instead of in memory beside the lexical writer.
//!
//! A cold build's peak memory is the writer's arenas (up to [`super::lexical::COLD_WRITER_BUDGET`]
//! and the segment serialization at each flush) on top of everything else the build holds; the
//! entries of the pages scanned so far were the largest part of the rest (≈ 2.2 KB per page: a
//! 100k-page vault's manifest is ≈ 220 MB live). Written out one JSON line per page as pages are
//! indexed, they are read back once the writer has flushed its last segments and its memory has
//! been released, so the two never add up. Only builds of at least
//! [`SPILL_FROM_PAGES`](super::reindex) pages spill: below it the entries are small and the
//! write and parse would cost more than they save.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use super::manifest::{EntryPair, ManifestEntry};
use crate::{Error, Result};

/// The spill file's name in a store directory under construction (removed when read back, and
/// with the directory if the build fails).
pub const SPILL_FILE: &str = "entries.spill.jsonl";

/// Entries written so far, in page order.
pub(crate) struct EntrySpill {
  path: PathBuf,
  out: Option<BufWriter<File>>,
  written: usize,
}

fn io_err(what: &str, path: &std::path::Path, e: impl std::fmt::Display) -> Error {
  Error::Index(format!("{what} {}: {e}", path.display()))
}

impl EntrySpill {
  /// A new, empty spill file at `path`.
  pub(crate) fn create(path: PathBuf) -> Result<EntrySpill> {
    let file = File::create(&path).map_err(|e| io_err("cannot create", &path, e))?;
    Ok(EntrySpill { out: Some(BufWriter::with_capacity(1 << 20, file)), path, written: 0 })
  }

  /// Append page `id`'s entry (one line: `[id, entry]`, the manifest's JSON form of the entry).
  pub(crate) fn push(&mut self, id: &str, entry: &ManifestEntry) -> Result<()> {
    let out = self.out.as_mut().expect("open until read back");
    serde_json::to_writer(&mut *out, &(id, entry)).map_err(|e| io_err("cannot write", &self.path, e))?;
    out.write_all(b"\n").map_err(|e| io_err("cannot write", &self.path, e))?;
    self.written += 1;
    Ok(())
  }

  /// Every entry written, by id; the file is removed. The file is read in blocks of whole lines
  /// (a whole-file read or map would put its hundreds of MB in memory at once), a round of
  /// blocks parsed at once on the caller and rayon's pool: the read-back runs after the writer's
  /// threads are done, and parsing (each entry's link targets interned again) was the longest
  /// serial step of a 100k-page build's end (docs/DECISIONS.md).
  pub(crate) fn read_back(mut self) -> Result<BTreeMap<String, Arc<ManifestEntry>>> {
    let out = self.out.take().expect("read back once");
    out.into_inner().map_err(|e| io_err("cannot write", &self.path, e.error()))?;
    let file = File::open(&self.path).map_err(|e| io_err("cannot read", &self.path, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    crate::pool::global();
    let per_round = rayon::current_num_threads().max(1);
    let mut pairs = Vec::with_capacity(self.written);
    let mut blocks: Vec<String> = Vec::with_capacity(per_round);
    loop {
      blocks.clear();
      while blocks.len() < per_round {
        let mut block = String::with_capacity(READ_BLOCK_BYTES + (READ_BLOCK_BYTES >> 4));
        while block.len() < READ_BLOCK_BYTES {
          if reader.read_line(&mut block).map_err(|e| io_err("cannot read", &self.path, e))? == 0 {
            break;
          }
        }
        if block.is_empty() {
          break;
        }
        blocks.push(block);
      }
      if blocks.is_empty() {
        break;
      }
      let mut parsed: Vec<Result<Vec<EntryPair>>> = blocks.iter().map(|_| Ok(Vec::new())).collect();
      let (first, rest) = parsed.split_first_mut().expect("a block");
      let path = self.path.as_path();
      rayon::in_place_scope(|s| {
        for (slot, block) in rest.iter_mut().zip(&blocks[1..]) {
          s.spawn(move |_| *slot = parse_block(path, block));
        }
        *first = parse_block(path, &blocks[0]);
      });
      for p in parsed {
        pairs.extend(p?);
      }
    }
    if pairs.len() != self.written {
      return Err(io_err(
        "entries lost in",
        &self.path,
        format!("{} of {} read back", pairs.len(), self.written),
      ));
    }
    // Pages are scanned in id order, so this builds the tree in one pass, its nodes full.
    Ok(pairs.into_iter().collect())
  }
}

/// The entries of a block of whole lines of the spill file at `path`.
fn parse_block(path: &std::path::Path, block: &str) -> Result<Vec<EntryPair>> {
  block
    .lines()
    .map(|line| {
      let (id, entry): (String, ManifestEntry) =
        serde_json::from_str(line).map_err(|e| io_err("invalid entry in", path, e))?;
      Ok((id, Arc::new(entry)))
    })
    .collect()
}

/// Bytes of whole lines read back as one block (not fitted: large enough that handing a block to
/// another thread costs nothing beside its parse, small enough that a round's blocks are a few
/// MB in memory).
const READ_BLOCK_BYTES: usize = 1 << 20;

impl Drop for EntrySpill {
  fn drop(&mut self) {
    self.out = None;
    let _ = std::fs::remove_file(&self.path);
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::memory::graph::PageLinks;
  use crate::memory::links::{extract_links, LinkList};
  use crate::store::manifest::ChunkIds;
  use crate::vault::page::{PageMeta, Role};

  fn entry(i: usize) -> ManifestEntry {
    let body = format!("[[p{}#h]] [x](../q/{i}.md) [[b^blk|B]]\n\n\"quoted\" \\ é", i + 1);
    ManifestEntry {
      rel_path: format!("c/p{i:03}.md"),
      size: i as u64,
      mtime_ns: -(i as i64),
      content_hash: format!("{i:064x}"),
      role: Role::Canonical,
      meta: Box::new(PageMeta {
        title: format!("Title \"{i}\"\nnext"),
        page_type: "concept".into(),
        ..Default::default()
      }),
      sections: 2,
      chunks: ChunkIds::from_ids([format!("{i:016x}").as_str()]),
      links: PageLinks { links: LinkList::from_raw(&extract_links(&body, 3).links), ..Default::default() },
    }
  }

  #[test]
  fn entries_come_back_as_written_and_the_file_goes() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join(SPILL_FILE);
    let mut spill = EntrySpill::create(path.clone()).unwrap();
    // Enough entries for several rounds of several blocks (read back in parallel).
    let written: BTreeMap<String, Arc<ManifestEntry>> =
      (0..12_000).map(|i| (format!("c/p{i:05}"), Arc::new(entry(i)))).collect();
    for (id, e) in &written {
      spill.push(id, e).unwrap();
    }
    let buffered = 1 << 20;
    let on_disk = std::fs::metadata(&path).unwrap().len() as usize;
    assert!(on_disk + buffered > 2 * rayon::current_num_threads().max(2) * READ_BLOCK_BYTES, "{on_disk}");
    let back = spill.read_back().unwrap();
    assert_eq!(back, written);
    assert!(!path.exists());
    // Dropped without reading back (a failed build): the file goes too.
    let mut spill = EntrySpill::create(path.clone()).unwrap();
    spill.push("c/p000", &entry(0)).unwrap();
    drop(spill);
    assert!(!path.exists());
  }

  #[test]
  fn a_spill_that_cannot_be_read_back_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join(SPILL_FILE);
    let mut spill = EntrySpill::create(path.clone()).unwrap();
    spill.push("c/p000", &entry(0)).unwrap();
    std::fs::remove_file(&path).unwrap();
    let err = spill.read_back().unwrap_err();
    assert_eq!(err.code(), "qmd_index_error", "{err}");
    assert!(err.to_string().contains(SPILL_FILE), "{err}");
    // A damaged line is reported, not skipped.
    let mut spill = EntrySpill::create(path.clone()).unwrap();
    spill.push("c/p000", &entry(0)).unwrap();
    spill.out.as_mut().unwrap().write_all(b"[\"c/p001\", {\"relPath\": 3}]\n").unwrap();
    spill.written += 1;
    let err = spill.read_back().unwrap_err();
    assert!(err.to_string().contains("invalid entry"), "{err}");
  }
}
