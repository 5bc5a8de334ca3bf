//! Elaboration: S-expressions to a typed core [`Program`] in one pass.
//!
//! Type checking, desugaring and renaming happen together, as ATL.md
//! requires: the pointwise sugar depends on the operand types, and the
//! desugared form is exactly the one ATL.md states (its cost is part of the
//! contract). The pass also gives every binder (`let`, `gen`, `sum`,
//! `exists`) a name that occurs nowhere else in the program, neither as
//! another binder nor as a parameter or size; substitution in later passes
//! can then never capture. Fresh names for the sugar (`t`, `j`, `k` followed
//! by a number) and for renamed binders avoid every symbol of the source.
//!
//! Every error names the construct and its line:column.

use super::affine::{Affine, Overflow};
use super::ast::{build, CmpOp, Expr, Func, Param, ParamKind, Pred, Program, Real, Type};
use super::reader::Sexp;
use crate::error::{Error, Pos, Result};
use egg::Symbol;
use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug)]
enum Binding {
    /// A real-valued variable: its unique name and type.
    Var(Symbol, Type),
    /// An index variable (gen/sum/exists): its unique name.
    Index(Symbol),
    Size,
    /// A relation of the given arity.
    Rel(usize),
}

fn kind_words(b: &Binding) -> &'static str {
    match b {
        Binding::Var(..) => "a real-valued variable",
        Binding::Index(_) => "an index variable",
        Binding::Size => "a size",
        Binding::Rel(_) => "a relation",
    }
}

pub fn type_str(t: &Type) -> String {
    crate::backend::sexp::type_to_string(t)
}

struct Elab {
    scope: HashMap<String, Binding>,
    counter: u64,
}

fn overflow(pos: Pos) -> impl Fn(Overflow) -> Error {
    move |_| Error::typ(pos, "integer overflow in index arithmetic")
}

/// Expression form names, for "did you mean" hints.
const EXPR_FORMS: &[&str] = &[
    "+", "*", "-", "/", "pair", "fst", "snd", "gen", "sum", "get", "iverson", "let", "exp", "log",
    "sin", "cos", "tanh", "sqrt", "recip", "sigmoid", "relu", "step", "pow", "dtanh", "dsigmoid",
    "dsqrt", "drecip", "dcos", "dpow",
];

/// Predicate form names, for "did you mean" hints.
const PRED_FORMS: &[&str] = &[
    "<", "<=", "==", ">", ">=", "and", "or", "exists", "true", "false",
];

impl Elab {
    /// "did you mean" the closest name in scope of the kind `want`.
    fn near(&self, name: &str, want: impl Fn(&Binding) -> bool) -> Option<String> {
        let names = self
            .scope
            .iter()
            .filter(|(_, b)| want(b))
            .map(|(n, _)| n.as_str());
        crate::diagnostics::did_you_mean(name, names)
    }

    /// A made name (`base#N`, see [`super::names`]): never one the source
    /// can spell.
    fn fresh(&mut self, base: &str) -> Symbol {
        self.counter += 1;
        super::names::make(base, self.counter)
    }

    /// The unique name a source binder gets: itself the first time, a fresh
    /// variant afterwards.
    fn binder_name(&mut self, name: &str, claimed: &mut HashSet<String>) -> Symbol {
        if claimed.insert(name.to_string()) {
            Symbol::from(name)
        } else {
            self.fresh(name)
        }
    }

    fn bind(&mut self, name: &str, b: Binding) -> Option<Binding> {
        self.scope.insert(name.to_string(), b)
    }

    fn unbind(&mut self, name: &str, old: Option<Binding>) {
        match old {
            Some(b) => {
                self.scope.insert(name.to_string(), b);
            }
            None => {
                self.scope.remove(name);
            }
        }
    }

    // -- dimensions ---------------------------------------------------------

