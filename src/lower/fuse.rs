//! Fusion of a let spine's gens over the same extent (row fusion).
//!
//! Tensor SSA writes a derivative as a chain of lets, most of them
//! `(gen i n ...)` over the same `n`, each reading the earlier ones only at
//! its own row: `(let u1 (gen i n ...) (let s (gen i1 n (... (get u1 i1)
//! ...)) ...))`. Run one after the other, every intermediate makes a round
//! trip through memory, where the function itself keeps its rows in
//! registers. Here such a run of consecutive lets (and then the result's
//! leaves that qualify: gens over the same extent, and plain sums
//! `(sum i n e)` of a scalar leaf) becomes one loop over the rows: in each
//! iteration every member computes its row, in order. A member that no
//! later part of the program reads (outside the run) is *contracted* to one
//! row, reused by every iteration; the others keep their full buffer.
//!
//! Every element is still computed exactly once, by the same operations in
//! the same order (the executed operations and values are unchanged). A
//! member qualifies when each free occurrence of an earlier member `x` in
//! it is `(get x v)`, `v` its own gen variable (free there); a view let
//! of tensor rows, a different extent, any other use, or a sum in the
//! member's row that the loop-order heuristic would rather run with `v`
//! innermost (a column reduction) ends the run.

use super::value::V;
use super::Lowerer;
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{Expr, Type};
use crate::front::subst::free_names;
use egg::Symbol;

use super::ir::Stmt;

fn is_var(a: &Affine, v: Symbol) -> bool {
    a.constant == 0 && a.terms.len() == 1 && a.terms[0] == (v, 1)
}

/// Is every free occurrence of `x` in `e` of the form `(get x v)`, with
/// `v` free there?
fn row_only(e: &Expr, x: Symbol, v: Symbol) -> bool {
    match e {
        Expr::Get(a, i) if matches!(&**a, Expr::Var(y) if *y == x) => is_var(i, v),
        Expr::Var(y) => *y != x,
        Expr::Const(_) => true,
        Expr::Add(a, b) | Expr::Mul(a, b) | Expr::Pair(a, b) => {
            row_only(a, x, v) && row_only(b, x, v)
        }
        Expr::Call(_, a) | Expr::Fst(a) | Expr::Snd(a) | Expr::Get(a, _) => row_only(a, x, v),
        Expr::Iverson(_, a) => row_only(a, x, v),
        Expr::Let(y, e0, b) => {
            row_only(e0, x, v)
                && (*y == x
                    || if *y == v {
                        !free_names(b).contains(&x)
                    } else {
                        row_only(b, x, v)
                    })
        }
        Expr::Gen(y, _, b) | Expr::Sum(y, _, b) => {
            *y == x
                || if *y == v {
                    !free_names(b).contains(&x)
                } else {
                    row_only(b, x, v)
                }
        }
    }
}

/// `e` with every free `(get x v)` replaced by `to`.
fn rewrite(e: &Expr, x: Symbol, v: Symbol, to: Symbol) -> Expr {
    let r = |a: &Expr| Box::new(rewrite(a, x, v, to));
    match e {
        Expr::Get(a, i) if matches!(&**a, Expr::Var(y) if *y == x) && is_var(i, v) => Expr::Var(to),
        Expr::Var(_) | Expr::Const(_) => e.clone(),
        Expr::Add(a, b) => Expr::Add(r(a), r(b)),
        Expr::Mul(a, b) => Expr::Mul(r(a), r(b)),
        Expr::Pair(a, b) => Expr::Pair(r(a), r(b)),
        Expr::Call(f, a) => Expr::Call(*f, r(a)),
        Expr::Fst(a) => Expr::Fst(r(a)),
        Expr::Snd(a) => Expr::Snd(r(a)),
        Expr::Get(a, i) => Expr::Get(r(a), i.clone()),
        Expr::Iverson(p, a) => Expr::Iverson(p.clone(), r(a)),
        Expr::Let(y, e0, b) => {
            Expr::Let(*y, r(e0), if *y == x || *y == v { b.clone() } else { r(b) })
        }
        Expr::Gen(y, d, b) => Expr::Gen(
            *y,
            d.clone(),
            if *y == x || *y == v { b.clone() } else { r(b) },
        ),
        Expr::Sum(y, d, b) => Expr::Sum(
            *y,
            d.clone(),
            if *y == x || *y == v { b.clone() } else { r(b) },
        ),
    }
}

