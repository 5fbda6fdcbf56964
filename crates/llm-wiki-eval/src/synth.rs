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

/// `(type, folder, weight in %)`.
pub const PAGE_TYPES: [(&str, &str, u64); 9] = [
  ("concept", "concepts", 22),
  ("entity", "entities", 12),
  ("analysis", "analyses", 8),
  ("synthesis", "syntheses", 5),
  ("requirement", "requirements", 6),
  ("skill", "skills", 6),
  ("case", "cases", 6),
  ("source", "sources", 25),
  ("trajectory", "trajectories", 10),
];

const T_CONCEPT: usize = 0;
const T_ENTITY: usize = 1;
const T_ANALYSIS: usize = 2;
const T_SYNTHESIS: usize = 3;
const T_REQUIREMENT: usize = 4;
const T_SKILL: usize = 5;
const T_CASE: usize = 6;
const T_SOURCE: usize = 7;

/// 50 topics, one per line: `name|CJK name|eight topical words`.
const TOPIC_LINES: [&str; 50] = [
  "retrieval|检索|retrieval ranking relevance query recall precision reranker candidate",
  "indexing|索引|index posting segment tokenizer stemmer shard compaction dictionary",
  "embeddings|向量|embedding vector dimension cosine quantization centroid neighbor encoder",
  "databases|数据库|transaction replica schema migration snapshot isolation cursor partition",
  "networking|网络|packet latency bandwidth socket router handshake congestion protocol",
  "security|安全|encryption certificate credential sandbox vulnerability signature firewall exploit",
  "compilers|编译器|parser lexer grammar optimizer bytecode register inlining linker",
  "operating-systems|操作系统|kernel scheduler process thread interrupt syscall pagefile filesystem",
  "distributed-systems|分布式|consensus leader quorum gossip heartbeat failover clock lease",
  "machine-learning|机器学习|gradient epoch regularization dropout overfitting classifier feature label",
  "linguistics|语言学|sentence morphology lemma corpus annotation translation syntax phoneme",
  "note-taking|笔记|note zettelkasten backlink outline archive taxonomy curation highlight",
  "project-management|项目管理|milestone roadmap backlog estimate sprint stakeholder deadline retrospective",
  "testing|测试|fixture assertion coverage regression mock benchmark flakiness harness",
  "observability|可观测性|metric trace span dashboard alert logging sampling telemetry",
  "cloud|云计算|container cluster autoscaler region bucket deployment orchestration ingress",
  "frontend|前端|component stylesheet layout hydration accessibility animation viewport widget",
  "mobile|移动端|battery notification gesture offline permission tablet touchscreen handset",
  "finance|金融|portfolio dividend bond equity liquidity hedge yield volatility",
  "accounting|会计|ledger invoice budget revenue depreciation accrual receivable payroll",
  "law|法律|contract statute liability plaintiff verdict jurisdiction precedent injunction",
  "medicine|医学|diagnosis symptom therapy vaccine dosage clinic surgery prognosis",
  "genetics|遗传学|genome allele mutation chromosome sequencing promoter phenotype heredity",
  "neuroscience|神经科学|neuron synapse cortex dopamine plasticity axon hippocampus cognition",
  "ecology|生态|habitat predator biodiversity wetland pollinator invasive canopy ecosystem",
  "climate|气候|emission carbon warming drought monsoon aerosol glacier forecast",
  "oceanography|海洋学|current salinity tide plankton reef upwelling trench estuary",
  "astronomy|天文学|galaxy telescope nebula orbit comet supernova exoplanet redshift",
  "geology|地质学|sediment tectonic basalt erosion fault magma fossil stratum",
  "chemistry|化学|molecule catalyst polymer solvent reaction isotope oxidation titration",
  "physics|物理|quantum momentum entropy photon friction relativity oscillator magnetism",
  "mathematics|数学|theorem proof matrix integral topology prime manifold polynomial",
  "statistics|统计|variance histogram estimator bootstrap quantile likelihood posterior outlier",
  "economics|经济学|inflation tariff demand supply recession subsidy monopoly wages",
  "history|历史|empire dynasty treaty revolution chronicle monarchy colony manuscript",
  "architecture|建筑|facade cantilever atrium blueprint masonry column truss courtyard",
  "urban-planning|城市规划|zoning transit density sidewalk housing suburb streetcar parkland",
  "agriculture|农业|harvest irrigation fertilizer tillage orchard livestock seedling greenhouse",
  "cooking|烹饪|recipe braise marinade dough fermentation spice skillet broth",
  "music|音乐|melody harmony rhythm chord tempo orchestra cadence timbre",
  "photography|摄影|aperture shutter exposure lens tripod bokeh darkroom portrait",
  "film|电影|screenplay montage cinematography director premiere editing storyboard soundtrack",
  "literature|文学|novel poetry narrator metaphor sonnet prose allegory chapter",
  "education|教育|curriculum lecture syllabus tutoring assessment classroom pedagogy literacy",
  "psychology|心理学|motivation anxiety perception habit attention bias emotion conditioning",
  "sports|体育|marathon tournament referee stadium sprinting coach league endurance",
  "aviation|航空|cockpit runway turbulence altimeter airframe autopilot hangar propeller",
  "logistics|物流|warehouse shipment freight pallet inventory courier dispatch tracking",
  "energy|能源|turbine photovoltaic grid reactor hydrogen inverter pipeline substation",
  "manufacturing|制造|assembly tooling welding tolerance conveyor prototype lathe casting",
];

