//! libFuzzer entry of [`llm_wiki_fuzz::journal`] (`cargo +nightly fuzz run --features libfuzzer journal`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_wiki_fuzz::journal::run(data));
