//! The CPU's vector instructions: the widest level this processor has that ember's kernels are
//! built for, the kernel the gemm crate's products pick, and the cache geometry that sets how
//! the gemm crate splits a sum. Together they decide how a CPU run rounds: two CPUs with the
//! same [`numerics_key`] give the same bits (`tests/loss_pins.rs` keys its records on it).

use std::fmt;

/// A level of ember's CPU kernels (the `dispatch` macro of `elementwise.rs`), lowest first. Each is the same Rust
/// loop compiled for that instruction set and picked at run time; a wider level computes each
/// element with the same operations, so every level gives the same bits (the kernels' tests
/// check it), only faster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Simd {
    /// Whatever the build's baseline is (SSE2 on x86-64): no FMA.
    Portable,
    /// AVX2 with FMA (x86-64-v3's vector part).
    Avx2,
    /// AVX-512 F, VL, BW and DQ with AVX2 and FMA (x86-64-v4's vector part).
    Avx512,
}

impl Simd {
    pub fn name(self) -> &'static str {
        match self {
            Simd::Portable => "portable",
            Simd::Avx2 => "avx2+fma",
            Simd::Avx512 => "avx512",
        }
    }

    /// Every level up to this one, lowest first: the ones a test can compare on this CPU.
    pub fn up_to(self) -> impl Iterator<Item = Simd> {
        [Simd::Portable, Simd::Avx2, Simd::Avx512]
            .into_iter()
            .filter(move |l| *l <= self)
    }
}

impl fmt::Display for Simd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The widest level this CPU has. Probed once: every kernel call asks, and the six feature
/// checks cost 2 % of a tabular-mlp step when asked per row.
pub fn detected() -> Simd {
    static LEVEL: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
    *LEVEL.get_or_init(probe)
}

fn probe() -> Simd {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("fma");
        let avx512 = has!("avx512f") && has!("avx512vl") && has!("avx512bw") && has!("avx512dq");
        match (avx2, avx512) {
            (true, true) => Simd::Avx512,
            (true, false) => Simd::Avx2,
            _ => Simd::Portable,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    Simd::Portable
}

/// The f32 kernel the gemm crate picks on this CPU (`gemm-common`'s `init_gemm_fn`): its
/// AVX-512 kernel wherever avx512f is present, since ember builds the crate with `x86-v4`.
pub fn gemm_kernel() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") {
            "avx512f"
        } else if has!("fma") {
            "fma"
        } else {
            "scalar"
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        match std::arch::is_aarch64_feature_detected!("neon") {
            true => "neon",
            false => "scalar",
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    "scalar"
}

/// The L1 data cache as the gemm crate reads it: (bytes, ways). It sets the crate's `kc`, the
/// length of the pieces a product's sum over k is cut into, and so the rounding (a 48 KiB
/// 12-way L1 sums a 784-long dot product in one piece where a 32 KiB 8-way one uses two).
pub fn l1d() -> (usize, usize) {
    let l1 = gemm_common::cache::CACHE_INFO[0];
    (l1.cache_bytes, l1.associativity)
}

/// One line that names everything that decides how a CPU run rounds: the architecture, the
/// kernels' level, the gemm crate's kernel and the L1 geometry that sets its blocking. For
/// example `x86_64 kernels avx512, gemm avx512f, L1d 32 KiB 8-way`.
pub fn numerics_key() -> String {
    let (bytes, ways) = l1d();
    format!(
        "{} kernels {}, gemm {}, L1d {} KiB {ways}-way",
        std::env::consts::ARCH,
        detected(),
        gemm_kernel(),
        bytes / 1024
    )
}

/// The processor's name, from /proc/cpuinfo where there is one.
pub fn cpu_name() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// `ember info`'s line about the CPU's vector instructions.
pub fn info_line() -> String {
    format!(
        "cpu simd: {} (ember's kernels {}, gemm kernel {}; numerics key: {})",
        cpu_name().unwrap_or_else(|| std::env::consts::ARCH.to_string()),
        detected(),
        gemm_kernel(),
        numerics_key()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_lists_itself_and_the_narrower_ones_lowest_first() {
        let up_to = |l: Simd| l.up_to().collect::<Vec<_>>();
        assert_eq!(up_to(Simd::Portable), [Simd::Portable]);
        assert_eq!(up_to(Simd::Avx2), [Simd::Portable, Simd::Avx2]);
        assert_eq!(
            up_to(Simd::Avx512),
            [Simd::Portable, Simd::Avx2, Simd::Avx512]
        );
    }
}
