//! The e-class analysis: free names, smallest-term size, constant folding
//! of reals, index leaves, and truth of predicates decided from the extents
//! of the index variables they mention.
//!
//! * `free` is merged by **union** ("possibly free"): egg issue #234 shows
//!   that intersection is unsound once rules make free sets smaller.
//! * `size` is the size of the smallest term in the class (merged by min);
//!   appliers that substitute extract that term ([`smallest`]).
//! * extents live in the analysis itself (`extents`), keyed by binder name:
//!   the front end gives every binder a unique name and every rule that
//!   makes a binder either reuses a name with the same extent or registers a
//!   fresh one, so one global map is exact.

use super::language::{Atl, Fun, Idx, Num};
use crate::front::affine::Affine;
use crate::front::ast::{MaxMin, Real};
use crate::symbol::Symbol;
use egg::{Analysis, DidMerge, EGraph, Id, Language};
use std::collections::HashMap;

pub type AtlGraph = EGraph<Atl, AtlAnalysis>;

/// A new e-graph, holding the black boxes' function leaves, added first
/// in one order ([`Fun::all`]). Class ids order the nodes of a class, and so
/// decide between terms of equal cost: this way calls compare by their
/// function alike in every program, whichever function it uses first.
pub fn new_graph(analysis: AtlAnalysis) -> AtlGraph {
    let mut g = AtlGraph::new(analysis);
    for f in Fun::all() {
        g.add(Atl::Fun(f));
    }
    g
}

/// The function leaves of every e-graph ([`new_graph`]).
pub const FUNCTION_LEAVES: usize = crate::front::blackbox::BLACK_BOXES.len();

// Limits and statistics count the program's terms, without the function
// leaves (which every e-graph holds, used or not), as when each black box
// was a node of its own.

/// The live e-nodes of an e-graph's terms.
pub fn term_nodes(g: &AtlGraph) -> usize {
    g.total_number_of_nodes() - FUNCTION_LEAVES
}

/// The e-classes of an e-graph's terms.
pub fn term_classes(g: &AtlGraph) -> usize {
    g.number_of_classes() - FUNCTION_LEAVES
}

/// The size of the hashcons of an e-graph's terms (egg's `total_size`,
/// stale entries included).
pub fn term_memo_size(g: &AtlGraph) -> usize {
    g.total_size() - FUNCTION_LEAVES
}

/// A set of names: a bitset over the names the analysis has interned.
/// (Free-name sets of long `let` chains hold thousands of names; unions of
/// ordered sets made e-graphs of deep programs slow.)
#[derive(Clone, Debug, Default)]
pub struct NameSet(Vec<u64>);

impl NameSet {
    pub fn insert(&mut self, k: usize) {
        let (w, b) = (k / 64, k % 64);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << b;
    }
    pub fn remove(&mut self, k: usize) {
        if let Some(w) = self.0.get_mut(k / 64) {
            *w &= !(1u64 << (k % 64));
        }
    }
    pub fn contains(&self, k: usize) -> bool {
        self.0.get(k / 64).is_some_and(|w| w & (1 << (k % 64)) != 0)
    }
    pub fn union_with(&mut self, o: &NameSet) {
        if self.0.len() < o.0.len() {
            self.0.resize(o.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
    pub fn intersects(&self, o: &NameSet) -> bool {
        self.0.iter().zip(&o.0).any(|(a, b)| a & b != 0)
    }
    pub fn difference_with(&mut self, o: &NameSet) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a &= !b;
        }
    }
    /// The bits set, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(w, bits)| {
            (0..64)
                .filter(move |b| bits & (1u64 << b) != 0)
                .map(move |b| w * 64 + b)
        })
    }
    pub fn is_subset(&self, o: &NameSet) -> bool {
        self.0
            .iter()
            .enumerate()
            .all(|(k, w)| w & !o.0.get(k).copied().unwrap_or(0) == 0)
    }
}

impl PartialEq for NameSet {
    fn eq(&self, o: &NameSet) -> bool {
        self.is_subset(o) && o.is_subset(self)
    }
}

