//! Derivatives checked against exact forward-mode values (dual numbers), on
//! every corpus program:
//! * `grad`: `<grad f(x), v> = jvp(x, v)` along random directions;
//! * `jvp`: the program's output equals the dual-number tangent;
//! * `vjp`: `<vjp(x, w), v> = <w, jvp(x, v)>`;
//! * `hvp`: equals the dual-number derivative of the gradient program along
//!   `v` (exact), and a central finite difference of gradients (loosely);
//! * every derived program prints with readable names that are C
//!   identifiers (`common::printed`);
//! * compiled code of the program, its optimized form, `grad`, `vjp` and
//!   `jvp` equals the evaluator, and executes the operations the cost model
//!   counts (`common::run_check`; skipped without a C compiler);
//! * every entry of the black-box derivative table equals the evaluator's
//!   derivative of that black box, and every forward rule is exercised.
//! * no phase of these commands stops at a default limit (no limit warning).
//!
//! The corpus's derivatives are computed once, on every core, for all the
//! tests of this file ([`derived`]).

use crate::common;

use atl_egg::corpus::{random_inputs, CorpusProgram};
use atl_egg::derive;
use atl_egg::front::ast::{Expr, Func, ParamKind, Program, Type};
use atl_egg::rng::Rng;
use atl_egg::semantics::dual::jvp as dual_jvp;
use atl_egg::semantics::eval::evaluate;
use atl_egg::semantics::numerics::inner_product;
use atl_egg::semantics::value::{random_value, Inputs, Sizes, Value};
use atl_egg::Symbol;
use common::derived::{derived, opts, Derived};
use common::values::unnest;
use std::collections::HashMap;
use std::path::Path;

/// The phases of `stats` that the command line warns about: those stopped
/// at a node, iteration or time limit, except the optimizer's second look
/// at a small program as a whole (`(whole, ...)`) and the differentiation
/// e-graph's fixed limits (the same choice as `limit_warnings` of the
/// command line, `src/cli_stats.rs`).
fn limited_phases(kind: &str, name: &str, stats: &atl_egg::optimizer::Stats) -> Vec<String> {
    stats
        .phases
        .iter()
        .filter(|p| {
            let r = p.stop_reason.as_str();
            ["node limit", "iteration limit", "time limit"]
                .iter()
                .any(|l| r.starts_with(l))
                && !p.phase.contains("(whole,")
                && !p.phase.starts_with("differentiat")
        })
        .map(|p| format!("{kind} {name}: the {} phase ({})", p.phase, p.stop_reason))
        .collect()
}

/// Under default limits no phase of `optimize`, `grad`, `jvp`, `vjp` or
/// `hvp` of a corpus program stops at a limit: every command prints its
/// result without a limit warning.
#[test]
fn no_corpus_derivative_stops_at_a_limit() {
    let limited: Vec<String> = derived()
        .iter()
        .flat_map(|d| {
            d.stats
                .iter()
                .flat_map(|(kind, stats)| limited_phases(kind, &d.c.name, stats))
        })
        .collect();
    assert!(
        limited.is_empty(),
        "phases stopped at a default limit:\n{limited:#?}"
    );
}

fn type_of(p: &Program, x: Symbol) -> Type {
    match &p.param(x).unwrap().kind {
        ParamKind::Real(t) => t.clone(),
        _ => unreachable!(),
    }
}

fn close(a: f64, b: f64, scale: f64, rtol: f64) -> bool {
    (a - b).abs() <= rtol * scale.max(a.abs()).max(b.abs()) + 1e-12 || (a.is_nan() && b.is_nan())
}

/// The smallest two size sets of a program (derivative checks stay fast).
fn small_sets(c: &CorpusProgram) -> Vec<Sizes> {
    c.size_sets.iter().take(2).cloned().collect()
}

fn directions(p: &Program, wrt: &[Symbol], sizes: &Sizes, rng: &mut Rng) -> HashMap<Symbol, Value> {
    wrt.iter()
        .map(|w| {
            (
                *w,
                random_value(&type_of(p, *w), sizes, &mut || rng.unit()).unwrap(),
            )
        })
        .collect()
}

