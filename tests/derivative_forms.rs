//! Derivative forms inside programs (`(grad F ...)`, `(jvp F ...)`,
//! `(vjp F ...)`, `(hvp F ...)`): each means the derivative of the called
//! function at its arguments, checked by value against exact forward-mode
//! derivatives (dual numbers) of the callee; compositions (a materialized
//! Hessian, a Gauss-Newton product `Jᵀ(J v)`, the gradient of a function
//! built from a gradient) mean what they say; bad forms are located errors.

use atl_egg::front::ast::Program;
use atl_egg::rng::Rng;
use atl_egg::semantics::dual::jvp as dual_jvp;
use atl_egg::semantics::eval::evaluate;
use atl_egg::semantics::numerics::inner_product;
use atl_egg::semantics::value::{random_inputs, random_value, Inputs, Sizes, Value};
use atl_egg::Symbol;
use atl_egg::{parse, parse_fn};
use std::collections::HashMap;

const QUAD: &str = "
(fn quad ((x (tensor n R)) (a (tensor n n R)) (w (tensor n R)))
  (+ (sum i n (sum j n (* (get x i) (* (get (get a i) j) (get x j)))))
     (sum i n (* (get w i) (sin (get x i))))))";

const RESID: &str = "
(fn resid ((x (tensor n R)) (a (tensor m n R)))
  (gen i m (tanh (sum j n (* (get (get a i) j) (get x j))))))";

fn sizes(pairs: &[(&str, i64)]) -> Sizes {
    let mut s = Sizes::default();
    for (k, v) in pairs {
        s.insert(Symbol::from(*k), *v);
    }
    s
}

fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Real(x) => vec![*x],
        Value::Zero => vec![0.0],
        Value::Tensor(xs) => xs.iter().flat_map(flat).collect(),
        Value::Pair(a, b) => [flat(a), flat(b)].concat(),
    }
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-9 * (1.0 + w.abs()),
            "{what}: {got:?} vs {want:?}"
        );
    }
}

/// The callee's derivative along `v` (one tangent, of parameter `x`) by
/// dual numbers.
fn dual_along(f: &Program, inputs: &Inputs, x: &str, v: Value) -> Value {
    let tangents = HashMap::from([(Symbol::from(x), v)]);
    dual_jvp(f, inputs, &tangents).expect("dual numbers").1
}

/// A program's inputs with more values added.
fn with(inputs: &Inputs, more: &[(&str, Value)]) -> Inputs {
    let mut out = inputs.clone();
    for (k, v) in more {
        out.values.insert(Symbol::from(*k), v.clone());
    }
    out
}

fn unit(n: usize, k: usize) -> Value {
    Value::Tensor(std::rc::Rc::new(
        (0..n)
            .map(|i| Value::Real(f64::from(u8::from(i == k))))
            .collect(),
    ))
}

fn random(t: &str, s: &Sizes, rng: &mut Rng) -> Value {
    let ty = parse(&format!("(fn t ((v {t})) v)")).unwrap().ret;
    random_value(&ty, s, &mut || rng.unit()).unwrap()
}

#[test]
fn grad_form_is_the_gradient_by_dual_numbers() {
    let text = format!(
        "{QUAD}
        (fn g ((x (tensor n R)) (a (tensor n n R)) (w (tensor n R)))
          (grad quad (wrt x) x a w))"
    );
    let (f, g) = (parse_fn(&text, "quad").unwrap(), parse(&text).unwrap());
    let s = sizes(&[("n", 5)]);
    let mut rng = Rng::new(11);
    let inputs = random_inputs(&f, &s, &mut rng).unwrap();
    let got = flat(&evaluate(&g, &inputs).unwrap());
    let want: Vec<f64> = (0..5)
        .map(|k| flat(&dual_along(&f, &inputs, "x", unit(5, k)))[0])
        .collect();
    assert_close(&got, &want, "grad form");
}

