//! Evaluation: datasets (BEIR-style directories, the pi fixture), TREC run files, IR metrics
//! and a deterministic synthetic vault generator for scale runs.

pub mod datasets;
pub mod metrics;
pub mod synth;
pub mod trec;
