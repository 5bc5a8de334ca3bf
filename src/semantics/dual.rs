//! Forward mode with dual numbers: every expression evaluates to a pair
//! (value, tangent) of values of the same type, which gives the exact
//! directional derivative (the JVP) of a program.
//!
//! The rules are the textbook ones and mirror the reference's `dv`: constants
//! have tangent zero, `+` adds tangents, `*` uses the product rule
//! `(a, da) * (b, db) = (a b, da b + a db)` (in that order of operations), a
//! black box uses the chain rule through [`Func::derivative`](crate::front::ast::Func::derivative), `pair`,
//! `fst`, `snd`, `gen`, `get` act on both parts, a `sum` chain sums both parts
//! (in the evaluator's order), and `let` binds both parts. Zeros are
//! [`Value::Zero`] in both parts, read as `0.0` (so `0 * inf` stays NaN exactly
//! as with explicit zeros). The environment, loops and predicates are the
//! evaluator's ([`Env`] with variables bound to dual pairs).

use super::eval::{checked_inputs, eval_pred, reduced, sum_chain, Budget, Env};
use super::value::{check_value, Inputs, Value};
use crate::error::{Error, Result};
use crate::front::ast::{Expr, ParamKind, Program};
use crate::symbol::Symbol;
use std::collections::HashMap;

/// A value and its tangent.
pub type Dual = (Value, Value);

/// An environment binding variables to dual pairs.
pub type DualEnv = Env<Dual>;

/// Evaluate an (open) expression on dual numbers.
pub fn dual_expr(e: &Expr, env: &mut DualEnv, budget: &mut Budget) -> Result<Dual> {
    Ok(match e {
        Expr::Var(x) => env.lookup(*x)?,
        Expr::Const(c) => (Value::Real(c.0), Value::Real(0.0)),
        Expr::Add(a, b) => {
            let (a0, a1) = reals(dual_expr(a, env, budget)?)?;
            let (b0, b1) = reals(dual_expr(b, env, budget)?)?;
            (Value::Real(a0 + b0), Value::Real(a1 + b1))
        }
        Expr::Mul(a, b) => {
            let (a0, a1) = reals(dual_expr(a, env, budget)?)?;
            let (b0, b1) = reals(dual_expr(b, env, budget)?)?;
            (Value::Real(a0 * b0), Value::Real(a1 * b0 + a0 * b1))
        }
        Expr::MaxMin(m, a, b) => {
            let (a0, a1) = reals(dual_expr(a, env, budget)?)?;
            let (b0, b1) = reals(dual_expr(b, env, budget)?)?;
            let d = if m.selects_second(a0, b0) { b1 } else { a1 };
            (Value::Real(m.apply(a0, b0)), Value::Real(d))
        }
        Expr::IndexReal(a) => (Value::Real(env.affine(a)? as f64), Value::Real(0.0)),
        Expr::Call(f, a) => {
            let (x, dx) = reals(dual_expr(a, env, budget)?)?;
            let v = f.apply(x);
            (Value::Real(v), Value::Real(f.derivative(x, v) * dx))
        }
        Expr::Pair(a, b) => {
            let (a0, a1) = dual_expr(a, env, budget)?;
            let (b0, b1) = dual_expr(b, env, budget)?;
            (Value::pair(a0, b0), Value::pair(a1, b1))
        }
        Expr::Fst(a) => {
            let (v, d) = dual_expr(a, env, budget)?;
            (v.fst()?, d.fst()?)
        }
        Expr::Snd(a) => {
            let (v, d) = dual_expr(a, env, budget)?;
            (v.snd()?, d.snd()?)
        }
        Expr::Gen(i, d, body) => {
            let n = env.dim(d)?;
            let pairs = env.gen_elements(
                *i,
                n,
                super::eval::bracket(body),
                budget,
                || (Value::Zero, Value::Zero),
                |env, budget| dual_expr(body, env, budget),
            )?;
            let (vs, ds) = pairs.into_iter().unzip();
            (Value::tensor(vs), Value::tensor(ds))
        }
        Expr::Sum(..) => {
            let (chain, pred, body) = sum_chain(e);
            let chain = env.loops(&chain)?;
            let (mut av, mut ad) = (0.0, 0.0);
            env.for_each_tuple_where(&chain, pred, budget, |env, budget| {
                if pred.map_or(Ok(true), |p| eval_pred(p, env, budget))? {
                    let (v, d) = reals(dual_expr(body, env, budget)?)?;
                    av += v;
                    ad += d;
                }
                Ok(false)
            })?;
            (Value::Real(av), Value::Real(ad))
        }
        Expr::Reduce(r, i, d, body) => {
            // the value of the fold, the tangent of the element it selects
            // (the one-hot selection is constant: tangent zero)
            let n = env.dim(d)?;
            let (mut vs, mut ds) = (Vec::new(), Vec::new());
            env.for_each_tuple(&[(*i, n)], budget, |env, budget| {
                let (v, d) = reals(dual_expr(body, env, budget)?)?;
                vs.push(v);
                ds.push(d);
                Ok(false)
            })?;
            let v = reduced(*r, &vs);
            let (_, sel) = r.fold(vs.iter().copied());
            let t = if r.is_arg() {
                Value::tensor(vs.iter().map(|_| Value::Real(0.0)).collect())
            } else {
                Value::Real(sel.map_or(0.0, |k| ds[k]))
            };
            (v, t)
        }
        Expr::Get(a, k) => {
            let (v, d) = dual_expr(a, env, budget)?;
            let k = env.affine(k)?;
            (v.get(k)?, d.get(k)?)
        }
        Expr::Iverson(p, a) => {
            if eval_pred(p, env, budget)? {
                dual_expr(a, env, budget)?
            } else {
                (Value::Zero, Value::Zero)
            }
        }
        Expr::Let(x, a, b) => {
            let v = dual_expr(a, env, budget)?;
            env.with_var(*x, v, |env| dual_expr(b, env, budget))?
        }
    })
}