fn with_extra(inputs: &Inputs, extra: &[(Symbol, Value)]) -> Inputs {
    let mut i = inputs.clone();
    for (k, v) in extra {
        i.values.insert(*k, v.clone());
    }
    i
}

#[test]
fn gradients_match_forward_mode() {
    let mut failures = vec![];
    for Derived { c, wrt, grad, .. } in derived() {
        let Some(g) = grad else { continue };
        let mut rng = Rng::new(c.seed);
        for sizes in small_sets(c) {
            let inputs = random_inputs(&c.program, &sizes, &mut rng).unwrap();
            let gv = evaluate(g, &inputs).unwrap();
            let gs = unnest(&gv, wrt.len());
            for _ in 0..2 {
                let v = directions(&c.program, wrt, &sizes, &mut rng);
                let lhs: f64 = gs
                    .iter()
                    .zip(wrt)
                    .map(|(gi, w)| inner_product(gi, &v[w]))
                    .sum();
                let (_, t) = dual_jvp(&c.program, &inputs, &v).unwrap();
                let rhs = match t {
                    Value::Real(x) => x,
                    Value::Zero => 0.0,
                    other => panic!("{other:?}"),
                };
                if !close(lhs, rhs, 1.0, 1e-8) {
                    failures.push(format!("{}: <grad, v> = {lhs} but jvp = {rhs}", c.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Real(x) => vec![*x],
        Value::Zero => vec![],
        Value::Pair(a, b) => {
            let mut o = flat(a);
            o.extend(flat(b));
            o
        }
        Value::Tensor(xs) => xs.iter().flat_map(flat).collect(),
    }
}

/// Compare values that may hold lazy zeros: the squared norm of the
/// difference against the larger squared norm. Values of the same shape are
/// subtracted entry by entry; where a lazy zero makes the shapes differ, the
/// difference's norm comes from inner products (`aa + bb - 2ab`, which
/// cancels: its rounding error grows with `aa`, so it is the fallback only).
fn same_value(a: &Value, b: &Value, rtol: f64) -> bool {
    let aa = inner_product(a, a);
    let bb = inner_product(b, b);
    let (fa, fb) = (flat(a), flat(b));
    let d2 = if fa.len() == fb.len() {
        fa.iter().zip(&fb).map(|(x, y)| (x - y) * (x - y)).sum()
    } else {
        aa + bb - 2.0 * inner_product(a, b)
    };
    d2 <= rtol * rtol * aa.max(bb).max(1e-300) * 4.0 + 1e-20
        || (flat(a).is_empty() && flat(b).iter().all(|x| *x == 0.0))
        || (flat(b).is_empty() && flat(a).iter().all(|x| *x == 0.0))
}

#[test]
fn jvps_match_forward_mode() {
    let mut failures = vec![];
    for Derived { c, wrt, jvp: j, .. } in derived() {
        let tangent_names: Vec<Symbol> = j.params[c.program.params.len()..]
            .iter()
            .map(|p| p.name)
            .collect();
        let mut rng = Rng::new(c.seed + 1);
        for sizes in small_sets(c) {
            let inputs = random_inputs(&c.program, &sizes, &mut rng).unwrap();
            let v = directions(&c.program, wrt, &sizes, &mut rng);
            let extra: Vec<(Symbol, Value)> = tangent_names
                .iter()
                .zip(wrt)
                .map(|(t, w)| (*t, v[w].clone()))
                .collect();
            let got = evaluate(j, &with_extra(&inputs, &extra)).unwrap();
            let (_, want) = dual_jvp(&c.program, &inputs, &v).unwrap();
            if !same_value(&got, &want, 1e-8) {
                failures.push(format!("{} at {sizes:?}: jvp {got:?} != {want:?}", c.name));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn vjps_satisfy_the_adjoint_identity() {
    let mut failures = vec![];
    for Derived { c, wrt, vjp: j, .. } in derived() {
        let ct = j.params.last().unwrap().name;
        let mut rng = Rng::new(c.seed + 2);
        for sizes in small_sets(c) {
            let inputs = random_inputs(&c.program, &sizes, &mut rng).unwrap();
            let w = random_value(&c.program.ret, &sizes, &mut || rng.unit()).unwrap();
            let v = directions(&c.program, wrt, &sizes, &mut rng);
            let g = evaluate(j, &with_extra(&inputs, &[(ct, w.clone())])).unwrap();
            let gs = unnest(&g, wrt.len());
            let lhs: f64 = gs
                .iter()
                .zip(wrt)
                .map(|(gi, x)| inner_product(gi, &v[x]))
                .sum();
            let (_, t) = dual_jvp(&c.program, &inputs, &v).unwrap();
            let rhs = inner_product(&w, &t);
            if !close(lhs, rhs, 1.0, 1e-8) {
                failures.push(format!("{}: <vjp, v> = {lhs}, <w, jvp> = {rhs}", c.name));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn uses_kinks(p: &Program) -> bool {
    p.body.any(&mut |e| {
        matches!(e, Expr::Call(f, _) if ["relu", "step"].contains(&f.name()))
            || matches!(e, Expr::MaxMin(..) | Expr::Reduce(..))
    })
}

#[test]
fn hvps_match_dual_numbers_and_finite_differences() {
    let mut failures = vec![];
    for d in derived() {
        let (Derived { c, wrt, .. }, Some(g), Some(h)) = (d, &d.grad, &d.hvp) else {
            continue;
        };
        let dirs: Vec<Symbol> = h.params[c.program.params.len()..]
            .iter()
            .map(|p| p.name)
            .collect();
        let mut rng = Rng::new(c.seed + 3);
        let sizes = c.size_sets[0].clone();
        let inputs = random_inputs(&c.program, &sizes, &mut rng).unwrap();
        let v = directions(&c.program, wrt, &sizes, &mut rng);
        let extra: Vec<(Symbol, Value)> = dirs
            .iter()
            .zip(wrt)
            .map(|(d, w)| (*d, v[w].clone()))
            .collect();
        let got = evaluate(h, &with_extra(&inputs, &extra)).unwrap();
        // exact: forward mode through the gradient program
        let (_, want) = dual_jvp(g, &inputs, &v).unwrap();
        if !same_value(&got, &want, 1e-8) {
            failures.push(format!("{}: hvp {got:?} != dual {want:?}", c.name));
        }
        // loose: central differences of gradients (smooth programs only)
        if !uses_kinks(&c.program) {
            let h_step = 1e-5;
            let shifted = |s: f64| {
                let mut i = inputs.clone();
                for w in wrt {
                    let x = flat(&i.values[w]);
                    let d = flat(&v[w]);
                    let moved: Vec<f64> = x.iter().zip(&d).map(|(a, b)| a + s * b).collect();
                    i.values
                        .insert(*w, rebuild(&i.values[w], &mut moved.into_iter()));
                }
                flat(&evaluate(g, &i).unwrap())
            };
            let (plus, minus) = (shifted(h_step), shifted(-h_step));
            let fd: Vec<f64> = plus
                .iter()
                .zip(&minus)
                .map(|(a, b)| (a - b) / (2.0 * h_step))
                .collect();
            let got_flat = flat(&got);
            if got_flat.len() == fd.len() {
                let scale = fd
                    .iter()
                    .chain(&got_flat)
                    .fold(1.0f64, |m, x| m.max(x.abs()));
                if got_flat
                    .iter()
                    .zip(&fd)
                    .any(|(a, b)| (a - b).abs() > 1e-4 * scale)
                {
                    failures.push(format!("{}: hvp differs from finite differences", c.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Every derivative of the corpus prints with readable names that are C
/// identifiers (the optimized programs and gradients are checked with the
/// snapshots).
#[test]
fn derived_programs_print_readable_c_names() {
    let mut bad = vec![];
    for d in derived() {
        let name = &d.c.name;
        let mut check = |what: &str, p: &Program| {
            bad.extend(common::printed::check_printed(&format!("{name} {what}"), p))
        };
        check("jvp", &d.jvp);
        check("vjp", &d.vjp);
        if let Some(h) = &d.hvp {
            check("hvp", h);
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// One answer per input, whatever the machine's load: the command line's
/// `hvp` of every corpus program returning `R` (one in three without
/// `ATL_TEST_FULL=1`), run on every core beside a busy thread, prints the
/// program derived above (byte for byte) and warns
/// about nothing. `optimize` and `grad` are
/// compared the same way in tests/snapshots.rs.
#[test]
fn hvp_on_the_command_line_prints_the_same_under_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let derived = derived();
    let sample = common::sampled("hvp under load", derived, 3);
    let load = common::load::Load::start();
    let differ = common::par::par_map(&sample, |d| {
        let h = d.hvp.as_ref()?;
        let path = dir.join(format!("{}.atl", d.c.name));
        let wrt: Vec<String> = d.c.wrt.iter().map(|w| w.to_string()).collect();
        let out = common::cli::run("hvp", &path, &wrt);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let expected = atl_egg::print(h);
        let what = format!("hvp {}", path.display());
        if !out.status.success() || !stderr.is_empty() {
            return Some(format!("{what}: exit {}, stderr:\n{stderr}", out.status));
        }
        (out.stdout != expected.as_bytes()).then(|| {
            format!(
                "{what}: printed\n{}\nnot\n{expected}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    });
    drop(load);
    let differ: Vec<String> = differ.into_iter().flatten().collect();
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}

/// Compiled code of every corpus program, its optimized form and its
/// derivatives (`hvp` aside) runs as evaluated at every size set (the
/// programs on every core).
#[test]
fn corpus_and_derivatives_run_compiled_as_evaluated() {
    use common::run_check::{check, have_cc, par_checks, report_worst_overhead};
    if !have_cc() {
        return;
    }
    let failures = par_checks(derived(), |d| {
        let c = &d.c;
        let mut variants = vec![("f", &c.program), ("optimize", &d.optimize)];
        if let Some(g) = &d.grad {
            variants.push(("grad", g));
        }
        variants.extend([("vjp", &d.vjp), ("jvp", &d.jvp)]);
        let mut failures = vec![];
        for (what, prog) in variants {
            for sizes in &c.size_sets {
                let mut rng = Rng::new(c.seed);
                let inputs = random_inputs(prog, sizes, &mut rng).expect("inputs");
                if let Err(e) = check(prog, &inputs, &format!("{} {what} {sizes:?}", c.name)) {
                    failures.push(e);
                }
            }
        }
        failures
    });
    report_worst_overhead();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Replace the reals of a value (same shape) from an iterator.
fn rebuild(v: &Value, xs: &mut impl Iterator<Item = f64>) -> Value {
    match v {
        Value::Real(_) => Value::Real(xs.next().unwrap()),
        Value::Zero => Value::Zero,
        Value::Pair(a, b) => Value::Pair(
            std::rc::Rc::new(rebuild(a, xs)),
            std::rc::Rc::new(rebuild(b, xs)),
        ),
        Value::Tensor(ts) => Value::Tensor(std::rc::Rc::new(
            ts.iter().map(|t| rebuild(t, xs)).collect(),
        )),
    }
}

#[test]
fn blackbox_table_matches_the_evaluator() {
    use atl_egg::front::ast::Real;
    let table = atl_egg::egraph::rules::derivatives::derivative_table();
    let mut seen = vec![];
    for fun in table.keys() {
        let name = fun.name();
        seen.push(name);
        // 2.5, or 2 for a box of integer parameters (polygamma's order)
        let k = [2.5, 2.0].into_iter().find(|&k| {
            fun.at(Some(Real(k)))
                .is_some_and(|f| (f.spec().check_param)(k).is_ok())
        });
        let f = fun
            .at(fun.takes_exponent().then(|| Real(k.expect("a parameter"))))
            .expect("the arity of the black box");
        let src = match f.exponent() {
            Some(k) => format!("(fn f ((x R)) ({name} x {k}))"),
            None => format!("(fn f ((x R)) ({name} x))"),
        };
        let prog = atl_egg::front::parse_program(src.as_bytes()).unwrap();
        let j = derive::jvp(&prog, &[], &opts()).unwrap();
        for x in [0.3, 0.7, 1.3, 2.1] {
            let mut inputs = Inputs::new(Sizes::default());
            inputs.values.insert(Symbol::from("x"), Value::Real(x));
            inputs
                .values
                .insert(j.program.params[1].name, Value::Real(1.0));
            let got = flat(&evaluate(&j.program, &inputs).unwrap())
                .first()
                .copied()
                .unwrap_or(0.0);
            let want = f.derivative(x, f.apply(x));
            assert!(
                close(got, want, 1.0, 1e-9),
                "{name} at {x}: {got} vs {want}"
            );
        }
    }
    for f in Func::names() {
        assert!(seen.contains(&f), "no derivative entry for {f}");
    }
}

/// Every forward rule has a program here whose derivative uses it, checked
/// against dual numbers.
#[test]
fn forward_rules_are_each_exercised() {
    let programs = [
        ("d-var", "(fn f ((x R) (y R)) (* x y))"),
        ("d-const", "(fn f ((x R)) (+ x 3.0))"),
        ("d-add", "(fn f ((x R)) (+ x x))"),
        ("d-mul", "(fn f ((x R)) (* x x))"),
        ("d-pair", "(fn f ((x R)) (pair x (* x x)))"),
        ("d-proj", "(fn f ((p (pair R R))) (* (fst p) (snd p)))"),
        (
            "d-gen",
            "(fn f ((x (tensor n R))) (gen i n (* (get x i) (get x i))))",
        ),
        (
            "d-sum",
            "(fn f ((x (tensor n R))) (sum i n (* (get x i) (get x i))))",
        ),
        ("d-get", "(fn f ((x (tensor n R))) (get x 1))"),
        (
            "d-iverson",
            "(fn f ((x (tensor n R))) (sum i n (iverson (< i 2) (exp (get x i)))))",
        ),
        ("d-let", "(fn f ((x R)) (let y (sin x) (* y y)))"),
        ("d-max", "(fn f ((x R) (y R)) (max (* x y) (sin y)))"),
        ("d-min", "(fn f ((x R) (y R)) (min (* x y) (sin y)))"),
        (
            "d-maximum",
            "(fn f ((x (tensor n R))) (maximum i n (sin (get x i))))",
        ),
        (
            "d-minimum",
            "(fn f ((x (tensor n R))) (* 2 (minimum i n (* (get x i) (get x i)))))",
        ),
        (
            "d-arg-argmax",
            "(fn f ((x (tensor n R))) (sum j n (* (get (argmax i n (get x i)) j) (get x j))))",
        ),
        (
            "d-arg-argmin",
            "(fn f ((x (tensor n R))) (sum j n (* (get (argmin i n (get x i)) j) (get x j))))",
        ),
        (
            "d-real",
            "(fn f ((x (tensor n R))) (sum i n (* (real i) (get x i))))",
        ),
    ];
    let specs = atl_egg::egraph::rules::all_specs();
    for s in specs.iter().filter(|s| s.file == "forward.rules") {
        assert!(
            programs.iter().any(|(n, _)| s.name.starts_with(n)),
            "forward rule {} has no exercising program",
            s.name
        );
    }
    let mut rng = Rng::new(99);
    for (rule, src) in programs {
        let prog = atl_egg::front::parse_program(src.as_bytes()).unwrap();
        let wrt: Vec<Symbol> = prog.real_params().map(|(n, _)| n).collect();
        let j = derive::jvp(&prog, &wrt, &opts()).unwrap();
        let sizes: Sizes = prog.sizes.iter().map(|s| (*s, 4)).collect();
        let inputs = random_inputs(&prog, &sizes, &mut rng).unwrap();
        let v = directions(&prog, &wrt, &sizes, &mut rng);
        let extra: Vec<(Symbol, Value)> = j.program.params[prog.params.len()..]
            .iter()
            .zip(&wrt)
            .map(|(t, w)| (t.name, v[w].clone()))
            .collect();
        let got = evaluate(&j.program, &with_extra(&inputs, &extra)).unwrap();
        let (_, want) = dual_jvp(&prog, &inputs, &v).unwrap();
        assert!(
            same_value(&got, &want, 1e-10),
            "{rule}: {got:?} vs {want:?}"
        );
    }
}

/// `max` and `min` at ties, signed zeros and infinities, and `(real a)`:
/// every entry of the gradient (and the jvp, and the hvp) equals the
/// dual-number derivative exactly: the derivative of the operand selected,
/// ties to the first.
#[test]
fn max_and_min_derivatives_match_dual_numbers_at_ties() {
    let programs = [
        "(fn f ((a R) (b R)) (max a b))",
        "(fn f ((a R) (b R)) (min a b))",
        "(fn f ((a R) (b R)) (* (max a (* 2 b)) (min (sin a) b)))",
        "(fn f ((a R) (b R)) (+ (max (max a b) (min a b)) (* (real 3) (min b a))))",
        "(fn f ((a R) (b R)) (max (* a a) (* b (* b b))))",
    ];
    let inf = f64::INFINITY;
    let points = [
        (1.0, 1.0),
        (1.0, 2.0),
        (2.0, 1.0),
        (-0.0, 0.0),
        (0.0, -0.0),
        (0.5, 0.25),
        (inf, inf),
        (-inf, 3.0),
    ];
    let (a, b) = (Symbol::from("a"), Symbol::from("b"));
    let mut failures = vec![];
    for (n, src) in programs.into_iter().enumerate() {
        let prog = atl_egg::front::parse_program(src.as_bytes()).unwrap();
        let wrt = [a, b];
        let g = derive::grad(&prog, &wrt, &opts()).unwrap().program;
        let j = derive::jvp(&prog, &wrt, &opts()).unwrap().program;
        let h = derive::hvp(&prog, &wrt, &opts()).unwrap().program;
        let extra_of = |p: &Program, da: f64, db: f64| -> Vec<(Symbol, Value)> {
            let names: Vec<Symbol> = p.params[2..].iter().map(|p| p.name).collect();
            vec![(names[0], Value::Real(da)), (names[1], Value::Real(db))]
        };
        // infinities only where no product can meet them (0 · inf)
        for &(x, y) in points.iter().filter(|p| n < 2 || p.0.is_finite()) {
            let mut inputs = random_inputs(&prog, &Sizes::new(), &mut Rng::new(1)).unwrap();
            inputs.values.insert(a, Value::Real(x));
            inputs.values.insert(b, Value::Real(y));
            let grad = flat(&evaluate(&g, &inputs).unwrap());
            for (k, (da, db)) in [(1.0, 0.0), (0.0, 1.0)].into_iter().enumerate() {
                let v = HashMap::from([(a, Value::Real(da)), (b, Value::Real(db))]);
                let (_, want) = dual_jvp(&prog, &inputs, &v).unwrap();
                let want = flat(&want).first().copied().unwrap_or(0.0);
                let got_j = evaluate(&j, &with_extra(&inputs, &extra_of(&j, da, db))).unwrap();
                let got_j = flat(&got_j).first().copied().unwrap_or(0.0);
                for (what, got) in [("grad", grad[k]), ("jvp", got_j)] {
                    if got != want && !(got.is_nan() && want.is_nan()) {
                        failures.push(format!("{src} at ({x}, {y}): {what}[{k}] {got} != {want}"));
                    }
                }
                if x.is_finite() && y.is_finite() {
                    let got_h = evaluate(&h, &with_extra(&inputs, &extra_of(&h, da, db))).unwrap();
                    let (_, want_h) = dual_jvp(&g, &inputs, &v).unwrap();
                    if !same_value(&got_h, &want_h, 1e-12) {
                        failures.push(format!("{src} at ({x}, {y}): hvp {got_h:?} != {want_h:?}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A two-class softmax cross-entropy written with `max` (the stable
/// log-sum-exp `m + log(exp(a - m) + exp(b - m))`, `m = max(a, b)`): finite
/// in value and gradient at logits of ±1,000, where the naive form
/// overflows, and its gradient (the softmax minus the label) equals the
/// dual numbers'.
#[test]
fn stable_log_sum_exp_with_max_is_finite_at_logits_of_1000() {
    let src = "(fn xent ((a R) (b R))
      (let m (max a b)
        (- (+ m (log (+ (exp (- a m)) (exp (- b m))))) a)))";
    let prog = atl_egg::front::parse_program(src.as_bytes()).unwrap();
    let (a, b) = (Symbol::from("a"), Symbol::from("b"));
    let g = derive::grad(&prog, &[a, b], &opts()).unwrap().program;
    for (x, y, value, ga) in [
        (1000.0, -1000.0, 0.0, 0.0),
        (-1000.0, 1000.0, 2000.0, -1.0),
        (1000.0, 1000.0, std::f64::consts::LN_2, -0.5),
    ] {
        let mut inputs = random_inputs(&prog, &Sizes::new(), &mut Rng::new(1)).unwrap();
        inputs.values.insert(a, Value::Real(x));
        inputs.values.insert(b, Value::Real(y));
        let v = flat(&evaluate(&prog, &inputs).unwrap())[0];
        let grad = flat(&evaluate(&g, &inputs).unwrap());
        assert!(close(v, value, 1.0, 1e-12), "xent({x}, {y}) = {v}");
        assert!(
            close(grad[0], ga, 1.0, 1e-12),
            "d/da at ({x}, {y}): {grad:?}"
        );
        assert!(
            close(grad[1], -ga, 1.0, 1e-12),
            "d/db at ({x}, {y}): {grad:?}"
        );
        for (k, (da, db)) in [(1.0, 0.0), (0.0, 1.0)].into_iter().enumerate() {
            let dirs = HashMap::from([(a, Value::Real(da)), (b, Value::Real(db))]);
            let (_, t) = dual_jvp(&prog, &inputs, &dirs).unwrap();
            assert!(close(grad[k], flat(&t)[0], 1.0, 1e-12), "{grad:?} vs {t:?}");
        }
    }
}

/// `maximum`, `minimum`, `argmax` and `argmin` over an index: at ties
/// (the derivative goes to the first element attaining the extremum), at
/// distinct values, with an infinity and for an empty range, every entry
/// of the gradient and the jvp equals the dual-number derivative exactly,
/// and the hvp the dual numbers of the gradient.
#[test]
fn reduction_derivatives_match_dual_numbers_at_ties() {
    let programs = [
        "(fn f ((x (tensor n R))) (maximum i n (get x i)))",
        "(fn f ((x (tensor n R))) (minimum i n (* 3 (get x i))))",
        "(fn f ((x (tensor n R))) (* (maximum i n (sin (get x i))) (minimum j n (get x j))))",
        "(fn f ((x (tensor n R))) (sum j n (* (get (argmax i n (get x i)) j) (* (get x j) (get x j)))))",
        "(fn f ((x (tensor n R))) (maximum i n (* (get x i) (maximum j n (* (get x j) (real (+ i j)))))))",
    ];
    let inf = f64::INFINITY;
    let points: [&[f64]; 7] = [
        &[3.0, 1.0, 3.0],
        &[1.0, 3.0, 3.0],
        &[-1.0, 0.5, 0.25],
        &[2.0, 2.0, 2.0],
        &[-0.0, 0.0, -0.0],
        &[-inf, 1.0, 2.0],
        &[],
    ];
    let x = Symbol::from("x");
    let mut failures = vec![];
    for src in programs {
        let prog = atl_egg::front::parse_program(src.as_bytes()).unwrap();
        let g = derive::grad(&prog, &[x], &opts()).unwrap().program;
        let j = derive::jvp(&prog, &[x], &opts()).unwrap().program;
        let h = derive::hvp(&prog, &[x], &opts()).unwrap().program;
        for xs in points {
            // infinities only where no product meets them
            if xs.iter().any(|v| v.is_infinite()) && !src.contains("(maximum i n (get x i))") {
                continue;
            }
            let sizes: Sizes = [(Symbol::from("n"), xs.len() as i64)].into_iter().collect();
            let mut inputs = random_inputs(&prog, &sizes, &mut Rng::new(1)).unwrap();
            inputs.values.insert(x, Value::reals(xs));
            let grad = flat(&evaluate(&g, &inputs).unwrap());
            for k in 0..xs.len() {
                let mut e = vec![0.0; xs.len()];
                e[k] = 1.0;
                let v = HashMap::from([(x, Value::reals(&e))]);
                let (_, want) = dual_jvp(&prog, &inputs, &v).unwrap();
                let want = flat(&want).first().copied().unwrap_or(0.0);
                let dx = j.params[1].name;
                let got_j = evaluate(&j, &with_extra(&inputs, &[(dx, Value::reals(&e))])).unwrap();
                let got_j = flat(&got_j).first().copied().unwrap_or(0.0);
                for (what, got) in [("grad", grad[k]), ("jvp", got_j)] {
                    if got != want && !(got.is_nan() && want.is_nan()) {
                        failures.push(format!("{src} at {xs:?}: {what}[{k}] {got} != {want}"));
                    }
                }
                if xs.iter().all(|v| v.is_finite()) {
                    let dh = h.params[1].name;
                    let got_h =
                        evaluate(&h, &with_extra(&inputs, &[(dh, Value::reals(&e))])).unwrap();
                    let (_, want_h) = dual_jvp(&g, &inputs, &v).unwrap();
                    if !same_value(&got_h, &want_h, 1e-12) {
                        failures.push(format!("{src} at {xs:?}: hvp {got_h:?} != {want_h:?}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The softmax cross-entropy of `corpus/softmax_xent_stable.atl` at logits
/// of ±1,000 (where exp overflows): finite in value and gradient, the
/// gradient the softmax minus the labels, equal to the dual numbers'.
#[test]
fn softmax_cross_entropy_with_maximum_is_finite_at_logits_of_1000() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/softmax_xent_stable.atl");
    let prog = atl_egg::front::parse_program(&std::fs::read(path).unwrap()).unwrap();
    let z = Symbol::from("z");
    let g = derive::grad(&prog, &[z], &opts()).unwrap().program;
    let sizes: Sizes = [("B", 2), ("K", 3)]
        .into_iter()
        .map(|(k, v)| (Symbol::from(k), v))
        .collect();
    let mut inputs = random_inputs(&prog, &sizes, &mut Rng::new(1)).unwrap();
    let logits = [1000.0, -1000.0, 1000.0, -1000.0, 1000.0, -1000.0];
    let labels = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    let rows = |xs: &[f64]| Value::tensor(xs.chunks(3).map(Value::reals).collect());
    inputs.values.insert(z, rows(&logits));
    inputs.values.insert(Symbol::from("y"), rows(&labels));
    let v = flat(&evaluate(&prog, &inputs).unwrap())[0];
    // row 0: lse = 1000 + ln 2, label logit 1000; row 1: lse = 1000, label -1000
    assert!(
        close(v, std::f64::consts::LN_2 + 2000.0, 1.0, 1e-12),
        "value {v}"
    );
    let grad = flat(&evaluate(&g, &inputs).unwrap());
    let want = [-0.5, 0.0, 0.5, 0.0, 1.0, -1.0];
    for (k, (got, w)) in grad.iter().zip(want).enumerate() {
        assert!(got.is_finite() && close(*got, w, 1.0, 1e-12), "{grad:?}");
        let mut e = vec![0.0; 6];
        e[k] = 1.0;
        let (_, t) = dual_jvp(&prog, &inputs, &HashMap::from([(z, rows(&e))])).unwrap();
        assert!(close(*got, flat(&t)[0], 1.0, 1e-12), "{grad:?} vs {t:?}");
    }
}
