//! Let-level passes of the optimizer, outside the e-graphs (see
//! [`crate::optimizer::bindings`]): they see across bindings, which a binding's own
//! e-graph cannot.
//!
//! * [`inline_free_bindings`]: a binding that does no arithmetic is
//!   substituted into its uses (sparsity through bindings);
//! * [`reuse_bindings`]: a computation a binding already holds is read
//!   from it (sharing of equal definitions and subterms);
//! * [`share_repeated_elements`]: an elementwise computation recomputed
//!   over the same ranges in two places becomes a binding both read;
//! * [`drop_broadcast_dimensions`]: a tensor binding whose element does
//!   not depend on one of its indices is computed once per other index
//!   (scalars broadcast instead of materialized);
//! * [`drop_false_brackets`]: `[false]·e` terms removed where their type
//!   is real (outside the e-graph: a rule `[false]·e = 0` would merge a
//!   tensor-typed class with the real 0, and its real-typed instances under
//!   `+` make the e-graph grow without bound);
//! * [`bracket_empty_products`]: a product with a sum is bracketed by the
//!   sum's range being non-empty, so that a factor moved out of a sum costs
//!   nothing where the sum did no work (the guard's "never costlier at any
//!   size" includes empty ranges).

use crate::front::affine::Affine;
use crate::front::ast::{build, CmpOp, Expr, Pred};
use crate::front::names::Fresh;
use crate::front::subst::{free_names, Replace, Substituter};
use crate::symbol::Symbol;
use std::collections::{HashMap, HashSet};

/// The summands of `e` (its tree of `+`), left to right.
pub fn add_terms<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Add(a, b) => {
            add_terms(a, out);
            add_terms(b, out);
        }
        e => out.push(e),
    }
}

/// A definition that does no arithmetic: a copy, a bracketed or diagonal
/// tensor of reads and constants (`⊞[i] ⊞[j] [i == j]·x[i]`), a pair of
/// such.
fn does_no_work(e: &Expr) -> bool {
    match e {
        Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => true,
        Expr::Gen(_, _, a)
        | Expr::Get(a, _)
        | Expr::Iverson(_, a)
        | Expr::Fst(a)
        | Expr::Snd(a) => does_no_work(a),
        Expr::Pair(a, b) => does_no_work(a) && does_no_work(b),
        Expr::Add(..)
        | Expr::Mul(..)
        | Expr::MaxMin(..)
        | Expr::Call(..)
        | Expr::Sum(..)
        | Expr::Reduce(..)
        | Expr::Let(..) => false,
    }
}

/// The let-level inlining pass: a binding that does no arithmetic is
/// substituted into its uses, its accesses reduced there
/// (`(get (gen i n e) a)` is `[0 <= a < n]·e[i := a]`). No work moves, and
/// each use now sees the binding's brackets: a sum over a diagonal matrix
/// read through a `let` becomes a sum the index elimination can remove,
/// a constant tensor a constant. (A binding's own e-graph sees only its
/// definition, so this is the sparsity that crosses bindings.)
pub fn inline_free_bindings(
    binds: Vec<(Symbol, Expr)>,
    result: Expr,
    fresh: &mut Fresh,
) -> (Vec<(Symbol, Expr)>, Expr) {
    let mut inlined: HashMap<Symbol, Expr> = HashMap::new();
    let mut out = vec![];
    for (x, e) in binds {
        let e = substitute_reduced(&e, &inlined, fresh);
        if does_no_work(&e) {
            inlined.insert(x, e.clone());
        }
        out.push((x, e));
    }
    let result = substitute_reduced(&result, &inlined, fresh);
    (out, result)
}

/// `e` with the variables of `defs` replaced by their definitions, and
/// each access of a replaced definition reduced (only in the parts of `e`
/// that use a definition: the rest is kept as it is).
fn substitute_reduced(e: &Expr, defs: &HashMap<Symbol, Expr>, fresh: &mut Fresh) -> Expr {
    let mut uses = HashSet::new();
    if defs.is_empty() || !mark_uses(e, defs, &mut vec![], &mut uses) {
        return e.clone();
    }
    Reduce {
        defs,
        uses: &uses,
        fresh,
    }
    .expr(e)
}

/// Whether `e` uses a variable of `defs` freely; the addresses of its
/// subterms that do go to `uses` (one walk, where asking each subterm for
/// its free names would take time quadratic in the depth).
fn mark_uses(
    e: &Expr,
    defs: &HashMap<Symbol, Expr>,
    bound: &mut Vec<Symbol>,
    uses: &mut HashSet<*const Expr>,
) -> bool {
    let found = match e {
        Expr::Var(x) => defs.contains_key(x) && !bound.contains(x),
        Expr::Gen(i, _, b) | Expr::Sum(i, _, b) => {
            bound.push(*i);
            let found = mark_uses(b, defs, bound, uses);
            bound.pop();
            found
        }
        Expr::Let(x, a, b) => {
            let first = mark_uses(a, defs, bound, uses);
            bound.push(*x);
            let second = mark_uses(b, defs, bound, uses);
            bound.pop();
            first || second
        }
        _ => {
            let mut found = false;
            for c in e.children() {
                found |= mark_uses(c, defs, bound, uses);
            }
            found
        }
    };
    if found {
        uses.insert(e as *const Expr);
    }
    found
}

