//! Extraction by the paper's sparsity-aware work cost, as an egg
//! [`CostFunction`].
//!
//! The work cost is not compositional in the costs of the children: an
//! Iverson bracket scales its body's cost by where its predicate holds, an
//! addition of two brackets counts only where both hold, a chain of sums
//! counts the tuples its predicate admits. So the cost of a node is computed
//! exactly, on the term it stands for: each [`CostVal`] carries its term,
//! and a node's term is built from its children's. That term is costed by
//! [`crate::semantics::cost::cost_expr`] (the same counting code as
//! `atl-egg cost`), with each free index variable summed over its extent (as
//! the `gen` or `sum` that binds it would do).
//!
//! Costs do not rely on one concrete size: a cost is a vector of exact costs
//! at several size assignments ([`Sample`]s), spread over orders of
//! magnitude (sizes near 10^6, each size a different value so that sizes
//! vary independently, and the same divided by 1000), compared by
//! [`cost_key`]: first the growth (how the cost scales from each sample to
//! the one 1000 times larger, rounded to a power of the sizes), then the
//! costs in sample order (the user's sizes when given, then the largest);
//! term size breaks ties. So a program asymptotically costlier never wins
//! because it is cheaper at small sizes, and among programs of the same
//! growth the user's sizes decide. Relation tests count as true in
//! extraction (the dense upper bound); the optimizer's final guard also
//! checks other relation values.

use super::analysis::AtlGraph;
use super::language::{Atl, Fun};
use crate::front::affine::Affine;
use crate::front::ast::{build, CmpOp, Expr, MaxMin, Pred};
use crate::front::subst::free_names;
use crate::semantics::cost::{cost_expr_budget, CostCtx};
use crate::semantics::value::{Relation, Sizes};
use crate::symbol::Symbol;
use egg::{CostFunction, Id, Language};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::rc::Rc;

/// One size assignment (and relation values) at which costs are compared.
#[derive(Clone, Debug)]
pub struct Sample {
    pub sizes: Sizes,
    pub relations: HashMap<Symbol, Relation>,
    /// The sample (an index into the same list) whose sizes are these
    /// divided by a constant (usually [`GROWTH_SCALE`]): [`cost_key`]
    /// compares how costs grow from there to here.
    pub scales: Option<usize>,
}

/// How much larger a large sample's sizes are than those of the sample it
/// scales (less for programs with relations, stored densely).
pub const GROWTH_SCALE: f64 = 1000.0;

/// The growth class of a cost going from `base` to `large` when the sizes
/// grow by `scale`: the exponent `e` of `large / base = scale^e`, rounded
/// (0 constant, 1 linear, 2 quadratic...).
pub fn growth_class(base: u128, large: u128, scale: f64) -> u128 {
    if base >= UNUSABLE || large >= UNUSABLE {
        return UNUSABLE;
    }
    if scale <= 1.0 {
        return 0;
    }
    let ratio = (large as f64 + 1.0) / (base as f64 + 1.0);
    let e = ratio.ln() / scale.ln();
    (e + 0.5).floor().max(0.0) as u128
}

/// How much larger the sizes of `large` are than those of `base` (their
/// largest values' ratio).
fn scale_between(base: &Sample, large: &Sample) -> f64 {
    let top = |s: &Sample| s.sizes.values().copied().max().unwrap_or(0).max(1) as f64;
    top(large) / top(base)
}

/// The key costs are compared by: the growth class of each sample that
/// scales another, then every cost in sample order.
pub fn cost_key(costs: &[u128], samples: &[Sample]) -> Vec<u128> {
    let growth = samples.iter().zip(costs).filter_map(|(s, &large)| {
        let b = s.scales?;
        let scale = scale_between(samples.get(b)?, s);
        Some(growth_class(*costs.get(b)?, large, scale))
    });
    growth.chain(costs.iter().copied()).collect()
}

/// The term a class stands for, by sort.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    Expr(Expr),
    Pred(Pred),
    Aff(Affine),
    Name(Symbol),
    Fun(Fun),
}

/// The term a cost stands for, as a persistent tree over e-nodes: making a
/// parent shares its children (no copying), and a 128-bit structural hash
/// identifies the term for the cost memo without building it.
#[derive(Debug)]
pub struct PTree {
    pub node: Atl,
    /// One per `node.children()`, in order.
    pub kids: Vec<Rc<PTree>>,
    pub hash: u128,
}

