//! Predicates: affine conjuncts become constraints (loop bounds), the rest
//! C conditions; an `exists` whose body is affine is projected to a closed
//! form (`∃j<n. i < j` is `i+1 < n`), any other is a loop that stops at
//! the first witness.

use super::ir::Stmt;
use super::Lowerer;
use crate::constraints::{self, Constraint, LinForm};
use crate::error::{Error, Result};
use crate::front::ast::{CmpOp, Pred};

/// The longest condition written inside another (in characters, so also
/// its nesting depth); a longer one is a local of its own.
const MAX_INLINE_CONDITION: usize = 400;

/// The constraints an affine atom stands for (`None`: not affine).
pub(crate) fn affine(p: &Pred) -> Option<Vec<Constraint>> {
    Some(match p {
        Pred::True => vec![],
        Pred::False => vec![Constraint::never()],
        Pred::Cmp(op, a, b) => vec![Constraint::compare(
            *op,
            &LinForm::from_affine(a),
            &LinForm::from_affine(b),
        )?],
        Pred::And(ps) => {
            let mut out = vec![];
            for q in ps {
                out.extend(affine(q)?);
            }
            out
        }
        _ => return None,
    })
}

impl Lowerer {
    /// A predicate as a C condition (statements for `exists` loops are
    /// emitted before it).
    pub(crate) fn pred(&mut self, p: &Pred) -> Result<String> {
        if self.known(p) {
            // Not tested; its forms are checked on entry all the same.
            self.record_pred_forms(p)?;
            return Ok("1".into());
        }
        Ok(match p {
            Pred::True => "1".into(),
            Pred::False => "0".into(),
            Pred::Cmp(op, a, b) => {
                let (x, y) = (self.aff(a)?, self.aff(b)?);
                if x == y {
                    // The same index (e.g. a view read at its own diagonal):
                    // decided here, no self-comparison for the C compiler.
                    let holds = matches!(op, CmpOp::Eq | CmpOp::Le | CmpOp::Ge);
                    return Ok(if holds { "1" } else { "0" }.into());
                }
                let text = format!("({x} {} {y})", op.name());
                self.record_cmp(*op, a, b, &text);
                text
            }
            Pred::And(ps) | Pred::Or(ps) => {
                if ps.is_empty() {
                    return Ok(if matches!(p, Pred::And(_)) { "1" } else { "0" }.into());
                }
                let sep = if matches!(p, Pred::And(_)) {
                    " && "
                } else {
                    " || "
                };
                let mut parts = vec![];
                for q in ps {
                    let c = self.pred(q)?;
                    if c == "1" && sep == " && " {
                        continue; // known true (see `facts.rs`)
                    }
                    // A long condition goes to a local, so that nested
                    // `and`/`or` of any depth stay shallow C expressions
                    // (evaluating it before its turn is safe: conditions
                    // have no effects, and loops for `exists` run before).
                    parts.push(if c.len() > MAX_INLINE_CONDITION {
                        let t = self.fresh("c", "");
                        self.decl("const int", &t, c);
                        t
                    } else {
                        c
                    });
                }
                if parts.is_empty() {
                    return Ok("1".into());
                }
                format!("({})", parts.join(sep))
            }
            Pred::Rel(r, args) => {
                let v = self
                    .vals
                    .get(r)
                    .cloned()
                    .ok_or_else(|| Error::eval(format!("unknown relation {r}")))?;
                v.test(args, self)?
            }
            Pred::Exists(i, d, q) => {
                if let Some(c) = self.exists_closed(*i, d, q)? {
                    return Ok(c);
                }
                if let Some(c) = self.exists_by_relation(*i, d, q)? {
                    return Ok(c);
                }
                let dn = self.dim(d)?;
                let e = self.fresh("e", "");
                self.decl("int", &e, "0".into());
                let iv = self.bind_index(*i, d)?;
                let (body, ()) = self.block(|lw| {
                    let c = lw.pred(q)?;
                    lw.line(format!("if ({c}) {{ {e} = 1; break; }}"));
                    Ok(())
                })?;
                self.out.push(Stmt::For {
                    var: iv,
                    lo: "0".into(),
                    hi: dn,
                    body,
                });
                e
            }
        })
    }

    /// `∃ i < d. q` for an affine `q`, without a loop: the projected
    /// bounds of `i` are not empty (exact over the integers: one variable,
    /// its own bounds, and a divisibility guard when an equality fixes it).
    /// Without divisions, `max(lower) <= min(upper)` is written as one
    /// comparison `u - l >= 0` per pair of bounds, recorded for the loop
    /// splits (`pieces.rs`).
    fn exists_closed(
        &mut self,
        i: crate::symbol::Symbol,
        d: &crate::front::affine::Affine,
        q: &Pred,
    ) -> Result<Option<String>> {
        let Some(mut system) = affine(q) else {
            return Ok(None);
        };
        // The forms the evaluator computes for each `i`, checked on entry.
        let old = self.bind_range(i, d)?;
        let r = self.record_pred_forms(q);
        self.unbind_range(i, old);
        r?;
        system.push(Constraint::Ge(LinForm::var(i)));
        let Some(hi) = LinForm::from_affine(d).add_constant(-1) else {
            return Ok(None);
        };
        let Some(hi) = hi.combine(1, &LinForm::var(i), -1) else {
            return Ok(None);
        };
        system.push(Constraint::Ge(hi));
        let Some(plan) = constraints::plan(&system, &[i]) else {
            return Ok(None);
        };
        if plan.levels.iter().any(|l| !l.guards.is_empty()) {
            return Ok(None);
        }
        let mut tops = plan.top.clone();
        let mut conds = vec![];
        for l in &plan.levels {
            match pairwise(&l.lower, &l.upper) {
                // every lower bound at most every upper one: affine
                // conjuncts, which loops can be split at (`pieces.rs`)
                Some(cs) => tops.extend(cs),
                None => {
                    let lo = self.bound_expr(&l.lower, "atlh_max", "atlh_ceildiv")?;
                    let hi = self.bound_expr(&l.upper, "atlh_min", "atlh_floordiv")?;
                    conds.push(format!("{lo} <= {hi}"));
                }
            }
        }
        let texts = self.constraint_conds(&tops)?;
        for (c, t) in tops.iter().zip(&texts) {
            self.record_constraint(c, t);
        }
        let mut seen = std::collections::HashSet::new();
        let conds: Vec<String> = (texts.into_iter().chain(conds))
            .filter(|t| seen.insert(t.clone()))
            .collect();
        Ok(Some(if conds.is_empty() {
            "1".into()
        } else {
            format!("({})", conds.join(" && "))
        }))
    }
}

/// `max(lower) <= min(upper)` as the constraints `u - l >= 0`, one per
/// pair, when no bound divides (`None` otherwise).
fn pairwise(lower: &[constraints::Bound], upper: &[constraints::Bound]) -> Option<Vec<Constraint>> {
    let mut out = vec![];
    for l in lower {
        for u in upper {
            if l.div != 1 || u.div != 1 {
                return None;
            }
            out.push(Constraint::Ge(u.form.combine(1, &l.form, -1)?));
        }
    }
    Some(out)
}
