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
  let err = download_model(&spec(&base, b"genuine"), t.path(), &CancelFlag::new(), &mut |_| {}).unwrap_err();
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
  assert_eq!((last.downloaded, last.total), (model.len() as i64, Some(model.len() as i64)));
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
  let changed = DownloadSpec { query_prefix: Some("q: ".into()), chunk_tokens: Some(128), ..offline.clone() };
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
    files: Some(vec![RemoteFileRequest {
      remote: "m.onnx".into(),
      local: "model.onnx".into(),
      sha256: Some(sha(b"m")),
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
  download_file(&url, &dest, &sha(&model), MAX_UNDECLARED_BYTES, &CancelFlag::new(), &mut |_, _| {}).unwrap();
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
