//! Constraints over affine forms, equality solving, Fourier–Motzkin
//! projection, and the bounds a constraint puts on one variable: as forms
//! ([`ge_bound`], for loop bounds) or at concrete values
//! ([`interval`], for counting).

use super::linear::{ceil_div, floor_div, LinForm, Var};
use crate::front::ast::CmpOp;
use crate::symbol::Symbol;

/// One constraint of a system.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Constraint<V = Symbol> {
    /// `f >= 0`
    Ge(LinForm<V>),
    /// `f == 0`
    Eq(LinForm<V>),
    /// `k | f` (`k > 0`)
    Divides(i128, LinForm<V>),
}

/// A variable an equality fixed: `var = num / den` (`den > 0`; exact where
/// the system's divisibility guard `den | num` holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Solved<V = Symbol> {
    pub var: V,
    pub num: LinForm<V>,
    pub den: i128,
}

impl<V: Var> Solved<V> {
    /// Substitute another solution into this one's right-hand side.
    pub fn substitute(&self, s: &Solved<V>) -> Option<Solved<V>> {
        let a = self.num.coeff(s.var);
        if a == 0 {
            return Some(self.clone());
        }
        Some(Solved {
            var: self.var,
            num: self.num.without(s.var).combine(s.den, &s.num, a)?,
            den: self.den.checked_mul(s.den)?,
        })
    }
}

/// What a constraint says about its names alone.
pub enum Truth {
    Always,
    Never,
    Depends,
}

impl<V: Var> Constraint<V> {
    /// The comparison `a op b` (`None` on overflow): `b - a >= 1` for
    /// `a < b`, `a - b >= 0` for `a >= b`, `b - a == 0` for `a == b`, ...
    pub fn compare(op: CmpOp, a: &LinForm<V>, b: &LinForm<V>) -> Option<Constraint<V>> {
        let (hi, lo) = match op {
            CmpOp::Lt | CmpOp::Le | CmpOp::Eq => (b, a),
            CmpOp::Gt | CmpOp::Ge => (a, b),
        };
        let mut d = hi.combine(1, lo, -1)?;
        if matches!(op, CmpOp::Lt | CmpOp::Gt) {
            d.constant = d.constant.checked_sub(1)?;
        }
        Some(match op {
            CmpOp::Eq => Constraint::Eq(d),
            _ => Constraint::Ge(d),
        })
    }

    /// A constraint that never holds.
    pub fn never() -> Constraint<V> {
        Constraint::Ge(LinForm::constant(-1))
    }

    #[inline]
    pub fn form(&self) -> &LinForm<V> {
        match self {
            Constraint::Ge(f) | Constraint::Eq(f) | Constraint::Divides(_, f) => f,
        }
    }

    pub fn mentions(&self, v: V) -> bool {
        self.form().mentions(v)
    }

    /// Divide by the content of the variable part: `Ge` rounds the constant
    /// down (exact over the integers); an `Eq` whose constant is not a
    /// multiple can never hold (it stays, and [`Constraint::truth`] is
    /// `Never` on it only when it is constant, so it becomes `0 == c`).
    pub fn normalize(self) -> Constraint<V> {
        match self {
            Constraint::Ge(f) => {
                let g = f.content();
                if g > 1 {
                    let mut h = f;
                    h.constant = floor_div(h.constant, g);
                    h.map_coeffs(|k| k / g);
                    Constraint::Ge(h)
                } else {
                    Constraint::Ge(f)
                }
            }
            Constraint::Eq(f) => {
                let g = f.content();
                if g > 1 {
                    if f.constant % g != 0 {
                        return Constraint::Eq(LinForm::constant(1));
                    }
                    let mut h = f;
                    h.constant /= g;
                    h.map_coeffs(|k| k / g);
                    // A canonical sign: the first coefficient positive.
                    if h.terms().first().is_some_and(|t| t.1 < 0) {
                        h = h.scale(-1).unwrap_or(h);
                    }
                    Constraint::Eq(h)
                } else {
                    Constraint::Eq(f)
                }
            }
            Constraint::Divides(k, f) => {
                let mut h = f;
                h.constant = h.constant.rem_euclid(k);
                h.map_coeffs(|c| c.rem_euclid(k));
                Constraint::Divides(k, h)
            }
        }
    }

    pub fn truth(&self) -> Truth {
        let f = self.form();
        if !f.is_constant() {
            return Truth::Depends;
        }
        let ok = match self {
            Constraint::Ge(_) => f.constant >= 0,
            Constraint::Eq(_) => f.constant == 0,
            Constraint::Divides(k, _) => f.constant % k == 0,
        };
        if ok {
            Truth::Always
        } else {
            Truth::Never
        }
    }

    /// Does it hold with every name given by `env`?
    pub fn holds(&self, env: &impl Fn(V) -> Option<i128>) -> Option<bool> {
        Some(self.holds_at(self.form().eval(env)?))
    }

