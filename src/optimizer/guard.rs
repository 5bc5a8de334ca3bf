//! The optimizer's guard ([`guard`]): of the candidate programs, the
//! cheapest that is well formed and costs no more than the input at every
//! checked sample; the input when there is none.

use crate::egraph::extract::{cost_at, cost_key, Sample};
use crate::egraph::runner::{extraction_samples, guard_samples, label, Options, PhaseStats};
use crate::error::Result;
use crate::front::ast::{Expr, Program};
use crate::semantics::value::Sizes;
use crate::symbol::Symbol;
use crate::terms::extents::collect_extents;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

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

type Costs = Vec<(String, u128)>;

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
    let before = labelled_costs(&prog.body, &samples);
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
        let after = labelled_costs(&candidate.body, &samples);
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
    let theirs = costs_at(&reference.body, &samples);
    costs_at(&candidate.body, &samples)
        .iter()
        .zip(theirs)
        .all(|(a, b)| *a <= b)
}

/// The cost of `e` at each sample, labelled by the sample's sizes.
fn labelled_costs(e: &Expr, samples: &[Sample]) -> Costs {
    samples
        .iter()
        .map(label)
        .zip(costs_at(e, samples))
        .collect()
}

/// The cost of `e` at each sample, each assignment (sizes and relations)
/// counted once: the samples of a program without sizes, or with few, are
/// many copies of a few (and a long program takes long to count).
fn costs_at(e: &Expr, samples: &[Sample]) -> Vec<u128> {
    let mut extents = HashMap::new();
    collect_extents(e, &mut extents);
    let extents = &extents;
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
