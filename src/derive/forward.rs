//! The forward (total) derivative, by rewriting: the program in A-normal
//! form goes into an e-graph as `(D body)`, the rules of
//! `rules/forward.rules` (Figure "Total (Forward) Derivative") and the
//! black boxes' derivative table `rules/derivatives.rules` push `D` to the
//! leaves, and a `D`-free program is extracted by the work cost.
//!
//! The environment sigma of the figure lives in the analysis: the inputs
//! being differentiated map to their tangent parameters; every `let` met by
//! `d-let` adds `x -> dx`; other real inputs differentiate to zeros.

use super::forward_direct::ForwardDirect;
use super::phase::{run_and_extract, WHOLE};
use crate::egraph::analysis::{new_graph, AtlAnalysis};
use crate::egraph::language::{to_rec, Atl};
use crate::egraph::rules::rule_set;
use crate::egraph::runner::{Options, PhaseStats};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{build, Expr, Param, ParamKind, Pred, Program};
use crate::front::names::Fresh;
use crate::front::subst::free_names;
use crate::front::types::binding_env;
use crate::symbol::Symbol;
use crate::terms::extents::collect_extents;
use crate::terms::normalize::{anf, lift};
use std::collections::HashMap;

/// The rules of the differentiation phase: the forward rules, the black-box
/// derivatives, and the zero/one identities that clean up zero tangents.
fn differentiation_rules() -> Vec<egg::Rewrite<Atl, AtlAnalysis>> {
    rule_set(&["forward", "forward-cleanup"])
}

/// `D[body]` for the inputs `wrt` with tangent names `tangents`, as a
/// `D`-free core expression.
///
/// The body is first flattened (A-normal form, let-lifting); each binding's
/// definition and the result then go into an e-graph as separate roots
/// `(D def)` (a group of [`GROUP`] roots per e-graph), so the rules push `D`
/// through one definition at a time and the number of iterations is the
/// depth of a definition, not of the program. A definition the e-graph
/// does not finish within its limits, or one too large or deep for
/// rewriting ([`DIRECT_NODES`], [`DIRECT_DEPTH`]), is differentiated by the
/// direct pass ([`super::forward_direct`]): every program gets its
/// derivative. The `let` rule of the figure is applied here, in the
/// assembly: every binding `x = e` becomes `x = e; dx = D[e]`.
pub fn differentiate(
    prog: &Program,
    body: &Expr,
    tangents: &[(Symbol, Symbol)],
    opts: &Options,
) -> Result<(Expr, PhaseStats)> {
    let started = std::time::Instant::now();
    let mut fresh = crate::front::subst::fresh_above(body);
    let (binds, result) = lift(&anf(body, &mut fresh), &mut fresh);
    let mut sigma: HashMap<Symbol, Symbol> = tangents.iter().copied().collect();
    let dnames: Vec<Symbol> = binds
        .iter()
        .map(|(x, _)| {
            let dx = fresh.name(&format!("d{}", crate::front::names::base(x.as_str())));
            sigma.insert(*x, dx);
            dx
        })
        .collect();
    let defs: Vec<&Expr> = binds
        .iter()
        .map(|(_, e)| e)
        .chain(std::iter::once(&result))
        .collect();
    let mut derived: Vec<Option<Expr>> = vec![None; defs.len()];
    let by_rules: Vec<usize> = (0..defs.len())
        .filter(|k| {
            crate::terms::size::term_size(defs[*k]) <= DIRECT_NODES
                && depth(defs[*k]) <= DIRECT_DEPTH
        })
        .collect();
    let mut stats = PhaseStats {
        phase: "differentiate (forward)".to_string(),
        iterations: 0,
        nodes: 0,
        classes: 0,
        stop_reason: "saturated".to_string(),
        seconds: 0.0,
        extract_seconds: 0.0,
    };
    for group in by_rules.chunks(GROUP) {
        let (egraph, roots) = forward_egraph(prog, &defs, group, &sigma, &fresh);
        let (out, st, supply) = run_and_extract(
            prog,
            egraph,
            &roots,
            &differentiation_rules(),
            WHOLE,
            opts,
            "differentiate (forward)",
        )?;
        fresh.raise_to(supply.last());
        for (k, e) in group.iter().zip(out) {
            derived[*k] = e;
        }
        stats.iterations += st.iterations;
        stats.nodes = stats.nodes.max(st.nodes);
        stats.classes = stats.classes.max(st.classes);
        stats.extract_seconds += st.extract_seconds;
        if stats.stop_reason == "saturated" {
            stats.stop_reason = st.stop_reason;
        }
    }
    if derived.iter().any(Option::is_none) {
        // what the e-graphs did not finish: the direct pass
        let types = binding_env(prog, &binds)?;
        let mut direct = ForwardDirect {
            tangents: sigma.clone(),
            types,
            fresh: &mut fresh,
        };
        for (k, d) in derived.iter_mut().enumerate() {
            if d.is_none() {
                opts.check_time()?;
                *d = Some(direct.derivative(defs[k])?);
            }
        }
        stats.stop_reason = super::adjoint::DIRECT_NOTE.to_string();
    }
    let mut derived: Vec<Expr> = derived.into_iter().flatten().collect();
    let dresult = derived.pop().expect("the result's derivative");
    let mut out = dresult;
    for (((x, e), dx), de) in binds.into_iter().zip(dnames).zip(derived).rev() {
        out = build::let_(x, e, build::let_(dx, de, out));
    }
    stats.seconds = started.elapsed().as_secs_f64();
    Ok((out, stats))
}

