//! What JavaScript hands the engine besides its options: thread counts and abort signals.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use llm_wiki_core::util::CancelFlag;
use napi::bindgen_prelude::*;

/// A thread count from JS: 0 or absent keeps the engine's default; anything else is clamped to
/// 1..=the number of logical CPUs (a `-1` arrives as 4294967295).
pub(crate) fn thread_count(requested: Option<u32>) -> usize {
  match requested {
    None | Some(0) => 0,
    Some(n) => llm_wiki_core::models::clamp_threads(n as usize),
  }
}

/// A cancel flag tied to an optional AbortSignal (set from the JS thread on abort).
pub(crate) fn cancel_flag(signal: Option<&AbortSignal>, already_aborted: bool) -> CancelFlag {
  let flag = Arc::new(AtomicBool::new(already_aborted));
  if let Some(s) = signal {
    let f = flag.clone();
    s.on_abort(move || f.store(true, std::sync::atomic::Ordering::SeqCst));
  }
  CancelFlag::from_arc(flag)
}