/// Number of topics.
const N_TOPICS: usize = TOPIC_LINES.len();

/// A topic: its name (used as a tag), a CJK name and eight topical words.
#[derive(Debug)]
struct Topic {
  name: &'static str,
  cjk: &'static str,
  words: [&'static str; 8],
}

/// The parsed topic table.
fn topics() -> &'static [Topic] {
  static TOPICS: std::sync::OnceLock<Vec<Topic>> = std::sync::OnceLock::new();
  TOPICS.get_or_init(|| {
    TOPIC_LINES
      .iter()
      .map(|line| {
        let mut parts = line.split('|');
        let (name, cjk, words) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
        let words: Vec<&'static str> = words.split(' ').collect();
        Topic { name, cjk, words: words.try_into().expect("eight words per topic") }
      })
      .collect()
  })
}

const VERBS: [&str; 20] = [
  "improves",
  "reduces",
  "depends on",
  "affects",
  "requires",
  "replaces",
  "complements",
  "constrains",
  "explains",
  "predicts",
  "stabilizes",
  "degrades",
  "extends",
  "simplifies",
  "amplifies",
  "limits",
  "informs",
  "supports",
  "contradicts",
  "precedes",
];

const IMPERATIVES: [&str; 12] = [
  "Tune", "Measure", "Debug", "Design", "Review", "Plan", "Migrate", "Document", "Compare", "Validate",
  "Audit", "Scale",
];

const ADJECTIVES: [&str; 20] = [
  "stable",
  "fragile",
  "expensive",
  "cheap",
  "robust",
  "noisy",
  "sparse",
  "dense",
  "incremental",
  "local",
  "global",
  "early",
  "late",
  "careful",
  "partial",
  "complete",
  "ambiguous",
  "consistent",
  "fast",
  "slow",
];

const CONNECTORS: [&str; 10] = [
  "However,",
  "In practice,",
  "As a result,",
  "For example,",
  "Notably,",
  "In contrast,",
  "Over time,",
  "In most cases,",
  "Surprisingly,",
  "Historically,",
];

const CJK_EXTRA: [&str; 16] = [
  "知识", "管理", "系统", "模型", "数据", "方法", "问题", "结果", "经验", "原则", "流程", "工具", "团队",
  "质量", "成本", "风险",
];

const RELATION_TYPES: [&str; 7] =
  ["supports", "contradicts", "qualifies", "supersedes", "applies_under", "derived_from", "related_to"];

const LANGS: [&str; 6] = ["rust", "python", "bash", "json", "yaml", "sql"];

// ---------------------------------------------------------------------------------------------
// PRNG (SplitMix64): tiny, fast, good enough for test data, identical on every platform.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
  pub(crate) fn new(seed: u64) -> Self {
    Rng(seed)
  }

  pub(crate) fn next_u64(&mut self) -> u64 {
    self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = self.0;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
  }

  /// Uniform in `0..n` (n > 0), by multiply-shift.
  pub(crate) fn below(&mut self, n: usize) -> usize {
    ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
  }

  /// Uniform in `lo..=hi`.
  pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
    lo + self.below(hi - lo + 1)
  }

  /// True with probability `percent`/100.
  pub(crate) fn percent(&mut self, percent: usize) -> bool {
    self.below(100) < percent
  }

  /// True with probability `p` (compared on 53 random bits).
  fn chance(&mut self, p: f64) -> bool {
    ((self.next_u64() >> 11) as f64) < p * (1u64 << 53) as f64
  }

  fn pick<T: Copy>(&mut self, items: &[T]) -> T {
    items[self.below(items.len())]
  }
}

