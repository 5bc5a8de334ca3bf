//! Values during lowering: a scalar C expression, or views of tensor
//! leaves (a buffer, an offset, the remaining dimensions and the range
//! conditions under which the view is not zero), or pairs of those.

use super::Lowerer;
use crate::constraints::LinForm;
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{Expr, Type};
use crate::symbol::Symbol;

use super::ir::Stmt;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum V {
    /// A `double` C expression (pure and cheap: a literal, a local, a read).
    Scalar(String),
    /// `buf[off ...]` with `dims` left; reads zero unless all `conds` hold.
    Leaf {
        buf: String,
        off: String,
        dims: Vec<Affine>,
        conds: Vec<String>,
    },
    Pair(Box<V>, Box<V>),
    /// A relation parameter (its compressed layout).
    Rel {
        buf: String,
        dims: Vec<Affine>,
    },
    /// A tensor parameter stored by the pattern of the relation `rel`
    /// (`vals`: one value per stored tuple, in the layout's order), of
    /// dimensions `dims`, with the indices `args` applied so far (each as
    /// written and as C) and the range conditions `conds` (zero unless
    /// they hold). Fully applied it is a read ([`super::stored`]).
    Stored {
        vals: String,
        rel: Symbol,
        dims: Vec<Affine>,
        args: Vec<(Affine, String)>,
        conds: Vec<String>,
    },
    /// A result leaf stored by the pattern of `rel` (a place of one value
    /// per stored tuple of `dims`' tensor), written by [`super::stored`].
    StoredOut {
        buf: String,
        rel: Symbol,
        dims: Vec<Affine>,
    },
    /// A `gen` chain whose body does no arithmetic (a copy, a shift, a
    /// bracketed read): not materialized, each read evaluates the body at
    /// its indices. `args` are the index forms applied so far (over index
    /// variables and sizes), `conds` their range conditions, `ty` the type
    /// of the unapplied rest.
    Lazy {
        params: Vec<(Symbol, Affine)>,
        args: Vec<LinForm>,
        conds: Vec<String>,
        body: Box<Expr>,
        ty: Type,
    },
}

fn mismatch(what: &str) -> Error {
    Error::eval(format!(
        "lowering: {what} of a value of the wrong type (internal error)"
    ))
}

impl V {
    pub(crate) fn pair(a: V, b: V) -> V {
        V::Pair(Box::new(a), Box::new(b))
    }

    pub(crate) fn leaf(buf: String, dims: Vec<Affine>) -> V {
        V::Leaf {
            buf,
            off: "0".into(),
            dims,
            conds: vec![],
        }
    }

    pub(crate) fn relation(buf: String, dims: Vec<Affine>) -> V {
        V::Rel { buf, dims }
    }

    pub(crate) fn split_pair(&self) -> Result<(V, V)> {
        match self {
            V::Lazy { .. } => Err(mismatch("projection of an unmaterialized view")),
            V::Pair(a, b) => Ok(((**a).clone(), (**b).clone())),
            _ => Err(mismatch("projection")),
        }
    }

    pub(crate) fn is_scalar_place(&self) -> bool {
        matches!(self, V::Leaf { dims, .. } if dims.is_empty())
    }

    fn stride(dims: &[Affine], lw: &mut Lowerer) -> Result<String> {
        let mut parts = vec![];
        for d in dims {
            parts.push(lw.dim(d)?);
        }
        Ok(if parts.is_empty() {
            "1".into()
        } else {
            parts.join("*")
        })
    }

    fn offset(off: &str, idx: &str, stride: &str) -> String {
        let term = if stride == "1" {
            idx.to_string()
        } else {
            format!("{idx}*{stride}")
        };
        if off == "0" {
            term
        } else {
            format!("{off} + {term}")
        }
    }