impl PTree {
    fn new(node: &Atl, kids: Vec<Rc<PTree>>) -> PTree {
        use std::hash::{Hash, Hasher};
        let op = node.clone().map_children(|_| Id::from(0usize));
        let half = |salt: u64| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            salt.hash(&mut h);
            op.hash(&mut h);
            for k in &kids {
                k.hash.hash(&mut h);
            }
            h.finish()
        };
        let hash = ((half(0x9e37_79b9) as u128) << 64) | half(0x85eb_ca6b) as u128;
        PTree {
            node: node.clone(),
            kids,
            hash,
        }
    }

    /// The term itself (None when children have the wrong sorts).
    pub fn term(&self) -> Option<Term> {
        let mut slots = self
            .kids
            .iter()
            .map(|k| k.term().map(Some))
            .collect::<Option<Vec<_>>>()?;
        let ch = self.node.children();
        build_term(&self.node, &mut |id| {
            // the first unused position of this child (a child may repeat)
            let pos = (0..ch.len()).find(|&k| ch[k] == id && slots[k].is_some())?;
            slots[pos].take()
        })
    }
}

/// A cost: exact work costs at each sample, then the term size.
#[derive(Clone, Debug)]
pub struct CostVal {
    pub key: Vec<u128>,
    pub size: usize,
    pub tree: Rc<PTree>,
    /// The term's free index variables that have an extent (those its cost
    /// is summed over), sorted.
    pub free: Rc<Vec<Symbol>>,
}

impl CostVal {
    pub fn term(&self) -> Option<Term> {
        self.tree.term()
    }
}

/// The tie-breaker after the costs: term size, plus a penalty for shapes
/// that hide a bracket from its context. The work cost of a bracket depends
/// on where it stands (directly under a chain of sums, or as an operand of
/// `+`), so among terms of equal cost in isolation extraction prefers one
/// bracket over nested ones and brackets outside products. A loop (`sum`,
/// `exists`) counts as [`LOOP_PENALTY`] nodes: of equal cost, a bracket
/// that index elimination solved (`[0 <= g-1 < n]·y[g-1]`) beats the sum it
/// came from (`Σ[i<n] [g == i+1]·y[i]`), and unlike the sum it shows its
/// bracket to an addition above it, which is then charged only where the
/// bracket holds.
fn shape_penalty(n: &Atl, kids: &[CostVal]) -> usize {
    let is_bracket = |k: &CostVal| matches!(k.tree.node, Atl::Iverson(_));
    match n {
        // a bracket outside a sum (`[l == t]·Σ_i e`, which an addition
        // above sees) beats the same bracket inside it (`Σ_i [l == t]·e`)
        Atl::Sum(_) => LOOP_PENALTY + 2 * usize::from(kids.get(2).is_some_and(is_bracket)),
        Atl::Exists(_) | Atl::Maximum(_) | Atl::Minimum(_) | Atl::ArgMax(_) | Atl::ArgMin(_) => {
            LOOP_PENALTY
        }
        Atl::Iverson(_) => usize::from(kids.get(1).is_some_and(is_bracket)),
        Atl::Mul(_) => kids.iter().filter(|k| is_bracket(k)).count(),
        _ => 0,
    }
}

/// What a loop adds to the size that breaks ties (see [`shape_penalty`]).
const LOOP_PENALTY: usize = 12;

impl PartialEq for CostVal {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key && self.size == o.size
    }
}

impl PartialOrd for CostVal {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.key.cmp(&o.key).then(self.size.cmp(&o.size)))
    }
}

/// Terms larger than this (in nodes) are not considered by extraction.
pub const MAX_TERM_SIZE: usize = 3_000;

/// A cost so large that any real term beats it.
pub const UNUSABLE: u128 = u128::MAX / 4;

