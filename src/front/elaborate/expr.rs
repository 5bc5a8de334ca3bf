//! Expression forms: variables, constants, `+`, `*`, the black boxes,
//! `pair`, `fst`, `snd`, `gen`, `sum`, `get`, `iverson` and `let`, each
//! checked and given its type; binders get their unique names here. The
//! sugar forms are recognised here too and rewritten in [`super::sugar`].

use super::{kind_words, Binding, Elab};
use crate::error::{Error, Pos, Result};
use crate::front::ast::{build, CmpOp, Expr, Func, MaxMin, Real, Reduce, Type};
use crate::front::reader::Sexp;
use std::collections::HashSet;

/// Expression form names, for "did you mean" hints.
/// The black boxes' names are added from their table.
const EXPR_FORMS: &[&str] = &[
    "+", "*", "-", "/", "pair", "fst", "snd", "gen", "sum", "get", "iverson", "let", "tuple",
    "proj", "vec", "max", "min", "real", "maximum", "minimum", "argmax", "argmin",
];

impl Elab {
    pub(super) fn expr(
        &mut self,
        sx: &Sexp,
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        let pos = sx.pos();
        let items = match sx {
            Sexp::Num(n, _) => return Ok((Expr::Const(Real(n.value)), Type::Real)),
            Sexp::Sym(s, _) => return self.variable(s, pos),
            Sexp::List(items, _) => items,
        };
        if items.is_empty() {
            return Err(Error::syntax(pos, "empty form ()"));
        }
        let Some(h) = items[0].as_sym() else {
            return Err(Error::syntax(
                items[0].pos(),
                "expected a form name after (",
            ));
        };
        let args = &items[1..];
        let arity = |ns: &[usize]| check_arity(h, args, ns, pos);
        match h {
            "+" | "*" => self.arith_chain(h, args, claimed, pos),
            "-" => {
                arity(&[1, 2])?;
                self.minus(args, claimed, pos)
            }
            "/" => {
                arity(&[2])?;
                self.divide(args, claimed, pos)
            }
            _ if Func::param_of(h).is_some() => {
                arity(&[2])?;
                self.box_with_parameter(h, args, claimed, pos)
            }
            _ if Func::unary(h).is_some() => {
                arity(&[1])?;
                let a = self.expr(&args[0], claimed)?;
                self.call(Func::unary(h).expect("checked"), a, pos)
            }
            "max" | "min" => {
                arity(&[2])?;
                let m = if h == "max" { MaxMin::Max } else { MaxMin::Min };
                let a = self.expr(&args[0], claimed)?;
                let b = self.expr(&args[1], claimed)?;
                let (ta, tb) = (a.1.clone(), b.1.clone());
                self.maxmin(m, a, b, pos).map_err(|e| {
                    e.with_label(args[0].pos(), format!("this is {ta}"))
                        .with_label(args[1].pos(), format!("this is {tb}"))
                })
            }
            "real" => {
                arity(&[1])?;
                let a = self.index(&args[0]).map_err(|e| {
                    e.with_hint("(real a) turns an index expression a (an index variable, a size, an integer, or +, -, (* k a) of them) into a real")
                })?;
                Ok((Expr::IndexReal(a), Type::Real))
            }
            "pair" => {
                arity(&[2])?;
                let (a, ta) = self.expr(&args[0], claimed)?;
                let (b, tb) = self.expr(&args[1], claimed)?;
                Ok((build::pair(a, b), Type::Pair(Box::new(ta), Box::new(tb))))
            }
            "tuple" | "vec" if args.is_empty() => Err(Error::syntax(
                pos,
                format!("{h} expects at least 1 argument, got 0"),
            )),
            "tuple" => self.tuple(args, claimed),
            "vec" => self.vec(args, claimed),
            "proj" => {
                arity(&[2])?;
                self.proj(args, claimed)
            }
            "fst" | "snd" => {
                arity(&[1])?;
                self.projection(h == "fst", &args[0], claimed)
            }
            "gen" | "sum" => {
                arity(&[3])?;
                self.loop_form(h == "gen", args, claimed)
            }
            _ if Reduce::from_name(h).is_some() => {
                arity(&[3])?;
                self.reduce_form(Reduce::from_name(h).expect("checked"), args, claimed)
            }
            "get" => self.get_form(args, claimed, pos),
            "iverson" => {
                arity(&[2])?;
                let p = self.pred(&args[0], claimed)?;
                let (e, t) = self.expr(&args[1], claimed)?;
                Ok((build::iverson(p, e), t))
            }
            "let" => {
                arity(&[3])?;
                self.let_form(args, claimed)
            }
            _ if CmpOp::from_name(h).is_some()
                || ["and", "or", "exists", "true", "false"].contains(&h) =>
            {
                Err(Error::typ(
                    pos,
                    format!("predicate form '{h}' used as an expression (wrap it in iverson)"),
                ))
            }
            "fn" | "tensor" | "relation" | "size" | "R" => Err(Error::syntax(
                pos,
                format!("'{h}' is not an expression form"),
            )),
            _ => self.call_form(h, args, claimed, pos),
        }
    }

