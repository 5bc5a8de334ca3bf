//! Names: internal names never collide with names a user can write, and
//! appliers that make names are idempotent (rules saturate). That printed
//! programs use readable names that are valid C identifiers is checked on
//! every corpus program by the tests that derive them (`common::printed`).

use crate::common;

use atl_egg::corpus::random_inputs;
use atl_egg::derive;
use atl_egg::front::ast::{ParamKind, Type};
use atl_egg::front::parse_program;
use atl_egg::optimizer::{optimize, Options};
use atl_egg::rng::Rng;
use atl_egg::semantics::dual::jvp as dual_jvp;
use atl_egg::semantics::eval::evaluate;
use atl_egg::semantics::numerics::inner_product;
use atl_egg::semantics::value::{random_value, Sizes, Value};
use atl_egg::Symbol;
use common::{compare_values, Tolerance};
use std::collections::HashMap;

/// Equal up to floating-point reassociation (relative 1e-12 of the
/// largest magnitude, element by element).
fn same(a: &Value, b: &Value) -> bool {
    let tol = Tolerance {
        rel: 1e-12,
        abs: 1e-300,
    };
    compare_values(a, b, tol).is_ok()
}

/// `optimize`, `jvp` (along `x`) and, for a program returning `R`, `grad`
/// (along `x`) of `src` agree with the reference evaluator and dual numbers
/// at n = 1, 2, 3.
fn check_values(src: &str) {
    let p = parse_program(src.as_bytes()).unwrap();
    let opts = Options::default();
    let o = optimize(&p, &opts).unwrap().program;
    let wrt = [Symbol::from("x")];
    let j = derive::jvp(&p, &wrt, &opts).unwrap().program;
    let g = (p.ret == Type::Real).then(|| derive::grad(&p, &wrt, &opts).unwrap().program);
    let dx = j.params[p.params.len()].name;
    let x_type = match &p.param(Symbol::from("x")).unwrap().kind {
        ParamKind::Real(t) => t.clone(),
        _ => unreachable!(),
    };
    let mut rng = Rng::new(7);
    for n in 1..=3 {
        let sizes: Sizes = [(Symbol::from("n"), n)].into_iter().collect();
        let inputs = random_inputs(&p, &sizes, &mut rng).unwrap();
        let want = evaluate(&p, &inputs).unwrap();
        let got = evaluate(&o, &inputs).unwrap();
        assert!(same(&got, &want), "optimize at n={n}: {got:?} != {want:?}");
        let v = random_value(&x_type, &sizes, &mut || rng.unit()).unwrap();
        let tangents: HashMap<Symbol, Value> = [(wrt[0], v.clone())].into_iter().collect();
        let (_, want) = dual_jvp(&p, &inputs, &tangents).unwrap();
        let mut with_t = inputs.clone();
        with_t.values.insert(dx, v.clone());
        let got = evaluate(&j, &with_t).unwrap();
        assert!(same(&got, &want), "jvp at n={n}: {got:?} != {want:?}");
        if let Some(g) = &g {
            // <grad f, v> is the tangent of f along v
            let got = inner_product(&evaluate(g, &inputs).unwrap(), &v);
            let want = inner_product(&want, &Value::Real(1.0));
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                "<grad, v> at n={n}: {got} != {want}"
            );
        }
    }
}

/// A user binder spelled like the optimizer's canonical index names once
/// captured the user's `i` (wrong values from `optimize` and `jvp`).
#[test]
fn user_names_do_not_collide_with_internal_names() {
    check_values(
        "(fn prog ((dct R) (dy (tensor n n R)) (n size) (x (tensor n R)))
           (- (sigmoid (sum i n (gen i0~x0 n (get x i))))
              (gen k2 n (pow (exp (get x (- n 1))) 1.5))))",
    );
}

/// Names spelled like black boxes (a parameter `exp`, a let `sin`, an index
/// `log`) stay names: the e-graph's function leaves are another sort, so a
/// variable `exp` and the function `exp` are never one class.
#[test]
fn names_spelled_like_black_boxes_stay_names() {
    check_values(
        "(fn f ((exp R) (x (tensor n R)) (n size))
           (let sin (exp (* exp (get x 0)))
             (sum log n (* (sin (get x log)) (+ sin (pow exp 2))))))",
    );
}

/// Splitting a let-bound pair names its halves once per class, so the rule
/// reaches a fixed point instead of minting new names every iteration.
#[test]
fn let_pair_split_saturates() {
    let p =
        parse_program(b"(fn f ((x R) (y R)) (let p (pair (* x x) (* y y)) (+ (fst p) (snd p))))")
            .unwrap();
    let st = optimize(&p, &Options::default()).unwrap().stats;
    for ph in &st.phases {
        assert_eq!(ph.stop_reason, "saturated", "{ph:?}");
    }
    assert_eq!(p.ret, Type::Real);
}
