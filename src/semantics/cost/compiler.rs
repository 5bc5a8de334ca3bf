//! The compiler's state, shared by the symbolic and the direct cost:
//! binders as numbered slots, index expressions as affine forms over them
//! (sizes and outer index variables substituted), predicates compiled into
//! the arena, and existentials simplified where that is exact.

use super::*;

pub(super) enum Single {
    Const(bool),
    Node(u32),
}

pub(super) struct Compiler<'c, 'a> {
    pub(super) ctx: &'c CostCtx<'a>,
    pub(super) preds: Vec<PNode<'a>>,
    pub(super) m: Machine,
    /// Binders in scope: name to its slots, innermost last.
    pub(super) scope: HashMap<Symbol, Vec<u32>>,
    /// Guard entries and terms handled so far by the symbolic form.
    pub(super) work: u64,
    /// The symbolic form grew past [`SYMBOLIC_WORK_LIMIT`].
    pub(super) gave_up: bool,
    /// Comparisons, conjunctions and disjunctions made so far, to their
    /// node: an equal predicate made twice (a bracket repeated in the
    /// program, `[p]·[p]·e`) is one node, so guards repeat no conjunct and
    /// inclusion–exclusion does not expand the same disjunction twice.
    pub(super) interned: HashMap<PKey, u32>,
}

/// The predicates [`Compiler::node`] shares: those compared by value.
#[derive(PartialEq, Eq, Hash)]
pub(super) enum PKey {
    Cmp(Con),
    And(Vec<u32>),
    Or(Vec<u32>),
}

/// Beyond this much symbolic work (terms and guard entries touched), the
/// cost is evaluated directly instead: the symbolic form of a term nested
/// `d` deep under predicates of an enclosing loop has size `O(d²)`.
pub(super) const SYMBOLIC_WORK_LIMIT: u64 = 1 << 22;

pub(super) enum Resolved {
    Slot(u32),
    Value(i64),
}

/// A bound sum chain: the loops (slot, extent), the names bound (to
/// unbind, innermost last), the body under the chain, and whether every
/// dimension was valid.
pub(super) type BoundChain<'e> = (Vec<(u32, i64)>, Vec<Symbol>, &'e Expr, Result<()>);

impl<'c, 'a> Compiler<'c, 'a> {
    pub(super) fn new(ctx: &'c CostCtx<'a>, budget: u64) -> Compiler<'c, 'a> {
        Compiler {
            ctx,
            preds: Vec::new(),
            m: Machine {
                env: Vec::new(),
                budget,
                deadline: crate::limits::deadline(),
            },
            scope: HashMap::new(),
            work: 0,
            gave_up: false,
            interned: HashMap::new(),
        }
    }

    pub(super) fn spend(&mut self, k: usize) -> Result<()> {
        let before = self.work;
        self.work = self.work.saturating_add(k as u64 + 1);
        if before / CLOCK_EVERY != self.work / CLOCK_EVERY {
            self.m.check_deadline()?;
        }
        if self.work > SYMBOLIC_WORK_LIMIT {
            self.gave_up = true;
            return Err(Error::eval("the symbolic cost grew too large"));
        }
        Ok(())
    }

    pub(super) fn bind(&mut self, name: Symbol) -> Result<u32> {
        let slot = u32::try_from(self.m.env.len()).map_err(|_| internal("too many binders"))?;
        self.m.env.push(0);
        self.scope.entry(name).or_default().push(slot);
        Ok(slot)
    }

    pub(super) fn unbind(&mut self, name: Symbol) {
        if let Some(v) = self.scope.get_mut(&name) {
            v.pop();
        }
    }

    pub(super) fn resolve(&self, name: Symbol) -> Result<Resolved> {
        if let Some(&s) = self.scope.get(&name).and_then(|v| v.last()) {
            return Ok(Resolved::Slot(s));
        }
        if let Some(&(_, v)) = self.ctx.bindings.iter().rev().find(|(n, _)| *n == name) {
            return Ok(Resolved::Value(v));
        }
        if let Some(&v) = self.ctx.sizes.get(&name) {
            return Ok(Resolved::Value(v));
        }
        Err(Error::input(format!("size {name} is not given")))
    }

