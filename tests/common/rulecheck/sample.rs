//! Steps 3-4, on the e-graph side: harvesting acyclic, well-scoped terms
//! of the root class after the rule ran, and the checks that decide whether
//! an instance is observable (ill-scoped results, folding under `D`, a
//! result the analysis had already put in the class).

use super::*;

// ---------------------------------------------------------------------------
// 3.-4. rewriting, sampling terms, evaluating

/// Samples terms of classes by random descent, avoiding cycles and keeping
/// only *well-scoped* terms: every variable and index name must be bound by
/// an enclosing binder of the term or be free in the environment.
///
/// (Classes may hold ill-scoped terms: the analysis merges a predicate
/// decided from index extents, such as `(< (- i 1) i)` under `i`'s binder,
/// with `true`, and rules like `mul-zero` merge `(* 0 e[i])` with `0`; the
/// constant is then a well-scoped member of the class.)
pub(super) struct Sampler<'g> {
    pub(super) eg: &'g AtlGraph,
    pub(super) free_ok: HashSet<Symbol>,
    pub(super) steps: usize,
    /// Check scopes (off: to tell cycles from ill-scoped terms).
    pub(super) check_scope: bool,
}

impl Sampler<'_> {
    pub(super) fn name_of(&self, id: Id) -> Option<Symbol> {
        self.eg[id].nodes.iter().find_map(|n| match n {
            Atl::Sym(s) => Some(*s),
            _ => None,
        })
    }

    pub(super) fn in_scope(&self, x: Symbol, scope: &[Symbol]) -> bool {
        !self.check_scope || scope.contains(&x) || self.free_ok.contains(&x)
    }

    pub(super) fn class(
        &mut self,
        id: Id,
        rng: &mut Rng,
        path: &mut Vec<Id>,
        scope: &mut Vec<Symbol>,
        rec: &mut RecExpr<Atl>,
    ) -> Option<Id> {
        let id = self.eg.find(id);
        if self.steps == 0 || path.len() > 80 {
            return None;
        }
        self.steps -= 1;
        path.push(id);
        let eg = self.eg;
        let nodes: Vec<&Atl> = eg[id]
            .nodes
            .iter()
            .filter(|n| n.children().iter().all(|c| !path.contains(&eg.find(*c))))
            .collect();
        let start = if nodes.is_empty() {
            0
        } else {
            rng.below(nodes.len())
        };
        let mut result = None;
        for k in 0..nodes.len() {
            let n = nodes[(start + k) % nodes.len()];
            let mark = rec.as_ref().len();
            if let Some(r) = self.node(n, rng, path, scope, rec) {
                result = Some(r);
                break;
            }
            // drop what the failed attempt added
            if rec.as_ref().len() > mark {
                let kept: Vec<Atl> = rec.as_ref()[..mark].to_vec();
                *rec = RecExpr::default();
                for k in kept {
                    rec.add(k);
                }
            }
        }
        path.pop();
        result
    }

    pub(super) fn node(
        &mut self,
        n: &Atl,
        rng: &mut Rng,
        path: &mut Vec<Id>,
        scope: &mut Vec<Symbol>,
        rec: &mut RecExpr<Atl>,
    ) -> Option<Id> {
        match n {
            Atl::Var(x) => {
                let x = self.name_of(*x)?;
                if !self.in_scope(x, scope) {
                    return None;
                }
            }
            Atl::Aff(Idx(a)) if !a.names().all(|x| self.in_scope(x, scope)) => return None,
            _ => {}
        }
        // the body of a binder sees its name
        let (binder, body) = match n {
            Atl::Gen([i, _, b])
            | Atl::Sum([i, _, b])
            | Atl::Maximum([i, _, b])
            | Atl::Minimum([i, _, b])
            | Atl::ArgMax([i, _, b])
            | Atl::ArgMin([i, _, b])
            | Atl::Exists([i, _, b])
            | Atl::Let([i, _, b]) => (Some(self.name_of(*i)?), Some(*b)),
            _ => (None, None),
        };
        // the exponent of pow/dpow is read as a constant: take the class's
        // constant leaf (the analysis folds `(+ k -1)` into one)
        let exponent = n.as_call().and_then(|(_, _, k)| k);
        let mut kids = vec![];
        for &c in n.children() {
            if Some(c) == exponent {
                let eg = self.eg;
                if let Some(k) = eg[c].nodes.iter().find(|m| matches!(m, Atl::Num(_))) {
                    kids.push(rec.add(k.clone()));
                    continue;
                }
            }
            let inner = Some(c) == body;
            if inner {
                scope.push(binder.unwrap());
            }
            let r = self.class(c, rng, path, scope, rec);
            if inner {
                scope.pop();
            }
            kids.push(r?);
        }
        let mut k = 0;
        let node = n.clone().map_children(|_| {
            k += 1;
            kids[k - 1]
        });
        Some(rec.add(node))
    }
}

