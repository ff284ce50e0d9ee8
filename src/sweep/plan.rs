//! A sweep file, expanded: it names a `base` job file and its axes: `seeds = [...]`, a `[grid]`
//! of values per key, and `[random]` draws (`trials`, `seed`, and per key `uniform = [a, b]`,
//! `log_uniform = [a, b]` or `choice = [...]`). It expands deterministically into numbered
//! trials, each a list of `--set` overrides of the base, and groups them into units: trials that
//! differ only in seed or optimizer scalars share a unit (one replica group), the others have
//! one each.

use crate::config::JobConfig;
use crate::error::{EmberError, Result};
use crate::input_err;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// The sweep file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    /// The sweep's name (default: the file's stem; the copy in a sweep folder keeps it).
    name: Option<String>,
    /// The job file, relative to the sweep file.
    base: PathBuf,
    /// Overrides of every trial. The copy in a sweep folder records the first run's `--set`
    /// here (`[]` for none), and later runs must give the same or none.
    set: Option<Vec<String>>,
    seeds: Option<Vec<u64>>,
    /// Cross-validation: every configuration and seed once per fold (`data.folds`, `data.fold`).
    folds: Option<usize>,
    #[serde(default)]
    grid: Table,
    random: Option<RawRandom>,
}

#[derive(Debug, Deserialize)]
struct RawRandom {
    trials: usize,
    seed: u64,
    #[serde(flatten)]
    axes: Table,
}

/// One trial: its number, unit, the swept values, and the overrides that make it from the base.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub index: usize,
    pub unit: usize,
    /// The swept keys' values (the seed included, the pinned split seed not).
    pub sets: Vec<(String, Value)>,
    pub overrides: Vec<String>,
}

impl Trial {
    /// Every swept value, the seed included, as printed: `adam.lr=6.027e-4 seed=2`.
    pub fn label(&self) -> String {
        super::legible::pairs(self.sets.iter())
    }

    /// The swept values but the seed and the fold, every digit kept: the trials of one
    /// configuration share it.
    pub fn configuration(&self) -> String {
        let parts: Vec<String> = self.unseeded().map(|(k, v)| format!("{k}={v}")).collect();
        parts.join(" ")
    }

    /// The configuration as printed and drawn (four significant digits, strings bare).
    pub fn configuration_label(&self) -> String {
        match super::legible::pairs(self.unseeded()) {
            parts if parts.is_empty() => "(base)".to_string(),
            parts => parts,
        }
    }

    fn unseeded(&self) -> impl Iterator<Item = &(String, Value)> {
        self.sets.iter().filter(|(k, _)| k != "seed" && k != FOLD)
    }
}

/// The key of a trial's held-out fold when the sweep has `folds`.
pub const FOLD: &str = "data.fold";

/// The key of the number of folds, in every trial's overrides when the sweep has `folds`.
pub const FOLDS: &str = "data.folds";

/// A TOML number (integer or float) as f64.
pub(super) fn number(v: &Value) -> Option<f64> {
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
}

/// A sweep, expanded and checked.
#[derive(Debug)]
pub struct Plan {
    pub name: String,
    pub base: PathBuf,
    pub trials: Vec<Trial>,
    pub units: usize,
    /// The swept keys of the grid and the random draws, in order (the seed aside).
    pub axes: Vec<String>,
    /// Overrides applied to every trial after its own: the file's `set`, or `--set`.
    pub set: Vec<String>,
}

impl Plan {
    /// The trials of unit `unit` (all of them for `None`); a unit out of range is an error.
    pub fn select(&self, unit: Option<usize>) -> Result<Vec<&Trial>> {
        match unit {
            Some(u) if u >= self.units => Err(input_err!(
                "--unit {u}: the sweep {} has {} units (0..{})",
                self.name,
                self.units,
                self.units - 1
            )),
            _ => Ok(self
                .trials
                .iter()
                .filter(|t| unit.is_none_or(|u| t.unit == u))
                .collect()),
        }
    }
}

