//! Reductions: a maximal chain of nested `sum`s with its bracket becomes
//! loops bounded by the bracket's affine conjuncts (an equality removes a
//! loop, a disjunction splits the loops into disjoint parts, other
//! conjuncts are guards where their variables are bound), accumulating
//! into a scalar or, interchanged, into a row.

use super::ir::Stmt;
use super::pred;
use super::relation;
use super::value::V;
use super::Lowerer;
use crate::constraints::{self, Constraint, LinForm};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{Expr, Pred};
use crate::symbol::Symbol;
use crate::terms::brackets::conjuncts;

impl Lowerer {
    /// A maximal chain of nested sums with its bracket: loops bounded by
    /// the bracket's affine conjuncts; returns the accumulator. Sums in
    /// its body that walk memory better interchanged run first, into rows
    /// ([`Lowerer::sum_rows`]); rows of a relation walk only when short
    /// enough, chosen at run time.
    pub(super) fn sum_chain(&mut self, e: &Expr, base: &str) -> Result<String> {
        let acc = self.fresh("acc", base);
        let first = self.fresh("h", "");
        self.decl("double", &acc, "0.0".into());
        self.decl("int", &first, "0".into());
        let into = Acc::Scalar {
            acc: acc.clone(),
            first,
        };
        match self.sum_rows(e) {
            None => match nested_rows(self, e) {
                Some((outer, inner, h)) => {
                    // each inner sum has h terms: its partial sums added
                    // over the outer loops take as many additions as the
                    // one chain, h·N - 1, when h >= 1 (none when h = 0)
                    let dn = self.dim(h)?;
                    let (then, ()) = self.block(|lw| lw.loop_nest(outer, None, inner, &into))?;
                    self.guarded(&[format!("{dn} >= 1")], then);
                }
                None => self.sum_nest(e, &into)?,
            },
            Some(rows) if !rows.bounded => {
                let e = self.run_rows(&rows)?;
                self.sum_nest(&e, &into)?;
            }
            Some(rows) => {
                let dn = self.dim(rows.d)?;
                let (then, ()) = self.block(|lw| {
                    let e = lw.run_rows(&rows)?;
                    lw.sum_nest(&e, &into)
                })?;
                let (els, ()) = self.block(|lw| lw.sum_nest(e, &into))?;
                self.out.push(Stmt::If {
                    cond: format!("{dn} <= ATL_ROW_LIMIT"),
                    then,
                    els,
                });
            }
        }
        Ok(acc)
    }

    /// The loops of a sum chain accumulating into `acc`; with
    /// [`Acc::Row`] the `gen` variable is one more loop, the innermost
    /// (loop interchange, see [`super::order`]).
    pub(crate) fn sum_nest(&mut self, e: &Expr, acc: &Acc) -> Result<()> {
        let (mut chain, p, body) = crate::semantics::eval::sum_chain(e);
        if let Acc::Row { gen, dim, .. } = acc {
            chain.push((*gen, dim));
        }
        self.loop_nest(chain, p, body, acc)
    }

    /// The loops over `chain` where the bracket `p` holds, running `body`
    /// into `acc` at each point.
    pub(crate) fn loop_nest(
        &mut self,
        chain: Vec<(Symbol, &Affine)>,
        p: Option<&Pred>,
        body: &Expr,
        acc: &Acc,
    ) -> Result<()> {
        let vars: Vec<Symbol> = chain.iter().map(|(i, _)| *i).collect();
        let mut system = vec![];
        for (i, d) in &chain {
            self.dim(d)?;
            system.push(Constraint::Ge(LinForm::var(*i)));
            system.push(Constraint::Ge(
                LinForm::from_affine(d)
                    .add_constant(-1)
                    .and_then(|f| f.combine(1, &LinForm::var(*i), -1))
                    .ok_or_else(overflow)?,
            ));
        }
        let (others, split) = bracket_atoms(p, &mut system);
        // The bracket's own forms, which the evaluator computes and the
        // loops below replace by bounds, are checked on entry too.
        if let Some(p) = p {
            let mut olds = vec![];
            for (i, d) in &chain {
                olds.push((*i, self.bind_range(*i, d)?));
            }
            let r = self.record_pred_forms(p);
            for (i, old) in olds.into_iter().rev() {
                self.unbind_range(i, old);
            }
            r?;
        }
        for part in loop_parts(&split) {
            let mut system = system.clone();
            system.extend(part.constraints.iter().cloned());
            let vars = match acc {
                Acc::Store { .. } => vars.clone(),
                _ => keep_cursor_order(
                    &vars,
                    layout_order(&vars, part.atom.iter().chain(&others)),
                    &part.excluded,
                ),
            };
            let Some(plan) = constraints::plan(&system, &vars) else {
                return Err(overflow());
            };
            // Where the body runs, the bracket holds, and the part's atom.
            let holds: Vec<Pred> = p.into_iter().chain(&part.atom).cloned().collect();
            let nest = Nest {
                body,
                acc,
                chain: &chain,
                holds: &holds,
            };
            self.part_loops(&plan, &vars, &others, part, &nest)?;
        }
        Ok(())
    }

