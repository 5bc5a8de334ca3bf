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
//! else a fresh `I×J` slot that the gen then reads. `relu` of a plain
//! product is applied by the kernel (`atlh_gemm_relu`) to each tile of
//! the destination as its sums are complete, not by a pass after it.
//!
//! Exactly two factors qualify, each a read of a materialized tensor whose
//! two dimensions are exactly the ranges of its two variables (no read out
//! of range, so no guard). A bracket may confine the product to a band
//! (`atlh_gemm_band`): a bracket around the sum that compares `j` with `i`
//! (attention's `[j <= i]·Σ_l Q[i][l]·K[j][l]`: only the elements of the
//! band are computed, the bracket stays on the read of the result), or one
//! on the sum's terms that compares `k` with `i` or with `j`
//! (`Σ_j [j <= i]·P[i][j]·V[j][l]`: each element adds only its terms).
//! Each comparison has unit coefficients on the two indices (`u <= r + c`,
//! `u > r - c`, ...; several in a conjunction, at most one bound each
//! way). The kernel runs rows by blocks: the columns (or the `k`) every
//! row of a block has as one kernel call, the edges of the band beside it;
//! it executes and counts exactly the bracketed terms.
//! Anything else keeps the loop nests of `order.rs` and `fuse.rs`.

use super::value::V;
use super::Lowerer;
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{CmpOp, Expr, Pred, Type};
use crate::front::blackbox::Func;
use crate::symbol::Symbol;

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

/// A contraction sum `(sum k K (* x y))` or `(sum k K [p]·(* x y))`: its
/// index and extent, the factor reading `i` then the one reading `j` (by
/// shape only; see [`Lowerer::operand`]) and the bracket on its terms.
struct Parts<'a> {
    k: Symbol,
    dk: &'a Affine,
    x: &'a Expr,
    y: &'a Expr,
    bracket: Option<&'a Pred>,
}

/// The parts of `s`, a candidate sum of the body of `(gen i (gen j body))`.
fn contraction_sum(i: Symbol, j: Symbol, s: &Expr) -> Option<Parts<'_>> {
    let Expr::Sum(k, dk, body) = s else {
        return None;
    };
    let (bracket, prod) = match &**body {
        Expr::Iverson(p, b) => (Some(p), &**b),
        b => (None, b),
    };
    let Expr::Mul(x, y) = prod else {
        return None;
    };
    if *k == i || *k == j || i == j {
        return None;
    }
    let (x, y) = if reads_pair(x, i, *k, &[j]) && reads_pair(y, j, *k, &[i]) {
        (&**x, &**y)
    } else if reads_pair(y, i, *k, &[j]) && reads_pair(x, j, *k, &[i]) {
        (&**y, &**x)
    } else {
        return None;
    };
    Some(Parts {
        k: *k,
        dk,
        x,
        y,
        bracket,
    })
}

/// A band: for each row index `r`, the other index `u` runs over
/// `[r + lo, r + hi)` (a missing bound bounds nothing).
struct Band {
    lo: Option<Affine>,
    hi: Option<Affine>,
}

/// `p` as a band of `u` around `r`: a comparison, or a conjunction of
/// them, each between `u` and `r` with coefficients 1 and -1 and nothing
/// in `avoid`, at most one lower and one upper bound in all.
fn band(p: &Pred, r: Symbol, u: Symbol, avoid: &[Symbol]) -> Option<Band> {
    let cmps: Vec<&Pred> = match p {
        Pred::And(ps) => ps.iter().collect(),
        _ => vec![p],
    };
    let mut b = Band { lo: None, hi: None };
    for q in cmps {
        let Pred::Cmp(op, x, y) = q else {
            return None;
        };
        let d = x.sub(y).ok()?;
        let cu = d.coeff(u);
        if cu.abs() != 1 || d.coeff(r) != -cu || avoid.iter().any(|a| d.mentions(*a)) {
            return None;
        }
        let zero = Affine::constant(0);
        let rest = d.substitute(u, &zero).ok()?.substitute(r, &zero).ok()?;
        // cu = 1: `u - r + rest OP 0`, u OP r - rest; cu = -1: u OP' r + rest.
        let (op, off) = if cu == 1 {
            (*op, rest.scale(-1).ok()?)
        } else {
            (mirror(*op), rest)
        };
        let next = off.add_constant(1).ok()?;
        let (lo, hi) = match op {
            CmpOp::Le => (None, Some(next)),
            CmpOp::Lt => (None, Some(off)),
            CmpOp::Ge => (Some(off), None),
            CmpOp::Gt => (Some(next), None),
            CmpOp::Eq => (Some(off), Some(next)),
        };
        for (have, new) in [(&mut b.lo, lo), (&mut b.hi, hi)] {
            if new.is_some() {
                if have.is_some() {
                    return None;
                }
                *have = new;
            }
        }
    }
    Some(b)
}

