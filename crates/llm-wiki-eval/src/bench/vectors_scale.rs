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
//! With `--synthetic-vectors` the ANN index (`store::ann`) is then built through the vector
//! writer (`LLM_WIKI_ANN=on` for that pass) and measured against the exact scan back to back:
//! hybrid recall latency in alternating rounds (exact, ANN, exact, ANN), the dense search alone
//! (k = 64, as the dense list asks), and recall@10 of the ANN top 10 against the exact top 10,
//! for the real query embeddings and for queries drawn near stored vectors.
//! `--vector-clusters C` draws the synthetic vectors around C centres (0: uniform, the worst case
//! for a graph index; real embeddings are clustered).
//!
//! `--scan-rows N` adds a store-less scan measurement: N synthetic rows in segments of 2^18,
//! exact search sequential vs parallel (what a vault of N chunks costs in the scan stage).

use llm_wiki_core::store::ann::AnnMode;
use llm_wiki_core::store::embedding::install_vectors;
use llm_wiki_core::store::vectors::{write_segment, VectorIndex, VectorManifest};
use llm_wiki_core::store::CancelFlag;
use llm_wiki_core::testkit::synthetic_unit;

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
  /// Synthetic vectors around this many centres (0 = uniformly random).
  pub vector_clusters: usize,
  pub common: BenchCommon,
}

/// Synthetic vector of chunk `key`: uniform ([`synthetic_unit`]) or, with `clusters` > 0, the
/// unit vector of a seeded centre (chosen by the key) plus 0.6 × a uniform perturbation of the
/// same norm.
fn synthetic_vector(key: u64, seed: u64, dims: usize, clusters: usize) -> Vec<f32> {
  if clusters == 0 {
    return synthetic_unit(key, seed, dims);
  }
  let c = key.wrapping_mul(0x2545_F491_4F6C_DD1D) % clusters as u64;
  let centre = synthetic_unit(u64::MAX / 2 - c, seed, dims);
  let noise = synthetic_unit(key, seed, dims);
  let v: Vec<f32> = centre.iter().zip(&noise).map(|(a, b)| a + 0.6 * b).collect();
  let n = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
  v.into_iter().map(|a| a / n).collect()
}

/// Fraction of `exact`'s ids found in `approx`.
fn overlap(approx: &[(u64, f32)], exact: &[(u64, f32)]) -> f64 {
  let e: HashSet<u64> = exact.iter().map(|h| h.0).collect();
  approx.iter().filter(|h| e.contains(&h.0)).count() as f64 / e.len().max(1) as f64
}

/// Dense search alone, exact vs ANN, on `queries`: latency (k = 64, interleaved per query so load
/// hits both alike) and mean recall@10 / @64 of the ANN lists against the exact ones.
fn ann_vs_exact(idx: &VectorIndex, queries: &[Vec<f32>]) -> Value {
  for q in queries.iter().take(5) {
    idx.search_exact(q, 64);
    idx.search_ann(q, 64);
  }
  let (mut te, mut ta, mut r10, mut r64) = (Vec::new(), Vec::new(), 0.0, 0.0);
  for q in queries {
    let t = Instant::now();
    let e64 = std::hint::black_box(idx.search_exact(q, 64));
    te.push(ms_since(t));
    let t = Instant::now();
    let a64 = std::hint::black_box(idx.search_ann(q, 64).unwrap_or_default());
    ta.push(ms_since(t));
    r64 += overlap(&a64, &e64);
    let (e10, a10) = (idx.search_exact(q, 10), idx.search_ann(q, 10).unwrap_or_default());
    r10 += overlap(&a10, &e10);
  }
  let n = queries.len().max(1) as f64;
  let (le, la) = (latency(&te), latency(&ta));
  json!({
    "queries": queries.len(),
    "exact": le,
    "ann": la,
    "p50Ratio": r3(la.p50_ms / le.p50_ms.max(1e-9)),
    "recallAt10": r3(r10 / n),
    "recallAt64": r3(r64 / n),
  })
}

