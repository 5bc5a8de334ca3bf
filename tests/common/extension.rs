//! The one evaluator of the extended language, shared by both rule
//! validators (`tests/rule_validation.rs` through [`super::rulecheck`], and
//! `tests/adjoint_rules.rs`): the extension forms are evaluated by their
//! meaning, the rest by the reference evaluator.
//!
//! * `D e` is the tangent of `e` by the reference dual-number evaluator,
//!   each variable's tangent being the value of its tangent variable under
//!   sigma ([`ExtEval::tangents`]);
//! * `dot w e` is the inner product of the two values;
//! * `dlet x d s` evaluates `s` with the tangent of `x` bound to `d`, and
//!   `drop x s` with it zero;
//! * `coeff P s` evaluates `s` with every tangent zero except a one at the
//!   entry the access path `P` reaches;
//! * a node with no extension form below it is read back as core syntax and
//!   evaluated by `eval_expr`; black boxes, `+`, `*`, pairs, `get`, `gen`,
//!   `sum`, `iverson` and `let` above an extension form are evaluated here,
//!   as the reference evaluator would.

use atl_egg::egraph::language::{Atl, FromRec, Num};
use atl_egg::front::affine::Affine;
use atl_egg::front::ast::Type;
use atl_egg::semantics::dual::{dual_expr, DualEnv};
use atl_egg::semantics::eval::{eval_expr, eval_pred, Budget, Env};
use atl_egg::semantics::numerics::inner_product;
use atl_egg::semantics::value::{Relation, Sizes, Value};
use atl_egg::Symbol;
use egg::{Id, Language, RecExpr};
use std::collections::HashMap;

/// For each node of `rec`: is there an extension form (`D`, `dot`, `dlet`,
/// `coeff`, `drop`) at or below it?
pub fn extension_marks(rec: &RecExpr<Atl>) -> Vec<bool> {
    let mut out: Vec<bool> = vec![];
    for n in rec.as_ref() {
        let e = n.is_extension() || n.children().iter().any(|c| out[usize::from(*c)]);
        out.push(e);
    }
    out
}

/// Where a term of the extended language is evaluated: sizes, relations,
/// bound variables and indices (innermost last), sigma and the types of the
/// tangent variables, and an iteration budget.
pub struct ExtEval<'a> {
    pub sizes: Sizes,
    pub rels: HashMap<Symbol, Relation>,
    pub vars: Vec<(Symbol, Value)>,
    pub idx: Vec<(Symbol, i64)>,
    /// Sigma: a variable's tangent variable.
    pub tangents: &'a HashMap<Symbol, Symbol>,
    /// The variables without a tangent variable whose tangent is zero (the
    /// others are left unbound under `D`); `None`: all of them.
    pub constants: Option<&'a HashMap<Symbol, Type>>,
    /// The types of the variables `coeff` paths start from.
    pub types: Option<&'a HashMap<Symbol, Type>>,
    pub budget: Budget,
    limit: u64,
}

