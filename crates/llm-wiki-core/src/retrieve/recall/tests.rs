//! Overall mode and fallbacks of a recall.

use super::*;

fn vm(vault: &'static str, mode: RetrievalMode) -> VaultMode {
  VaultMode { vault_id: vault.into(), vault, mode, fallback_from: None, reason: None }
}

#[test]
fn overall_mode_is_the_least_capable_answering_vault() {
  use RetrievalMode::*;
  assert_eq!(overall_mode(Quality, &[]), Quality);
  assert_eq!(overall_mode(Quality, &[vm("project", Quality), vm("personal", Lexical)]), Lexical);
  assert_eq!(overall_mode(Quality, &[vm("project", Lexical), vm("personal", Quality)]), Lexical);
  assert_eq!(overall_mode(Adaptive, &[vm("project", Quality), vm("personal", Hybrid)]), Hybrid);
  assert_eq!(overall_mode(Hybrid, &[vm("project", Hybrid)]), Hybrid);
}

#[test]
fn fallbacks() {
  use RetrievalMode::*;
  assert!(!is_fallback(Lexical, Lexical));
  assert!(is_fallback(Hybrid, Lexical));
  assert!(!is_fallback(Adaptive, Hybrid));
  assert!(!is_fallback(Adaptive, Quality));
  assert!(is_fallback(Adaptive, Lexical));
  assert!(is_fallback(Quality, Hybrid));
  assert!(!is_fallback(Quality, Quality));
}
