//! Tensors stored by a relation's pattern (`(tensor n m R (stored-by S))`):
//! the stored program means the dense one on the dense tensor that is zero
//! off the pattern. Checked on random patterns and values:
//! * its value equals the dense program's on the scattered input;
//! * `grad`, `jvp`, `vjp` and `hvp` with respect to a stored tensor give
//!   (and take) one value per tuple, equal to the dual-number derivatives of
//!   the dense program at the tuples;
//! * every derivative prints with its storage and reads back to an equal
//!   program;
//! * compiled code of the function and its derivatives equals the
//!   evaluator and executes the operations the cost counts, on random
//!   patterns with empty rows, no tuple or a single one; it takes and
//!   returns stored tensors as one value per tuple, so it runs at sizes
//!   where a dense matrix would not fit in memory.

use crate::common;

use atl_egg::egraph::Options;
use atl_egg::front::ast::Program;
use atl_egg::rng::Rng;
use atl_egg::semantics::dual::jvp as dual_jvp;
use atl_egg::semantics::eval::evaluate;
use atl_egg::semantics::stored::{gather, scatter};
use atl_egg::semantics::value::{flatten, Inputs, Value};
use atl_egg::Symbol;
use serde_json::{json, Value as Json};
use std::collections::HashMap;

const BODY: &str = "(sum i n (let r (- (sum j m (iverson (S i j) (* (sin (get A i j)) (get x j)))) (get y i)) (* r r)))";

fn stored_loss() -> Program {
    atl_egg::parse(&format!(
        "(fn f ((A (tensor n m R (stored-by S))) (S (relation n m)) (x (tensor m R)) (y (tensor n R)))\n  {BODY})"
    ))
    .unwrap()
}

fn dense_loss() -> Program {
    atl_egg::parse(&format!(
        "(fn f ((A (tensor n m R)) (S (relation n m)) (x (tensor m R)) (y (tensor n R)))\n  {BODY})"
    ))
    .unwrap()
}

/// A random case: the pattern's tuples (sorted), the stored values, `x`, `y`.
struct Case {
    n: usize,
    m: usize,
    tuples: Vec<[usize; 2]>,
    vals: Vec<f64>,
    x: Vec<f64>,
    y: Vec<f64>,
}

fn case(seed: u64) -> Case {
    let mut rng = Rng::new(seed);
    let (n, m) = (1 + rng.below(5), 1 + rng.below(5));
    let mut tuples = vec![];
    for i in 0..n {
        for j in 0..m {
            if rng.chance(0.4) {
                tuples.push([i, j]);
            }
        }
    }
    let mut real = |k: usize| (0..k).map(|_| rng.unit()).collect::<Vec<f64>>();
    let vals = real(tuples.len());
    let (x, y) = (real(m), real(n));
    Case {
        n,
        m,
        tuples,
        vals,
        x,
        y,
    }
}

impl Case {
    fn relation(&self) -> Json {
        json!({"tuples": self.tuples, "shape": [self.n, self.m]})
    }

    fn dense_a(&self) -> Vec<Vec<f64>> {
        let mut a = vec![vec![0.0; self.m]; self.n];
        for (t, v) in self.tuples.iter().zip(&self.vals) {
            a[t[0]][t[1]] = *v;
        }
        a
    }

    /// The inputs of the stored program (`extra`: more parameters).
    fn stored_inputs(&self, prog: &Program, extra: Json) -> Inputs {
        let mut j = json!({"A": self.vals, "S": self.relation(), "x": self.x, "y": self.y});
        for (k, v) in extra.as_object().unwrap() {
            j[k] = v.clone();
        }
        atl_egg::inputs(prog, &j.to_string(), &[]).unwrap()
    }

    fn dense_inputs(&self, prog: &Program) -> Inputs {
        let j = json!({"A": self.dense_a(), "S": self.relation(), "x": self.x, "y": self.y});
        atl_egg::inputs(prog, &j.to_string(), &[]).unwrap()
    }
}

