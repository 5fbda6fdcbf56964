//! Smoke runner of the fuzz targets on stable (`cargo test -p llm-wiki-fuzz`, part of `npm test`):
//! for each target, every committed seed (fuzz/seeds/<target>/, plus [`crate::ann_file`]'s
//! engine-built files), then random mutations of them (bit flips, byte sets, inserts, deletes,
//! copies, splices, dictionary tokens, truncations) for `FUZZ_SMOKE_SECS` seconds (default 5;
//! seven targets on cargo test's two threads: about 20 s of wall time). Not coverage-guided: it
//! keeps the targets compiling and catches shallow regressions; coverage-guided runs are
//! `fuzz/run.sh` (nightly, libFuzzer).
//!
//! Mutations are seeded (`FUZZ_SMOKE_SEED`, default from the clock, printed): a failure prints
//! the seed and writes the failing input to the temp dir (`llm-wiki-fuzz-<target>-<hash>.bin`),
//! reproducible with `FUZZ_SMOKE_INPUT=<file>`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use llm_wiki_core::testkit::Rng;

/// Largest input the mutator builds (the libFuzzer runs use 8-16 KiB).
const MAX_LEN: usize = 64 * 1024;
/// Mutants kept as further starting points (random, not coverage-guided).
const POOL: usize = 256;

/// What a smoke run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmokeReport {
  /// Seeds run.
  pub seeds: usize,
  /// Inputs run in all.
  pub execs: u64,
}

fn seeds_dir(target: &str) -> PathBuf {
  Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds").join(target)
}

/// The committed seeds of `target` (sorted by name), plus built ones.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
  let mut files: Vec<PathBuf> =
    std::fs::read_dir(seeds_dir(target)).into_iter().flatten().flatten().map(|e| e.path()).collect();
  files.sort();
  let mut out: Vec<Vec<u8>> = files.iter().filter_map(|p| std::fs::read(p).ok()).collect();
  if target == "ann_file" {
    out.extend(crate::ann_file::built_seeds());
  }
  if out.is_empty() {
    out.push(Vec::new());
  }
  out
}

/// Tokens of the target's dictionary (fuzz/dicts, libFuzzer format: `"token"` lines).
fn dictionary(target: &str) -> Vec<Vec<u8>> {
  let name = match target {
    "frontmatter" => "yaml",
    "chunker" | "query" => "markdown",
    _ => "json",
  };
  let text =
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("dicts/{name}.dict")))
      .unwrap_or_default();
  let mut out: Vec<Vec<u8>> = text
    .lines()
    .filter_map(|l| {
      let l = l.trim();
      let body = l.strip_prefix('"')?.strip_suffix('"')?;
      Some(unescape(body))
    })
    .filter(|t| !t.is_empty())
    .collect();
  out.extend(
    [&b"\n#--\n"[..], b"\n", b"\xc2\xa0", b"\xef\xb7\xba", b"\0", b"{\"generation\":2}"].map(<[u8]>::to_vec),
  );
  out
}

fn unescape(s: &str) -> Vec<u8> {
  let b = s.as_bytes();
  let mut out = Vec::new();
  let mut i = 0;
  while i < b.len() {
    if b[i] == b'\\' && i + 1 < b.len() {
      match b[i + 1] {
        b'x' if i + 3 < b.len() => {
          if let Ok(v) = u8::from_str_radix(&s[i + 2..i + 4], 16) {
            out.push(v);
            i += 4;
            continue;
          }
          out.push(b'x');
        }
        b'n' => out.push(b'\n'),
        b't' => out.push(b'\t'),
        c => out.push(c),
      }
      i += 2;
    } else {
      out.push(b[i]);
      i += 1;
    }
  }
  out
}

