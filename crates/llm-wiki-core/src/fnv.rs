//! FNV-1a hashing for the engine's in-process caches of short strings (the token counter's
//! pieces, the analyzer's terms): fast on short keys; these caches need no DoS resistance (their
//! keys come from the vault being indexed and their sizes are capped).

use std::collections::HashMap;

/// FNV-1a (64-bit).
#[derive(Default, Clone, Copy)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
  fn finish(&self) -> u64 {
    self.0
  }
  fn write(&mut self, bytes: &[u8]) {
    let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
    for &b in bytes {
      h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    self.0 = h;
  }
}

/// A hash map keyed through [`Fnv`].
pub type FnvMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;
