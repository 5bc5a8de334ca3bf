//! The function's frame: its C parameters (sizes, relations, the leaves
//! of each real-valued parameter), its result leaves, the dimensions it
//! checks on entry and the arena slots of its intermediates.

use super::emit::sanitize;
use super::ir::{CParam, Function, ParamC, Slot};
use super::value::V;
use super::Lowerer;
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{ParamKind, Program, Type};
use crate::symbol::Symbol;

impl Lowerer {
    pub(super) fn function(&mut self, prog: &Program) -> Result<Function> {
        let mut params = vec![];
        let explicit: Vec<Symbol> = prog
            .params
            .iter()
            .filter(|p| p.kind == ParamKind::Size)
            .map(|p| p.name)
            .collect();
        for &s in &prog.sizes {
            let c = self.fresh("n", s.as_str());
            self.names.insert(s, c.clone());
            if !explicit.contains(&s) {
                params.push(CParam {
                    cname: c,
                    source: s.to_string(),
                    kind: ParamC::Size,
                });
            }
        }
        for p in &prog.params {
            match &p.kind {
                ParamKind::Size => params.push(CParam {
                    cname: self.names[&p.name].clone(),
                    source: p.name.to_string(),
                    kind: ParamC::Size,
                }),
                ParamKind::Relation(dims) => {
                    for d in dims {
                        self.dim(d)?;
                    }
                    let c = self.fresh("r", p.name.as_str());
                    self.vals
                        .insert(p.name, V::relation(c.clone(), dims.clone()));
                    params.push(CParam {
                        cname: c,
                        source: p.name.to_string(),
                        kind: ParamC::Relation(dims.clone()),
                    });
                }
                ParamKind::Real(t) if prog.stored.param(p.name).is_some() => {
                    // one value per tuple of its relation ([`super::stored`])
                    let c = self.stored_param(p.name, t, &prog.stored)?;
                    params.push(c);
                }
                ParamKind::Real(t) => {
                    let mut leaves = vec![];
                    let v = self.param_leaves(p.name.as_str(), t, &mut leaves)?;
                    params.extend(leaves);
                    self.vals.insert(p.name, v);
                    self.tenv.insert(p.name, t.clone());
                }
            }
        }
        // Results: one place per leaf, written through `double *` outputs.
        let mut outputs = vec![];
        let result = self.output_leaves("out", &prog.ret, &mut outputs)?;
        for (_, _, dims) in &outputs {
            for d in dims {
                self.dim(d)?;
            }
        }
        let (result, stored_outputs) =
            Lowerer::stored_results(result, &prog.ret, &prog.stored, &outputs);
        let body = self.expose_contractions(&prog.body);
        let body = self.band_lets(&body);
        self.store(&super::layout::transpose_lets(&body), &result)?;
        let mut body = std::mem::take(&mut self.entry);
        body.append(&mut self.out);
        Ok(Function {
            name: format!("atl_{}", sanitize(prog.name.as_str())),
            params,
            outputs,
            stored_outputs,
            dims: std::mem::take(&mut self.dims),
            slots: std::mem::take(&mut self.slots),
            permuted: std::mem::take(&mut self.permuted),
            checks: self.checks.take(),
            body,
        })
    }

    fn param_leaves(&mut self, path: &str, t: &Type, out: &mut Vec<CParam>) -> Result<V> {
        match t {
            Type::Real => {
                let c = self.fresh("x", path);
                out.push(CParam {
                    cname: c.clone(),
                    source: path.to_string(),
                    kind: ParamC::Real,
                });
                Ok(V::Scalar(c))
            }
            Type::Pair(a, b) => Ok(V::pair(
                self.param_leaves(&format!("{path}.0"), a, out)?,
                self.param_leaves(&format!("{path}.1"), b, out)?,
            )),
            Type::Tensor(..) => self.tensor_leaves(path, t, out, |c, dims| CParam {
                cname: c,
                source: String::new(),
                kind: ParamC::Tensor(dims),
            }),
        }
    }

