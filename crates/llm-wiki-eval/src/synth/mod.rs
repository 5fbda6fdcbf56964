//! Deterministic synthetic vaults for scale and latency runs.
//!
//! A seed fully determines the output (byte for byte, on every platform: only integer
//! arithmetic drives the choices). Pages are realistic Markdown about one of 50 topics:
//! frontmatter of every page type, headings, bullet/numbered/task lists, code fences, tables,
//! block quotes, wiki-links (`[[id]]`, `[[id|Title]]`), relative Markdown links and, on a
//! fraction of pages, Chinese/Japanese text. File sizes are roughly log-uniform between ~200
//! bytes and `max_bytes`. [`synth_queries`] derives queries from the same plan, so they target
//! pages that exist in the generated vault.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use llm_wiki_core::error::{Error, Result};

mod page;
mod vocab;

use self::page::*;
pub use self::vocab::*;

/// Generator settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthOptions {
  /// Number of pages.
  pub pages: usize,
  pub seed: u64,
  /// Fraction of pages that contain CJK text (0..=1).
  pub cjk_fraction: f64,
  /// Upper bound on a page file's size in bytes (at least [`MIN_MAX_BYTES`]).
  pub max_bytes: usize,
}

impl Default for SynthOptions {
  fn default() -> Self {
    SynthOptions { pages: 1000, seed: 1, cjk_fraction: 0.05, max_bytes: 50_000 }
  }
}

impl SynthOptions {
  /// `pages` pages from `seed`, other settings at their defaults.
  pub fn new(pages: usize, seed: u64) -> Self {
    SynthOptions { pages, seed, ..Default::default() }
  }
}

/// Smallest accepted `max_bytes` (room for the largest frontmatter plus a paragraph).
pub const MIN_MAX_BYTES: usize = 2_000;

/// Smallest target page size.
const MIN_TARGET: usize = 200;

/// Pages per directory before the generator nests into numbered subdirectories.
pub const PAGES_PER_DIR: usize = 500;

/// What [`generate_vault`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SynthReport {
  pub pages: usize,
  /// Total bytes of the page files.
  pub bytes: u64,
  /// Pages per frontmatter `type`.
  pub by_type: BTreeMap<String, usize>,
}

// ---------------------------------------------------------------------------------------------
// Plan: ids, titles and sizes of every page, decided before any body is written.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Plan {
  ty: usize,
  topic: usize,
  topic2: usize,
  /// Title as written to the frontmatter.
  title: String,
  /// English title (the slug and queries use it; equals `title` unless the title is CJK).
  english_title: String,
  id: String,
  /// Number of folder components of the id (for relative links).
  depth: usize,
  target: usize,
  cjk: bool,
  seed: u64,
}

fn capitalize(w: &str) -> String {
  let mut c = w.chars();
  match c.next() {
    Some(f) => f.to_uppercase().chain(c).collect(),
    None => String::new(),
  }
}

fn slugify(s: &str) -> String {
  let mut out = String::new();
  for ch in s.chars() {
    if ch.is_ascii_alphanumeric() {
      out.push(ch.to_ascii_lowercase());
    } else if !out.is_empty() && !out.ends_with('-') {
      out.push('-');
    }
  }
  while out.ends_with('-') {
    out.pop();
  }
  out.truncate(60);
  while out.ends_with('-') {
    out.pop();
  }
  out
}

fn topic_word(rng: &mut Rng, topic: usize) -> &'static str {
  topics()[topic].words[rng.below(8)]
}

/// Two different words of a topic.
fn two_words(rng: &mut Rng, topic: usize) -> (&'static str, &'static str) {
  let a = rng.below(8);
  let b = (a + 1 + rng.below(7)) % 8;
  (topics()[topic].words[a], topics()[topic].words[b])
}