/// The JSON output of `prog` on `inputs`, as reals (pairs flattened).
fn out(prog: &Program, inputs: &Inputs) -> Vec<f64> {
    let v = evaluate(prog, inputs).unwrap();
    let text = atl_egg::to_json(prog, &v, inputs).unwrap();
    let mut xs = vec![];
    fn walk(j: &Json, xs: &mut Vec<f64>) {
        match j {
            Json::Array(a) => a.iter().for_each(|e| walk(e, xs)),
            Json::Number(k) => xs.push(k.as_f64().unwrap()),
            _ => panic!("unexpected {j}"),
        }
    }
    walk(&serde_json::from_str(&text).unwrap(), &mut xs);
    xs
}

fn close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: {a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() <= 1e-9 * (1.0 + y.abs()),
            "{what}: {a:?} vs {b:?}"
        );
    }
}

/// The dual-number derivative of the dense loss along `dir` (a dense `A`
/// tangent), at the case's inputs.
fn dual_along(c: &Case, prog: &Program, wrt: &str, dir: Value) -> Value {
    let inputs = c.dense_inputs(prog);
    let tangents = HashMap::from([(Symbol::from(wrt), dir)]);
    dual_jvp(prog, &inputs, &tangents).unwrap().1
}

fn rel_of(c: &Case, prog: &Program) -> atl_egg::semantics::value::Relation {
    c.dense_inputs(prog).relations[&Symbol::from("S")].clone()
}

fn round_trip(p: &Program) -> Program {
    let text = atl_egg::print(p);
    let q = atl_egg::parse(&text).unwrap_or_else(|e| panic!("{text}\n{e:?}"));
    assert_eq!(q.stored, p.stored, "{text}");
    q
}

#[test]
fn the_value_is_the_dense_programs() {
    let (s, d) = (stored_loss(), dense_loss());
    for seed in 0..20 {
        let c = case(seed);
        close(
            &out(&s, &c.stored_inputs(&s, json!({}))),
            &out(&d, &c.dense_inputs(&d)),
            "f",
        );
    }
}

#[test]
fn grad_is_one_value_per_tuple_and_equals_dual_numbers() {
    let (s, d) = (stored_loss(), dense_loss());
    let opts = Options::default();
    let g = round_trip(&atl_egg::grad(&s, &["A", "x"], &opts).unwrap().program);
    for seed in 0..12 {
        let c = case(seed);
        let rel = rel_of(&c, &d);
        let got = out(&g, &c.stored_inputs(&g, json!({})));
        let mut want = vec![];
        for k in 0..c.tuples.len() {
            let mut e = vec![0.0; c.tuples.len()];
            e[k] = 1.0;
            want.push(
                dual_along(&c, &d, "A", scatter(&e, &rel).unwrap())
                    .real()
                    .unwrap(),
            );
        }
        for j in 0..c.m {
            let mut e = vec![0.0; c.m];
            e[j] = 1.0;
            want.push(dual_along(&c, &d, "x", Value::reals(&e)).real().unwrap());
        }
        close(&got, &want, &format!("grad, seed {seed}"));
    }
}

#[test]
fn jvp_takes_a_stored_tangent_and_equals_dual_numbers() {
    let (s, d) = (stored_loss(), dense_loss());
    let j = round_trip(
        &atl_egg::jvp(&s, &["A"], &Options::default())
            .unwrap()
            .program,
    );
    for seed in 0..12 {
        let c = case(seed);
        let dir: Vec<f64> = c.vals.iter().map(|v| 0.5 - v).collect();
        let got = out(&j, &c.stored_inputs(&j, json!({ "dA": dir })));
        let want = dual_along(&c, &d, "A", scatter(&dir, &rel_of(&c, &d)).unwrap());
        close(&got, &[want.real().unwrap()], &format!("jvp, seed {seed}"));
    }
}

