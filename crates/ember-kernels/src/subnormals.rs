//! Subnormal floats flushed to zero inside ember's Adam pass.
//!
//! Adam's moments decay geometrically wherever a weight's gradient is zero for a while (the
//! first layer's weights of a pixel that is black in most images): `m` falls by 0.9 a step and
//! is subnormal (below 1.2e-38) some 800 steps later. On Intel cores every operation on a
//! subnormal takes a microcode assist of about a hundred cycles, and fashion-mlp's tuned recipe
//! (Adam) ran at a quarter of its SGD speed on a Sapphire Rapids machine
//! (`docs/benchmarks/adam-and-subnormals-on-sapphire-rapids.md`); AMD cores take them at full
//! speed. TensorFlow and XLA run their CPU kernels with the same two MXCSR flags set, and
//! PyTorch offers them (`torch.set_flush_denormal`).
//!
//! The flags are set for the span of one kernel call and restored after it, so nothing outside
//! ember's kernels (Burn's operations, the gemm crate, the user's process) sees them. A value
//! that would have been subnormal is zero instead: an Adam moment below 1.2e-38, whose update
//! to its weight was smaller than the weight's last bit anyway.

/// The MXCSR bits: FTZ (results that would be subnormal are zero) and DAZ (subnormal operands
/// are read as zero).
#[cfg(target_arch = "x86_64")]
pub const FLUSH: u32 = (1 << 15) | (1 << 6);

/// While it lives, this thread's f32 arithmetic flushes subnormals to zero; dropping it puts
/// back the flags it found. It stays on the thread that made it (not `Send`): the flags are
/// per thread.
#[must_use = "the flags are restored when the guard drops"]
pub(crate) struct FlushSubnormals {
    #[cfg(target_arch = "x86_64")]
    saved: u32,
    _thread: std::marker::PhantomData<*const ()>,
}

impl FlushSubnormals {
    #[inline(always)]
    pub(crate) fn new() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let saved = read_mxcsr();
            if saved & FLUSH != FLUSH {
                write_mxcsr(saved | FLUSH);
            }
            Self {
                saved,
                _thread: std::marker::PhantomData,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Self {
            _thread: std::marker::PhantomData,
        }
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
pub fn read_mxcsr() -> u32 {
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
    // changed, both of which every x86-64 processor supports. No `readonly`: as a full memory
    // clobber, the asm keeps the kernel's loads and stores (and so the arithmetic between
    // them) inside the span. No `preserves_flags`: the restore resets the register's
    // exception flags too. Rust assumes the default floating-point environment, so an
    // operation the compiler folds or moves out of the span rounds as without the flags; with
    // these two flags that can only keep a subnormal the kernel would have flushed.
    unsafe {
        std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack));
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use std::hint::black_box;

    /// The smallest normal f32 halved: subnormal.
    fn subnormal() -> f32 {
        black_box(f32::MIN_POSITIVE) / black_box(2.0)
    }

    /// The smallest subnormal times 1e30: a normal 1.4e-15, or zero when the operand is read
    /// as zero (DAZ).
    fn scaled_subnormal() -> f32 {
        black_box(f32::from_bits(1)) * black_box(1e30)
    }

    // The checks compare bits: a float comparison under DAZ would read a subnormal as zero.
    #[test]
    fn subnormals_are_zero_inside_the_guard_and_kept_after_it() {
        let before = (subnormal(), scaled_subnormal());
        assert!(before.0.to_bits() != 0 && !before.0.is_normal());
        assert!(before.1.is_normal());
        let inside = {
            let _flush = FlushSubnormals::new();
            // black_box: computed and kept before the guard restores the flags.
            (black_box(subnormal()), black_box(scaled_subnormal()))
        };
        assert_eq!(inside.0.to_bits(), 0, "FTZ: a subnormal result is zero");
        assert_eq!(
            inside.1.to_bits(),
            0,
            "DAZ: a subnormal operand reads as zero"
        );
        let after = (subnormal(), scaled_subnormal());
        assert_eq!(
            after.0.to_bits(),
            before.0.to_bits(),
            "the flags are restored"
        );
        assert_eq!(
            after.1.to_bits(),
            before.1.to_bits(),
            "the flags are restored"
        );
        assert_eq!(read_mxcsr() & FLUSH, 0);
    }

    #[test]
    fn nested_guards_restore_the_outer_state() {
        let outer = FlushSubnormals::new();
        {
            let _inner = FlushSubnormals::new();
        }
        let flushed = black_box(subnormal());
        drop(outer);
        assert_eq!(
            flushed.to_bits(),
            0,
            "the inner guard left the outer one's flags"
        );
        assert!(subnormal().to_bits() != 0);
    }
}
