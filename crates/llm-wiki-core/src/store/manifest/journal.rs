//! A manifest generation on disk: loading it (the newest base at or below it, then its journal's
//! records), reading the records since a generation, and writing the next one (a journal record,
//! or a new base once the journal has grown).

use super::*;

/// A journal may grow to this fraction of its base (plus [`JOURNAL_SLACK`]) before the next page
/// commit writes a new base instead: replaying it stays cheaper than a quarter of a base load, and
/// a checkpoint (O(vault)) happens once per that many bytes of changes.
const JOURNAL_FRACTION: u64 = 4;
/// Journal bytes always allowed before a checkpoint (small vaults: one base, many records).
const JOURNAL_SLACK: u64 = 64 * 1024;

impl Manifest {
  /// Load generation `generation` of the store directory `dir`: the newest base at or below it,
  /// then its journal's records through `generation` (records after it are ignored: they belong
  /// to a run that never committed). The generation must be present exactly.
  pub fn load_generation(dir: &StoreDir, generation: u64, expected_vault: Option<&str>) -> Result<Manifest> {
    let base = base_generation(dir, generation)
      .ok_or_else(|| Error::ManifestInvalid(format!("manifest of generation {generation} is missing")))?;
    let base_path = dir.manifest_file(base);
    let mut m = Manifest::load(&base_path, expected_vault)?;
    if m.generation != base {
      return Err(Error::ManifestInvalid(format!(
        "{} holds generation {}",
        base_path.display(),
        m.generation
      )));
    }
    let base_len = std::fs::metadata(&base_path).map(|md| md.len()).unwrap_or(0);
    let mut len = 0u64;
    if base < generation {
      let jpath = dir.journal_file(base);
      let mut bytes = Vec::new();
      std::fs::File::open(&jpath)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::ManifestInvalid(format!("{}: {e}", jpath.display())))?;
      let mut at = 0usize;
      // Stop at the asked generation: later records belong to a run that never committed and
      // may be anything (an earlier number included).
      while m.generation != generation {
        let Some(nl) = bytes[at..].iter().position(|b| *b == b'\n') else { break };
        let line = &bytes[at..at + nl];
        // A line that does not parse can only be the torn tail of an uncommitted record.
        let Ok(d) = serde_json::from_slice::<ManifestDelta>(line) else { break };
        if d.generation > generation {
          break;
        }
        if d.generation <= m.generation {
          return Err(Error::ManifestInvalid(format!(
            "{}: record of generation {} after generation {}",
            jpath.display(),
            d.generation,
            m.generation
          )));
        }
        for (id, e) in &d.set {
          validate_entry(id, e)?;
        }
        m.apply(&d);
        at += nl + 1;
      }
      len = at as u64;
      if m.generation != generation {
        return Err(Error::ManifestInvalid(format!(
          "{} has no record of generation {generation}",
          jpath.display()
        )));
      }
    }
    m.journal = JournalPos { base, base_len, len };
    Ok(m)
  }

  /// The journal records that take `self` (a generation of `dir` as loaded or written, at
  /// [`Manifest::journal`]) to the later generation `generation`, and the position they end at:
  /// what a reader holding `self` applies instead of loading the whole manifest again. `None`
  /// when that cannot be done exactly — `generation` is not later, it is read from another base
  /// (a checkpoint), the base file changed, the journal is shorter than `self`'s position, a
  /// record does not parse or is out of order, an entry is invalid, or no record of
  /// `generation` is there — and the caller loads the generation whole
  /// ([`Manifest::load_generation`], which reports the error when there is one).
  ///
  /// Exact because a journal's bytes up to a committed generation never change: a writer cuts
  /// off only records after the last commit (at or after `self`'s) before it appends.
  pub fn journal_since(&self, dir: &StoreDir, generation: u64) -> Option<(Vec<ManifestDelta>, JournalPos)> {
    let pos = self.journal;
    if generation <= self.generation {
      return None;
    }
    let base = dir.manifest_generations().into_iter().rfind(|g| *g <= generation)?;
    if base != pos.base || std::fs::metadata(dir.manifest_file(base)).ok()?.len() != pos.base_len {
      return None;
    }
    let mut f = std::fs::File::open(dir.journal_file(base)).ok()?;
    if f.metadata().ok()?.len() < pos.len {
      return None;
    }
    f.seek(SeekFrom::Start(pos.len)).ok()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    let (mut records, mut at, mut last) = (Vec::new(), 0usize, self.generation);
    while last < generation {
      let nl = bytes[at..].iter().position(|b| *b == b'\n')?;
      let d = serde_json::from_slice::<ManifestDelta>(&bytes[at..at + nl]).ok()?;
      if d.generation <= last || d.generation > generation {
        return None;
      }
      if d.set.iter().any(|(id, e)| validate_entry(id, e).is_err()) {
        return None;
      }
      last = d.generation;
      at += nl + 1;
      records.push(d);
    }
    Some((records, JournalPos { base, base_len: pos.base_len, len: pos.len + at as u64 }))
  }

  /// Write this manifest (already at its new generation) as the next generation of `dir`:
  /// `delta` appended to the journal of the base of `prior` when the journal stays small, else
  /// (and without `prior` or `delta`) a new base. Files and records of generations after
  /// `prior` (left by a run that did not commit) are removed first. Fsynced before returning;
  /// the caller's tantivy commit then publishes it. Returns the new [`Manifest::journal`] for
  /// the caller to store (the manifest is only read: other threads may read it meanwhile).
  pub fn write_generation(
    &self,
    dir: &StoreDir,
    prior: Option<JournalPos>,
    delta: Option<&ManifestDelta>,
  ) -> Result<JournalPos> {
    if let Some(p) = prior {
      for g in dir.manifest_generations().into_iter().filter(|g| *g > p.base && *g >= self.generation) {
        let _ = std::fs::remove_file(dir.manifest_file(g));
        let _ = std::fs::remove_file(dir.journal_file(g));
      }
    }
    if let (Some(p), Some(d)) = (prior, delta) {
      let mut line =
        serde_json::to_vec(d).map_err(|e| Error::Index(format!("serialize manifest record: {e}")))?;
      line.push(b'\n');
      if p.len + line.len() as u64 <= p.base_len / JOURNAL_FRACTION + JOURNAL_SLACK {
        let jpath = dir.journal_file(p.base);
        let existed = jpath.exists();
        let write = || -> std::io::Result<()> {
          let mut f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&jpath)?;
          // Cut off records of runs that never committed.
          f.set_len(p.len)?;
          f.seek(SeekFrom::Start(p.len))?;
          f.write_all(&line)?;
          f.sync_all()
        };
        write().map_err(|e| Error::io("append to", &jpath, e))?;
        if !existed {
          crate::fsutil::sync_dir(&dir.dir);
        }
        return Ok(JournalPos { base: p.base, base_len: p.base_len, len: p.len + line.len() as u64 });
      }
    }
    let path = dir.manifest_file(self.generation);
    self.save(&path)?;
    let _ = std::fs::remove_file(dir.journal_file(self.generation));
    let base_len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    Ok(JournalPos { base: self.generation, base_len, len: 0 })
  }
}