#[test]
fn hvp_along_a_stored_direction_equals_dual_numbers_of_the_gradient() {
    let (s, d) = (stored_loss(), dense_loss());
    let opts = Options::default();
    let h = round_trip(&atl_egg::hvp(&s, &["A"], &opts).unwrap().program);
    let dense_grad = atl_egg::grad(&d, &["A"], &opts).unwrap().program;
    for seed in 0..12 {
        let c = case(seed);
        let rel = rel_of(&c, &d);
        let dir: Vec<f64> = c.vals.iter().map(|v| v * v - 0.25).collect();
        let got = out(&h, &c.stored_inputs(&h, json!({ "dA": dir })));
        let dense = dual_along(&c, &dense_grad, "A", scatter(&dir, &rel).unwrap());
        let ty = dense_grad.ret.clone();
        let want = gather(&dense, &ty, &rel, &c.dense_inputs(&d).sizes).unwrap();
        close(&got, &want, &format!("hvp, seed {seed}"));
    }
}

/// A function returning a stored tensor: its vjp takes one cotangent per
/// tuple; `<vjp(w), v> = <w, jvp(v)>` with the jvp by dual numbers.
#[test]
fn vjp_of_a_stored_result_takes_a_stored_cotangent() {
    let text = |stored: &str, ret: &str| {
        format!(
            "(fn h ((A (tensor n m R{stored})) (S (relation n m)) (x (tensor m R)) (y (tensor n R))){ret}\n  \
             (gen i n (gen j m (* (get A i j) (sin (* (get x j) (get y i)))))))"
        )
    };
    let s = atl_egg::parse(&text(" (stored-by S)", " -> (tensor n m R (stored-by S))")).unwrap();
    let d = atl_egg::parse(&text("", "")).unwrap();
    let v = round_trip(
        &atl_egg::vjp(&s, &["A", "x"], &Options::default())
            .unwrap()
            .program,
    );
    for seed in 0..12 {
        let c = case(seed);
        let rel = rel_of(&c, &d);
        let w: Vec<f64> = (0..c.tuples.len()).map(|k| 1.0 - 0.3 * k as f64).collect();
        let got = out(&v, &c.stored_inputs(&v, json!({ "ct": w })));
        let sizes = c.dense_inputs(&d).sizes;
        let mut want = vec![];
        let units = (0..c.tuples.len())
            .map(|k| ("A", k, c.tuples.len()))
            .chain((0..c.m).map(|j| ("x", j, c.m)));
        for (x, k, len) in units {
            let mut e = vec![0.0; len];
            e[k] = 1.0;
            let dir = if x == "A" {
                scatter(&e, &rel).unwrap()
            } else {
                Value::reals(&e)
            };
            let t = gather(&dual_along(&c, &d, x, dir), &d.ret, &rel, &sizes).unwrap();
            want.push(t.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>());
        }
        close(&got, &want, &format!("vjp, seed {seed}"));
        let f = out(&s, &c.stored_inputs(&s, json!({})));
        let dense = flatten(&evaluate(&d, &c.dense_inputs(&d)).unwrap(), &d.ret, &sizes).unwrap();
        assert_eq!(f.len(), c.tuples.len());
        assert!(dense.iter().filter(|x| **x != 0.0).count() <= f.len());
    }
}

