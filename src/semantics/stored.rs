//! Values of tensors stored by a relation's pattern ([`Storage`]): one real
//! per tuple of the relation, in the row-major order of the tuples (the
//! order of a sorted tuple list; SciPy's CSR `data` with sorted indices).
//! Read from JSON or `.npz`, they stay in that form ([`Inputs::stored`]):
//! compiled code takes them as they are and gives a stored result the same
//! way ([`out_type`]), so neither grows with the relation's dimensions. The
//! evaluator computes with the dense tensor that is zero off the pattern:
//! [`expanded`] scatters them (up to its size limit), and a dense result is
//! gathered at the tuples ([`result_out`]). A relation that stores a tensor
//! and is given by its tuples must list them in that order, so that values
//! and tuples pair up as written.

use super::json::value_from_json;
use super::value::{flatten, Inputs, Relation, Sizes, Value, MAX_OUTPUT_REALS};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{leaf_count, Program, Type};
use crate::symbol::Symbol;
use std::borrow::Cow;

/// How many tuples the relation holds.
pub fn nnz(rel: &Relation) -> usize {
    rel.nnz()
}

/// The flat type of a stored tensor's values: `(tensor nnz R)`.
pub fn values_type(rel: &Relation) -> Type {
    Type::tensor(&[Affine::constant(nnz(rel) as i64)], Type::Real)
}

/// The dense tensor of the relation's dimensions holding `values` at its
/// tuples (row-major) and zero elsewhere; an error past the evaluator's
/// size limit (the relation itself may be far larger than memory).
pub fn scatter(values: &[f64], rel: &Relation) -> Result<Value> {
    Ok(nest(&dense_flat(values, rel)?, rel.dims()))
}

/// The row-major dense array holding `values` (one per tuple of `rel`, in
/// order) at the relation's tuples and zero elsewhere; an error past the
/// evaluator's size limit.
pub fn dense_flat(values: &[f64], rel: &Relation) -> Result<Vec<f64>> {
    let too_large = || {
        Error::eval(format!(
            "a tensor stored by a relation of dimensions {:?} is too large to expand densely \
             (more than {MAX_OUTPUT_REALS} reals)",
            rel.dims()
        ))
    };
    let total = rel
        .dims()
        .iter()
        .try_fold(1u128, |acc, &n| acc.checked_mul(n as u128))
        .filter(|&t| t <= MAX_OUTPUT_REALS)
        .ok_or_else(too_large)?;
    let mut flat = vec![0.0; total as usize];
    for (pos, v) in rel
        .flat_positions()
        .ok_or_else(too_large)?
        .into_iter()
        .zip(values)
    {
        flat[pos] = *v;
    }
    Ok(flat)
}

/// Nested tensors of `dims` from row-major reals.
pub(crate) fn nest(flat: &[f64], dims: &[usize]) -> Value {
    match dims.split_first() {
        None => Value::Real(flat.first().copied().unwrap_or(0.0)),
        Some((&n, rest)) => {
            let stride: usize = rest.iter().product();
            Value::tensor(
                (0..n)
                    .map(|k| nest(&flat[k * stride..(k + 1) * stride], rest))
                    .collect(),
            )
        }
    }
}

/// The values of the dense `v` (of type `ty`) at the relation's tuples.
pub fn gather(v: &Value, ty: &Type, rel: &Relation, sizes: &Sizes) -> Result<Vec<f64>> {
    let dense = flatten(v, ty, sizes)?;
    let positions = rel
        .flat_positions()
        .ok_or_else(|| Error::eval("a stored tensor's dimensions overflow"))?;
    Ok(positions.into_iter().map(|p| dense[p]).collect())
}

/// The stored input `name` (stored by `rel_name`) from JSON: its values,
/// one real per tuple.
pub fn stored_from_json(
    j: &serde_json::Value,
    name: &str,
    rel_name: Symbol,
    rel: &Relation,
    sizes: &Sizes,
) -> Result<Vec<f64>> {
    let want = nnz(rel);
    if let Some(xs) = j.as_array().filter(|xs| xs.len() != want) {
        return Err(Error::input(format!(
            "input '{name}': {} value(s), but '{name}' is stored by '{rel_name}', which holds \
             {want} tuple(s)",
            xs.len()
        ))
        .with_hint(format!(
            "give one value per tuple of '{rel_name}', in the row-major order of its tuples"
        )));
    }
    let flat = value_from_json(j, &values_type(rel), sizes, name)?;
    flatten(&flat, &values_type(rel), sizes)
}

/// `inputs` with every tensor given by its values ([`Inputs::stored`])
/// scattered into its dense form, as the evaluator needs it (borrowed when
/// there is none); an error past the evaluator's size limit.
pub fn expanded<'a>(prog: &Program, inputs: &'a Inputs) -> Result<Cow<'a, Inputs>> {
    if inputs.stored.is_empty() {
        return Ok(Cow::Borrowed(inputs));
    }
    let mut out = inputs.clone();
    for (x, values) in std::mem::take(&mut out.stored) {
        let r = prog
            .stored
            .param(x)
            .ok_or_else(|| Error::input(format!("'{x}' is not a stored parameter")))?;
        let rel = relation(inputs, r)?;
        check_count(values.len(), x, r, rel)?;
        out.values.insert(x, scatter(&values, rel)?);
    }
    Ok(Cow::Owned(out))
}

