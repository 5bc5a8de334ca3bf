//! Fusion of a let spine's gens over the same extent (row fusion).
//!
//! Tensor SSA writes a derivative as a chain of lets, most of them
//! `(gen i n ...)` over the same `n`, each reading the earlier ones only at
//! its own row: `(let u1 (gen i n ...) (let s (gen i1 n (... (get u1 i1)
//! ...)) ...))`. Run one after the other, every intermediate makes a round
//! trip through memory, where the function itself keeps its rows in
//! registers. Here such a run of consecutive lets (and then the result's
//! leaves that qualify: gens over the same extent, and plain sums
//! `(sum i n e)` of a scalar leaf, `e` possibly a sum chain over the row's
//! elements, whose terms then go to the same accumulator) becomes one loop
//! over the rows: in each
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
use crate::symbol::Symbol;

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
        Expr::Const(_) | Expr::IndexReal(_) => true,
        Expr::Add(a, b) | Expr::Mul(a, b) | Expr::MaxMin(_, a, b) | Expr::Pair(a, b) => {
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
        Expr::Gen(y, _, b) | Expr::Sum(y, _, b) | Expr::Reduce(_, y, _, b) => {
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
        Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => e.clone(),
        Expr::Add(a, b) => Expr::Add(r(a), r(b)),
        Expr::MaxMin(m, a, b) => Expr::MaxMin(*m, r(a), r(b)),
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
        Expr::Reduce(k, y, d, b) => Expr::Reduce(
            *k,
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
    /// A real result leaf `e` whose one sum `(sum v n inner)` (reached
    /// through `+`, `*`, calls and brackets that hold whenever the loop
    /// runs, see [`leaf_sum`]): accumulated in the loop, the leaf stored
    /// after it (pair_moments' `[0 < n]·-1·Σ d_bar[i]`).
    LeafSum {
        v: Symbol,
        inner: &'a Expr,
        e: &'a Expr,
        sum: &'a Expr,
        dest: V,
    },
    /// A result leaf `(gen g dim body)` whose one sum `sum` (reached through
    /// `+`, `*`, calls) runs over the rows, `(sum v n inner)`, interchanged:
    /// each row adds its terms to the accumulator row of `g`.
    ///
    /// Also a gen of gens `(gen g0 d0 ... (gen g dim body))`, with brackets
    /// that hold whenever the loop runs between the gens and `body`
    /// (`leaf`, the whole leaf): each row then adds its terms into a block
    /// of accumulator rows, one per point of the `outer` gens, and the leaf
    /// is stored after the loop reading its sum from the block
    /// (`nearest_centre`'s `dC[g][g1] = [0 < P]·-2·Σp h[p][g]·e[p][g][g1]`).
    Reduce {
        g: Symbol,
        dim: &'a Affine,
        body: &'a Expr,
        sum: &'a Expr,
        inner: (Symbol, &'a Expr),
        dest: V,
        outer: Vec<(Symbol, &'a Affine)>,
        leaf: Option<&'a Expr>,
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
    /// variable and summand; also when the loop order is a tie (the caller
    /// checks [`Self::interchange`] again to tell).
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
        self.reduced_sum(g, body, n, names)
    }

    /// The one sum of `body` (under a gen over `g`) that runs over the
    /// rows `n`, with its variable and summand, when the summand reads the
    /// members only at its row and `body` reads them nowhere else.
    fn reduced_sum<'a>(
        &self,
        g: Symbol,
        body: &'a Expr,
        n: &Affine,
        names: &[Symbol],
    ) -> Option<(&'a Expr, (Symbol, &'a Expr))> {
        let mut cands = vec![];
        super::order::candidates(body, &mut cands);
        let [s] = cands.as_slice() else { return None };
        let Expr::Sum(v, d, inner) = s else {
            return None;
        };
        let ok = d == n
            && *v != g
            && self.interchange(g, s).is_some()
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

    /// A result leaf that is a gen of gens, or a gen with brackets that
    /// hold whenever the loop over `n` runs above its body, whose innermost
    /// body has one sum over the rows, reading the members only at its row
    /// (so with the row loop outside, the members' rows are read once and
    /// the block of accumulators, as large as one row of the summand's
    /// reads, stays in cache): a [`Member::Reduce`] over a block of rows,
    /// stored into `dest` after the loop.
    fn block_reduction<'a>(
        &self,
        le: &'a Expr,
        n: &Affine,
        names: &[Symbol],
        dest: &V,
    ) -> Option<Member<'a>> {
        let mut gens = vec![];
        let mut bracketed = false;
        let mut e = le;
        loop {
            match e {
                Expr::Gen(g, d, b) => {
                    gens.push((*g, d));
                    e = b;
                }
                Expr::Iverson(p, b) if implied_by_rows(p, n) => {
                    bracketed = true;
                    e = b;
                }
                _ => break,
            }
        }
        let (g, dim) = gens.pop()?;
        if gens.is_empty() && !bracketed {
            return None;
        }
        let (sum, inner) = self.reduced_sum(g, e, n, names)?;
        // The outer gens' loops run inside the row loop whole: a bracket
        // of the sum that bounds them (a convolution's adjoint, `i1` near
        // `i2`) would leave most of their iterations empty.
        let mut bounded = std::collections::BTreeSet::new();
        if let (_, Some(p), _) = crate::semantics::eval::sum_chain(sum) {
            crate::front::subst::pred_free(p, &mut bounded);
        }
        if gens
            .iter()
            .any(|(o, _)| *o == inner.0 || bounded.contains(o))
        {
            return None;
        }
        Some(Member::Reduce {
            g,
            dim,
            body: e,
            sum,
            inner,
            dest: dest.clone(),
            outer: gens,
            leaf: Some(le),
        })
    }

    /// The loops of the gens `outer` around a reduction's sum nest into
    /// its block of rows `r` (`lin`: the row's index so far).
    fn block_rows(
        &mut self,
        outer: &[(Symbol, &Affine)],
        lin: Option<String>,
        body: &Expr,
        g: Symbol,
        dim: &Affine,
        r: &ReductionRow,
    ) -> Result<()> {
        let Some(((o, d), rest)) = outer.split_first() else {
            // A reduction's own row: its flags are the row's; a block's
            // flags cover the block, at the row's offset in it.
            let (off, flag_off) = match lin {
                None => (r.off.clone(), "0".to_string()),
                Some(l) => {
                    let at = format!("({l}) * {}", self.dim(dim)?);
                    (at.clone(), at)
                }
            };
            return self.sum_nest(
                body,
                &super::sum::Acc::Row {
                    gen: g,
                    dim: dim.clone(),
                    buf: r.buf.clone(),
                    off,
                    flags: r.flags.clone(),
                    flag_off,
                },
            );
        };
        let dn = self.dim(d)?;
        let iv = self.bind_index(*o, d)?;
        self.full_range.insert(*o, (*d).clone());
        let lin = Some(match lin {
            None => iv.clone(),
            Some(l) => format!("({l}) * {dn} + {iv}"),
        });
        let (stmts, ()) = self.block(|lw| lw.block_rows(rest, lin, body, g, dim, r))?;
        self.out.push(Stmt::For {
            var: iv,
            lo: "0".into(),
            hi: dn,
            body: stmts,
        });
        Ok(())
    }

    /// Store a let spine starting at `e` (a `let`) into `dest`, fusing its
    /// leading run of gens over one extent (module doc). `Ok(false)`: no
    /// run of two or more, nothing emitted.
    ///
    /// A reduction whose loop order is a tie (module [`super::order`]: run
    /// interchanged only when its extent is at most `ATL_ROW_LIMIT`) joins
    /// under that same run-time test: the run with it, else the run
    /// without it (or the spine unfused), so that the reduction's loops are
    /// ordered as they would be alone. Joined, the reduced rows (a kernel
    /// gradient's residual) need not be stored and read back.
    pub(crate) fn store_fused(&mut self, e: &Expr, dest: &V) -> Result<bool> {
        let Some(n) = run_extent(e, dest) else {
            return Ok(false);
        };
        let mut with = self.run_lets(e, n);
        self.run_leaves(&mut with, dest, true);
        if with.ties.is_empty() {
            return self.store_run(e, dest, with);
        }
        let mut cond = vec![];
        for d in &with.ties {
            cond.push(format!("{} <= ATL_ROW_LIMIT", self.dim(d)?));
        }
        let (then, fused) = self.block(|lw| lw.store_run(e, dest, with))?;
        debug_assert!(fused, "a run with a reduction has two members");
        let (els, ()) = self.block(|lw| {
            let mut without = lw.run_lets(e, n);
            lw.run_leaves(&mut without, dest, false);
            if lw.store_run(e, dest, without)? {
                Ok(())
            } else {
                lw.store_unfused(e, dest)
            }
        })?;
        self.out.push(Stmt::If {
            cond: cond.join(" && "),
            then,
            els,
        });
        Ok(true)
    }

    /// `e` (a let or a pair) stored as the caller of [`Self::store_fused`]
    /// stores it when no run forms.
    fn store_unfused(&mut self, e: &Expr, dest: &V) -> Result<()> {
        match e {
            Expr::Let(x, e0, body) => {
                let old = self.bind_let(*x, e0)?;
                let r = self.store(body, dest);
                self.unbind(*x, old);
                r
            }
            Expr::Pair(a, b) => {
                let (pa, pb) = dest.split_pair()?;
                self.store(a, &pa)?;
                self.store(b, &pb)
            }
            _ => self.store(e, dest),
        }
    }

    /// Emit the run `run` of the spine `e` (module doc); `Ok(false)`: fewer
    /// than two members, nothing emitted.
    fn store_run(&mut self, e: &Expr, dest: &V, run: Run) -> Result<bool> {
        if run.members.len() < 2 {
            return Ok(false);
        }
        let n = run.n;
        let dn = self.dim(n)?;
        let c = self.fresh("i", "row");
        let places = self.member_places(e, &run, &c)?;
        let accs = self.member_accumulators(&run.members);
        let reds = self.reduction_rows(&run.members)?;
        let first_slot = self.slots.len();
        let (mut stmts, ()) = self
            .block(|lw| lw.fused_iteration(&run.members, &places.rows, &accs, &reds, &c, n, &dn))?;
        stmts.splice(0..0, places.local_rows);
        // The rows of full members and of the result's gens are disjoint.
        let mut row_bufs: Vec<String> = places
            .full
            .iter()
            .flat_map(|(_, p, _)| super::parallel::buffers(p))
            .collect();
        for m in &run.members {
            match m {
                // A stored leaf's row writes the tuples of its row alone.
                Member::Out(_, _, V::StoredOut { buf, .. }) => row_bufs.push(buf.clone()),
                Member::Out(_, _, ld) => row_bufs.extend(super::parallel::buffers(ld)),
                _ => {}
            }
        }
        self.disjoint.insert(c.clone(), row_bufs);
        // Contracted rows and the body's own slots live for one row.
        let mut contracted = places.contracted;
        contracted.extend(self.slots[first_slot..].iter().map(|s| s.cname.clone()));
        self.scratch.insert(c.clone(), contracted);
        self.out.push(Stmt::For {
            var: c,
            lo: "0".into(),
            hi: dn,
            body: stmts,
        });
        let trailing_old = self.finish_members(&run.members, &accs, &reds)?;
        self.store_after_run(&run, places.full, places.old_types, trailing_old, dest)?;
        Ok(true)
    }

    /// The leading lets of a run over the extent `n`: gens whose bodies
    /// read earlier members only at their own row, then possibly one scalar
    /// let of a sum over the rows, which ends the run.
    fn run_lets<'a>(&self, e: &'a Expr, n: &'a Affine) -> Run<'a> {
        let mut run = Run {
            n,
            names: vec![],
            members: vec![],
            rest: e,
            trailing: None,
            others: vec![],
            after: vec![],
            ties: vec![],
        };
        while let Expr::Let(x, e0, b) = run.rest {
            let Expr::Gen(v, d, body) = &**e0 else {
                if let Some((sum, v, inner)) = scalar_sum(e0, n) {
                    let zero = Expr::Const(crate::front::ast::Real(0.0));
                    let outside = super::order::replace(e0, &[(sum as *const Expr, zero)]);
                    let free = free_names(&outside);
                    if !run.names.is_empty()
                        && !run.names.contains(x)
                        && run.names.iter().all(|y| !free.contains(y))
                        && run.qualifies(inner, v)
                    {
                        run.members.push(Member::LetSum {
                            x: *x,
                            v,
                            inner,
                            e0,
                            sum,
                        });
                        run.trailing = Some(*x);
                        run.rest = b;
                    }
                }
                break;
            };
            // A view (no work) joins only with scalar rows (one copy per row).
            let view_of_rows = super::expr::lazy_gen(e0).is_some_and(|(ps, _)| ps.len() > 1);
            if d != n
                || view_of_rows
                || run.names.contains(x)
                || !run.qualifies(body, *v)
                || self.wants_interchange(*v, body)
                || super::contract::is_contraction(e0)
            {
                break;
            }
            run.names.push(*x);
            run.members.push(Member::Let(*x, *v, body));
            run.rest = b;
        }
        run
    }

    /// The result's leaves that join the run, when every let joined: gens
    /// and scalar sums over the extent, and gens whose one sum runs over it
    /// (reductions); the other leaves are stored after the loop.
    fn run_leaves<'a>(&self, run: &mut Run<'a>, dest: &V, ties: bool) {
        if matches!(run.rest, Expr::Let(..)) || run.trailing.is_some() {
            run.after.push(run.rest);
            return;
        }
        let n = run.n;
        let mut ls = vec![];
        leaves(run.rest, dest, &mut ls);
        for (le, ld) in ls {
            if super::stored::is_stored_out(&ld) {
                // A stored leaf joins as rows of its relation's tuples;
                // any other is stored after the loop, as it would be alone.
                match le {
                    Expr::Gen(v, d, body)
                        if d == n && run.qualifies(body, *v) && stored_rows(le, &ld).is_some() =>
                    {
                        run.members.push(Member::Out(*v, body, ld))
                    }
                    _ => {
                        run.after.push(le);
                        run.others.push((le, ld));
                    }
                }
                continue;
            }
            match le {
                Expr::Gen(v, d, body)
                    if d == n
                        && run.qualifies(body, *v)
                        && !self.wants_interchange(*v, body)
                        && !super::contract::is_contraction(le) =>
                {
                    run.members.push(Member::Out(*v, body, ld))
                }
                Expr::Sum(v, d, body)
                    if d == n
                        && ld.is_scalar_place()
                        && !matches!(&**body, Expr::Iverson(..))
                        && run.qualifies(body, *v) =>
                {
                    run.members.push(Member::Sum(*v, body, ld))
                }
                Expr::Gen(g, dm, body)
                    if !run.names.is_empty() && !super::contract::is_contraction(le) =>
                {
                    let member = self
                        .reduction_member(*g, dm, body, n, &run.names, &ld)
                        .filter(|(s, _)| ties || self.interchange(*g, s) == Some(true));
                    match member {
                        Some((s, inner)) => {
                            if self.interchange(*g, s) == Some(false) {
                                run.ties.push(dm);
                            }
                            run.members.push(Member::Reduce {
                                g: *g,
                                dim: dm,
                                body,
                                sum: s,
                                inner,
                                dest: ld,
                                outer: vec![],
                                leaf: None,
                            })
                        }
                        None => match self.block_reduction(le, n, &run.names, &ld) {
                            Some(member) => run.members.push(member),
                            None => {
                                run.after.push(le);
                                run.others.push((le, ld));
                            }
                        },
                    }
                }
                _ => match leaf_sum(le, n) {
                    Some((sum, v, inner))
                        if ld.is_scalar_place() && run.qualifies(inner, v) && {
                            let zero = Expr::Const(crate::front::ast::Real(0.0));
                            let outside = replace_in_leaf(le, &[(sum as *const Expr, zero)]);
                            let free = free_names(&outside);
                            run.names.iter().all(|y| !free.contains(y))
                        } =>
                    {
                        run.members.push(Member::LeafSum {
                            v,
                            inner,
                            e: le,
                            sum,
                            dest: ld,
                        })
                    }
                    _ => {
                        run.after.push(le);
                        run.others.push((le, ld));
                    }
                },
            }
        }
    }

    /// Where each member let's rows live: its full buffer when a part of
    /// the program after the run reads it, else one row reused by every
    /// iteration (a C local for a real row). Records the members' types.
    fn member_places(&mut self, e: &Expr, run: &Run, c: &str) -> Result<Places> {
        let read_after = |x: Symbol| run.after.iter().any(|a| free_names(a).contains(&x));
        let mut p = Places::default();
        for m in &run.members {
            let Member::Let(x, _, _) = m else { continue };
            let Expr::Let(_, e0, _) = find_let(e, *x) else {
                unreachable!("a member let is in the spine")
            };
            let ty = self.type_of(e0)?;
            p.old_types.push((*x, self.tenv.insert(*x, ty.clone())));
            let Type::Tensor(_, elem) = &ty else {
                unreachable!("a gen has a tensor type")
            };
            if read_after(*x) {
                let place = self.place(x.as_str(), &ty)?;
                p.full.push((*x, place.clone(), ty.clone()));
                p.rows
                    .push((*x, place.index_unchecked(c, self)?, (**elem).clone()));
            } else if **elem == Type::Real {
                // One real a row: a local of the loop body.
                let b = self.fresh("b", x.as_str());
                p.local_rows.push(Stmt::Line(format!("double {b}[1];")));
                p.rows.push((*x, V::leaf(b, vec![]), Type::Real));
            } else {
                let place = self.place(x.as_str(), elem)?;
                p.contracted.extend(super::parallel::buffers(&place));
                p.rows.push((*x, place, (**elem).clone()));
            }
        }
        Ok(p)
    }

    /// An accumulator and a first-term flag per sum member.
    fn member_accumulators(&mut self, members: &[Member]) -> Vec<(String, String)> {
        let mut accs = vec![];
        for m in members {
            if let Member::Sum(..) | Member::LetSum { .. } | Member::LeafSum { .. } = m {
                let acc = self.fresh("acc", "row");
                let first = self.fresh("h", "");
                self.decl("double", &acc, "0.0".into());
                self.decl("int", &first, "0".into());
                accs.push((acc, first));
            }
        }
        accs
    }

    /// Reductions' rows (the destination, or a fresh row the body then
    /// reads), zero filled, with their first-term flags.
    fn reduction_rows(&mut self, members: &[Member]) -> Result<Vec<ReductionRow>> {
        let mut reds = vec![];
        for m in members {
            let Member::Reduce {
                dim,
                body,
                sum,
                dest,
                outer,
                leaf,
                ..
            } = m
            else {
                continue;
            };
            if leaf.is_some() {
                // A block of rows, one per point of the outer gens.
                let mut dims: Vec<Affine> = outer.iter().map(|(_, d)| (*d).clone()).collect();
                dims.push((*dim).clone());
                let t = self.slot("row", &dims)?;
                let mut sizes = vec![];
                for d in &dims {
                    sizes.push(self.dim(d)?);
                }
                let flags = self.zero_row(&t, "0", &sizes.join(" * "));
                reds.push(ReductionRow {
                    buf: t,
                    off: "0".into(),
                    flags,
                    tmp: Some(self.internal_symbol("row")),
                });
                continue;
            }
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
            reds.push(ReductionRow {
                buf,
                off,
                flags,
                tmp,
            });
        }
        Ok(reds)
    }

    /// One iteration of the fused loop over row `c` (of `n`, C extent
    /// `dn`): every member computes its row, in order, reading the rows of
    /// earlier members where their bodies read them.
    #[allow(clippy::too_many_arguments)]
    fn fused_iteration(
        &mut self,
        members: &[Member],
        rows: &[(Symbol, V, Type)],
        accs: &[(String, String)],
        reds: &[ReductionRow],
        c: &str,
        n: &Affine,
        dn: &str,
    ) -> Result<()> {
        let mut acc_it = accs.iter();
        // The rows computed so far in this iteration: name, row symbol.
        let mut done: Vec<(Symbol, Symbol)> = vec![];
        let mut red_it = reds.iter();
        let mut merged = false;
        for (k, m) in members.iter().enumerate() {
            if std::mem::take(&mut merged) {
                continue;
            }
            let (v, body) = match m {
                Member::Let(_, v, b) | Member::Out(v, b, _) | Member::Sum(v, b, _) => (*v, *b),
                Member::Reduce { inner, .. } => *inner,
                Member::LetSum { v, inner, .. } | Member::LeafSum { v, inner, .. } => (*v, *inner),
            };
            let mut body = body.clone();
            for (x, to) in &done {
                body = rewrite(&body, *x, v, *to);
            }
            let old_name = self.names.insert(v, c.to_string());
            let old_range = self.full_range.insert(v, n.clone());
            let old_c_range = self.ranges.insert(v, dn.to_string());
            match m {
                Member::Let(x, _, _) => {
                    let (_, row, elem) = rows
                        .iter()
                        .find(|(y, _, _)| y == x)
                        .expect("a row per member let");
                    self.store(&body, row)?;
                    let sym = self.internal_symbol("row");
                    self.vals.insert(sym, row.clone());
                    self.tenv.insert(sym, elem.clone());
                    done.push((*x, sym));
                }
                Member::Out(_, _, ld) if super::stored::is_stored_out(ld) => {
                    let also = match members.get(k + 1) {
                        Some(next) => self.same_walk(v, &body, ld, next, &done),
                        None => None,
                    };
                    let also = match also {
                        Some((e2, g, dim)) => {
                            let r = red_it.next().expect("a row per reduction");
                            merged = true;
                            Some((
                                e2,
                                super::sum::Acc::Row {
                                    gen: g,
                                    dim: dim.clone(),
                                    buf: r.buf.clone(),
                                    off: r.off.clone(),
                                    flags: r.flags.clone(),
                                    flag_off: "0".into(),
                                },
                            ))
                        }
                        None => None,
                    };
                    self.store_stored_row(v, &body, ld, also)?;
                }
                Member::Out(_, _, ld) => {
                    let row = ld.index_unchecked(c, self)?;
                    self.store(&body, &row)?;
                }
                // A sum chain's inner sums add their terms to the same
                // accumulator, as the chain does (the terms and their
                // order are the chain's: none where an inner sum is empty).
                Member::Sum(..) if matches!(body, Expr::Sum(..)) => {
                    let (acc, first) = acc_it.next().expect("an accumulator per sum");
                    let (acc, first) = (acc.clone(), first.clone());
                    self.sum_nest(&body, &super::sum::Acc::Scalar { acc, first })?;
                }
                Member::Sum(..) | Member::LetSum { .. } | Member::LeafSum { .. } => {
                    let (acc, first) = acc_it.next().expect("an accumulator per sum");
                    let x = self.scalar(&body, "v")?;
                    self.line(format!("{acc} += {x};"));
                    self.line(format!("ATL_SUMADD({first});"));
                }
                Member::Reduce { g, dim, outer, .. } => {
                    let r = red_it.next().expect("a row per reduction");
                    self.block_rows(outer, None, &body, *g, dim, r)?;
                }
            }
            restore(&mut self.names, v, old_name);
            restore(&mut self.full_range, v, old_range);
            restore(&mut self.ranges, v, old_c_range);
        }
        for (_, sym) in done {
            self.vals.remove(&sym);
            self.tenv.remove(&sym);
        }
        Ok(())
    }

    /// A stored row (`body`, the leaf's gen over row `v`'s body: `(gen j m
    /// (iverson (S v j) e))`) followed by a reduction over the same
    /// relation's tuples, `(gen g m (sum v2 n (iverson (S v2 g) e2)))`:
    /// both walk the row's tuples in the same order, so one walk can store
    /// the row's values and add the reduction's terms. Its summand with
    /// `v2` and `g` renamed `v` and `j` (the earlier members' rows read
    /// as in `done`), and `j` with its extent.
    fn same_walk<'a>(
        &self,
        v: Symbol,
        body: &'a Expr,
        dest: &V,
        next: &'a Member,
        done: &[(Symbol, Symbol)],
    ) -> Option<(Expr, Symbol, &'a Affine)> {
        let V::StoredOut { rel, .. } = dest else {
            return None;
        };
        let Member::Reduce {
            g,
            dim,
            inner: (v2, summand),
            outer,
            leaf: None,
            ..
        } = next
        else {
            return None;
        };
        let Expr::Gen(j, dj, row) = body else {
            return None;
        };
        let Expr::Iverson(p, _) = &**row else {
            return None;
        };
        let Expr::Iverson(p2, e2) = summand else {
            return None;
        };
        let atom2 = crate::front::ast::Pred::Rel(*rel, vec![Affine::var(*v2), Affine::var(*g)]);
        let atom = crate::front::ast::Pred::Rel(*rel, vec![Affine::var(v), Affine::var(*j)]);
        let only = |q: &crate::front::ast::Pred, a: &crate::front::ast::Pred| {
            let cs = crate::terms::brackets::conjuncts(q);
            cs.len() == 1 && *cs[0] == *a
        };
        if !outer.is_empty()
            || dj != *dim
            || !only(p, &atom)
            || !only(p2, &atom2)
            || matches!(&**e2, Expr::Sum(..) | Expr::Iverson(..))
        {
            return None;
        }
        let mut e2 = (**e2).clone();
        for (x, to) in done {
            e2 = rewrite(&e2, *x, *v2, *to);
        }
        let e2 = super::order::subst_expr(&e2, *v2, &Affine::var(v), &[v, *j])?;
        let e2 = super::order::subst_expr(&e2, *g, &Affine::var(*j), &[v, *j])?;
        Some((e2, *j, dj))
    }

    /// After the loop: sums' accumulators copied to their places,
    /// reductions' first-term flags closed and their gens run over the
    /// reduced rows, the trailing scalar let bound (what to restore).
    fn finish_members(
        &mut self,
        members: &[Member],
        accs: &[(String, String)],
        reds: &[ReductionRow],
    ) -> Result<Option<(Symbol, Shadowed)>> {
        let mut acc_it = accs.iter();
        let mut red_it = reds.iter();
        let mut trailing_old = None;
        for m in members {
            match m {
                Member::Sum(_, _, ld) => {
                    let (acc, _) = acc_it.next().expect("an accumulator per sum");
                    V::Scalar(acc.clone()).copy_into(ld, self)?;
                }
                Member::Reduce {
                    g,
                    dim,
                    sum,
                    dest,
                    outer,
                    leaf: Some(leaf),
                    ..
                } => {
                    let r = red_it.next().expect("a row per reduction");
                    self.line(format!("ATL_FIRST_AT_END({});", r.flags));
                    let sym = r.tmp.expect("a block of rows is a fresh slot");
                    let mut dims: Vec<Affine> = outer.iter().map(|(_, d)| (*d).clone()).collect();
                    dims.push((*dim).clone());
                    let mut ty = Type::Real;
                    for d in dims.iter().rev() {
                        ty = Type::Tensor(d.clone(), Box::new(ty));
                    }
                    self.vals.insert(sym, V::leaf(r.buf.clone(), dims));
                    self.tenv.insert(sym, ty);
                    let mut read = Expr::Var(sym);
                    for (o, _) in outer.iter().chain(std::iter::once(&(*g, *dim))) {
                        read = Expr::Get(Box::new(read), Affine::var(*o));
                    }
                    let l = replace_in_gens(leaf, sum, &read);
                    self.store(&l, dest)?;
                }
                Member::Reduce {
                    g,
                    dim,
                    body,
                    sum,
                    dest,
                    ..
                } => {
                    let r = red_it.next().expect("a row per reduction");
                    self.line(format!("ATL_FIRST_AT_END({});", r.flags));
                    if let Some(sym) = r.tmp {
                        self.vals
                            .insert(sym, V::leaf(r.buf.clone(), vec![(*dim).clone()]));
                        self.tenv
                            .insert(sym, Type::Tensor((*dim).clone(), Box::new(Type::Real)));
                        let read = Expr::Get(Box::new(Expr::Var(sym)), Affine::var(*g));
                        let b = super::order::replace(body, &[(*sum as *const Expr, read)]);
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
                Member::LeafSum { e, sum, dest, .. } => {
                    let (acc, _) = acc_it.next().expect("an accumulator per sum");
                    let sym = self.internal_symbol("acc");
                    self.vals.insert(sym, V::Scalar(acc.clone()));
                    self.tenv.insert(sym, Type::Real);
                    let e1 = replace_in_leaf(e, &[(*sum as *const Expr, Expr::Var(sym))]);
                    self.store(&e1, dest)?;
                }
                _ => {}
            }
        }
        Ok(trailing_old)
    }

    /// The rest of the program after the run, with the full members bound;
    /// then every binding the run made is undone.
    fn store_after_run(
        &mut self,
        run: &Run,
        full: Vec<(Symbol, V, Type)>,
        old_types: Vec<(Symbol, Option<Type>)>,
        trailing_old: Option<(Symbol, Shadowed)>,
        dest: &V,
    ) -> Result<()> {
        let mut olds = vec![];
        for (x, p, _) in full {
            olds.push((x, self.vals.insert(x, p)));
        }
        let r = (|| {
            if matches!(run.rest, Expr::Let(..)) || run.trailing.is_some() {
                self.store(run.rest, dest)
            } else {
                for (le, ld) in &run.others {
                    self.store(le, ld)?;
                }
                Ok(())
            }
        })();
        if let Some((x, old)) = trailing_old {
            self.unbind(x, old);
        }
        for (x, old) in olds.into_iter().rev() {
            restore(&mut self.vals, x, old);
        }
        for (x, old) in old_types.into_iter().rev() {
            restore(&mut self.tenv, x, old);
        }
        r
    }
}

/// What binding a let shadowed: its value and type (see `bind_let`).
type Shadowed = (Option<V>, Option<Type>);

/// A fused run: its extent, member lets' names, members, what follows the
/// lets, the trailing scalar let, and the result's leaves that did not
/// join (`others`; `after` also holds a following spine).
struct Run<'a> {
    n: &'a Affine,
    names: Vec<Symbol>,
    members: Vec<Member<'a>>,
    rest: &'a Expr,
    trailing: Option<Symbol>,
    others: Vec<(&'a Expr, V)>,
    after: Vec<&'a Expr>,
    /// The extents of the reductions that joined on a tie of the loop
    /// order (interchanged only when at most `ATL_ROW_LIMIT`).
    ties: Vec<&'a Affine>,
}

impl Run<'_> {
    /// Does a body over row variable `v` read the members so far only at
    /// its own row?
    fn qualifies(&self, body: &Expr, v: Symbol) -> bool {
        self.names.iter().all(|x| *x != v && row_only(body, *x, v))
    }
}