pub struct WorkCost<'a> {
    pub egraph: &'a AtlGraph,
    pub samples: &'a [Sample],
    /// Costs of terms already seen: egg's extractor re-costs every node on
    /// every pass, and most terms do not change between passes.
    pub memo: HashMap<u128, Vec<u128>>,
    /// How many more exact costings (terms not costed before) may be made;
    /// after that only dense upper bounds are computed (no counting), so
    /// extraction of a large e-graph stays bounded. `None`: no bound.
    pub exact_left: Option<usize>,
    /// Extraction stops early past this instant (the caller then fails the
    /// command: it is the command's deadline, never a place to stop).
    pub deadline: Option<crate::limits::CpuTime>,
    /// Terms larger than this (in nodes) are not considered.
    pub max_term_size: usize,
}

impl<'a> WorkCost<'a> {
    pub fn new(egraph: &'a AtlGraph, samples: &'a [Sample]) -> WorkCost<'a> {
        WorkCost {
            egraph,
            samples,
            memo: HashMap::new(),
            exact_left: None,
            deadline: None,
            max_term_size: MAX_TERM_SIZE,
        }
    }

    /// The length of a key ([`cost_key`]).
    fn key_len(&self) -> usize {
        self.samples.len() + self.samples.iter().filter(|s| s.scales.is_some()).count()
    }

    pub fn with_max_term_size(mut self, n: usize) -> WorkCost<'a> {
        self.max_term_size = n;
        self
    }

    pub fn with_exact_costings(mut self, n: usize) -> WorkCost<'a> {
        self.exact_left = Some(n);
        self
    }

    pub fn with_deadline(mut self, t: crate::limits::CpuTime) -> WorkCost<'a> {
        self.deadline = Some(t);
        self
    }
}

/// Build the term of a node from the terms of its children.
pub fn build_term(n: &Atl, kid: &mut dyn FnMut(Id) -> Option<Term>) -> Option<Term> {
    // each child is taken (moved) once: building a term is linear in its size
    type Kid<'k> = &'k mut dyn FnMut(Id) -> Option<Term>;
    fn e(kid: Kid, id: &Id) -> Option<Expr> {
        match kid(*id)? {
            Term::Expr(x) => Some(x),
            _ => None,
        }
    }
    fn a(kid: Kid, id: &Id) -> Option<Affine> {
        match kid(*id)? {
            Term::Aff(x) => Some(x),
            _ => None,
        }
    }
    fn p(kid: Kid, id: &Id) -> Option<Pred> {
        match kid(*id)? {
            Term::Pred(x) => Some(x),
            _ => None,
        }
    }
    fn name(kid: Kid, id: &Id) -> Option<Symbol> {
        match kid(*id)? {
            Term::Name(x) => Some(x),
            _ => None,
        }
    }
    if let Some((f, arg, k)) = n.as_call() {
        let Term::Fun(f) = kid(f)? else { return None };
        let x = e(kid, &arg)?;
        let k = match k {
            Some(k) => match e(kid, &k)? {
                Expr::Const(k) => Some(k),
                _ => return None,
            },
            None => None,
        };
        return Some(Term::Expr(build::call(f.at(k)?, x)));
    }
    Some(match n {
        Atl::Sym(s) => Term::Name(*s),
        Atl::Fun(f) => Term::Fun(*f),
        Atl::Aff(i) => Term::Aff(i.0.clone()),
        Atl::Num(k) => Term::Expr(Expr::Const(k.0)),
        Atl::Var(x) => Term::Expr(Expr::Var(name(kid, x)?)),
        Atl::Add([x, y]) => Term::Expr(build::add(e(kid, x)?, e(kid, y)?)),
        Atl::Mul([x, y]) => Term::Expr(build::mul(e(kid, x)?, e(kid, y)?)),
        Atl::Max([x, y]) => Term::Expr(build::maxmin(MaxMin::Max, e(kid, x)?, e(kid, y)?)),
        Atl::Min([x, y]) => Term::Expr(build::maxmin(MaxMin::Min, e(kid, x)?, e(kid, y)?)),
        Atl::IndexReal(x) => Term::Expr(Expr::IndexReal(a(kid, x)?)),
        Atl::Pair([x, y]) => Term::Expr(build::pair(e(kid, x)?, e(kid, y)?)),
        Atl::Fst(x) => Term::Expr(build::fst(e(kid, x)?)),
        Atl::Snd(x) => Term::Expr(build::snd(e(kid, x)?)),
        Atl::Gen([i, d, b]) => Term::Expr(build::gen(name(kid, i)?, a(kid, d)?, e(kid, b)?)),
        Atl::Sum([i, d, b]) => Term::Expr(build::sum(name(kid, i)?, a(kid, d)?, e(kid, b)?)),
        Atl::Maximum([i, d, b])
        | Atl::Minimum([i, d, b])
        | Atl::ArgMax([i, d, b])
        | Atl::ArgMin([i, d, b]) => {
            let r = n.as_reduce().expect("a reduction").0;
            Term::Expr(build::reduce(r, name(kid, i)?, a(kid, d)?, e(kid, b)?))
        }
        Atl::Get([x, i]) => Term::Expr(build::get(e(kid, x)?, a(kid, i)?)),
        Atl::Iverson([q, x]) => Term::Expr(build::iverson(p(kid, q)?, e(kid, x)?)),
        Atl::Let([x, v, b]) => Term::Expr(build::let_(name(kid, x)?, e(kid, v)?, e(kid, b)?)),
        Atl::True => Term::Pred(Pred::True),
        Atl::False => Term::Pred(Pred::False),
        Atl::And([x, y]) => Term::Pred(Pred::And(vec![p(kid, x)?, p(kid, y)?])),
        Atl::Or([x, y]) => Term::Pred(Pred::Or(vec![p(kid, x)?, p(kid, y)?])),
        Atl::Lt([x, y]) => Term::Pred(Pred::Cmp(CmpOp::Lt, a(kid, x)?, a(kid, y)?)),
        Atl::Le([x, y]) => Term::Pred(Pred::Cmp(CmpOp::Le, a(kid, x)?, a(kid, y)?)),
        Atl::Eq([x, y]) => Term::Pred(Pred::Cmp(CmpOp::Eq, a(kid, x)?, a(kid, y)?)),
        Atl::Exists([i, d, q]) => Term::Pred(Pred::Exists(
            name(kid, i)?,
            a(kid, d)?,
            Box::new(p(kid, q)?),
        )),
        Atl::Rel(ids) => {
            let r = name(kid, &ids[0])?;
            let mut idx = vec![];
            for x in &ids[1..] {
                idx.push(a(kid, x)?);
            }
            Term::Pred(Pred::Rel(r, idx))
        }
        _ => return None,
    })
}

