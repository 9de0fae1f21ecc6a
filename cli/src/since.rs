//! The times `sshmcp history --since` takes: an RFC 3339 time with any offset
//! (`2026-12-05T07:45:23+01:00`, `…Z`, fractions of a second optional), a date (`2026-12-05`,
//! from midnight UTC), or a span back from now (`90s`, `30m`, `1h`, `2d`, or `1h30m`).

use std::time::{Duration, SystemTime};

use sshmcp_proto::time::from_utc;

/// The point in time `text` names, `now` being the time spans count back from.
pub fn parse(text: &str, now: SystemTime) -> Option<SystemTime> {
    let text = text.trim();
    if let Some(span) = span(text) {
        return now.checked_sub(span);
    }
    let date = |t: &str| -> Option<(i64, i64, i64)> {
        let b = t.as_bytes();
        (b.len() == 10 && b[4] == b'-' && b[7] == b'-')
            .then(|| Some((number(&t[..4])?, number(&t[5..7])?, number(&t[8..10])?)))?
    };
    if text.len() == 10 {
        let (y, m, d) = date(text)?;
        return from_utc(y, [m, d, 0, 0, 0], 0);
    }
    // YYYY-MM-DD, then T (or t, or a space), then HH:MM:SS.
    let (y, m, d) = date(text.get(..10)?)?;
    if !matches!(text.as_bytes().get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let clock = text.get(11..19)?;
    let c = clock.as_bytes();
    if c[2] != b':' || c[5] != b':' {
        return None;
    }
    let (hh, mm, ss) = (
        number(&clock[..2])?,
        number(&clock[3..5])?,
        number(&clock[6..8])?,
    );
    let mut rest = text.get(19..)?;
    let mut ms = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let kept = &fraction[..digits.min(3)];
        ms = number(kept)? * 10_i64.pow(3 - kept.len() as u32);
        rest = &fraction[digits..];
    }
    let east = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let b = rest.as_bytes();
            if b.len() != 6 || b[3] != b':' {
                return None;
            }
            let (oh, om) = (number(&rest[1..3])?, number(&rest[4..6])?);
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    let local = from_utc(y, [m, d, hh, mm, ss], ms)?;
    // A time east of UTC happened that many seconds earlier in UTC.
    let shift = Duration::from_secs(east.unsigned_abs());
    if east >= 0 {
        local.checked_sub(shift)
    } else {
        local.checked_add(shift)
    }
}

/// A span such as `30m` or `1h30m`: numbers each followed by `s`, `m`, `h` or `d`.
fn span(text: &str) -> Option<Duration> {
    if text.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return None,
        };
        let n: u64 = digits.parse().ok()?;
        total = total.checked_add(n.checked_mul(unit)?)?;
        digits.clear();
    }
    digits.is_empty().then_some(Duration::from_secs(total))
}

/// A field of ASCII digits only (no sign, no spaces).
fn number(text: &str) -> Option<i64> {
    (!text.is_empty() && text.bytes().all(|c| c.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sshmcp_proto::time::{parse_rfc3339, rfc3339};

    fn at(text: &str) -> Option<String> {
        let now = parse_rfc3339("2026-12-05T12:00:00.000Z").unwrap();
        parse(text, now).map(rfc3339)
    }

    #[test]
    fn rfc3339_with_any_offset_and_precision() {
        assert_eq!(
            at("2026-12-05T07:45:23+00:00").as_deref(),
            Some("2026-12-05T07:45:23.000Z")
        );
        assert_eq!(
            at("2026-12-05T07:45:23+01:30").as_deref(),
            Some("2026-12-05T06:15:23.000Z")
        );
        assert_eq!(
            at("2026-12-05T23:45:23-02:00").as_deref(),
            Some("2026-12-06T01:45:23.000Z")
        );
        assert_eq!(
            at("2026-12-05 07:45:23.5Z").as_deref(),
            Some("2026-12-05T07:45:23.500Z")
        );
        assert_eq!(
            at("2026-12-05t07:45:23.123456z").as_deref(),
            Some("2026-12-05T07:45:23.123Z")
        );
    }

    #[test]
    fn a_date_is_its_midnight_utc_and_a_span_counts_back_from_now() {
        assert_eq!(
            at("2026-12-05").as_deref(),
            Some("2026-12-05T00:00:00.000Z")
        );
        assert_eq!(at("30m").as_deref(), Some("2026-12-05T11:30:00.000Z"));
        assert_eq!(at("1h30m").as_deref(), Some("2026-12-05T10:30:00.000Z"));
        assert_eq!(at("2d").as_deref(), Some("2026-12-03T12:00:00.000Z"));
        assert_eq!(at("90s").as_deref(), Some("2026-12-05T11:58:30.000Z"));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "yesterday",
            "1w",
            "h",
            "30",
            "2026-12-05T07:45:23",
            "2026-12-05T07:45:23+1:00",
            "2026-12-05T07:45:23+24:00",
            "2026-13-05",
            "2026-02-30",
            "2026-12-05T25:00:00Z",
            "2026-12-05T07:45:23.Z",
            "-1h",
        ] {
            assert_eq!(at(bad), None, "{bad}");
        }
    }
}
