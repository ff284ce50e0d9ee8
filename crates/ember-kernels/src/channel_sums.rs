//! Per-channel sums over `[n, c, s]` maps (`s` = height × width): batch norm's mean and variance,
//! and its gradient's two sums. Each channel's terms are added in f64 in the order of a plain
//! loop over its values, image by image and pixel by pixel, so the sums are the same bits at
//! every CPU level and thread count.
//!
//! A plain loop waits for each f64 addition before the next. Here `LANES` neighbouring channels
//! are summed side by side, one vector lane each, and each lane still adds its own channel's
//! terms one after another. Their maps lie `s` floats apart, so 8 positions of 8 channels are an
//! 8 x 8 tile; transposed (`ops::transpose`), each row of it is one position's 8 values, and the
//! terms of a row are computed and added as one vector. Added one scalar at a time, 8 channels
//! side by side, the sums were most of batch norm's time in fashion-cnn.

use crate::simd::{Simd, detected};
use rayon::prelude::*;

/// Channels summed side by side: one per lane of a vector of f64 (two on AVX2).
const LANES: usize = 8;

/// Positions per tile: the transposed tile's rows.
const TILE: usize = 8;

/// One group of `LANES` channels from `first`, as [`channel_sums_at`] hands it to each of its
/// ways of summing: `consts` are the lanes' per-channel constants, `inputs` the `P` maps.
struct Group<'a, L, const P: usize> {
    dims: (usize, usize, usize),
    first: usize,
    start: f64,
    inputs: [&'a [f32]; P],
    consts: [L; LANES],
}

/// Per channel of `[n, c, s]` maps, the `K` sums from `start` of `term(lane(channel), values)`,
/// where `values` are the `P` inputs' values at one of the channel's positions; see the module.
pub fn channel_sums<const K: usize, const P: usize, L: Copy + Send + Sync>(
    dims: (usize, usize, usize),
    start: f64,
    inputs: [&[f32]; P],
    lane: impl Fn(usize) -> L + Sync,
    term: impl Fn(L, [f32; P]) -> [f64; K] + Sync,
) -> Vec<[f64; K]> {
    channel_sums_at(detected(), dims, start, inputs, lane, term)
}

/// [`channel_sums`] with the tiles' vector code at `level` (none at `Simd::Portable`), which
/// must not be wider than the CPU's; the tests compare the levels.
fn channel_sums_at<const K: usize, const P: usize, L: Copy + Send + Sync>(
    level: Simd,
    (n, c, s): (usize, usize, usize),
    start: f64,
    inputs: [&[f32]; P],
    lane: impl Fn(usize) -> L + Sync,
    term: impl Fn(L, [f32; P]) -> [f64; K] + Sync,
) -> Vec<[f64; K]> {
    assert!(
        level <= detected(),
        "{level} sums on a CPU with {}",
        detected()
    );
    for input in inputs {
        assert!(input.len() >= n * c * s, "channel sums: an input is short");
    }
    let groups: Vec<[[f64; LANES]; K]> = (0..c.div_ceil(LANES))
        .into_par_iter()
        .map(|g| {
            let first = g * LANES;
            // Past the last channel, lanes repeat it; their sums are dropped below.
            let consts = std::array::from_fn(|l| lane((first + l).min(c - 1)));
            let group = Group {
                dims: (n, c, s),
                first,
                start,
                inputs,
                consts,
            };
            group_sums(level, &group, &term)
        })
        .collect();
    let each = groups
        .iter()
        .flat_map(|g| (0..LANES).map(|l| g.map(|q| q[l])));
    each.take(c).collect()
}

/// One group's sums: through tiles where the group is whole and the CPU has a vector level,
/// position by position otherwise.
fn group_sums<const K: usize, const P: usize, L: Copy>(
    level: Simd,
    group: &Group<L, P>,
    term: &impl Fn(L, [f32; P]) -> [f64; K],
) -> [[f64; LANES]; K] {
    let whole = group.first + LANES <= group.dims.1;
    #[cfg(target_arch = "x86_64")]
    if whole {
        match level {
            // SAFETY: the CPU has the level's features (asserted by the caller), and the group's
            // LANES channels all lie inside the inputs.
            Simd::Avx512 => return unsafe { tiled_avx512(group, term) },
            // SAFETY: as above.
            Simd::Avx2 => return unsafe { tiled_avx2(group, term) },
            Simd::Portable => {}
        }
    }
    let _ = (level, whole);
    plain(group, term)
}

/// Adds each lane's terms for one position, whose values are `values[input][lane]`.
#[inline(always)]
fn add_terms<const K: usize, const P: usize, L: Copy>(
    acc: &mut [[f64; LANES]; K],
    consts: &[L; LANES],
    values: [[f32; LANES]; P],
    term: &impl Fn(L, [f32; P]) -> [f64; K],
) {
    for l in 0..LANES {
        let t = term(consts[l], std::array::from_fn(|p| values[p][l]));
        for q in 0..K {
            acc[q][l] += t[q];
        }
    }
}