    fn dim(&mut self, sx: &Sexp, declare: Option<&mut Vec<Symbol>>) -> Result<Affine> {
        let pos = sx.pos();
        match sx {
            Sexp::Num(n, _) => match n.int {
                Some(k) if k >= 0 => Ok(Affine::constant(k)),
                _ => Err(Error::typ(
                    pos,
                    format!(
                        "a dimension must be a natural number or a size expression, not {}",
                        n.text
                    ),
                )),
            },
            Sexp::Sym(s, _) => match self.scope.get(s.as_str()) {
                Some(Binding::Size) => Ok(Affine::var(Symbol::from(s.as_str()))),
                Some(b) => Err(Error::typ(
                    pos,
                    format!(
                        "'{s}' is {}, not a size, and cannot be used as a dimension",
                        kind_words(b)
                    ),
                )),
                None => match declare {
                    Some(decl) => {
                        if ["R", "size", "relation", "tensor", "pair"].contains(&s.as_str()) {
                            return Err(Error::typ(pos, format!("'{s}' is not a valid size name")));
                        }
                        self.bind(s, Binding::Size);
                        decl.push(Symbol::from(s.as_str()));
                        Ok(Affine::var(Symbol::from(s.as_str())))
                    }
                    None => Err(Error::typ(pos, format!("unknown size '{s}'"))
                        .with_hint_opt(self.near(s, |b| matches!(b, Binding::Size)))),
                },
            },
            Sexp::List(items, _) => {
                let h = sx.head();
                let args = &items[1.min(items.len())..];
                let mut declare = declare;
                match (h, args.len()) {
                    (Some("+"), n) if n >= 1 => {
                        let mut acc = Affine::constant(0);
                        for a in args {
                            let d = self.dim(a, declare.as_deref_mut())?;
                            acc = acc.add(&d).map_err(overflow(pos))?;
                        }
                        Ok(acc)
                    }
                    (Some("-"), 2) => {
                        let a = self.dim(&args[0], declare.as_deref_mut())?;
                        let b = self.dim(&args[1], declare)?;
                        a.sub(&b).map_err(overflow(pos))
                    }
                    (Some("*"), 2) => {
                        let Sexp::Num(k, _) = &args[0] else {
                            return Err(Error::typ(
                                pos,
                                "in a dimension (* k D), k must be an integer literal",
                            ));
                        };
                        let Some(k) = k.int else {
                            return Err(Error::typ(
                                pos,
                                "in a dimension (* k D), k must be an integer literal",
                            ));
                        };
                        let d = self.dim(&args[1], declare)?;
                        d.scale(k).map_err(overflow(pos))
                    }
                    _ => Err(Error::typ(
                        pos,
                        "malformed dimension (expected a size name, a natural number, (+ D ...), (- D D) or (* k D))",
                    )),
                }
            }
        }
    }

    // -- types ----------------------------------------------------------------

    fn typ(&mut self, sx: &Sexp, declare: &mut Vec<Symbol>) -> Result<Type> {
        let pos = sx.pos();
        let malformed = || {
            Error::typ(
                pos,
                "malformed type (expected R, (pair T T) or (tensor D ... T))",
            )
        };
        match sx {
            Sexp::Sym(s, _) if s == "R" => Ok(Type::Real),
            Sexp::Sym(s, _) => Err(Error::typ(
                pos,
                format!("unknown type '{s}' (expected R, (pair T T) or (tensor D ... T))"),
            )),
            Sexp::Num(..) => Err(malformed()),
            Sexp::List(items, _) => {
                let args = &items[1.min(items.len())..];
                match sx.head() {
                    Some("pair") => {
                        if args.len() != 2 {
                            return Err(Error::typ(
                                pos,
                                format!("(pair T T) takes 2 types, got {}", args.len()),
                            ));
                        }
                        let a = self.typ(&args[0], declare)?;
                        let b = self.typ(&args[1], declare)?;
                        Ok(Type::Pair(Box::new(a), Box::new(b)))
                    }
                    Some("tensor") => {
                        if args.len() < 2 {
                            return Err(Error::typ(
                                pos,
                                "(tensor D ... T) needs at least one dimension and an element type",
                            ));
                        }
                        let elem = self.typ(&args[args.len() - 1], declare)?;
                        let mut dims = vec![];
                        for d in &args[..args.len() - 1] {
                            dims.push(self.dim(d, Some(declare))?);
                        }
                        Ok(Type::tensor(&dims, elem))
                    }
                    _ => Err(malformed()),
                }
            }
        }
    }