/// Keys that trials of one unit may differ in: the seed, the cross-validation fold and
/// optimizer scalars (replicas of one batched model where `replicas::why_not` allows).
fn replicable(key: &str) -> bool {
    const SCALARS: [&str; 7] = [
        "lr",
        "momentum",
        "dampening",
        "beta1",
        "beta2",
        "epsilon",
        "weight_decay",
    ];
    key == "seed"
        || key == FOLD
        || key.split_once('.').is_some_and(|(section, name)| {
            ["sgd", "adam", "adamw"].contains(&section) && SCALARS.contains(&name)
        })
}

/// Every combination of the grid's values, keys in sorted order.
fn grid_points(grid: &Table) -> Result<Vec<Vec<(String, Value)>>> {
    let mut points = vec![Vec::new()];
    for (key, values) in grid {
        let Value::Array(values) = values else {
            return Err(input_err!("grid.\"{key}\" must be a list of values"));
        };
        if values.is_empty() {
            return Err(input_err!("grid.\"{key}\" = [] gives no trial"));
        }
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut p = p.clone();
                    p.push((key.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    Ok(points)
}

/// One draw of `spec` (`{ uniform = [a, b] }`, `{ log_uniform = [a, b] }`, `{ choice = [...] }`).
fn draw(key: &str, spec: &Value, rng: &mut rand_mt::Mt64) -> Result<Value> {
    let bad = || {
        input_err!(
            "random.\"{key}\" must be {{ uniform = [a, b] }}, {{ log_uniform = [a, b] }} (0 < a < b) or {{ choice = [...] }}"
        )
    };
    let table = spec.as_table().filter(|t| t.len() == 1).ok_or_else(bad)?;
    let (kind, arg) = table.iter().next().expect("one entry");
    let u = crate::rng::uniform(rng);
    let range = || -> Result<(f64, f64)> {
        let a: Vec<f64> = arg
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(number)
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        match a.as_slice() {
            [lo, hi] if lo < hi => Ok((*lo, *hi)),
            _ => Err(bad()),
        }
    };
    match kind.as_str() {
        "uniform" => range().map(|(lo, hi)| Value::Float(lo + u * (hi - lo))),
        "log_uniform" => {
            let (lo, hi) = range()?;
            if lo <= 0.0 {
                return Err(bad());
            }
            Ok(Value::Float((lo.ln() + u * (hi.ln() - lo.ln())).exp()))
        }
        "choice" => {
            let options = arg.as_array().filter(|a| !a.is_empty()).ok_or_else(bad)?;
            let i = ((u * options.len() as f64) as usize).min(options.len() - 1);
            Ok(options[i].clone())
        }
        _ => Err(bad()),
    }
}

/// The random trials' draws: trial t draws every key (sorted) from its own stream.
fn random_points(random: Option<&RawRandom>) -> Result<Vec<Vec<(String, Value)>>> {
    let Some(r) = random else {
        return Ok(vec![Vec::new()]);
    };
    if r.trials == 0 {
        return Err(input_err!("random.trials = 0 gives no trial"));
    }
    (0..r.trials)
        .map(|t| {
            let mut rng = crate::rng::stream(r.seed, "sweep", t as u64);
            r.axes
                .iter()
                .map(|(key, spec)| Ok((key.clone(), draw(key, spec, &mut rng)?)))
                .collect()
        })
        .collect()
}

/// Reads and expands a sweep file; every trial's config is checked with `extra` overrides
/// (`--set`) applied last.
pub fn plan(path: &Path, extra: &[String]) -> Result<Plan> {
    let text = crate::fs::read_file(path)?;
    let text = String::from_utf8_lossy(&text);
    let raw: RawSweep = toml::from_str(&text)
        .map_err(|e| EmberError::file(path, e.message().trim().replace('\n', " ")))?;
    let in_file = |e: EmberError| EmberError::file(path, e);
    let set = match (raw.set.as_deref(), extra) {
        (None, given) => given.to_vec(),
        (Some(recorded), []) => recorded.to_vec(),
        (Some(recorded), given) if recorded == given => given.to_vec(),
        (Some(recorded), _) => {
            return Err(in_file(input_err!(
                "the sweep runs with set = {recorded:?}; give the same --set, or none"
            )));
        }
    };
    let name = name(path, raw.name.as_deref()).map_err(in_file)?;
    let axes = axes(&raw).map_err(in_file)?;
    let base = path.parent().unwrap_or(Path::new(".")).join(&raw.base);
    let base_config = crate::config::load(&base)?;
    let seeds: Vec<Option<u64>> = match raw.seeds.as_deref() {
        None => vec![None],
        Some([]) => return Err(EmberError::file(path, "seeds = [] gives no trial")),
        Some(s) => s.iter().copied().map(Some).collect(),
    };
    let folds = folds(raw.folds).map_err(in_file)?;
    let mut trials = Vec::new();
    let mut unit_keys: Vec<Vec<String>> = Vec::new();
    let randoms = random_points(raw.random.as_ref()).map_err(in_file)?;
    for g in grid_points(&raw.grid).map_err(in_file)? {
        for r in &randoms {
            for (seed, fold) in seeds.iter().flat_map(|s| folds.iter().map(move |f| (s, f))) {
                let mut sets: Vec<(String, Value)> = g.iter().chain(r).cloned().collect();
                if let Some(s) = seed {
                    sets.push(("seed".into(), Value::Integer(*s as i64)));
                }
                if let Some(f) = fold {
                    sets.push((FOLD.into(), Value::Integer(*f as i64)));
                }
                let mut t = trial(trials.len(), &sets, &base_config, &mut unit_keys);
                // A fold validates, in place of the base's share held out.
                if let Some(k) = raw.folds {
                    t.overrides
                        .extend([format!("{FOLDS}={k}"), "data.valid_fraction=0".into()]);
                }
                trials.push(t);
            }
        }
    }
    for t in &trials {
        let all: Vec<String> = t.overrides.iter().chain(&set).cloned().collect();
        crate::config::load_with(&base, &all)
            .map_err(|e| EmberError::file(path, format!("trial {}: {e}", t.index)))?;
    }
    split_fold_units(Plan {
        name,
        base,
        units: unit_keys.len(),
        trials,
        axes,
        set,
    })
}

/// A unit's folds that cannot train as replicas (a convolutional network, dropout, ...) are a
/// unit each, so that a Slurm array runs them side by side.
fn split_fold_units(mut plan: Plan) -> Result<Plan> {
    let mut split = vec![false; plan.units];
    for (unit, s) in split.iter_mut().enumerate() {
        let trials = plan.select(Some(unit))?;
        *s = fold_count(&trials) > 1 && plan.why_not_replicas(&trials)?.is_some();
    }
    let mut keys: Vec<(usize, Option<String>)> = Vec::new();
    for t in &mut plan.trials {
        let fold = (t.sets.iter())
            .find(|(k, _)| k == FOLD && split[t.unit])
            .map(|(_, v)| v.to_string());
        let key = (t.unit, fold);
        t.unit = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
            keys.push(key);
            keys.len() - 1
        });
    }
    plan.units = keys.len();
    Ok(plan)
}

/// Each trial's held-out fold: `None` once without cross-validation, else 0 to `folds` - 1.
fn folds(folds: Option<usize>) -> Result<Vec<Option<usize>>> {
    match folds {
        None => Ok(vec![None]),
        Some(k) if k < 2 => Err(input_err!(
            "folds = {k}: cross-validation needs at least 2 folds"
        )),
        Some(k) => Ok((0..k).map(Some).collect()),
    }
}

/// The sweep's name: `name`, or the file's stem with other characters than letters, digits,
/// `.`, `_` and `-` made `-` (it names folders and Slurm jobs).
fn name(path: &Path, given: Option<&str>) -> Result<String> {
    let fits = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    match given {
        Some(n) if !n.is_empty() && n.chars().all(fits) && !n.starts_with('.') => Ok(n.to_string()),
        Some(n) => Err(input_err!(
            "name = {n:?}: use letters, digits, '.', '_' and '-' (not first '.')"
        )),
        None => Ok(path
            .file_stem()
            .map(|s| s.to_string_lossy().replace(|c: char| !fits(c), "-"))
            .unwrap_or_else(|| "sweep".into())),
    }
}

/// The swept keys, grid first; a key swept twice is an error.
fn axes(raw: &RawSweep) -> Result<Vec<String>> {
    let random = raw.random.iter().flat_map(|r| r.axes.keys());
    let mut axes: Vec<String> = Vec::new();
    for key in raw.grid.keys().chain(random) {
        if axes.contains(key) || (key == "seed" && raw.seeds.is_some()) {
            return Err(input_err!(
                "\"{key}\" is swept twice (in seeds, [grid] or [random])"
            ));
        }
        if raw.folds.is_some() && (key == FOLD || key == FOLDS) {
            return Err(input_err!(
                "\"{key}\" is set by the sweep's folds; remove it from [grid] or [random]"
            ));
        }
        axes.push(key.clone());
    }
    Ok(axes)
}

/// A trial of `sets`, in the unit of the trials whose other keys are the same. Every trial
/// holds out the base's validation rows: the split seed is pinned.
fn trial(
    index: usize,
    sets: &[(String, Value)],
    base: &JobConfig,
    units: &mut Vec<Vec<String>>,
) -> Trial {
    let mut overrides: Vec<String> = sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !sets.iter().any(|(k, _)| k == "data.split_seed") {
        overrides.push(format!("data.split_seed={}", base.split_seed()));
    }
    let shape: Vec<String> = sets
        .iter()
        .filter(|(k, _)| !replicable(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let unit = units.iter().position(|u| *u == shape).unwrap_or_else(|| {
        units.push(shape);
        units.len() - 1
    });
    Trial {
        index,
        unit,
        sets: sets.to_vec(),
        overrides,
    }
}

impl Plan {
    /// Trial `trial`'s job: the base config with the trial's overrides, then the sweep's own.
    pub fn config(&self, trial: &Trial) -> Result<JobConfig> {
        let overrides: Vec<String> = trial.overrides.iter().chain(&self.set).cloned().collect();
        let mut config = crate::config::load_with(&self.base, &overrides)?;
        config
            .fix_schedule_length()
            .map_err(|e| input_err!("trial {}: {e}", trial.index))?;
        Ok(config)
    }

    /// Why `trials` (one unit's) cannot train as replicas of one model, or `None` when they
    /// can.
    pub fn why_not_replicas(&self, trials: &[&Trial]) -> Result<Option<String>> {
        let configs = (trials.iter())
            .map(|t| self.config(t))
            .collect::<Result<Vec<_>>>()?;
        Ok(crate::replicas::why_not(&configs))
    }

    /// `ember sweep plan`'s tables: the trials, and how each unit trains.
    pub fn text(&self) -> Result<String> {
        let mut out = format!(
            "sweep {} (base {}): {} trials in {} units\ntrial  unit  values (each trial's config.toml keeps every digit)\n",
            self.name,
            self.base.display(),
            self.trials.len(),
            self.units
        );
        for t in &self.trials {
            // The swept values as printed, then what the plan pins (the split seed) exactly.
            let pinned = t.overrides[t.sets.len()..].join(" ");
            let values = format!("{} {pinned}", t.label());
            out.push_str(&format!(
                "{:>5}  {:>4}  {}\n",
                t.index,
                t.unit,
                values.trim()
            ));
        }
        out.push_str("unit  trains as\n");
        for unit in 0..self.units {
            let trials = self.select(Some(unit))?;
            let how = match self.why_not_replicas(&trials)? {
                None => format!(
                    "{} replicas of one model, in one process{}",
                    trials.len(),
                    folds_note(&trials)
                ),
                Some(why) => format!("processes ({why})"),
            };
            out.push_str(&format!("{unit:>4}  {how}\n"));
        }
        Ok(out.trim_end().to_string())
    }
}

/// ", each of 5 folds on its own rows" where a unit's trials hold out several folds.
fn folds_note(trials: &[&Trial]) -> String {
    match fold_count(trials) {
        0 | 1 => String::new(),
        n => format!(", each of {n} folds on its own rows"),
    }
}

/// How many folds `trials` hold out between them (0 without cross-validation).
fn fold_count(trials: &[&Trial]) -> usize {
    let mut folds: Vec<String> = (trials.iter())
        .flat_map(|t| t.sets.iter().filter(|(k, _)| k == FOLD))
        .map(|(_, v)| v.to_string())
        .collect();
    folds.sort();
    folds.dedup();
    folds.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(dir: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("base.toml"),
            "job = \"tabular-mlp\"\n[adam]\nlr = 0.001\n",
        )
        .unwrap();
        let p = dir.join("s.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn seeds_grid_and_random_expand_deterministically_into_units() {
        let dir = crate::data::test_dir("sweep");
        let p = sweep(
            &dir,
            "base = \"base.toml\"\nseeds = [1, 2]\n[grid]\n\"adam.lr\" = [0.001, 0.0003]\n\"model.hidden\" = [[8], [16]]\n\
             [random]\ntrials = 2\nseed = 5\n\"adam.beta1\" = { uniform = [0.8, 0.95] }\n",
        );
        let plan = plan(&p, &[]).unwrap();
        assert_eq!(plan.trials.len(), 2 * 2 * 2 * 2);
        // Two shapes (hidden 8 and 16): two units of replicas.
        assert_eq!(plan.units, 2);
        assert!(plan.trials[0].overrides.contains(&"seed=1".to_string()));
        assert!(
            plan.trials[0]
                .overrides
                .contains(&"data.split_seed=42".to_string())
        );
        let again = super::plan(&p, &[]).unwrap();
        assert_eq!(plan.trials, again.trials);
        let betas: Vec<&String> = plan
            .trials
            .iter()
            .flat_map(|t| &t.overrides)
            .filter(|o| o.starts_with("adam.beta1="))
            .collect();
        assert!(betas.iter().all(|b| {
            let v: f64 = b["adam.beta1=".len()..].parse().unwrap();
            (0.8..0.95).contains(&v)
        }));
    }

    #[test]
    fn folds_share_a_unit_of_replicas_and_have_a_unit_each_where_they_cannot() {
        let dir = crate::data::test_dir("sweep-folds");
        let p = sweep(&dir, "base = \"base.toml\"\nfolds = 3\nseeds = [1, 2]\n");
        let replicas = plan(&p, &[]).unwrap();
        assert_eq!((replicas.trials.len(), replicas.units), (6, 1));
        let how = "6 replicas of one model, in one process, each of 3 folds on its own rows";
        assert!(replicas.text().unwrap().contains(how));
        let dropout = plan(&p, &["model.dropout=0.1".to_string()]).unwrap();
        assert_eq!(dropout.units, 3);
        for (t, fold) in dropout.trials.iter().zip([0, 1, 2, 0, 1, 2]) {
            assert_eq!(t.unit, fold, "trial {}", t.index);
        }
        let text = dropout.text().unwrap();
        assert!(
            text.contains("processes (dropout masks are drawn per run)"),
            "{text}"
        );
    }

    #[test]
    fn a_bad_key_names_the_trial() {
        let dir = crate::data::test_dir("sweep-bad");
        let p = sweep(&dir, "base = \"base.toml\"\n[grid]\n\"adam.lrr\" = [0.1]\n");
        let err = plan(&p, &[]).unwrap_err().to_string();
        assert!(
            err.contains("s.toml: trial 0: --set adam.lrr=0.1: unknown field `lrr`"),
            "{err}"
        );
    }
}
