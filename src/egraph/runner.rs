//! Running e-graphs, for the optimizer ([`crate::optimizer`]) and the
//! derivatives alike: the limits of a run ([`Options`]: counts, and the
//! command's deadline as a guard), the statistics of a phase
//! ([`PhaseStats`]), and the samples that extraction and the optimizer's
//! guard cost terms at.
//!
//! Only counts shape a result, so the same input gives the same output
//! whatever the machine's load; the command's time limit is a guard that
//! fails the command ([`Options::check_time`]), never a place to stop.

use super::analysis::{term_classes, term_nodes, AtlAnalysis};
use super::extract::Sample;
use crate::error::Result;
use crate::front::ast::{ParamKind, Program};
use crate::limits::CpuTime;
use crate::semantics::value::{Relation, Sizes};
use crate::symbol::Symbol;
use egg::{Runner, StopReason};
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
    pub deadline: Option<CpuTime>,
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
    pub fn deadline_at(&self) -> CpuTime {
        self.deadline
            .unwrap_or_else(|| CpuTime::now() + self.time_limit)
    }

    /// An error when the command's time is up: the command fails rather
    /// than return whatever it reached.
    pub fn check_time(&self) -> Result<()> {
        check_deadline(self.deadline_at(), self.time_limit)
    }
}

/// The error of a command past its time limit (`limit`), or nothing before
/// `deadline`.
pub fn check_deadline(deadline: CpuTime, limit: Duration) -> Result<()> {
    if CpuTime::now() < deadline {
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
            let bits: Vec<bool> = (0..total).map(&fill).collect();
            out.insert(p.name, Relation::from_dense(dims, &bits));
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
pub fn guard_samples(prog: &Program, user: Option<&Sizes>) -> Vec<Sample> {
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

/// A sample's sizes as text (`n=4,m=3`), the label of its cost.
pub fn label(s: &Sample) -> String {
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

/// The time limit given to egg's runner: none that can be reached. egg
/// measures wall time, which a busy machine stretches; the scheduler
/// ([`crate::egraph::bounded::Bounded`]) stops a run at the command's
/// deadline instead, measured on its CPU time, and the caller then fails
/// the command, so a run never ends early with a partial result.
pub const EGG_TIME_LIMIT: Duration = Duration::from_secs(1 << 40);

/// The extraction samples ordered smallest first: uniform sizes 0, 1, 2,
/// then the usual ones from small to large.
pub fn small_first_samples(prog: &Program, user: Option<&Sizes>) -> Vec<Sample> {
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
