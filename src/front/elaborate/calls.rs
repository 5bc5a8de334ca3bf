//! Functions and calls: a file is a sequence of `(fn NAME (PARAM ...) BODY)`
//! forms; a body may call a function defined before it, `(NAME ARG ...)`,
//! one argument per parameter in order. A call is expanded as it is
//! elaborated: the callee's body is elaborated again in a scope of its own
//! (so it sees only its parameters, never the caller's names), with
//!
//! * each real-valued parameter bound to its argument: a variable argument
//!   is used as it is, any other is bound once by a `let` around the body;
//! * each size parameter bound to its argument, a size expression of the
//!   caller (a dimension: sizes, natural numbers, `+`, `-`, `(* k D)`);
//! * each size that a parameter's type declares (an implicit size) bound by
//!   matching the parameter's type against the argument's type;
//! * each relation parameter bound to a relation of the caller.
//!
//! Binders of the expanded body get unique names from the caller's supply,
//! so the expansion cannot capture. Expansion happens before anything else:
//! the program every later pass sees is one function with no calls.

use super::{kind_words, Binding, Elab};
use crate::error::{Error, Pos, Result};
use crate::front::affine::Affine;
use crate::front::ast::{build, Expr, ParamKind, Program, Type};
use crate::front::reader::Sexp;
use crate::symbol::Symbol;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

/// Most calls expanded while elaborating one function: nested calls expand
/// multiplicatively, and a program past this is an error, not a hang.
pub(super) const MAX_EXPANSIONS: usize = 100_000;

/// A function's name and where its `(fn ...)` form starts.
#[derive(Clone, Debug)]
pub(super) struct FnName {
    pub name: String,
    pub pos: Pos,
}

/// A checked function: its body's text (elaborated again at each call),
/// its core program (calls expanded) and the functions its body calls.
pub(super) struct FnDef {
    pub body: Sexp,
    pub program: Program,
    pub calls: BTreeSet<usize>,
}

/// Names a function may not take: the forms of expressions, predicates and
/// types.
const RESERVED: &[&str] = &[
    "+", "-", "*", "/", "pair", "fst", "snd", "gen", "sum", "get", "iverson", "let", "tuple",
    "proj", "vec", "fn", "tensor", "relation", "size", "R", "<", "<=", "==", ">", ">=", "and",
    "or", "exists", "true", "false", "grad", "jvp", "vjp", "hvp", "wrt", "max", "min", "real",
    "maximum", "minimum", "argmax", "argmin",
];

fn shape_error(pos: Pos) -> Error {
    Error::syntax(pos, "expected (fn NAME (PARAM ...) BODY)")
}

/// The names of a file's functions, checking each top-level form's shape.
pub(super) fn function_names(data: &[Sexp]) -> Result<Vec<FnName>> {
    if data.is_empty() {
        return Err(Error::syntax(
            Pos { line: 1, col: 1 },
            "empty program: expected (fn NAME (PARAM ...) BODY)",
        ));
    }
    let mut names: Vec<FnName> = vec![];
    for top in data {
        let Sexp::List(items, _) = top else {
            return Err(shape_error(top.pos()));
        };
        if top.head() != Some("fn") {
            return Err(shape_error(top.pos()));
        }
        let declared = items.len() == 6 && items[3].as_sym() == Some("->");
        if items.len() != 4 && !declared {
            return Err(Error::syntax(
                top.pos(),
                format!(
                    "fn expects 3 parts (fn NAME (PARAM ...) BODY), or 5 with a result type \
                     (fn NAME (PARAM ...) -> TYPE BODY), got {}",
                    items.len() - 1
                ),
            ));
        }
        let Some(name) = items[1].as_sym() else {
            return Err(Error::syntax(items[1].pos(), "expected a function name"));
        };
        if RESERVED.contains(&name) || crate::front::ast::Func::is_name(name) {
            return Err(Error::syntax(
                items[1].pos(),
                format!("'{name}' is a built-in form and cannot name a function"),
            ));
        }
        if let Some(first) = names.iter().find(|f| f.name == name) {
            return Err(Error::syntax(
                items[1].pos(),
                format!("function '{name}' is already defined at {}", first.pos),
            )
            .with_label(first.pos, "first defined here"));
        }
        names.push(FnName {
            name: name.to_string(),
            pos: top.pos(),
        });
    }
    Ok(names)
}