    /// The loops of one part of a split bracket, by its loop plan: positive
    /// relation atoms over the loop variables drive loops (see
    /// `relation.rs`), each variable by one atom; the other non-affine
    /// conjuncts, and the negated earlier parts, are guards.
    fn part_loops(
        &mut self,
        plan: &constraints::LoopPlan,
        vars: &[Symbol],
        others: &[Pred],
        part: Part,
        nest: &Nest,
    ) -> Result<()> {
        let level_vars: Vec<Symbol> = plan.levels.iter().filter_map(|l| l.var).collect();
        let mut guards = vec![];
        let mut drives: Vec<relation::Drive> = vec![];
        for q in others.iter().cloned().chain(part.atom) {
            match self.drive_of(&q, &level_vars, vars) {
                Some(dr)
                    if !dr
                        .driven_vars()
                        .iter()
                        .any(|v| drives.iter().any(|d| d.driven_vars().contains(v))) =>
                {
                    drives.push(dr)
                }
                _ => guards.push(q),
            }
        }
        let placed = place_guards(plan, &level_vars, guards, part.excluded);
        let mut top = self.constraint_conds(&plan.top)?;
        let mut engaged = vec![];
        for d in &drives {
            let (cond, saved) = self.engage(d)?;
            top.extend(cond);
            engaged.extend(saved);
        }
        let r = self.block(|lw| lw.levels(plan, 0, &placed, nest));
        self.disengage(engaged);
        let (stmts, ()) = r?;
        self.guarded(&top, stmts);
        Ok(())
    }

    fn levels(
        &mut self,
        plan: &constraints::LoopPlan,
        k: usize,
        placed: &[Vec<(bool, Pred)>],
        nest: &Nest,
    ) -> Result<()> {
        let (acc, chain) = (nest.acc, nest.chain);
        // Non-affine conjuncts whose variables are all bound by now.
        let mut conds = vec![];
        for (neg, q) in &placed[k] {
            if k == placed.len() - 1 && !plan.defs.is_empty() {
                continue; // tested after the definitions
            }
            let c = self.pred(q)?;
            conds.push(if *neg { format!("!{c}") } else { c });
        }
        let inner = |lw: &mut Lowerer| -> Result<()> {
            if k == plan.levels.len() {
                return lw.innermost(plan, &placed[k], nest);
            }
            let level = &plan.levels[k];
            let v = level.var.expect("a loop level has a variable");
            let lo = lw.bound_expr(&level.lower, "atlh_max", "atlh_ceildiv")?;
            let hi = lw.bound_expr(&level.upper, "atlh_min", "atlh_floordiv")?;
            let c = lw.bind_index(v, chain_dim(chain, v)?)?;
            if let Some((_, dim)) = chain.iter().find(|(i, _)| *i == v) {
                lw.full_range.insert(v, (*dim).clone());
            }
            lw.open_level(v, &c);
            let (stmts, ()) = lw.block(|lw| {
                let g = lw.constraint_conds(&level.guards)?;
                let (inner, ()) = lw.block(|lw| lw.levels(plan, k + 1, placed, nest))?;
                lw.guarded(&g, inner);
                Ok(())
            })?;
            // The innermost loop of a scalar reduction without loops of its
            // own: its terms may be added in SIMD lanes (reassociation).
            if let Acc::Scalar { acc, .. } = acc {
                if k + 1 == plan.levels.len() && !has_loop(&stmts) {
                    lw.line(format!("ATL_SIMD_REDUCE({acc})"));
                }
            }
            let unclipped = lw.unclipped_bounds(v, level);
            lw.level_loop(v, c, lo, hi, unclipped, stmts)
        };
        if conds.is_empty() {
            inner(self)
        } else {
            let (stmts, ()) = self.block(inner)?;
            self.guarded(&conds, stmts);
            Ok(())
        }
    }

