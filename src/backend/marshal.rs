//! Values to and from the compiled code's leaf arrays (struct of arrays:
//! a value of type `[n](R × [m]R)` is the arrays `[n]` and `[n][m]`).

use crate::error::ErrorKind;
use crate::error::{Error, Result};
use crate::front::ast::Type;
use crate::semantics::value::{dim_at, Sizes, Value};

fn leaf_count(t: &Type) -> usize {
    match t {
        Type::Real => 1,
        Type::Pair(a, b) => leaf_count(a) + leaf_count(b),
        Type::Tensor(_, e) => leaf_count(e),
    }
}

fn write(v: &Value, t: &Type, sizes: &Sizes, outs: &mut [Vec<f64>]) -> Result<()> {
    match t {
        Type::Real => {
            outs[0].push(v.real()?);
            Ok(())
        }
        Type::Pair(a, b) => {
            let na = leaf_count(a);
            let (l, r) = outs.split_at_mut(na);
            write(&v.fst()?, a, sizes, l)?;
            write(&v.snd()?, b, sizes, r)
        }
        Type::Tensor(d, e) => {
            let n = dim_at(d, sizes, ErrorKind::Eval)?;
            for k in 0..n {
                write(&v.get(k as i64)?, e, sizes, outs)?;
            }
            Ok(())
        }
    }
}

/// The leaf arrays of `v : t`, row-major.
pub fn leaves_of(v: &Value, t: &Type, sizes: &Sizes) -> Result<Vec<Vec<f64>>> {
    let mut outs = vec![vec![]; leaf_count(t)];
    write(v, t, sizes, &mut outs)?;
    Ok(outs)
}

/// Leaf arrays for a result of type `t`, filled with NaN: the compiled
/// function writes every element of its outputs (callers need not zero
/// them), and a NaN left anywhere would show that it did not.
pub fn output_buffers(t: &Type, sizes: &Sizes) -> Result<Vec<Vec<f64>>> {
    fn go(t: &Type, n: usize, sizes: &Sizes, out: &mut Vec<Vec<f64>>) -> Result<()> {
        match t {
            Type::Real => {
                out.push(vec![f64::NAN; n.max(1)]);
                Ok(())
            }
            Type::Pair(a, b) => {
                go(a, n, sizes, out)?;
                go(b, n, sizes, out)
            }
            Type::Tensor(d, e) => {
                let k = dim_at(d, sizes, ErrorKind::Eval)?;
                let m = n
                    .checked_mul(k)
                    .ok_or_else(|| Error::eval("the result is too large"))?;
                go(e, m, sizes, out)
            }
        }
    }
    let mut out = vec![];
    go(t, 1, sizes, &mut out)?;
    Ok(out)
}

/// The value of type `t` the leaf arrays hold.
pub fn value_from_leaves(t: &Type, sizes: &Sizes, leaves: &[Vec<f64>]) -> Result<Value> {
    fn go(t: &Type, sizes: &Sizes, leaves: &[Vec<f64>], pos: &mut [usize]) -> Result<Value> {
        match t {
            Type::Real => {
                let x = leaves[0][pos[0]];
                pos[0] += 1;
                Ok(Value::Real(x))
            }
            Type::Pair(a, b) => {
                let na = leaf_count(a);
                let (pl, pr) = pos.split_at_mut(na);
                Ok(Value::pair(
                    go(a, sizes, &leaves[..na], pl)?,
                    go(b, sizes, &leaves[na..], pr)?,
                ))
            }
            Type::Tensor(d, e) => {
                let n = dim_at(d, sizes, ErrorKind::Eval)?;
                let xs = (0..n)
                    .map(|_| go(e, sizes, leaves, pos))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Value::tensor(xs))
            }
        }
    }
    let mut pos = vec![0; leaves.len()];
    go(t, sizes, leaves, &mut pos)
}

