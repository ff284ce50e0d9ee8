//! TensorBoard event files: every run writes one; a run killed and resumed holds every epoch
//! exactly once across its files; the values are metrics.csv's. Read two ways: ember's own
//! reader (every CRC checked) and, where `EMBER_TEST_PYTHON` has it (required under CI=true),
//! TensorBoard's own `EventAccumulator`.

mod common;

use common::*;
use ember::tracking::events;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Every scalar of a run's event files by tag: (step, value), in file order.
type Scalars = BTreeMap<String, Vec<(usize, f32)>>;

/// The scalars of `run`'s event files, read and CRC-checked by ember's reader.
fn read_events(run: &Path) -> Scalars {
    let mut out = Scalars::new();
    let files = events::files(run);
    assert!(!files.is_empty(), "no event file in {}", run.display());
    for file in files {
        let all = events::read(&file).unwrap();
        assert_eq!(all[0].file_version.as_deref(), Some("brain.Event:2"));
        for e in all
            .iter()
            .filter_map(|e| e.summary.as_ref().map(|s| (e.step, s)))
        {
            for v in &e.1.value {
                let point = (e.0 as usize, v.simple_value.unwrap());
                out.entry(v.tag.clone()).or_default().push(point);
            }
        }
    }
    out
}

/// What the event files must hold: metrics.csv's rows as scalars.
fn expected(run: &Path) -> Scalars {
    let records = ember::run::history::read_csv(&run.join("metrics.csv")).unwrap();
    let mut out = Scalars::new();
    for r in &records {
        for (tag, v) in events::scalars(r) {
            out.entry(tag).or_default().push((r.epoch, v as f32));
        }
    }
    out
}

/// Compares `got` with metrics.csv: every epoch once, in order, with the same values.
fn assert_matches(got: &Scalars, want: &Scalars) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (tag, points) in want {
        let steps: Vec<usize> = got[tag].iter().map(|p| p.0).collect();
        let expected: Vec<usize> = points.iter().map(|p| p.0).collect();
        assert_eq!(steps, expected, "{tag}: steps");
        for ((_, a), (_, b)) in got[tag].iter().zip(points) {
            // metrics.csv keeps an epoch's seconds to 0.1 ms, too coarse to give back the
            // steps/s of a millisecond's epoch; the rest it keeps in full.
            let close = match tag.starts_with("steps_per_s") {
                true => a.is_finite() && *a > 0.0,
                false => a == b,
            };
            assert!(close, "{tag}: {a} vs {b}");
        }
    }
}

/// TensorBoard's reading of `run`, where a Python with it is named.
fn tensorboard_reads(run: &Path) -> Option<Scalars> {
    let python = test_python(&["tensorboard"], "TensorBoard's own reader")?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tensorboard_check.py");
    let o = Command::new(&python)
        .args([path_str(&script), path_str(run)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let json: BTreeMap<String, Vec<(usize, f32)>> = serde_json::from_str(&stdout(&o)).unwrap();
    Some(json)
}

#[test]
fn a_killed_and_resumed_run_holds_every_epoch_once() {
    let dir = scratch("tensorboard-resume");
    let cfg = config(
        &dir,
        "small.toml",
        "job = \"fashion-mlp\"\nepochs = 5\nbatch_size = 64\n[adam]\nlr = 1e-3\n",
    );
    let run = dir.join("run");
    let child = spawn(&train_each_epoch_checkpointed(
        path_str(&cfg),
        path_str(&run),
    ));
    let (limit, settle) = (Duration::from_secs(120), Duration::from_millis(150));
    kill_mid_epoch(child, &run, 2, limit, settle);
    ok(&resume_on_cpu(&run));
    assert_eq!(events::files(&run).len(), 2, "one file per session");
    let want = expected(&run);
    assert_eq!(want["loss/valid"].len(), 5);
    assert!(want.contains_key("accuracy/valid") && want.contains_key("lr"));
    assert_matches(&read_events(&run), &want);
    if let Some(read) = tensorboard_reads(&run) {
        assert_matches(&read, &want);
    }
}

#[test]
fn a_regression_logs_mae_and_r2_and_tensorboard_false_writes_none() {
    let dir = scratch("tensorboard-regression");
    let table = root().join("examples/penguins-raw.csv");
    let out = ember(&[
        "init",
        "--csv",
        path_str(&table),
        "--label",
        "Body Mass (g)",
    ]);
    ok(&out);
    let cfg = config(&dir, "mass.toml", &common::with_epochs(&stdout(&out), 3));
    let run = dir.join("run");
    ok(&train_on_cpu(&cfg, &run, &[]));
    let want = expected(&run);
    assert!(
        want.contains_key("mae/valid") && want.contains_key("r2/valid"),
        "{want:?}"
    );
    assert_matches(&read_events(&run), &want);
    if let Some(read) = tensorboard_reads(&run) {
        assert_matches(&read, &want);
    }
    let off = dir.join("off");
    ok(&train_on_cpu(&cfg, &off, &["--set", "tensorboard=false"]));
    assert!(events::files(&off).is_empty());
    assert!(off.join("metrics.csv").is_file());
}
