//! Normal forms the derivatives start from (paper section 4).
//!
//! * [`anf`]: every operand of `*` and of a black box, and every subject of
//!   `get`/`fst`/`snd`, becomes an *atom* (a constant, or a variable under
//!   accesses and projections) by let-binding it where it stands. Then the
//!   Leibniz rule and the adjoint of a product copy only atoms, which cost
//!   nothing: this is what keeps derivatives within a constant factor.
//! * [`lift`]: the paper's Figure "Let-Lifting" as one pass: every `let`
//!   moves to the top; out of a `gen`/`sum` over `i` a binding becomes a
//!   tensor over `i` and its uses `x` become `x[i]`. Together with `anf` this
//!   gives the straight-line "tensor SSA" the adjoint works on: a list of
//!   let-free bindings and a let-free result.
//! * [`dead_code`]: drops bindings nothing uses.

use crate::front::affine::Affine;
use crate::front::ast::{build, Expr, Reduce};
use crate::front::names::Fresh;
use crate::front::subst::{free_names, Replace, Substituter};
use crate::symbol::Symbol;
use std::collections::BTreeSet;

pub fn is_atom(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Const(_) | Expr::Var(_) | Expr::Get(..) | Expr::Fst(_) | Expr::Snd(_)
    ) && e.children().all(is_atom)
}

/// Bind `e` to a fresh variable unless it is an atom; the bindings are
/// pushed on `binds` (innermost last).
fn atomize(e: Expr, binds: &mut Vec<(Symbol, Expr)>, fresh: &mut Fresh) -> Expr {
    if is_atom(&e) {
        e
    } else {
        let t = fresh.name("t");
        binds.push((t, e));
        Expr::Var(t)
    }
}

fn wrap(binds: Vec<(Symbol, Expr)>, body: Expr) -> Expr {
    binds
        .into_iter()
        .rev()
        .fold(body, |acc, (x, e)| build::let_(x, e, acc))
}

/// A-normal form for operands of `*`, black boxes, accesses and projections.
pub fn anf(e: &Expr, fresh: &mut Fresh) -> Expr {
    match e {
        Expr::Mul(..)
        | Expr::MaxMin(..)
        | Expr::Call(..)
        | Expr::Get(..)
        | Expr::Fst(_)
        | Expr::Snd(_) => {
            let mut binds = vec![];
            let e = e.map_children(|c| atomize(anf(c, fresh), &mut binds, fresh));
            wrap(binds, e)
        }
        // A maximum or minimum of a compound body reduces a named tensor:
        // its derivative reads the one-hot selection once, as one tensor's
        // coefficient, instead of once per input its body depends on.
        Expr::Reduce(r @ (Reduce::Maximum | Reduce::Minimum), i, d, b) if !is_atom(b) => {
            let t = fresh.name("t");
            let k = fresh.name(crate::front::names::base(i.as_str()));
            let body = build::gen(*i, d.clone(), anf(b, fresh));
            let read = build::get(Expr::Var(t), Affine::var(k));
            build::let_(t, body, build::reduce(*r, k, d.clone(), read))
        }
        _ => e.map_children(|c| anf(c, fresh)),
    }
}

/// Every reduction (`maximum`, `argmax`, ...) inside a loop bound by a
/// `let` where it stands (`under`: inside a loop already), so that
/// [`lift`] makes it a binding over the loops' indices, and the optimizer's
/// broadcast pass computes it once per index it depends on: the one-hot
/// selection of a derivative, read in a loop that does not change it, is
/// computed once.
pub fn bind_nested_reductions(e: &Expr, under: bool, fresh: &mut Fresh) -> Expr {
    match e {
        Expr::Reduce(_, i, d, b) => {
            let inner = bind_nested_reductions(b, true, fresh);
            let r = e.same_loop(*i, d.clone(), inner).expect("a loop");
            if !under {
                return r;
            }
            let h = fresh.name("h");
            build::let_(h, r, Expr::Var(h))
        }
        Expr::Gen(..) | Expr::Sum(..) => e.map_children(|c| bind_nested_reductions(c, true, fresh)),
        _ => e.map_children(|c| bind_nested_reductions(c, under, fresh)),
    }
}

/// Let-free bindings, in order, and a let-free result.
pub type Flat = (Vec<(Symbol, Expr)>, Expr);

/// `e` with the replacements `reps` applied in order; those of variables
/// not free in `e` are skipped, and when no binder of `e` could capture
/// (no renaming needed) the variables are replaced in one pass: a loop of
/// many bindings would otherwise copy every binding, and the loop's body,
/// once per binding before it (quadratic).
fn subst_all(e: &Expr, reps: &[Replace], fresh: &mut Fresh) -> Expr {
    let free = free_names(e);
    let applied: Vec<&Replace> = reps
        .iter()
        .filter(|r| !matches!(r, Replace::Var(x, _) if !free.contains(x)))
        .collect();
    let mut by: std::collections::HashMap<Symbol, &Expr> = std::collections::HashMap::new();
    let mut avoid = BTreeSet::new();
    for r in &applied {
        if let Replace::Var(x, to) = r {
            by.insert(*x, to);
            avoid.insert(*x);
            avoid.extend(free_names(to));
        }
    }
    if by.len() == applied.len() && binders(e).is_disjoint(&avoid) {
        return replace_vars(e, &by);
    }
    let mut out = e.clone();
    for r in applied {
        let mut f = |b: Symbol| fresh.name(b.as_str());
        out = Substituter::new(&mut f)
            .expr(&out, r)
            .expect("renaming a variable to an access cannot overflow");
    }
    out
}

