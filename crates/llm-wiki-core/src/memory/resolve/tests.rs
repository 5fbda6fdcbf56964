use super::*;
use crate::memory::bundle::{
  assemble, render_bundles, AssemblyOptions, MemoryBundle, MemoryItem, MemorySource,
};
use crate::memory::graph::tests::manifest_of;
use crate::memory::graph::LinkGraph;
use crate::testkit::{temp_vault, write_page};

fn req(sel: &str, oth: &str, rel: &str) -> ResolveRequest {
  ResolveRequest {
    vault: "project".into(),
    selected: sel.into(),
    other: oth.into(),
    relation: rel.into(),
    update_index: Some(false),
    ..Default::default()
  }
}

fn code(r: Result<ResolveOutcome>) -> &'static str {
  match r {
    Ok(o) => panic!("expected an error, got {o:?}"),
    Err(e) => e.code(),
  }
}

/// A vault with two claim pages `concepts/a` and `concepts/b`.
fn vault() -> (tempfile::TempDir, VaultPaths) {
  let (t, p) = temp_vault();
  write_page(&p, "concepts/a", "Alpha", "Deploys run on Fridays.");
  write_page(&p, "concepts/b", "Beta", "Deploys never run on Fridays.");
  (t, p)
}

fn records_on_disk(p: &VaultPaths) -> Vec<String> {
  let mut v: Vec<String> = std::fs::read_dir(p.wiki.join(FOLDER))
    .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
    .unwrap_or_default();
  v.sort();
  v
}

#[test]
fn every_validation_rule_has_its_code() {
  let (_t, p) = vault();
  let (_t2, other) = temp_vault();
  write_page(&other, "concepts/elsewhere", "E", "x");
  write_page(&p, "concepts/broken", "B", "x");
  std::fs::write(p.wiki.join("concepts/broken.md"), "---\ntype: [unclosed\n---\n").unwrap();
  let r = |q: ResolveRequest| resolve_in(&p, Some(&other), &q);
  assert_eq!(code(r(req("concepts/a", "concepts/b", "refutes"))), codes::RELATION_INVALID);
  assert_eq!(code(r(req("concepts/a#x", "concepts/b", "supersedes"))), codes::PAGE_ID_INVALID);
  assert_eq!(code(r(req("", "concepts/b", "supersedes"))), codes::PAGE_ID_INVALID);
  assert_eq!(code(r(req("concepts/a", "Concepts/A", "supersedes"))), codes::SAME_PAGE);
  assert_eq!(code(r(req("concepts/a", "concepts/zzz", "supersedes"))), codes::PAGE_MISSING);
  assert_eq!(code(r(req("Concepts/a", "concepts/b", "supersedes"))), codes::PAGE_MISSING, "ids are exact");
  assert_eq!(code(r(req("concepts/a", "concepts/elsewhere", "supersedes"))), codes::CROSS_VAULT);
  assert_eq!(code(r(req("concepts/a", "concepts/broken", "supersedes"))), codes::PAGE_INVALID);
  assert_eq!(code(r(req("concepts/a", "concepts/b", "applies_under"))), codes::SCOPE_INVALID);
  let blank =
    ResolveRequest { scope: Some("  \n ".into()), ..req("concepts/a", "concepts/b", "applies_under") };
  assert_eq!(code(r(blank)), codes::SCOPE_INVALID);
  let long = ResolveRequest {
    scope: Some("x".repeat(MAX_SCOPE_CHARS + 1)),
    ..req("concepts/a", "concepts/b", "applies_under")
  };
  assert_eq!(code(r(long)), codes::SCOPE_INVALID);
  let scoped =
    ResolveRequest { scope: Some("offline".into()), ..req("concepts/a", "concepts/b", "supersedes") };
  assert_eq!(code(r(scoped)), codes::SCOPE_INVALID);
  let essay = ResolveRequest {
    rationale: Some("x".repeat(MAX_RATIONALE_CHARS + 1)),
    ..req("concepts/a", "concepts/b", "qualifies")
  };
  assert_eq!(code(r(essay)), codes::RATIONALE_TOO_LONG);
  let replaces =
    ResolveRequest { replaces: Some("resolution-0".into()), ..req("concepts/a", "concepts/b", "qualifies") };
  assert_eq!(code(r(replaces)), codes::REPLACES_INVALID, "the pair has no active resolution");
  let bad_vault = ResolveRequest { vault: "team".into(), ..req("concepts/a", "concepts/b", "qualifies") };
  assert_eq!(code(resolve_conflict(&p, &bad_vault)), "invalid_argument");
  let (_t3, empty) = temp_vault();
  std::fs::remove_dir_all(&empty.dot_wiki).unwrap();
  assert_eq!(
    code(resolve_in(&empty, None, &req("concepts/a", "concepts/b", "qualifies"))),
    codes::VAULT_UNAVAILABLE
  );
  assert!(records_on_disk(&p).is_empty(), "no rejected request writes anything");
  assert!(crate::events_lock::acquire(&p.meta, std::time::Duration::ZERO).is_ok(), "the lock is released");
  assert!(!crate::feedback::events::events_path(&p.meta).exists(), "no rejected request appends an event");
}

