//! The optimizer: phases of equality saturation with limits, extraction by
//! the work cost, and a guard that never returns a costlier program.
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
//! the best program found so far is extracted and `Stats` says which limit
//! stopped it. Only counts shape a result, so the same input gives the same
//! output whatever the machine's load; the command's time limit is a guard
//! that fails the command ([`Options::check_time`]), never a place to stop.

use super::analysis::{new_graph, term_classes, term_nodes, AtlAnalysis};
use super::bounded::Bounded;
use super::extract::{cost_at, cost_key, extract_best, Sample, WorkCost, UNUSABLE};
use super::language::to_rec;
use super::rules::rule_set;
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{Expr, ParamKind, Program};
use crate::semantics::value::{Relation, Sizes};
use crate::terms::canonical::canonical_binders_with_hints;
use crate::terms::extents::collect_extents;
use egg::{BackoffScheduler, Runner, StopReason, Symbol};
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Limits and sizes for one optimization.
#[derive(Clone, Debug)]
pub struct Options {
    /// Most e-nodes per phase (the normalize phase gets a quarter).
    pub node_limit: usize,
    /// Most iterations per phase.
    pub iter_limit: usize,
    /// The guard on the whole command (differentiation included): past it
    /// the command fails with an error naming `--time-limit`. It never
    /// decides where a phase stops (the counts above do).
    pub time_limit: Duration,
    /// The user's sizes, compared after the largest sample.
    pub sizes: Option<Sizes>,
    /// When the command's time runs out: fixed from `time_limit` by the
    /// first entry point that runs (`None` until then).
    pub deadline: Option<Instant>,
}

/// The default of `--time-limit`, in seconds: generous, since it only
/// guards against a command that would run away.
pub const DEFAULT_TIME_LIMIT: u64 = 60;

impl Default for Options {
    fn default() -> Options {
        Options {
            node_limit: 10_000,
            iter_limit: 30,
            time_limit: Duration::from_secs(DEFAULT_TIME_LIMIT),
            sizes: None,
            deadline: None,
        }
    }
}

impl Options {
    /// These options with the command's deadline fixed (from now, unless
    /// an enclosing entry point fixed it already).
    pub fn started(&self) -> Options {
        Options {
            deadline: Some(self.deadline_at()),
            ..self.clone()
        }
    }

    /// The command's deadline (from now when not fixed yet).
    pub fn deadline_at(&self) -> Instant {
        self.deadline
            .unwrap_or_else(|| Instant::now() + self.time_limit)
    }

    /// An error when the command's time is up: the command fails rather
    /// than return whatever it reached.
    pub fn check_time(&self) -> Result<()> {
        check_deadline(self.deadline_at(), self.time_limit)
    }
}

/// The error of a command past its time limit (`limit`), or nothing before
/// `deadline`.
pub fn check_deadline(deadline: Instant, limit: Duration) -> Result<()> {
    if Instant::now() < deadline {
        return Ok(());
    }
    Err(crate::limits::time_limit_error(limit))
}

#[derive(Clone, Debug, Serialize)]
pub struct PhaseStats {
    pub phase: String,
    pub iterations: usize,
    pub nodes: usize,
    pub classes: usize,
    pub stop_reason: String,
    pub seconds: f64,
    /// Of which extraction.
    pub extract_seconds: f64,
}

impl PhaseStats {
    /// The statistics of differentiation without an e-graph.
    pub fn direct() -> PhaseStats {
        PhaseStats {
            phase: "differentiate (direct)".to_string(),
            iterations: 0,
            nodes: 0,
            classes: 0,
            stop_reason: "one pass".to_string(),
            seconds: 0.0,
            extract_seconds: 0.0,
        }
    }