/// How many loop values one extraction-time costing may enumerate.
pub const EXTRACTION_BUDGET: u64 = 2_000;

/// Replace every predicate by `true`: the dense upper bound of a cost.
fn dense(e: &Expr) -> Expr {
    use build::*;
    match e {
        Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => e.clone(),
        Expr::Add(a, b) => add(dense(a), dense(b)),
        Expr::MaxMin(m, a, b) => maxmin(*m, dense(a), dense(b)),
        Expr::Mul(a, b) => mul(dense(a), dense(b)),
        Expr::Pair(a, b) => pair(dense(a), dense(b)),
        Expr::Call(f, a) => call(*f, dense(a)),
        Expr::Fst(a) => fst(dense(a)),
        Expr::Snd(a) => snd(dense(a)),
        Expr::Gen(i, d, b) => gen(*i, d.clone(), dense(b)),
        Expr::Sum(i, d, b) => sum(*i, d.clone(), dense(b)),
        Expr::Reduce(r, i, d, b) => reduce(*r, *i, d.clone(), dense(b)),
        Expr::Get(a, i) => get(dense(a), i.clone()),
        Expr::Iverson(_, a) => dense(a),
        Expr::Let(x, a, b) => let_(*x, dense(a), dense(b)),
    }
}

/// The costs extraction compares, at every sample: exact when counting
/// stays within [`EXTRACTION_BUDGET`], else the dense upper bound (every
/// predicate true), which needs no enumeration. The term is closed once,
/// and each distinct assignment (sizes and relations) costed once (the
/// samples of a program with no sizes are all one).
pub fn estimate_all(
    e: &Expr,
    extents: &HashMap<Symbol, Affine>,
    samples: &[Sample],
    exact: bool,
) -> Vec<u128> {
    let free = free_names(e);
    let mut wrapped = e.clone();
    for v in &free {
        if let Some(d) = extents.get(v) {
            wrapped = build::gen(*v, d.clone(), wrapped);
        }
    }
    let mut dense_term: Option<Expr> = None;
    let mut out: Vec<u128> = Vec::with_capacity(samples.len());
    for (k, s) in samples.iter().enumerate() {
        let same = samples[..k]
            .iter()
            .position(|t| t.sizes == s.sizes && t.relations == s.relations);
        if let Some(j) = same {
            out.push(out[j]);
            continue;
        }
        let bindings: Vec<(Symbol, i64)> = free
            .iter()
            .filter(|v| !extents.contains_key(v) && !s.sizes.contains_key(*v))
            .map(|v| (*v, 0))
            .collect();
        let ctx = CostCtx::new(&s.sizes, &s.relations).with_bindings(&bindings);
        let cost = exact
            .then(|| cost_expr_budget(&wrapped, &ctx, EXTRACTION_BUDGET).ok())
            .flatten()
            .or_else(|| {
                let d = dense_term.get_or_insert_with(|| dense(&wrapped));
                cost_expr_budget(d, &ctx, EXTRACTION_BUDGET).ok()
            });
        out.push(cost.unwrap_or(UNUSABLE));
    }
    out
}

