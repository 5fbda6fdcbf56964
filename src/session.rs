//! The host session a recall belongs to, as JavaScript passes it: the engine's `SessionRecall`
//! (declared and checked there), named `RecallSession` in `index.d.ts`.

pub use llm_wiki_core::retrieve::recall::SessionRecall as RecallSession;