    /// A variable in scope.
    fn variable(&self, s: &str, pos: Pos) -> Result<(Expr, Type)> {
        match self.scope.get(s) {
            None => Err(Error::typ(pos, format!("unbound variable '{s}'"))
                .with_hint_opt(self.near(s, |b| matches!(b, Binding::Var(..))))),
            Some(Binding::Var(u, t)) => Ok((Expr::Var(*u), t.clone())),
            Some(b) => Err(Error::typ(
                pos,
                format!(
                    "'{s}' is {} and cannot be used as a real-valued expression",
                    kind_words(b)
                ),
            )),
        }
    }

    /// `(+ a b ...)` or `(* a b ...)`, left to right; a type error labels
    /// the operands with their types.
    fn arith_chain(
        &mut self,
        h: &str,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        if args.len() < 2 {
            return Err(Error::syntax(
                pos,
                format!("{h} expects at least 2 arguments, got {}", args.len()),
            ));
        }
        let mut acc = self.expr(&args[0], claimed)?;
        for (k, a) in args.iter().enumerate().skip(1) {
            let b = self.expr(a, claimed)?;
            let (ta, tb) = (acc.1.clone(), b.1.clone());
            acc = self.arith(h == "+", acc, b, pos).map_err(|e| {
                let e = if k == 1 {
                    e.with_label(args[0].pos(), format!("this is {}", ta))
                } else {
                    e
                };
                e.with_label(a.pos(), format!("this is {}", tb))
            })?;
        }
        Ok(acc)
    }

    /// `(F e k)`: a black box with a constant parameter, checked by its
    /// table entry.
    fn box_with_parameter(
        &mut self,
        h: &str,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        let what = Func::param_of(h).expect("a box with a parameter");
        let Sexp::Num(k, _) = &args[1] else {
            return Err(Error::typ(
                args[1].pos(),
                format!("{h}: the {what} must be a constant number"),
            ));
        };
        let f = Func::with_exponent(h, k.value).expect("a box with a parameter");
        if let Err(must) = (f.spec().check_param)(k.value) {
            return Err(Error::typ(
                args[1].pos(),
                format!("{h}: the {what} must be {must}"),
            ));
        }
        let a = self.expr(&args[0], claimed)?;
        self.call(f, a, pos)
    }

    /// `(fst e)` (`first`) or `(snd e)` of a pair.
    fn projection(
        &mut self,
        first: bool,
        arg: &Sexp,
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        let (e, t) = self.expr(arg, claimed)?;
        match t {
            Type::Pair(a, b) => Ok(if first {
                (build::fst(e), *a)
            } else {
                (build::snd(e), *b)
            }),
            t => Err(Error::typ(
                arg.pos(),
                format!(
                    "{} expects a pair, got {}",
                    if first { "fst" } else { "snd" },
                    t
                ),
            )),
        }
    }

    /// The index binder of a form `(h i D e)` (`gen`, `sum`, the
    /// reductions): `i` made unique, `D`, and `e` elaborated with `i` in
    /// scope, with its type.
    fn index_binder(
        &mut self,
        h: &str,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
    ) -> Result<(
        crate::symbol::Symbol,
        crate::front::affine::Affine,
        Expr,
        Type,
    )> {
        let Some(var) = args[0].as_sym() else {
            return Err(Error::syntax(
                args[0].pos(),
                format!("{h}: expected an index variable name"),
            ));
        };
        let d = self.dim(&args[1], None)?;
        let u = self.binder_name(var, claimed);
        let old = self.bind(var, Binding::Index(u));
        let body = self.expr(&args[2], claimed);
        self.unbind(var, old);
        let (body, bt) = body?;
        Ok((u, d, body, bt))
    }

