//! The reference evaluator: simple and obviously right.
//!
//! A direct structural recursion over the core AST with the semantics of
//! docs/language.md ("Meaning"): IEEE doubles; an out-of-range `get` reads zero ([`Value::Zero`],
//! so no types are needed); a relation tested out of range is false;
//! `exists` is a loop; `and`/`or` short-circuit; a dimension negative at the
//! given sizes is an error.
//!
//! Decisions that keep it agreeing with the conformance reference:
//!
//! * A maximal chain of directly nested `sum`s (with an optional `iverson`
//!   body) is one loop over index tuples in lexicographic order, accumulated
//!   into one `f64` starting at `0.0`; the body is evaluated only where the
//!   predicate holds. This is the reference's order of additions.
//! * [`evaluate`] rejects a negative `gen`/`sum`/`exists` dimension anywhere in
//!   the program before running it (the reference checks them all up front,
//!   reached or not).
//! * A [`Budget`] bounds the loop iterations (`gen`, `sum` and `exists`
//!   element visits), charged *before* a loop runs or a tensor is allocated,
//!   so `n = 10^12` fails at once instead of hanging or exhausting memory.
//! * A `sum` chain or `exists` under a predicate runs each variable over
//!   the interval the predicate's top-level comparisons allow (as the
//!   lowering and the cost model do), so a bracketed loop costs, and is
//!   charged, the iterations where its bracket can hold.
//!
//! [`Env`] is generic in what variables are bound to, so the dual-number
//! evaluator ([`super::dual`]) shares it, the loop driver and the predicates.

use super::value::{check_value, dim_at, Inputs, Relation, Sizes, Value};
use crate::constraints::linear::LinForm;
use crate::constraints::system::{narrow, Constraint};
use crate::error::{Error, ErrorKind, Result};
use crate::front::affine::{Affine, EvalAffineError};
use crate::front::ast::{Expr, ParamKind, Pred, Program, Reduce};
use crate::symbol::Symbol;
use rustc_hash::FxHashMap as HashMap;

/// Default number of loop iterations one evaluation may run.
pub const DEFAULT_BUDGET: u64 = 200_000_000;

/// Bounds the work of an evaluation (loop iterations).
#[derive(Clone, Debug)]
pub struct Budget {
    limit: u128,
    used: u128,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new(DEFAULT_BUDGET)
    }
}

impl Budget {
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit: limit as u128,
            used: 0,
        }
    }

    /// Charge `n` iterations; an evaluation error once the limit is passed.
    pub fn take(&mut self, n: u128) -> Result<()> {
        self.used = self.used.saturating_add(n);
        if self.used > self.limit {
            return Err(Error::eval(format!(
                "the sizes are too large to evaluate (more than {} loop iterations)",
                self.limit
            )));
        }
        Ok(())
    }

    /// Iterations charged so far.
    pub fn used(&self) -> u128 {
        self.used
    }
}

/// An evaluation environment: sizes and relations (fixed), and scoped
/// bindings of variables (to `V`) and index variables (to integers).
///
/// Binding returns the binding it shadows, and unbinding restores it, so
/// shadowing works even though the elaborator makes binders unique.
#[derive(Clone, Debug)]
pub struct Env<V = Value> {
    sizes: Sizes,
    relations: HashMap<Symbol, Relation>,
    vars: HashMap<Symbol, V>,
    indices: HashMap<Symbol, i64>,
}

impl<V: Clone> Env<V> {
    /// An environment with these sizes and nothing else bound.
    pub fn new(sizes: &Sizes) -> Env<V> {
        Env {
            sizes: sizes.clone(),
            relations: HashMap::default(),
            vars: HashMap::default(),
            indices: HashMap::default(),
        }
    }

    /// The environment of `prog`'s body: its sizes (every size given and
    /// non-negative) and its relations (all present, with the declared
    /// dimensions). Real-valued inputs are left for the caller to bind.
    pub fn for_program(prog: &Program, inputs: &Inputs) -> Result<Env<V>> {
        inputs.sizes.require(&prog.sizes)?;
        let mut env = Env::new(&inputs.sizes);
        for p in &prog.params {
            if let ParamKind::Relation(dims) = &p.kind {
                let r = inputs
                    .relations
                    .get(&p.name)
                    .ok_or_else(|| Error::input(format!("missing input '{}'", p.name)))?;
                let want = dims
                    .iter()
                    .map(|d| dim_at(d, &inputs.sizes, ErrorKind::Input))
                    .collect::<Result<Vec<_>>>()?;
                if r.dims() != want {
                    return Err(Error::input(format!(
                        "relation '{}' has dimensions {:?}, expected {:?}",
                        p.name,
                        r.dims(),
                        want
                    )));
                }
                env.relations.insert(p.name, r.clone());
            }
        }
        Ok(env)
    }

    pub fn sizes(&self) -> &Sizes {
        &self.sizes
    }

    pub fn add_relation(&mut self, name: Symbol, r: Relation) {
        self.relations.insert(name, r);
    }