    /// `(get self i)`: zero out of range.
    pub(crate) fn index(&self, i: &Affine, lw: &mut Lowerer) -> Result<V> {
        Ok(match self {
            V::Lazy {
                params,
                args,
                conds,
                body,
                ty,
            } => {
                let k = args.len();
                let form = LinForm::from_affine(i);
                let idx = lw.ix(&form)?;
                let mut conds = conds.clone();
                let in_range = i.constant == 0
                    && i.terms.len() == 1
                    && i.terms[0].1 == 1
                    && lw.full_range.get(&i.terms[0].0) == Some(&params[k].1);
                if !in_range {
                    let d = lw.dim(&params[k].1)?;
                    conds.push(lw.range_cond(i, &idx, &d));
                }
                let mut args = args.clone();
                args.push(lw.expand(&form)?);
                let ty = match ty {
                    Type::Tensor(_, t) => (**t).clone(),
                    _ => return Err(mismatch("get")),
                };
                let lazy = V::Lazy {
                    params: params.clone(),
                    args,
                    conds,
                    body: body.clone(),
                    ty,
                };
                if k + 1 == params.len() {
                    lazy.force(lw)?
                } else {
                    lazy
                }
            }
            V::Pair(a, b) => V::pair(a.index(i, lw)?, b.index(i, lw)?),
            V::Stored { .. } => lw.stored_index(self, i)?,
            V::Leaf {
                buf,
                off,
                dims,
                conds,
            } if !dims.is_empty() => {
                let idx = lw.aff(i)?;
                let stride = V::stride(&dims[1..], lw)?;
                let mut conds = conds.clone();
                let in_range = i.constant == 0
                    && i.terms.len() == 1
                    && i.terms[0].1 == 1
                    && lw.full_range.get(&i.terms[0].0) == Some(&dims[0]);
                if !in_range {
                    let d = lw.dim(&dims[0])?;
                    conds.push(lw.range_cond(i, &idx, &d));
                }
                if off == "0" {
                    lw.note_gather(&idx, buf, &stride);
                }
                V::Leaf {
                    buf: buf.clone(),
                    off: V::offset(off, &idx, &stride),
                    dims: dims[1..].to_vec(),
                    conds,
                }
            }
            _ => return Err(mismatch("get")),
        })
    }

    /// A fully applied lazy view: its body at the applied indices (zero
    /// where a range condition fails).
    fn force(&self, lw: &mut Lowerer) -> Result<V> {
        let V::Lazy {
            params,
            args,
            conds,
            body,
            ..
        } = self
        else {
            return Ok(self.clone());
        };
        let saved: Vec<(Symbol, Option<LinForm>, Option<Affine>)> = params
            .iter()
            .zip(args)
            .map(|((i, _), a)| {
                (
                    *i,
                    lw.lazy_args.insert(*i, a.clone()),
                    lw.full_range.remove(i),
                )
            })
            .collect();
        let v = lw.val(body, "z");
        for (i, n, r) in saved.into_iter().rev() {
            match n {
                Some(n) => lw.lazy_args.insert(i, n),
                None => lw.lazy_args.remove(&i),
            };
            if let Some(r) = r {
                lw.full_range.insert(i, r);
            }
        }
        let v = v?;
        if conds.is_empty() {
            return Ok(v);
        }
        v.guarded(conds, lw)
    }

    /// This value where `conds` hold, zero elsewhere.
    pub(crate) fn guarded(self, conds: &[String], lw: &mut Lowerer) -> Result<V> {
        Ok(match self {
            V::Pair(a, b) => V::pair(a.guarded(conds, lw)?, b.guarded(conds, lw)?),
            V::Leaf {
                buf,
                off,
                dims,
                conds: mut c,
            } => {
                c.extend(conds.iter().cloned());
                V::Leaf {
                    buf,
                    off,
                    dims,
                    conds: c,
                }
            }
            V::Scalar(x) => {
                // A statement, not a `?:` around `x`: views of views nest
                // this to any depth, the C expression must not.
                let t = lw.fresh("g", "");
                lw.decl("double", &t, "0.0".into());
                lw.out.push(Stmt::If {
                    cond: conds.join(" && "),
                    then: vec![Stmt::Line(format!("{t} = {x};"))],
                    els: vec![],
                });
                V::Scalar(t)
            }
            V::Stored {
                vals,
                rel,
                dims,
                args,
                conds: mut c,
            } => {
                c.extend(conds.iter().cloned());
                V::Stored {
                    vals,
                    rel,
                    dims,
                    args,
                    conds: c,
                }
            }
            v @ V::Lazy { .. } => {
                let m = v.materialize(lw)?;
                m.guarded(conds, lw)?
            }
            V::Rel { .. } | V::StoredOut { .. } => return Err(mismatch("bracket")),
        })
    }

