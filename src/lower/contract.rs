//! Contractions as one call of a tiled kernel.
//!
//! `(gen i I (gen j J (... (sum k K (* x y)) ...)))`, where one factor reads
//! a tensor at `[i][k]` or `[k][i]` and the other at `[k][j]` or `[j][k]`
//! (their last two indices; earlier indices fixed by outer loops), is a
//! matrix product at some strides: a function's `A·X`, an adjoint's `Aᵀ·R`
//! or `R·Wᵀ`, a batch's slice. It runs as `atlh_gemm` (the C prelude's
//! register- and cache-tiled kernel, `backend/gemm.rs`): the same products
//! and additions, `I·J·K` multiplications and `I·J·(K-1)` additions, as
//! the plain loop nest; each element's terms are added in order within a
//! block of `k` and the blocks in order (a reassociation), with fused
//! multiply-adds where the machine has them. The sum's place in the body
//! is then a read of its result: the destination itself when the sum is
//! the whole body or the argument of a call that is (`relu` of a
//! product: the gen then reads each element where it writes it, so no
//! intermediate matrix is kept and one pass over memory less is made),
//! else a fresh `I×J` slot that the gen then reads.
//!
//! Only plain products qualify: no bracket on the sum, exactly two factors,
//! each a read of a materialized tensor whose two dimensions are exactly
//! the ranges of its two variables (no read out of range, so no guard).
//! Anything else keeps the loop nests of `order.rs` and `fuse.rs`.

use super::value::V;
use super::Lowerer;
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{Expr, Type};
use egg::Symbol;

/// A factor of a contraction: its buffer (with offset) and its strides
/// along its gen variable and along the summed variable.
struct Operand {
    base: String,
    s_gen: String,
    s_sum: String,
}

/// The reads of a get chain: the tensor expression and its indices, outer
/// first.
fn get_chain(e: &Expr) -> Option<(&Expr, Vec<&Affine>)> {
    let mut idx = vec![];
    let mut r = e;
    while let Expr::Get(a, i) = r {
        idx.push(i);
        r = a;
    }
    idx.reverse();
    (idx.len() >= 2).then_some((r, idx))
}

fn is_var(a: &Affine, v: Symbol) -> bool {
    a.constant == 0 && a.terms.len() == 1 && a.terms[0] == (v, 1)
}

/// Whether the last two indices of the read `e` are `v` and `k`, in some
/// order, and no earlier index mentions `v`, `k` or anything in `avoid`.
fn reads_pair(e: &Expr, v: Symbol, k: Symbol, avoid: &[Symbol]) -> bool {
    let Some((_, idx)) = get_chain(e) else {
        return false;
    };
    let n = idx.len();
    let (a, b) = (idx[n - 2], idx[n - 1]);
    let last = (is_var(a, v) && is_var(b, k)) || (is_var(a, k) && is_var(b, v));
    last && idx[..n - 2].iter().all(|x| {
        x.terms
            .iter()
            .all(|(s, _)| *s != v && *s != k && !avoid.contains(s))
    })
}

/// The contraction sum `(sum k K (* x y))` of the body of
/// `(gen i (gen j body))`: its extent and the factor reading `i`
/// then the one reading `j` (by shape only; see [`Lowerer::operand`]).
fn contraction_sum(i: Symbol, j: Symbol, s: &Expr) -> Option<(&Affine, &Expr, &Expr)> {
    let Expr::Sum(k, dk, body) = s else {
        return None;
    };
    let Expr::Mul(x, y) = &**body else {
        return None;
    };
    if *k == i || *k == j || i == j {
        return None;
    }
    if reads_pair(x, i, *k, &[j]) && reads_pair(y, j, *k, &[i]) {
        Some((dk, x, y))
    } else if reads_pair(y, i, *k, &[j]) && reads_pair(x, j, *k, &[i]) {
        Some((dk, y, x))
    } else {
        None
    }
}

/// Does `e`, a `gen` of a `gen`, have the shape of a contraction (a sum
/// reached through `+`, `*` and calls that [`contraction_sum`] accepts)?
/// Fusion leaves such gens to [`Lowerer::store_contraction`].
pub(super) fn is_contraction(e: &Expr) -> bool {
    let Expr::Gen(i, _, inner) = e else {
        return false;
    };
    let Expr::Gen(j, _, body) = &**inner else {
        return false;
    };
    let mut cands = vec![];
    super::order::candidates(body, &mut cands);
    cands.iter().any(|s| contraction_sum(*i, *j, s).is_some())
}

