//! Every rule of `rules/adjoint.rules` validated by evaluation, on instances
//! taken from real derivations.
//!
//! The adjoint rules are equalities between real-valued terms of the
//! extended language (`dot`, `D`, `dlet`, `coeff`, `drop`), and some hold
//! only on the terms the derivation makes (`adj-rev-let` needs a body that
//! is linear in the tangent it binds). So instead of generating random
//! terms, this test runs the adjoint phase on every corpus program, and for
//! each rule takes matches of its left-hand side from the saturated e-graph:
//!
//! 1. the left-hand side is instantiated with a smallest term of each
//!    matched class;
//! 2. that term alone goes into a fresh e-graph (same sigma, types and
//!    extents) where only this rule runs, once;
//! 3. every node of the root class then gives a term (children by smallest
//!    term), evaluated against the left-hand side in random environments:
//!    random inputs, bindings, cotangents and tangents, index variables in
//!    their ranges. The extension forms (`dot`, `D`, `dlet`, `drop`,
//!    `coeff`) are evaluated by their meaning, by the evaluator the rule
//!    validator shares (`common::extension`).
//!
//! `cargo test --release --test adjoint_rules -- --nocapture` prints the
//! table of instances per rule.

use crate::common;

use atl_egg::corpus::{random_inputs, CorpusProgram};
use atl_egg::derive::adjoint::{adjoint_egraph, adjoint_rules};
use atl_egg::egraph::analysis::{new_graph, AtlAnalysis};
use atl_egg::egraph::language::Atl;
use atl_egg::egraph::rules::{parse_rules, RULE_FILES};
use atl_egg::front::ast::{build, Program};
use atl_egg::rng::Rng;
use atl_egg::semantics::numerics::inner_product;
use atl_egg::semantics::value::{random_value, Sizes, Value};
use atl_egg::Symbol;
use common::extension::{extension_marks, ExtEval};
use egg::{AstSize, ENodeOrVar, Extractor, Id, Language, Pattern, RecExpr, Runner};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Append `src` to `dst`, returning the id of its root in `dst`.
fn append(dst: &mut RecExpr<Atl>, src: &RecExpr<Atl>) -> Id {
    let base = dst.as_ref().len();
    for n in src.as_ref() {
        dst.add(n.clone().map_children(|c| Id::from(usize::from(c) + base)));
    }
    Id::from(dst.as_ref().len() - 1)
}

/// `lhs` with its variables replaced by the given terms.
fn instantiate(
    lhs: &Pattern<Atl>,
    term_of: &mut dyn FnMut(egg::Var) -> RecExpr<Atl>,
) -> RecExpr<Atl> {
    let mut out = RecExpr::default();
    let mut ids: Vec<Id> = vec![];
    for n in lhs.ast.as_ref() {
        let id = match n {
            ENodeOrVar::Var(v) => append(&mut out, &term_of(*v)),
            ENodeOrVar::ENode(e) => out.add(e.clone().map_children(|c| ids[usize::from(c)])),
        };
        ids.push(id);
    }
    out
}

/// A term whose root is `node` and whose children are smallest terms.
fn term_with_root(ex: &Extractor<AstSize, Atl, AtlAnalysis>, node: &Atl) -> RecExpr<Atl> {
    let mut out = RecExpr::default();
    let n = node.clone().map_children(|c| {
        let (_, t) = ex.find_best(c);
        append(&mut out, &t)
    });
    out.add(n);
    out
}

#[derive(Default, Debug)]
struct Tally {
    instances: usize,
    fired: usize,
    comparisons: usize,
    eval_errors: usize,
    failures: Vec<String>,
}

fn finite(a: &Value) -> bool {
    inner_product(a, a).is_finite()
}

fn close(a: &Value, b: &Value) -> bool {
    let (x, y) = (inner_product(a, a), inner_product(b, b));
    let d = {
        // |a - b|^2 = a.a - 2 a.b + b.b, fine for the tolerance used
        let ab = inner_product(a, b);
        (x - 2.0 * ab + y).abs()
    };
    d <= 1e-12 * (1.0 + x.max(y)) || (x.is_nan() && y.is_nan())
}

