//! Evaluation: datasets (BEIR-style directories, the pi fixture), TREC run files, IR metrics,
//! a deterministic synthetic vault generator for scale runs, and the benchmark harness.

pub mod bench;
pub mod datasets;
pub mod metrics;
pub mod synth;
pub mod trec;
