//! Subnormal floats flushed to zero inside ember's element-wise kernels.
//!
//! Adam's moments decay geometrically wherever a weight's gradient is zero for a while (the
//! first layer's weights of a pixel that is black in most images): `m` falls by 0.9 a step and
//! is subnormal (below 1.2e-38) some 800 steps later. On Intel cores every operation on a
//! subnormal takes a microcode assist of about a hundred cycles, and fashion-mlp's tuned recipe
//! (Adam) ran at a quarter of its SGD speed on a Sapphire Rapids machine (`BENCHMARKS.md`,
//! "Subnormals"); AMD cores take them at full speed. TensorFlow and XLA run their CPU kernels
//! with the same two MXCSR flags set, and PyTorch offers them (`torch.set_flush_denormal`).
//!
//! The flags are set for the span of one kernel call and restored after it, so nothing outside
//! ember's kernels (Burn's operations, the gemm crate, the user's process) sees them. A value
//! that would have been subnormal is zero instead: an Adam moment below 1.2e-38, whose update
//! to its weight was smaller than the weight's last bit anyway.

/// The MXCSR bits: FTZ (results that would be subnormal are zero) and DAZ (subnormal operands
/// are read as zero).
#[cfg(target_arch = "x86_64")]
const FLUSH: u32 = (1 << 15) | (1 << 6);

/// While it lives, this thread's f32 arithmetic flushes subnormals to zero; dropping it puts
/// back the flags it found.
pub struct FlushSubnormals {
    #[cfg(target_arch = "x86_64")]
    saved: u32,
}

impl FlushSubnormals {
    #[inline(always)]
    pub fn new() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let saved = read_mxcsr();
            if saved & FLUSH != FLUSH {
                write_mxcsr(saved | FLUSH);
            }
            Self { saved }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Self {}
    }
}

impl Default for FlushSubnormals {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for FlushSubnormals {
    #[inline(always)]
    fn drop(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if self.saved & FLUSH != FLUSH {
            write_mxcsr(self.saved);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn read_mxcsr() -> u32 {
    let mut csr = 0u32;
    // SAFETY: stmxcsr stores the 32-bit control register at the address, which is `csr`.
    unsafe {
        std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags));
    }
    csr
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn write_mxcsr(csr: u32) {
    // SAFETY: ldmxcsr loads a value read from the register with only the FTZ and DAZ bits
    // changed, both of which every x86-64 processor supports.
    unsafe {
        std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, preserves_flags, readonly));
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The smallest normal f32 halved: subnormal.
    fn subnormal() -> f32 {
        std::hint::black_box(f32::MIN_POSITIVE) / std::hint::black_box(2.0)
    }

    #[test]
    fn subnormals_are_zero_inside_the_guard_and_kept_after_it() {
        let before = subnormal();
        assert!(before > 0.0 && !before.is_normal());
        {
            let _flush = FlushSubnormals::new();
            assert_eq!(subnormal(), 0.0, "FTZ: a subnormal result is zero");
            let operand = std::hint::black_box(f32::from_bits(1));
            assert_eq!(operand * 1.0, 0.0, "DAZ: a subnormal operand reads as zero");
        }
        assert_eq!(subnormal(), before, "the flags are restored");
    }

    #[test]
    fn nested_guards_restore_the_outer_state() {
        let outer = FlushSubnormals::new();
        {
            let _inner = FlushSubnormals::new();
        }
        assert_eq!(
            subnormal(),
            0.0,
            "the inner guard left the outer one's flags"
        );
        drop(outer);
        assert!(subnormal() > 0.0);
    }
}
