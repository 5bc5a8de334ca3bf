//! Direct evaluation of the cost (`Ir`, built by the rules as a [`Tree`]),
//! the fallback for terms too big to keep symbolically: gens and chains
//! whose body does not depend on their variable multiply, the rest
//! enumerates within the same budget.

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

/// A cost for the rules ([`Algebra`]): the tree and its free slots.
pub(super) struct Tree {
    pub(super) ir: Ir,
    pub(super) deps: Deps,
}

impl Tree {
    fn k(k: i128) -> Tree {
        Tree {
            ir: Ir::K(k),
            deps: Deps::none(),
        }
    }
}

impl Compiler<'_, '_> {
    pub(super) fn guard_deps(&self, g: &[u32]) -> Deps {
        Deps::Few(Vec::new()).union(Deps::Few(self.slots_of(g)))
    }
}

impl Algebra for Tree {
    fn zero() -> Tree {
        Tree::k(0)
    }

    fn is_zero(&self) -> bool {
        matches!(self.ir, Ir::K(0))
    }

    /// One flat `Seq`, constants folded.
    fn plus(_: &mut Compiler, a: Tree, b: Tree) -> Result<Tree> {
        let mut k: i128 = 0;
        let mut parts = Vec::new();
        for ir in [a.ir, b.ir] {
            let c = match ir {
                Ir::K(c) => c,
                Ir::Seq(c, more) => {
                    parts.extend(more);
                    c
                }
                ir => {
                    parts.push(ir);
                    0
                }
            };
            k = k.checked_add(c).ok_or_else(too_large)?;
        }
        let ir = if parts.is_empty() {
            Ir::K(k)
        } else {
            Ir::Seq(k, parts)
        };
        Ok(Tree {
            ir,
            deps: a.deps.union(b.deps),
        })
    }

    fn one_more(c: &mut Compiler, a: Tree) -> Result<Tree> {
        Tree::plus(c, a, Tree::k(1))
    }

    fn indicator(c: &mut Compiler, g: Vec<u32>) -> Result<Tree> {
        if g.is_empty() {
            return Ok(Tree::k(1));
        }
        Ok(Tree {
            deps: c.guard_deps(&g),
            ir: Ir::Ind(g),
        })
    }

    fn guarded(c: &mut Compiler, g: Vec<u32>, body: Tree) -> Result<Tree> {
        Ok(Tree {
            deps: body.deps.union(c.guard_deps(&g)),
            ir: Ir::Guard(g, Box::new(body.ir)),
        })
    }

    /// A constant body multiplies; otherwise a loop, which multiplies too
    /// when the body does not depend on its variable.
    fn gen(_: &mut Compiler, slot: u32, n: i64, body: Tree) -> Result<Tree> {
        let deps = body.deps.clone().without(&[slot]);
        if let Ir::K(c) = body.ir {
            let k = c.checked_mul(n as i128).ok_or_else(too_large)?;
            return Ok(Tree { ir: Ir::K(k), deps });
        }
        let dep = body.deps.mentions(slot);
        Ok(Tree {
            ir: Ir::Gen {
                slot,
                n,
                body: Box::new(body.ir),
                dep,
            },
            deps,
        })
    }

    /// The chain with its counting plan (used when the body does not
    /// depend on the chain's variables).
    fn chain(c: &mut Compiler, loops: Vec<(u32, i64)>, g: Vec<u32>, body: Tree) -> Result<Tree> {
        let slots: Vec<u32> = loops.iter().map(|l| l.0).collect();
        let dep = slots.iter().any(|&s| body.deps.mentions(s));
        let deps = body.deps.union(c.guard_deps(&g)).without(&slots);
        let plan = build_plan(&c.preds, &loops, &g)?;
        Ok(Tree {
            ir: Ir::Chain {
                loops,
                conj: g,
                plan: Box::new(plan),
                body: Box::new(body.ir),
                dep,
            },
            deps,
        })
    }
}

impl Compiler<'_, '_> {
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
