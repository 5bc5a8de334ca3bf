//! Layout of intermediates: a let-bound matrix is stored in the order its
//! readers walk it.
//!
//! `(let x (gen i n (gen j m e)) body)` is stored row-major in `i`. When
//! `body` reads it as `(get (get x I) J)` inside loops where `I` varies
//! faster than `J` (a gradient's `(gen b B (sum i n ... (get (get x i)
//! b)))`), every read walks a column; and such a column read keeps the
//! let spine from running as one loop over `b` (row fusion, `fuse.rs`,
//! needs rows). The let is then stored transposed:
//!
//! ```text
//! (let x (gen j m (gen i n e)) body[(get (get x I) J) := (get (get x J) I)])
//! ```
//!
//! Every element is still `e` at the same `(i, j)`, computed once by the
//! same operations (values and counted operations are unchanged); only
//! where it is stored and the order the elements are computed in change.
//!
//! The choice is a vote: each read of `x` in `body` votes for the order
//! whose last index is the one that varies in the innermost loop around
//! the read, and each tensor read in `e` indexed by both `i` and `j` votes
//! for the order that makes the loop over the later-indexed variable the
//! inner one. The let is transposed when the transposed order wins; a
//! read of `x` other than `(get (get x I) J)` keeps it as it is. A sum
//! whose bracket conjoins a relation atom over its variable visits that
//! relation's stored coordinates, in no order a layout can follow (a graph
//! layer's `(sum j n (iverson (E i j) (get (get x j) c)))` jumps from row
//! to row): its variable does not count as varying, so that the elements
//! of one row read in turn stay together.

use crate::front::affine::Affine;
use crate::front::ast::{Expr, Pred};
use crate::symbol::Symbol;
use crate::terms::brackets::conjuncts;

/// `e` with every let-bound matrix its readers walk by columns stored
/// transposed (module doc).
pub(super) fn transpose_lets(e: &Expr) -> Expr {
    let e = e.map_children(transpose_lets);
    let Expr::Let(x, e0, body) = &e else {
        return e;
    };
    let Expr::Gen(i, n, inner) = &**e0 else {
        return e;
    };
    let Expr::Gen(j, m, el) = &**inner else {
        return e;
    };
    let mentions = |a: &Affine| a.terms.iter().any(|(v, _)| v == i || v == j);
    if i == j || x == i || x == j || mentions(n) || mentions(m) {
        return e;
    }
    let mut votes = Votes::default();
    definition_votes(el, *i, *j, &mut votes);
    if !use_votes(body, *x, &mut vec![], &mut votes) || votes.transposed <= votes.kept {
        return e;
    }
    let swapped = Expr::Gen(
        *j,
        m.clone(),
        Box::new(Expr::Gen(*i, n.clone(), el.clone())),
    );
    Expr::Let(*x, Box::new(swapped), Box::new(swap_reads(body, *x)))
}

#[derive(Default)]
struct Votes {
    kept: usize,
    transposed: usize,
}

/// The last index position of `v` in an index list.
fn position(idx: &[&Affine], v: Symbol) -> Option<usize> {
    idx.iter()
        .rposition(|a| a.terms.iter().any(|(s, k)| *s == v && *k != 0))
}

/// Votes of the tensor reads in the element `e` of `(gen i (gen j e))`.
fn definition_votes(e: &Expr, i: Symbol, j: Symbol, votes: &mut Votes) {
    if let Expr::Get(..) = e {
        let mut idx = vec![];
        let mut r = e;
        while let Expr::Get(a, ix) = r {
            idx.push(ix);
            r = a;
        }
        idx.reverse();
        match (position(&idx, i), position(&idx, j)) {
            (Some(pi), Some(pj)) if pi > pj => votes.transposed += 1,
            (Some(pi), Some(pj)) if pj > pi => votes.kept += 1,
            _ => {}
        }
        return definition_votes(r, i, j, votes);
    }
    // A binder of `i` or `j` inside hides the gen's.
    match e {
        Expr::Gen(v, _, _) | Expr::Sum(v, _, _) | Expr::Reduce(_, v, _, _)
            if *v == i || *v == j => {}
        _ => e.children().for_each(|c| definition_votes(c, i, j, votes)),
    }
}

/// The depth of the innermost loop (in `loops`, outermost first) whose
/// variable occurs in `a`.
fn depth(a: &Affine, loops: &[Symbol]) -> Option<usize> {
    loops
        .iter()
        .rposition(|v| a.terms.iter().any(|(s, k)| s == v && *k != 0))
}

/// Votes of the reads of `x` in `e` (`loops`: the loop variables bound
/// around `e`, outermost first); `false` when `x` is read otherwise than
/// as `(get (get x I) J)`.
fn use_votes(e: &Expr, x: Symbol, loops: &mut Vec<Symbol>, votes: &mut Votes) -> bool {
    match e {
        Expr::Get(a, jx) => {
            if let Expr::Get(v, ix) = &**a {
                if matches!(&**v, Expr::Var(y) if *y == x) {
                    match (depth(ix, loops), depth(jx, loops)) {
                        (Some(di), dj) if dj.is_none_or(|dj| di > dj) => votes.transposed += 1,
                        (di, Some(dj)) if di.is_none_or(|di| dj > di) => votes.kept += 1,
                        _ => {}
                    }
                    return true;
                }
            }
            use_votes(a, x, loops, votes)
        }
        Expr::Var(y) => *y != x,
        Expr::Let(y, e0, b) => {
            use_votes(e0, x, loops, votes) && (*y == x || use_votes(b, x, loops, votes))
        }
        Expr::Sum(v, _, b) if driven_by_relation(*v, b) => use_votes(b, x, loops, votes),
        Expr::Gen(v, _, b) | Expr::Sum(v, _, b) | Expr::Reduce(_, v, _, b) => {
            loops.push(*v);
            let ok = use_votes(b, x, loops, votes);
            loops.pop();
            ok
        }
        _ => e.children().all(|c| use_votes(c, x, loops, votes)),
    }
}

/// Is `body` of `(sum v d body)` bracketed by a relation atom that has `v`
/// as an argument (so that the loop visits stored coordinates)?
fn driven_by_relation(v: Symbol, body: &Expr) -> bool {
    let Expr::Iverson(p, _) = body else {
        return false;
    };
    conjuncts(p).into_iter().any(|q| {
        matches!(q, Pred::Rel(_, args) if args.iter().any(|a| {
            a.constant == 0 && a.terms.len() == 1 && a.terms[0] == (v, 1)
        }))
    })
}

/// `e` with every free `(get (get x I) J)` read as `(get (get x J) I)`.
fn swap_reads(e: &Expr, x: Symbol) -> Expr {
    match e {
        Expr::Get(a, jx) => match &**a {
            Expr::Get(v, ix) if matches!(&**v, Expr::Var(y) if *y == x) => {
                Expr::Get(Box::new(Expr::Get(v.clone(), jx.clone())), ix.clone())
            }
            _ => Expr::Get(Box::new(swap_reads(a, x)), jx.clone()),
        },
        Expr::Let(y, e0, b) if *y == x => Expr::Let(*y, Box::new(swap_reads(e0, x)), b.clone()),
        _ => e.map_children(|c| swap_reads(c, x)),
    }
}