#[test]
fn writes_one_page_with_the_spec_frontmatter_and_repeats_are_no_ops() {
  let (_t, p) = vault();
  let q = ResolveRequest {
    rationale: Some("The Friday freeze was lifted in May.".into()),
    ..req("concepts/a", "concepts/b", "supersedes")
  };
  let first = resolve_in(&p, None, &q).unwrap();
  assert!(first.created);
  let vault_id = crate::vault::config::ensure_vault_id(&p).unwrap();
  let id = resolution_id(&vault_id, "concepts/a", "concepts/b", "supersedes", None, None);
  assert_eq!(first.resolution.id, id);
  assert_eq!(first.resolution.page_id, format!("analyses/{id}"));
  assert_eq!(first.resolution.status, "active");
  assert_eq!(first.resolution.vault_id, vault_id);
  assert_eq!(records_on_disk(&p), vec![format!("{id}.md")]);
  let text = std::fs::read_to_string(p.wiki.join(format!("analyses/{id}.md"))).unwrap();
  let fm = text.split("---\n").nth(1).unwrap();
  let expected = format!(
    "type: analysis\ntitle: \"Resolution: concepts/a supersedes concepts/b\"\ncategory: conflict-resolution\nstatus: stable\nresolution:\n  id: \"{id}\"\n  selected: \"concepts/a\"\n  other: \"concepts/b\"\n  relation: supersedes\n  scope: null\n  decided_by: user\n  decided_at: \"{}\"\n  replaces: null\n",
    first.resolution.decided_at
  );
  assert_eq!(fm, expected);
  assert!(text.contains("[Alpha](../concepts/a.md)") && text.contains("[Beta](../concepts/b.md)"));
  assert!(text.contains("The Friday freeze was lifted in May."));
  // The page links both claims: the parsed page yields the record and two body links.
  let page = Page::parse(&first.resolution.page_id, PathBuf::from("/x"), &text).unwrap();
  let links = crate::memory::graph::PageLinks::of_page(&page);
  assert_eq!(links.resolution.as_ref().map(|r| r.id.as_str()), Some(id.as_str()));
  assert_eq!(links.links.len(), 2);
  assert!(links.issues.is_empty(), "{:?}", links.issues);
  // Repeat (even with another rationale or scope spelling): same record, nothing written.
  let mtime = std::fs::metadata(&first.path).unwrap().modified().unwrap();
  let again =
    resolve_in(&p, None, &ResolveRequest { rationale: Some("other words".into()), ..q.clone() }).unwrap();
  assert!(!again.created);
  assert_eq!(again.resolution, first.resolution);
  assert_eq!(std::fs::metadata(&first.path).unwrap().modified().unwrap(), mtime);
  assert_eq!(records_on_disk(&p).len(), 1);
}

