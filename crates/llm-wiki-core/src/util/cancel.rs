//! Cooperative cancellation of long operations (reindex, embedding, downloads, recall).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Cooperative cancellation flag, checked between batches.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
  /// A flag that is not cancelled.
  pub fn new() -> Self {
    Self::default()
  }
  /// A flag sharing `flag`.
  pub fn from_arc(flag: Arc<AtomicBool>) -> Self {
    CancelFlag(flag)
  }
  /// Request cancellation (seen by every clone).
  pub fn cancel(&self) {
    self.0.store(true, Ordering::SeqCst);
  }
  /// True once cancelled.
  pub fn is_cancelled(&self) -> bool {
    self.0.load(Ordering::SeqCst)
  }
  /// `Err(Cancelled)` once cancelled.
  pub fn check(&self) -> Result<()> {
    if self.is_cancelled() {
      Err(Error::Cancelled)
    } else {
      Ok(())
    }
  }
}
