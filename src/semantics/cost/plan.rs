//! Counting plans: equalities solved, free loops as factors, one variable
//! counted by intervals, the rest enumerated within the budget.

use super::*;

#[derive(Default)]
pub(super) struct Stage {
    /// Comparisons; at a level, each mentions the level's slot.
    pub(super) cmps: Vec<Con>,
    /// Solved loop variables whose values opaque predicates read.
    pub(super) solved: Vec<(u32, Lin)>,
    /// Other predicates, evaluated per tuple.
    pub(super) opaque: Vec<u32>,
}

pub(super) struct Level {
    pub(super) slot: u32,
    pub(super) n: i64,
    pub(super) stage: Stage,
}

/// How to count the tuples of some loops where a conjunction holds.
#[derive(Default)]
pub(super) struct Plan {
    /// Certainly no tuple.
    pub(super) empty: bool,
    /// Product of the ranges of loop variables nothing mentions (`None` if
    /// it overflows `u128`).
    pub(super) factor: Option<u128>,
    /// Checked once, before any enumeration.
    pub(super) pre: Stage,
    /// Enumerated variables, outermost first.
    pub(super) levels: Vec<Level>,
    /// The variable counted by intervals, with its comparisons (the
    /// stage has nothing else).
    pub(super) counted: Option<Level>,
    /// An existential over one more variable (slot, range, comparisons)
    /// that the counted variable must also satisfy: then the counted
    /// variable's values are the shadow of a polygon.
    pub(super) counted_exists: Option<(u32, i64, Vec<Con>)>,
    /// For an existential whose one variable an equality fixes (at most one
    /// value satisfies it): that loop and the conjuncts, so that counting
    /// where the existential holds counts that loop too
    /// (`#{t : ∃c. P} = #{(t, c) : P}` when `c` is unique), in closed form
    /// where the conjuncts allow, instead of testing it at every tuple.
    pub(super) unique: Option<((u32, i64), Vec<u32>)>,
}

/// `loops` and `conj` with every existential of `conj` that has a unique
/// witness ([`Plan::unique`]) made loops and conjuncts of the count.
fn unfold_unique_exists(
    preds: &[PNode],
    loops: &[(u32, i64)],
    conj: &[u32],
) -> (Vec<(u32, i64)>, Vec<u32>) {
    fn go(preds: &[PNode], ids: &[u32], loops: &mut Vec<(u32, i64)>, out: &mut Vec<u32>) {
        let mut flat = Vec::new();
        flat_ids(preds, ids, &mut flat);
        for id in flat {
            if out.contains(&id) {
                continue;
            }
            match &preds[id as usize].kind {
                PKind::Exists(p) => match &p.unique {
                    // (a slot already looped over is the same binder: the
                    // same existential, already unfolded)
                    Some((l, c)) if !loops.iter().any(|x| x.0 == l.0) => {
                        loops.push(*l);
                        go(preds, c, loops, out);
                    }
                    Some(_) => {}
                    None => out.push(id),
                },
                _ => out.push(id),
            }
        }
    }
    let mut loops = loops.to_vec();
    let mut out = Vec::with_capacity(conj.len());
    go(preds, conj, &mut loops, &mut out);
    (loops, out)
}

/// The existential `id` when it is over one variable with comparisons only
/// (and mentions no slot of `solved`): its variable, range and comparisons.
fn simple_exists(preds: &[PNode], id: u32, solved: &[u32]) -> Option<(u32, i64, Vec<Con>)> {
    let PKind::Exists(p) = &preds[id as usize].kind else {
        return None;
    };
    let c = p.counted.as_ref()?;
    let plain = !p.empty
        && p.factor.is_some_and(|f| f > 0)
        && p.levels.is_empty()
        && p.counted_exists.is_none()
        && p.pre.opaque.is_empty()
        && p.pre.solved.is_empty()
        && c.stage.opaque.is_empty()
        && !preds[id as usize].slots.iter().any(|s| solved.contains(s));
    if !plain {
        return None;
    }
    let mut cons = c.stage.cmps.clone();
    cons.extend(p.pre.cmps.iter().cloned());
    Some((c.slot, c.n, cons))
}

impl Plan {
    pub(super) fn empty() -> Plan {
        Plan {
            empty: true,
            ..Plan::default()
        }
    }
}

pub(super) enum ItemKind {
    Cmp(Con),
    Opaque(u32),
}

/// A constraint of the plan, to be placed at a level.
pub(super) struct Item {
    pub(super) kind: ItemKind,
    /// Free loop slots this constraint depends on (sorted).
    pub(super) deps: Vec<u32>,
}

