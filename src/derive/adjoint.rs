//! The adjoint (reverse-mode) derivative by rewriting, purely functional:
//! no `+=`, no tape (paper section 5.3, Figures "Grammar and Semantics for
//! the extension of the language with inner-products" and "Adjoint
//! Derivative of Tensors"; the rules are `rules/adjoint.rules`).
//!
//! Phases:
//! 1. **normalize** ([`crate::terms::normalize`]): A-normal form and let-lifting
//!    give the paper's tensor SSA, `let X1 = e1 in ... let Xk = ek in r`;
//! 2. **differentiate** (here): with `w` the cotangent of the output, the
//!    e-graph gets the inner product `(dot w (D body))`, and for every real
//!    entry `P` of every `--wrt` input `x` the coefficient
//!    `(coeff P (dot w (D body)))`, assembled into a value of `x`'s type
//!    (a `gen` per dimension, a `pair` per pair). Saturation with
//!    `rules/adjoint.rules`, `rules/forward.rules` and the black boxes'
//!    derivative table unpacks the lets (adj-unpack-let), swaps differential bindings below
//!    ordinary ones (adj-swap-let), turns each differential binding around
//!    (adj-rev-let: its cotangent is the gathered coefficients of its
//!    tangent, the paper's add-inner-prods), and pushes inner products
//!    through every form; index elimination keeps the sparsity the paper's
//!    predicates carry. The cheapest term free of extension forms is
//!    extracted by the work cost ([`super::phase`]);
//! 3. **simplify**: the optimizer of [`crate::egraph`] on the result.
//!
//! The environment sigma (variable -> tangent) covers the `--wrt` inputs
//! and every binding; other real inputs are constants (tangent zero).

use super::phase::{run_and_extract, run_with, SMALL, WHOLE};
use crate::egraph::analysis::{new_graph, AtlAnalysis, AtlGraph};
use crate::egraph::extract::Sample;
use crate::egraph::language::{to_rec, Atl};
use crate::egraph::rules::derivatives::coefficients;
use crate::egraph::rules::rule_set;
use crate::egraph::runner::{extraction_samples, Options, PhaseStats};
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{Expr, ParamKind, Program, Type};
use crate::front::names::Fresh;
use crate::front::subst::free_names;
use crate::front::types::binding_env;
use crate::symbol::Symbol;
use crate::terms::extents::collect_extents;
use crate::terms::letpasses::{add_terms, index};
use crate::terms::normalize::{anf, dead_code, lift, unflatten};
use egg::{Id, Rewrite};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Instant;

/// The rules of the adjoint phase: the adjoint rules, the forward rules
/// that push `D` to the variables (not d-let: adj-unpack-let takes the
/// lets), the black-box derivatives, and the identities that clean up
/// zeros, brackets and loops (index elimination among them).
pub fn adjoint_rules() -> Vec<Rewrite<Atl, AtlAnalysis>> {
    rule_set(&["adjoint", "adjoint-cleanup"])
}

/// The body of the vector-Jacobian product: with `seed` (of the output's
/// type, `seed_type`) the cotangent of the output, the cotangents of the
/// `wrt` inputs (one as itself, several as right-nested pairs).
///
/// Binding by binding, in the paper's order: the tensor SSA
/// `let X1 = e1 in ... let Xk = ek in r` is reversed one differential
/// binding at a time. The cotangent of `Xj` is the gathered coefficient of
/// `dXj` in the inner products `<cXl | D[el]>` of the later bindings that
/// use `Xj` (and `<seed | D[r]>`); each is computed by the rules of
/// `rules/adjoint.rules` in its own small e-graph, in which only `Xj` has a
/// tangent. The result is
/// `let X1 .. Xk (primal) in let cXk = .. in .. let cX1 = .. in outputs`.
/// Each e-graph holds one binding's definition and the few inner products
/// on it, so the phase is linear in the number of bindings.
pub fn vjp_body(
    prog: &Program,
    wrt: &[Symbol],
    seed: Expr,
    seed_type: &Type,
    opts: &Options,
) -> Result<(Expr, PhaseStats)> {
    vjp_body_by(prog, wrt, seed, seed_type, opts, false)
}

