//! Runtime values, data relations, sizes and inputs.
//!
//! Key decisions:
//!
//! * **[`Value::Zero`]** is the zero of *whatever type is expected*. An
//!   out-of-range `get` and a false `iverson` produce it, so the evaluator
//!   never needs types (and never allocates a zero tensor). Every operation
//!   treats it as zero: `get`/`fst`/`snd` of `Zero` is `Zero`, arithmetic reads
//!   it as `0.0` (exactly what a materialized zero would give, including
//!   `0 * inf = NaN`). Only printing and flattening, which know the type,
//!   expand it (`walk`).
//! * Tensors and pairs are reference counted, so `get`, `let` and variables
//!   share structure instead of copying.
//! * Writing a value (which may expand a lazy `Zero` of a huge type) is
//!   capped at [`MAX_OUTPUT_REALS`] reals.
//!
//! Their JSON forms are [`super::json`], size sets [`super::sizes`], exact
//! sums and inner products [`super::numerics`].

use crate::error::{Error, ErrorKind, Result};
use crate::front::affine::{Affine, EvalAffineError};
use crate::front::ast::Type;
use crate::symbol::Symbol;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// A runtime value of ATL.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A real.
    Real(f64),
    /// A pair.
    Pair(Rc<Value>, Rc<Value>),
    /// A tensor: its elements.
    Tensor(Rc<Vec<Value>>),
    /// The zero of whatever type is expected (see the module docs).
    Zero,
}

impl Value {
    pub fn pair(a: Value, b: Value) -> Value {
        Value::Pair(Rc::new(a), Rc::new(b))
    }

    pub fn tensor(elems: Vec<Value>) -> Value {
        Value::Tensor(Rc::new(elems))
    }

    /// A tensor of reals.
    pub fn reals(xs: &[f64]) -> Value {
        Value::tensor(xs.iter().map(|&x| Value::Real(x)).collect())
    }

    /// The real this value stands for (`Zero` is `0.0`).
    pub fn real(&self) -> Result<f64> {
        match self {
            Value::Real(x) => Ok(*x),
            Value::Zero => Ok(0.0),
            _ => Err(Error::eval(format!(
                "expected a real, got {}",
                self.describe()
            ))),
        }
    }

    /// `(get v k)`: the element at `k`, or `Zero` when `k` is out of range.
    pub fn get(&self, k: i64) -> Result<Value> {
        match self {
            Value::Tensor(xs) => Ok(usize::try_from(k)
                .ok()
                .and_then(|k| xs.get(k))
                .cloned()
                .unwrap_or(Value::Zero)),
            Value::Zero => Ok(Value::Zero),
            _ => Err(Error::eval(format!(
                "get of {}, which is not a tensor",
                self.describe()
            ))),
        }
    }

    pub fn fst(&self) -> Result<Value> {
        match self {
            Value::Pair(a, _) => Ok((**a).clone()),
            Value::Zero => Ok(Value::Zero),
            _ => Err(Error::eval(format!(
                "fst of {}, which is not a pair",
                self.describe()
            ))),
        }
    }

    pub fn snd(&self) -> Result<Value> {
        match self {
            Value::Pair(_, b) => Ok((**b).clone()),
            Value::Zero => Ok(Value::Zero),
            _ => Err(Error::eval(format!(
                "snd of {}, which is not a pair",
                self.describe()
            ))),
        }
    }

    fn describe(&self) -> String {
        match self {
            Value::Real(_) => "a real".into(),
            Value::Pair(..) => "a pair".into(),
            Value::Tensor(xs) => format!("a tensor of length {}", xs.len()),
            Value::Zero => "zero".into(),
        }
    }
}

/// A data relation with concrete dimensions, held as the tuples where it
/// holds: memory grows with the tuples, not with the product of the
/// dimensions (a graph of 10^6 nodes and 10^7 edges is 10^7 tuples, not
/// 10^12 booleans).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Relation {
    dims: Vec<usize>,
    /// The tuples' coordinates, `dims.len()` per tuple, sorted row-major
    /// and distinct.
    coords: Vec<usize>,
    /// How many tuples (an arity-0 relation holds zero or one).
    nnz: usize,
}

