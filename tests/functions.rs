//! Files of several functions: calls are expanded so that the program
//! means what the same program written out by hand means (checked by value
//! with the evaluator), the expansion never captures a name, sizes of the
//! callee are bound from its arguments, `--fn` picks a function, and the
//! tuple and vector sugar mean and cost what docs/language.md says.
//! (Error reports for bad calls are snapshotted in `tests/diagnostics.rs`;
//! the corpus's multi-function programs get their derivatives checked
//! against dual numbers in `tests/derivatives.rs`.)

use crate::common;

use atl_egg::backend::sexp::param_to_string;
use atl_egg::egraph::Options;
use atl_egg::front::ast::{Expr, ParamKind};
use atl_egg::{cost, eval_json, inputs, parse, parse_fn, Program};
use common::{generate, random_inputs, GenConfig, Rng};

fn value(p: &Program, json: &str) -> Vec<f64> {
    let text = eval_json(p, json, &[]).unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out = vec![];
    flatten(&v, &mut out);
    out
}

fn flatten(v: &serde_json::Value, out: &mut Vec<f64>) {
    match v {
        serde_json::Value::Array(xs) => xs.iter().for_each(|x| flatten(x, out)),
        x => out.push(x.as_f64().expect("a number")),
    }
}

fn assert_close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() <= 1e-12 * (1.0 + x.abs().max(y.abs())),
            "{a:?} vs {b:?}"
        );
    }
}

fn cost_at(p: &Program, json: &str) -> u128 {
    cost(p, &inputs(p, json, &[]).unwrap()).unwrap()
}

fn has_no_calls_left(p: &Program) -> bool {
    // every node is a core form; the printed program reads back as one function
    let text = atl_egg::print(p);
    parse(&text).is_ok_and(|q| q.params == p.params)
}

#[test]
fn a_helper_called_four_times_means_the_program_written_out() {
    let helper = "(fn rot2d ((c R) (s R) (v (tensor 2 R)))
          (vec (- (* c (get v 0)) (* s (get v 1)))
               (+ (* s (get v 0)) (* c (get v 1)))))
        (fn spin ((t R) (p (tensor 2 R)))
          (rot2d (cos t) (sin t) (rot2d (cos t) (sin t) (rot2d (cos t) (sin t) (rot2d (cos t) (sin t) p)))))";
    let by_hand = "(fn spin ((t R) (p (tensor 2 R)))
          (gen k 2 (+ (iverson (== k 0) (- (* (cos (* 4 t)) (get p 0)) (* (sin (* 4 t)) (get p 1))))
                      (iverson (== k 1) (+ (* (sin (* 4 t)) (get p 0)) (* (cos (* 4 t)) (get p 1)))))))";
    let (a, b) = (parse(helper).unwrap(), parse(by_hand).unwrap());
    assert!(has_no_calls_left(&a));
    for json in [
        r#"{"t": 0.3, "p": [1, 2]}"#,
        r#"{"t": -1.7, "p": [0.5, -3]}"#,
    ] {
        let (x, y) = (value(&a, json), value(&b, json));
        for (u, v) in x.iter().zip(&y) {
            assert!((u - v).abs() < 1e-12, "{x:?} vs {y:?}");
        }
    }
}