/// The body of the vector-Jacobian product built by the rules applied
/// directly, binding by binding, without e-graphs ([`super::direct`]): the
/// derivative whose cost the paper bounds, which the optimized one must
/// never exceed.
pub fn direct_vjp_body(
    prog: &Program,
    wrt: &[Symbol],
    seed: Expr,
    seed_type: &Type,
    opts: &Options,
) -> Result<Expr> {
    vjp_body_by(prog, wrt, seed, seed_type, opts, true).map(|r| r.0)
}

fn vjp_body_by(
    prog: &Program,
    wrt: &[Symbol],
    seed: Expr,
    seed_type: &Type,
    opts: &Options,
    direct_only: bool,
) -> Result<(Expr, PhaseStats)> {
    let started = Instant::now();
    let mut fresh = crate::front::subst::fresh_above(&prog.body);
    let flat = lift(&anf(&prog.body, &mut fresh), &mut fresh);
    let (binds, result) = dead_code(flat);
    let small = binds.len() <= WHOLE_PROGRAM_BINDINGS
        && crate::terms::size::term_size(&unflatten((binds.clone(), result.clone())))
            <= WHOLE_PROGRAM_NODES;
    if small && !direct_only {
        // a small program: one e-graph over every binding first, which
        // gathers and cancels terms across bindings; binding by binding
        // when it stops at a limit
        if let Ok((egraph, root)) = adjoint_egraph(prog, wrt, seed.clone(), true) {
            let (mut out, stats, _) = run_and_extract(
                prog,
                egraph,
                &[root],
                &adjoint_rules(),
                WHOLE,
                opts,
                "differentiate (adjoint)",
            )?;
            if let Some(Some(e)) = out.pop() {
                return Ok((e, stats));
            }
        }
    }
    let mut types = binding_env(prog, &binds)?;
    if let Expr::Var(s) = &seed {
        types.insert(*s, seed_type.clone());
    }
    // activity: a binding is active when it depends on a wrt input
    let mut active: HashSet<Symbol> = wrt.iter().copied().collect();
    for (x, e) in &binds {
        if free_names(e).iter().any(|n| active.contains(n)) {
            active.insert(*x);
        }
    }
    let rules = adjoint_rules();
    let samples = extraction_samples(prog, None);
    // the inner products: (cotangent, expression, free names of expression)
    let mut forms: Vec<Form> = vec![];
    if free_names(&result).iter().any(|n| active.contains(n)) {
        push_forms(&mut forms, seed, &result);
    }
    let mut stats = PhaseStats {
        phase: "differentiate (adjoint)".to_string(),
        iterations: 0,
        nodes: 0,
        classes: 0,
        stop_reason: "saturated".to_string(),
        seconds: 0.0,
        extract_seconds: 0.0,
    };
    let ctx = Ctx {
        types: &types,
        rules: &rules,
        samples: &samples,
        opts,
        direct_only,
    };
    // the forms that mention each name, in order (scanning every form for
    // each binding made a chain of `k` bindings cost `O(k²)`)
    let mut mentions = Mentions::default();
    let mut cotangents: Vec<(Symbol, Expr)> = vec![];
    for (x, e) in binds.iter().rev() {
        if !active.contains(x) {
            continue;
        }
        let using = mentions.using(&forms, *x);
        if using.is_empty() {
            continue;
        }
        let c = ctx.coefficient(*x, &using, &mut fresh, &mut stats)?;
        let cx = fresh.name(&format!("c{x}"));
        cotangents.push((cx, c));
        push_forms(&mut forms, Expr::Var(cx), e);
    }
    let mut outputs = vec![];
    for x in wrt {
        let using = mentions.using(&forms, *x);
        outputs.push(ctx.coefficient(*x, &using, &mut fresh, &mut stats)?);
    }
    let out = outputs
        .into_iter()
        .rev()
        .reduce(|acc, o| crate::front::ast::build::pair(o, acc))
        .expect("at least one input");
    let mut all = binds;
    all.extend(cotangents);
    stats.seconds = started.elapsed().as_secs_f64();
    Ok((unflatten((all, out)), stats))
}

/// The stop reason of a differentiation phase in which some binding's
/// e-graph stopped at a limit and its derivative was built directly (one
/// wording, whatever the binding or the command).
pub const DIRECT_NOTE: &str =
    "a binding's e-graph stopped at a limit; its derivative was built directly";