/// Wrap the free index variables with known extents in `gen`s; others (not
/// sizes) are bound to 0.
fn close(e: &Expr, extents: &HashMap<Symbol, Affine>, s: &Sample) -> (Expr, Vec<(Symbol, i64)>) {
    let mut wrapped = e.clone();
    let mut bindings = vec![];
    for v in free_names(e) {
        match extents.get(&v) {
            Some(d) => wrapped = build::gen(v, d.clone(), wrapped),
            None if !s.sizes.contains_key(&v) => bindings.push((v, 0)),
            None => {}
        }
    }
    (wrapped, bindings)
}

/// How many loop values the guard's costing of one program at one sample
/// may enumerate: at sizes near 10^6 a nest that cannot be counted in
/// closed form fails fast (as [`UNUSABLE`]) instead of enumerating for
/// seconds.
pub const GUARD_BUDGET: u64 = 2_000_000;

/// Exact cost of an open expression at a sample: free index variables with a
/// known extent are summed over it (wrapped in `gen`s); [`UNUSABLE`] when
/// counting would take more than [`GUARD_BUDGET`].
pub fn cost_at(e: &Expr, extents: &HashMap<Symbol, Affine>, s: &Sample) -> u128 {
    let (wrapped, bindings) = close(e, extents, s);
    let ctx = CostCtx::new(&s.sizes, &s.relations).with_bindings(&bindings);
    cost_expr_budget(&wrapped, &ctx, GUARD_BUDGET).unwrap_or(UNUSABLE)
}

/// The free index variables (with an extent) of a node's term, from its
/// children's: their union, without the variable the node binds.
fn free_of(enode: &Atl, kids: &[CostVal], extents: &HashMap<Symbol, Affine>) -> Rc<Vec<Symbol>> {
    let own: Vec<Symbol> = match enode {
        Atl::Aff(a) => a.0.names().filter(|v| extents.contains_key(v)).collect(),
        Atl::Var(_) => match &kids[0].tree.node {
            Atl::Sym(x) if extents.contains_key(x) => vec![*x],
            _ => vec![],
        },
        _ => vec![],
    };
    let bound = match enode {
        Atl::Gen([..]) | Atl::Sum(_) | Atl::Exists(_) | Atl::Let(_) => match &kids[0].tree.node {
            Atl::Sym(x) => Some(*x),
            _ => None,
        },
        _ if enode.as_reduce().is_some() => match &kids[0].tree.node {
            Atl::Sym(x) => Some(*x),
            _ => None,
        },
        _ => None,
    };
    if own.is_empty() && bound.is_none() {
        // the common case: one child's set, or none
        let mut with = kids.iter().filter(|k| !k.free.is_empty());
        match (with.next(), with.next()) {
            (None, _) => return Rc::new(vec![]),
            (Some(k), None) => return k.free.clone(),
            _ => {}
        }
    }
    let mut out: Vec<Symbol> = own;
    for k in kids {
        out.extend(k.free.iter().copied());
    }
    out.sort_unstable();
    out.dedup();
    if let Some(b) = bound {
        out.retain(|v| *v != b);
    }
    Rc::new(out)
}