    pub(super) fn lin(&self, a: &Affine) -> Result<Lin> {
        let mut l = Lin::constant(a.constant as i128);
        for &(name, k) in &a.terms {
            match self.resolve(name)? {
                Resolved::Slot(s) => l = ck(l.plus_term(s, k as i128))?,
                Resolved::Value(v) => {
                    l.constant = (k as i128)
                        .checked_mul(v as i128)
                        .and_then(|p| p.checked_add(l.constant))
                        .ok_or_else(overflow)?
                }
            }
        }
        Ok(l)
    }

    pub(super) fn dim(&self, d: &Affine) -> Result<i64> {
        let l = self.lin(d)?;
        if !l.is_constant() {
            return Err(Error::eval(format!(
                "dimension {d} depends on an index variable"
            )));
        }
        if l.constant < 0 {
            return Err(Error::eval(format!(
                "dimension {d} is negative ({}) at these sizes",
                l.constant
            )));
        }
        i64::try_from(l.constant)
            .map_err(|_| Error::eval(format!("dimension {d} overflows 64-bit integers")))
    }

    pub(super) fn node(&mut self, kind: PKind<'a>, slots: Vec<u32>) -> u32 {
        let key = match &kind {
            PKind::Cmp(c) => Some(PKey::Cmp(c.clone())),
            PKind::And(ids) => Some(PKey::And(ids.clone())),
            PKind::Or(ids) => Some(PKey::Or(ids.clone())),
            PKind::Rel(..) | PKind::Exists(_) => None,
        };
        if let Some(&id) = key.as_ref().and_then(|k| self.interned.get(k)) {
            return id;
        }
        let id = self.preds.len() as u32;
        self.preds.push(PNode { kind, slots });
        if let Some(k) = key {
            self.interned.insert(k, id);
        }
        id
    }

    pub(super) fn cmp_node(&mut self, c: Con) -> u32 {
        let slots = c.form().names().collect();
        self.node(PKind::Cmp(c), slots)
    }