/// Programs of at most this many bindings (and nodes) are first
/// differentiated in one e-graph over all of them.
const WHOLE_PROGRAM_BINDINGS: usize = 32;
const WHOLE_PROGRAM_NODES: usize = 400;

/// An inner product `<c | D[e]>`: its cotangent, its expression and the
/// expression's free names.
type Form = (Expr, Expr, BTreeSet<Symbol>);

/// For each name, the forms (by position) whose expression mentions it,
/// kept up to date as forms are added.
#[derive(Default)]
struct Mentions {
    by_name: HashMap<Symbol, Vec<usize>>,
    indexed: usize,
}

impl Mentions {
    /// The forms that mention `x`, in the order they were added.
    fn using<'f>(&mut self, forms: &'f [Form], x: Symbol) -> Vec<&'f Form> {
        for (k, f) in forms.iter().enumerate().skip(self.indexed) {
            for n in &f.2 {
                self.by_name.entry(*n).or_default().push(k);
            }
        }
        self.indexed = forms.len();
        self.by_name
            .get(&x)
            .map(|ks| ks.iter().map(|&k| &forms[k]).collect())
            .unwrap_or_default()
    }
}

/// Add the inner product `<c | D[e]>` to `forms`; an `e` that adds many
/// terms, under `gen`s and `sum`s or not, as one inner product per term
/// (`<c | D[⊞ a + b]>` is `<c | D[⊞ a]> + <c | D[⊞ b]>`, and the same for
/// `Σ`), so that no e-graph holds them all.
fn push_forms(forms: &mut Vec<Form>, c: Expr, e: &Expr) {
    let mut loops: Vec<&Expr> = vec![];
    let mut body = e;
    while let Expr::Gen(_, _, b) | Expr::Sum(_, _, b) = body {
        loops.push(body);
        body = b;
    }
    let mut terms = vec![];
    add_terms(body, &mut terms);
    if terms.len() <= GROUP {
        forms.push((c, e.clone(), free_names(e)));
        return;
    }
    for t in terms {
        if matches!(t, Expr::Const(_)) {
            continue;
        }
        let term = loops.iter().rev().fold(t.clone(), |acc, l| match l {
            Expr::Gen(i, d, _) => crate::front::ast::build::gen(*i, d.clone(), acc),
            Expr::Sum(i, d, _) => crate::front::ast::build::sum(*i, d.clone(), acc),
            _ => unreachable!("only loops were collected"),
        });
        let names = free_names(&term);
        forms.push((c.clone(), term, names));
    }
}

/// What every binding's e-graph shares.
struct Ctx<'a> {
    types: &'a HashMap<Symbol, Type>,
    rules: &'a [Rewrite<Atl, AtlAnalysis>],
    samples: &'a [Sample],
    opts: &'a Options,
    /// Every coefficient built directly (no e-graph).
    direct_only: bool,
}

/// At most this many inner products share one e-graph (the coefficient is
/// linear: larger groups are split and their coefficients added).
const GROUP: usize = 8;