/// Every function but the last must be called by a later one: a file is
/// helpers followed by the function they serve, and a helper nothing calls
/// is a mistake (or a second program, which belongs in a file of its own).
pub(super) fn check_all_called(names: &[FnName], fns: &[std::rc::Rc<FnDef>]) -> Result<()> {
    let last = names.len() - 1;
    for (k, f) in names.iter().enumerate().take(last) {
        if !fns[k + 1..].iter().any(|g| g.calls.contains(&k)) {
            return Err(Error::syntax(
                names[k + 1].pos,
                format!(
                    "function '{}' (defined at {}) is never called: every function but the last \
                     must be called by a function after it",
                    f.name, f.pos
                ),
            )
            .with_label(f.pos, "defined here")
            .with_hint(format!(
                "call '{}' from a later function, or put it in a file of its own",
                f.name
            )));
        }
    }
    Ok(())
}

/// The index of the function named `want` (for `--fn`).
pub(super) fn find_function(names: &[FnName], want: &str) -> Result<usize> {
    if let Some(k) = names.iter().position(|f| f.name == want) {
        return Ok(k);
    }
    let all: Vec<&str> = names.iter().map(|f| f.name.as_str()).collect();
    Err(Error::typ(
        names[names.len() - 1].pos,
        format!("--fn {want}: the file defines no function named '{want}'"),
    )
    .with_hint(
        match crate::diagnostics::did_you_mean(want, all.iter().copied()) {
            Some(near) => near,
            None => format!("the functions of this file: {}", all.join(", ")),
        },
    ))
}

/// Size bindings of a callee: from its size parameters and from matching
/// its parameters' types against its arguments' types.
type SizeMap = HashMap<Symbol, Affine>;

fn subst_sizes(a: &Affine, sizes: &SizeMap, pos: Pos) -> Result<Affine> {
    let mut out = a.clone();
    for n in a.names().collect::<Vec<_>>() {
        if let Some(by) = sizes.get(&n) {
            out = out
                .substitute(n, by)
                .map_err(|_| Error::typ(pos, "integer overflow in index arithmetic"))?;
        }
    }
    Ok(out)
}

fn subst_type(t: &Type, sizes: &SizeMap, pos: Pos) -> Result<Type> {
    Ok(match t {
        Type::Real => Type::Real,
        Type::Pair(a, b) => Type::Pair(
            Box::new(subst_type(a, sizes, pos)?),
            Box::new(subst_type(b, sizes, pos)?),
        ),
        Type::Tensor(d, e) => Type::Tensor(
            subst_sizes(d, sizes, pos)?,
            Box::new(subst_type(e, sizes, pos)?),
        ),
    })
}

/// The dimension equations `callee dim = caller dim` of one argument, or
/// `None` when the types differ in form (a real for a tensor, ...).
fn match_types(want: &Type, got: &Type, eqs: &mut Vec<(Affine, Affine)>) -> Option<()> {
    match (want, got) {
        (Type::Real, Type::Real) => Some(()),
        (Type::Pair(a, b), Type::Pair(c, d)) => {
            match_types(a, c, eqs)?;
            match_types(b, d, eqs)
        }
        (Type::Tensor(d, a), Type::Tensor(e, b)) => {
            eqs.push((d.clone(), e.clone()));
            match_types(a, b, eqs)
        }
        _ => None,
    }
}

/// Bind the callee's implicit sizes from the equations: an equation whose
/// callee side has one unbound size, with coefficient 1, binds it; repeat
/// until nothing changes.
fn solve_sizes(eqs: &[(Affine, Affine)], sizes: &mut SizeMap, pos: Pos) -> Result<()> {
    loop {
        let mut progress = false;
        for (want, got) in eqs {
            let want = subst_sizes(want, sizes, pos)?;
            let unbound: Vec<Symbol> = want.names().filter(|n| !sizes.contains_key(n)).collect();
            if let [n] = unbound[..] {
                if want.coeff(n) == 1 {
                    let rest = want
                        .substitute(n, &Affine::constant(0))
                        .and_then(|r| got.sub(&r))
                        .map_err(|_| Error::typ(pos, "integer overflow in index arithmetic"))?;
                    sizes.insert(n, rest);
                    progress = true;
                }
            }
        }
        if !progress {
            return Ok(());
        }
    }
}

/// One argument of a call, elaborated in the caller's scope.
enum Arg {
    Real(Expr, Type),
    Size(Affine),
    Rel(Symbol),
}

