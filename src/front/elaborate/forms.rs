//! Derivative forms: `(grad F ARG ...)`, `(jvp F ARG ...)`, `(vjp F ARG
//! ...)` and `(hvp F ARG ...)`, each optionally with `(wrt P ...)` after
//! `F`, are calls of the function that the command of the same name makes
//! from `F` (a function defined before the one being elaborated), with
//! `--wrt P,...` (default: every real-valued parameter of `F`). The derived
//! function's parameters are `F`'s followed by the command's extra ones
//! (`jvp`: a tangent per `wrt` parameter; `vjp`: the cotangent; `hvp`: a
//! direction per `wrt` parameter), and the form passes them in that order.
//!
//! The front end cannot take derivatives (they are a later layer), so the
//! derivative comes from a [`Deriver`] the caller supplies (the library's
//! parse supplies its own); the derived program is printed and expanded as
//! any call is, so its binders get names of the caller's supply and it is
//! checked like a function of the file.

use super::calls::{FnDef, FnName};
use super::Elab;
use crate::error::{Error, Pos, Result};
use crate::front::ast::{Expr, ParamKind, Program, Type};
use crate::front::reader::Sexp;
use crate::symbol::Symbol;
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

/// Which derivative a form asks for, named as the command that makes it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum DerivativeKind {
    Grad,
    Jvp,
    Vjp,
    Hvp,
}

impl DerivativeKind {
    /// The kind a form's head names, if it names one.
    pub fn from_name(name: &str) -> Option<DerivativeKind> {
        Some(match name {
            "grad" => DerivativeKind::Grad,
            "jvp" => DerivativeKind::Jvp,
            "vjp" => DerivativeKind::Vjp,
            "hvp" => DerivativeKind::Hvp,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DerivativeKind::Grad => "grad",
            DerivativeKind::Jvp => "jvp",
            DerivativeKind::Vjp => "vjp",
            DerivativeKind::Hvp => "hvp",
        }
    }

    /// Whether the derivative needs a function returning `R`.
    fn needs_real_result(self) -> bool {
        matches!(self, DerivativeKind::Grad | DerivativeKind::Hvp)
    }
}

/// Makes the derivative of a checked function with respect to the given
/// real-valued parameters (every one when empty), as the command of the
/// same name prints it.
pub type Deriver = fn(DerivativeKind, &Program, &[Symbol]) -> Result<Program>;

/// Derived functions already made while elaborating a file, by callee,
/// kind and `wrt`: a form used many times (in a function called many
/// times) is derived once.
pub(super) type DerivedCache =
    Rc<RefCell<HashMap<(usize, DerivativeKind, Vec<Symbol>), Rc<FnDef>>>>;

fn usage(kind: DerivativeKind) -> String {
    format!(
        "expected ({} FUNCTION [(wrt PARAM ...)] ARG ...), FUNCTION a function defined before",
        kind.name()
    )
}

impl Elab {
    /// `(KIND F [(wrt P ...)] ARG ...)`: the call of `F`'s derivative.
    pub(super) fn derivative_form(
        &mut self,
        kind: DerivativeKind,
        args: &[Sexp],
        pos: Pos,
        claimed: &mut HashSet<String>,
    ) -> Result<(Expr, Type)> {
        let Some(fname) = args.first().and_then(Sexp::as_sym) else {
            return Err(Error::syntax(pos, usage(kind)));
        };
        let Some(index) = self.names.iter().position(|f| f.name == fname) else {
            let functions = self.names[..self.visible].iter().map(|f| f.name.as_str());
            return Err(Error::typ(
                args[0].pos(),
                format!(
                    "{} of '{fname}': no function of this file is named '{fname}'",
                    kind.name()
                ),
            )
            .with_hint_opt(crate::diagnostics::did_you_mean(fname, functions)));
        };
        self.check_callable(index, pos)?;
        let (wrt, rest) = match args.get(1) {
            Some(w) if w.head() == Some("wrt") => (self.wrt_names(kind, index, w)?, &args[2..]),
            _ => (vec![], &args[1..]),
        };
        let callee = &self.fns[index].program;
        if kind.needs_real_result() && callee.ret != Type::Real {
            return Err(Error::typ(
                pos,
                format!(
                    "{} of '{fname}' needs a function returning R; '{fname}' returns {}",
                    kind.name(),
                    callee.ret
                ),
            )
            .with_hint("use vjp with a cotangent of the result's type"));
        }
        if callee.real_params().next().is_none() {
            return Err(Error::typ(
                pos,
                format!(
                    "{} of '{fname}': it has no real-valued parameter to differentiate",
                    kind.name()
                ),
            ));
        }
        let def = self.derived_function(kind, index, &wrt, pos)?;
        let name = FnName {
            name: format!("{} {fname}", kind.name()),
            pos: self.names[index].pos,
        };
        if self.depth == 0 {
            self.direct_calls.insert(index);
        }
        self.expand_call(&name, def, 0, rest, pos, claimed)
    }

