//! The differentiation phase's e-graph run, shared by the forward and the
//! adjoint derivative: saturate with the phase's rules under limits, check
//! that every root has a term free of extension forms (`D`, `dot`, `dlet`,
//! `coeff`, `drop`), and extract the cheapest such terms by the work cost.

use crate::egraph::analysis::AtlGraph;
use crate::egraph::bounded::Bounded;
use crate::egraph::extract::{extract_all, Sample, Term, WorkCost, UNUSABLE};
use crate::egraph::language::Atl;
use crate::egraph::runner::{extraction_samples, PhaseStats};
use crate::error::{Error, Result};
use crate::front::ast::{Expr, Program};
use egg::{Id, Language, Rewrite, Runner};
use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

/// Most live e-nodes a differentiation e-graph may grow to.
pub const NODE_LIMIT: usize = 100_000;

/// Saturate `egraph` with `rules` and extract one core expression per root.
pub fn run_and_extract(
    prog: &Program,
    egraph: AtlGraph,
    roots: &[Id],
    rules: &[Rewrite<Atl, crate::egraph::analysis::AtlAnalysis>],
    time_limit: Duration,
    name: &str,
) -> Result<(Vec<Expr>, PhaseStats)> {
    let started = std::time::Instant::now();
    // The rules of differentiation terminate (they push forms down and
    // gather): the simple scheduler applies every match each iteration.
    let runner = Runner::default()
        .with_scheduler(Bounded::new(NODE_LIMIT, started + time_limit))
        .with_egraph(egraph)
        .with_node_limit(usize::MAX)
        .with_iter_limit(1_000)
        .with_time_limit(time_limit)
        .run(rules);
    let extract_started = Instant::now();
    let samples = extraction_samples(prog, None);
    let out = extract_roots(&runner, roots, &samples, time_limit)?;
    let stats = PhaseStats::of(name, &runner, started, extract_started);
    Ok((out, stats))
}

/// The cheapest term free of extension forms of each root, by the work
/// cost; an error when a root has none (the run stopped too early).
fn extract_roots(
    runner: &Runner<Atl, crate::egraph::analysis::AtlAnalysis>,
    roots: &[Id],
    samples: &[Sample],
    time_limit: Duration,
) -> Result<Vec<Expr>> {
    let unfinished = || unfinished(&runner.stop_reason, time_limit);
    // After a limit, extension forms may remain; check that every root has
    // a term without them before extracting (which would only fail, slowly)
    if !roots.iter().all(|r| has_core_term(&runner.egraph, *r)) {
        return Err(unfinished());
    }
    let egraph = &runner.egraph;
    // derivatives must be extracted whole: allow large terms here
    let cost = WorkCost::new(egraph, samples).with_max_term_size(50_000);
    let best = extract_all(egraph, cost);
    roots
        .iter()
        .map(|r| {
            let b = best.get(&egraph.find(*r));
            match b.and_then(|b| b.term().map(|t| (t, b))) {
                Some((Term::Expr(e), b)) if b.key.iter().all(|k| *k < UNUSABLE) => Ok(e),
                _ => Err(unfinished()),
            }
        })
        .collect()
}

/// Why a differentiation run gave no term, and what would help.
fn unfinished(stop: &Option<egg::StopReason>, time_limit: Duration) -> Error {
    use egg::StopReason::*;
    let (why, hint) = match stop {
        Some(TimeLimit(_)) => (
            format!("it reached the time limit ({} s)", time_limit.as_secs_f64()),
            "raise --time-limit",
        ),
        Some(IterationLimit(n)) => (
            format!("it reached its limit of {n} rewriting rounds"),
            "the limit is fixed; differentiate fewer inputs (--wrt) or split the program",
        ),
        Some(NodeLimit(n)) => (
            format!("the e-graph reached its limit of {n} e-nodes"),
            "the limit is fixed; differentiate fewer inputs (--wrt) or split the program",
        ),
        _ => (
            "some derivative forms could not be eliminated".to_string(),
            "this is a limitation of the rules; please report the program",
        ),
    };
    Error::transform(format!("differentiation did not finish: {why}")).with_hint(hint)
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

/// Most e-nodes one binding's e-graph may grow to.
pub const SMALL_NODE_LIMIT: usize = 10_000;

/// Most iterations of one binding's e-graph.
pub const SMALL_ITER_LIMIT: usize = 60;

/// One binding's e-graph: saturate `egraph` with `rules` until `deadline`
/// and extract one core expression per root; also returns the name
/// counter the appliers reached (later names must be above it).
pub fn run_small(
    egraph: AtlGraph,
    roots: &[Id],
    rules: &[Rewrite<Atl, crate::egraph::analysis::AtlAnalysis>],
    samples: &[Sample],
    deadline: Instant,
) -> Result<(Vec<Expr>, PhaseStats, u64)> {
    let started = Instant::now();
    let left = deadline.saturating_duration_since(started);
    let runner = Runner::default()
        .with_scheduler(Bounded::new(SMALL_NODE_LIMIT, deadline))
        .with_egraph(egraph)
        .with_node_limit(usize::MAX)
        .with_iter_limit(SMALL_ITER_LIMIT)
        .with_time_limit(left.max(Duration::from_millis(1)))
        .run(rules);
    let extract_started = Instant::now();
    let out = extract_roots(&runner, roots, samples, left)?;
    let stats = PhaseStats::of("differentiate (binding)", &runner, started, extract_started);
    Ok((out, stats, runner.egraph.analysis.fresh))
}
