//! Page discovery: a sorted walk of `wiki/` that never leaves the vault. Symlinks are skipped (with
//! a diagnostic when they look like pages or folders), `index.md` / `log.md` are reserved at any
//! depth, ids are NFC and compared case-insensitively, and names that are not UTF-8 are reported
//! instead of being indexed under a mangled id.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use unicode_normalization::UnicodeNormalization;

use super::Diagnostic;

/// A candidate page file (not yet read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageFile {
  /// Folder-qualified page id.
  pub id: String,
  /// Path relative to `wiki/`, `/`-separated, NFC.
  pub rel_path: String,
  /// Absolute path of the file.
  pub abs_path: PathBuf,
  /// Size in bytes at discovery.
  pub size: u64,
  /// Modification time in nanoseconds since the Unix epoch.
  pub mtime_ns: i64,
}

/// Result of a discovery walk.
#[derive(Debug, Default)]
pub struct Discovery {
  /// Pages sorted by id (code point order).
  pub files: Vec<PageFile>,
  /// Scan diagnostics (unreadable directories, id collisions, escapes).
  pub diagnostics: Vec<Diagnostic>,
  /// Where the walk could not look (for another reason than the path being gone): the pages
  /// indexed there are not taken for deleted.
  pub unreadable: Unreadable,
}

/// Folders whose listing and pages whose stat failed with an I/O error other than "not found"
/// (EIO, a network share that dropped, permissions changed for a moment). A reindex keeps the
/// pages indexed there as they are instead of removing them, and looks again on its next scan.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Unreadable {
  /// Folders under `wiki/` (NFC, `/`-separated; "" is `wiki/` itself).
  pub folders: Vec<String>,
  /// Page ids.
  pub pages: Vec<String>,
}

impl Unreadable {
  /// Nothing was unreadable.
  pub fn is_empty(&self) -> bool {
    self.folders.is_empty() && self.pages.is_empty()
  }

  /// Whether the page `id` is in a place the walk could not read.
  pub fn covers(&self, id: &str) -> bool {
    self.pages.iter().any(|p| p == id)
      || self.folders.iter().any(|f| {
        f.is_empty() || (id.len() > f.len() && id.starts_with(f.as_str()) && id.as_bytes()[f.len()] == b'/')
      })
  }
}

/// Why the walk could not read a folder or stat a page.
#[derive(Debug, Default)]
struct WalkError {
  message: String,
  /// The path no longer exists (deleted while walked): not an unreadable place.
  gone: bool,
}

impl From<std::io::Error> for WalkError {
  fn from(e: std::io::Error) -> Self {
    WalkError { gone: e.kind() == std::io::ErrorKind::NotFound, message: e.to_string() }
  }
}

fn is_reserved(name: &str) -> bool {
  name.eq_ignore_ascii_case("index.md") || name.eq_ignore_ascii_case("log.md")
}

fn is_markdown(name: &str) -> bool {
  name.len() > 3 && name.as_bytes()[name.len() - 3..].eq_ignore_ascii_case(b".md")
}

/// NFC form (ASCII is already NFC: no allocation-heavy normalization on the common path).
fn nfc(s: String) -> String {
  if s.is_ascii() {
    s
  } else {
    s.nfc().collect()
  }
}

/// Order of directory entries: by NFC code points (the contract's order); names equal in NFC put
/// the one already in NFC first, so it is the one indexed when two files collide.
fn entry_order(a: &OsStr, b: &OsStr) -> Ordering {
  match (a.to_str(), b.to_str()) {
    (Some(x), Some(y)) if x.is_ascii() && y.is_ascii() => x.cmp(y),
    (Some(x), Some(y)) => {
      let (nx, ny) = (nfc(x.to_string()), nfc(y.to_string()));
      nx.cmp(&ny).then_with(|| (nx != x).cmp(&(ny != y))).then_with(|| x.cmp(y))
    }
    _ => a.cmp(b),
  }
}