impl Ctx<'_> {
    /// The coefficient built without an e-graph (always finishes).
    fn direct(&self, x: Symbol, forms: &[&Form], fresh: &mut Fresh) -> Expr {
        let pairs: Vec<(&Expr, &Expr)> = forms.iter().map(|f| (&f.0, &f.1)).collect();
        super::direct::coefficient(x, &self.types[&x], &pairs, fresh)
    }

    /// The coefficients of the tangent of `x` in the sum of the inner
    /// products `<c | D[e]>` of `forms` (zero when there are none), as a
    /// value of `x`'s type.
    fn coefficient(
        &self,
        x: Symbol,
        forms: &[&Form],
        fresh: &mut Fresh,
        stats: &mut PhaseStats,
    ) -> Result<Expr> {
        if forms.len() > GROUP {
            let parts = forms
                .chunks(GROUP)
                .map(|g| self.coefficient(x, g, fresh, stats))
                .collect::<Result<Vec<_>>>()?;
            return Ok(add_values(parts, &self.types[&x], fresh));
        }
        self.opts.check_time()?;
        if self.direct_only {
            return Ok(self.direct(x, forms, fresh));
        }
        if forms.iter().all(|f| pointwise(&f.1)) {
            // no loop and no bracket: the rules could only multiply out the
            // chain rule, which the direct pass does in one step (a sum of
            // thousands of scalar terms made thousands of e-graphs)
            return Ok(drop_unit_factors(&self.direct(x, forms, fresh)));
        }
        // only what the forms mention: copying the whole program's types
        // and extents into every binding's e-graph made the phase quadratic
        // in the number of bindings
        let mut extents = HashMap::new();
        let mut names = BTreeSet::from([x]);
        for (c, e, free) in forms {
            collect_extents(c, &mut extents);
            collect_extents(e, &mut extents);
            names.extend(free_names(c));
            names.extend(free);
        }
        let mut analysis = crate::egraph::context::analysis(extents);
        let dx = fresh.name(&format!("t{x}"));
        let t = self.types[&x].clone();
        analysis.add_tangent(x, dx);
        analysis.diff.types.insert(dx, t.clone());
        for name in names {
            let Some(ty) = self.types.get(&name) else {
                continue;
            };
            analysis.diff.types.insert(name, ty.clone());
            if name != x {
                analysis.diff.constants.insert(name, ty.clone());
            }
        }
        analysis.fresh = fresh.clone();
        let mut egraph = new_graph(analysis);
        let mut form: Option<Id> = None;
        for (c, e, _) in forms {
            let w = egraph.add_expr(&to_rec(c));
            let e = egraph.add_expr(&to_rec(e));
            let de = egraph.add(Atl::D(e));
            let dot = egraph.add(Atl::Dot([w, de]));
            form = Some(match form {
                None => dot,
                Some(f) => egraph.add(Atl::Add([f, dot])),
            });
        }
        let form = match form {
            Some(f) => f,
            None => egraph.add_expr(&to_rec(&crate::front::ast::build::num(0.0))),
        };
        let name = egraph.add(Atl::Sym(dx));
        let root = egraph.add(Atl::Var(name));
        let root = coefficients(&mut egraph, &t, &format!("out {x}"), root, form);
        let (mut out, st, supply) = run_with(
            egraph,
            &[root],
            self.rules,
            self.samples,
            SMALL,
            self.opts,
            "differentiate (binding)",
        )?;
        let Some(Some(out)) = out.pop() else {
            // a limit stopped the rules: the adjoint built directly
            stats.stop_reason = DIRECT_NOTE.to_string();
            return Ok(self.direct(x, forms, fresh));
        };
        stats.iterations += st.iterations;
        stats.nodes = stats.nodes.max(st.nodes);
        stats.classes = stats.classes.max(st.classes);
        stats.extract_seconds += st.extract_seconds;
        fresh.raise_to(supply.last());
        Ok(out)
    }
}
/// Whether `e` is arithmetic on variables, accesses and pairs: no loop,
/// bracket or binding, so its adjoint needs no index elimination.
fn pointwise(e: &Expr) -> bool {
    match e {
        Expr::Gen(..) | Expr::Sum(..) | Expr::Reduce(..) | Expr::Iverson(..) | Expr::Let(..) => {
            false
        }
        e => e.children().all(pointwise),
    }
}

/// `e` without the factors 1 of its products (the seed of a gradient, which
/// the direct pass multiplies in as it is).
fn drop_unit_factors(e: &Expr) -> Expr {
    let one = |e: &Expr| matches!(e, Expr::Const(c) if c.0 == 1.0);
    match e.map_children(drop_unit_factors) {
        Expr::Mul(a, b) if one(&a) => *b,
        Expr::Mul(a, b) if one(&b) => *a,
        e => e,
    }
}

