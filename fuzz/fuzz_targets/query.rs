//! libFuzzer entry of [`llm_wiki_fuzz::query`] (`cargo +nightly fuzz run --features libfuzzer query`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_wiki_fuzz::query::run(data));