/// Why [`Relation::from_tuples`] refused a tuple: its index in the input.
#[derive(Debug, PartialEq, Eq)]
pub enum BadTuple {
    /// The tuple's arity is not the relation's.
    Arity(usize),
    /// A coordinate is negative or past its dimension.
    OutOfRange(usize),
    /// The tuple is given twice (the index of the second).
    Repeated(usize),
}

impl Relation {
    /// The relation of dimensions `dims` whose row-major map is `bits`
    /// (as many as the dimensions' product).
    pub fn from_dense(dims: Vec<usize>, bits: &[bool]) -> Relation {
        let arity = dims.len();
        let mut coords = vec![];
        let mut nnz = 0;
        for (flat, _) in bits.iter().enumerate().filter(|(_, &b)| b) {
            let start = coords.len();
            coords.resize(start + arity, 0);
            let mut rest = flat;
            for (slot, &d) in coords[start..].iter_mut().zip(&dims).rev() {
                *slot = rest % d.max(1);
                rest /= d.max(1);
            }
            nnz += 1;
        }
        Relation { dims, coords, nnz }
    }

    /// The relation of dimensions `dims` holding exactly `tuples`, in any
    /// order; a tuple of another arity, out of range or repeated is refused.
    pub fn from_tuples(dims: Vec<usize>, tuples: &[Vec<i64>]) -> Result<Relation, BadTuple> {
        if let Some(k) = tuples.iter().position(|t| t.len() != dims.len()) {
            return Err(BadTuple::Arity(k));
        }
        let flat: Vec<i64> = tuples.iter().flatten().copied().collect();
        Relation::from_coords(dims, tuples.len(), &flat)
    }

    /// The relation of dimensions `dims` holding the `nnz` tuples whose
    /// coordinates `coords` lists one after the other (`dims.len()` each),
    /// in any order; a tuple out of range or repeated is refused.
    pub fn from_coords(dims: Vec<usize>, nnz: usize, coords: &[i64]) -> Result<Relation, BadTuple> {
        let arity = dims.len();
        assert_eq!(coords.len(), nnz * arity, "coordinates of {nnz} tuples");
        let mut checked = Vec::with_capacity(coords.len());
        for (k, &c) in coords.iter().enumerate() {
            let c = usize::try_from(c).ok().filter(|&c| c < dims[k % arity]);
            checked.push(c.ok_or(BadTuple::OutOfRange(k / arity))?);
        }
        let coords = checked;
        let at = |k: usize| &coords[k * arity..(k + 1) * arity];
        // sorted input (the usual case) is checked in one pass, not sorted
        if (1..nnz).all(|k| at(k - 1) < at(k)) {
            return Ok(Relation { dims, coords, nnz });
        }
        let mut order: Vec<usize> = (0..nnz).collect();
        order.sort_unstable_by(|&a, &b| at(a).cmp(at(b)).then(a.cmp(&b)));
        if let Some(w) = order.windows(2).find(|w| at(w[0]) == at(w[1])) {
            return Err(BadTuple::Repeated(w[0].max(w[1])));
        }
        let coords = order.iter().flat_map(|&k| at(k).iter().copied()).collect();
        Ok(Relation { dims, coords, nnz })
    }

