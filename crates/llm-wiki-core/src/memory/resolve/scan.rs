//! Resolution records read from the pages on disk (authoritative where the index may lag).

use unicode_normalization::UnicodeNormalization;

use super::record::{parse_resolution, ResolutionRecord, CATEGORY, FOLDER};
use crate::vault::{Page, VaultPaths};

/// Every resolution record on disk under `wiki/analyses/` as (page id, record) (authoritative:
/// the index may lag). `rebuildFeedback` replays a record whose `conflict_selected` is missing.
pub fn scan_records(paths: &VaultPaths) -> Vec<(String, ResolutionRecord)> {
  let dir = paths.wiki.join(FOLDER);
  let mut out = Vec::new();
  for e in walkdir::WalkDir::new(&dir).follow_links(false).sort_by_file_name().into_iter().flatten() {
    let name = e.file_name().to_string_lossy();
    if !e.file_type().is_file() || !name.ends_with(".md") {
      continue;
    }
    let Ok(rel) = e.path().strip_prefix(&paths.wiki) else { continue };
    let rel = rel.to_string_lossy().replace('\\', "/");
    let id = rel[..rel.len() - 3].nfc().collect::<String>();
    let Ok(bytes) =
      crate::vault::read::read_page_at(&paths.wiki, e.path(), crate::vault::read::MAX_PAGE_BYTES)
    else {
      continue;
    };
    if !bytes.windows(CATEGORY.len()).any(|w| w == CATEGORY.as_bytes()) {
      continue;
    }
    if let Ok((page, _)) = Page::from_file_bytes(&id, e.path().to_path_buf(), &bytes) {
      if let (Some(r), _) = parse_resolution(&page) {
        out.push((id, r));
      }
    }
  }
  out
}