#[test]
fn a_changed_choice_needs_replaces_and_the_chain_head_is_active() {
  let (_t, p) = vault();
  let r1 = resolve_in(&p, None, &req("concepts/a", "concepts/b", "supersedes")).unwrap().resolution;
  // Reversing the choice without replaces, or with a wrong one, is refused.
  assert_eq!(
    code(resolve_in(&p, None, &req("concepts/b", "concepts/a", "supersedes"))),
    codes::REPLACES_REQUIRED
  );
  let wrong = ResolveRequest {
    replaces: Some("resolution-ffff".into()),
    ..req("concepts/b", "concepts/a", "supersedes")
  };
  assert_eq!(code(resolve_in(&p, None, &wrong)), codes::REPLACES_INVALID);
  // With the active id (bare or as its page id) it is a new immutable record.
  let ok =
    ResolveRequest { replaces: Some(r1.page_id.clone()), ..req("concepts/b", "concepts/a", "supersedes") };
  let r2 = resolve_in(&p, None, &ok).unwrap();
  assert!(r2.created);
  assert_eq!(r2.resolution.replaces.as_deref(), Some(r1.id.as_str()));
  assert_ne!(r2.resolution.id, r1.id);
  assert_eq!(records_on_disk(&p).len(), 2);
  let vault_id = crate::vault::config::ensure_vault_id(&p).unwrap();
  let set = ResolutionSet::build(&vault_id, scan_records(&p));
  assert_eq!(set.active_for_pair("concepts/a", "concepts/b").unwrap().id, r2.resolution.id);
  assert_eq!(set.describe(&r1.id).unwrap().status, "replaced");
  // The first choice again: without replaces refused (it was replaced), with it a third record.
  assert_eq!(
    code(resolve_in(&p, None, &req("concepts/a", "concepts/b", "supersedes"))),
    codes::REPLACES_REQUIRED
  );
  let back = ResolveRequest {
    replaces: Some(r2.resolution.id.clone()),
    ..req("concepts/a", "concepts/b", "supersedes")
  };
  let r3 = resolve_in(&p, None, &back).unwrap();
  assert!(r3.created);
  // Repeating the active decision without its replaces is a no-op.
  let again = resolve_in(&p, None, &req("concepts/a", "concepts/b", "supersedes")).unwrap();
  assert!(!again.created);
  assert_eq!(again.resolution.id, r3.resolution.id);
  // A stale replaces (r1, no longer active) is refused.
  let stale =
    ResolveRequest { replaces: Some(r1.id.clone()), ..req("concepts/a", "concepts/b", "qualifies") };
  assert_eq!(code(resolve_in(&p, None, &stale)), codes::REPLACES_INVALID);
  assert_eq!(records_on_disk(&p).len(), 3);
}

#[test]
fn concurrent_calls_on_one_pair_write_one_page() {
  let (_t, p) = vault();
  let outcomes: Vec<Result<ResolveOutcome>> = std::thread::scope(|s| {
    let handles: Vec<_> = (0..8)
      .map(|i| {
        let p = p.clone();
        s.spawn(move || {
          // Half repeat one decision, half the opposite one.
          let q = if i % 2 == 0 {
            req("concepts/a", "concepts/b", "supersedes")
          } else {
            req("concepts/b", "concepts/a", "supersedes")
          };
          resolve_in(&p, None, &q)
        })
      })
      .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
  });
  let created: Vec<&ResolveOutcome> =
    outcomes.iter().filter_map(|o| o.as_ref().ok()).filter(|o| o.created).collect();
  assert_eq!(created.len(), 1, "{outcomes:?}");
  let winner = &created[0].resolution;
  for o in &outcomes {
    match o {
      Ok(o) => assert_eq!(o.resolution.id, winner.id, "a repeat returns the committed record"),
      Err(e) => assert_eq!(e.code(), codes::REPLACES_REQUIRED, "the opposite choice needs replaces"),
    }
  }
  assert_eq!(records_on_disk(&p), vec![format!("{}.md", winner.id)]);
}

#[test]
fn a_busy_events_lock_aborts_without_a_page() {
  let (_t, p) = vault();
  let held = crate::events_lock::acquire(&p.meta, EXPLICIT_WAIT).unwrap();
  let started = std::time::Instant::now();
  assert_eq!(code(resolve_in(&p, None, &req("concepts/a", "concepts/b", "qualifies"))), "events_lock_busy");
  assert!(started.elapsed() >= EXPLICIT_WAIT);
  assert!(records_on_disk(&p).is_empty());
  drop(held);
  assert!(resolve_in(&p, None, &req("concepts/a", "concepts/b", "qualifies")).unwrap().created);
}

fn feedback_events(p: &VaultPaths) -> Vec<crate::feedback::events::FeedbackEvent> {
  std::fs::read_to_string(crate::feedback::events::events_path(&p.meta))
    .unwrap_or_default()
    .lines()
    .map(|l| serde_json::from_str(l).unwrap())
    .collect()
}

