//! Elaboration: S-expressions to a typed core [`Program`] in one pass.
//!
//! Type checking, desugaring and renaming happen together, as docs/language.md
//! requires: the pointwise sugar depends on the operand types, and the
//! desugared form is exactly the one docs/language.md states (its cost is part of the
//! contract). The pass also gives every binder (`let`, `gen`, `sum`,
//! `exists`) a name that occurs nowhere else in the program, neither as
//! another binder nor as a parameter or size; substitution in later passes
//! can then never capture. Fresh names for the sugar (`t`, `j`, `k` followed
//! by a number) and for renamed binders avoid every symbol of the source.
//!
//! Every error names the construct and its line:column.
//!
//! Where each part lives: the scope of names and the `fn` form with its
//! parameters here; dimensions, types and index expressions in `dims.rs`;
//! predicates in `pred.rs`; core expression forms in `expr.rs`; the sugar
//! and its rewriting to core forms in `sugar.rs`.

mod calls;
mod dims;
mod expr;
mod forms;
mod pred;
mod stored;
mod sugar;

pub use forms::{DerivativeKind, Deriver};

use super::affine::{Affine, Overflow};
use super::ast::{Param, ParamKind, Program, Type};
use super::reader::Sexp;
use crate::error::{Error, Pos, Result};
use crate::symbol::Symbol;
use calls::{FnDef, FnName};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

#[derive(Clone, Debug)]
enum Binding {
    /// A real-valued variable: its unique name and type.
    Var(Symbol, Type),
    /// An index variable (gen/sum/exists): its unique name.
    Index(Symbol),
    /// A size: its own name, or in a called function's body the size
    /// expression of the caller it stands for.
    Size(Affine),
    /// A relation: the name it stands for and its arity.
    Rel(Symbol, usize),
}

fn kind_words(b: &Binding) -> &'static str {
    match b {
        Binding::Var(..) => "a real-valued variable",
        Binding::Index(_) => "an index variable",
        Binding::Size(_) => "a size",
        Binding::Rel(..) => "a relation",
    }
}

struct Elab {
    scope: HashMap<String, Binding>,
    fresh: super::names::Fresh,
    /// Every function of the file, in order (names and positions).
    names: Rc<[FnName]>,
    /// The functions checked so far, in order.
    fns: Vec<Rc<FnDef>>,
    /// How many functions (the first ones) the body being elaborated may
    /// call: the index of the function it belongs to.
    visible: usize,
    /// How deep in expanded calls the elaboration is (0: the function's own body).
    depth: usize,
    /// The functions the function's own body calls (not those called
    /// through them).
    direct_calls: BTreeSet<usize>,
    /// Calls expanded so far, against [`calls::MAX_EXPANSIONS`].
    expansions: usize,
    /// The dimensions of each relation parameter, to check relations passed
    /// to a called function.
    rel_dims: HashMap<Symbol, Vec<Affine>>,
    /// Takes the derivatives that derivative forms ask for (none: such a
    /// form is an error).
    deriver: Option<Deriver>,
    /// The derived functions made so far in this file.
    derived: forms::DerivedCache,
}

fn overflow(pos: Pos) -> impl Fn(Overflow) -> Error {
    move |_| Error::typ(pos, "integer overflow in index arithmetic")
}

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
        self.fresh.name(base)
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
}

/// Elaborate the top-level forms of a file into the core program of its
/// last function (see [`elaborate_fn`]).
pub fn elaborate(data: &[Sexp]) -> Result<Program> {
    elaborate_fn(data, None)
}

/// Elaborate the top-level forms of a file, a sequence of `(fn ...)` forms,
/// into the core program of the function named `name` (the last one when
/// `None`), every call expanded. Every function is checked, in order; each
/// may call the functions before it, and each but the last must be called
/// by a later one.
pub fn elaborate_fn(data: &[Sexp], name: Option<&str>) -> Result<Program> {
    elaborate_fn_with(data, name, None)
}

