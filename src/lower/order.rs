//! Loop order for a `gen` over reductions (loop interchange).
//!
//! `(gen i D (sum j M e))` runs, as written, the `j` loop inside the `i`
//! loop. When `e` reads `A[j][i]` (a reduction over the outer dimension of
//! a row-major array) every term of the inner loop is a cache miss; when
//! `D` is small and `M` long (a kernel's adjoint, `gen k m (sum i n ...)`)
//! the inner loop streams the whole signal once per output. Both are fixed
//! by interchanging: the row `T[0..D)` is zero filled, then
//!
//! ```text
//! for j: for i: T[i] += e        (the gen variable innermost)
//! ```
//!
//! Each element still adds its terms in the same order (same value, same
//! operations: a per-element flag keeps "the first term needs no addition"
//! in the counting build).
//!
//! The heuristic, over the affine accesses of the summand and of its
//! bracket (tensor reads `x[a0]..[ak]` and relation tests): an access is
//! *unit* in a variable `v` when `v` occurs only in its last index with
//! coefficient ±1, *invariant* when `v` does not occur, *strided*
//! otherwise. Let `s(v)` count the strided accesses. The gen variable goes
//! innermost when `s(i) < s(j)` (`j` the innermost sum variable), and on a
//! tie when `D <= ATL_ROW_LIMIT` at run time (4096 unless the C compiler is
//! told otherwise; the row then stays in cache and
//! the sum's arrays are streamed once instead of once per output).
//!
//! Only sums reached from the gen's body through `+`, `*` and calls (and
//! lets of views not depending on `i`, bound once before the loop) are
//! candidates (those run for every `i`; a sum under a bracket or another
//! `let` stays where it is), with a summand that does no sum, `gen` or `let` of
//! its own and a bracket without equalities (an equality already removes a
//! loop; the plan keeps that). A candidate that is the whole body
//! accumulates into the destination row; otherwise into a fresh row that
//! the body then reads.

use super::sum::Acc;
use super::value::V;
use super::Lowerer;
use crate::constraints::Constraint;
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{CmpOp, Expr, Pred, Type};
use crate::symbol::Symbol;

use super::ir::Stmt;

/// How an access moves when one loop variable steps.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stride {
    Invariant,
    Unit,
    Strided,
}

fn stride(idx: &[Affine], v: Symbol) -> Stride {
    let at: Vec<(usize, i64)> = idx
        .iter()
        .enumerate()
        .filter_map(|(p, a)| {
            a.terms
                .iter()
                .find(|(s, k)| *s == v && *k != 0)
                .map(|(_, k)| (p, *k))
        })
        .collect();
    match at.as_slice() {
        [] => Stride::Invariant,
        [(p, k)] if *p + 1 == idx.len() && k.abs() == 1 => Stride::Unit,
        _ => Stride::Strided,
    }
}

/// Sums of `e` that run whenever `e` does: reached through `+`, `*` and
/// calls only.
pub(super) fn candidates<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Sum(..) => out.push(e),
        Expr::Add(a, b) | Expr::Mul(a, b) | Expr::MaxMin(_, a, b) => {
            candidates(a, out);
            candidates(b, out);
        }
        Expr::Call(_, a) => candidates(a, out),
        _ => {}
    }
}

/// Sums of `e` that run whenever `e` does, as [`candidates`], and also
/// through scalar `let`s: in a let's definition (a let is computed where
/// it stands, [`Lowerer::bind_let`]) and in its body when the sum does not
/// read the let's variable (nor does the let shadow `v`, the variable of
/// the loop around `e`, whose reads replace the sums). `(let z (relu (* s (sum j ...))) (* z z))`
/// runs its sum once per evaluation, as `(relu (* s (sum j ...)))` does.
pub(super) fn let_candidates<'a>(e: &'a Expr, v: Symbol, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Sum(..) => out.push(e),
        Expr::Add(a, b) | Expr::Mul(a, b) | Expr::MaxMin(_, a, b) => {
            let_candidates(a, v, out);
            let_candidates(b, v, out);
        }
        Expr::Call(_, a) => let_candidates(a, v, out),
        Expr::Let(x, e0, body) => {
            let_candidates(e0, v, out);
            if *x == v {
                return; // the loop's variable is shadowed in the body
            }
            let mut inner = vec![];
            let_candidates(body, v, &mut inner);
            out.extend(
                inner
                    .into_iter()
                    .filter(|s| !crate::front::subst::free_names(s).contains(x)),
            );
        }
        _ => {}
    }
}

