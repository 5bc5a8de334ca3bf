//! Contractions exposed to the tiled kernel where the program hides them.
//!
//! `contract.rs` runs `(gen i I (gen j J (... (sum k K (* x y)) ...)))` as
//! one call of the tiled kernel. Derivatives often hold the same products
//! in two other shapes, which this pass (on the program, before lowering)
//! rewrites into that one:
//!
//! * **A sum of products.** A forward derivative of a product of two
//!   matrices sums `dA[k][i]·A[k][j] + A[k][i]·dA[k][j]` over `k`. Inside
//!   `(gen i (gen j ...))`, `(sum k K (+ p q))` whose terms `p`, `q` (any
//!   number, nested `+`) are each a contraction's product becomes
//!   `(+ (sum k K p) (sum k' K q))`, one kernel call per term. Each element
//!   executes the same multiplications and the same number of additions
//!   (`n·K - 1` for `n` terms either way); the additions are reassociated,
//!   as the kernel already reassociates a product's `K` terms.
//! * **A contraction under a sum.** `(gen i I (... (sum j J (... (sum k K
//!   (* x y)) ...)) ...))` (or `(sum i I ...)` outside; a gradient's
//!   `x·(AᵀA)`, a quadratic form's `Σ_i Σ_j x[i]·(AᵀA)[i][j]·x[j]`) computes
//!   every `(i, j)` element of a matrix product once, as a dot product
//!   walking at least one matrix down its columns. The product is bound
//!   first, `(let t (gen i I (gen j J (sum k K (* x y)))) ...)`, where the
//!   outer loop stood, and the sum reads `t[i][j]`. Every element is still
//!   computed once, by the same operations; only an `I×J` slot is added.
//!
//! Only positions that run exactly once per `(i, j)` qualify: the sum over
//! `j` and the contraction are reached through `+`, `*`, `max`/`min`,
//! calls and scalar `let`s (never under a bracket, a `gen` or another
//! sum), the sums over `i` and `j` are plain (no bracket), `J` does not
//! depend on `i`, and the contraction reads nothing bound in between.

use super::Lowerer;
use crate::front::affine::Affine;
use crate::front::ast::Expr;
use crate::front::subst::free_names;
use crate::symbol::Symbol;

/// Positions of `e` evaluated exactly once whenever `e` is: the leaves
/// reached through arithmetic and scalar lets, with the let names passed
/// on the way (`bound`).
fn once<'a>(e: &'a Expr, bound: &mut Vec<Symbol>, out: &mut Vec<(&'a Expr, Vec<Symbol>)>) {
    match e {
        Expr::Add(a, b) | Expr::Mul(a, b) | Expr::MaxMin(_, a, b) => {
            once(a, bound, out);
            once(b, bound, out);
        }
        Expr::Call(_, a) => once(a, bound, out),
        Expr::Let(x, e0, rest) => {
            once(e0, bound, out);
            bound.push(*x);
            once(rest, bound, out);
            bound.pop();
        }
        Expr::Sum(..) => out.push((e, bound.clone())),
        _ => {}
    }
}

/// The terms of a tree of `+`.
fn terms<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::Add(a, b) => {
            terms(a, out);
            terms(b, out);
        }
        _ => out.push(e),
    }
}

/// `e` with the given positions (by address, among those [`once`]
/// reaches) replaced.
fn replace_once(e: &Expr, repl: &[(*const Expr, Expr)]) -> Expr {
    if let Some((_, r)) = repl.iter().find(|(p, _)| std::ptr::eq(*p, e)) {
        return r.clone();
    }
    let r = |a: &Expr| Box::new(replace_once(a, repl));
    match e {
        Expr::Add(a, b) => Expr::Add(r(a), r(b)),
        Expr::Mul(a, b) => Expr::Mul(r(a), r(b)),
        Expr::MaxMin(m, a, b) => Expr::MaxMin(*m, r(a), r(b)),
        Expr::Call(f, a) => Expr::Call(*f, r(a)),
        Expr::Let(x, e0, rest) => Expr::Let(*x, r(e0), r(rest)),
        _ => e.clone(),
    }
}

/// A tree of `+` of sums with flat bodies (a contraction's definition)
/// with the index `v` renamed `to`.
fn rename(e: &Expr, v: Symbol, to: Symbol) -> Option<Expr> {
    Some(match e {
        Expr::Add(a, b) => Expr::Add(Box::new(rename(a, v, to)?), Box::new(rename(b, v, to)?)),
        Expr::Sum(k, dk, body) if *k != v && *k != to && !mentions(dk, &[v]) => {
            let body = super::order::subst_expr(body, v, &Affine::var(to), &[*k, to])?;
            Expr::Sum(*k, dk.clone(), Box::new(body))
        }
        _ => return None,
    })
}

fn mentions(a: &Affine, vs: &[Symbol]) -> bool {
    a.terms.iter().any(|(v, _)| vs.contains(v))
}

/// Is `(sum k K body)` a contraction of `(gen i I (gen j J ...))`?
fn contraction(i: Symbol, di: &Affine, j: Symbol, dj: &Affine, s: &Expr) -> bool {
    let g = Expr::Gen(
        i,
        di.clone(),
        Box::new(Expr::Gen(j, dj.clone(), Box::new(s.clone()))),
    );
    super::contract::is_plain_contraction(&g)
}

