//! Rust source read as text by the workspace's structure tests (`floors.rs`, `sizes.rs`): the
//! text with comments and literals blanked, so that a `{`, `use` or `fn` inside them is not read
//! as code.

/// `src` with comments and string/char literals replaced by spaces (line breaks kept).
pub fn blank(src: &str) -> String {
  let c: Vec<char> = src.chars().collect();
  let mut out = String::with_capacity(src.len());
  let mut i = 0;
  let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
  let put = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
  while i < c.len() {
    let ch = c[i];
    let next = c.get(i + 1).copied();
    if ch == '/' && next == Some('/') {
      while i < c.len() && c[i] != '\n' {
        put(&mut out, c[i]);
        i += 1;
      }
    } else if ch == '/' && next == Some('*') {
      let mut depth = 0;
      while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'*') {
          depth += 1;
          out.push_str("  ");
          i += 2;
        } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
          depth -= 1;
          out.push_str("  ");
          i += 2;
          if depth == 0 {
            break;
          }
        } else {
          put(&mut out, c[i]);
          i += 1;
        }
      }
    } else if (ch == 'r' || (ch == 'b' && next == Some('r'))) && (i == 0 || !ident(c[i - 1])) && {
      let mut j = i + if ch == 'b' { 2 } else { 1 };
      while c.get(j) == Some(&'#') {
        j += 1;
      }
      c.get(j) == Some(&'"')
    } {
      // raw string: r"…", r#"…"#, br"…"
      let mut j = i + if ch == 'b' { 2 } else { 1 };
      let mut hashes = 0;
      while c[j] == '#' {
        hashes += 1;
        j += 1;
      }
      j += 1;
      loop {
        if j >= c.len() {
          break;
        }
        if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
          j += 1 + hashes;
          break;
        }
        j += 1;
      }
      for &x in &c[i..j.min(c.len())] {
        put(&mut out, x);
      }
      i = j;
    } else if ch == '"' {
      let mut j = i + 1;
      while j < c.len() && c[j] != '"' {
        j += if c[j] == '\\' { 2 } else { 1 };
      }
      for &x in &c[i..(j + 1).min(c.len())] {
        put(&mut out, x);
      }
      i = j + 1;
    } else if ch == '\'' {
      // a char literal ('x', '\n', '\u{1F600}') or a lifetime ('a)
      let end = if next == Some('\\') {
        let mut j = i + 2;
        while j < c.len() && c[j] != '\'' {
          j += 1;
        }
        Some(j)
      } else if c.get(i + 2) == Some(&'\'') {
        Some(i + 2)
      } else {
        None
      };
      match end {
        Some(j) => {
          for &x in &c[i..=j.min(c.len() - 1)] {
            put(&mut out, x);
          }
          i = j + 1;
        }
        None => {
          out.push(ch);
          i += 1;
        }
      }
    } else {
      out.push(ch);
      i += 1;
    }
  }
  out
}
