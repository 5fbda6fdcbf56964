//! `llm-wiki-retrieval` development binary: the user commands plus the benchmark and reliability
//! harnesses (the npm package's `bin` has the user commands only).
fn main() {
  // This binary runs from a source checkout: the workspace's `.models/` (where
  // `scripts/fetch_models.py` builds the models) is a model root when present, searched after
  // LLM_WIKI_MODELS_DIR and before the user cache, like the npm entry point does.
  let checkout_models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.models");
  if checkout_models.is_dir() {
    llm_wiki_core::models::add_model_roots([checkout_models]);
  }
  std::process::exit(llm_wiki_eval::cli::run(std::env::args().skip(1)));
}