    /// Inside every loop: the variables the plan solved defined, the
    /// conjuncts that read them tested, then the body accumulated.
    fn innermost(
        &mut self,
        plan: &constraints::LoopPlan,
        placed: &[(bool, Pred)],
        nest: &Nest,
    ) -> Result<()> {
        let chain = nest.chain;
        for d in &plan.defs {
            let c = self.bind_index(d.var, chain_dim(chain, d.var)?)?;
            let num = self.ix(&d.num)?;
            let def = if d.den == 1 {
                num
            } else {
                format!("{num} / {}", d.den)
            };
            self.decl("const int64_t", &c, def);
            if let Some((_, dim)) = chain.iter().find(|(i, _)| *i == d.var) {
                self.full_range.insert(d.var, (*dim).clone());
            }
        }
        let mut late = vec![];
        if !plan.defs.is_empty() {
            for (neg, q) in placed {
                let c = self.pred(q)?;
                late.push(if *neg { format!("!{c}") } else { c });
            }
        }
        let mark = self.assume(nest.holds);
        let r = self.block(|lw| lw.accumulate(nest.body, nest.acc));
        self.forget(mark);
        let (stmts, ()) = r?;
        self.guarded(&late, stmts);
        Ok(())
    }

    /// One point of the loops: the body stored into its element, or added
    /// to the scalar or row accumulator.
    fn accumulate(&mut self, body: &Expr, acc: &Acc) -> Result<()> {
        if let Acc::Both(a, b) = acc {
            let Expr::Pair(x, y) = body else {
                return Err(Error::eval(
                    "two accumulations of one walk need a pair (internal error)",
                ));
            };
            self.accumulate(x, a)?;
            return self.accumulate(y, b);
        }
        if let Acc::Store { dest, gens } = acc {
            if super::stored::is_stored_out(dest) {
                let place = self.stored_out_at(dest, gens)?;
                return self.store(body, &place);
            }
            let mut place = dest.clone();
            for g in gens {
                let c = self.names.get(g).cloned().ok_or_else(|| {
                    Error::eval("a stored gen variable is unbound (internal error)")
                })?;
                place = place.index_unchecked(&c, self)?;
            }
            return self.store(body, &place);
        }
        let x = self.scalar(body, "v")?;
        match acc {
            Acc::Store { .. } | Acc::Both(..) => {}
            Acc::Scalar { acc, first } => {
                self.line(format!("{acc} += {x};"));
                self.line(format!("ATL_SUMADD({first});"));
            }
            Acc::Row {
                gen,
                buf,
                off,
                flags,
                flag_off,
                ..
            } => {
                let i = self
                    .names
                    .get(gen)
                    .cloned()
                    .ok_or_else(|| Error::eval("an interchanged gen variable is unbound"))?;
                let at = if off == "0" {
                    i.clone()
                } else {
                    format!("{off} + {i}")
                };
                self.line(format!("{buf}[{at}] += {x};"));
                if off == "0" {
                    // a scatter at the loop's coordinate: its element is
                    // fetched ahead as a gathered row is
                    self.note_gather(&i, buf, "1");
                }
                let fat = if flag_off == "0" {
                    i
                } else {
                    format!("{flag_off} + {i}")
                };
                self.line(format!("ATL_SUMADD_AT({flags}, {fat});"));
            }
        }
        Ok(())
    }
}

/// The outer sums of a chain (variables and dimensions), its innermost
/// sum and that sum's extent ([`nested_rows`]).
type NestedRows<'a> = (Vec<(Symbol, &'a Affine)>, &'a Expr, &'a Affine);

/// `(sum v1 d1 ... (sum c h body))` without brackets whose innermost sum
/// runs rows ([`Lowerer::sum_rows`]): the outer sums' variables and
/// dimensions, the innermost sum and `h`. The outer loops then add one
/// partial sum per point, each computed with its rows (a sum over features
/// of a relation walk, `Σ_i Σ_c relu(Σ_j [E i j]·Y[j][c])²`), instead of
/// running as one chain with the walk under the loop over `c`.
fn nested_rows<'a>(lw: &Lowerer, e: &'a Expr) -> Option<NestedRows<'a>> {
    let mut outer = vec![];
    let mut x = e;
    while let Expr::Sum(v, d, b) = x {
        if !matches!(&**b, Expr::Sum(..)) {
            break;
        }
        outer.push((*v, d));
        x = b;
    }
    let Expr::Sum(_, h, _) = x else {
        return None;
    };
    (!outer.is_empty() && lw.sum_rows(x).is_some()).then_some((outer, x, h))
}