    pub(super) fn slots_of(&self, ids: &[u32]) -> Vec<u32> {
        let mut out = Vec::new();
        for &i in ids {
            out.extend_from_slice(&self.preds[i as usize].slots);
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Compile `p` as conjuncts appended to `out`; `false` if `p` certainly
    /// does not hold (every part is still compiled, for its errors).
    pub(super) fn conj(&mut self, p: &Pred, out: &mut Vec<u32>) -> Result<bool> {
        match p {
            Pred::True => Ok(true),
            Pred::False => Ok(false),
            Pred::Cmp(op, a, b) => {
                let c = compare(*op, &self.lin(a)?, &self.lin(b)?)?;
                let l = c.form();
                if l.is_constant() {
                    return Ok(c.holds_at(l.constant));
                }
                let id = self.cmp_node(c);
                out.push(id);
                Ok(true)
            }
            Pred::And(ps) => {
                let mut ok = true;
                for q in ps {
                    ok &= self.conj(q, out)?;
                }
                Ok(ok)
            }
            Pred::Or(ps) => {
                let mut ids = Vec::new();
                let mut any_true = false;
                for q in ps {
                    match self.single(q)? {
                        Single::Const(true) => any_true = true,
                        Single::Const(false) => {}
                        Single::Node(id) => ids.push(id),
                    }
                }
                if any_true {
                    return Ok(true);
                }
                match ids.len() {
                    0 => Ok(false),
                    1 => {
                        out.push(ids[0]);
                        Ok(true)
                    }
                    _ => {
                        let slots = self.slots_of(&ids);
                        let id = self.node(PKind::Or(ids), slots);
                        out.push(id);
                        Ok(true)
                    }
                }
            }
            Pred::Exists(i, d, q) => {
                let n = self.dim(d)?;
                let s = self.bind(*i)?;
                let mut body = Vec::new();
                let ok = self.conj(q, &mut body);
                self.unbind(*i);
                if !ok? {
                    return Ok(false);
                }
                self.exists(vec![(s, n)], &body, out)
            }
            Pred::Rel(r, args) => {
                let rel = self
                    .ctx
                    .relations
                    .get(r)
                    .ok_or_else(|| Error::input(format!("relation {r} is not given")))?;
                let lins = args
                    .iter()
                    .map(|a| self.lin(a))
                    .collect::<Result<Vec<_>>>()?;
                let mut slots: Vec<u32> = lins.iter().flat_map(|l| l.names()).collect();
                slots.sort_unstable();
                slots.dedup();
                let closed = slots.is_empty();
                let id = self.node(PKind::Rel(rel, lins), slots);
                if closed {
                    let v = eval_pred(&self.preds, &mut self.m, id)?;
                    self.preds.pop();
                    return Ok(v);
                }
                out.push(id);
                Ok(true)
            }
        }
    }

    pub(super) fn single(&mut self, p: &Pred) -> Result<Single> {
        let mut c = Vec::new();
        if !self.conj(p, &mut c)? {
            return Ok(Single::Const(false));
        }
        Ok(match c.len() {
            0 => Single::Const(true),
            1 => Single::Node(c[0]),
            _ => {
                let slots = self.slots_of(&c);
                Single::Node(self.node(PKind::And(c), slots))
            }
        })
    }

    /// `∃ loops : conj` as conjuncts appended to `out` (`false` if it
    /// certainly does not hold). Loop variables are eliminated where exact:
    /// by solving unit equalities, then by Fourier–Motzkin on variables whose
    /// comparisons all have coefficient ±1; what remains becomes one
    /// existential predicate with a counting plan.
    pub(super) fn exists(
        &mut self,
        loops: Vec<(u32, i64)>,
        conj: &[u32],
        out: &mut Vec<u32>,
    ) -> Result<bool> {
        let mut loops = loops;
        if loops.iter().any(|l| l.1 <= 0) {
            return Ok(false);
        }
        if let Some(holds) = self.exists_by_cases(&loops, conj, out)? {
            return Ok(holds);
        }
        let mut cmps = Vec::new();
        let mut opaque = Vec::new();
        split(&self.preds, conj, &mut cmps, &mut opaque);
        let blocked = self.slots_of(&opaque);
        let free = |s: u32| blocked.binary_search(&s).is_err();
        solve_unit_equalities(&mut cmps, &mut loops, free)?;
        if !decide_closed(&mut cmps) || !fourier_motzkin(&mut cmps, &mut loops, free)? {
            return Ok(false);
        }
        let mut ids: Vec<u32> = Vec::with_capacity(cmps.len() + opaque.len());
        for c in cmps {
            ids.push(self.cmp_node(c));
        }
        ids.extend(opaque);
        if loops.is_empty() {
            out.extend(ids);
            return Ok(true);
        }
        let mut plan = build_plan(&self.preds, &loops, &ids)?;
        if let [(s, n)] = loops[..] {
            let fixes = |&id: &u32| match &self.preds[id as usize].kind {
                PKind::Cmp(c @ Con::Eq(_)) => c.form().coeff(s) != 0,
                _ => false,
            };
            if ids.iter().any(fixes) {
                plan.unique = Some(((s, n), ids.clone()));
            }
        }
        let mut slots = self.slots_of(&ids);
        slots.retain(|s| !loops.iter().any(|l| l.0 == *s));
        if slots.is_empty() {
            return Ok(count(&self.preds, &mut self.m, &plan, true)? > 0);
        }
        let id = self.node(PKind::Exists(Box::new(plan)), slots);
        out.push(id);
        Ok(true)
    }

    /// `∃(C ∧ (A ∨ B)) = ∃(C ∧ A) ∨ ∃(C ∧ B)`, when `conj` has at most two
    /// disjunctions of comparisons and one to split on: whether the
    /// existential holds (its conjuncts appended to `out`); `None` when
    /// there is nothing to split.
    fn exists_by_cases(
        &mut self,
        loops: &[(u32, i64)],
        conj: &[u32],
        out: &mut Vec<u32>,
    ) -> Result<Option<bool>> {
        let mut flat = Vec::new();
        flat_ids(&self.preds, conj, &mut flat);
        flat.sort_unstable();
        flat.dedup();
        let ors = flat
            .iter()
            .filter(|&&id| cmp_or(&self.preds, id).is_some())
            .count();
        if ors > 2 {
            return Ok(None);
        }
        let Some(p) = split_point(&self.preds, &flat) else {
            return Ok(None);
        };
        let or_id = flat.remove(p);
        let disjuncts = cmp_or(&self.preds, or_id)
            .map(<[u32]>::to_vec)
            .unwrap_or_default();
        let mut branches = Vec::new();
        for d in disjuncts {
            let mut g = flat.clone();
            g.push(d);
            let mut got = Vec::new();
            if self.exists(loops.to_vec(), &g, &mut got)? {
                match got.len() {
                    0 => return Ok(Some(true)),
                    1 => branches.push(got[0]),
                    _ => {
                        let slots = self.slots_of(&got);
                        branches.push(self.node(PKind::And(got), slots));
                    }
                }
            }
        }
        Ok(Some(match branches.len() {
            0 => false,
            1 => {
                out.push(branches[0]);
                true
            }
            _ => {
                let slots = self.slots_of(&branches);
                let id = self.node(PKind::Or(branches), slots);
                out.push(id);
                true
            }
        }))
    }

    pub(super) fn guard_mentions(&self, guard: &[u32], s: u32) -> bool {
        guard.iter().any(|&id| mentions(&self.preds, id, s))
    }

    /// Bind the indices of a maximal chain of directly nested sums (see
    /// [`BoundChain`]).
    pub(super) fn bind_chain<'e>(&mut self, e: &'e Expr) -> BoundChain<'e> {
        let mut chain: Vec<(u32, i64)> = Vec::new();
        let mut names: Vec<Symbol> = Vec::new();
        let mut node = e;
        let mut res: Result<()> = Ok(());
        while let Expr::Sum(i, d, b) = node {
            match self.dim(d).and_then(|n| Ok((n, self.bind(*i)?))) {
                Ok((n, s)) => {
                    chain.push((s, n));
                    names.push(*i);
                }
                Err(err) => {
                    res = Err(err);
                    break;
                }
            }
            node = b;
        }
        (chain, names, node, res)
    }
}

