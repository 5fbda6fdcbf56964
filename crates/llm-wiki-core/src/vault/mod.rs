//! The vault model: where pages live, which files are pages, and what a valid page is.

pub mod config;
pub mod diagnostic;
pub mod discover;
pub mod frontmatter;
pub mod init;
pub mod page;
pub mod paths;
pub mod read;

pub use diagnostic::{Diagnostic, Severity};
pub use discover::{discover_pages, Discovery, PageFile};
pub use page::{Page, PageMeta, PageModel, Relation, Role};
pub use paths::VaultPaths;
