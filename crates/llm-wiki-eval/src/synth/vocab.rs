//! Vocabulary of the synthetic vaults: page types, the 50 topics and the word lists the
//! sentences are built from, and the PRNG (SplitMix64: tiny, fast, good enough for test data,
//! identical on every platform) that picks from them.

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

pub(super) const T_CONCEPT: usize = 0;
pub(super) const T_ENTITY: usize = 1;
pub(super) const T_ANALYSIS: usize = 2;
pub(super) const T_SYNTHESIS: usize = 3;
pub(super) const T_REQUIREMENT: usize = 4;
pub(super) const T_SKILL: usize = 5;
pub(super) const T_CASE: usize = 6;
pub(super) const T_SOURCE: usize = 7;

/// 50 topics, one per line: `name|CJK name|eight topical words`.
pub(super) const TOPIC_LINES: [&str; 50] = [
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
pub(super) const N_TOPICS: usize = TOPIC_LINES.len();

/// A topic: its name (used as a tag), a CJK name and eight topical words.
#[derive(Debug)]
pub(super) struct Topic {
  pub(super) name: &'static str,
  pub(super) cjk: &'static str,
  pub(super) words: [&'static str; 8],
}

/// The parsed topic table.
pub(super) fn topics() -> &'static [Topic] {
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

pub(super) const VERBS: [&str; 20] = [
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

pub(super) const IMPERATIVES: [&str; 12] = [
  "Tune", "Measure", "Debug", "Design", "Review", "Plan", "Migrate", "Document", "Compare", "Validate",
  "Audit", "Scale",
];

pub(super) const ADJECTIVES: [&str; 20] = [
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

pub(super) const CONNECTORS: [&str; 10] = [
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

pub(super) const CJK_EXTRA: [&str; 16] = [
  "知识", "管理", "系统", "模型", "数据", "方法", "问题", "结果", "经验", "原则", "流程", "工具", "团队",
  "质量", "成本", "风险",
];

pub(super) const RELATION_TYPES: [&str; 7] =
  ["supports", "contradicts", "qualifies", "supersedes", "applies_under", "derived_from", "related_to"];

pub(super) const LANGS: [&str; 6] = ["rust", "python", "bash", "json", "yaml", "sql"];

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
  pub(super) fn chance(&mut self, p: f64) -> bool {
    ((self.next_u64() >> 11) as f64) < p * (1u64 << 53) as f64
  }

  pub(super) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
    items[self.below(items.len())]
  }
}

/// A seed for item `i` of stream `stream`, independent of generation order.
pub(crate) fn derive_seed(seed: u64, stream: u64, i: u64) -> u64 {
  let mut r =
    Rng::new(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F) ^ i.wrapping_mul(0xE703_7ED1_A0B4_28DB));
  r.next_u64()
}
