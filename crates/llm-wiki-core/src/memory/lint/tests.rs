use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::memory::graph::lint_issues;
use crate::memory::graph::tests::manifest_of;
use crate::memory::resolve::resolution_id;
use crate::testkit::Rng;

/// Page ids the vaults draw from: shared last segments in several folders (bare wiki names and
/// relative links reach different pages as pages come and go), an id differing only by case.
const IDS: &[&str] = &[
  "c/a",
  "c/A",
  "c/b",
  "c/old",
  "c/new",
  "n/a",
  "n/deep/b",
  "n/deep/old",
  "a",
  "old",
  "r/r1",
  "r/r2",
  "r/r3",
];
/// Relation targets besides the ids: a case variant, pages that never exist, invalid forms.
const ODD_TARGETS: &[&str] = &["C/B", "c/missing", "gone", "c/a.md", "../c/a", "c/a#h"];
const TYPES: &[&str] = &[
  "supersedes",
  "supersedes",
  "supersedes",
  "contradicts",
  "supports",
  "qualifies",
  "applies_under",
  "derived_from",
  "related_to",
  "refutes",
];

/// A random body link from page `from` (every form the resolver knows, self links included).
fn link(rng: &mut Rng, from: &str) -> String {
  let id = rng.pick(IDS);
  let name = id.rsplit('/').next().unwrap_or(id);
  match rng.below(12) {
    0 => format!("[[{name}]]"),
    1 => format!("[[{id}]]"),
    2 => format!("[t]({name}.md)"),
    3 => format!("[t](/{id}.md#h)"),
    4 => format!("[[{id}^blk]]"),
    5 => format!("[t](../{id}.md)"),
    6 => format!("[[{}]]", id.to_uppercase()),
    7 => format!("[t](deep/{name}.md)"),
    8 => "[t](./) [u](..) [[missing]]".to_string(),
    9 => format!("[[{from}]]"),
    10 => format!("[t]({}.md)", from.rsplit('/').next().unwrap_or(from)),
    _ => format!("[[{name}#Claim|alias]]"),
  }
}

/// A random resolution record page (valid, of another vault, replacing a record or not).
fn record(rng: &mut Rng) -> String {
  let sel = rng.pick(&["c/new", "c/a", "n/a", "old"]);
  let oth = rng.pick(&["c/old", "c/b", "n/deep/old", "gone"]);
  let rel = rng.pick(&["supersedes", "supersedes", "qualifies"]);
  let vault = if rng.chance(15) { "other" } else { "v" };
  let replaces = match rng.below(4) {
    0 => Some(resolution_id("v", sel, oth, "qualifies", None, None)),
    1 => Some(resolution_id("v", sel, oth, "supersedes", None, None)),
    2 => Some("resolution-000000000000".to_string()),
    _ => None,
  };
  let id = resolution_id(vault, sel, oth, rel, None, replaces.as_deref());
  let at = rng.pick(&["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"]);
  let rep = replaces.map_or("null".to_string(), |r| format!("\"{r}\""));
  format!(
    "---\ntype: analysis\ntitle: R\ncategory: conflict-resolution\nstatus: stable\nresolution:\n  id: \"{id}\"\n  selected: \"{sel}\"\n  other: \"{oth}\"\n  relation: {rel}\n  scope: null\n  decided_by: user\n  decided_at: \"{at}\"\n  replaces: {rep}\n---\nSee [[{oth}]] and [[{sel}]].\n"
  )
}

/// A random page `id`: relations (supersedes often, scopes right and wrong, missing and
/// invalid targets, self relations), body links; now and then a resolution record, or a hub
/// with more missing targets than the findings listed (the truncation summary).
fn page(rng: &mut Rng, id: &str) -> String {
  if rng.chance(if id.starts_with("r/") { 70 } else { 5 }) {
    return record(rng);
  }
  let mut fm = String::from("---\ntype: concept\n");
  if rng.chance(3) {
    fm.push_str("relations:\n");
    for i in 0..210 {
      fm.push_str(&format!("  - target: c/m{i}\n    type: supports\n"));
    }
  } else if rng.chance(65) {
    fm.push_str("relations:\n");
    for _ in 0..1 + rng.below(3) {
      let target = match rng.below(10) {
        0 => id,
        1..=3 => rng.pick(ODD_TARGETS),
        _ => rng.pick(IDS),
      };
      let ty = rng.pick(TYPES);
      fm.push_str(&format!("  - target: {target}\n    type: {ty}\n"));
      if (ty == "applies_under") != rng.chance(15) {
        fm.push_str("    scope: offline\n");
      }
    }
  }
  fm.push_str("---\n");
  let body: Vec<String> = (0..rng.below(5)).map(|_| link(rng, id)).collect();
  format!("{fm}Text {}.\n", body.join(" and "))
}

