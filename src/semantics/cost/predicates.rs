//! The predicate arena (`PNode`): conjunctions split into comparisons and
//! opaque parts, and the evaluation of what is not counted symbolically.

use super::*;

pub(super) enum PKind<'a> {
    /// An affine comparison.
    Cmp(Con),
    And(Vec<u32>),
    Or(Vec<u32>),
    Rel(&'a Relation, Vec<Lin>),
    /// Some tuple of the plan's loops satisfies its constraints.
    Exists(Box<Plan>),
}

pub(super) struct PNode<'a> {
    pub(super) kind: PKind<'a>,
    /// Free slots, sorted.
    pub(super) slots: Vec<u32>,
}

pub(super) fn mentions(preds: &[PNode], id: u32, s: u32) -> bool {
    preds[id as usize].slots.binary_search(&s).is_ok()
}

pub(super) fn union_into(out: &mut Vec<u32>, more: &[u32]) {
    out.extend_from_slice(more);
    out.sort_unstable();
    out.dedup();
}

/// Split a conjunction into comparisons (cloned) and other predicates. A
/// relation test also contributes the comparisons it implies (its indices
/// lie within the relation's dimensions), which bound any enumeration by
/// the size of the relation's data.
pub(super) fn split(preds: &[PNode], conj: &[u32], cmps: &mut Vec<Con>, opaque: &mut Vec<u32>) {
    for &id in conj {
        match &preds[id as usize].kind {
            PKind::Cmp(c) => cmps.push(c.clone()),
            PKind::And(ids) => split(preds, ids, cmps, opaque),
            PKind::Rel(r, args) => {
                opaque.push(id);
                if args.len() != r.dims().len() {
                    cmps.push(Con::never());
                    continue;
                }
                for (a, &d) in args.iter().zip(r.dims()) {
                    match i64::try_from(d)
                        .map_err(|_| overflow())
                        .and_then(|d| in_range(a, d))
                    {
                        Ok(range) => cmps.extend(range),
                        Err(_) => cmps.push(Con::never()),
                    }
                }
            }
            _ => opaque.push(id),
        }
    }
}

/// Disjunctions of at most this many comparison-only disjuncts are split:
/// by inclusion–exclusion in counts, by distribution in existentials.
pub const MAX_DISJUNCTS: usize = 4;
/// Inclusion–exclusion stops once this many terms are pending.
pub(super) const MAX_EXPANDED_TERMS: usize = 4096;

/// The conjuncts of `ids` with `and` nodes opened.
pub(super) fn flat_ids(preds: &[PNode], ids: &[u32], out: &mut Vec<u32>) {
    for &id in ids {
        match &preds[id as usize].kind {
            PKind::And(sub) => flat_ids(preds, sub, out),
            _ => out.push(id),
        }
    }
}

/// Made of comparisons and conjunctions only.
pub(super) fn is_pure_cmp(preds: &[PNode], id: u32) -> bool {
    match &preds[id as usize].kind {
        PKind::Cmp(..) => true,
        PKind::And(ids) => ids.iter().all(|&i| is_pure_cmp(preds, i)),
        _ => false,
    }
}

/// The disjuncts of a small disjunction of comparisons.
pub(super) fn cmp_or<'p>(preds: &'p [PNode], id: u32) -> Option<&'p [u32]> {
    match &preds[id as usize].kind {
        PKind::Or(ids)
            if ids.len() <= MAX_DISJUNCTS && ids.iter().all(|&i| is_pure_cmp(preds, i)) =>
        {
            Some(ids)
        }
        _ => None,
    }
}

/// A conjunction worth splitting at its first small disjunction of
/// comparisons: everything in it is a comparison or such a disjunction
/// (otherwise splitting would multiply enumeration work).
pub(super) fn split_point(preds: &[PNode], flat: &[u32]) -> Option<usize> {
    let mut pos = None;
    for (k, &id) in flat.iter().enumerate() {
        if cmp_or(preds, id).is_some() {
            pos = pos.or(Some(k));
        } else if !is_pure_cmp(preds, id) {
            return None;
        }
    }
    pos
}

/// Countable by intervals once each existential with a unique witness is
/// a loop of the count ([`super::plan::build_plan`]): comparisons,
/// conjunctions, and such existentials of countable conjuncts. Known
/// predicates are remembered (`Compiler::finish` asks of the same ones for
/// every term of an inclusion–exclusion).
#[derive(Default)]
pub(super) struct Countable {
    /// Per predicate: 0 not known yet, else 1 + (countable) + 2·(a small
    /// disjunction of countable predicates).
    known: Vec<u8>,
}

impl Countable {
    fn flags(&mut self, preds: &[PNode], id: u32) -> u8 {
        if self.known.len() < preds.len() {
            self.known.resize(preds.len(), 0);
        }
        let k = self.known[id as usize];
        if k != 0 {
            return k - 1;
        }
        let f = match &preds[id as usize].kind {
            PKind::Cmp(..) => 1,
            PKind::And(ids) => u8::from(ids.iter().all(|&i| self.is(preds, i))),
            PKind::Exists(p) => u8::from(
                p.unique
                    .as_ref()
                    .is_some_and(|(_, c)| c.iter().all(|&i| self.is(preds, i))),
            ),
            PKind::Or(ids) => {
                2 * u8::from(ids.len() <= MAX_DISJUNCTS && ids.iter().all(|&i| self.is(preds, i)))
            }
            PKind::Rel(..) => 0,
        };
        self.known[id as usize] = f + 1;
        f
    }

