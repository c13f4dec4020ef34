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

/// `00` to `99`, two bytes each.
const PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// The calendar date (year, month, day) of `days` since 1970-01-01, for
/// 0000-03-01 to 9999-12-31 (`None` outside): Neri and Schneider's
/// computation ("Euclidean affine functions and their application to
/// calendar algorithms", 2022), a few multiplications and shifts in `u32`
/// instead of `time`'s Julian-day conversion and its month table.
fn civil(days: i64) -> Option<(u32, u32, u32)> {
    /// Days from 0000-03-01 (the first day of the computational
    /// calendar, whose years begin in March) to 1970-01-01.
    const FROM_MARCH_0: i64 = 719_468;
    /// Days from 0000-03-01 to 9999-12-31.
    const LAST: u32 = 3_652_364;
    let n = u32::try_from(days.checked_add(FROM_MARCH_0)?)
        .ok()
        .filter(|n| *n <= LAST)?;
    // Century, then the year and the day of the year in it.
    let n1 = 4 * n + 3;
    let century = n1 / 146_097;
    let n2 = n1 % 146_097 / 4 * 4 + 3;
    let p2 = 2_939_745 * u64::from(n2);
    let year_of_century = u32::try_from(p2 >> 32).ok()?;
    let day_of_year = (p2 & 0xffff_ffff) as u32 / 2_939_745 / 4;
    // Month and day, from March.
    let n3 = 2_141 * day_of_year + 197_913;
    let (month, day) = (n3 >> 16, (n3 & 0xffff) / 2_141 + 1);
    // January and February belong to the next calendar year.
    let january = day_of_year >= 306;
    let year = 100 * century + year_of_century + u32::from(january);
    Some((year, if january { month - 12 } else { month }, day))
}

pub(crate) fn rfc3339_digits(ms: i64) -> Option<[u8; 24]> {
    const DAY_MS: i64 = 86_400_000;
    let (year, month, day) = civil(ms.div_euclid(DAY_MS))?;
    // 0 <= in_day < DAY_MS, so it fits a u32.
    let in_day = u32::try_from(ms.rem_euclid(DAY_MS)).ok()?;
    let mut out = *b"0000-00-00T00:00:00.000Z";
    // Two digits at a time, from a table: a division per pair, not per
    // digit (every read of a task writes two stamps).
    let mut pair = |at: usize, n: u32| {
        let i = (n % 100) as usize * 2;
        if let (Some(digits), Some(slot)) = (PAIRS.get(i..i + 2), out.get_mut(at..at + 2)) {
            slot.copy_from_slice(digits);
        }
    };
    pair(0, year / 100);
    pair(2, year);
    pair(5, month);
    pair(8, day);
    pair(11, in_day / 3_600_000);
    pair(14, in_day / 60_000 % 60);
    pair(17, in_day / 1000 % 60);
    let ms = in_day % 1000;
    pair(21, ms);
    // `ms / 100 < 10`: one digit.
    out[20] = b'0' + u8::try_from(ms / 100).unwrap_or(0);
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