/// The names free in every environment: sizes, relations, outer variables,
/// their tangents, the outer index.
pub(super) fn environment_names() -> HashSet<Symbol> {
    let mut out: HashSet<Symbol> = ["n", "m", "S", "T", OUTER_INDEX]
        .iter()
        .map(|s| sym(s))
        .collect();
    for (x, _) in outer_vars() {
        out.insert(sym(&x));
        out.insert(sym(&tangent_name(&x)));
    }
    out
}

/// Distinct well-scoped terms of the root class: for every node of the
/// class, a few random completions. Also says whether some node that is not
/// in `before` (made by the rule) has a well-scoped completion.
pub(super) fn root_terms(
    eg: &AtlGraph,
    root: Id,
    before: &HashSet<Atl>,
    rng: &mut Rng,
    limit: usize,
) -> (Vec<RecExpr<Atl>>, bool) {
    let root = eg.find(root);
    let nodes: Vec<Atl> = eg[root].nodes.clone();
    let per = (limit / nodes.len().max(1)).max(2);
    let mut seen = HashSet::new();
    let mut out = vec![];
    let mut new_seen = false;
    let mut sampler = Sampler {
        eg,
        free_ok: environment_names(),
        steps: 0,
        check_scope: true,
    };
    // new nodes first, so that the limit never hides them
    let (new, old): (Vec<&Atl>, Vec<&Atl>) = nodes.iter().partition(|n| !before.contains(n));
    for n in new.into_iter().chain(old) {
        let is_new = !before.contains(n);
        for _ in 0..per * 2 {
            if out.len() >= limit {
                return (out, new_seen);
            }
            let mut rec = RecExpr::default();
            let mut path = vec![root];
            sampler.steps = 5000;
            if sampler
                .node(n, rng, &mut path, &mut vec![], &mut rec)
                .is_some()
            {
                new_seen |= is_new;
                if seen.insert(rec.to_string()) {
                    out.push(rec);
                }
            }
        }
    }
    (out, new_seen)
}

/// Can a node made by the rule at the root be completed to an acyclic term
/// when scopes are ignored? (Then its only acyclic terms are ill-scoped.)
pub(super) fn has_ill_scoped_term(
    eg: &AtlGraph,
    root: Id,
    before: &HashSet<Atl>,
    rng: &mut Rng,
) -> bool {
    let root = eg.find(root);
    let mut sampler = Sampler {
        eg,
        free_ok: HashSet::new(),
        steps: 0,
        check_scope: false,
    };
    eg[root]
        .nodes
        .iter()
        .filter(|n| !before.contains(n))
        .any(|n| {
            (0..8).any(|_| {
                sampler.steps = 5000;
                let mut rec = RecExpr::default();
                sampler
                    .node(n, rng, &mut vec![root], &mut vec![], &mut rec)
                    .is_some()
            })
        })
}

/// Is the term under a `D` with a sub-term that is not a literal but that
/// the analysis folds into a constant? `D` depends on the syntax of its
/// argument, and dual numbers disagree with folding under IEEE: `(D (sqrt
/// (relu -1)))` is `inf * 0 = NaN` with dual numbers but `(D 0) = 0` once
/// `(sqrt (relu -1))` is folded to `0`. Such instantiations are skipped.
pub(super) fn under_d_with_folding(term: &Term, eg: &AtlGraph) -> bool {
    let top = term.top();
    if !matches!(term.rec[top], Atl::D(_)) {
        return false;
    }
    let Some(ids) = eg.lookup_expr_ids(&term.rec) else {
        return false;
    };
    term.rec
        .as_ref()
        .iter()
        .zip(ids)
        .any(|(n, id)| !matches!(n, Atl::Num(_)) && eg[id].data.num.is_some())
}

/// Did the rule (an unconditional one with a pattern right-hand side) match
/// at the root with its result already in the root class?
pub(super) fn result_in_class(
    spec: &RuleSpec,
    rule: &Rewrite<Atl, AtlAnalysis>,
    eg: &AtlGraph,
    root: Id,
) -> bool {
    let Rhs::Pattern(rhs) = &spec.rhs else {
        return false;
    };
    if !spec.conditions.is_empty() {
        return false;
    }
    let Ok(rhs) = rhs.parse::<Pattern<Atl>>() else {
        return false;
    };
    let Some(matches) = rule.searcher.search_eclass(eg, root) else {
        return false;
    };
    matches.substs.iter().any(|subst| {
        let mut ids: Vec<Id> = vec![];
        for n in rhs.ast.as_ref() {
            let id = match n {
                ENodeOrVar::Var(v) => subst.get(*v).copied(),
                ENodeOrVar::ENode(n) => eg.lookup(n.clone().map_children(|c| ids[usize::from(c)])),
            };
            match id {
                Some(id) => ids.push(id),
                None => return false,
            }
        }
        ids.last().is_some_and(|id| eg.find(*id) == eg.find(root))
    })
}
