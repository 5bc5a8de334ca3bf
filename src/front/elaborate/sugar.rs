//! The sugar of language.md, rewritten to core forms as it is elaborated
//! (the rewriting is fixed: a program's cost is its core form's): `-` and
//! `/`, `+`, `*` and black boxes on tensors (pointwise), and sums of
//! tensors. What a form becomes depends on its operands' types.

use super::Elab;
use crate::error::{Error, Pos, Result};
use crate::front::affine::Affine;
use crate::front::ast::{build, CmpOp, Expr, Func, MaxMin, Pred, Type};
use crate::front::reader::Sexp;
use crate::symbol::Symbol;
use std::collections::HashSet;

impl Elab {
    /// `(- e)` is `(* -1 e)`; `(- a b)` is `(+ a (* -1 b))`.
    pub(super) fn minus(
        &mut self,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        let minus_one = (build::num(-1.0), Type::Real);
        if args.len() == 1 {
            let a = self.expr(&args[0], claimed)?;
            return self.arith(false, minus_one, a, pos);
        }
        let a = self.expr(&args[0], claimed)?;
        let b = self.expr(&args[1], claimed)?;
        let nb = self.arith(false, minus_one, b, pos)?;
        self.arith(true, a, nb, pos)
    }

    /// `(/ a b)` is `(* a (recip b))`.
    pub(super) fn divide(
        &mut self,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        let a = self.expr(&args[0], claimed)?;
        let b = self.expr(&args[1], claimed)?;
        let rb = self.call(Func::named("recip"), b, pos)?;
        self.arith(false, a, rb, pos)
    }

    /// A black box applied to a real, or pointwise to a tensor of reals.
    pub(super) fn call(
        &mut self,
        f: Func,
        (a, ta): (Expr, Type),
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        match ta.real_shape() {
            None => Err(Error::typ(
                pos,
                format!(
                    "{} expects a real or a tensor of reals, got {}",
                    f.name(),
                    ta
                ),
            )),
            Some(shape) if shape.is_empty() => Ok((build::call(f, a), Type::Real)),
            Some(shape) => {
                Ok(self.pointwise(&shape, vec![(a, ta)], |mut xs| build::call(f, xs.remove(0))))
            }
        }
    }

    /// `(max a b)`, `(min a b)`: the core form on reals, pointwise on two
    /// tensors of one shape or on a tensor and a real (as `*`).
    pub(super) fn maxmin(
        &mut self,
        m: MaxMin,
        (a, ta): (Expr, Type),
        (b, tb): (Expr, Type),
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        let (Some(sa), Some(sb)) = (ta.real_shape(), tb.real_shape()) else {
            return Err(Error::typ(
                pos,
                format!(
                    "{} expects reals or tensors of reals, got {ta} and {tb}",
                    m.name()
                ),
            ));
        };
        let op = move |mut xs: Vec<Expr>| {
            let y = xs.pop().expect("two operands");
            let x = xs.pop().expect("two operands");
            build::maxmin(m, x, y)
        };
        if sa.is_empty() && sb.is_empty() {
            return Ok((op(vec![a, b]), Type::Real));
        }
        if sa.is_empty() || sb.is_empty() || sa == sb {
            let shape = if sa.is_empty() { sb } else { sa };
            return Ok(self.pointwise(&shape, vec![(a, ta), (b, tb)], op));
        }
        Err(Error::typ(
            pos,
            format!(
                "cannot take the {} of {ta} and {tb} (shapes differ)",
                m.name()
            ),
        ))
    }

