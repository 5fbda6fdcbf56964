//! The ground floor: small helpers every other module may use and that use nothing of the engine
//! but its error type — timestamps, hashing, cancellation, the host's name, the `{code, message}` diagnostic.

pub mod cancel;
pub mod diagnostic;
pub mod file_lock;
pub mod hash;
pub mod host;
pub mod num;
pub mod time;

pub use cancel::CancelFlag;