/// At most this many definitions share one forward e-graph.
const GROUP: usize = 64;

/// Definitions larger than this (in nodes), or nested deeper than
/// [`DIRECT_DEPTH`], are differentiated directly: rewriting pushes `D` one
/// level per round over the whole e-graph, quadratic in the depth.
const DIRECT_NODES: usize = 2_000;
const DIRECT_DEPTH: usize = 100;

/// The nesting depth of an expression.
fn depth(e: &Expr) -> usize {
    1 + e.children().map(depth).max().unwrap_or(0)
}

/// The e-graph of the definitions `defs[k]` for `k` in `group`, each as a
/// root `(D def)`, with sigma, the constants and the extents in the
/// analysis.
fn forward_egraph(
    prog: &Program,
    defs: &[&Expr],
    group: &[usize],
    sigma: &HashMap<Symbol, Symbol>,
    fresh: &Fresh,
) -> (crate::egraph::analysis::AtlGraph, Vec<egg::Id>) {
    let mut extents = HashMap::new();
    let mut used = std::collections::BTreeSet::new();
    for k in group {
        collect_extents(defs[*k], &mut extents);
        used.extend(free_names(defs[*k]));
    }
    let mut analysis = AtlAnalysis {
        extents,
        fresh: fresh.clone(),
        ..Default::default()
    };
    // only the names the group mentions: every name the analysis knows
    // widens every e-class's set of free names, and a long program has
    // thousands of tangents
    for p in &prog.params {
        if let ParamKind::Real(t) = &p.kind {
            if !sigma.contains_key(&p.name) && used.contains(&p.name) {
                analysis.diff.constants.insert(p.name, t.clone());
            }
        }
    }
    for x in &used {
        if let Some(dx) = sigma.get(x) {
            analysis.add_tangent(*x, *dx);
        }
    }
    let mut egraph = new_graph(analysis);
    let roots = group
        .iter()
        .map(|k| {
            let id = egraph.add_expr(&to_rec(defs[*k]));
            egraph.add(Atl::D(id))
        })
        .collect();
    (egraph, roots)
}

/// Every name a program uses (its own name, parameters, sizes, relations,
/// black boxes, binders and variables), with binders as printed programs
/// show them ([`crate::front::readable::readable`]).
pub fn names_in(prog: &Program) -> std::collections::BTreeSet<String> {
    type Names = std::collections::BTreeSet<String>;
    fn aff(a: &Affine, out: &mut Names) {
        out.extend(a.names().map(|n| n.to_string()));
    }
    fn pred(p: &Pred, out: &mut Names) {
        match p {
            Pred::True | Pred::False => {}
            Pred::Cmp(_, a, b) => {
                aff(a, out);
                aff(b, out);
            }
            Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| pred(q, out)),
            Pred::Exists(i, d, q) => {
                out.insert(i.to_string());
                aff(d, out);
                pred(q, out);
            }
            Pred::Rel(r, idx) => {
                out.insert(r.to_string());
                idx.iter().for_each(|a| aff(a, out));
            }
        }
    }
    fn expr(e: &Expr, out: &mut Names) {
        match e {
            Expr::Var(x) => {
                out.insert(x.to_string());
            }
            Expr::Const(_) => {}
            Expr::IndexReal(a) => aff(a, out),
            Expr::MaxMin(m, a, b) => {
                // its derivative calls `step`
                out.insert(m.name().to_string());
                out.insert("step".to_string());
                expr(a, out);
                expr(b, out);
            }
            Expr::Add(a, b) | Expr::Mul(a, b) | Expr::Pair(a, b) => {
                expr(a, out);
                expr(b, out);
            }
            Expr::Let(x, a, b) => {
                out.insert(x.to_string());
                expr(a, out);
                expr(b, out);
            }
            Expr::Call(f, a) => {
                out.insert(f.name().to_string());
                expr(a, out);
            }
            Expr::Fst(a) | Expr::Snd(a) => expr(a, out),
            Expr::Get(a, i) => {
                expr(a, out);
                aff(i, out);
            }
            Expr::Iverson(p, a) => {
                pred(p, out);
                expr(a, out);
            }
            Expr::Gen(i, d, b) | Expr::Sum(i, d, b) => {
                out.insert(i.to_string());
                aff(d, out);
                expr(b, out);
            }
            Expr::Reduce(r, i, d, b) => {
                // its derivative reads the one-hot selection
                out.insert(r.name().to_string());
                out.insert(r.arg().name().to_string());
                out.insert(i.to_string());
                aff(d, out);
                expr(b, out);
            }
        }
    }
    let prog = crate::front::readable::readable(prog, &HashMap::new());
    let mut out = Names::new();
    out.insert(prog.name.to_string());
    out.extend(prog.params.iter().map(|p| p.name.to_string()));
    out.extend(prog.sizes.iter().map(|s| s.to_string()));
    expr(&prog.body, &mut out);
    out
}

