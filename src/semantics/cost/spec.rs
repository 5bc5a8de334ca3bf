//! The paper's work cost written as its rules read, by enumerating every
//! loop: the specification of [`super::cost_expr`] and the oracle its tests
//! compare against. It visits every index tuple, so it is only for small
//! sizes; it stops with an evaluation error past its budget.
//!
//! * `x`, `c`: 0; `(* a b)`: 1 + a + b; `(F a)`: 1 + a; pair and let: a + b;
//!   fst, snd, get: the subject;
//! * `(+ a b)`: a + b + 1 where the predicates of both sides hold (a side's
//!   predicate is its bracket's when it is literally an `iverson`, else true);
//! * `(iverson p e)`: `e` where `p` holds, else 0; `(gen i D e)`: Σ_i e;
//! * a maximal chain of directly nested sums whose body is `(iverson p e)`
//!   (else `p` = true, `e` = body): Σ over the tuples where `p` holds of
//!   `1 + e`, minus 1 if any tuple holds.

use super::{overflow, too_large, CostCtx};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{Expr, Pred};
use crate::symbol::Symbol;

/// The work cost of `e` by enumeration, visiting at most `budget` index
/// values. Free names take their values from `ctx` as in [`super::cost_expr`].
pub fn cost_by_enumeration(e: &Expr, ctx: &CostCtx, budget: u64) -> Result<u128> {
    let mut spec = Spec {
        ctx,
        env: ctx.bindings.to_vec(),
        budget,
    };
    let c = spec.cost(e)?;
    u128::try_from(c).map_err(|_| super::internal("negative cost"))
}

struct Spec<'c, 'a> {
    ctx: &'c CostCtx<'a>,
    env: Vec<(Symbol, i64)>,
    budget: u64,
}

impl Spec<'_, '_> {
    fn aff(&self, a: &Affine) -> Result<i64> {
        a.eval_with(|n| {
            self.env
                .iter()
                .rev()
                .find(|(m, _)| *m == n)
                .map(|p| p.1)
                .or_else(|| self.ctx.sizes.get(&n).copied())
        })
        .map_err(|_| Error::eval(format!("cannot evaluate the index {a}")))
    }

    /// One more index value visited.
    fn tick(&mut self) -> Result<()> {
        self.budget = self
            .budget
            .checked_sub(1)
            .ok_or_else(|| Error::eval("too large to cost by enumeration (the budget is spent)"))?;
        Ok(())
    }

    /// Run `f` with `i` bound to each of `0..n`.
    fn each(
        &mut self,
        i: Symbol,
        n: i64,
        mut f: impl FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        for k in 0..n {
            self.tick()?;
            self.env.push((i, k));
            let r = f(self);
            self.env.pop();
            r?;
        }
        Ok(())
    }

    fn pred(&mut self, p: &Pred) -> Result<bool> {
        Ok(match p {
            Pred::True => true,
            Pred::False => false,
            Pred::Cmp(op, a, b) => op.holds(self.aff(a)?, self.aff(b)?),
            Pred::And(ps) => {
                for q in ps {
                    if !self.pred(q)? {
                        return Ok(false);
                    }
                }
                true
            }
            Pred::Or(ps) => {
                for q in ps {
                    if self.pred(q)? {
                        return Ok(true);
                    }
                }
                false
            }
            Pred::Exists(i, d, q) => {
                let mut any = false;
                let n = self.aff(d)?;
                self.each(*i, n, |s| {
                    any = any || s.pred(q)?;
                    Ok(())
                })?;
                any
            }
            Pred::Rel(r, args) => {
                let idx = args
                    .iter()
                    .map(|a| self.aff(a))
                    .collect::<Result<Vec<_>>>()?;
                let rel = self.ctx.relations.get(r).ok_or_else(|| {
                    Error::input(format!("relation {r} has no value (give it in --inputs)"))
                })?;
                rel.test(&idx)
            }
        })
    }

    /// The predicate of one side of an addition.
    fn side(&mut self, e: &Expr) -> Result<bool> {
        match e {
            Expr::Iverson(p, _) => self.pred(p),
            _ => Ok(true),
        }
    }

    fn cost(&mut self, e: &Expr) -> Result<i128> {
        let add = |a: i128, b: i128| a.checked_add(b).ok_or_else(too_large);
        match e {
            Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => Ok(0),
            Expr::Add(a, b) => {
                let both = self.side(a)? && self.side(b)?;
                add(add(self.cost(a)?, self.cost(b)?)?, i128::from(both))
            }
            Expr::Mul(a, b) | Expr::MaxMin(_, a, b) => add(1, add(self.cost(a)?, self.cost(b)?)?),
            Expr::Call(_, a) => add(1, self.cost(a)?),
            Expr::Pair(a, b) | Expr::Let(_, a, b) => add(self.cost(a)?, self.cost(b)?),
            Expr::Fst(a) | Expr::Snd(a) | Expr::Get(a, _) => self.cost(a),
            // a reduction: its body at every i, and n - 1 comparisons
            Expr::Gen(i, d, b) | Expr::Reduce(_, i, d, b) => {
                let n = self.aff(d)?;
                if n < 0 {
                    return Err(Error::eval(format!("dimension {d} is negative ({n})")));
                }
                let mut t = 0i128;
                self.each(*i, n, |s| {
                    t = add(t, s.cost(b)?)?;
                    Ok(())
                })?;
                match e {
                    Expr::Reduce(..) => add(t, i128::from(n.max(1)) - 1),
                    _ => Ok(t),
                }
            }
            Expr::Iverson(p, b) => {
                if self.pred(p)? {
                    self.cost(b)
                } else {
                    Ok(0)
                }
            }
            Expr::Sum(..) => {
                let mut chain = vec![];
                let mut node = e;
                while let Expr::Sum(i, d, b) = node {
                    let n = self.aff(d)?;
                    if n < 0 {
                        return Err(Error::eval(format!("dimension {d} is negative ({n})")));
                    }
                    chain.push((*i, n));
                    node = b;
                }
                let (p, inner) = match node {
                    Expr::Iverson(p, b) => (p, &**b),
                    _ => (&Pred::True, node),
                };
                let (mut total, mut any) = (0i128, false);
                self.tuples(&chain, p, inner, &mut total, &mut any)?;
                Ok(total - i128::from(any))
            }
        }
    }

    /// Over the tuples of `chain` where `p` holds: `1 + cost(inner)`.
    fn tuples(
        &mut self,
        chain: &[(Symbol, i64)],
        p: &Pred,
        inner: &Expr,
        total: &mut i128,
        any: &mut bool,
    ) -> Result<()> {
        match chain.split_first() {
            None => {
                if self.pred(p)? {
                    let c = self.cost(inner)?;
                    *total = total
                        .checked_add(1)
                        .and_then(|t| t.checked_add(c))
                        .ok_or_else(overflow)?;
                    *any = true;
                }
                Ok(())
            }
            Some((&(i, n), rest)) => self.each(i, n, |s| s.tuples(rest, p, inner, total, any)),
        }
    }
}