    /// `(gen i D e)` (`gen`) or `(sum i D e)`; a sum of tensors is
    /// pointwise.
    fn loop_form(
        &mut self,
        gen: bool,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        let h = if gen { "gen" } else { "sum" };
        let (u, d, body, bt) = self.index_binder(h, args, claimed)?;
        if gen {
            return Ok((
                build::gen(u, d.clone(), body),
                Type::Tensor(d, Box::new(bt)),
            ));
        }
        match bt.real_shape() {
            None => Err(Error::typ(
                args[2].pos(),
                format!(
                    "sum: the body must be real or a tensor of reals, got {}",
                    bt
                ),
            )),
            Some(shape) if shape.is_empty() => Ok((build::sum(u, d, body), Type::Real)),
            Some(shape) => Ok(self.sum_tensor(u, d, body, &shape)),
        }
    }

    /// `(maximum i D e)`, `(minimum i D e)`, `(argmax i D e)`,
    /// `(argmin i D e)`: `e` must be real.
    fn reduce_form(
        &mut self,
        r: Reduce,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        let h = r.name();
        let (u, d, body, bt) = self.index_binder(h, args, claimed)?;
        if bt != Type::Real {
            return Err(Error::typ(
                args[2].pos(),
                format!("{h}: the body must be a real, got {bt}"),
            )
            .with_hint(format!(
                "({h} i D e) reduces the real e over i; for a tensor, reduce each element inside a gen"
            )));
        }
        let t = if r.is_arg() {
            Type::Tensor(d.clone(), Box::new(Type::Real))
        } else {
            Type::Real
        };
        Ok((build::reduce(r, u, d, body), t))
    }

    /// `(get e a ...)`: one index per tensor level.
    fn get_form(
        &mut self,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        if args.len() < 2 {
            return Err(Error::syntax(
                pos,
                format!(
                    "get expects at least 2 arguments (get e a ...), got {}",
                    args.len()
                ),
            ));
        }
        let (mut e, mut t) = self.expr(&args[0], claimed)?;
        for a in &args[1..] {
            let Type::Tensor(_, elem) = t else {
                return Err(Error::typ(
                    args[0].pos(),
                    format!("get expects a tensor, got {}", t),
                ));
            };
            e = build::get(e, self.index(a)?);
            t = *elem;
        }
        Ok((e, t))
    }

    /// `(let x e body)`.
    fn let_form(&mut self, args: &[Sexp], claimed: &mut HashSet<String>) -> Result<(Expr, Type)> {
        let Some(var) = args[0].as_sym() else {
            return Err(Error::syntax(
                args[0].pos(),
                "let: expected a variable name",
            ));
        };
        let (e0, t0) = self.expr(&args[1], claimed)?;
        let u = self.binder_name(var, claimed);
        let old = self.bind(var, Binding::Var(u, t0));
        let body = self.expr(&args[2], claimed);
        self.unbind(var, old);
        let (e1, t1) = body?;
        Ok((build::let_(u, e0, e1), t1))
    }

    /// Any other head: a derivative form, a call of a function defined
    /// before, or an unknown form (with the nearest name as a hint).
    fn call_form(
        &mut self,
        h: &str,
        args: &[Sexp],
        claimed: &mut HashSet<String>,
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        if let Some(kind) = super::DerivativeKind::from_name(h) {
            return self.derivative_form(kind, args, pos, claimed);
        }
        if let Some(index) = self.names.iter().position(|f| f.name == h) {
            return self.call_function(index, args, pos, claimed);
        }
        let mut functions: Vec<&str> = self.names[..self.visible]
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        for name in Func::names() {
            functions.push(name);
        }
        Err(
            Error::syntax(pos, format!("unknown form '{h}'")).with_hint_opt(
                crate::diagnostics::did_you_mean(h, EXPR_FORMS.iter().copied().chain(functions)),
            ),
        )
    }
}

/// `h` takes one of `ns` arguments.
fn check_arity(h: &str, args: &[Sexp], ns: &[usize], pos: Pos) -> Result<()> {
    if ns.contains(&args.len()) {
        return Ok(());
    }
    let want = ns
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(" or ");
    let plural = if ns == [1] { "" } else { "s" };
    Err(Error::syntax(
        pos,
        format!("{h} expects {want} argument{plural}, got {}", args.len()),
    ))
}