/// The sums of a `(sum j d body)` to run first into rows over `j`
/// ([`Lowerer::sum_rows`]). `bounded`: one of them walks a relation's
/// stored tuples, so the row of accumulators is used only when `d` is at
/// most `ATL_ROW_LIMIT` at run time (the order as written re-walks a short
/// fibre per `j`, where a dense sum's would walk a matrix by columns).
pub(super) struct SumRows<'a> {
    j: Symbol,
    pub(super) d: &'a Affine,
    body: &'a Expr,
    sums: Vec<&'a Expr>,
    pub(super) bounded: bool,
}

/// Does the sum chain `s` have a relation atom over one of its variables
/// in its bracket (so that the atom drives its loop over stored tuples)?
fn walks_relation(s: &Expr) -> bool {
    let (chain, p, _) = crate::semantics::eval::sum_chain(s);
    p.is_some_and(|p| {
        crate::terms::brackets::conjuncts(p).into_iter().any(|q| {
            matches!(q, Pred::Rel(_, args) if args.iter().any(|a| {
                a.terms.iter().any(|(v, _)| chain.iter().any(|(c, _)| c == v))
            }))
        })
    })
}

/// `e` with the given subexpressions (by address) replaced.
pub(super) fn replace(e: &Expr, repl: &[(*const Expr, Expr)]) -> Expr {
    if let Some((_, r)) = repl.iter().find(|(p, _)| std::ptr::eq(*p, e)) {
        return r.clone();
    }
    match e {
        Expr::Add(a, b) => Expr::Add(Box::new(replace(a, repl)), Box::new(replace(b, repl))),
        Expr::Mul(a, b) => Expr::Mul(Box::new(replace(a, repl)), Box::new(replace(b, repl))),
        Expr::MaxMin(m, a, b) => {
            Expr::MaxMin(*m, Box::new(replace(a, repl)), Box::new(replace(b, repl)))
        }
        Expr::Call(f, a) => Expr::Call(*f, Box::new(replace(a, repl))),
        Expr::Let(x, e0, body) => Expr::Let(
            *x,
            Box::new(replace(e0, repl)),
            Box::new(replace(body, repl)),
        ),
        _ => e.clone(),
    }
}

/// A summand without loops or bindings of its own.
fn flat(e: &Expr) -> bool {
    match e {
        Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => true,
        Expr::Get(a, _) | Expr::Fst(a) | Expr::Snd(a) | Expr::Call(_, a) => flat(a),
        Expr::Iverson(_, a) => flat(a),
        Expr::Add(a, b) | Expr::Mul(a, b) | Expr::MaxMin(_, a, b) | Expr::Pair(a, b) => {
            flat(a) && flat(b)
        }
        Expr::Sum(..) | Expr::Gen(..) | Expr::Reduce(..) | Expr::Let(..) => false,
    }
}

fn has_equality(p: &Pred) -> bool {
    match p {
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(has_equality),
        Pred::Exists(_, _, q) => has_equality(q),
        _ => super::pred::affine(p)
            .is_some_and(|cs| cs.iter().any(|c| matches!(c, Constraint::Eq(_)))),
    }
}

