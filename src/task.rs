//! One generic AsyncTask for every export: the work runs on a libuv worker thread, panics are
//! caught there (a panic crossing the FFI boundary would abort Node), and failures reject the
//! promise with the engine's `err.code`.

use napi::bindgen_prelude::*;
use napi::{Env, Task};

use crate::error::{Failure, Outcome};

type Work<T> = Box<dyn FnOnce() -> Outcome<T> + Send>;

/// A unit of work producing `T` on a worker thread.
pub struct Job<T: Send + 'static> {
  work: Option<Work<T>>,
  failure: Option<Failure>,
}

impl<T: Send + 'static> Job<T> {
  pub fn new(work: impl FnOnce() -> Outcome<T> + Send + 'static) -> AsyncTask<Job<T>>
  where
    T: ToNapiValue + TypeName,
  {
    AsyncTask::new(Job { work: Some(Box::new(work)), failure: None })
  }
}

impl<T: Send + ToNapiValue + TypeName + 'static> Task for Job<T> {
  type Output = T;
  type JsValue = T;

  fn compute(&mut self) -> napi::Result<T> {
    let work = self.work.take().expect("job runs once");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|payload| {
      let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
      Err(Failure { code: "internal_panic".into(), message: format!("internal error (panic): {msg}") })
    });
    outcome.map_err(|f| {
      let e = napi::Error::from_reason(f.message.clone());
      self.failure = Some(f);
      e
    })
  }

  fn resolve(&mut self, _env: Env, output: T) -> napi::Result<T> {
    Ok(output)
  }

  fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<T> {
    match self.failure.take() {
      Some(f) => Err(f.to_napi(&env)),
      None => Err(err),
    }
  }
}
