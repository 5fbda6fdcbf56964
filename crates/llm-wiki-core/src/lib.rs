//! Retrieval engine of llm-wiki: validated Markdown vaults → heading-aware chunks → a
//! crash-safe per-vault index store → lexical (BM25) and dense retrieval → fusion with
//! calibrated confidence. Pure Rust; the Node binding is a thin layer on top.
#![warn(missing_docs)]
#![allow(missing_docs)] // TODO: tighten once the public surface settles

pub mod analysis;
pub mod chunk;
#[cfg(feature = "cli")]
pub mod cli;
pub mod error;
pub mod eval;
pub mod fsutil;
pub mod models;
pub mod retrieve;
pub mod store;
pub mod vault;

pub use error::{Error, Result};