fn ann_line(label: &str, a: &Value) -> String {
  let f = |m: &str, p: &str| a[m][p].as_f64().unwrap_or(f64::NAN);
  format!(
    "| {label} | {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.3} | {:.3} |",
    a["queries"],
    f("exact", "p50Ms"),
    f("exact", "p95Ms"),
    f("ann", "p50Ms"),
    f("ann", "p95Ms"),
    a["recallAt10"].as_f64().unwrap_or(f64::NAN),
    a["recallAt64"].as_f64().unwrap_or(f64::NAN),
  )
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

/// The head of a scan table ([`scan_line`] rows).
const SCAN_TABLE_HEAD: &str =
  "| scan | rows | sequential p50 ms | sequential p95 ms | parallel p50 ms | parallel p95 ms | rayon threads |\n\
   |---|---|---|---|---|---|---|\n";

/// The vault under test: its synthetic pages, lexical index and name.
struct ScaleVault<'a> {
  opts: &'a VectorsScaleOptions,
  name: String,
  synth: SynthOptions,
  paths: VaultPaths,
  ix: Indexed,
  chunks: u64,
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
  let ix = build_lexical(&paths, &name, common)?;
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
  let mut v = ScaleVault { opts, name, synth, paths, ix, chunks };
  if opts.embed {
    doc["embed"] = v.embed(&mut md);
  }
  if opts.synthetic {
    doc["synthetic"] = v.synthetic(&embedder, &mut md)?;
  }
  if let Some(rows) = opts.scan_rows {
    doc["scanOnly"] = scan_only(opts, rows, (embedder.id(), embedder.dims()), &mut md)?;
  }
  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  record_json(&mut out, common.out.join(format!("{}.json", v.name)), &doc)?;
  finish_report(&mut out, &common.out, &v.name, md)?;
  drop(v);
  drop(tmp);
  Ok(out)
}

