//! The commands run in-process.

use super::*;

#[test]
fn watch_prints_events_until_its_time_is_up() {
  let t = tempfile::tempdir().unwrap();
  let p = VaultPaths::new_layout(t.path().join("v"));
  std::fs::create_dir_all(&p.wiki).unwrap();
  std::fs::write(p.config_file(), r#"{"name":"T"}"#).unwrap();
  std::fs::write(p.wiki.join("a.md"), "---\ntype: concept\ntitle: A\n---\nzqxwatchcli\n").unwrap();
  let cmd = Command::Watch {
    vault: p.root.clone(),
    components: vec!["lexical".into()],
    debounce_ms: 50,
    poll: false,
    poll_interval_ms: 2000,
    duration: Some(3.0),
    json: false,
  };
  let mut out = Vec::new();
  execute(cmd, &mut out).unwrap();
  let text = String::from_utf8(out).unwrap();
  let lines: Vec<&str> = text.lines().collect();
  assert!(lines[0].starts_with("started backend=native"), "{text}");
  assert!(lines.iter().any(|l| l.starts_with("indexed lexical full scan +1 ~0 -0")), "{text}");
  assert_eq!(lines.last().copied(), Some("closed"), "{text}");
}