/// Random environments for the free names of the derivation: inputs,
/// bindings, cotangents, tangents (by the analysis' types), the seed, index
/// variables in their ranges.
fn environment<'a>(
    prog: &Program,
    an: &'a AtlAnalysis,
    seed: Symbol,
    rng: &mut Rng,
) -> Option<ExtEval<'a>> {
    let mut sizes = Sizes::new();
    for s in &prog.sizes {
        sizes.insert(*s, 1 + (rng.next_u64() % 4) as i64);
    }
    let inputs = random_inputs(prog, &sizes, rng).ok()?;
    let mut vars: Vec<(Symbol, Value)> = vec![];
    let mut names: Vec<_> = an.diff.types.iter().collect();
    names.sort_by_key(|(k, _)| k.as_str());
    for (x, t) in names {
        let v = match inputs.values.get(x) {
            Some(v) => v.clone(),
            None => random_value(t, &sizes, &mut || rng.unit()).ok()?,
        };
        vars.push((*x, v));
    }
    vars.push((
        seed,
        random_value(&prog.ret, &sizes, &mut || rng.unit()).ok()?,
    ));
    let mut idx = vec![];
    let mut extents: Vec<_> = an.extents.iter().collect();
    extents.sort_by_key(|(k, _)| k.as_str());
    for (i, d) in extents {
        let n = d.eval_with(|s| sizes.get(&s).copied()).ok()?;
        idx.push((
            *i,
            if n > 0 {
                (rng.next_u64() % n as u64) as i64
            } else {
                0
            },
        ));
    }
    let mut ev = ExtEval::new(
        sizes,
        inputs.relations,
        vars,
        idx,
        &an.diff.tangents,
        50_000_000,
    );
    ev.types = Some(&an.diff.types);
    Some(ev)
}

/// Validate one instance `lhs` of `rule` (see the module docs).
fn check_instance(
    prog: &Program,
    rule: &egg::Rewrite<Atl, AtlAnalysis>,
    analysis: &AtlAnalysis,
    lhs: &RecExpr<Atl>,
    seed: Symbol,
    rng: &mut Rng,
    tally: &mut Tally,
) -> bool {
    tally.instances += 1;
    let mut g = new_graph(analysis.clone());
    let root = g.add_expr(lhs);
    g.rebuild();
    let matches = rule.search(&g);
    rule.apply(&mut g, &matches);
    g.rebuild();
    let root = g.find(root);
    let ex = Extractor::new(&g, AstSize);
    let others: Vec<RecExpr<Atl>> = g[root]
        .nodes
        .iter()
        .map(|n| term_with_root(&ex, n))
        .filter(|t| t != lhs)
        .collect();
    if others.is_empty() && g[root].nodes.len() <= 1 {
        if std::env::var_os("ADJ_DEBUG").is_some() && tally.instances < 3 {
            eprintln!("{} did not fire on {}", rule.name, lhs);
        }
        return false;
    }
    tally.fired += 1;
    let lext = extension_marks(lhs);
    for _ in 0..2 {
        let Some(mut ev) = environment(prog, &g.analysis, seed, rng) else {
            continue;
        };
        let want = match ev.eval(lhs, &lext, Id::from(lhs.as_ref().len() - 1)) {
            Ok(v) => v,
            Err(_) => {
                tally.eval_errors += 1;
                continue;
            }
        };
        for t in &others {
            let ext = extension_marks(t);
            match ev.eval(t, &ext, Id::from(t.as_ref().len() - 1)) {
                Ok(v) if close(&v, &want) => tally.comparisons += 1,
                // IEEE: NaN * 0 is NaN where the rules (like ATL's cost
                // model) take 0 * e = 0; such values are not compared
                Ok(v) if !finite(&v) || !finite(&want) => tally.eval_errors += 1,
                Ok(v) => tally.failures.push(format!(
                    "{}: {} = {:?}\n  but {} = {:?}",
                    prog.name, lhs, want, t, v
                )),
                Err(e) => tally.failures.push(format!("{}: {t}: {e}", prog.name)),
            }
        }
    }
    true
}