    // -- index expressions ----------------------------------------------------

    fn index(&mut self, sx: &Sexp) -> Result<Affine> {
        let pos = sx.pos();
        match sx {
            Sexp::Num(n, _) => match n.int {
                Some(k) => Ok(Affine::constant(k)),
                None if n.is_int_text => Err(Error::typ(
                    pos,
                    format!("index literal {} is too large", n.text),
                )),
                None => Err(Error::typ(
                    pos,
                    format!(
                        "an index must be an integer expression; {} is not an integer",
                        n.text
                    ),
                )),
            },
            Sexp::Sym(s, _) => match self.scope.get(s.as_str()) {
                Some(Binding::Index(u)) => Ok(Affine::var(*u)),
                Some(Binding::Size) => Ok(Affine::var(Symbol::from(s.as_str()))),
                Some(b) => Err(Error::typ(
                    pos,
                    format!("'{s}' is {} and cannot be used as an index", kind_words(b)),
                )),
                None => Err(Error::typ(pos, format!("unbound index variable '{s}'"))
                    .with_hint_opt(
                        self.near(s, |b| matches!(b, Binding::Index(_) | Binding::Size)),
                    )),
            },
            Sexp::List(items, _) => {
                let args = &items[1.min(items.len())..];
                match (sx.head(), args.len()) {
                    (Some("+"), n) if n >= 2 => {
                        let mut acc = Affine::constant(0);
                        for a in args {
                            let d = self.index(a)?;
                            acc = acc.add(&d).map_err(overflow(pos))?;
                        }
                        Ok(acc)
                    }
                    (Some("-"), 2) => {
                        let a = self.index(&args[0])?;
                        let b = self.index(&args[1])?;
                        a.sub(&b).map_err(overflow(pos))
                    }
                    (Some("*"), 2) => {
                        let k = match &args[0] {
                            Sexp::Num(k, _) => k.int,
                            _ => None,
                        };
                        let Some(k) = k else {
                            return Err(Error::typ(
                                pos,
                                "in an index (* k a), k must be an integer literal",
                            ));
                        };
                        let a = self.index(&args[1])?;
                        a.scale(k).map_err(overflow(pos))
                    }
                    _ => Err(Error::typ(
                        pos,
                        "malformed index expression (expected i, n, an integer, (+ a a ...), (- a a) or (* k a))",
                    )),
                }
            }
        }
    }

    // -- predicates -------------------------------------------------------------

