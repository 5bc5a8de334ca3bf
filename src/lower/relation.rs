//! Relations by their stored tuples. A relation parameter arrives in its
//! compressed layout ([`crate::backend::marshal::compressed_layout`]:
//! level 0 dense from arity 2 on, every other level a sorted list of
//! coordinates under each position of the level above). A loop whose
//! bracket conjoins a positive atom `(R a ...)` over its variables visits
//! `R`'s stored tuples instead of its whole range:
//!
//! * the atom's arguments that mention no loop variable of the nest (the
//!   bound prefix) are located once, before the loops (a binary search per
//!   level); the loop variables among its arguments are driven, each at
//!   the layout's next level, in loop order;
//! * an atom whose driven variables are not in the layout's order reads a
//!   permuted layout (bound arguments first, then the driven ones in loop
//!   order), built once per call on entry, in time linear in the tuples;
//! * a driven loop's bounds clip its range of stored coordinates (they
//!   ascend: a binary search where a bound cuts into the fibre, no test
//!   per tuple; none when the bounds are the level's whole dimension) and
//!   its guards are conditions on each; at a dense level it is the range
//!   loop, clipped to the relation's dimension;
//! * `(exists j d (and (R ... j) q))` walks the fibre of `j` (a test of its
//!   extent alone when `q` is empty), stopping at the first witness.
//!
//! Atoms that cannot drive (negated, repeated variables, arguments that
//! are forms of loop variables) stay membership tests ([`super::value::V::test`]):
//! a binary search in the row of their prefix, or, when their last argument
//! is the variable of an enclosing loop over ascending stored coordinates and
//! their prefix is fixed before that loop, a cursor into that row kept in
//! step with the loop (one walk of the row per loop, no search per test).

use super::ir::{PermutedRelation, Stmt};
use super::prefetch::{prefetch_worth, prefetches, Gather};
use super::sum::Acc;
use super::value::V;
use super::Lowerer;
use crate::constraints::{self, LinForm};
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{CmpOp, Expr, Pred, Type};
use crate::symbol::Symbol;
use crate::terms::brackets::conjuncts;
use std::collections::HashMap;

/// The most arguments a permuted layout may have (the C helper's limit).
const MAX_PERMUTED_ARITY: usize = 16;

/// A loop variable iterating a level of a relation's layout.
#[derive(Clone, Debug)]
pub(crate) struct DrivenLevel {
    /// The C name of the layout.
    index: String,
    level: usize,
    /// The level is dense (its positions are the coordinates).
    dense: bool,
    /// The layout's dimension at this level.
    dim: Affine,
    parent: Parent,
    /// The C name of this loop's position, once its loop is open.
    position: Option<String>,
    /// The C names of the variables in scope when its loop opened (a
    /// compressed level's): what a [`Cursor`]'s row may mention.
    scope: Option<HashMap<Symbol, String>>,
    /// Membership tests its body makes by a cursor.
    cursors: Vec<Cursor>,
    /// The level is its layout's last (it holds one coordinate per tuple).
    last: bool,
    /// The C name of the loop variable, once a compressed level's loop
    /// is open.
    cname: Option<String>,
    /// Rows its body reads at the loop's coordinate ([`super::prefetch`]).
    pub(super) gathers: Vec<Gather>,
}

impl DrivenLevel {
    /// Is it an open loop over the coordinates of a layout's last level
    /// (whose rows [`super::prefetch`] fetches ahead)?
    pub(super) fn gathers_rows(&self) -> bool {
        self.last && !self.dense && self.cname.is_some()
    }

    /// Is the C index expression `idx` this loop's variable itself?
    pub(super) fn is_var(&self, idx: &str) -> bool {
        self.cname.as_deref().is_some_and(|c| {
            idx == c || idx.strip_prefix('(').and_then(|r| r.strip_suffix(')')) == Some(c)
        })
    }
}

/// Which bounds of a loop over a compressed level's coordinates need no
/// search ([`Lowerer::unclipped_bounds`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Unclipped {
    lower: bool,
    upper: bool,
}

/// A membership test `(R b... v)` in the body of the loop of `v` over
/// ascending stored coordinates, the prefix `b...` fixed before that loop:
/// a cursor into `R`'s row of `b...`, declared before the loop and moved
/// forward to `v` at the top of each iteration, replaces a binary search
/// per test (the row is walked once in all, in step with the loop).
#[derive(Clone, Debug)]
struct Cursor {
    /// Declared before the loop: the row's position, the cursor, its end.
    decls: Vec<Stmt>,
    /// The statement that moves the cursor to the loop's coordinate.
    advance: String,
}

