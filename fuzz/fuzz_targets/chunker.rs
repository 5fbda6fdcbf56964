//! libFuzzer entry of [`llm_wiki_fuzz::chunker`] (`cargo +nightly fuzz run --features libfuzzer chunker`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_wiki_fuzz::chunker::run(data));