/// The values at the tuples of its relation `r` of the stored input `x` of
/// type `ty`, given by its values or densely.
pub fn values_of<'a>(
    inputs: &'a Inputs,
    x: Symbol,
    ty: &Type,
    r: Symbol,
) -> Result<Cow<'a, [f64]>> {
    let rel = relation(inputs, r)?;
    if let Some(values) = inputs.stored.get(&x) {
        check_count(values.len(), x, r, rel)?;
        return Ok(Cow::Borrowed(values));
    }
    let v = inputs
        .values
        .get(&x)
        .ok_or_else(|| Error::input(format!("missing input '{x}'")))?;
    Ok(Cow::Owned(gather(v, ty, rel, &inputs.sizes)?))
}

/// The relation `r` of the inputs.
fn relation(inputs: &Inputs, r: Symbol) -> Result<&Relation> {
    inputs
        .relations
        .get(&r)
        .ok_or_else(|| Error::input(format!("missing input '{r}'")))
}

fn check_count(count: usize, x: Symbol, r: Symbol, rel: &Relation) -> Result<()> {
    if count == nnz(rel) {
        return Ok(());
    }
    Err(Error::input(format!(
        "input '{x}': {count} value(s), but '{x}' is stored by '{r}', which holds {} tuple(s)",
        nnz(rel)
    )))
}

/// The type of `prog`'s result as it is given out: each stored leaf
/// `(tensor nnz R)`, its values at the tuples.
pub fn out_type(prog: &Program, inputs: &Inputs) -> Result<Type> {
    leaf_type(prog, &prog.ret, 0, inputs)
}

fn leaf_type(prog: &Program, ty: &Type, first: usize, inputs: &Inputs) -> Result<Type> {
    if let Type::Pair(a, b) = ty {
        let ta = leaf_type(prog, a, first, inputs)?;
        let tb = leaf_type(prog, b, first + leaf_count(a), inputs)?;
        return Ok(Type::Pair(Box::new(ta), Box::new(tb)));
    }
    match prog.stored.leaf(first) {
        None => Ok(ty.clone()),
        Some(r) => Ok(values_type(relation(inputs, r)?)),
    }
}

/// A relation given by tuples that stores a tensor must list them in
/// row-major order (the values follow it).
pub fn check_tuple_order(j: &serde_json::Value, rel_name: &str, stored: &str) -> Result<()> {
    let Some(Ok(tuples)) = super::tuples::tuples_from_json(rel_name, j) else {
        return Ok(());
    };
    let tuples: Vec<&[i64]> = tuples.iter().map(Vec::as_slice).collect();
    check_sorted(&tuples, rel_name, stored)
}

/// The tuples of `rel_name`, as given, are sorted row-major and distinct.
pub fn check_sorted(tuples: &[&[i64]], rel_name: &str, stored: &str) -> Result<()> {
    for (k, w) in tuples.windows(2).enumerate() {
        if w[0] >= w[1] {
            return Err(Error::input(format!(
                "input '{rel_name}': tuple {} {:?} does not come after tuple {k} {:?}; \
                 '{rel_name}' stores '{stored}', whose values follow its tuples, so they must \
                 be sorted (row-major) and distinct",
                k + 1,
                w[1],
                w[0]
            )));
        }
    }
    Ok(())
}

/// The result `v` of `prog` as it is given out, with its type: each stored
/// leaf replaced by its values at the tuples, `(tensor nnz R)`.
pub fn result_out(prog: &Program, v: &Value, inputs: &Inputs) -> Result<(Value, Type)> {
    if prog.stored.ret.is_empty() {
        return Ok((v.clone(), prog.ret.clone()));
    }
    leaf_out(prog, v, &prog.ret, 0, inputs)
}

fn leaf_out(
    prog: &Program,
    v: &Value,
    ty: &Type,
    first: usize,
    inputs: &Inputs,
) -> Result<(Value, Type)> {
    if let Type::Pair(a, b) = ty {
        let (x, tx) = leaf_out(prog, &v.fst()?, a, first, inputs)?;
        let (y, ty) = leaf_out(prog, &v.snd()?, b, first + leaf_count(a), inputs)?;
        return Ok((Value::pair(x, y), Type::Pair(Box::new(tx), Box::new(ty))));
    }
    match prog.stored.leaf(first) {
        None => Ok((v.clone(), ty.clone())),
        Some(r) => {
            let rel = relation(inputs, r)?;
            let xs = gather(v, ty, rel, &inputs.sizes)?;
            Ok((Value::reals(&xs), values_type(rel)))
        }
    }
}