/// The position a compressed level's coordinates hang under.
#[derive(Clone, Debug)]
enum Parent {
    Root,
    /// A C local computed before the loops: the position of the bound
    /// prefix (these arguments).
    Position(String, Vec<Affine>),
    /// The position of the loop of this variable (the level above).
    Loop(Symbol),
}

/// An atom that drives loops: the layout it reads, its dimensions and
/// bound arguments in that layout's order, its driven variables in loop
/// order (driven variable `j` is at level `bound.len() + j`).
pub(crate) struct Drive {
    index: String,
    dims: Vec<Affine>,
    bound: Vec<Affine>,
    driven: Vec<Symbol>,
}

/// Is the argument a loop variable itself?
fn is_loop_arg(a: &Affine, loop_vars: &[Symbol]) -> bool {
    a.constant == 0 && a.terms.len() == 1 && a.terms[0].1 == 1 && loop_vars.contains(&a.terms[0].0)
}

impl Drive {
    /// The loop variables it drives, in loop order.
    pub(crate) fn driven_vars(&self) -> &[Symbol] {
        &self.driven
    }
}

/// A relation parameter's layout and dimensions, the permutation putting an
/// atom's bound arguments first and its loop variables next (in loop
/// order), and the atom's arguments.
type DriveShape = (String, Vec<Affine>, Vec<usize>, Vec<Affine>);

/// A gen chain over a relation's pattern: its variables and dimensions,
/// the bracket and the element.
type PatternGen<'a> = (Vec<(Symbol, &'a Affine)>, &'a Pred, &'a Expr);

/// A gen over a relation's pattern that is not stored: its variables and
/// dimensions, and its body.
type PatternView<'a> = (Vec<(Symbol, Affine)>, &'a Expr);

/// Does `e` bind nothing (no sum, gen or let)?
fn binder_free(e: &Expr) -> bool {
    e.binder().is_none() && e.children().all(binder_free)
}

/// The reads of a tensor `x` of `arity` dimensions in an expression, for
/// [`Lowerer::lazy_pattern`]: `sites` counts them; `avoid` are the names
/// its definition reads (no binder on the way to a read may shadow them).
struct Reads {
    x: Symbol,
    arity: usize,
    avoid: std::collections::BTreeSet<Symbol>,
    sites: usize,
}

impl Reads {
    /// Is every free occurrence of `x` in `e` a read of one element by
    /// plain index variables that name every loop variable of `bound` (the
    /// binders entered since the let)?
    fn ok(&mut self, e: &Expr, bound: &mut Vec<Symbol>) -> bool {
        let mut idx = vec![];
        let mut t = e;
        while let Expr::Get(a, i) = t {
            idx.push(i);
            t = a;
        }
        if matches!(t, Expr::Var(y) if *y == self.x) {
            let vars: Option<Vec<Symbol>> = idx
                .iter()
                .map(|a| match a.terms.as_slice() {
                    [(v, 1)] if a.constant == 0 => Some(*v),
                    _ => None,
                })
                .collect();
            let Some(vars) = vars else {
                return false;
            };
            self.sites += 1;
            return idx.len() == self.arity && bound.iter().all(|b| vars.contains(b));
        }
        let (b, is_loop) = match e {
            Expr::Let(y, e0, body) => {
                if !self.ok(e0, bound) {
                    return false;
                }
                if *y == self.x {
                    return true;
                }
                (Some((*y, &**body)), false)
            }
            Expr::Sum(v, _, body) | Expr::Gen(v, _, body) | Expr::Reduce(_, v, _, body) => {
                (Some((*v, &**body)), true)
            }
            _ => (None, false),
        };
        match b {
            Some((y, body)) => {
                if y == self.x {
                    return true;
                }
                if self.avoid.contains(&y) {
                    return false;
                }
                if is_loop {
                    bound.push(y);
                }
                let r = self.ok(body, bound);
                if is_loop {
                    bound.pop();
                }
                r
            }
            None => e.children().all(|c| self.ok(c, bound)),
        }
    }
}

/// What to restore after a nest's driven loops are emitted.
pub(crate) type Engaged = Vec<(Symbol, Option<DrivenLevel>)>;

