//! A date's parts in the graph: from days since 1970-01-01 to year, month, day, weekday and day
//! of the year (`data::columns::dates::PARTS`), by the integer arithmetic of Howard Hinnant's
//! `civil_from_days` and `days_from_civil` on doubles (exact for whole numbers far beyond any
//! calendar date), since ONNX has no date operators.

use super::graph::Graph;

/// `[n, 1]` doubles (whole days) -> `[n, 5]` doubles: year, month (1-12), day (1-31), weekday
/// (0 = Monday), day of the year (1-366).
pub fn parts(g: &mut Graph, days: &str) -> String {
    let (year, month, day) = civil_from_days(g, days);
    let weekday = weekday(g, days);
    let jan1 = january_first(g, &year);
    let since = g.bin("Sub", days, &jan1);
    let one = g.double(1.0);
    let yearday = g.bin("Add", &since, &one);
    g.op(
        "Concat",
        &[&year, &month, &day, &weekday, &yearday],
        vec![super::graph::Attr::Int("axis", 1)],
    )
}

/// Year, month and day of `days`, in the proleptic Gregorian calendar.
fn civil_from_days(g: &mut Graph, days: &str) -> (String, String, String) {
    let z = g.affine(days, 1.0, 719_468.0);
    let era = g.floor_div(&z, 146_097.0);
    let era_days = g.affine(&era, 146_097.0, 0.0);
    let doe = g.bin("Sub", &z, &era_days);
    // yoe = (doe - doe/1460 + doe/36524 - doe/146096) / 365, each division floored.
    let a = g.floor_div(&doe, 1460.0);
    let b = g.floor_div(&doe, 36_524.0);
    let c = g.floor_div(&doe, 146_096.0);
    let t = g.bin("Sub", &doe, &a);
    let t = g.bin("Add", &t, &b);
    let t = g.bin("Sub", &t, &c);
    let yoe = g.floor_div(&t, 365.0);
    let doy = day_of_march_year(g, &doe, &yoe);
    let mp = {
        let t = g.affine(&doy, 5.0, 2.0);
        g.floor_div(&t, 153.0)
    };
    let day = {
        let t = g.affine(&mp, 153.0, 2.0);
        let t = g.floor_div(&t, 5.0);
        let t = g.bin("Sub", &doy, &t);
        g.affine(&t, 1.0, 1.0)
    };
    // The year counted from March: January and February (mp 10 and 11) belong to the next one.
    let jan_feb = g.floor_div(&mp, 10.0);
    let month = {
        let t = g.affine(&jan_feb, -12.0, 3.0);
        g.bin("Add", &mp, &t)
    };
    let year = {
        let t = g.affine(&era, 400.0, 0.0);
        let t = g.bin("Add", &yoe, &t);
        g.bin("Add", &t, &jan_feb)
    };
    (year, month, day)
}

/// `doe - (365 * yoe + yoe / 4 - yoe / 100)`: the day of the March-based year.
fn day_of_march_year(g: &mut Graph, doe: &str, yoe: &str) -> String {
    let days = year_start(g, yoe);
    g.bin("Sub", doe, &days)
}

/// `365 * yoe + yoe / 4 - yoe / 100`, divisions floored: the days before year `yoe` of an era.
fn year_start(g: &mut Graph, yoe: &str) -> String {
    let y4 = g.floor_div(yoe, 4.0);
    let y100 = g.floor_div(yoe, 100.0);
    let t = g.affine(yoe, 365.0, 0.0);
    let t = g.bin("Add", &t, &y4);
    g.bin("Sub", &t, &y100)
}

/// 0 = Monday: 1970-01-01 was a Thursday (3).
fn weekday(g: &mut Graph, days: &str) -> String {
    let shifted = g.affine(days, 1.0, 3.0);
    let weeks = g.floor_div(&shifted, 7.0);
    let whole = g.affine(&weeks, 7.0, 0.0);
    g.bin("Sub", &shifted, &whole)
}

/// Days since 1970-01-01 of January 1 of `year` (`days_from_civil(year, 1, 1)`).
fn january_first(g: &mut Graph, year: &str) -> String {
    // January belongs to the March-based year before: y - 1, day 306 of it.
    let y = g.affine(year, 1.0, -1.0);
    let era = g.floor_div(&y, 400.0);
    let era_years = g.affine(&era, 400.0, 0.0);
    let yoe = g.bin("Sub", &y, &era_years);
    let start = year_start(g, &yoe);
    let doe = g.affine(&start, 1.0, 306.0);
    let era_days = g.affine(&era, 146_097.0, -719_468.0);
    g.bin("Add", &era_days, &doe)
}
