//! libFuzzer entry of [`llm_wiki_fuzz::ann_file`] (`cargo +nightly fuzz run --features libfuzzer ann_file`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_wiki_fuzz::ann_file::run(data));
