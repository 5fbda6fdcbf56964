//! The engine's floors, kept built: every module of the core lives on one floor, and an import
//! (`use crate::…`, `super::…`, a `crate::…` path in code, a `pub use` door) may reach its own
//! floor or a lower one, never a higher one; and the modules' imports close no circle. The skin
//! (the Node addon's `src/`) is held to the same two rules with its own floors.
//!
//! The floors are written once, here (and drawn in ARCHITECTURE.md). A new module must be given
//! a floor below; a module is placed by the longest prefix of its path listed.
//!
//! How imports are read: the module tree is followed from `lib.rs` through its `mod` declarations
//! (test-only modules, `#[cfg(test)]` items and the `testkit` helpers are left out); comments and
//! literals are blanked; each path is resolved to the module that defines it, following `pub use`
//! doors, so `crate::store::StoreLayout` is an import of `store::layout`.

mod source_text;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use source_text::blank;

/// The core's floors, lowest first. `name::*` places the modules below `name` (not `name`
/// itself: a folder's `mod.rs` that opens doors to a higher floor's module sits on that floor).
const CORE_FLOORS: &[(&str, &[&str])] = &[
  // time, hashing, cancellation, files, threads, interning: what everything may use
  ("util", &["util", "error", "fnv", "fsutil", "intern", "pool"]),
  // the page model: which files are pages, what a valid page is, chunks, analysis
  ("vault", &["vault", "chunk", "analysis"]),
  // what one page says about others: body links, typed relations, its resolution record
  ("page links", &["memory::links", "memory::relations", "memory::page_links", "memory::resolve::record"]),
  // ONNX models: settings, loading, embedding, tokens, downloads
  ("models", &["models"]),
  // the on-disk store format: lock, manifest, lexical index, vectors, swap, state
  ("store", &["store::*", "events_lock"]),
  // the link graph and what it means: backlinks, lint, the resolution read model
  ("links", &["memory::link_targets", "memory::graph", "memory::lint", "memory::resolve::decisions"]),
  // ranking: candidates, confidence, fusion, modes
  ("retrieve", &["retrieve::*"]),
  // the feedback log and its projection (what ranking reads of it)
  (
    "feedback log",
    &[
      "feedback",
      "feedback::events",
      "feedback::sums",
      "feedback::archive",
      "feedback::projection",
      "feedback::compact",
      "feedback::shape",
    ],
  ),
  // building the index: reindex, its embedding phase, its jobs, recovery, status
  (
    "index",
    &["store", "store::reindex", "store::embedding", "store::job", "store::status", "store::recover"],
  ),
  // the stories a caller asks for: recall, memory bundles, feedback, conflict resolution
  ("stories", &["retrieve", "retrieve::recall", "memory", "feedback::*", "audit"]),
  // keeping an index current as files change
  ("watch", &["watch"]),
  ("crate root", &[""]),
];

/// The skin's floors, lowest first.
const SKIN_FLOORS: &[(&str, &[&str])] = &[
  // failures, what JS hands over besides options
  ("errors", &["error", "args"]),
  // the napi objects
  ("shapes", &["session", "types"]),
  // the addon's job threads
  ("jobs", &["task"]),
  // the exports, and the test hooks the root calls (they read the watcher's live hook count)
  ("calls", &["audit", "feedback", "graph_tools", "memory", "resolve", "test_hooks", "watch", ""]),
];

/// Modules that exist only for tests.
const TEST_ONLY: &[&str] = &["testkit"];

// ---------------------------------------------------------------------------------------------
// Source text

/// Index just past the item that starts at `from` (`…;` or `… { … }`, whichever closes first).
fn item_end(t: &[u8], from: usize) -> usize {
  let mut depth = 0usize;
  let mut i = from;
  while i < t.len() {
    match t[i] {
      b'{' | b'(' | b'[' => depth += 1,
      b'}' | b')' | b']' => {
        depth = depth.saturating_sub(1);
        if depth == 0 && t[i] == b'}' {
          return i + 1;
        }
      }
      b';' if depth == 0 => return i + 1,
      _ => {}
    }
    i += 1;
  }
  t.len()
}

