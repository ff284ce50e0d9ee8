//! Tables from CSV files: a header row; the label (or target) columns named in the config,
//! input columns that are numbers, and labels that may be integers or strings.

use super::columns::{self, Encoding, Missing, Unseen};
use super::{HostSplit, Labels, Matrix};
use crate::config::{TableSpec, Task};
use crate::error::{EmberError, Result};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::HashMap;
use std::path::Path;

pub use super::text_csv::{TextCsv, read_text};

/// The input columns of a table: `features` as given, or every column that is not a target,
/// the scalar column or ignored. Each named column must exist and not be a target.
pub fn feature_names(csv: &TextCsv, spec: &TableSpec) -> Result<Vec<String>> {
    let mut used = spec.targets.clone();
    used.extend(spec.scalar_column.clone());
    for name in used.iter().chain(&spec.ignore) {
        let field = if spec.ignore.contains(name) {
            "data.ignore"
        } else {
            "data.label"
        };
        csv.column(name, field)?;
    }
    let names = match &spec.features {
        Some(given) => {
            for name in given {
                csv.column(name, "data.features")?;
                if used.contains(name) {
                    return Err(csv.fail(format!(
                        "data.features names \"{name}\", which is the label or a target"
                    )));
                }
            }
            given.clone()
        }
        None => csv
            .header
            .iter()
            .filter(|h| !used.contains(h) && !spec.ignore.contains(h))
            .cloned()
            .collect(),
    };
    if names.is_empty() {
        return Err(csv.fail("no input columns besides the label".to_string()));
    }
    Ok(names)
}

/// A class name as ember stores it: an integer label in canonical form ("07" is "7"), any other
/// label as written.
fn class_key(text: &str) -> String {
    text.parse::<i64>()
        .map_or_else(|_| text.to_string(), |v| v.to_string())
}

/// The classes of a label column: integers sorted numerically when every label is one,
/// otherwise the strings sorted.
pub fn classes_of(csv: &TextCsv, label: &str) -> Result<Vec<String>> {
    let c = csv.column(label, "data.label")?;
    // Each distinct spelling once: a label column of millions of rows holds a few.
    let spellings: FxHashSet<&str> = csv.texts(c).map(|(t, _)| t).collect();
    let keys = super::class_order(spellings.into_iter().map(class_key).collect());
    if keys.is_empty() {
        return Err(csv.fail("no data rows".to_string()));
    }
    Ok(keys)
}

/// Class indices of `values` (label texts with their line numbers) on the training classes;
/// a label the training set never had is an error naming it.
pub fn class_indices<'a>(
    path: &Path,
    values: impl Iterator<Item = (&'a str, u64)>,
    classes: &[String],
) -> Result<Vec<i64>> {
    let index: HashMap<&str, i64> = classes
        .iter()
        .enumerate()
        .map(|(i, c)| (c.as_str(), i as i64))
        .collect();
    // The class of each spelling met so far, so that a label is put in canonical form once.
    let mut known: FxHashMap<&str, i64> = FxHashMap::default();
    values
        .map(|(text, line)| {
            if let Some(&class) = known.get(text) {
                return Ok(class);
            }
            let class = index
                .get(class_key(text).as_str())
                .copied()
                .ok_or_else(|| {
                    EmberError::file(
                        path,
                        format!(
                            "line {line}: label \"{text}\" is not one of the training classes ({})",
                            classes.join(", ")
                        ),
                    )
                })?;
            known.insert(text, class);
            Ok(class)
        })
        .collect()
}

/// How a table's input columns become numbers.
pub enum InputColumns<'a> {
    /// Columns of numbers, by name, in this order.
    Numbers(&'a [String]),
    /// Typed columns, encoded as fitted on the training file.
    Encoded(&'a [Encoding], &'a Missing),
    /// Inputs already encoded (the training file's, as they were fitted); with an order, the
    /// file's row `order[i]` as row `i`.
    Ready(Matrix, Unseen, Option<Vec<usize>>),
}

impl InputColumns<'_> {
    /// The inputs of every row of `csv`, the category levels it had that training had not,
    /// and the order of the rows when it is not the file's.
    fn read(self, csv: &TextCsv) -> Result<(Matrix, Unseen, Option<Vec<usize>>)> {
        match self {
            InputColumns::Numbers(names) => {
                let cols: Vec<usize> = names
                    .iter()
                    .map(|n| csv.column(n, "data.features"))
                    .collect::<Result<_>>()?;
                Ok((csv.numbers(&cols)?, Unseen::default(), None))
            }
            InputColumns::Encoded(encodings, missing) => {
                let (inputs, unseen) = columns::encode(csv, encodings, missing)?;
                Ok((inputs, unseen, None))
            }
            InputColumns::Ready(inputs, unseen, order) => Ok((inputs, unseen, order)),
        }
    }
}

