//! The symbolic cost: a signed sum of lattice-point counts built bottom-up
//! by the rules ([`Algebra`] for [`Sym`]), as the module docs of `cost`
//! describe, then counted term by term (`Compiler::finish`).

use super::*;
use std::collections::VecDeque;

/// `coef · #{ loops : guard }`
#[derive(Clone, Debug)]
pub(super) struct Term {
    pub(super) coef: i128,
    pub(super) loops: Vec<(u32, i64)>,
    pub(super) guard: Vec<u32>,
}

/// `k + Σ terms` (a deque: [`Sym::append`] adds the shorter side to the
/// longer one at either end, so that a long chain of `let`s or additions
/// is not copied at every level)
#[derive(Default, Debug)]
pub(super) struct Sym {
    pub(super) k: i128,
    pub(super) terms: VecDeque<Term>,
}

impl Sym {
    pub(super) fn add_const(&mut self, c: i128) -> Result<()> {
        self.k = self.k.checked_add(c).ok_or_else(too_large)?;
        Ok(())
    }

    pub(super) fn push(&mut self, t: Term) -> Result<()> {
        if t.coef == 0 {
            return Ok(());
        }
        if t.guard.is_empty() && t.loops.is_empty() {
            return self.add_const(t.coef);
        }
        self.terms.push_back(t);
        Ok(())
    }

    /// `self + o`, the terms of `self` first.
    pub(super) fn append(&mut self, mut o: Sym) -> Result<()> {
        self.add_const(o.k)?;
        if self.terms.len() >= o.terms.len() {
            self.terms.append(&mut o.terms);
        } else {
            while let Some(t) = self.terms.pop_back() {
                o.terms.push_front(t);
            }
            self.terms = o.terms;
        }
        Ok(())
    }
}

impl Algebra for Sym {
    #[inline]
    fn zero() -> Sym {
        Sym::default()
    }

    #[inline]
    fn is_zero(&self) -> bool {
        self.k == 0 && self.terms.is_empty()
    }

    #[inline]
    fn plus(_: &mut Compiler, mut a: Sym, b: Sym) -> Result<Sym> {
        a.append(b)?;
        Ok(a)
    }

    #[inline]
    fn one_more(_: &mut Compiler, mut a: Sym) -> Result<Sym> {
        a.add_const(1)?;
        Ok(a)
    }

    /// The term `1 · #{() : g}`.
    fn indicator(_: &mut Compiler, g: Vec<u32>) -> Result<Sym> {
        let mut s = Sym::default();
        s.push(Term {
            coef: 1,
            loops: Vec::new(),
            guard: g,
        })?;
        Ok(s)
    }

    /// `g` conjoined to every term.
    fn guarded(c: &mut Compiler, g: Vec<u32>, r: Sym) -> Result<Sym> {
        let mut out = Sym::default();
        if r.k != 0 {
            out.push(Term {
                coef: r.k,
                loops: Vec::new(),
                guard: g.clone(),
            })?;
        }
        for mut t in r.terms {
            c.spend(g.len())?;
            t.guard.extend_from_slice(&g);
            out.terms.push_back(t);
        }
        Ok(out)
    }

    fn gen(c: &mut Compiler, slot: u32, n: i64, body: Sym) -> Result<Sym> {
        c.lift(body, &[(slot, n)], &[])
    }

    /// The body plus one, lifted through the chain with `g` conjoined, and
    /// the term `-1 · [∃ loops : g]`.
    fn chain(c: &mut Compiler, loops: Vec<(u32, i64)>, g: Vec<u32>, mut body: Sym) -> Result<Sym> {
        body.add_const(1)?;
        let mut out = c.lift(body, &loops, &g)?;
        let mut ex = Vec::new();
        if c.exists(loops, &g, &mut ex)? {
            out.push(Term {
                coef: -1,
                loops: Vec::new(),
                guard: ex,
            })?;
        }
        Ok(out)
    }
}

