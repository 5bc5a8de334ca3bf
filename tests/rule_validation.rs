//! Every rewrite rule of `rules/*.rules` is validated by evaluation: random
//! well-typed instantiations of its left-hand side are rewritten by the rule
//! alone in a fresh e-graph, and every sampled term of the root class must
//! evaluate to the original's value (see `tests/common/rulecheck.rs`).
//!
//! (Except `rules/adjoint.rules`: see `tests/adjoint_rules.rs`.)
//!
//! `cargo test --release --test rule_validation -- --nocapture` prints the
//! coverage table (instantiations that made each rule fire).

use crate::common;

use atl_egg::egraph::rules::{
    all_specs, applier_fn, compile, parse_rules, Rhs, RuleSpec, RULE_FILES,
};
use common::rulecheck::{validate_rule, CheckConfig, RuleReport};
use std::time::Instant;

fn table(reports: &[RuleReport], cfg: &CheckConfig) -> String {
    let mut out = format!(
        "{:<26} {:<23} {:>8} {:>6} {:>8} {:>6} {:>11} {:>9}  status\n",
        "rule", "file", "attempts", "fired", "(as-is)", "shadow", "comparisons", "ill-typed"
    );
    for r in reports {
        let status = if r.validated(cfg) {
            "ok".to_string()
        } else if let Some(e) = &r.setup_error {
            format!("CANNOT INSTANTIATE: {e}")
        } else if !r.failures.is_empty() {
            "UNSOUND".to_string()
        } else {
            format!("NOT VALIDATED (fired {} < {})", r.fired, cfg.min_fired)
        };
        let status = if r.shadow_failures.is_empty() {
            status
        } else {
            format!("{status}; hygiene warning under shadowing")
        };
        out.push_str(&format!(
            "{:<26} {:<23} {:>8} {:>6} {:>8} {:>6} {:>11} {:>9}  {status}\n",
            r.name,
            r.file,
            r.attempts,
            r.fired,
            r.already_present,
            r.shadow_fired,
            r.comparisons,
            r.ill_typed + r.eval_errors
        ));
    }
    out.push_str(
        "fired: instantiations on which the rule fired (shadowing excluded); (as-is): of those, \
         the rule's result was already in the class (put there by the analysis); shadow: \
         instantiations where a binder reuses an outer name, which fired\n",
    );
    out
}

/// Validate `specs` on two threads (the machine has two cores).
fn validate_all(specs: &[RuleSpec], cfg: &CheckConfig) -> Vec<RuleReport> {
    let half = specs.len().div_ceil(2);
    let (a, b) = specs.split_at(half);
    let run = |part: &[RuleSpec]| -> Vec<RuleReport> {
        part.iter()
            .map(|s| {
                let rule = compile(s).unwrap_or_else(|e| panic!("{e}"));
                validate_rule(s, &rule, cfg)
            })
            .collect()
    };
    std::thread::scope(|sc| {
        let h = sc.spawn(|| run(b));
        let mut out = run(a);
        out.extend(h.join().unwrap());
        out
    })
}

