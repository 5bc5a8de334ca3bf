//! The adjoint (reverse-mode) derivative by rewriting, purely functional:
//! no `+=`, no tape (paper section 5.3, Figures "Grammar and Semantics for
//! the extension of the language with inner-products" and "Adjoint
//! Derivative of Tensors"; the rules are `rules/adjoint.rules`).
//!
//! Phases:
//! 1. **normalize** ([`super::normalize`]): A-normal form and let-lifting
//!    give the paper's tensor SSA, `let X1 = e1 in ... let Xk = ek in r`;
//! 2. **differentiate** (here): with `w` the cotangent of the output, the
//!    e-graph gets the inner product `(dot w (D body))`, and for every real
//!    entry `P` of every `--wrt` input `x` the coefficient
//!    `(coeff P (dot w (D body)))`, assembled into a value of `x`'s type
//!    (a `gen` per dimension, a `pair` per pair). Saturation with
//!    `rules/adjoint.rules`, `rules/forward.rules` and the black-box table
//!    unpacks the lets (adj-unpack-let), swaps differential bindings below
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

use super::normalize::{anf, dead_code, lift, unflatten, Fresh};
use super::phase::run_and_extract;
use crate::egraph::analysis::{AtlAnalysis, AtlGraph};
use crate::egraph::language::{to_rec, Atl};
use crate::egraph::rules::{coefficients, rule_set};
use crate::egraph::runner::{collect_extents, PhaseStats};
use crate::error::Result;
use crate::front::ast::{Expr, ParamKind, Program};
use crate::front::types::{param_env, type_of};
use egg::{Id, Rewrite, Symbol};
use std::collections::HashMap;
use std::time::Duration;

/// The rules of the adjoint phase: the adjoint rules, the forward rules
/// that push `D` to the variables (not d-let: adj-unpack-let takes the
/// lets), the black-box derivatives, and the identities that clean up
/// zeros, brackets and loops (index elimination among them).
pub fn adjoint_rules() -> Vec<Rewrite<Atl, AtlAnalysis>> {
    rule_set(&["adjoint", "adjoint-cleanup"])
}

/// The body of the vector-Jacobian product: with `seed` (of the output's
/// type) the cotangent of the output, the cotangents of the `wrt` inputs
/// (one as itself, several as right-nested pairs).
pub fn vjp_body(
    prog: &Program,
    wrt: &[Symbol],
    seed: Expr,
    time_limit: Duration,
) -> Result<(Expr, PhaseStats)> {
    let (egraph, root) = adjoint_egraph(prog, wrt, seed, true)?;
    let rules = adjoint_rules();
    let (mut out, stats) = run_and_extract(
        prog,
        egraph,
        &[root],
        &rules,
        time_limit,
        "differentiate (adjoint)",
    )?;
    Ok((out.pop().expect("one root"), stats))
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
    let mut fresh = Fresh::above(&prog.body);
    // dead bindings go first: their adjoint is zero (paper section 2.2), and
    // the e-graph need not prove it for every order of their bindings
    let flat = lift(&anf(&prog.body, &mut fresh), &mut fresh);
    let (binds, result) = if drop_dead { dead_code(flat) } else { flat };
    let mut types = param_env(prog);
    for (x, e) in &binds {
        let t = type_of(e, &mut types.clone())?;
        types.insert(*x, t);
    }
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
    let mut analysis = AtlAnalysis {
        extents,
        prune_to_variables: true,
        ..Default::default()
    };
    for x in active {
        let dx = fresh.name(&format!("d{}", crate::front::names::base(x.as_str())));
        analysis.add_tangent(x, dx);
        let t = types[&x].clone();
        analysis.types.insert(dx, t.clone());
        analysis.types.insert(x, t);
    }
    for p in &prog.params {
        if let ParamKind::Real(t) = &p.kind {
            analysis.types.insert(p.name, t.clone());
            if !analysis.tangents.contains_key(&p.name) {
                analysis.constants.insert(p.name, t.clone());
            }
        }
    }
    analysis.fresh = fresh.counter();
    let mut egraph = AtlGraph::new(analysis);
    let body = egraph.add_expr(&to_rec(&unflatten((binds, result))));
    let seed = egraph.add_expr(&to_rec(&seed));
    let dbody = egraph.add(Atl::D(body));
    let form = egraph.add(Atl::Dot([seed, dbody]));
    let outputs: Vec<Id> = wrt
        .iter()
        .map(|w| {
            let dw = egraph.analysis.tangents[w];
            let t = egraph.analysis.types[w].clone();
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
