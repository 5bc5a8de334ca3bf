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

/// Whether `e` has at most `limit` nodes, in time bounded by `limit` (not by
/// the term: asked of every subterm of a long addition, the full size was
/// quadratic in its length).
pub fn size_at_most(e: &Expr, limit: usize) -> bool {
    fn count(e: &Expr, left: &mut usize) -> bool {
        if *left == 0 {
            return false;
        }
        *left -= 1;
        match e {
            Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => true,
            Expr::Add(a, b)
            | Expr::Mul(a, b)
            | Expr::MaxMin(_, a, b)
            | Expr::Pair(a, b)
            | Expr::Let(_, a, b) => count(a, left) && count(b, left),
            Expr::Call(_, a)
            | Expr::Fst(a)
            | Expr::Snd(a)
            | Expr::Get(a, _)
            | Expr::Iverson(_, a)
            | Expr::Gen(_, _, a)
            | Expr::Sum(_, _, a) => count(a, left),
        }
    }
    let mut left = limit;
    count(e, &mut left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_at_most_agrees_with_the_size() {
        let e = crate::front::ast::build::add(
            crate::front::ast::build::num(1.0),
            crate::front::ast::build::mul(
                crate::front::ast::build::num(2.0),
                crate::front::ast::build::num(3.0),
            ),
        );
        assert_eq!(term_size(&e), 5);
        for limit in 0..8 {
            assert_eq!(size_at_most(&e, limit), limit >= 5, "{limit}");
        }
    }
}