    /// `+` (`is_add`) or `*` of two operands: the core form on reals,
    /// pointwise on tensors (`*` also of a tensor by a real).
    pub(super) fn arith(
        &mut self,
        is_add: bool,
        (a, ta): (Expr, Type),
        (b, tb): (Expr, Type),
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        let (sa, sb) = (ta.real_shape(), tb.real_shape());
        let verb = if is_add { "add" } else { "multiply" };
        let (Some(sa), Some(sb)) = (sa, sb) else {
            return Err(Error::typ(pos, format!("cannot {verb} {} and {}", ta, tb)));
        };
        let op = move |mut xs: Vec<Expr>| {
            let y = xs.pop().expect("two operands");
            let x = xs.pop().expect("two operands");
            if is_add {
                build::add(x, y)
            } else {
                build::mul(x, y)
            }
        };
        if sa.is_empty() && sb.is_empty() {
            return Ok((op(vec![a, b]), Type::Real));
        }
        if is_add {
            if !sa.is_empty() && sa == sb {
                return Ok(self.pointwise(&sa, vec![(a, ta), (b, tb)], op));
            }
            return Err(Error::typ(
                pos,
                format!(
                    "cannot add {} and {} (pointwise + needs two tensors of the same shape)",
                    ta, tb
                ),
            ));
        }
        if sa.is_empty() || sb.is_empty() || sa == sb {
            let shape = if sa.is_empty() { sb } else { sa };
            return Ok(self.pointwise(&shape, vec![(a, ta), (b, tb)], op));
        }
        Err(Error::typ(
            pos,
            format!("cannot multiply {} and {} (shapes differ)", ta, tb),
        ))
    }

    /// The pointwise sugar (docs/language.md): operands that are not variables or
    /// constants are let-bound once, left first; tensor operands are indexed
    /// by fresh `j`s, scalar operands used as they are.
    fn pointwise(
        &mut self,
        shape: &[Affine],
        operands: Vec<(Expr, Type)>,
        op: impl FnOnce(Vec<Expr>) -> Expr,
    ) -> (Expr, Type) {
        let mut binds = vec![];
        let mut refs = vec![];
        for (o, t) in operands {
            match o {
                Expr::Var(_) | Expr::Const(_) => refs.push((o, t)),
                _ => {
                    let name = self.fresh("t");
                    binds.push((name, o));
                    refs.push((Expr::Var(name), t));
                }
            }
        }
        let idx: Vec<Symbol> = shape.iter().map(|_| self.fresh("j")).collect();
        let elems = refs
            .into_iter()
            .map(|(r, t)| match t {
                Type::Tensor(..) => idx.iter().fold(r, |e, j| build::get(e, Affine::var(*j))),
                _ => r,
            })
            .collect();
        let mut body = op(elems);
        for (j, d) in idx.iter().zip(shape).rev() {
            body = build::gen(*j, d.clone(), body);
        }
        for (t, o) in binds.into_iter().rev() {
            body = build::let_(t, o, body);
        }
        (body, Type::tensor(shape, Type::Real))
    }

    /// The sugar for the sum of a tensor-valued body (docs/language.md):
    /// `(let t (gen i D e) (gen j1 D1 ... (sum k D (get t k j1 ...))))`.
    pub(super) fn sum_tensor(
        &mut self,
        var: Symbol,
        d: Affine,
        body: Expr,
        shape: &[Affine],
    ) -> (Expr, Type) {
        let t = self.fresh("t");
        let k = self.fresh("k");
        let idx: Vec<Symbol> = shape.iter().map(|_| self.fresh("j")).collect();
        let g = build::gen(var, d.clone(), body);
        let mut e = build::get(Expr::Var(t), Affine::var(k));
        for j in &idx {
            e = build::get(e, Affine::var(*j));
        }
        let mut out = build::sum(k, d, e);
        for (j, dd) in idx.iter().zip(shape).rev() {
            out = build::gen(*j, dd.clone(), out);
        }
        (build::let_(t, g, out), Type::tensor(shape, Type::Real))
    }
}

impl Elab {
    /// `(tuple e0 e1 ... en)` is `(pair e0 (pair e1 ... en))`; `(tuple e)` is `e`.
    pub(super) fn tuple(
        &mut self,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        let mut parts = vec![];
        for a in args {
            parts.push(self.expr(a, claimed)?);
        }
        let mut acc = parts.pop().expect("at least one component");
        while let Some((e, t)) = parts.pop() {
            acc = (
                build::pair(e, acc.0),
                Type::Pair(Box::new(t), Box::new(acc.1)),
            );
        }
        Ok(acc)
    }