    pub fn relation(&self, name: Symbol) -> Option<&Relation> {
        self.relations.get(&name)
    }

    pub fn var(&self, name: Symbol) -> Option<&V> {
        self.vars.get(&name)
    }

    /// The value of a variable (an evaluation error when unbound).
    pub fn lookup(&self, name: Symbol) -> Result<V> {
        self.var(name)
            .cloned()
            .ok_or_else(|| Error::eval(format!("unbound variable {name}")))
    }

    /// Run `body` with `name` bound to `v` (a `let`); the binding it shadows
    /// is restored, also on error.
    pub fn with_var<R>(&mut self, name: Symbol, v: V, body: impl FnOnce(&mut Self) -> R) -> R {
        let shadowed = self.push_var(name, v);
        let r = body(self);
        self.pop_var(name, shadowed);
        r
    }

    /// Bind a variable; returns the binding it shadows (give it to [`Env::pop_var`]).
    pub fn push_var(&mut self, name: Symbol, v: V) -> Option<V> {
        self.vars.insert(name, v)
    }

    /// Undo [`Env::push_var`].
    pub fn pop_var(&mut self, name: Symbol, shadowed: Option<V>) {
        match shadowed {
            Some(v) => self.vars.insert(name, v),
            None => self.vars.remove(&name),
        };
    }

    /// Bind an index variable; returns the binding it shadows.
    pub fn push_index(&mut self, name: Symbol, k: i64) -> Option<i64> {
        self.indices.insert(name, k)
    }

    /// Undo [`Env::push_index`].
    pub fn pop_index(&mut self, name: Symbol, shadowed: Option<i64>) {
        match shadowed {
            Some(k) => self.indices.insert(name, k),
            None => self.indices.remove(&name),
        };
    }

    /// The value of an index expression (index variables shadow sizes).
    pub fn affine(&self, a: &Affine) -> Result<i64> {
        a.eval_with(|n| self.indices.get(&n).or_else(|| self.sizes.get(&n)).copied())
            .map_err(|e| match e {
                EvalAffineError::Unbound(n) => {
                    Error::eval(format!("unbound index or size name {n} in {a}"))
                }
                EvalAffineError::Overflow => {
                    Error::eval(format!("index arithmetic in {a} overflows 64-bit integers"))
                }
            })
    }

    /// The value of a dimension; an evaluation error when negative.
    pub fn dim(&self, d: &Affine) -> Result<u64> {
        let n = self.affine(d)?;
        u64::try_from(n)
            .map_err(|_| Error::eval(format!("dimension {d} is negative ({n}) at these sizes")))
    }

    /// The loops of a sum chain ([`sum_chain`]) with their dimensions.
    pub fn loops(&self, chain: &[(Symbol, &Affine)]) -> Result<Vec<(Symbol, u64)>> {
        chain.iter().map(|&(i, d)| Ok((i, self.dim(d)?))).collect()
    }

    /// Run `body` for every tuple of the loop variables `chain` (each over
    /// `[0, n)`), in lexicographic order; stop early when `body` returns
    /// `true` (and return `true`). The whole iteration count is charged to
    /// the budget first. Later variables of the chain shadow earlier ones of
    /// the same name; every binding is restored, also on error.
    pub fn for_each_tuple(
        &mut self,
        chain: &[(Symbol, u64)],
        budget: &mut Budget,
        mut body: impl FnMut(&mut Env<V>, &mut Budget) -> Result<bool>,
    ) -> Result<bool> {
        let total = chain
            .iter()
            .fold(1u128, |acc, &(_, n)| acc.saturating_mul(n as u128));
        budget.take(total)?;
        if total == 0 {
            return Ok(false);
        }
        let saved: Vec<Option<i64>> = chain.iter().map(|&(v, _)| self.push_index(v, 0)).collect();
        let mut counters = vec![0u64; chain.len()];
        let result = 'tuples: loop {
            for (&(v, _), &k) in chain.iter().zip(&counters) {
                // k < n <= i64::MAX: dimensions come from non-negative i64s.
                self.indices.insert(v, k as i64);
            }
            match body(self, budget) {
                Ok(false) => {}
                done => break done,
            }
            // Advance the odometer, the last variable fastest.
            let mut pos = chain.len();
            loop {
                if pos == 0 {
                    break 'tuples Ok(false);
                }
                pos -= 1;
                counters[pos] += 1;
                if counters[pos] < chain[pos].1 {
                    break;
                }
                counters[pos] = 0;
            }
        };
        for (&(v, _), old) in chain.iter().zip(saved).rev() {
            self.pop_index(v, old);
        }
        result
    }
}