/// Index just past the attributes (`#[…]`) and whitespace that start at `from`.
fn skip_attrs(t: &[u8], mut i: usize) -> usize {
  loop {
    while i < t.len() && t[i].is_ascii_whitespace() {
      i += 1;
    }
    if t[i..].starts_with(b"#[") {
      let mut depth = 0;
      while i < t.len() {
        if t[i] == b'[' {
          depth += 1;
        } else if t[i] == b']' {
          depth -= 1;
          if depth == 0 {
            i += 1;
            break;
          }
        }
        i += 1;
      }
    } else {
      return i;
    }
  }
}

/// Blanked text with every `#[cfg(test)]` item removed.
fn without_tests(t: &str) -> String {
  let mut b = t.as_bytes().to_vec();
  let mark = b"#[cfg(test)]";
  let mut i = 0;
  while let Some(p) = find(&b, mark, i) {
    let start = skip_attrs(&b, p);
    let end = item_end(&b, start);
    for x in &mut b[p..end] {
      if *x != b'\n' {
        *x = b' ';
      }
    }
    i = end;
  }
  String::from_utf8(b).unwrap()
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
  (from..hay.len().saturating_sub(needle.len() - 1)).find(|&i| hay[i..].starts_with(needle))
}

// ---------------------------------------------------------------------------------------------
// The module tree

struct Module {
  file: PathBuf,
  /// Blanked source without its test items.
  code: String,
  /// Child modules declared with `mod name;`.
  children: BTreeSet<String>,
}

fn is_ident(ch: u8) -> bool {
  ch.is_ascii_alphanumeric() || ch == b'_'
}

/// The `#[path = "…"]` of the attributes just before `at`, read from the raw source.
fn path_attr(raw: &str, line: usize) -> Option<String> {
  let lines: Vec<&str> = raw.lines().collect();
  let mut l = line;
  while l > 0 {
    l -= 1;
    let s = lines[l].trim();
    if let Some(rest) = s.strip_prefix("#[path = \"") {
      return rest.split('"').next().map(str::to_string);
    }
    if !s.starts_with("#[") {
      return None;
    }
  }
  None
}

fn load(root: &Path, files: &mut BTreeMap<String, Module>) {
  let mut todo = vec![(String::new(), root.join("lib.rs"))];
  while let Some((name, file)) = todo.pop() {
    let raw = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let code = without_tests(&blank(&raw));
    let b = code.as_bytes();
    let mut children = BTreeSet::new();
    // `mod name;` declarations (inline `mod name { … }` are part of this file's code)
    let mut i = 0;
    while let Some(p) = find(b, b"mod ", i) {
      i = p + 4;
      if p > 0 && is_ident(b[p - 1]) {
        continue;
      }
      let s = i;
      let mut e = s;
      while e < b.len() && is_ident(b[e]) {
        e += 1;
      }
      let mut k = e;
      while k < b.len() && b[k] == b' ' {
        k += 1;
      }
      if k >= b.len() || b[k] != b';' {
        continue;
      }
      let child = code[s..e].to_string();
      if TEST_ONLY.contains(&child.as_str()) && name.is_empty() {
        continue;
      }
      let line = code[..p].matches('\n').count();
      let dir = if file.file_name().unwrap() == "lib.rs" || file.file_name().unwrap() == "mod.rs" {
        file.parent().unwrap().to_path_buf()
      } else {
        file.with_extension("")
      };
      let cf = match path_attr(&raw, line) {
        Some(p) => file.parent().unwrap().join(p),
        None if dir.join(format!("{child}.rs")).exists() => dir.join(format!("{child}.rs")),
        None => dir.join(&child).join("mod.rs"),
      };
      let full = if name.is_empty() { child.clone() } else { format!("{name}::{child}") };
      todo.push((full, cf));
      children.insert(child);
    }
    files.insert(name, Module { file, code, children });
  }
}

// ---------------------------------------------------------------------------------------------
// Paths

#[derive(Debug, Clone, PartialEq)]
enum Tok {
  Id(String),
  Sep,
  Open,
  Close,
  Comma,
  Star,
}

