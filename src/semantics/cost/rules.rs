//! The paper's cost rules (Figure "(Work) Cost Model"), written once: one
//! walk over the term, generic over what a cost is ([`Algebra`]). The
//! symbolic path ([`Sym`]: a signed sum of counts) and the direct path
//! ([`Tree`]: a tree evaluated by enumeration) implement the algebra; the
//! specification (`spec.rs`) states the same rules by enumeration.

use super::*;

/// What a cost is, for the rules: how costs add, and what `iverson`,
/// `gen` and a sum chain make of their body's cost. Predicates are
/// compiled by the walk (conjunctions of arena nodes).
pub(super) trait Algebra: Sized {
    /// 0.
    fn zero() -> Self;
    /// Certainly 0 (then an `iverson`'s predicate is never looked at).
    fn is_zero(&self) -> bool;
    /// `a + b`.
    fn plus(c: &mut Compiler, a: Self, b: Self) -> Result<Self>;
    /// `1 + a`.
    fn one_more(c: &mut Compiler, a: Self) -> Result<Self>;
    /// 1 where every conjunct of `g` holds (always when `g` is empty).
    fn indicator(c: &mut Compiler, g: Vec<u32>) -> Result<Self>;
    /// `body` where every conjunct of `g` (not empty) holds, else 0.
    fn guarded(c: &mut Compiler, g: Vec<u32>, body: Self) -> Result<Self>;
    /// `Σ_{slot < n} body`.
    fn gen(c: &mut Compiler, slot: u32, n: i64, body: Self) -> Result<Self>;
    /// Σ over the tuples of `loops` where `g` holds of `1 + body`, minus 1
    /// if any tuple holds.
    fn chain(c: &mut Compiler, loops: Vec<(u32, i64)>, g: Vec<u32>, body: Self) -> Result<Self>;
}

impl Compiler<'_, '_> {
    /// The cost of `e` by the rules.
    pub(super) fn cost<C: Algebra>(&mut self, e: &Expr) -> Result<C> {
        match e {
            // x, c, (real a): 0
            Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => Ok(C::zero()),
            // (+ a b): a + b + [p_a ∧ p_b], p_x the predicate of x when x is
            // literally an iverson, else true
            Expr::Add(a, b) => {
                let (x, y) = (self.cost(a)?, self.cost(b)?);
                let sum = C::plus(self, x, y)?;
                let mut g = Vec::new();
                let mut ok = true;
                for side in [a, b] {
                    if let Expr::Iverson(p, _) = &**side {
                        ok &= self.conj(p, &mut g)?;
                    }
                }
                if !ok {
                    return Ok(sum);
                }
                let one = C::indicator(self, g)?;
                C::plus(self, sum, one)
            }
            // (* a b), (max a b), (min a b): 1 + a + b
            Expr::Mul(a, b) | Expr::MaxMin(_, a, b) => {
                let (x, y) = (self.cost(a)?, self.cost(b)?);
                let sum = C::plus(self, x, y)?;
                C::one_more(self, sum)
            }
            // (F a): 1 + a
            Expr::Call(_, a) => {
                let x = self.cost(a)?;
                C::one_more(self, x)
            }
            // pair, let: a + b
            Expr::Pair(a, b) | Expr::Let(_, a, b) => {
                let (x, y) = (self.cost(a)?, self.cost(b)?);
                C::plus(self, x, y)
            }
            // fst, snd, get: the subject
            Expr::Fst(a) | Expr::Snd(a) | Expr::Get(a, _) => self.cost(a),
            // (gen i D e): Σ_i e
            Expr::Gen(i, d, body) => {
                let n = self.dim(d)?;
                let slot = self.bind(*i)?;
                let r = self.cost(body);
                self.unbind(*i);
                C::gen(self, slot, n, r?)
            }
            // (maximum i D e) and the other reductions: like a sum over i
            // without brackets, Σ_i (1 + e) minus 1 if D > 0: the body at
            // every i and D - 1 comparisons
            Expr::Reduce(_, i, d, body) => {
                let n = self.dim(d)?;
                let slot = self.bind(*i)?;
                let r = self.cost(body);
                self.unbind(*i);
                C::chain(self, vec![(slot, n)], Vec::new(), r?)
            }
            // (iverson p e): e where p holds, else 0
            Expr::Iverson(p, body) => {
                let r: C = self.cost(body)?;
                if r.is_zero() {
                    return Ok(r);
                }
                let mut g = Vec::new();
                if !self.conj(p, &mut g)? {
                    return Ok(C::zero());
                }
                if g.is_empty() {
                    return Ok(r);
                }
                C::guarded(self, g, r)
            }
            // a maximal chain of directly nested sums whose body is
            // (iverson p e) (else p = true, e = body): Σ over the tuples where
            // p holds of (1 + e), minus 1 if any tuple holds
            Expr::Sum(..) => {
                let (loops, names, node, res) = self.bind_chain(e);
                let parts = res.and_then(|()| {
                    let (p, inner) = match node {
                        Expr::Iverson(p, e) => (Some(p), &**e),
                        _ => (None, node),
                    };
                    let r: C = self.cost(inner)?;
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
                let (ok, g, r) = parts?;
                if !ok {
                    return Ok(C::zero());
                }
                C::chain(self, loops, g, r)
            }
        }
    }
}
