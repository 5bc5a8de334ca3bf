//! The C text the lowering writes: fresh C names, statements collected
//! into blocks, affine forms, constraints and loop bounds as `int64_t`
//! expressions, literals. Every other part of the lowering emits through
//! these.

use super::ir::{IndexCheck, Stmt};
use super::Lowerer;
use crate::constraints::{self, Constraint, LinForm};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::Pred;
use crate::symbol::Symbol;

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

    /// Declare the C local `name` of type `ty`, initialized to `init`.
    pub(crate) fn decl(&mut self, ty: &'static str, name: &str, init: String) {
        self.out.push(Stmt::Decl {
            ty,
            name: name.to_string(),
            init,
        });
    }

    /// Emit `stmts` under the conjunction of `conds` (as they are when
    /// there is none).
    pub(crate) fn guarded(&mut self, conds: &[String], stmts: Vec<Stmt>) {
        if conds.is_empty() {
            self.out.extend(stmts);
        } else {
            self.out.push(Stmt::If {
                cond: conds.join(" && "),
                then: stmts,
                els: vec![],
            });
        }
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

    /// An affine form as a C `int64_t` expression, evaluated left to right
    /// from its constant, terms by name (the evaluator's order), with the indices of lazy
    /// views replaced by the forms they stand for. The form is recorded
    /// for the entry checks (see [`super::ir::IndexCheck`]).
    pub(crate) fn ix(&self, f: &LinForm) -> Result<String> {
        let (s, check) = self.ix_form(f)?;
        self.record(check);
        Ok(s)
    }

    /// `(real a)`: the form converted to a double. When the form's range
    /// (its variables' ranges, checked where the sizes are known) fits in
    /// 32 bits it is converted from an `int32_t`: the same value exactly,
    /// but a conversion AVX2 has in vector form (it has none from
    /// `int64_t`), so a loop computing `real(i + 1)` still vectorizes. The
    /// test is loop-invariant, so the C compiler moves it out of the loop
    /// (two versions of the loop).
    pub(crate) fn index_real(&self, a: &Affine) -> Result<String> {
        let (s, check) = self.ix_form(&LinForm::from_affine(a))?;
        let fits = fits32_call(&check);
        self.record(check);
        Ok(match fits {
            None => format!("((double)({s}))"),
            Some(fits) => format!("({fits} ? (double)(int32_t)({s}) : (double)({s}))"),
        })
    }

    /// [`Self::ix`]'s C expression and its form, not recorded.
    fn ix_form(&self, f: &LinForm) -> Result<(String, IndexCheck)> {
        let f = self.expand(f)?;
        let coeff = |k: i128| -> Result<i64> {
            i64::try_from(k)
                .map_err(|_| Error::eval(format!("index coefficient {k} does not fit 64 bits")))
        };
        let mut s = String::new();
        let mut check = IndexCheck {
            constant: coeff(f.constant)?,
            terms: vec![],
        };
        if f.constant != 0 || f.terms().is_empty() {
            s += &int_literal(check.constant);
        }
        // The evaluator's order: by name (an `Affine`'s order).
        let mut terms = f.terms().to_vec();
        terms.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        for (v, k) in terms {
            let name = self
                .names
                .get(&v)
                .ok_or_else(|| Error::eval(format!("unbound index or size name {v}")))?;
            let k = coeff(k)?;
            let (lo, hi) = match self.ranges.get(&v) {
                Some(d) => ("0".to_string(), format!("{d} - 1")),
                None => (name.clone(), name.clone()),
            };
            check.terms.push((k, lo, hi));
            let sign = if k < 0 {
                "-"
            } else if s.is_empty() {
                ""
            } else {
                "+"
            };
            let mag = k.unsigned_abs();
            if mag == 1 {
                s += &format!("{sign}{name}");
            } else {
                let mag = i64::try_from(mag).map_err(|_| {
                    Error::eval(format!("index coefficient {k} does not fit 64 bits"))
                })?;
                s += &format!("{sign}{}*{name}", int_literal(mag));
            }
        }
        let s = if f.terms().is_empty() {
            s
        } else {
            format!("({s})")
        };
        Ok((s, check))
    }

    /// `f` with the indices of lazy views replaced by their forms.
    pub(crate) fn expand(&self, f: &LinForm) -> Result<LinForm> {
        let mut f = f.clone();
        let lazy: Vec<Symbol> = f
            .names()
            .filter(|v| self.lazy_args.contains_key(v))
            .collect();
        for v in lazy {
            f = f
                .substitute(v, &self.lazy_args[&v])
                .ok_or_else(|| Error::eval("index arithmetic overflows 128-bit integers"))?;
        }
        Ok(f)
    }

    /// Record a form for the entry checks, unless it cannot overflow (a
    /// constant, or a lone variable).
    fn record(&self, check: IndexCheck) {
        let trivial = match check.terms.as_slice() {
            [] => true,
            [(k, _, _)] => check.constant == 0 && k.unsigned_abs() == 1,
            _ => false,
        };
        let mut checks = self.checks.borrow_mut();
        if !trivial && !checks.contains(&check) {
            checks.push(check);
        }
    }

    /// The forms the evaluator computes for an affine predicate (both
    /// sides of each comparison, the arguments of relation tests), recorded
    /// for the entry checks where the C code computes other forms instead
    /// (loop bounds, closed forms of `exists`).
    pub(crate) fn record_pred_forms(&mut self, p: &Pred) -> Result<()> {
        match p {
            Pred::True | Pred::False => Ok(()),
            Pred::Cmp(_, a, b) => {
                self.aff(a)?;
                self.aff(b)?;
                Ok(())
            }
            Pred::Rel(_, args) => args.iter().try_for_each(|a| self.aff(a).map(|_| ())),
            Pred::And(ps) | Pred::Or(ps) => ps.iter().try_for_each(|q| self.record_pred_forms(q)),
            Pred::Exists(i, d, q) => {
                let old = self.bind_range(*i, d)?;
                let r = self.record_pred_forms(q);
                self.unbind_range(*i, old);
                r
            }
        }
    }

    pub(crate) fn aff(&self, a: &Affine) -> Result<String> {
        self.ix(&LinForm::from_affine(a))
    }

    /// Bind the index variable `i`, ranging over `[0, d)`, to a fresh C name.
    pub(crate) fn bind_index(&mut self, i: Symbol, d: &Affine) -> Result<String> {
        let c = self.fresh("i", i.as_str());
        self.names.insert(i, c.clone());
        let dn = self.dim(d)?;
        self.ranges.insert(i, dn);
        Ok(c)
    }

    /// Give `i` the range `[0, d)` (and a C name if it has none, for
    /// recording forms only); returns what to restore.
    pub(crate) fn bind_range(
        &mut self,
        i: Symbol,
        d: &Affine,
    ) -> Result<(Option<String>, Option<String>)> {
        let dn = self.dim(d)?;
        let old_name = self.names.insert(i, sanitize(i.as_str()));
        Ok((old_name, self.ranges.insert(i, dn)))
    }

    pub(crate) fn unbind_range(&mut self, i: Symbol, old: (Option<String>, Option<String>)) {
        match old.0 {
            Some(n) => self.names.insert(i, n),
            None => self.names.remove(&i),
        };
        match old.1 {
            Some(r) => self.ranges.insert(i, r),
            None => self.ranges.remove(&i),
        };
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
                    Constraint::Divides(k, f) => {
                        let text = format!("atlh_mod({}, {k}) == 0", self.ix(f)?);
                        if let Ok(k) = i64::try_from(*k) {
                            self.record_mod(k, f, &text);
                        }
                        text
                    }
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

/// A C literal for an `int64_t`.
pub fn int_literal(k: i64) -> String {
    if k == i64::MIN {
        "INT64_MIN".into()
    } else if k.unsigned_abs() > i32::MAX as u64 {
        format!("INT64_C({k})")
    } else {
        format!("{k}")
    }
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

/// The C test that the form `c` stays within `int32_t` for every value of
/// its variables (`atlh_fits32`); `None` for a constant (converted as it is).
fn fits32_call(c: &IndexCheck) -> Option<String> {
    if c.terms.is_empty() {
        return None;
    }
    let terms: Vec<String> = c
        .terms
        .iter()
        .map(|(k, lo, hi)| format!("{}, {lo}, {hi}", int_literal(*k)))
        .collect();
    Some(format!(
        "atlh_fits32({}, {}, (const int64_t[]){{{}}})",
        int_literal(c.constant),
        c.terms.len(),
        terms.join(", ")
    ))
}