/// The rows of a table as the task needs them: the inputs, the scalar column apart, and labels
/// as class indices (on `classes`) or real targets; with the levels training had not seen.
pub fn to_split(
    csv: &TextCsv,
    spec: &TableSpec,
    inputs: InputColumns,
    task: Task,
    classes: Option<&[String]>,
) -> Result<(HostSplit, Unseen)> {
    if csv.rows() == 0 {
        return Err(csv.fail("no data rows, only a header".to_string()));
    }
    let cols = |names: &[String], field: &str| -> Result<Vec<usize>> {
        names.iter().map(|n| csv.column(n, field)).collect()
    };
    let (inputs, unseen, order) = inputs.read(csv)?;
    let scalar = match &spec.scalar_column {
        Some(s) => Some(csv.numbers(&[csv.column(s, "data.scalar_column")?])?.values),
        None => None,
    };
    let labels = match (task, classes) {
        (Task::Regression, _) => {
            Labels::Values(csv.numbers(&cols(&spec.targets, "data.targets")?)?)
        }
        (_, Some(classes)) => {
            let c = csv.column(&spec.targets[0], "data.label")?;
            let indices = class_indices(&csv.path, csv.texts(c), classes)?;
            if task == Task::Binary {
                Labels::Binary(indices)
            } else {
                Labels::Classes(indices)
            }
        }
        (_, None) => unreachable!("a classifier's classes are known before its rows are read"),
    };
    // The labels (and scalar) in the inputs' order of rows.
    let (scalar, labels) = match &order {
        Some(order) => (
            scalar.map(|s| order.iter().map(|&r| s[r]).collect()),
            labels.take(order),
        ),
        None => (scalar, labels),
    };
    let split = HostSplit {
        features: inputs,
        scalar,
        labels,
    };
    Ok((split, unseen))
}

