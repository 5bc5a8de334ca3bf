//! The extents of the index binders of a term.

use crate::front::affine::Affine;
use crate::front::ast::{Expr, Pred};
use crate::symbol::Symbol;
use std::collections::HashMap;

/// Record the extent of every index binder of `e` (`gen`, `sum`, `exists`)
/// in `out`, keyed by the binder's name (binder names are unique).
pub fn collect_extents(e: &Expr, out: &mut HashMap<Symbol, Affine>) {
    fn pred(p: &Pred, out: &mut HashMap<Symbol, Affine>) {
        match p {
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| pred(q, out)),
            Pred::Exists(i, d, q) => {
                out.insert(*i, d.clone());
                pred(q, out);
            }
            _ => {}
        }
    }
    match e {
        Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => {}
        Expr::Add(a, b)
        | Expr::Mul(a, b)
        | Expr::MaxMin(_, a, b)
        | Expr::Pair(a, b)
        | Expr::Let(_, a, b) => {
            collect_extents(a, out);
            collect_extents(b, out);
        }
        Expr::Call(_, a) | Expr::Fst(a) | Expr::Snd(a) | Expr::Get(a, _) => collect_extents(a, out),
        Expr::Gen(i, d, b) | Expr::Sum(i, d, b) | Expr::Reduce(_, i, d, b) => {
            out.insert(*i, d.clone());
            collect_extents(b, out);
        }
        Expr::Iverson(p, a) => {
            pred(p, out);
            collect_extents(a, out);
        }
    }
}