const INTERESTING: &[u8] = &[0, 1, 0x7f, 0x80, 0xff, b'\n', b'-', b'#', b'{', b'}', b'"', b':', b' ', b'9'];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[Vec<u8>], dict: &[Vec<u8>]) {
  for _ in 0..1 + rng.below(4) {
    let len = input.len();
    match rng.below(9) {
      0 if len > 0 => {
        let i = rng.below(len);
        input[i] ^= 1 << rng.below(8);
      }
      1 if len > 0 => {
        let i = rng.below(len);
        input[i] =
          if rng.below(2) == 0 { INTERESTING[rng.below(INTERESTING.len())] } else { rng.next_u64() as u8 };
      }
      2 => {
        let i = rng.below(len + 1);
        input.insert(i, rng.next_u64() as u8);
      }
      3 if len > 0 => {
        let i = rng.below(len);
        let n = 1 + rng.below((len - i).min(64));
        input.drain(i..i + n);
      }
      4 if len > 0 => {
        // Copy a range of itself elsewhere (repeats structures).
        let i = rng.below(len);
        let n = 1 + rng.below((len - i).min(256));
        let piece = input[i..i + n].to_vec();
        let at = rng.below(len + 1);
        input.splice(at..at, piece);
      }
      5 if !pool.is_empty() => {
        // Splice: our head, another input's tail.
        let other = &pool[rng.below(pool.len())];
        let cut = rng.below(len + 1);
        let from = rng.below(other.len() + 1);
        input.truncate(cut);
        input.extend_from_slice(&other[from..]);
      }
      6 if !dict.is_empty() => {
        let t = &dict[rng.below(dict.len())];
        let at = rng.below(len + 1);
        input.splice(at..at, t.iter().copied());
      }
      7 if len > 0 => input.truncate(rng.below(len)),
      8 if len > 0 => {
        // Overwrite with a little-endian integer (lengths, counts, generations in headers).
        let i = rng.below(len);
        let v = [0u64, 1, 2, 255, 65_535, u32::MAX as u64, u64::MAX, 1 << 40][rng.below(8)];
        let bytes = v.to_le_bytes();
        let n = (len - i).min([1, 2, 4, 8][rng.below(4)]);
        input[i..i + n].copy_from_slice(&bytes[..n]);
      }
      _ => {}
    }
  }
  input.truncate(MAX_LEN);
}

fn run_one(target: &str, f: fn(&[u8]), input: &[u8], seed: u64) {
  if catch_unwind(AssertUnwindSafe(|| f(input))).is_err() {
    let hash =
      input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3));
    let path = std::env::temp_dir().join(format!("llm-wiki-fuzz-{target}-{hash:016x}.bin"));
    let _ = std::fs::write(&path, input);
    panic!(
      "fuzz target {target} failed (FUZZ_SMOKE_SEED={seed}); input written to {} ({} bytes); \
       reproduce with FUZZ_SMOKE_INPUT={} cargo test -p llm-wiki-fuzz --profile ci {target}",
      path.display(),
      input.len(),
      path.display()
    );
  }
}

/// Run `target` on its seeds, then on mutations for `secs` seconds (seeded by `seed`).
pub fn smoke(target: &str, f: fn(&[u8]), secs: f64, seed: u64) -> SmokeReport {
  if let Ok(file) = std::env::var("FUZZ_SMOKE_INPUT") {
    let input = std::fs::read(&file).expect("FUZZ_SMOKE_INPUT names a readable file");
    f(&input);
    return SmokeReport { seeds: 1, execs: 1 };
  }
  let seeds = seeds(target);
  for s in &seeds {
    run_one(target, f, s, seed);
  }
  let dict = dictionary(target);
  let mut rng = Rng(seed | 1);
  let mut pool = seeds.clone();
  let mut execs = seeds.len() as u64;
  let deadline = Instant::now() + Duration::from_secs_f64(secs.max(0.0));
  while Instant::now() < deadline {
    let mut input = pool[rng.below(pool.len())].clone();
    mutate(&mut rng, &mut input, &pool, &dict);
    run_one(target, f, &input, seed);
    execs += 1;
    if rng.below(16) == 0 {
      if pool.len() < POOL + seeds.len() {
        pool.push(input);
      } else {
        let i = seeds.len() + rng.below(POOL);
        pool[i] = input;
      }
    }
  }
  SmokeReport { seeds: seeds.len(), execs }
}

/// `FUZZ_SMOKE_SECS` (default 5) and `FUZZ_SMOKE_SEED` (default from the clock).
pub fn settings() -> (f64, u64) {
  let secs = std::env::var("FUZZ_SMOKE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(5.0);
  let seed = std::env::var("FUZZ_SMOKE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
  });
  (secs, seed)
}

#[cfg(test)]
mod tests {
  use super::*;

  fn smoke_target(name: &str) {
    let f = crate::TARGETS.iter().find(|(n, _)| *n == name).expect("a target").1;
    let (secs, seed) = settings();
    let r = smoke(name, f, secs, seed);
    eprintln!(
      "fuzz smoke {name}: {} seeds, {} inputs in {secs} s (FUZZ_SMOKE_SEED={seed})",
      r.seeds, r.execs
    );
    assert!(r.seeds > 0);
  }

  #[test]
  fn every_target_has_committed_seeds() {
    for (name, _) in crate::TARGETS {
      assert!(seeds_dir(name).is_dir(), "fuzz/seeds/{name} is missing");
    }
  }

  #[test]
  fn frontmatter() {
    smoke_target("frontmatter");
  }

  #[test]
  fn chunker() {
    smoke_target("chunker");
  }

  #[test]
  fn query() {
    smoke_target("query");
  }

  #[test]
  fn store_files() {
    smoke_target("store_files");
  }

  #[test]
  fn journal() {
    smoke_target("journal");
  }

  #[test]
  fn feedback_files() {
    smoke_target("feedback_files");
  }

  #[test]
  fn ann_file() {
    smoke_target("ann_file");
  }
}