#[derive(Default, Clone, Debug)]
pub struct AtlAnalysis {
    /// The names free-name sets are over (index = bit).
    pub names: indexmap::IndexSet<Symbol>,
    /// Index binder name -> its extent `D` (the index ranges over `[0, D)`).
    pub extents: HashMap<Symbol, Affine>,
    /// The name supply of the appliers (a copy of the pass's
    /// [`crate::front::names::Fresh`], handed back after the run).
    pub fresh: crate::front::names::Fresh,
    /// Differentiation only: sigma, the types, the constants
    /// ([`crate::egraph::context::DiffContext`]; empty in the optimizer).
    pub diff: crate::egraph::context::DiffContext,
    /// Keep the other nodes of classes known to be constants (tests that
    /// look for every instance of a rule in an e-graph set this).
    pub keep_constant_nodes: bool,
    /// Names made by appliers, by what they name ([`Self::name_for`]).
    pub named: HashMap<String, Symbol>,
}

impl AtlAnalysis {
    /// The bit of a name (interned on first use).
    pub fn name_bit(&mut self, s: Symbol) -> usize {
        self.names.insert_full(s).0
    }

    /// The fresh name made for `key` the first time it is asked for. Appliers
    /// that name things use it so that applying them again makes the same
    /// nodes (an applier with new names each time never saturates).
    pub fn name_for(&mut self, key: &str, base: &str) -> Symbol {
        if let Some(s) = self.named.get(key) {
            return *s;
        }
        let s = self.fresh_name(Symbol::from(base));
        self.named.insert(key.to_string(), s);
        s
    }

    /// Extend sigma with `x -> dx`.
    pub fn add_tangent(&mut self, x: Symbol, dx: Symbol) {
        self.diff.tangents.insert(x, dx);
        let k = self.name_bit(dx);
        self.diff.tangent_set.insert(k);
    }

    /// Is `s` a tangent name?
    pub fn tangent_set_has(&self, s: Symbol) -> bool {
        self.names
            .get_index_of(&s)
            .is_some_and(|k| self.diff.tangent_set.contains(k))
    }

    /// Does the class with data `d` possibly mention a tangent name?
    pub fn mentions_tangent(&self, d: &Data) -> bool {
        d.free.intersects(&self.diff.tangent_set)
    }

    /// Is `s` possibly free in the class with data `d`?
    pub fn is_free(&self, d: &Data, s: Symbol) -> bool {
        self.names
            .get_index_of(&s)
            .is_some_and(|k| d.free.contains(k))
    }

    /// A fresh name with the base of `base` (`i` -> `i#7`, see
    /// [`crate::front::names`]).
    pub fn fresh_name(&mut self, base: Symbol) -> Symbol {
        self.fresh.name(base.as_str())
    }
}

/// The size given to an extension node (see `make`).
pub const EXTENSION_SIZE: usize = 1 << 32;

#[derive(Clone, Debug, PartialEq)]
pub struct Data {
    pub free: NameSet,
    /// The variable the class holds, if it holds one (`(var x)`).
    pub var: Option<Symbol>,
    pub size: usize,
    pub num: Option<Real>,
    pub aff: Option<Affine>,
    pub truth: Option<bool>,
}

fn fold_real(egraph: &AtlGraph, n: &Atl) -> Option<Real> {
    let c = |id: &Id| egraph[*id].data.num.map(|r| r.0);
    let v = match n {
        Atl::Num(k) => return Some(k.0),
        Atl::Add([a, b]) => c(a)? + c(b)?,
        Atl::Mul([a, b]) => c(a)? * c(b)?,
        Atl::Max([a, b]) => MaxMin::Max.apply(c(a)?, c(b)?),
        Atl::Min([a, b]) => MaxMin::Min.apply(c(a)?, c(b)?),
        Atl::IndexReal(a) => egraph[*a].data.aff.as_ref()?.as_constant()? as f64,
        _ => {
            let (f, a, k) = n.as_call()?;
            let x = c(&a)?;
            let k = match k {
                Some(k) => Some(egraph[k].data.num?),
                None => None,
            };
            fun_of(egraph, f)?.at(k)?.apply(x)
        }
    };
    // Only finite results are folded: ATL has no literal for NaN.
    v.is_finite().then_some(Real(v))
}

