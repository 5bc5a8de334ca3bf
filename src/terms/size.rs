//! The size of a term.

use crate::front::ast::Expr;

/// The number of nodes of an expression.
pub fn term_size(e: &Expr) -> usize {
    1 + e.children().map(term_size).sum::<usize>()
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
        e.children().all(|c| count(c, left))
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
