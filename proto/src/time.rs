//! RFC 3339 UTC timestamps without a calendar crate: answers only ever format "now" or a
//! stored `SystemTime`, so a small civil-date conversion is all we need.

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats a point in time as `YYYY-MM-DDTHH:MM:SS.mmmZ`, before 1970 too (a file's times
/// may be anything).
pub fn rfc3339(t: SystemTime) -> String {
    // Whole milliseconds, rounded down (toward the past) on either side of the epoch.
    let millis = match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => {
            let before = before.duration().as_nanos().div_ceil(1_000_000);
            i64::try_from(before).map_or(i64::MIN, |ms| -ms)
        }
    };
    let (secs, millis) = (millis.div_euclid(1000), millis.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// The current time as RFC 3339.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// Reads back what [`rfc3339`] wrote (`YYYY-MM-DDTHH:MM:SS.mmmZ`), or the same without the
/// milliseconds (`YYYY-MM-DDTHH:MM:SSZ`, as people type it); `None` for anything else.
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    if text.len() == 20 && text.ends_with('Z') {
        return parse_rfc3339(&format!("{}.000Z", text.get(..19)?));
    }
    let b = text.as_bytes();
    let separators = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ];
    if b.len() != 24 || separators.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    from_utc(y, [m, d, hh, mm, ss], ms)
}

/// The point in time of a UTC date and time (`[month, day, hour, minute, second]` of year
/// `y`, any year, and `ms` milliseconds); `None` for fields out of range (a 30th of
/// February too).
pub fn from_utc(y: i64, [m, d, hh, mm, ss]: [i64; 5], ms: i64) -> Option<SystemTime> {
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1..=12).contains(&m)
        || !(1..=days).contains(&d)
        || !(0..=23).contains(&hh)
        || !(0..=59).contains(&mm)
        || !(0..=60).contains(&ss)
        || !(0..=999).contains(&ms)
        || !(-999_999..=999_999).contains(&y)
    {
        return None;
    }
    let secs = days_from_civil(y, m as u32, d as u32) * 86_400 + hh * 3600 + mm * 60 + ss;
    let millis = secs * 1000 + ms;
    match u64::try_from(millis) {
        Ok(after) => UNIX_EPOCH.checked_add(std::time::Duration::from_millis(after)),
        Err(_) => UNIX_EPOCH.checked_sub(std::time::Duration::from_millis(millis.unsigned_abs())),
    }
}

/// Howard Hinnant's civil-to-days algorithm, the inverse of [`civil_from_days`].
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn days_past_their_months_end_are_no_date() {
        assert!(from_utc(2026, [2, 28, 0, 0, 0], 0).is_some());
        assert!(from_utc(2026, [2, 29, 0, 0, 0], 0).is_none());
        assert!(from_utc(2024, [2, 29, 0, 0, 0], 0).is_some());
        assert!(from_utc(1900, [2, 29, 0, 0, 0], 0).is_none());
        assert!(from_utc(2000, [2, 29, 0, 0, 0], 0).is_some());
        assert!(from_utc(2026, [4, 31, 0, 0, 0], 0).is_none());
        assert!(from_utc(2026, [12, 31, 0, 0, 0], 0).is_some());
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_000_000_123);
        assert_eq!(rfc3339(t), "2026-11-30T00:53:20.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
        let before = UNIX_EPOCH - Duration::from_secs(302_486_400);
        assert_eq!(rfc3339(before), "1960-06-01T00:00:00.000Z");
        let just_before = UNIX_EPOCH - Duration::from_millis(500);
        assert_eq!(rfc3339(just_before), "1969-12-31T23:59:59.500Z");
        // Toward the past on both sides, as a file time to the nanosecond is cut.
        let within = UNIX_EPOCH - Duration::from_micros(500);
        assert_eq!(rfc3339(within), "1969-12-31T23:59:59.999Z");
        let after = UNIX_EPOCH + Duration::from_micros(1500);
        assert_eq!(rfc3339(after), "1970-01-01T00:00:00.001Z");
    }

    #[test]
    fn parses_what_it_formats_and_nothing_else() {
        for ms in [0, 951_782_400_000, 1_796_000_000_123, 4_102_444_799_999] {
            let t = UNIX_EPOCH + Duration::from_millis(ms);
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
            let t = UNIX_EPOCH - Duration::from_millis(ms / 3);
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
        }
        assert_eq!(
            parse_rfc3339("2026-11-30T00:53:20Z"),
            parse_rfc3339("2026-11-30T00:53:20.000Z")
        );
        for bad in [
            "",
            "2026-11-30T00:53:2éZ",
            "2026-13-30T00:53:20.123Z",
            "2026-11-30 00:53:20.123Z",
            "2026-11-30T00-53:20.123Z",
            "2026-11-30T0a:53:20.123Z",
            "+026-11-30T00:53:20.123Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
