//! Facts under a loop nest: where code runs only where a bracket holds
//! (the body of a sum or gen chain under its bracket, the operand of an
//! `iverson`), the bracket's conjuncts are known true there, and a
//! predicate lowered there that one of them establishes is not tested
//! again. The typical case is a read of a gen over a relation's pattern
//! that is not stored ([`Lowerer::lazy_pattern`]): each read computes its
//! element under the gen's bracket, and the loop reading it is driven by
//! the same atoms (its position is a stored tuple, the bracket is true).
//!
//! Sound by construction, and only syntactic: a fact is a conjunct in a
//! canonical form over the C names of the variables it reads (so a binder
//! shadowing a name never matches an outer fact), with the indices of lazy
//! views replaced by the forms they stand for. A predicate is known when it
//! is a fact up to the order of the disjuncts of an `or` (its key sorts
//! them), when it is a disjunction with a known disjunct or a conjunction
//! of known conjuncts, or when it is a comparison `f + c >= 0` and
//! `f + c' >= 0` is a fact with `c' <= c`.

use super::value::V;
use super::Lowerer;
use crate::constraints::{Constraint, LinForm};
use crate::front::affine::Affine;
use crate::front::ast::Pred;
use crate::symbol::Symbol;
use crate::terms::brackets::conjuncts;

/// A conjunct known true where the code being lowered runs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fact {
    /// A relation atom, an equality or a disjunction, by its canonical key.
    Key(String),
    /// `terms + constant >= 0`: the terms' key and the constant.
    Ge(String, i128),
}

impl Fact {
    /// The key of the fact as a disjunct of an `or` (so that `or` keys
    /// do not depend on the order of their disjuncts).
    fn key(&self) -> String {
        match self {
            Fact::Key(k) => k.clone(),
            Fact::Ge(t, c) => format!("{t}{c:+}>=0"),
        }
    }
}

impl Lowerer {
    /// An affine form over the C names of its variables (lazy indices
    /// expanded): `None` if a variable has no C name.
    fn canon_form(&self, f: &LinForm) -> Option<LinForm> {
        let f = self.expand(f).ok()?;
        let mut out = LinForm::constant(f.constant);
        for (v, k) in f.terms() {
            out = out.plus_term(Symbol::from(self.names.get(v)?.as_str()), *k)?;
        }
        Some(out)
    }

    fn canon_affine(&self, a: &Affine) -> Option<String> {
        let f = self.canon_form(&LinForm::from_affine(a))?;
        Some(terms_key(&f) + &format!("{:+}", f.constant))
    }

    /// The canonical form of an atom, a comparison or a disjunction of
    /// them (`None` for any other predicate, which is never a fact).
    pub(crate) fn fact_of(&self, p: &Pred) -> Option<Fact> {
        match p {
            Pred::Rel(r, args) => {
                let Some(V::Rel { buf, .. }) = self.vals.get(r) else {
                    return None;
                };
                let args: Option<Vec<String>> = args.iter().map(|a| self.canon_affine(a)).collect();
                Some(Fact::Key(format!("{buf}({})", args?.join(","))))
            }
            Pred::Cmp(op, a, b) => {
                let (a, b) = (LinForm::from_affine(a), LinForm::from_affine(b));
                let c = Constraint::compare(*op, &self.expand(&a).ok()?, &self.expand(&b).ok()?)?;
                match c {
                    Constraint::Ge(f) => {
                        let f = self.canon_form(&f)?;
                        Some(Fact::Ge(terms_key(&f), f.constant))
                    }
                    Constraint::Eq(f) => {
                        let mut f = self.canon_form(&f)?;
                        // `f = 0` and `-f = 0` are one fact.
                        let first = f.terms().first().map_or(f.constant, |t| t.1);
                        if first < 0 {
                            f = f.scale(-1)?;
                        }
                        Some(Fact::Key(format!("{}{:+}==0", terms_key(&f), f.constant)))
                    }
                    Constraint::Divides(..) => None,
                }
            }
            Pred::Or(ps) => {
                let mut keys: Vec<String> = ps
                    .iter()
                    .map(|q| self.fact_of(q).map(|f| f.key()))
                    .collect::<Option<_>>()?;
                keys.sort();
                keys.dedup();
                Some(Fact::Key(format!("or[{}]", keys.join(";"))))
            }
            _ => None,
        }
    }

    /// Is `p` known true where the code being lowered runs?
    pub(crate) fn known(&self, p: &Pred) -> bool {
        if self.facts.is_empty() {
            return matches!(p, Pred::True);
        }
        match p {
            Pred::True => true,
            Pred::And(ps) => ps.iter().all(|q| self.known(q)),
            Pred::Or(ps) if ps.iter().any(|q| self.known(q)) => true,
            _ => match self.fact_of(p) {
                Some(Fact::Ge(t, c)) => self
                    .facts
                    .iter()
                    .any(|f| matches!(f, Fact::Ge(u, d) if *u == t && *d <= c)),
                Some(f) => self.facts.contains(&f),
                None => false,
            },
        }
    }

    /// Record the conjuncts of `ps` as facts; returns the mark
    /// [`Self::forget`] restores.
    pub(crate) fn assume<'a>(&mut self, ps: impl IntoIterator<Item = &'a Pred>) -> usize {
        let mark = self.facts.len();
        for p in ps {
            for q in conjuncts(p) {
                if let Some(f) = self.fact_of(q) {
                    self.facts.push(f);
                }
            }
        }
        mark
    }

    /// Drop the facts recorded since `mark`.
    pub(crate) fn forget(&mut self, mark: usize) {
        self.facts.truncate(mark);
    }
}

/// The terms of a form as a key (sorted by name, as a form keeps them).
fn terms_key(f: &LinForm) -> String {
    f.terms()
        .iter()
        .map(|(v, k)| format!("{k:+}{v}"))
        .collect::<Vec<_>>()
        .join("")
}
