//! Timestamps: the engine's one parser of the dates and RFC 3339 times pages, feedback events,
//! resolution records and lock markers carry.

/// Parse `YYYY-MM-DD`, optionally followed by `T` or a space, `HH:MM[:SS[.fff]]` and `Z` or
/// `±HH:MM` (no offset = UTC), into seconds since the Unix epoch.
pub fn parse_timestamp(s: &str) -> Option<i64> {
  let s = s.trim();
  let num = |t: &str| -> Option<i64> {
    (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse().ok()).flatten()
  };
  // Byte 10 inside a multi-byte character: no date (split_at would panic there).
  let (date, rest) = match s.len() > 10 {
    true if !s.is_char_boundary(10) => return None,
    true => s.split_at(10),
    false => (s, ""),
  };
  let mut parts = date.split('-');
  let (y, m, d) = (num(parts.next()?)?, num(parts.next()?)?, num(parts.next()?)?);
  if date.len() != 10 || parts.next().is_some() || !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m)
  {
    return None;
  }
  let mut secs = days_from_civil(y, m, d) * 86_400;
  if rest.is_empty() {
    return Some(secs);
  }
  let rest = rest.strip_prefix(['T', 't', ' '])?;
  let (clock, offset) = match rest.find(['Z', 'z', '+', '-']) {
    Some(i) => rest.split_at(i),
    None => (rest, ""),
  };
  let mut hms = clock.trim().split(':');
  let h = num(hms.next()?)?;
  let mi = num(hms.next()?)?;
  let sec = match hms.next() {
    Some(x) => num(x.split('.').next()?)?,
    None => 0,
  };
  if hms.next().is_some() || h > 23 || mi > 59 || sec > 60 {
    return None;
  }
  secs += h * 3600 + mi * 60 + sec;
  match offset {
    "" | "Z" | "z" => Some(secs),
    o => {
      let sign = if o.starts_with('-') { 1 } else { -1 };
      let (oh, om) = o[1..].split_once(':').unwrap_or((&o[1..], "0"));
      let (oh, om) = (num(oh)?, num(om)?);
      (oh <= 23 && om <= 59).then_some(secs + sign * (oh * 3600 + om * 60))
    }
  }
}

fn days_in_month(y: i64, m: i64) -> i64 {
  match m {
    2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
    2 => 28,
    4 | 6 | 9 | 11 => 30,
    _ => 31,
  }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
  let y = if m <= 2 { y - 1 } else { y };
  let era = y.div_euclid(400);
  let yoe = y - era * 400;
  let mp = (m + 9) % 12;
  let doy = (153 * mp + 2) / 5 + d - 1;
  let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn timestamps() {
    assert_eq!(parse_timestamp("1970-01-01"), Some(0));
    assert_eq!(parse_timestamp("1970-01-02T00:00:01Z"), Some(86_401));
    assert_eq!(parse_timestamp("2026-08-02T11:00:00Z"), Some(1_785_668_400));
    assert_eq!(parse_timestamp("2026-08-02T13:00:00+02:00"), parse_timestamp("2026-08-02T11:00:00Z"));
    assert_eq!(parse_timestamp("2026-08-02 11:00"), parse_timestamp("2026-08-02T11:00:00.5Z"));
    assert_eq!(parse_timestamp("2024-02-29"), Some(days_from_civil(2024, 2, 29) * 86_400));
    for bad in [
      "",
      "2026-02-30",
      "2026-13-01",
      "26-01-01",
      "2026-01-01T25:00",
      "soon",
      "2026-01-01X",
      "2026-11-\u{FDFA}03T00:00:00Z",
    ] {
      assert_eq!(parse_timestamp(bad), None, "{bad}");
    }
  }
}