fn reals((v, d): Dual) -> Result<(f64, f64)> {
    Ok((v.real()?, d.real()?))
}

/// The value of `prog` at `inputs` and its derivative along `tangents` (real
/// inputs without a tangent get tangent zero), with the default budget.
pub fn jvp(
    prog: &Program,
    inputs: &Inputs,
    tangents: &HashMap<Symbol, Value>,
) -> Result<(Value, Value)> {
    jvp_with_budget(prog, inputs, tangents, &mut Budget::default())
}

/// [`jvp`] with an explicit budget. A tangent for something that is not a
/// real-valued input, or of the wrong shape, is an input error.
pub fn jvp_with_budget(
    prog: &Program,
    inputs: &Inputs,
    tangents: &HashMap<Symbol, Value>,
    budget: &mut Budget,
) -> Result<(Value, Value)> {
    let mut names: Vec<&Symbol> = tangents.keys().collect();
    names.sort_by_key(|s| s.as_str());
    for name in names {
        match prog.param(*name).map(|p| &p.kind) {
            Some(ParamKind::Real(ty)) => check_value(
                &tangents[name],
                ty,
                &inputs.sizes,
                &format!("tangent {name}"),
            )?,
            _ => {
                return Err(Error::input(format!(
                    "tangent for '{name}', which is not a real-valued input"
                )))
            }
        }
    }
    let inputs = super::stored::expanded(prog, inputs)?;
    let (mut env, reals) = checked_inputs::<Dual>(prog, &inputs)?;
    for (name, v) in reals {
        let d = tangents.get(&name).cloned().unwrap_or(Value::Zero);
        env.push_var(name, (v.clone(), d));
    }
    dual_expr(&prog.body, &mut env, budget)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::front::affine::Affine;
    use crate::front::ast::build::*;
    use crate::front::ast::{Func, Pred, Type};
    use crate::front::parse_program;
    use crate::rng::Rng;
    use crate::semantics::eval::evaluate;
    use crate::semantics::numerics::inner_product;
    use crate::semantics::value::{flatten, random_relation, random_value, Sizes};

    fn s(x: &str) -> Symbol {
        Symbol::from(x)
    }

    /// Random inputs and tangents for every real input of `prog`.
    fn random_point(prog: &Program, sizes: &Sizes, seed: u64) -> (Inputs, HashMap<Symbol, Value>) {
        let mut rng = Rng::new(seed);
        let mut rng = || rng.unit();
        let mut inputs = Inputs::new(sizes.clone());
        let mut tangents = HashMap::new();
        for p in &prog.params {
            match &p.kind {
                ParamKind::Real(ty) => {
                    inputs
                        .values
                        .insert(p.name, random_value(ty, sizes, &mut rng).unwrap());
                    tangents.insert(p.name, random_value(ty, sizes, &mut rng).unwrap());
                }
                ParamKind::Relation(dims) => {
                    let r = random_relation(dims, sizes, 0.5, &mut rng).unwrap();
                    inputs.relations.insert(p.name, r);
                }
                ParamKind::Size => {}
            }
        }
        (inputs, tangents)
    }

    /// `x + t * dx` for every real input.
    fn shifted(
        prog: &Program,
        inputs: &Inputs,
        tangents: &HashMap<Symbol, Value>,
        t: f64,
    ) -> Inputs {
        fn axpy(x: &Value, d: &Value, t: f64) -> Value {
            match (x, d) {
                (Value::Real(a), Value::Real(b)) => Value::Real(a + t * b),
                (Value::Pair(a0, a1), Value::Pair(b0, b1)) => {
                    Value::pair(axpy(a0, b0, t), axpy(a1, b1, t))
                }
                (Value::Tensor(xs), Value::Tensor(ds)) => Value::tensor(
                    xs.iter()
                        .zip(ds.iter())
                        .map(|(x, d)| axpy(x, d, t))
                        .collect(),
                ),
                _ => x.clone(),
            }
        }
        let mut out = inputs.clone();
        for (name, _) in prog.real_params() {
            if let Some(d) = tangents.get(&name) {
                let x = &inputs.values[&name];
                out.values.insert(name, axpy(x, d, t));
            }
        }
        out
    }

    /// JVP against a central finite difference of the evaluator.
    fn check_against_fd(text: &str, sizes: &[(&str, i64)]) {
        let prog = parse_program(text.as_bytes()).unwrap();
        let sizes: Sizes = sizes.iter().map(|&(k, v)| (s(k), v)).collect();
        for seed in 0..3 {
            let (inputs, tangents) = random_point(&prog, &sizes, seed);
            let (v, d) = jvp(&prog, &inputs, &tangents).unwrap();
            let v_plain = evaluate(&prog, &inputs).unwrap();
            assert_eq!(
                flatten(&v, &prog.ret, &sizes).unwrap(),
                flatten(&v_plain, &prog.ret, &sizes).unwrap(),
                "dual value differs from the evaluator: {text}"
            );
            let h = 1e-6;
            let hi = evaluate(&prog, &shifted(&prog, &inputs, &tangents, h)).unwrap();
            let lo = evaluate(&prog, &shifted(&prog, &inputs, &tangents, -h)).unwrap();
            let hi = flatten(&hi, &prog.ret, &sizes).unwrap();
            let lo = flatten(&lo, &prog.ret, &sizes).unwrap();
            let d = flatten(&d, &prog.ret, &sizes).unwrap();
            for ((h1, l1), d1) in hi.iter().zip(&lo).zip(&d) {
                let fd = (h1 - l1) / (2.0 * h);
                assert!(
                    (fd - d1).abs() <= 1e-5 * d1.abs().max(1.0),
                    "{text}: tangent {d1}, finite difference {fd}"
                );
            }
        }
    }

    #[test]
    fn jvp_matches_finite_differences() {
        check_against_fd(
            "(fn f ((x (tensor n R)) (y (tensor n R))) (sum i n (* (get x i) (get y i))))",
            &[("n", 4)],
        );
        check_against_fd(
            "(fn f ((A (tensor m n R)) (x (tensor n R)))\n (gen i m (sum j n (* (get A i j) (get x j)))))",
            &[("m", 3), ("n", 4)],
        );
        check_against_fd(
            "(fn f ((x (tensor n R)))\n (let s (sum i n (exp (get x i)))\n (gen i n (* (exp (get x i)) (recip s)))))",
            &[("n", 5)],
        );
        check_against_fd(
            "(fn f ((p (pair R (tensor n R))))\n (pair (sum i n (* (fst p) (tanh (get (snd p) i)))) (gen i n (sigmoid (get (snd p) (- i 1))))))",
            &[("n", 3)],
        );
        check_against_fd(
            "(fn f ((x (tensor n R)) (S (relation n n)))\n (sum i n (sum j n (iverson (and (S i j) (< i j)) (* (get x i) (sin (get x j)))))))",
            &[("n", 4)],
        );
        check_against_fd(
            "(fn f ((x R)) (+ (dtanh x) (+ (dsigmoid x) (+ (dcos x) (+ (pow (+ x 2) 3) (dpow (+ x 2) 2.5))))))",
            &[],
        );
        check_against_fd(
            "(fn f ((x (tensor n R))) (gen i n (+ (dsqrt (+ 2 (get x i))) (drecip (+ 3 (get x i))))))",
            &[("n", 2)],
        );
    }

    #[test]
    fn jvp_by_hand() {
        // f(x) = x * x * sin x, f'(x) = 2 x sin x + x^2 cos x
        let x = s("x");
        let body = mul(mul(var(x), var(x)), call(Func::named("sin"), var(x)));
        let prog = Program {
            name: s("f"),
            params: vec![crate::front::ast::Param {
                name: x,
                kind: ParamKind::Real(Type::Real),
            }],
            sizes: vec![],
            body,
            ret: Type::Real,
            stored: Default::default(),
        };
        let mut inputs = Inputs::new(Sizes::new());
        inputs.values.insert(x, Value::Real(0.7));
        let tangents = HashMap::from([(x, Value::Real(1.0))]);
        let (v, d) = jvp(&prog, &inputs, &tangents).unwrap();
        assert_eq!(v, Value::Real(0.7 * 0.7 * 0.7f64.sin()));
        let want = 2.0 * 0.7 * 0.7f64.sin() + 0.49 * 0.7f64.cos();
        assert!((d.real().unwrap() - want).abs() < 1e-15);
        // Without a tangent the derivative is zero.
        let (_, d0) = jvp(&prog, &inputs, &HashMap::new()).unwrap();
        assert_eq!(d0, Value::Real(0.0));
        // A tangent for a non-input is an input error, as is one of the wrong shape.
        let bad = HashMap::from([(s("y"), Value::Real(1.0))]);
        assert_eq!(
            jvp(&prog, &inputs, &bad).unwrap_err().kind,
            ErrorKind::Input
        );
        let bad = HashMap::from([(x, Value::reals(&[1.0]))]);
        assert_eq!(
            jvp(&prog, &inputs, &bad).unwrap_err().kind,
            ErrorKind::Input
        );
    }

    #[test]
    fn linearity_of_the_tangent() {
        // <jvp(x, v), w> is linear in v: check jvp(v1 + v2) = jvp(v1) + jvp(v2).
        let text = "(fn f ((x (tensor n R))) (gen i n (* (get x i) (tanh (get x (+ i 1))))))";
        let prog = parse_program(text.as_bytes()).unwrap();
        let sizes: Sizes = [(s("n"), 4)].into_iter().collect();
        let (inputs, t1) = random_point(&prog, &sizes, 7);
        let (_, t2) = random_point(&prog, &sizes, 8);
        let sum_t: HashMap<Symbol, Value> = t1
            .iter()
            .map(|(k, v)| {
                let a = flatten(v, &prog.real_params().next().unwrap().1.clone(), &sizes).unwrap();
                let b = flatten(&t2[k], prog.real_params().next().unwrap().1, &sizes).unwrap();
                let c: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
                (*k, Value::reals(&c))
            })
            .collect();
        let (_, d1) = jvp(&prog, &inputs, &t1).unwrap();
        let (_, d2) = jvp(&prog, &inputs, &t2).unwrap();
        let (_, d12) = jvp(&prog, &inputs, &sum_t).unwrap();
        let w = Value::reals(&[0.3, -0.2, 0.9, 0.5]);
        let lhs = inner_product(&d12, &w);
        let rhs = inner_product(&d1, &w) + inner_product(&d2, &w);
        assert!((lhs - rhs).abs() < 1e-12);
    }

    #[test]
    fn zeros_in_dual_numbers() {
        // Out-of-range gets and false brackets give zero value and tangent.
        let sizes: Sizes = [(s("n"), 2)].into_iter().collect();
        let x = s("x");
        let e = gen(
            s("i"),
            Affine::var(s("n")),
            add(
                get(var(x), Affine::var(s("i")).add_constant(1).unwrap()),
                iverson(Pred::False, mul(get(var(x), Affine::constant(0)), num(2.0))),
            ),
        );
        let mut env: DualEnv = Env::new(&sizes);
        env.push_var(x, (Value::reals(&[1.0, 2.0]), Value::reals(&[10.0, 20.0])));
        let (v, d) = dual_expr(&e, &mut env, &mut Budget::default()).unwrap();
        assert_eq!(v, Value::reals(&[2.0, 0.0]));
        assert_eq!(d, Value::reals(&[20.0, 0.0]));
        // pow with a constant exponent uses dpow.
        let e = call(
            Func::with_exponent("pow", 3.0).unwrap(),
            get(var(x), Affine::constant(0)),
        );
        let (v, d) = dual_expr(&e, &mut env, &mut Budget::default()).unwrap();
        assert_eq!((v, d), (Value::Real(1.0), Value::Real(30.0)));
    }

    #[test]
    fn dual_budget() {
        let sizes: Sizes = [(s("n"), 1_000_000_000_000)].into_iter().collect();
        let e = gen(s("i"), Affine::var(s("n")), num(1.0));
        let mut env: DualEnv = Env::new(&sizes);
        let err = dual_expr(&e, &mut env, &mut Budget::default()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Eval);
    }
}