/// [`substitute_reduced`] below the root, `uses` marking the subterms to
/// visit.
struct Reduce<'a> {
    defs: &'a HashMap<Symbol, Expr>,
    uses: &'a HashSet<*const Expr>,
    fresh: &'a mut Fresh,
}

impl Reduce<'_> {
    fn expr(&mut self, e: &Expr) -> Expr {
        if !self.uses.contains(&(e as *const Expr)) {
            return e.clone();
        }
        match e {
            Expr::Var(x) => match self.defs.get(x) {
                // binders of the definition made unique again at each use
                Some(d) => crate::front::readable::fresh_binders(d, &HashMap::new(), self.fresh),
                None => e.clone(),
            },
            Expr::Fst(a) => match self.expr(a) {
                Expr::Pair(p, _) => *p,
                a => build::fst(a),
            },
            Expr::Snd(a) => match self.expr(a) {
                Expr::Pair(_, q) => *q,
                a => build::snd(a),
            },
            Expr::Get(a, i) => {
                let a = self.expr(a);
                access(a, i, self.fresh)
            }
            _ => e.map_children(|c| self.expr(c)),
        }
    }
}

/// `(get e a)`, reduced when `e` is a `gen` (under brackets): ATL reads 0
/// out of range, hence the range bracket.
fn access(e: Expr, a: &Affine, fresh: &mut Fresh) -> Expr {
    match e {
        Expr::Gen(j, d, body) => {
            let mut names = |b: Symbol| fresh.name(b.as_str());
            match Substituter::new(&mut names).expr(&body, &Replace::Index(j, a.clone())) {
                Ok(inner) => build::iverson(
                    Pred::And(vec![
                        Pred::Cmp(CmpOp::Le, Affine::constant(0), a.clone()),
                        Pred::Cmp(CmpOp::Lt, a.clone(), d),
                    ]),
                    inner,
                ),
                Err(_) => build::get(build::gen(j, d, *body), a.clone()),
            }
        }
        Expr::Iverson(p, inner) => build::iverson(p, access(*inner, a, fresh)),
        e => build::get(e, a.clone()),
    }
}

/// `e[i]` for a tensor `e` over the range `i` is known to lie in: a `gen`
/// by substituting its binder, through brackets; an access otherwise.
pub fn index(e: Expr, i: &Affine, fresh: &mut Fresh) -> Expr {
    match e {
        Expr::Gen(j, d, body) => {
            let mut names = |b: Symbol| fresh.name(b.as_str());
            match Substituter::new(&mut names).expr(&body, &Replace::Index(j, i.clone())) {
                Ok(out) => out,
                Err(_) => build::get(build::gen(j, d, *body), i.clone()),
            }
        }
        Expr::Iverson(p, a) => build::iverson(p, index(*a, i, fresh)),
        e => build::get(e, i.clone()),
    }
}

/// The sharing pass: a definition equal to an earlier binding's is that
/// binding, and a subterm that computes an earlier binding's element (say
/// `exp(z[i])` where `e = ⊞[j] exp(z[j])`, as derivatives recompute) reads
/// it (`e[i]`), when the loops around the subterm range over the binding's
/// extents. Work only goes down; no binding moves.
pub fn reuse_bindings(binds: Vec<(Symbol, Expr)>, result: Expr) -> (Vec<(Symbol, Expr)>, Expr) {
    let mut known: HashMap<ReuseKey, Known> = HashMap::new();
    let mut out: Vec<(Symbol, Expr)> = vec![];
    let mut renamed: HashMap<Symbol, Symbol> = HashMap::new();
    for (x, e) in binds {
        let e = rename(&e, &renamed);
        let whole = whole_key(&e);
        if let Some(Known { name, .. }) = whole.as_ref().and_then(|k| known.get(k)) {
            // the same definition: the later name is the earlier binding
            renamed.insert(x, *name);
            continue;
        }
        // keys of the definition as written, before it reads others
        let element = element_key(x, &e);
        let e = reuse_in(&e, &known, &mut vec![]);
        if let Some(k) = whole {
            let name = x;
            known.insert(
                k,
                Known {
                    name,
                    order: vec![],
                    dims: vec![],
                },
            );
        }
        if let Some((k, known_elem)) = element {
            known.entry(k).or_insert(known_elem);
        }
        out.push((x, e));
    }
    let result = rename(&result, &renamed);
    let result = reuse_in(&result, &known, &mut vec![]);
    (out, result)
}

