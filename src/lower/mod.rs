//! Lowering core ATL to the loop IR ([`ir`]).
//!
//! The program is lowered as elaborated (no let-lifting: lifting a binding
//! out of a bracketed loop body would run it where the bracket is false,
//! which the cost model does not count). Values are flattened into their
//! leaves (struct of arrays): `[n](R × [m]R)` is two buffers `[n]` and
//! `[n][m]`. What runs is what the paper's cost model counts:
//!
//! * a chain of nested `sum`s with an `iverson` body becomes loops whose
//!   bounds come from the bracket's affine conjuncts ([`crate::constraints`]):
//!   an equality on a sum variable removes its loop, inequalities bound the
//!   loops, other conjuncts are guards at the level where their variables
//!   are bound; the summand runs only where the bracket holds, and the
//!   first term needs no addition;
//! * `(+ [p0]e0 [p1]e1)` counts its addition only where both hold;
//!   `(iverson p e)` runs `e` only where `p` holds (a tensor `e` is zero
//!   filled where it does not);
//! * `let` runs once where it stands: a scalar is a C local, a tensor a
//!   slot of the per-call arena (a binding inside a loop reuses its slot);
//!   a binding that is a view (`x`, `(get x i)`, `(fst x)`) is not copied;
//! * an out-of-range `get` reads zero: every access is guarded by its
//!   range unless its index is a loop variable over exactly that range;
//! * loop order and fusion change only memory traffic, never which terms
//!   are added or their order per element: a gen over a reduction whose
//!   accesses are strided is interchanged (`order.rs`), and a let spine's
//!   gens over one extent run as one loop over rows (`fuse.rs`).

mod fuse;
pub mod ir;
mod order;
mod pred;
mod value;

use crate::constraints::{self, Constraint, LinForm};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{Expr, ParamKind, Pred, Program, Type};
use crate::front::types::{type_of, TypeEnv};
use egg::Symbol;
use ir::{CParam, Function, ParamC, Slot, Stmt};
use std::collections::HashMap;
use value::V;

/// Lower a program to the loop IR.
pub fn lower(prog: &Program) -> Result<Function> {
    let mut lw = Lowerer::default();
    lw.function(prog)
}

/// The C identifier for an ATL name (letters, digits and `_` kept).
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[derive(Default)]
pub(crate) struct Lowerer {
    /// C names of sizes and index variables.
    names: HashMap<Symbol, String>,
    /// Index variables whose range is exactly `[0, D)`: `D`.
    full_range: HashMap<Symbol, Affine>,
    /// Values of variables in scope.
    vals: HashMap<Symbol, V>,
    tenv: TypeEnv,
    dims: Vec<(String, Affine)>,
    slots: Vec<Slot>,
    out: Vec<Stmt>,
    next: usize,
}

impl Lowerer {
    fn fresh(&mut self, prefix: &str, base: &str) -> String {
        self.next += 1;
        let b = sanitize(base);
        if b.is_empty() {
            format!("{prefix}{}", self.next)
        } else {
            format!("{prefix}{}_{b}", self.next)
        }
    }

    pub(crate) fn line(&mut self, s: String) {
        self.out.push(Stmt::Line(s));
    }