/// Where a run's member lets live (see `member_places`).
#[derive(Default)]
struct Places {
    /// Members read after the run: name, full place, type.
    full: Vec<(Symbol, V, Type)>,
    /// Every member's row in one iteration: name, row, its type.
    rows: Vec<(Symbol, V, Type)>,
    /// The members' previous types, to restore.
    old_types: Vec<(Symbol, Option<Type>)>,
    /// Declarations of the one-real rows, at the top of the loop body.
    local_rows: Vec<Stmt>,
    /// Buffers of the contracted rows.
    contracted: Vec<String>,
}

/// A reduction member's accumulator row: buffer, offset, first-term flags,
/// and the symbol of a fresh row the gen then reads.
struct ReductionRow {
    buf: String,
    off: String,
    flags: String,
    tmp: Option<Symbol>,
}

/// Put back a map entry as it was before an `insert` returned `old`.
fn restore<K: std::hash::Hash + Eq, T>(
    map: &mut std::collections::HashMap<K, T>,
    k: K,
    old: Option<T>,
) {
    match old {
        Some(o) => map.insert(k, o),
        None => map.remove(&k),
    };
}

/// The extent of the run a spine would start: the first let's gen's, or
/// for a result of pairs, its first gen or sum leaf's.
fn run_extent<'a>(e: &'a Expr, dest: &V) -> Option<&'a Affine> {
    match e {
        Expr::Let(_, first, _) => match &**first {
            Expr::Gen(_, n, _) => Some(n),
            _ => None,
        },
        Expr::Pair(..) => {
            let mut ls = vec![];
            leaves(e, dest, &mut ls);
            ls.into_iter().find_map(|(le, _)| match le {
                Expr::Gen(_, n, _) | Expr::Sum(_, n, _) => Some(n),
                _ => None,
            })
        }
        _ => None,
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

/// The one sum of a real result leaf, [`scalar_sum`]'s, also under
/// brackets whose affine conjuncts all hold when `n >= 1` (the sum runs
/// only when the loop does, so its operations are those the bracket
/// allows).
fn leaf_sum<'a>(e: &'a Expr, n: &Affine) -> Option<(&'a Expr, Symbol, &'a Expr)> {
    let mut inside = e;
    while let Expr::Iverson(p, body) = inside {
        if !implied_by_rows(p, n) {
            return None;
        }
        inside = body;
    }
    scalar_sum(inside, n)
}