/// Eliminate the loop variables (those `free` allows) that a unit equality
/// of `cmps` solves: exact, no divisibility guard; the solution's range
/// joins the comparisons.
fn solve_unit_equalities(
    cmps: &mut Vec<Con>,
    loops: &mut Vec<(u32, i64)>,
    free: impl Fn(u32) -> bool,
) -> Result<()> {
    'solve: loop {
        for i in 0..cmps.len() {
            let Con::Eq(f) = &cmps[i] else { continue };
            let cand = loops
                .iter()
                .rev()
                .copied()
                .find(|&(s, _)| matches!(f.coeff(s), 1 | -1) && free(s));
            if let Some((s, n)) = cand {
                let eq = cmps.swap_remove(i);
                let (sol, _) = ck(solve_for(eq.form(), s))?;
                for c in cmps.iter_mut() {
                    *c = ck(c.substitute(&sol))?;
                }
                cmps.extend(in_range(&sol.num, n)?);
                loops.retain(|l| l.0 != s);
                continue 'solve;
            }
        }
        return Ok(());
    }
}

/// Fourier–Motzkin on the loop variables (those `free` allows) whose
/// inequalities all have coefficient ±1 (exact over the integers then),
/// innermost first; a variable nothing mentions just goes (its range is
/// not empty). `Ok(false)`: the comparisons certainly do not hold.
fn fourier_motzkin(
    cmps: &mut Vec<Con>,
    loops: &mut Vec<(u32, i64)>,
    free: impl Fn(u32) -> bool,
) -> Result<bool> {
    const MAX_PAIRS: usize = 64;
    'fm: loop {
        for idx in (0..loops.len()).rev() {
            let (s, n) = loops[idx];
            if !free(s) {
                continue;
            }
            if cmps.iter().any(|c| c.mentions(s)) {
                // 0 <= s <= n - 1, then the inequalities on s
                let upper = ck(Lin::constant(n as i128 - 1).plus_term(s, -1))?;
                let mut ges = vec![Lin::var(s), upper];
                let mut unit = true;
                for c in cmps.iter() {
                    match (c, c.form().coeff(s)) {
                        (_, 0) => {}
                        (Con::Ge(f), 1 | -1) => ges.push(f.clone()),
                        _ => {
                            unit = false;
                            break;
                        }
                    }
                }
                let projected = if unit {
                    eliminate(&ges, s, MAX_PAIRS)
                } else {
                    None
                };
                let Some(projected) = projected else {
                    continue;
                };
                cmps.retain(|c| !c.mentions(s));
                cmps.extend(projected.into_iter().map(Con::Ge));
            }
            loops.remove(idx);
            if !decide_closed(cmps) {
                return Ok(false);
            }
            cmps.sort();
            cmps.dedup();
            continue 'fm;
        }
        return Ok(true);
    }
}
