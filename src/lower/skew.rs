//! A `gen` over a band sum, its rows split where the band leaves the
//! range: the interior runs the sum re-indexed by its offset, with bounds
//! that do not move with the row.
//!
//! A correlation's `gen g (sum i [g + lo <= i <= g + hi]·e)` (a stencil's
//! adjoint, `Σ_i d[i]·c[i + m - 1 - g]`) has a tap range that moves with
//! the output: its loop's bounds are `max(0, g + lo)` and `min(n - 1, g +
//! hi)`, set up again for every row, and a sum whose bounds depend on the
//! row cannot run by blocks of rows ([`super::tile`]). Where the whole band
//! lies in the range of `i` (`0 <= g + lo` and `g + hi < n`, the interior
//! of the rows) the sum is `Σ_{o < hi - lo + 1} e[i := g + lo + o]`: a
//! fixed number of taps, no bracket, every tap's read moving with the row
//! by one element. The gen then runs as three loops, over the rows before
//! the interior, the interior, and the rows after it; the first and the
//! last run the body as it was. Every row adds the same terms in the same
//! order (`o` ascends with `i`): the values and the counting build's
//! operations are the gen's as it was.
//!
//! The band's offsets `lo` and `hi` may depend on the sizes (the kernel's
//! length) and on enclosing loops, not on the sum's other variables; its
//! width `hi - lo + 1` only on the sizes, with coefficients that make it
//! non-negative. Every conjunct of the bracket that names `i` must be one
//! of the two bounds; conjuncts that do not name it stay, as a bracket of
//! the re-indexed sum.

use super::order::{candidates, replace, subst_expr};
use super::value::V;
use super::Lowerer;
use crate::constraints::{Constraint, LinForm};
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{Expr, Pred};
use crate::symbol::Symbol;

/// A band sum of a gen's body: the sum, its re-indexed interior form, and
/// the row range where that form holds: `-lo <= g < dim - hi`.
struct Band<'a> {
    sum: &'a Expr,
    interior: Expr,
    from: Affine,
    until: Affine,
}

impl Lowerer {
    /// Store `(gen i d body)` into `dest` with its band sums re-indexed in
    /// the interior rows (module doc); `false` when the body has none.
    pub(super) fn band_rows(
        &mut self,
        i: Symbol,
        d: &Affine,
        body: &Expr,
        dest: &V,
    ) -> Result<bool> {
        let mut cands = vec![];
        candidates(body, &mut cands);
        let bands: Vec<Band> = cands.into_iter().filter_map(|s| self.band(i, s)).collect();
        if bands.is_empty() {
            return Ok(false);
        }
        let dn = self.dim(d)?;
        let mut from = "0".to_string();
        let mut until = dn.clone();
        for b in &bands {
            from = format!("atlh_max({from}, {})", self.aff(&b.from)?);
            until = format!("atlh_min({until}, {})", self.aff(&b.until)?);
        }
        let (a, z) = (self.fresh("band", "lo"), self.fresh("band", "hi"));
        self.decl("const int64_t", &a, format!("atlh_min({from}, {dn})"));
        self.decl("const int64_t", &z, format!("atlh_max({until}, {a})"));
        let repl: Vec<(*const Expr, Expr)> = bands
            .iter()
            .map(|b| (b.sum as *const Expr, b.interior.clone()))
            .collect();
        let interior = replace(body, &repl);
        self.rows_loop(i, d, "0", &a, body, dest)?;
        self.rows_loop(i, d, &a, &z, &interior, dest)?;
        self.rows_loop(i, d, &z, &dn, body, dest)?;
        Ok(true)
    }

    /// The rows `[lo, hi)` of `(gen i d body)` stored into `dest` (as
    /// [`Lowerer::gen_loop`] stores all of them).
    fn rows_loop(
        &mut self,
        i: Symbol,
        d: &Affine,
        lo: &str,
        hi: &str,
        body: &Expr,
        dest: &V,
    ) -> Result<()> {
        let iv = self.bind_index(i, d)?;
        // Not the whole range: a read `x[i]` is not a view of `x`.
        let full = self.full_range.remove(&i);
        self.gen_vars.insert(i);
        let first_slot = self.slots.len();
        let stmts = self.block(|lw| {
            let inner = dest.index_unchecked(&iv, lw)?;
            lw.store(body, &inner)
        });
        if let Some(f) = full {
            self.full_range.insert(i, f);
        }
        let (stmts, ()) = stmts?;
        self.disjoint
            .insert(iv.clone(), super::parallel::buffers(dest));
        let scratch = self.slots[first_slot..].iter().map(|s| s.cname.clone());
        self.scratch.insert(iv.clone(), scratch.collect());
        self.out.push(super::ir::Stmt::For {
            var: iv,
            lo: lo.to_string(),
            hi: hi.to_string(),
            body: stmts,
        });
        Ok(())
    }