    /// Run `f` collecting the statements it emits into a block of their own.
    pub(crate) fn block<R>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<R>,
    ) -> Result<(Vec<Stmt>, R)> {
        let saved = std::mem::take(&mut self.out);
        let r = f(self);
        let inner = std::mem::replace(&mut self.out, saved);
        Ok((inner, r?))
    }

    /// The C local holding a dimension (affine in sizes), checked
    /// non-negative on entry.
    pub(crate) fn dim(&mut self, d: &Affine) -> Result<String> {
        if let Some((n, _)) = self.dims.iter().find(|(_, a)| a == d) {
            return Ok(n.clone());
        }
        let name = format!("d{}", self.dims.len());
        self.dims.push((name.clone(), d.clone()));
        Ok(name)
    }

    /// An affine form as a C `int64_t` expression.
    pub(crate) fn ix(&self, f: &LinForm) -> Result<String> {
        let lit = |k: i128| -> Result<String> {
            let k = i64::try_from(k)
                .map_err(|_| Error::eval(format!("index coefficient {k} does not fit 64 bits")))?;
            Ok(if k.unsigned_abs() > i32::MAX as u64 {
                format!("INT64_C({k})")
            } else {
                format!("{k}")
            })
        };
        let mut s = String::new();
        for &(v, k) in f.terms() {
            let name = self
                .names
                .get(&v)
                .ok_or_else(|| Error::eval(format!("unbound index or size name {v}")))?;
            let sign = if k < 0 {
                "-"
            } else if s.is_empty() {
                ""
            } else {
                "+"
            };
            let mag = k.abs();
            if mag == 1 {
                s += &format!("{sign}{name}");
            } else {
                s += &format!("{sign}{}*{name}", lit(mag)?);
            }
        }
        if s.is_empty() {
            return lit(f.constant);
        }
        if f.constant != 0 {
            s += &format!(
                "{}{}",
                if f.constant < 0 { "-" } else { "+" },
                lit(f.constant.abs())?
            );
        }
        Ok(format!("({s})"))
    }

    pub(crate) fn aff(&self, a: &Affine) -> Result<String> {
        self.ix(&LinForm::from_affine(a))
    }

    /// A fresh arena slot for a tensor of these dimensions.
    pub(crate) fn slot(&mut self, base: &str, dims: &[Affine]) -> Result<String> {
        for d in dims {
            self.dim(d)?;
        }
        let cname = self.fresh("b", base);
        self.slots.push(Slot {
            cname: cname.clone(),
            dims: dims.to_vec(),
        });
        Ok(cname)
    }

    /// A place (a tree of fresh slots, one per leaf) for a value of type `t`.
    pub(crate) fn place(&mut self, base: &str, t: &Type) -> Result<V> {
        fn go(lw: &mut Lowerer, base: &str, outer: &mut Vec<Affine>, t: &Type) -> Result<V> {
            match t {
                Type::Tensor(d, e) => {
                    outer.push(d.clone());
                    let v = go(lw, base, outer, e);
                    outer.pop();
                    v
                }
                Type::Pair(a, b) => Ok(V::pair(go(lw, base, outer, a)?, go(lw, base, outer, b)?)),
                Type::Real => {
                    let c = lw.slot(base, outer)?;
                    Ok(V::leaf(c, outer.clone()))
                }
            }
        }
        go(self, base, &mut vec![], t)
    }

    pub(crate) fn type_of(&mut self, e: &Expr) -> Result<Type> {
        type_of(e, &mut self.tenv)
    }

    pub(crate) fn bind_index(&mut self, i: Symbol) -> String {
        let c = self.fresh("i", i.as_str());
        self.names.insert(i, c.clone());
        c
    }

    fn function(&mut self, prog: &Program) -> Result<Function> {
        let mut params = vec![];
        let explicit: Vec<Symbol> = prog
            .params
            .iter()
            .filter(|p| p.kind == ParamKind::Size)
            .map(|p| p.name)
            .collect();
        for &s in &prog.sizes {
            let c = self.fresh("n", s.as_str());
            self.names.insert(s, c.clone());
            if !explicit.contains(&s) {
                params.push(CParam {
                    cname: c,
                    source: s.to_string(),
                    kind: ParamC::Size,
                });
            }
        }
        for p in &prog.params {
            match &p.kind {
                ParamKind::Size => params.push(CParam {
                    cname: self.names[&p.name].clone(),
                    source: p.name.to_string(),
                    kind: ParamC::Size,
                }),
                ParamKind::Relation(dims) => {
                    for d in dims {
                        self.dim(d)?;
                    }
                    let c = self.fresh("r", p.name.as_str());
                    self.vals
                        .insert(p.name, V::relation(c.clone(), dims.clone()));
                    params.push(CParam {
                        cname: c,
                        source: p.name.to_string(),
                        kind: ParamC::Relation(dims.clone()),
                    });
                }
                ParamKind::Real(t) => {
                    let mut leaves = vec![];
                    let v = self.param_leaves(p.name.as_str(), t, &mut leaves)?;
                    params.extend(leaves);
                    self.vals.insert(p.name, v);
                    self.tenv.insert(p.name, t.clone());
                }
            }
        }
        // Results: one place per leaf, written through `double *` outputs.
        let mut outputs = vec![];
        let result = self.output_leaves("out", &prog.ret, &mut outputs)?;
        for (_, _, dims) in &outputs {
            for d in dims {
                self.dim(d)?;
            }
        }
        self.store(&prog.body, &result)?;
        Ok(Function {
            name: format!("atl_{}", sanitize(prog.name.as_str())),
            params,
            outputs,
            dims: std::mem::take(&mut self.dims),
            slots: std::mem::take(&mut self.slots),
            body: std::mem::take(&mut self.out),
        })
    }

    fn param_leaves(&mut self, path: &str, t: &Type, out: &mut Vec<CParam>) -> Result<V> {
        match t {
            Type::Real => {
                let c = self.fresh("x", path);
                out.push(CParam {
                    cname: c.clone(),
                    source: path.to_string(),
                    kind: ParamC::Real,
                });
                Ok(V::Scalar(c))
            }
            Type::Pair(a, b) => Ok(V::pair(
                self.param_leaves(&format!("{path}.0"), a, out)?,
                self.param_leaves(&format!("{path}.1"), b, out)?,
            )),
            Type::Tensor(..) => self.tensor_leaves(path, t, out, |c, dims| CParam {
                cname: c,
                source: String::new(),
                kind: ParamC::Tensor(dims),
            }),
        }
    }

    fn output_leaves(
        &mut self,
        path: &str,
        t: &Type,
        out: &mut Vec<(String, String, Vec<Affine>)>,
    ) -> Result<V> {
        match t {
            Type::Pair(a, b) => Ok(V::pair(
                self.output_leaves(&format!("{path}.0"), a, out)?,
                self.output_leaves(&format!("{path}.1"), b, out)?,
            )),
            _ => {
                let mut ps = vec![];
                let v = self.tensor_leaves(path, t, &mut ps, |c, dims| CParam {
                    cname: c,
                    source: String::new(),
                    kind: ParamC::Tensor(dims),
                })?;
                for p in ps {
                    if let ParamC::Tensor(d) = p.kind {
                        out.push((p.cname, p.source, d));
                    }
                }
                Ok(v)
            }
        }
    }

    /// Leaves of a tensor (or real) type as buffers named after `path`.
    fn tensor_leaves(
        &mut self,
        path: &str,
        t: &Type,
        out: &mut Vec<CParam>,
        mk: fn(String, Vec<Affine>) -> CParam,
    ) -> Result<V> {
        fn go(
            lw: &mut Lowerer,
            path: &str,
            outer: &mut Vec<Affine>,
            t: &Type,
            out: &mut Vec<CParam>,
            mk: fn(String, Vec<Affine>) -> CParam,
        ) -> Result<V> {
            match t {
                Type::Tensor(d, e) => {
                    outer.push(d.clone());
                    let v = go(lw, path, outer, e, out, mk);
                    outer.pop();
                    v
                }
                Type::Pair(a, b) => Ok(V::pair(
                    go(lw, &format!("{path}.0"), outer, a, out, mk)?,
                    go(lw, &format!("{path}.1"), outer, b, out, mk)?,
                )),
                Type::Real => {
                    for d in outer.iter() {
                        lw.dim(d)?;
                    }
                    let c = lw.fresh("t", path);
                    let mut p = mk(c.clone(), outer.clone());
                    p.source = path.to_string();
                    out.push(p);
                    Ok(V::leaf(c, outer.clone()))
                }
            }
        }
        go(self, path, &mut vec![], t, out, mk)
    }

    // -----------------------------------------------------------------
    // expressions

    /// Bind a `let` (or evaluate its right side): returns what to restore.
    fn bind_let(&mut self, x: Symbol, e0: &Expr) -> Result<(Option<V>, Option<Type>)> {
        let t = self.type_of(e0)?;
        let v = match lazy_gen(e0) {
            Some((params, body)) => V::Lazy {
                params,
                args: vec![],
                conds: vec![],
                body: Box::new(body.clone()),
                ty: t.clone(),
            },
            None => self.val(e0, x.as_str())?,
        };
        let v = match v {
            V::Scalar(s) if !is_simple(&s) => {
                let c = self.fresh("s", x.as_str());
                self.line(format!("const double ATL_MAYBE_UNUSED {c} = {s};"));
                V::Scalar(c)
            }
            v => v,
        };
        Ok((self.vals.insert(x, v), self.tenv.insert(x, t)))
    }

    fn unbind(&mut self, x: Symbol, old: (Option<V>, Option<Type>)) {
        match old.0 {
            Some(v) => self.vals.insert(x, v),
            None => self.vals.remove(&x),
        };
        match old.1 {
            Some(t) => self.tenv.insert(x, t),
            None => self.tenv.remove(&x),
        };
    }

    /// A scalar-valued expression as a C expression (statements emitted
    /// before it); `base` names temporaries.
    pub(crate) fn scalar(&mut self, e: &Expr, base: &str) -> Result<String> {
        let v = self.val(e, base)?;
        v.as_scalar(self)
    }

    /// Store the value of `e` into the place `dest` (every element written).
    pub(crate) fn store(&mut self, e: &Expr, dest: &V) -> Result<()> {
        match e {
            Expr::Gen(i, d, body) => self.store_gen(*i, d, body, dest),
            Expr::Iverson(p, body) if !dest.is_scalar_place() => {
                let (pre, c) = self.block(|lw| lw.pred(p))?;
                self.out.extend(pre);
                let (then, ()) = self.block(|lw| lw.store(body, dest))?;
                let (els, ()) = self.block(|lw| dest.zero_fill(lw))?;
                self.out.push(Stmt::If { cond: c, then, els });
                Ok(())
            }
            Expr::Let(x, e0, body) => {
                if matches!(&**body, Expr::Var(y) if y == x) {
                    return self.store(e0, dest);
                }
                if self.store_fused(e, dest)? {
                    return Ok(());
                }
                let old = self.bind_let(*x, e0)?;
                let r = self.store(body, dest);
                self.unbind(*x, old);
                r
            }
            Expr::Pair(a, b) => {
                if self.store_fused(e, dest)? {
                    return Ok(());
                }
                let (pa, pb) = dest.split_pair()?;
                self.store(a, &pa)?;
                self.store(b, &pb)
            }
            _ => {
                let v = self.val(e, "v")?;
                v.copy_into(dest, self)
            }
        }
    }

    /// `(gen i d body)` stored into `dest`, one element per iteration.
    pub(crate) fn gen_loop(&mut self, i: Symbol, d: &Affine, body: &Expr, dest: &V) -> Result<()> {
        let dn = self.dim(d)?;
        let iv = self.bind_index(i);
        self.full_range.insert(i, d.clone());
        let (stmts, ()) = self.block(|lw| {
            let inner = dest.index_unchecked(&iv, lw)?;
            lw.store(body, &inner)
        })?;
        self.out.push(Stmt::For {
            var: iv,
            lo: "0".into(),
            hi: dn,
            body: stmts,
        });
        Ok(())
    }

    /// The value of `e`: a scalar expression, or a view of tensor leaves.
    pub(crate) fn val(&mut self, e: &Expr, base: &str) -> Result<V> {
        Ok(match e {
            Expr::Var(x) => self
                .vals
                .get(x)
                .cloned()
                .ok_or_else(|| Error::eval(format!("unbound variable {x}")))?,
            Expr::Const(c) => V::Scalar(real_literal(c.0)),
            Expr::Add(a, b) => {
                let (x, ca) = self.bracketed(a)?;
                let (y, cb) = self.bracketed(b)?;
                let t = self.fresh("a", base);
                self.line(format!("const double ATL_MAYBE_UNUSED {t} = {x} + {y};"));
                let cond = match (ca, cb) {
                    (None, None) => "1".to_string(),
                    (Some(c), None) | (None, Some(c)) => c,
                    (Some(c), Some(d)) => format!("{c} && {d}"),
                };
                self.line(format!("ATL_ADD({cond});"));
                V::Scalar(t)
            }
            Expr::Mul(a, b) => {
                let x = self.scalar(a, base)?;
                let y = self.scalar(b, base)?;
                let t = self.fresh("m", base);
                self.line(format!("const double ATL_MAYBE_UNUSED {t} = {x} * {y};"));
                self.line("ATL_MUL();".into());
                V::Scalar(t)
            }
            Expr::Call(f, a) => {
                let x = self.scalar(a, base)?;
                let t = self.fresh("f", base);
                let call = match f.exponent() {
                    Some(k) => format!("atlh_{}({x}, {})", f.name(), real_literal(k.0)),
                    None => format!("atlh_{}({x})", f.name()),
                };
                self.line(format!("const double ATL_MAYBE_UNUSED {t} = {call};"));
                self.line("ATL_CALL();".into());
                V::Scalar(t)
            }
            Expr::Pair(a, b) => V::pair(self.val(a, base)?, self.val(b, base)?),
            Expr::Fst(a) => self.val(a, base)?.materialize(self)?.split_pair()?.0,
            Expr::Snd(a) => self.val(a, base)?.materialize(self)?.split_pair()?.1,
            Expr::Get(a, i) => {
                let v = self.val(a, base)?;
                v.index(i, self)?
            }
            Expr::Sum(..) => V::Scalar(self.sum_chain(e, base)?),
            Expr::Iverson(p, body) => {
                let t = self.type_of(e)?;
                if t == Type::Real {
                    let (x, _) = self.bracketed(e)?;
                    V::Scalar(x)
                } else if free_of_work(body) {
                    // A bracketed view (`[i < 2] y`): the bracket becomes a
                    // condition of the view, nothing is copied.
                    let c = self.pred(p)?;
                    let cv = self.fresh("c", "");
                    self.line(format!("const int ATL_MAYBE_UNUSED {cv} = {c};"));
                    self.val(body, base)?.guarded(&[cv], self)?
                } else {
                    let place = self.place(base, &t)?;
                    self.store(e, &place)?;
                    place
                }
            }
            Expr::Let(x, e0, body) => {
                let old = self.bind_let(*x, e0)?;
                let r = self.val(body, base);
                self.unbind(*x, old);
                r?
            }
            Expr::Gen(..) => {
                let t = self.type_of(e)?;
                let place = self.place(base, &t)?;
                self.store(e, &place)?;
                place
            }
        })
    }

    /// A scalar operand of `+`: its value and, when it is `(iverson p e)`,
    /// the C local holding `p` (the addition counts only where it holds).
    fn bracketed(&mut self, e: &Expr) -> Result<(String, Option<String>)> {
        let Expr::Iverson(p, body) = e else {
            return Ok((self.scalar(e, "v")?, None));
        };
        let c = self.pred(p)?;
        let cv = self.fresh("c", "");
        self.line(format!("const int {cv} = {c};"));
        let t = self.fresh("g", "");
        self.line(format!("double ATL_MAYBE_UNUSED {t} = 0.0;"));
        let (then, ()) = self.block(|lw| {
            let x = lw.scalar(body, "v")?;
            lw.line(format!("{t} = {x};"));
            Ok(())
        })?;
        self.out.push(Stmt::If {
            cond: cv.clone(),
            then,
            els: vec![],
        });
        Ok((t, Some(cv)))
    }

    /// A maximal chain of nested sums with its bracket: loops bounded by
    /// the bracket's affine conjuncts; returns the accumulator.
    fn sum_chain(&mut self, e: &Expr, base: &str) -> Result<String> {
        let acc = self.fresh("acc", base);
        let first = self.fresh("h", "");
        self.line(format!("double ATL_MAYBE_UNUSED {acc} = 0.0;"));
        self.line(format!("ATL_FIRST({first});"));
        self.sum_nest(
            e,
            &Acc::Scalar {
                acc: acc.clone(),
                first,
            },
        )?;
        Ok(acc)
    }

    /// The loops of a sum chain accumulating into `acc`; with
    /// [`Acc::Row`] the `gen` variable is one more loop, the innermost
    /// (loop interchange, see [`order`]).
    pub(crate) fn sum_nest(&mut self, e: &Expr, acc: &Acc) -> Result<()> {
        let (mut chain, p, body) = crate::semantics::eval::sum_chain(e);
        if let Acc::Row { gen, dim, .. } = acc {
            chain.push((*gen, dim));
        }
        let vars: Vec<Symbol> = chain.iter().map(|(i, _)| *i).collect();
        let mut system = vec![];
        for (i, d) in &chain {
            self.dim(d)?;
            system.push(Constraint::Ge(LinForm::var(*i)));
            system.push(Constraint::Ge(
                LinForm::from_affine(d)
                    .add_constant(-1)
                    .and_then(|f| f.combine(1, &LinForm::var(*i), -1))
                    .ok_or_else(overflow)?,
            ));
        }
        let mut others: Vec<Pred> = vec![];
        // A conjunct that is a disjunction of affine predicates splits the
        // loops into disjoint parts: p1, then p2 where not p1, ... (so no
        // tuple is counted twice, and each part gets its own bounds).
        let mut split: Option<Vec<Pred>> = None;
        if let Some(p) = p {
            for atom in conjuncts(p) {
                match (pred::affine(atom), atom) {
                    (Some(cs), _) => system.extend(cs),
                    (None, Pred::Or(ps))
                        if split.is_none() && ps.iter().all(|q| pred::affine(q).is_some()) =>
                    {
                        split = Some(ps.clone())
                    }
                    _ => others.push(atom.clone()),
                }
            }
        }
        let parts: Vec<(Vec<Constraint>, Vec<Pred>)> = match &split {
            None => vec![(vec![], vec![])],
            Some(ps) => ps
                .iter()
                .enumerate()
                .map(|(j, q)| (pred::affine(q).unwrap_or_default(), ps[..j].to_vec()))
                .collect(),
        };
        for (extra, excluded) in parts {
            let mut system = system.clone();
            system.extend(extra);
            let plan = match constraints::plan(&system, &vars) {
                Some(plan) => plan,
                None => return Err(overflow()),
            };
            // Where a non-affine conjunct can be tested: the innermost level
            // binding one of its variables (after all loops if it mentions an
            // eliminated variable). `true` marks an excluded (negated) part.
            let level_vars: Vec<Symbol> = plan.levels.iter().filter_map(|l| l.var).collect();
            let mut placed: Vec<Vec<(bool, Pred)>> = vec![vec![]; level_vars.len() + 1];
            let tagged = others
                .iter()
                .map(|q| (false, q.clone()))
                .chain(excluded.into_iter().map(|q| (true, q)));
            for (neg, q) in tagged {
                let mut free = std::collections::BTreeSet::new();
                crate::front::subst::pred_free(&q, &mut free);
                let at = if plan.defs.iter().any(|d| free.contains(&d.var)) {
                    level_vars.len()
                } else {
                    level_vars
                        .iter()
                        .rposition(|v| free.contains(v))
                        .map_or(0, |k| k + 1)
                };
                placed[at].push((neg, q));
            }
            let top = self.constraint_conds(&plan.top)?;
            let (stmts, ()) = self.block(|lw| lw.levels(&plan, 0, &placed, body, acc, &chain))?;
            if top.is_empty() {
                self.out.extend(stmts);
            } else {
                self.out.push(Stmt::If {
                    cond: top.join(" && "),
                    then: stmts,
                    els: vec![],
                });
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn levels(
        &mut self,
        plan: &constraints::LoopPlan,
        k: usize,
        placed: &[Vec<(bool, Pred)>],
        body: &Expr,
        acc: &Acc,
        chain: &[(Symbol, &Affine)],
    ) -> Result<()> {
        // Non-affine conjuncts whose variables are all bound by now.
        let mut conds = vec![];
        for (neg, q) in &placed[k] {
            if k == placed.len() - 1 && !plan.defs.is_empty() {
                continue; // tested after the definitions
            }
            let c = self.pred(q)?;
            conds.push(if *neg { format!("!{c}") } else { c });
        }
        let inner = |lw: &mut Lowerer| -> Result<()> {
            if k == plan.levels.len() {
                for d in &plan.defs {
                    let c = lw.bind_index(d.var);
                    let num = lw.ix(&d.num)?;
                    let def = if d.den == 1 {
                        num
                    } else {
                        format!("{num} / {}", d.den)
                    };
                    lw.line(format!("const int64_t {c} = {def};"));
                    if let Some((_, dim)) = chain.iter().find(|(i, _)| *i == d.var) {
                        lw.full_range.insert(d.var, (*dim).clone());
                    }
                }
                let mut late = vec![];
                if !plan.defs.is_empty() {
                    for (neg, q) in &placed[k] {
                        let c = lw.pred(q)?;
                        late.push(if *neg { format!("!{c}") } else { c });
                    }
                }
                let (stmts, ()) = lw.block(|lw| {
                    let x = lw.scalar(body, "v")?;
                    match acc {
                        Acc::Scalar { acc, first } => {
                            lw.line(format!("{acc} += {x};"));
                            lw.line(format!("ATL_SUMADD({first});"));
                        }
                        Acc::Row {
                            gen,
                            buf,
                            off,
                            flags,
                            ..
                        } => {
                            let i = lw.names.get(gen).cloned().ok_or_else(|| {
                                Error::eval("an interchanged gen variable is unbound")
                            })?;
                            let at = if off == "0" {
                                i.clone()
                            } else {
                                format!("{off} + {i}")
                            };
                            lw.line(format!("{buf}[{at}] += {x};"));
                            lw.line(format!("ATL_SUMADD_AT({flags}, {i});"));
                        }
                    }
                    Ok(())
                })?;
                if late.is_empty() {
                    lw.out.extend(stmts);
                } else {
                    lw.out.push(Stmt::If {
                        cond: late.join(" && "),
                        then: stmts,
                        els: vec![],
                    });
                }
                return Ok(());
            }
            let level = &plan.levels[k];
            let v = level.var.expect("a loop level has a variable");
            let lo = lw.bound_expr(&level.lower, "atlh_max", "atlh_ceildiv")?;
            let hi = lw.bound_expr(&level.upper, "atlh_min", "atlh_floordiv")?;
            let c = lw.bind_index(v);
            if let Some((_, dim)) = chain.iter().find(|(i, _)| *i == v) {
                lw.full_range.insert(v, (*dim).clone());
            }
            let (stmts, ()) = lw.block(|lw| {
                let g = lw.constraint_conds(&level.guards)?;
                let (inner, ()) =
                    lw.block(|lw| lw.levels(plan, k + 1, placed, body, acc, chain))?;
                if g.is_empty() {
                    lw.out.extend(inner);
                } else {
                    lw.out.push(Stmt::If {
                        cond: g.join(" && "),
                        then: inner,
                        els: vec![],
                    });
                }
                Ok(())
            })?;
            // The innermost loop of a scalar reduction without loops of its
            // own: its terms may be added in SIMD lanes (reassociation).
            if let Acc::Scalar { acc, .. } = acc {
                if k + 1 == plan.levels.len() && !has_loop(&stmts) {
                    lw.line(format!("ATL_SIMD_REDUCE({acc})"));
                }
            }
            lw.out.push(Stmt::For {
                var: c,
                lo,
                hi: format!("{hi} + 1"),
                body: stmts,
            });
            Ok(())
        };
        if conds.is_empty() {
            inner(self)
        } else {
            let (stmts, ()) = self.block(inner)?;
            self.out.push(Stmt::If {
                cond: conds.join(" && "),
                then: stmts,
                els: vec![],
            });
            Ok(())
        }
    }

    fn bound_expr(&self, bs: &[constraints::Bound], combine: &str, div: &str) -> Result<String> {
        let mut parts = vec![];
        for b in bs {
            let f = self.ix(&b.form)?;
            parts.push(if b.div == 1 {
                f
            } else {
                format!("{div}({f}, {})", b.div)
            });
        }
        let mut it = parts.into_iter();
        let mut s = it
            .next()
            .ok_or_else(|| Error::eval("a loop without a bound (internal error)"))?;
        for p in it {
            s = format!("{combine}({s}, {p})");
        }
        Ok(s)
    }

    pub(crate) fn constraint_conds(&self, cs: &[Constraint]) -> Result<Vec<String>> {
        cs.iter()
            .map(|c| {
                Ok(match c {
                    Constraint::Ge(f) => format!("{} >= 0", self.ix(f)?),
                    Constraint::Eq(f) => format!("{} == 0", self.ix(f)?),
                    Constraint::Divides(k, f) => format!("atlh_mod({}, {k}) == 0", self.ix(f)?),
                })
            })
            .collect()
    }
}

/// Where a sum chain accumulates.
pub(crate) enum Acc {
    /// A C local, with its first-term flag (the first term needs no addition).
    Scalar { acc: String, first: String },
    /// `buf[off + i]` for every `i` of `(gen gen dim ...)`, the gen's loop
    /// innermost; `flags` marks which elements have their first term.
    Row {
        gen: Symbol,
        dim: Affine,
        buf: String,
        off: String,
        flags: String,
    },
}

/// Does a block contain a loop?
fn has_loop(ss: &[Stmt]) -> bool {
    ss.iter().any(|s| match s {
        Stmt::Line(_) => false,
        Stmt::For { .. } => true,
        Stmt::If { then, els, .. } => has_loop(then) || has_loop(els),
    })
}

fn overflow() -> Error {
    Error::eval("index arithmetic overflows 64-bit integers")
}

/// Does `e` do no arithmetic and bind nothing (a read, a projection, a
/// bracket of those)?
fn free_of_work(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Var(_)
            | Expr::Const(_)
            | Expr::Get(..)
            | Expr::Fst(_)
            | Expr::Snd(_)
            | Expr::Iverson(..)
            | Expr::Pair(..)
    ) && e.children().all(free_of_work)
}

/// A `gen` chain whose body does no arithmetic and binds nothing: its
/// variables with their dimensions, and the body.
fn lazy_gen(e: &Expr) -> Option<(Vec<(Symbol, Affine)>, &Expr)> {
    let mut params = vec![];
    let mut e = e;
    while let Expr::Gen(i, d, body) = e {
        params.push((*i, d.clone()));
        e = body;
    }
    (!params.is_empty() && free_of_work(e)).then_some((params, e))
}

/// The conjuncts of a predicate (nested `and`s flattened).
fn conjuncts(p: &Pred) -> Vec<&Pred> {
    match p {
        Pred::And(ps) => ps.iter().flat_map(conjuncts).collect(),
        Pred::True => vec![],
        _ => vec![p],
    }
}

fn is_simple(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
}

/// A C literal for a real.
pub fn real_literal(x: f64) -> String {
    if x.is_nan() {
        "NAN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "INFINITY" } else { "(-INFINITY)" }.into()
    } else {
        let s = format!("{x:?}");
        let s = if s.contains(['.', 'e']) { s } else { s + ".0" };
        if x < 0.0 || s.starts_with('-') {
            format!("({s})")
        } else {
            s
        }
    }
}