    /// The parameters of `(wrt P ...)`: real-valued parameters of the
    /// callee, each once.
    fn wrt_names(&self, kind: DerivativeKind, index: usize, w: &Sexp) -> Result<Vec<Symbol>> {
        let Sexp::List(items, _) = w else {
            unreachable!("a form with a head is a list")
        };
        if items.len() < 2 {
            return Err(Error::syntax(
                w.pos(),
                "expected (wrt PARAM ...) with at least one parameter",
            ));
        }
        let callee = &self.fns[index].program;
        let fname = &self.names[index].name;
        let mut out: Vec<Symbol> = vec![];
        for item in &items[1..] {
            let Some(p) = item.as_sym() else {
                return Err(Error::syntax(
                    item.pos(),
                    "expected a parameter name in (wrt ...)",
                ));
            };
            let p = Symbol::from(p);
            match callee.param(p).map(|q| &q.kind) {
                Some(ParamKind::Real(_)) => {}
                Some(_) => {
                    return Err(Error::typ(
                        item.pos(),
                        format!(
                            "{} with respect to '{p}': it is not a real-valued parameter of '{fname}' (sizes and relations have no derivative)",
                            kind.name()
                        ),
                    ))
                }
                None => {
                    let params = callee.real_params().map(|(n, _)| n.to_string()).collect::<Vec<_>>();
                    return Err(Error::typ(
                        item.pos(),
                        format!("'{fname}' has no parameter named '{p}'"),
                    )
                    .with_hint(format!("its real-valued parameters: {}", params.join(", "))));
                }
            }
            if out.contains(&p) {
                return Err(Error::typ(
                    item.pos(),
                    format!("'{p}' is named twice in (wrt ...)"),
                ));
            }
            out.push(p);
        }
        Ok(out)
    }

    /// The derived function of a form, made once per file (and checked as
    /// the text it prints as).
    fn derived_function(
        &mut self,
        kind: DerivativeKind,
        index: usize,
        wrt: &[Symbol],
        pos: Pos,
    ) -> Result<Rc<FnDef>> {
        let key = (index, kind, wrt.to_vec());
        if let Some(def) = self.derived.borrow().get(&key) {
            return Ok(def.clone());
        }
        let Some(deriver) = self.deriver else {
            return Err(Error::typ(
                pos,
                format!(
                    "a derivative form ({}) is expanded by the library's parse (atl_egg::parse), \
                     which this reader is not",
                    kind.name()
                ),
            ));
        };
        let fname = &self.names[index].name;
        let derived = deriver(kind, &self.fns[index].program, wrt).map_err(|e| {
            Error::typ(
                pos,
                format!("{} of '{fname}' failed: {}", kind.name(), e.msg),
            )
        })?;
        let text = crate::front::print::program_to_string(&derived);
        let forms = crate::front::reader::read(text.as_bytes())?;
        let Some(Sexp::List(items, _)) = forms.first() else {
            unreachable!("a printed program is one (fn ...) form")
        };
        let def = Rc::new(FnDef {
            body: items.last().expect("a printed function has a body").clone(),
            program: derived,
            calls: BTreeSet::new(),
        });
        self.derived.borrow_mut().insert(key, def.clone());
        Ok(def)
    }
}