/// How a node's cost follows from its children's ([`WorkCost::composed`]).
struct Composition<'k> {
    /// Operations per point of the node's free variables' ranges.
    own: u128,
    /// Children whose cost counts, each once per point of the ranges of the
    /// node's free variables (and `bound`) that are not its own.
    operands: Vec<&'k CostVal>,
    /// The index the node binds, with its range (`gen`, `sum`, reductions).
    bound: Option<(Symbol, Affine)>,
    /// A sum or reduction: the comparisons and additions of its loop, one
    /// fewer than its values (per point of the free variables' ranges).
    loop_ops: bool,
    /// A term whose cost is a count (the additions between two brackets,
    /// or the points where a bracket holds), its free variables, and the
    /// child whose cost it multiplies (none: it adds).
    count: Option<(Expr, Vec<Symbol>, Option<&'k CostVal>)>,
}

/// The predicate of a bracket's term.
fn bracket_pred(k: &CostVal) -> Option<Pred> {
    match (&k.tree.node, k.tree.kids.first()?.term()?) {
        (Atl::Iverson(_), Term::Pred(p)) => Some(p),
        _ => None,
    }
}

impl WorkCost<'_> {
    /// How the cost of `enode` follows from its children's costs, for the
    /// nodes whose cost rule allows it: a product, a call, a pair, a let,
    /// a projection, a `get`, a `gen`, an addition (plus the points where
    /// both operands' brackets hold), a one-level sum or a reduction whose
    /// body is not a bracket (plus its loop's operations), a bracket whose
    /// predicate shares no variable with its body (the points where it
    /// holds, times the body's cost). `None` for the others: their cost
    /// depends on the children's terms.
    fn composition<'k>(&self, enode: &Atl, kids: &'k [CostVal]) -> Option<Composition<'k>> {
        let is_bracket = |k: &CostVal| matches!(k.tree.node, Atl::Iverson(_));
        let plain = |own, operands| Composition {
            own,
            operands,
            bound: None,
            loop_ops: false,
            count: None,
        };
        let binder = |kids: &'k [CostVal]| match (&kids[0].tree.node, &kids[1].tree.node) {
            (Atl::Sym(i), Atl::Aff(d)) => Some((*i, d.0.clone())),
            _ => None,
        };
        let dummy = Expr::Var(Symbol::from("extraction#operand"));
        let with_free = |e: Expr| {
            let f = free_names(&e)
                .into_iter()
                .filter(|v| self.egraph.analysis.extents.contains_key(v))
                .collect::<Vec<_>>();
            (e, f)
        };
        Some(match enode {
            Atl::Num(_) | Atl::Var(_) => plain(0, vec![]),
            Atl::Mul(_) | Atl::Max(_) | Atl::Min(_) => plain(1, kids.iter().collect()),
            Atl::Call(_) | Atl::CallK(_) => plain(1, vec![&kids[1]]),
            Atl::Add(_) if !kids.iter().any(is_bracket) => plain(1, kids.iter().collect()),
            Atl::Add(_) => {
                // the addition itself counts where both brackets hold
                let side = |k: &CostVal| -> Option<Expr> {
                    Some(match bracket_pred(k) {
                        Some(p) => build::iverson(p, dummy.clone()),
                        None if is_bracket(k) => return None,
                        None => dummy.clone(),
                    })
                };
                let (small, f) = with_free(build::add(side(&kids[0])?, side(&kids[1])?));
                Composition {
                    count: Some((small, f, None)),
                    ..plain(0, kids.iter().collect())
                }
            }
            Atl::Pair(_) => plain(0, kids.iter().collect()),
            Atl::Let(_) => plain(0, vec![&kids[1], &kids[2]]),
            Atl::Fst(_) | Atl::Snd(_) | Atl::Get(_) => plain(0, vec![&kids[0]]),
            Atl::Gen(_) => Composition {
                bound: Some(binder(kids)?),
                ..plain(0, vec![&kids[2]])
            },
            Atl::Sum(_) if matches!(kids[2].tree.node, Atl::Sum(_) | Atl::Iverson(_)) => {
                return None
            }
            Atl::Sum(_) | Atl::Maximum(_) | Atl::Minimum(_) | Atl::ArgMax(_) | Atl::ArgMin(_) => {
                Composition {
                    bound: Some(binder(kids)?),
                    loop_ops: true,
                    ..plain(0, vec![&kids[2]])
                }
            }
            Atl::Iverson(_) => {
                let (p, body) = (&kids[0], &kids[1]);
                if p.free.iter().any(|v| body.free.contains(v)) {
                    return None;
                }
                let Some(Term::Pred(q)) = p.tree.term() else {
                    return None;
                };
                let (small, f) = with_free(build::add(build::iverson(q, dummy.clone()), dummy));
                Composition {
                    count: Some((small, f, Some(body))),
                    ..plain(0, vec![])
                }
            }
            _ => return None,
        })
    }

    /// The costs of `enode` at each sample from its children's costs (see
    /// [`WorkCost::composition`]), without costing its term; `None` when
    /// its rule needs the term, or a range is not a non-negative constant
    /// at a sample, or a count fails (the term is then costed as a whole).
    fn composed(&self, enode: &Atl, kids: &[CostVal], free: &[Symbol]) -> Option<Vec<u128>> {
        let c = self.composition(enode, kids)?;
        let extents = &self.egraph.analysis.extents;
        let n = self.samples.len();
        let mut out = Vec::with_capacity(n);
        let mut all: Vec<Symbol> = free.to_vec();
        if let Some((i, _)) = &c.bound {
            all.push(*i);
        }
        for (k, s) in self.samples.iter().enumerate() {
            let size = |a: &Affine| -> Option<u128> {
                u128::try_from(a.eval_with(|x| s.sizes.get(&x).copied()).ok()?).ok()
            };
            let ext = |v: &Symbol| size(extents.get(v)?);
            let points = |vars: &mut dyn Iterator<Item = &Symbol>| -> Option<u128> {
                let mut acc = 1u128;
                for v in vars {
                    acc = acc.checked_mul(ext(v)?)?;
                }
                Some(acc)
            };
            let cost_of = |c: &CostVal| c.key.get(c.key.len().checked_sub(n)? + k).copied();
            let outer = points(&mut free.iter())?;
            let mut total = outer.checked_mul(c.own)?;
            if let Some((i, d)) = &c.bound {
                let d = size(d)?;
                if ext(i)? != d {
                    return None;
                }
                if c.loop_ops {
                    total = total.checked_add(outer.checked_mul(d.saturating_sub(1))?)?;
                }
            }
            for o in &c.operands {
                let times = points(&mut all.iter().filter(|v| !o.free.contains(v)))?;
                total = total.checked_add(cost_of(o)?.checked_mul(times)?)?;
            }
            if let Some((term, vars, factor)) = &c.count {
                let by = match factor {
                    Some(f) => cost_of(f)?,
                    None => 1,
                };
                if by > 0 {
                    let (wrapped, bindings) = close(term, extents, s);
                    let ctx = CostCtx::new(&s.sizes, &s.relations).with_bindings(&bindings);
                    let holds = cost_expr_budget(&wrapped, &ctx, EXTRACTION_BUDGET).ok()?;
                    // the factor is summed over its own variables already
                    let f_free: &[Symbol] = factor.map_or(&[], |f| f.free.as_slice());
                    let times = points(
                        &mut all
                            .iter()
                            .filter(|v| !vars.contains(v) && !f_free.contains(v)),
                    )?;
                    total = total.checked_add(holds.checked_mul(times)?.checked_mul(by)?)?;
                }
            }
            out.push(total);
        }
        out.iter().all(|c| *c < UNUSABLE).then_some(out)
    }
}

