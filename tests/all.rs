//! Every integration test in one test binary: `cargo test --release` builds
//! and links one program instead of one per file, and runs all the tests
//! side by side on every core (a long test of one file no longer leaves a
//! core idle while the files after it wait).
//!
//! Each file of `tests/` is a module here, named after the file; run one
//! file's tests with `cargo test --release --test all NAME::`. A file of
//! `tests/` must be declared here (`every_test_file_runs` checks it).
//!
//! The shared test code (`tests/common/`) is one module of this binary,
//! which every file uses (`use crate::common;`): it is compiled once, and
//! what it computes once (such as the corpus's derivatives, [`common::derived`])
//! serves the tests of every file.

mod common;

#[path = "adjoint_rules.rs"]
mod adjoint_rules;
#[path = "black_boxes.rs"]
mod black_boxes;
#[path = "cache.rs"]
mod cache;
#[path = "cheap_gradients.rs"]
mod cheap_gradients;
#[path = "cli.rs"]
mod cli;
#[path = "compiled.rs"]
mod compiled;
#[path = "derivative_forms.rs"]
mod derivative_forms;
#[path = "derivatives.rs"]
mod derivatives;
#[path = "determinism.rs"]
mod determinism;
#[path = "diagnostics.rs"]
mod diagnostics;
#[path = "functions.rs"]
mod functions;
#[path = "gradients_always.rs"]
mod gradients_always;
#[path = "growth_bound.rs"]
mod growth_bound;
#[path = "hand_gradients.rs"]
mod hand_gradients;
#[path = "layering.rs"]
mod layering;
#[path = "limits.rs"]
mod limits;
#[path = "names.rs"]
mod names;
#[path = "npz.rs"]
mod npz;
#[path = "optimize_examples.rs"]
mod optimize_examples;
#[path = "properties.rs"]
mod properties;
#[path = "readme.rs"]
mod readme;
#[path = "rule_validation.rs"]
mod rule_validation;
#[path = "snapshots.rs"]
mod snapshots;
#[path = "stored.rs"]
mod stored;

/// Every `tests/*.rs` file is a module of this binary (with `autotests =
/// false` in `Cargo.toml`, cargo would silently skip a file not declared
/// here).
#[test]
fn every_test_file_runs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let here = include_str!("all.rs");
    let mut missing = vec![];
    for entry in std::fs::read_dir(format!("{root}/tests")).expect("tests/") {
        let name = entry.expect("a directory entry").file_name();
        let name = name.to_string_lossy();
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        if stem == "all" {
            continue;
        }
        if !here.contains(&format!("#[path = \"{name}\"]\nmod {stem};")) {
            missing.push(format!(
                "tests/all.rs does not declare `mod {stem};` (tests/{name})"
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
