//! Memory bundles annotated with the vault's decisions: active resolutions laid over a page's
//! typed neighbours, historical pages marked, unresolved contradictions named.

use super::decisions::UnresolvedConflict;
use crate::memory::bundle::{Linked, MemoryBundle, MemoryItem};
use crate::memory::graph::LinkGraph;

/// Typed neighbours of `page` with its active resolutions laid over them: each resolution adds
/// (or replaces) the link to its partner with the user's relation and direction; a declared
/// relation it overrides stays visible as `declared` (audit).
pub(crate) fn overlay(g: &LinkGraph, page: &str, mut conflicts: Vec<Linked>) -> Vec<Linked> {
  for r in g.decisions.resolutions.active_for(page) {
    let (partner, direction) =
      if r.selected == page { (&r.other, "outgoing") } else { (&r.selected, "incoming") };
    let mut declared: Vec<String> = Vec::new();
    conflicts.retain(|l| {
      if &l.page == partner {
        declared.push(format!("{} ({})", l.relation, l.direction));
        false
      } else {
        true
      }
    });
    // Evidence-type declared relations to the partner (supports / derived_from) are left alone.
    conflicts.push(Linked {
      page: partner.clone(),
      relation: r.relation.clone(),
      direction,
      scope: r.scope.clone(),
      resolution: Some(r.id.clone()),
      declared: (!declared.is_empty()).then(|| declared.join(", ")),
    });
  }
  conflicts
}

fn push_unique(v: &mut Vec<String>, s: String) {
  if !v.contains(&s) {
    v.push(s);
  }
}

/// Mark a bundle's items from the vault's decisions: historical pages (`historical`, warning),
/// `cites_superseded` warnings, `bundle.resolution` (the active resolution between the seed and
/// one of its competing claims) and `bundle.unresolved` (`contradicts` pairs without one).
pub(crate) fn annotate_bundle(b: &mut MemoryBundle, g: Option<&LinkGraph>) {
  let Some(g) = g else {
    return;
  };
  let d = &g.decisions;
  let mark = |i: &mut MemoryItem| {
    if d.superseded.contains_key(&i.page_id) {
      i.historical = true;
    }
    for w in d.warnings(&i.page_id) {
      push_unique(&mut i.warnings, w);
    }
  };
  b.card.iter_mut().chain(b.evidence.iter_mut()).chain(b.conflicts.iter_mut()).for_each(mark);
  let seed = match (&b.card, b.evidence.first()) {
    (Some(c), _) => c.clone(),
    (None, Some(e)) if e.relation == "unpromoted" => e.clone(),
    _ => return,
  };
  for c in &b.conflicts {
    match d.resolutions.active_for_pair(&seed.page_id, &c.page_id) {
      Some(r) if b.resolution.is_none() => {
        b.resolution = d.resolutions.describe(&r.id).map(|mut cr| {
          cr.vault_id = seed.vault_id.clone();
          cr
        });
      }
      Some(_) => {}
      None if c.relation == "contradicts" => b.unresolved.push(UnresolvedConflict {
        vault: seed.vault.clone(),
        vault_id: seed.vault_id.clone(),
        page_ids: vec![seed.page_id.clone(), c.page_id.clone()],
        relation: c.relation.clone(),
      }),
      None => {}
    }
  }
}