    /// The sum `s` of `(gen i ...)` as a band of its innermost variable
    /// around `i` (module doc).
    fn band<'a>(&mut self, i: Symbol, s: &'a Expr) -> Option<Band<'a>> {
        let (chain, p, body) = crate::semantics::eval::sum_chain(s);
        let &(j, dj) = chain.last()?;
        let p = p?;
        if chain.iter().any(|(v, _)| *v == i) {
            return None;
        }
        let outer: Vec<Symbol> = chain.iter().map(|c| c.0).collect();
        let (mut lo, mut hi) = (None, None);
        let mut kept = vec![];
        for atom in crate::terms::brackets::conjuncts(p) {
            if !pred_mentions(atom, j) {
                kept.push(atom.clone());
                continue;
            }
            let cs = super::pred::affine(atom)?;
            let [Constraint::Ge(f)] = cs.as_slice() else {
                return None;
            };
            let rest = f.without(j).without(i);
            if outer.iter().any(|v| rest.mentions(*v)) {
                return None;
            }
            match (f.coeff(j), f.coeff(i)) {
                // j - i + rest >= 0: j >= i - rest
                (1, -1) => lo = Some(tighter(lo, to_affine(&rest.scale(-1)?)?, true)?),
                // i - j + rest >= 0: j <= i + rest
                (-1, 1) => hi = Some(tighter(hi, to_affine(&rest)?, false)?),
                _ => return None,
            }
        }
        let (lo, hi): (Affine, Affine) = (lo?, hi?);
        let width = hi.sub(&lo).ok()?.add_constant(1).ok()?;
        let sizes_only = width.names().all(|v| !self.ranges.contains_key(&v));
        if !sizes_only || width.constant < 0 || width.terms.iter().any(|t| t.1 < 0) {
            return None;
        }
        let o = self.internal_symbol("o");
        // j = i + lo + o
        let by = Affine::var(i).add(&lo).ok()?.add(&Affine::var(o)).ok()?;
        let body = subst_expr(body, j, &by, &[i, o])?;
        let body = match kept.len() {
            0 => body,
            1 => Expr::Iverson(kept.remove(0), Box::new(body)),
            _ => Expr::Iverson(Pred::And(kept), Box::new(body)),
        };
        let mut interior = Expr::Sum(o, width, Box::new(body));
        for (v, d) in chain[..chain.len() - 1].iter().rev() {
            interior = Expr::Sum(*v, (*d).clone(), Box::new(interior));
        }
        Some(Band {
            sum: s,
            interior,
            from: lo.scale(-1).ok()?,
            until: dj.sub(&hi).ok()?,
        })
    }
}

/// Does the predicate name the variable `v`?
fn pred_mentions(p: &Pred, v: Symbol) -> bool {
    match p {
        Pred::True | Pred::False => false,
        Pred::Cmp(_, a, b) => a.mentions(v) || b.mentions(v),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(|q| pred_mentions(q, v)),
        Pred::Rel(_, args) => args.iter().any(|a| a.mentions(v)),
        Pred::Exists(w, _, q) => *w != v && pred_mentions(q, v),
    }
}

/// The tighter of two bounds that differ by a constant (`None` when they
/// differ otherwise): the larger lower bound, the smaller upper one.
fn tighter(old: Option<Affine>, new: Affine, lower: bool) -> Option<Affine> {
    let Some(old) = old else {
        return Some(new);
    };
    let diff = new.sub(&old).ok()?.as_constant()?;
    Some(if (diff > 0) == lower { new } else { old })
}

fn to_affine(f: &LinForm) -> Option<Affine> {
    let mut a = Affine::constant(i64::try_from(f.constant).ok()?);
    for (v, k) in f.terms() {
        let t = Affine::var(*v).scale(i64::try_from(*k).ok()?).ok()?;
        a = a.add(&t).ok()?;
    }
    Some(a)
}
