//! Swept values and metrics as a reader wants them: four significant digits, strings without
//! their TOML quotes. Only what is printed or drawn goes through here; the trials' overrides
//! and `config.toml` keep every digit.

use super::report::RankBy;
pub use crate::digits::significant;
use toml::Value;

/// Significant digits of a swept number on screen: enough to tell a random draw from its
/// neighbours, few enough to read (`adam.lr=6.027e-4`, not `0.0006026821186406843`).
const DIGITS: usize = 4;

/// A swept value: floats to four significant digits, strings bare, lists element by element.
pub fn value(v: &Value) -> String {
    match v {
        Value::Float(x) => significant(*x, DIGITS),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(value).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// `key=value` pairs as printed: `adam.lr=6.027e-4 schedule.kind=cosine`.
pub fn pairs<'a>(sets: impl Iterator<Item = &'a (String, Value)>) -> String {
    let parts: Vec<String> = sets.map(|(k, v)| format!("{k}={}", value(v))).collect();
    parts.join(" ")
}

/// A ranking metric: accuracy in percent with two decimals, a loss to four significant digits.
pub fn metric(rank_by: RankBy, v: f64) -> String {
    match rank_by {
        RankBy::Accuracy => format!("{:.2} %", 100.0 * v),
        RankBy::Loss => significant(v, DIGITS),
    }
}

/// A metric's mean with its spread over seeds: `91.07 ± 0.12 %`, or the mean alone.
pub fn mean_std(rank_by: RankBy, mean: f64, std: Option<f64>) -> String {
    match (rank_by, std) {
        (RankBy::Accuracy, Some(s)) => format!("{:.2} ± {:.2} %", 100.0 * mean, 100.0 * s),
        (RankBy::Loss, Some(s)) => format!("{} ± {}", metric(rank_by, mean), metric(rank_by, s)),
        (_, None) => metric(rank_by, mean),
    }
}

/// `text` cut into lines of at most `width` characters at spaces (a longer word keeps a line
/// of its own), at most `max_lines` of them: a cut last line ends with `…`.
pub fn wrap(text: &str, width: usize, max_lines: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    if lines.len() > max_lines {
        lines.truncate(max_lines);
        if let Some(last) = lines.last_mut() {
            last.push_str(" …");
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_bare() {
        assert_eq!(value(&Value::Float(0.0006026821186406843)), "6.027e-4");
        assert_eq!(value(&Value::Integer(256)), "256");
        assert_eq!(value(&Value::String("cosine".into())), "cosine");
        assert_eq!(value(&Value::Boolean(true)), "true");
        let widths = Value::Array(vec![Value::Integer(256), Value::Integer(128)]);
        assert_eq!(value(&widths), "[256, 128]");
        let sets = [
            ("adam.lr".to_string(), Value::Float(0.000595736197958113)),
            (
                "schedule.kind".to_string(),
                Value::String("constant".into()),
            ),
        ];
        assert_eq!(
            pairs(sets.iter()),
            "adam.lr=5.957e-4 schedule.kind=constant"
        );
    }

    #[test]
    fn metrics_print_as_read() {
        assert_eq!(metric(RankBy::Accuracy, 0.910667), "91.07 %");
        assert_eq!(metric(RankBy::Loss, 0.312437), "0.3124");
        assert_eq!(
            mean_std(RankBy::Accuracy, 0.9014, Some(0.00149)),
            "90.14 ± 0.15 %"
        );
        assert_eq!(mean_std(RankBy::Loss, 0.31, Some(0.0042)), "0.31 ± 0.0042");
        assert_eq!(mean_std(RankBy::Loss, 0.31, None), "0.31");
    }

    #[test]
    fn long_labels_wrap_at_spaces_and_end_cut() {
        let label = "adam.lr=6.027e-4 batch_size=64 model.dropout=0.1 schedule.kind=cosine";
        assert_eq!(
            wrap(label, 32, 3),
            [
                "adam.lr=6.027e-4 batch_size=64",
                "model.dropout=0.1",
                "schedule.kind=cosine"
            ]
        );
        assert_eq!(
            wrap(label, 32, 2),
            ["adam.lr=6.027e-4 batch_size=64", "model.dropout=0.1 …"]
        );
        assert_eq!(wrap("a", 1, 1), ["a"]);
        assert!(wrap("", 10, 2).is_empty());
    }
}