/// A binding, as found by a key: its name, and for an element key the
/// order in which its `gen` indices first occur in its body (positions in
/// the `gen` nest) and the `gen` extents.
struct Known {
    name: Symbol,
    order: Vec<usize>,
    dims: Vec<Affine>,
}

/// What the sharing passes compare: a whole definition, or an element (a
/// subterm with its loop indices renamed by first occurrence), with its
/// binders canonical. Compared as terms, never as text.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum ReuseKey {
    Whole(Expr),
    Element(Expr),
}

/// A key for a whole definition that does work (copies and constants are
/// left to inlining).
fn whole_key(e: &Expr) -> Option<ReuseKey> {
    if !does_work(e) {
        return None;
    }
    Some(ReuseKey::Whole(super::canonical::canonical_binders(e)))
}

/// Does `e` do arithmetic?
fn does_work(e: &Expr) -> bool {
    !does_no_work(e)
}

/// The key of a binding's element: `x = ⊞[i1] .. ⊞[ik] body` with every
/// `i` in `body`, the body with its indices renamed by first occurrence.
fn element_key(x: Symbol, e: &Expr) -> Option<(ReuseKey, Known)> {
    let mut gens: Vec<(Symbol, Affine)> = vec![];
    let mut body = e;
    while let Expr::Gen(i, d, b) = body {
        gens.push((*i, d.clone()));
        body = b;
    }
    if gens.is_empty() || !does_work(body) || matches!(body, Expr::Pair(..)) {
        return None;
    }
    let loops: Vec<Symbol> = gens.iter().map(|g| g.0).collect();
    let (key, seen) = subterm_key(body, &loops)?;
    if seen.len() != loops.len() {
        return None;
    }
    let order = seen
        .iter()
        .map(|v| loops.iter().position(|l| l == v).expect("a loop index"))
        .collect();
    Some((
        key,
        Known {
            name: x,
            order,
            dims: gens.into_iter().map(|g| g.1).collect(),
        },
    ))
}

/// The key of a subterm whose free indices are among `loops`: the subterm
/// with those indices renamed by first occurrence (and binders
/// canonical), and the indices in that order.
fn subterm_key(t: &Expr, loops: &[Symbol]) -> Option<(ReuseKey, Vec<Symbol>)> {
    let free = free_names(t);
    let mut seen: Vec<Symbol> = vec![];
    first_indices(t, &mut vec![], &mut seen);
    seen.retain(|v| loops.contains(v) && free.contains(v));
    let slots: Vec<Symbol> = (0..seen.len())
        .map(|k| crate::front::names::make("idx", format!("slot{k}")))
        .collect();
    let mut renamed = t.clone();
    for (v, s) in seen.iter().zip(&slots) {
        let mut no_fresh = |b: Symbol| b;
        renamed = Substituter::new(&mut no_fresh)
            .expr(&renamed, &Replace::Index(*v, Affine::var(*s)))
            .ok()?;
    }
    let canon = super::canonical::canonical_binders(&renamed);
    Some((ReuseKey::Element(canon), seen))
}

/// The free index names of `e`'s affine expressions and predicates, in
/// order of first occurrence (`bound`: the binders around).
fn first_indices(e: &Expr, bound: &mut Vec<Symbol>, out: &mut Vec<Symbol>) {
    let names: Vec<Symbol> = match e {
        Expr::Get(_, a)
        | Expr::Gen(_, a, _)
        | Expr::Sum(_, a, _)
        | Expr::Reduce(_, _, a, _)
        | Expr::IndexReal(a) => a.names().collect(),
        Expr::Iverson(p, _) => {
            let mut in_pred = std::collections::BTreeSet::new();
            crate::front::subst::pred_free(p, &mut in_pred);
            in_pred.into_iter().collect()
        }
        _ => vec![],
    };
    for n in names {
        if !bound.contains(&n) && !out.contains(&n) {
            out.push(n);
        }
    }
    let binder = e.binder();
    bound.extend(binder);
    for c in e.children() {
        first_indices(c, bound, out);
    }
    if binder.is_some() {
        bound.pop();
    }
}