    /// The relation's dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// How many tuples it holds.
    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// Its tuples, sorted row-major.
    pub fn tuples(&self) -> impl Iterator<Item = &[usize]> + '_ {
        let a = self.dims.len();
        (0..self.nnz).map(move |k| &self.coords[k * a..(k + 1) * a])
    }

    /// The row-major positions of its tuples in the dense map (`None` when
    /// the dimensions' product overflows).
    pub fn flat_positions(&self) -> Option<Vec<usize>> {
        self.tuples()
            .map(|t| {
                t.iter()
                    .zip(&self.dims)
                    .try_fold(0usize, |f, (&c, &d)| f.checked_mul(d)?.checked_add(c))
            })
            .collect()
    }

    /// Its row-major dense map, as many booleans as the dimensions'
    /// product: for small relations only (tests, printing).
    pub fn to_dense(&self) -> Vec<bool> {
        let total: usize = self.dims.iter().product();
        let mut bits = vec![false; total];
        for p in self.flat_positions().unwrap_or_default() {
            bits[p] = true;
        }
        bits
    }

    /// Does the relation hold at `idx`? False when the arity differs or any
    /// index lies outside its dimension. A binary search in the tuples.
    pub fn test(&self, idx: &[i64]) -> bool {
        if idx.len() != self.dims.len() {
            return false;
        }
        let mut key = Vec::with_capacity(idx.len());
        for (&k, &d) in idx.iter().zip(&self.dims) {
            match usize::try_from(k) {
                Ok(k) if k < d => key.push(k),
                _ => return false,
            }
        }
        let a = self.dims.len();
        let (mut lo, mut hi) = (0, self.nnz);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.coords[mid * a..(mid + 1) * a].cmp(&key[..]) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    }
}

pub use super::sizes::Sizes;

/// Everything a program is evaluated at.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// The value of every size.
    pub sizes: Sizes,
    /// The real-valued inputs.
    pub values: HashMap<Symbol, Value>,
    /// The relations.
    pub relations: HashMap<Symbol, Relation>,
    /// Tensors stored by a relation's pattern, given as their values: one
    /// real per tuple, in the row-major order of the tuples. Such a tensor
    /// may be given here or densely in `values`; the evaluator expands it
    /// ([`super::stored::expanded`]), compiled code takes it as it is.
    pub stored: HashMap<Symbol, Vec<f64>>,
}

impl Inputs {
    pub fn new(sizes: Sizes) -> Inputs {
        Inputs {
            sizes,
            ..Inputs::default()
        }
    }
}

/// Most reals a value may expand to when it is written out or flattened.
pub const MAX_OUTPUT_REALS: u128 = 50_000_000;
/// Most JSON nodes (reals and arrays) a value may expand to.
const MAX_OUTPUT_NODES: u128 = 100_000_000;

// ---------------------------------------------------------------------------
// sizes and dimensions

/// Value of a dimension at `sizes` (`kind` is the kind of a negative-dimension
/// error). An unknown size is an input error.
pub(crate) fn dim_at(d: &Affine, sizes: &Sizes, kind: ErrorKind) -> Result<usize> {
    let n = affine_at(d, sizes)?;
    usize::try_from(n).map_err(|_| {
        Error::new(
            kind,
            format!("dimension {d} is negative ({n}) at these sizes"),
        )
    })
}

/// Value of an affine form over sizes only.
pub(crate) fn affine_at(d: &Affine, sizes: &Sizes) -> Result<i64> {
    d.eval_with(|n| sizes.get(&n).copied())
        .map_err(|e| match e {
            EvalAffineError::Unbound(n) => Error::input(format!("size {n} is not given"))
                .with_hint(format!("give it with --sizes {n}=N")),
            EvalAffineError::Overflow => Error::eval(format!(
                "dimension {d} overflows 64-bit integers at these sizes"
            )),
        })
}

/// Number of reals in a value of type `ty`; a negative dimension counts 0
/// (as the reference's `type_size`). Errors: an unknown size, or a count
/// beyond `u128`.
pub fn type_size(ty: &Type, sizes: &Sizes) -> Result<u128> {
    let overflow = || Error::eval("the number of reals of a type overflows");
    match ty {
        Type::Real => Ok(1),
        Type::Pair(a, b) => type_size(a, sizes)?
            .checked_add(type_size(b, sizes)?)
            .ok_or_else(overflow),
        Type::Tensor(d, t) => {
            let n = affine_at(d, sizes)?.max(0) as u128;
            n.checked_mul(type_size(t, sizes)?).ok_or_else(overflow)
        }
    }
}