fn english_title(rng: &mut Rng, ty: usize, topic: usize, topic2: usize) -> String {
  let (a, b) = two_words(rng, topic);
  let c = topic_word(rng, topic2);
  let (ca, cb, cc) = (capitalize(a), capitalize(b), capitalize(c));
  let n = rng.range(1, 999);
  match ty {
    T_CONCEPT => match rng.below(3) {
      0 => format!("{ca} {cb}"),
      1 => format!("{ca}-Aware {cb}"),
      _ => format!("{ca} {cb} and {cc}"),
    },
    T_ENTITY => match rng.below(4) {
      0 => format!("{ca}DB"),
      1 => format!("{ca} {cb} Toolkit"),
      2 => format!("Project {ca}"),
      _ => format!("{ca}{b} Labs"),
    },
    T_ANALYSIS => match rng.below(2) {
      0 => format!("Analysis of {a} versus {b}"),
      _ => format!("Why {a} {} {c}", rng.pick(&VERBS)),
    },
    T_SYNTHESIS => match rng.below(2) {
      0 => format!("{ca} and {cc}: A Synthesis"),
      _ => format!("What We Know About {ca} {cb}"),
    },
    T_REQUIREMENT => format!("Requirement: {ca} {cb} Must Be {}", capitalize(rng.pick(&ADJECTIVES))),
    T_SKILL => format!("How to {} {ca} {cb}", rng.pick(&IMPERATIVES)),
    T_CASE => format!("Case: {ca} {cb} Incident {n}"),
    T_SOURCE => match rng.below(3) {
      0 => format!("{ca} {cb} Notes ({})", 1990 + rng.below(36)),
      1 => format!("Paper: {ca} for {cc}"),
      _ => format!("Meeting Notes on {ca} {cb}"),
    },
    _ => format!("Session {n}: {} {a} {b}", rng.pick(&IMPERATIVES)),
  }
}

/// Target file size: pick an octave of [MIN_TARGET, max] uniformly, then a size within it.
fn target_size(rng: &mut Rng, max_bytes: usize) -> usize {
  let mut octaves = Vec::new();
  let mut lo = MIN_TARGET;
  while lo < max_bytes {
    octaves.push((lo, (lo * 2).min(max_bytes)));
    lo *= 2;
  }
  let (lo, hi) = rng.pick(&octaves);
  rng.range(lo, hi)
}

fn choose_type(rng: &mut Rng) -> usize {
  let total: u64 = PAGE_TYPES.iter().map(|t| t.2).sum();
  let mut x = rng.below(total as usize) as u64;
  for (i, t) in PAGE_TYPES.iter().enumerate() {
    if x < t.2 {
      return i;
    }
    x -= t.2;
  }
  PAGE_TYPES.len() - 1
}

/// Folder of the `k`-th page (0-based) of a type: the first [`PAGES_PER_DIR`] pages directly in
/// the type folder, then buckets `0001/`, `0002/`, ... (base-1000 components past bucket 999).
fn folder_for(base: &str, k: usize) -> (String, usize) {
  let bucket = k / PAGES_PER_DIR;
  if bucket == 0 {
    return (base.to_string(), 1);
  }
  let mut parts = Vec::new();
  let mut b = bucket;
  while b > 0 {
    parts.push(format!("{:04}", b % 1000));
    b /= 1000;
  }
  parts.reverse();
  (format!("{base}/{}", parts.join("/")), 1 + parts.len())
}

fn plan_pages(opts: &SynthOptions) -> Vec<Plan> {
  let mut rng = Rng::new(derive_seed(opts.seed, 1, 0));
  let mut per_type = [0usize; PAGE_TYPES.len()];
  let mut plans = Vec::with_capacity(opts.pages);
  for i in 0..opts.pages {
    let ty = choose_type(&mut rng);
    let topic = rng.below(N_TOPICS);
    let topic2 = (topic + 1 + rng.below(N_TOPICS - 1)) % N_TOPICS;
    let english = english_title(&mut rng, ty, topic, topic2);
    let cjk = rng.chance(opts.cjk_fraction);
    let title = if cjk && rng.percent(50) {
      format!("{}与{}：{}", topics()[topic].cjk, topics()[topic2].cjk, rng.pick(&CJK_EXTRA))
    } else {
      english.clone()
    };
    let (folder, depth) = folder_for(PAGE_TYPES[ty].1, per_type[ty]);
    per_type[ty] += 1;
    let id = format!("{folder}/{}-{i}", slugify(&english));
    let target = target_size(&mut rng, opts.max_bytes);
    plans.push(Plan {
      ty,
      topic,
      topic2,
      title,
      english_title: english,
      id,
      depth,
      target,
      cjk,
      seed: derive_seed(opts.seed, 2, i as u64),
    });
  }
  plans
}

fn validate(opts: &SynthOptions) -> Result<()> {
  if opts.max_bytes < MIN_MAX_BYTES {
    return Err(Error::invalid(format!(
      "synthetic max_bytes must be >= {MIN_MAX_BYTES}, got {}",
      opts.max_bytes
    )));
  }
  if !(0.0..=1.0).contains(&opts.cjk_fraction) {
    return Err(Error::invalid(format!(
      "synthetic cjk_fraction must be within 0..=1, got {}",
      opts.cjk_fraction
    )));
  }
  Ok(())
}