impl<'a> ExtEval<'a> {
    /// An evaluator in the given environment, with sigma `tangents`, that
    /// may take `limit` loop iterations.
    pub fn new(
        sizes: Sizes,
        rels: HashMap<Symbol, Relation>,
        vars: Vec<(Symbol, Value)>,
        idx: Vec<(Symbol, i64)>,
        tangents: &'a HashMap<Symbol, Symbol>,
        limit: u64,
    ) -> ExtEval<'a> {
        ExtEval {
            sizes,
            rels,
            vars,
            idx,
            tangents,
            constants: None,
            types: None,
            budget: Budget::new(limit),
            limit,
        }
    }

    /// Whether an evaluation ran past the iteration budget.
    pub fn over_budget(&self) -> bool {
        self.budget.used() > self.limit as u128
    }

    fn env(&self) -> Env {
        let mut e: Env = Env::new(&self.sizes);
        for (k, r) in &self.rels {
            e.add_relation(*k, r.clone());
        }
        for (x, v) in &self.vars {
            e.push_var(*x, v.clone());
        }
        for (i, k) in &self.idx {
            e.push_index(*i, *k);
        }
        e
    }

    fn var(&self, x: Symbol) -> Option<&Value> {
        self.vars
            .iter()
            .rev()
            .find(|(y, _)| *y == x)
            .map(|(_, v)| v)
    }

    /// Variables bound to (value, tangent): the tangent of `x` is the value
    /// of `sigma(x)` (zero when unbound), else zero for a constant input;
    /// variables with neither are left unbound.
    fn dual_env(&self) -> DualEnv {
        let mut e: DualEnv = Env::new(&self.sizes);
        for (k, r) in &self.rels {
            e.add_relation(*k, r.clone());
        }
        for (x, v) in &self.vars {
            let t = match self.tangents.get(x) {
                Some(dx) => Some(self.var(*dx).cloned().unwrap_or(Value::Zero)),
                None => match self.constants {
                    Some(c) => c.contains_key(x).then_some(Value::Zero),
                    None => Some(Value::Zero),
                },
            };
            if let Some(t) = t {
                e.push_var(*x, (v.clone(), t));
            }
        }
        for (i, k) in &self.idx {
            e.push_index(*i, *k);
        }
        e
    }

    fn affine(&self, a: &Affine) -> Result<i64, String> {
        a.eval_with(|n| {
            self.idx
                .iter()
                .rev()
                .find(|(i, _)| *i == n)
                .map(|(_, k)| *k)
                .or_else(|| self.sizes.get(&n).copied())
        })
        .map_err(|e| e.to_string())
    }

    fn real(&mut self, t: &RecExpr<Atl>, ext: &[bool], id: Id) -> Result<f64, String> {
        self.eval(t, ext, id)?.real().map_err(|e| e.to_string())
    }

    /// Evaluate the predicate at `id` (core syntax).
    pub fn eval_pred(&mut self, t: &RecExpr<Atl>, id: Id) -> Result<bool, String> {
        let p = FromRec {
            node: |i: Id| &t[i],
        }
        .pred(id)
        .map_err(|e| e.0)?;
        eval_pred(&p, &mut self.env(), &mut self.budget).map_err(|e| e.to_string())
    }

    /// The value of the term at `id` of `t`; `ext` marks the nodes with an
    /// extension form at or below them ([`extension_marks`]).
    pub fn eval(&mut self, t: &RecExpr<Atl>, ext: &[bool], id: Id) -> Result<Value, String> {
        let s = |e: atl_egg::Error| e.to_string();
        let reader = FromRec {
            node: |i: Id| &t[i],
        };
        if !ext[usize::from(id)] {
            let e = reader.expr(id).map_err(|e| e.0)?;
            return eval_expr(&e, &mut self.env(), &mut self.budget).map_err(s);
        }
        let node = &t[id];
        if let Some((f, a, k)) = node.as_call() {
            let k = match k.map(|k| &t[k]) {
                Some(Atl::Num(Num(k))) => Some(*k),
                Some(_) => return Err("an exponent that is not a constant".into()),
                None => None,
            };
            let f = reader.fun(f).map_err(|e| e.0)?;
            let f = f.at(k).ok_or("a call with the wrong arguments")?;
            let x = self.real(t, ext, a)?;
            return Ok(Value::Real(f.apply(x)));
        }
        let name = |i: Id| reader.name(i).map_err(|e| e.0);
        let aff = |i: Id| reader.aff(i).map_err(|e| e.0);
        let tangent = |x: Symbol| {
            self.tangents
                .get(&x)
                .copied()
                .ok_or(format!("{x} has no tangent"))
        };
        Ok(match node {
            Atl::D(a) => {
                if ext[usize::from(*a)] {
                    return Err("nested extension form under D".into());
                }
                let e = reader.expr(*a).map_err(|e| e.0)?;
                dual_expr(&e, &mut self.dual_env(), &mut self.budget)
                    .map_err(s)?
                    .1
            }
            Atl::Dot([w, e]) => {
                let w = self.eval(t, ext, *w)?;
                let e = self.eval(t, ext, *e)?;
                Value::Real(inner_product(&w, &e))
            }
            Atl::DLet([x, _, b]) | Atl::Drop([x, b]) => {
                let dx = tangent(name(*x)?)?;
                let v = match node {
                    Atl::DLet([_, d, _]) => self.eval(t, ext, *d)?,
                    _ => Value::Zero,
                };
                self.vars.push((dx, v));
                let r = self.eval(t, ext, *b);
                self.vars.pop();
                r?
            }
            Atl::Coeff([p, b]) => {
                let (root, steps) = access_path(t, *p)?;
                let ty = self
                    .types
                    .and_then(|types| types.get(&root))
                    .ok_or("no type for a tangent")?;
                let mut entry = vec![];
                for st in &steps {
                    entry.push(match st {
                        Step::Get(a) => Some(self.affine(a)?),
                        Step::Fst | Step::Snd => None,
                    });
                }
                let one = one_hot(ty, &steps, &entry, &self.sizes)?;
                let n = self.vars.len();
                for dx in self.tangents.values() {
                    self.vars.push((*dx, Value::Zero));
                }
                // s(e_P) - s(0): the coefficient of a linear form, and the
                // derivative of an affine one (a class may hold a linear
                // form plus a tangent-free term that an algebra rule merged
                // with it, `seed + [false]·dx[g]` = `seed`)
                self.vars.push((root, Value::Zero));
                let at_zero = self.eval(t, ext, *b);
                self.vars.pop();
                self.vars.push((root, one.unwrap_or(Value::Zero)));
                let at_one = self.eval(t, ext, *b);
                self.vars.truncate(n);
                match (at_one?, at_zero?) {
                    (Value::Real(a), Value::Real(z)) => Value::Real(a - z),
                    (Value::Real(a), Value::Zero) => Value::Real(a),
                    (Value::Zero, Value::Real(z)) => Value::Real(-z),
                    (a, _) => a,
                }
            }
            Atl::Add([a, b]) => Value::Real(self.real(t, ext, *a)? + self.real(t, ext, *b)?),
            Atl::Mul([a, b]) => Value::Real(self.real(t, ext, *a)? * self.real(t, ext, *b)?),
            Atl::Pair([a, b]) => Value::pair(self.eval(t, ext, *a)?, self.eval(t, ext, *b)?),
            Atl::Fst(a) => self.eval(t, ext, *a)?.fst().map_err(s)?,
            Atl::Snd(a) => self.eval(t, ext, *a)?.snd().map_err(s)?,
            Atl::Get([a, i]) => {
                let v = self.eval(t, ext, *a)?;
                v.get(self.affine(&aff(*i)?)?).map_err(s)?
            }
            Atl::Gen([i, d, b]) | Atl::Sum([i, d, b]) => {
                let (i, d) = (name(*i)?, self.affine(&aff(*d)?)?);
                if d < 0 {
                    return Err(format!("negative dimension {d}"));
                }
                self.budget.take(d as u128).map_err(s)?;
                let mut out = vec![];
                let mut acc = 0.0;
                for k in 0..d {
                    self.idx.push((i, k));
                    let v = self.eval(t, ext, *b);
                    self.idx.pop();
                    let v = v?;
                    if matches!(node, Atl::Sum(_)) {
                        acc += v.real().map_err(s)?;
                    } else {
                        out.push(v);
                    }
                }
                if matches!(node, Atl::Sum(_)) {
                    Value::Real(acc)
                } else {
                    Value::tensor(out)
                }
            }
            Atl::Iverson([p, e]) => {
                if self.eval_pred(t, *p)? {
                    self.eval(t, ext, *e)?
                } else {
                    Value::Zero
                }
            }
            Atl::Let([x, a, b]) => {
                let v = self.eval(t, ext, *a)?;
                self.vars.push((name(*x)?, v));
                let r = self.eval(t, ext, *b);
                self.vars.pop();
                r?
            }
            n => return Err(format!("cannot evaluate {n}")),
        })
    }
}

