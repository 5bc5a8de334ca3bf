//! The optimizer's phases over one e-graph each ([`optimize_whole`]).
//!
//! Phases (each a fresh egg `Runner` on the program extracted by the one
//! before, as Szalinski and Tensat do):
//! 1. **normalize**: let-lifting, pair elimination, gen pushout, Iverson
//!    algebra, index elimination and let inlining: the paper's rewriting
//!    toward sparse, flat programs; no commutativity or associativity, so
//!    the e-graph stays small;
//! 2. **simplify**: every rule, scalar algebra included (commutativity,
//!    associativity, factoring, sums interchanged, factors moved out of
//!    sums), under egg's `BackoffScheduler`.
//!
//! Each phase stops at its node or iteration limit, whichever comes first;
//! the best program found so far is extracted and the statistics say which
//! limit stopped it.

use super::guard::{guard, Stats};
use crate::egraph::analysis::{new_graph, AtlAnalysis};
use crate::egraph::bounded::Bounded;
use crate::egraph::extract::{extract_best, Sample, WorkCost, UNUSABLE};
use crate::egraph::language::to_rec;
use crate::egraph::rules::rule_set;
use crate::egraph::runner::{
    extraction_samples, small_first_samples, Options, PhaseStats, EGG_TIME_LIMIT,
};
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{Expr, Program};
use crate::symbol::Symbol;
use crate::terms::canonical::canonical_binders_with_hints;
use crate::terms::extents::collect_extents;
use egg::{BackoffScheduler, Runner};
use std::collections::HashMap;
use std::time::Instant;

/// The optimizer's phases; each runs the rule set of its name (the tags of
/// `rules/`).
pub const PHASES: &[&str] = &["normalize", "simplify"];

/// What one phase works on.
struct PhaseInput<'a> {
    name: &'a str,
    body: &'a Expr,
    extents: &'a HashMap<Symbol, Affine>,
    samples: &'a [Sample],
    opts: &'a Options,
    /// Other orders of samples to extract by as well (alternative
    /// candidates for the guard).
    alternatives: &'a [Vec<Sample>],
}

/// Most exact costings (of terms not costed before) one extraction makes;
/// later terms get the dense upper bound, which needs no enumeration. A
/// count, not a time, so that the extracted term does not depend on the
/// machine's speed.
pub const EXACT_COSTINGS: usize = 20_000;

/// One phase of saturation; returns the extracted body (and one more
/// candidate per alternative sample order). Fails only past the command's
/// deadline.
fn run_phase(input: PhaseInput) -> Result<(Vec<Expr>, PhaseStats)> {
    let PhaseInput {
        name,
        body,
        extents,
        samples,
        opts,
        alternatives,
    } = input;
    let started = Instant::now();
    let deadline = opts.deadline_at();
    opts.check_time()?;
    let rules = rule_set(&[name]);
    let analysis = AtlAnalysis {
        extents: extents.clone(),
        fresh: crate::front::subst::fresh_above(body),
        ..Default::default()
    };
    let mut egraph = new_graph(analysis);
    let root = egraph.add_expr(&to_rec(body));
    let node_limit = if name == "normalize" {
        opts.node_limit / 4
    } else {
        opts.node_limit
    };
    let runner = Runner::default()
        .with_egraph(egraph)
        // the limits are checked within iterations (egg's node limit, which
        // counts its hashcons between iterations, only as a backstop)
        .with_scheduler(Bounded::around(
            BackoffScheduler::default(),
            node_limit,
            deadline,
        ))
        .with_node_limit(usize::MAX)
        .with_iter_limit(opts.iter_limit)
        .with_time_limit(EGG_TIME_LIMIT)
        .run(&rules);
    opts.check_time()?;
    let egraph = &runner.egraph;
    let root = egraph.find(root);
    let extract_started = Instant::now();
    let mut out = vec![];
    for order in std::iter::once(samples).chain(alternatives.iter().map(|v| v.as_slice())) {
        let best = extract_best(
            egraph,
            WorkCost::new(egraph, order)
                .with_exact_costings(EXACT_COSTINGS)
                .with_deadline(deadline),
            root,
        );
        opts.check_time()?;
        let e = match best.as_ref().and_then(|b| b.term().map(|t| (t, b))) {
            Some((crate::egraph::extract::Term::Expr(e), b))
                if b.key.iter().all(|k| *k < UNUSABLE) =>
            {
                e
            }
            _ => body.clone(),
        };
        if !out.contains(&e) {
            out.push(e);
        }
    }
    let stats = PhaseStats::of(name, &runner, started, extract_started);
    Ok((out, stats))
}

/// A program optimized in one e-graph, its binders still named canonically
/// (see [`canonical_binders`]), with the source names they stand for.
pub struct Whole {
    pub program: Program,
    pub hints: HashMap<Symbol, Symbol>,
    pub stats: Stats,
}

/// Optimize a whole program in one e-graph per phase: equal in value, never
/// costlier (at every checked sample), in core forms. Binder names are left
/// canonical; [`crate::front::readable::readable`] with the hints prints them.
pub fn optimize_whole(prog: &Program, opts: &Options) -> Result<Whole> {
    let started = Instant::now();
    let opts = &opts.started();
    let mut extents = HashMap::new();
    collect_extents(&prog.body, &mut extents);
    let samples = extraction_samples(prog, opts.sizes.as_ref());
    // The guard also checks small sizes, where hoisting out of a loop or
    // factoring out of a sum can cost more (an empty loop costs nothing);
    // the last phase therefore also extracts smallest-sizes-first.
    let small_first = small_first_samples(prog, opts.sizes.as_ref());
    let (mut body, hints) = canonical_binders_with_hints(&prog.body);
    collect_extents(&body, &mut extents);
    let mut candidates = vec![];
    let mut phases = vec![];
    for (k, name) in PHASES.iter().enumerate() {
        let last = k + 1 == PHASES.len();
        let alternatives = if last {
            std::slice::from_ref(&small_first)
        } else {
            &[]
        };
        let (mut next, st) = run_phase(PhaseInput {
            name,
            body: &body,
            extents: &extents,
            samples: &samples,
            opts,
            alternatives,
        })?;
        for e in &next {
            collect_extents(e, &mut extents);
        }
        body = next.remove(0);
        candidates = next;
        phases.push(st);
    }
    candidates.insert(0, body);
    let candidates = candidates
        .into_iter()
        .map(|body| Program {
            body,
            ..prog.clone()
        })
        .collect();
    let (program, stats) = guard(prog, candidates, opts, phases, started)?;
    Ok(Whole {
        program,
        hints,
        stats,
    })
}

/// Rule names of every phase (for reports and tests).
pub fn phase_rule_names() -> Vec<String> {
    rule_set(&["simplify"])
        .iter()
        .map(|r| r.name.to_string())
        .collect()
}
