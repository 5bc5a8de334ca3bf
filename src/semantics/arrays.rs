//! Inputs given whole as flat arrays (NumPy files): a shape and its
//! row-major elements, turned into a value, a relation or a stored
//! tensor's values directly. The checks are the JSON form's (the shape
//! against the parameter's type at the sizes, a relation's entries 0/1,
//! tuples in range and distinct, a stored tensor's count and its
//! relation's order); only no JSON tree is built: a graph of 10^7 edges is
//! 160 MB of coordinates, where its JSON tree would take gigabytes.

use super::value::{input_dim, Path, Relation, Sizes, Value};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::Type;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The elements of an array, by the kind of its dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    Reals(Vec<f64>),
    Ints(Vec<i64>),
    Bools(Vec<bool>),
}

/// An array: its shape and its elements in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub shape: Vec<u64>,
    pub data: Data,
}

/// What an array gives of its parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The parameter's whole value: a real, a tensor of reals, a relation
    /// as a 0/1 array, or a stored tensor's values.
    Whole,
    /// A relation's tuples, an `(nnz, arity)` integer array.
    Tuples,
}

/// Arrays by the name of the parameter they give.
pub type Arrays = BTreeMap<String, (Role, Array)>;

/// `(4,)`, `(2, 3)`, `()`: a shape as NumPy prints it.
pub fn shape_text(shape: impl IntoIterator<Item = String>) -> String {
    let dims: Vec<String> = shape.into_iter().collect();
    match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    }
}

impl Array {
    fn len(&self) -> usize {
        match &self.data {
            Data::Reals(x) => x.len(),
            Data::Ints(x) => x.len(),
            Data::Bools(x) => x.len(),
        }
    }

    fn shape_text(&self) -> String {
        shape_text(self.shape.iter().map(u64::to_string))
    }

    /// Its elements as reals (integers converted; booleans are not reals,
    /// as in JSON).
    fn reals(&self, name: &str) -> Result<Cow<'_, [f64]>> {
        match &self.data {
            Data::Reals(x) => Ok(Cow::Borrowed(x)),
            Data::Ints(x) => Ok(Cow::Owned(x.iter().map(|&k| k as f64).collect())),
            Data::Bools(_) => Err(Error::input(format!(
                "input '{name}': the array holds booleans, where reals are expected"
            ))
            .with_hint("save it with a.astype(float)")),
        }
    }

    /// An error unless its shape is `want` (dimensions at these sizes).
    fn expect_shape(&self, want: &[usize], name: &str) -> Result<()> {
        if self.shape.len() == want.len()
            && self.shape.iter().zip(want).all(|(&a, &b)| a == b as u64)
        {
            return Ok(());
        }
        Err(Error::input(format!(
            "input '{name}': the array has shape {}, but '{name}' expects {}",
            self.shape_text(),
            shape_text(want.iter().map(usize::to_string))
        )))
    }

    /// The value of type `ty` (a real or a tensor of reals) it holds; a
    /// real may also be given as any array of one element.
    pub fn value(&self, ty: &Type, sizes: &Sizes, name: &str) -> Result<Value> {
        let mut dims = vec![];
        let mut t = ty;
        while let Type::Tensor(d, inner) = t {
            dims.push(input_dim(d, sizes, Path::Root(name))?);
            t = inner;
        }
        assert_eq!(*t, Type::Real, "an array holds a tensor of reals");
        if !(dims.is_empty() && self.len() == 1) {
            self.expect_shape(&dims, name)?;
        }
        Ok(super::stored::nest(&self.reals(name)?, &dims))
    }

    /// The relation of dimensions `dims` it gives, as a 0/1 array of those
    /// dimensions (booleans or the integers 0 and 1).
    pub fn relation(&self, dims: &[Affine], sizes: &Sizes, name: &str) -> Result<Relation> {
        let dims = concrete(dims, sizes, name)?;
        self.expect_shape(&dims, name)?;
        let bits: Cow<'_, [bool]> = match &self.data {
            Data::Bools(b) => Cow::Borrowed(b),
            Data::Ints(x) => match x.iter().position(|&k| k != 0 && k != 1) {
                None => Cow::Owned(x.iter().map(|&k| k == 1).collect()),
                Some(k) => {
                    return Err(Error::input(format!(
                        "input '{name}': element {k} is {}; a relation's array holds 0 and 1 \
                         (or booleans)",
                        x[k]
                    )))
                }
            },
            Data::Reals(_) => {
                return Err(Error::input(format!(
                    "input '{name}': a relation's array holds booleans or the integers 0 and 1, \
                     not reals"
                ))
                .with_hint("save it with a.astype(bool)"))
            }
        };
        Ok(Relation::from_dense(dims, &bits))
    }

    /// The relation of dimensions `dims` whose tuples it lists, as an
    /// `(nnz, arity)` integer array.
    pub fn tuples(&self, dims: &[Affine], sizes: &Sizes, name: &str) -> Result<Relation> {
        let dims = concrete(dims, sizes, name)?;
        let what = format!("input '{name}'");
        let coords = match (&self.data, self.shape.as_slice()) {
            (Data::Ints(x), &[_, arity]) if arity == dims.len() as u64 => x,
            (Data::Ints(_), &[nnz, arity]) if nnz > 0 => {
                return Err(Error::input(format!(
                    "{what}: tuple 0 has {arity} coordinate(s), the relation has {} argument(s)",
                    dims.len()
                )))
            }
            _ => {
                return Err(Error::input(format!(
                    "{what}: its tuples ('{name}.tuples') have shape {}; they must be an integer \
                     array of shape (nnz, {})",
                    self.shape_text(),
                    dims.len()
                )))
            }
        };
        super::tuples::relation_from_coords(&what, &dims, self.shape[0] as usize, coords)
    }

    /// The row-major tuples of an `(nnz, arity)` array must be sorted and
    /// distinct when they order a stored tensor's values.
    pub fn check_tuple_order(&self, rel_name: &str, stored: &str) -> Result<()> {
        let (Data::Ints(x), [_, arity]) = (&self.data, self.shape.as_slice()) else {
            return Ok(());
        };
        let tuples: Vec<&[i64]> = x.chunks(*arity as usize).collect();
        super::stored::check_sorted(&tuples, rel_name, stored)
    }

    /// A stored tensor's values, one per tuple of `rel` (a 1-d array).
    pub fn stored(&self, name: &str, rel_name: &str, rel: &Relation) -> Result<Vec<f64>> {
        let want = rel.nnz();
        if self.shape.len() != 1 || self.len() != want {
            return Err(Error::input(format!(
                "input '{name}': the array has shape {}, but '{name}' is stored by '{rel_name}', \
                 which holds {want} tuple(s)",
                self.shape_text()
            ))
            .with_hint(format!(
                "give one value per tuple of '{rel_name}', in the row-major order of its tuples"
            )));
        }
        Ok(self.reals(name)?.into_owned())
    }

    /// The size `s` it gives: the length of a dimension that is exactly
    /// `s` among `dims` (the dimensions of a whole value's array).
    pub fn infer(&self, dims: &[Affine], s: crate::symbol::Symbol) -> Option<i64> {
        let k = dims.iter().position(|d| *d == Affine::var(s))?;
        self.shape.get(k).and_then(|&n| i64::try_from(n).ok())
    }
}

