//! The workspace's sources stay readable in pieces: no function body runs over
//! [`MAX_FN_LINES`] lines and no source file over [`MAX_FILE_LINES`], in every crate's `src`
//! (`crates/*/src`), the addon's `src` and the fuzz crate's `src` — tests inside `src` included.
//!
//! A function is counted from its `fn` line to the line of its closing brace (its doc comment
//! and attributes left out); a nested function counts inside its parent and on its own.

mod source_text;

use std::path::{Path, PathBuf};

use source_text::blank;

/// The longest function body allowed, in lines (issue 44: "no function over ~120").
const MAX_FN_LINES: usize = 120;
/// The longest source file allowed, in lines.
const MAX_FILE_LINES: usize = 800;

/// The workspace root (this crate is `crates/llm-wiki-core`).
fn workspace() -> PathBuf {
  Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The source folders held to the limits: `crates/*/src`, `src`, `fuzz/src`.
fn source_roots() -> Vec<PathBuf> {
  let root = workspace();
  let mut roots: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
    .unwrap()
    .flatten()
    .map(|e| e.path().join("src"))
    .filter(|p| p.is_dir())
    .collect();
  roots.push(root.join("src"));
  roots.push(root.join("fuzz/src"));
  roots.sort();
  roots
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
  let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
  entries.sort();
  for p in entries {
    if p.is_dir() {
      rust_files(&p, out);
    } else if p.extension().is_some_and(|x| x == "rs") {
      out.push(p);
    }
  }
}

fn is_ident(ch: u8) -> bool {
  ch.is_ascii_alphanumeric() || ch == b'_'
}

/// The functions with a body in `src`: (name, first line, line count), 1-based lines.
fn functions(src: &str) -> Vec<(String, usize, usize)> {
  let t = blank(src).into_bytes();
  let line_at = |i: usize| 1 + t[..i].iter().filter(|&&b| b == b'\n').count();
  let mut out = Vec::new();
  let mut i = 0;
  while i + 2 < t.len() {
    let word = t[i..].starts_with(b"fn") && (i == 0 || !is_ident(t[i - 1])) && t[i + 2].is_ascii_whitespace();
    if !word {
      i += 1;
      continue;
    }
    // the name; `fn(` (a pointer type) has none and is no item
    let mut j = i + 2;
    while j < t.len() && t[j].is_ascii_whitespace() {
      j += 1;
    }
    let name_start = j;
    while j < t.len() && is_ident(t[j]) {
      j += 1;
    }
    if j == name_start {
      i += 2;
      continue;
    }
    let name = String::from_utf8_lossy(&t[name_start..j]).into_owned();
    // the body's `{` at bracket depth 0, unless a `;` ends a declaration first
    let mut depth = 0usize;
    let mut open = None;
    while j < t.len() {
      match t[j] {
        b'(' | b'[' => depth += 1,
        b')' | b']' => depth = depth.saturating_sub(1),
        b';' if depth == 0 => break,
        b'{' if depth == 0 => {
          open = Some(j);
          break;
        }
        _ => {}
      }
      j += 1;
    }
    if let Some(open) = open {
      let mut braces = 0usize;
      let mut k = open;
      while k < t.len() {
        match t[k] {
          b'{' => braces += 1,
          b'}' => {
            braces -= 1;
            if braces == 0 {
              break;
            }
          }
          _ => {}
        }
        k += 1;
      }
      let first = line_at(i);
      out.push((name, first, line_at(k.min(t.len() - 1)) - first + 1));
    }
    i += 2;
  }
  out
}

/// One line per function over `max_fn` lines and per file over `max_file` lines, below `roots`.
fn oversized(roots: &[PathBuf], max_fn: usize, max_file: usize) -> Vec<String> {
  let base = workspace();
  let mut problems = Vec::new();
  for root in roots {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    for f in files {
      let src = std::fs::read_to_string(&f).unwrap();
      let shown = f.strip_prefix(&base).unwrap_or(&f).display().to_string();
      let lines = src.lines().count();
      if lines > max_file {
        problems.push(format!("{shown}: {lines} lines (at most {max_file})"));
      }
      for (name, line, n) in functions(&src) {
        if n > max_fn {
          problems.push(format!("{shown}:{line}: fn {name} is {n} lines (at most {max_fn})"));
        }
      }
    }
  }
  problems
}

#[test]
fn no_function_over_120_lines_and_no_file_over_800_in_the_workspace_sources() {
  let problems = oversized(&source_roots(), MAX_FN_LINES, MAX_FILE_LINES);
  assert!(problems.is_empty(), "{} too long:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn the_reader_counts_bodies_not_comments_strings_or_declarations() {
  let src = "trait T {\n  fn decl(&self) -> u8;\n}\n\
             /// fn in_doc() {\nfn outer(f: fn(u8) -> u8) -> u8 {\n  let s = \"}\";\n  \
             // }\n  fn inner() {}\n  f(1)\n}\n";
  let got = functions(src);
  assert_eq!(got, vec![("outer".to_string(), 5, 6), ("inner".to_string(), 8, 1)]);
}