    /// A lazy view written into a fresh place (other values unchanged).
    pub(crate) fn materialize(&self, lw: &mut Lowerer) -> Result<V> {
        if let V::Stored { dims, args, .. } = self {
            let place = V::leaf(
                lw.slot("view", &dims[args.len()..])?,
                dims[args.len()..].to_vec(),
            );
            self.force_into(&place, lw)?;
            return Ok(place);
        }
        let V::Lazy { ty, .. } = self else {
            return Ok(self.clone());
        };
        let place = lw.place("view", ty)?;
        self.force_into(&place, lw)?;
        Ok(place)
    }

    /// Write a lazy view into `dest`, element by element.
    fn force_into(&self, dest: &V, lw: &mut Lowerer) -> Result<()> {
        let d = match self {
            V::Lazy { params, args, .. } => &params[args.len()].1,
            V::Stored { dims, args, .. } => &dims[args.len()],
            _ => return self.copy_into(dest, lw),
        };
        let dn = lw.dim(d)?;
        let iv = lw.fresh("k", "");
        let (body, ()) = lw.block(|lw| {
            let idx_sym = lw.internal_symbol("k");
            lw.names.insert(idx_sym, iv.clone());
            lw.ranges.insert(idx_sym, dn.clone());
            lw.full_range.insert(idx_sym, d.clone());
            let inner = self.index(&Affine::var(idx_sym), lw)?;
            let place = dest.index_unchecked(&iv, lw)?;
            let r = inner.copy_into(&place, lw);
            lw.names.remove(&idx_sym);
            lw.ranges.remove(&idx_sym);
            lw.full_range.remove(&idx_sym);
            r
        })?;
        lw.out.push(Stmt::For {
            var: iv,
            lo: "0".into(),
            hi: dn,
            body,
        });
        Ok(())
    }

    /// Index a place by a loop variable over exactly its first dimension.
    pub(crate) fn index_unchecked(&self, iv: &str, lw: &mut Lowerer) -> Result<V> {
        Ok(match self {
            V::Pair(a, b) => V::pair(a.index_unchecked(iv, lw)?, b.index_unchecked(iv, lw)?),
            V::Leaf {
                buf,
                off,
                dims,
                conds,
            } if !dims.is_empty() => V::Leaf {
                buf: buf.clone(),
                off: V::offset(off, iv, &V::stride(&dims[1..], lw)?),
                dims: dims[1..].to_vec(),
                conds: conds.clone(),
            },
            _ => return Err(mismatch("gen store")),
        })
    }

    pub(crate) fn as_scalar(&self, _lw: &mut Lowerer) -> Result<String> {
        Ok(match self {
            V::Scalar(s) => s.clone(),
            V::Leaf {
                buf,
                off,
                dims,
                conds,
            } if dims.is_empty() => {
                if conds.is_empty() {
                    format!("{buf}[{off}]")
                } else {
                    format!("(({}) ? {buf}[{off}] : 0.0)", conds.join(" && "))
                }
            }
            _ => return Err(mismatch("scalar use")),
        })
    }