impl Lowerer {
    /// How `atom` can drive the loops of `loop_vars` (in loop order), none
    /// of its other arguments mentioning any of `nest_vars`.
    pub(crate) fn drive_of(
        &mut self,
        atom: &Pred,
        loop_vars: &[Symbol],
        nest_vars: &[Symbol],
    ) -> Option<Drive> {
        let (buf, dims, perm, args) = self.drive_shape(atom, loop_vars, nest_vars)?;
        let nb = perm.len()
            - perm
                .iter()
                .filter(|&&k| is_loop_arg(&args[k], loop_vars))
                .count();
        let index = self.permuted_index(&buf, &dims, &perm);
        Some(Drive {
            index,
            dims: perm.iter().map(|&k| dims[k].clone()).collect(),
            bound: perm[..nb].iter().map(|&k| args[k].clone()).collect(),
            driven: perm[nb..].iter().map(|&k| args[k].terms[0].0).collect(),
        })
    }

    /// The relation parameter an atom can drive loops by (its layout,
    /// dimensions, the permutation putting its bound arguments first and
    /// then its loop variables in loop order, its arguments).
    fn drive_shape(
        &self,
        atom: &Pred,
        loop_vars: &[Symbol],
        nest_vars: &[Symbol],
    ) -> Option<DriveShape> {
        let Pred::Rel(r, args) = atom else {
            return None;
        };
        let Some(V::Rel { buf, dims }) = self.vals.get(r).cloned() else {
            return None;
        };
        if args.is_empty() || args.len() != dims.len() || args.len() > MAX_PERMUTED_ARITY {
            return None;
        }
        let mut bound = vec![];
        let mut driven: Vec<(usize, usize, Symbol)> = vec![];
        for (k, a) in args.iter().enumerate() {
            let plain = a.constant == 0 && a.terms.len() == 1 && a.terms[0].1 == 1;
            if plain {
                let v = a.terms[0].0;
                if let Some(at) = loop_vars.iter().position(|x| *x == v) {
                    if driven.iter().any(|d| d.2 == v) {
                        return None;
                    }
                    driven.push((at, k, v));
                    continue;
                }
            }
            if a.terms.iter().any(|(v, _)| nest_vars.contains(v)) {
                return None;
            }
            bound.push(k);
        }
        if driven.is_empty() {
            return None;
        }
        driven.sort();
        let perm: Vec<usize> = bound
            .iter()
            .copied()
            .chain(driven.iter().map(|d| d.1))
            .collect();
        Some((buf, dims, perm, args.clone()))
    }

