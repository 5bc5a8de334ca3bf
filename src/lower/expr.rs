//! Expressions: the value of an expression (a scalar C expression or a
//! view of tensor leaves), or its store into a place; `let` bindings, the
//! bracketed operands of `+`, and which `gen` chains stay lazy views.

use super::emit::real_literal;
use super::ir::Stmt;
use super::value::V;
use super::Lowerer;
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{Expr, MaxMin, Reduce, Type};
use crate::front::types::type_of;
use crate::symbol::Symbol;

impl Lowerer {
    pub(crate) fn type_of(&mut self, e: &Expr) -> Result<Type> {
        type_of(e, &mut self.tenv)
    }

    /// Bind `(let x e0 rest)` as a view that is not stored when `e0` is a
    /// gen over a relation's pattern read element by element
    /// ([`Self::lazy_pattern`]); `None` (nothing bound) otherwise.
    fn bind_pattern_view(
        &mut self,
        x: Symbol,
        e0: &Expr,
        rest: &Expr,
    ) -> Result<Option<(Option<V>, Option<Type>)>> {
        let Some((params, body)) = self.lazy_pattern(x, e0, rest) else {
            return Ok(None);
        };
        let t = self.type_of(e0)?;
        let v = V::Lazy {
            params,
            args: vec![],
            conds: vec![],
            body: Box::new(body.clone()),
            ty: t.clone(),
        };
        Ok(Some((self.vals.insert(x, v), self.tenv.insert(x, t))))
    }

    /// Bind a `let` (or evaluate its right side): returns what to restore.
    pub(super) fn bind_let(&mut self, x: Symbol, e0: &Expr) -> Result<(Option<V>, Option<Type>)> {
        let t = self.type_of(e0)?;
        let v = match lazy_gen(e0) {
            Some((params, body)) => V::Lazy {
                params,
                args: vec![],
                conds: vec![],
                body: Box::new(body.clone()),
                ty: t.clone(),
            },
            None => self.val(e0, x.as_str())?,
        };
        let v = match v {
            V::Scalar(s) if !is_simple(&s) => {
                let c = self.fresh("s", x.as_str());
                self.decl("const double", &c, s);
                V::Scalar(c)
            }
            v => v,
        };
        Ok((self.vals.insert(x, v), self.tenv.insert(x, t)))
    }

    pub(super) fn unbind(&mut self, x: Symbol, old: (Option<V>, Option<Type>)) {
        match old.0 {
            Some(v) => self.vals.insert(x, v),
            None => self.vals.remove(&x),
        };
        match old.1 {
            Some(t) => self.tenv.insert(x, t),
            None => self.tenv.remove(&x),
        };
    }

    /// A scalar-valued expression as a C expression (statements emitted
    /// before it); `base` names temporaries.
    pub(crate) fn scalar(&mut self, e: &Expr, base: &str) -> Result<String> {
        let v = self.val(e, base)?;
        v.as_scalar(self)
    }