/// The inputs of a CSV file for `ember predict`: the run's feature columns (and scalar column)
/// by name, or its typed columns encoded; a label column may be there or not.
pub fn read_inputs(path: &Path, spec: &TableSpec) -> Result<(Matrix, Option<Vec<f32>>)> {
    if let Some(encoding) = &spec.encoding {
        let csv = super::tables::read_encoded(path, spec, encoding)?;
        let (inputs, unseen) = columns::encode(&csv, encoding, &spec.missing())?;
        if let Some(line) = unseen.line(path) {
            eprintln!("{line}");
        }
        return Ok((inputs, None));
    }
    let csv = read_text(path)?;
    // A run on a built-in table has no column names: then every column but the label is input.
    let features = spec.features.clone().unwrap_or_else(|| {
        csv.header
            .iter()
            .filter(|h| !spec.targets.contains(h) && spec.scalar_column.as_ref() != Some(h))
            .cloned()
            .collect()
    });
    let cols: Vec<usize> = features
        .iter()
        .map(|n| csv.column(n, "a feature column of the run"))
        .collect::<Result<_>>()?;
    let scalar = match &spec.scalar_column {
        Some(s) => Some(csv.numbers(&[csv.column(s, "data.scalar_column")?])?.values),
        None => None,
    };
    Ok((csv.numbers(&cols)?, scalar))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::text_csv::delimiter_of;

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        crate::data::test_file("csv", name, text)
    }

    fn spec(targets: &[&str]) -> TableSpec {
        TableSpec {
            csv: None,
            targets: targets.iter().map(|t| t.to_string()).collect(),
            features: None,
            ignore: Vec::new(),
            columns: None,
            missing_values: None,
            embed: Default::default(),
            scaling: Default::default(),
            encoding: None,
            scalar_column: None,
            valid_fraction: 0.1,
            fold: None,
            valid_csv: None,
            test_csv: None,
            standardize: false,
            standardize_target: false,
            target_stats: None,
            stats: None,
        }
    }

    fn read(path: &Path, spec: &TableSpec, task: Task) -> Result<HostSplit> {
        let csv = read_text(path)?;
        let features = feature_names(&csv, spec)?;
        let classes = match task {
            Task::Regression => None,
            _ => Some(classes_of(&csv, &spec.targets[0])?),
        };
        let inputs = InputColumns::Numbers(&features);
        Ok(to_split(&csv, spec, inputs, task, classes.as_deref())?.0)
    }

    #[test]
    fn reads_features_and_labels() {
        let p = file("ok.csv", "a,label,b\n1,0,2\n3,1,4\n");
        let t = read(&p, &spec(&["label"]), Task::Binary).unwrap();
        assert_eq!(t.features.values, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(t.labels, Labels::Binary(vec![0, 1]));
    }

    #[test]
    fn integer_classes_sort_numerically_and_strings_alphabetically() {
        let p = file("ints.csv", "a,y\n1,10\n2,9\n3,010\n4,-1\n");
        let csv = read_text(&p).unwrap();
        assert_eq!(classes_of(&csv, "y").unwrap(), ["-1", "9", "10"]);
        let p = file("words.csv", "a,y\n1,dog\n2,cat\n3,emu\n4,cat\n");
        let t = read(&p, &spec(&["y"]), Task::Classification).unwrap();
        assert_eq!(t.labels, Labels::Classes(vec![1, 0, 2, 0]));
    }

    #[test]
    fn features_and_ignore_pick_columns() {
        let p = file("pick.csv", "id,a,b,c,y\n7,1,2,3,0.5\n8,4,5,6,1.5\n");
        let mut s = spec(&["y"]);
        s.ignore = vec!["id".into()];
        let t = read(&p, &s, Task::Regression).unwrap();
        assert_eq!(t.features.values, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        s.features = Some(vec!["c".into(), "a".into()]);
        let t = read(&p, &s, Task::Regression).unwrap();
        assert_eq!(t.features.values, vec![3.0, 1.0, 6.0, 4.0]);
        assert_eq!(
            t.labels,
            Labels::Values(Matrix {
                rows: 2,
                cols: 1,
                values: vec![0.5, 1.5]
            })
        );
        s.features = Some(vec!["y".into()]);
        let err = read(&p, &s, Task::Regression).unwrap_err().to_string();
        assert!(err.contains("data.features names \"y\""), "{err}");
    }

    #[test]
    fn reads_the_scalar_column_apart() {
        let p = file("ls.csv", "x0,x1,f,y\n1,2,3,4\n5,6,7,8\n");
        let mut s = spec(&["y"]);
        s.scalar_column = Some("f".into());
        let t = read(&p, &s, Task::Regression).unwrap();
        assert_eq!(t.features.cols, 2);
        assert_eq!(t.scalar, Some(vec![3.0, 7.0]));
    }

    #[test]
    fn semicolons_tabs_and_bars_are_found_in_the_header() {
        for (sep, text) in [
            (";", "a;label;b\n1,5;0;2\n"),
            ("tab", "a\tlabel\tb\n1,5\t0\t2\n"),
            ("bar", "a|label|b\n1,5|0|2\n"),
        ] {
            let p = file(&format!("sep-{sep}.csv"), text);
            let csv = read_text(&p).unwrap();
            assert_eq!(csv.header, ["a", "label", "b"], "{sep}");
            assert_eq!(csv.texts(0).next().unwrap().0, "1,5", "{sep}");
        }
        assert_eq!(delimiter_of(b"\"x;y\",z"), b',');
        assert_eq!(delimiter_of(b"one"), b',');
    }

    #[test]
    fn a_header_naming_a_column_twice_is_an_error() {
        let p = file("twice.csv", "a,b,a\n1,2,3\n");
        let err = read_text(&p).err().unwrap().to_string();
        assert!(
            err.contains("twice.csv: the header names column \"a\" twice; rename one"),
            "{err}"
        );
    }

    #[test]
    fn wrong_field_count_names_the_line() {
        let p = file("short.csv", "a,label\n1,0\n2\n");
        let err = read_text(&p).err().unwrap().to_string();
        assert!(
            err.contains("short.csv: line 3: 1 fields, but the header has 2"),
            "{err}"
        );
    }

    #[test]
    fn non_numeric_cell_and_nan_target_name_line_column_and_value() {
        let p = file("nan.csv", "a,label\n1,0\nabc,1\n");
        let err = read(&p, &spec(&["label"]), Task::Binary)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3: column \"a\" holds \"abc\""), "{err}");
        let p = file("nany.csv", "a,y\n1,0.5\n2,NaN\n");
        let err = read(&p, &spec(&["y"]), Task::Regression)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 3: column \"y\" holds \"NaN\", not a finite number"),
            "{err}"
        );
    }

    #[test]
    fn missing_label_column_and_unknown_label_are_errors() {
        let p = file("nolabel.csv", "a,b\n1,0\n2,1\n");
        let err = read(&p, &spec(&["label"]), Task::Binary)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no column named \"label\""), "{err}");
        let err = class_indices(&p, [("cat", 4)].into_iter(), &["0".into(), "1".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 4: label \"cat\" is not one of the training classes (0, 1)"),
            "{err}"
        );
    }
}
