//! Predicates: comparisons of index expressions, `and`, `or`, `exists`
//! (a binder, renamed like the others), relation tests, `true`, `false`.

use super::{kind_words, Binding, Elab};
use crate::error::{Error, Result};
use crate::front::ast::{CmpOp, Pred};
use crate::front::reader::Sexp;
use std::collections::HashSet;

/// Predicate form names, for "did you mean" hints.
const PRED_FORMS: &[&str] = &[
    "<", "<=", "==", ">", ">=", "and", "or", "exists", "true", "false",
];

impl Elab {
    pub(super) fn pred(&mut self, sx: &Sexp, claimed: &mut HashSet<String>) -> Result<Pred> {
        let pos = sx.pos();
        let items = match sx {
            Sexp::Sym(s, _) if s == "true" => return Ok(Pred::True),
            Sexp::Sym(s, _) if s == "false" => return Ok(Pred::False),
            Sexp::Sym(s, _) => {
                return Err(Error::typ(pos, format!("expected a predicate, got '{s}'")))
            }
            Sexp::Num(..) => return Err(Error::typ(pos, "expected a predicate")),
            Sexp::List(items, _) if items.is_empty() => {
                return Err(Error::typ(pos, "expected a predicate"))
            }
            Sexp::List(items, _) => items,
        };
        let Some(h) = sx.head() else {
            return Err(Error::typ(pos, "expected a predicate form name"));
        };
        let args = &items[1..];
        if let Some(op) = CmpOp::from_name(h) {
            if args.len() != 2 {
                return Err(Error::typ(
                    pos,
                    format!("({h} a a) takes 2 index expressions, got {}", args.len()),
                ));
            }
            return Ok(Pred::Cmp(op, self.index(&args[0])?, self.index(&args[1])?));
        }
        match h {
            "and" | "or" => {
                if args.is_empty() {
                    return Err(Error::typ(
                        pos,
                        format!("({h} p ...) needs at least one predicate"),
                    ));
                }
                let ps = args
                    .iter()
                    .map(|a| self.pred(a, claimed))
                    .collect::<Result<Vec<_>>>()?;
                return Ok(if h == "and" {
                    Pred::And(ps)
                } else {
                    Pred::Or(ps)
                });
            }
            "exists" => {
                if args.len() != 3 {
                    return Err(Error::typ(
                        pos,
                        format!("(exists i D p) takes 3 arguments, got {}", args.len()),
                    ));
                }
                let Some(var) = args[0].as_sym() else {
                    return Err(Error::typ(
                        args[0].pos(),
                        "exists: expected an index variable name",
                    ));
                };
                let d = self.dim(&args[1], None)?;
                let u = self.binder_name(var, claimed);
                let old = self.bind(var, Binding::Index(u));
                let p = self.pred(&args[2], claimed);
                self.unbind(var, old);
                return Ok(Pred::Exists(u, d, Box::new(p?)));
            }
            _ => {}
        }
        match self.scope.get(h).cloned() {
            Some(Binding::Rel(rel, arity)) => {
                if args.len() != arity {
                    return Err(Error::typ(
                        pos,
                        format!(
                            "relation '{h}' has {arity} dimensions but is applied to {} indices",
                            args.len()
                        ),
                    ));
                }
                let idx = args
                    .iter()
                    .map(|a| self.index(a))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Pred::Rel(rel, idx))
            }
            Some(b) => Err(Error::typ(
                pos,
                format!("'{h}' is {}, not a relation", kind_words(&b)),
            )),
            None => Err(
                Error::typ(pos, format!("unknown predicate form '{h}'")).with_hint_opt(
                    crate::diagnostics::did_you_mean(h, PRED_FORMS.iter().copied())
                        .or_else(|| self.near(h, |b| matches!(b, Binding::Rel(..)))),
                ),
            ),
        }
    }
}