/// The conjuncts of a bracket: affine ones join `system`; the first
/// disjunction of affine predicates and relation atoms splits the loops
/// (returned second); the others are returned first.
fn bracket_atoms(p: Option<&Pred>, system: &mut Vec<Constraint>) -> (Vec<Pred>, Option<Vec<Pred>>) {
    let mut others: Vec<Pred> = vec![];
    let mut split: Option<Vec<Pred>> = None;
    let Some(p) = p else {
        return (others, split);
    };
    for atom in conjuncts(p) {
        match (pred::affine(atom), atom) {
            (Some(cs), _) => system.extend(cs),
            (None, Pred::Or(ps))
                if split.is_none()
                    && ps
                        .iter()
                        .all(|q| pred::affine(q).is_some() || matches!(q, Pred::Rel(..))) =>
            {
                split = Some(ps.clone())
            }
            _ => others.push(atom.clone()),
        }
    }
    (others, split)
}

/// The loop order of a sum's part: `vars` (the chain's order), except that
/// the variables of the first relation atom (the part's own first) whose
/// arguments are distinct loop variables not in that order take their
/// places in the order of its arguments. The atom then drives its loops in
/// its layout's order, with no permuted layout built per call. A sum's
/// terms (and a row's, each element flagged at its first term) may be
/// added in any order: reassociation only.
fn layout_order<'a>(vars: &[Symbol], atoms: impl Iterator<Item = &'a Pred>) -> Vec<Symbol> {
    for atom in atoms {
        let Pred::Rel(_, args) = atom else {
            continue;
        };
        let mut order: Vec<Symbol> = vec![];
        for a in args {
            if let [(v, 1)] = a.terms.as_slice() {
                if a.constant == 0 && vars.contains(v) && !order.contains(v) {
                    order.push(*v);
                    continue;
                }
            }
            if a.terms.iter().any(|(v, _)| vars.contains(v)) {
                order.clear();
                break;
            }
        }
        let mut slots: Vec<usize> = order
            .iter()
            .filter_map(|v| vars.iter().position(|x| x == v))
            .collect();
        if order.len() < 2 || slots.windows(2).all(|w| w[0] < w[1]) {
            continue;
        }
        slots.sort_unstable();
        let mut out = vars.to_vec();
        for (s, v) in slots.into_iter().zip(order) {
            out[s] = v;
        }
        return out;
    }
    vars.to_vec()
}

/// The loop order of a part whose excluded earlier parts are tested at
/// each point: `preferred` (from [`layout_order`]), unless it takes the
/// variables of an excluded relation atom out of their order in `vars`.
/// In `vars`' order such an atom's last argument is the innermost of its
/// loops and its prefix is fixed before that loop, so the test is a cursor
/// kept in step with that loop (`Lowerer::cursor_test`); out of order it is
/// a binary search at a random row per point. The part's own atom then
/// reads a permuted layout, built once per call in time linear in the
/// tuples: `(or (E i j) (E j i))` over `i < j` walks row `i` of `Eᵀ` with a
/// cursor into row `i` of `E`, instead of row `j` of `E` with a search in
/// row `i` for every tuple.
fn keep_cursor_order(vars: &[Symbol], preferred: Vec<Symbol>, excluded: &[Pred]) -> Vec<Symbol> {
    let in_order = |q: &Pred, order: &[Symbol]| {
        let Pred::Rel(_, args) = q else {
            return false;
        };
        let slots: Option<Vec<usize>> = args
            .iter()
            .map(|a| match a.terms.as_slice() {
                [(v, 1)] if a.constant == 0 => order.iter().position(|x| x == v),
                _ => None,
            })
            .collect();
        matches!(slots, Some(s) if s.len() >= 2 && s.windows(2).all(|w| w[0] < w[1]))
    };
    let breaks = |q: &Pred| in_order(q, vars) && !in_order(q, &preferred);
    if preferred != vars && excluded.iter().any(breaks) {
        vars.to_vec()
    } else {
        preferred
    }
}