/// The file of a page on disk. Manifests record NFC paths (page ids are NFC), but a file's name
/// may be stored in another normalization form (NFD, as macOS writes it) on a filesystem that
/// does not normalize (Linux): such a path is found by comparing the NFC forms of the entries
/// along it. Falls back to the plain join when nothing matches.
pub fn resolve_page_file(wiki_dir: &Path, rel_path: &str) -> PathBuf {
  let direct = wiki_dir.join(rel_path);
  if rel_path.is_ascii() || std::fs::symlink_metadata(&direct).is_ok() {
    return direct;
  }
  let mut path = wiki_dir.to_path_buf();
  for component in rel_path.split('/') {
    let exact = path.join(component);
    if std::fs::symlink_metadata(&exact).is_ok() {
      path = exact;
      continue;
    }
    let found = std::fs::read_dir(&path).ok().and_then(|entries| {
      entries
        .flatten()
        .find(|e| e.file_name().to_str().is_some_and(|n| !n.is_ascii() && nfc(n.to_string()) == component))
    });
    match found {
      Some(e) => path = e.path(),
      None => return direct,
    }
  }
  path
}

fn lowercase(s: &str) -> String {
  if s.is_ascii() {
    s.to_ascii_lowercase()
  } else {
    s.to_lowercase()
  }
}

/// Modification time of file metadata as ns since the epoch (0 when unavailable).
pub fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
  meta
    .modified()
    .ok()
    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
    .map(|d| d.as_nanos().min(i64::MAX as u128) as i64)
    .unwrap_or(0)
}

/// Walk `wiki_dir` (inside `vault_root`) and list page files.
pub fn discover_pages(vault_root: &Path, wiki_dir: &Path) -> Discovery {
  let mut out = Discovery::default();
  if !wiki_dir.exists() {
    return out;
  }
  // The wiki directory itself must physically live inside the vault: a symlinked `wiki/`
  // pointing elsewhere would make us read files outside the vault.
  let (Ok(real_root), Ok(real_wiki)) = (std::fs::canonicalize(vault_root), std::fs::canonicalize(wiki_dir))
  else {
    out.diagnostics.push(Diagnostic::error(
      "frontmatter_parse_error",
      ".",
      "Failed to scan knowledge directory",
    ));
    return out;
  };
  if !real_wiki.starts_with(&real_root)
    || std::fs::symlink_metadata(wiki_dir).map(|m| m.is_symlink()).unwrap_or(true)
  {
    out.diagnostics.push(Diagnostic::error(
      "link_path_escape",
      ".",
      "Knowledge directory resolves outside the vault; nothing was read",
    ));
    return out;
  }
  // A pool of the walk's own, ended with it: rayon's global pool would outlive the call, and its
  // threads, created from whichever thread first used it, would carry that thread's name (a
  // reindex job's), so nothing could tell when a cancelled job's threads are gone.
  let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 4);
  // A plain folder of notes (pages directly in the vault root): dot folders and files
  // (`.obsidian/`, `.trash/`, `.git/`, the engine's `.llm-wiki-retrieval/`) and `node_modules/`
  // are not notes, and `index.md` / `log.md` are ordinary notes.
  let notes = real_wiki == real_root;
  let root = Sub {
    path: wiki_dir.to_path_buf(),
    rel: String::new(),
    utf8: true,
    notes,
    listing: Err(WalkError::default()),
  };
  let tree = match rayon::ThreadPoolBuilder::new()
    .num_threads(threads)
    .thread_name(|i| format!("llm-wiki-walk-{i}"))
    .build()
  {
    Ok(pool) => pool.install(|| Sub { listing: read_listing(&root, true), ..root }),
    // No thread to spare: the same walk on this thread.
    Err(_) => Sub { listing: read_listing(&root, false), ..root },
  };
  let pages = tree.listing.as_ref().map_or(0, |l| l.pages);
  let mut walk = Walk { real_root: &real_root, out: &mut out, claims: Vec::with_capacity(pages) };
  walk.visit(tree);
  let Walk { claims, .. } = walk;
  settle_claims(claims, &mut out);
  out
}

/// One directory's entries that matter to discovery, sorted by [`entry_order`]: what the
/// directory listing and one `statx` per page (relative to the directory's descriptor, so no
/// path is resolved again) tell, read for every subdirectory in parallel, with each page's paths
/// and id built there too. Listing and stat calls are most of a no-op reindex on a large vault;
/// walkdir stats each entry by its full path and re-parses paths in its sort comparator (100k
/// pages: walk medians 515–658 ms with walkdir, 356–445 ms with this; docs/DECISIONS.md "The
/// stat walk").
struct Listing {
  /// Entries that could not be read (the directory's stream failed part-way).
  errors: Vec<String>,
  items: Vec<Item>,
  /// Pages claimed in this directory and below (the walk's claims are allocated once).
  pages: usize,
}