    fn pred(&mut self, sx: &Sexp, claimed: &mut HashSet<String>) -> Result<Pred> {
        let pos = sx.pos();
        let items = match sx {
            Sexp::Sym(s, _) if s == "true" => return Ok(Pred::True),
            Sexp::Sym(s, _) if s == "false" => return Ok(Pred::False),
            Sexp::Sym(s, _) => {
                return Err(Error::typ(pos, format!("expected a predicate, got '{s}'")))
            }
            Sexp::Num(..) => return Err(Error::typ(pos, "expected a predicate")),
            Sexp::List(items, _) if items.is_empty() => {
                return Err(Error::typ(pos, "expected a predicate"))
            }
            Sexp::List(items, _) => items,
        };
        let Some(h) = sx.head() else {
            return Err(Error::typ(pos, "expected a predicate form name"));
        };
        let args = &items[1..];
        if let Some(op) = CmpOp::from_name(h) {
            if args.len() != 2 {
                return Err(Error::typ(
                    pos,
                    format!("({h} a a) takes 2 index expressions, got {}", args.len()),
                ));
            }
            return Ok(Pred::Cmp(op, self.index(&args[0])?, self.index(&args[1])?));
        }
        match h {
            "and" | "or" => {
                if args.is_empty() {
                    return Err(Error::typ(
                        pos,
                        format!("({h} p ...) needs at least one predicate"),
                    ));
                }
                let ps = args
                    .iter()
                    .map(|a| self.pred(a, claimed))
                    .collect::<Result<Vec<_>>>()?;
                return Ok(if h == "and" {
                    Pred::And(ps)
                } else {
                    Pred::Or(ps)
                });
            }
            "exists" => {
                if args.len() != 3 {
                    return Err(Error::typ(
                        pos,
                        format!("(exists i D p) takes 3 arguments, got {}", args.len()),
                    ));
                }
                let Some(var) = args[0].as_sym() else {
                    return Err(Error::typ(
                        args[0].pos(),
                        "exists: expected an index variable name",
                    ));
                };
                let d = self.dim(&args[1], None)?;
                let u = self.binder_name(var, claimed);
                let old = self.bind(var, Binding::Index(u));
                let p = self.pred(&args[2], claimed);
                self.unbind(var, old);
                return Ok(Pred::Exists(u, d, Box::new(p?)));
            }
            _ => {}
        }
        match self.scope.get(h).cloned() {
            Some(Binding::Rel(arity)) => {
                if args.len() != arity {
                    return Err(Error::typ(
                        pos,
                        format!(
                            "relation '{h}' has {arity} dimensions but is applied to {} indices",
                            args.len()
                        ),
                    ));
                }
                let idx = args
                    .iter()
                    .map(|a| self.index(a))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Pred::Rel(Symbol::from(h), idx))
            }
            Some(b) => Err(Error::typ(
                pos,
                format!("'{h}' is {}, not a relation", kind_words(&b)),
            )),
            None => Err(
                Error::typ(pos, format!("unknown predicate form '{h}'")).with_hint_opt(
                    crate::diagnostics::did_you_mean(h, PRED_FORMS.iter().copied())
                        .or_else(|| self.near(h, |b| matches!(b, Binding::Rel(_)))),
                ),
            ),
        }
    }

    // -- expressions --------------------------------------------------------------

    fn expr(&mut self, sx: &Sexp, claimed: &mut HashSet<String>) -> Result<(Expr, Type)> {
        let pos = sx.pos();
        let items = match sx {
            Sexp::Num(n, _) => return Ok((Expr::Const(Real(n.value)), Type::Real)),
            Sexp::Sym(s, _) => {
                return match self.scope.get(s.as_str()) {
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
        let arity = |ns: &[usize]| -> Result<()> {
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
        };
        match h {
            "+" | "*" => {
                if args.len() < 2 {
                    return Err(Error::syntax(
                        pos,
                        format!("{h} expects at least 2 arguments, got {}", args.len()),
                    ));
                }
                let mut acc = self.expr(&args[0], claimed)?;
                for (k, a) in args.iter().enumerate().skip(1) {
                    let b = self.expr(a, claimed)?;
                    // on a type error, label the operands with their types
                    let (ta, tb) = (acc.1.clone(), b.1.clone());
                    acc = self.arith(h == "+", acc, b, pos).map_err(|e| {
                        let e = if k == 1 {
                            e.with_label(args[0].pos(), format!("this is {}", type_str(&ta)))
                        } else {
                            e
                        };
                        e.with_label(a.pos(), format!("this is {}", type_str(&tb)))
                    })?;
                }
                Ok(acc)
            }
            "-" => {
                arity(&[1, 2])?;
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
            "/" => {
                arity(&[2])?;
                let a = self.expr(&args[0], claimed)?;
                let b = self.expr(&args[1], claimed)?;
                let rb = self.call(Func::Recip, b, pos)?;
                self.arith(false, a, rb, pos)
            }
            "pow" | "dpow" => {
                arity(&[2])?;
                let Sexp::Num(k, _) = &args[1] else {
                    return Err(Error::typ(
                        args[1].pos(),
                        format!("{h}: the exponent must be a constant number"),
                    ));
                };
                let f = Func::with_exponent(h, k.value).expect("pow or dpow");
                let a = self.expr(&args[0], claimed)?;
                self.call(f, a, pos)
            }
            _ if Func::unary(h).is_some() => {
                arity(&[1])?;
                let a = self.expr(&args[0], claimed)?;
                self.call(Func::unary(h).expect("checked"), a, pos)
            }
            "pair" => {
                arity(&[2])?;
                let (a, ta) = self.expr(&args[0], claimed)?;
                let (b, tb) = self.expr(&args[1], claimed)?;
                Ok((build::pair(a, b), Type::Pair(Box::new(ta), Box::new(tb))))
            }
            "fst" | "snd" => {
                arity(&[1])?;
                let (e, t) = self.expr(&args[0], claimed)?;
                match t {
                    Type::Pair(a, b) => Ok(if h == "fst" {
                        (build::fst(e), *a)
                    } else {
                        (build::snd(e), *b)
                    }),
                    t => Err(Error::typ(
                        args[0].pos(),
                        format!("{h} expects a pair, got {}", type_str(&t)),
                    )),
                }
            }
            "gen" | "sum" => {
                arity(&[3])?;
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
                if h == "gen" {
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
                            type_str(&bt)
                        ),
                    )),
                    Some(shape) if shape.is_empty() => Ok((build::sum(u, d, body), Type::Real)),
                    Some(shape) => Ok(self.sum_tensor(u, d, body, bt.clone(), &shape)),
                }
            }
            "get" => {
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
                            format!("get expects a tensor, got {}", type_str(&t)),
                        ));
                    };
                    e = build::get(e, self.index(a)?);
                    t = *elem;
                }
                Ok((e, t))
            }
            "iverson" => {
                arity(&[2])?;
                let p = self.pred(&args[0], claimed)?;
                let (e, t) = self.expr(&args[1], claimed)?;
                Ok((build::iverson(p, e), t))
            }
            "let" => {
                arity(&[3])?;
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
            _ => Err(
                Error::syntax(pos, format!("unknown form '{h}'")).with_hint_opt(
                    crate::diagnostics::did_you_mean(h, EXPR_FORMS.iter().copied()),
                ),
            ),
        }
    }

    fn call(&mut self, f: Func, (a, ta): (Expr, Type), pos: Pos) -> Result<(Expr, Type)> {
        match ta.real_shape() {
            None => Err(Error::typ(
                pos,
                format!(
                    "{} expects a real or a tensor of reals, got {}",
                    f.name(),
                    type_str(&ta)
                ),
            )),
            Some(shape) if shape.is_empty() => Ok((build::call(f, a), Type::Real)),
            Some(shape) => {
                Ok(self.pointwise(&shape, vec![(a, ta)], |mut xs| build::call(f, xs.remove(0))))
            }
        }
    }

    fn arith(
        &mut self,
        is_add: bool,
        (a, ta): (Expr, Type),
        (b, tb): (Expr, Type),
        pos: Pos,
    ) -> Result<(Expr, Type)> {
        let (sa, sb) = (ta.real_shape(), tb.real_shape());
        let verb = if is_add { "add" } else { "multiply" };
        let (Some(sa), Some(sb)) = (sa, sb) else {
            return Err(Error::typ(
                pos,
                format!("cannot {verb} {} and {}", type_str(&ta), type_str(&tb)),
            ));
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
                    type_str(&ta),
                    type_str(&tb)
                ),
            ));
        }
        if sa.is_empty() || sb.is_empty() || sa == sb {
            let shape = if sa.is_empty() { sb } else { sa };
            return Ok(self.pointwise(&shape, vec![(a, ta), (b, tb)], op));
        }
        Err(Error::typ(
            pos,
            format!(
                "cannot multiply {} and {} (shapes differ)",
                type_str(&ta),
                type_str(&tb)
            ),
        ))
    }

    /// ATL.md's pointwise sugar: operands that are not variables or
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

    /// ATL.md's sum of a tensor-valued body:
    /// `(let t (gen i D e) (gen j1 D1 ... (sum k D (get t k j1 ...))))`.
    fn sum_tensor(
        &mut self,
        var: Symbol,
        d: Affine,
        body: Expr,
        body_ty: Type,
        shape: &[Affine],
    ) -> (Expr, Type) {
        let t = self.fresh("t");
        let k = self.fresh("k");
        let idx: Vec<Symbol> = shape.iter().map(|_| self.fresh("j")).collect();
        let g = build::gen(var, d.clone(), body);
        let _ = body_ty;
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

/// Elaborate the top-level forms of a file into a core program.
pub fn elaborate(data: &[Sexp]) -> Result<Program> {
    let Some(top) = data.first() else {
        return Err(Error::syntax(
            Pos { line: 1, col: 1 },
            "empty program: expected (fn NAME (PARAM ...) BODY)",
        ));
    };
    if data.len() > 1 {
        return Err(Error::syntax(
            data[1].pos(),
            "a file holds exactly one (fn ...) form; unexpected extra form",
        ));
    }
    let Sexp::List(items, _) = top else {
        return Err(Error::syntax(
            top.pos(),
            "expected (fn NAME (PARAM ...) BODY)",
        ));
    };
    if top.head() != Some("fn") {
        return Err(Error::syntax(
            top.pos(),
            "expected (fn NAME (PARAM ...) BODY)",
        ));
    }
    if items.len() != 4 {
        return Err(Error::syntax(
            top.pos(),
            format!(
                "fn expects 3 parts (fn NAME (PARAM ...) BODY), got {}",
                items.len() - 1
            ),
        ));
    }
    let Some(name) = items[1].as_sym() else {
        return Err(Error::syntax(items[1].pos(), "expected a function name"));
    };
    let Sexp::List(param_sx, _) = &items[2] else {
        return Err(Error::syntax(
            items[2].pos(),
            "expected a parameter list (PARAM ...)",
        ));
    };
    let mut el = Elab {
        scope: HashMap::new(),
        counter: 0,
    };
    // First pass: names and kinds, so types may mention sizes declared later.
    let mut raw = vec![];
    let mut seen = HashSet::new();
    for p in param_sx {
        let (pname, spec) = match p {
            Sexp::List(v, _) if v.len() == 2 && v[0].as_sym().is_some() => {
                (v[0].as_sym().expect("checked"), &v[1])
            }
            _ => {
                return Err(Error::syntax(
                    p.pos(),
                    "a parameter is (x TYPE), (n size) or (R (relation D ...))",
                ))
            }
        };
        if !seen.insert(pname.to_string()) {
            let Sexp::List(v, _) = p else { unreachable!() };
            return Err(Error::typ(
                v[0].pos(),
                format!("duplicate parameter '{pname}'"),
            ));
        }
        let binding = if spec.as_sym() == Some("size") {
            Binding::Size
        } else if spec.head() == Some("relation") {
            let Sexp::List(v, _) = spec else {
                unreachable!()
            };
            Binding::Rel(v.len() - 1)
        } else {
            Binding::Var(Symbol::from(pname), Type::Real)
        };
        el.bind(pname, binding.clone());
        raw.push((pname, binding, spec));
    }
    let mut declared: Vec<Symbol> = vec![];
    let mut params = vec![];
    for (pname, binding, spec) in raw {
        let name = Symbol::from(pname);
        let kind = match binding {
            Binding::Size => ParamKind::Size,
            Binding::Rel(_) => {
                let Sexp::List(v, _) = spec else {
                    unreachable!()
                };
                let dims = v[1..]
                    .iter()
                    .map(|d| el.dim(d, Some(&mut declared)))
                    .collect::<Result<Vec<_>>>()?;
                ParamKind::Relation(dims)
            }
            _ => {
                let t = el.typ(spec, &mut declared)?;
                el.bind(pname, Binding::Var(name, t.clone()));
                ParamKind::Real(t)
            }
        };
        params.push(Param { name, kind });
    }
    let mut sizes: Vec<Symbol> = params
        .iter()
        .filter(|p| p.kind == ParamKind::Size)
        .map(|p| p.name)
        .collect();
    for d in declared {
        if !sizes.contains(&d) {
            sizes.push(d);
        }
    }
    // Binder names must differ from every parameter and size.
    let mut claimed: HashSet<String> = params.iter().map(|p| p.name.to_string()).collect();
    claimed.extend(sizes.iter().map(|s| s.to_string()));
    let (body, ret) = el.expr(&items[3], &mut claimed)?;
    Ok(Program {
        name: Symbol::from(name),
        params,
        sizes,
        body,
        ret,
    })
}