/// `e` with the subterms that an element key finds read from their
/// binding; `loops`: the `gen`/`sum` indices around, with their extents.
fn reuse_in(e: &Expr, known: &HashMap<ReuseKey, Known>, loops: &mut Vec<(Symbol, Affine)>) -> Expr {
    if known.is_empty() {
        return e.clone();
    }
    if !loops.is_empty()
        && does_work(e)
        && matches!(
            e,
            Expr::Call(..) | Expr::Mul(..) | Expr::MaxMin(..) | Expr::Add(..) | Expr::Sum(..)
        )
        && super::size::size_at_most(e, MAX_REUSE_NODES)
    {
        let names: Vec<Symbol> = loops.iter().map(|l| l.0).collect();
        if let Some((key, seen)) = subterm_key(e, &names) {
            if let Some(k) = known.get(&key) {
                if k.order.len() == seen.len() {
                    // gen position k.order[m] gets the m-th index seen
                    let mut idx: Vec<Option<Symbol>> = vec![None; k.dims.len()];
                    for (m, pos) in k.order.iter().enumerate() {
                        idx[*pos] = Some(seen[m]);
                    }
                    let extent_ok = idx.iter().zip(&k.dims).all(|(v, d)| {
                        v.and_then(|v| loops.iter().rev().find(|l| l.0 == v))
                            .is_some_and(|l| &l.1 == d)
                    });
                    if extent_ok {
                        return idx.into_iter().fold(Expr::Var(k.name), |acc, v| {
                            build::get(acc, Affine::var(v.expect("every position")))
                        });
                    }
                }
            }
        }
    }
    match e {
        Expr::Gen(i, d, a) | Expr::Sum(i, d, a) | Expr::Reduce(_, i, d, a) => {
            loops.push((*i, d.clone()));
            let a = reuse_in(a, known, loops);
            loops.pop();
            e.same_loop(*i, d.clone(), a).expect("a loop")
        }
        _ => e.map_children(|c| reuse_in(c, known, loops)),
    }
}

/// Subterms larger than this are not looked up (keys cost their size).
const MAX_REUSE_NODES: usize = 64;

/// `e` with variables renamed by `map`.
fn rename(e: &Expr, map: &HashMap<Symbol, Symbol>) -> Expr {
    if map.is_empty() {
        return e.clone();
    }
    let mut out = e.clone();
    for x in free_names(e) {
        if let Some(y) = map.get(&x) {
            let mut no_fresh = |b: Symbol| b;
            out = Substituter::new(&mut no_fresh)
                .expr(&out, &Replace::Var(x, Expr::Var(*y)))
                .expect("renaming a variable cannot overflow");
        }
    }
    out
}

/// `e` without its `[false]·e` terms where they are real: a summand is
/// dropped, a product or a sum of one is 0, a real-valued one is 0 (and
/// a summand 0 is dropped too). Equal
/// in value, and never costlier (the cost model charges such terms
/// nothing, and an addition of one nothing either), but its readers (and
/// the e-graphs after it) see the terms that remain.
pub fn drop_false_brackets(e: &Expr) -> Expr {
    // (a false bracket that is real has become 0 below)
    let is_false = |e: &Expr| {
        matches!(e, Expr::Iverson(Pred::False, _)) || matches!(e, Expr::Const(c) if c.0 == 0.0)
    };
    let is_real = |e: &Expr| {
        matches!(
            e,
            Expr::Const(_)
                | Expr::IndexReal(_)
                | Expr::Add(..)
                | Expr::Mul(..)
                | Expr::MaxMin(..)
                | Expr::Call(..)
                | Expr::Sum(..)
        )
    };
    let e = e.map_children(drop_false_brackets);
    match &e {
        Expr::Add(a, b) if is_false(a) => (**b).clone(),
        Expr::Add(a, b) if is_false(b) => (**a).clone(),
        Expr::Mul(a, b) if is_false(a) || is_false(b) => build::num(0.0),
        Expr::Sum(_, _, a) if is_false(a) => build::num(0.0),
        Expr::Iverson(Pred::False, a) if is_real(a) => build::num(0.0),
        _ => e,
    }
}

/// `e` with each product that has a sum as an operand bracketed by that
/// sum's range being non-empty: `u · Σ[j<m] t[j]` becomes
/// `[0 < m]·u · Σ[j<m] t[j]`. Equal in value (an empty sum is 0, and so is
/// the product), and never costlier: the bracket costs nothing and saves
/// the product (and its other operand) on an empty range. Factoring `u` out
/// of `Σ[j<m] u · t[j]` saves m - 1 products at every m >= 1 but costs one
/// at m = 0; with the bracket it is no costlier at any size, so the guard
/// can keep it. A range that is a positive constant needs no bracket.
pub fn bracket_empty_products(e: &Expr) -> Expr {
    let e = e.map_children(bracket_empty_products);
    let Expr::Mul(a, b) = &e else {
        return e;
    };
    let mut preds = vec![];
    for side in [a, b] {
        if let Expr::Sum(_, d, _) = side.as_ref() {
            let nonempty = Pred::Cmp(CmpOp::Lt, Affine::constant(0), d.clone());
            if d.as_constant().is_none_or(|k| k <= 0) && !preds.contains(&nonempty) {
                preds.push(nonempty);
            }
        }
    }
    match preds.len() {
        0 => e,
        1 => Expr::Iverson(preds.pop().unwrap(), Box::new(e)),
        _ => Expr::Iverson(Pred::And(preds), Box::new(e)),
    }
}

