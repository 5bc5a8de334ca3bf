//! The one registry of named conditions and Rust appliers, the optimizer's
//! and the differentiation rules' alike, by the names `rules/` uses; and
//! every rule spec (the files' and the black boxes' forward rules).

use super::engine::{ApplierFn, Check};
use super::files::{parse_rules, RuleSpec, RULE_FILES};
use super::{derivatives, optimizer};
use egg::Var;

/// Every rule of every file (the black-box forward rules included).
pub fn all_specs() -> Vec<RuleSpec> {
    let mut out: Vec<RuleSpec> = RULE_FILES
        .iter()
        .flat_map(|(f, t)| parse_rules(f, t).unwrap_or_else(|e| panic!("bad rule file: {e}")))
        .collect();
    out.extend(derivatives::forward_blackbox_specs());
    out
}

/// The condition `(name args...)` of `rules/`; `None` for an unknown name
/// or a wrong number of arguments.
pub fn condition(name: &str, args: &[Var]) -> Option<Check> {
    use derivatives::{root_not_free, rooted_at, settled, tangent_free, tangent_not_free};
    use optimizer::{
        distinct, has_loop, index_fixed, is_const, no_new_multiple, not_bracket, not_exists,
        not_false, not_free, worth_grouping,
    };
    Some(match (name, args) {
        // the optimizer's
        ("not-free", &[x, e]) => not_free(x, e),
        ("distinct", &[x, y]) => distinct(x, y),
        ("has-loop", &[e]) => has_loop(e),
        ("is-const", &[k]) => is_const(k),
        ("worth-grouping", &[a, b, c]) => worth_grouping(a, b, c),
        ("index-fixed", &[i, p]) => index_fixed(i, p),
        ("not-bracket", &[e]) => not_bracket(e),
        ("not-exists", &[p]) => not_exists(p),
        ("not-false", &[p]) => not_false(p),
        ("no-new-multiple", &[a, b]) => no_new_multiple(a, b),
        // the differentiation rules'
        ("tangent-free", &[a]) => tangent_free(a),
        ("tangent-not-free", &[x, e]) => tangent_not_free(x, e),
        ("root-not-free", &[p, e]) => root_not_free(p, e),
        ("rooted-at", &[q, x]) => rooted_at(q, x, true),
        ("not-rooted-at", &[q, x]) => rooted_at(q, x, false),
        ("settled", &[b]) => settled(b),
        _ => return None,
    })
}

/// The Rust applier of `rules/` named `name`.
pub fn applier_fn(name: &str) -> Option<ApplierFn> {
    use derivatives::{
        adj_coeff_dot, adj_gen, adj_rev_let, d_const, d_let, d_maximum, d_minimum, d_var,
    };
    use optimizer::{
        exists_index_elim, gen_pushout, hoist_gen_invariant, iverson_merge, let_inline,
        let_lift_gen, let_lift_sum, let_pair_split, sum_index_elim,
    };
    Some(match name {
        // the optimizer's
        "gen-pushout" => gen_pushout,
        "hoist-gen-invariant" => hoist_gen_invariant,
        "iverson-merge" => iverson_merge,
        "let-inline" => let_inline,
        "let-lift-gen" => let_lift_gen,
        "let-lift-sum" => let_lift_sum,
        "let-pair-split" => let_pair_split,
        "sum-index-elim" => sum_index_elim,
        "exists-index-elim" => exists_index_elim,
        // the differentiation rules'
        "d-var" => d_var,
        "d-const" => d_const,
        "d-let" => d_let,
        "d-maximum" => d_maximum,
        "d-minimum" => d_minimum,
        "adj-gen" => adj_gen,
        "adj-rev-let" => adj_rev_let,
        "adj-coeff-dot" => adj_coeff_dot,
        _ => return None,
    })
}
