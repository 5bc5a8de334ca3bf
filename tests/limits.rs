//! Limits that hold, and a result for every program:
//!
//! * a normal run fits in 2 GB of address space (`ulimit -v`): the worker
//!   thread's stack is sized by the program's depth, not reserved for the
//!   deepest program;
//! * `jvp` and `hvp` give a derivative of programs too wide or too long for
//!   the e-graphs to finish (a sum of 5,000 terms, a chain of 2,000
//!   bindings), equal by value to dual numbers, in a time measured here
//!   with a generous margin, and `grad` of the sum of 5,000 terms;
//! * `grad` of deep nesting (20,000 nested `sin`, 2,000 nested pairs) within
//!   the default time limit, in time linear in the depth;
//! * the time limit fails a command that would run past it, within about a
//!   second, with an error naming `--time-limit`, a long count included;
//! * the memory limit fails a command that would hold more, with an error
//!   naming `--memory-limit` (exit 1, not an abort).

use crate::common;

use atl_egg::derive;
use atl_egg::egraph::Options;
use atl_egg::front::ast::Program;
use atl_egg::semantics::dual::jvp as dual_jvp;
use atl_egg::semantics::eval::evaluate;
use atl_egg::semantics::numerics::inner_product;
use atl_egg::semantics::value::{random_value, Inputs, Value};
use atl_egg::Symbol;
use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_atl-egg");