/// The input/output cost counts a stored tensor, given or returned, as one
/// real per tuple; the gradient's values are computed only at the tuples,
/// even where the function reads the tensor everywhere.
#[test]
fn io_cost_counts_one_real_per_tuple_and_gradients_compute_only_tuples() {
    use atl_egg::semantics::cost::{cost, io_cost};
    let (s, d) = (stored_loss(), dense_loss());
    let opts = Options::default();
    let (gs, gd) = (
        atl_egg::grad(&s, &["A"], &opts).unwrap().program,
        atl_egg::grad(&d, &["A"], &opts).unwrap().program,
    );
    let everywhere = atl_egg::parse(
        "(fn f ((A (tensor n m R (stored-by S))) (S (relation n m)) (B (tensor n m R)))\n  \
         (sum i n (sum j m (* (get A i j) (sin (get B i j))))))",
    )
    .unwrap();
    let ge = atl_egg::grad(&everywhere, &["A"], &opts).unwrap().program;
    for seed in 0..8 {
        let c = case(seed);
        let inputs = c.dense_inputs(&d);
        let (sz, rels) = (&inputs.sizes, &inputs.relations);
        let dense_extra = (c.n * c.m - c.tuples.len()) as u128;
        let f = io_cost(&s, sz, rels).unwrap();
        assert_eq!(f + dense_extra, io_cost(&d, sz, rels).unwrap());
        assert_eq!(
            io_cost(&gs, sz, rels).unwrap() + 2 * dense_extra,
            io_cost(&gd, sz, rels).unwrap()
        );
        assert!(io_cost(&gs, sz, rels).unwrap() <= 4 * f, "seed {seed}");
        assert_eq!(
            cost(&ge, sz, rels).unwrap(),
            c.tuples.len() as u128,
            "seed {seed}"
        );
    }
}

/// The stored loss and its grad (w.r.t. `A` and `x`), jvp and vjp (w.r.t.
/// `A`), named.
fn loss_and_derivatives(s: &Program, opts: &Options) -> Vec<(&'static str, Program)> {
    vec![
        ("f", s.clone()),
        ("grad", atl_egg::grad(s, &["A", "x"], opts).unwrap().program),
        ("jvp", atl_egg::jvp(s, &["A"], opts).unwrap().program),
        ("vjp", atl_egg::vjp(s, &["A"], opts).unwrap().program),
    ]
}

#[test]
fn compiled_code_of_stored_programs_equals_the_evaluator() {
    if !common::run_check::have_cc() {
        return;
    }
    let s = stored_loss();
    let opts = Options::default();
    let progs = loss_and_derivatives(&s, &opts);
    for seed in [3, 7] {
        let c = case(seed);
        for (what, p) in &progs {
            let extra = json!({"dA": c.vals, "ct": 0.5});
            let inputs = c.stored_inputs(p, extra);
            common::run_check::check(p, &inputs, what).unwrap();
        }
    }
}

/// A random pattern of one of the shapes compiled code must handle: rows
/// left empty, no tuple at all, a single tuple, or dense-ish.
fn shaped_case(seed: u64, shape: usize) -> Case {
    let mut c = case(seed);
    let mut rng = Rng::new(seed ^ 0x5eed);
    c.tuples = match shape {
        0 => vec![],
        1 => vec![[rng.below(c.n), rng.below(c.m)]],
        // every other row empty
        2 => c.tuples.iter().copied().filter(|t| t[0] % 2 == 1).collect(),
        _ => c.tuples.clone(),
    };
    c.vals = (0..c.tuples.len()).map(|_| rng.unit()).collect();
    c
}

#[test]
fn compiled_stored_programs_equal_the_evaluator_on_empty_rows_empty_and_single_patterns() {
    if !common::run_check::have_cc() {
        return;
    }
    let s = stored_loss();
    let opts = Options::default();
    // a read off the relation's loops (a lookup), a stored result that is
    // not a gen (computed dense, gathered) and one that is (over the tuples)
    let other = atl_egg::parse(
        "(fn h ((A (tensor n m R (stored-by S))) (S (relation n m)) (x (tensor m R)) (y (tensor n R))) \
         -> (pair (tensor n m R (stored-by S)) (pair (tensor n m R (stored-by S)) R))\n  \
         (pair A (pair (gen i n (gen j m (* (get x j) (get A i j)))) \
         (sum i n (sum j m (* (get A i j) (* (get x j) (get y i))))))))",
    )
    .unwrap();
    let mut progs = loss_and_derivatives(&s, &opts);
    progs.push(("hvp", atl_egg::hvp(&s, &["A"], &opts).unwrap().program));
    progs.push(("h", other));
    // a stored result's vjp: it takes one cotangent per tuple
    let r = atl_egg::parse(
        "(fn r ((A (tensor n m R (stored-by S))) (S (relation n m)) (x (tensor m R)) (y (tensor n R))) \
         -> (tensor n m R (stored-by S))\n  (gen i n (gen j m (* (get A i j) (sin (* (get x j) (get y i)))))))",
    )
    .unwrap();
    let rv = atl_egg::vjp(&r, &["A", "x"], &opts).unwrap().program;
    for seed in [11, 12, 13] {
        for shape in 0..4 {
            let c = shaped_case(seed, shape);
            let inputs = c.stored_inputs(&rv, json!({ "ct": c.vals }));
            common::run_check::check(
                &rv,
                &inputs,
                &format!("vjp of r, seed {seed}, shape {shape}"),
            )
            .unwrap();
            for (what, p) in &progs {
                let extra = json!({"dA": c.vals, "ct": 0.5});
                let inputs = c.stored_inputs(p, extra);
                common::run_check::check(
                    p,
                    &inputs,
                    &format!("{what}, seed {seed}, shape {shape}"),
                )
                .unwrap();
            }
        }
    }
}

