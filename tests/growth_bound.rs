//! The cheap-gradient bound across orders of magnitude: the default
//! derivative of strided and tree-shaped programs (index coefficients 2, 4
//! and 8, brackets comparing `k·c + r` with a size) must not grow faster
//! than its function from n = 10 to n = 10^6, must never cost more than the
//! derivative the rules produce directly, and must evaluate at sizes where
//! only its bracketed loops' live iterations are affordable. Costs, never
//! times, except where the evaluator's speed is the point.

use crate::common;

use atl_egg::derive;
use atl_egg::egraph::Options;
use atl_egg::front::ast::Program;
use atl_egg::front::parse_program;
use atl_egg::rng::Rng;
use atl_egg::semantics::cost::{cost, io_cost};
use atl_egg::semantics::eval::evaluate;
use atl_egg::semantics::value::{Inputs, Sizes, Value};
use atl_egg::Symbol;
use std::collections::HashMap;
use std::path::Path;

fn opts() -> Options {
    Options {
        time_limit: std::time::Duration::from_secs(600),
        ..Default::default()
    }
}

fn at_n(n: i64) -> Sizes {
    [(Symbol::from("n"), n)].into_iter().collect()
}

fn io_ratio(f: &Program, d: &Program, sizes: &Sizes) -> f64 {
    let none = HashMap::new();
    let cf = io_cost(f, sizes, &none).unwrap();
    let cd = io_cost(d, sizes, &none).unwrap();
    cd as f64 / cf.max(1) as f64
}

/// The sizes the ratios are checked at: 1, 2, 3 (where a function is a
/// handful of operations and a fixed cost of its gradient shows) and 10 to
/// 10^6.
const SIZES: [i64; 7] = [1, 2, 3, 10, 100, 10_000, 1_000_000];

/// The positions of 100 and 10^6 in [`SIZES`]: a ratio may rise towards its
/// limit at small sizes, but must not grow between these two.
const HUNDRED: usize = 4;
const MILLION: usize = 6;

/// A random program over `x, w : [n]R` of 1 to 4 levels, each a
/// `(gen c n (iverson (< (+ (* k c) r) n) e))` with `k` in 2, 4, 8 whose
/// body reads the previous level (or `x`) at strided indices `s·c + t`;
/// the result is the dot product of the last level with `w`.
fn strided_program(rng: &mut Rng) -> String {
    let levels = 1 + rng.below(4);
    let mut text = String::from("(fn f ((x (tensor n R)) (w (tensor n R)))\n");
    let mut prev = "x".to_string();
    for k in 1..=levels {
        let stride = *rng.pick(&[2i64, 4, 8]);
        let r = rng.range(0, stride);
        let read = |rng: &mut Rng, from: &str| {
            let s = *rng.pick(&[1i64, 2, 2, 4]);
            let t = rng.range(0, 2);
            format!("(get {from} (+ (* {s} c) {t}))")
        };
        let (u, v) = (read(rng, &prev), read(rng, &prev));
        let body = match rng.below(5) {
            0 => format!("(+ {v} (relu (- {u} {v})))"),
            1 => format!("(* {u} {v})"),
            2 => format!("(sigmoid (+ {u} {v}))"),
            3 => format!("(+ (* 2 {u}) (tanh {v}))"),
            _ => format!("(* {u} (exp {v}))"),
        };
        let body = if rng.chance(0.3) {
            // a pass-through for the odd one out, as a reduction tree has
            format!("(+ (iverson (< (+ (* {stride} c) {r}) n) {body}) (iverson (and (< (* {stride} c) n) (<= n (+ (* {stride} c) {r}))) {u}))")
        } else {
            format!("(iverson (< (+ (* {stride} c) {r}) n) {body})")
        };
        text.push_str(&format!("  (let a{k} (gen c n {body})\n"));
        prev = format!("a{k}");
    }
    text.push_str(&format!("  (sum i n (* (get {prev} i) (get w i)))"));
    text.push_str(&")".repeat(levels + 1));
    text
}

