//! The `download` command: a model fetched into a directory, with a progress bar.

use std::io::Write;

use indicatif::{ProgressBar, ProgressStyle};
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::models::fetch;

use crate::DownloadArgs;

impl DownloadArgs {
  /// The engine's download request, with the `--file` arguments parsed.
  pub(crate) fn request(&self) -> Result<fetch::DownloadRequest> {
    let files = match self.files.is_empty() {
      true => None,
      false => Some(self.files.iter().map(|f| parse_remote_file(f)).collect::<Result<Vec<_>>>()?),
    };
    Ok(fetch::DownloadRequest {
      base_url: self.base_url.clone(),
      repo: self.repo.clone(),
      revision: self.revision.clone(),
      files,
      id: self.id.clone(),
      kind: self.kind.clone(),
      dims: self.dims,
      pooling: self.pooling.clone(),
      max_length: self.max_length,
      max_batch: self.max_batch,
      positive_class: self.positive_class,
      query_prefix: self.query_prefix.clone(),
      document_prefix: self.document_prefix.clone(),
      chunk_tokens: self.chunk_tokens,
    })
  }
}

/// `REMOTE:LOCAL:SHA256` of `download --file` (split from the right: a local name and a
/// checksum never contain a colon).
fn parse_remote_file(arg: &str) -> Result<fetch::RemoteFileRequest> {
  let mut parts = arg.rsplitn(3, ':');
  match (parts.next(), parts.next(), parts.next()) {
    (Some(sha256), Some(local), Some(remote)) if !remote.is_empty() && !local.is_empty() => {
      Ok(fetch::RemoteFileRequest { remote: remote.into(), local: local.into(), sha256: Some(sha256.into()) })
    }
    _ => Err(Error::invalid(format!("--file {arg:?} must be REMOTE:LOCAL:SHA256"))),
  }
}

/// `download [flags]`: fetch the model, verify it, print where it is and its settings.
pub(crate) fn download(args: DownloadArgs, out: &mut impl Write) -> Result<()> {
  let spec = fetch::DownloadSpec::from_request(args.request()?)?;
  let json = args.json;
  let dir = match args.dir {
    Some(d) => std::path::absolute(&d).map_err(|e| Error::io("resolve", &d, e))?,
    None => fetch::default_download_dir(),
  };
  let bar = if json { ProgressBar::hidden() } else { ProgressBar::new(0) };
  bar.set_style(
    ProgressStyle::with_template("{prefix:>16} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}")
      .unwrap_or_else(|_| ProgressStyle::default_bar())
      .progress_chars("=> "),
  );
  let model = fetch::download_model(&spec, &dir, &llm_wiki_core::store::CancelFlag::new(), &mut |p| {
    bar.set_prefix(p.file);
    // Byte counts are never negative.
    bar.set_length(p.total.unwrap_or(p.downloaded).unsigned_abs());
    bar.set_position(p.downloaded.unsigned_abs());
  });
  bar.finish_and_clear();
  let model = model?;
  let m = &model.manifest;
  if json {
    let report = serde_json::json!({ "dir": model.dir, "manifest": m });
    writeln!(out, "{}", serde_json::to_string_pretty(&report).unwrap_or_default()).ok();
  } else {
    let chunks = m.chunk_tokens.map_or("engine default".to_string(), |n| n.to_string());
    writeln!(
      out,
      "{} ready in {}: {}, {} dims, chunks {chunks}, query prefix {:?}, document prefix {:?}",
      m.id,
      model.dir.display(),
      format!("{:?}", m.kind).to_lowercase(),
      m.dims,
      m.query_prefix,
      m.document_prefix
    )
    .ok();
  }
  Ok(())
}
