//! Operations on core syntax that later passes share: free names and
//! capture-avoiding substitution of index variables (by affine forms) and of
//! real variables (by expressions).
//!
//! Binders are unique after elaboration, but rewriting duplicates terms, so
//! substitution still checks: a binder that would capture a free name of the
//! replacement is renamed to a fresh name given by the caller.

use super::affine::Affine;
use super::ast::{Expr, Pred};
use crate::symbol::Symbol;
use std::collections::BTreeSet;

/// Names bound around the current position, with multiplicity (shadowing).
#[derive(Default)]
struct Bound(std::collections::HashMap<Symbol, u32>);

impl Bound {
    fn push(&mut self, x: Symbol) {
        *self.0.entry(x).or_default() += 1;
    }
    fn pop(&mut self, x: Symbol) {
        if let Some(k) = self.0.get_mut(&x) {
            *k -= 1;
            if *k == 0 {
                self.0.remove(&x);
            }
        }
    }
    fn note(&self, x: Symbol, out: &mut BTreeSet<Symbol>) {
        if !self.0.contains_key(&x) {
            out.insert(x);
        }
    }
}

fn aff_names(a: &Affine, bound: &Bound, out: &mut BTreeSet<Symbol>) {
    a.names().for_each(|n| bound.note(n, out));
}

fn pred_names(p: &Pred, bound: &mut Bound, out: &mut BTreeSet<Symbol>) {
    match p {
        Pred::True | Pred::False => {}
        Pred::Cmp(_, a, b) => {
            aff_names(a, bound, out);
            aff_names(b, bound, out);
        }
        Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| pred_names(q, bound, out)),
        Pred::Exists(i, d, q) => {
            aff_names(d, bound, out);
            bound.push(*i);
            pred_names(q, bound, out);
            bound.pop(*i);
        }
        Pred::Rel(_, idx) => idx.iter().for_each(|a| aff_names(a, bound, out)),
    }
}

/// Free names of a predicate (index variables and sizes), added to `out`.
pub fn pred_free(p: &Pred, out: &mut BTreeSet<Symbol>) {
    pred_names(p, &mut Bound::default(), out);
}

/// Free names of an expression: real variables, index variables and sizes.
/// One traversal with a multiset of the names bound around it: linear in
/// the size of the expression, however deep its binders nest.
pub fn free_names(e: &Expr) -> BTreeSet<Symbol> {
    let mut out = BTreeSet::new();
    expr_names(e, &mut Bound::default(), &mut out);
    out
}

fn expr_names(e: &Expr, bound: &mut Bound, out: &mut BTreeSet<Symbol>) {
    match e {
        Expr::Var(x) => bound.note(*x, out),
        Expr::Const(_) => {}
        Expr::IndexReal(a) => aff_names(a, bound, out),
        Expr::Add(a, b) | Expr::Mul(a, b) | Expr::MaxMin(_, a, b) | Expr::Pair(a, b) => {
            expr_names(a, bound, out);
            expr_names(b, bound, out);
        }
        Expr::Call(_, a) | Expr::Fst(a) | Expr::Snd(a) => expr_names(a, bound, out),
        Expr::Gen(i, d, b) | Expr::Sum(i, d, b) | Expr::Reduce(_, i, d, b) => {
            aff_names(d, bound, out);
            bound.push(*i);
            expr_names(b, bound, out);
            bound.pop(*i);
        }
        Expr::Get(a, i) => {
            expr_names(a, bound, out);
            aff_names(i, bound, out);
        }
        Expr::Iverson(p, a) => {
            pred_names(p, bound, out);
            expr_names(a, bound, out);
        }
        Expr::Let(x, a, b) => {
            expr_names(a, bound, out);
            bound.push(*x);
            expr_names(b, bound, out);
            bound.pop(*x);
        }
    }
}

/// The name supply for a pass over `e`: its names come after every made
/// name in `e` (see [`max_fresh_suffix`]).
pub fn fresh_above(e: &Expr) -> super::names::Fresh {
    super::names::Fresh::after(max_fresh_suffix(e))
}