impl Elab {
    /// `(NAME ARG ...)` where `NAME` is a function of the file: expanded if
    /// it is defined before the function being elaborated, an error if not.
    pub(super) fn call_function(
        &mut self,
        index: usize,
        args: &[Sexp],
        pos: Pos,
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        self.check_callable(index, pos)?;
        if self.depth == 0 {
            self.direct_calls.insert(index);
        }
        let def = self.fns[index].clone();
        let callee_name = self.names[index].clone();
        self.expand_call(&callee_name, def, index, args, pos, claimed)
    }

    /// A call of function `index` is allowed where it stands: the function
    /// is defined before the one being elaborated, and the expansions so
    /// far stay under [`MAX_EXPANSIONS`].
    pub(super) fn check_callable(&mut self, index: usize, pos: Pos) -> Result<()> {
        let callee_name = &self.names[index];
        if index < self.visible && !self.fns[index].program.stored.is_empty() {
            return Err(Error::typ(
                pos,
                format!(
                    "function '{}' has a tensor stored by a relation's pattern: \
                     it cannot be called or differentiated inside another function",
                    callee_name.name
                ),
            )
            .with_hint("give the tensor the dense type (tensor D ... R) in the function called"));
        }
        if index >= self.visible {
            let here = &self.names[self.visible];
            let msg = if index == self.visible {
                format!(
                    "function '{}' calls itself: recursion is not supported",
                    callee_name.name
                )
            } else {
                format!(
                    "function '{}' calls '{}', which is defined after it (at {}): a function \
                     may only call functions defined before it",
                    here.name, callee_name.name, callee_name.pos
                )
            };
            return Err(Error::typ(pos, msg).with_label(callee_name.pos, "defined here"));
        }
        self.expansions += 1;
        if self.expansions > MAX_EXPANSIONS {
            return Err(Error::typ(
                pos,
                format!(
                    "calls expand to more than {MAX_EXPANSIONS} function bodies (nested calls \
                     multiply)"
                ),
            ));
        }
        Ok(())
    }

    /// Expand a call of `def` (named `callee_name`) with `args`: its body
    /// elaborated in a scope of its parameters only, where it may call the
    /// first `visible` functions of the file.
    pub(super) fn expand_call(
        &mut self,
        callee_name: &FnName,
        def: Rc<FnDef>,
        visible: usize,
        args: &[Sexp],
        pos: Pos,
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        let sig = &def.program;
        if args.len() != sig.params.len() {
            let names: Vec<String> = sig.params.iter().map(|p| p.name.to_string()).collect();
            return Err(Error::syntax(
                pos,
                format!(
                    "function '{}' takes {} argument{} ({}), got {}",
                    callee_name.name,
                    names.len(),
                    if names.len() == 1 { "" } else { "s" },
                    names.join(" "),
                    args.len()
                ),
            )
            .with_label(callee_name.pos, "defined here"));
        }
        let mut elaborated = vec![];
        for (p, a) in sig.params.iter().zip(args) {
            elaborated.push(self.argument(&p.kind, a, claimed)?);
        }
        let sizes = self.bind_sizes(sig, &callee_name.name, args, &elaborated)?;
        // the callee's scope: its parameters only
        let mut scope = HashMap::new();
        let mut lets = vec![];
        for (p, arg) in sig.params.iter().zip(elaborated) {
            let binding = match arg {
                Arg::Size(a) => Binding::Size(a),
                Arg::Rel(r) => {
                    let arity = match &p.kind {
                        ParamKind::Relation(d) => d.len(),
                        _ => unreachable!("a relation argument is for a relation parameter"),
                    };
                    Binding::Rel(r, arity)
                }
                Arg::Real(Expr::Var(u), t) => Binding::Var(u, t),
                Arg::Real(e, t) => {
                    let u = self.binder_name(p.name.as_str(), claimed);
                    lets.push((u, e));
                    Binding::Var(u, t)
                }
            };
            scope.insert(p.name.to_string(), binding);
        }
        for s in &sig.sizes {
            scope
                .entry(s.to_string())
                .or_insert_with(|| Binding::Size(sizes[s].clone()));
        }
        let saved_scope = std::mem::replace(&mut self.scope, scope);
        let saved_visible = std::mem::replace(&mut self.visible, visible);
        self.depth += 1;
        let body = self.expr(&def.body, claimed);
        self.depth -= 1;
        self.visible = saved_visible;
        self.scope = saved_scope;
        let (mut body, t) = body?;
        for (u, e) in lets.into_iter().rev() {
            body = build::let_(u, e, body);
        }
        Ok((body, t))
    }

