//! Affine forms `c + k1*v1 + ... + kn*vn` over names: the normal form of
//! dimensions (over sizes) and of index expressions (over sizes and index
//! variables).
//!
//! Index arithmetic is free in the cost model and exact in the semantics, so
//! the front end normalizes every dimension and index expression to this form
//! once; equality of dimensions (type checking) is then structural equality.
//! Arithmetic is checked: an overflow is reported, never wrapped.

use crate::symbol::Symbol;
use std::collections::HashMap;
use std::fmt;

/// `constant + Σ coeff·name`, terms sorted by name, no zero coefficients.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct Affine {
    pub constant: i64,
    pub terms: Vec<(Symbol, i64)>,
}

/// Raised when integer index arithmetic leaves the `i64` range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overflow;

impl Affine {
    pub fn constant(c: i64) -> Affine {
        Affine {
            constant: c,
            terms: vec![],
        }
    }

    pub fn var(name: Symbol) -> Affine {
        Affine {
            constant: 0,
            terms: vec![(name, 1)],
        }
    }

    pub fn is_constant(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn as_constant(&self) -> Option<i64> {
        self.is_constant().then_some(self.constant)
    }

    /// Coefficient of `name` (0 when absent).
    pub fn coeff(&self, name: Symbol) -> i64 {
        self.terms
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, k)| *k)
    }

    pub fn mentions(&self, name: Symbol) -> bool {
        self.terms.iter().any(|(n, _)| *n == name)
    }

    pub fn names(&self) -> impl Iterator<Item = Symbol> + '_ {
        self.terms.iter().map(|(n, _)| *n)
    }

    fn normalize(constant: i64, mut terms: Vec<(Symbol, i64)>) -> Result<Affine, Overflow> {
        terms.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        let mut out: Vec<(Symbol, i64)> = Vec::with_capacity(terms.len());
        for (n, k) in terms {
            match out.last_mut() {
                Some((m, j)) if *m == n => *j = j.checked_add(k).ok_or(Overflow)?,
                _ => out.push((n, k)),
            }
        }
        out.retain(|(_, k)| *k != 0);
        Ok(Affine {
            constant,
            terms: out,
        })
    }

    pub fn add(&self, other: &Affine) -> Result<Affine, Overflow> {
        let c = self.constant.checked_add(other.constant).ok_or(Overflow)?;
        let mut t = self.terms.clone();
        t.extend(other.terms.iter().cloned());
        Affine::normalize(c, t)
    }

    pub fn scale(&self, k: i64) -> Result<Affine, Overflow> {
        let c = self.constant.checked_mul(k).ok_or(Overflow)?;
        let t = self
            .terms
            .iter()
            .map(|(n, j)| j.checked_mul(k).map(|m| (*n, m)).ok_or(Overflow))
            .collect::<Result<Vec<_>, _>>()?;
        Affine::normalize(c, t)
    }

    pub fn sub(&self, other: &Affine) -> Result<Affine, Overflow> {
        self.add(&other.scale(-1)?)
    }

    pub fn add_constant(&self, c: i64) -> Result<Affine, Overflow> {
        self.add(&Affine::constant(c))
    }

    /// Replace `name` by `by` (capture is impossible: affine forms bind nothing).
    pub fn substitute(&self, name: Symbol, by: &Affine) -> Result<Affine, Overflow> {
        let k = self.coeff(name);
        if k == 0 {
            return Ok(self.clone());
        }
        let rest = Affine {
            constant: self.constant,
            terms: self
                .terms
                .iter()
                .filter(|(n, _)| *n != name)
                .cloned()
                .collect(),
        };
        rest.add(&by.scale(k)?)
    }

    /// Rename a variable (used when binders are made unique).
    pub fn rename(&self, from: Symbol, to: Symbol) -> Affine {
        if !self.mentions(from) {
            return self.clone();
        }
        let t = self
            .terms
            .iter()
            .map(|(n, k)| (if *n == from { to } else { *n }, *k))
            .collect();
        Affine::normalize(self.constant, t).expect("renaming cannot overflow")
    }

    /// Value under an environment; `None` if a name is unbound.
    pub fn eval_with(
        &self,
        lookup: impl Fn(Symbol) -> Option<i64>,
    ) -> Result<i64, EvalAffineError> {
        let mut v = self.constant;
        for (n, k) in &self.terms {
            let x = lookup(*n).ok_or(EvalAffineError::Unbound(*n))?;
            v = k
                .checked_mul(x)
                .and_then(|p| v.checked_add(p))
                .ok_or(EvalAffineError::Overflow)?;
        }
        Ok(v)
    }

    pub fn eval(&self, env: &HashMap<Symbol, i64>) -> Result<i64, EvalAffineError> {
        self.eval_with(|n| env.get(&n).copied())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalAffineError {
    Unbound(Symbol),
    Overflow,
}

impl fmt::Display for EvalAffineError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            EvalAffineError::Unbound(n) => write!(f, "size {n} is not given"),
            EvalAffineError::Overflow => write!(f, "index arithmetic overflows 64-bit integers"),
        }
    }
}