impl CostFunction<Atl> for WorkCost<'_> {
    type Cost = CostVal;

    fn cost<C>(&mut self, enode: &Atl, mut costs: C) -> CostVal
    where
        C: FnMut(Id) -> CostVal,
    {
        let kids: Vec<CostVal> = enode.children().iter().map(|c| costs(*c)).collect();
        let size = enode.weight()
            + shape_penalty(enode, &kids)
            + kids.iter().map(|c| c.size).sum::<usize>();
        let tree = Rc::new(PTree::new(
            enode,
            kids.iter().map(|k| k.tree.clone()).collect(),
        ));
        let free = free_of(enode, &kids, &self.egraph.analysis.extents);
        let key_len = self.key_len();
        let unusable = |tree, free| CostVal {
            key: vec![UNUSABLE; key_len],
            size,
            tree,
            free,
        };
        // Terms are trees: in an e-graph with sharing their size can grow
        // exponentially with depth. Programs share through `let`, so a tree
        // this large is never the cheap choice; do not build it.
        if size > self.max_term_size
            || enode.is_extension()
            || kids.iter().any(|c| c.key.first() == Some(&UNUSABLE))
        {
            return unusable(tree, free);
        }
        if !enode.is_expression() {
            // (costs compare within a class, of one sort: names, indices,
            // predicates and functions need no key)
            return CostVal {
                key: vec![],
                size,
                tree,
                free,
            };
        }
        if let Some(costs) = self.composed(enode, &kids, &free) {
            let key = cost_key(&costs, self.samples);
            return CostVal {
                key,
                size,
                tree,
                free,
            };
        }
        let key = match self.memo.get(&tree.hash) {
            Some(k) => k.clone(),
            None => {
                let k = match tree.term() {
                    Some(Term::Expr(e)) => {
                        let exact = self.exact_left.is_none_or(|n| n > 0);
                        if let Some(n) = &mut self.exact_left {
                            *n = n.saturating_sub(1);
                        }
                        let costs =
                            estimate_all(&e, &self.egraph.analysis.extents, self.samples, exact);
                        cost_key(&costs, self.samples)
                    }
                    _ => vec![UNUSABLE; key_len],
                };
                self.memo.insert(tree.hash, k.clone());
                k
            }
        };
        CostVal {
            key,
            size,
            tree,
            free,
        }
    }
}

