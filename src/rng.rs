//! The one seeded random generator of the tests, benchmarks and reports:
//! rand's Xoshiro256++ (a named algorithm, so a seed gives the same values
//! whatever rand's version), seeded from a `u64` so that every generated
//! input or test case is reproducible from its seed, with the few draws they
//! need.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng as _, RngExt as _, SeedableRng as _};

/// A seeded generator; [`Rng::unit`] is what `random_value` and
/// `random_relation` expect of their source.
#[derive(Clone, Debug)]
pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    /// The generator of `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `[0, n)`; `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "Rng::below(0)");
        self.0.random_range(0..n)
    }

    /// Uniform in `[lo, hi]`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        self.0.random_range(lo..=hi)
    }

    /// Uniform in `[0, 1)`.
    pub fn float(&mut self) -> f64 {
        self.0.random()
    }

    /// Uniform in `[-1, 1]`.
    pub fn unit(&mut self) -> f64 {
        self.float() * 2.0 - 1.0
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.float() < p
    }

    /// One of `xs`, uniformly; `xs` must not be empty.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    /// An index chosen with the given (non-negative) weights.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        assert!(total > 0, "all weights are zero");
        let mut r = self.below(total as usize) as u32;
        for (k, &w) in weights.iter().enumerate() {
            if r < w {
                return k;
            }
            r -= w;
        }
        unreachable!()
    }

    /// A derived, independent generator (for sub-tasks that must not shift
    /// the parent's sequence).
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }
}