/// Lower and upper bounds of an affine form over index variables with known
/// extents, as affine forms over the remaining names (sizes, unknowns).
fn bounds(a: &Affine, extents: &HashMap<Symbol, Affine>) -> Option<(Affine, Affine)> {
    let mut lo = Affine::constant(a.constant);
    let mut hi = Affine::constant(a.constant);
    for (n, k) in &a.terms {
        match extents.get(n) {
            Some(ext) => {
                // n in [0, ext - 1]
                let top = ext.add_constant(-1).ok()?.scale(*k).ok()?;
                if *k > 0 {
                    hi = hi.add(&top).ok()?;
                } else {
                    lo = lo.add(&top).ok()?;
                }
            }
            None => {
                let t = Affine::var(*n).scale(*k).ok()?;
                lo = lo.add(&t).ok()?;
                hi = hi.add(&t).ok()?;
            }
        }
    }
    Some((lo, hi))
}

/// Is an affine form over sizes (all >= 0) certainly negative / non-negative?
fn surely_negative(a: &Affine) -> bool {
    a.constant < 0 && a.terms.iter().all(|(_, k)| *k <= 0)
}
fn surely_nonnegative(a: &Affine) -> bool {
    a.constant >= 0 && a.terms.iter().all(|(_, k)| *k >= 0)
}

/// Truth of `d < 0` (strict) or `d <= 0`, when the extents decide it.
fn decide_cmp(d: &Affine, strict: bool, extents: &HashMap<Symbol, Affine>) -> Option<bool> {
    let (lo, hi) = bounds(d, extents)?;
    let (lo, hi) = if strict {
        (lo, hi)
    } else {
        // d <= 0  <=>  d - 1 < 0
        (lo.add_constant(-1).ok()?, hi.add_constant(-1).ok()?)
    };
    if surely_negative(&hi) {
        Some(true)
    } else if surely_nonnegative(&lo) {
        Some(false)
    } else {
        None
    }
}

