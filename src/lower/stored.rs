//! Tensors stored by a relation's pattern in compiled code. A stored
//! parameter arrives as its values alone, one per stored tuple of the
//! relation, in the order of the relation's layout
//! ([`crate::backend::marshal::compressed_layout`]: row-major); nothing of
//! the size of its dimensions' product is allocated for it.
//!
//! * A read `A[i][j]` whose indices are the variables of loops driven by
//!   the relation's own layout ([`super::relation`]; a bound prefix located
//!   before them counts) is a load at the innermost loop's position: the
//!   stored tuple the loops stand on is the value's.
//! * Any other read looks the tuple up in the layout (a binary search per
//!   level, counted as one predicate test) and reads zero off the pattern.
//! * A stored result leaf is one value per tuple too. A `gen` chain over
//!   all its dimensions is stored by a loop nest driven by the relation
//!   (the bracket `(S i j)`, conjoined with the element's own bracket),
//!   which writes the element at each tuple's position: the work is the
//!   tuples'. Any other expression is computed dense into the arena and
//!   gathered at the tuples. In a fused loop over its first dimension
//!   ([`super::fuse`]) such a chain is stored a row at a time, and may
//!   share its walk of the row's tuples with a reduction over them.

use super::sum::Acc;
use super::value::V;
use super::Lowerer;
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{Expr, Pred};
use crate::symbol::Symbol;
use crate::terms::brackets::conjuncts;

impl Lowerer {
    /// The C name of the layout of the relation parameter `rel`.
    pub(crate) fn stored_layout(&self, rel: Symbol) -> Result<String> {
        match self.vals.get(&rel) {
            Some(V::Rel { buf, .. }) => Ok(buf.clone()),
            _ => Err(Error::eval(format!(
                "lowering: the relation {rel} storing a tensor is not a parameter (internal error)"
            ))),
        }
    }

    /// `(get v i)` of a stored tensor `v` (a [`V::Stored`]): the index is
    /// recorded (with its range condition); with the last one, the read.
    pub(crate) fn stored_index(&mut self, v: &V, i: &Affine) -> Result<V> {
        let V::Stored {
            vals,
            rel,
            dims,
            args,
            conds,
        } = v
        else {
            return Err(Error::eval(
                "lowering: not a stored tensor (internal error)",
            ));
        };
        let k = args.len();
        let idx = self.aff(i)?;
        let mut conds = conds.clone();
        let in_range = i.constant == 0
            && i.terms.len() == 1
            && i.terms[0].1 == 1
            && self.full_range.get(&i.terms[0].0) == Some(&dims[k]);
        if !in_range {
            let d = self.dim(&dims[k])?;
            conds.push(format!("0 <= {idx} && {idx} < {d}"));
        }
        let mut args = args.clone();
        args.push((i.clone(), idx));
        if args.len() < dims.len() {
            return Ok(V::Stored {
                vals: vals.clone(),
                rel: *rel,
                dims: dims.clone(),
                args,
                conds,
            });
        }
        let layout = self.stored_layout(*rel)?;
        let forms: Vec<Affine> = args.iter().map(|a| a.0.clone()).collect();
        if let Some(p) = self.driven_tuple_position(&layout, &forms) {
            return Ok(V::Leaf {
                buf: vals.clone(),
                off: p,
                dims: vec![],
                conds,
            });
        }
        let idxs: Vec<&str> = args.iter().map(|a| a.1.as_str()).collect();
        let lookup = format!(
            "ATL_STORED_AT({layout}, {vals}, {}, {})",
            idxs.len(),
            idxs.join(", ")
        );
        let t = self.fresh("s", "");
        let init = if conds.is_empty() {
            lookup
        } else {
            format!("({}) ? {lookup} : 0.0", conds.join(" && "))
        };
        self.decl("const double", &t, init);
        Ok(V::Scalar(t))
    }