#[test]
fn a_new_resolution_appends_conflict_selected_and_a_repeat_does_not() {
  let (_t, p) = vault();
  let out = resolve_in(&p, None, &req("concepts/a", "concepts/b", "supersedes")).unwrap();
  assert!(out.created && out.warnings.is_empty(), "{:?}", out.warnings);
  let events = feedback_events(&p);
  assert_eq!(events.len(), 1);
  let e = &events[0];
  e.validate().unwrap();
  assert_eq!(e.action, crate::feedback::FeedbackAction::ConflictSelected);
  assert_eq!(e.page_id, "concepts/a");
  assert_eq!(e.vault_id, crate::vault::config::ensure_vault_id(&p).unwrap());
  assert!(crate::events_lock::acquire(&p.meta, std::time::Duration::ZERO).is_ok(), "the lock is released");
  let again = resolve_in(&p, None, &req("concepts/a", "concepts/b", "supersedes")).unwrap();
  assert!(!again.created);
  assert_eq!(feedback_events(&p).len(), 1, "an idempotent repeat appends nothing");
  // A changed choice is a new record and a new event, for the newly selected page.
  let changed = ResolveRequest {
    replaces: Some(out.resolution.id.clone()),
    ..req("concepts/b", "concepts/a", "qualifies")
  };
  assert!(resolve_in(&p, None, &changed).unwrap().created);
  let events = feedback_events(&p);
  assert_eq!(events.len(), 2);
  assert_eq!(events[1].page_id, "concepts/b");
}

#[test]
fn a_failed_event_append_keeps_the_page_and_warns() {
  let (_t, p) = vault();
  // The stream cannot be opened for append (a directory in its place).
  std::fs::create_dir_all(crate::feedback::events::events_path(&p.meta)).unwrap();
  let out = resolve_in(&p, None, &req("concepts/a", "concepts/b", "qualifies")).unwrap();
  assert!(out.created);
  assert_eq!(records_on_disk(&p), vec![format!("{}.md", out.resolution.id)]);
  assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
  assert_eq!(out.warnings[0].code, codes::FEEDBACK_NOT_RECORDED);
  assert!(crate::events_lock::acquire(&p.meta, std::time::Duration::ZERO).is_ok(), "the lock is released");
}

#[test]
fn index_update_follows_and_a_failed_one_keeps_the_page() {
  let (_t, p) = vault();
  let opts = ReindexOptions { components: vec![Component::Lexical], ..Default::default() };
  assert!(crate::store::reindex_vault(&p, &opts).ok);
  let q = ResolveRequest { update_index: Some(true), ..req("concepts/a", "concepts/b", "supersedes") };
  let out = resolve_in(&p, None, &q).unwrap();
  assert!(out.index.updated && !out.index.stale, "{:?}", out.index);
  let snap = crate::retrieve::engine::open_snapshot(&p).ok().unwrap();
  let entry = &snap.manifest.entries[&out.resolution.page_id];
  assert_eq!(entry.links.resolution.as_ref().unwrap().id, out.resolution.id);
  let g = crate::memory::graph::LinkGraph::build(&snap.manifest);
  assert!(g.decisions.superseded.contains_key("concepts/b"));
  // The writer lock held by another reindex: the page is committed, derived state reported stale.
  let layout = crate::store::StoreLayout::new(p.retrieval());
  let _writer = crate::store::lock::acquire(&layout).unwrap();
  let q2 = ResolveRequest {
    replaces: Some(out.resolution.id.clone()),
    ..req("concepts/a", "concepts/b", "qualifies")
  };
  let stale = resolve_in(&p, None, &ResolveRequest { update_index: Some(true), ..q2 }).unwrap();
  assert!(stale.created && !stale.index.updated && stale.index.stale);
  let codes: Vec<&str> = stale.index.issues.iter().map(|i| i.code.as_str()).collect();
  assert_eq!(codes, vec!["qmd_index_busy", "resolution_index_stale"]);
  assert!(std::path::Path::new(&stale.path).is_file());
}

fn record(
  vault_id: &str,
  sel: &str,
  oth: &str,
  rel: &str,
  scope: Option<&str>,
  replaces: Option<&str>,
  at: &str,
) -> ResolutionRecord {
  ResolutionRecord {
    id: resolution_id(vault_id, sel, oth, rel, scope, replaces),
    selected: sel.into(),
    other: oth.into(),
    relation: rel.into(),
    scope: scope.map(str::to_string),
    decided_by: "user".into(),
    decided_at: at.into(),
    replaces: replaces.map(str::to_string),
  }
}

fn issue_codes(s: &ResolutionSet) -> Vec<String> {
  let mut v: Vec<String> = s.issues.iter().map(|(_, i)| i.code.clone()).collect();
  v.sort();
  v
}

