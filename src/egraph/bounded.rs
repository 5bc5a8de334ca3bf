//! A rewrite scheduler that keeps an e-graph within its limits *while* an
//! iteration runs. egg's own node limit compares the hashcons memo (which
//! keeps stale entries) and only between iterations, so one iteration could
//! grow the graph by millions of nodes before it is looked at; here the
//! live e-node count, the memo and the deadline are checked after every
//! rule's search and every few matches applied. Which rules run each
//! iteration is the inner scheduler's choice (every rule, or egg's backoff);
//! either way one rule's search stops at a number of matches (a pattern
//! over classes of many nodes can otherwise match billions of times in one
//! search: seen as a 3 GiB vector of matches on a random program).

use super::analysis::{term_memo_size, term_nodes, AtlAnalysis, AtlGraph};
use super::language::Atl;
use crate::limits::CpuTime;
use egg::{Rewrite, RewriteScheduler, RunnerLimits, RunnerResult, SearchMatches};

/// Every rule every iteration (like egg's `SimpleScheduler`), each search
/// stopped at `match_limit` matches. A rule with more matches than that
/// applies the first ones only, so a run may stop as saturated with
/// matches never applied: only on e-graphs near their node limit anyway.
pub struct EveryRule {
    match_limit: usize,
}

impl RewriteScheduler<Atl, AtlAnalysis> for EveryRule {
    fn search_rewrite<'a>(
        &mut self,
        _iteration: usize,
        egraph: &AtlGraph,
        rewrite: &'a Rewrite<Atl, AtlAnalysis>,
    ) -> Vec<SearchMatches<'a, Atl>> {
        rewrite.search_with_limit(egraph, self.match_limit)
    }
}

/// Matches are applied this many at a time between checks.
const CHUNK: usize = 16;

/// `inner`'s schedule, stopped at `limit` live e-nodes (or a memo of 4
/// times that) or at `deadline`.
pub struct Bounded<S = EveryRule> {
    inner: S,
    limit: usize,
    deadline: CpuTime,
    over: bool,
}

impl Bounded {
    /// Every rule every iteration, within the limits; no search yields
    /// more matches than `limit` (the node limit) either.
    pub fn new(limit: usize, deadline: CpuTime) -> Bounded {
        Bounded::around(EveryRule { match_limit: limit }, limit, deadline)
    }
}

impl<S> Bounded<S> {
    /// `inner`'s schedule within the limits.
    pub fn around(inner: S, limit: usize, deadline: CpuTime) -> Bounded<S> {
        Bounded {
            inner,
            limit,
            deadline,
            over: false,
        }
    }

    /// Whether a limit is reached (and remember it).
    fn check(&mut self, egraph: &AtlGraph) -> bool {
        // the memo (stale entries included) is bounded too: classes pruned
        // and merged over and over grow it while the live count stays small
        if term_nodes(egraph) > self.limit
            || term_memo_size(egraph) > 4 * self.limit
            || CpuTime::now() > self.deadline
        {
            self.over = true;
        }
        self.over
    }

    fn stop(&mut self, egraph: &AtlGraph) -> RunnerResult<()> {
        if !self.check(egraph) {
            Ok(())
        } else if CpuTime::now() > self.deadline {
            Err(egg::StopReason::Other("time limit".into()))
        } else {
            Err(egg::StopReason::NodeLimit(self.limit))
        }
    }
}

impl<S: RewriteScheduler<Atl, AtlAnalysis>> RewriteScheduler<Atl, AtlAnalysis> for Bounded<S> {
    fn can_stop(&mut self, iteration: usize) -> bool {
        self.inner.can_stop(iteration)
    }

    fn search_rewrites<'a>(
        &mut self,
        iteration: usize,
        egraph: &AtlGraph,
        rewrites: &[&'a Rewrite<Atl, AtlAnalysis>],
        limits: &RunnerLimits,
    ) -> RunnerResult<Vec<Vec<SearchMatches<'a, Atl>>>> {
        self.stop(egraph)?;
        let mut matches = Vec::new();
        for rw in rewrites {
            matches.push(self.inner.search_rewrite(iteration, egraph, rw));
            limits.check_limits(iteration, egraph)?;
            self.stop(egraph)?;
        }
        Ok(matches)
    }

    fn apply_rewrite(
        &mut self,
        _iteration: usize,
        egraph: &mut AtlGraph,
        rewrite: &Rewrite<Atl, AtlAnalysis>,
        matches: Vec<SearchMatches<Atl>>,
    ) -> usize {
        let mut applied = 0;
        for m in matches {
            for substs in m.substs.chunks(CHUNK) {
                if self.over {
                    return applied;
                }
                let part = SearchMatches {
                    eclass: m.eclass,
                    substs: substs.to_vec(),
                    ast: m.ast.clone(),
                };
                applied += rewrite.apply(egraph, std::slice::from_ref(&part)).len();
                self.check(egraph);
            }
        }
        applied
    }
}
