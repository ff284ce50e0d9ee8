//! `class_weight`: how much each class's rows count in the training loss, as Keras'
//! `fit(class_weight=...)`. Each training row's loss is multiplied by its class's weight and
//! the batch's mean is taken over rows (not over weights, as PyTorch's `weight=` does), so
//! `"balanced"` keeps the loss on the scale of the unweighted one. Validation losses, metrics
//! and `ember eval` stay unweighted, as in Keras.

use crate::error::Result;
use crate::input_err;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// The job file's `class_weight`.
#[derive(Debug, Clone, PartialEq)]
pub enum ClassWeight {
    /// scikit-learn's and Keras' "balanced": `rows / (classes * rows of the class)`, from the
    /// training split's labels.
    Balanced,
    /// A weight per class name; classes not named weigh 1.
    Given(BTreeMap<String, f64>),
}

impl ClassWeight {
    /// Every given weight must be a finite number above zero.
    pub fn check(&self) -> Result<()> {
        if let ClassWeight::Given(weights) = self
            && let Some((name, w)) = weights.iter().find(|(_, w)| !is_weight(**w))
        {
            return Err(input_err!(
                "class_weight.\"{name}\" = {w} must be a number above 0"
            ));
        }
        Ok(())
    }

    /// The weight of each class, in output order, given the training rows of each.
    pub fn resolve(&self, classes: &[String], counts: &[usize]) -> Result<Vec<f64>> {
        match self {
            ClassWeight::Balanced => Ok(balanced(counts)),
            ClassWeight::Given(weights) => {
                if let Some(name) = weights.keys().find(|n| !classes.contains(n)) {
                    return Err(input_err!(
                        "class_weight names \"{name}\", which is not a class of the labels ({})",
                        classes.join(", ")
                    ));
                }
                Ok(classes
                    .iter()
                    .map(|c| weights.get(c).copied().unwrap_or(1.0))
                    .collect())
            }
        }
    }
}

/// A class weight must be a finite number above zero.
pub fn is_weight(w: f64) -> bool {
    w.is_finite() && w > 0.0
}

/// `n / (k * n_c)` per class; a class with no training row weighs 1 (it is never used).
fn balanced(counts: &[usize]) -> Vec<f64> {
    let n: usize = counts.iter().sum();
    let k = counts.len() as f64;
    counts
        .iter()
        .map(|&c| match c {
            0 => 1.0,
            c => n as f64 / (k * c as f64),
        })
        .collect()
}

impl Serialize for ClassWeight {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            ClassWeight::Balanced => s.serialize_str("balanced"),
            ClassWeight::Given(weights) => weights.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ClassWeight {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(ClassWeightVisitor)
    }
}

struct ClassWeightVisitor;

impl<'de> Visitor<'de> for ClassWeightVisitor {
    type Value = ClassWeight;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("\"balanced\" or a table of class names and weights")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<ClassWeight, E> {
        match v {
            "balanced" => Ok(ClassWeight::Balanced),
            other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
        }
    }

    fn visit_map<M: MapAccess<'de>>(
        self,
        mut map: M,
    ) -> std::result::Result<ClassWeight, M::Error> {
        let mut weights = BTreeMap::new();
        while let Some((name, weight)) = map.next_entry::<String, f64>()? {
            weights.insert(name, weight);
        }
        Ok(ClassWeight::Given(weights))
    }
}

/// Training rows per class, from class indices.
pub fn class_counts(labels: &[i64], classes: usize) -> Vec<usize> {
    let mut counts = vec![0; classes];
    for &l in labels {
        counts[l as usize] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Serialize, Debug, PartialEq)]
    struct Job {
        class_weight: ClassWeight,
    }

    #[test]
    fn balanced_weighs_each_class_by_its_inverse_share() {
        let w = ClassWeight::Balanced
            .resolve(&["a".into(), "b".into()], &[90, 10])
            .unwrap();
        assert_eq!(w, [100.0 / 180.0, 5.0]);
        // The mean weight over the training rows is 1, as the unweighted loss's.
        assert!((w[0] * 90.0 + w[1] * 10.0 - 100.0).abs() < 1e-9);
    }

    #[test]
    fn given_weights_default_to_one_and_name_real_classes() {
        let given = ClassWeight::Given(BTreeMap::from([("b".to_string(), 3.0)]));
        let classes = ["a".to_string(), "b".to_string()];
        assert_eq!(given.resolve(&classes, &[1, 1]).unwrap(), [1.0, 3.0]);
        let typo = ClassWeight::Given(BTreeMap::from([("c".to_string(), 3.0)]));
        let e = typo.resolve(&classes, &[1, 1]).unwrap_err().to_string();
        assert!(
            e.contains("\"c\", which is not a class of the labels (a, b)"),
            "{e}"
        );
        let zero = ClassWeight::Given(BTreeMap::from([("a".to_string(), 0.0)]));
        assert!(
            zero.check()
                .unwrap_err()
                .to_string()
                .contains("class_weight.\"a\" = 0")
        );
    }

    #[test]
    fn reads_and_writes_both_spellings() {
        for text in [
            "class_weight = \"balanced\"\n",
            "[class_weight]\nno = 1.0\nyes = 4.5\n",
        ] {
            let job: Job = toml::from_str(text).unwrap();
            assert_eq!(toml::to_string(&job).unwrap(), text);
        }
        let e = toml::from_str::<Job>("class_weight = \"balance\"").unwrap_err();
        assert!(e.message().contains("expected \"balanced\""), "{e}");
    }
}
