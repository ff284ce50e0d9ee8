//! This machine's fp32 peak: the multiply-adds per second that one core (and every core at
//! once) retires when nothing but independent FMAs are in flight. `make bench-peers`' reports
//! (docs/benchmarks/) state each job's speed as a share of it. `cargo bench --bench peak`
//! (`make bench-ops` runs it).
//!
//! The loop keeps 12 independent accumulators busy: enough to cover the FMA latency (4 cycles
//! on Zen 3 and 4, 4 on Sapphire Rapids) times the FMA pipes (2), so the pipes, not the
//! dependency chains, bound it. It runs at the widest width the processor has, as the gemm
//! crate's kernels do (ember builds them with AVX-512): 16 lanes with AVX-512, else 8 with
//! AVX2. It prints one line a script can read: `peak_gflops_per_core <value>`, and one naming
//! the width: `peak_width <avx512|avx2>`.

use rayon::prelude::*;
use std::time::Instant;

/// Iterations of the 12-accumulator loop in one timed run (about 0.1 s on a 3 GHz core).
const ITERATIONS: u64 = 40_000_000;
/// fp32 operations per iteration and lane: 12 FMAs, 2 operations (multiply and add) each.
const FLOPS_PER_LANE: f64 = 12.0 * 2.0;

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

/// The same loop on 16-lane AVX-512 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma_loop_512(iterations: u64, seed: f32) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_set1_ps(seed); 12];
    let a = _mm512_set1_ps(0.999_999);
    let b = _mm512_set1_ps(1e-7);
    for _ in 0..iterations {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, a, b);
        }
    }
    let mut sum = _mm512_setzero_ps();
    for x in acc {
        sum = _mm512_add_ps(sum, x);
    }
    _mm512_reduce_add_ps(sum)
}

/// The widest FMA width this processor has, in f32 lanes (0: none).
#[cfg(target_arch = "x86_64")]
fn lanes() -> usize {
    use std::arch::is_x86_feature_detected as has;
    match (has!("avx512f"), has!("avx2") && has!("fma")) {
        (true, _) => 16,
        (false, true) => 8,
        (false, false) => 0,
    }
}

/// GFLOP/s of one run of the loop on the calling thread, at `lanes` wide.
#[cfg(target_arch = "x86_64")]
fn one_core(lanes: usize) -> f64 {
    let start = Instant::now();
    let seed = std::hint::black_box(1.0);
    // SAFETY: `lanes` comes from `lanes()`, which checked the processor's features.
    let out = unsafe {
        match lanes {
            16 => fma_loop_512(ITERATIONS, seed),
            _ => fma_loop(ITERATIONS, seed),
        }
    };
    std::hint::black_box(out);
    let flops = ITERATIONS as f64 * FLOPS_PER_LANE * lanes as f64;
    flops / start.elapsed().as_secs_f64() / 1e9
}

/// The median of `runs` measurements.
fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

#[cfg(target_arch = "x86_64")]
fn main() {
    let lanes = lanes();
    if lanes == 0 {
        println!(
            "this processor has neither AVX2 with FMA nor AVX-512: no fp32 FMA peak to measure"
        );
        return;
    }
    let width = if lanes == 16 { "avx512" } else { "avx2" };
    one_core(lanes); // warm-up: lets the clock ramp up
    let core = median((0..7).map(|_| one_core(lanes)).collect());
    let threads = rayon::current_num_threads();
    let all = median(
        (0..5)
            .map(|_| (0..threads).into_par_iter().map(|_| one_core(lanes)).sum())
            .collect(),
    );
    println!("fp32 FMA peak ({width}), one core:            {core:8.1} GFLOP/s (median of 7)");
    println!(
        "fp32 FMA peak ({width}), {threads} thread(s) at once: {all:8.1} GFLOP/s (median of 5)"
    );
    if lanes == 16 {
        let avx2 = median((0..5).map(|_| one_core(8)).collect());
        println!("fp32 FMA peak (avx2 on the same core):  {avx2:8.1} GFLOP/s (median of 5)");
    }
    println!("peak_width {width}");
    println!("peak_gflops_per_core {core:.1}");
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!(
        "the peak benchmark measures x86-64's AVX2 FMA; this is {}",
        std::env::consts::ARCH
    );
}