/// Check that a value of `ty` can be written out: no negative dimension, at
/// most [`MAX_OUTPUT_REALS`] reals and a bounded number of arrays.
pub(crate) fn check_output_size(ty: &Type, sizes: &Sizes) -> Result<()> {
    // (reals, nodes), saturating: anything huge is refused anyway.
    fn count(ty: &Type, sizes: &Sizes) -> Result<(u128, u128)> {
        Ok(match ty {
            Type::Real => (1, 1),
            Type::Pair(a, b) => {
                let (ra, na) = count(a, sizes)?;
                let (rb, nb) = count(b, sizes)?;
                (
                    ra.saturating_add(rb),
                    na.saturating_add(nb).saturating_add(1),
                )
            }
            Type::Tensor(d, t) => {
                let n = dim_at(d, sizes, ErrorKind::Eval)? as u128;
                let (r, k) = count(t, sizes)?;
                (n.saturating_mul(r), n.saturating_mul(k).saturating_add(1))
            }
        })
    }
    let (reals, nodes) = count(ty, sizes)?;
    if reals > MAX_OUTPUT_REALS || nodes > MAX_OUTPUT_NODES {
        return Err(Error::eval(format!(
            "a value of type {} at these sizes is too large to write out ({} reals; the limit is {})",
            ty,
            reals,
            MAX_OUTPUT_REALS
        )));
    }
    Ok(())
}

/// Where in the inputs a JSON value sits, built without allocating and
/// printed only for an error message.
#[derive(Clone, Copy)]
pub(crate) enum Path<'a> {
    /// The named root.
    Root(&'a str),
    /// An element of an array.
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Path::Root(s) => write!(f, "{s}"),
            Path::Index(p, i) => write!(f, "{p}[{i}]"),
        }
    }
}

pub(crate) fn input_dim(d: &Affine, sizes: &Sizes, path: Path) -> Result<usize> {
    let n = affine_at(d, sizes)?;
    usize::try_from(n).map_err(|_| {
        Error::input(format!(
            "{path}: dimension {d} is negative ({n}) at these sizes"
        ))
    })
}

/// Check that `v` is a value of type `ty` (a `Zero` anywhere fits any type).
/// `what` names the value in the message; errors are input errors.
pub fn check_value(v: &Value, ty: &Type, sizes: &Sizes, what: &str) -> Result<()> {
    fn go(v: &Value, ty: &Type, sizes: &Sizes, path: Path) -> Result<()> {
        match (v, ty) {
            (Value::Zero, _) | (Value::Real(_), Type::Real) => Ok(()),
            (Value::Pair(a, b), Type::Pair(ta, tb)) => {
                go(a, ta, sizes, Path::Index(&path, 0))?;
                go(b, tb, sizes, Path::Index(&path, 1))
            }
            (Value::Tensor(xs), Type::Tensor(d, t)) => {
                let n = input_dim(d, sizes, path)?;
                if xs.len() != n {
                    return Err(Error::input(format!(
                        "{path}: expected a tensor of length {n} ({d}), got length {}",
                        xs.len()
                    )));
                }
                for (i, x) in xs.iter().enumerate() {
                    go(x, t, sizes, Path::Index(&path, i))?;
                }
                Ok(())
            }
            _ => Err(Error::input(format!(
                "{path}: expected a value of type {}, got {}",
                ty,
                v.describe()
            ))),
        }
    }
    go(v, ty, sizes, Path::Root(what))
}

// ---------------------------------------------------------------------------
// expanding values along their types

pub(crate) enum Event {
    Real(f64),
    BeginPair,
    BeginTensor,
    End,
}

