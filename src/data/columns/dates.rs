//! Dates in a table's cells: the spellings ember reads without ambiguity, and the numeric parts
//! a model takes from them. A date is held as days since 1970-01-01; the calendar is chrono's.

use chrono::{Datelike, NaiveDate};

/// The parts of a date, in the order they become inputs.
pub const PARTS: [&str; 5] = ["year", "month", "day", "weekday", "yearday"];

/// The spellings [`parse`] reads, for messages.
pub const SPELLINGS: &str = "YYYY-MM-DD or YYYY/MM/DD, optionally followed by a time after 'T' or a space (the time is not used)";

/// 1970-01-01 counted in chrono's days from the common era (0001-01-01 is day 1).
const UNIX_DAY_CE: i64 = 719_163;

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
    // The shape is checked here: chrono's own parser also takes one-digit months and days.
    if b.len() != 10 || b[4] != b[7] || !(b[4] == b'-' || b[4] == b'/') {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = &date[range];
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (y, m, d) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let day = NaiveDate::from_ymd_opt(y as i32, m, d)?;
    Some(i64::from(day.num_days_from_ce()) - UNIX_DAY_CE)
}

/// The date `days` after 1970-01-01, where chrono's calendar reaches.
pub fn date_of(days: i64) -> Option<NaiveDate> {
    let ce = i32::try_from(days.checked_add(UNIX_DAY_CE)?).ok()?;
    NaiveDate::from_num_days_from_ce_opt(ce)
}

/// [`PARTS`] of `date`: year, month (1–12), day of the month, weekday (0 = Monday) and day of
/// the year (1–366).
pub fn parts(date: NaiveDate) -> [f32; 5] {
    [
        date.year() as f32,
        date.month() as f32,
        date.day() as f32,
        date.weekday().num_days_from_monday() as f32,
        date.ordinal() as f32,
    ]
}

/// Day `days` as `YYYY-MM-DD` (as a number of days where chrono's calendar does not reach).
pub fn format(days: i64) -> String {
    date_of(days).map_or_else(
        || format!("day {days}"),
        |d| d.format("%Y-%m-%d").to_string(),
    )
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
        let d = date_of(parse("2024-12-31").unwrap()).unwrap();
        assert_eq!(parts(d), [2024.0, 12.0, 31.0, 1.0, 366.0]);
        assert_eq!(parts(date_of(0).unwrap()), [1970.0, 1.0, 1.0, 3.0, 1.0]);
        for days in (-300_000..2_900_000).step_by(997) {
            assert_eq!(parse(&format(days)), Some(days), "{days}");
        }
        assert_eq!(date_of(i64::MAX), None);
        assert_eq!(format(i64::MAX), format!("day {}", i64::MAX));
    }
}