/// A seed for item `i` of stream `stream`, independent of generation order.
pub(crate) fn derive_seed(seed: u64, stream: u64, i: u64) -> u64 {
  let mut r =
    Rng::new(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F) ^ i.wrapping_mul(0xE703_7ED1_A0B4_28DB));
  r.next_u64()
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

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

struct Ctx<'a> {
  plans: &'a [Plan],
  by_topic: &'a [Vec<usize>],
}

struct PageWriter<'a> {
  rng: Rng,
  plan: &'a Plan,
  index: usize,
  ctx: &'a Ctx<'a>,
}

fn json_str(s: &str) -> String {
  serde_json::to_string(s).expect("string serializes")
}

impl PageWriter<'_> {
  /// A word: mostly the page's topic, sometimes the secondary topic, rarely any topic.
  fn word(&mut self) -> &'static str {
    let r = self.rng.below(10);
    let topic = if r < 7 {
      self.plan.topic
    } else if r < 9 {
      self.plan.topic2
    } else {
      self.rng.below(N_TOPICS)
    };
    topic_word(&mut self.rng, topic)
  }

  /// Three words, pairwise different where the draws allow it.
  fn three_words(&mut self) -> (&'static str, &'static str, &'static str) {
    let a = self.word();
    let mut b = self.word();
    for _ in 0..3 {
      if b != a {
        break;
      }
      b = self.word();
    }
    let mut c = self.word();
    for _ in 0..3 {
      if c != a && c != b {
        break;
      }
      c = self.word();
    }
    (a, b, c)
  }

  fn cjk_word(&mut self) -> &'static str {
    match self.rng.below(4) {
      0 => topics()[self.plan.topic2].cjk,
      1 => self.rng.pick(&CJK_EXTRA),
      _ => topics()[self.plan.topic].cjk,
    }
  }

  /// Another page, preferably on the same topic (never this page when there is another).
  fn other_page(&mut self) -> Option<&Plan> {
    let plans = self.ctx.plans;
    if plans.len() < 2 {
      return None;
    }
    let same = &self.ctx.by_topic[self.plan.topic];
    let mut j = if same.len() > 1 && self.rng.percent(75) {
      same[self.rng.below(same.len())]
    } else {
      self.rng.below(plans.len())
    };
    if j == self.index {
      j = (j + 1) % plans.len();
    }
    Some(&plans[j])
  }

  fn wiki_link(&mut self) -> Option<String> {
    let p = self.other_page()?;
    let (id, title) = (p.id.clone(), p.title.clone());
    Some(if self.rng.percent(60) { format!("[[{id}]]") } else { format!("[[{id}|{title}]]") })
  }

  fn md_link(&mut self) -> Option<String> {
    let up = "../".repeat(self.plan.depth);
    let p = self.other_page()?;
    Some(format!("[{}]({up}{}.md)", p.title, p.id))
  }

  fn sentence(&mut self) -> String {
    let (a, b, c) = self.three_words();
    let verb = self.rng.pick(&VERBS);
    let adj = self.rng.pick(&ADJECTIVES);
    let mut s = match self.rng.below(7) {
      0 => format!("The {a} {verb} the {b}."),
      1 => format!("{} the {adj} {a} {verb} every {b}.", self.rng.pick(&CONNECTORS)),
      2 => format!("A {adj} {a} usually {verb} the {b} and the {c}."),
      3 => format!("When the {a} is {adj}, the {b} {verb} the {c}."),
      4 => format!("Teams often confuse the {a} with the {b}, but the {c} is what matters."),
      5 => {
        let n = self.rng.range(3, 400);
        let m = self.rng.range(1, n);
        format!("We measured {n} {a} runs, and the {b} {verb} the {c} in {m} of them.")
      }
      _ => {
        format!("{} `{a}_{b}` stays {adj} unless the {c} changes.", capitalize(self.rng.pick(&CONNECTORS)))
      }
    };
    if self.rng.percent(8) {
      if let Some(link) = self.wiki_link() {
        s.push_str(&format!(" See {link}."));
      }
    } else if self.rng.percent(4) {
      if let Some(link) = self.md_link() {
        s.push_str(&format!(" (Compare {link}.)"));
      }
    }
    s
  }

  fn cjk_sentence(&mut self) -> String {
    let a = self.cjk_word();
    let mut b = self.cjk_word();
    if b == a {
      b = CJK_EXTRA[self.rng.below(CJK_EXTRA.len())];
    }
    let en = self.word();
    match self.rng.below(6) {
      0 => format!("{a}与{b}的关系需要仔细评估。"),
      1 => format!("在实际项目中，{a}通常会影响{b}（{en}）。"),
      2 => format!("我们发现{a}比{b}更加稳定。"),
      3 => format!("{a}是理解{b}的关键，尤其是{en}。"),
      4 => format!("关于{a}的笔记记录了{b}的变化。"),
      _ => format!("{a}について{b}を検討した。"),
    }
  }

  fn paragraph(&mut self, min: usize, max: usize) -> String {
    let n = self.rng.range(min, max);
    let mut p = String::new();
    for _ in 0..n {
      let s = if self.plan.cjk && self.rng.percent(40) { self.cjk_sentence() } else { self.sentence() };
      // Latin sentences are space-separated; CJK sentences (ending in 。) need no space.
      if p.ends_with(|c: char| c.is_ascii()) {
        p.push(' ');
      }
      p.push_str(&s);
    }
    p.push_str("\n\n");
    p
  }

  fn heading(&mut self) -> String {
    let level = if self.rng.percent(75) { "##" } else { "###" };
    let (a, b) = (self.word(), self.word());
    match self.rng.below(5) {
      0 => format!("{level} {} and {b}\n\n", capitalize(a)),
      1 => format!("{level} {} {}\n\n", capitalize(a), capitalize(b)),
      2 => format!("{level} Open questions about the {a}\n\n"),
      3 if self.plan.cjk => format!("{level} {}的{}\n\n", self.cjk_word(), self.cjk_word()),
      _ => format!("{level} Notes on {a}\n\n"),
    }
  }

  fn list(&mut self) -> String {
    let n = self.rng.range(3, 7);
    let kind = self.rng.below(3);
    let mut out = String::new();
    for i in 0..n {
      let item = if self.rng.percent(30) {
        let (a, b) = (self.word(), self.word());
        match self.wiki_link() {
          Some(link) => format!("**{}**: see {link} for the {b}", capitalize(a)),
          None => format!("**{}**: the {b}", capitalize(a)),
        }
      } else {
        self.sentence()
      };
      match kind {
        0 => writeln!(out, "- {item}"),
        1 => writeln!(out, "{}. {item}", i + 1),
        _ => writeln!(out, "- [{}] {item}", if self.rng.percent(50) { "x" } else { " " }),
      }
      .expect("write to String");
    }
    out.push('\n');
    out
  }

  fn code(&mut self) -> String {
    let lang = self.rng.pick(&LANGS);
    let (a, b, c) = (self.word(), self.word(), self.word());
    let n = self.rng.range(1, 9999);
    let body = match lang {
      "rust" => format!(
        "fn {a}_{b}(input: &[u32]) -> u64 {{\n  // {c}: sum the inputs\n  input.iter().map(|&x| u64::from(x)).sum::<u64>() + {n}\n}}\n"
      ),
      "python" => format!("def {a}_{b}(items):\n    \"\"\"Rank the {c} items.\"\"\"\n    return sorted(items)[:{n}]\n"),
      "bash" => format!("llm-wiki search \"{a} {b}\" --limit {}\ngrep -rn {c} ./notes | head -n {n}\n", n % 50 + 1),
      "json" => format!("{{\n  \"{a}\": {n},\n  \"{b}\": \"{c}\",\n  \"enabled\": true\n}}\n"),
      "yaml" => format!("{a}:\n  {b}: {n}\n  {c}: [one, two]\n"),
      _ => format!("SELECT {a}, count(*) AS {b}_count\nFROM {c}\nWHERE {b} > {n}\nGROUP BY {a};\n"),
    };
    format!("```{lang}\n{body}```\n\n")
  }

  fn table(&mut self) -> String {
    let cols = self.rng.range(2, 4);
    let rows = self.rng.range(2, 6);
    let mut out = String::from("|");
    for _ in 0..cols {
      out.push_str(&format!(" {} |", capitalize(self.word())));
    }
    out.push_str("\n|");
    for _ in 0..cols {
      out.push_str(" --- |");
    }
    out.push('\n');
    for _ in 0..rows {
      out.push('|');
      for c in 0..cols {
        let cell = if c == 0 { self.word().to_string() } else { format!("{}", self.rng.range(0, 1000)) };
        out.push_str(&format!(" {cell} |"));
      }
      out.push('\n');
    }
    out.push('\n');
    out
  }

  fn quote(&mut self) -> String {
    format!("> {}\n\n", self.sentence())
  }

  fn related(&mut self) -> String {
    let mut links = Vec::new();
    for _ in 0..self.rng.range(1, 4) {
      let l = if self.rng.percent(70) { self.wiki_link() } else { self.md_link() };
      links.extend(l);
    }
    if links.is_empty() {
      return String::new();
    }
    format!("Related: {}.\n\n", links.join(", "))
  }

  fn block(&mut self) -> String {
    match self.rng.below(20) {
      0..=6 => self.paragraph(2, 6),
      7..=9 => self.heading(),
      10..=12 => self.list(),
      13..=14 => self.code(),
      15..=16 => self.table(),
      17 => self.quote(),
      _ => self.related(),
    }
  }

  fn frontmatter(&mut self) -> String {
    let ty = PAGE_TYPES[self.plan.ty].0;
    let mut fm = String::from("---\n");
    writeln!(fm, "type: {ty}").expect("write to String");
    writeln!(fm, "title: {}", json_str(&self.plan.title)).expect("write to String");
    let status = match self.rng.below(10) {
      0..=5 => "stable",
      6..=8 => "draft",
      _ => "deprecated",
    };
    writeln!(fm, "status: {status}").expect("write to String");
    let mut tags = vec![topics()[self.plan.topic].name];
    for _ in 0..self.rng.below(4) {
      let w = self.word();
      if !tags.contains(&w) {
        tags.push(w);
      }
    }
    if self.rng.percent(50) {
      writeln!(fm, "tags: [{}]", tags.join(", ")).expect("write to String");
    } else {
      fm.push_str("tags:\n");
      for t in &tags {
        writeln!(fm, "  - {t}").expect("write to String");
      }
    }
    let mut aliases = Vec::new();
    if self.plan.title != self.plan.english_title {
      aliases.push(self.plan.english_title.clone());
    }
    if self.rng.percent(25) {
      let (a, b) = two_words(&mut self.rng, self.plan.topic);
      aliases.push(format!("{} {}", capitalize(a), b));
    }
    if self.plan.cjk && self.rng.percent(50) {
      aliases.push(format!("{}{}", topics()[self.plan.topic].cjk, self.rng.pick(&CJK_EXTRA)));
    }
    if !aliases.is_empty() {
      let quoted: Vec<String> = aliases.iter().map(|a| json_str(a)).collect();
      writeln!(fm, "aliases: [{}]", quoted.join(", ")).expect("write to String");
    }
    if self.rng.percent(40) {
      let (a, b, c) = (self.word(), self.word(), self.word());
      let d = format!("How the {a} relates to the {b} and why the {c} matters.");
      writeln!(fm, "description: {}", json_str(&d)).expect("write to String");
    }
    if self.rng.percent(30) {
      let y = 2019 + self.rng.below(7);
      let (m, d) = (1 + self.rng.below(12), 1 + self.rng.below(28));
      writeln!(fm, "created: {y}-{m:02}-{d:02}").expect("write to String");
    }
    if matches!(self.plan.ty, T_ANALYSIS | T_SYNTHESIS | T_CASE) && self.rng.percent(50) {
      let mut srcs = Vec::new();
      for _ in 0..self.rng.range(1, 3) {
        srcs.extend(self.other_page().map(|p| p.id.clone()));
      }
      if !srcs.is_empty() {
        fm.push_str("sources:\n");
        for s in srcs {
          writeln!(fm, "  - {}", json_str(&s)).expect("write to String");
        }
      }
    }
    if self.rng.percent(25) {
      let n = self.rng.range(1, 3);
      let mut rels = String::new();
      for _ in 0..n {
        let Some(target) = self.other_page().map(|p| p.id.clone()) else {
          break;
        };
        writeln!(rels, "  - target: {}\n    type: {}", json_str(&target), self.rng.pick(&RELATION_TYPES))
          .expect("write to String");
        if self.rng.percent(30) {
          writeln!(
            rels,
            "    scope: {}",
            json_str(&format!("when the {} is {}", self.word(), self.rng.pick(&ADJECTIVES)))
          )
          .expect("write to String");
        }
      }
      if !rels.is_empty() {
        fm.push_str("relations:\n");
        fm.push_str(&rels);
      }
    }
    fm.push_str("---\n\n");
    fm
  }

  fn render(mut self, max_bytes: usize) -> String {
    let mut out = self.frontmatter();
    out.push_str(&format!("# {}\n\n", self.plan.title));
    // The mandatory intro is short so that the smallest pages stay a few lines long.
    let intro_max = if self.plan.target < 600 { 1 } else { 3 };
    out.push_str(&self.paragraph(1, intro_max));
    let target = self.plan.target.min(max_bytes);
    let mut misses = 0;
    while out.len() < target && misses < 8 {
      let block = self.block();
      if out.len() + block.len() > max_bytes {
        misses += 1;
        continue;
      }
      out.push_str(&block);
    }
    // One trailing newline.
    while out.ends_with("\n\n") {
      out.pop();
    }
    out
  }
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
