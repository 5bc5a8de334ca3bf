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

/// Zeroed leaf arrays for a result of type `t`.
pub fn output_buffers(t: &Type, sizes: &Sizes) -> Result<Vec<Vec<f64>>> {
    fn go(t: &Type, n: usize, sizes: &Sizes, out: &mut Vec<Vec<f64>>) -> Result<()> {
        match t {
            Type::Real => {
                out.push(vec![0.0; n.max(1)]);
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
