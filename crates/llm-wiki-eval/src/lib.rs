//! Evaluation of the llm-wiki engine, kept out of the published addon: datasets (BEIR-style
//! directories, the pi fixture), TREC files, IR metrics, a deterministic synthetic vault generator
//! for scale runs, the benchmark suites and the reliability harnesses (crash injection,
//! concurrency soak), plus the development binary's command line.

pub mod bench;
pub mod cli;
pub mod datasets;
pub mod metrics;
pub mod reliability;
pub mod synth;
pub mod trec;
