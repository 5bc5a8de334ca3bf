//! Brackets that show an addition where its operands can be nonzero.
//!
//! The cost model charges `a + b` only where both operands' brackets hold
//! (a side without a bracket counts as true, docs/language.md). A sum
//! `Σi [p]·a` is zero wherever no `i` satisfies `p`, but an addition above it
//! cannot see that: `Σi [p]·a = [∃i. p]·Σi [p]·a` says it. The rules
//! `sum-bracket-exists-left/right` (rules/iverson.rules) make this rewrite
//! inside an e-graph; [`exists_bracket`] makes it on a term, for the terms
//! of a long addition that the optimizer handles one at a time.
//!
//! Likewise `[p]·a + [q]·b` is zero where neither `p` nor `q` holds, which an
//! addition with a third bracket cannot see: [`bracket_additions`] writes
//! `[p ∨ q]·([p]·a + [q]·b)` there. (As a rule in the e-graph this grows the
//! predicates without end, each new bracket distributing into the addition
//! and joining again; on the extracted term it is made once.)

use crate::front::ast::{CmpOp, Expr, Pred};
// (the cost counter splits disjunctions this small by inclusion–exclusion;
// a long addition of brackets, the adjoint of a vector read at a thousand
// places, would otherwise get a disjunction per prefix, quadratic in its
// length)
use crate::semantics::cost::MAX_DISJUNCTS;
use crate::symbol::Symbol;

/// The conjuncts of `p` (nested `and`s flattened, `true` dropped).
pub fn conjuncts(p: &Pred) -> Vec<&Pred> {
    fn walk<'p>(p: &'p Pred, out: &mut Vec<&'p Pred>) {
        match p {
            Pred::And(ps) => ps.iter().for_each(|q| walk(q, out)),
            Pred::True => {}
            q => out.push(q),
        }
    }
    let mut out = vec![];
    walk(p, &mut out);
    out
}

/// Whether a conjunct of `p` is an equality that mentions the index `i` (a
/// sum over `i` under `[p]` then has at most one term, and `∃i. p` has a
/// closed form) and no conjunct is an `exists` (so that moving the bracket
/// out of a sum as `∃i. p` happens once, not again on its result).
pub fn fixes_index(i: Symbol, p: &Pred) -> bool {
    let cs = conjuncts(p);
    let fixes = |q: &&Pred| match q {
        Pred::Cmp(CmpOp::Eq, a, b) => a.sub(b).is_ok_and(|d| d.coeff(i) != 0),
        _ => false,
    };
    cs.iter().any(fixes) && !cs.iter().any(|q| matches!(q, Pred::Exists(..)))
}

/// `Σi [p]·a` (with `a` not itself bracketed, `p` fixing `i`) as
/// `[∃i. p]·Σi [p]·a`; any other term as it is. Equal in value; the bracket
/// costs nothing, and an addition with the result is charged only where
/// the existential holds.
pub fn exists_bracket(e: Expr) -> Expr {
    match &e {
        Expr::Sum(i, d, body) => match &**body {
            Expr::Iverson(p, a) if !matches!(**a, Expr::Iverson(..)) && fixes_index(*i, p) => {
                let exists = Pred::Exists(*i, d.clone(), Box::new(p.clone()));
                Expr::Iverson(exists, Box::new(e))
            }
            _ => e,
        },
        _ => e,
    }
}

/// `e` with each addition of two brackets that is an operand of an
/// addition whose other operand is a bracket shown as `[p ∨ q]·([p]·a +
/// [q]·b)`, innermost first (so a chain of brackets is shown whole, up to
/// [`MAX_DISJUNCTS`] brackets). Equal
/// in value, and never costlier: the new bracket costs nothing, its body
/// costs nothing where neither bracket holds, and the outer addition is
/// charged where both its operands' brackets hold, now a subset of where it
/// was (`true` before). The gathered cotangent of a reduction tree's level
/// (the pair's two entries and the odd one out, one branch live at each
/// position) then adds nothing where one branch is live, as its function
/// does not.
pub fn bracket_additions(e: &Expr) -> Expr {
    let e = e.map_children(bracket_additions);
    let Expr::Add(a, b) = e else {
        return e;
    };
    let shown = |x: Box<Expr>, other: &Expr| -> Box<Expr> {
        match (&*x, other) {
            (Expr::Add(l, r), Expr::Iverson(..)) => match (&**l, &**r) {
                (Expr::Iverson(p, _), Expr::Iverson(q, _)) => {
                    let mut ps = vec![];
                    for d in [p, q] {
                        match d {
                            Pred::Or(ds) => ps.extend(ds.iter().cloned()),
                            d => ps.push(d.clone()),
                        }
                    }
                    if ps.len() > MAX_DISJUNCTS {
                        return x;
                    }
                    Box::new(Expr::Iverson(Pred::Or(ps), x))
                }
                _ => x,
            },
            _ => x,
        }
    };
    let a = shown(a, &b);
    let b = shown(b, &a);
    Expr::Add(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::parse_program;

    fn body(text: &str) -> Expr {
        parse_program(text.as_bytes()).unwrap().body
    }

    #[test]
    fn a_sum_whose_bracket_fixes_its_index_gets_an_existential() {
        let e = body(
            "(fn f ((x (tensor n R)) (g size))
               (sum c n (iverson (and (< (+ (* 2 c) 1) n) (== g (+ (* 2 c) 1))) (get x c))))",
        );
        let Expr::Iverson(Pred::Exists(i, _, p), inner) = exists_bracket(e.clone()) else {
            panic!("no existential")
        };
        assert_eq!(*inner, e);
        let Expr::Sum(j, _, b) = &*inner else {
            panic!()
        };
        assert_eq!(i, *j);
        assert!(matches!(&**b, Expr::Iverson(q, _) if *q == *p));
    }

    #[test]
    fn other_terms_stay_as_they_are() {
        for text in [
            // the bracket does not fix the index
            "(fn f ((x (tensor n R))) (sum c n (iverson (< (* 2 c) n) (get x c))))",
            // no bracket
            "(fn f ((x (tensor n R))) (sum c n (get x c)))",
            // not a sum
            "(fn f ((x (tensor n R))) (get x 0))",
        ] {
            let e = body(text);
            assert_eq!(exists_bracket(e.clone()), e, "{text}");
        }
    }

    #[test]
    fn an_addition_of_brackets_beside_a_bracket_is_bracketed_by_their_disjunction() {
        let e = body(
            "(fn f ((x (tensor n R)) (g size))
               (+ (iverson (== g 0) (get x 0))
                  (+ (iverson (== g 1) (get x 1))
                     (+ (iverson (== g 2) (get x 2)) (iverson (== g 3) (get x 3))))))",
        );
        let Expr::Add(a, b) = bracket_additions(&e) else {
            panic!()
        };
        assert!(matches!(*a, Expr::Iverson(Pred::Cmp(..), _)));
        // the innermost pair first, then the chain, its disjunction flat
        let Expr::Iverson(Pred::Or(ds), inner) = *b else {
            panic!("not bracketed")
        };
        assert_eq!(ds.len(), 3);
        let Expr::Add(_, c) = *inner else { panic!() };
        assert!(matches!(*c, Expr::Iverson(Pred::Or(ref ds), _) if ds.len() == 2));
        // an addition beside an unbracketed term stays as it is
        let e = body(
            "(fn f ((x (tensor n R)) (g size))
               (+ (get x 0) (+ (iverson (== g 1) (get x 1)) (iverson (== g 2) (get x 2)))))",
        );
        assert_eq!(bracket_additions(&e), e);
    }
}
