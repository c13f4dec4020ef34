//! RFC 3339 timestamps of Unix milliseconds, as every task body shows them.

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC) of Unix milliseconds.
///
/// Years 0 to 9999 are written digit by digit (a task's timestamps are
/// formatted on every read); anything else takes `time`'s formatter, which
/// gives the same text for those years.
pub(crate) fn rfc3339(ms: i64) -> String {
    match rfc3339_digits(ms) {
        // Digits and ASCII punctuation only: always UTF-8.
        Some(text) => {
            std::str::from_utf8(&text).map_or_else(|_| rfc3339_formatted(ms), String::from)
        }
        None => rfc3339_formatted(ms),
    }
}

pub(crate) fn rfc3339_digits(ms: i64) -> Option<[u8; 24]> {
    const DAY_MS: i64 = 86_400_000;
    /// Julian day number of 1970-01-01.
    const UNIX_EPOCH_JD: i64 = 2_440_588;
    let jd = i32::try_from(ms.div_euclid(DAY_MS).checked_add(UNIX_EPOCH_JD)?).ok()?;
    let (year, month, day) = time::Date::from_julian_day(jd).ok()?.to_calendar_date();
    let year = u32::try_from(year).ok().filter(|y| *y <= 9999)?;
    // 0 <= in_day < DAY_MS, so it fits a u32.
    let in_day = u32::try_from(ms.rem_euclid(DAY_MS)).ok()?;
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut n: u32| {
        for slot in out[at..at + width].iter_mut().rev() {
            // A digit: `n % 10 < 10`.
            *slot = b'0' + u8::try_from(n % 10).unwrap_or(0);
            n /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, u32::from(u8::from(month)));
    put(8, 2, u32::from(day));
    put(11, 2, in_day / 3_600_000);
    put(14, 2, in_day / 60_000 % 60);
    put(17, 2, in_day / 1000 % 60);
    put(20, 3, in_day % 1000);
    Some(out)
}

fn rfc3339_formatted(ms: i64) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(FORMAT).ok())
        .unwrap_or_else(|| String::from("1970-01-01T00:00:00.000Z"))
}

/// `ms` as a quoted RFC 3339 timestamp, as [`rfc3339`] writes it.
pub(crate) fn write_rfc3339(out: &mut String, ms: i64) {
    write_stamp(out, ms, rfc3339_digits(ms).as_ref());
}

/// `ms` quoted, from its digits if [`rfc3339_digits`] gave them.
pub(crate) fn write_stamp(out: &mut String, ms: i64, digits: Option<&[u8; 24]>) {
    out.push('"');
    match digits.and_then(|d| std::str::from_utf8(d).ok()) {
        Some(digits) => out.push_str(digits),
        None => out.push_str(&rfc3339_formatted(ms)),
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_match_the_time_formatter() {
        let mut cases = vec![
            0,
            -1,
            1,
            999,
            1_000,
            86_399_999,
            86_400_000,
            951_782_400_000,     // 2000-02-29
            1_767_225_600_123,   // 2026-01-01
            4_107_542_400_000,   // 2100-03-01
            253_402_300_799_999, // 9999-12-31T23:59:59.999
            253_402_300_800_000, // year 10000: out of range
            -62_167_219_200_000, // 0000-01-01
            -62_167_219_200_001, // before year 0
            i64::MIN,
            i64::MAX,
        ];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Spread over years 0 to 10000 and a bit beyond.
            cases.push((x % 320_000_000_000_000) as i64 - 63_000_000_000_000);
        }
        for ms in cases {
            assert_eq!(rfc3339(ms), rfc3339_formatted(ms), "{ms}");
        }
    }
}
