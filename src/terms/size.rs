//! The size of a term.

use crate::front::ast::Expr;

/// The number of nodes of an expression.
pub fn term_size(e: &Expr) -> usize {
    match e {
        Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => 1,
        Expr::Add(a, b)
        | Expr::Mul(a, b)
        | Expr::MaxMin(_, a, b)
        | Expr::Pair(a, b)
        | Expr::Let(_, a, b) => 1 + term_size(a) + term_size(b),
        Expr::Call(_, a)
        | Expr::Fst(a)
        | Expr::Snd(a)
        | Expr::Get(a, _)
        | Expr::Iverson(_, a)
        | Expr::Gen(_, _, a)
        | Expr::Sum(_, _, a) => 1 + term_size(a),
    }
}