impl<V: Clone> Env<V> {
    /// The elements of a `gen` over `i` in `[0, n)`: `element` at each `i`,
    /// except where the top-level comparisons of `pred` (the bracket of a
    /// body `[pred]·e`) exclude `i`, whose element is `zero` without
    /// evaluating anything (the bracket is false there). The budget is
    /// charged `n` before the elements are allocated, as a full loop is.
    pub fn gen_elements<T>(
        &mut self,
        i: Symbol,
        n: u64,
        pred: Option<&Pred>,
        budget: &mut Budget,
        zero: impl Fn() -> T,
        mut element: impl FnMut(&mut Env<V>, &mut Budget) -> Result<T>,
    ) -> Result<Vec<T>> {
        budget.take(n as u128)?;
        // `i` unbound while its interval is found, then bound to each index
        let shadowed = self.indices.remove(&i);
        let mut cons = vec![];
        if let Some(p) = pred {
            conjunct_comparisons(p, &mut cons);
        }
        let (lo, hi) = self.allowed(i, n, &cons);
        // as [lo, hi) with 0 <= lo <= hi <= n
        let (lo, hi) = if lo > hi {
            (0, 0)
        } else {
            (lo as u64, hi as u64 + 1)
        };
        let mut out = Vec::with_capacity(n as usize);
        out.extend((0..lo).map(|_| zero()));
        let filled = (lo..hi).try_for_each(|k| {
            // k < n <= i64::MAX
            self.indices.insert(i, k as i64);
            out.push(element(self, budget)?);
            Ok(())
        });
        self.pop_index(i, shadowed);
        filled?;
        out.extend((hi..n).map(|_| zero()));
        Ok(out)
    }

    /// The interval `[lo, hi]` of `[0, n)` that the comparisons `cons` of
    /// bound names and `v` allow `v` (`lo > hi` when they allow nothing;
    /// a comparison of unbound names, or one that overflows, bounds nothing).
    fn allowed(&self, v: Symbol, n: u64, cons: &[Constraint]) -> (i128, i128) {
        let (mut lo, mut hi) = (0i128, n as i128 - 1);
        let value = |w: Symbol| -> Option<i128> {
            self.indices
                .get(&w)
                .or_else(|| self.sizes.get(&w))
                .map(|&x| x as i128)
        };
        for c in cons.iter().filter(|c| c.mentions(v)) {
            let _ = narrow(c, v, &value, &mut lo, &mut hi);
        }
        (lo, hi)
    }

    /// [`Env::for_each_tuple`] over only the tuples the comparisons among
    /// the top-level conjuncts of `pred` allow: each loop variable runs over
    /// the interval those comparisons give it once the outer variables are
    /// bound (as the lowering and the cost model narrow a bracketed loop),
    /// still in lexicographic order, so the tuples `body` sees where `pred`
    /// holds, and the order of additions, are those of the full loop. The
    /// budget is charged the iterations actually run.
    pub fn for_each_tuple_where(
        &mut self,
        chain: &[(Symbol, u64)],
        pred: Option<&Pred>,
        budget: &mut Budget,
        mut body: impl FnMut(&mut Env<V>, &mut Budget) -> Result<bool>,
    ) -> Result<bool> {
        let mut cons = vec![];
        if let Some(p) = pred {
            conjunct_comparisons(p, &mut cons);
        }
        let distinct = chain
            .iter()
            .enumerate()
            .all(|(k, a)| chain[..k].iter().all(|b| b.0 != a.0));
        if cons.is_empty() || !distinct {
            return self.for_each_tuple(chain, budget, body);
        }
        let saved: Vec<Option<i64>> = chain
            .iter()
            .map(|&(v, _)| self.indices.remove(&v))
            .collect();
        let result = self.narrowed_level(chain, &cons, 0, budget, &mut body);
        for (&(v, _), old) in chain.iter().zip(saved).rev() {
            self.pop_index(v, old);
        }
        result
    }

    /// The loops of `chain` from level `k` in (see
    /// [`Env::for_each_tuple_where`]); the variables of levels `k..` are
    /// unbound on entry.
    fn narrowed_level(
        &mut self,
        chain: &[(Symbol, u64)],
        cons: &[Constraint],
        k: usize,
        budget: &mut Budget,
        body: &mut impl FnMut(&mut Env<V>, &mut Budget) -> Result<bool>,
    ) -> Result<bool> {
        let Some(&(v, n)) = chain.get(k) else {
            return body(self, budget);
        };
        let (lo, hi) = self.allowed(v, n, cons);
        if lo > hi {
            return Ok(false);
        }
        budget.take((hi - lo + 1) as u128)?;
        let mut result = Ok(false);
        for x in lo..=hi {
            // 0 <= x < n <= i64::MAX
            self.indices.insert(v, x as i64);
            match self.narrowed_level(chain, cons, k + 1, budget, body) {
                Ok(false) => {}
                done => {
                    result = done;
                    break;
                }
            }
        }
        self.indices.remove(&v);
        result
    }
}

/// The bracket of a body `[p]·e`.
pub(crate) fn bracket(body: &Expr) -> Option<&Pred> {
    match body {
        Expr::Iverson(p, _) => Some(p),
        _ => None,
    }
}