/// The largest id `N` of the made names `base#N` in an expression (binders
/// included, see [`super::names`]): passes that make fresh names start above it, so names made
/// by an earlier pass (say, the gradient that `hvp` differentiates) never
/// clash with new ones.
pub fn max_fresh_suffix(e: &Expr) -> u64 {
    fn name(s: Symbol, m: &mut u64) {
        if let Some(k) = super::names::id(s.as_str()) {
            *m = (*m).max(k);
        }
    }
    fn pred(p: &Pred, m: &mut u64) {
        if let Pred::Exists(i, _, _) = p {
            name(*i, m);
        }
        p.children().for_each(|q| pred(q, m));
    }
    fn go(e: &Expr, m: &mut u64) {
        match e {
            Expr::Var(x) => name(*x, m),
            Expr::Iverson(p, _) => pred(p, m),
            _ => {}
        }
        if let Some(b) = e.binder() {
            name(b, m);
        }
        e.children().for_each(|c| go(c, m));
    }
    let mut m = 0;
    go(e, &mut m);
    m
}

/// What to replace: an index variable by an affine form, or a real variable
/// by an expression.
#[derive(Clone, Debug)]
pub enum Replace {
    Index(Symbol, Affine),
    Var(Symbol, Expr),
}

impl Replace {
    fn target(&self) -> Symbol {
        match self {
            Replace::Index(i, _) | Replace::Var(i, _) => *i,
        }
    }
    fn avoid(&self) -> BTreeSet<Symbol> {
        match self {
            Replace::Index(_, a) => a.names().collect(),
            Replace::Var(_, e) => free_names(e),
        }
    }
}

/// Capture-avoiding substitution; `fresh` makes a new binder name.
pub struct Substituter<'f> {
    pub fresh: &'f mut dyn FnMut(Symbol) -> Symbol,
}

/// Raised when index arithmetic overflows during substitution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubstOverflow;

/// A replacement with the free names of its replacement term, computed once
/// (not at every binder it passes).
struct Rep<'r> {
    r: &'r Replace,
    avoid: BTreeSet<Symbol>,
}

