//! Rendering of one synthetic page: frontmatter, headings, lists, code fences, tables, quotes,
//! links and mixed-script text, sized to the plan.

use super::*;

pub(super) struct Ctx<'a> {
  pub(super) plans: &'a [Plan],
  pub(super) by_topic: &'a [Vec<usize>],
}

pub(super) struct PageWriter<'a> {
  pub(super) rng: Rng,
  pub(super) plan: &'a Plan,
  pub(super) index: usize,
  pub(super) ctx: &'a Ctx<'a>,
}

pub(super) fn json_str(s: &str) -> String {
  serde_json::to_string(s).expect("string serializes")
}

impl PageWriter<'_> {
  /// A word: mostly the page's topic, sometimes the secondary topic, rarely any topic.
  pub(super) fn word(&mut self) -> &'static str {
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
  pub(super) fn three_words(&mut self) -> (&'static str, &'static str, &'static str) {
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

  pub(super) fn cjk_word(&mut self) -> &'static str {
    match self.rng.below(4) {
      0 => topics()[self.plan.topic2].cjk,
      1 => self.rng.pick(&CJK_EXTRA),
      _ => topics()[self.plan.topic].cjk,
    }
  }

  /// Another page, preferably on the same topic (never this page when there is another).
  pub(super) fn other_page(&mut self) -> Option<&Plan> {
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

  pub(super) fn wiki_link(&mut self) -> Option<String> {
    let p = self.other_page()?;
    let (id, title) = (p.id.clone(), p.title.clone());
    Some(if self.rng.percent(60) { format!("[[{id}]]") } else { format!("[[{id}|{title}]]") })
  }

  pub(super) fn md_link(&mut self) -> Option<String> {
    let up = "../".repeat(self.plan.depth);
    let p = self.other_page()?;
    Some(format!("[{}]({up}{}.md)", p.title, p.id))
  }

  pub(super) fn sentence(&mut self) -> String {
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

  pub(super) fn cjk_sentence(&mut self) -> String {
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

  pub(super) fn paragraph(&mut self, min: usize, max: usize) -> String {
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

  pub(super) fn heading(&mut self) -> String {
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

  pub(super) fn list(&mut self) -> String {
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

  pub(super) fn code(&mut self) -> String {
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

  pub(super) fn table(&mut self) -> String {
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

  pub(super) fn quote(&mut self) -> String {
    format!("> {}\n\n", self.sentence())
  }

  pub(super) fn related(&mut self) -> String {
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

  pub(super) fn block(&mut self) -> String {
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

  pub(super) fn frontmatter(&mut self) -> String {
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

  pub(super) fn render(mut self, max_bytes: usize) -> String {
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