    /// The statistics of a phase that ran `runner`, started at `started`
    /// and began extracting at `extract_started`.
    pub fn of(
        name: &str,
        runner: &Runner<super::language::Atl, AtlAnalysis>,
        started: Instant,
        extract_started: Instant,
    ) -> PhaseStats {
        PhaseStats {
            phase: name.to_string(),
            iterations: runner.iterations.len(),
            nodes: term_nodes(&runner.egraph),
            classes: term_classes(&runner.egraph),
            stop_reason: stop_reason(&runner.stop_reason),
            seconds: started.elapsed().as_secs_f64(),
            extract_seconds: extract_started.elapsed().as_secs_f64(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    /// One entry per phase, in order.
    pub phases: Vec<PhaseStats>,
    /// Costs before and after at each sample, labelled by its sizes.
    pub cost_before: Vec<(String, u128)>,
    pub cost_after: Vec<(String, u128)>,
    /// True when the guard kept the input because the result was not
    /// cheaper (or not well typed).
    pub kept_input: bool,
    pub seconds: f64,
}

#[derive(Clone, Debug)]
pub struct Optimized {
    /// The optimized program.
    pub program: Program,
    /// The statistics of its phases.
    pub stats: Stats,
}

fn all_true_relations(
    prog: &Program,
    sizes: &Sizes,
    fill: impl Fn(usize) -> bool,
) -> HashMap<Symbol, Relation> {
    let mut out = HashMap::new();
    for p in &prog.params {
        if let ParamKind::Relation(dims) = &p.kind {
            let dims: Vec<usize> = dims
                .iter()
                .map(|d| d.eval_with(|n| sizes.get(&n).copied()).unwrap_or(0).max(0) as usize)
                .collect();
            let total: usize = dims.iter().product();
            let bits = (0..total).map(&fill).collect();
            out.insert(p.name, Relation { dims, bits });
        }
    }
    out
}

fn uniform_sizes(prog: &Program, v: i64) -> Sizes {
    prog.sizes.iter().map(|s| (*s, v)).collect()
}

/// Distinct values for distinct sizes, so that no comparison between sizes
/// holds by coincidence (with `m = n` a band `i < k + m` covers everything).
fn spread_sizes(prog: &Program, values: &[i64]) -> Sizes {
    prog.sizes
        .iter()
        .enumerate()
        .map(|(k, s)| (*s, values[k % values.len()] + (k / values.len()) as i64))
        .collect()
}

/// Relative magnitudes of the sizes at the largest samples (the largest is
/// 10^6): each size its own magnitude, so that sizes vary independently
/// (`n·m` and `n²` differ), and a second assignment with the magnitudes
/// swapped pairwise.
const LARGE_SPREADS: [[i64; 8]; 2] = [
    [
        1_000_000, 200_000, 600_000, 90_000, 400_000, 50_000, 800_000, 300_000,
    ],
    [
        200_000, 1_000_000, 90_000, 600_000, 50_000, 400_000, 300_000, 800_000,
    ],
];

/// The largest size value of the large samples and how much smaller the
/// samples they scale are: 10^6 and 1000; none for programs with
/// relations, whose values are data as large as the relation (a dense
/// `n × n` relation at 10^6 would be 10^12 bits) and whose costs at large
/// sizes could only be bounded densely, not counted.
fn large_magnitude(prog: &Program) -> Option<(f64, f64)> {
    let relations = prog
        .params
        .iter()
        .any(|p| matches!(p.kind, ParamKind::Relation(_)));
    (!relations).then_some((1e6, super::extract::GROWTH_SCALE))
}

fn sample(prog: &Program, sizes: Sizes, scales: Option<usize>) -> Sample {
    Sample {
        relations: all_true_relations(prog, &sizes, |_| true),
        sizes,
        scales,
    }
}

/// The guard's sparse relations: a fixed pseudo-random pattern of density
/// about 0.3.
fn sparse_pattern(k: usize) -> bool {
    (k * 2654435761) % 10 < 3
}

/// The samples extraction compares at (see [`super::extract::cost_key`]):
/// the user's sizes when given; sizes up to 10^6 spread over magnitudes
/// (two assignments), each scaling one 1000 times smaller; then those
/// smaller ones (none for programs with relations: see
/// `large_magnitude`), and sizes near 20 and near 5, relations holding
/// everywhere (the dense upper bound).
pub fn extraction_samples(prog: &Program, user: Option<&Sizes>) -> Vec<Sample> {
    let mut out = vec![];
    if let Some(u) = user {
        if prog.sizes.iter().all(|s| u.contains_key(s)) {
            out.push(sample(prog, u.clone(), None));
        }
    }
    let (top, scale) = large_magnitude(prog).unwrap_or((0.0, 1.0));
    let mut large: Vec<Vec<i64>> = vec![];
    for spread in LARGE_SPREADS.iter().filter(|_| top > 0.0) {
        let v: Vec<i64> = spread
            .iter()
            .map(|&x| ((x as f64 * top / 1e6) as i64).max(1))
            .collect();
        if !large
            .iter()
            .any(|l| spread_sizes(prog, l) == spread_sizes(prog, &v))
        {
            large.push(v);
        }
    }
    let first_base = out.len() + large.len();
    for (k, v) in large.iter().enumerate() {
        out.push(sample(prog, spread_sizes(prog, v), Some(first_base + k)));
    }
    for v in &large {
        let base: Vec<i64> = v
            .iter()
            .map(|&x| ((x as f64 / scale).round() as i64).max(1))
            .collect();
        out.push(sample(prog, spread_sizes(prog, &base), None));
    }
    out.push(sample(
        prog,
        spread_sizes(prog, &[24, 13, 31, 17, 28, 11, 20, 15]),
        None,
    ));
    out.push(sample(
        prog,
        spread_sizes(prog, &[5, 3, 7, 4, 6, 2, 8, 9]),
        None,
    ));
    out
}

/// The samples the guard checks: the extraction samples (large ones
/// included: a result must not grow faster than its input), every uniform
/// size from 0 to 8, a few mixed assignments, and, for programs with
/// relations, sparse and empty relations too. (A sample, not a proof: see
/// the notes on `optimize`.)
fn guard_samples(prog: &Program, user: Option<&Sizes>) -> Vec<Sample> {
    let mut out = extraction_samples(prog, user);
    let mut sizes: Vec<Sizes> = out.iter().map(|s| s.sizes.clone()).collect();
    sizes.extend((0..=8).map(|v| uniform_sizes(prog, v)));
    // every assignment of small values when there are few sizes (empty and
    // one-element ranges are where factoring and hoisting stop paying)
    let k = prog.sizes.len();
    if (2..=3).contains(&k) {
        let vals = [0i64, 1, 2, 3, 5];
        for code in 0..vals.len().pow(k as u32) {
            let mut c = code;
            let mut s = Sizes::default();
            for name in &prog.sizes {
                s.insert(*name, vals[c % vals.len()]);
                c /= vals.len();
            }
            sizes.push(s);
        }
    } else if k > 3 {
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..40 {
            let mut s = Sizes::default();
            for name in &prog.sizes {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                s.insert(*name, ((state >> 33) % 6) as i64);
            }
            sizes.push(s);
        }
    }
    let has_relations = prog
        .params
        .iter()
        .any(|p| matches!(p.kind, ParamKind::Relation(_)));
    for (k, s) in sizes.into_iter().enumerate() {
        if k >= out.len() {
            out.push(sample(prog, s.clone(), None));
        }
        if has_relations {
            // a fixed pseudo-random pattern of density about 0.3, and none
            out.push(Sample {
                relations: all_true_relations(prog, &s, sparse_pattern),
                sizes: s.clone(),
                scales: None,
            });
            out.push(Sample {
                relations: all_true_relations(prog, &s, |_| false),
                sizes: s,
                scales: None,
            });
        }
    }
    out
}

fn label(s: &Sample) -> String {
    s.sizes
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

pub fn stop_reason(r: &Option<StopReason>) -> String {
    match r {
        Some(StopReason::Saturated) => "saturated".into(),
        Some(StopReason::IterationLimit(n)) => format!("iteration limit ({n})"),
        Some(StopReason::NodeLimit(n)) => format!("node limit ({n})"),
        Some(StopReason::TimeLimit(t)) => format!("time limit ({t:.1} s)"),
        Some(StopReason::Other(s)) => s.clone(),
        None => "not run".into(),
    }
}

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
        .with_time_limit(time_left(deadline))
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
            Some((super::extract::Term::Expr(e), b)) if b.key.iter().all(|k| *k < UNUSABLE) => e,
            _ => body.clone(),
        };
        if !out.contains(&e) {
            out.push(e);
        }
    }
    let stats = PhaseStats::of(name, &runner, started, extract_started);
    Ok((out, stats))
}

/// The time egg's runner may take: until `deadline` (its own time limit
/// is only a backstop; the scheduler stops at the deadline, and the
/// caller then fails the command).
pub fn time_left(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
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

type Costs = Vec<(String, u128)>;

/// The extraction samples ordered smallest first: uniform sizes 0, 1, 2,
/// then the usual ones from small to large.
fn small_first_samples(prog: &Program, user: Option<&Sizes>) -> Vec<Sample> {
    let mut out: Vec<Sample> = (0..=2)
        .map(|v| sample(prog, uniform_sizes(prog, v), None))
        .collect();
    let mut rest = extraction_samples(prog, user);
    for s in &mut rest {
        // costs only, smallest first: no growth classes
        s.scales = None;
    }
    rest.reverse();
    out.extend(rest);
    out
}

/// Of the candidates that are well formed (the input's type, no undeclared
/// name) and cost no more than the input at every sample (checked on the
/// extracted core program itself), the cheapest, comparing costs sample by
/// sample in order, then the smaller term (a gradient of zero work can
/// still be a vector or a cube), then the first; the input when there is
/// none.
/// The statistics say the `phases` that made the candidates, the costs
/// before and after, and the time since `started`.
pub fn guard(
    prog: &Program,
    candidates: Vec<Program>,
    opts: &Options,
    phases: Vec<PhaseStats>,
    started: Instant,
) -> Result<(Program, Stats)> {
    let samples = guard_samples(prog, opts.sizes.as_ref());
    let mut extents = HashMap::new();
    collect_extents(&prog.body, &mut extents);
    let before: Costs = samples
        .iter()
        .map(label)
        .zip(costs_at(&prog.body, &extents, &samples))
        .collect();
    let declared: std::collections::BTreeSet<Symbol> = prog
        .params
        .iter()
        .map(|p| p.name)
        .chain(prog.sizes.iter().copied())
        .collect();
    let mut best: Option<(Program, (Costs, usize))> = None;
    let mut queue: std::collections::VecDeque<(Program, bool)> =
        candidates.into_iter().map(|c| (c, false)).collect();
    while let Some((candidate, bracketed)) = queue.pop_front() {
        opts.check_time()?;
        let candidate = Program {
            body: crate::terms::letpasses::drop_false_brackets(&candidate.body),
            ..candidate
        };
        // well-formed: the input's type, no name the input does not declare
        let typed = crate::front::types::type_of(
            &candidate.body,
            &mut crate::front::types::param_env(prog),
        );
        let closed = crate::front::subst::free_names(&candidate.body)
            .iter()
            .all(|x| declared.contains(x));
        if !closed || typed.ok().as_ref() != Some(&prog.ret) {
            continue;
        }
        let mut ext2 = HashMap::new();
        collect_extents(&candidate.body, &mut ext2);
        let after: Costs = samples
            .iter()
            .map(label)
            .zip(costs_at(&candidate.body, &ext2, &samples))
            .collect();
        // a count the deadline cut short must not decide
        opts.check_time()?;
        let size = crate::terms::size::term_size(&candidate.body);
        // growth first, then the costs in sample order (`cost_key`)
        let key = |c: &Costs| cost_key(&c.iter().map(|a| a.1).collect::<Vec<_>>(), &samples);
        let cheaper_than = |(other, other_size): &(Costs, usize)| {
            key(&after)
                .cmp(&key(other))
                .then(size.cmp(other_size))
                .is_lt()
        };
        let never_costlier = after.iter().zip(&before).all(|(a, b)| a.1 <= b.1);
        if never_costlier && best.as_ref().is_none_or(|(_, c)| cheaper_than(c)) {
            best = Some((candidate, (after, size)));
        } else if !never_costlier && !bracketed {
            // costlier somewhere: perhaps only on an empty range, where a
            // factor moved out of a sum still multiplies
            let body = crate::terms::letpasses::bracket_empty_products(&candidate.body);
            if body != candidate.body {
                queue.push_back((Program { body, ..candidate }, true));
            }
        }
    }
    let (program, kept_input, cost_after) = match best {
        Some((candidate, (after, _))) => (candidate, false, after),
        None => (prog.clone(), true, before.clone()),
    };
    let stats = Stats {
        phases,
        cost_before: before,
        cost_after,
        kept_input,
        seconds: started.elapsed().as_secs_f64(),
    };
    Ok((program, stats))
}

/// Whether `candidate` costs no more than `reference` (a program of the
/// same parameters) at every extraction sample: sizes spread from about 5
/// to 10^6, the user's when given. (Not at the guard's tiny sizes: a
/// derivative that is linear where the reference is quadratic may still
/// cost more at n = 1.)
pub fn never_costlier(candidate: &Program, reference: &Program, user: Option<&Sizes>) -> bool {
    let samples = extraction_samples(reference, user);
    let (mut ours, mut theirs) = (HashMap::new(), HashMap::new());
    collect_extents(&candidate.body, &mut ours);
    collect_extents(&reference.body, &mut theirs);
    let theirs = costs_at(&reference.body, &theirs, &samples);
    costs_at(&candidate.body, &ours, &samples)
        .iter()
        .zip(theirs)
        .all(|(a, b)| *a <= b)
}

/// The cost of `e` at each sample, each assignment (sizes and relations)
/// counted once: the samples of a program without sizes, or with few, are
/// many copies of a few (and a long program takes long to count).
fn costs_at(e: &Expr, extents: &HashMap<Symbol, Affine>, samples: &[Sample]) -> Vec<u128> {
    let mut out: Vec<u128> = Vec::with_capacity(samples.len());
    for (k, s) in samples.iter().enumerate() {
        let same = samples[..k]
            .iter()
            .position(|t| t.sizes == s.sizes && t.relations == s.relations);
        out.push(match same {
            Some(j) => out[j],
            None => cost_at(e, extents, s),
        });
    }
    out
}

/// Rule names of every phase (for reports and tests).
pub fn phase_rule_names() -> Vec<String> {
    rule_set(&["simplify"])
        .iter()
        .map(|r| r.name.to_string())
        .collect()
}