/// The compressed layout of the pattern with `per_row` tuples in each of
/// `n` rows of `m` columns (columns spread over the row, ascending).
fn banded(n: usize, m: usize, per_row: usize) -> (Vec<i64>, Vec<[usize; 2]>) {
    let mut tuples = vec![];
    for i in 0..n {
        for k in 0..per_row {
            tuples.push([i, (i * 7 + k * (m / per_row)) % m]);
        }
        let row = tuples.len() - per_row..;
        tuples[row].sort();
    }
    let t: Vec<Vec<usize>> = tuples.iter().map(|t| t.to_vec()).collect();
    (
        atl_egg::backend::marshal::compressed_layout(&[n, m], &t),
        tuples,
    )
}

#[test]
fn compiled_stored_programs_run_where_a_dense_matrix_would_not_fit() {
    if !common::run_check::have_cc() {
        return;
    }
    // n = m = 200000: a dense A or gradient would take 320 GB; 10 tuples a
    // row take 16 MB. The library is called directly, as the C ABI says.
    let (n, m, per_row) = (200_000usize, 200_000usize, 10usize);
    let (layout, tuples) = banded(n, m, per_row);
    let prog = atl_egg::parse(&std::fs::read_to_string("corpus/sparse_matvec_stored.atl").unwrap())
        .unwrap();
    let g = atl_egg::grad(&prog, &["A", "x"], &Options::default())
        .unwrap()
        .program;
    let a: Vec<f64> = (0..tuples.len())
        .map(|k| ((k % 13) as f64) / 13.0)
        .collect();
    let x: Vec<f64> = (0..m).map(|j| ((j % 7) as f64) / 7.0 - 0.5).collect();
    let y: Vec<f64> = (0..n).map(|i| ((i % 5) as f64) / 5.0).collect();
    // the residuals, the value and the gradients, directly
    let mut r = vec![0.0; n];
    for (t, v) in tuples.iter().zip(&a) {
        r[t[0]] += v * x[t[1]];
    }
    for i in 0..n {
        r[i] -= y[i];
    }
    let f: f64 = r.iter().map(|v| v * v).sum();
    let call = |p: &Program, outs: &mut [Vec<f64>]| {
        let compiled = atl_egg::backend::compile(p).unwrap();
        let entry = compiled.packed_entry().unwrap();
        let sizes = [n as i64, m as i64];
        let reals = [a.as_ptr(), x.as_ptr(), y.as_ptr()];
        let rels = [layout.as_ptr()];
        let ptrs: Vec<*mut f64> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
        // SAFETY: the buffers have the sizes the manifest gives at these
        // sizes (A and the stored gradient: one value per tuple).
        let rc = unsafe { entry(sizes.as_ptr(), reals.as_ptr(), rels.as_ptr(), ptrs.as_ptr()) };
        assert_eq!(rc, 0, "{}", p.name);
    };
    let mut out = vec![vec![0.0; 1]];
    call(&prog, &mut out);
    assert!(
        (out[0][0] - f).abs() <= 1e-9 * f.abs().max(1.0),
        "{} vs {f}",
        out[0][0]
    );
    let mut outs = vec![vec![0.0; tuples.len()], vec![0.0; m]];
    call(&g, &mut outs);
    for (k, t) in tuples.iter().enumerate().step_by(997) {
        let want = 2.0 * r[t[0]] * x[t[1]];
        assert!(
            (outs[0][k] - want).abs() <= 1e-9 * (1.0 + want.abs()),
            "dA at {t:?}"
        );
    }
    let mut dx = vec![0.0; m];
    for (t, v) in tuples.iter().zip(&a) {
        dx[t[1]] += 2.0 * r[t[0]] * v;
    }
    for j in (0..m).step_by(991) {
        assert!(
            (outs[1][j] - dx[j]).abs() <= 1e-9 * (1.0 + dx[j].abs()),
            "dx at {j}"
        );
    }
}