    /// Write this value into the place `dest`.
    pub(crate) fn copy_into(&self, dest: &V, lw: &mut Lowerer) -> Result<()> {
        if let V::Lazy { .. } | V::Stored { .. } = self {
            return self.force_into(dest, lw);
        }
        match dest {
            V::Pair(a, b) => {
                let (x, y) = self.split_pair()?;
                x.copy_into(a, lw)?;
                y.copy_into(b, lw)
            }
            V::Leaf { buf, off, dims, .. } if dims.is_empty() => {
                let x = self.as_scalar(lw)?;
                lw.line(format!("{buf}[{off}] = {x};"));
                Ok(())
            }
            V::Leaf {
                buf: dbuf,
                off: doff,
                dims: ddims,
                ..
            } => match self {
                V::Leaf {
                    buf, off, conds, ..
                } => {
                    let total = V::stride(ddims, lw)?;
                    let k = lw.fresh("k", "");
                    let body = vec![Stmt::Line(format!(
                        "{dbuf}[{}] = {buf}[{}];",
                        V::offset(doff, &k, "1"),
                        V::offset(off, &k, "1")
                    ))];
                    let copy = Stmt::For {
                        var: k,
                        lo: "0".into(),
                        hi: total,
                        body,
                    };
                    if conds.is_empty() {
                        lw.out.push(copy);
                    } else {
                        let (els, ()) = lw.block(|lw| dest.zero_fill(lw))?;
                        lw.out.push(Stmt::If {
                            cond: conds.join(" && "),
                            then: vec![copy],
                            els,
                        });
                    }
                    Ok(())
                }
                _ => Err(mismatch("tensor copy")),
            },
            _ => Err(mismatch("store")),
        }
    }

    /// Write zeros into every element of the place.
    pub(crate) fn zero_fill(&self, lw: &mut Lowerer) -> Result<()> {
        match self {
            V::Pair(a, b) => {
                a.zero_fill(lw)?;
                b.zero_fill(lw)
            }
            V::Leaf { buf, off, dims, .. } if dims.is_empty() => {
                lw.line(format!("{buf}[{off}] = 0.0;"));
                Ok(())
            }
            V::Leaf { buf, off, dims, .. } => {
                let total = V::stride(dims, lw)?;
                let k = lw.fresh("k", "");
                lw.out.push(Stmt::For {
                    var: k.clone(),
                    lo: "0".into(),
                    hi: total,
                    body: vec![Stmt::Line(format!(
                        "{buf}[{}] = 0.0;",
                        V::offset(off, &k, "1")
                    ))],
                });
                Ok(())
            }
            V::StoredOut { buf, rel, .. } => {
                let k = lw.fresh("k", "");
                let nnz = format!("{}[1]", lw.stored_layout(*rel)?);
                lw.out.push(Stmt::For {
                    var: k.clone(),
                    lo: "0".into(),
                    hi: nnz,
                    body: vec![Stmt::Line(format!("{buf}[{k}] = 0.0;"))],
                });
                Ok(())
            }
            _ => Err(mismatch("zero fill")),
        }
    }

    /// `(R a ...)` on a relation: false out of range; a binary search in
    /// the compressed layout.
    pub(crate) fn test(&self, args: &[Affine], lw: &mut Lowerer) -> Result<String> {
        let V::Rel { buf, dims } = self else {
            return Err(mismatch("relation test"));
        };
        if args.len() != dims.len() {
            return Ok("0".into());
        }
        if args.is_empty() {
            return Ok(format!("({buf}[1] > 0)"));
        }
        let mut idxs = vec![];
        let mut conds = vec![];
        for (a, d) in args.iter().zip(dims) {
            let idx = lw.aff(a)?;
            let dn = lw.dim(d)?;
            // As for `get`: no test for a loop variable over exactly this range.
            let in_range = a.constant == 0
                && a.terms.len() == 1
                && a.terms[0].1 == 1
                && lw.full_range.get(&a.terms[0].0) == Some(d);
            if !in_range {
                conds.push(format!("0 <= {idx} && {idx} < {dn}"));
            }
            idxs.push(idx);
        }
        if conds.is_empty() {
            if let Some(m) = lw.rel_mask(buf, dims, args)? {
                let mut at = idxs[0].clone();
                for (x, d) in idxs.iter().zip(dims).skip(1) {
                    at = format!("({at})*{} + ({x})", lw.dim(d)?);
                }
                return Ok(format!("ATL_TEST({m}[{at}] != 0.0)"));
            }
        }
        if let Some(t) = lw.cursor_test(buf, dims, args)? {
            return Ok(t);
        }
        let has = format!("ATL_REL_HAS({buf}, {}, {})", idxs.len(), idxs.join(", "));
        Ok(if conds.is_empty() {
            has
        } else {
            format!("(({}) && {has})", conds.join(" && "))
        })
    }
}
