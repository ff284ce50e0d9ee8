//! This machine's fp32 peak: the multiply-adds per second that one core (and every core at
//! once) retires when nothing but independent FMAs are in flight. `BENCHMARKS.md` states each
//! job's speed as a share of it. `cargo bench --bench peak` (`make bench-ops` runs it).
//!
//! The loop keeps 12 independent 8-wide accumulators busy: enough to cover the FMA latency (4
//! cycles on Zen 3) times the FMA pipes (2), so the pipes, not the dependency chains, bound it.
//! It prints one line a script can read: `peak_gflops_per_core <value>`.

use rayon::prelude::*;
use std::time::Instant;

/// Iterations of the 12-accumulator loop in one timed run (about 0.1 s on a 3 GHz core).
const ITERATIONS: u64 = 40_000_000;
/// fp32 operations per iteration: 12 FMAs, 8 lanes each, 2 operations (multiply and add) each.
const FLOPS_PER_ITERATION: f64 = 12.0 * 8.0 * 2.0;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_loop(iterations: u64, seed: f32) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_set1_ps(seed); 12];
    let a = _mm256_set1_ps(0.999_999);
    let b = _mm256_set1_ps(1e-7);
    for _ in 0..iterations {
        for x in acc.iter_mut() {
            *x = _mm256_fmadd_ps(*x, a, b);
        }
    }
    let mut sum = _mm256_setzero_ps();
    for x in acc {
        sum = _mm256_add_ps(sum, x);
    }
    let mut lanes = [0f32; 8];
    // SAFETY: `lanes` holds the 8 floats the unaligned store writes.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
    lanes.iter().sum()
}

/// GFLOP/s of one run of the loop on the calling thread.
#[cfg(target_arch = "x86_64")]
fn one_core() -> f64 {
    let start = Instant::now();
    // SAFETY: main checks that the processor has AVX2 and FMA before any call.
    let out = unsafe { fma_loop(ITERATIONS, std::hint::black_box(1.0)) };
    std::hint::black_box(out);
    ITERATIONS as f64 * FLOPS_PER_ITERATION / start.elapsed().as_secs_f64() / 1e9
}

/// The median of `runs` measurements.
fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

#[cfg(target_arch = "x86_64")]
fn main() {
    if !(std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"))
    {
        println!("this processor has no AVX2 and FMA: no fp32 FMA peak to measure");
        return;
    }
    one_core(); // warm-up: lets the clock ramp up
    let core = median((0..7).map(|_| one_core()).collect());
    let threads = rayon::current_num_threads();
    let all = median(
        (0..5)
            .map(|_| (0..threads).into_par_iter().map(|_| one_core()).sum())
            .collect(),
    );
    println!("fp32 FMA peak, one core:            {core:8.1} GFLOP/s (median of 7)");
    println!("fp32 FMA peak, {threads} thread(s) at once: {all:8.1} GFLOP/s (median of 5)");
    println!("peak_gflops_per_core {core:.1}");
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!(
        "the peak benchmark measures x86-64's AVX2 FMA; this is {}",
        std::env::consts::ARCH
    );
}