    /// Store `e` into the stored result leaf `dest` (a [`V::StoredOut`]).
    pub(crate) fn store_stored(&mut self, e: &Expr, dest: &V) -> Result<()> {
        let V::StoredOut { buf, rel, dims } = dest else {
            return Err(Error::eval(
                "lowering: not a stored result (internal error)",
            ));
        };
        let mut chain: Vec<(Symbol, &Affine)> = vec![];
        let mut x = e;
        while let Expr::Gen(i, d, b) = x {
            chain.push((*i, d));
            x = b;
        }
        let vars: Vec<Symbol> = chain.iter().map(|c| c.0).collect();
        let distinct = (1..vars.len()).all(|k| !vars[..k].contains(&vars[k]));
        if chain.len() == dims.len() && distinct {
            let atom = Pred::Rel(*rel, vars.iter().map(|v| Affine::var(*v)).collect());
            let (mut ps, body) = match x {
                Expr::Iverson(p, b) => (
                    conjuncts(p)
                        .into_iter()
                        .filter(|q| **q != atom)
                        .cloned()
                        .collect::<Vec<_>>(),
                    &**b,
                ),
                _ => (vec![], x),
            };
            // The loops visit every stored tuple, and store each one's
            // value, when the bracket is the relation alone over its whole
            // extent: no element stays zero, so none is zeroed first.
            let covers = ps.is_empty()
                && !matches!(body, Expr::Iverson(..))
                && chain.iter().zip(dims).all(|((_, d), a)| *d == a);
            ps.insert(0, atom);
            let p = Pred::And(ps);
            if !covers {
                dest.zero_fill(self)?;
            }
            let acc = Acc::Store {
                dest: dest.clone(),
                gens: vars,
            };
            return self.loop_nest(chain, Some(&p), body, &acc);
        }
        // Not elementwise: dense into the arena, then gathered.
        let dense = V::leaf(self.slot("dense", dims)?, dims.clone());
        self.store(e, &dense)?;
        let V::Leaf { buf: d, .. } = &dense else {
            return Err(Error::eval("lowering: a dense place (internal error)"));
        };
        let layout = self.stored_layout(*rel)?;
        let mut dn = vec![];
        for a in dims {
            dn.push(self.dim(a)?);
        }
        self.line(format!(
            "atlh_rel_gather({layout}, (const int64_t[]){{{}}}, 0, 0, 0, {d}, {buf});",
            dn.join(", ")
        ));
        Ok(())
    }

    /// One row of a stored result leaf in a fused loop over its first
    /// dimension (`v`, bound to the loop): `body` is the leaf's gen over
    /// `v`'s body, `(gen j m ... (iverson (S v j ...) e))` (see
    /// `stored_rows` in [`super::fuse`]); the row's tuples are walked by the
    /// relation's layout below `v` and each one's value stored.
    ///
    /// With `also` (a summand over the same tuples and its row
    /// accumulator), each tuple's value is stored and then the summand
    /// added into the row, in one walk.
    pub(crate) fn store_stored_row(
        &mut self,
        v: Symbol,
        body: &Expr,
        dest: &V,
        also: Option<(Expr, Acc)>,
    ) -> Result<()> {
        let V::StoredOut { rel, .. } = dest else {
            return Err(Error::eval(
                "lowering: not a stored result (internal error)",
            ));
        };
        let mut chain: Vec<(Symbol, &Affine)> = vec![];
        let mut x = body;
        while let Expr::Gen(i, d, b) = x {
            chain.push((*i, d));
            x = b;
        }
        let Expr::Iverson(_, e) = x else {
            return Err(Error::eval(
                "lowering: a stored row without its bracket (internal error)",
            ));
        };
        let mut gens = vec![v];
        gens.extend(chain.iter().map(|c| c.0));
        let atom = Pred::Rel(*rel, gens.iter().map(|g| Affine::var(*g)).collect());
        let acc = Acc::Store {
            dest: dest.clone(),
            gens,
        };
        match also {
            None => self.loop_nest(chain, Some(&atom), e, &acc),
            Some((e2, acc2)) => {
                let both = Expr::Pair(e.clone(), Box::new(e2));
                let acc = Acc::Both(Box::new(acc), Box::new(acc2));
                self.loop_nest(chain, Some(&atom), &both, &acc)
            }
        }
    }