    /// Store the value of `e` into the place `dest` (every element written).
    pub(crate) fn store(&mut self, e: &Expr, dest: &V) -> Result<()> {
        if super::stored::is_stored_out(dest) && !matches!(e, Expr::Let(..)) {
            return self.store_stored(e, dest);
        }
        match e {
            Expr::Gen(i, d, body) => {
                if let Some(hoisted) = hoist_bracket(e) {
                    return self.store(&hoisted, dest);
                }
                if self.store_contraction(e, dest)? || self.store_gen_pattern(e, dest)? {
                    return Ok(());
                }
                self.store_gen(*i, d, body, dest)
            }
            Expr::Iverson(p, body) if !dest.is_scalar_place() => {
                let (pre, c) = self.block(|lw| lw.pred(p))?;
                self.out.extend(pre);
                if c == "1" {
                    return self.store(body, dest); // known true: no test
                }
                let mark = self.assume([p]);
                let r = self.block(|lw| lw.store(body, dest));
                self.forget(mark);
                let (then, ()) = r?;
                let (els, ()) = self.block(|lw| dest.zero_fill(lw))?;
                self.out.push(Stmt::If { cond: c, then, els });
                Ok(())
            }
            Expr::Let(x, e0, body) => {
                if matches!(&**body, Expr::Var(y) if y == x) {
                    return self.store(e0, dest);
                }
                if super::contract::is_contraction(e0) && !super::stored::has_stored_out(dest) {
                    if let Some(e0) = self.contractions_to_slots(e0)? {
                        return self.store(&Expr::Let(*x, Box::new(e0), body.clone()), dest);
                    }
                }
                let old = match self.bind_pattern_view(*x, e0, body)? {
                    Some(old) => old,
                    None if self.store_fused(e, dest)? => return Ok(()),
                    None => self.bind_let(*x, e0)?,
                };
                let r = self.store(body, dest);
                self.unbind(*x, old);
                r
            }
            Expr::Pair(a, b) => {
                if self.store_fused(e, dest)? {
                    return Ok(());
                }
                let (pa, pb) = dest.split_pair()?;
                self.store(a, &pa)?;
                self.store(b, &pb)
            }
            _ => {
                let v = self.val(e, "v")?;
                v.copy_into(dest, self)
            }
        }
    }

    /// `(gen i d body)` stored into `dest`, one element per iteration.
    pub(crate) fn gen_loop(&mut self, i: Symbol, d: &Affine, body: &Expr, dest: &V) -> Result<()> {
        let dn = self.dim(d)?;
        let iv = self.bind_index(i, d)?;
        self.full_range.insert(i, d.clone());
        self.gen_vars.insert(i);
        let first_slot = self.slots.len();
        let (stmts, ()) = self.block(|lw| {
            let inner = dest.index_unchecked(&iv, lw)?;
            lw.store(body, &inner)
        })?;
        self.disjoint
            .insert(iv.clone(), super::parallel::buffers(dest));
        let scratch = self.slots[first_slot..].iter().map(|s| s.cname.clone());
        self.scratch.insert(iv.clone(), scratch.collect());
        self.out.push(Stmt::For {
            var: iv,
            lo: "0".into(),
            hi: dn,
            body: stmts,
        });
        Ok(())
    }