fn topic_index(plans: &[Plan]) -> Vec<Vec<usize>> {
  let mut by_topic = vec![Vec::new(); N_TOPICS];
  for (i, p) in plans.iter().enumerate() {
    by_topic[p.topic].push(i);
  }
  by_topic
}

/// Render every page in memory: `(page id, file content)`, in generation order.
pub fn render_pages(opts: &SynthOptions) -> Result<Vec<(String, String)>> {
  validate(opts)?;
  let plans = plan_pages(opts);
  let by_topic = topic_index(&plans);
  let ctx = Ctx { plans: &plans, by_topic: &by_topic };
  Ok(
    plans
      .iter()
      .enumerate()
      .map(|(i, plan)| {
        let w = PageWriter { rng: Rng::new(plan.seed), plan, index: i, ctx: &ctx };
        (plan.id.clone(), w.render(opts.max_bytes))
      })
      .collect(),
  )
}

/// Write a synthetic vault under `root`: `<root>/.llm-wiki/config.json`
/// (`{"name":"synthetic","knowledge_format":"legacy"}`) and `<root>/.llm-wiki/wiki/<id>.md` for
/// every page. Refuses a `root` whose `.llm-wiki` already has content, so stale pages never mix
/// with a new run.
pub fn generate_vault(root: &Path, opts: &SynthOptions) -> Result<SynthReport> {
  validate(opts)?;
  let dot = root.join(".llm-wiki");
  if dot.is_dir() {
    let mut entries = std::fs::read_dir(&dot).map_err(|e| Error::io("read directory", &dot, e))?;
    if entries.next().is_some() {
      return Err(Error::invalid(format!("{} is not empty; generate into a fresh directory", dot.display())));
    }
  }
  let wiki = dot.join("wiki");
  std::fs::create_dir_all(&wiki).map_err(|e| Error::io("create directory", &wiki, e))?;
  let config = dot.join("config.json");
  std::fs::write(&config, br#"{"name":"synthetic","knowledge_format":"legacy"}"#)
    .map_err(|e| Error::io("write", &config, e))?;

  let plans = plan_pages(opts);
  let by_topic = topic_index(&plans);
  let ctx = Ctx { plans: &plans, by_topic: &by_topic };
  let mut report = SynthReport::default();
  let mut made: HashSet<PathBuf> = HashSet::new();
  for (i, plan) in plans.iter().enumerate() {
    let text = PageWriter { rng: Rng::new(plan.seed), plan, index: i, ctx: &ctx }.render(opts.max_bytes);
    let path = wiki.join(format!("{}.md", plan.id));
    if let Some(dir) = path.parent() {
      if !made.contains(dir) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        made.insert(dir.to_path_buf());
      }
    }
    std::fs::write(&path, text.as_bytes()).map_err(|e| Error::io("write", &path, e))?;
    report.pages += 1;
    report.bytes += text.len() as u64;
    *report.by_type.entry(PAGE_TYPES[plan.ty].0.to_string()).or_default() += 1;
  }
  Ok(report)
}

/// `n` queries `(query id, text, target page id)` for the vault `opts` generates, derived from
/// page titles and topics (exact titles, lowercased titles, "what is" questions, keyword mixes).
/// Deterministic in `opts` and `n`; empty when the vault has no pages.
pub fn synth_queries(opts: &SynthOptions, n: usize) -> Vec<(String, String, String)> {
  let plans = plan_pages(opts);
  if plans.is_empty() {
    return Vec::new();
  }
  let mut rng = Rng::new(derive_seed(opts.seed, 3, n as u64));
  (0..n)
    .map(|i| {
      let p = &plans[rng.below(plans.len())];
      let words = topics()[p.topic].words;
      let title_lower = p.english_title.to_lowercase();
      let text = match rng.below(6) {
        0 => p.title.clone(),
        1 => title_lower,
        2 => format!("what is {title_lower}"),
        3 => format!(
          "{} {} {}",
          words[rng.below(8)],
          words[rng.below(8)],
          topics()[p.topic2].words[rng.below(8)]
        ),
        4 => format!(
          "how does the {} affect the {}",
          words[rng.below(8)],
          topics()[p.topic2].words[rng.below(8)]
        ),
        _ => {
          let kept: Vec<&str> = title_lower.split_whitespace().filter(|w| w.len() > 3).collect();
          if kept.is_empty() {
            title_lower.clone()
          } else {
            kept.join(" ")
          }
        }
      };
      (format!("synth-{i:05}"), text, p.id.clone())
    })
    .collect()
}