/// The materializing pass: an elementwise computation that two places
/// recompute over the same index ranges (`exp(z[s][k])` in a normalizer's
/// sum and again in the softmax, as reverse mode writes them) becomes a
/// binding of its own, `m = ⊞[s] ⊞[k] exp(z[s][k])`, which
/// [`reuse_bindings`] then reads at both places. Only occurrences outside
/// any bracket count, so each computed the whole range: the binding costs
/// no more than one of them, and the program less at every size (the same
/// at empty ranges).
pub fn share_repeated_elements(
    mut binds: Vec<(Symbol, Expr)>,
    mut result: Expr,
    fresh: &mut Fresh,
) -> (Vec<(Symbol, Expr)>, Expr) {
    for _ in 0..MAX_SHARED {
        let mut found: HashMap<ReuseKey, Occurrences> = HashMap::new();
        for (k, e) in binds.iter().map(|b| &b.1).chain([&result]).enumerate() {
            let mut visit = Visit::Collect {
                k,
                found: &mut found,
            };
            visit_elements(e, &mut vec![], &mut vec![], &mut visit);
        }
        let best = found
            .into_iter()
            .filter(|(_, o)| o.count >= 2 && o.consistent)
            .max_by(|a, b| {
                let size = |o: &Occurrences| super::size::term_size(&o.term);
                size(&a.1).cmp(&size(&b.1)).then_with(|| b.0.cmp(&a.0))
            });
        let Some((key, occ)) = best else {
            break;
        };
        // ⊞ over the indices in their order of first occurrence
        let mut body = occ.term.clone();
        let mut fresh_indices = vec![];
        for v in &occ.indices {
            let w = fresh.name(v.as_str());
            let mut no_fresh = |b: Symbol| b;
            body = Substituter::new(&mut no_fresh)
                .expr(&body, &Replace::Index(*v, Affine::var(w)))
                .expect("renaming an index cannot overflow");
            fresh_indices.push(w);
        }
        body = match occ.guards.len() {
            0 => body,
            1 => Expr::Iverson(occ.guards[0].clone(), Box::new(body)),
            _ => Expr::Iverson(Pred::And(occ.guards.clone()), Box::new(body)),
        };
        for (w, d) in fresh_indices.iter().zip(&occ.dims).rev() {
            body = build::gen(*w, d.clone(), body);
        }
        let base = match &occ.term {
            Expr::Call(f, _) => f.name(),
            _ => "shared",
        };
        let name = fresh.name(base);
        // the counted occurrences (and only those) read the binding
        let mut visit = Visit::Replace {
            key: &key,
            occ: &occ,
            name,
        };
        for b in &mut binds {
            b.1 = visit_elements(&b.1, &mut vec![], &mut vec![], &mut visit);
        }
        result = visit_elements(&result, &mut vec![], &mut vec![], &mut visit);
        binds.insert(occ.first.min(binds.len()), (name, body));
    }
    (binds, result)
}

/// At most this many bindings are made by [`share_repeated_elements`].
const MAX_SHARED: usize = 8;

/// The places one elementwise computation occurs (see
/// [`share_repeated_elements`]).
struct Occurrences {
    term: Expr,
    indices: Vec<Symbol>,
    dims: Vec<Affine>,
    /// The brackets on sizes alone around every occurrence.
    guards: Vec<Pred>,
    count: usize,
    /// The first binding (or the result, at `binds.len()`) it occurs in.
    first: usize,
    /// Every occurrence has the same extents.
    consistent: bool,
}

/// What [`visit_elements`] does at each elementwise subterm: record it
/// (in binding `k`), or replace the occurrences of one key by reads of the
/// binding `name` made for it.
enum Visit<'a> {
    Collect {
        k: usize,
        found: &'a mut HashMap<ReuseKey, Occurrences>,
    },
    Replace {
        key: &'a ReuseKey,
        occ: &'a Occurrences,
        name: Symbol,
    },
}

/// Visit the elementwise subterms of `e` that do work inside loops,
/// outside lets and brackets on loop indices, and return `e` (rewritten in
/// [`Visit::Replace`]). `loops`: the `gen`/`sum` indices around, with their
/// extents; `guards`: the brackets on sizes alone around (they hold for
/// every tuple or for none, and the binding made for the subterm carries
/// them too).
fn visit_elements(
    e: &Expr,
    loops: &mut Vec<(Symbol, Affine)>,
    guards: &mut Vec<Pred>,
    visit: &mut Visit,
) -> Expr {
    match e {
        Expr::Let(..) => return e.clone(),
        Expr::Iverson(p, a) => {
            let mut names = std::collections::BTreeSet::new();
            crate::front::subst::pred_free(p, &mut names);
            if names.iter().any(|n| loops.iter().any(|l| l.0 == *n)) {
                return e.clone();
            }
            guards.push(p.clone());
            let a = visit_elements(a, loops, guards, visit);
            guards.pop();
            return Expr::Iverson(p.clone(), Box::new(a));
        }
        _ => {}
    }
    if let Some((key, seen, dims)) = element_of(e, loops) {
        match visit {
            Visit::Collect { k, found } => {
                let o = found.entry(key).or_insert_with(|| Occurrences {
                    term: e.clone(),
                    indices: seen.clone(),
                    dims: dims.clone(),
                    guards: guards.clone(),
                    count: 0,
                    first: *k,
                    consistent: true,
                });
                o.count += 1;
                o.first = o.first.min(*k);
                o.consistent &= o.dims == dims && o.guards == *guards;
            }
            Visit::Replace {
                key: want,
                occ,
                name,
            } => {
                if key == **want && dims == occ.dims && *guards == occ.guards {
                    // the binding's ⊞s run over the indices in this order
                    return seen
                        .iter()
                        .fold(Expr::Var(*name), |acc, v| build::get(acc, Affine::var(*v)));
                }
            }
        }
    }
    match e {
        Expr::Gen(i, d, a) | Expr::Sum(i, d, a) | Expr::Reduce(_, i, d, a) => {
            loops.push((*i, d.clone()));
            let a = visit_elements(a, loops, guards, visit);
            loops.pop();
            e.same_loop(*i, d.clone(), a).expect("a loop")
        }
        _ => e.map_children(|c| visit_elements(c, loops, guards, visit)),
    }
}