    /// `(proj k e)`: component `k` (from 0) of a tuple, right-nested pairs:
    /// `k` times `snd`, then `fst` if what is left is a pair (it is the
    /// last component otherwise).
    pub(super) fn proj(
        &mut self,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        let k = match &args[0] {
            Sexp::Num(n, _) => n.int.filter(|k| *k >= 0),
            _ => None,
        };
        let Some(k) = k else {
            return Err(Error::syntax(
                args[0].pos(),
                "proj: the component must be a natural number literal (proj k e)",
            ));
        };
        let (mut e, mut t) = self.expr(&args[1], claimed)?;
        for step in 0..k {
            let Type::Pair(_, rest) = t else {
                return Err(Error::typ(
                    args[1].pos(),
                    format!(
                        "proj {k}: {} has only {} component{}",
                        if step == 0 { "this value" } else { "the tuple" },
                        step + 1,
                        if step == 0 { "" } else { "s" }
                    ),
                ));
            };
            e = build::snd(e);
            t = *rest;
        }
        Ok(match t {
            Type::Pair(first, _) => (build::fst(e), *first),
            t => (e, t),
        })
    }

    /// `(vec e0 ... en-1)`, elements of one type: for reals,
    /// `(gen k n (+ (iverson (< k n-1) (+ ... (+ (iverson (== k 0) e0) (iverson (== k 1) e1)) ...))
    ///              (iverson (== k n-1) en-1)))`
    /// with a fresh `k`: every addition has brackets on both sides that
    /// never hold together, so the additions cost nothing under the cost
    /// model. Tensor elements that are not variables are let-bound first,
    /// and the element read at `k` is `(get tm j1 ...)` under gens over fresh `j`s.
    pub(super) fn vec(
        &mut self,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        let mut elems: Vec<(Expr, Type)> = vec![];
        for a in args {
            let (e, t) = self.expr(a, claimed)?;
            if t.real_shape().is_none() {
                return Err(Error::typ(
                    a.pos(),
                    format!("vec: an element must be a real or a tensor of reals, got {t}"),
                ));
            }
            if let Some((_, t0)) = elems.first() {
                if *t0 != t {
                    return Err(Error::typ(
                        a.pos(),
                        format!(
                            "vec: every element must have the type of the first, {t0}, got {t}"
                        ),
                    )
                    .with_label(args[0].pos(), format!("this is {t0}")));
                }
            }
            elems.push((e, t));
        }
        let elem_type = elems[0].1.clone();
        let shape = elem_type.real_shape().expect("checked");
        let mut binds = vec![];
        let refs: Vec<Expr> = elems
            .into_iter()
            .map(|(e, _)| match e {
                Expr::Var(_) | Expr::Const(_) => e,
                _ if shape.is_empty() => e,
                _ => {
                    let t = self.fresh("t");
                    binds.push((t, e));
                    Expr::Var(t)
                }
            })
            .collect();
        let k = self.fresh("k");
        let idx: Vec<Symbol> = shape.iter().map(|_| self.fresh("j")).collect();
        let at = |op: CmpOp, m: usize| Pred::Cmp(op, Affine::var(k), Affine::constant(m as i64));
        let mut body: Option<Expr> = None;
        for (m, r) in refs.into_iter().enumerate() {
            let elem = idx.iter().fold(r, |e, j| build::get(e, Affine::var(*j)));
            let term = build::iverson(at(CmpOp::Eq, m), elem);
            body = Some(match body {
                None => term,
                Some(acc @ Expr::Iverson(..)) => build::add(acc, term),
                Some(acc) => build::add(build::iverson(at(CmpOp::Lt, m), acc), term),
            });
        }
        let mut body = body.expect("at least one element");
        for (j, d) in idx.iter().zip(&shape).rev() {
            body = build::gen(*j, d.clone(), body);
        }
        let n = Affine::constant(args.len() as i64);
        body = build::gen(k, n.clone(), body);
        for (t, e) in binds.into_iter().rev() {
            body = build::let_(t, e, body);
        }
        Ok((body, Type::Tensor(n, Box::new(elem_type))))
    }
}
