//! Machine context, memory and latency measurement, and the formatting shared by the reports.

use super::*;

pub(super) fn read_opt(path: &str) -> Option<String> {
  std::fs::read_to_string(path).ok()
}

pub(super) fn proc_status_kb(field: &str) -> Option<u64> {
  let text = read_opt("/proc/self/status")?;
  text.lines().find_map(|l| {
    let rest = l.strip_prefix(field)?.strip_prefix(':')?;
    rest.split_whitespace().next()?.parse::<u64>().ok().map(|kb| kb * 1024)
  })
}

/// Reset the process's RSS high-water mark (Linux); false where unsupported.
pub fn reset_peak_rss() -> bool {
  std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's RSS high-water mark in bytes (`VmHWM`), if known.
pub fn peak_rss_bytes() -> Option<u64> {
  proc_status_kb("VmHWM")
}

/// The process's current RSS in bytes (`VmRSS`), if known.
pub fn current_rss_bytes() -> Option<u64> {
  proc_status_kb("VmRSS")
}

/// User and system CPU time of this process so far, in ms (Linux, `/proc/self/stat`; `None`
/// elsewhere). Every thread counts: on a shared machine this is the load-independent cost of a
/// phase, where wall time depends on what else runs.
pub fn cpu_times_ms() -> Option<(f64, f64)> {
  let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
  let rest = &stat[stat.rfind(')')? + 2..];
  let f: Vec<&str> = rest.split_whitespace().collect();
  // USER_HZ is 100 on every Linux configuration this runs on.
  let ms = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).map(|t| t * 10.0);
  Some((ms(11)?, ms(12)?))
}

/// `p` as written into a report: relative to the working directory (`../shared/bench/...`) when
/// both share more than the filesystem root, so committed reports name no path of this machine;
/// otherwise as given.
pub fn report_path(p: &Path) -> String {
  let cwd = match std::env::current_dir() {
    Ok(d) if p.is_absolute() => d,
    _ => return p.display().to_string(),
  };
  let (here, there): (Vec<_>, Vec<_>) = (cwd.components().collect(), p.components().collect());
  let common = here.iter().zip(&there).take_while(|(a, b)| a == b).count();
  if common <= 1 {
    return p.display().to_string();
  }
  let mut rel = PathBuf::new();
  for _ in common..here.len() {
    rel.push("..");
  }
  rel.extend(&there[common..]);
  rel.display().to_string()
}

/// A command-line argument as written into a report (absolute paths made relative).
fn report_arg(arg: &str) -> String {
  if Path::new(arg).is_absolute() {
    report_path(Path::new(arg))
  } else {
    arg.to_string()
  }
}

pub(super) fn shell_quote(arg: &str) -> String {
  let plain = !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
  if plain {
    arg.to_string()
  } else {
    format!("'{}'", arg.replace('\'', "'\\''"))
  }
}

/// CPU flags (x86 `flags`, ARM `Features` in /proc/cpuinfo) reported with a run.
const SIMD_FLAGS: &[&str] =
  &["avx2", "fma", "avx512f", "avx512_vnni", "avx512vnni", "avx_vnni", "amx_int8", "asimd", "asimddp", "sve"];

