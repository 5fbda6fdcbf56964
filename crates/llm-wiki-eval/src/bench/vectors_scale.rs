//! Vectors at scale (`bench vectors-scale`): a deterministic synthetic vault of N pages (the
//! generator's page size set by `--max-bytes`), then either
//! * `--embed`: the real vector phase over every chunk, sampled every 10 s (chunks done, RSS,
//!   vector bytes on disk) so memory and per-batch cost can be read over the run; `--embed-budget`
//!   stops it cleanly (committed batches are kept) and the report extrapolates, labelled; or
//! * `--synthetic-vectors`: every live chunk gets a seeded pseudo-random unit vector written
//!   through the store's own segment writer (`store::embedding::install_vectors`) under the real
//!   embedder's id, so the store holds the real number of vectors; then warm lexical and hybrid
//!   recall are timed with real query embeddings (rankings are meaningless, latency is real), and
//!   the exact scan alone, sequential and parallel.
//!
//! `--scan-rows N` adds a store-less scan measurement: N synthetic rows in segments of 2^18,
//! exact search sequential vs parallel (what a vault of N chunks costs in the scan stage).

use llm_wiki_core::store::embedding::install_vectors;
use llm_wiki_core::store::vectors::{write_segment, VectorIndex, VectorManifest};
use llm_wiki_core::store::CancelFlag;

use super::*;

/// Options of [`run_vectors_scale`].
#[derive(Clone)]
pub struct VectorsScaleOptions {
  pub pages: usize,
  /// Largest page file of the generator (smaller = fewer chunks per page).
  pub max_bytes: usize,
  pub seed: u64,
  /// Synthetic queries.
  pub queries: usize,
  /// Run the real vector phase over every chunk.
  pub embed: bool,
  /// Stop the vector phase after this many seconds (committed batches are kept).
  pub embed_budget_secs: Option<f64>,
  /// Give every chunk a synthetic vector and time warm recall.
  pub synthetic: bool,
  /// Also time the exact scan over this many synthetic rows (no vault).
  pub scan_rows: Option<usize>,
  pub common: BenchCommon,
}

