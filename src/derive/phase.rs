//! The differentiation phase's e-graph run, shared by the forward and the
//! adjoint derivative: saturate with the phase's rules under count limits,
//! check which roots have a term free of extension forms (`D`, `dot`,
//! `dlet`, `coeff`, `drop`), and extract the cheapest such terms by the
//! work cost. A root without one is built by a direct pass instead
//! ([`super::direct`], [`super::forward_direct`]), so every program gets
//! its derivative.

use crate::egraph::analysis::AtlGraph;
use crate::egraph::bounded::Bounded;
use crate::egraph::extract::{extract_all, Sample, Term, WorkCost, UNUSABLE};
use crate::egraph::language::Atl;
use crate::egraph::runner::{extraction_samples, Options, PhaseStats, EGG_TIME_LIMIT};
use crate::error::Result;
use crate::front::ast::{Expr, Program};
use crate::front::names::Fresh;
use egg::{Id, Language, Rewrite, Runner};
use std::collections::{HashSet, VecDeque};
use std::time::Instant;

/// The counts that bound one differentiation e-graph. Counts, never
/// time: where a run stops decides the derivative printed, and it must not
/// depend on the machine's load.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Most live e-nodes.
    pub nodes: usize,
    /// Most rewriting rounds.
    pub iterations: usize,
}

/// A whole program's (or a group of bindings') differentiation e-graph.
pub const WHOLE: Limits = Limits {
    nodes: 20_000,
    iterations: 500,
};

/// One binding's e-graph.
pub const SMALL: Limits = Limits {
    nodes: 10_000,
    iterations: 60,
};

/// Saturate `egraph` with `rules` within `limits` and extract, for each
/// root, its cheapest core expression (`None` for a root that has none:
/// the run stopped at a limit before every derivative form was gone); also
/// returns the appliers' name supply (later names must come after its
/// last). Fails only past the command's deadline.
pub fn run_and_extract(
    prog: &Program,
    egraph: AtlGraph,
    roots: &[Id],
    rules: &[Rewrite<Atl, crate::egraph::analysis::AtlAnalysis>],
    limits: Limits,
    opts: &Options,
    name: &str,
) -> Result<(Vec<Option<Expr>>, PhaseStats, Fresh)> {
    let samples = extraction_samples(prog, None);
    run_with(egraph, roots, rules, &samples, limits, opts, name)
}

/// [`run_and_extract`] at given samples.
pub fn run_with(
    egraph: AtlGraph,
    roots: &[Id],
    rules: &[Rewrite<Atl, crate::egraph::analysis::AtlAnalysis>],
    samples: &[Sample],
    limits: Limits,
    opts: &Options,
    name: &str,
) -> Result<(Vec<Option<Expr>>, PhaseStats, Fresh)> {
    let started = Instant::now();
    let deadline = opts.deadline_at();
    opts.check_time()?;
    // The rules of differentiation terminate (they push forms down and
    // gather): the simple scheduler applies every match each iteration.
    let runner = Runner::default()
        .with_scheduler(Bounded::new(limits.nodes, deadline))
        .with_egraph(egraph)
        .with_node_limit(usize::MAX)
        .with_iter_limit(limits.iterations)
        .with_time_limit(EGG_TIME_LIMIT)
        .run(rules);
    opts.check_time()?;
    let extract_started = Instant::now();
    let out = extract_roots(&runner, roots, samples, deadline);
    opts.check_time()?;
    let stats = PhaseStats::of(name, &runner, started, extract_started);
    Ok((out, stats, runner.egraph.analysis.fresh))
}

/// The cheapest term free of extension forms of each root, by the work
/// cost; `None` for a root that has none.
fn extract_roots(
    runner: &Runner<Atl, crate::egraph::analysis::AtlAnalysis>,
    roots: &[Id],
    samples: &[Sample],
    deadline: crate::limits::CpuTime,
) -> Vec<Option<Expr>> {
    let egraph = &runner.egraph;
    // After a limit, extension forms may remain; check which roots have a
    // term without them before extracting (which would only fail, slowly)
    let core: Vec<bool> = roots.iter().map(|r| has_core_term(egraph, *r)).collect();
    if !core.iter().any(|c| *c) {
        return vec![None; roots.len()];
    }
    // derivatives must be extracted whole: allow large terms here
    let cost = WorkCost::new(egraph, samples)
        .with_max_term_size(50_000)
        .with_deadline(deadline);
    let best = extract_all(egraph, cost);
    roots
        .iter()
        .zip(core)
        .map(|(r, core)| {
            let b = best.get(&egraph.find(*r)).filter(|_| core)?;
            match b.term() {
                Some(Term::Expr(e)) if b.key.iter().all(|k| *k < UNUSABLE) => Some(e),
                _ => None,
            }
        })
        .collect()
}

/// Does the class of `root` hold a term without extension forms? (A
/// worklist from the leaves up, like extraction but without costs.)
pub fn has_core_term(egraph: &AtlGraph, root: Id) -> bool {
    let mut ok: HashSet<Id> = HashSet::new();
    let mut queue: VecDeque<Id> = egraph.classes().map(|c| c.id).collect();
    while let Some(c) = queue.pop_front() {
        if ok.contains(&c) {
            continue;
        }
        let class = &egraph[c];
        let core = class.nodes.iter().any(|n| {
            !n.is_extension() && n.children().iter().all(|k| ok.contains(&egraph.find(*k)))
        });
        if core {
            ok.insert(c);
            queue.extend(class.parents().map(|p| egraph.find(p)));
        }
    }
    ok.contains(&egraph.find(root))
}
