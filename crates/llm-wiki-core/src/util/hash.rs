//! Hashing helpers: lowercase hex, sha256 as hex (content hashes, ids, manifests of model files)
//! and the 64-bit page key the lexical index stores per document.

use sha2::{Digest, Sha256};

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
  const DIGITS: &[u8; 16] = b"0123456789abcdef";
  let mut s = String::with_capacity(bytes.len() * 2);
  for b in bytes {
    s.push(DIGITS[(b >> 4) as usize] as char);
    s.push(DIGITS[(b & 15) as usize] as char);
  }
  s
}

/// sha256 of bytes as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
  hex(&Sha256::digest(bytes))
}

/// 64-bit key of a page id (first 8 bytes of its sha256), stored as a fast field.
pub fn page_key(page_id: &str) -> u64 {
  let d = Sha256::digest(page_id.as_bytes());
  u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}