/// The vector phase's progress sink: a sample every 10 s (and at the end) into `samples`, a log
/// line each, and the cancellation once `budget` seconds have passed.
fn embed_sampler(
  layout: StoreLayout,
  started: Instant,
  samples: Arc<Mutex<Vec<EmbedSample>>>,
  cancel: CancelFlag,
  budget: Option<f64>,
  log: Log,
) -> ProgressSink {
  Arc::new(move |e: ReindexProgressEvent| {
    let p = e.progress;
    let (Some(done), Some(total)) = (p.current.map(u64::from), p.total.map(u64::from)) else { return };
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
}

/// Early and late embedding rate (chunks/s over the first and the last third of the samples).
fn thirds(samples: &[EmbedSample]) -> (f64, f64) {
  let third = samples.len() / 3;
  if third >= 1 {
    (
      rate(&samples[0], &samples[third]),
      rate(&samples[samples.len() - 1 - third], &samples[samples.len() - 1]),
    )
  } else {
    (0.0, 0.0)
  }
}

impl ScaleVault<'_> {
  /// `--embed`: the real vector phase over every chunk. Its section goes to `md`; returns its
  /// JSON.
  fn embed(&self, md: &mut String) -> Value {
    let (opts, paths, chunks) = (self.opts, &self.paths, self.chunks);
    let samples: Arc<Mutex<Vec<EmbedSample>>> = Arc::default();
    let cancel = CancelFlag::new();
    let started = Instant::now();
    let layout = StoreLayout::new(paths.retrieval());
    let sink = embed_sampler(
      layout,
      started,
      samples.clone(),
      cancel.clone(),
      opts.embed_budget_secs,
      opts.common.log.clone(),
    );
    reset_peak_rss();
    let ropts = ReindexOptions {
      scope: Scope::Changed,
      components: vec![Component::Vectors],
      progress: Some(sink),
      cancel: cancel.clone(),
      ..Default::default()
    };
    let result = reindex_vault(paths, &ropts);
    let secs = started.elapsed().as_secs_f64();
    let peak = peak_rss_bytes();
    let disk = disk_usage(paths);
    let samples = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let complete = result.ok;
    let generated = result.vectors.generated as u64;
    let (early, late) = thirds(&samples);
    let overall = generated as f64 / secs.max(1e-9);
    let remaining = chunks.saturating_sub(generated);
    let extrapolated_secs =
      if complete { secs } else { secs + remaining as f64 / late.max(overall).max(1e-9) };
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
    json!({
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
    })
  }

  /// Write a synthetic vector for every chunk through the segment writer (`ann`: `LLM_WIKI_ANN`
  /// for the pass); the vectors written, ms and peak RSS.
  fn install(&self, (model, dims): (&str, usize), ann: &str) -> Result<(u64, f64, Option<u64>)> {
    let (seed, clusters) = (self.opts.seed, self.opts.vector_clusters);
    std::env::set_var("LLM_WIKI_ANN", ann);
    reset_peak_rss();
    let t = Instant::now();
    let written = install_vectors(&self.paths, (model, dims), 1 << 16, &mut |k| {
      synthetic_vector(k, seed, dims, clusters)
    })?;
    Ok((written, ms_since(t), peak_rss_bytes()))
  }

  /// `--synthetic-vectors`: the real vector count (synthetic vectors), warm lexical and hybrid
  /// recall, the ANN index against the exact scan. Its section goes to `md`; returns its JSON.
  fn synthetic(&mut self, embedder: &Arc<Embedder>, md: &mut String) -> Result<Value> {
    let common = &self.opts.common;
    let (name, chunks) = (&self.name, self.chunks);
    let (model, dims) = (embedder.id().to_string(), embedder.dims());
    common.say(format!("{name}: writing synthetic {dims}-dim vectors for {chunks} chunks"));
    // The exact store first (as before this index existed); the ANN pass is timed on its own.
    let (written, install_ms, install_peak) = self.install((&model, dims), "off")?;
    let disk = disk_usage(&self.paths);
    common.say(format!("{name}: {written} vectors written in {install_ms:.0} ms"));
    let queries = synth_queries(&self.synth, self.opts.queries);
    let qpairs: Vec<(String, String)> = queries.iter().map(|(q, t, _)| (q.clone(), t.clone())).collect();
    self.ix.embedder = Some(embedder.clone());
    let mut qcommon = common.clone();
    qcommon.modes = vec![RetrievalMode::Lexical, RetrievalMode::Hybrid];
    let lexical = run_queries(&self.paths, &qpairs, RetrievalMode::Lexical, 10, false, &qcommon)?;
    let hybrid = run_queries(&self.paths, &qpairs, RetrievalMode::Hybrid, 10, false, &qcommon)?;
    // ANN: built by the vector writer's own maintenance pass (no vector is missing).
    release_reader(&self.paths);
    let (_, ann_build_ms, ann_build_peak) = self.install((&model, dims), "on")?;
    let ann_bytes = {
      let gen = Generation::open_live(&StoreLayout::new(self.paths.retrieval()))?;
      let a = gen.commit.vectors.as_ref().and_then(|v| v.ann.clone());
      a.and_then(|a| std::fs::metadata(gen.dir.vectors_dir().join(a.file)).ok()).map_or(0, |m| m.len())
    };
    common.say(format!("{name}: ANN index built in {ann_build_ms:.0} ms ({:.1} MiB)", mib(ann_bytes)));
    let rounds = self.hybrid_rounds(&qpairs, &qcommon)?;
    let dense = self.dense_alone(&queries, embedder)?;
    let doc = json!({
      "vectors": written,
      "segments": dense.segments,
      "installMs": r3(install_ms),
      "installPeakRssBytes": install_peak,
      "disk": &disk,
      "lexical": lexical.cost_json(),
      "hybrid": hybrid.cost_json(),
      "hybridStageMediansMs": hybrid.stage_medians().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
      "scan": dense.scan,
      "vectorClusters": self.opts.vector_clusters,
      "ann": {
        "buildMs": r3(ann_build_ms),
        "buildPeakRssBytes": ann_build_peak,
        "fileBytes": ann_bytes,
        "diagnostic": dense.ann_diagnostic,
        "hybridRounds": rounds,
        "denseRealQueries": dense.ann_real,
        "denseNearQueries": dense.ann_near,
      },
    });
    let figures = InstallFigures { written, install_ms, disk, ann_build_ms, ann_build_peak, ann_bytes };
    synthetic_markdown(md, &doc, (&model, dims), [&lexical, &hybrid], &figures, self.opts.vector_clusters);
    Ok(doc)
  }

  /// Hybrid recall, exact and ANN in alternating rounds (the machine's load drifts).
  fn hybrid_rounds(&self, qpairs: &[(String, String)], qcommon: &BenchCommon) -> Result<Vec<Value>> {
    let mut rounds = Vec::new();
    for round in 0..2 {
      let mut r = Map::new();
      for (label, mode) in [("exact", "off"), ("ann", "on")] {
        release_reader(&self.paths);
        std::env::set_var("LLM_WIKI_ANN", mode);
        let run = run_queries(&self.paths, qpairs, RetrievalMode::Hybrid, 10, false, qcommon)?;
        let l = ModeRun::latency_of(&run.ranked);
        qcommon.say(format!(
          "{}: hybrid {label} round {round}: p50 {:.2} p95 {:.2} ms",
          self.name, l.p50_ms, l.p95_ms
        ));
        r.insert(label.into(), json!({ "latency": l, "stageMediansMs": run.stage_medians().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>() }));
      }
      rounds.push(Value::Object(r));
    }
    release_reader(&self.paths);
    Ok(rounds)
  }

  /// The dense search alone over the store's vectors: the exact scan with the real query
  /// embeddings, and the ANN lists against the exact ones for those and for queries near stored
  /// vectors.
  fn dense_alone(&self, queries: &[(String, String, String)], embedder: &Embedder) -> Result<DenseAlone> {
    let (seed, clusters, dims) = (self.opts.seed, self.opts.vector_clusters, embedder.dims());
    let gen = Generation::open_live(&StoreLayout::new(self.paths.retrieval()))?;
    let vm = gen.commit.vectors.clone().ok_or_else(|| Error::Index("no vectors after install".into()))?;
    let live = gen.manifest.chunk_keys();
    let idx = VectorIndex::open_with(&gen.dir.vectors_dir(), &vm, &live, AnnMode::On)?;
    std::env::remove_var("LLM_WIKI_ANN");
    let qvecs: Vec<Vec<f32>> =
      queries.iter().map(|(q, _, _)| embedder.embed_query(q)).collect::<Result<_>>()?;
    let scan = scan_latency(&idx, &qvecs);
    let ann_diagnostic = idx.ann_diagnostic();
    let ann_real = ann_vs_exact(&idx, &qvecs);
    // Queries near stored vectors: a stored chunk's vector plus 0.3 × a fresh uniform vector.
    let mut keys: Vec<u64> = live.iter().copied().collect();
    keys.sort_unstable();
    let near: Vec<Vec<f32>> = (0..qvecs.len().max(20))
      .map(|i| {
        let k = keys[(i * 7919) % keys.len().max(1)];
        let (a, b) =
          (synthetic_vector(k, seed, dims, clusters), synthetic_unit(u64::MAX - i as u64, seed ^ 1, dims));
        let v: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + 0.3 * y).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        v.into_iter().map(|x| x / n).collect()
      })
      .collect();
    let ann_near = ann_vs_exact(&idx, &near);
    drop(idx);
    release_reader(&self.paths);
    Ok(DenseAlone { segments: vm.segments.len(), scan, ann_diagnostic, ann_real, ann_near })
  }
}

