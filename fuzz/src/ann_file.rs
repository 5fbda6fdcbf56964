//! ANN file (store/ann.rs): `AnnFile::open` and a search over what it opened.
//!
//! Input: one flags byte, then the bytes of an `ann-*.ann` file. Flag bit 0 rewrites the header's
//! checksum to match the body, bit 1 the header's usearch length to the body's, so mutations get
//! past those checks and reach the usearch data (a crafted file carries a valid checksum). The
//! file is opened for the model, dimensions and rows its own header names.
//!
//! Invariants beyond "no crash" (an out-of-bounds read in usearch crashes or, under ASan, is
//! reported): an open file has the asked dimensions and model; a search returns at most k keys,
//! only keys the filter accepts.

use std::path::PathBuf;
use std::sync::OnceLock;

use llm_wiki_core::store::ann::{self, AnnFile, AnnRef};

use crate::scratch_dir;

const HEADER: usize = 4096;
const FILE: &str = "ann-1.ann";

fn dir() -> &'static PathBuf {
  static DIR: OnceLock<PathBuf> = OnceLock::new();
  DIR.get_or_init(|| scratch_dir("ann"))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
  u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
  u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// One input (panics on a violated invariant).
pub fn run(data: &[u8]) {
  let Some((&flags, file)) = data.split_first() else { return };
  let mut bytes = file.to_vec();
  if bytes.len() >= HEADER {
    let n = u64_at(&bytes, 16);
    let keys = n.checked_mul(8).map(|k| k.div_ceil(HEADER as u64) * HEADER as u64);
    if flags & 2 != 0 {
      if let Some(blob) = keys.and_then(|k| (bytes.len() as u64).checked_sub(HEADER as u64 + k)) {
        bytes[24..32].copy_from_slice(&blob.to_le_bytes());
      }
    }
    if flags & 1 != 0 {
      let crc = crc32(&bytes[HEADER..]);
      bytes[32..36].copy_from_slice(&crc.to_le_bytes());
    }
  }
  let dir = dir();
  let path = dir.join(FILE);
  std::fs::write(&path, &bytes).unwrap();
  let (dims, rows, model) = if bytes.len() >= HEADER {
    let mlen = (u32_at(&bytes, 36) as usize).min(HEADER - 40);
    (
      u32_at(&bytes, 8) as usize,
      u64_at(&bytes, 16),
      String::from_utf8_lossy(&bytes[40..40 + mlen]).into_owned(),
    )
  } else {
    (8, 0, "m".to_string())
  };
  let r = AnnRef { file: FILE.into(), rows };
  if let Ok(f) = AnnFile::open(dir, &r, &model, dims) {
    assert_eq!(f.dims, dims);
    assert_eq!(f.model, model);
    if dims <= 4096 {
      let query: Vec<i8> = (0..dims).map(|i| (i as i8).wrapping_mul(37)).collect();
      for k in [1, 10] {
        let odd = |key: u64| key % 2 == 1;
        if let Ok(keys) = f.search(&query, k, &odd) {
          assert!(keys.len() <= k, "{} keys for k = {k}", keys.len());
          assert!(keys.iter().all(|key| odd(*key)), "a key the filter refused");
        }
      }
    }
  }
}

/// CRC-32 (IEEE), as the ANN header stores it.
fn crc32(bytes: &[u8]) -> u32 {
  let mut crc = !0u32;
  for &b in bytes {
    crc ^= b as u32;
    for _ in 0..8 {
      crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
    }
  }
  !crc
}

/// Seeds built by the engine (checksum and length flags set): a small graph and an empty one.
pub fn built_seeds() -> Vec<Vec<u8>> {
  let dir = scratch_dir("ann-seeds");
  let mut x = 0x2545_f491_4f6c_dd1du64;
  let mut seeds = Vec::new();
  for (i, n) in [120usize, 0].into_iter().enumerate() {
    let rows: Vec<(u64, Vec<i8>)> = (0..n as u64)
      .map(|k| {
        let v = (0..8)
          .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 56) as i8
          })
          .collect();
        (k + 1, v)
      })
      .collect();
    let refs: Vec<(u64, &[i8])> = rows.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    let name = format!("ann-{}.ann", i + 1);
    if ann::build(&dir, &name, "m", 8, &refs).is_ok() {
      let mut seed = vec![3u8];
      seed.extend(std::fs::read(dir.join(&name)).unwrap());
      seeds.push(seed);
    }
  }
  let _ = std::fs::remove_dir_all(&dir);
  seeds
}
