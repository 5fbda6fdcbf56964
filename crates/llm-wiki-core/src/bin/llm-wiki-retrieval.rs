fn main() {
  std::process::exit(llm_wiki_core::cli::run(std::env::args().skip(1)));
}
