//! Downloading a model from a Hugging Face-style file server (`{base}/{repo}/resolve/{rev}/{path}`)
//! into a model directory, with resume of partial files, sha256 verification and progress.
//! Checksums come from the spec when known, else from the hub's `x-linked-etag` header (the
//! sha256 of LFS files, sent on the redirect), and are recorded in the written manifest.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::manifest::{FileInfo, ModelDir, ModelKind, ModelManifest, Pooling};
use crate::error::{Error, Result};
use crate::store::CancelFlag;

/// One file to fetch.
#[derive(Debug, Clone)]
pub struct RemoteFile {
  /// Path inside the repository (e.g. `onnx/model_quint8_avx2.onnx`).
  pub remote: String,
  /// File name in the model directory (`model.onnx`, `tokenizer.json`).
  pub local: String,
  /// Expected sha256, when known in advance.
  pub sha256: Option<String>,
}

/// What to download and how to describe it.
#[derive(Debug, Clone)]
pub struct DownloadSpec {
  /// Server root, default `https://huggingface.co` (`HF_ENDPOINT` overrides the default).
  pub base_url: String,
  pub repo: String,
  pub revision: String,
  pub files: Vec<RemoteFile>,
  /// Manifest fields of the model (files are filled in from the download).
  pub id: String,
  pub kind: ModelKind,
  pub dims: usize,
  pub pooling: Pooling,
  pub max_length: usize,
  pub normalize: bool,
  pub license: String,
}

