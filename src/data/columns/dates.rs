//! Dates in a table's cells: the spellings ember reads without ambiguity, and the numeric parts
//! a model takes from them. Day arithmetic is Howard Hinnant's `days_from_civil` and
//! `civil_from_days` (proleptic Gregorian calendar, days since 1970-01-01).

/// The parts of a date, in the order they become inputs.
pub const PARTS: [&str; 5] = ["year", "month", "day", "weekday", "yearday"];

/// The spellings [`parse`] reads, for messages.
pub const SPELLINGS: &str = "YYYY-MM-DD or YYYY/MM/DD, optionally followed by a time after 'T' or a space (the time is not used)";

/// Days since 1970-01-01 of a cell spelled `YYYY-MM-DD` or `YYYY/MM/DD`, optionally followed
/// by `T` or a space and a time (ISO 8601 date-times); `None` for anything else, or a day that
/// does not exist (2023-02-30).
pub fn parse(cell: &str) -> Option<i64> {
    let date = match cell.find(['T', ' ']) {
        Some(10) => &cell[..10],
        Some(_) => return None,
        None => cell,
    };
    let b = date.as_bytes();
    if b.len() != 10 || b[4] != b[7] || !(b[4] == b'-' || b[4] == b'/') {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = &date[range];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (y, m, d) = (number(0..4)?, number(5..7)?, number(8..10)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// [`PARTS`] of day `days`: year, month (1–12), day of the month, weekday (0 = Monday) and day
/// of the year (1–366).
pub fn parts(days: i64) -> [f32; 5] {
    let (y, m, d) = civil_from_days(days);
    let weekday = (days + 3).rem_euclid(7); // 1970-01-01 was a Thursday
    let yearday = days - days_from_civil(y, 1, 1) + 1;
    [y, m, d, weekday, yearday].map(|v| v as f32)
}

/// Day `days` as `YYYY-MM-DD`.
pub fn format(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_iso_dates_and_date_times() {
        assert_eq!(parse("1970-01-01"), Some(0));
        assert_eq!(parse("2000-03-01"), Some(11_017));
        assert_eq!(parse("2000/03/01"), Some(11_017));
        assert_eq!(parse("2000-03-01T12:30:00Z"), Some(11_017));
        assert_eq!(parse("2000-03-01 12:30"), Some(11_017));
        assert_eq!(parse("2024-02-29"), Some(19_782));
    }

    #[test]
    fn refuses_what_is_not_one_date() {
        for cell in [
            "2023-02-29",
            "2023-13-01",
            "2023-1-01",
            "2023-01/01",
            "01/02/2023",
            "2023-01-01x",
            "20230101",
            "+023-01-01",
            "",
            "yes",
        ] {
            assert_eq!(parse(cell), None, "{cell}");
        }
    }

    #[test]
    fn parts_and_round_trip() {
        // 2024-12-31 is a Tuesday, the 366th day of a leap year.
        let d = parse("2024-12-31").unwrap();
        assert_eq!(parts(d), [2024.0, 12.0, 31.0, 1.0, 366.0]);
        assert_eq!(parts(0), [1970.0, 1.0, 1.0, 3.0, 1.0]);
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, dd) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, dd), days);
            if (1000..=9999).contains(&y) {
                assert_eq!(parse(&format(days)), Some(days));
            }
        }
    }
}