impl Lowerer {
    /// `e` with the contractions it hides exposed (module doc).
    pub(super) fn expose_contractions(&mut self, e: &Expr) -> Expr {
        let e = e.map_children(|c| self.expose_contractions(c));
        match &e {
            Expr::Gen(i, di, inner) => match &**inner {
                Expr::Gen(j, dj, body) => match self.split_sums(*i, di, *j, dj, body) {
                    Some(body) => Expr::Gen(
                        *i,
                        di.clone(),
                        Box::new(Expr::Gen(*j, dj.clone(), Box::new(body))),
                    ),
                    None => e,
                },
                _ => self.hoist(*i, di, &e).unwrap_or(e),
            },
            Expr::Sum(i, di, _) => self.hoist(*i, di, &e).unwrap_or(e),
            _ => e,
        }
    }

    /// The body of `(gen i (gen j body))` with each sum of contraction
    /// products, reached by [`once`], split into one sum per product;
    /// `None` when there is none.
    fn split_sums(
        &mut self,
        i: Symbol,
        di: &Affine,
        j: Symbol,
        dj: &Affine,
        body: &Expr,
    ) -> Option<Expr> {
        let mut sums = vec![];
        once(body, &mut vec![], &mut sums);
        let mut repl = vec![];
        for (s, _) in sums {
            if let Some(split) = self.split_sum(i, di, j, dj, s) {
                repl.push((s as *const Expr, split));
            }
        }
        (!repl.is_empty()).then(|| replace_once(body, &repl))
    }

    /// `(sum k K (+ p q ...))`, every term a contraction product, as
    /// `(+ (sum k K p) (sum k' K q) ...)` (fresh `k'`).
    fn split_sum(
        &mut self,
        i: Symbol,
        di: &Affine,
        j: Symbol,
        dj: &Affine,
        s: &Expr,
    ) -> Option<Expr> {
        let Expr::Sum(k, dk, body) = s else {
            return None;
        };
        let mut ts = vec![];
        terms(body, &mut ts);
        if ts.len() < 2 {
            return None;
        }
        let mut out: Option<Expr> = None;
        for (n, t) in ts.into_iter().enumerate() {
            let (kn, t) = if n == 0 {
                (*k, t.clone())
            } else {
                let kn = self.internal_symbol("k");
                let t = super::order::subst_expr(t, *k, &Affine::var(kn), &[i, j, kn])?;
                (kn, t)
            };
            let sum = Expr::Sum(kn, dk.clone(), Box::new(t));
            if !contraction(i, di, j, dj, &sum) {
                return None;
            }
            out = Some(match out {
                None => sum,
                Some(acc) => Expr::Add(Box::new(acc), Box::new(sum)),
            });
        }
        out
    }

    /// `l`, a `(gen i I body)` or a plain `(sum i I body)`, with each
    /// contraction under a sum over `j` in `body` bound before it (module
    /// doc); `None` when there is none.
    fn hoist(&mut self, i: Symbol, di: &Affine, l: &Expr) -> Option<Expr> {
        let (Expr::Gen(_, _, body) | Expr::Sum(_, _, body)) = l else {
            return None;
        };
        if matches!(&**body, Expr::Iverson(..)) || mentions(di, &[i]) {
            return None;
        }
        let mut outer = vec![];
        once(body, &mut vec![], &mut outer);
        let mut lets = vec![];
        let mut repl = vec![];
        for (sj, bound) in outer {
            let Expr::Sum(j, dj, bj) = sj else { continue };
            if matches!(&**bj, Expr::Sum(..) | Expr::Iverson(..)) || mentions(dj, &[i, *j]) {
                continue;
            }
            let mut inner = vec![];
            once(bj, &mut vec![], &mut inner);
            let mut rj = vec![];
            for (sk, bound_k) in inner {
                let free = free_names(sk);
                if bound.iter().chain(&bound_k).any(|x| free.contains(x)) {
                    continue;
                }
                let def = self
                    .split_sum(i, di, *j, dj, sk)
                    .unwrap_or_else(|| sk.clone());
                let mut ds = vec![];
                terms(&def, &mut ds);
                if !ds.iter().all(|d| contraction(i, di, *j, dj, d)) {
                    continue;
                }
                let (i2, j2) = (self.internal_symbol("i"), self.internal_symbol("j"));
                let Some(def) = rename(&def, i, i2).and_then(|d| rename(&d, *j, j2)) else {
                    continue;
                };
                let t = self.internal_symbol("product");
                let def = Expr::Gen(
                    i2,
                    di.clone(),
                    Box::new(Expr::Gen(j2, dj.clone(), Box::new(def))),
                );
                lets.push((t, def));
                let read = Expr::Get(
                    Box::new(Expr::Get(Box::new(Expr::Var(t)), Affine::var(i))),
                    Affine::var(*j),
                );
                rj.push((sk as *const Expr, read));
            }
            if !rj.is_empty() {
                let nb = replace_once(bj, &rj);
                repl.push((sj as *const Expr, Expr::Sum(*j, dj.clone(), Box::new(nb))));
            }
        }
        if lets.is_empty() {
            return None;
        }
        let body = replace_once(body, &repl);
        let mut e = match l {
            Expr::Gen(..) => Expr::Gen(i, di.clone(), Box::new(body)),
            _ => Expr::Sum(i, di.clone(), Box::new(body)),
        };
        for (t, def) in lets.into_iter().rev() {
            e = Expr::Let(t, Box::new(def), Box::new(e));
        }
        Some(e)
    }
}