/// A directory met by the walk.
struct Sub {
  path: PathBuf,
  /// Path under `wiki/` (lossy, `/`-separated, "" for `wiki/` itself).
  rel: String,
  /// Whether every component of the path under `wiki/` is UTF-8.
  utf8: bool,
  /// A plain folder of notes ([`crate::vault::PageModel::Note`]): skip dot entries and
  /// `node_modules`, reserve no name.
  notes: bool,
  /// Its listing, or why it could not be read.
  listing: std::result::Result<Listing, WalkError>,
}

/// The path under `wiki/` of the entry `name` of the directory at `dir_rel` ("" for `wiki/`).
fn child_rel(dir_rel: &str, name: &str) -> String {
  if dir_rel.is_empty() {
    name.to_string()
  } else {
    format!("{dir_rel}/{name}")
  }
}

/// An entry of a listing. Names are dropped on the walk's threads once the listing is sorted
/// (freeing 100k of them on the thread that assembles the walk cost it ≈ 10 ms), except where a
/// diagnostic needs one.
enum Item {
  /// A `.md` file that is not reserved, claiming its id.
  Page(Claim),
  /// A `.md` file whose path under `wiki/` is not UTF-8: that path (lossy) for the diagnostic.
  NotUtf8(String),
  /// A subdirectory and its listing.
  Dir(Box<Sub>),
  /// A symbolic link (never followed; maybe reported), by name.
  Symlink(std::ffi::OsString),
}

/// A page file claiming its id (the first in walk order among ids equal case-insensitively gets
/// it): the file as discovered, or why its size and mtime could not be read.
struct Claim {
  file: PageFile,
  stat_error: Option<WalkError>,
  /// Whether the id has no upper-case or non-ASCII letter (it is its own lowercase key); found
  /// on the walk's threads, where the id is still in cache.
  caseless: bool,
  /// Place in walk order (set by the depth-first pass).
  walk_index: usize,
}

/// `parallel`: subdirectories on the current rayon pool's threads (else one after another).
fn read_listing(sub: &Sub, parallel: bool) -> std::result::Result<Listing, WalkError> {
  use rayon::prelude::*;
  #[cfg(test)]
  if let Some(e) = tests::fault(&sub.path) {
    return Err(e.into());
  }
  let entries = std::fs::read_dir(&sub.path)?;
  let mut listing = Listing { errors: Vec::new(), items: Vec::new(), pages: 0 };
  let mut named: Vec<(std::ffi::OsString, Item)> = Vec::new();
  for entry in entries {
    let entry = match entry {
      Ok(e) => e,
      Err(e) => {
        listing.errors.push(e.to_string());
        continue;
      }
    };
    let name = entry.file_name();
    let name_str = name.to_string_lossy();
    let entry_rel = || child_rel(&sub.rel, &name_str);
    let utf8 = sub.utf8 && name.to_str().is_some();
    if sub.notes && (name_str.starts_with('.') || name_str == "node_modules") {
      continue;
    }
    let item = match entry.file_type() {
      Err(e) => {
        listing.errors.push(format!("{}: {e}", name_str));
        continue;
      }
      // `index.md` / `log.md` are reserved at any depth (a folder of that name is walked).
      Ok(ft) if !sub.notes && is_reserved(&name_str) && !ft.is_dir() => continue,
      Ok(ft) if ft.is_symlink() => Item::Symlink(name.clone()),
      Ok(ft) if ft.is_dir() => Item::Dir(Box::new(Sub {
        path: entry.path(),
        rel: entry_rel(),
        utf8,
        notes: sub.notes,
        listing: Err(WalkError::default()),
      })),
      Ok(ft) if ft.is_file() && is_markdown(&name_str) && utf8 => {
        let rel_path = nfc(entry_rel());
        let stat = entry.metadata().map(|m| (m.len(), mtime_ns(&m)));
        #[cfg(test)]
        let stat = tests::fault(&entry.path()).map_or(stat, Err);
        let (size, mtime_ns) = *stat.as_ref().unwrap_or(&(0, 0));
        let file = PageFile {
          id: rel_path[..rel_path.len() - 3].to_string(),
          rel_path,
          abs_path: entry.path(),
          size,
          mtime_ns,
        };
        let caseless = file.id.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase());
        listing.pages += 1;
        Item::Page(Claim { file, stat_error: stat.err().map(WalkError::from), caseless, walk_index: 0 })
      }
      Ok(ft) if ft.is_file() && is_markdown(&name_str) => Item::NotUtf8(entry_rel()),
      Ok(_) => continue,
    };
    named.push((name, item));
  }
  named.sort_by(|a, b| entry_order(&a.0, &b.0));
  listing.items = named.into_iter().map(|(_, item)| item).collect();
  let read_sub = |item: &mut Item| {
    if let Item::Dir(sub) = item {
      sub.listing = read_listing(sub, parallel);
    }
  };
  if parallel {
    listing.items.par_iter_mut().for_each(read_sub);
  } else {
    listing.items.iter_mut().for_each(read_sub);
  }
  listing.pages += listing
    .items
    .iter()
    .map(|item| match item {
      Item::Dir(sub) => sub.listing.as_ref().map_or(0, |l| l.pages),
      _ => 0,
    })
    .sum::<usize>();
  Ok(listing)
}

