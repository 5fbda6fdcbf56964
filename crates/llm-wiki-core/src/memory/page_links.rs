//! What the index stores about one page's links (in its manifest entry): outbound body links,
//! typed relations, page-level findings and the resolution record a page carries.

use serde::{Deserialize, Serialize};

use super::links::{extract_links, ExtractedLinks, LinkList, MAX_LINKS_PER_PAGE};
use super::relations::{parse_relations, RelationIssue, TypedRelation};
use super::resolve::record::{parse_resolution, ResolutionRecord};
use crate::vault::Page;

/// Links and relations of one page, as stored in its manifest entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageLinks {
  /// Outbound body links (deduplicated, at most [`MAX_LINKS_PER_PAGE`]), packed.
  #[serde(skip_serializing_if = "LinkList::is_empty", default)]
  pub links: LinkList,
  /// Relations that passed the page-level rules (unknown types included, inert).
  #[serde(skip_serializing_if = "Vec::is_empty", default)]
  pub relations: Vec<TypedRelation>,
  /// Page-level lint findings.
  #[serde(skip_serializing_if = "Vec::is_empty", default)]
  pub issues: Vec<RelationIssue>,
  /// The user decision recorded by a conflict-resolution page ([`super::resolve`]). Boxed: few
  /// pages carry one, and every manifest entry (100k in memory at once) would hold its 192 bytes.
  #[serde(skip_serializing_if = "Option::is_none", default)]
  pub resolution: Option<Box<ResolutionRecord>>,
}

impl PageLinks {
  /// True when the page has no link, relation or issue.
  pub fn is_empty(&self) -> bool {
    self.links.is_empty() && self.relations.is_empty() && self.issues.is_empty() && self.resolution.is_none()
  }

  /// Links and relations of a parsed page.
  pub fn of_page(page: &Page) -> PageLinks {
    Self::of_page_with(page, extract_links(&page.body, page.body_start_line))
  }

  /// [`PageLinks::of_page`] with the links of its body already extracted (from the chunker's
  /// Markdown pass, [`super::links::LinkCollector`]).
  pub fn of_page_with(page: &Page, extracted: ExtractedLinks) -> PageLinks {
    let value = page.extensions.iter().find(|(k, _)| k == "relations").map(|(_, v)| v);
    let (relations, mut issues) = parse_relations(&page.id, value);
    let (resolution, resolution_issues) = parse_resolution(page);
    issues.extend(resolution_issues);
    if extracted.dropped > 0 {
      issues.push(RelationIssue::new(
        "page_links_truncated",
        format!(
          "{} more distinct links than the {MAX_LINKS_PER_PAGE} kept per page were ignored",
          extracted.dropped
        ),
      ));
    }
    PageLinks {
      links: LinkList::from_raw(&extracted.links),
      relations,
      issues,
      resolution: resolution.map(Box::new),
    }
  }
}
