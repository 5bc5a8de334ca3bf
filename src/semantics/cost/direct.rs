//! Direct evaluation of the cost (`Ir`), the fallback for terms too big to
//! keep symbolically: gens and chains whose body does not depend on their
//! variable multiply, the rest enumerates within the same budget.

use super::*;

/// A cost as a tree evaluated at an environment, like the reference's
/// closures; predicates and plans are compiled once.
pub(super) enum Ir {
    /// A constant cost.
    K(i128),
    /// A constant plus the parts.
    Seq(i128, Vec<Ir>),
    /// 1 where every conjunct holds (the addition of a `+`).
    Ind(Vec<u32>),
    /// The body where every conjunct holds, else 0.
    Guard(Vec<u32>, Box<Ir>),
    Gen {
        slot: u32,
        n: i64,
        body: Box<Ir>,
        /// The body's cost may depend on the slot.
        dep: bool,
    },
    Chain {
        loops: Vec<(u32, i64)>,
        conj: Vec<u32>,
        /// Counts the tuples when the body does not depend on them.
        plan: Box<Plan>,
        body: Box<Ir>,
        dep: bool,
    },
}

/// Free slots of an [`Ir`], or `Many` (depends on anything) past a few.
#[derive(Clone)]
pub(super) enum Deps {
    Few(Vec<u32>),
    Many,
}

/// A bound sum chain: the loops (slot, extent), the names bound (to
/// unbind, innermost last), the body under the chain, and whether every
/// dimension was valid.
pub(super) type BoundChain<'e> = (Vec<(u32, i64)>, Vec<Symbol>, &'e Expr, Result<()>);

impl Deps {
    const CAP: usize = 16;

    pub(super) fn none() -> Deps {
        Deps::Few(Vec::new())
    }

    pub(super) fn union(self, o: Deps) -> Deps {
        match (self, o) {
            (Deps::Few(mut a), Deps::Few(b)) => {
                union_into(&mut a, &b);
                if a.len() > Deps::CAP {
                    Deps::Many
                } else {
                    Deps::Few(a)
                }
            }
            _ => Deps::Many,
        }
    }

    pub(super) fn mentions(&self, s: u32) -> bool {
        match self {
            Deps::Few(v) => v.binary_search(&s).is_ok(),
            Deps::Many => true,
        }
    }

    pub(super) fn without(self, slots: &[u32]) -> Deps {
        match self {
            Deps::Few(mut v) => {
                v.retain(|s| !slots.contains(s));
                Deps::Few(v)
            }
            Deps::Many => Deps::Many,
        }
    }
}

pub(super) fn seq(k: i128, parts: Vec<Ir>) -> Result<Ir> {
    let mut k = k;
    let mut rest = Vec::new();
    for p in parts {
        match p {
            Ir::K(c) => k = k.checked_add(c).ok_or_else(too_large)?,
            p => rest.push(p),
        }
    }
    Ok(if rest.is_empty() {
        Ir::K(k)
    } else {
        Ir::Seq(k, rest)
    })
}

impl Compiler<'_, '_> {
    pub(super) fn guard_deps(&self, g: &[u32]) -> Deps {
        Deps::Few(Vec::new()).union(Deps::Few(self.slots_of(g)))
    }