/// A parameter name based on `base` that the program does not use.
pub fn unused_name(base: &str, taken: &mut std::collections::BTreeSet<String>) -> Symbol {
    let mut name = base.to_string();
    let mut k = 1;
    while taken.contains(&name) {
        name = format!("{base}{k}");
        k += 1;
    }
    taken.insert(name.clone());
    Symbol::from(name)
}

/// Resolve the names of inputs to differentiate (`--wrt`): each a
/// real-valued input of `prog`, none twice; empty means every real input,
/// in parameter order. A name that is not a real input gets the closest
/// one, or the list of them, as a hint. The one place `--wrt` is checked.
pub fn resolve_wrt(prog: &Program, wrt: &[Symbol]) -> Result<Vec<Symbol>> {
    let reals: Vec<&str> = prog.real_params().map(|(n, _)| n.as_str()).collect();
    let listed =
        || (!reals.is_empty()).then(|| format!("the real-valued inputs are: {}", reals.join(", ")));
    if wrt.is_empty() {
        if reals.is_empty() {
            return Err(Error::input(
                "the function has no real-valued input to differentiate",
            ));
        }
        return Ok(prog.real_params().map(|(n, _)| n).collect());
    }
    let mut seen = vec![];
    for w in wrt {
        match prog.param(*w).map(|p| &p.kind) {
            Some(ParamKind::Real(_)) => {}
            Some(_) => {
                let why = "sizes and relations cannot be differentiated";
                let msg = format!("--wrt {w}: not a real-valued input ({why})");
                return Err(Error::input(msg).with_hint_opt(listed()));
            }
            None => {
                let hint = crate::diagnostics::did_you_mean(w.as_str(), reals.iter().copied())
                    .or_else(listed);
                return Err(Error::input(format!(
                    "--wrt {w}: the function has no input named {w}"
                ))
                .with_hint_opt(hint));
            }
        }
        if seen.contains(w) {
            return Err(Error::input(format!("--wrt {w}: named twice")));
        }
        seen.push(*w);
    }
    Ok(seen)
}

/// The Jacobian-vector product: the original parameters, then one tangent
/// per `wrt` input; returns the output tangent.
pub fn jvp_program(
    prog: &Program,
    wrt: &[Symbol],
    opts: &Options,
) -> Result<(Program, PhaseStats)> {
    let wrt = resolve_wrt(prog, wrt)?;
    let mut taken = names_in(prog);
    let mut params = prog.params.clone();
    let mut tangents = vec![];
    for w in &wrt {
        let t = unused_name(&format!("d{w}"), &mut taken);
        let ty = match &prog.param(*w).expect("resolved").kind {
            ParamKind::Real(t) => t.clone(),
            _ => unreachable!("resolve_wrt keeps real inputs"),
        };
        params.push(Param {
            name: t,
            kind: ParamKind::Real(ty),
        });
        tangents.push((*w, t));
    }
    let (body, stats) = differentiate(prog, &prog.body, &tangents, opts)?;
    let p = Program {
        name: prog.name,
        params,
        sizes: prog.sizes.clone(),
        body,
        ret: prog.ret.clone(),
        stored: super::stored::forward_storage(prog, &tangents),
    };
    Ok((p, stats))
}
