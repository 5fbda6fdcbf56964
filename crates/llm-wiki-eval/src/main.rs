//! `llm-wiki-retrieval` development binary: the user commands plus the benchmark and reliability
//! harnesses (the npm package's `bin` has the user commands only).
fn main() {
  std::process::exit(llm_wiki_eval::cli::run(std::env::args().skip(1)));
}