#[test]
fn expansion_never_captures() {
    // the helper's parameters are named like the caller's arguments, swapped
    let swap = parse(
        "(fn minus ((x R) (y R)) (- x y))
         (fn f ((x R) (y R)) (minus y x))",
    )
    .unwrap();
    assert_close(&value(&swap, r#"{"x": 5, "y": 2}"#), &[-3.0]);
    // the helper binds `i` and `x`, both also bound around the call
    let binders = parse(
        "(fn thrice ((a R)) (sum i 3 (let x a x)))
         (fn f ((x (tensor 3 R))) (sum i 3 (* (get x i) (thrice (get x i)))))",
    )
    .unwrap();
    assert_close(&value(&binders, r#"{"x": [1, 2, 3]}"#), &[42.0]);
}

#[test]
fn sizes_are_bound_from_types_and_size_arguments() {
    // an implicit size bound by matching (tensor (+ n 1) R) against (tensor 5 R)
    let tail = parse(
        "(fn tail ((v (tensor (+ n 1) R))) (gen i n (get v (+ i 1))))
         (fn f ((x (tensor 5 R))) (tail x))",
    )
    .unwrap();
    assert_eq!(
        atl_egg::check(&tail),
        "(fn f ((x (tensor 5 R))) -> (tensor 4 R))"
    );
    assert_close(
        &value(&tail, r#"{"x": [1, 2, 3, 4, 5]}"#),
        &[2.0, 3.0, 4.0, 5.0],
    );
    // an explicit size parameter takes a size expression of the caller
    let ones = parse(
        "(fn ones ((n size)) (gen i n 1))
         (fn f ((x (tensor m R))) (sum i (+ m 1) (get (ones (+ m 1)) i)))",
    )
    .unwrap();
    assert_close(&value(&ones, r#"{"x": [7, 7, 7]}"#), &[4.0]);
    // a size shared by two parameters must agree
    let err = parse(
        "(fn dot ((a (tensor n R)) (b (tensor n R))) (sum i n (* (get a i) (get b i))))
         (fn f ((x (tensor 3 R)) (y (tensor 4 R))) (dot x y))",
    )
    .unwrap_err();
    assert!(err.msg.contains("argument 'b' of function 'dot'"), "{err}");
}

#[test]
fn relations_are_passed_by_name() {
    let p = parse(
        "(fn masked ((S (relation n)) (x (tensor n R))) (sum i n (iverson (S i) (get x i))))
         (fn f ((T (relation m)) (y (tensor m R))) (* 2 (masked T y)))",
    )
    .unwrap();
    assert_close(
        &value(&p, r#"{"T": [true, false, true], "y": [1, 10, 100]}"#),
        &[202.0],
    );
}

#[test]
fn the_fn_flag_picks_a_function_and_the_default_is_the_last() {
    let text = "(fn sq ((x R)) (* x x))\n(fn f ((y R)) (+ (sq y) 1))\n";
    assert_eq!(parse(text).unwrap().name.as_str(), "f");
    let sq = parse_fn(text, "sq").unwrap();
    assert_close(&value(&sq, r#"{"x": 3}"#), &[9.0]);
    let err = parse_fn(text, "cube").unwrap_err();
    assert!(err.msg.contains("no function named 'cube'"), "{err}");
    assert!(err.pos.is_some());
}

#[test]
fn a_materialized_hessian_equals_hvp_along_the_unit_vectors() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/corpus/calls_hessian_columns.atl"
    ))
    .unwrap();
    let hessian = parse(&text).unwrap();
    // the function whose Hessian the corpus program writes down
    let f = parse(
        "(fn f ((x (tensor n R)) (w (tensor n R)) (A (tensor n n R)))
           (+ (sum i n (* (get w i) (pow (get x i) 3)))
              (sum i n (sum j n (* (get x i) (* (get A i j) (get x j)))))))",
    )
    .unwrap();
    let opts = Options {
        time_limit: std::time::Duration::from_secs(600),
        ..Options::default()
    };
    let hvp = atl_egg::hvp(&f, &["x"], &opts).unwrap().program;
    let base =
        r#""x": [0.5, -1.25, 2], "w": [1, -2, 0.75], "A": [[1, 2, 3], [-4, 5, 0.5], [0, 1.5, -1]]"#;
    let columns = value(&hessian, &format!("{{{base}}}"));
    for k in 0..3 {
        let e: Vec<String> = (0..3)
            .map(|i| if i == k { "1" } else { "0" }.to_string())
            .collect();
        let json = format!("{{{base}, \"dx\": [{}]}}", e.join(", "));
        assert_close(&value(&hvp, &json), &columns[3 * k..3 * k + 3]);
    }
}

#[test]
fn tuples_are_right_nested_pairs() {
    let p = parse(
        "(fn f ((t (tuple R (tensor 2 R) R)))
           (tuple (proj 2 t) (proj 0 t) (get (proj 1 t) 1)))",
    )
    .unwrap();
    assert_eq!(
        atl_egg::check(&p),
        "(fn f ((t (pair R (pair (tensor 2 R) R)))) -> (pair R (pair R R)))"
    );
    assert_close(&value(&p, r#"{"t": [1, [[2, 3], 4]]}"#), &[4.0, 1.0, 3.0]);
    assert!(parse("(fn f ((t (tuple R R))) (proj 2 t))").is_err());
    // one component is the component itself
    let one = parse("(fn f ((x R)) (tuple x))").unwrap();
    assert_eq!(one.body, Expr::Var("x".into()));
}

#[test]
fn a_vector_literal_costs_only_its_elements() {
    let p = parse("(fn f ((a R) (b R)) (vec (* a b) (+ a b) (exp a)))").unwrap();
    assert_close(&value(&p, r#"{"a": 1, "b": 2}"#), &[2.0, 3.0, 1f64.exp()]);
    // one multiplication, one addition, one call: the brackets never overlap
    assert_eq!(cost_at(&p, r#"{"a": 1, "b": 2}"#), 3);
    // tensors as elements: a 2 x 3 matrix
    let m = parse("(fn f ((x (tensor 3 R))) (vec x (* 2 x)))").unwrap();
    assert_eq!(
        atl_egg::check(&m),
        "(fn f ((x (tensor 3 R))) -> (tensor 2 3 R))"
    );
    assert_close(
        &value(&m, r#"{"x": [1, 2, 3]}"#),
        &[1.0, 2.0, 3.0, 2.0, 4.0, 6.0],
    );
    // the three products of (* 2 x), nothing for placing the rows
    assert_eq!(cost_at(&m, r#"{"x": [1, 2, 3]}"#), 3);
    assert!(parse("(fn f ((a R) (x (tensor 2 R))) (vec a x))").is_err());
}

#[test]
fn a_single_function_file_elaborates_as_before() {
    // the names and forms of a one-function program do not depend on the
    // support for several: its first binder keeps the source name
    let p = parse("(fn f ((x (tensor n R))) (sum i n (* (get x i) (get x i))))").unwrap();
    assert!(atl_egg::print(&p).contains("(sum i n"));
}

#[test]
fn runaway_expansion_is_an_error_not_a_hang() {
    // each level calls the one below twice: 2^40 bodies
    let mut text = String::from("(fn f0 ((x R)) (* x x))\n");
    for k in 1..=40 {
        text.push_str(&format!(
            "(fn f{k} ((x R)) (+ (f{} x) (f{} x)))\n",
            k - 1,
            k - 1
        ));
    }
    let err = parse(&text).unwrap_err();
    assert!(err.msg.contains("expand to more than"), "{err}");
}

/// A random program called from a second function, each real argument
/// passed as an expression (so bound by a `let`) named like the
/// parameter it is bound to, means and costs exactly what the program does.
#[test]
fn a_call_of_a_random_program_means_and_costs_what_the_program_does() {
    let cfg = GenConfig::default();
    for seed in 0..300 {
        let g = generate(seed, &cfg);
        let callee = parse(&g.sugar).unwrap_or_else(|e| panic!("{e}\n{}", g.sugar));
        let params: Vec<String> = callee.params.iter().map(param_to_string).collect();
        let args: Vec<String> = callee
            .params
            .iter()
            .map(|p| match p.kind {
                ParamKind::Real(_) => format!("(fst (pair {0} {0}))", p.name),
                _ => p.name.to_string(),
            })
            .collect();
        let text = format!(
            "{}\n(fn calls_it ({}) ({} {}))\n",
            g.sugar,
            params.join(" "),
            callee.name,
            args.join(" ")
        );
        let caller = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(caller.ret, callee.ret, "{text}");
        let mut rng = Rng::new(seed);
        let at = random_inputs(&callee, &mut rng, 0, 4, 0.5);
        let show = |p: &Program| {
            atl_egg::eval(p, &at)
                .and_then(|v| atl_egg::to_json(p, &v, &at))
                .map_err(|e| e.msg)
        };
        assert_eq!(show(&caller), show(&callee), "{text}");
        let costs = |p: &Program| cost(p, &at).map_err(|e| e.msg);
        assert_eq!(costs(&caller), costs(&callee), "{text}");
    }
}
