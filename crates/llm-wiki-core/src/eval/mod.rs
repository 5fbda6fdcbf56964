//! Evaluation: datasets (BEIR-style directories, the pi fixture), TREC run files, IR metrics,
//! a deterministic synthetic vault generator for scale runs, the benchmark harness and the
//! reliability harnesses (crash injection, concurrency soak).

pub mod bench;
pub mod datasets;
pub mod metrics;
pub mod reliability;
pub mod synth;
pub mod trec;