/// What a loop nest runs at each point: the body, where it accumulates,
/// the chain's variables and dimensions, and what holds there.
struct Nest<'a> {
    body: &'a Expr,
    acc: &'a Acc,
    chain: &'a [(Symbol, &'a Affine)],
    holds: &'a [Pred],
}

/// One part of the loops under a bracket's disjunction: its constraints,
/// its relation atom, and the parts before it (negated guards, so that no
/// tuple is counted twice).
struct Part {
    constraints: Vec<Constraint>,
    atom: Option<Pred>,
    excluded: Vec<Pred>,
}

/// The parts of a split bracket `p1 ∨ p2 ∨ ...`: p1, then p2 where not p1,
/// ...; one part without a split.
fn loop_parts(split: &Option<Vec<Pred>>) -> Vec<Part> {
    match split {
        None => vec![Part {
            constraints: vec![],
            atom: None,
            excluded: vec![],
        }],
        Some(ps) => ps
            .iter()
            .enumerate()
            .map(|(j, q)| match pred::affine(q) {
                Some(cs) => Part {
                    constraints: cs,
                    atom: None,
                    excluded: ps[..j].to_vec(),
                },
                None => Part {
                    constraints: vec![],
                    atom: Some(q.clone()),
                    excluded: ps[..j].to_vec(),
                },
            })
            .collect(),
    }
}

/// Where each non-affine conjunct is tested: the innermost level binding
/// one of its variables (after all loops if it mentions an eliminated
/// variable). `true` marks an excluded (negated) part.
fn place_guards(
    plan: &constraints::LoopPlan,
    level_vars: &[Symbol],
    guards: Vec<Pred>,
    excluded: Vec<Pred>,
) -> Vec<Vec<(bool, Pred)>> {
    let mut placed: Vec<Vec<(bool, Pred)>> = vec![vec![]; level_vars.len() + 1];
    let tagged = guards
        .into_iter()
        .map(|q| (false, q))
        .chain(excluded.into_iter().map(|q| (true, q)));
    for (neg, q) in tagged {
        let mut free = std::collections::BTreeSet::new();
        crate::front::subst::pred_free(&q, &mut free);
        let at = if plan.defs.iter().any(|d| free.contains(&d.var)) {
            level_vars.len()
        } else {
            level_vars
                .iter()
                .rposition(|v| free.contains(v))
                .map_or(0, |k| k + 1)
        };
        placed[at].push((neg, q));
    }
    placed
}

/// Where a sum chain accumulates.
pub(crate) enum Acc {
    /// No accumulation: each point of a `gen` chain (variables `gens`,
    /// outermost first) is stored into its element of `dest`, which is
    /// zero filled before (a `gen` over a relation's pattern).
    Store { dest: V, gens: Vec<Symbol> },
    /// A C local, with its first-term flag (the first term needs no addition).
    Scalar { acc: String, first: String },
    /// `buf[off + i]` for every `i` of `(gen gen dim ...)`, the gen's loop
    /// innermost; `flags[flag_off + i]` marks which elements have their
    /// first term.
    Row {
        gen: Symbol,
        dim: Affine,
        buf: String,
        off: String,
        flags: String,
        flag_off: String,
    },
    /// Two accumulations at each point of one walk: the body is a pair,
    /// its first part goes to the first, its second to the second, in
    /// that order (a stored row and a row reduction over the same tuples).
    Both(Box<Acc>, Box<Acc>),
}

/// The dimension of a variable of a sum chain.
fn chain_dim<'a>(chain: &[(Symbol, &'a Affine)], v: Symbol) -> Result<&'a Affine> {
    chain
        .iter()
        .find(|(i, _)| *i == v)
        .map(|(_, d)| *d)
        .ok_or_else(|| {
            Error::eval(format!(
                "a loop over {v} outside its sum chain (internal error)"
            ))
        })
}

/// Does a block contain a loop?
fn has_loop(ss: &[Stmt]) -> bool {
    ss.iter().any(|s| match s {
        Stmt::Line(_) | Stmt::Decl { .. } => false,
        Stmt::For { .. } | Stmt::Chunks { .. } => true,
        Stmt::If { then, els, .. } => has_loop(then) || has_loop(els),
        Stmt::Block(body) => has_loop(body),
    })
}

fn overflow() -> Error {
    Error::eval("index arithmetic overflows 64-bit integers")
}