/// The key, indices (in order of first occurrence) and their extents of an
/// elementwise subterm that does work, inside `loops` (not of a range that
/// depends on them).
fn element_of(
    e: &Expr,
    loops: &[(Symbol, Affine)],
) -> Option<(ReuseKey, Vec<Symbol>, Vec<Affine>)> {
    if loops.is_empty()
        || !matches!(
            e,
            Expr::Call(..) | Expr::Mul(..) | Expr::MaxMin(..) | Expr::Add(..) | Expr::Sum(..)
        )
        || !does_work(e)
        || !super::size::size_at_most(e, MAX_REUSE_NODES)
    {
        return None;
    }
    let names: Vec<Symbol> = loops.iter().map(|l| l.0).collect();
    let (key, seen) = subterm_key(e, &names)?;
    let dims: Vec<Affine> = seen
        .iter()
        .map(|v| {
            loops
                .iter()
                .rev()
                .find(|l| l.0 == *v)
                .expect("a loop index")
                .1
                .clone()
        })
        .collect();
    // the extents must not mention the loops (a triangular range)
    let fixed = dims.iter().all(|d| d.names().all(|n| !names.contains(&n)));
    (!seen.is_empty() && fixed).then_some((key, seen, dims))
}

/// The broadcast pass: a binding `x = ⊞[i] ⊞[j] e` whose element does not
/// depend on some of its indices (`⊞[j<m] u[i]·d[b]`, or `⊞[b] recip(s)`,
/// a scalar made a vector) is computed once per remaining index, and its
/// reads `x[a][c]` become `[0 <= c < m]·x'[a]` (no bracket where `c` is a
/// loop index over the same range), and `x'` is bracketed by the dropped
/// ranges being non-empty. Only bindings read through full
/// accesses everywhere are changed. The definition does less work and a
/// read in range is the same value, so the program is equal in value and
/// never costlier (a bracket costs nothing, and an addition or a sum sees
/// it).
pub fn drop_broadcast_dimensions(
    mut binds: Vec<(Symbol, Expr)>,
    mut result: Expr,
) -> (Vec<(Symbol, Expr)>, Expr) {
    for k in 0..binds.len() {
        let (x, e) = &binds[k];
        let x = *x;
        let mut dims: Vec<(Symbol, Affine)> = vec![];
        let mut body = e;
        while let Expr::Gen(i, d, b) = body {
            dims.push((*i, d.clone()));
            body = b;
        }
        let free = free_names(body);
        let keep: Vec<bool> = dims.iter().map(|(i, _)| free.contains(i)).collect();
        if keep.iter().all(|k| *k) || !does_work(body) {
            continue;
        }
        let later = binds[k + 1..].iter().map(|b| &b.1).chain([&result]);
        if !later.into_iter().all(|e| full_uses(e, x, dims.len())) {
            continue;
        }
        // computed only where the dropped ranges are non-empty: on an
        // empty one the tensor had no elements and cost nothing
        let nonempty: Vec<Pred> = dims
            .iter()
            .zip(&keep)
            .filter(|((_, d), k)| !**k && d.as_constant().is_none_or(|c| c <= 0))
            .map(|((_, d), _)| Pred::Cmp(CmpOp::Lt, Affine::constant(0), d.clone()))
            .collect();
        let body = match nonempty.len() {
            0 => body.clone(),
            1 => Expr::Iverson(nonempty[0].clone(), Box::new(body.clone())),
            _ => Expr::Iverson(Pred::And(nonempty), Box::new(body.clone())),
        };
        let def = dims
            .iter()
            .zip(&keep)
            .rev()
            .filter(|(_, k)| **k)
            .fold(body, |acc, ((i, d), _)| build::gen(*i, d.clone(), acc));
        binds[k].1 = def;
        let extents: Vec<&Affine> = dims.iter().map(|d| &d.1).collect();
        for b in &mut binds[k + 1..] {
            b.1 = narrow_reads(&b.1, x, &keep, &extents, &mut vec![]);
        }
        result = narrow_reads(&result, x, &keep, &extents, &mut vec![]);
    }
    (binds, result)
}