fn corpus(name: &str) -> String {
    format!("{}/corpus/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `atl-egg ARGS` under `ulimit -v KB`: exit status, stdout, stderr.
fn run_limited(kb: u64, args: &[&str]) -> (i32, String, String) {
    let line = format!("ulimit -v {kb}; exec \"$0\" \"$@\"");
    let out = Command::new("sh")
        .arg("-c")
        .arg(line)
        .arg(BIN)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_normal_run_fits_in_two_gigabytes_of_address_space() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("limits-ulimit");
    std::fs::create_dir_all(&dir).unwrap();
    let inputs = dir.join("in.json");
    std::fs::write(&inputs, r#"{"A": [[1, 2], [3, 4]], "B": [[5, 6], [7, 8]]}"#).unwrap();
    let prog = corpus("matmul.atl");
    let inputs = inputs.to_str().unwrap();
    let grad = corpus("ridge_regression.atl");
    for args in [
        vec!["check", prog.as_str()],
        vec!["eval", prog.as_str(), "--inputs", inputs],
        vec!["optimize", prog.as_str()],
        vec!["grad", grad.as_str()],
        vec!["hvp", grad.as_str()],
    ] {
        let (code, out, err) = run_limited(2_000_000, &args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!out.is_empty(), "{args:?}");
    }
}

/// A program nested deeper than the address space allows a stack for
/// gets a clear error, not a crash.
#[test]
fn a_program_too_deep_for_the_memory_is_an_error() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("limits-deep");
    std::fs::create_dir_all(&dir).unwrap();
    let depth = 1_000_000;
    let path = dir.join("deep.atl");
    let text = format!(
        "(fn f ((x R)) {}x{})",
        "(sin ".repeat(depth),
        ")".repeat(depth)
    );
    std::fs::write(&path, text).unwrap();
    let (code, _, err) = run_limited(2_000_000, &["check", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nests") && err.contains("ulimit"), "{err}");
}

fn opts() -> Options {
    Options {
        time_limit: Duration::from_secs(600),
        ..Options::default()
    }
}

/// `f(x) = x0·x0 + Σ_{k≥1} xk·sin(xk)` over a vector of `n` entries,
/// written as one sum of `n` terms.
fn wide_sum(n: usize) -> Program {
    let mut e = "(* (get x 0) (get x 0))".to_string();
    for k in 1..n {
        e = format!("(+ {e} (* (get x {k}) (sin (get x {k}))))");
    }
    atl_egg::parse(&format!("(fn f ((x (tensor {n} R))) {e})")).unwrap()
}

/// A chain of `n` bindings: `y0 = Σ xi·xi`, `yk = sin(0.5·y(k-1))`.
fn long_chain(n: usize) -> Program {
    let mut text = String::from("(fn f ((n size) (x (tensor n R)))\n");
    text += "(let y0 (sum i n (* (get x i) (get x i)))\n";
    for k in 1..n {
        text += &format!("(let y{k} (sin (* y{} 0.5))\n", k - 1);
    }
    text += &format!("y{}{})", n - 1, ")".repeat(n));
    atl_egg::parse(&text).unwrap()
}

fn x() -> Symbol {
    Symbol::from("x")
}

/// Inputs `x` (of `len` entries) and a direction `dx` with the program's
/// sizes.
fn point(prog: &Program, len: i64) -> (Inputs, Value) {
    let mut rng = common::Rng::new(7);
    let mut inputs = Inputs::default();
    for s in &prog.sizes {
        inputs.sizes.insert(*s, len);
    }
    let ty = match &prog.param(x()).unwrap().kind {
        atl_egg::ParamKind::Real(t) => t.clone(),
        _ => unreachable!(),
    };
    let v = random_value(&ty, &inputs.sizes, &mut || rng.unit()).unwrap();
    let d = random_value(&ty, &inputs.sizes, &mut || rng.unit()).unwrap();
    inputs.values.insert(x(), v);
    (inputs, d)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-8 * a.abs().max(b.abs()).max(1.0)
}

/// `jvp f` at `x` along `d` equals dual numbers.
fn check_jvp(prog: &Program, inputs: &Inputs, d: &Value, opts: &Options) {
    let j = derive::jvp(prog, &[x()], opts).unwrap().program;
    let mut with = inputs.clone();
    with.values.insert(Symbol::from("dx"), d.clone());
    let got = evaluate(&j, &with).unwrap();
    let (_, want) = dual_jvp(prog, inputs, &HashMap::from([(x(), d.clone())])).unwrap();
    let (got, want) = (inner_product(&got, &got), inner_product(&want, &want));
    assert!(close(got, want), "|jvp|² = {got}, dual numbers {want}");
}

/// `hvp f` at `x` along `d`, projected on `d`, equals dual numbers on the
/// gradient.
fn check_hvp(prog: &Program, inputs: &Inputs, d: &Value, opts: &Options) {
    let h = derive::hvp(prog, &[x()], opts).unwrap().program;
    let g = derive::grad(prog, &[x()], opts).unwrap().program;
    let mut with = inputs.clone();
    with.values.insert(Symbol::from("dx"), d.clone());
    let got = inner_product(&evaluate(&h, &with).unwrap(), d);
    let (_, dg) = dual_jvp(&g, inputs, &HashMap::from([(x(), d.clone())])).unwrap();
    let want = inner_product(&dg, d);
    assert!(close(got, want), "<hvp, d> = {got}, dual numbers {want}");
}

/// Each derivative within `limit` of CPU time (far above what it takes;
/// the derivatives run on the calling thread, so other tests running
/// beside it do not count).
fn timed(what: &str, limit: Duration, f: impl FnOnce()) {
    let ((), took) = common::cpu::measure(f);
    assert!(took < limit, "{what} took {took:?} of CPU time");
    eprintln!("{what}: {took:?} of CPU time");
}

/// `jvp` and `hvp` of a sum of 5,000 terms (the terms differ only in
/// constant indices, and for `hvp` the optimizer once built an e-graph for
/// each of the 40,000 units they make, 83 s of CPU).
#[test]
fn jvp_and_hvp_of_a_sum_of_5000_terms() {
    atl_egg::with_big_stack(|| {
        let p = wide_sum(5_000);
        let (inputs, d) = point(&p, 5_000);
        timed("jvp of 5,000 terms", Duration::from_secs(120), || {
            check_jvp(&p, &inputs, &d, &opts())
        });
        timed("hvp of 5,000 terms", Duration::from_secs(240), || {
            check_hvp(&p, &inputs, &d, &opts())
        });
    });
}

/// `grad` of a sum of 5,000 terms (the adjoint's parts were added two by
/// two, each step copying the sum so far, and every subterm of the long
/// addition was measured whole: quadratic; 19 s of CPU now, 101 s before),
/// equal to dual numbers.
#[test]
fn grad_of_a_sum_of_5000_terms() {
    atl_egg::with_big_stack(|| {
        let p = wide_sum(5_000);
        let (inputs, d) = point(&p, 5_000);
        timed("grad of 5,000 terms", Duration::from_secs(240), || {
            let g = derive::grad(&p, &[x()], &opts())
                .unwrap_or_else(|e| panic!("grad of 5,000 terms: {e}"))
                .program;
            let got = inner_product(&evaluate(&g, &inputs).unwrap(), &d);
            let (_, want) = dual_jvp(&p, &inputs, &HashMap::from([(x(), d.clone())])).unwrap();
            let Value::Real(want) = want else {
                panic!("a real: {want:?}")
            };
            assert!(close(got, want), "<grad, d> = {got}, dual numbers {want}");
        });
    });
}

#[test]
fn jvp_and_hvp_of_a_chain_of_2000_bindings() {
    atl_egg::with_big_stack(|| {
        let p = long_chain(2_000);
        let (inputs, d) = point(&p, 5);
        timed("jvp of 2,000 bindings", Duration::from_secs(120), || {
            check_jvp(&p, &inputs, &d, &opts())
        });
        timed("hvp of 2,000 bindings", Duration::from_secs(240), || {
            check_hvp(&p, &inputs, &d, &opts())
        });
    });
}

/// A command that cannot finish in its time limit fails about then.
#[test]
fn the_time_limit_stops_a_long_command_within_a_second() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("limits-time");
    std::fs::create_dir_all(&dir).unwrap();
    let depth = 100_000;
    let path = dir.join("sin.atl");
    let text = format!(
        "(fn f ((x R)) {}x{})",
        "(sin ".repeat(depth),
        ")".repeat(depth)
    );
    std::fs::write(&path, text).unwrap();
    // Either command needs tens of seconds for this program; with a limit of
    // one second it must fail, naming the flag, soon after the limit.
    // The limit is CPU time: the child's own, measured by `wait4`, whatever
    // else the machine runs.
    for command in ["grad", "jvp"] {
        let out = common::cpu::run_child(Command::new(BIN).args([
            command,
            path.to_str().unwrap(),
            "--time-limit",
            "1",
        ]));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.code, Some(1), "{command}: {err}");
        assert!(err.contains("--time-limit"), "{err}");
        // parsing, the passes before differentiation (which do not look at
        // the clock) and freeing 100,000-deep terms add about two seconds
        assert!(
            out.cpu < Duration::from_secs(1 + 4),
            "{command}: {:?}",
            out.cpu
        );
    }
}

/// A count that would take half a minute (a sum over `n²` pairs whose
/// bracket, a disjunction of five equalities, is evaluated pair by pair)
/// stops at `--time-limit`, within about a second, naming the flag.
#[test]
fn the_time_limit_stops_a_long_count() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("limits-count");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("count.atl");
    let p = "(fn f ((x (tensor n R))) (sum i n (sum j n (iverson (or (== (* 2 i) (* 3 j)) \
             (or (== (* 5 i) (* 7 j)) (or (== (* 11 i) (* 13 j)) (or (== (* 17 i) (* 19 j)) \
             (== (* 23 i) (* 29 j)))))) (get x j)))))";
    std::fs::write(&path, p).unwrap();
    let out = common::cpu::run_child(
        Command::new(BIN)
            .args(["cost", path.to_str().unwrap(), "--sizes", "n=15000"])
            .args(["--time-limit", "1"]),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.code, Some(1), "{err}");
    assert!(err.contains("--time-limit"), "{err}");
    // about a second of CPU time, the limit's, whatever the machine's load
    assert!(out.cpu < Duration::from_secs(1 + 2), "{:?}", out.cpu);
}

/// A command that would hold more memory than `--memory-limit` fails with
/// an error naming the flag, exit status 1 (the evaluation of a 5,000 by
/// 5,000 matrix, hundreds of MB, under a cap of 64 MiB); a small command
/// runs under the same cap.
#[test]
fn the_memory_limit_fails_a_command_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("limits-memory");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("square.atl");
    std::fs::write(&path, "(fn f ((n size) (y R)) (gen i n (gen j n y)))").unwrap();
    let inputs = dir.join("in.json");
    std::fs::write(&inputs, r#"{"y": 1}"#).unwrap();
    let (path, inputs) = (path.to_str().unwrap(), inputs.to_str().unwrap());
    let eval = |n: &str| {
        Command::new(BIN)
            .args(["eval", path, "--inputs", inputs, "--sizes", n])
            .args(["--memory-limit", "0.0625"])
            .output()
            .unwrap()
    };
    let out = eval("n=5000");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--memory-limit"), "{err}");
    let out = eval("n=3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(out.stdout.iter().filter(|b| **b == b'1').count(), 9);
}

/// The statistics' total (`--stats`) counts every phase, differentiation
/// included (it once left the derivatives' phases out): it is at least the
/// sum of the phases' times, for each derivative.
#[test]
fn the_statistics_total_includes_every_phase() {
    atl_egg::with_big_stack(|| {
        let p = long_chain(50);
        let w = [x()];
        for (what, d) in [
            ("grad", derive::grad(&p, &w, &opts())),
            ("vjp", derive::vjp(&p, &w, &opts())),
            ("jvp", derive::jvp(&p, &w, &opts())),
            ("hvp", derive::hvp(&p, &w, &opts())),
        ] {
            let s = d.unwrap().stats;
            let phases: f64 = s.phases.iter().map(|p| p.seconds).sum();
            assert!(!s.phases.is_empty() && phases > 0.0, "{what}: {s:?}");
            assert!(
                s.seconds >= phases,
                "{what}: total {} < phases {phases}",
                s.seconds
            );
        }
    });
}

/// `x` under `depth` nested `sin`s.
fn nested_sin(depth: usize) -> Program {
    let text = format!(
        "(fn f ((x R)) {}x{})",
        "(sin ".repeat(depth),
        ")".repeat(depth)
    );
    atl_egg::parse(&text).unwrap()
}

/// `grad` of a chain of nested black boxes takes time linear in its depth
/// (each binding found its inner products by scanning all of them, and
/// let-lifting copied the rest of the chain at every binding): 20,000
/// nested `sin` equal to dual numbers, in at most 8 times (linear: 4) the
/// CPU time of 5,000 (a few seconds; the time limit is raised only because
/// tests run side by side).
#[test]
fn grad_of_nested_sin_is_linear_in_the_depth() {
    atl_egg::with_big_stack(|| {
        let mut took = vec![];
        for depth in [5_000, 20_000] {
            let p = nested_sin(depth);
            let (g, cpu) = common::cpu::measure(|| {
                derive::grad(&p, &[x()], &opts())
                    .unwrap_or_else(|e| panic!("{depth} nested sin: {e}"))
                    .program
            });
            took.push(cpu);
            let mut inputs = Inputs::default();
            inputs.values.insert(x(), Value::Real(0.3));
            let got = evaluate(&g, &inputs).unwrap();
            let (_, want) =
                dual_jvp(&p, &inputs, &HashMap::from([(x(), Value::Real(1.0))])).unwrap();
            assert!(
                close(inner_product(&got, &got), inner_product(&want, &want)),
                "{depth} nested sin: {got:?}, dual numbers {want:?}"
            );
            eprintln!("grad of {depth} nested sin: {:?}", took.last().unwrap());
        }
        assert!(
            took[1] < took[0] * 8 + Duration::from_secs(5),
            "5,000 then 20,000 nested sin, CPU time: {took:?}"
        );
    });
}

/// `grad` of 2,000 nested pairs, `(fst (snd (pair x (pair ... x))))`,
/// (it once took 120 s and 1.5 GB; now well under the default time limit,
/// raised here only because tests run side by side): the derivative of `x`
/// is 1.
#[test]
fn grad_of_2000_nested_pairs_finishes() {
    atl_egg::with_big_stack(|| {
        let mut e = "x".to_string();
        for _ in 0..2_000 {
            e = format!("(fst (snd (pair x (pair {e} x))))");
        }
        let p = atl_egg::parse(&format!("(fn f ((x R)) {e})")).unwrap();
        let g = derive::grad(&p, &[x()], &opts()).unwrap().program;
        let mut inputs = Inputs::default();
        inputs.values.insert(x(), Value::Real(0.3));
        let got = evaluate(&g, &inputs).unwrap();
        assert!(matches!(got, Value::Real(v) if close(v, 1.0)), "{got:?}");
    });
}

/// `grad` of 20,000 nested pairs, as the command line runs it (it once
/// aborted on an allocation under 8 GiB): a result, the derivative 1, or
/// a clean failure naming the limit it reached (exit status 1), never a
/// signal.
#[test]
fn grad_of_20000_nested_pairs_finishes_or_fails_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("limits-pairs");
    std::fs::create_dir_all(&dir).unwrap();
    let mut e = "x".to_string();
    for _ in 0..20_000 {
        e = format!("(fst (snd (pair x (pair {e} x))))");
    }
    let path = dir.join("pairs.atl");
    std::fs::write(&path, format!("(fn f ((x R)) {e})")).unwrap();
    let out = Command::new(BIN)
        .args(["grad", path.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        let g = atl_egg::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
        let mut inputs = Inputs::default();
        inputs.values.insert(x(), Value::Real(0.3));
        let got = evaluate(&g, &inputs).unwrap();
        assert!(matches!(got, Value::Real(v) if close(v, 1.0)), "{got:?}");
    } else {
        assert_eq!(out.status.code(), Some(1), "{:?}: {err}", out.status);
        assert!(
            err.contains("--time-limit") || err.contains("--memory-limit"),
            "{err}"
        );
    }
}
