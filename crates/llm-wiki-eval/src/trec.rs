//! Reading TREC run files, and TREC / BEIR qrels (judgments). Writing run files lives in the user
//! CLI crate ([`llm_wiki_cli::trec`], the `run` command writes them) and is re-exported here.
//!
//! * TREC qrels line: `qid 0 docid grade`.
//! * BEIR qrels: a header row, then `query-id<TAB>doc-id<TAB>grade`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use llm_wiki_cli::trec::check_token;
pub use llm_wiki_cli::trec::{format_run, run_lines_for_query, validate_run, write_run, RunLine};
use llm_wiki_core::error::{Error, Result};
use llm_wiki_core::fsutil::atomic_write;

/// Judgments: query id → (doc id → grade). A grade > 0 means relevant.
pub type Qrels = HashMap<String, HashMap<String, u32>>;

/// Parsed run: query id → `(doc id, score)` ordered by rank.
pub type Run = BTreeMap<String, Vec<(String, f64)>>;

fn line_error(what: &str, line_no: usize, msg: impl std::fmt::Display) -> Error {
  Error::invalid(format!("{what} line {line_no}: {msg}"))
}

/// Parse a run file into its lines (blank lines are skipped). Each line needs exactly six
/// whitespace-separated fields; the second (`Q0`) and sixth (tag) are not interpreted.
pub fn parse_run_lines(text: &str) -> Result<Vec<RunLine>> {
  let mut out = Vec::new();
  for (i, raw) in text.lines().enumerate() {
    let line_no = i + 1;
    let fields: Vec<&str> = raw.split_whitespace().collect();
    if fields.is_empty() {
      continue;
    }
    if fields.len() != 6 {
      return Err(line_error("run", line_no, format!("expected 6 fields, found {}", fields.len())));
    }
    let rank: u32 =
      fields[3].parse().map_err(|_| line_error("run", line_no, format!("bad rank {:?}", fields[3])))?;
    if rank == 0 {
      return Err(line_error("run", line_no, "rank must be >= 1"));
    }
    let score: f64 =
      fields[4].parse().map_err(|_| line_error("run", line_no, format!("bad score {:?}", fields[4])))?;
    out.push(RunLine::new(fields[0], fields[2], rank, score));
  }
  Ok(out)
}

/// Parse a run file: query id → `(doc id, score)` ordered by rank (ties keep file order).
pub fn parse_run(text: &str) -> Result<Run> {
  let mut by_query: BTreeMap<String, Vec<(u32, String, f64)>> = BTreeMap::new();
  for l in parse_run_lines(text)? {
    by_query.entry(l.qid).or_default().push((l.rank, l.docid, l.score));
  }
  Ok(
    by_query
      .into_iter()
      .map(|(qid, mut docs)| {
        docs.sort_by_key(|d| d.0);
        (qid, docs.into_iter().map(|(_, d, s)| (d, s)).collect())
      })
      .collect(),
  )
}

/// Read and parse a run file.
pub fn read_run(path: &Path) -> Result<Run> {
  let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
  parse_run(&text)
}

/// Ranked doc ids per query (scores dropped), the shape the metrics take.
pub fn run_to_ranked(run: &Run) -> HashMap<String, Vec<String>> {
  run.iter().map(|(q, docs)| (q.clone(), docs.iter().map(|(d, _)| d.clone()).collect())).collect()
}

/// Format qrels as TREC text (`qid 0 docid grade`), sorted by query id then doc id.
pub fn format_qrels(qrels: &Qrels) -> Result<String> {
  let sorted: BTreeMap<&String, BTreeMap<&String, u32>> =
    qrels.iter().map(|(q, docs)| (q, docs.iter().map(|(d, g)| (d, *g)).collect())).collect();
  let mut out = String::new();
  for (qid, docs) in sorted {
    check_token("query id", qid)?;
    for (docid, grade) in docs {
      check_token("doc id", docid)?;
      out.push_str(&format!("{qid} 0 {docid} {grade}\n"));
    }
  }
  Ok(out)
}

/// Write qrels in TREC format (atomically, sorted).
pub fn write_qrels(path: &Path, qrels: &Qrels) -> Result<()> {
  atomic_write(path, format_qrels(qrels)?.as_bytes())
}

/// Grades are integers; negative grades (used by some collections for "judged non-relevant")
/// become 0.
fn parse_grade(what: &str, line_no: usize, s: &str) -> Result<u32> {
  let g: i64 = s.parse().map_err(|_| line_error(what, line_no, format!("bad grade {s:?}")))?;
  Ok(u32::try_from(g.max(0)).unwrap_or(u32::MAX))
}

/// Parse TREC qrels (`qid iter docid grade`, whitespace-separated; blank lines skipped).
/// A repeated (qid, docid) pair keeps the last grade.
pub fn parse_qrels(text: &str) -> Result<Qrels> {
  let mut qrels = Qrels::new();
  for (i, raw) in text.lines().enumerate() {
    let fields: Vec<&str> = raw.split_whitespace().collect();
    if fields.is_empty() {
      continue;
    }
    if fields.len() != 4 {
      return Err(line_error("qrels", i + 1, format!("expected 4 fields, found {}", fields.len())));
    }
    let grade = parse_grade("qrels", i + 1, fields[3])?;
    qrels.entry(fields[0].to_string()).or_default().insert(fields[2].to_string(), grade);
  }
  Ok(qrels)
}

/// Read and parse a TREC qrels file.
pub fn read_qrels(path: &Path) -> Result<Qrels> {
  let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
  parse_qrels(&text)
}

