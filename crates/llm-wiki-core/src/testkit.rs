//! Test helpers: the one preamble of the engine's and the evaluation crate's tests — a vault in a
//! temporary directory, page files written into it — and the seeded generators of randomized tests
//! and fuzz mutations. Compiled for the engine's unit tests and with the `testkit` feature (the
//! dev-dependencies, the evaluation crate and the fuzz crate); never part of a shipped build.

use std::path::{Path, PathBuf};

use crate::vault::VaultPaths;

/// Initialise a vault at `root` in the current layout: `.llm-wiki/config.json` naming it `name`
/// and an empty `wiki/`. Panics on I/O errors (tests only).
pub fn init_vault(root: &Path, name: &str) -> VaultPaths {
  let p = VaultPaths::new_layout(root);
  std::fs::create_dir_all(&p.wiki).expect("create the wiki directory");
  let config = serde_json::json!({ "name": name }).to_string();
  std::fs::write(p.config_file(), config).expect("write config.json");
  p
}

/// A vault named `T` at `<new temporary directory>/vault`; the directory is removed when the
/// returned guard drops.
pub fn temp_vault() -> (tempfile::TempDir, VaultPaths) {
  let t = tempfile::tempdir().expect("create a temporary directory");
  let p = init_vault(&t.path().join("vault"), "T");
  (t, p)
}

/// Write `bytes` to `path`, creating its parent directories. Panics on I/O errors (tests only).
pub fn write_file(path: &Path, bytes: impl AsRef<[u8]>) {
  std::fs::create_dir_all(path.parent().expect("a file path has a parent"))
    .expect("create parent directories");
  std::fs::write(path, bytes).expect("write the file");
}

/// The text of a concept page titled `title` with `body` under its frontmatter.
pub fn page_text(title: &str, body: &str) -> String {
  format!("---\ntype: concept\ntitle: {title}\n---\n{body}\n")
}

/// Write the page `<wiki>/<id>.md` (a concept titled `title`) and return its path.
pub fn write_page(p: &VaultPaths, id: &str, title: &str, body: &str) -> PathBuf {
  let path = p.wiki.join(format!("{id}.md"));
  write_file(&path, page_text(title, body));
  path
}

/// Seeded pseudo-random unit vector of `dims` dimensions (xorshift on `key ^ seed`): integer-driven,
/// so the same on every CPU. Synthetic embeddings for vector-store tests and the scale benches.
pub fn synthetic_unit(key: u64, seed: u64, dims: usize) -> Vec<f32> {
  let mut x = (key ^ seed.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
  let v: Vec<f32> = (0..dims)
    .map(|_| {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      (x >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    })
    .collect();
  let n = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
  v.into_iter().map(|a| a / n).collect()
}

/// Another process holding a lock: this test binary run again with only `test` (the full path of
/// an `#[ignore]`d test that takes the lock, prints `held` and waits), with `env` set. Returns
/// once the child printed `held`, with its stdout (kept open so the child's prints never fail).
pub fn spawn_holder(
  test: &str,
  env: &[(&str, &std::ffi::OsStr)],
) -> (std::process::Child, std::io::BufReader<std::process::ChildStdout>) {
  use std::io::BufRead;
  let mut command = std::process::Command::new(std::env::current_exe().expect("the test binary"));
  command.args(["--exact", test, "--ignored", "--nocapture", "--test-threads=1"]);
  for (k, v) in env {
    command.env(k, v);
  }
  let mut child = command
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("spawn the holder");
  let mut out = std::io::BufReader::new(child.stdout.take().expect("the holder's stdout"));
  let mut line = String::new();
  while !line.contains("held") {
    line.clear();
    assert!(
      out.read_line(&mut line).expect("read the holder") > 0,
      "the child exited before taking the lock"
    );
  }
  (child, out)
}

/// xorshift64*: a small seeded generator, the same sequence per seed on every machine — for
/// randomized tests (the lint property test) and the fuzz crate's smoke mutations. A zero state
/// stays zero: seed with an odd number (`seed | 1`).
pub struct Rng(pub u64);

impl Rng {
  /// The next 64 pseudo-random bits.
  pub fn next_u64(&mut self) -> u64 {
    self.0 ^= self.0 >> 12;
    self.0 ^= self.0 << 25;
    self.0 ^= self.0 >> 27;
    self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
  }

  /// A number in `0..n` (0 when `n` is 0).
  pub fn below(&mut self, n: usize) -> usize {
    if n == 0 {
      0
    } else {
      (self.next_u64() % n as u64) as usize
    }
  }

  /// One of `v` (which must not be empty).
  pub fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
    v[self.below(v.len())]
  }

  /// True with `percent` % probability.
  pub fn chance(&mut self, percent: u64) -> bool {
    self.next_u64() % 100 < percent
  }
}