/// What [`ScaleVault::dense_alone`] measured.
struct DenseAlone {
  segments: usize,
  scan: Value,
  ann_diagnostic: Option<String>,
  ann_real: Value,
  ann_near: Value,
}

/// What installing the synthetic vectors (exact, then with the ANN index) measured.
struct InstallFigures {
  written: u64,
  install_ms: f64,
  disk: DiskUsage,
  ann_build_ms: f64,
  ann_build_peak: Option<u64>,
  ann_bytes: u64,
}

/// The `--synthetic-vectors` section of the report, from its JSON `s`, the lexical and hybrid
/// runs and the install figures `f`.
fn synthetic_markdown(
  md: &mut String,
  s: &Value,
  (model, dims): (&str, usize),
  runs: [&ModeRun; 2],
  f: &InstallFigures,
  clusters: usize,
) {
  let _ = writeln!(md, "## Warm recall with the real vector count (`--synthetic-vectors`)\n");
  let _ = writeln!(
    md,
    "- {} synthetic vectors ({dims} dims, model id {model}) written through the segment writer in \
     {:.0} ms ({} segment(s)); vectors on disk {:.1} MiB, store {:.1} MiB. Rankings against \
     random vectors are meaningless; the latency is that of the real work (query embedding, exact scan of \
     every row, lexical list, fusion).\n",
    f.written,
    f.install_ms,
    s["segments"],
    mib(f.disk.vectors_bytes),
    mib(f.disk.total_bytes)
  );
  md.push_str(
    "| mode | p50 ms | p95 ms | max ms | query-phase peak (start) RSS MiB |\n|---|---|---|---|---|\n",
  );
  for run in runs {
    let l = ModeRun::latency_of(&run.ranked);
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
  let stages: Vec<String> = runs[1].stage_medians().iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
  let _ = writeln!(md, "\nhybrid stages, p50 ms: {}\n", stages.join(" · "));
  md.push_str(SCAN_TABLE_HEAD);
  let _ = writeln!(md, "{}\n", scan_line("store vectors, real queries", &s["scan"]));
  let a = &s["ann"];
  let _ = writeln!(
    md,
    "### ANN index (`store::ann`, usearch HNSW over the int8 rows) vs exact\n\n- vectors: {}; index \
     built by the vector writer in {:.0} ms, peak RSS {} MiB, file {:.1} MiB{}\n",
    if clusters == 0 {
      "uniformly random (worst case for a graph)".to_string()
    } else {
      format!("{clusters} clusters")
    },
    f.ann_build_ms,
    fmt_mib(f.ann_build_peak),
    mib(f.ann_bytes),
    a["diagnostic"].as_str().map(|d| format!("; **not used: {d}**")).unwrap_or_default()
  );
  md.push_str("| hybrid recall, 10 results | exact p50 / p95 ms | ANN p50 / p95 ms | p50 ratio | p95 ratio |\n|---|---|---|---|---|\n");
  for (i, r) in a["hybridRounds"].as_array().into_iter().flatten().enumerate() {
    let f = |m: &str, p: &str| r[m]["latency"][p].as_f64().unwrap_or(f64::NAN);
    let _ = writeln!(
      md,
      "| round {} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {:.2} |",
      i + 1,
      f("exact", "p50Ms"),
      f("exact", "p95Ms"),
      f("ann", "p50Ms"),
      f("ann", "p95Ms"),
      f("ann", "p50Ms") / f("exact", "p50Ms"),
      f("ann", "p95Ms") / f("exact", "p95Ms")
    );
  }
  md.push_str("\n| dense search alone | queries | exact p50 / p95 ms (k 64) | ANN p50 / p95 ms (k 64) | recall@10 | recall@64 |\n|---|---|---|---|---|---|\n");
  let _ = writeln!(md, "{}", ann_line("real query embeddings", &a["denseRealQueries"]));
  let _ = writeln!(md, "{}\n", ann_line("queries near stored vectors", &a["denseNearQueries"]));
}

/// `--scan-rows`: the exact scan alone over `rows` synthetic rows (no vault). Its section goes
/// to `md`; returns its JSON.
fn scan_only(
  opts: &VectorsScaleOptions,
  rows: usize,
  (model, dims): (&str, usize),
  md: &mut String,
) -> Result<Value> {
  opts.common.say(format!("scan: {rows} synthetic rows"));
  let stmp = opts.common.temp("vectors-scan")?;
  let dir = stmp.path().join("vectors");
  let mut segments = Vec::new();
  let seg_rows = 1usize << 18;
  for (i, start) in (0..rows).step_by(seg_rows).enumerate() {
    let batch: Vec<(u64, Vec<f32>)> = (start..rows.min(start + seg_rows))
      .map(|k| (k as u64, synthetic_unit(k as u64, opts.seed, dims)))
      .collect();
    segments.push(write_segment(&dir, &format!("s{i}.vec"), dims, &batch)?);
  }
  let vm = VectorManifest { model: model.to_string(), dims, segments, ann: None };
  let live: HashSet<u64> = (0..rows as u64).collect();
  let idx = VectorIndex::open(&dir, &vm, &live)?;
  let qvecs: Vec<Vec<f32>> =
    (0..opts.queries.clamp(20, 200) as u64).map(|k| synthetic_unit(u64::MAX - k, opts.seed, dims)).collect();
  let scan = scan_latency(&idx, &qvecs);
  let _ = writeln!(md, "## Exact scan alone (`--scan-rows {rows}`)\n");
  md.push_str(SCAN_TABLE_HEAD);
  let _ = writeln!(md, "{}\n", scan_line("synthetic rows and queries", &scan));
  drop(idx);
  drop(stmp);
  Ok(scan)
}

/// ANN vs exact dense search over the live store of `vault` (which must list an ANN index: index
/// it with `LLM_WIKI_ANN=on`), with the queries of the BEIR set `beir` embedded by the configured
/// model: latency (k = 64) and recall@10 / @64 of the ANN lists against the exact ones.
pub fn run_ann_recall(vault: &Path, beir: &Path, common: &BenchCommon) -> Result<BenchOutput> {
  let context = machine_context();
  let set = load_beir_dir(beir)?;
  let paths = VaultPaths::new_layout(vault);
  let gen = Generation::open_live(&StoreLayout::new(paths.retrieval()))?;
  let vm = gen.commit.vectors.clone().ok_or_else(|| Error::Index("the vault has no vectors".into()))?;
  let idx = VectorIndex::open_with(&gen.dir.vectors_dir(), &vm, &gen.manifest.chunk_keys(), AnnMode::On)?;
  if let Some(why) = idx.ann_diagnostic() {
    return Err(Error::Index(format!("no usable ANN index: {why}")));
  }
  let embedder = models::embedder()?;
  let qvecs: Vec<Vec<f32>> =
    set.queries.iter().map(|(_, q)| embedder.embed_query(q)).collect::<Result<_>>()?;
  let a = ann_vs_exact(&idx, &qvecs);
  let name =
    format!("ann-recall-{}", beir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
  let doc = json!({
    "schema": SCHEMA,
    "kind": "ann-recall",
    "context": context,
    "set": report_path(beir),
    "rows": idx.live_rows(),
    "annRows": vm.ann.as_ref().map(|r| r.rows),
    "model": vm.model,
    "dense": a,
  });
  let mut md = format!("# ANN vs exact dense search: {}\n\n", report_path(beir));
  md.push_str(&context_markdown(&context));
  let _ = writeln!(
    md,
    "- {} live vectors ({}), ANN index of {} rows (usearch HNSW, M 16, ef 128, int8); {} queries \
     embedded by the model; k = 64 timed (exact scan, then ANN, per query), recall of the ANN \
     top k against the exact top k\n",
    idx.live_rows(),
    vm.model,
    vm.ann.as_ref().map_or(0, |r| r.rows),
    qvecs.len()
  );
  md.push_str("| dense search alone | queries | exact p50 / p95 ms (k 64) | ANN p50 / p95 ms (k 64) | recall@10 | recall@64 |\n|---|---|---|---|---|---|\n");
  let _ = writeln!(md, "{}\n", ann_line("set queries", &doc["dense"]));
  create_dir(&common.out)?;
  let mut out = BenchOutput::default();
  let json_path = common.out.join(format!("{name}.json"));
  write_json_file(&json_path, &doc)?;
  out.files.push(json_path);
  finish_report(&mut out, &common.out, &name, md)?;
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