    /// The value of `e`: a scalar expression, or a view of tensor leaves.
    pub(crate) fn val(&mut self, e: &Expr, base: &str) -> Result<V> {
        Ok(match e {
            Expr::Var(x) => self
                .vals
                .get(x)
                .cloned()
                .ok_or_else(|| Error::eval(format!("unbound variable {x}")))?,
            Expr::Const(c) => V::Scalar(real_literal(c.0)),
            Expr::Add(a, b) => {
                let (x, ca) = self.bracketed(a)?;
                let (y, cb) = self.bracketed(b)?;
                let t = self.fresh("a", base);
                self.decl("const double", &t, format!("{x} + {y}"));
                let cond = match (ca, cb) {
                    (None, None) => "1".to_string(),
                    (Some(c), None) | (None, Some(c)) => c,
                    (Some(c), Some(d)) => format!("{c} && {d}"),
                };
                self.line(format!("ATL_ADD({cond});"));
                V::Scalar(t)
            }
            Expr::Mul(a, b) => {
                let x = self.scalar(a, base)?;
                let y = self.scalar(b, base)?;
                let t = self.fresh("m", base);
                self.decl("const double", &t, format!("{x} * {y}"));
                self.line("ATL_MUL();".into());
                V::Scalar(t)
            }
            Expr::MaxMin(m, a, b) => {
                let x = self.scalar(a, base)?;
                let y = self.scalar(b, base)?;
                let t = self.fresh("m", base);
                let f = match m {
                    MaxMin::Max => "atlh_rmax",
                    MaxMin::Min => "atlh_rmin",
                };
                self.decl("const double", &t, format!("{f}({x}, {y})"));
                // one operation, counted with the additions
                self.line("ATL_ADD(1);".into());
                V::Scalar(t)
            }
            Expr::IndexReal(a) => V::Scalar(self.index_real(a)?),
            Expr::Call(f, a) => {
                let x = self.scalar(a, base)?;
                let t = self.fresh("f", base);
                let call = match f.exponent() {
                    Some(k) => format!("atlh_{}({x}, {})", f.name(), real_literal(k.0)),
                    None => format!("atlh_{}({x})", f.name()),
                };
                self.decl("const double", &t, call);
                self.line("ATL_CALL();".into());
                V::Scalar(t)
            }
            Expr::Pair(a, b) => V::pair(self.val(a, base)?, self.val(b, base)?),
            Expr::Fst(a) => self.val(a, base)?.materialize(self)?.split_pair()?.0,
            Expr::Snd(a) => self.val(a, base)?.materialize(self)?.split_pair()?.1,
            Expr::Get(a, i) => {
                let v = self.val(a, base)?;
                v.index(i, self)?
            }
            Expr::Sum(..) => V::Scalar(self.sum_chain(e, base)?),
            Expr::Reduce(r, i, d, body) => self.reduction(*r, *i, d, body, base)?,
            Expr::Iverson(p, body) => {
                let t = self.type_of(e)?;
                if t == Type::Real {
                    let (x, _) = self.bracketed(e)?;
                    V::Scalar(x)
                } else if free_of_work(body) {
                    // A bracketed view (`[i < 2] y`): the bracket becomes a
                    // condition of the view, nothing is copied.
                    let c = self.pred(p)?;
                    let cv = self.fresh("c", "");
                    self.decl("const int", &cv, c);
                    self.val(body, base)?.guarded(&[cv], self)?
                } else {
                    let place = self.place(base, &t)?;
                    self.store(e, &place)?;
                    place
                }
            }
            Expr::Let(x, e0, body) => {
                let old = match self.bind_pattern_view(*x, e0, body)? {
                    Some(old) => old,
                    None => self.bind_let(*x, e0)?,
                };
                let r = self.val(body, base);
                self.unbind(*x, old);
                r?
            }
            Expr::Gen(..) => {
                let t = self.type_of(e)?;
                let place = self.place(base, &t)?;
                self.store(e, &place)?;
                place
            }
        })
    }

    /// `(maximum i d body)` and the other [`Reduce`]s: one loop folding
    /// the binary form (`atlh_rmax`, `atlh_rmin`) into an accumulator that
    /// starts at the empty reduction's infinity, counting one operation
    /// from the second element on (`d - 1` in all, as the work cost); for
    /// `argmax` and `argmin` the index selected is kept where the element
    /// is strictly better, and the one-hot tensor written after the loop.
    fn reduction(
        &mut self,
        r: Reduce,
        i: Symbol,
        d: &Affine,
        body: &Expr,
        base: &str,
    ) -> Result<V> {
        let acc = self.fresh("r", base);
        let (f, init) = match r.maxmin() {
            MaxMin::Max => ("atlh_rmax", "-INFINITY"),
            MaxMin::Min => ("atlh_rmin", "INFINITY"),
        };
        self.decl("double", &acc, init.into());
        let sel = r.is_arg().then(|| self.fresh("k", base));
        if let Some(s) = &sel {
            self.decl("int64_t", s, "0".into());
        }
        let dn = self.dim(d)?;
        // the index's C name and range, restored after the loop (a
        // reduction may bind the name of an index bound around it)
        let old = (self.names.get(&i).cloned(), self.ranges.get(&i).cloned());
        let iv = self.bind_index(i, d)?;
        let stmts = self.block(|lw| {
            let x = lw.scalar(body, "v")?;
            let v = lw.fresh("v", base);
            lw.decl("const double", &v, x);
            if let Some(s) = &sel {
                let better = match r.maxmin() {
                    MaxMin::Max => format!("{acc} < {v}"),
                    MaxMin::Min => format!("{v} < {acc}"),
                };
                lw.line(format!("if ({better}) {s} = {iv};"));
            }
            lw.line(format!("{acc} = {f}({acc}, {v});"));
            lw.line(format!("ATL_ADD({iv} > 0);"));
            Ok(())
        });
        self.unbind_range(i, old);
        let (stmts, ()) = stmts?;
        self.out.push(Stmt::For {
            var: iv,
            lo: "0".into(),
            hi: dn.clone(),
            body: stmts,
        });
        let Some(s) = sel else {
            return Ok(V::Scalar(acc));
        };
        let t = Type::Tensor(d.clone(), Box::new(Type::Real));
        let place = self.place(base, &t)?;
        place.zero_fill(self)?;
        match place.index_unchecked(&s, self)? {
            V::Leaf { buf, off, .. } => self.line(format!("if ({dn} > 0) {buf}[{off}] = 1.0;")),
            _ => return Err(Error::eval("a one-hot selection is a tensor of reals")),
        }
        Ok(place)
    }