/// The depth-first pass over the listings in walk order (siblings by [`entry_order`], a
/// directory before its contents): the order decides which of two colliding files is indexed.
struct Walk<'a> {
  real_root: &'a Path,
  out: &'a mut Discovery,
  /// The pages met, in walk order.
  claims: Vec<Claim>,
}

impl Walk<'_> {
  fn visit(&mut self, sub: Sub) {
    let rel = if sub.rel.is_empty() { "." } else { sub.rel.as_str() };
    let scan_error = |out: &mut Discovery, err: &str| {
      out.diagnostics.push(Diagnostic::error(
        "frontmatter_parse_error",
        rel,
        &format!("Failed to scan knowledge directory: {err}"),
      ))
    };
    let listing = match sub.listing {
      Ok(l) => l,
      Err(err) => {
        if !err.gone {
          self.out.unreadable.folders.push(nfc(sub.rel.clone()));
        }
        return scan_error(self.out, &err.message);
      }
    };
    for err in &listing.errors {
      scan_error(self.out, err);
    }
    if !listing.errors.is_empty() {
      // Which entries were lost is unknown: nothing indexed in this folder is taken for deleted.
      self.out.unreadable.folders.push(nfc(sub.rel.clone()));
    }
    for item in listing.items {
      match item {
        Item::Dir(sub) => self.visit(*sub),
        Item::Page(mut claim) => {
          claim.walk_index = self.claims.len();
          self.claims.push(claim)
        }
        Item::NotUtf8(lossy_rel) => self.out.diagnostics.push(Diagnostic::error(
          "page_name_invalid_utf8",
          &lossy_rel,
          "Page path is not valid UTF-8; it cannot have a page id and is not indexed (rename the file)",
        )),
        Item::Symlink(name) => {
          let lossy = name.to_string_lossy();
          let markdown = is_markdown(&lossy);
          let diagnostic = symlink_diagnostic(
            self.real_root,
            &sub.path.join(&name),
            &nfc(child_rel(&sub.rel, &lossy)),
            markdown,
          );
          self.out.diagnostics.extend(diagnostic);
        }
      }
    }
  }
}