impl<'r> Rep<'r> {
    fn new(r: &'r Replace) -> Rep<'r> {
        Rep {
            r,
            avoid: r.avoid(),
        }
    }
}

impl<'f> Substituter<'f> {
    pub fn new(fresh: &'f mut dyn FnMut(Symbol) -> Symbol) -> Substituter<'f> {
        Substituter { fresh }
    }

    fn aff(&self, a: &Affine, r: &Rep) -> Result<Affine, SubstOverflow> {
        match r.r {
            Replace::Index(i, by) => a.substitute(*i, by).map_err(|_| SubstOverflow),
            Replace::Var(..) => Ok(a.clone()),
        }
    }

    /// Prepare to enter binder `b`: `None` if `b` shadows the target (stop),
    /// else the (possibly renamed) binder and a renaming to apply first.
    fn enter(&mut self, b: Symbol, r: &Rep, is_index: bool) -> Option<(Symbol, Option<Replace>)> {
        if b == r.r.target() {
            return None;
        }
        if r.avoid.contains(&b) {
            let nb = (self.fresh)(b);
            let ren = if is_index {
                Replace::Index(b, Affine::var(nb))
            } else {
                Replace::Var(b, Expr::Var(nb))
            };
            Some((nb, Some(ren)))
        } else {
            Some((b, None))
        }
    }

    pub fn pred(&mut self, p: &Pred, r: &Replace) -> Result<Pred, SubstOverflow> {
        self.pred_r(p, &Rep::new(r))
    }

    pub fn expr(&mut self, e: &Expr, r: &Replace) -> Result<Expr, SubstOverflow> {
        self.expr_r(e, &Rep::new(r))
    }

    fn pred_r(&mut self, p: &Pred, r: &Rep) -> Result<Pred, SubstOverflow> {
        Ok(match p {
            Pred::True | Pred::False => p.clone(),
            Pred::Cmp(op, a, b) => Pred::Cmp(*op, self.aff(a, r)?, self.aff(b, r)?),
            Pred::And(ps) => Pred::And(
                ps.iter()
                    .map(|q| self.pred_r(q, r))
                    .collect::<Result<_, _>>()?,
            ),
            Pred::Or(ps) => Pred::Or(
                ps.iter()
                    .map(|q| self.pred_r(q, r))
                    .collect::<Result<_, _>>()?,
            ),
            Pred::Exists(i, d, q) => {
                let d = self.aff(d, r)?;
                match self.enter(*i, r, true) {
                    None => Pred::Exists(*i, d, q.clone()),
                    Some((ni, ren)) => {
                        let q = match ren {
                            Some(ren) => self.pred(q, &ren)?,
                            None => (**q).clone(),
                        };
                        Pred::Exists(ni, d, Box::new(self.pred_r(&q, r)?))
                    }
                }
            }
            Pred::Rel(rel, idx) => Pred::Rel(
                *rel,
                idx.iter()
                    .map(|a| self.aff(a, r))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }

    fn expr_r(&mut self, e: &Expr, r: &Rep) -> Result<Expr, SubstOverflow> {
        use super::ast::build::*;
        Ok(match e {
            Expr::Var(x) => match r.r {
                Replace::Var(y, by) if x == y => by.clone(),
                _ => e.clone(),
            },
            Expr::Get(a, i) => get(self.expr_r(a, r)?, self.aff(i, r)?),
            Expr::IndexReal(a) => Expr::IndexReal(self.aff(a, r)?),
            Expr::Iverson(p, a) => iverson(self.pred_r(p, r)?, self.expr_r(a, r)?),
            Expr::Gen(i, d, b) | Expr::Sum(i, d, b) | Expr::Reduce(_, i, d, b) => {
                let d = self.aff(d, r)?;
                let (ni, body) = match self.enter(*i, r, true) {
                    None => (*i, (**b).clone()),
                    Some((ni, ren)) => {
                        let b = match ren {
                            Some(ren) => self.expr(b, &ren)?,
                            None => (**b).clone(),
                        };
                        (ni, self.expr_r(&b, r)?)
                    }
                };
                e.same_loop(ni, d, body).expect("a loop")
            }
            Expr::Let(x, a, b) => {
                let a = self.expr_r(a, r)?;
                match self.enter(*x, r, false) {
                    None => let_(*x, a, (**b).clone()),
                    Some((nx, ren)) => {
                        let b = match ren {
                            Some(ren) => self.expr(b, &ren)?,
                            None => (**b).clone(),
                        };
                        let_(nx, a, self.expr_r(&b, r)?)
                    }
                }
            }
            // no binders, indices or predicates of their own
            _ => e.try_map_children(|c| self.expr_r(c, r))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::ast::build::*;

    fn s(x: &str) -> Symbol {
        Symbol::from(x)
    }

    #[test]
    fn substitution_avoids_capture() {
        // (sum j n (get x (+ i j)))[i := j]  must rename the bound j
        let n = Affine::var(s("n"));
        let ij = Affine::var(s("i")).add(&Affine::var(s("j"))).unwrap();
        let e = sum(s("j"), n.clone(), get(var(s("x")), ij));
        let mut supply = crate::front::names::Fresh::default();
        let mut fresh = |b: Symbol| supply.name(b.as_str());
        let mut sub = Substituter::new(&mut fresh);
        let out = sub
            .expr(&e, &Replace::Index(s("i"), Affine::var(s("j"))))
            .unwrap();
        let Expr::Sum(b, _, body) = &out else {
            panic!()
        };
        assert_eq!(b.as_str(), "j#1");
        let Expr::Get(_, a) = &**body else { panic!() };
        assert_eq!(a.coeff(s("j")), 1);
        assert_eq!(a.coeff(s("j#1")), 1);
        assert!(free_names(&out).contains(&s("j")));
    }

    #[test]
    fn shadowing_stops_substitution() {
        let e = let_(s("x"), num(1.0), var(s("x")));
        let mut fresh = |b: Symbol| b;
        let mut sub = Substituter::new(&mut fresh);
        let out = sub.expr(&e, &Replace::Var(s("x"), num(2.0))).unwrap();
        assert_eq!(out, e);
    }
}