    /// `(gen i d ... (iverson p body))` with distinct variables where `p`
    /// has a relation atom (or a disjunction of atoms and affine
    /// predicates) that can drive the gen variables: the chain, `p` and
    /// `body`.
    fn pattern_gen<'a>(&self, e: &'a Expr) -> Option<PatternGen<'a>> {
        let mut chain: Vec<(Symbol, &Affine)> = vec![];
        let mut x = e;
        while let Expr::Gen(i, d, b) = x {
            chain.push((*i, d));
            x = b;
        }
        let Expr::Iverson(p, body) = x else {
            return None;
        };
        let vars: Vec<Symbol> = chain.iter().map(|c| c.0).collect();
        let distinct = (1..vars.len()).all(|k| !vars[..k].contains(&vars[k]));
        let drives = |q: &Pred| self.drive_shape(q, &vars, &vars).is_some();
        let drivable = conjuncts(p).into_iter().any(|q| match q {
            Pred::Rel(..) => drives(q),
            Pred::Or(ps) => {
                ps.iter().any(drives)
                    && ps
                        .iter()
                        .all(|q| drives(q) || super::pred::affine(q).is_some())
            }
            Pred::Cmp(CmpOp::Eq, a, b) => fixes_a_variable(a, b, &vars),
            _ => false,
        });
        (distinct && drivable).then_some((chain, p, body))
    }

    /// `(gen i d ... (iverson p body))` where `p` has a relation atom (or
    /// a disjunction of atoms and affine predicates) over the gen
    /// variables, or an equality that fixes one of them (a one-hot
    /// vector, a diagonal): `dest` is zero filled, then only the stored
    /// tuples, or the points the equality leaves, are visited, each
    /// storing `body` into its element. False (nothing emitted) for any
    /// other expression.
    pub(crate) fn store_gen_pattern(&mut self, e: &Expr, dest: &V) -> Result<bool> {
        let Some((chain, p, body)) = self.pattern_gen(e) else {
            return Ok(false);
        };
        dest.zero_fill(self)?;
        let acc = Acc::Store {
            dest: dest.clone(),
            gens: chain.iter().map(|c| c.0).collect(),
        };
        self.loop_nest(chain, Some(p), body, &acc)?;
        Ok(true)
    }

    /// `(let x e0 rest)` where `e0` is a gen over a relation's pattern
    /// ([`Self::pattern_gen`]) whose element is a scalar computed without
    /// loops or bindings, and `rest` reads `x` only element by element, at
    /// most twice, each read under no loop whose variable it does not
    /// index by: `x` is not stored (a dense tensor zero almost
    /// everywhere), each read computes its element. The variables and the
    /// gens' body (the bracket and the element).
    pub(crate) fn lazy_pattern<'a>(
        &mut self,
        x: Symbol,
        e0: &'a Expr,
        rest: &Expr,
    ) -> Option<PatternView<'a>> {
        let (chain, _, body) = self.pattern_gen(e0)?;
        if !binder_free(body) || !matches!(self.type_of(body), Ok(Type::Real)) {
            return None;
        }
        let mut reads = Reads {
            x,
            arity: chain.len(),
            avoid: crate::front::subst::free_names(e0),
            sites: 0,
        };
        if !reads.ok(rest, &mut vec![]) || reads.sites > 2 {
            return None;
        }
        let mut inner = e0;
        while let Expr::Gen(_, _, b) = inner {
            inner = b;
        }
        let params = chain.into_iter().map(|(i, d)| (i, d.clone())).collect();
        Some((params, inner))
    }

    /// The layout of the relation parameter `buf` with its arguments
    /// permuted (the parameter's own when `perm` is the identity).
    fn permuted_index(&mut self, buf: &str, dims: &[Affine], perm: &[usize]) -> String {
        if perm.iter().enumerate().all(|(k, &p)| k == p) {
            return buf.to_string();
        }
        if let Some(p) = self.permuted.iter().find(|p| p.of == buf && p.perm == perm) {
            return p.cname.clone();
        }
        let cname = self.fresh("rt", buf);
        self.permuted.push(PermutedRelation {
            cname: cname.clone(),
            of: buf.to_string(),
            dims: dims.to_vec(),
            perm: perm.to_vec(),
        });
        cname
    }

    /// Let `d` drive its variables' loops: the bound prefix is located now
    /// (a local emitted here); returns the condition under which it is
    /// stored (none without a prefix) and what to restore afterwards.
    pub(crate) fn engage(&mut self, d: &Drive) -> Result<(Option<String>, Engaged)> {
        let nb = d.bound.len();
        let mut cond = None;
        let prefix = if nb == 0 {
            Parent::Root
        } else {
            let mut idxs = vec![];
            let mut conds = vec![];
            for (a, dim) in d.bound.iter().zip(&d.dims) {
                let idx = self.aff(a)?;
                let dn = self.dim(dim)?;
                conds.push(format!("0 <= {idx} && {idx} < {dn}"));
                idxs.push(idx);
            }
            let rp = self.fresh("rp", "");
            self.decl(
                "const int64_t",
                &rp,
                format!(
                    "({}) ? atlh_rel_at({}, {nb}, (const int64_t[]){{{}}}) : -1",
                    conds.join(" && "),
                    d.index,
                    idxs.join(", ")
                ),
            );
            cond = Some(format!("{rp} >= 0"));
            Parent::Position(rp, d.bound.clone())
        };
        let mut saved = vec![];
        for (j, v) in d.driven.iter().enumerate() {
            let level = nb + j;
            let parent = if j == 0 {
                prefix.clone()
            } else {
                Parent::Loop(d.driven[j - 1])
            };
            let dl = DrivenLevel {
                index: d.index.clone(),
                level,
                dense: d.dims.len() >= 2 && level == 0,
                dim: d.dims[level].clone(),
                parent,
                position: None,
                scope: None,
                cursors: vec![],
                last: level + 1 == d.dims.len(),
                cname: None,
                gathers: vec![],
            };
            saved.push((*v, self.driven.insert(*v, dl)));
        }
        Ok((cond, saved))
    }

    pub(crate) fn disengage(&mut self, saved: Engaged) {
        for (v, old) in saved.into_iter().rev() {
            match old {
                Some(dl) => self.driven.insert(v, dl),
                None => self.driven.remove(&v),
            };
        }
    }

    /// Open the loop of `v` (C name `c`): a driven loop's position gets
    /// its C name, which the levels below read.
    pub(crate) fn open_level(&mut self, v: Symbol, c: &str) {
        let fresh = self.fresh("q", "");
        let scope = self.names.clone();
        if let Some(dl) = self.driven.get_mut(&v) {
            dl.position = Some(if dl.dense { c.to_string() } else { fresh });
            dl.scope = (!dl.dense).then_some(scope);
            dl.cname = (!dl.dense).then(|| c.to_string());
        }
    }

    /// `(R b... v)` (`R`'s layout `buf`, of arity 2 or more) tested in the
    /// body of the loop of `v` over a compressed level (coordinates
    /// ascending), `b...` mentioning only variables bound before that loop:
    /// a [`Cursor`] registered with the loop, and the test it makes.
    pub(crate) fn cursor_test(
        &mut self,
        buf: &str,
        dims: &[Affine],
        args: &[Affine],
    ) -> Result<Option<String>> {
        let Some((last, prefix)) = args.split_last() else {
            return Ok(None);
        };
        let v = match last.terms.as_slice() {
            [(v, 1)] if last.constant == 0 && !prefix.is_empty() => *v,
            _ => return Ok(None),
        };
        let Some(scope) = self.driven.get(&v).and_then(|dl| dl.scope.as_ref()) else {
            return Ok(None);
        };
        let fixed = prefix.iter().flat_map(|a| &a.terms).all(|(u, _)| {
            *u != v && !self.lazy_args.contains_key(u) && scope.get(u) == self.names.get(u)
        });
        if !fixed || self.lazy_args.contains_key(&v) {
            return Ok(None);
        }
        let (mut idxs, mut conds) = (vec![], vec![]);
        for (a, d) in prefix.iter().zip(dims) {
            let idx = self.aff(a)?;
            conds.push(format!("0 <= {idx} && {idx} < {}", self.dim(d)?));
            idxs.push(idx);
        }
        let vc = self.aff(last)?;
        let level = prefix.len();
        let (rp, cur, end) = (
            self.fresh("rp", ""),
            self.fresh("cur", ""),
            self.fresh("end", ""),
        );
        let (pos, crd) = (
            format!("ATL_RPOS({buf}, {level})"),
            format!("ATL_RCRD({buf}, {level})"),
        );
        let decl = |ty, name: &str, init| Stmt::Decl {
            ty,
            name: name.to_string(),
            init,
        };
        let decls = vec![
            decl(
                "const int64_t",
                &rp,
                format!(
                    "({}) ? atlh_rel_at({buf}, {level}, (const int64_t[]){{{}}}) : -1",
                    conds.join(" && "),
                    idxs.join(", ")
                ),
            ),
            decl("int64_t", &cur, format!("{rp} >= 0 ? {pos}[{rp}] : 0")),
            decl(
                "const int64_t",
                &end,
                format!("{rp} >= 0 ? {pos}[{rp} + 1] : 0"),
            ),
        ];
        let advance = format!("{cur} = atlh_advance({crd}, {cur}, {end}, {vc});");
        if let Some(dl) = self.driven.get_mut(&v) {
            dl.cursors.push(Cursor { decls, advance });
        }
        Ok(Some(format!(
            "ATL_TEST(({cur} < {end} && {crd}[{cur}] == {vc}))"
        )))
    }

    /// The C expression of a compressed level's parent position.
    fn parent_position(&self, dl: &DrivenLevel) -> String {
        match &dl.parent {
            Parent::Root => "0".into(),
            Parent::Position(p, _) => p.clone(),
            Parent::Loop(s) => self
                .driven
                .get(s)
                .and_then(|d| d.position.clone())
                .unwrap_or_else(|| "0".into()),
        }
    }

    /// Which of the bounds of the level of `v` cannot clip the compressed
    /// layout level that drives it: the lower bound when it is exactly 0,
    /// the upper when it is exactly `d - 1`, `d` the level's dimension. Its
    /// stored coordinates were checked to lie in `[0, d)` when the relation
    /// came in (and a permuted layout is built from those), so the walk
    /// starts (ends) at its fibre's start (end), with no search.
    pub(crate) fn unclipped_bounds(&self, v: Symbol, level: &constraints::Level) -> Unclipped {
        let Some(dl) = self.driven.get(&v).filter(|dl| !dl.dense) else {
            return Unclipped::default();
        };
        let is = |bs: &[constraints::Bound], f: Option<LinForm>| {
            f.is_some_and(|f| !bs.is_empty() && bs.iter().all(|b| b.div == 1 && b.form == f))
        };
        Unclipped {
            lower: is(&level.lower, Some(LinForm::constant(0))),
            upper: is(&level.upper, LinForm::from_affine(&dl.dim).add_constant(-1)),
        }
    }

    /// The loop of `v` (C name `c`) over `[lo, hi]` running `body`: over
    /// the range, or over the stored coordinates when a relation drives it
    /// (from the fibre's start or to its end, unsearched, where `unclipped`
    /// says so: see [`Self::unclipped_bounds`]).
    pub(crate) fn level_loop(
        &mut self,
        v: Symbol,
        c: String,
        lo: String,
        hi: String,
        unclipped: Unclipped,
        body: Vec<Stmt>,
    ) -> Result<()> {
        let Some(dl) = self.driven.get(&v).cloned() else {
            self.out.push(Stmt::For {
                var: c,
                lo,
                hi: format!("{hi} + 1"),
                body,
            });
            return Ok(());
        };
        let dn = self.dim(&dl.dim)?;
        if dl.dense {
            self.out.push(Stmt::For {
                var: c,
                lo,
                hi: format!("atlh_min({hi}, {dn} - 1) + 1"),
                body,
            });
            return Ok(());
        }
        let q = dl.position.clone().unwrap_or_else(|| "0".into());
        let parent = self.parent_position(&dl);
        let pos = format!("ATL_RPOS({}, {})", dl.index, dl.level);
        let crd = format!("ATL_RCRD({}, {})", dl.index, dl.level);
        // The coordinates ascend: the loop's bounds clip its range (a
        // binary search where they cut into the fibre), no test per tuple.
        let mut inner = vec![Stmt::Decl {
            ty: "const int64_t",
            name: c.clone(),
            init: format!("{crd}[{q}]"),
        }];
        // the prefetches run when a gathered tensor is large enough to be
        // out of the caches (a test on the sizes, before the loop)
        let mut worth = None;
        if dl.last && !dl.gathers.is_empty() {
            let (ahead, on) = (self.fresh("pf", ""), self.fresh("pfon", ""));
            inner.push(Stmt::If {
                cond: format!("ATL_SCHEDULE({on})"),
                then: prefetches(&dl.index, &crd, &q, &ahead, &dl.gathers),
                els: vec![],
            });
            worth = Some((on, prefetch_worth(&dn, &dl.gathers)));
        }
        inner.extend(dl.cursors.iter().map(|k| Stmt::Line(k.advance.clone())));
        inner.extend(body);
        // a pragma for the loop (ATL_SIMD_REDUCE) goes right before it,
        // unless a cursor carries a position from one iteration to the next
        let pragma = match self.out.last() {
            Some(Stmt::Line(l)) if l.starts_with("ATL_SIMD") => self.out.pop(),
            _ => None,
        }
        .filter(|_| dl.cursors.is_empty());
        for k in &dl.cursors {
            self.out.extend(k.decls.iter().cloned());
        }
        if let Some((on, cond)) = worth {
            self.decl("const int", &on, cond);
        }
        let (qa, qb) = (self.fresh("qa", ""), self.fresh("qb", ""));
        let (pa, pb) = (format!("{pos}[{parent}]"), format!("{pos}[{parent} + 1]"));
        // each search counts as a test: both by ATL_SEEKS, one alone as a
        // test that holds
        match (unclipped.lower, unclipped.upper) {
            (false, false) => self.line("ATL_SEEKS();".into()),
            (true, true) => {}
            _ => self.line("(void)ATL_TEST(1);".into()),
        }
        let a = if unclipped.lower {
            pa
        } else {
            format!("atlh_seek({crd}, {pa}, {pb}, {lo})")
        };
        let b = if unclipped.upper {
            pb
        } else {
            format!("atlh_seek({crd}, {qa}, {pb}, ({hi}) + 1)")
        };
        self.decl("const int64_t", &qa, a);
        self.decl("const int64_t", &qb, b);
        self.out.extend(pragma);
        self.out.push(Stmt::For {
            var: q,
            lo: qa,
            hi: qb,
            body: inner,
        });
        Ok(())
    }

    /// `∃ i < d. q` where a conjunct of `q` is a relation atom with `i` as
    /// an argument (its other arguments free of `i`): the extent of `i`'s
    /// fibre, or a walk over it with the other conjuncts as guards.
    pub(crate) fn exists_by_relation(
        &mut self,
        i: Symbol,
        d: &Affine,
        q: &Pred,
    ) -> Result<Option<String>> {
        let cs = conjuncts(q);
        let Some((k, drive)) = cs
            .iter()
            .enumerate()
            .find_map(|(k, atom)| self.drive_of(atom, &[i], &[i]).map(|dr| (k, dr)))
        else {
            return Ok(None);
        };
        let rest: Vec<Pred> = cs
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .map(|(_, p)| (*p).clone())
            .collect();
        let same_range = drive.dims.last() == Some(d);
        let (cond, saved) = self.engage(&drive)?;
        let dl = self.driven[&i].clone();
        self.disengage(saved);
        let parent = self.parent_position(&dl);
        let pos = format!("ATL_RPOS({}, {})", dl.index, dl.level);
        let extent = format!("{pos}[{parent}] < {pos}[{parent} + 1]");
        if rest.is_empty() && same_range {
            return Ok(Some(match cond {
                Some(c) => format!("({c} && {extent})"),
                None => format!("({extent})"),
            }));
        }
        let dn = self.dim(d)?;
        let e = self.fresh("e", "");
        self.decl("int", &e, "0".into());
        let iv = self.bind_index(i, d)?;
        let qv = self.fresh("q", "");
        let (body, ()) = self.block(|lw| {
            let mut guards = vec![format!("{iv} < {dn}")];
            for p in &rest {
                guards.push(lw.pred(p)?);
            }
            lw.line(format!(
                "if ({}) {{ {e} = 1; break; }}",
                guards.join(" && ")
            ));
            Ok(())
        })?;
        let mut inner = vec![Stmt::Decl {
            ty: "const int64_t",
            name: iv,
            init: format!("ATL_RCRD({}, {})[{qv}]", dl.index, dl.level),
        }];
        inner.extend(body);
        let walk = Stmt::For {
            var: qv,
            lo: format!("{pos}[{parent}]"),
            hi: format!("{pos}[{parent} + 1]"),
            body: inner,
        };
        match cond {
            Some(c) => self.out.push(Stmt::If {
                cond: c,
                then: vec![walk],
                els: vec![],
            }),
            None => self.out.push(walk),
        }
        Ok(Some(e))
    }
}