fn tokens(s: &str) -> Vec<Tok> {
  let b = s.as_bytes();
  let mut out = vec![];
  let mut i = 0;
  while i < b.len() {
    match b[i] {
      b':' if b.get(i + 1) == Some(&b':') => {
        out.push(Tok::Sep);
        i += 2;
      }
      c @ (b'{' | b'}' | b',' | b'*') => {
        out.push(match c {
          b'{' => Tok::Open,
          b'}' => Tok::Close,
          b',' => Tok::Comma,
          _ => Tok::Star,
        });
        i += 1;
      }
      c if is_ident(c) => {
        let s0 = i;
        while i < b.len() && is_ident(b[i]) {
          i += 1;
        }
        out.push(Tok::Id(s[s0..i].to_string()));
      }
      _ => i += 1,
    }
  }
  out
}

/// Expand a use tree into `(path, name it binds)` pairs (`*` binds nothing).
fn expand(t: &[Tok], i: &mut usize, prefix: Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
  let mut path = prefix;
  loop {
    match t.get(*i) {
      Some(Tok::Id(s)) if s == "as" => {
        *i += 1;
        if let Some(Tok::Id(alias)) = t.get(*i) {
          *i += 1;
          let bound = if alias == "_" { None } else { Some(alias.clone()) };
          out.push((path, bound));
        }
        return;
      }
      Some(Tok::Id(s)) => {
        path.push(s.clone());
        *i += 1;
        if t.get(*i) == Some(&Tok::Sep) {
          *i += 1;
          continue;
        }
        if matches!(t.get(*i), Some(Tok::Id(a)) if a == "as") {
          continue;
        }
        if path.last().map(String::as_str) == Some("self") {
          path.pop();
        }
        let bound = path.last().cloned();
        out.push((path, bound));
        return;
      }
      Some(Tok::Star) => {
        *i += 1;
        out.push((path, None));
        return;
      }
      Some(Tok::Open) => {
        *i += 1;
        while *i < t.len() && t[*i] != Tok::Close {
          if t[*i] == Tok::Comma {
            *i += 1;
            continue;
          }
          expand(t, i, path.clone(), out);
        }
        *i += 1;
        return;
      }
      Some(Tok::Sep) => {
        *i += 1;
      }
      _ => return,
    }
  }
}

struct Crate {
  modules: BTreeMap<String, Module>,
  /// Per module: name → absolute path of what its `pub use` doors re-export.
  doors: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

fn split(m: &str) -> Vec<String> {
  if m.is_empty() {
    vec![]
  } else {
    m.split("::").map(str::to_string).collect()
  }
}

impl Crate {
  /// Absolute segments of `path` written in module `m` (None: another crate or a local name).
  fn absolute(
    &self,
    m: &str,
    path: &[String],
    aliases: &BTreeMap<String, Vec<String>>,
  ) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut here = split(m);
    let mut rest = path;
    match first.as_str() {
      "crate" => return Some(path[1..].to_vec()),
      "self" => rest = &path[1..],
      "super" => {
        while rest.first().map(String::as_str) == Some("super") {
          here.pop()?;
          rest = &rest[1..];
        }
      }
      name if self.modules[m].children.contains(name) => {}
      name if aliases.contains_key(name) => {
        let mut abs = aliases[name].clone();
        abs.extend_from_slice(&path[1..]);
        return Some(abs);
      }
      _ => return None,
    }
    here.extend_from_slice(rest);
    Some(here)
  }

  /// The module that defines what `abs` names.
  fn resolve(&self, abs: &[String]) -> String {
    let mut abs = abs.to_vec();
    for _ in 0..8 {
      let mut n = abs.len();
      while n > 0 && !self.modules.contains_key(&abs[..n].join("::")) {
        n -= 1;
      }
      let m = abs[..n].join("::");
      match abs.get(n).and_then(|name| self.doors.get(&m).and_then(|d| d.get(name))) {
        Some(target) => {
          let mut next = target.clone();
          next.extend_from_slice(&abs[n + 1..]);
          abs = next;
        }
        None => return m,
      }
    }
    panic!("pub use doors loop at {}", abs.join("::"));
  }
}

/// `(use statement tree, is pub)` of each `use` in `code`.
fn uses(code: &str) -> Vec<(String, bool)> {
  let b = code.as_bytes();
  let mut out = vec![];
  let mut i = 0;
  while let Some(p) = find(b, b"use ", i) {
    i = p + 4;
    if p > 0 && is_ident(b[p - 1]) {
      continue;
    }
    let end = code[i..].find(';').map_or(code.len(), |e| i + e);
    let before = code[..p].trim_end();
    let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
    out.push((code[i..end].to_string(), public));
    i = end;
  }
  out
}