/// `e` with the index variable `j` replaced by `by` (`None`: a binder
/// would capture, or overflow).
pub(super) fn subst_expr(e: &Expr, j: Symbol, by: &Affine, avoid: &[Symbol]) -> Option<Expr> {
    let r = |a: &Expr| subst_expr(a, j, by, avoid).map(Box::new);
    Some(match e {
        Expr::Var(_) | Expr::Const(_) => e.clone(),
        Expr::IndexReal(ix) => Expr::IndexReal(ix.substitute(j, by).ok()?),
        Expr::MaxMin(m, a, b) => Expr::MaxMin(*m, r(a)?, r(b)?),
        Expr::Get(a, ix) => Expr::Get(r(a)?, ix.substitute(j, by).ok()?),
        Expr::Fst(a) => Expr::Fst(r(a)?),
        Expr::Snd(a) => Expr::Snd(r(a)?),
        Expr::Call(f, a) => Expr::Call(*f, r(a)?),
        Expr::Add(a, b) => Expr::Add(r(a)?, r(b)?),
        Expr::Mul(a, b) => Expr::Mul(r(a)?, r(b)?),
        Expr::Pair(a, b) => Expr::Pair(r(a)?, r(b)?),
        Expr::Iverson(p, a) => Expr::Iverson(subst_pred(p, j, by, avoid)?, r(a)?),
        Expr::Sum(..) | Expr::Gen(..) | Expr::Reduce(..) | Expr::Let(..) => return None,
    })
}

fn subst_pred(p: &Pred, j: Symbol, by: &Affine, avoid: &[Symbol]) -> Option<Pred> {
    let all = |ps: &[Pred]| -> Option<Vec<Pred>> {
        ps.iter().map(|q| subst_pred(q, j, by, avoid)).collect()
    };
    Some(match p {
        Pred::True | Pred::False => p.clone(),
        Pred::Cmp(op, a, b) => Pred::Cmp(*op, a.substitute(j, by).ok()?, b.substitute(j, by).ok()?),
        Pred::And(ps) => Pred::And(all(ps)?),
        Pred::Or(ps) => Pred::Or(all(ps)?),
        Pred::Rel(r, args) => Pred::Rel(
            *r,
            args.iter()
                .map(|a| a.substitute(j, by).ok())
                .collect::<Option<_>>()?,
        ),
        Pred::Exists(v, d, q) => {
            if *v == j {
                p.clone()
            } else if avoid.contains(v) {
                return None;
            } else {
                Pred::Exists(*v, d.clone(), Box::new(subst_pred(q, j, by, avoid)?))
            }
        }
    })
}

impl Lowerer {
    /// Zero the `dn` entries of `buf` from `off` on, and declare the
    /// per-element first-term flags of a row accumulated into it (see
    /// `ATL_FIRST_AT`); returns the flags' name.
    pub(super) fn zero_row(&mut self, buf: &str, off: &str, dn: &str) -> String {
        let k = self.fresh("k", "");
        let at = if off == "0" {
            k.clone()
        } else {
            format!("{off} + {k}")
        };
        self.out.push(Stmt::For {
            var: k,
            lo: "0".into(),
            hi: dn.to_string(),
            body: vec![Stmt::Line(format!("{buf}[{at}] = 0.0;"))],
        });
        let flags = self.fresh("h", "");
        self.line(format!("ATL_FIRST_AT({flags}, {dn});"));
        flags
    }

