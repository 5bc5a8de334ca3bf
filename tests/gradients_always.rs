//! `grad` always returns a correct gradient, and so do `vjp`, `jvp` and `hvp`.
//!
//! * programs that stress differentiation (a scalar `--wrt lam`, ridge
//!   regression with every `--wrt`, a two-line program with relations whose
//!   adjoint e-graph grows fast) get gradients equal to dual numbers;
//! * property: `grad` of random generator programs returning `R`, with
//!   respect to each real input in turn and all together, checked against
//!   dual numbers: `<grad f(x), v> = D f(x)[v]` along a random `v`, and its
//!   io-cost at most 4 times the function's with every size at 1, 2 and 3.
//!   `ATL_GRAD_CASES` sets the number of programs (default 40) and
//!   `ATL_GRAD_FIRST_SEED` the generator seed to start from (default 1), so
//!   that a long run can be split between processes; each failure is printed
//!   as it is found, and progress every 250 checks; the checks run on every
//!   core;
//! * property: `vjp` and `jvp` of random generator programs of every result
//!   type, with respect to each real input in turn and all together:
//!   `<vjp f(x)[w], v> = <w, D f(x)[v]>` and `<w, jvp f(x)[v]> = <w, D f(x)[v]>`
//!   along random `v` and `w`, `D` by dual numbers; for a real result also
//!   `<hvp f(x)[v], v> = <D (grad f)(x)[v], v>`. `ATL_DERIV_CASES` sets
//!   the number of programs (default 25), `ATL_GRAD_FIRST_SEED` the first seed.

use crate::common;

use atl_egg::derive;
use atl_egg::egraph::Options;
use atl_egg::front::ast::{ParamKind, Program, Type};
use atl_egg::front::parse_program;
use atl_egg::semantics::cost::io_cost;
use atl_egg::semantics::dual::jvp as dual_jvp;
use atl_egg::semantics::eval::evaluate;
use atl_egg::semantics::numerics::inner_product;
use atl_egg::semantics::value::{random_relation, random_value, Inputs, Sizes, Value};
use atl_egg::Symbol;
use common::values::unnest;
use common::{generate, random_inputs, GenConfig, Rng};
use std::collections::HashMap;
use std::time::Duration;
/// Seed 100419 of the property test: a class holding both `x` and `[q]·x`
/// can make `iverson-iverson` grow `p ∧ q`, `(p ∧ q) ∧ q`, ... without end
/// (100,000 e-nodes in 12 iterations) and another rule's search build a
/// vector of matches of gigabytes. Its gradient must be correct and its
/// adjoint e-graph stay small.
#[test]
fn nested_brackets_over_a_pair_stay_small() {
    let p = parse(
        "(fn f ((n size) (x (tensor 2 n R)) (y (tensor m R)) (v (tensor 3 R))
               (w (tensor n (pair R R))) (S (relation n)))
           (snd (iverson (S 5) (iverson (S 1) (get w -1)))))",
    );
    for wrt in [syms(&["w"]), syms(&["x", "y", "v", "w"])] {
        check_grad(&p, &wrt, 1).unwrap_or_else(|e| panic!("--wrt {wrt:?}: {e}"));
        let g = derive::grad(&p, &wrt, &opts()).unwrap();
        let adjoint = adjoint_phase(&g);
        assert!(adjoint.nodes < 1_000, "{} e-nodes", adjoint.nodes);
    }
}

/// The statistics of a gradient's differentiation e-graph.
fn adjoint_phase(g: &derive::Derived) -> &atl_egg::egraph::runner::PhaseStats {
    g.stats
        .phases
        .iter()
        .find(|ph| ph.phase.starts_with("differentiate"))
        .expect("a differentiation phase")
}

/// A bracket known false under a sum of a zero class: `iverson-out-of-sum`
/// moved `[false]` out of the class's sum over itself again and again
/// (`[false]·Σe`, `[false]·ΣΣe`, ...), so the adjoint e-graph never
/// saturated (500 iterations). It must saturate, and the gradient be right.
#[test]
fn a_false_bracket_under_a_zero_sum_saturates() {
    let p = parse(
        "(fn g ((x (tensor 2 R)) (S (relation n (- n 1))) (Rel (relation n)))
           (iverson (S (+ n 1) 0) (sum l 2 (sum jj 2 (iverson (Rel 1) (iverson (== l 2)
             (iverson (S (+ l 1) (+ (* 2 jj) 1)) (get x jj))))))))",
    );
    let wrt = syms(&["x"]);
    check_grad(&p, &wrt, 1).unwrap();
    let g = derive::grad(&p, &wrt, &opts()).unwrap();
    let adjoint = adjoint_phase(&g);
    assert_eq!(adjoint.stop_reason, "saturated", "{adjoint:?}");
    assert!(
        adjoint.iterations < 100,
        "{} iterations",
        adjoint.iterations
    );
}

