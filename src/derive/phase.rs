//! The differentiation phase's e-graph run, shared by the forward and the
//! adjoint derivative: saturate with the phase's rules under limits, check
//! that every root has a term free of extension forms (`D`, `dot`, `dlet`,
//! `coeff`, `drop`), and extract the cheapest such terms by the work cost.

use crate::egraph::analysis::AtlGraph;
use crate::egraph::extract::{extract_all, Term, WorkCost, UNUSABLE};
use crate::egraph::language::Atl;
use crate::egraph::runner::{extraction_samples, PhaseStats};
use crate::error::{Error, Result};
use crate::front::ast::{Expr, Program};
use egg::{Id, Language, Rewrite, Runner};
use std::collections::{HashSet, VecDeque};
use std::time::Duration;

/// Most e-nodes a differentiation e-graph may grow to.
pub const NODE_LIMIT: usize = 1_000_000;

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
        .with_scheduler(egg::SimpleScheduler)
        .with_egraph(egraph)
        .with_node_limit(NODE_LIMIT)
        .with_iter_limit(1_000)
        .with_time_limit(time_limit)
        .run(rules);
    let unfinished = || {
        use egg::StopReason::*;
        let (why, hint) = match &runner.stop_reason {
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
    };
    // After a limit, extension forms may remain; check that every root has
    // a term without them before extracting (which would only fail, slowly)
    if !roots.iter().all(|r| has_core_term(&runner.egraph, *r)) {
        return Err(unfinished());
    }
    let egraph = &runner.egraph;
    let extract_started = std::time::Instant::now();
    let samples = extraction_samples(prog, None);
    // derivatives must be extracted whole: allow large terms here
    let cost = WorkCost::new(egraph, &samples).with_max_term_size(50_000);
    let best = extract_all(egraph, cost);
    let out = roots
        .iter()
        .map(|r| {
            let b = best.get(&egraph.find(*r));
            match b.and_then(|b| b.term().map(|t| (t, b))) {
                Some((Term::Expr(e), b)) if b.key.iter().all(|k| *k < UNUSABLE) => Ok(e),
                _ => Err(unfinished()),
            }
        })
        .collect::<Result<Vec<Expr>>>()?;
    let stats = PhaseStats::of(name, &runner, started, extract_started);
    Ok((out, stats))
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