/// Progress of a download.
#[derive(Debug, Clone, PartialEq)]
pub struct DownloadProgress {
  pub file: String,
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

/// The default embedder on the hub: all-MiniLM-L6-v2, int8-quantized ONNX for this CPU family.
pub fn default_embed_spec() -> DownloadSpec {
  let (remote, variant) = if cfg!(target_arch = "aarch64") {
    ("onnx/model_qint8_arm64.onnx", "qint8-arm64")
  } else {
    ("onnx/model_quint8_avx2.onnx", "quint8-avx2")
  };
  DownloadSpec {
    base_url: default_base(),
    repo: "sentence-transformers/all-MiniLM-L6-v2".into(),
    revision: "main".into(),
    files: vec![
      RemoteFile { remote: remote.into(), local: "model.onnx".into(), sha256: None },
      RemoteFile { remote: "tokenizer.json".into(), local: "tokenizer.json".into(), sha256: None },
    ],
    id: format!("sentence-transformers/all-MiniLM-L6-v2:{variant}"),
    kind: ModelKind::Embed,
    dims: 384,
    pooling: Pooling::Mean,
    max_length: 256,
    normalize: true,
    license: "Apache-2.0".into(),
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

fn is_sha256(s: &str) -> bool {
  s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Resolve redirects by hand so the hub's checksum header (sent on the redirect) is kept.
fn open(
  agent: &ureq::Agent,
  url: &str,
  offset: u64,
  checksum: &mut Option<String>,
) -> Result<ureq::http::Response<ureq::Body>> {
  let mut url = url.to_string();
  for _ in 0..8 {
    let mut req = agent.get(&url);
    if offset > 0 {
      req = req.header("Range", &format!("bytes={offset}-"));
    }
    let resp = req.call().map_err(|e| Error::Download(format!("{url}: {e}")))?;
    if checksum.is_none() {
      *checksum = header(&resp, "x-linked-etag").filter(|v| is_sha256(v));
    }
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

/// Download one file to `dest` (via `dest.part`, resumed when present). Returns its sha256.
pub fn download_file(
  url: &str,
  dest: &Path,
  expected: Option<&str>,
  cancel: &CancelFlag,
  progress: &mut dyn FnMut(u64, Option<u64>),
) -> Result<String> {
  let part = PathBuf::from(format!("{}.part", dest.display()));
  let mut offset = std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
  let agent = agent();
  let mut checksum = expected.map(str::to_lowercase);
  let resp = open(&agent, url, offset, &mut checksum)?;
  if resp.status().as_u16() == 200 && offset > 0 {
    offset = 0; // the server ignored the range: start over
  }
  let total = header(&resp, "content-length").and_then(|v| v.parse::<u64>().ok()).map(|n| n + offset);
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
  if let Some(want) = &checksum {
    if !actual.eq_ignore_ascii_case(want) {
      let _ = std::fs::remove_file(&part);
      return Err(Error::Download(format!(
        "{url}: sha256 {actual} does not match {want}; the file was discarded"
      )));
    }
  }
  std::fs::rename(&part, dest).map_err(|e| Error::io("rename", dest, e))?;
  Ok(actual)
}

/// Download every file of `spec` into `dir` and write its manifest; an existing complete and
/// verified directory is returned without network access.
pub fn download_model(
  spec: &DownloadSpec,
  dir: &Path,
  cancel: &CancelFlag,
  progress: &mut dyn FnMut(DownloadProgress),
) -> Result<ModelDir> {
  if let Ok(existing) = ModelDir::open(dir) {
    if existing.manifest.id == spec.id && existing.verify().is_ok() {
      return Ok(existing);
    }
  }
  std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
  let mut files = BTreeMap::new();
  for f in &spec.files {
    let url =
      format!("{}/{}/resolve/{}/{}", spec.base_url.trim_end_matches('/'), spec.repo, spec.revision, f.remote);
    let dest = dir.join(&f.local);
    let name = f.local.clone();
    let sha = download_file(&url, &dest, f.sha256.as_deref(), cancel, &mut |d, t| {
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
    query_prefix: String::new(),
    document_prefix: String::new(),
    normalize: spec.normalize,
    max_batch: None,
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
          let sha = crate::store::manifest::sha256_hex(body);
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

  fn spec(base: &str) -> DownloadSpec {
    DownloadSpec {
      base_url: base.to_string(),
      repo: "org/model".into(),
      files: vec![
        RemoteFile { remote: "onnx/model.onnx".into(), local: "model.onnx".into(), sha256: None },
        RemoteFile { remote: "tokenizer.json".into(), local: "tokenizer.json".into(), sha256: None },
      ],
      ..default_embed_spec()
    }
  }

  #[test]
  fn downloads_with_progress_and_manifest() {
    let model: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let (base, _) =
      serve(vec![("model.onnx", model.clone()), ("tokenizer.json", b"{\"x\":1}".to_vec())], false);
    let t = tempfile::tempdir().unwrap();
    let mut events = Vec::new();
    let dir = download_model(&spec(&base), t.path(), &CancelFlag::new(), &mut |p| events.push(p)).unwrap();
    assert_eq!(std::fs::read(t.path().join("model.onnx")).unwrap(), model);
    assert_eq!(dir.manifest.files["model.onnx"].sha256, crate::store::manifest::sha256_hex(&model));
    dir.verify().unwrap();
    let last = events.iter().rfind(|e| e.file == "model.onnx").unwrap();
    assert_eq!((last.downloaded, last.total), (model.len() as u64, Some(model.len() as u64)));
    // A second call finds the verified directory and does not download again.
    download_model(&spec("http://127.0.0.1:9"), t.path(), &CancelFlag::new(), &mut |_| {}).unwrap();
  }

  #[test]
  fn resumes_a_cut_transfer() {
    let model: Vec<u8> = (0..200_000u32).map(|i| (i % 13) as u8).collect();
    let (base, hits) = serve(vec![("model.onnx", model.clone())], true);
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("model.onnx");
    let url = format!("{base}/org/model/resolve/main/onnx/model.onnx");
    let first = download_file(&url, &dest, None, &CancelFlag::new(), &mut |_, _| {});
    assert_eq!(first.unwrap_err().code(), "model_download_failed");
    let partial = std::fs::metadata(format!("{}.part", dest.display())).unwrap().len();
    assert!(partial > 0 && partial < model.len() as u64);
    download_file(&url, &dest, None, &CancelFlag::new(), &mut |_, _| {}).unwrap();
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
      download_file(&url, &dest, Some(&"0".repeat(64)), &CancelFlag::new(), &mut |_, _| {}).unwrap_err();
    assert_eq!(err.code(), "model_download_failed");
    assert!(!dest.exists());
    let missing = format!("{base}/org/model/resolve/main/nope.bin");
    assert!(download_file(&missing, &t.path().join("x"), None, &CancelFlag::new(), &mut |_, _| {}).is_err());
    let cancel = CancelFlag::new();
    cancel.cancel();
    assert_eq!(
      download_file(&url, &t.path().join("y"), None, &cancel, &mut |_, _| {}).unwrap_err().code(),
      "cancelled"
    );
  }
}