fn opts() -> Options {
    Options {
        time_limit: Duration::from_secs(600),
        ..Default::default()
    }
}

fn real_inputs(p: &Program) -> Vec<Symbol> {
    p.params
        .iter()
        .filter(|q| matches!(q.kind, ParamKind::Real(_)))
        .map(|q| q.name)
        .collect()
}

/// A random direction for each `wrt` input of `p`, at `inputs`' sizes.
fn directions(
    p: &Program,
    wrt: &[Symbol],
    inputs: &Inputs,
    rng: &mut Rng,
) -> HashMap<Symbol, Value> {
    wrt.iter()
        .map(|x| {
            let ParamKind::Real(t) = &p.param(*x).unwrap().kind else {
                unreachable!("wrt inputs are real")
            };
            (
                *x,
                random_value(t, &inputs.sizes, &mut || rng.unit()).unwrap(),
            )
        })
        .collect()
}

/// `<value, v>` for a value of one part per `wrt` input (nested pairs).
fn along(value: &Value, wrt: &[Symbol], v: &HashMap<Symbol, Value>) -> f64 {
    unnest(value, wrt.len())
        .iter()
        .zip(wrt)
        .map(|(part, x)| inner_product(part, &v[x]))
        .sum()
}

/// `inputs` with `names` bound to the directions of `wrt`, in order.
fn with_directions(
    inputs: &Inputs,
    names: &[Symbol],
    wrt: &[Symbol],
    v: &HashMap<Symbol, Value>,
) -> Inputs {
    let mut out = inputs.clone();
    for (d, x) in names.iter().zip(wrt) {
        out.values.insert(*d, v[x].clone());
    }
    out
}

/// Equal within the tests' relative tolerance.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-7 * (1.0 + a.abs().max(b.abs()))
}

/// The names of the parameters a derivative program adds after `p`'s.
fn added_params(p: &Program, d: &Program) -> Vec<Symbol> {
    d.params[p.params.len()..].iter().map(|q| q.name).collect()
}

/// Check `grad` of `p` with respect to `wrt` against dual numbers at a few
/// random points; an error message on failure.
fn check_grad(p: &Program, wrt: &[Symbol], seed: u64) -> Result<(), String> {
    let g = derive::grad(p, wrt, &opts()).map_err(|e| format!("grad failed: {e}"))?;
    bounded_at_small_sizes(p, &g.program, seed)?;
    let mut rng = Rng::new(seed);
    for _ in 0..2 {
        let inputs = random_inputs(p, &mut rng, 1, 4, 0.5);
        let gv = match evaluate(&g.program, &inputs) {
            Ok(v) => v,
            Err(e) => return Err(format!("the gradient does not evaluate: {e}")),
        };
        let v = directions(p, wrt, &inputs, &mut rng);
        let lhs = along(&gv, wrt, &v);
        let Ok((y, t)) = dual_jvp(p, &inputs, &v) else {
            continue;
        };
        if !matches!(y, Value::Real(x) if x.is_finite()) && !matches!(y, Value::Zero) {
            continue;
        }
        let rhs = match t {
            Value::Real(x) => x,
            Value::Zero => 0.0,
            other => return Err(format!("tangent {other:?}")),
        };
        if !rhs.is_finite() || !lhs.is_finite() && rhs.is_finite() && lhs.is_nan() {
            continue;
        }
        if !close(lhs, rhs) {
            return Err(format!(
                "<grad, v> = {lhs} but jvp = {rhs} at {:?}\n{}",
                inputs.sizes,
                atl_egg::backend::sexp::program_to_string(&g.program)
            ));
        }
    }
    Ok(())
}

/// The cheap-gradient bound (io-cost at most 4 times the function's) with
/// every size at 1, 2 and 3 (relations half full), where the function is a
/// handful of operations and a fixed cost of its gradient shows; sizes at
/// which the program has no value (a dimension below zero) are skipped.
fn bounded_at_small_sizes(p: &Program, g: &Program, seed: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    for n in 1..=3 {
        let sizes: Sizes = p.sizes.iter().map(|s| (*s, n)).collect();
        let mut relations = HashMap::new();
        for q in &p.params {
            if let ParamKind::Relation(dims) = &q.kind {
                let Ok(r) = random_relation(dims, &sizes, 0.5, &mut || rng.unit()) else {
                    return Ok(());
                };
                relations.insert(q.name, r);
            }
        }
        let (Ok(cf), Ok(cg)) = (
            io_cost(p, &sizes, &relations),
            io_cost(g, &sizes, &relations),
        ) else {
            continue;
        };
        if cg > 4 * cf.max(1) {
            return Err(format!(
                "io-cost {cg} of the gradient, {cf} of f at size {n}: above 4 times\n{}",
                atl_egg::backend::sexp::program_to_string(g)
            ));
        }
    }
    Ok(())
}

