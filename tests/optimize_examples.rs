//! Optimizations that must come out right at every size: checked by exact
//! cost at many sizes.

use atl_egg::front::parse_program;
use atl_egg::optimizer::{optimize, Options};
use atl_egg::semantics::cost::cost;
use atl_egg::semantics::value::Sizes;
use atl_egg::Symbol;
use std::collections::HashMap;

fn sizes(kv: &[(&str, i64)]) -> Sizes {
    kv.iter().map(|(k, v)| (Symbol::from(*k), *v)).collect()
}

fn optimized(src: &str) -> (atl_egg::front::Program, atl_egg::front::Program) {
    let p = parse_program(src.as_bytes()).unwrap();
    let o = optimize(&p, &Options::default()).unwrap().program;
    (p, o)
}

/// A diagonal matrix built with a bracket, times a vector: 2n - 1.
#[test]
fn diagonal_matrix_times_vector_costs_2n_minus_1() {
    let (p, o) = optimized(
        "(fn f ((x (tensor n R)) (y (tensor n R)))
           (let A (gen i n (gen j n (iverson (== i j) (get x i))))
             (sum i n (sum j n (* (get A i j) (get y j))))))",
    );
    let rel = HashMap::new();
    for n in 1..=64 {
        let s = sizes(&[("n", n)]);
        assert_eq!(cost(&o, &s, &rel).unwrap(), (2 * n - 1) as u128, "n = {n}");
        assert!(cost(&o, &s, &rel).unwrap() <= cost(&p, &s, &rel).unwrap());
    }
}

/// A 1D convolution through a materialized Toeplitz matrix costs what the
/// direct (zero-padded) convolution costs.
#[test]
fn toeplitz_convolution_costs_the_direct_convolution() {
    let (_, o) = optimized(
        "(fn f ((x (tensor n R)) (c (tensor m R)))
           (let T (gen i n (gen k n (iverson (and (<= k i) (< i (+ k m))) (get c (- i k)))))
             (gen i n (sum k n (* (get T i k) (get x k))))))",
    );
    let direct = parse_program(
        b"(fn f ((x (tensor n R)) (c (tensor m R)))
            (gen i n (sum j m (iverson (<= j i) (* (get c j) (get x (- i j)))))))",
    )
    .unwrap();
    let rel = HashMap::new();
    for n in 0..=40 {
        for m in 0..=6 {
            let s = sizes(&[("n", n), ("m", m)]);
            assert_eq!(
                cost(&o, &s, &rel).unwrap(),
                cost(&direct, &s, &rel).unwrap(),
                "n = {n}, m = {m}"
            );
        }
    }
}
