//! Train-time augmentation of a convolutional network's input maps (`[model.augment]`): each
//! image of a step shifted by up to `crop_padding` pixels each way, zeros coming in (a random
//! crop of the padded image), then mirrored left to right with probability 1/2.
//!
//! The draws (a shift and a flip per image) come from the step's seed, which the training loop
//! mixes from (run seed, epoch, step) as for dropout, so a resumed run sees the same images.
//! They are a few bytes per image, made on the host and uploaded; the pixels never leave the
//! device: `ops::augment` (Burn's gather of the maps by an index built there, and a mask for
//! the zeros; on the GPU one kernel of ember's).

use crate::config::Augment;
use crate::ops::EmberBackend;
use burn::prelude::*;
use burn::tensor::TensorData;

/// One image's draw: rows and columns to shift by, and 1 to mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Draw {
    dy: i64,
    dx: i64,
    flip: i64,
}

/// The draws of `n` images under `seed`.
fn draws(n: usize, augment: Augment, seed: u64) -> Vec<Draw> {
    let p = augment.crop_padding as u64;
    let span = 2 * p + 1;
    (0..n as u64)
        .map(|i| {
            let z = crate::ops::dropout::mix(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            Draw {
                dy: (z % span) as i64 - p as i64,
                dx: ((z >> 21) % span) as i64 - p as i64,
                flip: i64::from(augment.flip && z >> 63 == 1),
            }
        })
        .collect()
}

/// `maps` `[n, channels, height, width]` with each image shifted and mirrored as drawn from
/// `seed`: output pixel (r, c) of image i is input pixel (r + dy, c' + dx), with c' = w-1-c
/// where the image is mirrored and c elsewhere, or 0 outside the image.
pub fn augment<B: EmberBackend>(maps: Tensor<B, 4>, augment: Augment, seed: u64) -> Tensor<B, 4> {
    let n = maps.dims()[0];
    let flat: Vec<i64> = (draws(n, augment, seed).iter())
        .flat_map(|d| [d.dy, d.dx, d.flip])
        .collect();
    let draws = Tensor::<B, 2, Int>::from_data(TensorData::new(flat, [n, 3]), &maps.device());
    crate::ops::augment(maps, draws)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};

    /// The augmented image `i` computed pixel by pixel from its draw.
    fn by_hand(x: &[f32], [c, h, w]: [usize; 3], d: Draw) -> Vec<f32> {
        let mut out = vec![0.0; c * h * w];
        for ch in 0..c {
            for r in 0..h as i64 {
                for col in 0..w as i64 {
                    let mirrored = if d.flip == 1 { w as i64 - 1 - col } else { col };
                    let (sr, sc) = (r + d.dy, mirrored + d.dx);
                    if (0..h as i64).contains(&sr) && (0..w as i64).contains(&sc) {
                        out[(ch * h + r as usize) * w + col as usize] =
                            x[(ch * h + sr as usize) * w + sc as usize];
                    }
                }
            }
        }
        out
    }

    #[test]
    fn each_image_is_its_drawn_shift_and_mirror_on_an_autodiff_backend_too() {
        type A = Autodiff<Flex>;
        let device = Default::default();
        let (n, shape) = (40, [2, 5, 7]);
        let size = shape.iter().product::<usize>();
        let pixels: Vec<f32> = (0..n * size).map(|v| v as f32 + 1.0).collect();
        let a = Augment {
            crop_padding: 2,
            flip: true,
        };
        let x = Tensor::<A, 4>::from_data(TensorData::new(pixels.clone(), [n, 2, 5, 7]), &device);
        let y: Vec<f32> = augment(x, a, 11).into_data().to_vec().unwrap();
        let draws = draws(n, a, 11);
        for (i, d) in draws.iter().enumerate() {
            let image = &pixels[i * size..(i + 1) * size];
            assert_eq!(
                &y[i * size..(i + 1) * size],
                by_hand(image, shape, *d),
                "{d:?}"
            );
        }
        assert!(draws.iter().any(|d| d.flip == 1) && draws.iter().any(|d| d.flip == 0));
        assert_ne!(super::draws(n, a, 12), draws);
    }

    #[test]
    fn draws_cover_every_shift_evenly_and_flip_half_the_images() {
        let a = Augment {
            crop_padding: 3,
            flip: true,
        };
        let draws = draws(70_000, a, 5);
        for shift in -3..=3 {
            for pick in [|d: &Draw| d.dy, |d: &Draw| d.dx] {
                let share = draws.iter().filter(|d| pick(d) == shift).count() as f64 / 70_000.0;
                assert!((share - 1.0 / 7.0).abs() < 0.01, "shift {shift}: {share}");
            }
        }
        let flipped = draws.iter().filter(|d| d.flip == 1).count() as f64 / 70_000.0;
        assert!((flipped - 0.5).abs() < 0.01, "{flipped}");
        let still = Augment {
            crop_padding: 2,
            flip: false,
        };
        assert!(super::draws(1000, still, 5).iter().all(|d| d.flip == 0));
    }
}