    /// A band: when the bracket of the sum chain `s` holds the innermost
    /// sum variable `j` within constants of the gen variable `i`
    /// (`i + lo <= j <= i + hi`, a stencil's adjoint), the chain re-indexed
    /// by the offset `o = j - i - lo` in `[0, hi - lo]`, `j`'s own range a
    /// conjunct of the bracket. With `i` innermost its loop is then long
    /// (the row) instead of `hi - lo + 1` iterations; every element still
    /// adds the same terms in the same order (`o` ascends with `j`).
    fn skew_band(&mut self, i: Symbol, s: &Expr) -> Option<Expr> {
        let (chain, p, body) = crate::semantics::eval::sum_chain(s);
        let &(j, dj) = chain.last()?;
        let p = p?;
        if chain.iter().any(|(v, _)| *v == i) {
            return None;
        }
        let (mut lo, mut hi): (Option<i128>, Option<i128>) = (None, None);
        for atom in crate::terms::brackets::conjuncts(p) {
            for c in super::pred::affine(atom).unwrap_or_default() {
                let Constraint::Ge(f) = c else { continue };
                if f.terms().len() != 2 {
                    continue;
                }
                match (f.coeff(j), f.coeff(i)) {
                    // j - i + k >= 0: j >= i - k
                    (1, -1) => lo = Some(lo.map_or(-f.constant, |l| l.max(-f.constant))),
                    // i - j + k >= 0: j <= i + k
                    (-1, 1) => hi = Some(hi.map_or(f.constant, |h| h.min(f.constant))),
                    _ => {}
                }
            }
        }
        let (lo, hi) = (lo?, hi?);
        let width = i64::try_from(hi - lo + 1).ok().filter(|w| *w >= 1)?;
        let lo = i64::try_from(lo).ok()?;
        let o = self.internal_symbol("o");
        // j = i + lo + o
        let by = Affine::var(i)
            .add_constant(lo)
            .ok()?
            .add(&Affine::var(o))
            .ok()?;
        let avoid = [i, o];
        let body = subst_expr(body, j, &by, &avoid)?;
        let p = subst_pred(p, j, &by, &avoid)?;
        let range = [
            Pred::Cmp(CmpOp::Le, Affine::constant(0), by.clone()),
            Pred::Cmp(CmpOp::Lt, by.clone(), dj.clone()),
        ];
        let bracket = Pred::And(std::iter::once(p).chain(range).collect());
        let mut e = Expr::Sum(
            o,
            Affine::constant(width),
            Box::new(Expr::Iverson(bracket, Box::new(body))),
        );
        for (v, d) in chain[..chain.len() - 1].iter().rev() {
            e = Expr::Sum(*v, (*d).clone(), Box::new(e));
        }
        Some(e)
    }
}

impl Lowerer {
    /// The leaf a variable (or a projection of one) is bound to.
    pub(super) fn resolve(&self, e: &Expr) -> Option<V> {
        match e {
            Expr::Var(x) => self.vals.get(x).cloned(),
            Expr::Fst(a) => self.resolve(a)?.split_pair().ok().map(|p| p.0),
            Expr::Snd(a) => self.resolve(a)?.split_pair().ok().map(|p| p.1),
            _ => None,
        }
    }

    /// The index lists of the element reads and relation tests in `e`.
    fn accesses(&self, e: &Expr, out: &mut Vec<Vec<Affine>>) {
        match e {
            Expr::Get(..) => {
                let mut idx = vec![];
                let mut r = e;
                while let Expr::Get(a, i) = r {
                    idx.push(i.clone());
                    r = a;
                }
                idx.reverse();
                if let Some(V::Leaf { dims, .. }) = self.resolve(r) {
                    if dims.len() == idx.len() {
                        out.push(idx);
                    }
                }
            }
            Expr::Add(a, b) | Expr::Mul(a, b) | Expr::MaxMin(_, a, b) | Expr::Pair(a, b) => {
                self.accesses(a, out);
                self.accesses(b, out);
            }
            Expr::Call(_, a) | Expr::Fst(a) | Expr::Snd(a) => self.accesses(a, out),
            Expr::Iverson(p, a) => {
                self.pred_accesses(p, out);
                self.accesses(a, out);
            }
            _ => {}
        }
    }

