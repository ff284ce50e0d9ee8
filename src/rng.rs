//! Seeded random numbers that do not depend on the device: initial weights, the validation split
//! and the per-epoch shuffles are all drawn on the host from MT19937-64, so the same seed gives
//! the same run on the CPU and on CUDA (Burn's backends each have their own generator).

use rand_mt::Mt64;

/// A generator for one purpose (`"init"`, `"split"`, `"shuffle"`...) and index (an epoch),
/// independent of the generators for other purposes under the same seed.
pub fn stream(seed: u64, purpose: &str, index: u64) -> Mt64 {
    // FNV-1a over the purpose, mixed with the index: stable across platforms and versions.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in purpose.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let key = [seed, h, index];
    Mt64::new_with_key(key)
}

/// A uniform double in [0, 1) with 53 random bits.
pub fn uniform(rng: &mut Mt64) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// A standard normal draw (Box-Muller).
pub fn normal(rng: &mut Mt64) -> f64 {
    let u1 = 1.0 - uniform(rng); // (0, 1]: keeps ln finite
    let u2 = uniform(rng);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// An unbiased integer in [0, n).
fn below(rng: &mut Mt64, n: u64) -> u64 {
    let zone = u64::MAX - (u64::MAX % n);
    loop {
        let v = rng.next_u64();
        if v < zone {
            return v % n;
        }
    }
}

/// A uniformly random permutation of 0..n (Fisher-Yates).
pub fn permutation(rng: &mut Mt64, n: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = below(rng, i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_differ_by_purpose_and_index_and_repeat_by_seed() {
        let a = stream(42, "shuffle", 1).next_u64();
        assert_eq!(a, stream(42, "shuffle", 1).next_u64());
        assert_ne!(a, stream(42, "shuffle", 2).next_u64());
        assert_ne!(a, stream(42, "split", 1).next_u64());
        assert_ne!(a, stream(43, "shuffle", 1).next_u64());
    }

    #[test]
    fn permutation_holds_every_index_once() {
        let mut p = permutation(&mut stream(1, "t", 0), 1000);
        assert_ne!(p, (0..1000).collect::<Vec<_>>());
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn normal_draws_have_unit_variance() {
        let mut rng = stream(7, "t", 0);
        let xs: Vec<f64> = (0..20000).map(|_| normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.03, "{mean}");
        assert!((var - 1.0).abs() < 0.05, "{var}");
    }
}