/// Does the bracket `p` hold whenever `n >= 1` (its affine conjuncts all
/// implied by it)?
fn implied_by_rows(p: &crate::front::ast::Pred, n: &Affine) -> bool {
    use crate::constraints::{Constraint, LinForm};
    let Some(Constraint::Ge(g)) = Constraint::compare(
        crate::front::ast::CmpOp::Le,
        &LinForm::from_affine(&Affine::constant(1)),
        &LinForm::from_affine(n),
    ) else {
        return false;
    };
    super::pred::affine(p).is_some_and(|cs| {
        cs.iter().all(|c| match c {
            Constraint::Ge(f) => f.terms() == g.terms() && f.constant >= g.constant,
            _ => false,
        })
    })
}

/// `e` with the subexpression `sum` (by address) replaced by `to`, through
/// gens and brackets and [`super::order::replace`]'s forms.
fn replace_in_gens(e: &Expr, sum: &Expr, to: &Expr) -> Expr {
    match e {
        Expr::Gen(g, d, b) => Expr::Gen(*g, d.clone(), Box::new(replace_in_gens(b, sum, to))),
        Expr::Iverson(p, b) => Expr::Iverson(p.clone(), Box::new(replace_in_gens(b, sum, to))),
        _ => super::order::replace(e, &[(sum as *const Expr, to.clone())]),
    }
}