#[test]
fn resolution_set_rules() {
  let at1 = "2026-01-01T00:00:00.000Z";
  let at2 = "2026-02-01T00:00:00.000Z";
  let r1 = record("v", "a", "b", "supersedes", None, None, at1);
  let r2 = record("v", "b", "a", "qualifies", None, Some(&r1.id), at2);
  let s =
    ResolutionSet::build("v", vec![("analyses/1".into(), r1.clone()), ("analyses/2".into(), r2.clone())]);
  assert_eq!(s.active_for_pair("b", "a").unwrap().id, r2.id);
  assert_eq!(s.active_for("a").count(), 1);
  assert!(issue_codes(&s).is_empty());
  // A hand-edited record (id no longer matches) is ignored and reported.
  let mut edited = r1.clone();
  edited.relation = "qualifies".into();
  let s = ResolutionSet::build("v", vec![("analyses/1".into(), edited)]);
  assert!(s.is_empty());
  assert_eq!(issue_codes(&s), vec!["resolution_invalid"]);
  // The same record in another vault does not match its id there.
  assert!(ResolutionSet::build("w", vec![("analyses/1".into(), r1.clone())]).is_empty());
  // A fork (two heads): the later decision is active, the fork reported.
  let other = record("v", "b", "a", "supersedes", None, None, at2);
  let s =
    ResolutionSet::build("v", vec![("analyses/1".into(), r1.clone()), ("analyses/3".into(), other.clone())]);
  assert_eq!(s.active_for_pair("a", "b").unwrap().id, other.id);
  assert_eq!(issue_codes(&s), vec!["resolution_fork"]);
  // replaces naming another pair's record: ignored.
  let x = record("v", "c", "d", "qualifies", None, Some(&r1.id), at2);
  let s = ResolutionSet::build("v", vec![("analyses/1".into(), r1.clone()), ("analyses/4".into(), x)]);
  assert!(s.active_for_pair("c", "d").is_none());
  assert_eq!(s.active_for_pair("a", "b").unwrap().id, r1.id);
  assert_eq!(issue_codes(&s), vec!["resolution_invalid_replaces"]);
  // replaces of a record that no page holds: still the decision, reported.
  let s = ResolutionSet::build("v", vec![("analyses/2".into(), r2.clone())]);
  assert_eq!(s.active_for_pair("a", "b").unwrap().id, r2.id);
  assert_eq!(issue_codes(&s), vec!["resolution_replaces_missing"]);
  // Duplicated record pages: the first counts.
  let s =
    ResolutionSet::build("v", vec![("analyses/1".into(), r1.clone()), ("analyses/1b".into(), r1.clone())]);
  assert_eq!(s.len(), 1);
  assert_eq!(issue_codes(&s), vec!["resolution_duplicate"]);
}

#[test]
fn parse_resolution_rejects_bad_shapes() {
  let parse = |fm: &str| {
    let text = format!("---\ntype: analysis\ncategory: conflict-resolution\n{fm}---\nx\n");
    let page = Page::parse("analyses/x", PathBuf::from("/x"), &text).unwrap();
    let (r, i) = parse_resolution(&page);
    (r.is_some(), i.into_iter().map(|i| i.code).collect::<Vec<_>>())
  };
  let good = "resolution:\n  id: r\n  selected: a\n  other: b\n  relation: supersedes\n  scope: null\n  decided_by: user\n  decided_at: 2026-01-01T00:00:00Z\n  replaces: null\n";
  assert_eq!(parse(good), (true, vec![]));
  let cases: Vec<String> = vec![
    "resolution: x\n".to_string(),
    String::new(),
    good.replace("supersedes", "refutes"),
    good.replace("other: b", "other: a"),
    good.replace("decided_by: user", "decided_by: model"),
    good.replace("scope: null", "scope: offline"),
    good.replace("relation: supersedes", "relation: applies_under"),
    good.replace("decided_at: 2026-01-01T00:00:00Z", "decided_at: yesterday"),
    good.replace("selected: a", "selected: a.md"),
    format!("{good}  weight: 1\n"),
  ];
  for bad in cases {
    assert_eq!(parse(&bad), (false, vec!["resolution_invalid".to_string()]), "{bad}");
  }
  // Not a conflict-resolution page: a `resolution` key is an ordinary extension.
  let page = Page::parse("c/x", PathBuf::from("/x"), &format!("---\ntype: concept\n{good}---\n")).unwrap();
  assert_eq!(parse_resolution(&page), (None, vec![]));
}

/// A resolution page for the test manifests (vault id `v`).
fn record_page(sel: &str, oth: &str, rel: &str, scope: Option<&str>) -> (String, String) {
  let r = record("v", sel, oth, rel, scope, None, "2026-03-01T00:00:00.000Z");
  (page_id_of(&r.id), render_page(&r, sel, oth, Some("because")))
}

