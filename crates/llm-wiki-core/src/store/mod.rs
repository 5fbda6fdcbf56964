//! One index store per vault under `paths.qmd` (`<meta>/qmd/` by default; layout in [`layout`]):
//! lock, manifest, lexical index, vectors, the `CURRENT` swap, status, the reindex that ties them
//! together, start-up recovery and the migration from the TypeScript release's QMD store.

pub mod ann;
pub mod embedding;
pub mod generation;
pub mod job;
pub mod layout;
pub mod lexical;
pub mod lock;
pub mod manifest;
pub mod migrate;
pub mod model_choice;
pub mod owner;
pub mod recover;
pub mod reindex;
pub mod spill;
pub mod state;
pub mod status;
pub mod swap;
pub mod terms;
pub mod vectors;

pub use crate::util::CancelFlag;
pub use layout::StoreLayout;
pub use reindex::{reindex_vault, reindex_wiki, ReindexOptions, ReindexResult, WikiReindexResult};
pub use status::{read_index_status, IndexState, IndexStatus};
pub use terms::{Component, IndexIssue, Progress, ProgressSink, ReindexProgressEvent, Scope};
