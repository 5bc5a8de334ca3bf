//! Banded intermediates: a let-bound matrix whose bracket keeps it within a
//! constant distance of its diagonal is stored by diagonals.
//!
//! `(let x (gen i n (gen j m (iverson (and (<= (+ i a) j) (<= j (+ i b))
//! ...) e))) body)` is zero outside `i + a <= j <= i + b`: stored as it is
//! written it is an `n×m` zero fill around `w = b - a + 1` values a row
//! (a band matrix of a gradient, such as a tridiagonal quadratic form's
//! `x[i]·A[i][j]`). It is stored `n×w` instead, its column `o` holding
//! `j = i + a + o`:
//!
//! ```text
//! (let x (gen i n (gen o w (iverson (and ... (<= 0 (+ i a o)) (< (+ i a o) m)) e[j := i+a+o])))
//!   body[(get (get x I) J) := (get (get x I) (- J I a))])
//! ```
//!
//! A read outside the band is out of the new range (`J - I - a` is not in
//! `[0, w)`) and reads zero, as the bracket made it; a read inside it reads
//! the same element, computed once by the same operations where the same
//! bracket holds (values and counted operations are unchanged). Only a
//! let read as `(get (get x I) J)` everywhere, whose element has no binder
//! of its own, and whose band is at most [`MAX_WIDTH`] wide, is stored so.

use super::Lowerer;
use crate::constraints::{Constraint, LinForm};
use crate::front::affine::Affine;
use crate::front::ast::{CmpOp, Expr, Pred};
use crate::symbol::Symbol;
use crate::terms::brackets::conjuncts;

/// The widest band stored by diagonals.
const MAX_WIDTH: i64 = 16;

/// `-c` when the comparison `p` is `j >= i - c` (`Some((true, -c))`), `c`
/// when it is `j <= i + c` (`Some((false, c))`).
fn band_side(p: &Pred, i: Symbol, j: Symbol) -> Option<(bool, i64)> {
    let Pred::Cmp(op, a, b) = p else {
        return None;
    };
    if *op == CmpOp::Eq {
        return None;
    }
    let c = Constraint::compare(*op, &LinForm::from_affine(a), &LinForm::from_affine(b))?;
    let f = c.form();
    let k = |v: Symbol| f.terms().iter().find(|(s, _)| *s == v).map(|t| t.1);
    if f.terms().len() != 2 {
        return None;
    }
    let c = i64::try_from(f.constant).ok()?;
    match (k(j)?, k(i)?) {
        // j - i + c >= 0: j >= i - c
        (1, -1) => Some((true, c.checked_neg()?)),
        // i - j + c >= 0: j <= i + c
        (-1, 1) => Some((false, c)),
        _ => None,
    }
}

/// Does `e` read `x` only as `(get (get x I) J)` (free occurrences)?
fn read_as_matrix(e: &Expr, x: Symbol) -> bool {
    match e {
        Expr::Get(a, _) => match &**a {
            Expr::Get(v, _) if matches!(&**v, Expr::Var(y) if *y == x) => true,
            _ => read_as_matrix(a, x),
        },
        Expr::Var(y) => *y != x,
        Expr::Let(y, e0, b) => read_as_matrix(e0, x) && (*y == x || read_as_matrix(b, x)),
        _ => e.children().all(|c| read_as_matrix(c, x)),
    }
}

/// `e` with every free `(get (get x I) J)` read as `(get (get x I) (J - I - a))`
/// (`None` on overflow).
fn shift_reads(e: &Expr, x: Symbol, a: i64) -> Option<Expr> {
    Some(match e {
        Expr::Get(g, jx) => match &**g {
            Expr::Get(v, ix) if matches!(&**v, Expr::Var(y) if *y == x) => {
                let o = jx.sub(ix).ok()?.add_constant(a.checked_neg()?).ok()?;
                Expr::Get(g.clone(), o)
            }
            _ => Expr::Get(Box::new(shift_reads(g, x, a)?), jx.clone()),
        },
        Expr::Let(y, e0, b) if *y == x => {
            Expr::Let(*y, Box::new(shift_reads(e0, x, a)?), b.clone())
        }
        _ => e
            .try_map_children(|c| shift_reads(c, x, a).ok_or(()))
            .ok()?,
    })
}

impl Lowerer {
    /// `e` with every banded let-bound matrix stored by diagonals (module
    /// doc).
    pub(super) fn band_lets(&mut self, e: &Expr) -> Expr {
        let e = e.map_children(|c| self.band_lets(c));
        self.band_let(&e).unwrap_or(e)
    }

    fn band_let(&mut self, e: &Expr) -> Option<Expr> {
        let Expr::Let(x, e0, body) = e else {
            return None;
        };
        let Expr::Gen(i, n, inner) = &**e0 else {
            return None;
        };
        let Expr::Gen(j, m, guarded) = &**inner else {
            return None;
        };
        let Expr::Iverson(p, el) = &**guarded else {
            return None;
        };
        if i == j || n.mentions(*i) || n.mentions(*j) || m.mentions(*i) || m.mentions(*j) {
            return None;
        }
        let (mut lo, mut hi, mut rest) = (None::<i64>, None::<i64>, vec![]);
        for q in conjuncts(p) {
            match band_side(q, *i, *j) {
                Some((true, a)) => lo = Some(lo.map_or(a, |l| l.max(a))),
                Some((false, b)) => hi = Some(hi.map_or(b, |h| h.min(b))),
                None => rest.push(q.clone()),
            }
        }
        let (a, b) = (lo?, hi?);
        let w = b.checked_sub(a)?.checked_add(1)?;
        if !(1..=MAX_WIDTH).contains(&w) || m.as_constant().is_some_and(|m| m <= w) {
            return None;
        }
        if !read_as_matrix(body, *x) {
            return None;
        }
        let o = self.internal_symbol("band");
        // j = i + a + o
        let at = Affine::var(*i)
            .add(&Affine::var(o))
            .ok()?
            .add_constant(a)
            .ok()?;
        rest.push(Pred::Cmp(CmpOp::Le, Affine::constant(0), at.clone()));
        rest.push(Pred::Cmp(CmpOp::Lt, at.clone(), m.clone()));
        let element = Expr::Iverson(Pred::And(rest), el.clone());
        let element = super::order::subst_expr(&element, *j, &at, &[*i, o])?;
        let def = Expr::Gen(
            *i,
            n.clone(),
            Box::new(Expr::Gen(o, Affine::constant(w), Box::new(element))),
        );
        Some(Expr::Let(
            *x,
            Box::new(def),
            Box::new(shift_reads(body, *x, a)?),
        ))
    }
}