#[test]
fn jvp_and_vjp_forms_are_the_derivatives_by_dual_numbers() {
    let text = format!(
        "{RESID}
        (fn jv ((x (tensor n R)) (a (tensor m n R)) (v (tensor n R)))
          (jvp resid (wrt x) x a v))
        (fn vj ((x (tensor n R)) (a (tensor m n R)) (u (tensor m R)))
          (vjp resid (wrt x) x a u))
        (fn both ((x (tensor n R)) (a (tensor m n R)) (v (tensor n R)) (u (tensor m R)))
          (pair (jv x a v) (vj x a u)))"
    );
    let f = parse_fn(&text, "resid").unwrap();
    let (jv, vj) = (
        parse_fn(&text, "jv").unwrap(),
        parse_fn(&text, "vj").unwrap(),
    );
    let s = sizes(&[("n", 4), ("m", 3)]);
    let mut rng = Rng::new(5);
    for _ in 0..3 {
        let inputs = random_inputs(&f, &s, &mut rng).unwrap();
        let (v, u) = (
            random("(tensor n R)", &s, &mut rng),
            random("(tensor m R)", &s, &mut rng),
        );
        let jv_value = evaluate(&jv, &with(&inputs, &[("v", v.clone())])).unwrap();
        let exact = dual_along(&f, &inputs, "x", v.clone());
        assert_close(&flat(&jv_value), &flat(&exact), "jvp form");
        // <vjp(u), v> = <u, jvp(v)>
        let vj_value = evaluate(&vj, &with(&inputs, &[("u", u.clone())])).unwrap();
        let lhs = inner_product(&vj_value, &v);
        let rhs = inner_product(&u, &exact);
        assert_close(&[lhs], &[rhs], "vjp form");
    }
    // the file's last function calls the others: it means their pair
    assert!(parse(&text).is_ok());
}

#[test]
fn a_materialized_hessian_from_grad_then_jvp() {
    let text = format!(
        "{QUAD}
        (fn gradq ((x (tensor n R)) (a (tensor n n R)) (w (tensor n R)))
          (grad quad (wrt x) x a w))
        (fn hessian ((x (tensor n R)) (a (tensor n n R)) (w (tensor n R)))
          (gen k n (jvp gradq (wrt x) x a w (gen i n (iverson (== i k) 1.0)))))"
    );
    let h = parse(&text).unwrap();
    let f = parse_fn(&text, "quad").unwrap();
    let gradq = parse_fn(&text, "gradq").unwrap();
    let n = 4;
    let s = sizes(&[("n", n)]);
    let mut rng = Rng::new(3);
    let inputs = random_inputs(&f, &s, &mut rng).unwrap();
    let got = flat(&evaluate(&h, &inputs).unwrap());
    // column k: the dual-number derivative of the gradient along e_k
    let mut want = vec![];
    for k in 0..n as usize {
        want.extend(flat(&dual_along(&gradq, &inputs, "x", unit(n as usize, k))));
    }
    assert_close(&got, &want, "hessian");
    // and it is symmetric, A + Aᵀ plus the diagonal of -w sin x
    let h_at = |i: usize, j: usize| got[i * n as usize + j];
    for i in 0..n as usize {
        for j in 0..n as usize {
            assert!((h_at(i, j) - h_at(j, i)).abs() < 1e-12);
        }
    }
    // the hvp form along e_k is column k too
    let hv = parse(&format!(
        "{QUAD}
        (fn hcols ((x (tensor n R)) (a (tensor n n R)) (w (tensor n R)))
          (gen k n (hvp quad (wrt x) x a w (gen i n (iverson (== i k) 1.0)))))"
    ))
    .unwrap();
    assert_close(&flat(&evaluate(&hv, &inputs).unwrap()), &want, "hvp form");
}

