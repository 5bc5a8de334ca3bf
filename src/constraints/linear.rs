//! Affine forms `c + Σ k·v` with `i128` coefficients (wide enough that
//! Fourier–Motzkin combinations of `i64` index expressions do not overflow
//! in practice; every operation is checked and reports `None` otherwise).
//!
//! A variable is a name ([`Symbol`], the default: loop variables and sizes
//! of a symbolic system) or a numbered loop slot (`u32`, how the cost model
//! names the binders of the term it counts, with sizes already constants).
//! The terms are a vector sorted by variable, the same order a map would
//! give, so that forms compare, hash and print alike whatever built them,
//! and the cost's inner loops evaluate them without a map.

use crate::front::affine::Affine;
use crate::symbol::Symbol;
use std::fmt;
use std::hash::Hash;

/// What a form's variables can be.
pub trait Var: Copy + Ord + Hash + fmt::Debug {}
impl<T: Copy + Ord + Hash + fmt::Debug> Var for T {}

/// `constant + Σ coeff·var`, terms sorted by variable, no zero coefficients.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinForm<V = Symbol> {
    pub constant: i128,
    terms: Vec<(V, i128)>,
}

impl<V: Var> Default for LinForm<V> {
    fn default() -> Self {
        LinForm::constant(0)
    }
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl<V: Var> LinForm<V> {
    pub fn constant(c: i128) -> Self {
        LinForm {
            constant: c,
            terms: Vec::new(),
        }
    }

    pub fn var(v: V) -> Self {
        LinForm {
            constant: 0,
            terms: vec![(v, 1)],
        }
    }

    /// The terms, sorted by variable, none zero.
    pub fn terms(&self) -> &[(V, i128)] {
        &self.terms
    }

    fn position(&self, v: V) -> Result<usize, usize> {
        self.terms.binary_search_by_key(&v, |t| t.0)
    }

    /// `self + k·v` (`None` on overflow).
    pub fn plus_term(mut self, v: V, k: i128) -> Option<Self> {
        match self.position(v) {
            Ok(i) => {
                let c = self.terms[i].1.checked_add(k)?;
                if c == 0 {
                    self.terms.remove(i);
                } else {
                    self.terms[i].1 = c;
                }
            }
            Err(i) if k != 0 => self.terms.insert(i, (v, k)),
            Err(_) => {}
        }
        Some(self)
    }

    pub fn coeff(&self, v: V) -> i128 {
        self.position(v).map_or(0, |i| self.terms[i].1)
    }

    pub fn mentions(&self, v: V) -> bool {
        self.position(v).is_ok()
    }

    pub fn is_constant(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = V> + '_ {
        self.terms.iter().map(|t| t.0)
    }

    /// `a·self + b·other` (a merge of the two sorted term lists).
    pub fn combine(&self, a: i128, other: &Self, b: i128) -> Option<Self> {
        let constant = self
            .constant
            .checked_mul(a)?
            .checked_add(other.constant.checked_mul(b)?)?;
        let (x, y) = (&self.terms, &other.terms);
        let mut terms = Vec::with_capacity(x.len() + y.len());
        let (mut i, mut j) = (0, 0);
        while i < x.len() || j < y.len() {
            let (v, k) = if j == y.len() || (i < x.len() && x[i].0 < y[j].0) {
                i += 1;
                (x[i - 1].0, x[i - 1].1.checked_mul(a)?)
            } else if i == x.len() || y[j].0 < x[i].0 {
                j += 1;
                (y[j - 1].0, y[j - 1].1.checked_mul(b)?)
            } else {
                i += 1;
                j += 1;
                let k = x[i - 1].1.checked_mul(a)?;
                (x[i - 1].0, k.checked_add(y[j - 1].1.checked_mul(b)?)?)
            };
            if k != 0 {
                terms.push((v, k));
            }
        }
        Some(LinForm { constant, terms })
    }

    pub fn scale(&self, a: i128) -> Option<Self> {
        self.combine(a, &LinForm::default(), 0)
    }

    pub fn add_constant(&self, c: i128) -> Option<Self> {
        Some(LinForm {
            constant: self.constant.checked_add(c)?,
            terms: self.terms.clone(),
        })
    }

    /// `self` without the term in `v`.
    pub fn without(&self, v: V) -> Self {
        let mut f = self.clone();
        if let Ok(i) = f.position(v) {
            f.terms.remove(i);
        }
        f
    }

    /// Replace `v` by `by`.
    pub fn substitute(&self, v: V, by: &Self) -> Option<Self> {
        let k = self.coeff(v);
        if k == 0 {
            return Some(self.clone());
        }
        self.without(v).combine(1, by, k)
    }

    /// The gcd of the variable coefficients (0 for a constant).
    pub fn content(&self) -> i128 {
        self.terms.iter().fold(0, |g, t| gcd(g, t.1))
    }

    /// Apply `f` to every coefficient (dropping those that become 0).
    pub fn map_coeffs(&mut self, f: impl Fn(i128) -> i128) {
        self.terms.iter_mut().for_each(|t| t.1 = f(t.1));
        self.terms.retain(|t| t.1 != 0);
    }

    /// The value with every variable given by `env` (`None`: a variable
    /// unbound or an overflow).
    #[inline]
    pub fn eval(&self, env: &impl Fn(V) -> Option<i128>) -> Option<i128> {
        self.terms.iter().try_fold(self.constant, |acc, &(v, k)| {
            acc.checked_add(k.checked_mul(env(v)?)?)
        })
    }

    /// `(a, b)` with `self = a·v + b` at `env` (which need not give `v`).
    #[inline]
    pub fn eval_split(&self, v: V, env: &impl Fn(V) -> Option<i128>) -> Option<(i128, i128)> {
        let mut a = 0;
        let mut b = self.constant;
        for &(w, k) in &self.terms {
            if w == v {
                a = k;
            } else {
                b = b.checked_add(k.checked_mul(env(w)?)?)?;
            }
        }
        Some((a, b))
    }
}

impl LinForm<Symbol> {
    pub fn from_affine(a: &Affine) -> LinForm {
        let mut f = LinForm::constant(a.constant as i128);
        for &(n, k) in &a.terms {
            // i64 coefficients: no overflow
            f = f.plus_term(n, k as i128).expect("i64 coefficients");
        }
        f
    }
}

impl<V: Var + fmt::Display> fmt::Display for LinForm<V> {
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

/// `floor(a / b)` for `b > 0`. (Dividing by 1, the common case, skips
/// the 128-bit division: counting narrows intervals in its inner loops.)
#[inline]
pub fn floor_div(a: i128, b: i128) -> i128 {
    if b == 1 {
        a
    } else {
        a.div_euclid(b)
    }
}

/// `ceil(a / b)` for `b > 0` (no overflow: no negation).
#[inline]
pub fn ceil_div(a: i128, b: i128) -> i128 {
    if b == 1 {
        return a;
    }
    let q = a.div_euclid(b);
    if a.rem_euclid(b) != 0 {
        q + 1
    } else {
        q
    }
}