#[test]
fn decisions_mark_historical_pages_and_their_citers() {
  let (rid, rtext) = record_page("c/new", "c/old", "supersedes", None);
  let m = manifest_of(&[
    ("c/new", "---\ntype: concept\n---\nNew claim.\n"),
    ("c/old", "---\ntype: concept\n---\nOld claim.\n"),
    ("c/user", "---\ntype: concept\n---\nSee [[c/old]].\n"),
    (
      "c/typed",
      "---\ntype: concept\nrelations:\n  - target: c/old\n    type: supports\n---\nNo body link.\n",
    ),
    (
      "c/x",
      "---\ntype: concept\nrelations:\n  - target: c/y\n    type: supersedes\n---\nReplaces [[c/y]].\n",
    ),
    ("c/y", "---\ntype: concept\n---\nY.\n"),
    ("c/z", "---\ntype: concept\n---\nCites [[c/y]] and [[c/new]].\n"),
    (&rid, &rtext),
  ]);
  let g = LinkGraph::build(&m);
  assert!(may_supersede(&m));
  let plain = manifest_of(&[("c/user", "---\ntype: concept\n---\nSee [[c/old]].\n")]);
  assert!(!may_supersede(&plain));
  // Recall's per-generation answer: decided once per (store, vault, generation), not per query
  // (a manifest of the same key is not read again).
  let store = std::path::Path::new("/supersession-test-store");
  assert!(crate::memory::graph::supersession_for(store, &plain).is_none());
  assert!(crate::memory::graph::supersession_for(store, &m).is_none(), "same key: the cached answer");
  let mut next = m.clone();
  next.generation += 1;
  let s = crate::memory::graph::supersession_for(store, &next).expect("a new generation is checked");
  assert_eq!(s.superseded["c/y"][0].by, "c/x");
  let d = &g.decisions;
  assert_eq!(
    d.superseded["c/old"],
    vec![Supersession { by: "c/new".into(), resolution: Some(rid.trim_start_matches("analyses/").into()) }]
  );
  assert_eq!(d.superseded["c/y"][0].resolution, None, "a declared supersedes counts too");
  assert!(!d.superseded.contains_key("c/new"));
  let citers: Vec<&str> = d.cites_superseded.keys().map(String::as_str).collect();
  assert_eq!(citers, vec!["c/typed", "c/user", "c/z"], "not the superseder, not the record page");
  assert_eq!(d.warning_codes("c/user"), vec!["cites_superseded"]);
  assert_eq!(d.warning_codes("c/old"), vec!["superseded"]);
  assert!(d.warnings("c/user")[0].contains("cites c/old, superseded by c/new"));
  let lint: Vec<(&str, &str)> =
    g.lint().filter(|(_, i)| i.code == "cites_superseded").map(|(p, i)| (p, i.code.as_str())).collect();
  assert_eq!(lint.len(), 3);
  let issues = crate::memory::graph::lint_issues(&m);
  assert!(issues.iter().any(|i| i.code == "cites_superseded" && i.path.as_deref() == Some("c/user.md")));
  // The lint-only graph (what a reindex builds) finds the same, holding fewer edges.
  let lean = LinkGraph::build_for_lint(&m);
  let findings = |g: &LinkGraph| {
    g.lint().map(|(p, i)| (p.to_string(), i.code.clone(), i.message.clone())).collect::<Vec<_>>()
  };
  assert_eq!(findings(&lean), findings(&g));
  assert_eq!(lean.decisions.superseded, g.decisions.superseded);
  assert_eq!(lean.decisions.cites_superseded, g.decisions.cites_superseded);
  let edges = |g: &LinkGraph| g.outbound.values().map(Vec::len).sum::<usize>();
  assert!(edges(&lean) < edges(&g), "{} of {} edges kept", edges(&lean), edges(&g));
}

#[test]
fn an_active_resolution_wins_over_a_disagreeing_declared_relation() {
  // Declared: old supersedes new. The user decided: new qualifies old (both current).
  let (_rid, rtext) = record_page("c/new", "c/old", "qualifies", None);
  let rid = _rid;
  let m = manifest_of(&[
    (
      "c/old",
      "---\ntype: concept\nrelations:\n  - target: c/new\n    type: supersedes\n---\nReplaces [[c/new]].\n",
    ),
    ("c/new", "---\ntype: concept\n---\nNew.\n"),
    (&rid, &rtext),
  ]);
  let g = LinkGraph::build(&m);
  assert!(g.decisions.superseded.is_empty(), "{:?}", g.decisions.superseded);
}