    fn output_leaves(
        &mut self,
        path: &str,
        t: &Type,
        out: &mut Vec<(String, String, Vec<Affine>)>,
    ) -> Result<V> {
        match t {
            Type::Pair(a, b) => Ok(V::pair(
                self.output_leaves(&format!("{path}.0"), a, out)?,
                self.output_leaves(&format!("{path}.1"), b, out)?,
            )),
            _ => {
                let mut ps = vec![];
                let v = self.tensor_leaves(path, t, &mut ps, |c, dims| CParam {
                    cname: c,
                    source: String::new(),
                    kind: ParamC::Tensor(dims),
                })?;
                for p in ps {
                    if let ParamC::Tensor(d) = p.kind {
                        out.push((p.cname, p.source, d));
                    }
                }
                Ok(v)
            }
        }
    }

    /// Leaves of a tensor (or real) type as buffers named after `path`.
    fn tensor_leaves(
        &mut self,
        path: &str,
        t: &Type,
        out: &mut Vec<CParam>,
        mk: fn(String, Vec<Affine>) -> CParam,
    ) -> Result<V> {
        fn go(
            lw: &mut Lowerer,
            path: &str,
            outer: &mut Vec<Affine>,
            t: &Type,
            out: &mut Vec<CParam>,
            mk: fn(String, Vec<Affine>) -> CParam,
        ) -> Result<V> {
            match t {
                Type::Tensor(d, e) => {
                    outer.push(d.clone());
                    let v = go(lw, path, outer, e, out, mk);
                    outer.pop();
                    v
                }
                Type::Pair(a, b) => Ok(V::pair(
                    go(lw, &format!("{path}.0"), outer, a, out, mk)?,
                    go(lw, &format!("{path}.1"), outer, b, out, mk)?,
                )),
                Type::Real => {
                    for d in outer.iter() {
                        lw.dim(d)?;
                    }
                    let c = lw.fresh("t", path);
                    let mut p = mk(c.clone(), outer.clone());
                    p.source = path.to_string();
                    out.push(p);
                    Ok(V::leaf(c, outer.clone()))
                }
            }
        }
        go(self, path, &mut vec![], t, out, mk)
    }

    /// The C local holding a dimension (affine in sizes), checked
    /// non-negative on entry.
    pub(crate) fn dim(&mut self, d: &Affine) -> Result<String> {
        if let Some((n, _)) = self.dims.iter().find(|(_, a)| a == d) {
            return Ok(n.clone());
        }
        let name = format!("d{}", self.dims.len());
        self.dims.push((name.clone(), d.clone()));
        Ok(name)
    }

    /// A fresh arena slot for a tensor of these dimensions.
    pub(crate) fn slot(&mut self, base: &str, dims: &[Affine]) -> Result<String> {
        for d in dims {
            self.dim(d)?;
        }
        let cname = self.fresh("b", base);
        self.slots.push(Slot {
            cname: cname.clone(),
            dims: dims.to_vec(),
        });
        Ok(cname)
    }

    /// A place (a tree of fresh slots, one per leaf) for a value of type `t`.
    pub(crate) fn place(&mut self, base: &str, t: &Type) -> Result<V> {
        fn go(lw: &mut Lowerer, base: &str, outer: &mut Vec<Affine>, t: &Type) -> Result<V> {
            match t {
                Type::Tensor(d, e) => {
                    outer.push(d.clone());
                    let v = go(lw, base, outer, e);
                    outer.pop();
                    v
                }
                Type::Pair(a, b) => Ok(V::pair(go(lw, base, outer, a)?, go(lw, base, outer, b)?)),
                Type::Real => {
                    let c = lw.slot(base, outer)?;
                    Ok(V::leaf(c, outer.clone()))
                }
            }
        }
        go(self, base, &mut vec![], t)
    }
}
