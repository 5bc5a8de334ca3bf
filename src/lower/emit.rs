//! The C text the lowering writes: fresh C names, statements collected
//! into blocks, affine forms, constraints and loop bounds as `int64_t`
//! expressions, literals. Every other part of the lowering emits through
//! these.

use super::ir::Stmt;
use super::Lowerer;
use crate::constraints::{self, Constraint, LinForm};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use egg::Symbol;

impl Lowerer {
    /// A fresh C name: `prefix` (lowercase letters naming what it holds),
    /// a number no other fresh name has, and `_` and the sanitized ATL name
    /// it stands for, if any (`i4_j`, `acc7`). Unique by the number, so the
    /// user's names can never make two equal; and never equal to the
    /// emitter's own names (`atlv_*`, `atlh_*`, `atlpacked_*`, `ATL_*`,
    /// the dimension locals `d0`, `d1`, ... and the function `atl_NAME`),
    /// whose letters are never followed by a digit the way a fresh name's
    /// prefix is (no prefix is `d`).
    pub(super) fn fresh(&mut self, prefix: &str, base: &str) -> String {
        self.next += 1;
        let b = sanitize(base);
        if b.is_empty() {
            format!("{prefix}{}", self.next)
        } else {
            format!("{prefix}{}_{b}", self.next)
        }
    }

    /// A fresh variable of the lowering's own (a row, an accumulator, a
    /// band offset, a copy index), bound beside the program's variables.
    /// Its text contains a space, which no name the reader accepts and no
    /// name the optimizer makes (`base#id`) contains: it can never capture,
    /// shadow or unbind a variable of the program.
    pub(crate) fn internal_symbol(&mut self, kind: &str) -> Symbol {
        self.next += 1;
        Symbol::from(format!("lowering {kind} {}", self.next))
    }

    pub(crate) fn line(&mut self, s: String) {
        self.out.push(Stmt::Line(s));
    }

    /// Run `f` collecting the statements it emits into a block of their own.
    pub(crate) fn block<R>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<R>,
    ) -> Result<(Vec<Stmt>, R)> {
        let saved = std::mem::take(&mut self.out);
        let r = f(self);
        let inner = std::mem::replace(&mut self.out, saved);
        Ok((inner, r?))
    }

    /// An affine form as a C `int64_t` expression.
    pub(crate) fn ix(&self, f: &LinForm) -> Result<String> {
        let lit = |k: i128| -> Result<String> {
            let k = i64::try_from(k)
                .map_err(|_| Error::eval(format!("index coefficient {k} does not fit 64 bits")))?;
            Ok(if k.unsigned_abs() > i32::MAX as u64 {
                format!("INT64_C({k})")
            } else {
                format!("{k}")
            })
        };
        let mut s = String::new();
        for &(v, k) in f.terms() {
            let name = self
                .names
                .get(&v)
                .ok_or_else(|| Error::eval(format!("unbound index or size name {v}")))?;
            let sign = if k < 0 {
                "-"
            } else if s.is_empty() {
                ""
            } else {
                "+"
            };
            let mag = k.abs();
            if mag == 1 {
                s += &format!("{sign}{name}");
            } else {
                s += &format!("{sign}{}*{name}", lit(mag)?);
            }
        }
        if s.is_empty() {
            return lit(f.constant);
        }
        if f.constant != 0 {
            s += &format!(
                "{}{}",
                if f.constant < 0 { "-" } else { "+" },
                lit(f.constant.abs())?
            );
        }
        Ok(format!("({s})"))
    }

    pub(crate) fn aff(&self, a: &Affine) -> Result<String> {
        self.ix(&LinForm::from_affine(a))
    }

    pub(crate) fn bind_index(&mut self, i: Symbol) -> String {
        let c = self.fresh("i", i.as_str());
        self.names.insert(i, c.clone());
        c
    }

    pub(super) fn bound_expr(
        &self,
        bs: &[constraints::Bound],
        combine: &str,
        div: &str,
    ) -> Result<String> {
        let mut parts = vec![];
        for b in bs {
            let f = self.ix(&b.form)?;
            parts.push(if b.div == 1 {
                f
            } else {
                format!("{div}({f}, {})", b.div)
            });
        }
        let mut it = parts.into_iter();
        let mut s = it
            .next()
            .ok_or_else(|| Error::eval("a loop without a bound (internal error)"))?;
        for p in it {
            s = format!("{combine}({s}, {p})");
        }
        Ok(s)
    }

    pub(crate) fn constraint_conds(&self, cs: &[Constraint]) -> Result<Vec<String>> {
        cs.iter()
            .map(|c| {
                Ok(match c {
                    Constraint::Ge(f) => format!("{} >= 0", self.ix(f)?),
                    Constraint::Eq(f) => format!("{} == 0", self.ix(f)?),
                    Constraint::Divides(k, f) => format!("atlh_mod({}, {k}) == 0", self.ix(f)?),
                })
            })
            .collect()
    }
}

/// The C identifier for an ATL name (letters, digits and `_` kept).
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A C literal for a real.
pub fn real_literal(x: f64) -> String {
    if x.is_nan() {
        "NAN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "INFINITY" } else { "(-INFINITY)" }.into()
    } else {
        let s = format!("{x:?}");
        let s = if s.contains(['.', 'e']) { s } else { s + ".0" };
        if x < 0.0 || s.starts_with('-') {
            format!("({s})")
        } else {
            s
        }
    }
}