/// Smallest terms, but without bindings where the class has another form:
/// the adjoint rules apply to the let-free forms of linear forms (the
/// let-forms are what adj-swap-let and adj-coeff-let move lets out of).
struct FewLets;

impl egg::CostFunction<Atl> for FewLets {
    type Cost = usize;
    fn cost<C: FnMut(Id) -> usize>(&mut self, n: &Atl, mut costs: C) -> usize {
        let own = if matches!(n, Atl::Let(_) | Atl::DLet(_)) {
            1000
        } else {
            n.weight()
        };
        n.fold(own, |acc, c| acc.saturating_add(costs(c)))
    }
}

#[test]
fn every_adjoint_rule_is_validated_by_evaluation() {
    let text = RULE_FILES
        .iter()
        .find(|(f, _)| *f == "adjoint.rules")
        .expect("adjoint.rules")
        .1;
    let specs = parse_rules("adjoint.rules", text).expect("adjoint.rules parses");
    let lhs: HashMap<String, Pattern<Atl>> = specs
        .iter()
        .map(|s| (s.name.clone(), s.lhs.parse().expect("pattern")))
        .collect();
    let rules: Vec<_> = adjoint_rules();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let seed = Symbol::from("seed~0");
    let mut rng = Rng::new(20261122);
    let mut cases = vec![];
    for c in CorpusProgram::load_dir(&dir).expect("corpus") {
        let all = c.wrt_or_all();
        // all inputs, and the first alone (the others are then constants)
        if all.len() > 1 {
            cases.push((c.program.clone(), vec![all[0]], true));
        }
        // dead bindings kept once, for adj-rev-let-dead-code
        cases.push((c.program.clone(), all.clone(), false));
        cases.push((c.program, all, true));
    }
    for (prog, wrt, drop_dead) in &cases {
        if !*drop_dead && !prog.name.as_str().contains("dead") {
            continue;
        }
        let Ok((mut egraph, _)) = adjoint_egraph(prog, wrt, build::var(seed), *drop_dead) else {
            continue;
        };
        // keep what rules rewrite to constants, to find instances of them
        egraph.analysis.keep_constant_nodes = true;
        let runner = Runner::default()
            .with_egraph(egraph)
            .with_node_limit(6_000)
            .with_iter_limit(40)
            .with_time_limit(std::time::Duration::from_millis(400))
            .run(&rules);
        let eg = &runner.egraph;
        let ex = Extractor::new(eg, FewLets);
        for rule in rules.iter().filter(|r| lhs.contains_key(r.name.as_str())) {
            let pattern = &lhs[rule.name.as_str()];
            let tally = tallies.entry(rule.name.to_string()).or_default();
            let (mut tried, mut fired) = (0, 0);
            'search: for m in rule.search(eg) {
                for subst in &m.substs {
                    if fired >= 3 || tried >= 30 {
                        break 'search;
                    }
                    tried += 1;
                    let inst = instantiate(pattern, &mut |v| ex.find_best(subst[v]).1);
                    if inst.as_ref().len() > 400 {
                        continue;
                    }
                    if check_instance(prog, rule, &eg.analysis, &inst, seed, &mut rng, tally) {
                        fired += 1;
                    }
                }
            }
        }
    }
    println!(
        "{:<24} {:>9} {:>6} {:>11} {:>11} {:>8}",
        "rule", "instances", "fired", "comparisons", "eval errors", "failures"
    );
    for s in &specs {
        let t = tallies.entry(s.name.clone()).or_default();
        println!(
            "{:<24} {:>9} {:>6} {:>11} {:>11} {:>8}",
            s.name,
            t.instances,
            t.fired,
            t.comparisons,
            t.eval_errors,
            t.failures.len()
        );
    }
    let mut bad = vec![];
    for s in &specs {
        let t = &tallies[&s.name];
        for f in t.failures.iter().take(3) {
            bad.push(format!("{}: {f}", s.name));
        }
        if t.comparisons < 3 {
            bad.push(format!(
                "{}: only {} comparisons (instances {}, fired {})",
                s.name, t.comparisons, t.instances, t.fired
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "adjoint rules not validated:\n{}",
        bad.join("\n")
    );
}