/// The leaves of a result: expression and destination, pairs split.
fn leaves<'a>(e: &'a Expr, dest: &V, out: &mut Vec<(&'a Expr, V)>) {
    match (e, dest) {
        (Expr::Pair(a, b), V::Pair(da, db)) => {
            leaves(a, da, out);
            leaves(b, db, out);
        }
        _ => out.push((e, dest.clone())),
    }
}

/// A member of a fused run.
enum Member<'a> {
    /// A let: its name, variable and body.
    Let(Symbol, Symbol, &'a Expr),
    /// A result leaf `(gen v n body)`.
    Out(Symbol, &'a Expr, V),
    /// A result leaf `(sum v n body)` (scalar).
    Sum(Symbol, &'a Expr, V),
    /// `(let x e0 ...)`, `e0` real with one sum `(sum v n inner)` (through
    /// `+`, `*`, calls): accumulated in the loop, `x` bound after it.
    LetSum {
        x: Symbol,
        v: Symbol,
        inner: &'a Expr,
        e0: &'a Expr,
        sum: &'a Expr,
    },
    /// A result leaf `(gen g dim body)` whose one sum `sum` (reached through
    /// `+`, `*`, calls) runs over the rows, `(sum v n inner)`, interchanged:
    /// each row adds its terms to the accumulator row of `g`.
    Reduce {
        g: Symbol,
        dim: &'a Affine,
        body: &'a Expr,
        sum: &'a Expr,
        inner: (Symbol, &'a Expr),
        dest: V,
    },
}

impl Lowerer {
    /// Would a sum of this row's body rather run with `v` innermost
    /// (module [`super::order`], strictly)? Fusion makes `v` the outer loop,
    /// so such a gen stays out of the run.
    fn wants_interchange(&self, v: Symbol, body: &Expr) -> bool {
        let mut cands = vec![];
        super::order::candidates(body, &mut cands);
        cands.iter().any(|s| self.interchange(v, s) == Some(true))
    }

    /// `(gen g dim body)` as a [`Member::Reduce`]: its sum and the sum's
    /// variable and summand.
    fn reduction_member<'a>(
        &self,
        g: Symbol,
        dim: &Affine,
        body: &'a Expr,
        n: &Affine,
        names: &[Symbol],
        dest: &V,
    ) -> Option<(&'a Expr, (Symbol, &'a Expr))> {
        if !matches!(dest, V::Leaf { dims, conds, .. } if dims.len() == 1 && dims[0] == *dim && conds.is_empty())
        {
            return None;
        }
        let mut cands = vec![];
        super::order::candidates(body, &mut cands);
        let [s] = cands.as_slice() else { return None };
        let Expr::Sum(v, d, inner) = s else {
            return None;
        };
        let ok = d == n
            && *v != g
            && self.interchange(g, s) == Some(true)
            && names.iter().all(|x| *x != *v && row_only(inner, *x, *v))
            && {
                // Members may be read only inside the sum.
                let zero = Expr::Const(crate::front::ast::Real(0.0));
                let outside = super::order::replace(body, &[(*s as *const Expr, zero)]);
                let free = free_names(&outside);
                names.iter().all(|x| !free.contains(x))
            };
        ok.then_some((*s, (*v, &**inner)))
    }

    /// Store a let spine starting at `e` (a `let`) into `dest`, fusing its
    /// leading run of gens over one extent (module doc). `Ok(false)`: no
    /// run of two or more, nothing emitted.
    pub(crate) fn store_fused(&mut self, e: &Expr, dest: &V) -> Result<bool> {
        let n = match e {
            Expr::Let(_, first, _) => match &**first {
                Expr::Gen(_, n, _) => n,
                _ => return Ok(false),
            },
            Expr::Pair(..) => {
                let mut ls = vec![];
                leaves(e, dest, &mut ls);
                let first = ls.iter().find_map(|(le, _)| match le {
                    Expr::Gen(_, n, _) | Expr::Sum(_, n, _) => Some(n),
                    _ => None,
                });
                match first {
                    Some(n) => n,
                    None => return Ok(false),
                }
            }
            _ => return Ok(false),
        };
        let qualifies = |body: &Expr, v: Symbol, names: &[Symbol]| {
            names.iter().all(|x| *x != v && row_only(body, *x, v))
        };
        // The lets of the run.
        let mut names: Vec<Symbol> = vec![];
        let mut members: Vec<Member> = vec![];
        let mut rest = e;
        // A scalar let of one sum over the rows ends the run as its last
        // member (its value exists only after the loop).
        let mut trailing = None;
        while let Expr::Let(x, e0, b) = rest {
            let Expr::Gen(v, d, body) = &**e0 else {
                if let Some((sum, v, inner)) = scalar_sum(e0, n) {
                    let zero = Expr::Const(crate::front::ast::Real(0.0));
                    let outside = super::order::replace(e0, &[(sum as *const Expr, zero)]);
                    let free = free_names(&outside);
                    if !names.is_empty()
                        && !names.contains(x)
                        && names.iter().all(|y| !free.contains(y))
                        && qualifies(inner, v, &names)
                    {
                        members.push(Member::LetSum {
                            x: *x,
                            v,
                            inner,
                            e0,
                            sum,
                        });
                        trailing = Some(*x);
                        rest = b;
                    }
                }
                break;
            };
            // A view (no work) joins only with scalar rows (one copy per row).
            let view_of_rows = super::expr::lazy_gen(e0).is_some_and(|(ps, _)| ps.len() > 1);
            if d != n
                || view_of_rows
                || names.contains(x)
                || !qualifies(body, *v, &names)
                || self.wants_interchange(*v, body)
            {
                break;
            }
            names.push(*x);
            members.push(Member::Let(*x, *v, body));
            rest = b;
        }
        // Then the result's leaves, when every let joined.
        let mut others: Vec<(&Expr, V)> = vec![];
        let mut after: Vec<&Expr> = vec![];
        if matches!(rest, Expr::Let(..)) || trailing.is_some() {
            after.push(rest);
        } else {
            let mut ls = vec![];
            leaves(rest, dest, &mut ls);
            for (le, ld) in ls {
                match le {
                    Expr::Gen(v, d, body)
                        if d == n
                            && qualifies(body, *v, &names)
                            && !self.wants_interchange(*v, body) =>
                    {
                        members.push(Member::Out(*v, body, ld))
                    }
                    Expr::Sum(v, d, body)
                        if d == n
                            && ld.is_scalar_place()
                            && !matches!(&**body, Expr::Sum(..) | Expr::Iverson(..))
                            && qualifies(body, *v, &names) =>
                    {
                        members.push(Member::Sum(*v, body, ld))
                    }
                    Expr::Gen(g, dm, body) if !names.is_empty() => {
                        match self.reduction_member(*g, dm, body, n, &names, &ld) {
                            Some((s, inner)) => members.push(Member::Reduce {
                                g: *g,
                                dim: dm,
                                body,
                                sum: s,
                                inner,
                                dest: ld,
                            }),
                            None => {
                                after.push(le);
                                others.push((le, ld));
                            }
                        }
                    }
                    _ => {
                        after.push(le);
                        others.push((le, ld));
                    }
                }
            }
        }
        if members.len() < 2 {
            return Ok(false);
        }
        // Places: full for members read after the run, one row otherwise.
        let read_after = |x: Symbol| after.iter().any(|a| free_names(a).contains(&x));
        let dn = self.dim(n)?;
        let c = self.fresh("i", "row");
        let mut full: Vec<(Symbol, V, Type)> = vec![];
        let mut rows: Vec<(Symbol, V, Type)> = vec![];
        let mut old_types = vec![];
        let mut local_rows = vec![];
        let mut contracted = vec![];
        for m in &members {
            if let Member::Let(x, _, _) = m {
                let Expr::Let(_, e0, _) = find_let(e, *x) else {
                    unreachable!("a member let is in the spine")
                };
                let ty = self.type_of(e0)?;
                old_types.push((*x, self.tenv.insert(*x, ty.clone())));
                let Type::Tensor(_, elem) = &ty else {
                    unreachable!("a gen has a tensor type")
                };
                if read_after(*x) {
                    let p = self.place(x.as_str(), &ty)?;
                    full.push((*x, p.clone(), ty.clone()));
                    rows.push((*x, p.index_unchecked(&c, self)?, (**elem).clone()));
                } else if **elem == Type::Real {
                    // One real a row: a local of the loop body.
                    let b = self.fresh("b", x.as_str());
                    local_rows.push(Stmt::Line(format!("double {b}[1];")));
                    rows.push((*x, V::leaf(b, vec![]), Type::Real));
                } else {
                    let p = self.place(x.as_str(), elem)?;
                    contracted.extend(super::parallel::buffers(&p));
                    rows.push((*x, p, (**elem).clone()));
                }
            }
        }
        // Sum members' accumulators.
        let mut accs = vec![];
        for m in &members {
            if let Member::Sum(..) | Member::LetSum { .. } = m {
                let acc = self.fresh("acc", "row");
                let first = self.fresh("h", "");
                self.decl("double", &acc, "0.0".into());
                self.decl("int", &first, "0".into());
                accs.push((acc, first));
            }
        }
        // Reductions' rows (the destination, or a fresh row the body then
        // reads), zero filled, with their first-term flags.
        let mut reds: Vec<(String, String, String, Option<Symbol>)> = vec![];
        for m in &members {
            if let Member::Reduce {
                dim,
                body,
                sum,
                dest,
                ..
            } = m
            {
                let dn = self.dim(dim)?;
                let (buf, off, tmp) = match dest {
                    V::Leaf { buf, off, .. } if std::ptr::eq(*sum, *body) => {
                        (buf.clone(), off.clone(), None)
                    }
                    _ => {
                        let t = self.slot("row", std::slice::from_ref(*dim))?;
                        let sym = self.internal_symbol("row");
                        (t, "0".to_string(), Some(sym))
                    }
                };
                let flags = self.zero_row(&buf, &off, &dn);
                reds.push((buf, off, flags, tmp));
            }
        }
        let first_slot = self.slots.len();
        let (mut stmts, ()) = self.block(|lw| {
            let mut acc_it = accs.iter();
            // The rows computed so far in this iteration: name, row symbol.
            let mut done: Vec<(Symbol, Symbol)> = vec![];
            let mut saved = vec![];
            let mut red_it = reds.iter();
            for m in &members {
                let (v, body) = match m {
                    Member::Let(_, v, b) | Member::Out(v, b, _) | Member::Sum(v, b, _) => (*v, *b),
                    Member::Reduce { inner, .. } => *inner,
                    Member::LetSum { v, inner, .. } => (*v, *inner),
                };
                let mut body = body.clone();
                for (x, to) in &done {
                    body = rewrite(&body, *x, v, *to);
                }
                let old_name = lw.names.insert(v, c.clone());
                let old_range = lw.full_range.insert(v, n.clone());
                let old_c_range = lw.ranges.insert(v, dn.clone());
                match m {
                    Member::Let(x, _, _) => {
                        let (_, row, elem) = rows
                            .iter()
                            .find(|(y, _, _)| y == x)
                            .expect("a row per member let");
                        lw.store(&body, row)?;
                        let sym = lw.internal_symbol("row");
                        lw.vals.insert(sym, row.clone());
                        saved.push(sym);
                        lw.tenv.insert(sym, elem.clone());
                        done.push((*x, sym));
                    }
                    Member::Out(_, _, ld) => {
                        let row = ld.index_unchecked(&c, lw)?;
                        lw.store(&body, &row)?;
                    }
                    Member::Sum(..) | Member::LetSum { .. } => {
                        let (acc, first) = acc_it.next().expect("an accumulator per sum");
                        let x = lw.scalar(&body, "v")?;
                        lw.line(format!("{acc} += {x};"));
                        lw.line(format!("ATL_SUMADD({first});"));
                    }
                    Member::Reduce { g, dim, .. } => {
                        let (buf, off, flags, _) = red_it.next().expect("a row per reduction");
                        lw.sum_nest(
                            &body,
                            &super::sum::Acc::Row {
                                gen: *g,
                                dim: (*dim).clone(),
                                buf: buf.clone(),
                                off: off.clone(),
                                flags: flags.clone(),
                            },
                        )?;
                    }
                }
                match old_name {
                    Some(o) => lw.names.insert(v, o),
                    None => lw.names.remove(&v),
                };
                match old_range {
                    Some(o) => lw.full_range.insert(v, o),
                    None => lw.full_range.remove(&v),
                };
                match old_c_range {
                    Some(o) => lw.ranges.insert(v, o),
                    None => lw.ranges.remove(&v),
                };
            }
            for sym in saved {
                lw.vals.remove(&sym);
                lw.tenv.remove(&sym);
            }
            Ok(())
        })?;
        stmts.splice(0..0, local_rows);
        // The rows of full members and of the result's gens are disjoint.
        let mut row_bufs: Vec<String> = full
            .iter()
            .flat_map(|(_, p, _)| super::parallel::buffers(p))
            .collect();
        for m in &members {
            if let Member::Out(_, _, ld) = m {
                row_bufs.extend(super::parallel::buffers(ld));
            }
        }
        self.disjoint.insert(c.clone(), row_bufs);
        // Contracted rows and the body's own slots live for one row.
        contracted.extend(self.slots[first_slot..].iter().map(|s| s.cname.clone()));
        self.scratch.insert(c.clone(), contracted);
        self.out.push(Stmt::For {
            var: c,
            lo: "0".into(),
            hi: dn,
            body: stmts,
        });
        let mut acc_it = accs.iter();
        let mut red_it = reds.iter();
        let mut trailing_old = None;
        for m in &members {
            match m {
                Member::Sum(_, _, ld) => {
                    let (acc, _) = acc_it.next().expect("an accumulator per sum");
                    V::Scalar(acc.clone()).copy_into(ld, self)?;
                }
                Member::Reduce {
                    g,
                    dim,
                    body,
                    sum,
                    dest,
                    ..
                } => {
                    let (buf, _, flags, tmp) = red_it.next().expect("a row per reduction");
                    self.line(format!("ATL_FIRST_AT_END({flags});"));
                    if let Some(sym) = tmp {
                        self.vals
                            .insert(*sym, V::leaf(buf.clone(), vec![(*dim).clone()]));
                        self.tenv
                            .insert(*sym, Type::Tensor((*dim).clone(), Box::new(Type::Real)));
                        let b = super::order::replace(
                            body,
                            &[(
                                *sum as *const Expr,
                                Expr::Get(Box::new(Expr::Var(*sym)), Affine::var(*g)),
                            )],
                        );
                        self.gen_loop(*g, dim, &b, dest)?;
                    }
                }
                Member::LetSum { x, e0, sum, .. } => {
                    let (acc, _) = acc_it.next().expect("an accumulator per sum");
                    let sym = self.internal_symbol("acc");
                    self.vals.insert(sym, V::Scalar(acc.clone()));
                    self.tenv.insert(sym, Type::Real);
                    let e1 = super::order::replace(e0, &[(*sum as *const Expr, Expr::Var(sym))]);
                    trailing_old = Some((*x, self.bind_let(*x, &e1)?));
                }
                _ => {}
            }
        }
        // The rest, with the full members bound.
        let mut olds = vec![];
        for (x, p, _) in full {
            olds.push((x, self.vals.insert(x, p)));
        }
        let r = (|| {
            if matches!(rest, Expr::Let(..)) || trailing.is_some() {
                self.store(rest, dest)
            } else {
                for (le, ld) in &others {
                    self.store(le, ld)?;
                }
                Ok(())
            }
        })();
        if let Some((x, old)) = trailing_old {
            self.unbind(x, old);
        }
        for (x, old) in olds.into_iter().rev() {
            match old {
                Some(v) => self.vals.insert(x, v),
                None => self.vals.remove(&x),
            };
        }
        for (x, old) in old_types.into_iter().rev() {
            match old {
                Some(t) => self.tenv.insert(x, t),
                None => self.tenv.remove(&x),
            };
        }
        r.map(|()| true)
    }
}

/// The one sum of a real expression (reached through `+`, `*`, calls),
/// when it is `(sum v n inner)` with a plain summand: the sum, `v`, `inner`.
fn scalar_sum<'a>(e: &'a Expr, n: &Affine) -> Option<(&'a Expr, Symbol, &'a Expr)> {
    let mut cands = vec![];
    super::order::candidates(e, &mut cands);
    let [s] = cands.as_slice() else { return None };
    match s {
        Expr::Sum(v, d, inner)
            if d == n && !matches!(&**inner, Expr::Sum(..) | Expr::Iverson(..)) =>
        {
            Some((*s, *v, &**inner))
        }
        _ => None,
    }
}

/// The `let x` of a spine.
fn find_let(e: &Expr, x: Symbol) -> &Expr {
    let mut e = e;
    while let Expr::Let(y, _, b) = e {
        if *y == x {
            return e;
        }
        e = b;
    }
    e
}