/// As [`elaborate_fn`], with derivative forms (`grad`, `jvp`, `vjp`,
/// `hvp` of a function of the file) expanded by `deriver`; without one
/// they are errors.
pub fn elaborate_fn_with(
    data: &[Sexp],
    name: Option<&str>,
    deriver: Option<Deriver>,
) -> Result<Program> {
    let names: Rc<[FnName]> = calls::function_names(data)?.into();
    let derived = forms::DerivedCache::default();
    let mut fns: Vec<Rc<FnDef>> = vec![];
    for (index, top) in data.iter().enumerate() {
        let Sexp::List(items, _) = top else {
            unreachable!("function_names checked every form")
        };
        let mut el = Elab {
            scope: HashMap::new(),
            fresh: super::names::Fresh::default(),
            names: names.clone(),
            fns: fns.clone(),
            visible: index,
            depth: 0,
            direct_calls: BTreeSet::new(),
            expansions: 0,
            rel_dims: HashMap::new(),
            deriver,
            derived: derived.clone(),
        };
        let program = el.function(items)?;
        fns.push(Rc::new(FnDef {
            body: items
                .last()
                .expect("function_names checked the shape")
                .clone(),
            program,
            calls: std::mem::take(&mut el.direct_calls),
        }));
    }
    calls::check_all_called(&names, &fns)?;
    let chosen = match name {
        None => fns.len() - 1,
        Some(want) => calls::find_function(&names, want)?,
    };
    Ok(fns[chosen].program.clone())
}

impl Elab {
    /// One `(fn NAME (PARAM ...) BODY)` form (its shape already checked).
    fn function(&mut self, items: &[Sexp]) -> Result<Program> {
        let name = items[1].as_sym().expect("function_names checked the name");
        let Sexp::List(param_sx, _) = &items[2] else {
            return Err(Error::syntax(
                items[2].pos(),
                "expected a parameter list (PARAM ...)",
            ));
        };
        let el = self;
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
                Binding::Size(Affine::var(Symbol::from(pname)))
            } else if spec.head() == Some("relation") {
                let Sexp::List(v, _) = spec else {
                    unreachable!()
                };
                Binding::Rel(Symbol::from(pname), v.len() - 1)
            } else {
                Binding::Var(Symbol::from(pname), Type::Real)
            };
            el.bind(pname, binding.clone());
            raw.push((pname, binding, spec));
        }
        let mut declared: Vec<Symbol> = vec![];
        let mut params = vec![];
        let mut stored_params = vec![];
        for (pname, binding, spec) in raw {
            let name = Symbol::from(pname);
            let (spec, by) = stored::split(spec);
            let spec = &spec;
            if let Some(by) = by {
                stored_params.push((name, by));
            }
            let kind = match binding {
                Binding::Size(_) => ParamKind::Size,
                Binding::Rel(..) => {
                    let Sexp::List(v, _) = spec else {
                        unreachable!()
                    };
                    let dims = v[1..]
                        .iter()
                        .map(|d| el.dim(d, Some(&mut declared)))
                        .collect::<Result<Vec<_>>>()?;
                    el.rel_dims.insert(name, dims.clone());
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
        let mut stored = el.stored_params(&params, stored_params)?;
        let declared_ret = match items.len() {
            6 => Some(el.result_type(&items[4], &params, &mut stored)?),
            _ => None,
        };
        let body_sx = items.last().expect("function_names checked the shape");
        let (body, ret) = el.expr(body_sx, &mut claimed)?;
        if let Some(want) = declared_ret {
            if want != ret {
                return Err(Error::typ(
                    body_sx.pos(),
                    format!("the body has type {ret}, the declared result type is {want}"),
                ));
            }
        }
        Ok(Program {
            name: Symbol::from(name),
            params,
            sizes,
            body,
            ret,
            stored,
        })
    }
}
