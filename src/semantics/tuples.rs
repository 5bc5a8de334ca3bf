//! Relations given by their tuples (`{"tuples": [[0, 1], [2, 0]]}` in JSON,
//! an `(nnz, arity)` integer array elsewhere): checked (arity, range, no
//! tuple twice) with errors naming the input, then held as the evaluator's
//! relation.

use super::value::{Relation, MAX_OUTPUT_REALS};
use crate::error::{Error, Result};

/// The relation of dimensions `dims` holding exactly `tuples`; `what`
/// names the input in errors.
pub fn relation_from_tuples(what: &str, dims: &[usize], tuples: &[Vec<i64>]) -> Result<Relation> {
    let total = dims
        .iter()
        .try_fold(1u128, |acc, &n| acc.checked_mul(n as u128))
        .filter(|&t| t <= MAX_OUTPUT_REALS)
        .ok_or_else(|| {
            Error::input(format!(
                "{what}: a relation of dimensions {dims:?} is too large for the evaluator"
            ))
        })?;
    let mut bits = vec![false; total as usize];
    for (k, t) in tuples.iter().enumerate() {
        if t.len() != dims.len() {
            return Err(Error::input(format!(
                "{what}: tuple {k} has {} coordinate(s), the relation has {} argument(s)",
                t.len(),
                dims.len()
            )));
        }
        let mut flat = 0usize;
        for (&c, &d) in t.iter().zip(dims) {
            let c = usize::try_from(c).ok().filter(|&c| c < d).ok_or_else(|| {
                Error::input(format!(
                    "{what}: tuple {k} {t:?} is out of range (dimensions {dims:?})"
                ))
            })?;
            flat = flat * d + c;
        }
        if std::mem::replace(&mut bits[flat], true) {
            return Err(Error::input(format!(
                "{what}: the tuple {t:?} is given twice"
            )));
        }
    }
    Ok(Relation {
        dims: dims.to_vec(),
        bits,
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
    fn tuples_set_their_bits() {
        let r = relation_from_tuples("E", &[2, 3], &[vec![0, 2], vec![1, 0]]).unwrap();
        assert_eq!(r.bits, vec![false, false, true, true, false, false]);
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