fn manifest(pages: &BTreeMap<String, String>, generation: u64) -> Manifest {
  let list: Vec<(&str, &str)> = pages.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
  let mut m = manifest_of(&list);
  m.generation = generation;
  m
}

/// One random step: 1–3 edits, additions, deletions or renames, and an unchanged page touched
/// (in the record with its old content, as an mtime-only change is).
fn step(rng: &mut Rng, pages: &mut BTreeMap<String, String>) -> (BTreeSet<String>, Vec<String>) {
  let (mut set, mut del) = (BTreeSet::new(), Vec::new());
  for _ in 0..1 + rng.below(3) {
    let present: Vec<String> = pages.keys().cloned().collect();
    let absent: Vec<&str> = IDS.iter().copied().filter(|i| !pages.contains_key(*i)).collect();
    let any = |rng: &mut Rng, v: &[String]| v.get(rng.below(v.len().max(1))).cloned();
    match rng.below(4) {
      0 if !absent.is_empty() => {
        let id = rng.pick(&absent).to_string();
        pages.insert(id.clone(), page(rng, &id));
        set.insert(id);
      }
      1 if present.len() > 2 => {
        let id = any(rng, &present).expect("present");
        pages.remove(&id);
        set.remove(&id);
        del.push(id);
      }
      2 if !absent.is_empty() && !present.is_empty() => {
        let from = any(rng, &present).expect("present");
        let to = rng.pick(&absent).to_string();
        let text = pages.remove(&from).expect("present");
        pages.insert(to.clone(), text);
        set.remove(&from);
        del.push(from);
        set.insert(to);
      }
      _ => {
        if let Some(id) = any(rng, &present) {
          let text = page(rng, &id);
          pages.insert(id.clone(), text);
          set.insert(id);
        }
      }
    }
  }
  if let Some(id) = pages.keys().nth(rng.below(pages.len().max(1))) {
    set.insert(id.clone());
  }
  del.retain(|d| !pages.contains_key(d));
  (set, del)
}

/// Random edit, add, delete and rename sequences on small vaults with relations: after every
/// step, the state advanced by the step's record (and one built from scratch) lists exactly
/// the findings of the whole-graph lint. The sequences must exercise what the state tracks.
#[test]
fn incremental_lint_equals_the_whole_graph_lint_after_every_step() {
  let mut seen: BTreeSet<String> = BTreeSet::new();
  let (mut steps, mut rescans, mut dropped) = (BTreeMap::<&str, usize>::new(), 0, 0);
  for seed in 1..=40u64 {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut pages: BTreeMap<String, String> = BTreeMap::new();
    for id in IDS {
      if rng.chance(70) {
        pages.insert(id.to_string(), page(&mut rng, id));
      }
    }
    let m0 = manifest(&pages, 1);
    let mut state = LintState::build(&m0);
    assert_eq!(*state.findings(), lint_issues(&m0), "seed {seed}: built from scratch");
    // A second state advanced as a hinted commit advances it: never rescanning.
    let mut hinted = Some(LintState::build(&m0));
    for n in 2..40u64 {
      let (set, del) = step(&mut rng, &mut pages);
      let m = manifest(&pages, n);
      let delta = ManifestDelta {
        generation: n,
        set: set.iter().map(|id| (id.clone(), m.entries[id].clone())).collect(),
        del,
        ..Default::default()
      };
      let full = lint_issues(&m);
      let how = state.advance(&delta, &m, true).expect("a rescanning advance always succeeds");
      *steps.entry(if how == Step::Incremental { "incremental" } else { "citations" }).or_default() += 1;
      assert_eq!(*state.findings(), full, "seed {seed} step {n} ({how:?}): {delta:?}");
      assert_eq!(state.generation(), n);
      match hinted.as_mut().map(|h| h.advance(&delta, &m, false)) {
        Some(Some(_)) => {
          assert_eq!(*hinted.as_ref().expect("kept").findings(), full, "seed {seed} step {n} (hinted)");
        }
        Some(None) => {
          dropped += 1;
          hinted = Some(LintState::build(&m));
        }
        None => unreachable!(),
      }
      if how == Step::Citations {
        rescans += 1;
        assert_eq!(*LintState::build(&m).findings(), full, "seed {seed} step {n}: built from scratch");
      }
      seen.extend(full.iter().map(|i| i.code.clone()));
    }
  }
  for code in [
    "relation_missing_target",
    "relation_missing_body_link",
    "relation_invalid_target",
    "relation_invalid_scope",
    "relation_duplicate",
    "relation_self_link",
    "relation_unknown_type",
    "cites_superseded",
    "resolution_invalid",
    "resolution_missing_page",
    "resolution_replaces_missing",
    "relation_lint_truncated",
  ] {
    assert!(seen.contains(code), "no step produced {code}: {seen:?}");
  }
  assert!(steps["incremental"] > 100 && rescans > 20 && dropped == rescans, "{steps:?} {rescans} {dropped}");
}