/// One step of an access path, from its root variable outwards.
#[derive(Debug)]
enum Step {
    Get(Affine),
    Fst,
    Snd,
}

/// The access path at `id` (a variable under `get`, `fst` and `snd`): its
/// root variable and steps, outermost last.
fn access_path(t: &RecExpr<Atl>, mut id: Id) -> Result<(Symbol, Vec<Step>), String> {
    let reader = FromRec {
        node: |i: Id| &t[i],
    };
    let mut steps = vec![];
    loop {
        match &t[id] {
            Atl::Var(x) => {
                let x = reader.name(*x).map_err(|e| e.0)?;
                steps.reverse();
                return Ok((x, steps));
            }
            Atl::Get([a, i]) => {
                steps.push(Step::Get(reader.aff(*i).map_err(|e| e.0)?));
                id = *a;
            }
            Atl::Fst(a) => {
                steps.push(Step::Fst);
                id = *a;
            }
            Atl::Snd(a) => {
                steps.push(Step::Snd);
                id = *a;
            }
            n => return Err(format!("not an access path: {n}")),
        }
    }
}

/// A value of type `ty` that is zero except for a one at the entry the
/// steps reach (None when an index is out of range: there is no entry).
fn one_hot(
    ty: &Type,
    steps: &[Step],
    entry: &[Option<i64>],
    sizes: &Sizes,
) -> Result<Option<Value>, String> {
    match (ty, steps.first()) {
        (Type::Real, None) => Ok(Some(Value::Real(1.0))),
        (Type::Tensor(d, e), Some(Step::Get(_))) => {
            let n = d
                .eval_with(|s| sizes.get(&s).copied())
                .map_err(|e| e.to_string())?;
            let k = entry[0].expect("an index");
            if k < 0 || k >= n {
                return Ok(None);
            }
            let Some(inner) = one_hot(e, &steps[1..], &entry[1..], sizes)? else {
                return Ok(None);
            };
            let mut elems = vec![Value::Zero; n as usize];
            elems[k as usize] = inner;
            Ok(Some(Value::tensor(elems)))
        }
        (Type::Pair(a, _), Some(Step::Fst)) => {
            Ok(one_hot(a, &steps[1..], &entry[1..], sizes)?.map(|v| Value::pair(v, Value::Zero)))
        }
        (Type::Pair(_, b), Some(Step::Snd)) => {
            Ok(one_hot(b, &steps[1..], &entry[1..], sizes)?.map(|v| Value::pair(Value::Zero, v)))
        }
        _ => Err(format!("path {steps:?} does not fit the type")),
    }
}
