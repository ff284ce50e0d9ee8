//! A convolutional network's train-time augmentation on the GPU in one launch: a unit per
//! output pixel reads its input pixel, shifted and mirrored by its image's draw, or writes 0
//! where the shift leaves the image (`ops::composed::augment`'s gather and mask, which take a
//! dozen launches of Burn's integer operations).

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, ops::numeric::empty_device};
use cubecl::prelude::*;

const UNITS: u32 = 256;

#[cube(launch_unchecked)]
fn augment_kernel<F: Float, I: Int>(maps: &Tensor<F>, draws: &Tensor<I>, out: &mut Tensor<F>) {
    let pos = ABSOLUTE_POS;
    if pos < out.len() {
        let (c, h, w) = (out.shape(1), out.shape(2), out.shape(3));
        let col = pos % w;
        let row = (pos / w) % h;
        let channel = (pos / (w * h)) % c;
        let image = pos / (w * h * c);
        let d = image * draws.stride(0);
        let ds = draws.stride(1);
        let (dy, dx) = (i32::cast_from(draws[d]), i32::cast_from(draws[d + ds]));
        let mut source_col = i32::cast_from(col);
        if i32::cast_from(draws[d + 2 * ds]) == 1 {
            source_col = i32::cast_from(w) - 1 - source_col;
        }
        let sr = i32::cast_from(row) + dy;
        let sc = source_col + dx;
        let inside = sr >= 0 && sr < i32::cast_from(h) && sc >= 0 && sc < i32::cast_from(w);
        let mut v = F::new(0.0);
        if inside {
            let at = image * maps.stride(0)
                + channel * maps.stride(1)
                + usize::cast_from(sr) * maps.stride(2)
                + usize::cast_from(sc) * maps.stride(3);
            v = maps[at];
        }
        out[pos] = v;
    }
}

/// `maps` `[n, c, h, w]` shifted and mirrored by `draws` `[n, 3]` (`dy`, `dx`, `flip`).
pub fn augment<R: CubeRuntime>(maps: CubeTensor<R>, draws: CubeTensor<R>) -> CubeTensor<R> {
    let (client, device) = (maps.client.clone(), maps.device.clone());
    let shape = maps.meta.shape().clone();
    let elements = shape.num_elements();
    let out = empty_device::<R, f32>(client.clone(), device, shape);
    let dim = CubeDim::new_1d(UNITS);
    let count = cubecl::calculate_cube_count_elemwise(&client, elements, dim);
    // SAFETY: a unit per output element; each read is inside its image, checked against its
    // shape.
    unsafe {
        augment_kernel::launch_unchecked::<f32, i32, R>(
            &client,
            count,
            dim,
            maps.into_tensor_arg(),
            draws.into_tensor_arg(),
            out.clone().into_tensor_arg(),
        );
    }
    out
}