/// The affine comparisons among the top-level conjuncts of `p` (`false` as
/// an impossible one).
fn conjunct_comparisons(p: &Pred, out: &mut Vec<Constraint>) {
    match p {
        Pred::Cmp(op, a, b) => {
            let (a, b) = (LinForm::from_affine(a), LinForm::from_affine(b));
            if let Some(c) = Constraint::compare(*op, &a, &b) {
                out.push(c);
            }
        }
        Pred::And(ps) => ps.iter().for_each(|q| conjunct_comparisons(q, out)),
        Pred::False => out.push(Constraint::never()),
        _ => {}
    }
}

/// A maximal chain of directly nested `sum`s: the loop variables with their
/// dimensions, the predicate of an `iverson` body (if any) and the summand.
pub(crate) fn sum_chain(e: &Expr) -> (Vec<(Symbol, &Affine)>, Option<&Pred>, &Expr) {
    let mut chain = vec![];
    let mut e = e;
    while let Expr::Sum(i, d, body) = e {
        chain.push((*i, d));
        e = body;
    }
    match e {
        Expr::Iverson(p, body) => (chain, Some(p), body),
        _ => (chain, None, e),
    }
}

/// Evaluate a predicate.
pub fn eval_pred<V: Clone>(p: &Pred, env: &mut Env<V>, budget: &mut Budget) -> Result<bool> {
    Ok(match p {
        Pred::True => true,
        Pred::False => false,
        Pred::Cmp(op, a, b) => {
            let x = env.affine(a)?;
            let y = env.affine(b)?;
            op.holds(x, y)
        }
        Pred::And(ps) => {
            for q in ps {
                if !eval_pred(q, env, budget)? {
                    return Ok(false);
                }
            }
            true
        }
        Pred::Or(ps) => {
            for q in ps {
                if eval_pred(q, env, budget)? {
                    return Ok(true);
                }
            }
            false
        }
        Pred::Exists(i, d, q) => {
            let n = env.dim(d)?;
            env.for_each_tuple_where(&[(*i, n)], Some(q), budget, |env, budget| {
                eval_pred(q, env, budget)
            })?
        }
        Pred::Rel(r, args) => {
            let idx = args
                .iter()
                .map(|a| env.affine(a))
                .collect::<Result<Vec<_>>>()?;
            env.relation(*r)
                .ok_or_else(|| Error::eval(format!("unknown relation {r}")))?
                .test(&idx)
        }
    })
}

/// Reject a negative `gen`/`sum`/`exists` dimension anywhere in `e` at
/// `sizes` (dimensions mention sizes only; any other name is left for
/// evaluation to report).
pub fn check_dimensions(e: &Expr, sizes: &Sizes) -> Result<()> {
    fn dim(d: &Affine, sizes: &Sizes) -> Result<()> {
        match d.eval_with(|n| sizes.get(&n).copied()) {
            Ok(n) if n < 0 => Err(Error::eval(format!(
                "dimension {d} is negative ({n}) at these sizes"
            ))),
            Err(EvalAffineError::Overflow) => Err(Error::eval(format!(
                "dimension {d} overflows 64-bit integers at these sizes"
            ))),
            _ => Ok(()),
        }
    }
    fn pred(p: &Pred, sizes: &Sizes) -> Result<()> {
        if let Pred::Exists(_, d, _) = p {
            dim(d, sizes)?;
        }
        p.children().try_for_each(|q| pred(q, sizes))
    }
    match e {
        Expr::Gen(_, d, _) | Expr::Sum(_, d, _) | Expr::Reduce(_, _, d, _) => dim(d, sizes)?,
        Expr::Iverson(p, _) => pred(p, sizes)?,
        _ => {}
    }
    e.children().try_for_each(|c| check_dimensions(c, sizes))
}