    /// Does it hold where its form's value is `x`?
    #[inline]
    pub fn holds_at(&self, x: i128) -> bool {
        match self {
            Constraint::Ge(_) => x >= 0,
            Constraint::Eq(_) => x == 0,
            Constraint::Divides(k, _) => x.rem_euclid(*k) == 0,
        }
    }

    /// Substitute `s.var = s.num / s.den` (scaling by `den > 0` keeps the
    /// sense of every constraint).
    pub fn substitute(&self, s: &Solved<V>) -> Option<Constraint<V>> {
        let f = self.form();
        let a = f.coeff(s.var);
        if a == 0 {
            return Some(self.clone());
        }
        let g = f.without(s.var).combine(s.den, &s.num, a)?;
        Some(match self {
            Constraint::Ge(_) => Constraint::Ge(g),
            Constraint::Eq(_) => Constraint::Eq(g),
            Constraint::Divides(k, _) => Constraint::Divides(k.checked_mul(s.den)?, g),
        })
    }
}

/// Solve the equality `eq` (`f == 0`) for `v` (coefficient `k != 0`):
/// `v = num / den` with `den = |k|`, exact under the guard `den | num`
/// (returned when `den > 1`).
#[allow(clippy::type_complexity)]
pub fn solve_for<V: Var>(eq: &LinForm<V>, v: V) -> Option<(Solved<V>, Option<Constraint<V>>)> {
    let k = eq.coeff(v);
    if k == 0 {
        return None;
    }
    let rest = eq.without(v);
    let num = if k > 0 { rest.scale(-1)? } else { rest };
    let den = k.abs();
    let guard = (den > 1).then(|| Constraint::Divides(den, num.clone()).normalize());
    Some((Solved { var: v, num, den }, guard))
}

/// Project `v` out of the inequalities `ges` (each `f >= 0`): the pairwise
/// combinations of a lower and an upper bound (rational Fourier–Motzkin:
/// implied by the system, so it may only admit points without an integer
/// `v`, never drop one). Returns `None` if more than `limit` would be made.
pub fn eliminate<V: Var>(ges: &[LinForm<V>], v: V, limit: usize) -> Option<Vec<LinForm<V>>> {
    let lower = || ges.iter().filter(|f| f.coeff(v) > 0);
    let upper = || ges.iter().filter(|f| f.coeff(v) < 0);
    let pairs = lower().count() * upper().count();
    if pairs > limit {
        return None;
    }
    let mut out = Vec::with_capacity(pairs);
    for l in lower() {
        for u in upper() {
            let (a, b) = (l.coeff(v), -u.coeff(v));
            out.push(l.combine(b, u, a)?);
        }
    }
    Some(out)
}

/// Drop the constraints without variables, deciding them: `false` if one
/// fails.
pub fn decide_closed<V: Var>(cons: &mut Vec<Constraint<V>>) -> bool {
    let mut ok = true;
    cons.retain(|c| match c.truth() {
        Truth::Depends => true,
        Truth::Always => false,
        Truth::Never => {
            ok = false;
            false
        }
    });
    ok
}

/// Which side of a variable a bound is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// `v >= ceil(r / d)`
    Lower,
    /// `v <= floor(r / d)`
    Upper,
}

/// `f = a·v + rest >= 0` (`a != 0`) as a bound on `v`: `(Lower, -rest, a)`
/// for `v >= ceil(-rest / a)` when `a > 0`, else `(Upper, rest, -a)` for
/// `v <= floor(rest / -a)` (`None` on overflow). [`narrow`] applies the
/// same bounds at values.
pub fn ge_bound<V: Var>(f: &LinForm<V>, v: V) -> Option<(Side, LinForm<V>, i128)> {
    let (a, rest) = (f.coeff(v), f.without(v));
    Some(if a > 0 {
        (Side::Lower, rest.scale(-1)?, a)
    } else {
        (Side::Upper, rest, a.checked_neg()?)
    })
}

/// Narrow the inclusive interval `[lo, hi]` to the values of `v` where `c`
/// holds, the other variables given by `env` (`None` on overflow or an
/// unbound variable). Divisibility does not narrow an interval: `c` is a
/// `Ge` or an `Eq`. An empty interval has `lo > hi`.
#[inline]
pub fn narrow<V: Var>(
    c: &Constraint<V>,
    v: V,
    env: &impl Fn(V) -> Option<i128>,
    lo: &mut i128,
    hi: &mut i128,
) -> Option<()> {
    let (a, b) = c.form().eval_split(v, env)?;
    if a == 0 {
        if !c.holds_at(b) {
            (*lo, *hi) = (1, 0);
        }
        return Some(());
    }
    match c {
        // the bounds of `ge_bound`, at values (written out: the inner loop
        // of counting)
        Constraint::Ge(_) if a > 0 => *lo = (*lo).max(ceil_div(b.checked_neg()?, a)),
        Constraint::Ge(_) => *hi = (*hi).min(floor_div(b, a.checked_neg()?)),
        Constraint::Eq(_) => {
            // a·v = -b
            let (a, nb) = if a < 0 {
                (a.checked_neg()?, b)
            } else {
                (a, b.checked_neg()?)
            };
            if nb.rem_euclid(a) == 0 {
                let q = nb.div_euclid(a);
                *lo = (*lo).max(q);
                *hi = (*hi).min(q);
            } else {
                (*lo, *hi) = (1, 0);
            }
        }
        Constraint::Divides(..) => debug_assert!(false, "divisibility narrowed as an interval"),
    }
    Some(())
}