/// Every name `e` binds (`let`, `gen`, `sum`, `exists`).
fn binders(e: &Expr) -> BTreeSet<Symbol> {
    fn pred(p: &crate::front::ast::Pred, out: &mut BTreeSet<Symbol>) {
        use crate::front::ast::Pred;
        match p {
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| pred(q, out)),
            Pred::Exists(i, _, q) => {
                out.insert(*i);
                pred(q, out);
            }
            _ => {}
        }
    }
    fn go(e: &Expr, out: &mut BTreeSet<Symbol>) {
        match e {
            Expr::Let(x, ..) | Expr::Gen(x, ..) | Expr::Sum(x, ..) | Expr::Reduce(_, x, ..) => {
                out.insert(*x);
            }
            Expr::Iverson(p, _) => pred(p, out),
            _ => {}
        }
        e.children().for_each(|c| go(c, out));
    }
    let mut out = BTreeSet::new();
    go(e, &mut out);
    out
}

/// `e` with every variable of `by` replaced by its term, in one pass (no
/// binder of `e` may capture: see [`subst_all`]).
fn replace_vars(e: &Expr, by: &std::collections::HashMap<Symbol, &Expr>) -> Expr {
    match e {
        Expr::Var(x) => by.get(x).map_or_else(|| e.clone(), |t| (*t).clone()),
        _ => e.map_children(|c| replace_vars(c, by)),
    }
}

/// Out of a loop over `i < d`: every binding becomes a tensor over `i`; the
/// uses of the bindings (in later bindings and the body) become `x[i]`.
fn lift_loop(
    i: Symbol,
    d: &Affine,
    binds: Vec<(Symbol, Expr)>,
    body: Expr,
    fresh: &mut Fresh,
) -> Flat {
    let mut reps: Vec<Replace> = vec![];
    let mut out = vec![];
    for (x, ex) in binds {
        let ex = subst_all(&ex, &reps, fresh);
        out.push((x, build::gen(i, d.clone(), ex)));
        reps.push(Replace::Var(x, build::get(Expr::Var(x), Affine::var(i))));
    }
    (out, subst_all(&body, &reps, fresh))
}

/// Figure "Let-Lifting" as a single pass.
pub fn lift(e: &Expr, fresh: &mut Fresh) -> Flat {
    let mut binds = vec![];
    let result = lift_into(e, fresh, &mut binds);
    (binds, result)
}

/// [`lift`], its bindings appended to `out` (one vector for the whole
/// term: joining each body's bindings to its definition's made a chain of
/// `k` lets cost `O(k²)` copies).
fn lift_into(e: &Expr, fresh: &mut Fresh, out: &mut Vec<(Symbol, Expr)>) -> Expr {
    use build::*;
    match e {
        Expr::Iverson(p, a) => {
            // the bracket is copied onto every lifted binding (cost neutrality)
            let start = out.len();
            let a = lift_into(a, fresh, out);
            for (_, ex) in &mut out[start..] {
                *ex = iverson(p.clone(), std::mem::replace(ex, num(0.0)));
            }
            iverson(p.clone(), a)
        }
        Expr::Gen(i, d, body) | Expr::Sum(i, d, body) | Expr::Reduce(_, i, d, body) => {
            let start = out.len();
            let inner = lift_into(body, fresh, out);
            let b = out.split_off(start);
            let (b, inner) = lift_loop(*i, d, b, inner, fresh);
            out.extend(b);
            e.same_loop(*i, d.clone(), inner).expect("a loop")
        }
        Expr::Let(x, a, body) => {
            let a = lift_into(a, fresh, out);
            out.push((*x, a));
            lift_into(body, fresh, out)
        }
        // the children's bindings, left to right, before the node
        _ => e.map_children(|c| lift_into(c, fresh, out)),
    }
}

/// Drop bindings that neither later bindings nor the result use.
pub fn dead_code(flat: Flat) -> Flat {
    let (binds, result) = flat;
    let mut live: BTreeSet<Symbol> = free_names(&result);
    let mut kept = vec![];
    for (x, e) in binds.into_iter().rev() {
        if live.contains(&x) {
            live.extend(free_names(&e));
            kept.push((x, e));
        }
    }
    kept.reverse();
    (kept, result)
}

/// Rebuild nested lets from bindings and a result.
pub fn unflatten(flat: Flat) -> Expr {
    let (binds, result) = flat;
    wrap(binds, result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::parse_program;
    use crate::semantics::cost::cost;
    use crate::semantics::value::Sizes;
    use std::collections::HashMap;

    #[test]
    fn lifting_and_anf_keep_the_cost() {
        let p = parse_program(
            b"(fn f ((x (tensor B n R)) (w (tensor n R)))
               (sum k B (let y (gen i n (* (get x k i) (exp (get w i))))
                 (sum i n (let d (+ (get y i) 1.0) (* d d))))))",
        )
        .unwrap();
        let mut fresh = Fresh::default();
        let flat = lift(&anf(&p.body, &mut fresh), &mut fresh);
        assert!(flat.0.iter().all(|(_, e)| !matches!(e, Expr::Let(..))));
        let q = crate::front::ast::Program {
            body: unflatten(flat),
            ..p.clone()
        };
        let sizes: Sizes = [("B", 3), ("n", 4)]
            .into_iter()
            .map(|(k, v)| (Symbol::from(k), v))
            .collect();
        let rel = HashMap::new();
        assert_eq!(
            cost(&p, &sizes, &rel).unwrap(),
            cost(&q, &sizes, &rel).unwrap()
        );
    }
}
