//! Whether a prompt is worth an automatic recall at all. Three cheap rules, no index access:
//! acknowledgements and bare commands ("thanks", "run the tests again", "ok, continue"), and
//! pasted machine output (stack traces, compiler and test logs) skip recall. Anything with a
//! question word or a question mark is recall-shaped. The word lists are written by hand for
//! English conversational filler, not fitted on any benchmark.

/// Why a prompt skips automatic recall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
  /// Only conversational filler or a bare instruction (`thanks`, `run the tests again`).
  Chatter,
  /// Mostly machine output: stack frames, log lines (a pasted stack trace).
  MachineOutput,
}

impl SkipReason {
  /// Stable code (trace and diagnostics).
  pub fn code(self) -> &'static str {
    match self {
      SkipReason::Chatter => "recall_skipped_chatter",
      SkipReason::MachineOutput => "recall_skipped_machine_output",
    }
  }
}

/// Words that carry no topic in a short prompt: acknowledgements, fillers and the verbs and
/// objects of bare workflow instructions.
const CHATTER: &[&str] = &[
  "thanks", "thank", "thx", "ty", "you", "ok", "okay", "k", "yes", "yep", "yeah", "no", "nope", "sure",
  "great", "good", "nice", "cool", "perfect", "awesome", "lgtm", "done", "please", "pls", "go", "ahead",
  "continue", "proceed", "next", "again", "retry", "try", "run", "rerun", "re-run", "the", "tests", "test",
  "it", "that", "this", "do", "now", "once", "more", "and", "then", "commit", "push", "build", "rebuild",
  "lint", "format", "fmt", "stop", "wait", "hmm", "hi", "hello", "hey", "works", "worked", "fixed", "looks",
  "fine", "all", "a", "so", "much", "very", "got", "ship", "merge", "undo", "revert", "same", "keep",
  "going", "let's", "lets", "me", "up", "yup", "alright", "right", "well", "just",
];

/// Words that make a prompt a question about something (then it is recall-shaped).
const QUESTION: &[&str] =
  &["what", "why", "how", "where", "when", "which", "who", "explain", "remind", "recall"];

fn is_machine_line(line: &str) -> bool {
  let t = line.trim();
  if t.is_empty() {
    return false;
  }
  let digits_colon =
    t.contains(".rs:") || t.contains(".ts:") || t.contains(".js:") || t.contains(".py\", line");
  t.starts_with("at ")
    || t.starts_with("File \"")
    || t.starts_with("Traceback")
    || t.starts_with("thread '")
    || t.starts_with("note: run with")
    || t.starts_with("stack backtrace")
    || t.starts_with("--> ")
    || t.starts_with('|')
    || t.starts_with("error[")
    || t.starts_with("warning:")
    || t.starts_with("npm ERR!")
    || t.starts_with('^')
    || (t.len() > 2 && t.as_bytes()[0].is_ascii_digit() && t.contains(": "))
    || digits_colon
    || t.starts_with("    ")
}

/// `Some(reason)` when `prompt` should skip automatic recall.
pub fn skip_reason(prompt: &str) -> Option<SkipReason> {
  let lines: Vec<&str> = prompt.lines().filter(|l| !l.trim().is_empty()).collect();
  if lines.len() >= 3 {
    let machine = lines.iter().filter(|l| is_machine_line(l)).count();
    // Prose around the paste (a question about it) keeps the prompt recall-shaped.
    let prose_words: usize =
      lines.iter().filter(|l| !is_machine_line(l)).map(|l| l.split_whitespace().count()).sum();
    if machine * 3 >= lines.len() * 2 && prose_words <= 12 {
      return Some(SkipReason::MachineOutput);
    }
  }
  if prompt.contains('?') {
    return None;
  }
  let words: Vec<String> = prompt
    .split_whitespace()
    .map(|w| w.trim_matches(|c: char| c.is_ascii_punctuation() && c != '\'' && c != '-').to_lowercase())
    .filter(|w| !w.is_empty())
    .collect();
  if words.iter().any(|w| QUESTION.contains(&w.as_str())) {
    return None;
  }
  if words.len() <= 8 && words.iter().all(|w| CHATTER.contains(&w.as_str())) {
    return Some(SkipReason::Chatter);
  }
  None
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn chatter_and_commands_skip() {
    for p in
      ["thanks", "Thanks!", "ok, continue", "run the tests again", "great, commit it", "lgtm", "yes please"]
    {
      assert_eq!(skip_reason(p), Some(SkipReason::Chatter), "{p}");
    }
  }

  #[test]
  fn questions_and_topics_recall() {
    for p in [
      "how do we run the tests?",
      "run the migration tests for the billing service",
      "what did we decide about retries",
      "deploy",
      "thanks, now explain the cache invalidation",
      "remind me about the release checklist",
    ] {
      assert_eq!(skip_reason(p), None, "{p}");
    }
  }

  #[test]
  fn pasted_traces_skip_unless_asked_about() {
    let trace = "TypeError: Cannot read properties of undefined (reading 'id')\n    at resolve (/app/src/a.ts:10:5)\n    at run (/app/src/b.ts:20:7)\n    at main (/app/src/c.ts:3:1)";
    assert_eq!(skip_reason(trace), Some(SkipReason::MachineOutput));
    let rust = "thread 'main' panicked at src/main.rs:4:5:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";
    assert_eq!(skip_reason(rust), Some(SkipReason::MachineOutput));
    let asked = format!("{trace}\nWe saw this crash in the checkout service after the last deploy, what was the known workaround for the session cache issue");
    assert_eq!(skip_reason(&asked), None);
  }
}
