//! Rewrite rules as data.
//!
//! The files of `rules/` are S-expressions, read with `symbolic_expressions`
//! (the format is `rules/README.md`):
//!
//! ```text
//! (group "Figure 'Gen-Pushout'" :tags (normalize simplify)   <- figure, rule sets
//!   (rule NAME LHS RHS :if (not-free ?i ?p))                  <- egg patterns, conditions
//!   (rule NAME LHS :applier (gen-pushout ?i ?n ?e ?a))        <- a Rust applier
//!   (rule NAME (F ?a) ... :for (F fst snd)))                  <- a template
//! ```
//!
//! Phases ask for rule sets by tag ([`rule_set`]); the rules are parsed and
//! compiled once.
//!
//! Conditions and appliers are registered by name in one table,
//! [`registry`], which the rule files name: the optimizer's are in
//! [`optimizer`], the differentiation rules' in [`derivatives`]; each
//! applier says beside it why a pattern cannot express its rule. Imports go
//! one way: [`engine`] (what a condition and an applier see) <- the
//! conditions and appliers <- [`registry`] <- this module (compiling rules). Every rule
//! is validated by `tests/rule_validation.rs`, which evaluates both sides on
//! random instantiations.

pub mod derivatives;
pub mod engine;
pub mod files;
pub mod optimizer;
pub mod registry;

pub use engine::{check, ApplierFn, Built, Check, Ctx};
pub use files::{parse_rules, Rhs, RuleSpec, RULE_FILES};
pub use registry::{all_specs, applier_fn, condition};

use super::analysis::{AtlAnalysis, AtlGraph};
use super::language::Atl;
use egg::{ConditionalApplier, Id, Pattern, Rewrite, Subst, Var};
use engine::RustApplier;
use std::sync::OnceLock;

fn var(s: &str) -> Result<Var, String> {
    s.parse()
        .map_err(|e| format!("bad pattern variable {s}: {e:?}"))
}

/// Build an egg rewrite from a rule spec.
pub fn compile(spec: &RuleSpec) -> Result<Rewrite<Atl, AtlAnalysis>, String> {
    let err = |m: String| format!("{}: rule {}: {m}", spec.file, spec.name);
    let lhs: Pattern<Atl> = spec.lhs.parse().map_err(|e| err(format!("lhs: {e}")))?;
    let conds = spec
        .conditions
        .iter()
        .map(|(n, a)| {
            let vars = a.iter().map(|a| var(a)).collect::<Result<Vec<_>, _>>()?;
            condition(n, &vars).ok_or_else(|| {
                let s = if vars.len() == 1 { "" } else { "s" };
                format!("no condition '{n}' of {} argument{s}", vars.len())
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let name = spec.name.clone();
    macro_rules! with_conditions {
        ($applier:expr) => {
            if conds.is_empty() {
                Rewrite::new(name, lhs, $applier)
            } else {
                Rewrite::new(
                    name,
                    lhs,
                    ConditionalApplier {
                        condition: move |g: &mut AtlGraph, _: Id, s: &Subst| {
                            conds.iter().all(|c| c(g, s))
                        },
                        applier: $applier,
                    },
                )
            }
        };
    }
    match &spec.rhs {
        Rhs::Pattern(p) => {
            let rhs: Pattern<Atl> = p.parse().map_err(|e| err(format!("rhs: {e}")))?;
            with_conditions!(rhs).map_err(err)
        }
        Rhs::Applier(n, args) => {
            let f = applier_fn(n).ok_or_else(|| err(format!("unknown applier '{n}'")))?;
            let vars = args
                .iter()
                .map(|a| var(a))
                .collect::<Result<Vec<_>, _>>()
                .map_err(err)?;
            with_conditions!(RustApplier { f, vars }).map_err(err)
        }
    }
}

/// A compiled rule and the rule sets it belongs to.
type Tagged = (Vec<String>, Rewrite<Atl, AtlAnalysis>);

/// Every rule, compiled once, with its rule sets.
fn compiled() -> &'static [Tagged] {
    static RULES: OnceLock<Vec<Tagged>> = OnceLock::new();
    RULES.get_or_init(|| {
        all_specs()
            .iter()
            .map(|s| (s.tags.clone(), compile(s).unwrap_or_else(|e| panic!("{e}"))))
            .collect()
    })
}

/// The rules of the rule sets `tags` (the tags written in `rules/`): those
/// of the first set in file order, then those of the next set not taken yet,
/// and so on.
pub fn rule_set(tags: &[&str]) -> Vec<Rewrite<Atl, AtlAnalysis>> {
    let all = compiled();
    let mut taken = vec![false; all.len()];
    let mut out = vec![];
    for tag in tags {
        for (k, (ts, r)) in all.iter().enumerate() {
            if !taken[k] && ts.iter().any(|t| t == tag) {
                taken[k] = true;
                out.push(r.clone());
            }
        }
    }
    out
}
