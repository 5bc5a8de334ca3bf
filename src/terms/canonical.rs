//! Canonical names of index binders: terms equal up to the names of their
//! indices become equal terms.

use crate::front::affine::Affine;
use crate::front::ast::{Expr, Pred};
use crate::symbol::Symbol;
use std::collections::HashMap;

/// Rename index binders by nesting depth and extent (`i2#x0` is the index
/// at depth 2 over the first extent met), so that terms equal up to the
/// names of their indices become equal terms and share an e-class (the k
/// traces of `trace(diag(x)) + ...` are then one sum, and `e + e = 2e`
/// applies). Two binders with one name always have one extent, so the
/// extent map stays exact; nested binders differ in depth, so no name is
/// shadowed.
pub fn canonical_binders(e: &Expr) -> Expr {
    canonical_binders_with_hints(e).0
}

/// [`canonical_binders`], and for each canonical name the first source name
/// it stands for (printed programs show that name, see
/// [`crate::front::readable::readable`]).
pub fn canonical_binders_with_hints(e: &Expr) -> (Expr, HashMap<Symbol, Symbol>) {
    struct Canon {
        extents: Vec<Affine>,
        ren: HashMap<Symbol, Vec<Symbol>>,
        hints: HashMap<Symbol, Symbol>,
    }
    impl Canon {
        fn name(&mut self, depth: usize, d: &Affine) -> Symbol {
            let k = match self.extents.iter().position(|x| x == d) {
                Some(k) => k,
                None => {
                    self.extents.push(d.clone());
                    self.extents.len() - 1
                }
            };
            crate::front::names::make(&format!("i{depth}"), format!("x{k}"))
        }
        fn aff(&self, a: &Affine) -> Affine {
            let mut out = a.clone();
            for (n, names) in &self.ren {
                if let Some(c) = names.last() {
                    out = out.rename(*n, *c);
                }
            }
            out
        }
        fn enter(&mut self, i: Symbol, c: Symbol) {
            self.hints.entry(c).or_insert(i);
            self.ren.entry(i).or_default().push(c);
        }
        fn leave(&mut self, i: Symbol) {
            if let Some(v) = self.ren.get_mut(&i) {
                v.pop();
                if v.is_empty() {
                    self.ren.remove(&i);
                }
            }
        }
        fn pred(&mut self, p: &Pred, depth: usize) -> Pred {
            match p {
                Pred::True | Pred::False => p.clone(),
                Pred::Cmp(op, a, b) => Pred::Cmp(*op, self.aff(a), self.aff(b)),
                Pred::And(ps) => Pred::And(ps.iter().map(|q| self.pred(q, depth)).collect()),
                Pred::Or(ps) => Pred::Or(ps.iter().map(|q| self.pred(q, depth)).collect()),
                Pred::Exists(i, d, q) => {
                    let d = self.aff(d);
                    let c = self.name(depth, &d);
                    self.enter(*i, c);
                    let q = self.pred(q, depth + 1);
                    self.leave(*i);
                    Pred::Exists(c, d, Box::new(q))
                }
                Pred::Rel(r, idx) => Pred::Rel(*r, idx.iter().map(|a| self.aff(a)).collect()),
            }
        }
        fn expr(&mut self, e: &Expr, depth: usize) -> Expr {
            use crate::front::ast::build::*;
            match e {
                Expr::Var(_) | Expr::Const(_) => e.clone(),
                Expr::Add(a, b) => add(self.expr(a, depth), self.expr(b, depth)),
                Expr::Mul(a, b) => mul(self.expr(a, depth), self.expr(b, depth)),
                Expr::MaxMin(m, a, b) => maxmin(*m, self.expr(a, depth), self.expr(b, depth)),
                Expr::IndexReal(a) => Expr::IndexReal(self.aff(a)),
                Expr::Pair(a, b) => pair(self.expr(a, depth), self.expr(b, depth)),
                Expr::Call(f, a) => call(*f, self.expr(a, depth)),
                Expr::Fst(a) => fst(self.expr(a, depth)),
                Expr::Snd(a) => snd(self.expr(a, depth)),
                Expr::Get(a, i) => get(self.expr(a, depth), self.aff(i)),
                Expr::Iverson(p, a) => iverson(self.pred(p, depth), self.expr(a, depth)),
                Expr::Let(x, a, b) => let_(*x, self.expr(a, depth), self.expr(b, depth)),
                Expr::Reduce(_, i, d, b) => {
                    let d = self.aff(d);
                    let c = self.name(depth, &d);
                    self.enter(*i, c);
                    let b = self.expr(b, depth + 1);
                    self.leave(*i);
                    e.same_loop(c, d, b).expect("a loop")
                }
                Expr::Gen(i, d, b) | Expr::Sum(i, d, b) => {
                    let d = self.aff(d);
                    let c = self.name(depth, &d);
                    self.enter(*i, c);
                    let b = self.expr(b, depth + 1);
                    self.leave(*i);
                    if matches!(e, Expr::Gen(..)) {
                        gen(c, d, b)
                    } else {
                        sum(c, d, b)
                    }
                }
            }
        }
    }
    let mut c = Canon {
        extents: vec![],
        ren: HashMap::new(),
        hints: HashMap::new(),
    };
    let out = c.expr(e, 0);
    (out, c.hints)
}