impl Compiler<'_, '_> {
    /// Σ over `chain` of `[extra] · r`.
    pub(super) fn lift(&mut self, r: Sym, chain: &[(u32, i64)], extra: &[u32]) -> Result<Sym> {
        let mut out = Sym::default();
        if chain.iter().any(|c| c.1 == 0) {
            return Ok(out);
        }
        let konst = (r.k != 0).then(|| Term {
            coef: r.k,
            loops: Vec::new(),
            guard: Vec::new(),
        });
        for mut t in konst.into_iter().chain(r.terms) {
            self.spend(t.guard.len() + extra.len() + chain.len())?;
            t.guard.extend_from_slice(extra);
            for &(s, n) in chain {
                if self.guard_mentions(&t.guard, s) {
                    t.loops.push((s, n));
                } else {
                    t.coef = t.coef.checked_mul(n as i128).ok_or_else(too_large)?;
                }
            }
            out.push(t)?;
        }
        Ok(out)
    }

    /// Count every term and add up.
    pub(super) fn finish(&mut self, s: Sym) -> Result<u128> {
        // #(G ∧ (A ∨ B)) = #(G ∧ A) + #(G ∧ B) - #(G ∧ A ∧ B), where that
        // keeps every term countable by intervals.
        let mut work = Vec::from(s.terms);
        let mut terms = Vec::with_capacity(work.len());
        let mut countable = Countable::default();
        while let Some(mut t) = work.pop() {
            self.spend(t.guard.len() + t.loops.len())?;
            let mut flat = Vec::with_capacity(t.guard.len());
            flat_ids(&self.preds, &t.guard, &mut flat);
            flat.sort_unstable();
            flat.dedup();
            let at = if work.len() + terms.len() < MAX_EXPANDED_TERMS {
                count_split_point(&self.preds, &flat, &mut countable)
            } else {
                None
            };
            let Some(at) = at else {
                t.guard = flat;
                terms.push(t);
                continue;
            };
            let or_id = flat.remove(at);
            let disjuncts = countable.or(&self.preds, or_id).unwrap_or_default();
            for mask in 1u32..(1 << disjuncts.len()) {
                let mut guard = flat.clone();
                let mut sign = -1i128;
                for (b, &d) in disjuncts.iter().enumerate() {
                    if mask >> b & 1 == 1 {
                        guard.push(d);
                        sign = -sign;
                    }
                }
                work.push(Term {
                    coef: t.coef.checked_mul(sign).ok_or_else(too_large)?,
                    loops: t.loops.clone(),
                    guard,
                });
            }
        }
        for t in &mut terms {
            t.loops.sort_unstable();
            t.guard.sort_unstable();
            t.guard.dedup();
        }
        terms.sort_by(|a, b| (&a.loops, &a.guard).cmp(&(&b.loops, &b.guard)));
        let mut merged: Vec<Term> = Vec::with_capacity(terms.len());
        for t in terms {
            match merged.last_mut() {
                Some(last) if last.loops == t.loops && last.guard == t.guard => {
                    last.coef = last.coef.checked_add(t.coef).ok_or_else(too_large)?;
                }
                _ => merged.push(t),
            }
        }
        let mut total = s.k;
        // terms with loops first: they fail fast when too large to count
        for t in merged.into_iter().rev() {
            if t.coef == 0 {
                continue;
            }
            let plan = build_plan(&self.preds, &t.loops, &t.guard)?;
            let c = count(&self.preds, &mut self.m, &plan, false)?;
            if c == 0 {
                continue;
            }
            let c = i128::try_from(c).map_err(|_| too_large())?;
            total = t
                .coef
                .checked_mul(c)
                .and_then(|x| x.checked_add(total))
                .ok_or_else(too_large)?;
        }
        u128::try_from(total).map_err(|_| internal("negative cost"))
    }
}