    fn pred_accesses(&self, p: &Pred, out: &mut Vec<Vec<Affine>>) {
        match p {
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| self.pred_accesses(q, out)),
            Pred::Exists(_, _, q) => self.pred_accesses(q, out),
            Pred::Rel(r, args) => {
                if let Some(V::Rel { dims, .. }) = self.vals.get(r) {
                    if dims.len() == args.len() {
                        out.push(args.clone());
                    }
                }
            }
            _ => {}
        }
    }

    /// Whether the sum `s` inside `(gen i ...)` should run with `i`
    /// innermost: `Some(true)` always, `Some(false)` only when the gen's
    /// extent is at most `ATL_ROW_LIMIT` (a tie), `None` never.
    pub(super) fn interchange(&self, i: Symbol, s: &Expr) -> Option<bool> {
        let (chain, p, body) = crate::semantics::eval::sum_chain(s);
        let &(j, _) = chain.last()?;
        if chain.iter().any(|(v, _)| *v == i) || !flat(body) || p.is_some_and(has_equality) {
            return None;
        }
        let mut acc = vec![];
        self.accesses(body, &mut acc);
        if let Some(p) = p {
            self.pred_accesses(p, &mut acc);
        }
        let strided = |v: Symbol| {
            acc.iter()
                .filter(|a| stride(a, v) == Stride::Strided)
                .count()
        };
        let (si, sj) = (strided(i), strided(j));
        if si < sj {
            Some(true)
        } else if si == sj && !p.is_some_and(|p| crossed_relation_atoms(p, i, j)) {
            Some(false)
        } else {
            None
        }
    }

    /// Store `(gen i d body)` into `dest`, interchanging the loops of the
    /// body's sums where the heuristic says so (module doc).
    pub(crate) fn store_gen(&mut self, i: Symbol, d: &Affine, body: &Expr, dest: &V) -> Result<()> {
        // A let of a view (no work) that does not mention `i` is bound
        // once, outside the loop, so that the sum under it is a candidate.
        if let Expr::Let(x, e0, rest) = body {
            if *x != i
                && super::expr::lazy_gen(e0).is_some()
                && !crate::front::subst::free_names(e0).contains(&i)
            {
                let old = self.bind_let(*x, e0)?;
                let r = self.store_gen(i, d, rest, dest);
                self.unbind(*x, old);
                return r;
            }
        }
        let row =
            matches!(dest, V::Leaf { dims, conds, .. } if dims.len() == 1 && conds.is_empty());
        let mut cands = vec![];
        if row {
            let_candidates(body, i, &mut cands);
        }
        let chosen: Vec<(&Expr, bool)> = cands
            .into_iter()
            .filter_map(|s| self.interchange(i, s).map(|always| (s, always)))
            .collect();
        let all: Vec<&Expr> = chosen.iter().map(|c| c.0).collect();
        let always: Vec<&Expr> = chosen.iter().filter(|c| c.1).map(|c| c.0).collect();
        if all.len() == always.len() {
            return self.gen_with(i, d, body, dest, &all);
        }
        let dn = self.dim(d)?;
        let (then, ()) = self.block(|lw| lw.gen_with(i, d, body, dest, &all))?;
        let (els, ()) = self.block(|lw| lw.gen_with(i, d, body, dest, &always))?;
        self.out.push(Stmt::If {
            cond: format!("{dn} <= ATL_ROW_LIMIT"),
            then,
            els,
        });
        Ok(())
    }

    /// The gen with the sums `inter` run interchanged.
    fn gen_with(
        &mut self,
        i: Symbol,
        d: &Affine,
        body: &Expr,
        dest: &V,
        inter: &[&Expr],
    ) -> Result<()> {
        if inter.is_empty() {
            if self.band_rows(i, d, body, dest)? {
                return Ok(());
            }
            return self.gen_loop(i, d, body, dest);
        }
        if let ([s], V::Leaf { buf, off, .. }) = (inter, dest) {
            if std::ptr::eq(*s, body) {
                return self.accumulate_row(i, d, s, buf, off);
            }
        }
        let mut repl = vec![];
        for s in inter {
            let t = self.slot("row", std::slice::from_ref(d))?;
            self.accumulate_row(i, d, s, &t, "0")?;
            let sym = self.internal_symbol("row");
            self.vals.insert(sym, V::leaf(t, vec![d.clone()]));
            self.tenv
                .insert(sym, Type::Tensor(d.clone(), Box::new(Type::Real)));
            repl.push((
                *s as *const Expr,
                Expr::Get(Box::new(Expr::Var(sym)), Affine::var(i)),
            ));
        }
        let body = replace(body, &repl);
        self.gen_loop(i, d, &body, dest)
    }

    /// A sum `(sum j d body)` (no bracket, one variable) whose body holds
    /// sums that walk memory better with `j` innermost (a quadratic form's
    /// `sum j (* (sum k (* A[k][i] A[k][j])) x[j])`, a graph convolution's
    /// `sum c (let z (relu (* s (sum j [E i j] XW[j][c]))) (* z z))`):
    /// those sums, to be run first into rows over `j`, interchanged, which
    /// the sum then reads ([`Self::run_rows`]). Every `j < d` is a term, so
    /// each row element is computed once by the operations it would have
    /// taken in place, in the same order.
    pub(super) fn sum_rows<'a>(&self, e: &'a Expr) -> Option<SumRows<'a>> {
        let Expr::Sum(j, d, body) = e else {
            return None;
        };
        if matches!(&**body, Expr::Sum(..) | Expr::Iverson(..)) {
            return None;
        }
        let mut cands = vec![];
        let_candidates(body, *j, &mut cands);
        let sums: Vec<&Expr> = cands
            .into_iter()
            .filter(|s| self.interchange(*j, s) == Some(true))
            .collect();
        if sums.is_empty() {
            return None;
        }
        let bounded = sums.iter().any(|s| walks_relation(s));
        Some(SumRows {
            j: *j,
            d,
            body,
            sums,
            bounded,
        })
    }

    /// The rows of [`Self::sum_rows`] computed (a slot of `d` reals each,
    /// reused by every evaluation of the sum), and the sum reading them.
    pub(super) fn run_rows(&mut self, r: &SumRows) -> Result<Expr> {
        let mut repl = vec![];
        for s in &r.sums {
            let t = self.slot("row", std::slice::from_ref(r.d))?;
            self.accumulate_row(r.j, r.d, s, &t, "0")?;
            let sym = self.internal_symbol("row");
            self.vals.insert(sym, V::leaf(t, vec![r.d.clone()]));
            self.tenv
                .insert(sym, Type::Tensor(r.d.clone(), Box::new(Type::Real)));
            repl.push((
                *s as *const Expr,
                Expr::Get(Box::new(Expr::Var(sym)), Affine::var(r.j)),
            ));
        }
        Ok(Expr::Sum(
            r.j,
            r.d.clone(),
            Box::new(replace(r.body, &repl)),
        ))
    }

    /// `buf[off + i] = s` for every `i < d`, the sum's loops outside.
    fn accumulate_row(
        &mut self,
        i: Symbol,
        d: &Affine,
        s: &Expr,
        buf: &str,
        off: &str,
    ) -> Result<()> {
        let skewed = self.skew_band(i, s);
        let s = skewed.as_ref().unwrap_or(s);
        let dn = self.dim(d)?;
        let flags = self.zero_row(buf, off, &dn);
        self.sum_nest(
            s,
            &Acc::Row {
                gen: i,
                dim: d.clone(),
                buf: buf.to_string(),
                off: off.to_string(),
                flags: flags.clone(),
                flag_off: "0".into(),
            },
        )?;
        self.line(format!("ATL_FIRST_AT_END({flags});"));
        Ok(())
    }
}

/// Whether the bracket `p` tests relations with `i` and `j` in both
/// orders (`(E i j)` beside `(E j i)`, as a union does). Then the order as
/// written walks one atom's layout and the other's transposed layout with
/// a cursor, and running `i` innermost would test one of them by a search
/// per pair instead: a tie is kept as written.
fn crossed_relation_atoms(p: &Pred, i: Symbol, j: Symbol) -> bool {
    fn atoms(p: &Pred, i: Symbol, j: Symbol, orders: &mut [bool; 2]) {
        match p {
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| atoms(q, i, j, orders)),
            Pred::Exists(_, _, q) => atoms(q, i, j, orders),
            Pred::Rel(_, args) => {
                let at = |v: Symbol| args.iter().position(|a| a.coeff(v) != 0);
                if let (Some(pi), Some(pj)) = (at(i), at(j)) {
                    orders[usize::from(pj < pi)] |= pi != pj;
                }
            }
            _ => {}
        }
    }
    let mut orders = [false; 2];
    atoms(p, i, j, &mut orders);
    orders[0] && orders[1]
}
