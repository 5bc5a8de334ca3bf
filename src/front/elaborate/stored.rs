//! Tensors stored by a relation's pattern: `(tensor D ... R (stored-by S))`
//! as the type of a parameter or of a leaf of a declared result type
//! (`(fn NAME (PARAM ...) -> TYPE BODY)`). The type is the dense tensor
//! type; the storage, checked here (`S` a relation parameter of exactly the
//! tensor's dimensions, real elements), goes to [`Storage`].

use super::Elab;
use crate::error::{Error, Result};
use crate::front::ast::{leaf_count, Param, ParamKind, Storage, Type};
use crate::front::reader::Sexp;
use crate::symbol::Symbol;

/// A tensor type with its storage split off: the type without its last
/// part `(stored-by S)`, and that part (`None` for any other type).
pub(super) fn split(spec: &Sexp) -> (Sexp, Option<Sexp>) {
    if let (Some("tensor"), Sexp::List(items, pos)) = (spec.head(), spec) {
        if let Some(last) = items.last().filter(|l| l.head() == Some("stored-by")) {
            let rest = items[..items.len() - 1].to_vec();
            return (Sexp::List(rest, *pos), Some(last.clone()));
        }
    }
    (spec.clone(), None)
}

/// The relation a `(stored-by S)` form names, checked against the type
/// `ty` it stores.
fn storing(by: &Sexp, ty: &Type, params: &[Param]) -> Result<Symbol> {
    let Sexp::List(items, pos) = by else {
        unreachable!("split returns a list")
    };
    let name = match items.as_slice() {
        [_, s] => s.as_sym().map(|n| (n, s.pos())),
        _ => None,
    };
    let Some((name, at)) = name else {
        return Err(Error::syntax(
            *pos,
            "expected (stored-by R) with R a relation parameter",
        ));
    };
    let rels = || {
        params.iter().filter_map(|p| match &p.kind {
            ParamKind::Relation(dims) => Some((p.name, dims)),
            _ => None,
        })
    };
    let Some((rel, dims)) = rels().find(|(r, _)| r.as_str() == name) else {
        let hint = crate::diagnostics::did_you_mean(
            name,
            rels().map(|(r, _)| r.as_str()).collect::<Vec<_>>(),
        );
        return Err(Error::typ(
            at,
            format!(
                "'{name}' is not a relation parameter: a tensor is stored by a relation's pattern"
            ),
        )
        .with_hint_opt(hint));
    };
    let mut t = ty;
    let mut tdims = vec![];
    while let Type::Tensor(d, e) = t {
        tdims.push(d.clone());
        t = e;
    }
    if *t != Type::Real || &tdims != dims {
        let ds: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
        return Err(Error::typ(
            *pos,
            format!(
                "a tensor stored by '{rel}' has its dimensions ({}) and real elements; this one is {ty}",
                ds.join(" ")
            ),
        ));
    }
    Ok(rel)
}

impl Elab {
    /// The storage of the parameters whose types end in `(stored-by S)`.
    pub(super) fn stored_params(
        &mut self,
        params: &[Param],
        forms: Vec<(Symbol, Sexp)>,
    ) -> Result<Storage> {
        let mut stored = Storage::default();
        for (x, by) in forms {
            let ty = params
                .iter()
                .find_map(|p| match &p.kind {
                    ParamKind::Real(t) if p.name == x => Some(t),
                    _ => None,
                })
                .expect("a stored parameter is a real-valued one");
            stored.params.push((x, storing(&by, ty, params)?));
        }
        Ok(stored)
    }

    /// A declared result type, its stored leaves added to `stored`.
    pub(super) fn result_type(
        &mut self,
        sx: &Sexp,
        params: &[Param],
        stored: &mut Storage,
    ) -> Result<Type> {
        self.result_leaf(sx, params, stored, 0)
    }

    fn result_leaf(
        &mut self,
        sx: &Sexp,
        params: &[Param],
        stored: &mut Storage,
        first: usize,
    ) -> Result<Type> {
        if let (Some("pair"), Sexp::List(items, _)) = (sx.head(), sx) {
            if items.len() == 3 {
                let a = self.result_leaf(&items[1], params, stored, first)?;
                let b = self.result_leaf(&items[2], params, stored, first + leaf_count(&a))?;
                return Ok(Type::Pair(Box::new(a), Box::new(b)));
            }
        }
        let (spec, by) = split(sx);
        let mut scratch = vec![];
        let ty = self.typ(&spec, &mut scratch)?;
        if let Some(by) = by {
            stored.ret.push((first, storing(&by, &ty, params)?));
        }
        Ok(ty)
    }
}