#[test]
fn every_rule_is_validated_by_evaluation() {
    let started = Instant::now();
    let cfg = CheckConfig::default();
    // the adjoint rules are real-valued equalities of the extended language
    // that hold on the terms derivations make: tests/adjoint_rules.rs
    // validates them on instances taken from derivations
    let specs: Vec<RuleSpec> = all_specs()
        .into_iter()
        .filter(|s| s.file != "adjoint.rules")
        .collect();
    let reports = validate_all(&specs, &cfg);
    println!("{}", table(&reports, &cfg));
    let total_fired: usize = reports.iter().map(|r| r.fired).sum();
    let total_cmp: usize = reports.iter().map(|r| r.comparisons).sum();
    println!(
        "{} rules, {} instantiations fired, {} comparisons, {:.1} s",
        reports.len(),
        total_fired,
        total_cmp,
        started.elapsed().as_secs_f64()
    );
    let mut problems = vec![];
    for r in &reports {
        for f in &r.failures {
            problems.push(format!("UNSOUND {f}"));
        }
        for f in &r.shadow_failures {
            println!(
                "warning (binder hygiene, only when a binder reuses an outer name, \
                 which the front end never produces):\n{f}\n"
            );
        }
        if r.ill_typed > 0 || r.eval_errors > 0 {
            // a bug of the checker, not of the rule: report, but the rule
            // still has to fire enough on well-typed instances
            println!(
                "note: rule {}: {} ill-typed / {} unevaluable instantiations, e.g.\n  {}",
                r.name,
                r.ill_typed,
                r.eval_errors,
                r.ill_typed_examples.join("\n  ")
            );
        }
        if !r.validated(&cfg) && r.failures.is_empty() {
            problems.push(format!(
                "rule {} ({}) was never validated: fired on {} of {} instantiations (need {}){}",
                r.name,
                r.file,
                r.fired,
                r.attempts,
                cfg.min_fired,
                r.setup_error
                    .as_ref()
                    .map(|e| format!("; {e}"))
                    .unwrap_or_default()
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n\n"));
}

#[test]
fn rule_files_parse_and_compile() {
    for (file, text) in RULE_FILES {
        let specs = parse_rules(file, text).unwrap_or_else(|e| panic!("{e}"));
        assert!(!specs.is_empty(), "{file} holds no rule");
        // the file on disk is the one compiled in
        let path = format!("{}/rules/{file}", env!("CARGO_MANIFEST_DIR"));
        let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(&on_disk, text, "{file} differs from the compiled-in copy");
    }
    let specs = all_specs();
    let mut names = std::collections::HashSet::new();
    for s in &specs {
        assert!(
            names.insert(s.name.clone()),
            "rule name {} is used twice",
            s.name
        );
        compile(s).unwrap_or_else(|e| panic!("{e}"));
    }
    // every rule file on disk is in use (so validated by the test above)
    let dir = format!("{}/rules", env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".rules") {
            assert!(
                specs.iter().any(|s| s.file == name),
                "rules/{name} contributes no rule to all_specs()"
            );
        }
    }
}

#[test]
fn every_applier_is_registered() {
    for s in all_specs() {
        if let Rhs::Applier(name, args) = &s.rhs {
            assert!(
                applier_fn(name).is_some(),
                "rule {}: applier {name} is not registered",
                s.name
            );
            for a in args {
                assert!(
                    s.lhs.contains(a.as_str()),
                    "rule {}: applier argument {a} is not bound by the left-hand side",
                    s.name
                );
            }
        }
    }
    assert!(applier_fn("no-such-applier").is_none());
}

#[test]
fn malformed_rules_are_rejected() {
    let bad = [
        "no group here",
        "(group \"g\" (rule r (+ ?a ?b)))",
        "(group \"g\" (rule r (+ ?a ?b) :applier (no-such-applier ?a)))",
        "(group \"g\" (rule r (+ ?a ?b) (* ?a ?b) :if (no-such-condition ?a ?b)))",
        "(group \"g\" (rule r (+ ?a ?b) (* ?a ?b) :if (not-free ?a)))",
        "(group \"g\" (rule r (+ ?a ?b) (* ?a ?b) :if (settled ?a ?b)))",
        "(group \"g\" (rule r (+ ?a ?b) (* ?a ?b) :unknown-keyword (x)))",
        "(group \"g\" (rule r (+ ?a ?b) ?a)",
    ];
    for text in bad {
        let compiled = parse_rules("test.rules", text)
            .and_then(|specs| specs.iter().map(compile).collect::<Result<Vec<_>, _>>());
        assert!(compiled.is_err(), "accepted a malformed rule: {text}");
    }
}

fn spec(name: &str, lhs: &str, rhs: &str, conditions: Vec<(String, Vec<String>)>) -> RuleSpec {
    RuleSpec {
        file: "negative-test",
        group: "deliberately wrong".into(),
        name: name.into(),
        lhs: lhs.into(),
        rhs: Rhs::Pattern(rhs.into()),
        conditions,
        tags: vec![],
    }
}

/// The validator must catch wrong rules, or it proves nothing.
#[test]
fn the_validator_catches_wrong_rules() {
    let cfg = CheckConfig {
        max_attempts: 200,
        ..CheckConfig::default()
    };
    let not_free =
        |a: &str, b: &str| vec![("not-free".to_string(), vec![a.to_string(), b.to_string()])];
    let wrong = [
        // plainly wrong algebra
        spec("wrong-add-is-mul", "(+ ?a ?b)", "(* ?a ?b)", vec![]),
        // a missing side condition: ?a may mention the summation index
        spec(
            "wrong-sum-factor",
            "(sum ?i ?n (* ?a ?b))",
            "(* ?a (sum ?i ?n ?b))",
            vec![],
        ),
        // a missing side condition, on a let: caught only through shadowing
        spec(
            "wrong-let-lift",
            "(+ (let ?x ?a ?b) ?c)",
            "(let ?x ?a (+ ?b ?c))",
            vec![],
        ),
        // wrong iverson algebra: [p]a + [q]b is not [p](a + b)
        spec(
            "wrong-iverson-add",
            "(+ (iverson ?p ?a) ?b)",
            "(iverson ?p (+ ?a ?b))",
            vec![],
        ),
        // wrong predicate algebra
        spec("wrong-or-is-and", "(or ?p ?q)", "(and ?p ?q)", vec![]),
        // a side condition on the wrong variable
        spec(
            "wrong-condition",
            "(sum ?i ?n (* ?a ?b))",
            "(* ?a (sum ?i ?n ?b))",
            not_free("?i", "?b"),
        ),
    ];
    let mut missed = vec![];
    for s in &wrong {
        let rule = compile(s).unwrap();
        // capture needs a reused name: shadow often
        let cfg = if s.name == "wrong-let-lift" {
            CheckConfig {
                shadow: 0.9,
                target_fired: 50,
                ..cfg.clone()
            }
        } else {
            cfg.clone()
        };
        let r = validate_rule(s, &rule, &cfg);
        println!(
            "{}: fired {}, failures {} (+{} with shadowing){}",
            s.name,
            r.fired,
            r.failures.len(),
            r.shadow_failures.len(),
            r.failures
                .iter()
                .chain(&r.shadow_failures)
                .next()
                .map(|f| format!("\n  first: {f}"))
                .unwrap_or_default()
        );
        // a capture needs a shadowed name: those failures count here
        let caught = if s.name == "wrong-let-lift" {
            !r.shadow_failures.is_empty()
        } else {
            !r.failures.is_empty() && !r.validated(&cfg)
        };
        if !caught {
            missed.push(s.name.clone());
        }
    }
    assert!(missed.is_empty(), "the validator did not catch: {missed:?}");
    // and a correct rule passes
    let good = spec("good-add-comm", "(+ ?a ?b)", "(+ ?b ?a)", vec![]);
    let r = validate_rule(&good, &compile(&good).unwrap(), &cfg);
    assert!(r.validated(&cfg), "a correct rule failed: {:?}", r.failures);
}

/// The phases ask for rule sets by tag; every rule is in at least one, and
/// the sets hold what the phases need.
#[test]
fn rule_sets_by_tag() {
    use atl_egg::egraph::rules::rule_set;
    let names = |tags: &[&str]| -> Vec<String> {
        rule_set(tags).iter().map(|r| r.name.to_string()).collect()
    };
    let known = [
        "normalize",
        "simplify",
        "forward",
        "forward-cleanup",
        "adjoint",
        "adjoint-cleanup",
    ];
    for s in all_specs() {
        assert!(!s.tags.is_empty(), "rule {} is in no rule set", s.name);
        for t in &s.tags {
            assert!(
                known.contains(&t.as_str()),
                "rule {}: unknown rule set {t}",
                s.name
            );
        }
    }
    let forward = names(&["forward"]);
    assert!(forward.iter().any(|n| n == "d-let") && forward.iter().any(|n| n == "d-exp"));
    let adjoint = names(&["adjoint", "adjoint-cleanup"]);
    assert!(!adjoint.iter().any(|n| n == "d-let"));
    assert!(adjoint.iter().any(|n| n == "index-elim-sum"));
    assert!(!names(&["simplify"])
        .iter()
        .any(|n| n.starts_with("d-") || n.starts_with("adj-")));
}