impl Lowerer {
    /// The factor `e`, read at `[v][k]` or `[k][v]` (as [`reads_pair`]
    /// checked), as an operand, when its
    /// tensor is materialized, the earlier indices select a slice without
    /// a range condition and the two dimensions are `dv` and `dk`.
    fn operand(
        &mut self,
        e: &Expr,
        v: Symbol,
        dv: &Affine,
        dk: &Affine,
    ) -> Result<Option<Operand>> {
        let Some((root, idx)) = get_chain(e) else {
            return Ok(None);
        };
        let Some(mut t @ V::Leaf { .. }) = self.resolve(root) else {
            return Ok(None);
        };
        let n = idx.len();
        for a in &idx[..n - 2] {
            t = t.index(a, self)?;
        }
        let V::Leaf {
            buf,
            off,
            dims,
            conds,
        } = t
        else {
            return Ok(None);
        };
        let v_first = is_var(idx[n - 2], v);
        let (d_first, d_last) = if v_first { (dv, dk) } else { (dk, dv) };
        if !conds.is_empty() || dims.len() != 2 || dims[0] != *d_first || dims[1] != *d_last {
            return Ok(None);
        }
        let row = self.dim(&dims[1])?;
        let base = if off == "0" {
            buf
        } else {
            format!("{buf} + {off}")
        };
        let (s_gen, s_sum) = if v_first {
            (row, "1".to_string())
        } else {
            ("1".to_string(), row)
        };
        Ok(Some(Operand { base, s_gen, s_sum }))
    }

    /// Store `(gen i di (gen j dj body))` into `dest` with its contraction
    /// sums run by the tiled kernel (module doc). `Ok(false)`: none
    /// qualifies, nothing emitted.
    pub(crate) fn store_contraction(&mut self, e: &Expr, dest: &V) -> Result<bool> {
        let Expr::Gen(i, di, inner) = e else {
            return Ok(false);
        };
        let Expr::Gen(j, dj, body) = &**inner else {
            return Ok(false);
        };
        let mut cands = vec![];
        super::order::candidates(body, &mut cands);
        let whole = matches!(dest, V::Leaf { dims, conds, .. }
            if dims.len() == 2 && dims[0] == *di && dims[1] == *dj && conds.is_empty());
        let mut repl = vec![];
        for s in cands {
            let Some((dk, x, y)) = contraction_sum(*i, *j, s) else {
                continue;
            };
            let Some(a) = self.operand(x, *i, di, dk)? else {
                continue;
            };
            let Some(b) = self.operand(y, *j, dj, dk)? else {
                continue;
            };
            let into_dest = whole && std::ptr::eq(s, &**body);
            let (c, csi) = match dest {
                V::Leaf { buf, off, dims, .. } if into_dest => {
                    let base = if off == "0" {
                        buf.clone()
                    } else {
                        format!("{buf} + {off}")
                    };
                    (base, self.dim(&dims[1])?)
                }
                _ => {
                    let sym = self.internal_symbol("mm");
                    // A body that calls a function of the sum, `relu(Σ ...)`,
                    // has it computed into the destination itself: each
                    // element is read only where it is then written.
                    let call_of_sum = matches!(&**body, Expr::Call(_, a) if std::ptr::eq(&**a, s));
                    let (t, csi, at) = match dest {
                        V::Leaf { buf, off, dims, .. } if whole && call_of_sum => {
                            let base = if off == "0" {
                                buf.clone()
                            } else {
                                format!("{buf} + {off}")
                            };
                            (base, self.dim(&dims[1])?, dest.clone())
                        }
                        _ => {
                            let t = self.slot("mm", &[di.clone(), dj.clone()])?;
                            let at = V::leaf(t.clone(), vec![di.clone(), dj.clone()]);
                            (t, self.dim(dj)?, at)
                        }
                    };
                    self.vals.insert(sym, at);
                    let ty = Type::Tensor(
                        di.clone(),
                        Box::new(Type::Tensor(dj.clone(), Box::new(Type::Real))),
                    );
                    self.tenv.insert(sym, ty);
                    let read = Expr::Get(
                        Box::new(Expr::Get(Box::new(Expr::Var(sym)), Affine::var(*i))),
                        Affine::var(*j),
                    );
                    repl.push((s as *const Expr, read));
                    (t, csi)
                }
            };
            let (ni, nj, nk) = (self.dim(di)?, self.dim(dj)?, self.dim(dk)?);
            self.line(format!(
                "atlh_gemm({c}, {csi}, 1, {ni}, {nj}, {nk}, {}, {}, {}, {}, {}, {});",
                a.base, a.s_gen, a.s_sum, b.base, b.s_sum, b.s_gen
            ));
            if into_dest {
                return Ok(true);
            }
        }
        if repl.is_empty() {
            return Ok(false);
        }
        let body = super::order::replace(body, &repl);
        let rest = Expr::Gen(*j, dj.clone(), Box::new(body));
        self.store_gen(*i, di, &rest, dest)?;
        Ok(true)
    }
}