/// Walk `v` as a value of `ty`, expanding `Zero`s, reporting reals and the
/// opening and closing of pairs and tensors. Callers bound the size first.
pub(crate) fn walk(v: &Value, ty: &Type, sizes: &Sizes, out: &mut impl FnMut(Event)) -> Result<()> {
    match (v, ty) {
        (Value::Real(x), Type::Real) => out(Event::Real(*x)),
        (Value::Zero, Type::Real) => out(Event::Real(0.0)),
        (Value::Pair(a, b), Type::Pair(ta, tb)) => {
            out(Event::BeginPair);
            walk(a, ta, sizes, out)?;
            walk(b, tb, sizes, out)?;
            out(Event::End);
        }
        (Value::Zero, Type::Pair(ta, tb)) => {
            out(Event::BeginPair);
            walk(v, ta, sizes, out)?;
            walk(v, tb, sizes, out)?;
            out(Event::End);
        }
        (Value::Tensor(xs), Type::Tensor(d, t)) => {
            let n = dim_at(d, sizes, ErrorKind::Eval)?;
            if xs.len() != n {
                return Err(Error::eval(format!(
                    "a tensor of length {} where {} was expected",
                    xs.len(),
                    ty
                )));
            }
            out(Event::BeginTensor);
            for x in xs.iter() {
                walk(x, t, sizes, out)?;
            }
            out(Event::End);
        }
        (Value::Zero, Type::Tensor(d, t)) => {
            let n = dim_at(d, sizes, ErrorKind::Eval)?;
            out(Event::BeginTensor);
            for _ in 0..n {
                walk(v, t, sizes, out)?;
            }
            out(Event::End);
        }
        _ => {
            return Err(Error::eval(format!(
                "{} where a value of type {} was expected",
                v.describe(),
                ty
            )))
        }
    }
    Ok(())
}

/// The reals of `v` (a value of `ty`) in order, `Zero` expanded.
pub fn flatten(v: &Value, ty: &Type, sizes: &Sizes) -> Result<Vec<f64>> {
    check_output_size(ty, sizes)?;
    let mut out = vec![];
    walk(v, ty, sizes, &mut |ev| {
        if let Event::Real(x) = ev {
            out.push(x)
        }
    })?;
    Ok(out)
}

/// `v` with every `Zero` replaced by explicit zeros of its type.
pub fn materialize(v: &Value, ty: &Type, sizes: &Sizes) -> Result<Value> {
    check_output_size(ty, sizes)?;
    // Open pairs/tensors with their elements so far; the bottom collects the result.
    let mut stack: Vec<(bool, Vec<Value>)> = vec![(false, vec![])];
    walk(v, ty, sizes, &mut |ev| match ev {
        Event::Real(x) => {
            if let Some(top) = stack.last_mut() {
                top.1.push(Value::Real(x));
            }
        }
        Event::BeginPair => stack.push((true, vec![])),
        Event::BeginTensor => stack.push((false, vec![])),
        Event::End => {
            if stack.len() > 1 {
                if let Some((is_pair, elems)) = stack.pop() {
                    let built = if is_pair && elems.len() == 2 {
                        let mut it = elems.into_iter();
                        let a = it.next().unwrap_or(Value::Zero);
                        let b = it.next().unwrap_or(Value::Zero);
                        Value::pair(a, b)
                    } else {
                        Value::tensor(elems)
                    };
                    if let Some(top) = stack.last_mut() {
                        top.1.push(built);
                    }
                }
            }
        }
    })?;
    stack
        .pop()
        .and_then(|(_, mut top)| top.pop())
        .ok_or_else(|| Error::eval("empty value"))
}

/// The explicit zero of `ty` (every real `0.0`).
pub fn zero_of(ty: &Type, sizes: &Sizes) -> Result<Value> {
    materialize(&Value::Zero, ty, sizes)
}

// ---------------------------------------------------------------------------
// random values (for tests)