#[cfg(test)]
mod tests {
  use super::*;
  use llm_wiki_core::vault::page::{Page, Role};
  use sha2::{Digest, Sha256};

  fn hash_tree(root: &Path) -> (String, usize) {
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(root)
      .sort_by_file_name()
      .into_iter()
      .map(|e| e.unwrap())
      .filter(|e| e.file_type().is_file())
      .map(|e| e.path().to_path_buf())
      .collect();
    files.sort();
    let mut h = Sha256::new();
    for f in &files {
      h.update(f.strip_prefix(root).unwrap().to_string_lossy().as_bytes());
      h.update([0]);
      h.update(std::fs::read(f).unwrap());
      h.update([0]);
    }
    (h.finalize().iter().map(|b| format!("{b:02x}")).collect(), files.len())
  }

  #[test]
  fn vocabulary_is_distinct() {
    let mut seen = HashSet::new();
    let mut names = HashSet::new();
    for Topic { name, cjk, words } in topics() {
      assert!(names.insert(name.to_string()), "{name}");
      assert!(seen.insert(cjk.to_string()), "{cjk}");
      for w in words {
        assert!(seen.insert(w.to_string()), "duplicate word {w}");
      }
    }
    assert_eq!(seen.len(), 50 * 9);
    assert_eq!(names.len(), 50);
  }

  #[test]
  fn same_seed_same_bytes() {
    let opts = SynthOptions { pages: 120, seed: 7, cjk_fraction: 0.2, max_bytes: 20_000 };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ra = generate_vault(a.path(), &opts).unwrap();
    let rb = generate_vault(b.path(), &opts).unwrap();
    assert_eq!(ra, rb);
    let (ha, na) = hash_tree(a.path());
    let (hb, nb) = hash_tree(b.path());
    assert_eq!(na, nb);
    assert_eq!(ha, hb);
    assert_eq!(na, 121); // pages + config.json
    let c = tempfile::tempdir().unwrap();
    generate_vault(c.path(), &SynthOptions { seed: 8, ..opts.clone() }).unwrap();
    assert_ne!(hash_tree(c.path()).0, ha);
    // In-memory rendering matches the files.
    let pages = render_pages(&opts).unwrap();
    let total: u64 = pages.iter().map(|(_, t)| t.len() as u64).sum();
    assert_eq!(total, ra.bytes);
    let (id, text) = &pages[3];
    assert_eq!(&std::fs::read_to_string(a.path().join(format!(".llm-wiki/wiki/{id}.md"))).unwrap(), text);
    // Refuses to write over an existing vault.
    assert!(generate_vault(a.path(), &opts).is_err());
  }

  #[test]
  fn pages_are_valid_and_varied() {
    let opts = SynthOptions { pages: 600, seed: 42, cjk_fraction: 0.1, max_bytes: 50_000 };
    let pages = render_pages(&opts).unwrap();
    assert_eq!(pages.len(), 600);
    let mut types = HashSet::new();
    let mut ids = HashSet::new();
    let (mut min, mut max) = (usize::MAX, 0);
    let (mut cjk, mut fences, mut tables, mut wiki_links, mut md_links, mut relations) = (0, 0, 0, 0, 0, 0);
    for (id, text) in &pages {
      assert!(ids.insert(id.to_lowercase()), "duplicate id {id}");
      let page = Page::parse(id, PathBuf::from(format!("/v/{id}.md")), text)
        .unwrap_or_else(|e| panic!("{id} does not parse: {e:?}\n{text}"));
      assert!(!page.meta.title.is_empty());
      assert_eq!(page.role, Role::for_type(&page.meta.page_type));
      assert!(["stable", "draft", "deprecated"].contains(&page.meta.status.as_deref().unwrap()));
      assert!(!page.meta.tags.is_empty());
      types.insert(page.meta.page_type.clone());
      relations += usize::from(!page.meta.relations.is_empty());
      assert!(text.len() <= opts.max_bytes, "{id} has {} bytes", text.len());
      assert!(text.ends_with('\n') && !text.ends_with("\n\n"));
      min = min.min(text.len());
      max = max.max(text.len());
      cjk += usize::from(text.contains('。') || page.meta.title.contains('与'));
      fences += usize::from(text.contains("```"));
      tables += usize::from(text.contains("| --- |"));
      wiki_links += usize::from(text.contains("[["));
      md_links += usize::from(text.contains(".md)"));
      let folder = id.split('/').next().unwrap();
      assert_eq!(PAGE_TYPES.iter().find(|t| t.0 == page.meta.page_type).unwrap().1, folder);
    }
    assert_eq!(types.len(), 9, "{types:?}");
    assert!(min < 700, "smallest page {min}");
    assert!(max > 30_000, "largest page {max}");
    assert!((20..=120).contains(&cjk), "{cjk} CJK pages");
    assert!(fences > 100 && tables > 100 && wiki_links > 200 && md_links > 100 && relations > 50);
  }