/// A group's sums position by position, reading each lane's value where it lies.
fn plain<const K: usize, const P: usize, L: Copy>(
    group: &Group<L, P>,
    term: &impl Fn(L, [f32; P]) -> [f64; K],
) -> [[f64; LANES]; K] {
    let (n, c, s) = group.dims;
    let mut acc = [[group.start; LANES]; K];
    for b in 0..n {
        let at: [usize; LANES] =
            std::array::from_fn(|l| (b * c + (group.first + l).min(c - 1)) * s);
        for j in 0..s {
            let values =
                std::array::from_fn(|p| std::array::from_fn(|l| group.inputs[p][at[l] + j]));
            add_terms(&mut acc, &group.consts, values, term);
        }
    }
    acc
}

/// A whole group's sums through transposed tiles, the positions past the last whole tile of an
/// image one by one; each lane adds in the same order as [`plain`].
///
/// # Safety
/// The CPU has AVX; the group's LANES channels lie inside `[n, c, s]` inputs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn tiled<const K: usize, const P: usize, L: Copy>(
    group: &Group<L, P>,
    term: &impl Fn(L, [f32; P]) -> [f64; K],
) -> [[f64; LANES]; K] {
    let (n, c, s) = group.dims;
    let mut acc = [[group.start; LANES]; K];
    let mut tiles = [[[0f32; LANES]; TILE]; P];
    let whole = s / TILE * TILE;
    for b in 0..n {
        let base = (b * c + group.first) * s;
        for j0 in (0..whole).step_by(TILE) {
            for (tile, input) in tiles.iter_mut().zip(group.inputs) {
                // SAFETY: rows base + l·s + j0 .. + TILE for l < LANES lie inside the input
                // (the group is whole, and j0 + TILE <= s); the tile holds TILE x LANES.
                // Called directly, not through `whole_tile_copier`'s pointer, so that it inlines
                // and the tile's rows can stay in registers.
                unsafe {
                    let (from, to) = (input.as_ptr().add(base + j0), tile.as_mut_ptr().cast());
                    crate::transpose::tile_avx(from, s as isize, to, LANES)
                };
            }
            for jj in 0..TILE {
                add_terms(&mut acc, &group.consts, tiles.map(|t| t[jj]), term);
            }
        }
        for j in whole..s {
            let values = group
                .inputs
                .map(|x| std::array::from_fn(|l| x[base + l * s + j]));
            add_terms(&mut acc, &group.consts, values, term);
        }
    }
    acc
}

/// [`tiled`] compiled for AVX-512: each lane's f64 in one register.
///
/// # Safety
/// As for [`tiled`], on a CPU with AVX-512.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn tiled_avx512<const K: usize, const P: usize, L: Copy>(
    group: &Group<L, P>,
    term: &impl Fn(L, [f32; P]) -> [f64; K],
) -> [[f64; LANES]; K] {
    // SAFETY: forwarded from the caller.
    unsafe { tiled(group, term) }
}

/// [`tiled`] compiled for AVX2.
///
/// # Safety
/// As for [`tiled`], on a CPU with AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tiled_avx2<const K: usize, const P: usize, L: Copy>(
    group: &Group<L, P>,
    term: &impl Fn(L, [f32; P]) -> [f64; K],
) -> [[f64; LANES]; K] {
    // SAFETY: forwarded from the caller.
    unsafe { tiled(group, term) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of mixed magnitudes, whose f64 sum changes with the order of the additions.
    fn mixed(len: usize) -> Vec<f32> {
        (0..len)
            .map(|i| {
                let r = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                (r as f32 / (1u64 << 24) as f32 - 0.5) * 10f32.powi((i % 13) as i32 - 6)
            })
            .collect()
    }

    /// At every level this CPU has, the sums are those of a plain loop per channel, bit for
    /// bit: whole and partial groups of channels, maps of whole tiles and with a remainder.
    #[test]
    fn channel_sums_add_in_a_plain_loops_order_at_every_level() {
        for (n, c, s) in [(5, 11, 37), (3, 16, 24), (2, 32, 196), (4, 8, 5), (1, 3, 1)] {
            let (x, y) = (mixed(n * c * s), mixed(n * c * s + 7));
            let lane = |ch: usize| ch as f64 * 0.25 - 1.0;
            let term = |k: f64, [a, b]: [f32; 2]| {
                let g = f64::from(b);
                [g, g * (f64::from(a) - k) * 1.5]
            };
            for level in detected().up_to() {
                let ours = channel_sums_at(level, (n, c, s), 0.0, [&x, &y[7..]], lane, term);
                assert_eq!(ours.len(), c);
                for (ch, sums) in ours.iter().enumerate() {
                    let mut want = [0.0f64; 2];
                    for b in 0..n {
                        for at in (b * c + ch) * s..(b * c + ch + 1) * s {
                            let t = term(lane(ch), [x[at], y[7 + at]]);
                            want = [want[0] + t[0], want[1] + t[1]];
                        }
                    }
                    let (got, want) = (sums.map(f64::to_bits), want.map(f64::to_bits));
                    assert_eq!(got, want, "{level}, {n}x{c}x{s}, channel {ch}");
                }
            }
        }
    }
}