/// The accesses of a chain `x[a1]..[ak]` (outermost last), if `e` is one.
fn access_chain(e: &Expr) -> Option<(Symbol, Vec<&Affine>)> {
    match e {
        Expr::Var(x) => Some((*x, vec![])),
        Expr::Get(a, i) => {
            let (x, mut idx) = access_chain(a)?;
            idx.push(i);
            Some((x, idx))
        }
        _ => None,
    }
}

/// Is every read of `x` in `e` a full access chain of (at least) `k`
/// indices?
fn full_uses(e: &Expr, x: Symbol, k: usize) -> bool {
    if let Some((y, idx)) = access_chain(e) {
        return y != x || idx.len() >= k;
    }
    e.children().all(|c| full_uses(c, x, k))
}

/// `e` with each read `x[a1]..[ak]` keeping only the accesses `keep`
/// marks, bracketed by the range of each dropped one unless a loop around
/// (`loops`) ranges over exactly that extent.
fn narrow_reads(
    e: &Expr,
    x: Symbol,
    keep: &[bool],
    extents: &[&Affine],
    loops: &mut Vec<(Symbol, Affine)>,
) -> Expr {
    if let Some((y, idx)) = access_chain(e) {
        if y != x || idx.len() < keep.len() {
            return e.clone();
        }
        // accesses into the element (a tensor element) are kept
        let (idx, inner) = idx.split_at(keep.len());
        let mut read = Expr::Var(x);
        let mut preds = vec![];
        for ((a, k), d) in idx.iter().zip(keep).zip(extents) {
            if *k {
                read = build::get(read, (*a).clone());
                continue;
            }
            let covered = loops
                .iter()
                .rev()
                .any(|(v, ext)| **a == Affine::var(*v) && ext == *d);
            let constant_in_range = matches!(
                (a.as_constant(), d.as_constant()),
                (Some(c), Some(n)) if 0 <= c && c < n
            );
            if !covered && !constant_in_range {
                preds.push(Pred::Cmp(CmpOp::Le, Affine::constant(0), (*a).clone()));
                preds.push(Pred::Cmp(CmpOp::Lt, (*a).clone(), (*d).clone()));
            }
        }
        for a in inner {
            read = build::get(read, (*a).clone());
        }
        return match preds.len() {
            0 => read,
            _ => Expr::Iverson(Pred::And(preds), Box::new(read)),
        };
    }
    match e {
        Expr::Gen(i, d, a) | Expr::Sum(i, d, a) | Expr::Reduce(_, i, d, a) => {
            loops.push((*i, d.clone()));
            let a = narrow_reads(a, x, keep, extents, loops);
            loops.pop();
            e.same_loop(*i, d.clone(), a).expect("a loop")
        }
        _ => e.map_children(|c| narrow_reads(c, x, keep, extents, loops)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::ast::Program;
    use crate::front::parse_program;
    use crate::semantics::eval::evaluate;
    use crate::terms::normalize::{lift, unflatten};

    fn flat(text: &str) -> (Program, Vec<(Symbol, Expr)>, Expr) {
        let p = parse_program(text.as_bytes()).unwrap();
        let mut fresh = crate::front::subst::fresh_above(&p.body);
        let (binds, result) = lift(&p.body, &mut fresh);
        (p, binds, result)
    }

    /// The program with the bindings and result given, evaluated at random
    /// inputs, equals the original.
    fn same_values(p: &Program, binds: Vec<(Symbol, Expr)>, result: Expr) {
        let q = Program {
            body: unflatten((binds, result)),
            ..p.clone()
        };
        let sizes: crate::semantics::value::Sizes = p.sizes.iter().map(|s| (*s, 5)).collect();
        let inputs =
            crate::semantics::value::random_inputs(p, &sizes, &mut crate::rng::Rng::new(7))
                .unwrap();
        assert_eq!(
            evaluate(p, &inputs).unwrap(),
            evaluate(&q, &inputs).unwrap()
        );
    }

    #[test]
    fn a_diagonal_binding_is_inlined_into_its_use() {
        let (p, binds, result) = flat(
            "(fn f ((x (tensor n R)) (v (tensor n R)))
               (let A (gen i n (gen j n (iverson (== i j) (get x i))))
                 (gen i n (sum j n (* (get (get A i) j) (get v j))))))",
        );
        let mut id = Fresh::after(1000);
        let (binds2, result2) = inline_free_bindings(binds, result, &mut id);
        assert!(!free_names(&result2).contains(&Symbol::from("A")));
        same_values(&p, binds2, result2);
    }

    #[test]
    fn a_recomputed_element_is_read_from_its_binding() {
        let (p, binds, result) = flat(
            "(fn f ((x (tensor n R)) (y (tensor n R)))
               (let e (gen i n (exp (get x i)))
                 (let r (gen k n (* (exp (get x k)) (get y k)))
                   (sum i n (+ (get e i) (get r i))))))",
        );
        let (binds2, result2) = reuse_bindings(binds, result);
        let r = &binds2.iter().find(|b| b.0 == Symbol::from("r")).unwrap().1;
        assert!(free_names(r).contains(&Symbol::from("e")), "{r:?}");
        same_values(&p, binds2, result2);
    }

    #[test]
    fn false_brackets_are_dropped_where_real() {
        let p = parse_program(
            b"(fn f ((x (tensor n R)))
               (pair (gen i n (+ (iverson false 1) (get x i))) (iverson false (gen j n 1))))",
        )
        .unwrap();
        let q = drop_false_brackets(&p.body);
        let expected = parse_program(
            b"(fn f ((x (tensor n R)))
               (pair (gen i n (get x i)) (iverson false (gen j n 1))))",
        )
        .unwrap();
        assert_eq!(q, expected.body);
    }

    #[test]
    fn a_product_with_a_sum_is_bracketed_by_its_range() {
        let p = parse_program(
            b"(fn f ((x (tensor n R)) (u R))
               (* (+ u 1) (sum j n (* u (get x j)))))",
        )
        .unwrap();
        let q = Program {
            body: bracket_empty_products(&p.body),
            ..p.clone()
        };
        assert!(matches!(q.body, Expr::Iverson(..)), "{:?}", q.body);
        for n in 0..4 {
            let sizes: crate::semantics::value::Sizes =
                [(Symbol::from("n"), n)].into_iter().collect();
            let inputs =
                crate::semantics::value::random_inputs(&p, &sizes, &mut crate::rng::Rng::new(3))
                    .unwrap();
            let real = |v| match v {
                crate::semantics::value::Value::Real(x) => x,
                crate::semantics::value::Value::Zero => 0.0,
                other => panic!("{other:?}"),
            };
            let (a, b) = (
                evaluate(&p, &inputs).unwrap(),
                evaluate(&q, &inputs).unwrap(),
            );
            assert_eq!(real(a), real(b));
            let rel = Default::default();
            let cost = |p: &Program| crate::semantics::cost::cost(p, &sizes, &rel).unwrap();
            assert!(cost(&q) <= cost(&p));
            assert_eq!(cost(&q) < cost(&p), n == 0, "n = {n}");
        }
    }

    #[test]
    fn a_computation_made_twice_becomes_a_binding() {
        let (p, binds, result) = flat(
            "(fn f ((z (tensor b c R)))
               (let t (gen s b (sum k c (exp (get z s k))))
                 (let u (gen g b (gen h c (* (get t g) (exp (get z g h)))))
                   (sum s b (sum k c (get u s k))))))",
        );
        let mut id = Fresh::after(1000);
        let (binds2, result2) = share_repeated_elements(binds, result, &mut id);
        assert_eq!(binds2.len(), 3, "{binds2:?}");
        let calls = |e: &Expr| {
            let mut n = 0;
            e.any(&mut |x| {
                n += usize::from(matches!(x, Expr::Call(..)));
                false
            });
            n
        };
        let total: usize = binds2.iter().map(|b| calls(&b.1)).sum();
        assert_eq!(total, 1, "{binds2:?}");
        same_values(&p, binds2, result2);
    }

    #[test]
    fn a_broadcast_dimension_is_not_materialized() {
        let (p, binds, result) = flat(
            "(fn f ((u (tensor n R)) (s R) (v (tensor m R)))
               (let t (gen i n (gen j m (* (get u i) s)))
                 (let c (gen b n (recip s))
                   (sum i n (sum j m (* (get (get t i) j) (+ (get v j) (get c i))))))))",
        );
        let (binds2, result2) = drop_broadcast_dimensions(binds, result);
        let t = &binds2.iter().find(|b| b.0 == Symbol::from("t")).unwrap().1;
        assert!(
            matches!(t, Expr::Gen(_, _, b) if !matches!(**b, Expr::Gen(..))),
            "{t:?}"
        );
        let c = &binds2.iter().find(|b| b.0 == Symbol::from("c")).unwrap().1;
        // `[0 < n]·recip(s)`: a scalar, computed only if n > 0
        assert!(
            matches!(c, Expr::Iverson(_, b) if matches!(**b, Expr::Call(..))),
            "{c:?}"
        );
        same_values(&p, binds2, result2);
    }

    #[test]
    fn an_equal_definition_is_the_earlier_binding() {
        let (p, binds, result) = flat(
            "(fn f ((x (tensor n R)))
               (let a (gen i n (* (get x i) (get x i)))
                 (let b (gen j n (* (get x j) (get x j)))
                   (sum i n (* (get a i) (get b i))))))",
        );
        let (binds2, result2) = reuse_bindings(binds, result);
        assert_eq!(binds2.len(), 1);
        same_values(&p, binds2, result2);
    }
}