/// Settles the walk's claims into the pages found, sorted by id, and the diagnostics of the
/// files that lost their id to an earlier one (ids are compared case-insensitively) or could not
/// be stat'ed, in walk order after the walk's own. When no id has an upper-case or non-ASCII
/// letter (the usual vault), equal keys are equal ids: a stable sort by id puts each id's files
/// together in walk order, and the sort is needed anyway — no map of lowercased ids, which cost
/// a 100k-page walk as much on one thread as its listing and stat calls on two.
fn settle_claims(mut claims: Vec<Claim>, out: &mut Discovery) {
  let collision = |existing: &str, rel_path: &str| {
    let why =
      if existing == rel_path { " (the same name in another Unicode normalization form)" } else { "" };
    Diagnostic::error(
      "concept_identity_collision",
      rel_path,
      &format!("Identity collision between {existing} and {rel_path}{why}"),
    )
  };
  let caseless = claims.iter().all(|c| c.caseless);
  // For each claim, the rel path of the file that holds its id when that is another one.
  let lost: Vec<Option<String>> = if caseless {
    // Sorted once, by id: a stable sort keeps equal ids in walk order (the group's first holds
    // the id), and the pages come out in the order discovery returns them.
    claims.sort_by(|a, b| a.file.id.cmp(&b.file.id));
    let mut lost = vec![None; claims.len()];
    let mut holder = 0;
    for i in 1..claims.len() {
      if claims[i].file.id == claims[holder].file.id {
        lost[i] = Some(claims[holder].file.rel_path.clone());
      } else {
        holder = i;
      }
    }
    lost
  } else {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let holders: Vec<usize> =
      claims.iter().enumerate().map(|(i, c)| *seen.entry(lowercase(&c.file.id)).or_insert(i)).collect();
    holders.iter().enumerate().map(|(i, &h)| (h != i).then(|| claims[h].file.rel_path.clone())).collect()
  };
  // Diagnostics by walk index: reported in walk order whichever order the claims are in.
  let mut diagnostics: Vec<(usize, Diagnostic)> = Vec::new();
  out.files.reserve(claims.len());
  for (claim, lost) in claims.into_iter().zip(lost) {
    let at = claim.walk_index;
    match (lost, claim.stat_error) {
      (Some(winner), _) => diagnostics.push((at, collision(&winner, &claim.file.rel_path))),
      // Deleted between the listing and its stat: not a page any more.
      (None, Some(err)) if err.gone => {}
      (None, Some(err)) => {
        out.unreadable.pages.push(claim.file.id.clone());
        diagnostics.push((
          at,
          Diagnostic::warning(
            "page_unreadable",
            &claim.file.rel_path,
            &format!(
              "Failed to inspect knowledge path: {}; an indexed page keeps its last indexed content and is read again on the next scan",
              err.message
            ),
          ),
        ))
      }
      (None, None) => out.files.push(claim.file),
    }
  }
  diagnostics.sort_by_key(|(at, _)| *at);
  out.diagnostics.extend(diagnostics.into_iter().map(|(_, d)| d));
  if !caseless {
    out.files.sort_by(|a, b| a.id.cmp(&b.id));
  }
}

/// The diagnostic of a symlink met by the walk (symlinks are never followed). Links that could
/// be pages (a `.md` name) or folders are reported so a missing page is explained: a target
/// outside the vault is `link_path_escape`, anything else (inside the vault, dangling, a loop)
/// `page_symlink_skipped`. Links to other files are not pages and pass silently.
fn symlink_diagnostic(
  real_root: &Path,
  link: &Path,
  rel_path: &str,
  markdown_name: bool,
) -> Option<Diagnostic> {
  let (code, message) = match std::fs::canonicalize(link) {
    Ok(target) => {
      if !markdown_name && !target.is_dir() {
        return None;
      }
      if target.starts_with(real_root) {
        (
          "page_symlink_skipped",
          "Symlink not followed: pages must be regular files inside the knowledge directory".to_string(),
        )
      } else {
        ("link_path_escape", "Symlink points outside the vault; it was not followed".to_string())
      }
    }
    Err(e) if markdown_name || e.raw_os_error() == Some(libc_eloop()) => {
      ("page_symlink_skipped", format!("Symlink not followed (its target cannot be resolved: {e})"))
    }
    Err(_) => return None,
  };
  Some(Diagnostic::warning(code, rel_path, &message))
}

/// ELOOP ("too many levels of symbolic links"); 40 on Linux, 62 on macOS and the BSDs.
fn libc_eloop() -> i32 {
  #[cfg(unix)]
  {
    libc::ELOOP
  }
  #[cfg(not(unix))]
  {
    -1
  }
}

#[cfg(test)]
pub(crate) mod tests {
  use super::*;

  /// Paths (folders: their listing; page files: their stat) whose next walk fails once with the
  /// given error kind (test builds only; process-wide, keyed by paths unique to each test).
  static FAULTS: std::sync::Mutex<Vec<(PathBuf, std::io::ErrorKind)>> = std::sync::Mutex::new(Vec::new());

  pub(crate) fn fail_next_walk(path: &Path, kind: std::io::ErrorKind) {
    FAULTS.lock().unwrap().push((path.to_path_buf(), kind));
  }

  pub(super) fn fault(path: &Path) -> Option<std::io::Error> {
    let mut faults = FAULTS.lock().unwrap_or_else(|p| p.into_inner());
    let at = faults.iter().position(|(p, _)| p == path)?;
    let (_, kind) = faults.remove(at);
    Some(std::io::Error::new(kind, "test hook: injected walk failure"))
  }
  use std::fs;

