//! `ember eval`'s report on a classifier: per class its precision, recall, F1 and support, the
//! confusion matrix, the balanced accuracy, and for a binary task the ROC AUC, computed on the
//! host from the true classes and the model's predictions.

use serde_json::json;
use std::fmt::Write as _;

/// The counts behind the report.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassReport {
    pub classes: Vec<String>,
    /// `confusion[t][p]`: rows of true class `t` predicted as `p`.
    pub confusion: Vec<Vec<usize>>,
    /// A binary task's area under the ROC curve, from the positive class's probability.
    pub roc_auc: Option<f64>,
}

/// One class's figures.
struct PerClass {
    precision: f64,
    recall: f64,
    f1: f64,
    support: usize,
}

impl ClassReport {
    /// From each row's true class, predicted class and (binary) positive-class probability.
    pub fn new(
        classes: &[String],
        truth: &[usize],
        predicted: &[usize],
        positive: Option<&[f64]>,
    ) -> ClassReport {
        let k = classes.len();
        let mut confusion = vec![vec![0; k]; k];
        for (&t, &p) in truth.iter().zip(predicted) {
            confusion[t][p] += 1;
        }
        ClassReport {
            classes: classes.to_vec(),
            confusion,
            roc_auc: positive.and_then(|p| roc_auc(truth, p)),
        }
    }

    fn per_class(&self, c: usize) -> PerClass {
        let hit = self.confusion[c][c] as f64;
        let support: usize = self.confusion[c].iter().sum();
        let predicted: usize = self.confusion.iter().map(|row| row[c]).sum();
        let ratio = |n: f64, d: usize| if d > 0 { n / d as f64 } else { 0.0 };
        let (precision, recall) = (ratio(hit, predicted), ratio(hit, support));
        let f1 = match precision + recall {
            s if s > 0.0 => 2.0 * precision * recall / s,
            _ => 0.0,
        };
        PerClass {
            precision,
            recall,
            f1,
            support,
        }
    }

    /// The mean recall over the classes that have rows.
    pub fn balanced_accuracy(&self) -> f64 {
        let present: Vec<f64> = (0..self.classes.len())
            .map(|c| self.per_class(c))
            .filter(|p| p.support > 0)
            .map(|p| p.recall)
            .collect();
        present.iter().sum::<f64>() / present.len().max(1) as f64
    }

    /// The report as text: the per-class table, then the confusion matrix.
    pub fn table(&self) -> String {
        let w = self
            .classes
            .iter()
            .map(|c| c.chars().count())
            .max()
            .unwrap_or(5)
            .max(5);
        let mut t = format!("{:w$}  precision  recall     f1  support\n", "class");
        for (c, name) in self.classes.iter().enumerate() {
            let p = self.per_class(c);
            let _ = writeln!(
                t,
                "{name:w$}  {:>9.4}  {:>6.4}  {:>5.4}  {:>7}",
                p.precision, p.recall, p.f1, p.support
            );
        }
        let _ = write!(
            t,
            "balanced accuracy {:.2} %",
            100.0 * self.balanced_accuracy()
        );
        if let Some(auc) = self.roc_auc {
            let _ = write!(t, ", ROC AUC {auc:.4}");
        }
        let _ = writeln!(t, "\nconfusion (rows: true class, columns: predicted):");
        let cell = self
            .confusion
            .iter()
            .flatten()
            .map(|n| n.to_string().len())
            .max()
            .unwrap_or(1)
            .max(w.min(12));
        let head: Vec<String> = self
            .classes
            .iter()
            .map(|c| format!("{:>cell$}", clip(c, cell)))
            .collect();
        let _ = writeln!(t, "{:w$}  {}", "", head.join("  "));
        for (name, row) in self.classes.iter().zip(&self.confusion) {
            let cells: Vec<String> = row.iter().map(|n| format!("{n:>cell$}")).collect();
            let _ = writeln!(t, "{name:w$}  {}", cells.join("  "));
        }
        t.trim_end().to_string()
    }

    /// The same figures as JSON.
    pub fn json(&self) -> serde_json::Value {
        let classes: Vec<serde_json::Value> = (0..self.classes.len())
            .map(|c| {
                let p = self.per_class(c);
                json!({
                    "class": self.classes[c],
                    "precision": p.precision,
                    "recall": p.recall,
                    "f1": p.f1,
                    "support": p.support,
                })
            })
            .collect();
        json!({
            "classes": classes,
            "confusion": self.confusion,
            "balanced_accuracy": self.balanced_accuracy(),
            "roc_auc": self.roc_auc,
        })
    }
}

fn clip(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

/// The area under the ROC curve of `scores` for class 1 against class 0: the probability that
/// a positive row scores above a negative one, ties counting half (Mann–Whitney). `None`
/// without rows of both classes.
fn roc_auc(truth: &[usize], scores: &[f64]) -> Option<f64> {
    let mut rows: Vec<(f64, usize)> = scores.iter().copied().zip(truth.iter().copied()).collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = rows.iter().filter(|r| r.1 == 1).count();
    let negatives = rows.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    // Sum of the positives' ranks (1-based), tied scores sharing their mean rank.
    let (mut rank_sum, mut i) = (0.0, 0);
    while i < rows.len() {
        let j = i + rows[i..].iter().take_while(|r| r.0 == rows[i].0).count();
        let mean_rank = (i + 1 + j) as f64 / 2.0;
        rank_sum += mean_rank * rows[i..j].iter().filter(|r| r.1 == 1).count() as f64;
        i = j;
    }
    let p = positives as f64;
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn counts_precision_recall_and_f1() {
        let r = ClassReport::new(
            &names(&["a", "b", "c"]),
            &[0, 0, 0, 1, 1, 2],
            &[0, 0, 1, 1, 2, 2],
            None,
        );
        assert_eq!(r.confusion, [[2, 1, 0], [0, 1, 1], [0, 0, 1]]);
        let a = r.per_class(0);
        assert_eq!((a.precision, a.recall, a.support), (1.0, 2.0 / 3.0, 3));
        assert!((a.f1 - 0.8).abs() < 1e-12);
        assert!((r.balanced_accuracy() - (2.0 / 3.0 + 0.5 + 1.0) / 3.0).abs() < 1e-12);
        let table = r.table();
        assert!(table.starts_with("class  precision  recall     f1  support\na         1.0000  0.6667  0.8000        3"), "{table}");
        assert!(table.ends_with("c          0      0      1"), "{table}");
        assert_eq!(r.json()["classes"][1]["support"], 2);
    }

    #[test]
    fn roc_auc_ranks_with_ties() {
        assert_eq!(roc_auc(&[0, 0, 1, 1], &[0.1, 0.2, 0.8, 0.9]), Some(1.0));
        assert_eq!(roc_auc(&[1, 1, 0, 0], &[0.1, 0.2, 0.8, 0.9]), Some(0.0));
        assert_eq!(roc_auc(&[0, 1], &[0.5, 0.5]), Some(0.5));
        // scikit-learn's roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) is 0.75.
        assert_eq!(roc_auc(&[0, 0, 1, 1], &[0.1, 0.4, 0.35, 0.8]), Some(0.75));
        assert_eq!(roc_auc(&[1, 1], &[0.3, 0.4]), None);
    }
}