/// The comparison with its operands swapped.
fn mirror(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Ge => CmpOp::Le,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Eq => CmpOp::Eq,
    }
}

/// How a contraction is confined: not at all, to a band of the output
/// (`j` around `i`), or each element to a band of its terms (`k` around
/// `i`, or around `j`).
enum Kind {
    Plain,
    Out(Band),
    Rows(Band),
    Cols(Band),
}

/// The kind of the contraction `c`, under the bracket `outer` (if any)
/// of the gen's body.
fn kind(i: Symbol, j: Symbol, c: &Parts, outer: Option<&Pred>) -> Option<Kind> {
    match (outer, c.bracket) {
        (None, None) => Some(Kind::Plain),
        (Some(p), None) => band(p, i, j, &[c.k]).map(Kind::Out),
        (None, Some(p)) => band(p, i, c.k, &[j])
            .map(Kind::Rows)
            .or_else(|| band(p, j, c.k, &[i]).map(Kind::Cols)),
        (Some(_), Some(_)) => None,
    }
}

/// The candidate sums of a gen's body, each with the bracket it is under:
/// reached through `+`, `*`, `max`/`min`, calls and at most one bracket.
fn sites<'a>(e: &'a Expr, outer: Option<&'a Pred>, out: &mut Vec<(&'a Expr, Option<&'a Pred>)>) {
    match e {
        Expr::Sum(..) => out.push((e, outer)),
        Expr::Add(a, b) | Expr::Mul(a, b) | Expr::MaxMin(_, a, b) => {
            sites(a, outer, out);
            sites(b, outer, out);
        }
        Expr::Call(_, a) => sites(a, outer, out),
        Expr::Iverson(p, a) if outer.is_none() => sites(a, Some(p), out),
        _ => {}
    }
}

/// `e` with the given sites (by address, among those [`sites`] reaches)
/// replaced.
fn replace_sites(e: &Expr, repl: &[(*const Expr, Expr)]) -> Expr {
    if let Some((_, r)) = repl.iter().find(|(p, _)| std::ptr::eq(*p, e)) {
        return r.clone();
    }
    let r = |a: &Expr| Box::new(replace_sites(a, repl));
    match e {
        Expr::Add(a, b) => Expr::Add(r(a), r(b)),
        Expr::Mul(a, b) => Expr::Mul(r(a), r(b)),
        Expr::MaxMin(m, a, b) => Expr::MaxMin(*m, r(a), r(b)),
        Expr::Call(f, a) => Expr::Call(*f, r(a)),
        Expr::Iverson(p, a) => Expr::Iverson(p.clone(), r(a)),
        _ => e.clone(),
    }
}

/// Does `e`, a `gen` of a `gen`, have the shape of a contraction (a sum
/// that [`sites`] reaches, of a shape and kind the kernels take)? Fusion
/// leaves such gens to [`Lowerer::store_contraction`]. With `plain`, only
/// contractions without a bracket count.
fn contraction_shape(e: &Expr, plain: bool) -> bool {
    let Expr::Gen(i, _, inner) = e else {
        return false;
    };
    let Expr::Gen(j, _, body) = &**inner else {
        return false;
    };
    let mut found = vec![];
    sites(body, None, &mut found);
    found.iter().any(|(s, outer)| {
        contraction_sum(*i, *j, s).is_some_and(|c| match kind(*i, *j, &c, *outer) {
            Some(Kind::Plain) => true,
            Some(_) => !plain,
            None => false,
        })
    })
}

/// Whether `e` is a contraction, bracketed or not ([`contraction_shape`]).
pub(super) fn is_contraction(e: &Expr) -> bool {
    contraction_shape(e, false)
}