/// Most node evaluations one extraction may make.
const MAX_EVALUATIONS: usize = 2_000_000;

/// The best term of `root` by `cost`: a worklist from the leaves up, where a
/// class is costed again only when one of its children improved. (egg's
/// `Extractor` sweeps every class until nothing changes, which takes as many
/// sweeps as the e-graph is deep when ids run against the nesting, as they
/// do for terms made top-down by rewriting: minutes on a 3000-deep chain.)
pub fn extract_best(egraph: &AtlGraph, cost: WorkCost, root: Id) -> Option<CostVal> {
    extract_all(egraph, cost).remove(&egraph.find(root))
}

/// The best term of every class (see [`extract_best`]).
pub fn extract_all(egraph: &AtlGraph, mut cost: WorkCost) -> HashMap<Id, CostVal> {
    use std::collections::{HashSet, VecDeque};
    let mut best: HashMap<Id, CostVal> = HashMap::new();
    let mut queue: VecDeque<Id> = VecDeque::new();
    let mut queued: HashSet<Id> = HashSet::new();
    for class in egraph.classes() {
        // a function leaf is an operator, not a term: costed up front, it
        // queues no calls (their arguments do)
        if let Some(f @ Atl::Fun(_)) = class.nodes.first() {
            best.insert(class.id, cost.cost(f, |_| unreachable!("a leaf")));
        } else if class.nodes.iter().any(|n| n.is_leaf()) && queued.insert(class.id) {
            queue.push_back(class.id);
        }
    }
    let mut evaluations = 0usize;
    let mut steps = 0usize;
    while let Some(c) = queue.pop_front() {
        steps += 1;
        if steps.is_multiple_of(64)
            && cost
                .deadline
                .is_some_and(|t| crate::limits::CpuTime::now() > t)
        {
            break;
        }
        queued.remove(&c);
        let class = &egraph[c];
        let mut cand: Option<CostVal> = None;
        for n in &class.nodes {
            if !n
                .children()
                .iter()
                .all(|k| best.contains_key(&egraph.find(*k)))
            {
                continue;
            }
            evaluations += 1;
            let v = cost.cost(n, |k| best[&egraph.find(k)].clone());
            if cand.as_ref().is_none_or(|b| v < *b) {
                cand = Some(v);
            }
        }
        let Some(v) = cand else { continue };
        if best.get(&c).is_none_or(|old| v < *old) {
            best.insert(c, v);
            if evaluations < MAX_EVALUATIONS {
                for p in class.parents() {
                    let p = egraph.find(p);
                    if queued.insert(p) {
                        queue.push_back(p);
                    }
                }
            }
        }
    }
    best
}
