//! The built-in tables: the tabular job's synthetic data, generated exactly as the peer
//! benchmarks generate theirs (`bench/peers/README.md`, "W2"), so ember and the peers train
//! on identical numbers; and the linear-scalar job's `arange` tensors from the seed question.

use super::{HostSplit, Labels, Matrix};

pub const TABULAR_ROWS: usize = 200_000;
pub const TABULAR_COLS: usize = 61;
pub const SCALAR_ROWS: usize = 38_400;
pub const SCALAR_COLS: usize = 40;

/// numpy's `RandomState(0).random_sample()`: MT19937 with `init_genrand(0)`, 53-bit doubles.
struct NumpyLegacy(rand_mt::Mt);

impl NumpyLegacy {
    fn new(seed: u32) -> Self {
        NumpyLegacy(rand_mt::Mt::new(seed))
    }

    fn next(&mut self) -> f64 {
        let a = f64::from(self.0.next_u32() >> 5);
        let b = f64::from(self.0.next_u32() >> 6);
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }
}

/// 200,000 x 61 uniform features of unit variance and a 0/1 label from a noisy rule with an
/// interaction and a square term (49.6 % ones).
pub fn tabular() -> HostSplit {
    tabular_rows(TABULAR_ROWS)
}

/// The first `rows` rows of the same rule (the draw order makes smaller tables different from a
/// prefix of the full one, so only `tabular()` matches the peers).
pub fn tabular_rows(rows: usize) -> HostSplit {
    let mut rng = NumpyLegacy::new(0);
    let sqrt3 = 3f64.sqrt();
    let x: Vec<f32> = (0..rows * TABULAR_COLS)
        .map(|_| ((2.0 * rng.next() - 1.0) * sqrt3) as f32)
        .collect();
    let w: Vec<f64> = (0..TABULAR_COLS).map(|_| 2.0 * rng.next() - 1.0).collect();
    let labels = (0..rows)
        .map(|i| {
            let e = rng.next();
            let xf: Vec<f64> = x[i * TABULAR_COLS..(i + 1) * TABULAR_COLS]
                .iter()
                .map(|v| f64::from(*v))
                .collect();
            let mut z = 0.0;
            for j in 0..TABULAR_COLS {
                z += xf[j] * w[j];
            }
            z = z + 2.0 * xf[0] * xf[1] + 2.0 * (xf[2] * xf[2] - 1.0) + 3.0 * (e - 0.5);
            i64::from(z > 0.0)
        })
        .collect();
    HostSplit {
        features: Matrix {
            rows,
            cols: TABULAR_COLS,
            values: x,
        },
        scalar: None,
        labels: Labels::Binary(labels),
    }
}

/// `x = arange(40*38400).view(38400, 40)`, `f = y = arange(38400)`, as float32.
pub fn linear_scalar() -> HostSplit {
    HostSplit {
        features: Matrix {
            rows: SCALAR_ROWS,
            cols: SCALAR_COLS,
            values: (0..SCALAR_ROWS * SCALAR_COLS).map(|v| v as f32).collect(),
        },
        scalar: Some((0..SCALAR_ROWS).map(|v| v as f32).collect()),
        labels: Labels::Values(Matrix {
            rows: SCALAR_ROWS,
            cols: 1,
            values: (0..SCALAR_ROWS).map(|v| v as f32).collect(),
        }),
    }
}

/// numpy's `.npy` (version 1.0) bytes of a float32 C-order matrix: lets a test compare the
/// table with the peers' files by their published sha256.
pub fn npy_f32(shape: (usize, usize), values: &[f32]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
        shape.0, shape.1
    );
    // magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
    let unpadded = 10 + dict.len() + 1;
    let total = unpadded.div_ceil(64) * 64;
    let mut header = dict.into_bytes();
    header.resize(total - 10 - 1, b' ');
    header.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(&header);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn hex(bytes: &[u8]) -> String {
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn first_values_are_pinned() {
        let t = tabular_rows(3);
        let first: Vec<f32> = t.features.values[..4].to_vec();
        // numpy: (2 * RandomState(0).random_sample(4) - 1) * sqrt(3), as float32
        let expected = [0.169_094_94_f32, 0.745_437_8, 0.355_982_8, 0.155_479_9];
        for (a, b) in first.iter().zip(expected) {
            assert!((a - b).abs() < 1e-6, "{first:?}");
        }
    }

    #[test]
    fn table_is_byte_identical_to_the_peers_npy_files() {
        let t = tabular();
        let x = npy_f32((TABULAR_ROWS, TABULAR_COLS), &t.features.values);
        assert_eq!(x.len(), 128 + TABULAR_ROWS * TABULAR_COLS * 4);
        assert_eq!(
            hex(&x),
            "8224dd30f6cd67d7dd4dcda2823d5d2f433bcc74291d0665a2fc40d27f568d0a"
        );
        let Labels::Binary(labels) = &t.labels else {
            unreachable!()
        };
        let y: Vec<f32> = labels.iter().map(|l| *l as f32).collect();
        assert_eq!(
            hex(&npy_f32((TABULAR_ROWS, 1), &y)),
            "f38f0113f34b1af56083dd50c10a5c79c8b5f1cd0c7ed62bbb4f859665ddf39b"
        );
        let ones = labels.iter().filter(|l| **l == 1).count();
        assert_eq!((ones as f64 / TABULAR_ROWS as f64 * 1000.0).round(), 496.0);
    }

    #[test]
    fn arange_table_matches_the_seed() {
        let t = linear_scalar();
        assert_eq!(t.features.row(1)[0], 40.0);
        assert_eq!(t.features.values.last().copied(), Some(1_535_999.0));
        assert_eq!(t.scalar.as_ref().unwrap()[38_399], 38_399.0);
    }
}
