//! Retrieval engine of llm-wiki: validated Markdown vaults → heading-aware chunks → a
//! crash-safe per-vault index store → lexical (BM25) and dense retrieval → fusion with
//! calibrated confidence. Pure Rust; the Node binding is a thin layer on top.
#![warn(missing_docs)]

pub mod analysis;
pub mod audit;
pub mod chunk;
pub mod error;
pub mod events_lock;
pub mod feedback;
pub(crate) mod fnv;
pub mod fsutil;
pub mod intern;
pub mod memory;
pub mod models;
pub mod pool;
pub mod retrieve;
pub mod store;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod util;
pub mod vault;
pub mod watch;

pub use error::{Error, Result};