    /// The element of the stored result `dest` at the point of a `gen`
    /// chain over it (variables `gens`, loops open): its tuple's position,
    /// the innermost driven loop's or looked up. The chain runs only where
    /// the relation holds ([`Self::store_stored`]), so the tuple is stored.
    pub(crate) fn stored_out_at(&mut self, dest: &V, gens: &[Symbol]) -> Result<V> {
        let V::StoredOut { buf, rel, .. } = dest else {
            return Err(Error::eval(
                "lowering: not a stored result (internal error)",
            ));
        };
        let layout = self.stored_layout(*rel)?;
        let forms: Vec<Affine> = gens.iter().map(|g| Affine::var(*g)).collect();
        let off = match self.driven_tuple_position(&layout, &forms) {
            Some(p) => p,
            None => {
                let mut idxs = vec![];
                for f in &forms {
                    idxs.push(self.aff(f)?);
                }
                let p = self.fresh("p", "");
                self.decl(
                    "const int64_t",
                    &p,
                    format!(
                        "atlh_rel_at({layout}, {}, (const int64_t[]){{{}}})",
                        idxs.len(),
                        idxs.join(", ")
                    ),
                );
                p
            }
        };
        Ok(V::Leaf {
            buf: buf.clone(),
            off,
            dims: vec![],
            conds: vec![],
        })
    }
}

/// Is `dest` a stored result leaf?
pub(crate) fn is_stored_out(dest: &V) -> bool {
    matches!(dest, V::StoredOut { .. })
}

/// Has the place `dest` a stored result leaf (which a contraction's
/// kernel, writing dense tiles, cannot write)?
pub(crate) fn has_stored_out(dest: &V) -> bool {
    match dest {
        V::Pair(a, b) => has_stored_out(a) || has_stored_out(b),
        v => is_stored_out(v),
    }
}

impl Lowerer {
    /// The C parameter and the value of the stored tensor parameter `name`
    /// of type `t` (`storage` says by which relation).
    pub(crate) fn stored_param(
        &mut self,
        name: Symbol,
        t: &crate::front::ast::Type,
        storage: &crate::front::ast::Storage,
    ) -> Result<super::ir::CParam> {
        use crate::front::ast::Type;
        let rel = storage.param(name).ok_or_else(|| {
            Error::eval(format!("lowering: {name} is not stored (internal error)"))
        })?;
        let mut dims = vec![];
        let mut x = t;
        while let Type::Tensor(d, e) = x {
            self.dim(d)?;
            dims.push(d.clone());
            x = e;
        }
        let c = self.fresh("t", name.as_str());
        self.vals.insert(
            name,
            V::Stored {
                vals: c.clone(),
                rel,
                dims: dims.clone(),
                args: vec![],
                conds: vec![],
            },
        );
        self.tenv.insert(name, t.clone());
        Ok(super::ir::CParam {
            cname: c,
            source: name.to_string(),
            kind: super::ir::ParamC::Stored {
                dims,
                by: rel.to_string(),
            },
        })
    }

    /// The result place `v` of type `t` with its stored leaves (leaf `k`
    /// of `t`, pairs flattened, stored by the relation `storage.leaf(k)`)
    /// as [`V::StoredOut`]; the stored outputs' indices among `outputs`
    /// with their relations.
    pub(crate) fn stored_results(
        v: V,
        t: &crate::front::ast::Type,
        storage: &crate::front::ast::Storage,
        outputs: &[(String, String, Vec<Affine>)],
    ) -> (V, Vec<(usize, String)>) {
        fn go(
            v: V,
            t: &crate::front::ast::Type,
            k: &mut usize,
            storage: &crate::front::ast::Storage,
            outputs: &[(String, String, Vec<Affine>)],
            found: &mut Vec<(usize, String)>,
        ) -> V {
            use crate::front::ast::Type;
            match (v, t) {
                (V::Pair(a, b), Type::Pair(ta, tb)) => {
                    let a = go(*a, ta, k, storage, outputs, found);
                    let b = go(*b, tb, k, storage, outputs, found);
                    V::pair(a, b)
                }
                (v, _) => {
                    let leaf = *k;
                    *k += 1;
                    match (storage.leaf(leaf), v) {
                        (Some(rel), V::Leaf { buf, dims, .. }) => {
                            if let Some(o) = outputs.iter().position(|o| o.0 == buf) {
                                found.push((o, rel.to_string()));
                            }
                            V::StoredOut { buf, rel, dims }
                        }
                        (_, v) => v,
                    }
                }
            }
        }
        let mut found = vec![];
        let v = go(v, t, &mut 0, storage, outputs, &mut found);
        (v, found)
    }
}
