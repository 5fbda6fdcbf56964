//! The machine the process runs on, as lock markers record it.

/// This machine's host name (empty when unknown).
pub fn host_name() -> String {
  hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default()
}