/// Plan the count of tuples of `loops` (slot, range) where all of `conj` hold.
pub(super) fn build_plan(preds: &[PNode], loops: &[(u32, i64)], conj: &[u32]) -> Result<Plan> {
    let (mut loops, conj) = unfold_unique_exists(preds, loops, conj);
    let conj = &conj[..];
    loops.sort_unstable();
    if loops.iter().any(|l| l.1 <= 0) {
        return Ok(Plan::empty());
    }
    let mut cmps = Vec::new();
    let mut opaque = Vec::new();
    split(preds, conj, &mut cmps, &mut opaque);
    let (solved, rest) = solve_equalities(cmps, &loops)?;
    let free: Vec<(u32, i64)> = loops
        .iter()
        .copied()
        .filter(|l| !solved.iter().any(|x| x.0.var == l.0))
        .collect();
    let Some((cons, needed_solved)) = constraint_items(preds, rest, &opaque, &solved, &free)?
    else {
        return Ok(Plan::empty());
    };
    place_items(preds, cons, needed_solved, &solved, &free)
}

/// A loop variable solved by an equality, and its range.
type SolvedLoop = (Solved<Slot>, i64);

/// The loop variables that equalities with a ±1 coefficient solve
/// (innermost candidate first, as the reference does: exact, no
/// divisibility guard), each solution over later-solved variables only
/// after back-substitution, with the solved variable's range; and the
/// comparisons left.
fn solve_equalities(cmps: Vec<Con>, loops: &[(u32, i64)]) -> Result<(Vec<SolvedLoop>, Vec<Con>)> {
    let mut solved: Vec<SolvedLoop> = Vec::new();
    let mut rest: Vec<Con> = Vec::new();
    for c in cmps {
        if let Con::Eq(_) = c {
            let mut c = c;
            for (s, _) in &solved {
                c = ck(c.substitute(s))?;
            }
            // divided by its coefficients' gcd (`2c == 2c'` is `c == c'`,
            // `2c == 2c' + 1` never holds), so more equalities are unit
            c = c.normalize();
            let cand = loops.iter().rev().find(|(v, _)| {
                matches!(c.form().coeff(*v), 1 | -1) && !solved.iter().any(|x| x.0.var == *v)
            });
            if let Some(&(v, n)) = cand {
                solved.push((ck(solve_for(c.form(), v))?.0, n));
                continue;
            }
            rest.push(c);
        } else {
            rest.push(c);
        }
    }
    // Back-substitute: each solution mentions only later-solved variables.
    for i in (0..solved.len()).rev() {
        for j in i + 1..solved.len() {
            solved[i].0 = ck(solved[i].0.substitute(&solved[j].0))?;
        }
    }
    Ok((solved, rest))
}

/// The free loop variables of `l`.
fn free_deps(l: &Lin, free: &[(u32, i64)]) -> Vec<u32> {
    l.names()
        .filter(|s| free.iter().any(|f| f.0 == *s))
        .collect()
}

/// Every constraint over the free variables as an item with its
/// dependencies: the comparisons left with the solutions substituted, the
/// solved variables' ranges, and the opaque predicates; and the solutions
/// that opaque predicates read. `None`: a constant comparison is false.
fn constraint_items(
    preds: &[PNode],
    rest: Vec<Con>,
    opaque: &[u32],
    solved: &[SolvedLoop],
    free: &[(u32, i64)],
) -> Result<Option<(Vec<Item>, Vec<usize>)>> {
    let mut cons: Vec<Item> = Vec::new();
    let push_cmp = |c: Con, cons: &mut Vec<Item>| -> bool {
        let l = c.form();
        if l.is_constant() {
            return c.holds_at(l.constant);
        }
        let deps = free_deps(l, free);
        cons.push(Item {
            kind: ItemKind::Cmp(c),
            deps,
        });
        true
    };
    for c in rest {
        let mut c = c;
        for (s, _) in solved {
            c = ck(c.substitute(s))?;
        }
        if !push_cmp(c, &mut cons) {
            return Ok(None);
        }
    }
    for (s, n) in solved {
        for c in in_range(&s.num, *n)? {
            if !push_cmp(c, &mut cons) {
                return Ok(None);
            }
        }
    }
    let mut needed_solved: Vec<usize> = Vec::new();
    for &id in opaque {
        let mut deps = Vec::new();
        for &s in &preds[id as usize].slots {
            if free.iter().any(|f| f.0 == s) {
                deps.push(s);
            } else if let Some(k) = solved.iter().position(|x| x.0.var == s) {
                union_into(&mut deps, &free_deps(&solved[k].0.num, free));
                needed_solved.push(k);
            }
        }
        deps.sort_unstable();
        deps.dedup();
        cons.push(Item {
            kind: ItemKind::Opaque(id),
            deps,
        });
    }
    needed_solved.sort_unstable();
    needed_solved.dedup();
    Ok(Some((cons, needed_solved)))
}