    /// A scalar operand of `+`: its value and, when it is `(iverson p e)`,
    /// the C local holding `p` (the addition counts only where it holds).
    fn bracketed(&mut self, e: &Expr) -> Result<(String, Option<String>)> {
        let Expr::Iverson(p, body) = e else {
            return Ok((self.scalar(e, "v")?, None));
        };
        let c = self.pred(p)?;
        let mark = self.assume([p]);
        if c == "1" {
            // Known true here (see `facts.rs`): no test.
            let x = self.scalar(body, "v");
            self.forget(mark);
            return Ok((x?, None));
        }
        let cv = self.fresh("c", "");
        self.decl("const int", &cv, c);
        let t = self.fresh("g", "");
        self.decl("double", &t, "0.0".into());
        let r = self.block(|lw| {
            let x = lw.scalar(body, "v")?;
            lw.line(format!("{t} = {x};"));
            Ok(())
        });
        self.forget(mark);
        let (then, ()) = r?;
        self.out.push(Stmt::If {
            cond: cv.clone(),
            then,
            els: vec![],
        });
        Ok((t, Some(cv)))
    }
}

/// `(gen i d ... (gen j m (iverson p body)))` as `(iverson p (gen i d ...
/// (gen j m body)))` when `p` reads none of the gens' variables (a
/// `[0 < n]` a derivative puts around a sum over `n`): the bracket is tested
/// once, and the gens' bodies (their sums) are again what the loop-order
/// choices and the contractions look at. The same elements are written, by
/// the same operations. `None` when there is no such bracket.
pub(super) fn hoist_bracket(e: &Expr) -> Option<Expr> {
    let Expr::Gen(i, d, body) = e else {
        return None;
    };
    let inner = match &**body {
        Expr::Iverson(..) => (**body).clone(),
        Expr::Gen(..) => hoist_bracket(body)?,
        _ => return None,
    };
    let Expr::Iverson(p, rest) = inner else {
        return None;
    };
    let mut free = std::collections::BTreeSet::new();
    crate::front::subst::pred_free(&p, &mut free);
    if free.contains(i) {
        return None;
    }
    Some(Expr::Iverson(p, Box::new(Expr::Gen(*i, d.clone(), rest))))
}

/// Does `e` do no arithmetic and bind nothing (a read, a projection, a
/// bracket of those)?
fn free_of_work(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Var(_)
            | Expr::Const(_)
            | Expr::Get(..)
            | Expr::Fst(_)
            | Expr::Snd(_)
            | Expr::Iverson(..)
            | Expr::Pair(..)
    ) && e.children().all(free_of_work)
}

/// A `gen` chain whose body does no arithmetic and binds nothing: its
/// variables with their dimensions, and the body.
pub(super) fn lazy_gen(e: &Expr) -> Option<(Vec<(Symbol, Affine)>, &Expr)> {
    let mut params = vec![];
    let mut e = e;
    while let Expr::Gen(i, d, body) = e {
        params.push((*i, d.clone()));
        e = body;
    }
    (!params.is_empty() && free_of_work(e)).then_some((params, e))
}

fn is_simple(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
}
