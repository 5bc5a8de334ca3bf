//! Affine forms `c + Σ k·v` with `i128` coefficients (wide enough that
//! Fourier–Motzkin combinations of `i64` index expressions do not overflow
//! in practice; every operation is checked and reports `None` otherwise).

use crate::front::affine::Affine;
use egg::Symbol;
use std::collections::BTreeMap;
use std::fmt;

/// `constant + Σ coeff·name`, no zero coefficients.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LinForm {
    pub constant: i128,
    pub terms: BTreeMap<Symbol, i128>,
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl LinForm {
    pub fn constant(c: i128) -> LinForm {
        LinForm {
            constant: c,
            terms: BTreeMap::new(),
        }
    }

    pub fn var(v: Symbol) -> LinForm {
        LinForm::constant(0).plus_term(v, 1)
    }

    pub fn from_affine(a: &Affine) -> LinForm {
        let mut f = LinForm::constant(a.constant as i128);
        for &(n, k) in &a.terms {
            f = f.plus_term(n, k as i128);
        }
        f
    }

    fn plus_term(mut self, v: Symbol, k: i128) -> LinForm {
        let e = self.terms.entry(v).or_insert(0);
        *e += k;
        if *e == 0 {
            self.terms.remove(&v);
        }
        self
    }

    pub fn coeff(&self, v: Symbol) -> i128 {
        self.terms.get(&v).copied().unwrap_or(0)
    }

    pub fn is_constant(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = Symbol> + '_ {
        self.terms.keys().copied()
    }

    /// `a·self + b·other`.
    pub fn combine(&self, a: i128, other: &LinForm, b: i128) -> Option<LinForm> {
        let mut out = LinForm::constant(
            self.constant
                .checked_mul(a)?
                .checked_add(other.constant.checked_mul(b)?)?,
        );
        for (&v, &k) in &self.terms {
            out = out.plus_term(v, k.checked_mul(a)?);
        }
        for (&v, &k) in &other.terms {
            out = out.plus_term(v, k.checked_mul(b)?);
        }
        Some(out)
    }

    pub fn scale(&self, a: i128) -> Option<LinForm> {
        self.combine(a, &LinForm::default(), 0)
    }

    pub fn add_constant(&self, c: i128) -> Option<LinForm> {
        self.combine(1, &LinForm::constant(c), 1)
    }

    /// `self` without the term in `v`.
    pub fn without(&self, v: Symbol) -> LinForm {
        let mut f = self.clone();
        f.terms.remove(&v);
        f
    }

    /// Replace `v` by `by`.
    pub fn substitute(&self, v: Symbol, by: &LinForm) -> Option<LinForm> {
        let k = self.coeff(v);
        if k == 0 {
            return Some(self.clone());
        }
        self.without(v).combine(1, by, k)
    }

    /// The gcd of the variable coefficients (0 for a constant).
    pub fn content(&self) -> i128 {
        self.terms.values().fold(0, |g, &k| gcd(g, k))
    }

    /// The value with every name given by `env` (`None`: a name unbound or
    /// an overflow).
    pub fn eval(&self, env: &impl Fn(Symbol) -> Option<i128>) -> Option<i128> {
        self.terms.iter().try_fold(self.constant, |acc, (&v, &k)| {
            acc.checked_add(k.checked_mul(env(v)?)?)
        })
    }
}

impl fmt::Display for LinForm {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut first = true;
        for (v, k) in &self.terms {
            let sign = if *k < 0 {
                "-"
            } else if first {
                ""
            } else {
                "+"
            };
            let mag = k.abs();
            if mag == 1 {
                write!(f, "{sign}{v}")?;
            } else {
                write!(f, "{sign}{mag}*{v}")?;
            }
            first = false;
        }
        if first {
            write!(f, "{}", self.constant)
        } else if self.constant != 0 {
            write!(f, "{:+}", self.constant)
        } else {
            Ok(())
        }
    }
}

/// `floor(a / b)` for `b > 0`.
pub fn floor_div(a: i128, b: i128) -> i128 {
    a.div_euclid(b)
}

/// `ceil(a / b)` for `b > 0`.
pub fn ceil_div(a: i128, b: i128) -> i128 {
    -(-a).div_euclid(b)
}