fn item(id: &str, rank: Option<u32>) -> MemoryItem {
  MemoryItem {
    vault: "project".into(),
    vault_id: "v".into(),
    vault_label: None,
    page_id: id.into(),
    path: format!("/w/{id}.md"),
    title: id.to_uppercase(),
    page_type: "concept".into(),
    role: "canonical".into(),
    status: Some("stable".into()),
    domain: None,
    scope: None,
    date: None,
    freshness: None,
    heading: None,
    excerpt: format!("text of {id}"),
    line_start: 1,
    line_end: 1,
    qmd_rank: rank,
    qmd_score: rank.map(|_| 0.9),
    score: 0.9,
    match_reasons: vec![],
    relation: String::new(),
    relation_direction: None,
    related_to: None,
    warnings: vec![],
    historical: false,
  }
}

struct Src(LinkGraph);
impl MemorySource for Src {
  fn graph(&self, vault: &str) -> Option<&LinkGraph> {
    (vault == "project").then_some(&self.0)
  }
  fn admit(&mut self, _vault: &str, page_id: &str) -> Option<MemoryItem> {
    Some(item(page_id, None))
  }
}

fn bundles_for(pages: &[(&str, &str)], retrieved: &[&str]) -> Vec<MemoryBundle> {
  let mut src = Src(LinkGraph::build(&manifest_of(pages)));
  let cands: Vec<MemoryItem> = retrieved.iter().enumerate().map(|(i, id)| item(id, Some(i as u32))).collect();
  assemble(&cands, &mut src, &AssemblyOptions::default())
}

#[test]
fn recall_shows_the_other_claim_as_historical_and_keeps_the_declared_relation_visible() {
  let (rid, rtext) = record_page("c/b", "c/a", "supersedes", None);
  let pages = [
    ("c/a", "---\ntype: concept\nstatus: stable\nrelations:\n  - target: c/b\n    type: contradicts\n---\nVersus [[c/b]].\n"),
    ("c/b", "---\ntype: concept\n---\nB.\n"),
    (rid.as_str(), rtext.as_str()),
  ];
  let b = bundles_for(&pages, &["c/a"]);
  let card = b[0].card.as_ref().unwrap();
  assert_eq!(card.page_id, "c/a");
  assert!(card.historical);
  assert_eq!(card.status.as_deref(), Some("stable"), "status untouched");
  assert!(card.warnings.iter().any(|w| w.starts_with("superseded by c/b (user resolution resolution-")));
  let other = &b[0].conflicts[0];
  assert_eq!(
    (other.page_id.as_str(), other.relation.as_str(), other.relation_direction.as_deref()),
    ("c/b", "supersedes", Some("incoming"))
  );
  assert!(!other.historical);
  assert!(
    other.match_reasons.iter().any(|r| r == "declared:contradicts (outgoing)"),
    "{:?}",
    other.match_reasons
  );
  assert!(other.warnings.iter().any(|w| w.contains("overridden by user resolution")));
  let res = b[0].resolution.as_ref().unwrap();
  assert_eq!(
    (res.selected_page_id.as_str(), res.other_page_id.as_str(), res.status.as_str()),
    ("c/b", "c/a", "active")
  );
  assert!(b[0].unresolved.is_empty(), "the contradiction is resolved");
  let text = render_bundles(&b);
  assert!(text.contains("Resolved by the user (resolution-") && text.contains("historical"), "{text}");
  assert!(!text.contains("ask the user"), "{text}");
}

#[test]
fn unresolved_contradictions_name_both_pages_and_qualifiers_stay_current() {
  let pages = [
    ("c/a", "---\ntype: concept\nrelations:\n  - target: c/b\n    type: contradicts\n---\nVersus [[c/b]].\n"),
    ("c/b", "---\ntype: concept\n---\nB.\n"),
  ];
  let b = bundles_for(&pages, &["c/a"]);
  assert_eq!(b[0].unresolved.len(), 1);
  assert_eq!(b[0].unresolved[0].page_ids, vec!["c/a".to_string(), "c/b".to_string()]);
  assert!(b[0].resolution.is_none());
  assert!(render_bundles(&b).contains("These claims compete; ask the user which applies: c/a vs c/b.\n"));
  // applies_under, with no declared relation at all: the resolution admits the partner, the
  // scope sits on the selected claim, nothing is historical.
  let (rid, rtext) = record_page("c/b", "c/a", "applies_under", Some("offline mode"));
  let pages = [
    ("c/a", "---\ntype: concept\n---\nA.\n"),
    ("c/b", "---\ntype: concept\n---\nB.\n"),
    (rid.as_str(), rtext.as_str()),
  ];
  let b = bundles_for(&pages, &["c/a"]);
  let (card, other) = (b[0].card.as_ref().unwrap(), &b[0].conflicts[0]);
  assert_eq!(other.page_id, "c/b");
  assert_eq!(other.scope.as_deref(), Some("offline mode"));
  assert!(card.warnings.iter().any(|w| w == "applies outside scope: offline mode (user resolution)"));
  assert!(!card.historical && !other.historical);
  assert_eq!(b[0].resolution.as_ref().unwrap().relation, "applies_under");
  assert!(b[0].unresolved.is_empty());
  // The selected claim retrieved as the card: scope on the card.
  let b = bundles_for(&pages, &["c/b"]);
  assert_eq!(b[0].card.as_ref().unwrap().scope.as_deref(), Some("offline mode"));
  assert!(b[0].conflicts[0].warnings.iter().any(|w| w.starts_with("applies outside scope")));
}

