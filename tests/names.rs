//! Names: internal names never collide with names a user can write, appliers
//! that make names are idempotent (rules saturate), and printed programs use
//! readable names that are valid C identifiers.

mod common;

use atl_egg::backend::sexp::program_to_string;
use atl_egg::corpus::random_inputs;
use atl_egg::derive;
use atl_egg::egraph::{optimize, Options};
use atl_egg::front::ast::{ParamKind, Program, Type};
use atl_egg::front::parse_program;
use atl_egg::rng::Rng;
use atl_egg::semantics::dual::jvp as dual_jvp;
use atl_egg::semantics::eval::evaluate;
use atl_egg::semantics::numerics::inner_product;
use atl_egg::semantics::value::{random_value, Sizes, Value};
use common::{compare_values, Tolerance};
use egg::Symbol;
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

/// Is `s` a C identifier that is not a C keyword?
fn c_identifier(s: &str) -> bool {
    // C99's keywords, written out as an oracle for `readable::C_KEYWORDS` rather than taken from it
    const KEYWORDS: &[&str] = &[
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "_Bool",
        "_Complex",
        "_Imaginary",
        "bool",
        "true",
        "false",
    ];
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&s)
}

/// Every name a printed program binds or declares.
pub fn printed_names(p: &Program) -> Vec<Symbol> {
    use atl_egg::front::ast::{Expr, Pred};
    fn pred(p: &Pred, out: &mut Vec<Symbol>) {
        if let Pred::Exists(i, _, _) = p {
            out.push(*i);
        }
        p.children().for_each(|q| pred(q, out));
    }
    fn expr(e: &Expr, out: &mut Vec<Symbol>) {
        out.extend(e.binder());
        if let Expr::Iverson(p, _) = e {
            pred(p, out);
        }
        e.children().for_each(|c| expr(c, out));
    }
    let mut out: Vec<Symbol> = p.params.iter().map(|q| q.name).collect();
    expr(&p.body, &mut out);
    out
}

/// The printed names of one derived or optimized program: readable, C
/// identifiers, no internal separators, no `_N` suffixes.
pub fn check_printed(what: &str, p: &Program) -> Vec<String> {
    let text = program_to_string(p);
    let mut bad = vec![];
    if text.contains('~') || text.contains('#') {
        bad.push(format!("{what}: internal separator in {text}"));
    }
    let reread = parse_program(text.as_bytes()).unwrap();
    for s in printed_names(&reread) {
        let s = s.as_str();
        let suffixed = s
            .rsplit_once('_')
            .is_some_and(|(_, d)| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        if !c_identifier(s) || suffixed {
            bad.push(format!("{what}: name {s:?}"));
        }
    }
    bad
}

#[test]
fn printed_names_are_c_identifiers() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let opts = Options {
        time_limit: std::time::Duration::from_secs(600),
        ..Default::default()
    };
    let corpus = atl_egg::corpus::CorpusProgram::load_dir(&dir).unwrap();
    let bad: Vec<String> = common::par::par_map(&corpus, |c| {
        let mut bad = vec![];
        let wrt = c.wrt_or_all();
        let o = optimize(&c.program, &opts).unwrap().program;
        bad.extend(check_printed(&format!("{} optimize", c.name), &o));
        if c.program.ret == Type::Real {
            let g = derive::grad(&c.program, &wrt, &opts).unwrap().program;
            bad.extend(check_printed(&format!("{} grad", c.name), &g));
        }
        let j = derive::jvp(&c.program, &wrt, &opts).unwrap().program;
        bad.extend(check_printed(&format!("{} jvp", c.name), &j));
        let v = derive::vjp(&c.program, &wrt, &opts).unwrap().program;
        bad.extend(check_printed(&format!("{} vjp", c.name), &v));
        bad
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}
