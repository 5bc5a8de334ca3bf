//! Types of core expressions, for passes that need them after elaboration
//! (the derivative passes: zeros of a type, tangent parameters, the
//! struct-of-arrays components of a variable).

use super::ast::{Expr, ParamKind, Program, Type};
use crate::error::{Error, Result};
use crate::symbol::Symbol;
use std::collections::HashMap;

/// Types of the variables in scope.
pub type TypeEnv = HashMap<Symbol, Type>;

/// The environment of a program's real-valued parameters.
pub fn param_env(prog: &Program) -> TypeEnv {
    prog.params
        .iter()
        .filter_map(|p| match &p.kind {
            ParamKind::Real(t) => Some((p.name, t.clone())),
            _ => None,
        })
        .collect()
}

/// The environment of a program's real-valued parameters and of the flat
/// bindings `binds` (let-free definitions in order, as
/// [`crate::terms::normalize::lift`] gives them).
pub fn binding_env(prog: &Program, binds: &[(Symbol, Expr)]) -> Result<TypeEnv> {
    let mut types = param_env(prog);
    for (x, e) in binds {
        let t = type_of(e, &mut types)?;
        types.insert(*x, t);
    }
    Ok(types)
}

fn bad(msg: String) -> Error {
    Error::transform(format!("ill-typed core expression: {msg}"))
}

/// The type of a core expression; an error if it is ill-typed (the
/// optimizer's guard relies on this to reject a candidate: every operand
/// of `+`, `*`, a black box and a `sum` body must be real). `env` is left
/// as it was (binders are scoped), so callers need not copy it.
pub fn type_of(e: &Expr, env: &mut TypeEnv) -> Result<Type> {
    Ok(match e {
        Expr::Var(x) => env
            .get(x)
            .cloned()
            .ok_or_else(|| bad(format!("unbound variable {x}")))?,
        Expr::Const(_) | Expr::IndexReal(_) => Type::Real,
        Expr::Add(..) | Expr::Mul(..) | Expr::MaxMin(..) | Expr::Call(..) | Expr::Sum(..) => {
            for c in e.children() {
                match type_of(c, env)? {
                    Type::Real => {}
                    t => return Err(bad(format!("arithmetic on {t}"))),
                }
            }
            Type::Real
        }
        Expr::Pair(a, b) => Type::Pair(Box::new(type_of(a, env)?), Box::new(type_of(b, env)?)),
        Expr::Fst(a) | Expr::Snd(a) => match type_of(a, env)? {
            Type::Pair(x, y) => *if matches!(e, Expr::Fst(_)) { x } else { y },
            t => return Err(bad(format!("projection of {t}"))),
        },
        Expr::Gen(_, d, b) => Type::Tensor(d.clone(), Box::new(type_of(b, env)?)),
        Expr::Reduce(r, _, d, b) => match type_of(b, env)? {
            Type::Real if r.is_arg() => Type::Tensor(d.clone(), Box::new(Type::Real)),
            Type::Real => Type::Real,
            t => return Err(bad(format!("{} of {t}", r.name()))),
        },
        Expr::Get(a, _) => match type_of(a, env)? {
            Type::Tensor(_, t) => *t,
            t => return Err(bad(format!("access of {t}"))),
        },
        Expr::Iverson(_, a) => type_of(a, env)?,
        Expr::Let(x, a, b) => {
            let ta = type_of(a, env)?;
            let old = env.insert(*x, ta);
            let tb = type_of(b, env);
            match old {
                Some(t) => env.insert(*x, t),
                None => env.remove(x),
            };
            tb?
        }
    })
}

/// The zero of a type, as a core expression of cost 0.
pub fn zero_of(t: &Type, fresh: &mut dyn FnMut() -> Symbol) -> Expr {
    use super::ast::build::*;
    match t {
        Type::Real => num(0.0),
        Type::Pair(a, b) => pair(zero_of(a, fresh), zero_of(b, fresh)),
        Type::Tensor(d, elem) => {
            let i = fresh();
            gen(i, d.clone(), zero_of(elem, fresh))
        }
    }
}
