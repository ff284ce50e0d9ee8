//! Tables from CSV files: a header row, one numeric cell per column, the label (or target)
//! column named in the config; every other column is an input.

use super::{HostSplit, Labels, Matrix};
use crate::config::JobKind;
use crate::error::{EmberError, Result};
use std::path::Path;

/// A CSV file whose every cell is a finite number, with the line number of each row.
pub struct NumericCsv {
    pub header: Vec<String>,
    pub rows: Vec<Vec<f32>>,
    pub lines: Vec<u64>,
}

impl NumericCsv {
    fn column(&self, path: &Path, name: &str, field: &str) -> Result<usize> {
        self.header.iter().position(|h| h == name).ok_or_else(|| {
            EmberError::file(
                path,
                format!(
                    "no column named \"{name}\" ({field}); the header has {}",
                    self.header.join(",")
                ),
            )
        })
    }
}

/// Reads a CSV file with a header row; every row must have one finite number per column.
pub fn read_numeric(path: &Path) -> Result<NumericCsv> {
    let fail = |what: String| EmberError::file(path, what);
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| fail(csv_reason(&e)))?;
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| fail(csv_reason(&e)))?
        .iter()
        .map(str::to_string)
        .collect();
    if header.iter().all(String::is_empty) {
        return Err(fail("empty file: expected a header row".into()));
    }
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(fail(csv_reason(&e))),
        }
        let line = record.position().map_or(0, |p| p.line());
        if record.len() == 1 && record[0].is_empty() {
            continue; // a blank line
        }
        if record.len() != header.len() {
            return Err(fail(format!(
                "line {line}: {} fields, but the header has {}",
                record.len(),
                header.len()
            )));
        }
        let row = record
            .iter()
            .enumerate()
            .map(|(i, text)| match text.parse::<f32>() {
                Ok(v) if v.is_finite() => Ok(v),
                _ => Err(fail(format!(
                    "line {line}: column \"{}\" holds \"{text}\", not a finite number",
                    header[i]
                ))),
            })
            .collect::<Result<Vec<f32>>>()?;
        rows.push(row);
        lines.push(line);
    }
    Ok(NumericCsv {
        header,
        rows,
        lines,
    })
}

/// Reads `path` for `job`: tabular-mlp takes a 0/1 `label` column, linear-scalar a real target
/// and the `scalar` column that multiplies the learned p.
pub fn read(path: &Path, job: JobKind, label: &str, scalar: Option<&str>) -> Result<HostSplit> {
    let csv = read_numeric(path)?;
    let label_at = csv.column(path, label, "data.label_column")?;
    let scalar_at = scalar
        .map(|s| csv.column(path, s, "data.scalar_column"))
        .transpose()?;
    if job == JobKind::TabularMlp
        && let Some((row, line)) = csv
            .rows
            .iter()
            .zip(&csv.lines)
            .find(|(r, _)| r[label_at] != 0.0 && r[label_at] != 1.0)
    {
        return Err(EmberError::file(
            path,
            format!(
                "line {line}: label \"{label}\" is {}; tabular-mlp labels must be 0 or 1",
                row[label_at]
            ),
        ));
    }
    if csv.rows.len() < 2 {
        return Err(EmberError::file(
            path,
            format!(
                "{} data rows; at least 2 are needed (one to train, one to validate)",
                csv.rows.len()
            ),
        ));
    }
    let (features, scalars) = inputs(path, &csv, &[label_at], scalar_at)?;
    let targets: Vec<f32> = csv.rows.iter().map(|r| r[label_at]).collect();
    let labels = match job {
        JobKind::TabularMlp => Labels::Binary(targets.iter().map(|y| *y as i64).collect()),
        _ => Labels::Values(targets),
    };
    Ok(HostSplit {
        features,
        scalar: scalars,
        labels,
    })
}

/// The model inputs of a CSV file for prediction: every column but the label (when present) and
/// the scalar column (taken apart).
pub fn read_inputs(
    path: &Path,
    label: &str,
    scalar: Option<&str>,
) -> Result<(Matrix, Option<Vec<f32>>)> {
    let csv = read_numeric(path)?;
    let skip: Vec<usize> = csv
        .header
        .iter()
        .position(|h| h == label)
        .into_iter()
        .collect();
    let scalar_at = scalar
        .map(|s| csv.column(path, s, "data.scalar_column"))
        .transpose()?;
    inputs(path, &csv, &skip, scalar_at)
}

fn inputs(
    path: &Path,
    csv: &NumericCsv,
    skip: &[usize],
    scalar_at: Option<usize>,
) -> Result<(Matrix, Option<Vec<f32>>)> {
    let cols: Vec<usize> = (0..csv.header.len())
        .filter(|i| !skip.contains(i) && Some(*i) != scalar_at)
        .collect();
    if cols.is_empty() {
        return Err(EmberError::file(path, "no input columns besides the label"));
    }
    let mut values = Vec::with_capacity(csv.rows.len() * cols.len());
    for row in &csv.rows {
        values.extend(cols.iter().map(|&c| row[c]));
    }
    Ok((
        Matrix {
            rows: csv.rows.len(),
            cols: cols.len(),
            values,
        },
        scalar_at.map(|s| csv.rows.iter().map(|r| r[s]).collect()),
    ))
}

fn csv_reason(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) => crate::fs::describe_io(io),
        csv::ErrorKind::Utf8 { pos, .. } => format!(
            "line {}: not valid UTF-8 text",
            pos.as_ref().map_or(0, |p| p.line())
        ),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ember-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn reads_features_and_labels() {
        let p = file("ok.csv", "a,label,b\n1,0,2\n3,1,4\n");
        let t = read(&p, JobKind::TabularMlp, "label", None).unwrap();
        assert_eq!(t.features.values, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(t.labels, Labels::Binary(vec![0, 1]));
    }

    #[test]
    fn reads_the_scalar_column_apart() {
        let p = file("ls.csv", "x0,x1,f,y\n1,2,3,4\n5,6,7,8\n");
        let t = read(&p, JobKind::LinearScalar, "y", Some("f")).unwrap();
        assert_eq!(t.features.cols, 2);
        assert_eq!(t.scalar, Some(vec![3.0, 7.0]));
        assert_eq!(t.labels, Labels::Values(vec![4.0, 8.0]));
    }

    #[test]
    fn wrong_field_count_names_the_line() {
        let p = file("short.csv", "a,label\n1,0\n2\n");
        let err = read(&p, JobKind::TabularMlp, "label", None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("short.csv: line 3: 1 fields, but the header has 2"),
            "{err}"
        );
    }

    #[test]
    fn non_numeric_cell_names_line_column_and_value() {
        let p = file("nan.csv", "a,label\n1,0\nabc,1\n");
        let err = read(&p, JobKind::TabularMlp, "label", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3: column \"a\" holds \"abc\""), "{err}");
    }

    #[test]
    fn missing_label_column_and_bad_label_are_errors() {
        let p = file("nolabel.csv", "a,b\n1,0\n2,1\n");
        let err = read(&p, JobKind::TabularMlp, "label", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no column named \"label\""), "{err}");
        let p = file("badlabel.csv", "a,label\n1,0\n2,2\n");
        let err = read(&p, JobKind::TabularMlp, "label", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("must be 0 or 1"), "{err}");
    }
}