/// Evaluate an (open) expression in `env`.
pub fn eval_expr(e: &Expr, env: &mut Env, budget: &mut Budget) -> Result<Value> {
    Ok(match e {
        Expr::Var(x) => env.lookup(*x)?,
        Expr::Const(c) => Value::Real(c.0),
        Expr::Add(a, b) => {
            let x = eval_expr(a, env, budget)?.real()?;
            let y = eval_expr(b, env, budget)?.real()?;
            Value::Real(x + y)
        }
        Expr::Mul(a, b) => {
            let x = eval_expr(a, env, budget)?.real()?;
            let y = eval_expr(b, env, budget)?.real()?;
            Value::Real(x * y)
        }
        Expr::Call(f, a) => Value::Real(f.apply(eval_expr(a, env, budget)?.real()?)),
        Expr::MaxMin(m, a, b) => {
            let x = eval_expr(a, env, budget)?.real()?;
            let y = eval_expr(b, env, budget)?.real()?;
            Value::Real(m.apply(x, y))
        }
        Expr::IndexReal(a) => Value::Real(env.affine(a)? as f64),
        Expr::Pair(a, b) => {
            let x = eval_expr(a, env, budget)?;
            let y = eval_expr(b, env, budget)?;
            Value::pair(x, y)
        }
        Expr::Fst(a) => eval_expr(a, env, budget)?.fst()?,
        Expr::Snd(a) => eval_expr(a, env, budget)?.snd()?,
        Expr::Gen(i, d, body) => {
            let n = env.dim(d)?;
            let out = env.gen_elements(
                *i,
                n,
                bracket(body),
                budget,
                || Value::Zero,
                |env, budget| eval_expr(body, env, budget),
            )?;
            Value::tensor(out)
        }
        Expr::Sum(..) => {
            let (chain, pred, body) = sum_chain(e);
            let chain = env.loops(&chain)?;
            let mut acc = 0.0;
            env.for_each_tuple_where(&chain, pred, budget, |env, budget| {
                if pred.map_or(Ok(true), |p| eval_pred(p, env, budget))? {
                    acc += eval_expr(body, env, budget)?.real()?;
                }
                Ok(false)
            })?;
            Value::Real(acc)
        }
        Expr::Reduce(r, i, d, body) => {
            let n = env.dim(d)?;
            let mut xs = Vec::new();
            env.for_each_tuple(&[(*i, n)], budget, |env, budget| {
                xs.push(eval_expr(body, env, budget)?.real()?);
                Ok(false)
            })?;
            reduced(*r, &xs)
        }
        Expr::Get(a, k) => {
            let v = eval_expr(a, env, budget)?;
            v.get(env.affine(k)?)?
        }
        Expr::Iverson(p, a) => {
            if eval_pred(p, env, budget)? {
                eval_expr(a, env, budget)?
            } else {
                Value::Zero
            }
        }
        Expr::Let(x, a, b) => {
            let v = eval_expr(a, env, budget)?;
            env.with_var(*x, v, |env| eval_expr(b, env, budget))?
        }
    })
}

/// The value of `prog` at `inputs`, with the default budget.
pub fn evaluate(prog: &Program, inputs: &Inputs) -> Result<Value> {
    evaluate_with_budget(prog, inputs, &mut Budget::default())
}

/// The value of `prog` at `inputs`. Inputs are checked against the
/// parameters (missing or ill-shaped inputs are input errors).
pub fn evaluate_with_budget(prog: &Program, inputs: &Inputs, budget: &mut Budget) -> Result<Value> {
    let inputs = super::stored::expanded(prog, inputs)?;
    let (mut env, reals) = checked_inputs::<Value>(prog, &inputs)?;
    for (name, v) in reals {
        env.push_var(name, v.clone());
    }
    eval_expr(&prog.body, &mut env, budget)
}

/// A program's real inputs, by name, in parameter order.
pub type RealInputs<'a> = Vec<(Symbol, &'a Value)>;

/// The checks every run of a whole program makes first (`evaluate`, `dual`,
/// a compiled call): the sizes and relations (an environment holding them),
/// every real input present and of its parameter's shape (returned in
/// parameter order; a stored tensor given by its values is checked against
/// its relation where it is read, and not returned), and no negative
/// dimension in the body.
pub fn checked_inputs<'a, V: Clone>(
    prog: &Program,
    inputs: &'a Inputs,
) -> Result<(Env<V>, RealInputs<'a>)> {
    let env = Env::for_program(prog, inputs)?;
    let mut reals = vec![];
    for (name, ty) in prog.real_params() {
        if inputs.stored.contains_key(&name) && !inputs.values.contains_key(&name) {
            continue;
        }
        let v = inputs
            .values
            .get(&name)
            .ok_or_else(|| Error::input(format!("missing input '{name}'")))?;
        check_value(v, ty, &inputs.sizes, name.as_str())?;
        reals.push((name, v));
    }
    check_dimensions(&prog.body, &inputs.sizes)?;
    Ok((env, reals))
}