  fn write(p: &Path, s: &str) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, s).unwrap();
  }

  #[test]
  fn walks_sorted_skipping_reserved_symlinks_and_collisions() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let wiki = root.join(".llm-wiki/wiki");
    write(&wiki.join("b.md"), "x");
    write(&wiki.join("A/c.MD"), "x");
    write(&wiki.join("a/Index.md"), "x");
    write(&wiki.join("log.md"), "x");
    write(&wiki.join(".hidden/h.md"), "x");
    write(&wiki.join("notes.txt"), "x");
    write(&wiki.join("B.md"), "x"); // collides with b.md case-insensitively
    let outside = root.join("outside.md");
    write(&outside, "secret");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, wiki.join("link.md")).unwrap();
    let d = discover_pages(root, &wiki);
    let ids: Vec<_> = d.files.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, vec![".hidden/h", "A/c", "B"]);
    let codes: Vec<_> = d.diagnostics.iter().map(|x| (x.code.as_str(), x.path.as_str())).collect();
    #[cfg(unix)]
    // outside.md is outside wiki/ but inside the vault root: skipped, not an escape.
    // The walk's own findings first, then the pages' in walk order.
    assert_eq!(codes, vec![("page_symlink_skipped", "link.md"), ("concept_identity_collision", "b.md")]);
    #[cfg(not(unix))]
    assert_eq!(codes, vec![("concept_identity_collision", "b.md")]);
  }

  /// Ids without upper-case or non-ASCII letters are settled by sorting, others by a map of
  /// lowercased ids: both give the first file in walk order the id and report the others, in
  /// walk order, against it.
  #[test]
  fn sorted_and_mapped_collision_checks_agree() {
    let t = tempfile::tempdir().unwrap();
    let wiki = t.path().join("wiki");
    for name in ["n/x.md", "n/x.MD", "n/x.Md", "n-y.md", "n/z.md", "n/z/w.md"] {
      write(&wiki.join(name), name);
    }
    let settle = || {
      let d = discover_pages(t.path(), &wiki);
      let ids: Vec<String> = d.files.iter().map(|f| f.rel_path.clone()).collect();
      let diags: Vec<String> =
        d.diagnostics.iter().map(|x| format!("{} {} {}", x.code, x.path, x.message)).collect();
      (ids, diags)
    };
    let (sorted_ids, sorted_diags) = settle();
    assert_eq!(sorted_ids, vec!["n-y.md", "n/x.MD", "n/z.md", "n/z/w.md"]);
    assert_eq!(
      sorted_diags,
      vec![
        "concept_identity_collision n/x.Md Identity collision between n/x.MD and n/x.Md",
        "concept_identity_collision n/x.md Identity collision between n/x.MD and n/x.md",
      ]
    );
    // An upper-case id anywhere in the vault sends every id through the map.
    write(&wiki.join("Upper.md"), "u");
    let (mapped_ids, mapped_diags) = settle();
    assert_eq!(mapped_ids, vec!["Upper.md", "n-y.md", "n/x.MD", "n/z.md", "n/z/w.md"]);
    assert_eq!(mapped_diags, sorted_diags);
  }

  /// The parallel listing assembled in walk order gives what a plain sorted walk with one full-path
  /// stat per file gives, on a tree several levels deep with files beside folders.
  #[test]
  fn parallel_walk_matches_a_plain_sorted_walk() {
    let t = tempfile::tempdir().unwrap();
    let wiki = t.path().join("wiki");
    for d in 0..6 {
      for s in 0..4 {
        for f in 0..15 {
          write(&wiki.join(format!("d{d}/s{s}/p{f}.md")), &"x".repeat(d * 100 + s * 10 + f));
        }
        write(&wiki.join(format!("d{d}/s{s}/notes.txt")), "not a page");
      }
      write(&wiki.join(format!("d{d}/top-{d}.md")), "top");
      write(&wiki.join(format!("d{d}/S0/P0.md")), "collides with s0/p0 case-insensitively");
    }
    write(&wiki.join("root.md"), "root");
    let d = discover_pages(t.path(), &wiki);
    let expected: Vec<(String, u64, i64)> = walkdir::WalkDir::new(&wiki)
      .sort_by(|a, b| a.file_name().cmp(b.file_name()))
      .into_iter()
      .flatten()
      .filter(|e| e.file_type().is_file() && is_markdown(&e.file_name().to_string_lossy()))
      .map(|e| {
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        let rel = e.path().strip_prefix(&wiki).unwrap().to_str().unwrap().replace('\\', "/");
        (rel, m.len(), mtime_ns(&m))
      })
      .filter(|(rel, _, _)| !rel.ends_with("/s0/p0.md"))
      .collect();
    let mut expected = expected;
    expected.sort();
    let got: Vec<(String, u64, i64)> =
      d.files.iter().map(|f| (f.rel_path.clone(), f.size, f.mtime_ns)).collect();
    assert_eq!(got.len(), 6 * 4 * 15 + 6 + 1);
    assert_eq!(got, expected);
    // Walk order is by code point and "S" (0x53) < "s" (0x73): each d*/S0/P0.md is walked first
    // and kept, its lower-case twin reported.
    let lost: Vec<_> = d.diagnostics.iter().map(|x| (x.code.as_str(), x.path.as_str())).collect();
    let expected_lost: Vec<_> = (0..6).map(|d| format!("d{d}/s0/p0.md")).collect();
    assert_eq!(
      lost,
      expected_lost.iter().map(|p| ("concept_identity_collision", p.as_str())).collect::<Vec<_>>()
    );
  }

  /// Needs a filesystem that keeps NFC and NFD names apart (Linux; macOS normalizes).
  #[cfg(target_os = "linux")]
  #[test]
  fn unicode_twins_keep_the_nfc_name_and_nfd_files_resolve() {
    let t = tempfile::tempdir().unwrap();
    let wiki = t.path().join("wiki");
    write(&wiki.join("cafe\u{301}.md"), "nfd");
    write(&wiki.join("caf\u{e9}.md"), "nfc");
    write(&wiki.join("nai\u{308}ve/p.md"), "nfd dir");
    // NFC code-point order, not byte order: "é" (U+E9) sorts after "f".
    write(&wiki.join("f.md"), "f");
    let d = discover_pages(t.path(), &wiki);
    let files: Vec<_> =
      d.files.iter().map(|f| (f.id.as_str(), std::fs::read_to_string(&f.abs_path).unwrap())).collect();
    assert_eq!(
      files,
      vec![("café", "nfc".to_string()), ("f", "f".to_string()), ("naïve/p", "nfd dir".to_string())]
    );
    assert_eq!(d.diagnostics.len(), 1);
    assert!(d.diagnostics[0].message.contains("Unicode normalization"), "{}", d.diagnostics[0].message);
    assert_eq!(entry_order(OsStr::new("f"), OsStr::new("\u{e9}")), Ordering::Less);
    // The manifest's NFC path finds the NFD file on a filesystem that keeps names as written.
    let resolved = resolve_page_file(&wiki, "naïve/p.md");
    assert_eq!(std::fs::read_to_string(resolved).unwrap(), "nfd dir");
    assert_eq!(resolve_page_file(&wiki, "missing/é.md"), wiki.join("missing/é.md"));
  }

  /// Needs a filesystem that accepts names that are not UTF-8 (Linux; macOS refuses them).
  #[cfg(target_os = "linux")]
  #[test]
  fn names_that_are_not_utf8_are_reported() {
    use std::os::unix::ffi::OsStrExt;
    let t = tempfile::tempdir().unwrap();
    let wiki = t.path().join("wiki");
    write(&wiki.join(OsStr::from_bytes(b"bad-\xff.md")), "x");
    write(&wiki.join(OsStr::from_bytes(b"dir-\xfe/ok.md")), "x");
    write(&wiki.join("good.md"), "x");
    let d = discover_pages(t.path(), &wiki);
    assert_eq!(d.files.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(), vec!["good"]);
    let codes: Vec<_> = d.diagnostics.iter().map(|x| (x.code.as_str(), x.path.as_str())).collect();
    assert_eq!(
      codes,
      vec![("page_name_invalid_utf8", "bad-\u{fffd}.md"), ("page_name_invalid_utf8", "dir-\u{fffd}/ok.md")]
    );
  }

  #[cfg(unix)]
  #[test]
  fn symlinked_wiki_dir_outside_vault_is_not_read() {
    let t = tempfile::tempdir().unwrap();
    let elsewhere = t.path().join("elsewhere");
    write(&elsewhere.join("p.md"), "---\ntype: a\n---\n");
    let root = t.path().join("vault");
    fs::create_dir_all(root.join(".llm-wiki")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join(".llm-wiki/wiki")).unwrap();
    let d = discover_pages(&root, &root.join(".llm-wiki/wiki"));
    assert!(d.files.is_empty());
    assert_eq!(d.diagnostics[0].code, "link_path_escape");
  }
}
