//! libFuzzer entry of [`llm_wiki_fuzz::store_files`] (`cargo +nightly fuzz run --features libfuzzer store_files`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_wiki_fuzz::store_files::run(data));