    /// The same rules as [`Compiler::expr`], as a tree.
    pub(super) fn ir(&mut self, e: &Expr) -> Result<(Ir, Deps)> {
        Ok(match e {
            Expr::Var(_) | Expr::Const(_) => (Ir::K(0), Deps::none()),
            Expr::Add(a, b) => {
                let (ia, da) = self.ir(a)?;
                let (ib, db) = self.ir(b)?;
                let mut g = Vec::new();
                let mut ok = true;
                if let Expr::Iverson(p, _) = &**a {
                    ok &= self.conj(p, &mut g)?;
                }
                if let Expr::Iverson(p, _) = &**b {
                    ok &= self.conj(p, &mut g)?;
                }
                let deps = da.union(db).union(self.guard_deps(&g));
                let extra = match (ok, g.is_empty()) {
                    (false, _) => Ir::K(0),
                    (true, true) => Ir::K(1),
                    (true, false) => Ir::Ind(g),
                };
                (seq(0, vec![ia, ib, extra])?, deps)
            }
            Expr::Mul(a, b) => {
                let (ia, da) = self.ir(a)?;
                let (ib, db) = self.ir(b)?;
                (seq(1, vec![ia, ib])?, da.union(db))
            }
            Expr::Call(_, a) => {
                let (ia, da) = self.ir(a)?;
                (seq(1, vec![ia])?, da)
            }
            Expr::Pair(a, b) | Expr::Let(_, a, b) => {
                let (ia, da) = self.ir(a)?;
                let (ib, db) = self.ir(b)?;
                (seq(0, vec![ia, ib])?, da.union(db))
            }
            Expr::Fst(a) | Expr::Snd(a) | Expr::Get(a, _) => self.ir(a)?,
            Expr::Gen(i, d, body) => {
                let n = self.dim(d)?;
                let slot = self.bind(*i)?;
                let r = self.ir(body);
                self.unbind(*i);
                let (body, db) = r?;
                if let Ir::K(c) = body {
                    let k = c.checked_mul(n as i128).ok_or_else(too_large)?;
                    return Ok((Ir::K(k), db.without(&[slot])));
                }
                let dep = db.mentions(slot);
                (
                    Ir::Gen {
                        slot,
                        n,
                        body: Box::new(body),
                        dep,
                    },
                    db.without(&[slot]),
                )
            }
            Expr::Iverson(p, body) => {
                let (ib, db) = self.ir(body)?;
                if matches!(ib, Ir::K(0)) {
                    return Ok((ib, db));
                }
                let mut g = Vec::new();
                if !self.conj(p, &mut g)? {
                    return Ok((Ir::K(0), Deps::none()));
                }
                if g.is_empty() {
                    return Ok((ib, db));
                }
                let deps = db.union(self.guard_deps(&g));
                (Ir::Guard(g, Box::new(ib)), deps)
            }
            Expr::Sum(..) => {
                let (loops, names, node, res) = self.bind_chain(e);
                let parts = res.and_then(|()| {
                    let (p, inner) = match node {
                        Expr::Iverson(p, e) => (Some(p), &**e),
                        _ => (None, node),
                    };
                    let r = self.ir(inner)?;
                    let mut g = Vec::new();
                    let ok = match p {
                        Some(p) => self.conj(p, &mut g)?,
                        None => true,
                    };
                    Ok((ok, g, r))
                });
                for i in names.iter().rev() {
                    self.unbind(*i);
                }
                let (ok, conj, (body, db)) = parts?;
                if !ok {
                    return Ok((Ir::K(0), Deps::none()));
                }
                let slots: Vec<u32> = loops.iter().map(|l| l.0).collect();
                let dep = slots.iter().any(|&s| db.mentions(s));
                let deps = db.union(self.guard_deps(&conj)).without(&slots);
                let plan = build_plan(&self.preds, &loops, &conj)?;
                (
                    Ir::Chain {
                        loops,
                        conj,
                        plan: Box::new(plan),
                        body: Box::new(body),
                        dep,
                    },
                    deps,
                )
            }
        })
    }

    pub(super) fn all_hold(&mut self, g: &[u32]) -> Result<bool> {
        for &id in g {
            if !eval_pred(&self.preds, &mut self.m, id)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The cost of `ir` at the current slot values.
    pub(super) fn run(&mut self, ir: &Ir) -> Result<i128> {
        let add = |a: i128, b: i128| a.checked_add(b).ok_or_else(too_large);
        match ir {
            Ir::K(c) => Ok(*c),
            Ir::Seq(k, parts) => {
                let mut t = *k;
                for p in parts {
                    t = add(t, self.run(p)?)?;
                }
                Ok(t)
            }
            Ir::Ind(g) => Ok(i128::from(self.all_hold(g)?)),
            Ir::Guard(g, b) => {
                if self.all_hold(g)? {
                    self.run(b)
                } else {
                    Ok(0)
                }
            }
            Ir::Gen { slot, n, body, dep } => {
                if !*dep {
                    if *n == 0 {
                        return Ok(0);
                    }
                    return self
                        .run(body)?
                        .checked_mul(*n as i128)
                        .ok_or_else(too_large);
                }
                let mut t = 0;
                for v in 0..*n {
                    self.m.take()?;
                    self.m.env[*slot as usize] = v;
                    t = add(t, self.run(body)?)?;
                }
                Ok(t)
            }
            Ir::Chain {
                loops,
                conj,
                plan,
                body,
                dep,
            } => {
                let (total, any) = if *dep {
                    let mut acc = (0, false);
                    self.chain_tuples(loops, conj, body, &mut acc)?;
                    acc
                } else {
                    let n = count(&self.preds, &mut self.m, plan, false)?;
                    if n == 0 {
                        return Ok(0);
                    }
                    let n = i128::try_from(n).map_err(|_| too_large())?;
                    let each = add(1, self.run(body)?)?;
                    (each.checked_mul(n).ok_or_else(too_large)?, true)
                };
                Ok(total - i128::from(any))
            }
        }
    }

    /// Σ over the tuples of `loops` where `conj` holds of (1 + body).
    pub(super) fn chain_tuples(
        &mut self,
        loops: &[(u32, i64)],
        conj: &[u32],
        body: &Ir,
        acc: &mut (i128, bool),
    ) -> Result<()> {
        let Some((&(slot, n), rest)) = loops.split_first() else {
            if self.all_hold(conj)? {
                let c = self.run(body)?;
                acc.0 = c
                    .checked_add(1)
                    .and_then(|c| c.checked_add(acc.0))
                    .ok_or_else(too_large)?;
                acc.1 = true;
            }
            return Ok(());
        };
        for v in 0..n {
            self.m.take()?;
            self.m.env[slot as usize] = v;
            self.chain_tuples(rest, conj, body, acc)?;
        }
        Ok(())
    }
}