/// [`compressed_layout`] of the relation `name`, or an error when its dense
/// first level (one row offset per index of the first dimension, plus one)
/// would not fit in the memory a process can address: a relation of arity 2
/// or more over a first dimension near 2^63 (`(relation n n)` at
/// `n = 2^63 - 1`), whatever its tuples.
pub fn checked_layout<T: AsRef<[usize]>>(
    name: &str,
    dims: &[usize],
    tuples: &[T],
) -> Result<Vec<i64>> {
    if dims.len() >= 2 {
        let words = dims[0].checked_add(3 + 2 * dims.len());
        let fits = words
            .and_then(|w| w.checked_mul(std::mem::size_of::<i64>()))
            .is_some_and(|b| b <= isize::MAX as usize);
        if !fits {
            return Err(Error::eval(format!(
                "relation '{name}': its first dimension, {}, is too large for the compiled \
                 code's layout (one 64-bit row offset per index does not fit in memory)",
                dims[0]
            )));
        }
    }
    Ok(compressed_layout(dims, tuples))
}

/// The compressed layout of a relation the compiled code reads (one
/// `int64_t` array, see `docs/cli.md`): a header `arity, nnz`, then per
/// level `l` the offsets of its position and coordinate arrays, then the
/// arrays. Level 0 is dense when the arity is at least 2 (CSR for arity
/// 2: row pointers and column indices; a compressed sparse fibre in
/// general); a relation of arity 1 is one compressed level under a single
/// root, its sorted list. `tuples` must be sorted and distinct, each
/// coordinate within `dims`.
pub fn compressed_layout<T: AsRef<[usize]>>(dims: &[usize], tuples: &[T]) -> Vec<i64> {
    let k = dims.len();
    let start = usize::from(k >= 2);
    // Level l's coordinates and the number of children of each parent.
    let mut crd: Vec<Vec<i64>> = vec![vec![]; k];
    let mut counts: Vec<Vec<i64>> = (0..k)
        .map(|l| match l {
            _ if l < start => vec![],
            _ if l == start => vec![0; if start == 1 { dims[0] } else { 1 }],
            _ => vec![],
        })
        .collect();
    let mut prev: Option<&[usize]> = None;
    for t in tuples.iter().map(AsRef::as_ref) {
        let first_new = prev.map_or(0, |p| p.iter().zip(t).take_while(|(a, b)| a == b).count());
        for l in first_new.max(start)..k {
            let parent = if l == start {
                if start == 1 {
                    t[0]
                } else {
                    0
                }
            } else {
                crd[l - 1].len() - 1
            };
            if l > start {
                counts[l].resize(crd[l - 1].len(), 0);
            }
            crd[l].push(t[l] as i64);
            counts[l][parent] += 1;
        }
        prev = Some(t);
    }
    let header = 2 + 2 * k;
    let mut out = vec![0i64; header];
    out[0] = k as i64;
    out[1] = tuples.len() as i64;
    for l in start..k {
        if l > start {
            counts[l].resize(crd[l - 1].len(), 0);
        }
        out[2 + 2 * l] = out.len() as i64;
        let mut acc = 0i64;
        out.push(0);
        for c in &counts[l] {
            acc += c;
            out.push(acc);
        }
        out[3 + 2 * l] = out.len() as i64;
        out.extend_from_slice(&crd[l]);
    }
    out
}

/// The stored tuples of a relation, in order.
pub fn relation_tuples(r: &crate::semantics::value::Relation) -> Vec<&[usize]> {
    r.tuples().collect()
}

#[cfg(test)]
mod tests {
    use super::compressed_layout;

    #[test]
    fn csr_of_a_small_graph() {
        // Edges 0→1, 0→2, 2→0 on 3 nodes.
        let r = compressed_layout(&[3, 3], &[vec![0, 1], vec![0, 2], vec![2, 0]]);
        // header: arity, nnz, (dense level 0), pos1 at 6, crd1 at 10
        assert_eq!(r, vec![2, 3, 0, 0, 6, 10, 0, 2, 2, 3, 1, 2, 0]);
    }

    #[test]
    fn sorted_list_of_a_set() {
        let r = compressed_layout(&[5], &[vec![1], vec![4]]);
        assert_eq!(r, vec![1, 2, 4, 6, 0, 2, 1, 4]);
    }

    #[test]
    fn fibres_of_arity_three() {
        let r = compressed_layout(&[2, 2, 2], &[vec![0, 0, 1], vec![0, 1, 0], vec![0, 1, 1]]);
        // level 1: pos over 2 rows [0,2,2], crd [0,1]; level 2: pos over 2
        // fibres [0,1,3], crd [1,0,1]
        assert_eq!(
            r,
            vec![3, 3, 0, 0, 8, 11, 13, 16, 0, 2, 2, 0, 1, 0, 1, 3, 1, 0, 1]
        );
    }
}
