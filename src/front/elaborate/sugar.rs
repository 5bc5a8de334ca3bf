//! The sugar of language.md, rewritten to core forms as it is elaborated
//! (the rewriting is fixed: a program's cost is its core form's): `-` and
//! `/`, `+`, `*` and black boxes on tensors (pointwise), and sums of
//! tensors. What a form becomes depends on its operands' types.

use super::Elab;
use crate::error::{Error, Pos, Result};
use crate::front::affine::Affine;
use crate::front::ast::{build, Expr, Func, Type};
use crate::front::reader::Sexp;
use egg::Symbol;
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
        let rb = self.call(Func::Recip, b, pos)?;
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