/// The plan's shape: variables nobody mentions are a factor; one variable
/// with only comparisons is counted by intervals; the rest are enumerated,
/// each constraint checked at the innermost level it depends on.
fn place_items(
    preds: &[PNode],
    cons: Vec<Item>,
    needed_solved: Vec<usize>,
    solved: &[SolvedLoop],
    free: &[(u32, i64)],
) -> Result<Plan> {
    let mentioned = |s: u32| cons.iter().any(|c| c.deps.binary_search(&s).is_ok());
    let mut factor: Option<u128> = Some(1);
    let mut remaining: Vec<(u32, i64)> = Vec::new();
    for &(s, n) in free {
        if mentioned(s) {
            remaining.push((s, n));
        } else {
            factor = factor.and_then(|f| f.checked_mul(n as u128));
        }
    }
    let solved_slots: Vec<u32> = solved.iter().map(|x| x.0.var).collect();
    // an opaque predicate on `s` blocks counting it, except one existential
    // that only `s` of the loops enters (counted as a shadow)
    let shadow_of = |c: &Item, s: u32| match c.kind {
        ItemKind::Opaque(id) if c.deps == [s] => simple_exists(preds, id, &solved_slots),
        _ => None,
    };
    let blocked = |s: u32| {
        let mut opaque = cons
            .iter()
            .filter(|c| matches!(c.kind, ItemKind::Opaque(_)) && c.deps.binary_search(&s).is_ok());
        match (opaque.next(), opaque.next()) {
            (None, _) => false,
            (Some(c), None) => shadow_of(c, s).is_none(),
            _ => true,
        }
    };
    let counted = remaining
        .iter()
        .copied()
        .filter(|(s, _)| !blocked(*s))
        .max_by_key(|&(_, n)| n);
    let mut levels: Vec<Level> = remaining
        .iter()
        .copied()
        .filter(|(s, _)| counted.is_none_or(|c| c.0 != *s))
        .map(|(slot, n)| Level {
            slot,
            n,
            stage: Stage::default(),
        })
        .collect();
    let level_of = |deps: &[u32], levels: &[Level]| -> Option<usize> {
        deps.iter()
            .filter_map(|s| levels.iter().position(|l| l.slot == *s))
            .max()
    };
    let mut pre = Stage::default();
    let mut counted_cmps = Vec::new();
    let mut counted_exists = None;
    for c in cons {
        let in_counted = counted.is_some_and(|(s, _)| c.deps.binary_search(&s).is_ok());
        if in_counted {
            let shadow = counted.and_then(|(s, _)| shadow_of(&c, s));
            match c.kind {
                ItemKind::Cmp(c) => counted_cmps.push(c),
                ItemKind::Opaque(_) if shadow.is_some() && counted_exists.is_none() => {
                    counted_exists = shadow;
                }
                ItemKind::Opaque(_) => {
                    return Err(internal("opaque constraint on a counted variable"))
                }
            }
            continue;
        }
        let stage = match level_of(&c.deps, &levels) {
            Some(k) => &mut levels[k].stage,
            None => &mut pre,
        };
        match c.kind {
            ItemKind::Cmp(c) => stage.cmps.push(c),
            ItemKind::Opaque(id) => stage.opaque.push(id),
        }
    }
    for k in needed_solved {
        let (Solved { var: s, num: e, .. }, _) = &solved[k];
        let deps = free_deps(e, free);
        let stage = match level_of(&deps, &levels) {
            Some(k) => &mut levels[k].stage,
            None => &mut pre,
        };
        stage.solved.push((*s, e.clone()));
    }
    Ok(Plan {
        empty: false,
        factor,
        pre,
        levels,
        counted: counted.map(|(slot, n)| Level {
            slot,
            n,
            stage: Stage {
                cmps: counted_cmps,
                ..Stage::default()
            },
        }),
        counted_exists,
        unique: None,
    })
}

