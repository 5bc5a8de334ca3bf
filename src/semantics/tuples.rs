//! Relations given by their tuples (`{"tuples": [[0, 1], [2, 0]]}` in JSON,
//! an `(nnz, arity)` integer array elsewhere): checked (arity, range, no
//! tuple twice) with errors naming the input, then held as the evaluator's
//! relation.

use super::value::{BadTuple, Relation};
use crate::error::{Error, Result};

/// The relation of dimensions `dims` holding exactly `tuples`; `what`
/// names the input in errors. Held as its tuples: the dimensions' product
/// may be far beyond memory.
pub fn relation_from_tuples(what: &str, dims: &[usize], tuples: &[Vec<i64>]) -> Result<Relation> {
    if let Some((k, t)) = tuples
        .iter()
        .enumerate()
        .find(|(_, t)| t.len() != dims.len())
    {
        return Err(Error::input(format!(
            "{what}: tuple {k} has {} coordinate(s), the relation has {} argument(s)",
            t.len(),
            dims.len()
        )));
    }
    let flat: Vec<i64> = tuples.iter().flatten().copied().collect();
    relation_from_coords(what, dims, tuples.len(), &flat)
}

/// The relation of dimensions `dims` holding the `nnz` tuples whose
/// coordinates `coords` lists one tuple after the other (an `(nnz, arity)`
/// array in row-major order); `what` names the input in errors.
pub fn relation_from_coords(
    what: &str,
    dims: &[usize],
    nnz: usize,
    coords: &[i64],
) -> Result<Relation> {
    let tuple = |k: usize| &coords[k * dims.len()..(k + 1) * dims.len()];
    Relation::from_coords(dims.to_vec(), nnz, coords).map_err(|bad| {
        Error::input(match bad {
            BadTuple::Arity(k) => format!(
                "{what}: tuple {k} does not have the relation's {} argument(s)",
                dims.len()
            ),
            BadTuple::OutOfRange(k) => format!(
                "{what}: tuple {k} {:?} is out of range (dimensions {dims:?})",
                tuple(k)
            ),
            BadTuple::Repeated(k) => {
                format!("{what}: the tuple {:?} is given twice", tuple(k))
            }
        })
    })
}

/// The optional `"shape"` of a JSON relation given by tuples must be its
/// dimensions at these sizes.
pub fn check_json_shape(what: &str, j: &serde_json::Value, dims: &[usize]) -> Result<()> {
    let Some(shape) = j.as_object().and_then(|o| o.get("shape")) else {
        return Ok(());
    };
    let given: Option<Vec<usize>> = shape.as_array().and_then(|xs| {
        xs.iter()
            .map(|x| x.as_u64().and_then(|k| usize::try_from(k).ok()))
            .collect()
    });
    match given {
        Some(g) if g == dims => Ok(()),
        _ => Err(Error::input(format!(
            "{what}: \"shape\" is {shape}, the relation's dimensions are {dims:?} at these sizes"
        ))),
    }
}

/// The tuples of a JSON relation `{"tuples": [[i, j, ...], ...]}` (`None`
/// when `j` is not of that form).
pub fn tuples_from_json(what: &str, j: &serde_json::Value) -> Option<Result<Vec<Vec<i64>>>> {
    let list = j.as_object()?.get("tuples")?;
    let parse = || -> Result<Vec<Vec<i64>>> {
        let bad = |k: usize| {
            Error::input(format!(
                "{what}: tuple {k} must be an array of non-negative integers"
            ))
        };
        let rows = list.as_array().ok_or_else(|| {
            Error::input(format!("{what}: \"tuples\" must be an array of tuples"))
        })?;
        rows.iter()
            .enumerate()
            .map(|(k, row)| {
                row.as_array()
                    .ok_or_else(|| bad(k))?
                    .iter()
                    .map(|c| c.as_i64().ok_or_else(|| bad(k)))
                    .collect()
            })
            .collect()
    };
    Some(parse())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuples_make_the_relation_whatever_their_order() {
        let r = relation_from_tuples("E", &[2, 3], &[vec![1, 0], vec![0, 2]]).unwrap();
        let dense = Relation::from_dense(vec![2, 3], &[false, false, true, true, false, false]);
        assert_eq!(r, dense);
        // the dimensions' product is not allocated
        let huge = relation_from_tuples("E", &[1 << 40, 1 << 40], &[vec![5, 1 << 39]]).unwrap();
        assert!(huge.test(&[5, 1 << 39]) && huge.nnz() == 1);
    }

    #[test]
    fn bad_tuples_are_named_errors() {
        for (t, msg) in [
            (vec![vec![0, 3]], "out of range"),
            (vec![vec![0, -1]], "out of range"),
            (vec![vec![0]], "1 coordinate(s)"),
            (vec![vec![1, 1], vec![1, 1]], "given twice"),
        ] {
            let e = relation_from_tuples("input 'E'", &[2, 3], &t).unwrap_err();
            assert!(e.to_string().contains("input 'E'"), "{e}");
            assert!(e.to_string().contains(msg), "{e}");
        }
    }
}