/// The dimensions of a type's tensors of reals (`None` for a pair or a
/// tensor of pairs, which no single array holds).
pub fn tensor_dims(ty: &Type) -> Option<Vec<Affine>> {
    let mut dims = vec![];
    let mut t = ty;
    while let Type::Tensor(d, inner) = t {
        dims.push(d.clone());
        t = inner;
    }
    (*t == Type::Real).then_some(dims)
}

fn concrete(dims: &[Affine], sizes: &Sizes, name: &str) -> Result<Vec<usize>> {
    dims.iter()
        .map(|d| input_dim(d, sizes, Path::Root(name)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(n: i64) -> Sizes {
        [(crate::symbol::Symbol::from("n"), n)]
            .into_iter()
            .collect()
    }

    fn n() -> Affine {
        Affine::var(crate::symbol::Symbol::from("n"))
    }

    #[test]
    fn a_tensor_of_the_wrong_shape_is_named() {
        let a = Array {
            shape: vec![4],
            data: Data::Reals(vec![0.0; 4]),
        };
        let ty = Type::tensor(&[n()], Type::Real);
        let e = a.value(&ty, &sizes(3), "x").unwrap_err().to_string();
        assert!(e.contains("(4,)") && e.contains("expects (3,)"), "{e}");
        assert_eq!(
            a.value(&ty, &sizes(4), "x").unwrap(),
            Value::reals(&[0.0; 4])
        );
    }

    #[test]
    fn relations_from_bits_and_tuples_agree() {
        let bits = Array {
            shape: vec![2, 2],
            data: Data::Ints(vec![0, 1, 1, 0]),
        };
        let tuples = Array {
            shape: vec![2, 2],
            data: Data::Ints(vec![1, 0, 0, 1]),
        };
        let dims = [n(), n()];
        let r = bits.relation(&dims, &sizes(2), "E").unwrap();
        assert_eq!(r, tuples.tuples(&dims, &sizes(2), "E").unwrap());
        assert_eq!(r.nnz(), 2);
        // unsorted tuples make the relation, but cannot order stored values
        let e = tuples.check_tuple_order("E", "A").unwrap_err().to_string();
        assert!(e.contains("does not come after"), "{e}");
        let two = Array {
            shape: vec![2, 2],
            data: Data::Ints(vec![0, 2, 1, 0]),
        };
        let e = two.relation(&dims, &sizes(2), "E").unwrap_err().to_string();
        assert!(e.contains("element 1 is 2"), "{e}");
        let far = Array {
            shape: vec![1, 2],
            data: Data::Ints(vec![0, 2]),
        };
        let e = far.tuples(&dims, &sizes(2), "E").unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn stored_values_count_the_tuples() {
        let rel = Relation::from_dense(vec![2, 2], &[true, false, false, true]);
        let two = Array {
            shape: vec![2],
            data: Data::Ints(vec![3, 4]),
        };
        assert_eq!(two.stored("A", "S", &rel).unwrap(), vec![3.0, 4.0]);
        let three = Array {
            shape: vec![3],
            data: Data::Reals(vec![0.0; 3]),
        };
        let e = three.stored("A", "S", &rel).unwrap_err().to_string();
        assert!(e.contains("holds 2 tuple(s)"), "{e}");
    }
}
