//! The shape of a term up to the values of its constant indices: the
//! terms of a wide sum (`x[k]·sin(x[k])` for `k` = 1, 2, ...) and their
//! derivatives differ only in such constants, and the optimizer, which
//! compares constants with each other and with the extents but does no
//! other arithmetic on them here, treats terms in the same position alike.

use crate::front::affine::Affine;
use crate::front::ast::{Expr, Pred, Type};
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// A term with each constant index (a `get` at a constant, a constant
/// operand of a comparison) replaced by the number of its value in order
/// of first occurrence (equal values share a number), and where those
/// values lie: for each, its place among the *landmarks* (-1, 0, 1 and
/// each constant extent `d` of the term or its `types` with `d - 1` and
/// `d + 1`: a count of landmarks below and whether it is one, its value
/// when it is), and for each pair, their order and whether they are
/// adjacent. Two terms with one shape differ only in constants that no
/// comparison with a landmark or with each other tells apart.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    term: Expr,
    places: Vec<(usize, Option<i64>)>,
    pairs: Vec<(Ordering, bool)>,
}

/// The shape of `e`, whose free variables have `types`; `None` when it has
/// no constant index (its shape would be the term itself).
pub fn shape(e: &Expr, types: &[Type]) -> Option<Shape> {
    let mut w = Walk::default();
    let term = w.expr(e);
    if w.values.is_empty() {
        return None;
    }
    for t in types {
        w.type_extents(t);
    }
    let mut marks: BTreeSet<i64> = [-1, 0, 1].into();
    for d in &w.extents {
        for m in [d.checked_sub(1), Some(*d), d.checked_add(1)] {
            marks.extend(m);
        }
    }
    let places = w
        .values
        .iter()
        .map(|v| {
            let below = marks.range(..*v).count();
            (below, marks.contains(v).then_some(*v))
        })
        .collect();
    let mut pairs = vec![];
    for (k, a) in w.values.iter().enumerate() {
        for b in &w.values[k + 1..] {
            pairs.push((a.cmp(b), a.abs_diff(*b) == 1));
        }
    }
    Some(Shape {
        term,
        places,
        pairs,
    })
}

#[derive(Default)]
struct Walk {
    values: Vec<i64>,
    extents: BTreeSet<i64>,
}

impl Walk {
    fn index(&mut self, a: &Affine) -> Affine {
        match a.as_constant() {
            Some(v) => {
                let k = match self.values.iter().position(|x| *x == v) {
                    Some(k) => k,
                    None => {
                        self.values.push(v);
                        self.values.len() - 1
                    }
                };
                Affine::constant(k as i64)
            }
            None => a.clone(),
        }
    }

    fn extent(&mut self, d: &Affine) {
        self.extents.extend(d.as_constant());
    }

    fn type_extents(&mut self, t: &Type) {
        match t {
            Type::Real => {}
            Type::Pair(a, b) => {
                self.type_extents(a);
                self.type_extents(b);
            }
            Type::Tensor(d, a) => {
                self.extent(d);
                self.type_extents(a);
            }
        }
    }

    fn pred(&mut self, p: &Pred) -> Pred {
        match p {
            Pred::True | Pred::False => p.clone(),
            Pred::Cmp(op, a, b) => Pred::Cmp(*op, self.index(a), self.index(b)),
            Pred::And(ps) => Pred::And(ps.iter().map(|q| self.pred(q)).collect()),
            Pred::Or(ps) => Pred::Or(ps.iter().map(|q| self.pred(q)).collect()),
            Pred::Exists(i, d, q) => {
                self.extent(d);
                Pred::Exists(*i, d.clone(), Box::new(self.pred(q)))
            }
            Pred::Rel(r, args) => Pred::Rel(*r, args.iter().map(|a| self.index(a)).collect()),
        }
    }

    fn expr(&mut self, e: &Expr) -> Expr {
        match e {
            Expr::Get(a, i) => {
                let a = self.expr(a);
                Expr::Get(Box::new(a), self.index(i))
            }
            Expr::Iverson(p, a) => {
                let p = self.pred(p);
                Expr::Iverson(p, Box::new(self.expr(a)))
            }
            Expr::Gen(_, d, _) | Expr::Sum(_, d, _) => {
                self.extent(d);
                e.map_children(|c| self.expr(c))
            }
            _ => e.map_children(|c| self.expr(c)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(s: &str) -> Expr {
        let text = format!("(fn f ((x (tensor 10 R)) (y (tensor 10 R))) {s})");
        let p = crate::front::parse_program(text.as_bytes()).unwrap();
        p.body
    }

    fn of(s: &str) -> Option<Shape> {
        let t = Type::Tensor(Affine::constant(10), Box::new(Type::Real));
        shape(&term(s), &[t.clone(), t])
    }

    #[test]
    fn terms_differing_in_constants_in_the_same_position_share_a_shape() {
        let a = of("(* (get x 3) (sin (get y 3)))");
        assert!(a.is_some());
        assert_eq!(a, of("(* (get x 5) (sin (get y 5)))"));
        assert_eq!(
            of("(gen i 10 (iverson (== i 4) (get x 4)))"),
            of("(gen i 10 (iverson (== i 6) (get x 6)))")
        );
    }

    #[test]
    fn constants_that_comparisons_tell_apart_make_other_shapes() {
        let a = of("(* (get x 3) (sin (get y 3)))");
        // equal constants, or not
        assert_ne!(a, of("(* (get x 3) (sin (get y 5)))"));
        // a landmark: 0, 1, the extent and its neighbours
        for k in [0, 1, 9, 10, 11, -1, -4, 12] {
            assert_ne!(a, of(&format!("(* (get x {k}) (sin (get y {k})))")), "{k}");
        }
        // order and adjacency of two constants
        let b = of("(+ (get x 3) (get x 6))");
        assert_eq!(b, of("(+ (get x 2) (get x 5))"));
        assert_ne!(b, of("(+ (get x 6) (get x 3))"));
        assert_ne!(b, of("(+ (get x 3) (get x 4))"));
        // no constant index: no shape
        assert_eq!(of("(gen i 10 (get x i))"), None);
    }
}