/// Solved values and opaque predicates of a stage (its comparisons are
/// checked by the caller).
pub(super) fn stage_rest_ok(preds: &[PNode], m: &mut Machine, st: &Stage) -> Result<bool> {
    for (s, e) in &st.solved {
        let v = ck(e.eval(&at(&m.env)))?;
        match i64::try_from(v) {
            Ok(v) => m.env[*s as usize] = v,
            Err(_) => return Ok(false),
        }
    }
    for &id in &st.opaque {
        if !eval_pred(preds, m, id)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Number of tuples (or, with `exists`, 0/1: whether there is one).
pub(super) fn count(preds: &[PNode], m: &mut Machine, plan: &Plan, exists: bool) -> Result<u128> {
    if plan.empty {
        return Ok(0);
    }
    for c in &plan.pre.cmps {
        if !holds(c, &m.env)? {
            return Ok(0);
        }
    }
    if !stage_rest_ok(preds, m, &plan.pre)? {
        return Ok(0);
    }
    if !exists && least_steps(m, plan) > m.budget as u128 {
        // the enumeration would certainly spend the budget: fail now, not
        // after spending it
        return Err(budget_exceeded());
    }
    let c = count_level(preds, m, plan, 0, exists)?;
    if c == 0 || exists {
        return Ok(c.min(1));
    }
    plan.factor
        .and_then(|f| f.checked_mul(c))
        .ok_or_else(too_large)
}

/// A lower bound on the budget units that enumerating `plan`'s levels
/// takes: every value of an enumerated level takes one, and where the
/// outermost levels' ranges do not depend on one another (nor on anything
/// the enumeration sets) and no per-tuple predicate filters them, each
/// value of one enters every value of the next. So a nest of independent
/// ranges whose product exceeds the budget fails at once instead of after
/// spending it (a 2-D image loop around a counted stencil at sizes near
/// 10^6: 2·10^11 steps), with the same error it would have reached.
fn least_steps(m: &Machine, plan: &Plan) -> u128 {
    let set_by_enumeration = |s: u32| {
        plan.levels
            .iter()
            .any(|l| l.slot == s || l.stage.solved.iter().any(|(t, _)| *t == s))
            || plan.counted.as_ref().is_some_and(|c| c.slot == s)
    };
    let mut steps: u128 = 0;
    let mut product: u128 = 1;
    for (k, lv) in plan.levels.iter().enumerate() {
        let polygon =
            k + 1 == plan.levels.len() && lv.stage.opaque.is_empty() && plan.counted.is_some();
        let independent = lv.stage.cmps.iter().all(|c| {
            c.form()
                .names()
                .all(|s| s == lv.slot || !set_by_enumeration(s))
        });
        if polygon || !independent {
            break;
        }
        let Ok((lo, hi)) = interval(lv.slot, lv.n, &lv.stage.cmps, &m.env) else {
            break;
        };
        product = product.saturating_mul(if hi >= lo { (hi - lo + 1) as u128 } else { 0 });
        steps = steps.max(product);
        if !(lv.stage.opaque.is_empty() && lv.stage.solved.is_empty()) {
            break;
        }
    }
    steps
}

pub(super) fn count_level(
    preds: &[PNode],
    m: &mut Machine,
    plan: &Plan,
    k: usize,
    exists: bool,
) -> Result<u128> {
    let Some(lv) = plan.levels.get(k) else {
        return match &plan.counted {
            None => Ok(1),
            Some(c) => {
                m.take()?;
                let (lo, hi) = interval(c.slot, c.n, &c.stage.cmps, &m.env)?;
                if let Some((y, ny, cons)) = &plan.counted_exists {
                    let cell = (c.slot, lo, hi);
                    return count_polygon(m, cell, (*y, *ny), cons, Count::Shadow)?
                        .map(|n| if exists { n.min(1) } else { n })
                        .ok_or_else(|| internal("a divisibility in an existential"));
                }
                Ok(if hi >= lo { (hi - lo + 1) as u128 } else { 0 })
            }
        };
    };
    let (lo, hi) = interval(lv.slot, lv.n, &lv.stage.cmps, &m.env)?;
    // the innermost two variables with comparisons only: a polygon, counted
    // in closed form
    if let (true, true, Some(c)) = (
        k + 1 == plan.levels.len(),
        lv.stage.opaque.is_empty(),
        &plan.counted,
    ) {
        let cell = (lv.slot, lo, hi);
        let points = (plan.counted_exists.is_none())
            .then(|| count_polygon(m, cell, (c.slot, c.n), &c.stage.cmps, Count::Points))
            .transpose()?
            .flatten();
        if let Some(n) = points {
            return Ok(if exists { n.min(1) } else { n });
        }
    }
    if !exists && hi >= lo && (hi - lo) as u128 >= m.budget as u128 {
        // every value of the range would be visited: fail now, not later
        return Err(budget_exceeded());
    }
    let mut total: u128 = 0;
    let mut v = lo;
    while v <= hi {
        m.take()?;
        // lo >= 0 and hi < n <= i64::MAX
        m.env[lv.slot as usize] = v as i64;
        if stage_rest_ok(preds, m, &lv.stage)? {
            let c = count_level(preds, m, plan, k + 1, exists)?;
            total = total.checked_add(c).ok_or_else(too_large)?;
            if exists && total > 0 {
                return Ok(1);
            }
        }
        v += 1;
    }
    Ok(total)
}
