//! The forward derivative built directly, without an e-graph: the
//! fallback of the forward phase for a definition its e-graph could not
//! finish within the limits (or one too large or deep to rewrite: a
//! derivative form is pushed down one level per rewriting round). It
//! applies the rules of `rules/forward.rules` (and the black-box table of
//! `rules/derivatives.rules`) exactly once per form, in one pass over the
//! term, so it always finishes, in time linear in the term; zero tangents
//! are dropped where they are met (`D[a]·b` with `D[a] = 0`), the rest is
//! left to the simplify phase.

use crate::error::{Error, Result};
use crate::front::ast::{build, Expr, Type};
use crate::front::names::Fresh;
use crate::front::types::{type_of, zero_of, TypeEnv};
use crate::symbol::Symbol;
use std::collections::HashMap;

/// What the pass needs: sigma (variable -> tangent), the types of the
/// variables without a tangent (their tangent is the zero of their type),
/// and the name supply for the zeros' indices and new tangents.
pub struct ForwardDirect<'a> {
    pub tangents: HashMap<Symbol, Symbol>,
    pub types: TypeEnv,
    pub fresh: &'a mut Fresh,
}

/// A tangent, and whether it is known to be zero.
type Tangent = (Expr, bool);

fn zero_real() -> Tangent {
    (build::num(0.0), true)
}

impl ForwardDirect<'_> {
    /// `D[e]`: the tangent of `e` along sigma.
    pub fn derivative(&mut self, e: &Expr) -> Result<Expr> {
        Ok(self.d(e)?.0)
    }

    fn d(&mut self, e: &Expr) -> Result<Tangent> {
        Ok(match e {
            Expr::Const(_) | Expr::IndexReal(_) => zero_real(),
            Expr::MaxMin(m, a, b) => {
                // Da - s·Da + s·Db (MaxMin::selection)
                let s = m.selection(a, b);
                let left = match self.d(a)? {
                    (_, true) => None,
                    (da, false) => Some(build::add(
                        da.clone(),
                        build::mul(build::num(-1.0), build::mul(s.clone(), da)),
                    )),
                };
                let right = match self.d(b)? {
                    (_, true) => None,
                    (db, false) => Some(build::mul(s, db)),
                };
                match (left, right) {
                    (None, None) => zero_real(),
                    (Some(t), None) | (None, Some(t)) => (t, false),
                    (Some(l), Some(r)) => (build::add(l, r), false),
                }
            }
            Expr::Var(x) => match self.tangents.get(x) {
                Some(dx) => (Expr::Var(*dx), false),
                None => {
                    let t = self.types.get(x).cloned().ok_or_else(|| {
                        Error::transform(format!("differentiation: no type for '{x}'"))
                    })?;
                    (self.zero(&t), true)
                }
            },
            Expr::Add(a, b) => match (self.d(a)?, self.d(b)?) {
                ((_, true), (_, true)) => zero_real(),
                ((da, false), (_, true)) => (da, false),
                ((_, true), (db, false)) => (db, false),
                ((da, false), (db, false)) => (build::add(da, db), false),
            },
            Expr::Mul(a, b) => {
                let left = match self.d(a)? {
                    (_, true) => None,
                    (da, false) => Some(build::mul(da, (**b).clone())),
                };
                let right = match self.d(b)? {
                    (_, true) => None,
                    (db, false) => Some(build::mul((**a).clone(), db)),
                };
                match (left, right) {
                    (None, None) => zero_real(),
                    (Some(t), None) | (None, Some(t)) => (t, false),
                    (Some(l), Some(r)) => (build::add(l, r), false),
                }
            }
            Expr::Call(f, a) => match self.d(a)? {
                (_, true) => zero_real(),
                (da, false) => (
                    build::mul(super::direct::derivative(f, (**a).clone()), da),
                    false,
                ),
            },
            Expr::Pair(a, b) => {
                let (da, za) = self.d(a)?;
                let (db, zb) = self.d(b)?;
                (build::pair(da, db), za && zb)
            }
            Expr::Fst(a) => self.d(a).map(|(da, z)| (build::fst(da), z))?,
            Expr::Snd(a) => self.d(a).map(|(da, z)| (build::snd(da), z))?,
            Expr::Get(a, i) => self.d(a).map(|(da, z)| (build::get(da, i.clone()), z))?,
            Expr::Gen(i, n, b) => self
                .d(b)
                .map(|(db, z)| (build::gen(*i, n.clone(), db), z))?,
            // the one-hot selection is constant: a zero tensor
            Expr::Reduce(r, _, n, _) if r.is_arg() => (
                build::gen(self.fresh.name("z"), n.clone(), build::num(0.0)),
                true,
            ),
            Expr::Reduce(r, i, n, b) => match self.d(b)? {
                (_, true) => zero_real(),
                (db, false) => (r.tangent(*i, n, b, db), false),
            },
            Expr::Sum(i, n, b) => match self.d(b)? {
                (_, true) => zero_real(),
                (db, false) => (build::sum(*i, n.clone(), db), false),
            },
            // [p]·0 is the zero of the body's type
            Expr::Iverson(p, b) => match self.d(b)? {
                (db, true) => (db, true),
                (db, false) => (build::iverson(p.clone(), db), false),
            },
            Expr::Let(x, a, b) => self.d_let(*x, a, b)?,
        })
    }

    /// d-let: `D[let x = a in b]` is `let x = a in let dx = D[a] in D[b]`
    /// with sigma extended by `x -> dx`.
    fn d_let(&mut self, x: Symbol, a: &Expr, b: &Expr) -> Result<Tangent> {
        let (da, _) = self.d(a)?;
        let t = type_of(a, &mut self.types)?;
        let dx = self
            .fresh
            .name(&format!("d{}", crate::front::names::base(x.as_str())));
        let old_t = self.types.insert(x, t);
        let old_d = self.tangents.insert(x, dx);
        let db = self.d(b);
        match old_t {
            Some(t) => self.types.insert(x, t),
            None => self.types.remove(&x),
        };
        match old_d {
            Some(d) => self.tangents.insert(x, d),
            None => self.tangents.remove(&x),
        };
        let (db, z) = db?;
        Ok((build::let_(x, a.clone(), build::let_(dx, da, db)), z))
    }

    fn zero(&mut self, t: &Type) -> Expr {
        let fresh = &mut *self.fresh;
        zero_of(t, &mut || fresh.name("z"))
    }
}
