//! Retrieval: query normalization, per-vault candidate lists, confidence, fusion, modes, recall.

pub mod calibrate;
pub mod confidence;
pub mod dense;
pub mod engine;
#[cfg(feature = "evidence")]
pub mod evidence;
pub mod fusion;
pub mod lexical;
pub mod modes;
pub mod query;
pub mod ranking;
pub mod recall;
pub mod rescore;
pub mod salience;
pub mod trust;

pub use modes::{RetrievalMode, SubQuery};
pub use recall::{
  recall_wiki, RecallOptions, RecallPolicy, RecallResponse, RecallResult, Scoring, VaultMode,
};
