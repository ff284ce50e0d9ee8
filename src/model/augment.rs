//! Train-time augmentation of a convolutional network's input maps (`[model.augment]`): each
//! image of a step shifted by up to `crop_padding` pixels each way, zeros coming in (a random
//! crop of the padded image), then mirrored left to right with probability 1/2.
//!
//! The draws (a shift and a flip per image) come from the step's seed, which the training loop
//! mixes from (run seed, epoch, step) as for dropout, so a resumed run sees the same images.
//! They are a few bytes per image, made on the host and uploaded; the pixels never leave the
//! device: one gather of the maps by an index built there, and a mask for the zeros. The same
//! Burn operations run on every backend.

use crate::config::Augment;
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
pub fn augment<B: Backend>(maps: Tensor<B, 4>, augment: Augment, seed: u64) -> Tensor<B, 4> {
    let [n, c, h, w] = maps.dims();
    let device = maps.device();
    let flat: Vec<i64> = (draws(n, augment, seed).iter())
        .flat_map(|d| [d.dy, d.dx, d.flip])
        .collect();
    let draws = Tensor::<B, 2, Int>::from_data(TensorData::new(flat, [n, 3]), &device);
    let column = |j: usize| draws.clone().slice([0..n, j..j + 1]);
    let (dy, dx, flip) = (column(0), column(1), column(2));
    let (h, w) = (h as i64, w as i64);
    let pixel = Tensor::<B, 1, Int>::arange(0..h * w, &device).reshape([1, h * w]);
    let row = pixel.clone().div_scalar(w);
    let col = pixel.remainder_scalar(w);
    // c + flip·(w-1-2c): the mirrored column where flip is 1.
    let col = col.clone() + flip * col.mul_scalar(-2).add_scalar(w - 1);
    let (src_row, src_col) = (row + dy, col + dx);
    let (row_in, col_in) = (
        src_row.clone().clamp(0, h - 1),
        src_col.clone().clamp(0, w - 1),
    );
    let inside = src_row.equal(row_in.clone()).float() * src_col.equal(col_in.clone()).float();
    let index = (row_in.mul_scalar(w) + col_in)
        .unsqueeze_dim::<3>(1)
        .repeat_dim(1, c);
    let hw = (h * w) as usize;
    (maps.reshape([n, c, hw]).gather(2, index) * inside.unsqueeze_dim::<3>(1))
        .reshape([n, c, h as usize, w as usize])
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
