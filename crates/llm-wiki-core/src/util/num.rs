//! Numbers of the result shapes the Node addon hands to JavaScript as plain numbers. napi-rs maps
//! `u64` to BigInt and takes no `usize`, so the shapes use `u32` for counts bounded by the page and
//! chunk limits and `i64` for byte and line counts, milliseconds and store generations (exact in a
//! JavaScript number up to 2⁵³). Narrowing goes through these helpers: it saturates, never wraps.

/// `n` as an `i64`, saturating at `i64::MAX`.
pub fn sat_i64(n: impl TryInto<i64>) -> i64 {
  n.try_into().unwrap_or(i64::MAX)
}

/// `n` as a `u32`, saturating at `u32::MAX`.
pub fn sat_u32(n: impl TryInto<u32>) -> u32 {
  n.try_into().unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn narrowing_saturates() {
    assert_eq!(sat_i64(u64::MAX), i64::MAX);
    assert_eq!(sat_i64(7u64), 7);
    assert_eq!(sat_u32(usize::MAX), u32::MAX);
    assert_eq!(sat_u32(12usize), 12);
  }
}