fn parse(text: &str) -> Program {
    parse_program(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

fn syms(names: &[&str]) -> Vec<Symbol> {
    names.iter().map(|n| Symbol::from(*n)).collect()
}

#[test]
fn scalar_ridge_and_relation_programs_have_correct_gradients() {
    let lam =
        parse("(fn f ((w (tensor n R)) (lam R)) (let r (- (exp w)) (* lam (sum i n (get r i)))))");
    let ridge = parse(
        "(fn ridge ((X (tensor n d R)) (w (tensor d R)) (y (tensor n R)) (lam R))
           (let r (- (gen i n (sum j d (* (get X i j) (get w j)))) y)
             (+ (sum i n (* (get r i) (get r i))) (* lam (sum j d (* (get w j) (get w j)))))))",
    );
    let rel = parse(
        "(fn g ((x (tensor 2 R)) (S (relation n (- n 1))) (Rel (relation n)))
           (iverson (S (+ n 1) 0) (sum l 2 (sum jj 2 (iverson (Rel 1) (iverson (== l 2)
             (iverson (S (+ l 1) (+ (* 2 jj) 1)) (get x jj))))))))",
    );
    let cases: Vec<(&Program, Vec<Symbol>)> = vec![
        (&lam, syms(&["lam"])),
        (&lam, syms(&["w", "lam"])),
        (&ridge, syms(&["lam"])),
        (&ridge, syms(&["w", "lam"])),
        (&ridge, syms(&["X", "w", "y", "lam"])),
        (&rel, syms(&["x"])),
    ];
    let mut failures = vec![];
    for (k, (p, wrt)) in cases.into_iter().enumerate() {
        if let Err(e) = check_grad(p, &wrt, k as u64) {
            failures.push(format!("{} --wrt {wrt:?}: {e}", p.name));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Gradients through `minimum` and `maximum` of a compound body (two
/// programs the random campaign found above the bound at sizes 1 and 2):
/// the body is reduced as a named tensor, so the one-hot selection and the
/// body's derivative are computed once, not once per input the body reads.
#[test]
fn gradients_through_minimum_and_maximum_stay_within_the_bound() {
    let minimum = parse(
        "(fn f ((x (tensor 2 n R)) (S (relation n)))
           (min (minimum i1 (+ 0 1) (min (get x i1 (* 2 i1)) (sum i2 n (get (get x 1) (* 2 i2)))))
                (get (get (gen i3 n (gen i4 0 (get (get x 1) (* 2 i4)))) 0) 0)))",
    );
    let maximum = parse(
        "(fn f ((x (tensor (+ n 1) R)) (y (tensor 2 n R)) (v (tensor (+ n 1) R)) (S (relation n)) (T (relation n m)))
           (maximum i1 (+ m 1) (+ (- (get x i1) (min (get v i1) (get x (+ i1 i1))))
             (get (gen i2 2 (get v (- i2 1))) (- (- n 1) i1))
             (+ (get x i1) (get x (- i1 1)) 1.25 (get v i1))
             (pow (+ 2 (tanh (get y (- i1 1) (+ i1 i1)))) 0.5))))",
    );
    let mut failures = vec![];
    for (seed, p) in [(770260, &minimum), (771042, &maximum)] {
        for wrt in [syms(&["x"]), real_inputs(p)] {
            if let Err(e) = check_grad(p, &wrt, seed) {
                failures.push(format!("seed {seed} --wrt {wrt:?}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A property over random generator programs: `check` of each program with
/// real inputs (returning `R` only, with `real_result`) with respect to
/// each real input in turn and all together. `cases_var` sets the number of
/// programs (else `default_cases`), `ATL_GRAD_FIRST_SEED` the first seed;
/// the checks run on every core, failures are printed as found, progress
/// every 250 checks.
fn random_programs(
    cases_var: &str,
    default_cases: u64,
    real_result: bool,
    check: fn(&Program, &[Symbol], u64) -> Result<(), String>,
) {
    let env = |name: &str, default: u64| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let cases = env(cases_var, default_cases);
    let first = env("ATL_GRAD_FIRST_SEED", 1);
    let cfg = GenConfig::default();
    // the programs first (generating is cheap), then their checks on every
    // core
    let mut programs = vec![];
    let mut checked: u64 = 0;
    let mut seed = first - 1;
    while checked < cases && seed < first + cases * 20 {
        seed += 1;
        let g = generate(seed, &cfg);
        let Ok(p) = parse_program(g.sugar.as_bytes()) else {
            continue;
        };
        let inputs = real_inputs(&p);
        if inputs.is_empty() || real_result && p.ret != Type::Real {
            continue;
        }
        checked += 1;
        let mut choices: Vec<Vec<Symbol>> = inputs.iter().map(|x| vec![*x]).collect();
        if inputs.len() > 1 {
            choices.push(inputs.clone());
        }
        for wrt in choices {
            programs.push((seed, p.clone(), wrt, g.sugar.clone()));
        }
    }
    assert_eq!(checked, cases, "the generator gave too few programs");
    let done = std::sync::atomic::AtomicUsize::new(0);
    let failures: Vec<String> = common::par::par_map(&programs, |(seed, p, wrt, sugar)| {
        let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if k.is_multiple_of(250) {
            eprintln!("checked {k} of {} (program, --wrt) pairs", programs.len());
        }
        check(p, wrt, *seed).err().map(|e| {
            let failure = format!("seed {seed} --wrt {wrt:?}: {e}\n{sugar}");
            eprintln!("FAILED {failure}");
            failure
        })
    })
    .into_iter()
    .flatten()
    .collect();
    eprintln!("checked {cases} random programs (seeds {first}..={seed})");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn gradients_of_random_programs_match_dual_numbers() {
    random_programs("ATL_GRAD_CASES", 40, true, check_grad);
}

/// `vjp` and `jvp` of `p` with respect to `wrt` (and `hvp` when `p` returns
/// a real), checked against dual numbers along random directions; an error
/// message on failure.
fn check_vjp_jvp(p: &Program, wrt: &[Symbol], seed: u64) -> Result<(), String> {
    let vjp = derive::vjp(p, wrt, &opts()).map_err(|e| format!("vjp failed: {e}"))?;
    let jvp = derive::jvp(p, wrt, &opts()).map_err(|e| format!("jvp failed: {e}"))?;
    let cotangent = vjp.program.params.last().expect("a cotangent").name;
    let tangents = added_params(p, &jvp.program);
    let second = match p.ret {
        Type::Real => Some((
            derive::hvp(p, wrt, &opts()).map_err(|e| format!("hvp failed: {e}"))?,
            derive::grad(p, wrt, &opts()).map_err(|e| format!("grad failed: {e}"))?,
        )),
        _ => None,
    };
    let mut rng = Rng::new(seed);
    for _ in 0..2 {
        let inputs = random_inputs(p, &mut rng, 1, 4, 0.5);
        let v = directions(p, wrt, &inputs, &mut rng);
        let w = random_value(&p.ret, &inputs.sizes, &mut || rng.unit()).unwrap();
        let Ok((y, t)) = dual_jvp(p, &inputs, &v) else {
            continue;
        };
        let want = inner_product(&w, &t);
        if !want.is_finite() || !inner_product(&y, &y).is_finite() {
            continue;
        }
        // vjp: <vjp f(x)[w], v>
        let mut with_w = inputs.clone();
        with_w.values.insert(cotangent, w.clone());
        let g =
            evaluate(&vjp.program, &with_w).map_err(|e| format!("vjp does not evaluate: {e}"))?;
        let got = along(&g, wrt, &v);
        if !close(got, want) {
            return Err(format!(
                "<vjp, v> = {got} but <w, jvp> = {want}\n{}",
                atl_egg::backend::sexp::program_to_string(&vjp.program)
            ));
        }
        // jvp: <w, jvp f(x)[v]>
        let with_v = with_directions(&inputs, &tangents, wrt, &v);
        let j =
            evaluate(&jvp.program, &with_v).map_err(|e| format!("jvp does not evaluate: {e}"))?;
        let got = inner_product(&w, &j);
        if !close(got, want) {
            return Err(format!(
                "<w, jvp> = {got} but dual numbers give {want}\n{}",
                atl_egg::backend::sexp::program_to_string(&jvp.program)
            ));
        }
        // hvp (a real result): <hvp f(x)[v], v> = <D (grad f)(x)[v], v>
        if let Some((hvp, grad)) = &second {
            let with_d = with_directions(&inputs, &added_params(p, &hvp.program), wrt, &v);
            let h = evaluate(&hvp.program, &with_d)
                .map_err(|e| format!("hvp does not evaluate: {e}"))?;
            let Ok((_, dg)) = dual_jvp(&grad.program, &inputs, &v) else {
                continue;
            };
            let (got, want) = (along(&h, wrt, &v), along(&dg, wrt, &v));
            if want.is_finite() && !close(got, want) {
                return Err(format!(
                    "<hvp, v> = {got} but dual numbers on the gradient give {want}\n{}",
                    atl_egg::backend::sexp::program_to_string(&hvp.program)
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn vjps_jvps_and_hvps_of_random_programs_match_dual_numbers() {
    random_programs("ATL_DERIV_CASES", 25, false, check_vjp_jvp);
}