fn decide_pred(egraph: &AtlGraph, n: &Atl) -> Option<bool> {
    let t = |id: &Id| egraph[*id].data.truth;
    let a = |id: &Id| egraph[*id].data.aff.clone();
    let ext = &egraph.analysis.extents;
    match n {
        Atl::True => Some(true),
        Atl::False => Some(false),
        Atl::And([p, q]) => match (t(p), t(q)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Atl::Or([p, q]) => match (t(p), t(q)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Atl::Lt([x, y]) => decide_cmp(&a(x)?.sub(&a(y)?).ok()?, true, ext),
        Atl::Le([x, y]) => decide_cmp(&a(x)?.sub(&a(y)?).ok()?, false, ext),
        Atl::Eq([x, y]) => {
            let d = a(x)?.sub(&a(y)?).ok()?;
            if let Some(c) = d.as_constant() {
                return Some(c == 0);
            }
            // d < 0 or d > 0 everywhere: false
            let (lo, hi) = bounds(&d, ext)?;
            (surely_negative(&hi) || (surely_nonnegative(&lo) && lo.constant > 0)).then_some(false)
        }
        Atl::Exists([_, d, p]) => match (t(p), a(d)?.as_constant()) {
            (_, Some(0)) => Some(false),
            (Some(v), Some(_)) => Some(v),
            _ => None,
        },
        _ => None,
    }
}

impl Analysis<Atl> for AtlAnalysis {
    type Data = Data;

    fn make(egraph: &mut AtlGraph, n: &Atl, _id: Id) -> Data {
        let mut free = NameSet::default();
        // Extension forms count as huge, so that the smallest term of a class
        // (what appliers substitute into) is a core term whenever one exists.
        let mut size = if n.is_extension() {
            EXTENSION_SIZE
        } else {
            n.weight()
        };
        for c in n.children() {
            size = size.saturating_add(egraph[*c].data.size);
        }
        let binder = |egraph: &mut AtlGraph, id: &Id| match egraph[*id].nodes.first() {
            Some(Atl::Sym(s)) => {
                let s = *s;
                Some(egraph.analysis.name_bit(s))
            }
            _ => None,
        };
        match n {
            Atl::Var(x) => {
                if let Some(k) = binder(egraph, x) {
                    free.insert(k);
                }
            }
            Atl::Aff(Idx(a)) => {
                for name in a.names() {
                    free.insert(egraph.analysis.name_bit(name));
                }
            }
            Atl::Gen([i, _, b])
            | Atl::Sum([i, _, b])
            | Atl::Maximum([i, _, b])
            | Atl::Minimum([i, _, b])
            | Atl::ArgMax([i, _, b])
            | Atl::ArgMin([i, _, b])
            | Atl::Exists([i, _, b]) => {
                free.union_with(&egraph[*b].data.free);
                if let Some(k) = binder(egraph, i) {
                    free.remove(k);
                }
            }
            Atl::Let([x, a, b]) => {
                free.union_with(&egraph[*b].data.free);
                if let Some(k) = binder(egraph, x) {
                    free.remove(k);
                }
                free.union_with(&egraph[*a].data.free);
            }
            // D[e] mentions the tangents of e's variables
            Atl::D(e) => {
                free.union_with(&egraph[*e].data.free);
                // (add_tangent interned every tangent name)
                let an = &egraph.analysis;
                let tangents: Vec<usize> = free
                    .iter()
                    .filter_map(|k| an.diff.tangents.get(an.names.get_index(k)?))
                    .filter_map(|dx| an.names.get_index_of(dx))
                    .collect();
                for k in tangents {
                    free.insert(k);
                }
            }
            // dlet x d s binds the tangent of x in s; drop x s removes it
            Atl::DLet([x, _, _]) | Atl::Drop([x, _]) => {
                let (d, s) = match n {
                    Atl::DLet([_, d, s]) => (Some(*d), *s),
                    Atl::Drop([_, s]) => (None, *s),
                    _ => unreachable!(),
                };
                free.union_with(&egraph[s].data.free);
                let dx = name_of(egraph, *x)
                    .and_then(|x| egraph.analysis.diff.tangents.get(&x).copied());
                if let Some(dx) = dx {
                    let k = egraph.analysis.name_bit(dx);
                    free.remove(k);
                }
                if let Some(d) = d {
                    free.union_with(&egraph[d].data.free);
                }
            }
            // a coefficient of a linear form mentions no tangent
            Atl::Coeff([p, s]) => {
                free.union_with(&egraph[*p].data.free);
                free.union_with(&egraph[*s].data.free);
                free.difference_with(&egraph.analysis.diff.tangent_set);
            }
            Atl::Sym(_) => {}
            _ => {
                for c in n.children() {
                    free.union_with(&egraph[*c].data.free);
                }
            }
        }
        let aff = match n {
            Atl::Aff(Idx(a)) => Some(a.clone()),
            _ => None,
        };
        let num = fold_real(egraph, n);
        let truth = decide_pred(egraph, n);
        if num.is_some() || truth.is_some() {
            // a constant mentions nothing (see `merge`)
            free = NameSet::default();
        }
        let var = match n {
            Atl::Var(x) => name_of(egraph, *x),
            _ => None,
        };
        Data {
            free,
            var,
            size,
            num,
            aff,
            truth,
        }
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        let before = a.clone();
        // union of free names
        a.free.union_with(&b.free);
        a.size = a.size.min(b.size);
        if a.num.is_none() {
            a.num = b.num;
        }
        if a.aff.is_none() {
            a.aff = b.aff.clone();
        }
        if a.var.is_none() {
            a.var = b.var;
        }
        if a.truth.is_none() {
            a.truth = b.truth;
        }
        // A class known to be a constant has no free names, whatever was
        // merged into it: without this, the class of 0 (where every
        // vanishing term ends up) would collect the names of all of them.
        if a.num.is_some() || a.truth.is_some() {
            a.free = NameSet::default();
        }
        DidMerge(*a != before, *a != b)
    }

    fn modify(egraph: &mut AtlGraph, id: Id) {
        let data = egraph[id].data.clone();
        if let Some(r) = data.num {
            let leaf = Atl::Num(Num(r));
            // (a memo lookup: classes can be large)
            if egraph.lookup(leaf.clone()) != Some(egraph.find(id)) {
                let k = egraph.add(leaf);
                egraph.union(id, k);
            }
            // Pruning: a constant is its literal. Other nodes of the class
            // would only give rules more to match (D of an addition that
            // folds to 0, say) and extraction nothing better.
            if !egraph.analysis.keep_constant_nodes {
                let id = egraph.find(id);
                egraph[id].nodes.retain(|n| matches!(n, Atl::Num(_)));
            }
        }
        if let Some(t) = data.truth {
            let leaf = if t { Atl::True } else { Atl::False };
            if egraph.lookup(leaf.clone()) != Some(egraph.find(id)) {
                let k = egraph.add(leaf);
                egraph.union(id, k);
            }
            // a decided predicate is its literal (its free names are gone,
            // so no other member may be extracted out of its binder's scope)
            if !egraph.analysis.keep_constant_nodes {
                let id = egraph.find(id);
                egraph[id]
                    .nodes
                    .retain(|n| matches!(n, Atl::True | Atl::False));
            }
        }
        // Pruning to a variable (differentiation only): a class that holds
        // `(var x)` is x, and its free names are exactly {x}. Terms proved
        // equal to x (a coefficient that happens to be an input, say)
        // would otherwise add their own free names to x's class, and from
        // there to every term using x, until no binder could move past them.
        if let (true, Some(x)) = (egraph.analysis.diff.prune_to_variables, data.var) {
            if egraph[id].nodes.len() > 1 {
                let k = egraph.analysis.name_bit(x);
                let id = egraph.find(id);
                let class = &mut egraph[id];
                class.nodes.retain(|n| matches!(n, Atl::Var(_)));
                class.data.free = NameSet::default();
                class.data.free.insert(k);
            }
        }
    }
}

/// The black box held by a function class.
pub fn fun_of(egraph: &AtlGraph, id: Id) -> Option<Fun> {
    egraph[id].nodes.iter().find_map(|n| match n {
        Atl::Fun(f) => Some(*f),
        _ => None,
    })
}

/// The name held by a name class.
pub fn name_of(egraph: &AtlGraph, id: Id) -> Option<Symbol> {
    egraph[id].nodes.iter().find_map(|n| match n {
        Atl::Sym(s) => Some(*s),
        _ => None,
    })
}

/// A smallest term of a class, as a [`egg::RecExpr`]: at each class, the
/// node whose children have the least total size. Class sizes may lag
/// behind between rebuilds, so cycles are detected (None) rather than
/// assumed impossible.
pub fn smallest(egraph: &AtlGraph, id: Id) -> Option<egg::RecExpr<Atl>> {
    fn go(
        egraph: &AtlGraph,
        id: Id,
        rec: &mut egg::RecExpr<Atl>,
        memo: &mut HashMap<Id, Option<Id>>,
    ) -> Option<Id> {
        let id = egraph.find(id);
        // a function leaf, one under every call: no memo needed
        if let [f @ Atl::Fun(_)] = egraph[id].nodes.as_slice() {
            return Some(rec.add(f.clone()));
        }
        if let Some(r) = memo.get(&id) {
            return *r; // None: on the current path, a cycle
        }
        memo.insert(id, None);
        let class = &egraph[id];
        let best = class
            .nodes
            .iter()
            .min_by_key(|n| {
                n.children().iter().fold(n.weight(), |acc, c| {
                    acc.saturating_add(egraph[*c].data.size)
                })
            })?
            .clone();
        let mut ok = true;
        let node = best.map_children(|c| match go(egraph, c, rec, memo) {
            Some(r) => r,
            None => {
                ok = false;
                c
            }
        });
        if !ok {
            return None;
        }
        let r = rec.add(node);
        memo.insert(id, Some(r));
        Some(r)
    }
    let mut rec = egg::RecExpr::default();
    go(egraph, id, &mut rec, &mut HashMap::new())?;
    Some(rec)
}
