//! Locating and loading the ONNX Runtime shared library (never linked at build time). Order:
//! the explicit path option → `ORT_DYLIB_PATH` → candidates supplied by the caller (the Node
//! layer passes the `onnxruntime-node` package's library when installed) → `runtime.json`
//! recorded by the model fetch step in a model root. One ORT environment per process.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;

use crate::error::{Error, Result};
use crate::fsutil::{read_json, JsonFile};

/// Where `scripts/fetch_models.py` records the library it extracted.
pub const RUNTIME_RECORD: &str = "runtime/runtime.json";

#[derive(serde::Deserialize)]
struct RuntimeRecord {
  path: PathBuf,
}

/// First existing library among the sources, in priority order.
pub fn locate(explicit: Option<&Path>, candidates: &[PathBuf], model_roots: &[PathBuf]) -> Result<PathBuf> {
  let mut tried: Vec<String> = Vec::new();
  let mut consider = |p: PathBuf, what: &str| -> Option<PathBuf> {
    if p.is_file() {
      Some(p)
    } else {
      tried.push(format!("{what}: {}", p.display()));
      None
    }
  };
  if let Some(p) = explicit {
    return consider(p.to_path_buf(), "option")
      .ok_or_else(|| Error::RuntimeUnavailable(format!("{} does not exist", p.display())));
  }
  if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|v| !v.is_empty()) {
    if let Some(found) = consider(PathBuf::from(p), "ORT_DYLIB_PATH") {
      return Ok(found);
    }
  }
  for c in candidates {
    if let Some(found) = consider(c.clone(), "candidate") {
      return Ok(found);
    }
  }
  for root in model_roots {
    let record = root.join(RUNTIME_RECORD);
    if let JsonFile::Valid(r) = read_json::<RuntimeRecord>(&record) {
      let p = if r.path.is_absolute() { r.path } else { root.join("runtime").join(r.path) };
      if let Some(found) = consider(p, "runtime.json") {
        return Ok(found);
      }
    }
  }
  Err(Error::RuntimeUnavailable(if tried.is_empty() {
    "no ONNX Runtime library configured (set ORT_DYLIB_PATH, install onnxruntime-node, or run the model fetch step)".into()
  } else {
    format!("no ONNX Runtime library found (tried {})", tried.join(", "))
  }))
}

struct Loaded {
  path: PathBuf,
  env: std::result::Result<Environment, String>,
}

fn loaded() -> &'static Mutex<Option<Loaded>> {
  static L: OnceLock<Mutex<Option<Loaded>>> = OnceLock::new();
  L.get_or_init(Default::default)
}

/// The process-wide ORT environment, loading `lib` on first use. A later call with a different
/// library keeps the first one (ORT cannot be loaded twice) and says so in the error.
pub fn environment(lib: &Path) -> Result<Environment> {
  let mut guard = loaded().lock().unwrap_or_else(|p| p.into_inner());
  if guard.is_none() {
    let env = std::panic::catch_unwind(|| {
      ort::init_from(lib).map_err(|e| e.to_string()).and_then(|b| {
        b.with_name("llm-wiki-retrieval").with_telemetry(false).build().map_err(|e| e.to_string())
      })
    })
    .unwrap_or_else(|_| Err("ONNX Runtime panicked while loading".to_string()));
    *guard = Some(Loaded { path: lib.to_path_buf(), env });
  }
  let l = guard.as_ref().expect("set above");
  match &l.env {
    Ok(env) => Ok(env.clone()),
    Err(msg) => Err(Error::RuntimeUnavailable(format!("cannot load {}: {msg}", l.path.display()))),
  }
}