/// Every `a::b::c` path in `code` (maximal runs of identifiers joined by `::`).
fn paths(code: &str) -> Vec<Vec<String>> {
  let t = tokens(code);
  let mut out = vec![];
  let mut i = 0;
  while i < t.len() {
    if let Tok::Id(s) = &t[i] {
      let mut p = vec![s.clone()];
      let mut j = i + 1;
      while t.get(j) == Some(&Tok::Sep) {
        match t.get(j + 1) {
          Some(Tok::Id(s)) => {
            p.push(s.clone());
            j += 2;
          }
          _ => break,
        }
      }
      // `a::b::{c, d}` is a use group: its paths are read by `uses`
      let group = t.get(j) == Some(&Tok::Sep) && t.get(j + 1) == Some(&Tok::Open);
      if p.len() > 1 && !group {
        out.push(p);
      }
      i = j;
    } else {
      i += 1;
    }
  }
  out
}

/// Edges `from → to` with an example path each.
fn graph(root: &Path) -> (Crate, BTreeMap<(String, String), String>) {
  let mut modules = BTreeMap::new();
  load(root, &mut modules);
  let mut krate = Crate { modules, doors: BTreeMap::new() };
  // `pub use` doors (first, so imports can be followed through them)
  let names: Vec<String> = krate.modules.keys().cloned().collect();
  for _ in 0..3 {
    for m in &names {
      let mut doors = BTreeMap::new();
      for (tree, public) in uses(&krate.modules[m].code) {
        if !public {
          continue;
        }
        let mut expanded = vec![];
        expand(&tokens(&tree), &mut 0, vec![], &mut expanded);
        for (p, bound) in expanded {
          if let (Some(abs), Some(bound)) = (krate.absolute(m, &p, &BTreeMap::new()), bound) {
            doors.insert(bound, abs);
          }
        }
      }
      krate.doors.insert(m.clone(), doors);
    }
  }
  let mut edges = BTreeMap::new();
  for m in &names {
    let code = &krate.modules[m].code;
    // names bound to modules by this file's `use`s
    let mut aliases = BTreeMap::new();
    let mut imported = vec![];
    for (tree, _) in uses(code) {
      let mut expanded = vec![];
      expand(&tokens(&tree), &mut 0, vec![], &mut expanded);
      for (p, bound) in expanded {
        if let Some(abs) = krate.absolute(m, &p, &BTreeMap::new()) {
          if let Some(bound) = bound {
            if krate.modules.contains_key(&abs.join("::")) {
              aliases.insert(bound, abs.clone());
            }
          }
          imported.push((abs, p.join("::")));
        }
      }
    }
    for p in paths(code) {
      if let Some(abs) = krate.absolute(m, &p, &aliases) {
        imported.push((abs, p.join("::")));
      }
    }
    for (abs, shown) in imported {
      let to = krate.resolve(&abs);
      if &to != m {
        edges.entry((m.clone(), to)).or_insert(shown);
      }
    }
  }
  (krate, edges)
}

fn floor(floors: &[(&str, &[&str])], m: &str) -> Option<(usize, usize)> {
  let mut best: Option<(usize, usize)> = None;
  for (f, (_, prefixes)) in floors.iter().enumerate() {
    for p in *prefixes {
      let fits = match p.strip_suffix("::*") {
        Some(parent) => m.starts_with(&format!("{parent}::")),
        None => {
          p.is_empty() && m.is_empty() || !p.is_empty() && (m == *p || m.starts_with(&format!("{p}::")))
        }
      };
      if fits && best.is_none_or(|(_, len)| p.len() >= len) {
        best = Some((f, p.len()));
      }
    }
  }
  best
}

