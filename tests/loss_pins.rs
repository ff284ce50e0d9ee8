//! Pins the per-epoch losses of every job on the CPU, so that a change to any number fails.
//!
//! Each test trains one job for two epochs on a fixed number of rows, with two threads, and
//! compares the train and valid losses of both epochs (the `loss` column of `metrics.csv`)
//! with values recorded by the binary before a refactor. metrics.csv prints each loss with
//! Rust's shortest round-trip formatting, so parsing it gives back the exact f64, and the
//! records are kept as f64 bit patterns.
//!
//! A refactor must not change one bit of these. A change of numerics made on purpose (a new
//! kernel, a different order of summation, a new default) re-records them, and its commit says
//! so and why.
//!
//! The records were made on x86_64 with avx2 and fma, without avx512f. ember's CPU kernels pick
//! their code paths by CPU feature at run time, so the comparison is bit for bit only on a CPU
//! with exactly that feature set; on any other it is within 1e-6 relative, and the test prints
//! a line saying so.

mod common;

use common::{ember, ok, path_str, root, scratch};

/// The per-epoch losses of one job: `(epoch, split, f64 bits)`.
type Record = [(u32, &'static str, u64); 4];

/// `configs/fashion-mlp.toml`, 2000 training rows.
const FASHION_MLP: Record = [
    (1, "train", 0x4002672a5e353f7d), // 2.300373779296875
    (1, "valid", 0x40026353f7ced917), // 2.2985
    (2, "train", 0x40025ea9374bc6a8), // 2.29622119140625
    (2, "valid", 0x40025ab7ced91687), // 2.2942958984375
];

/// `configs/fashion-mlp-keras.toml`, 2000 training rows.
const FASHION_MLP_KERAS: Record = [
    (1, "train", 0x404c3f945a1cac08), // 56.49671484375
    (1, "valid", 0x401179f83126e979), // 4.36911083984375
    (2, "train", 0x3ffca633b645a1cb), // 1.79057666015625
    (2, "valid", 0x400382445a1cac08), // 2.43860693359375
];

/// `configs/tabular-mlp.toml`, 20000 training rows.
const TABULAR_MLP: Record = [
    (1, "train", 0x3fe680a147ae147b), // 0.703201904296875
    (1, "valid", 0x3fe6219083126e98), // 0.6915972290039063
    (2, "train", 0x3fe5b9d460aa64c3), // 0.67893427734375
    (2, "valid", 0x3fe56dd7ced91687), // 0.6696585693359375
];

/// `configs/linear-scalar.toml`, 5000 training rows.
const LINEAR_SCALAR: Record = [
    (1, "train", 0x40e3854b43958106), // 39978.352
    (1, "valid", 0x40e44435e353f7cf), // 41505.684
    (2, "train", 0x40b9c7eb367a0f91), // 6599.9188
    (2, "valid", 0x411807f353f7ced9), // 393724.832
];

/// The tolerance off the records' CPU feature set.
const RELATIVE: f64 = 1e-6;

/// `None` when this CPU has the records' feature set (x86_64, avx2 and fma, no avx512f), so
/// the losses must match bit for bit; otherwise why not.
fn why_not_bit_for_bit() -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = std::arch::is_x86_feature_detected!("avx2");
        let fma = std::arch::is_x86_feature_detected!("fma");
        let avx512f = std::arch::is_x86_feature_detected!("avx512f");
        if avx2 && fma && !avx512f {
            None
        } else {
            Some(format!(
                "this x86_64 CPU has avx2 {avx2}, fma {fma}, avx512f {avx512f}, \
                 where the records' has avx2 and fma without avx512f"
            ))
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Some(format!(
            "this CPU is {}, not x86_64 with avx2 and fma without avx512f like the records'",
            std::env::consts::ARCH
        ))
    }
}

/// Trains `job` for two epochs on `rows` training rows on the CPU and checks its losses
/// against `record`.
fn check(job: &str, rows: &str, record: &Record) {
    let dir = scratch(&format!("loss-pins-{job}"));
    let out = dir.join("run");
    let config = format!("configs/{job}.toml");
    ok(&ember(&[
        "train",
        &config,
        "--epochs",
        "2",
        "--max-train-rows",
        rows,
        "--max-valid-rows",
        "1000",
        "--threads",
        "2",
        "--device",
        "cpu",
        "--out",
        path_str(&out),
        "--quiet",
    ]));
    let metrics = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    let mut lines = metrics.lines();
    assert_eq!(
        lines.next(),
        Some("epoch,split,loss,accuracy,seconds,steps_per_s,mae,r2,lr"),
        "{job}: metrics.csv header\n{metrics}"
    );
    let got: Vec<(u32, String, f64)> = lines
        .map(|line| {
            let cols: Vec<&str> = line.split(',').collect();
            let epoch = cols[0].parse().unwrap();
            let loss = cols[2].parse().unwrap();
            (epoch, cols[1].to_string(), loss)
        })
        .collect();
    assert_eq!(
        got.len(),
        record.len(),
        "{job}: expected {} rows in metrics.csv\n{metrics}",
        record.len()
    );

    let loose = why_not_bit_for_bit();
    if let Some(why) = &loose {
        eprintln!("{job}: losses compared within {RELATIVE:e} relative, not bit for bit: {why}");
    }
    let mut wrong = Vec::new();
    for ((epoch, split, bits), (got_epoch, got_split, loss)) in record.iter().zip(&got) {
        assert_eq!(
            (epoch, *split),
            (got_epoch, got_split.as_str()),
            "{job}: rows of metrics.csv\n{metrics}"
        );
        let want = f64::from_bits(*bits);
        let same = match loose {
            None => loss.to_bits() == *bits,
            Some(_) => (loss - want).abs() <= RELATIVE * want.abs(),
        };
        if !same {
            wrong.push(format!(
                "  epoch {epoch} {split}: got {loss} ({:#018x}), pinned {want} ({bits:#018x})",
                loss.to_bits()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{job}: losses differ from the pinned records (run from {}):\n{}\n\
         A refactor must not change them; a change of numerics on purpose re-records them \
         and says so in its commit.",
        root().display(),
        wrong.join("\n")
    );
}

#[test]
fn fashion_mlp_cpu_losses_match_the_pinned_records() {
    check("fashion-mlp", "2000", &FASHION_MLP);
}

#[test]
fn fashion_mlp_keras_cpu_losses_match_the_pinned_records() {
    check("fashion-mlp-keras", "2000", &FASHION_MLP_KERAS);
}

#[test]
fn tabular_mlp_cpu_losses_match_the_pinned_records() {
    check("tabular-mlp", "20000", &TABULAR_MLP);
}

#[test]
fn linear_scalar_cpu_losses_match_the_pinned_records() {
    check("linear-scalar", "5000", &LINEAR_SCALAR);
}