/// Machine, engine and model context of a run, plus the exact command line.
pub fn machine_context() -> Value {
  let cpuinfo = read_opt("/proc/cpuinfo").unwrap_or_default();
  let field = |name: &str| {
    cpuinfo.lines().find_map(|l| {
      let (k, v) = l.split_once(':')?;
      (k.trim() == name).then(|| v.trim().to_string())
    })
  };
  let cpu_model = field("model name").or_else(|| field("Model")).or_else(|| field("Hardware"));
  // The vector instructions inference and the int8 scan can use: a shared VM can move between
  // hosts (AVX-512 VNNI one day, AVX2 only the next), which moves latencies.
  let simd: Vec<&str> = field("flags").or_else(|| field("Features")).map_or_else(Vec::new, |flags| {
    SIMD_FLAGS.iter().copied().filter(|s| flags.split_whitespace().any(|f| f == *s)).collect()
  });
  let logical =
    cpuinfo.lines().filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor")).count();
  let physical: HashSet<(String, String)> = {
    let mut set = HashSet::new();
    let (mut phys, mut core) = (String::new(), String::new());
    for l in cpuinfo.lines() {
      if let Some((k, v)) = l.split_once(':') {
        match k.trim() {
          "physical id" => phys = v.trim().to_string(),
          "core id" => core = v.trim().to_string(),
          _ => {}
        }
      } else if l.trim().is_empty() && !core.is_empty() {
        set.insert((phys.clone(), core.clone()));
      }
    }
    if !core.is_empty() {
      set.insert((phys, core));
    }
    set
  };
  let ram = read_opt("/proc/meminfo").and_then(|m| {
    m.lines().find_map(|l| l.strip_prefix("MemTotal:")?.split_whitespace().next()?.parse::<u64>().ok())
  });
  let os = read_opt("/etc/os-release")
    .and_then(|t| {
      t.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
    })
    .unwrap_or_else(|| std::env::consts::OS.to_string());
  let kernel = read_opt("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string());
  let cfg = models::effective_config();
  let embed_dir = models::resolve_embed_dir(&cfg);
  let runtime = if cfg.disabled {
    None
  } else {
    models::runtime::locate(cfg.runtime_lib.as_deref(), &cfg.runtime_candidates, &cfg.model_roots).ok()
  };
  let available = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
  let args: Vec<String> = std::env::args().map(|a| report_arg(&a)).collect();
  let env: Map<String, Value> = [
    "LLM_WIKI_MODELS_DIR",
    "LLM_WIKI_THREADS",
    "LLM_WIKI_EMBED_MODEL",
    "LLM_WIKI_RERANK_MODEL",
    "LLM_WIKI_DENSE",
    "ORT_DYLIB_PATH",
  ]
  .iter()
  .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), Value::String(v))))
  .collect();
  json!({
    "cpuModel": cpu_model,
    "cpuSimd": simd,
    "physicalCores": if physical.is_empty() { Value::Null } else { json!(physical.len()) },
    "logicalCpus": logical,
    "availableParallelism": available,
    "ramBytes": ram.map(|kb| kb * 1024),
    "os": os,
    "kernel": kernel,
    "arch": std::env::consts::ARCH,
    "engine": ENGINE_NAME,
    "engineVersion": ENGINE_VERSION,
    "indexFormatVersion": INDEX_FORMAT_VERSION,
    "buildProfile": if cfg!(debug_assertions) { "debug" } else { "release" },
    "models": {
      "embed": models::embed_model_id(&cfg),
      // The graph queries run on: the manifest's query graph, or the model itself.
      "embedQueryGraph": embed_dir.as_deref().and_then(|d| models::ModelDir::open(d).ok()).map(|d| {
        d.query_model_file().map_or("model.onnx", |_| models::manifest::QUERY_MODEL_FILE)
      }),
      "embedDir": embed_dir.map(|d| report_path(&d)),
      "rerank": models::rerank_model_id(&cfg),
      "runtimeLibrary": runtime.map(|p| report_path(&p)),
      "denseDisabled": cfg.disabled,
    },
    "threads": {
      "inference": cfg.threads,
      "reindex": available.min(4),
    },
    "env": env,
    "commandLine": args,
    "command": args.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" "),
    "startedAt": now_iso(),
    "loadAverageAtStart": read_opt("/proc/loadavg").map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
    "peakRssMethod": PEAK_RSS_METHOD,
    "latencyMethod": LATENCY_METHOD,
  })
}

