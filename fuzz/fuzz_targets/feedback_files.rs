//! libFuzzer entry of [`llm_wiki_fuzz::feedback_files`] (`cargo +nightly fuzz run --features libfuzzer feedback_files`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| llm_wiki_fuzz::feedback_files::run(data));