    fn is(&mut self, preds: &[PNode], id: u32) -> bool {
        self.flags(preds, id) & 1 != 0
    }

    /// The disjuncts of a small disjunction of countable predicates.
    pub(super) fn or<'p>(&mut self, preds: &'p [PNode], id: u32) -> Option<&'p [u32]> {
        match &preds[id as usize].kind {
            PKind::Or(ids) if self.flags(preds, id) & 2 != 0 => Some(ids),
            _ => None,
        }
    }
}

/// A guard worth splitting by inclusion–exclusion at its first small
/// disjunction of countable predicates: every term of the split is then
/// counted by intervals, with the unique existentials as loops (a
/// disjunction of such existentials, `[∃c. g == 2c ∧ ...] ∨ [∃c'. g == 2c' + 1
/// ∧ ...]`, brackets an addition of two branches of a strided gen's
/// adjoint).
///
/// Not where two different existentials bind the same slot (one
/// existential over a disjunction is split into several over its one
/// variable): a count unfolds one existential per slot.
pub(super) fn count_split_point(
    preds: &[PNode],
    flat: &[u32],
    countable: &mut Countable,
) -> Option<usize> {
    let mut pos = None;
    for (k, &id) in flat.iter().enumerate() {
        if countable.or(preds, id).is_some() {
            pos = pos.or(Some(k));
        } else if !countable.is(preds, id) {
            return None;
        }
    }
    let mut bound: Vec<(u32, u32)> = vec![];
    for &id in flat {
        unique_binders(preds, id, &mut bound);
    }
    bound.sort_unstable();
    bound.dedup();
    let shared = bound.windows(2).any(|w| w[0].0 == w[1].0);
    pos.filter(|_| !shared)
}

/// The (slot, existential) of every existential with a unique witness in
/// `id`.
fn unique_binders(preds: &[PNode], id: u32, out: &mut Vec<(u32, u32)>) {
    match &preds[id as usize].kind {
        PKind::And(ids) | PKind::Or(ids) => {
            ids.iter().for_each(|&i| unique_binders(preds, i, out));
        }
        PKind::Exists(p) => {
            if let Some(((slot, _), c)) = &p.unique {
                out.push((*slot, id));
                c.iter().for_each(|&i| unique_binders(preds, i, out));
            }
        }
        _ => {}
    }
}

/// The evaluation state: slot values and what is left of the budget.
pub(super) struct Machine {
    pub(super) env: Vec<i64>,
    pub(super) budget: u64,
    /// The command's deadline ([`crate::limits::deadline`]), looked at
    /// every [`CLOCK_EVERY`] steps.
    pub(super) deadline: Option<(crate::limits::CpuTime, std::time::Duration)>,
}

/// How many steps of counting go between two looks at the clock (a step
/// takes well under a microsecond).
pub(super) const CLOCK_EVERY: u64 = 1 << 12;

pub(super) fn budget_exceeded() -> Error {
    Error::eval(format!(
        "the program is too large to cost at these sizes (more than {ENUMERATION_BUDGET} loop iterations would have to be enumerated)"
    ))
}

impl Machine {
    pub(super) fn take(&mut self) -> Result<()> {
        if self.budget == 0 {
            return Err(budget_exceeded());
        }
        self.budget -= 1;
        if self.budget.is_multiple_of(CLOCK_EVERY) {
            self.check_deadline()?;
        }
        Ok(())
    }

    /// The time-limit error past the command's deadline.
    pub(super) fn check_deadline(&self) -> Result<()> {
        match self.deadline {
            Some((t, limit)) if crate::limits::CpuTime::now() >= t => {
                Err(crate::limits::time_limit_error(limit))
            }
            _ => Ok(()),
        }
    }
}

pub(super) fn eval_pred(preds: &[PNode], m: &mut Machine, id: u32) -> Result<bool> {
    match &preds[id as usize].kind {
        PKind::Cmp(c) => holds(c, &m.env),
        PKind::And(ids) => {
            for &i in ids {
                if !eval_pred(preds, m, i)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        PKind::Or(ids) => {
            for &i in ids {
                if eval_pred(preds, m, i)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        PKind::Rel(r, args) => {
            let mut small = [0i64; 8];
            let mut big = Vec::new();
            let buf: &mut [i64] = if args.len() <= small.len() {
                &mut small[..args.len()]
            } else {
                big.resize(args.len(), 0);
                &mut big
            };
            for (slot, a) in buf.iter_mut().zip(args) {
                match i64::try_from(ck(a.eval(&at(&m.env)))?) {
                    Ok(v) => *slot = v,
                    Err(_) => return Ok(false),
                }
            }
            Ok(r.test(buf))
        }
        PKind::Exists(plan) => Ok(count(preds, m, plan, true)? > 0),
    }
}
