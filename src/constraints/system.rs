//! Constraints over affine forms, equality solving and Fourier–Motzkin
//! projection.

use super::linear::{floor_div, LinForm};
use egg::Symbol;

/// One constraint of a system.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Constraint {
    /// `f >= 0`
    Ge(LinForm),
    /// `f == 0`
    Eq(LinForm),
    /// `k | f` (`k > 0`)
    Divides(i128, LinForm),
}

/// A variable an equality fixed: `var = num / den` (`den > 0`; exact where
/// the system's divisibility guard `den | num` holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Solved {
    pub var: Symbol,
    pub num: LinForm,
    pub den: i128,
}

/// What a constraint says about its names alone.
pub enum Truth {
    Always,
    Never,
    Depends,
}

impl Constraint {
    pub fn form(&self) -> &LinForm {
        match self {
            Constraint::Ge(f) | Constraint::Eq(f) | Constraint::Divides(_, f) => f,
        }
    }

    pub fn mentions(&self, v: Symbol) -> bool {
        self.form().coeff(v) != 0
    }

    /// Divide by the content of the variable part: `Ge` rounds the constant
    /// down (exact over the integers); an `Eq` whose constant is not a
    /// multiple can never hold (it stays, and [`Constraint::truth`] is
    /// `Never` on it only when it is constant, so it becomes `0 == c`).
    pub fn normalize(self) -> Constraint {
        match self {
            Constraint::Ge(f) => {
                let g = f.content();
                if g > 1 {
                    let mut h = f.clone();
                    h.constant = floor_div(f.constant, g);
                    h.terms.values_mut().for_each(|k| *k /= g);
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
                    h.terms.values_mut().for_each(|k| *k /= g);
                    // A canonical sign: the first coefficient positive.
                    if h.terms.values().next().is_some_and(|&k| k < 0) {
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
                h.terms.values_mut().for_each(|c| *c = c.rem_euclid(k));
                h.terms.retain(|_, c| *c != 0);
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
    pub fn holds(&self, env: &impl Fn(Symbol) -> Option<i128>) -> Option<bool> {
        let x = self.form().eval(env)?;
        Some(match self {
            Constraint::Ge(_) => x >= 0,
            Constraint::Eq(_) => x == 0,
            Constraint::Divides(k, _) => x.rem_euclid(*k) == 0,
        })
    }

    /// Substitute `s.var = s.num / s.den` (scaling by `den > 0` keeps the
    /// sense of every constraint).
    pub fn substitute(&self, s: &Solved) -> Option<Constraint> {
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
pub fn solve_for(eq: &LinForm, v: Symbol) -> Option<(Solved, Option<Constraint>)> {
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
pub fn eliminate(ges: &[LinForm], v: Symbol, limit: usize) -> Option<Vec<LinForm>> {
    let lower: Vec<&LinForm> = ges.iter().filter(|f| f.coeff(v) > 0).collect();
    let upper: Vec<&LinForm> = ges.iter().filter(|f| f.coeff(v) < 0).collect();
    if lower.len() * upper.len() > limit {
        return None;
    }
    let mut out = vec![];
    for l in &lower {
        for u in &upper {
            let (a, b) = (l.coeff(v), -u.coeff(v));
            out.push(l.combine(b, u, a)?);
        }
    }
    Some(out)
}