  #[test]
  fn links_resolve_and_dirs_nest() {
    let opts = SynthOptions { pages: 2_300, seed: 3, cjk_fraction: 0.05, max_bytes: 2_000 };
    let dir = tempfile::tempdir().unwrap();
    let report = generate_vault(dir.path(), &opts).unwrap();
    assert_eq!(report.pages, 2_300);
    assert_eq!(report.by_type.values().sum::<usize>(), 2_300);
    let wiki = dir.path().join(".llm-wiki/wiki");
    assert_eq!(
      std::fs::read_to_string(dir.path().join(".llm-wiki/config.json")).unwrap(),
      r#"{"name":"synthetic","knowledge_format":"legacy"}"#
    );
    // ~575 sources: the first 500 directly in sources/, the rest in sources/0001/.
    let count =
      |p: &Path| std::fs::read_dir(p).unwrap().filter(|e| e.as_ref().unwrap().path().is_file()).count();
    assert_eq!(count(&wiki.join("sources")), 500);
    assert_eq!(count(&wiki.join("sources/0001")), report.by_type["source"] - 500);
    for entry in
      walkdir::WalkDir::new(&wiki).into_iter().map(|e| e.unwrap()).filter(|e| e.file_type().is_dir())
    {
      assert!(count(entry.path()) <= PAGES_PER_DIR);
    }
    // Every Markdown link resolves relative to its page; every wiki-link names a page.
    let mut checked = 0;
    for entry in
      walkdir::WalkDir::new(&wiki).into_iter().map(|e| e.unwrap()).filter(|e| e.file_type().is_file())
    {
      let text = std::fs::read_to_string(entry.path()).unwrap();
      for part in text.split("](").skip(1) {
        let target = &part[..part.find(')').unwrap()];
        assert!(entry.path().parent().unwrap().join(target).is_file(), "{target} from {:?}", entry.path());
        checked += 1;
      }
      for part in text.split("[[").skip(1) {
        let inner = &part[..part.find("]]").unwrap()];
        let id = inner.split('|').next().unwrap();
        assert!(wiki.join(format!("{id}.md")).is_file(), "{id}");
        checked += 1;
      }
    }
    assert!(checked > 1000);
  }

  #[test]
  fn folder_nesting() {
    assert_eq!(folder_for("sources", 0), ("sources".to_string(), 1));
    assert_eq!(folder_for("sources", 499), ("sources".to_string(), 1));
    assert_eq!(folder_for("sources", 500), ("sources/0001".to_string(), 2));
    assert_eq!(folder_for("sources", 500 * 1234), ("sources/0001/0234".to_string(), 3));
  }

  #[test]
  fn queries_target_existing_pages() {
    let opts = SynthOptions::new(300, 11);
    let ids: HashSet<String> = render_pages(&opts).unwrap().into_iter().map(|(id, _)| id).collect();
    let q = synth_queries(&opts, 200);
    assert_eq!(q.len(), 200);
    assert_eq!(q, synth_queries(&opts, 200));
    assert_eq!(q[0].0, "synth-00000");
    assert!(q.iter().all(|(_, text, target)| !text.trim().is_empty() && ids.contains(target)));
    assert!(synth_queries(&SynthOptions::new(0, 1), 5).is_empty());
  }

  #[test]
  fn rejects_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    assert!(generate_vault(dir.path(), &SynthOptions { max_bytes: 100, ..Default::default() }).is_err());
    assert!(generate_vault(dir.path(), &SynthOptions { cjk_fraction: 1.5, ..Default::default() }).is_err());
  }

  #[test]
  fn rng_is_stable() {
    // Pin the PRNG so a change to it (and so to every generated vault) is noticed.
    let mut r = Rng::new(0);
    assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
    let mut r = Rng::new(5);
    let v: Vec<usize> = (0..5).map(|_| r.below(10)).collect();
    assert!(v.iter().all(|&x| x < 10));
  }
}
