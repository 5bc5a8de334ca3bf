//! What a condition and a Rust applier see: the e-graph and the matched
//! classes, readable as core terms ([`Ctx`]); what an applier returns
//! ([`Built`]); and the egg applier that runs one ([`RustApplier`]).

use crate::egraph::analysis::{name_of, smallest, AtlAnalysis, AtlGraph};
use crate::egraph::language::{from_rec, to_rec, Atl, FromRec};
use crate::front::affine::Affine;
use crate::front::ast::{Expr, Pred};
use crate::front::subst::{Replace, Substituter};
use crate::symbol::Symbol;
use egg::{Applier, Id, PatternAst, Subst, Var};

/// A side condition: a plain function of the e-graph and the classes a
/// match binds (as egg takes any closure for a [`egg::Condition`]).
pub type Check = Box<dyn Fn(&mut AtlGraph, &Subst) -> bool + Send + Sync>;

/// `f` as a [`Check`].
pub fn check(f: impl Fn(&mut AtlGraph, &Subst) -> bool + Send + Sync + 'static) -> Check {
    Box::new(f)
}

/// Terms bigger than this are not substituted into (keeps appliers cheap).
const MAX_SUBST_SIZE: usize = 4000;

/// What an applier sees: the matched classes, readable as core terms.
pub struct Ctx<'a> {
    pub(crate) egraph: &'a mut AtlGraph,
    ids: Vec<Id>,
    /// What this application is (rule and matched classes): names made by
    /// the applier are keyed by it, so reapplying makes the same names.
    key: String,
    /// Names made so far in this application.
    made: usize,
}

impl Ctx<'_> {
    pub(crate) fn id(&self, k: usize) -> Id {
        self.ids[k]
    }
    pub(crate) fn expr(&self, k: usize) -> Option<Expr> {
        let id = self.id(k);
        if self.egraph[id].data.size > MAX_SUBST_SIZE {
            return None;
        }
        from_rec(&smallest(self.egraph, id)?).ok()
    }
    pub(crate) fn pred(&self, k: usize) -> Option<Pred> {
        let rec = smallest(self.egraph, self.id(k))?;
        let root = Id::from(rec.as_ref().len() - 1);
        FromRec {
            node: |i: Id| &rec[i],
        }
        .pred(root)
        .ok()
    }
    pub(crate) fn name(&self, k: usize) -> Option<Symbol> {
        name_of(self.egraph, self.id(k))
    }
    pub(crate) fn aff(&self, k: usize) -> Option<Affine> {
        self.egraph[self.id(k)].data.aff.clone()
    }
    /// The `made`-th name of this application, based on `base`: the same
    /// each time the rule fires on the same classes.
    pub(crate) fn fresh(&mut self, base: Symbol) -> Symbol {
        let key = format!("{}/{}", self.key, self.made);
        self.made += 1;
        self.egraph.analysis.name_for(&key, base.as_str())
    }
    pub(crate) fn subst(&mut self, e: &Expr, r: Replace) -> Option<Expr> {
        let (key, made) = (&self.key, &mut self.made);
        let analysis: &mut AtlAnalysis = &mut self.egraph.analysis;
        let mut fresh = |b: Symbol| {
            let k = format!("{key}/{made}");
            *made += 1;
            analysis.name_for(&k, b.as_str())
        };
        Substituter::new(&mut fresh).expr(e, &r).ok()
    }
    pub(crate) fn subst_pred(&mut self, p: &Pred, r: Replace) -> Option<Pred> {
        let (key, made) = (&self.key, &mut self.made);
        let analysis: &mut AtlAnalysis = &mut self.egraph.analysis;
        let mut fresh = |b: Symbol| {
            let k = format!("{key}/{made}");
            *made += 1;
            analysis.name_for(&k, b.as_str())
        };
        Substituter::new(&mut fresh).pred(p, &r).ok()
    }
}

/// The result of an applier: an expression or a predicate to union with the
/// matched class.
pub enum Built {
    Expr(Expr),
    Pred(Pred),
    /// A class the applier added itself (terms with `D` nodes).
    Class(Id),
}

pub type ApplierFn = fn(&mut Ctx) -> Option<Built>;

pub(super) struct RustApplier {
    pub(super) f: ApplierFn,
    pub(super) vars: Vec<Var>,
}

impl Applier<Atl, AtlAnalysis> for RustApplier {
    fn apply_one(
        &self,
        egraph: &mut AtlGraph,
        eclass: Id,
        subst: &Subst,
        _ast: Option<&PatternAst<Atl>>,
        rule: egg::Symbol,
    ) -> Vec<Id> {
        let ids: Vec<Id> = self.vars.iter().map(|v| egraph.find(subst[*v])).collect();
        let key = format!("{rule}/{}/{ids:?}", egraph.find(eclass));
        let mut ctx = Ctx {
            egraph,
            ids,
            key,
            made: 0,
        };
        let Some(built) = (self.f)(&mut ctx) else {
            return vec![];
        };
        let new = match built {
            Built::Expr(e) => egraph.add_expr(&to_rec(&e)),
            Built::Pred(p) => {
                let mut t = crate::egraph::language::ToRec::default();
                t.pred(&p);
                egraph.add_expr(&t.rec)
            }
            Built::Class(id) => id,
        };
        if egraph.union(eclass, new) {
            vec![new]
        } else {
            vec![]
        }
    }

    fn vars(&self) -> Vec<Var> {
        self.vars.clone()
    }
}
