//! Memory, not a list: typed relations (validated), the per-vault link graph, memory bundles
//! assembled with one typed hop under a context budget, and zoom-out / path over links.

pub mod bundle;
pub mod explore;
pub mod graph;
pub mod graph_input;
pub mod graph_query;
pub mod link_targets;
pub mod links;
pub mod lint;
pub mod orientation;
pub mod page_links;
pub mod recall;
pub mod relations;
pub mod resolve;

pub use bundle::{MemoryBundle, MemoryItem};
pub use recall::{recall_memory, MemoryOptions, MemoryResponse};
