//! Dropout as one operation: each element is kept (and scaled by 1/(1-p)) or zeroed by a hash
//! of a per-call seed and the element's index, so the backward recomputes the mask instead of
//! keeping it, and the CPU kernel is one pass each way. Burn's `Dropout` draws a Bernoulli
//! tensor from the backend's generator and multiplies twice forward and twice backward: on
//! fashion-mlp's tuned recipe that cost a quarter of the CPU step.
//!
//! The seeds: the training loop calls [`seed_step`] before each step with a seed mixed from
//! (run seed, epoch, step); the n-th dropout call of the step then draws from (that seed, n).
//! A resumed run draws the same masks, whatever the thread count. The stream is per thread:
//! the training loop and its forward pass run on one.

use super::EmberBackend;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use std::cell::Cell;

thread_local! {
    /// This thread's step seed and the dropout calls made since it was set.
    static STEP: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Seeds the random draws of one training step: ember's dropout, and the backend's generator
/// (which the GPU backends' dropout draws from, seeded again per call from this stream).
pub fn seed_step<B: Backend>(device: &B::Device, seed: u64) {
    B::seed(device, seed);
    STEP.set((seed, 0));
}

/// The next seeded draw of this thread's step: a dropout call's, or the augmentation's.
pub(crate) fn next_seed() -> u64 {
    let (seed, calls) = STEP.get();
    STEP.set((seed, calls + 1));
    mix(seed ^ calls.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// SplitMix64's finaliser: a well-mixed 64-bit value from any input.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Inverted dropout at rate `p` on a training (autodiff) backend; the identity in inference,
/// as Burn's `Dropout`.
pub fn dropout<B: EmberBackend, const D: usize>(x: Tensor<B, D>, p: f64) -> Tensor<B, D> {
    if p == 0.0 || !B::ad_enabled(&x.device()) {
        return x;
    }
    let seed = next_seed();
    Tensor::from_primitive(TensorPrimitive::Float(B::dropout(
        x.into_primitive().tensor(),
        p,
        seed,
    )))
}

pub(crate) use ember_kernels::elementwise::threshold_and_scale;

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use ember_kernels::elementwise::keep;

    type A = Autodiff<Flex>;

    #[test]
    fn a_rate_keeps_its_share_of_elements_and_seeds_give_other_masks() {
        let n = 1 << 20;
        for p in [0.1, 0.5, 0.9] {
            let (threshold, _) = threshold_and_scale(p);
            let kept = (0..n).filter(|&i| keep(i, 42, threshold)).count();
            let share = kept as f64 / n as f64;
            // A binomial share's standard deviation is below 0.0005 at this n.
            assert!((share - (1.0 - p)).abs() < 0.003, "p {p}: kept {share}");
        }
        let (threshold, _) = threshold_and_scale(0.5);
        let same = (0..n)
            .filter(|&i| keep(i, 1, threshold) == keep(i, 2, threshold))
            .count();
        assert!(
            (same as f64 / n as f64 - 0.5).abs() < 0.003,
            "seeds 1 and 2: {same}"
        );
    }

    /// The gradient goes through exactly the kept elements, scaled as they were; the masks
    /// follow the step seed; inference leaves every element.
    #[test]
    fn the_backward_reuses_the_forward_mask_and_inference_keeps_everything() {
        let device = Default::default();
        let run = |seed: u64| {
            seed_step::<A>(&device, seed);
            let x = Tensor::<A, 2>::ones([64, 100], &device).require_grad();
            let y = dropout(x.clone(), 0.3);
            let grads = (y.clone() * 2.0).sum().backward();
            (y.inner().into_data(), x.grad(&grads).unwrap().into_data())
        };
        let (y, dx) = run(5);
        let y: Vec<f32> = y.to_vec().unwrap();
        let dx: Vec<f32> = dx.to_vec().unwrap();
        let scale = 1.0 / 0.7f32;
        assert!(y.iter().all(|v| *v == 0.0 || *v == scale));
        let doubled: Vec<f32> = y.iter().map(|v| v * 2.0).collect();
        assert_eq!(dx, doubled);
        assert_eq!(run(5).0.to_vec::<f32>().unwrap(), y);
        assert_ne!(run(6).0.to_vec::<f32>().unwrap(), y);
        let x = Tensor::<Flex, 2>::ones([4, 4], &device);
        assert_eq!(dropout(x.clone(), 0.3).into_data(), x.into_data());
    }

    /// Burn's composition (the GPU backends' fallback) keeps the same share and scale, and
    /// its backward applies the forward's mask too.
    #[test]
    fn the_fallback_composition_masks_alike_forward_and_backward() {
        type F = Flex;
        let device = Default::default();
        let x = Tensor::<F, 2>::ones([256, 256], &device)
            .into_primitive()
            .tensor();
        let y = <F as EmberBackend>::dropout_by_composition(x.clone(), 0.25, 9);
        let again = <F as EmberBackend>::dropout_by_composition(x, 0.25, 9);
        let y: Vec<f32> = Tensor::<F, 2>::from_primitive(TensorPrimitive::Float(y))
            .into_data()
            .to_vec()
            .unwrap();
        let again: Vec<f32> = Tensor::<F, 2>::from_primitive(TensorPrimitive::Float(again))
            .into_data()
            .to_vec()
            .unwrap();
        assert_eq!(y, again);
        let kept = y.iter().filter(|v| **v != 0.0).count() as f64 / y.len() as f64;
        assert!((kept - 0.75).abs() < 0.01, "{kept}");
        assert!(
            y.iter()
                .all(|v| *v == 0.0 || (*v - 1.0 / 0.75).abs() < 1e-6)
        );
    }
}