/// The differentiation phase's starting e-graph and its root: the
/// coefficients of the `wrt` inputs' tangents in `(dot seed (D body))`,
/// with sigma, the types and the extents in the analysis. With
/// `drop_dead`, bindings nothing uses are removed first (tests keep them, to
/// see adj-rev-let-dead-code at work).
pub fn adjoint_egraph(
    prog: &Program,
    wrt: &[Symbol],
    seed: Expr,
    drop_dead: bool,
) -> Result<(AtlGraph, Id)> {
    let mut fresh = crate::front::subst::fresh_above(&prog.body);
    // dead bindings go first: their adjoint is zero (paper section 2.2), and
    // the e-graph need not prove it for every order of their bindings
    let flat = lift(&anf(&prog.body, &mut fresh), &mut fresh);
    let (binds, result) = if drop_dead { dead_code(flat) } else { flat };
    let types = binding_env(prog, &binds)?;
    let mut extents = HashMap::new();
    for (_, e) in &binds {
        collect_extents(e, &mut extents);
    }
    collect_extents(&result, &mut extents);
    let active: Vec<Symbol> = wrt
        .iter()
        .chain(binds.iter().map(|(x, _)| x))
        .copied()
        .collect();
    let mut analysis = crate::egraph::context::analysis(extents);
    for x in active {
        let dx = fresh.name(&format!("d{}", crate::front::names::base(x.as_str())));
        analysis.add_tangent(x, dx);
        let t = types[&x].clone();
        analysis.diff.types.insert(dx, t.clone());
        analysis.diff.types.insert(x, t);
    }
    for p in &prog.params {
        if let ParamKind::Real(t) = &p.kind {
            analysis.diff.types.insert(p.name, t.clone());
            if !analysis.diff.tangents.contains_key(&p.name) {
                analysis.diff.constants.insert(p.name, t.clone());
            }
        }
    }
    analysis.fresh = fresh.clone();
    let mut egraph = new_graph(analysis);
    let body = egraph.add_expr(&to_rec(&unflatten((binds, result))));
    let seed = egraph.add_expr(&to_rec(&seed));
    let dbody = egraph.add(Atl::D(body));
    let form = egraph.add(Atl::Dot([seed, dbody]));
    let outputs: Vec<Id> = wrt
        .iter()
        .map(|w| {
            let dw = egraph.analysis.diff.tangents[w];
            let t = egraph.analysis.diff.types[w].clone();
            let name = egraph.add(Atl::Sym(dw));
            let root = egraph.add(Atl::Var(name));
            coefficients(&mut egraph, &t, &format!("out {w}"), root, form)
        })
        .collect();
    let root = outputs
        .into_iter()
        .rev()
        .reduce(|acc, o| egraph.add(Atl::Pair([o, acc])))
        .expect("at least one input");
    Ok((egraph, root))
}

/// The sum of `parts`, values of type `t` (pointwise on tensors and
/// pairs), fused: a `gen` operand is indexed by substitution, never as
/// `(get (gen ..) g)` (which the work cost charges as the whole `gen` per
/// element), and the terms of each later part are added to the first one
/// at a time, so a bracketed term keeps its bracket and its addition is
/// charged only where the bracket holds (docs/language.md, "Cost"). All
/// parts at once: adding them two by two substituted into the growing sum
/// at every step, quadratic in the number of parts.
fn add_values(parts: Vec<Expr>, t: &Type, fresh: &mut Fresh) -> Expr {
    use crate::front::ast::build;
    match t {
        Type::Real => {
            let mut parts = parts;
            let rest = parts.split_off(1);
            let first = parts.pop().expect("a part");
            let mut terms = vec![];
            for b in &rest {
                add_terms(b, &mut terms);
            }
            terms.into_iter().cloned().fold(first, build::add)
        }
        Type::Pair(ta, tb) => {
            let (fsts, snds): (Vec<Expr>, Vec<Expr>) = parts
                .into_iter()
                .map(|p| (project(p.clone(), true), project(p, false)))
                .unzip();
            build::pair(add_values(fsts, ta, fresh), add_values(snds, tb, fresh))
        }
        Type::Tensor(n, te) => {
            let g = fresh.name("g");
            let i = Affine::var(g);
            let rows = parts.into_iter().map(|p| index(p, &i, fresh)).collect();
            build::gen(g, n.clone(), add_values(rows, te, fresh))
        }
    }
}

/// The first (`first`) or second part of a pair `e`, a `pair` node read
/// directly.
fn project(e: Expr, first: bool) -> Expr {
    use crate::front::ast::build;
    match e {
        Expr::Pair(a, b) => {
            if first {
                *a
            } else {
                *b
            }
        }
        e if first => build::fst(e),
        e => build::snd(e),
    }
}