/// For each random strided or tree-shaped program, the default gradient's
/// io-cost ratio does not grow from n = 100 to n = 10^6 and stays under the
/// paper's bound of 4 at every size from 1 to 10^6 (`ATL_GROWTH_CASES=N` runs more).
#[test]
fn strided_and_tree_gradients_stay_bounded_from_one_to_a_million() {
    let cases = std::env::var("ATL_GROWTH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let mut rng = Rng::new(0x005e_ed0f_7ee5);
    let texts: Vec<String> = (0..cases).map(|_| strided_program(&mut rng)).collect();
    let results = common::par::par_map(&texts, |text| {
        let f = parse_program(text.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let (g, cpu) = common::cpu::measure(|| derive::grad(&f, &[], &opts()).unwrap().program);
        let rs: Vec<f64> = SIZES.iter().map(|&n| io_ratio(&f, &g, &at_n(n))).collect();
        (rs, cpu)
    });
    let mut failures = vec![];
    for (case, (text, (rs, cpu))) in texts.iter().zip(results).enumerate() {
        eprintln!(
            "case {case}: gradient in {:.2} s of CPU time",
            cpu.as_secs_f64()
        );
        let grows = rs[MILLION] > rs[HUNDRED] * 1.05 + 0.05;
        if grows || rs.iter().any(|r| *r > 4.0) {
            failures.push(format!(
                "case {case}: ratios {rs:?} at n = {SIZES:?}\n{text}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn corpus_program(name: &str) -> Program {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(format!("{name}.atl"));
    parse_program(&std::fs::read(path).unwrap()).unwrap()
}

/// The reduction tree (`corpus/logsumexp_tree.atl`) and its gradient,
/// derived once for the tests of this file.
fn reduction_tree() -> &'static (Program, Program) {
    static TREE: std::sync::OnceLock<(Program, Program)> = std::sync::OnceLock::new();
    TREE.get_or_init(|| {
        let f = corpus_program("logsumexp_tree");
        let g = derive::grad(&f, &[], &opts()).unwrap().program;
        (f, g)
    })
}

/// The reduction tree's gradient grows like its function (it was
/// quadratic when extraction compared costs at n = 24 only) and never
/// costs more than the direct derivative.
#[test]
fn reduction_tree_gradient_grows_like_its_function() {
    let (f, g) = reduction_tree();
    let direct = derive::direct_grad_program(f, &[], &opts()).unwrap();
    let none = HashMap::new();
    let mut rs = vec![];
    // (21 levels reduce up to 2^21 entries: the sizes stay below)
    for n in [100, 2_500, 40_000, 1_280_000, 2_000_000] {
        let s = at_n(n);
        rs.push(io_ratio(f, g, &s));
        assert!(cost(g, &s, &none).unwrap() <= cost(&direct, &s, &none).unwrap());
    }
    println!("io-cost ratios at n = 100 .. 2·10^6: {rs:?}");
    assert!(rs[4] <= rs[0] * 1.05 + 0.05, "the ratio grows: {rs:?}");
}

/// The evaluator narrows bracketed loops as the cost model does: the tree's
/// gradient at n = 40,000 (whose bracketed sums span 1.6·10^9 tuples but
/// hold on at most one each) runs within the default iteration budget, and
/// is the softmax of `x`, as the gradient of log-sum-exp is.
#[test]
fn eval_runs_the_reduction_tree_gradient_at_forty_thousand() {
    let (_, g) = reduction_tree();
    let n = 40_000;
    let mut rng = Rng::new(9);
    let x: Vec<f64> = (0..n).map(|_| 6.0 * rng.unit() - 3.0).collect();
    let inputs = Inputs {
        sizes: at_n(n as i64),
        values: [(
            Symbol::from("x"),
            Value::tensor(x.iter().map(|&v| Value::Real(v)).collect()),
        )]
        .into_iter()
        .collect(),
        relations: HashMap::new(),
        stored: HashMap::new(),
    };
    let (got, cpu) = common::cpu::measure(|| evaluate(g, &inputs).unwrap());
    let top = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = x.iter().map(|v| (v - top).exp()).sum();
    for (k, v) in x.iter().enumerate() {
        let want = (v - top).exp() / total;
        let Value::Real(have) = got.get(k as i64).unwrap() else {
            panic!("not a real at {k}")
        };
        assert!((have - want).abs() < 1e-12, "at {k}: {have} vs {want}");
    }
    assert!(cpu.as_secs_f64() < 10.0, "eval took {cpu:?} of CPU time");
}

/// `cost` answers in milliseconds at 10^6 on every corpus program without
/// relations (their values would be 10^12 bits), and at 10^7 on the
/// reduction tree and its gradient.
#[test]
fn cost_answers_at_large_sizes_on_the_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let none = HashMap::new();
    let mut slow = vec![];
    for c in atl_egg::corpus::CorpusProgram::load_dir(&dir).unwrap() {
        let p = &c.program;
        if p.params
            .iter()
            .any(|q| matches!(q.kind, atl_egg::front::ast::ParamKind::Relation(_)))
        {
            continue;
        }
        let sizes: Sizes = p.sizes.iter().map(|s| (*s, 1_000_000)).collect();
        let ((), cpu) = common::cpu::measure(|| {
            cost(p, &sizes, &none).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        });
        if cpu.as_secs_f64() > 1.0 {
            slow.push(format!("{}: {cpu:?} of CPU time", c.name));
        }
    }
    assert!(slow.is_empty(), "{slow:?}");
    let (f, g) = reduction_tree();
    for p in [f, g] {
        let ((), cpu) = common::cpu::measure(|| {
            cost(p, &at_n(10_000_000), &none).unwrap();
        });
        assert!(cpu.as_secs_f64() < 1.0, "{cpu:?} of CPU time");
    }
}