impl Lowerer {
    /// The position in the relation layout `index` (a parameter's own, not
    /// permuted) of the tuple `args` when the loops open here bind it: its
    /// arguments are the variables of loops driven by `index` at levels
    /// `0 ..` (or a bound prefix located before them, then such loops), so
    /// the innermost loop's position is the tuple's. None otherwise.
    pub(crate) fn driven_tuple_position(&self, index: &str, args: &[Affine]) -> Option<String> {
        let var_at = |l: usize| match args[l].terms.as_slice() {
            [(v, 1)] if args[l].constant == 0 && !self.lazy_args.contains_key(v) => Some(*v),
            _ => None,
        };
        let last = args.len().checked_sub(1)?;
        let mut dl = self.driven.get(&var_at(last)?)?;
        if dl.index != index || dl.level != last {
            return None;
        }
        let position = dl.position.clone()?;
        loop {
            match &dl.parent {
                Parent::Root => return (dl.level == 0).then_some(position),
                Parent::Position(_, bound) => {
                    let same = bound.len() == dl.level && bound[..] == args[..dl.level];
                    return same.then_some(position);
                }
                Parent::Loop(s) => {
                    let l = dl.level.checked_sub(1)?;
                    if var_at(l) != Some(*s) {
                        return None;
                    }
                    dl = self.driven.get(s)?;
                    if dl.index != index || dl.level != l {
                        return None;
                    }
                }
            }
        }
    }
}

/// `a = b` fixes one of `vars` (the difference has it with coefficient ±1,
/// so the loops solve it for that variable rather than test it): the
/// gen's nonzero elements are a point, or a diagonal, of its range.
fn fixes_a_variable(a: &Affine, b: &Affine, vars: &[Symbol]) -> bool {
    let Ok(d) = a.sub(b) else {
        return false;
    };
    vars.iter().any(|v| d.coeff(*v).abs() == 1)
}