/// Spec "Feedback" fault: a kill between the page rename and the event append leaves the page
/// (authoritative) and no event; a rebuild replays the record's `conflict_selected` exactly once
/// and never once its event (named or, from older streams, unnamed) is in the stream.
#[test]
fn a_resolution_without_its_event_is_replayed_exactly_once() {
  use crate::feedback::{events, projection, record};
  let (_t, p) = vault();
  let out = resolve_in(&p, None, &req("concepts/a", "concepts/b", "supersedes")).unwrap();
  let named = feedback_events(&p);
  assert_eq!(named.len(), 1);
  assert_eq!(named[0].resolution.as_deref(), Some(out.resolution.id.as_str()), "the event names its record");
  let vid = crate::vault::config::ensure_vault_id(&p).unwrap();
  let one_choice = |proj: &projection::Projection| {
    let now = crate::retrieve::trust::now_secs();
    let s = proj.global.get(&format!("{vid}\u{1f}concepts/a")).copied().unwrap_or_default();
    // Unclamped value of the page's conflict choices now: 0.02 per choice.
    s.signal * (-((now - 1_735_689_600) as f64) / crate::feedback::HALF_LIFE_SECS).exp2() / 0.02
  };
  // With its event: nothing is replayed.
  let rb = record::rebuild_feedback(&p).unwrap();
  assert!(rb.replayed.is_empty(), "{:?}", rb.replayed);
  // The state a kill after the page rename leaves: the page, no event.
  std::fs::write(events::events_path(&p.meta), b"{\"kind\":\"observe\",\"slug\":\"x\"}\n").unwrap();
  for _ in 0..2 {
    let rb = record::rebuild_feedback(&p).unwrap();
    assert_eq!(rb.replayed, vec![out.resolution.id.clone()]);
    let proj = projection::current(&p.meta, crate::retrieve::trust::now_secs());
    assert!(
      (one_choice(&proj) - 1.0).abs() < 1e-3,
      "counted once, rebuild after rebuild: {}",
      one_choice(&proj)
    );
  }
  // Appends after the rebuild keep the replayed choice (incremental fold), still once.
  let e = record::conflict_selected_event(&vid, "concepts/b", None);
  events::append_events(&p.meta, &[e], crate::events_lock::EXPLICIT_WAIT).unwrap();
  let proj = projection::current(&p.meta, crate::retrieve::trust::now_secs());
  assert!((one_choice(&proj) - 1.0).abs() < 1e-3);
  // An older stream's unnamed conflict_selected for the selected page counts as the record's.
  let mut legacy = record::conflict_selected_event(&vid, "concepts/a", None);
  legacy.resolution = None;
  events::append_events(&p.meta, &[legacy], crate::events_lock::EXPLICIT_WAIT).unwrap();
  let rb = record::rebuild_feedback(&p).unwrap();
  assert!(rb.replayed.is_empty(), "{:?}", rb.replayed);
  let proj = projection::current(&p.meta, crate::retrieve::trust::now_secs());
  assert!((one_choice(&proj) - 1.0).abs() < 1e-3);
}

/// Issue 43, small item c: the fallback for filesystems without hard links never replaces an
/// existing file (it used to `rename` over the target).
#[test]
fn the_no_hard_link_fallback_never_overwrites() {
  let t = tempfile::tempdir().unwrap();
  let target = t.path().join("r.md");
  std::fs::write(&target, "existing").unwrap();
  let e = super::write_new(&target, b"new").unwrap_err();
  assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
  assert_eq!(std::fs::read_to_string(&target).unwrap(), "existing");
  let fresh = t.path().join("s.md");
  super::write_new(&fresh, b"new").unwrap();
  assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "new");
}