/// The value of a [`Reduce`] over the elements `xs`: the extremum, or the
/// one-hot tensor of the element selected.
pub fn reduced(r: Reduce, xs: &[f64]) -> Value {
    let (v, sel) = r.fold(xs.iter().copied());
    if !r.is_arg() {
        return Value::Real(v);
    }
    let hot = (0..xs.len()).map(|k| Value::Real(if sel == Some(k) { 1.0 } else { 0.0 }));
    Value::tensor(hot.collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::ast::build::*;
    use crate::front::ast::{CmpOp, Func, Param, Type};
    use crate::front::parse_program;
    use crate::semantics::json::{inputs_from_json, value_to_json};
    use crate::semantics::sizes::resolve_sizes;
    use crate::semantics::value::test_support::{s, sizes, vec_n};
    use serde_json::json;

    fn a(x: &str) -> Affine {
        Affine::var(s(x))
    }
    fn c(k: i64) -> Affine {
        Affine::constant(k)
    }

    /// Evaluate an open term with `x`, `y`, ... bound.
    fn run(e: &Expr, sz: &Sizes, vars: &[(&str, Value)]) -> Result<Value> {
        let mut env: Env = Env::new(sz);
        for (k, v) in vars {
            env.push_var(s(k), v.clone());
        }
        eval_expr(e, &mut env, &mut Budget::default())
    }

    fn dot() -> Expr {
        sum(
            s("i"),
            a("n"),
            mul(get(var(s("x")), a("i")), get(var(s("y")), a("i"))),
        )
    }

    #[test]
    fn dot_product() {
        let sz = sizes(&[("n", 3)]);
        let v = run(
            &dot(),
            &sz,
            &[
                ("x", Value::reals(&[1.0, 2.0, 3.0])),
                ("y", Value::reals(&[4.0, 5.0, 6.0])),
            ],
        )
        .unwrap();
        assert_eq!(v, Value::Real(32.0));
        let empty = run(
            &dot(),
            &sizes(&[("n", 0)]),
            &[("x", Value::reals(&[])), ("y", Value::reals(&[]))],
        );
        assert_eq!(empty.unwrap(), Value::Real(0.0));
    }

    #[test]
    fn matrix_vector() {
        // (gen i m (sum j n (* (get (get A i) j) (get x j))))
        let e = gen(
            s("i"),
            a("m"),
            sum(
                s("j"),
                a("n"),
                mul(
                    get(get(var(s("A")), a("i")), a("j")),
                    get(var(s("x")), a("j")),
                ),
            ),
        );
        let sz = sizes(&[("m", 2), ("n", 3)]);
        let mat = Value::tensor(vec![
            Value::reals(&[1.0, 2.0, 3.0]),
            Value::reals(&[0.0, -1.0, 0.5]),
        ]);
        let v = run(
            &e,
            &sz,
            &[("A", mat), ("x", Value::reals(&[1.0, 1.0, 2.0]))],
        )
        .unwrap();
        assert_eq!(v, Value::reals(&[9.0, 0.0]));
    }

    #[test]
    fn out_of_range_get_reads_zero() {
        // (gen i n (get x (- i 1))) shifts right
        let e = gen(
            s("i"),
            a("n"),
            get(var(s("x")), a("i").add_constant(-1).unwrap()),
        );
        let sz = sizes(&[("n", 3)]);
        let v = run(&e, &sz, &[("x", Value::reals(&[1.0, 2.0, 3.0]))]).unwrap();
        assert_eq!(
            v,
            Value::tensor(vec![Value::Zero, Value::Real(1.0), Value::Real(2.0)])
        );
        let j = value_to_json(&v, &vec_n(), &sz).unwrap();
        assert_eq!(j, json!([0.0, 1.0, 2.0]));
        // A get of a tensor of tensors out of range, then indexed again.
        let m = Value::tensor(vec![Value::reals(&[1.0, 2.0])]);
        let e2 = add(get(get(var(s("m")), c(5)), c(1)), num(1.0));
        assert_eq!(run(&e2, &sz, &[("m", m)]).unwrap(), Value::Real(1.0));
    }

    #[test]
    fn iverson_false_on_a_tensor() {
        let e = iverson(
            Pred::Cmp(CmpOp::Lt, a("n"), c(2)),
            gen(s("i"), a("n"), num(7.0)),
        );
        let sz = sizes(&[("n", 3)]);
        let v = run(&e, &sz, &[]).unwrap();
        assert_eq!(v, Value::Zero);
        assert_eq!(
            value_to_json(&v, &vec_n(), &sz).unwrap(),
            json!([0.0, 0.0, 0.0])
        );
        let e_true = iverson(Pred::True, gen(s("i"), a("n"), num(7.0)));
        assert_eq!(run(&e_true, &sz, &[]).unwrap(), Value::reals(&[7.0; 3]));
        // The zero of a pair, projected.
        let e3 = fst(iverson(Pred::False, pair(num(1.0), num(2.0))));
        assert_eq!(run(&e3, &sz, &[]).unwrap(), Value::Zero);
    }

    #[test]
    fn exists_and_relations() {
        // (gen i n (iverson (exists j n (and (S i j) (< i j))) 1.0))
        let p = Pred::Exists(
            s("j"),
            a("n"),
            Box::new(Pred::And(vec![
                Pred::Rel(s("S"), vec![a("i"), a("j")]),
                Pred::Cmp(CmpOp::Lt, a("i"), a("j")),
            ])),
        );
        let e = gen(s("i"), a("n"), iverson(p, num(1.0)));
        let sz = sizes(&[("n", 3)]);
        let mut env: Env = Env::new(&sz);
        env.add_relation(
            s("S"),
            // S(0,2), S(1,0), S(2,1)
            Relation::from_tuples(vec![3, 3], &[vec![0, 2], vec![1, 0], vec![2, 1]]).unwrap(),
        );
        let v = eval_expr(&e, &mut env, &mut Budget::default()).unwrap();
        assert_eq!(
            v,
            Value::tensor(vec![Value::Real(1.0), Value::Zero, Value::Zero])
        );
        // Out of range tests are false; exists binds nothing afterwards.
        let out = Pred::Rel(s("S"), vec![c(3), c(0)]);
        assert!(!eval_pred(&out, &mut env, &mut Budget::default()).unwrap());
        assert!(env.indices.is_empty());
        // Or, short circuit: the unknown relation is never consulted.
        let q = Pred::Or(vec![Pred::True, Pred::Rel(s("T"), vec![])]);
        assert!(eval_pred(&q, &mut env, &mut Budget::default()).unwrap());
        let q = Pred::And(vec![Pred::False, Pred::Rel(s("T"), vec![])]);
        assert!(!eval_pred(&q, &mut env, &mut Budget::default()).unwrap());
        assert!(eval_pred(&Pred::Rel(s("T"), vec![]), &mut env, &mut Budget::default()).is_err());
    }

    #[test]
    fn sums_with_predicates_and_shadowing() {
        // (sum i n (sum i n (iverson (== i 1) (get x i)))): the inner i wins
        let e = sum(
            s("i"),
            a("n"),
            sum(
                s("i"),
                a("n"),
                iverson(Pred::Cmp(CmpOp::Eq, a("i"), c(1)), get(var(s("x")), a("i"))),
            ),
        );
        let sz = sizes(&[("n", 3)]);
        let v = run(&e, &sz, &[("x", Value::reals(&[1.0, 10.0, 100.0]))]).unwrap();
        assert_eq!(v, Value::Real(30.0));
        // (let x 2 (+ (let x 3 x) x)) = 5
        let e = let_(
            s("x"),
            num(2.0),
            add(let_(s("x"), num(3.0), var(s("x"))), var(s("x"))),
        );
        assert_eq!(run(&e, &sz, &[]).unwrap(), Value::Real(5.0));
        // A gen index shadowing a size name.
        let e = gen(s("n"), c(2), sum(s("k"), a("n"), num(1.0)));
        assert_eq!(run(&e, &sz, &[]).unwrap(), Value::reals(&[0.0, 1.0]));
    }

    #[test]
    fn blackboxes_pairs_and_zero_arithmetic() {
        let sz = Sizes::new();
        let e = add(
            call(Func::named("exp"), num(0.0)),
            snd(pair(num(1.0), num(2.0))),
        );
        assert_eq!(run(&e, &sz, &[]).unwrap(), Value::Real(3.0));
        let e = call(Func::named("recip"), num(0.0));
        assert_eq!(run(&e, &sz, &[]).unwrap(), Value::Real(f64::INFINITY));
        // Zero times infinity is NaN, as with an explicit zero.
        let e = mul(
            iverson(Pred::False, num(1.0)),
            call(Func::named("recip"), num(0.0)),
        );
        assert!(run(&e, &sz, &[]).unwrap().real().unwrap().is_nan());
    }

    #[test]
    fn ill_typed_open_terms_are_errors() {
        let sz = sizes(&[("n", 2)]);
        for e in [
            add(var(s("x")), num(1.0)),
            fst(num(1.0)),
            get(num(1.0), c(0)),
            var(s("nope")),
            get(var(s("x")), a("zz")),
            gen(s("i"), c(-1), num(1.0)),
        ] {
            assert_eq!(
                run(&e, &sz, &[("x", Value::reals(&[1.0, 2.0]))])
                    .unwrap_err()
                    .kind,
                ErrorKind::Eval
            );
        }
        let big = Affine::constant(i64::MAX);
        let e = get(var(s("x")), big.add(&a("n")).unwrap_or(big));
        assert!(run(&e, &sizes(&[("n", i64::MAX)]), &[("x", Value::reals(&[]))]).is_err());
    }

    #[test]
    fn budget_stops_huge_sizes() {
        let sz = sizes(&[("n", 1_000_000_000_000)]);
        let e = gen(s("i"), a("n"), num(1.0));
        let err = run(&e, &sz, &[]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Eval);
        assert!(err.msg.contains("too large"), "{}", err.msg);
        let e = sum(s("i"), a("n"), mul(num(2.0), num(3.0)));
        assert_eq!(run(&e, &sz, &[]).unwrap_err().kind, ErrorKind::Eval);
        // n * n overflows nothing: the product is charged saturating.
        let e = sum(
            s("i"),
            a("n"),
            sum(s("j"), a("n"), sum(s("k"), a("n"), num(1.0))),
        );
        assert_eq!(run(&e, &sz, &[]).unwrap_err().kind, ErrorKind::Eval);
        let p = Pred::Exists(s("i"), a("n"), Box::new(Pred::False));
        assert!(eval_pred(&p, &mut Env::<Value>::new(&sz), &mut Budget::default()).is_err());
        // A small budget counts nested loops.
        let sz = sizes(&[("n", 10)]);
        let e = gen(s("i"), a("n"), sum(s("j"), a("n"), num(1.0)));
        let mut env: Env = Env::new(&sz);
        let mut b = Budget::new(109);
        assert!(eval_expr(&e, &mut env, &mut b).is_err());
        let mut b = Budget::new(110);
        assert!(eval_expr(&e, &mut env, &mut b).is_ok());
        assert_eq!(b.used(), 110);
    }

    fn program(text: &str) -> Program {
        parse_program(text.as_bytes()).unwrap()
    }

    fn eval_json(
        text: &str,
        inputs: serde_json::Value,
        given: &[(&str, i64)],
    ) -> Result<serde_json::Value> {
        let p = program(text);
        let sz = resolve_sizes(&p, &sizes(given), Some(&inputs))?;
        let inp = inputs_from_json(&p, &inputs, &sz, true)?;
        let v = evaluate(&p, &inp)?;
        value_to_json(&v, &p.ret, &sz)
    }

    #[test]
    fn parsed_programs() {
        let v = eval_json(
            "(fn f ((x (tensor n R))) (sum i n (get x i)))",
            json!({"x": [1, 2, 3.5]}),
            &[],
        );
        assert_eq!(v.unwrap(), json!(6.5));
        let v = eval_json(
            "(fn f ((x (tensor n R))) (gen i n (get x (- i 1))))",
            json!({"x": [1, 2, 3]}),
            &[],
        );
        assert_eq!(v.unwrap(), json!([0.0, 1.0, 2.0]));
        let v = eval_json(
            "(fn f ((S (relation n)) (x (tensor n R)))\n  (sum i n (iverson (S i) (get x i))))",
            json!({"S": [true, 0, 1], "x": [1, 2, 3]}),
            &[],
        );
        assert_eq!(v.unwrap(), json!(4.0));
        let v = eval_json(
            "(fn f ((x (tensor n R)) (y (tensor n R))) (+ x (* 2 y)))",
            json!({"x": [1, 2], "y": [3, 4]}),
            &[],
        );
        assert_eq!(v.unwrap(), json!([7.0, 10.0]));
        let v = eval_json(
            "(fn f ((x (tensor n R))) (sum i n (gen j 2 (* (get x i) (get x j)))))",
            json!({"x": [1, 2]}),
            &[],
        );
        assert_eq!(v.unwrap(), json!([3.0, 6.0]));
    }

    #[test]
    fn program_level_errors() {
        // A negative dimension is rejected even where it is never reached.
        let e = eval_json(
            "(fn f ((x (tensor n R))) (iverson false (sum i (- n 5) (get x i))))",
            json!({"x": [1, 2, 3]}),
            &[],
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Eval);
        assert!(e.msg.contains("negative"), "{}", e.msg);
        // Huge sizes: the budget stops it.
        let e = eval_json(
            "(fn f ((n size)) (gen i n 1.0))",
            json!({}),
            &[("n", 1_000_000_000_000)],
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Eval);
        // Missing and ill-shaped inputs.
        let p = program("(fn f ((x (tensor n R))) (sum i n (get x i)))");
        let mut inp = Inputs::new(sizes(&[("n", 2)]));
        assert_eq!(evaluate(&p, &inp).unwrap_err().kind, ErrorKind::Input);
        inp.values.insert(s("x"), Value::reals(&[1.0]));
        assert_eq!(evaluate(&p, &inp).unwrap_err().kind, ErrorKind::Input);
        inp.values.insert(s("x"), Value::reals(&[1.0, 2.0]));
        assert_eq!(evaluate(&p, &inp).unwrap(), Value::Real(3.0));
        let inp = Inputs::new(Sizes::new());
        assert_eq!(evaluate(&p, &inp).unwrap_err().kind, ErrorKind::Input);
    }

    #[test]
    fn hand_built_program() {
        let p = Program {
            name: s("f"),
            params: vec![Param {
                name: s("x"),
                kind: ParamKind::Real(vec_n()),
            }],
            sizes: vec![s("n")],
            body: sum(
                s("i"),
                a("n"),
                mul(get(var(s("x")), a("i")), get(var(s("x")), a("i"))),
            ),
            ret: Type::Real,
            stored: Default::default(),
        };
        let mut inp = Inputs::new(sizes(&[("n", 2)]));
        inp.values.insert(s("x"), Value::reals(&[3.0, 4.0]));
        assert_eq!(evaluate(&p, &inp).unwrap(), Value::Real(25.0));
    }

    #[test]
    fn deep_programs_evaluate_on_a_big_stack() {
        let v = crate::stack::with_big_stack(|| {
            let depth = 100_000;
            let text = format!(
                "(fn f ((x R)) {}x{})",
                "(+ x ".repeat(depth),
                ")".repeat(depth)
            );
            let p = parse_program(text.as_bytes())?;
            let mut inp = Inputs::new(Sizes::new());
            inp.values.insert(s("x"), Value::Real(1.0));
            evaluate(&p, &inp).map(|v| v.real())
        });
        assert_eq!(v.unwrap().unwrap(), 100_001.0);
    }
}