/// Seeded pseudo-random unit vector (xorshift on `key ^ seed`; integer-driven, same on every CPU).
fn synthetic_unit(key: u64, seed: u64, dims: usize) -> Vec<f32> {
  let mut x = (key ^ seed.rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
  let v: Vec<f32> = (0..dims)
    .map(|_| {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      (x >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    })
    .collect();
  let n = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
  v.into_iter().map(|a| a / n).collect()
}

/// One sample of the vector phase.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbedSample {
  secs: f64,
  done: u64,
  total: u64,
  rss_bytes: Option<u64>,
  vector_bytes: u64,
}

fn rate(a: &EmbedSample, b: &EmbedSample) -> f64 {
  let dt = b.secs - a.secs;
  if dt > 0.0 {
    (b.done - a.done) as f64 / dt
  } else {
    0.0
  }
}

/// Timed exact scans (k = 64, as the dense list asks at depth ≤ 16) of `queries` over `idx`.
fn scan_latency(idx: &VectorIndex, queries: &[Vec<f32>]) -> Value {
  let mut out = Map::new();
  for (name, parallel) in [("sequential", false), ("parallel", true)] {
    for q in queries.iter().take(5) {
      idx.search_with(q, 64, parallel);
    }
    let samples: Vec<f64> = queries
      .iter()
      .map(|q| {
        let t = Instant::now();
        std::hint::black_box(idx.search_with(q, 64, parallel));
        ms_since(t)
      })
      .collect();
    out.insert(name.into(), json!(latency(&samples)));
  }
  out.insert("rows".into(), json!(idx.live_rows()));
  out.insert("threads".into(), json!(rayon::current_num_threads()));
  Value::Object(out)
}

fn scan_line(label: &str, s: &Value) -> String {
  let f = |m: &str, p: &str| s[m][p].as_f64().unwrap_or(f64::NAN);
  format!(
    "| {label} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
    s["rows"],
    f("sequential", "p50Ms"),
    f("sequential", "p95Ms"),
    f("parallel", "p50Ms"),
    f("parallel", "p95Ms"),
    s["threads"]
  )
}

/// Run the vectors-at-scale benchmark (see the module docs).
pub fn run_vectors_scale(opts: &VectorsScaleOptions) -> Result<BenchOutput> {
  let common = &opts.common;
  if opts.pages == 0 {
    return Err(Error::invalid("--pages must be at least 1"));
  }
  let context = machine_context();
  let n = opts.pages;
  let synth = SynthOptions { max_bytes: opts.max_bytes, ..SynthOptions::new(n, opts.seed) };
  let name = format!("vectors-scale-{n}-{}b", opts.max_bytes);
  let tmp = common.temp(&name)?;
  let (paths, generation) = generate_timed(tmp.path(), &synth, common)?;
  let mut ix = build_lexical(&paths, &name, common)?;
  let chunks = ix.report.chunks as u64;
  let mut doc = json!({
    "schema": SCHEMA,
    "kind": "vectors-scale",
    "context": context,
    "pages": n,
    "maxBytes": opts.max_bytes,
    "seed": opts.seed,
    "chunks": chunks,
    "chunksPerPage": r3(chunks as f64 / n as f64),
    "generation": generation,
    "lexical": ix.report.lexical,
  });
  let mut md = String::new();
  let _ = writeln!(
    md,
    "# Vectors at scale: {n} synthetic pages (max {} bytes, seed {})\n",
    opts.max_bytes, opts.seed
  );
  md.push_str(&context_markdown(&context));
  let _ = writeln!(
    md,
    "- {n} pages, {chunks} chunks ({:.2} per page); cold lexical index {:.0} ms, peak RSS {} MiB\n",
    chunks as f64 / n as f64,
    ix.report.lexical.ms,
    fmt_mib(ix.report.lexical.peak_rss_bytes)
  );

  let embedder = models::embedder()?;
  let (model, dims) = (embedder.id().to_string(), embedder.dims());

  if opts.embed {
    let samples: Arc<Mutex<Vec<EmbedSample>>> = Arc::default();
    let cancel = CancelFlag::new();
    let started = Instant::now();
    let layout = StoreLayout::new(paths.retrieval());
    let sink: ProgressSink = {
      let (samples, cancel, budget, log) =
        (samples.clone(), cancel.clone(), opts.embed_budget_secs, common.log.clone());
      let layout = layout.clone();
      Arc::new(move |p: Progress| {
        let (Some(done), Some(total)) = (p.current, p.total) else { return };
        if p.stage != "vectors" {
          return;
        }
        let secs = started.elapsed().as_secs_f64();
        let mut s = samples.lock().unwrap_or_else(|e| e.into_inner());
        if s.last().is_some_and(|l| secs - l.secs < 10.0 && done < total) {
          return;
        }
        let vector_bytes = layout.current().map_or(0, |c| dir_size(&c.vectors_dir()));
        s.push(EmbedSample { secs: r3(secs), done, total, rss_bytes: current_rss_bytes(), vector_bytes });
        log(&format!("embedding {done}/{total} after {secs:.0} s"));
        if budget.is_some_and(|b| secs >= b) {
          cancel.cancel();
        }
      })
    };
    reset_peak_rss();
    let ropts = ReindexOptions {
      scope: Scope::Changed,
      components: vec![Component::Vectors],
      progress: Some(sink),
      cancel: cancel.clone(),
      ..Default::default()
    };
    let result = reindex_vault(&paths, &ropts);
    let secs = started.elapsed().as_secs_f64();
    let peak = peak_rss_bytes();
    let disk = disk_usage(&paths);
    let samples = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let complete = result.ok;
    let generated = result.vectors.generated as u64;
    let third = samples.len() / 3;
    let (early, late) = if third >= 1 {
      (
        rate(&samples[0], &samples[third]),
        rate(&samples[samples.len() - 1 - third], &samples[samples.len() - 1]),
      )
    } else {
      (0.0, 0.0)
    };
    let overall = generated as f64 / secs.max(1e-9);
    let remaining = chunks.saturating_sub(generated);
    let extrapolated_secs =
      if complete { secs } else { secs + remaining as f64 / late.max(overall).max(1e-9) };
    doc["embed"] = json!({
      "complete": complete,
      "cancelledAfterBudget": !complete && cancel.is_cancelled(),
      "errors": result.errors.iter().map(|e| format!("{}: {}", e.code, e.message)).collect::<Vec<_>>(),
      "secs": r3(secs),
      "generated": generated,
      "chunksPerSec": r3(overall),
      "chunksPerSecFirstThird": r3(early),
      "chunksPerSecLastThird": r3(late),
      "extrapolatedSecsForAllChunks": r3(extrapolated_secs),
      "peakRssBytes": peak,
      "disk": disk,
      "samples": samples,
    });
    let _ = writeln!(md, "## Full embedding (`--embed`)\n");
    let _ = writeln!(
      md,
      "- {}: {generated} of {chunks} chunks in {secs:.0} s ({overall:.1} chunks/s; first third {early:.1}, \
       last third {late:.1}); peak RSS {} MiB; vectors on disk {:.1} MiB, whole store {:.1} MiB",
      if complete { "complete" } else { "**stopped by --embed-budget** (committed batches kept)" },
      fmt_mib(peak),
      mib(disk.vectors_bytes),
      mib(disk.total_bytes)
    );
    if !complete {
      let _ = writeln!(
        md,
        "- **Extrapolated** (not measured) time for all {chunks} chunks at the last third's rate: {:.0} min",
        extrapolated_secs / 60.0
      );
    }
    md.push_str("\n| s | chunks done | RSS MiB | vectors MiB |\n|---|---|---|---|\n");
    for s in &samples {
      let _ = writeln!(
        md,
        "| {:.0} | {} | {} | {:.1} |",
        s.secs,
        s.done,
        fmt_mib(s.rss_bytes),
        mib(s.vector_bytes)
      );
    }
    md.push('\n');
  }

  if opts.synthetic {
    common.say(format!("{name}: writing synthetic {dims}-dim vectors for {chunks} chunks"));
    let t = Instant::now();
    reset_peak_rss();
    let seed = opts.seed;
    let written = install_vectors(&paths, (&model, dims), 1 << 16, &mut |k| synthetic_unit(k, seed, dims))?;
    let install_ms = ms_since(t);
    let install_peak = peak_rss_bytes();
    let disk = disk_usage(&paths);
    common.say(format!("{name}: {written} vectors written in {install_ms:.0} ms"));
    let queries = synth_queries(&synth, opts.queries);
    let qpairs: Vec<(String, String)> = queries.iter().map(|(q, t, _)| (q.clone(), t.clone())).collect();
    ix.embedder = Some(embedder.clone());
    let mut qcommon = common.clone();
    qcommon.modes = vec![RetrievalMode::Lexical, RetrievalMode::Hybrid];
    let lexical = run_queries(&paths, &qpairs, RetrievalMode::Lexical, 10, false, &qcommon)?;
    let hybrid = run_queries(&paths, &qpairs, RetrievalMode::Hybrid, 10, false, &qcommon)?;
    // The scan alone over the store's vectors, with the real query embeddings.
    let gen = Generation::open_live(&StoreLayout::new(paths.retrieval()))?;
    let vm = gen.commit.vectors.clone().ok_or_else(|| Error::Index("no vectors after install".into()))?;
    let idx = VectorIndex::open(&gen.dir.vectors_dir(), &vm, &gen.manifest.chunk_keys())?;
    let qvecs: Vec<Vec<f32>> =
      queries.iter().map(|(q, _, _)| embedder.embed_query(q)).collect::<Result<_>>()?;
    let scan = scan_latency(&idx, &qvecs);
    drop(idx);
    release_reader(&paths);
    let (ll, hl) = (ModeRun::latency_of(&lexical.ranked), ModeRun::latency_of(&hybrid.ranked));
    let stages: Vec<String> = hybrid.stage_medians().iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
    doc["synthetic"] = json!({
      "vectors": written,
      "segments": vm.segments.len(),
      "installMs": r3(install_ms),
      "installPeakRssBytes": install_peak,
      "disk": disk,
      "lexical": lexical.cost_json(),
      "hybrid": hybrid.cost_json(),
      "hybridStageMediansMs": hybrid.stage_medians().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
      "scan": scan,
    });
    let _ = writeln!(md, "## Warm recall with the real vector count (`--synthetic-vectors`)\n");
    let _ = writeln!(
      md,
      "- {written} synthetic vectors ({dims} dims, model id {model}) written through the segment writer in \
       {install_ms:.0} ms ({} segment(s)); vectors on disk {:.1} MiB, store {:.1} MiB. Rankings against \
       random vectors are meaningless; the latency is that of the real work (query embedding, exact scan of \
       every row, lexical list, fusion).\n",
      vm.segments.len(),
      mib(disk.vectors_bytes),
      mib(disk.total_bytes)
    );
    md.push_str(
      "| mode | p50 ms | p95 ms | max ms | query-phase peak (start) RSS MiB |\n|---|---|---|---|---|\n",
    );
    for (run, l) in [(&lexical, &ll), (&hybrid, &hl)] {
      let _ = writeln!(
        md,
        "| {} | {:.2} | {:.2} | {:.2} | {} |",
        run.mode.as_str(),
        l.p50_ms,
        l.p95_ms,
        l.max_ms,
        fmt_peak(run.peak_rss, run.start_rss)
      );
    }
    let _ = writeln!(md, "\nhybrid stages, p50 ms: {}\n", stages.join(" · "));
    md.push_str(
      "| scan | rows | sequential p50 ms | sequential p95 ms | parallel p50 ms | parallel p95 ms | rayon threads |\n\
       |---|---|---|---|---|---|---|\n",
    );
    let _ = writeln!(md, "{}\n", scan_line("store vectors, real queries", &doc["synthetic"]["scan"]));
  }

  if let Some(rows) = opts.scan_rows {
    common.say(format!("scan: {rows} synthetic rows"));
    let stmp = common.temp("vectors-scan")?;
    let dir = stmp.path().join("vectors");
    let mut segments = Vec::new();
    let seg_rows = 1usize << 18;
    for (i, start) in (0..rows).step_by(seg_rows).enumerate() {
      let batch: Vec<(u64, Vec<f32>)> = (start..rows.min(start + seg_rows))
        .map(|k| (k as u64, synthetic_unit(k as u64, opts.seed, dims)))
        .collect();
      segments.push(write_segment(&dir, &format!("s{i}.vec"), dims, &batch)?);
    }
    let vm = VectorManifest { model: model.clone(), dims, segments };
    let live: HashSet<u64> = (0..rows as u64).collect();
    let idx = VectorIndex::open(&dir, &vm, &live)?;
    let qvecs: Vec<Vec<f32>> = (0..opts.queries.clamp(20, 200) as u64)
      .map(|k| synthetic_unit(u64::MAX - k, opts.seed, dims))
      .collect();
    let scan = scan_latency(&idx, &qvecs);
    let _ = writeln!(md, "## Exact scan alone (`--scan-rows {rows}`)\n");
    md.push_str(
      "| scan | rows | sequential p50 ms | sequential p95 ms | parallel p50 ms | parallel p95 ms | rayon threads |\n\
       |---|---|---|---|---|---|---|\n",
    );
    let _ = writeln!(md, "{}\n", scan_line("synthetic rows and queries", &scan));
    doc["scanOnly"] = scan;
    drop(idx);
    drop(stmp);
  }

  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  let json_path = common.out.join(format!("{name}.json"));
  write_json_file(&json_path, &doc)?;
  out.files.push(json_path);
  finish_report(&mut out, &common.out, &name, md)?;
  drop(ix);
  drop(tmp);
  Ok(out)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn synthetic_vectors_are_seeded_units() {
    let a = synthetic_unit(7, 1, 384);
    assert_eq!(a, synthetic_unit(7, 1, 384));
    assert_ne!(a, synthetic_unit(8, 1, 384));
    assert_ne!(a, synthetic_unit(7, 2, 384));
    let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "{norm}");
  }
}
