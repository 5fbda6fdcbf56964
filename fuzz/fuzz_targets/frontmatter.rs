//! libFuzzer entry of [`llm_wiki_fuzz::frontmatter`] (`cargo +nightly fuzz run --features libfuzzer frontmatter`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_wiki_fuzz::frontmatter::run(data));