/// `e` with the given subexpressions (by address) replaced, through the
/// brackets [`leaf_sum`] passes and [`super::order::replace`]'s forms.
fn replace_in_leaf(e: &Expr, repl: &[(*const Expr, Expr)]) -> Expr {
    match e {
        Expr::Iverson(p, body) => Expr::Iverson(p.clone(), Box::new(replace_in_leaf(body, repl))),
        _ => super::order::replace(e, repl),
    }
}

/// A stored result leaf `(gen v n (gen j m ... (iverson (S v j ...) e)))`
/// over all its dimensions, bracketed by its relation alone (every stored
/// tuple written, none zero filled first): the gens below the first and
/// `e`. Row fusion stores it a row at a time, the row's tuples walked by
/// the relation's layout ([`Lowerer::store_stored_row`]).
fn stored_rows<'a>(le: &'a Expr, dest: &V) -> Option<(Vec<(Symbol, &'a Affine)>, &'a Expr)> {
    let V::StoredOut { rel, dims, .. } = dest else {
        return None;
    };
    let mut chain: Vec<(Symbol, &Affine)> = vec![];
    let mut x = le;
    while let Expr::Gen(i, d, b) = x {
        chain.push((*i, d));
        x = b;
    }
    let vars: Vec<Symbol> = chain.iter().map(|c| c.0).collect();
    let distinct = (1..vars.len()).all(|k| !vars[..k].contains(&vars[k]));
    let full = chain.len() == dims.len() && chain.iter().zip(dims).all(|((_, d), a)| *d == a);
    let Expr::Iverson(p, body) = x else {
        return None;
    };
    let atom = crate::front::ast::Pred::Rel(*rel, vars.iter().map(|v| Affine::var(*v)).collect());
    let only_atom = crate::terms::brackets::conjuncts(p)
        .into_iter()
        .all(|q| *q == atom);
    (distinct && full && only_atom && !matches!(&**body, Expr::Iverson(..)))
        .then(|| (chain.split_off(1), &**body))
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