/// A random value of `ty`; `rng` yields reals uniform in `[-1, 1]`.
pub fn random_value(ty: &Type, sizes: &Sizes, rng: &mut impl FnMut() -> f64) -> Result<Value> {
    check_output_size(ty, sizes)?;
    fn go(ty: &Type, sizes: &Sizes, rng: &mut impl FnMut() -> f64) -> Result<Value> {
        Ok(match ty {
            Type::Real => Value::Real(rng()),
            Type::Pair(a, b) => Value::pair(go(a, sizes, rng)?, go(b, sizes, rng)?),
            Type::Tensor(d, t) => {
                let n = dim_at(d, sizes, ErrorKind::Eval)?;
                Value::tensor((0..n).map(|_| go(t, sizes, rng)).collect::<Result<_>>()?)
            }
        })
    }
    go(ty, sizes, rng)
}

/// A random relation of dimensions `dims`: each bit holds with probability
/// `density`; `rng` yields reals uniform in `[-1, 1]` (as for
/// [`random_value`]), and a bit holds when `(u + 1) / 2 < density`.
pub fn random_relation(
    dims: &[Affine],
    sizes: &Sizes,
    density: f64,
    rng: &mut impl FnMut() -> f64,
) -> Result<Relation> {
    let concrete = dims
        .iter()
        .map(|d| dim_at(d, sizes, ErrorKind::Eval))
        .collect::<Result<Vec<_>>>()?;
    let total = concrete
        .iter()
        .try_fold(1u128, |acc, &n| acc.checked_mul(n as u128))
        .filter(|&t| t <= MAX_OUTPUT_REALS)
        .ok_or_else(|| Error::eval("a relation at these sizes is too large to generate"))?;
    let bits: Vec<bool> = (0..total).map(|_| (rng() + 1.0) / 2.0 < density).collect();
    Ok(Relation::from_dense(concrete, &bits))
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Small constructors shared by the unit tests of the value modules.
    use super::*;
    use crate::front::ast::{Param, ParamKind, Program};

    pub(crate) fn s(x: &str) -> Symbol {
        Symbol::from(x)
    }
    pub(crate) fn n() -> Affine {
        Affine::var(s("n"))
    }
    pub(crate) fn vec_n() -> Type {
        Type::Tensor(n(), Box::new(Type::Real))
    }
    pub(crate) fn sizes(pairs: &[(&str, i64)]) -> Sizes {
        pairs.iter().map(|&(k, v)| (s(k), v)).collect()
    }
    pub(crate) fn prog(params: Vec<Param>, sz: &[&str]) -> Program {
        Program {
            name: s("f"),
            params,
            sizes: sz.iter().map(|x| s(x)).collect(),
            body: crate::front::ast::build::num(0.0),
            ret: Type::Real,
            stored: Default::default(),
        }
    }
    pub(crate) fn real_param(name: &str, ty: Type) -> Param {
        Param {
            name: s(name),
            kind: ParamKind::Real(ty),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::semantics::json::value_to_json_string;
    use crate::semantics::numerics::inner_product;

    #[test]
    fn zero_behaves_as_zero() {
        assert_eq!(Value::Zero.get(3).unwrap(), Value::Zero);
        assert_eq!(Value::Zero.fst().unwrap(), Value::Zero);
        assert_eq!(Value::Zero.real().unwrap(), 0.0);
        let t = Value::reals(&[1.0, 2.0]);
        assert_eq!(t.get(1).unwrap(), Value::Real(2.0));
        assert_eq!(t.get(2).unwrap(), Value::Zero);
        assert_eq!(t.get(-1).unwrap(), Value::Zero);
        assert!(Value::Real(1.0).get(0).is_err());
        assert!(t.real().is_err());
    }

    #[test]
    fn relation_test_bounds() {
        let r = Relation::from_dense(vec![2, 3], &[false, true, false, false, false, true]);
        assert!(r.test(&[0, 1]));
        assert!(r.test(&[1, 2]));
        assert!(!r.test(&[1, 1]));
        assert!(!r.test(&[2, 0]));
        assert!(!r.test(&[0, 3]));
        assert!(!r.test(&[-1, 1]));
        assert!(!r.test(&[0]));
    }

    #[test]
    fn relations_from_tuples_are_sorted_and_checked() {
        let dims = vec![3, 1_000_000_000];
        let r = Relation::from_tuples(
            dims.clone(),
            &[vec![2, 7], vec![0, 999_999_999], vec![2, 0]],
        )
        .unwrap();
        let tuples: Vec<&[usize]> = r.tuples().collect();
        assert_eq!(tuples, vec![&[0, 999_999_999][..], &[2, 0], &[2, 7]]);
        assert!(
            r.test(&[0, 999_999_999]) && r.test(&[2, 7]) && !r.test(&[2, 1]) && !r.test(&[1, 0])
        );
        assert_eq!(
            r.flat_positions(),
            Some(vec![999_999_999, 2_000_000_000, 2_000_000_007])
        );
        let bad = |t: &[Vec<i64>]| Relation::from_tuples(dims.clone(), t).unwrap_err();
        assert_eq!(bad(&[vec![0, 1], vec![1]]), BadTuple::Arity(1));
        assert_eq!(bad(&[vec![3, 0]]), BadTuple::OutOfRange(0));
        assert_eq!(bad(&[vec![0, -1]]), BadTuple::OutOfRange(0));
        assert_eq!(
            bad(&[vec![1, 2], vec![0, 0], vec![1, 2]]),
            BadTuple::Repeated(2)
        );
        let unit = Relation::from_tuples(vec![], &[vec![]]).unwrap();
        assert!(unit.test(&[]) && unit.nnz() == 1);
        assert!(!Relation::from_tuples(vec![], &[]).unwrap().test(&[]));
        assert_eq!(
            Relation::from_dense(vec![2, 3], &[false, true, false, false, false, true]),
            Relation::from_tuples(vec![2, 3], &[vec![1, 2], vec![0, 1]]).unwrap()
        );
    }

    #[test]
    fn huge_outputs_are_refused() {
        let sz = sizes(&[("n", 1_000_000_000_000)]);
        let e = value_to_json_string(&Value::Zero, &vec_n(), &sz).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Eval);
        let zero_inner = Type::Tensor(
            n(),
            Box::new(Type::Tensor(Affine::constant(0), Box::new(Type::Real))),
        );
        assert!(flatten(&Value::Zero, &zero_inner, &sz).is_err());
        let neg = sizes(&[("n", -2)]);
        let e = flatten(&Value::Zero, &vec_n(), &neg).unwrap_err();
        assert!(e.msg.contains("negative"), "{}", e.msg);
    }

    #[test]
    fn sizes_of_types() {
        let sz = sizes(&[("n", 3)]);
        let ty = Type::Pair(
            Box::new(Type::Tensor(n(), Box::new(vec_n()))),
            Box::new(Type::Real),
        );
        assert_eq!(type_size(&ty, &sz).unwrap(), 10);
        assert_eq!(type_size(&vec_n(), &sizes(&[("n", -3)])).unwrap(), 0);
        assert_eq!(
            type_size(&vec_n(), &Sizes::new()).unwrap_err().kind,
            ErrorKind::Input
        );
        let big = sizes(&[("n", i64::MAX)]);
        let deep = Type::tensor(&[n(), n(), n()], Type::Real);
        assert!(type_size(&deep, &big).is_err());
    }

    #[test]
    fn flatten_materialize_inner() {
        let sz = sizes(&[("n", 2)]);
        let ty = Type::Pair(Box::new(vec_n()), Box::new(Type::Real));
        let v = Value::pair(Value::reals(&[1.0, 2.0]), Value::Real(3.0));
        assert_eq!(flatten(&v, &ty, &sz).unwrap(), vec![1.0, 2.0, 3.0]);
        let z = zero_of(&ty, &sz).unwrap();
        assert_eq!(z, Value::pair(Value::reals(&[0.0, 0.0]), Value::Real(0.0)));
        assert_eq!(
            materialize(&Value::pair(Value::Zero, Value::Real(1.0)), &ty, &sz).unwrap(),
            Value::pair(Value::reals(&[0.0, 0.0]), Value::Real(1.0))
        );
        assert_eq!(inner_product(&v, &v), 14.0);
        assert_eq!(inner_product(&v, &Value::Zero), 0.0);
        assert_eq!(
            inner_product(&Value::pair(Value::Zero, Value::Real(2.0)), &v),
            6.0
        );
        assert!(inner_product(&v, &Value::reals(&[1.0])).is_nan());
        assert!(inner_product(&Value::Zero, &Value::Real(f64::INFINITY)).is_nan());
    }

    #[test]
    fn check_value_shapes() {
        let sz = sizes(&[("n", 2)]);
        assert!(check_value(&Value::reals(&[1.0, 2.0]), &vec_n(), &sz, "t").is_ok());
        assert!(check_value(&Value::Zero, &vec_n(), &sz, "t").is_ok());
        let e = check_value(&Value::reals(&[1.0]), &vec_n(), &sz, "t").unwrap_err();
        assert!(e.msg.starts_with("t: "), "{}", e.msg);
        assert!(check_value(
            &Value::tensor(vec![Value::Real(1.0), Value::reals(&[])]),
            &vec_n(),
            &sz,
            "t"
        )
        .is_err());
    }

    #[test]
    fn random_values() {
        let sz = sizes(&[("n", 3)]);
        let mut k = 0.0;
        let mut rng = || {
            k += 0.25;
            k - 1.0
        };
        let v = random_value(&Type::tensor(&[n(), n()], Type::Real), &sz, &mut rng).unwrap();
        assert_eq!(
            flatten(&v, &Type::tensor(&[n(), n()], Type::Real), &sz)
                .unwrap()
                .len(),
            9
        );
        let r = random_relation(&[n(), n()], &sz, 0.5, &mut rng).unwrap();
        assert_eq!(r.dims(), &[3, 3]);
        assert!(r.nnz() <= 9);
        let big = sizes(&[("n", 1 << 40)]);
        assert!(random_value(&vec_n(), &big, &mut rng).is_err());
        assert!(random_relation(&[n(), n()], &big, 0.5, &mut rng).is_err());
    }
}

/// Random inputs for a program at given sizes: reals uniform in [-1, 1]
/// (zero off the pattern of a tensor stored by a relation), relations of
/// density 0.3.
pub fn random_inputs(
    prog: &crate::front::ast::Program,
    sizes: &Sizes,
    rng: &mut crate::rng::Rng,
) -> Result<Inputs> {
    let mut inputs = Inputs::new(sizes.clone());
    for p in &prog.params {
        match &p.kind {
            crate::front::ast::ParamKind::Real(t) => {
                let v = random_value(t, sizes, &mut || rng.unit())?;
                inputs.values.insert(p.name, v);
            }
            crate::front::ast::ParamKind::Relation(dims) => {
                let r = random_relation(dims, sizes, 0.3, &mut || rng.unit())?;
                inputs.relations.insert(p.name, r);
            }
            crate::front::ast::ParamKind::Size => {}
        }
    }
    // a tensor stored by a relation's pattern is zero off it
    for (x, r) in &prog.stored.params {
        let (Some(v), Some(rel), Some(t)) = (
            inputs.values.get(x),
            inputs.relations.get(r),
            prog.param(*x).and_then(|p| match &p.kind {
                crate::front::ast::ParamKind::Real(t) => Some(t),
                _ => None,
            }),
        ) else {
            continue;
        };
        let kept = super::stored::gather(v, t, rel, sizes)?;
        inputs
            .values
            .insert(*x, super::stored::scatter(&kept, rel)?);
    }
    Ok(inputs)
}