/// Circles: the strongly connected components of more than one module.
fn circles(edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
  let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
  for (a, b) in edges.keys() {
    next.entry(a).or_default().push(b);
    next.entry(b).or_default();
  }
  // Kosaraju: reach-forward ∩ reach-backward, per node
  let reach = |start: &str, fwd: bool| -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![start.to_string()];
    while let Some(n) = todo.pop() {
      for (a, b) in edges.keys() {
        let (from, to) = if fwd { (a, b) } else { (b, a) };
        if *from == n && seen.insert(to.clone()) {
          todo.push(to.clone());
        }
      }
    }
    seen
  };
  let mut done = BTreeSet::new();
  let mut out = vec![];
  for n in next.keys() {
    if done.contains(*n) {
      continue;
    }
    let f = reach(n, true);
    let b = reach(n, false);
    let scc: Vec<String> = f.intersection(&b).cloned().collect();
    if scc.len() > 1 {
      done.extend(scc.iter().cloned());
      out.push(scc);
    }
  }
  out
}

/// The problems of the crate at `root` against `floors`, one line each: a module without a
/// floor, an upward import, a circle.
fn check(root: &Path, floors: &[(&str, &[&str])]) -> Vec<String> {
  let (krate, edges) = graph(root);
  let mut problems = vec![];
  for m in krate.modules.keys() {
    if floor(floors, m).is_none() {
      problems.push(format!("module `{m}` ({}) has no floor", krate.modules[m].file.display()));
    }
  }
  for ((a, b), shown) in &edges {
    if let (Some((fa, _)), Some((fb, _))) = (floor(floors, a), floor(floors, b)) {
      if fb > fa {
        problems
          .push(format!("upward: `{a}` ({}) imports `{b}` ({}) by `{shown}`", floors[fa].0, floors[fb].0));
      }
    }
  }
  let found = circles(&edges);
  for c in &found {
    let inside: Vec<String> = edges
      .iter()
      .filter(|((a, b), _)| c.contains(a) && c.contains(b))
      .map(|((a, b), s)| format!("{a} → {b} ({s})"))
      .collect();
    problems.push(format!("circle of {} modules: {}", c.len(), inside.join("; ")));
  }
  problems
}

fn report(what: &str, problems: &[String]) {
  assert!(problems.is_empty(), "{what}: {} problems\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn the_core_imports_only_its_own_floor_or_lower_and_closes_no_circle() {
  let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
  report("llm-wiki-core", &check(&root, CORE_FLOORS));
}

#[test]
fn the_skin_imports_only_its_own_floor_or_lower_and_closes_no_circle() {
  let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../src");
  report("the addon (src/)", &check(&root, SKIN_FLOORS));
}

#[test]
fn the_reader_sees_imports_through_groups_aliases_doors_and_super() {
  let dir = std::env::temp_dir().join(format!("floors-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&dir);
  std::fs::create_dir_all(dir.join("low")).unwrap();
  let w = |p: &str, s: &str| std::fs::write(dir.join(p), s).unwrap();
  w("lib.rs", "pub mod low;\npub mod high;\n#[cfg(test)]\nmod tests;\n");
  w("low/mod.rs", "pub mod a;\npub mod b;\npub use a::Thing;\n");
  w("low/a.rs", "// use crate::high::X;\nconst S: &str = \"crate::high::Y\";\npub struct Thing;\n");
  w("low/b.rs", "use super::{a::{self as aa}, Thing};\nfn f() { let _ = aa::Thing; }\n");
  w("high.rs", "use crate::low::Thing;\n#[cfg(test)]\nmod t { use crate::low::b; }\n");
  let (_, edges) = graph(&dir);
  let got: BTreeSet<(String, String)> = edges.keys().cloned().collect();
  let want: BTreeSet<(String, String)> = [("high", "low::a"), ("low", "low::a"), ("low::b", "low::a")]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
  assert_eq!(got, want);
  let floors: &[(&str, &[&str])] = &[("low", &["low"]), ("high", &["high", ""])];
  assert!(check(&dir, floors).is_empty());
  w("low/a.rs", "pub struct Thing(crate::high::H);\n");
  w("high.rs", "use crate::low::Thing;\npub struct H;\n");
  let problems = check(&dir, floors);
  assert_eq!(problems.len(), 2, "{problems:?}");
  assert!(problems[0].starts_with("upward: `low::a` (low) imports `high` (high)"), "{problems:?}");
  assert!(problems[1].starts_with("circle of 2 modules"), "{problems:?}");
  let _ = std::fs::remove_dir_all(&dir);
}