    /// One argument, elaborated in the caller's scope as what its parameter
    /// is: a real-valued expression, a size expression or a relation.
    fn argument(
        &mut self,
        kind: &ParamKind,
        a: &Sexp,
        claimed: &mut HashSet<String>,
    ) -> Result<Arg> {
        match kind {
            ParamKind::Real(_) => {
                let (e, t) = self.expr(a, claimed)?;
                Ok(Arg::Real(e, t))
            }
            ParamKind::Size => Ok(Arg::Size(self.dim(a, None)?)),
            ParamKind::Relation(_) => match a.as_sym().map(|s| (s, self.scope.get(s))) {
                Some((_, Some(Binding::Rel(r, _)))) => Ok(Arg::Rel(*r)),
                Some((s, Some(b))) => Err(Error::typ(
                    a.pos(),
                    format!(
                        "'{s}' is {}, but a relation is expected here",
                        kind_words(b)
                    ),
                )),
                _ => Err(Error::typ(
                    a.pos(),
                    "expected the name of a relation for this argument",
                )),
            },
        }
    }

    /// The callee's sizes in the caller's terms: size parameters from their
    /// arguments, implicit sizes by matching types; then every parameter's
    /// type and relation's dimensions are checked against its argument.
    fn bind_sizes(
        &self,
        sig: &Program,
        fname: &str,
        args: &[Sexp],
        elaborated: &[Arg],
    ) -> Result<SizeMap> {
        let mut sizes = SizeMap::new();
        for (p, arg) in sig.params.iter().zip(elaborated) {
            if let Arg::Size(a) = arg {
                sizes.insert(p.name, a.clone());
            }
        }
        let mut eqs = vec![];
        for ((p, arg), sx) in sig.params.iter().zip(elaborated).zip(args) {
            match (&p.kind, arg) {
                (ParamKind::Real(want), Arg::Real(_, got)) => match_types(want, got, &mut eqs)
                    .ok_or_else(|| {
                        self.argument_type_error(fname, p.name, want, got, sx, &sizes)
                    })?,
                (ParamKind::Relation(want), Arg::Rel(r)) => {
                    let got = self.rel_dims.get(r).cloned().unwrap_or_default();
                    eqs.extend(want.iter().cloned().zip(got));
                }
                _ => {}
            }
        }
        solve_sizes(
            &eqs,
            &mut sizes,
            args.first().map_or(Pos { line: 1, col: 1 }, Sexp::pos),
        )?;
        if let Some(n) = sig.sizes.iter().find(|n| !sizes.contains_key(n)) {
            return Err(Error::typ(
                args.first().map_or(Pos { line: 1, col: 1 }, Sexp::pos),
                format!(
                    "cannot tell the size '{n}' of function '{fname}' from its arguments' types"
                ),
            )
            .with_hint(format!(
                "make '{n}' a parameter ({n} size) of '{fname}' and pass it explicitly"
            )));
        }
        // every equation must now hold
        for ((p, arg), sx) in sig.params.iter().zip(elaborated).zip(args) {
            let ok = match (&p.kind, arg) {
                (ParamKind::Real(want), Arg::Real(_, got)) => {
                    subst_type(want, &sizes, sx.pos())? == *got
                }
                (ParamKind::Relation(want), Arg::Rel(r)) => {
                    let want = want
                        .iter()
                        .map(|d| subst_sizes(d, &sizes, sx.pos()))
                        .collect::<Result<Vec<_>>>()?;
                    self.rel_dims.get(r).is_some_and(|got| *got == want)
                }
                _ => true,
            };
            if !ok {
                return Err(match (&p.kind, arg) {
                    (ParamKind::Real(want), Arg::Real(_, got)) => {
                        self.argument_type_error(fname, p.name, want, got, sx, &sizes)
                    }
                    _ => Error::typ(
                        sx.pos(),
                        format!(
                            "the relation passed for '{}' of '{fname}' has other dimensions",
                            p.name
                        ),
                    ),
                });
            }
        }
        Ok(sizes)
    }

    fn argument_type_error(
        &self,
        fname: &str,
        param: Symbol,
        want: &Type,
        got: &Type,
        sx: &Sexp,
        sizes: &SizeMap,
    ) -> Error {
        let want_here = subst_type(want, sizes, sx.pos()).unwrap_or_else(|_| want.clone());
        let detail = if want_here != *want {
            format!(" (here {want_here})")
        } else {
            String::new()
        };
        Error::typ(
            sx.pos(),
            format!("argument '{param}' of function '{fname}' must be {want}{detail}, got {got}"),
        )
    }
}