#[test]
fn a_gauss_newton_product_is_jt_j_v() {
    let text = format!(
        "{RESID}
        (fn gn ((x (tensor n R)) (a (tensor m n R)) (v (tensor n R)))
          (vjp resid (wrt x) x a (jvp resid (wrt x) x a v)))"
    );
    let gn = parse(&text).unwrap();
    let f = parse_fn(&text, "resid").unwrap();
    let (n, m) = (4usize, 3usize);
    let s = sizes(&[("n", n as i64), ("m", m as i64)]);
    let mut rng = Rng::new(8);
    let inputs = random_inputs(&f, &s, &mut rng).unwrap();
    let v = random("(tensor n R)", &s, &mut rng);
    // J by dual numbers, one column per unit vector
    let cols: Vec<Vec<f64>> = (0..n)
        .map(|k| flat(&dual_along(&f, &inputs, "x", unit(n, k))))
        .collect();
    let vs = flat(&v);
    let jv: Vec<f64> = (0..m)
        .map(|i| (0..n).map(|k| cols[k][i] * vs[k]).sum())
        .collect();
    let want: Vec<f64> = (0..n)
        .map(|k| (0..m).map(|i| cols[k][i] * jv[i]).sum())
        .collect();
    let got = flat(&evaluate(&gn, &with(&inputs, &[("v", v)])).unwrap());
    assert_close(&got, &want, "Jᵀ(J v)");
}

#[test]
fn a_program_with_a_derivative_form_is_differentiated_again() {
    // g(x) = Σ_i (∂f/∂x_i)² with f(x) = Σ x_i³, so ∂g/∂x_k = 2·3x_k²·6x_k = 36 x_k³
    let text = "
        (fn cubes ((x (tensor n R))) (sum i n (* (get x i) (* (get x i) (get x i)))))
        (fn g ((x (tensor n R)))
          (let d (grad cubes x) (sum i n (* (get d i) (get d i)))))";
    let g = parse(text).unwrap();
    let dg = atl_egg::derive::grad(&g, &[], &atl_egg::egraph::Options::default()).unwrap();
    let s = sizes(&[("n", 3)]);
    let inputs = random_inputs(&g, &s, &mut Rng::new(2)).unwrap();
    let xs = flat(&inputs.values[&Symbol::from("x")]);
    let got = flat(&evaluate(&dg.program, &inputs).unwrap());
    let want: Vec<f64> = xs.iter().map(|x| 36.0 * x * x * x).collect();
    assert_close(&got, &want, "grad of a program with a grad form");
}

#[test]
fn the_default_wrt_is_every_real_parameter() {
    let text = "
        (fn f ((x R) (n size) (y (tensor n R))) (* x (sum i n (get y i))))
        (fn g ((x R) (n size) (y (tensor n R))) (grad f x n y))";
    let g = parse(text).unwrap();
    // the result is the pair (∂f/∂x, ∂f/∂y), as `atl-egg grad` gives it
    assert_eq!(g.ret.to_string(), "(pair R (tensor n R))");
}

fn error_of(text: &str) -> String {
    let e = parse(text).expect_err("an error");
    format!("{e}")
}

#[test]
fn bad_derivative_forms_are_located_errors() {
    let f = "(fn f ((x R) (n size)) (* x x))\n";
    let cases = [
        (
            "(fn g ((x R)) (grad h x))",
            "no function of this file is named 'h'",
        ),
        (
            "(fn g ((x R)) (grad f (wrt y) x 2))",
            "'f' has no parameter named 'y'",
        ),
        (
            "(fn g ((x R)) (grad f (wrt n) x 2))",
            "not a real-valued parameter",
        ),
        ("(fn g ((x R)) (grad f (wrt x x) x 2))", "named twice"),
        ("(fn g ((x R)) (grad f x))", "takes 2 arguments"),
        ("(fn g ((x R)) (grad))", "expected (grad FUNCTION"),
        ("(fn g ((x R)) (grad 3 x))", "expected (grad FUNCTION"),
    ];
    for (body, want) in cases {
        let msg = error_of(&format!("{f}{body}"));
        assert!(msg.contains(want), "{body}: {msg}");
        assert!(
            msg.starts_with("2:"),
            "{body}: not located on line 2: {msg}"
        );
    }
    let pairs = "(fn p ((x R)) (pair x x))\n(fn g ((x R)) (grad p x))";
    assert!(error_of(pairs).contains("needs a function returning R"));
    let recursive = "(fn g ((x R)) (grad g x))";
    assert!(error_of(recursive).contains("recursion"));
    let named = "(fn grad ((x R)) x)";
    assert!(
        parse(named).is_err(),
        "a function may not be named like a form"
    );
}