/// Prints in ATL's index/dimension syntax: `n`, `3`, `(+ i 1)`, `(- n 1)`,
/// `(+ (* 2 i) j)`; every form printed is one the reader accepts both as a
/// dimension and as an index expression.
impl fmt::Display for Affine {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let term = |n: Symbol, k: i64| -> String {
            if k == 1 {
                n.to_string()
            } else {
                format!("(* {k} {n})")
            }
        };
        let mut pos: Vec<String> = vec![];
        let mut neg: Vec<String> = vec![];
        for (n, k) in &self.terms {
            if *k > 0 {
                pos.push(term(*n, *k));
            } else {
                // k < 0; -k may overflow only for i64::MIN
                match k.checked_neg() {
                    Some(m) => neg.push(term(*n, m)),
                    None => pos.push(format!("(* {k} {n})")),
                }
            }
        }
        if self.constant > 0 || (self.constant < 0 && self.constant.checked_neg().is_none()) {
            pos.push(self.constant.to_string());
        } else if self.constant < 0 {
            neg.push((-self.constant).to_string());
        }
        let join = |v: &[String]| -> String {
            if v.len() == 1 {
                v[0].clone()
            } else {
                format!("(+ {})", v.join(" "))
            }
        };
        if pos.is_empty() {
            if neg.is_empty() {
                return write!(f, "0");
            }
            return write!(f, "(- 0 {})", join(&neg));
        }
        if neg.is_empty() {
            write!(f, "{}", join(&pos))
        } else {
            write!(f, "(- {} {})", join(&pos), join(&neg))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Symbol {
        Symbol::from(x)
    }

    #[test]
    fn normal_form_merges_and_drops_zero_terms() {
        let a = Affine::var(s("i")).add(&Affine::var(s("j"))).unwrap();
        let b = a.sub(&Affine::var(s("i"))).unwrap();
        assert_eq!(b, Affine::var(s("j")));
        assert_eq!(a.scale(0).unwrap(), Affine::constant(0));
    }

    #[test]
    fn prints_readable_forms() {
        let n = Affine::var(s("n"));
        assert_eq!(n.add_constant(-1).unwrap().to_string(), "(- n 1)");
        assert_eq!(Affine::constant(-3).to_string(), "(- 0 3)");
        let two_i = Affine::var(s("i")).scale(2).unwrap();
        assert_eq!(two_i.add(&n).unwrap().to_string(), "(+ (* 2 i) n)");
    }

    #[test]
    fn overflow_is_reported() {
        let big = Affine::constant(i64::MAX);
        assert_eq!(big.add_constant(1), Err(Overflow));
        assert!(Affine::var(s("i"))
            .scale(i64::MAX)
            .unwrap()
            .scale(2)
            .is_err());
    }

    #[test]
    fn substitution() {
        let e = Affine::var(s("i"))
            .scale(3)
            .unwrap()
            .add_constant(1)
            .unwrap();
        let by = Affine::var(s("k")).add_constant(2).unwrap();
        let r = e.substitute(s("i"), &by).unwrap();
        assert_eq!(r.coeff(s("k")), 3);
        assert_eq!(r.constant, 7);
    }
}