pub(super) fn context_markdown(ctx: &Value) -> String {
  let s = |k: &str| ctx.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
  let ram = ctx.get("ramBytes").and_then(Value::as_u64).map_or("?".into(), |b| format!("{:.1} GiB", gib(b)));
  let models = &ctx["models"];
  format!(
    "- Command: `{}`\n- Machine: {} ({}) · {} logical CPUs · {} RAM · {} (kernel {}, {}) · load average at start {}\n- Engine: {} {} ({} build) · \
     embedder {} (queries on {}) · cross-encoder {} · inference threads {}\n- Started: {}\n",
    s("command"),
    s("cpuModel"),
    ctx["cpuSimd"].as_array().map_or("?".into(), |f| {
      let f: Vec<&str> = f.iter().filter_map(Value::as_str).collect();
      if f.is_empty() { "no SIMD flags listed".to_string() } else { f.join(" ") }
    }),
    ctx["logicalCpus"],
    ram,
    s("os"),
    s("kernel"),
    s("arch"),
    s("loadAverageAtStart"),
    s("engine"),
    s("engineVersion"),
    s("buildProfile"),
    models["embed"].as_str().unwrap_or("none"),
    models["embedQueryGraph"].as_str().unwrap_or("-"),
    models["rerank"].as_str().unwrap_or("none"),
    ctx["threads"]["inference"],
    s("startedAt"),
  )
}

pub(super) fn gib(b: u64) -> f64 {
  b as f64 / (1024.0 * 1024.0 * 1024.0)
}

pub(super) fn mib(b: u64) -> f64 {
  b as f64 / (1024.0 * 1024.0)
}

pub(super) fn fmt_mib(b: Option<u64>) -> String {
  b.map_or("n/a".into(), |b| format!("{:.1}", mib(b)))
}

/// `peak (start)` in MiB.
pub(super) fn fmt_peak(peak: Option<u64>, start: Option<u64>) -> String {
  format!("{} ({})", fmt_mib(peak), fmt_mib(start))
}

/// Latency summary of a set of samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
  pub samples: usize,
  pub p50_ms: f64,
  pub p95_ms: f64,
  pub max_ms: f64,
  pub mean_ms: f64,
}

/// Nearest-rank percentiles (p50 = the ⌈0.5·n⌉-th smallest sample).
pub fn latency(samples: &[f64]) -> Latency {
  if samples.is_empty() {
    return Latency::default();
  }
  let mut s = samples.to_vec();
  s.sort_by(|a, b| a.total_cmp(b));
  let n = s.len();
  let pct = |p: f64| nearest_rank(&s, p);
  Latency {
    samples: n,
    p50_ms: r3(pct(0.50)),
    p95_ms: r3(pct(0.95)),
    max_ms: r3(s[n - 1]),
    mean_ms: r3(s.iter().sum::<f64>() / n as f64),
  }
}

/// Nearest-rank percentile `p` ∈ (0, 1] of ascending, non-empty `sorted`.
pub(super) fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
  let n = sorted.len();
  sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1]
}

/// Distribution of top-1 scores of one query group: nearest-rank percentiles and the share at or
/// above the automatic floor.
pub(super) fn score_distribution(values: &[f64], floor: f64) -> Value {
  if values.is_empty() {
    return json!({"queries": 0});
  }
  let mut s = values.to_vec();
  s.sort_by(|a, b| a.total_cmp(b));
  let at_floor = s.iter().filter(|v| **v >= floor).count();
  json!({
    "queries": s.len(),
    "p5": r3(nearest_rank(&s, 0.05)),
    "p25": r3(nearest_rank(&s, 0.25)),
    "p50": r3(nearest_rank(&s, 0.50)),
    "p75": r3(nearest_rank(&s, 0.75)),
    "p95": r3(nearest_rank(&s, 0.95)),
    "max": r3(s[s.len() - 1]),
    "atOrAboveFloor": at_floor,
  })
}

/// A progress sink that logs at most every 20 s (plus each stage's first event).
pub(super) fn throttled_progress(log: Log, label: String) -> ProgressSink {
  let last: Mutex<(Option<Instant>, &'static str)> = Mutex::new((None, ""));
  Arc::new(move |e: ReindexProgressEvent| {
    let p = e.progress;
    let mut g = last.lock().unwrap_or_else(|e| e.into_inner());
    let due = g.0.is_none_or(|t| t.elapsed() >= Duration::from_secs(20)) || g.1 != p.stage;
    if due {
      *g = (Some(Instant::now()), p.stage);
      let count = match (p.current, p.total) {
        (Some(c), Some(t)) => format!(" {c}/{t}"),
        _ => String::new(),
      };
      log(&format!("{label}: {} {}{count}", p.stage, p.message));
    }
  })
}