/// The values of `v` in `[lo, hi]` where every constraint of `cons` holds
/// at `env`, as an inclusive interval (empty when `lo > hi`).
pub fn interval<V: Var>(
    v: V,
    (mut lo, mut hi): (i128, i128),
    cons: &[Constraint<V>],
    env: &impl Fn(V) -> Option<i128>,
) -> Option<(i128, i128)> {
    for c in cons {
        narrow(c, v, env, &mut lo, &mut hi)?;
        if lo > hi {
            return Some((1, 0));
        }
    }
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// A random form over slots 0..3 with small coefficients.
    fn form(rng: &mut Rng) -> LinForm<u32> {
        let mut f = LinForm::constant(rng.range(-6, 6) as i128);
        for v in 0..3 {
            f = f.plus_term(v, rng.range(-3, 3) as i128).unwrap();
        }
        f
    }

    #[test]
    fn comparisons_forms_and_intervals_agree_with_evaluation() {
        let mut rng = Rng::new(11);
        let ops = [CmpOp::Lt, CmpOp::Le, CmpOp::Eq, CmpOp::Gt, CmpOp::Ge];
        for _ in 0..2000 {
            let (f, g) = (form(&mut rng), form(&mut rng));
            let env = [
                rng.range(-4, 4) as i128,
                rng.range(-4, 4) as i128,
                rng.range(-4, 4) as i128,
            ];
            let at = |v: u32| env.get(v as usize).copied();
            let (x, y) = (f.eval(&at).unwrap(), g.eval(&at).unwrap());
            // forms: combine, substitute, split evaluation
            let k = rng.range(-3, 3) as i128;
            assert_eq!(f.combine(2, &g, k).unwrap().eval(&at), Some(2 * x + k * y));
            let s = f.substitute(1, &g).unwrap();
            let env1 = [env[0], y, env[2]];
            assert_eq!(s.eval(&at), f.eval(&|v| env1.get(v as usize).copied()));
            let (a, b) = f.eval_split(2, &at).unwrap();
            assert_eq!(a * env[2] + b, x);
            // comparisons
            let op = ops[rng.below(ops.len())];
            let c = Constraint::compare(op, &f, &g).unwrap();
            assert_eq!(c.holds(&at), Some(op.holds(x as i64, y as i64)), "{op:?}");
            // the interval of slot 2 is exactly where the constraints hold
            let cons = [c, Constraint::compare(op, &g, &f).unwrap()];
            let (lo, hi) = interval(2, (-10, 10), &cons, &at).unwrap();
            for v in -10..=10 {
                let env2 = [env[0], env[1], v];
                let at2 = |s: u32| env2.get(s as usize).copied();
                let want = cons.iter().all(|c| c.holds(&at2).unwrap());
                assert_eq!(lo <= v && v <= hi, want, "{cons:?} at {v}");
            }
        }
    }

    #[test]
    fn solving_and_eliminating() {
        let mut rng = Rng::new(12);
        for _ in 0..500 {
            let eq = form(&mut rng);
            let Some((s, guard)) = solve_for(&eq, 0) else {
                continue;
            };
            // wherever the equality holds, the solution gives slot 0
            for a in -5..=5i128 {
                for b in -5..=5i128 {
                    let env = [a, b, 1];
                    let at = |v: u32| env.get(v as usize).copied();
                    if eq.eval(&at) == Some(0) {
                        let num = s.num.eval(&at).unwrap();
                        assert!(guard.as_ref().is_none_or(|g| g.holds(&at) == Some(true)));
                        assert_eq!(num, a * s.den, "{eq:?}");
                    }
                }
            }
        }
        // ∃ j. 0 <= j, j <= i, j < n  is  0 <= i, 0 < n (with unit coefficients)
        let (i, j, n) = (0u32, 1u32, 2u32);
        let v = LinForm::<u32>::var;
        let ges = [
            v(j),
            v(i).combine(1, &v(j), -1).unwrap(),
            v(n).combine(1, &v(j), -1)
                .unwrap()
                .add_constant(-1)
                .unwrap(),
        ];
        let mut got = eliminate(&ges, j, 8).unwrap();
        got.sort();
        let mut want = vec![v(i), v(n).add_constant(-1).unwrap()];
        want.sort();
        assert_eq!(got, want);
    }
}
