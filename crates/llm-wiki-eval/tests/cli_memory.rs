//! Peak memory of a command-line reindex of the largest pages, measured in a child process (the
//! development binary's `index`, the same code as the npm `bin`'s) so other tests do not count.

#[cfg(target_os = "linux")]
use llm_wiki_core::testkit::{page_text, temp_vault, write_file};

/// Peak RSS of a CLI reindex (child process, so other tests do not count) of the largest page
/// accepted (just under the 16 MiB limit) and a 100,000-character line. Measured 125 MiB on the
/// 2-core machine of docs/RELIABILITY.md; a full rebuild's tantivy writer may take 240 MB (shared
/// by its threads), so 1 GiB holds on any machine while catching a page copied per chunk or per
/// section.
#[cfg(target_os = "linux")]
#[test]
fn reindex_memory_is_bounded_on_the_largest_pages() {
  let (_t, p) = temp_vault();
  let para =
    "Retrieval systems rank passages by lexical and semantic evidence gathered from notes. ".repeat(8);
  let mut body = String::new();
  let mut i = 0;
  while body.len() < 16 * 1024 * 1024 - 200_000 {
    body.push_str(&format!("## Part {i}\n\n{para}\n\n"));
    i += 1;
  }
  write_file(&p.wiki.join("largest.md"), page_text("Largest", &body));
  let line: String = (0..16_000).map(|i| format!("w{i} ")).collect();
  write_file(&p.wiki.join("line.md"), page_text("Line", &line));

  // Reaped by wait4 below (which also reports the child's peak RSS), not by Child::wait.
  #[allow(clippy::zombie_processes)]
  let child = std::process::Command::new(env!("CARGO_BIN_EXE_llm-wiki-retrieval"))
    .args(["index", p.root.to_str().unwrap(), "--component", "lexical", "--json"])
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
  let pid = child.id() as libc::pid_t;
  let mut stdout = child.stdout.unwrap();
  let mut out = String::new();
  std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
  // wait4 reaps the child and reports its own peak RSS (KiB on Linux).
  let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
  assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
  assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "index failed: {out}");
  let result: serde_json::Value = serde_json::from_str(&out).unwrap();
  assert_eq!(result["documents"]["indexed"], 2, "{out}");
  let peak_mib = usage.ru_maxrss as f64 / 1024.0;
  eprintln!("peak RSS of the reindex: {peak_mib:.1} MiB");
  assert!(peak_mib < 1024.0, "peak RSS {peak_mib:.1} MiB");
}