/// Whether `e` is a contraction without a bracket.
pub(super) fn is_plain_contraction(e: &Expr) -> bool {
    contraction_shape(e, true)
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
        let mut found = vec![];
        sites(body, None, &mut found);
        let whole = matches!(dest, V::Leaf { dims, conds, .. }
            if dims.len() == 2 && dims[0] == *di && dims[1] == *dj && conds.is_empty());
        let mut repl = vec![];
        for (s, outer) in found {
            let Some((kind, a, b, dk)) = self.kernel_site(*i, di, *j, dj, s, outer)? else {
                continue;
            };
            let into_dest = whole && outer.is_none() && std::ptr::eq(s, &**body);
            // A body that calls a function of the sum, `relu(Σ ...)`, has
            // the product computed into the destination itself and the
            // function applied there: each element is read only where it is
            // then written.
            let call_of_sum = whole
                && outer.is_none()
                && matches!(&**body, Expr::Call(_, a) if std::ptr::eq(&**a, s));
            // `relu` of a plain product is applied by the kernel itself, to
            // each tile of the destination as its sums are complete.
            let relu_of_sum = call_of_sum
                && matches!(kind, Kind::Plain)
                && matches!(&**body, Expr::Call(f, _) if *f == Func::named("relu"));
            let (out, csi) = match dest {
                V::Leaf { buf, off, dims, .. } if into_dest || call_of_sum => {
                    let base = if off == "0" {
                        buf.clone()
                    } else {
                        format!("{buf} + {off}")
                    };
                    if call_of_sum && !relu_of_sum {
                        let read = self.product_read(*i, di, *j, dj, dest.clone());
                        repl.push((s as *const Expr, read));
                    }
                    (base, self.dim(&dims[1])?)
                }
                _ => {
                    let (t, read) = self.product_slot(*i, di, *j, dj)?;
                    repl.push((s as *const Expr, read));
                    (t, self.dim(dj)?)
                }
            };
            let line = self.kernel_line(&kind, relu_of_sum, &out, &csi, &a, &b, [di, dj, dk])?;
            self.line(line);
            if into_dest || relu_of_sum {
                return Ok(true);
            }
        }
        if repl.is_empty() {
            return Ok(false);
        }
        let body = replace_sites(body, &repl);
        let rest = Expr::Gen(*j, dj.clone(), Box::new(body));
        self.store_gen(*i, di, &rest, dest)?;
        Ok(true)
    }

    /// A candidate sum `s` of the body of `(gen i di (gen j dj ...))`, under
    /// the bracket `outer`, as the kernel runs it: its kind, its operands
    /// (the factor reading `i`, then the one reading `j`) and its summed
    /// extent. `None` when it does not qualify.
    #[allow(clippy::type_complexity)]
    fn kernel_site<'a>(
        &mut self,
        i: Symbol,
        di: &Affine,
        j: Symbol,
        dj: &Affine,
        s: &'a Expr,
        outer: Option<&Pred>,
    ) -> Result<Option<(Kind, Operand, Operand, &'a Affine)>> {
        let Some(c) = contraction_sum(i, j, s) else {
            return Ok(None);
        };
        let Some(kind) = kind(i, j, &c, outer) else {
            return Ok(None);
        };
        let Some(a) = self.operand(c.x, i, di, c.dk)? else {
            return Ok(None);
        };
        let Some(b) = self.operand(c.y, j, dj, c.dk)? else {
            return Ok(None);
        };
        Ok(Some((kind, a, b, c.dk)))
    }

    /// The kernel call that stores the contraction of kind `kind` of the
    /// operands `a` (rows) and `b` (columns) into `out` (rows `csi` apart),
    /// its extents `[rows, columns, summed]`; with `relu`, relu of it.
    #[allow(clippy::too_many_arguments)]
    fn kernel_line(
        &mut self,
        kind: &Kind,
        relu: bool,
        out: &str,
        csi: &str,
        a: &Operand,
        b: &Operand,
        dims: [&Affine; 3],
    ) -> Result<String> {
        let (ni, nj, nk) = (self.dim(dims[0])?, self.dim(dims[1])?, self.dim(dims[2])?);
        let (ab, bb) = (&a.base, &b.base);
        Ok(match kind {
            Kind::Plain => format!(
                "atlh_gemm{}({out}, {csi}, 1, {ni}, {nj}, {nk}, {ab}, {}, {}, {bb}, {}, {});",
                if relu { "_relu" } else { "" },
                a.s_gen,
                a.s_sum,
                b.s_sum,
                b.s_gen
            ),
            Kind::Out(band) => format!(
                "atlh_gemm_band({out}, {csi}, 1, {ni}, {nj}, {nk}, {ab}, {}, {}, {bb}, {}, {}, {}, 1);",
                a.s_gen,
                a.s_sum,
                b.s_sum,
                b.s_gen,
                self.band_args(band, &ni, &nj)?
            ),
            Kind::Rows(band) => format!(
                "atlh_gemm_band({out}, {csi}, 1, {ni}, {nj}, {nk}, {ab}, {}, {}, {bb}, {}, {}, {}, 0);",
                a.s_gen,
                a.s_sum,
                b.s_sum,
                b.s_gen,
                self.band_args(band, &ni, &nk)?
            ),
            // The transpose: rows j, columns i, `y` as the left factor.
            Kind::Cols(band) => format!(
                "atlh_gemm_band({out}, 1, {csi}, {nj}, {ni}, {nk}, {bb}, {}, {}, {ab}, {}, {}, {}, 0);",
                b.s_gen,
                b.s_sum,
                a.s_sum,
                a.s_gen,
                self.band_args(band, &nj, &nk)?
            ),
        })
    }

    /// A let's value `e0`, `(gen i di (gen j dj body))`, whose contractions
    /// all sit inside its body (none is the body or the argument of a call
    /// that is, which [`Self::store_contraction`] stores into the let's
    /// own slot): each is run by the kernel into a fresh slot now, and the
    /// gen reading them is returned, to be bound as any other gen (so that
    /// row fusion may take it: attention's `exp` of the scores and their
    /// row sums in one pass while each row is in cache). `None`: nothing
    /// emitted.
    pub(crate) fn contractions_to_slots(&mut self, e0: &Expr) -> Result<Option<Expr>> {
        let Expr::Gen(i, di, inner) = e0 else {
            return Ok(None);
        };
        let Expr::Gen(j, dj, body) = &**inner else {
            return Ok(None);
        };
        let mut found = vec![];
        sites(body, None, &mut found);
        let mut calls = vec![];
        for (s, outer) in found {
            let Some((kind, a, b, dk)) = self.kernel_site(*i, di, *j, dj, s, outer)? else {
                continue;
            };
            let whole_or_call = std::ptr::eq(s, &**body)
                || matches!(&**body, Expr::Call(_, a) if std::ptr::eq(&**a, s));
            if outer.is_none() && whole_or_call {
                return Ok(None);
            }
            calls.push((s, kind, a, b, dk));
        }
        if calls.is_empty() {
            return Ok(None);
        }
        let mut repl = vec![];
        for (s, kind, a, b, dk) in calls {
            let (t, read) = self.product_slot(*i, di, *j, dj)?;
            let csi = self.dim(dj)?;
            let line = self.kernel_line(&kind, false, &t, &csi, &a, &b, [di, dj, dk])?;
            self.line(line);
            repl.push((s as *const Expr, read));
        }
        let body = replace_sites(body, &repl);
        Ok(Some(Expr::Gen(
            *i,
            di.clone(),
            Box::new(Expr::Gen(*j, dj.clone(), Box::new(body))),
        )))
    }

    /// A fresh `di×dj` slot for a product and its read at `[i][j]`.
    fn product_slot(
        &mut self,
        i: Symbol,
        di: &Affine,
        j: Symbol,
        dj: &Affine,
    ) -> Result<(String, Expr)> {
        let t = self.slot("mm", &[di.clone(), dj.clone()])?;
        let at = V::leaf(t.clone(), vec![di.clone(), dj.clone()]);
        Ok((t, self.product_read(i, di, j, dj, at)))
    }

    /// The read `mm[i][j]` of a product held at `at`, a fresh name bound
    /// to it.
    fn product_read(&mut self, i: Symbol, di: &Affine, j: Symbol, dj: &Affine, at: V) -> Expr {
        let sym = self.internal_symbol("mm");
        self.vals.insert(sym, at);
        let ty = Type::Tensor(
            di.clone(),
            Box::new(Type::Tensor(dj.clone(), Box::new(Type::Real))),
        );
        self.tenv.insert(sym, ty);
        Expr::Get(
            Box::new(Expr::Get(Box::new(Expr::Var(sym)), Affine::var(i))),
            Affine::var(j),
        )
    }

    /// The `lo, hi` arguments of `atlh_gemm_band` for a band of rows
    /// `[0, rows)` and other indices `[0, extent)`: a missing bound is one
    /// that every row passes.
    fn band_args(&mut self, band: &Band, rows: &str, extent: &str) -> Result<String> {
        let lo = match &band.lo {
            Some(a) => format!("({})", self.aff(a)?),
            None => format!("-({rows})"),
        };
        let hi = match &band.hi {
            Some(a) => format!("({})", self.aff(a)?),
            None => format!("({extent})"),
        };
        Ok(format!("{lo}, {hi}"))
    }
}