/// Parse BEIR qrels TSV: a header row (`query-id<TAB>doc-id<TAB>score|grade`), then one
/// `query-id<TAB>doc-id<TAB>grade` row per judgment. The first non-blank row is taken as the
/// header only when its grade column is not an integer, so a headerless file also parses.
pub fn parse_beir_qrels(text: &str) -> Result<Qrels> {
  let mut qrels = Qrels::new();
  let mut first = true;
  for (i, raw) in text.lines().enumerate() {
    let line = raw.trim_end_matches('\r');
    if line.trim().is_empty() {
      continue;
    }
    let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
    if fields.len() != 3 {
      return Err(line_error(
        "BEIR qrels",
        i + 1,
        format!("expected 3 tab-separated fields, found {}", fields.len()),
      ));
    }
    let is_header = first && fields[2].parse::<i64>().is_err();
    first = false;
    if is_header {
      continue;
    }
    if fields[0].is_empty() || fields[1].is_empty() {
      return Err(line_error("BEIR qrels", i + 1, "empty query or doc id"));
    }
    let grade = parse_grade("BEIR qrels", i + 1, fields[2])?;
    qrels.entry(fields[0].to_string()).or_default().insert(fields[1].to_string(), grade);
  }
  Ok(qrels)
}

/// Read and parse a BEIR qrels TSV file.
pub fn read_beir_qrels(path: &Path) -> Result<Qrels> {
  let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
  parse_beir_qrels(&text)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn run_round_trip() {
    let mut lines = run_lines_for_query("q1", &[("d3", 12.5), ("d1", 3.0), ("d2", -0.1234567)]);
    lines.extend(run_lines_for_query("q0", &[("x", 1.0)]));
    let text = format_run("bm25", &lines);
    assert_eq!(
      text,
      "q1 Q0 d3 1 12.500000 bm25\nq1 Q0 d1 2 3.000000 bm25\nq1 Q0 d2 3 -0.123457 bm25\nq0 Q0 x 1 1.000000 bm25\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/run.txt");
    write_run(&path, "bm25", &lines).unwrap();
    let run = read_run(&path).unwrap();
    assert_eq!(run.keys().collect::<Vec<_>>(), ["q0", "q1"]);
    assert_eq!(
      run["q1"],
      vec![("d3".to_string(), 12.5), ("d1".to_string(), 3.0), ("d2".to_string(), -0.123457)]
    );
    assert_eq!(run_to_ranked(&run)["q0"], vec!["x".to_string()]);
  }

  #[test]
  fn parse_run_orders_by_rank() {
    let run = parse_run("q 0 b 2 1.0 t\n\nq Q0 a 1 2.0 t\nq Q0 c 10 0.5 t\n").unwrap();
    let ids: Vec<&str> = run["q"].iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
  }

  #[test]
  fn run_rejects_bad_input() {
    assert!(write_run(Path::new("/nonexistent/x"), "t", &[RunLine::new("q", "a b", 1, 1.0)]).is_err());
    assert!(validate_run("t", &[RunLine::new("q", "a\tb", 1, 1.0)]).is_err());
    assert!(validate_run("t", &[RunLine::new("q", "", 1, 1.0)]).is_err());
    assert!(validate_run("t", &[RunLine::new("q", "a", 0, 1.0)]).is_err());
    assert!(validate_run("t", &[RunLine::new("q", "a", 1, f64::NAN)]).is_err());
    assert!(validate_run("my tag", &[]).is_err());
    assert!(validate_run("t", &[RunLine::new("q", "a", 1, 1.0)]).is_ok());
    assert!(parse_run("q Q0 a 1 1.0\n").is_err());
    assert!(parse_run("q Q0 a x 1.0 t\n").is_err());
    assert!(parse_run("q Q0 a 0 1.0 t\n").is_err());
    assert!(parse_run("q Q0 a 1 abc t\n").is_err());
  }

  #[test]
  fn qrels_round_trip() {
    let mut qrels = Qrels::new();
    qrels.entry("q2".into()).or_default().insert("b".into(), 0);
    qrels.entry("q2".into()).or_default().insert("a".into(), 2);
    qrels.entry("q1".into()).or_default().insert("z".into(), 1);
    let text = format_qrels(&qrels).unwrap();
    assert_eq!(text, "q1 0 z 1\nq2 0 a 2\nq2 0 b 0\n");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qrels.txt");
    write_qrels(&path, &qrels).unwrap();
    assert_eq!(read_qrels(&path).unwrap(), qrels);
    assert_eq!(parse_qrels("q 0 d -1\n").unwrap()["q"]["d"], 0);
    assert!(parse_qrels("q 0 d\n").is_err());
    let mut bad = Qrels::new();
    bad.entry("q 1".into()).or_default().insert("d".into(), 1);
    assert!(format_qrels(&bad).is_err());
  }

  #[test]
  fn beir_qrels() {
    let q =
      parse_beir_qrels("query-id\tcorpus-id\tscore\r\n1\t31715818\t1\r\n1\t9\t0\n3\t14717500\t2\n").unwrap();
    assert_eq!(q.len(), 2);
    assert_eq!(q["1"]["31715818"], 1);
    assert_eq!(q["1"]["9"], 0);
    assert_eq!(q["3"]["14717500"], 2);
    // Headerless input parses too.
    assert_eq!(parse_beir_qrels("7\td\t1\n").unwrap()["7"]["d"], 1);
    assert!(parse_beir_qrels("query-id\tdoc-id\tgrade\n1 2 1\n").is_err());
    assert!(parse_beir_qrels("query-id\tdoc-id\tgrade\n1\t2\tx\n").is_err());
  }
}