/// `atl-egg CMD FILE --inputs INPUTS`, with the program and inputs written
/// to files: exit status, standard output and error.
fn atl_on_files(cmd: &str, prog: &Program, inputs: &Json, tag: &str) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!("atl-stored-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (p, i) = (dir.join("p.atl"), dir.join("in.json"));
    std::fs::write(&p, atl_egg::print(prog)).unwrap();
    std::fs::write(&i, inputs.to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_atl-egg"))
        .arg(cmd)
        .arg(&p)
        .arg("--inputs")
        .arg(&i)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[test]
fn run_takes_and_gives_stored_tensors_by_their_values_where_eval_cannot_expand_them() {
    if !common::run_check::have_cc() {
        return;
    }
    let prog = atl_egg::parse(&std::fs::read_to_string("corpus/sparse_matvec_stored.atl").unwrap())
        .unwrap();
    let g = atl_egg::grad(&prog, &["A"], &Options::default())
        .unwrap()
        .program;
    // small: `run` prints what `eval` prints
    let c = case(5);
    let small = json!({"A": c.vals, "S": c.relation(), "x": c.x, "y": c.y});
    let (rc, ran, err) = atl_on_files("run", &g, &small, "small-run");
    assert_eq!(rc, 0, "{err}");
    let (rc, evaluated, err) = atl_on_files("eval", &g, &small, "small-eval");
    assert_eq!(rc, 0, "{err}");
    let reals = |t: &str| -> Vec<f64> {
        let j: Json = serde_json::from_str(t).unwrap();
        j.as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    close(&reals(&ran), &reals(&evaluated), "run against eval");
    // 10^6 x 10^6 with a few tuples: a dense A would take 8 TB
    let n = 1_000_000usize;
    let tuples: Vec<[usize; 2]> = (0..7)
        .map(|k| [k * 99_991 + 3, (k * 7_919 + 11) % n])
        .collect();
    let a: Vec<f64> = (0..tuples.len()).map(|k| 0.25 + k as f64).collect();
    let x = |j: usize| ((j % 7) as f64) / 7.0 - 0.5;
    let y = |i: usize| ((i % 5) as f64) / 5.0;
    let big = json!({
        "S": {"tuples": tuples, "shape": [n, n]},
        "A": a,
        "x": (0..n).map(x).collect::<Vec<_>>(),
        "y": (0..n).map(y).collect::<Vec<_>>(),
    });
    let (rc, ran, err) = atl_on_files("run", &g, &big, "big-run");
    assert_eq!(rc, 0, "{err}");
    // each tuple is alone in its row: r_i = A_t x_j - y_i, dA_t = 2 r_i x_j
    let want: Vec<f64> = tuples
        .iter()
        .zip(&a)
        .map(|(t, v)| 2.0 * (v * x(t[1]) - y(t[0])) * x(t[1]))
        .collect();
    close(&reals(&ran), &want, "run at 10^6 x 10^6");
    let (rc, _, err) = atl_on_files("eval", &g, &big, "big-eval");
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains("too large to expand densely"), "{err}");
}
