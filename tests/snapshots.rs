//! Snapshot tests over the corpus (`corpus/*.atl`), stored with insta under
//! the top-level `snapshots/` directory: one test, run for each corpus
//! file, with one snapshot per kind named `<kind>@<file>.snap`:
//!
//! * `front@<file>`: the elaborated core program (`program_to_string`) and
//!   its work cost and input/output cost at each size set of the metadata;
//! * `optimize@<file>`: the optimized program, its cost before/after at
//!   each size set, and per phase the e-graph's nodes, classes, iterations
//!   and stop reason (never times: they vary from run to run);
//! * `grad@<file>` (functions returning `R` only): the optimized gradient
//!   with respect to the metadata's `wrt` (all real inputs without one), the
//!   per-phase statistics, and at each size set `io_cost(f)`,
//!   `io_cost(grad)` and their ratio (3 decimals), `f` being the program as
//!   written (the paper's theorem bounds the ratio by 4).
//!
//! The optimized program and the gradient must print with readable names
//! that are C identifiers (`common::printed`); a bad name is the snapshot's
//! error.
//!
//! Metadata comments of a corpus file (anywhere in the file):
//! `; sizes: n=3 | n=8 | n=24` (size sets separated by `|`; a program without
//! sizes gets one empty size set), `; wrt: x,w`, `; seed: N`.
//!
//! Determinism: egg's `deterministic` feature is on, names order and hash by
//! their text (so what the test process derived before does not matter),
//! and the optimizer runs
//! with a 600 s time limit so that only the (default) node and iteration
//! limits stop it; results do not depend on the machine's speed. The
//! optimizer gets no user sizes (`Options::sizes = None`, as `atl-egg
//! optimize FILE`), so one optimized program serves every size set. The
//! optimized programs and gradients are those the other files' tests check
//! (`common::derived`, derived once for the test binary).
//!
//! Relations: a relation parameter gets a fixed pseudo-random value per size
//! set, `random_relation` with density 0.3 fed by [`relation_stream`] (the
//! top 53 bits of a 64-bit LCG with Knuth's MMIX constants, mapped to
//! `[-1, 1]`) from the file's `; seed:` (1 without one) plus the size set's
//! position; the relations of one size set are drawn in parameter order from
//! the same stream. This stream is part of what the snapshots store (the
//! costs depend on which entries hold), so it is written out here rather
//! than drawn from the crate's generator (`atl_egg::rng`), whose values
//! differ: changing it would change the stored costs.
//!
//! Every file is checked before the test fails. Update with
//! `INSTA_UPDATE=always cargo test --release --test snapshots`; `.ci/run`
//! rejects a snapshot file that no test refers to (a renamed or removed
//! corpus file leaves one behind: delete it).

use crate::common;

use atl_egg::backend::sexp::program_to_string;
use atl_egg::corpus::CorpusProgram;
use atl_egg::front::ast::{ParamKind, Program, Type};
use atl_egg::optimizer::Stats;
use atl_egg::semantics::cost::{cost, io_cost};
use atl_egg::semantics::value::{random_relation, Relation, Sizes};
use atl_egg::Symbol;
use common::par::par_map;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One corpus file.
struct Case {
    prog: Program,
    size_sets: Vec<Sizes>,
    wrt: Vec<String>,
    seed: u64,
}

fn case(path: &std::path::Path) -> Result<Case, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let name = path.file_stem().unwrap_or_default().to_string_lossy();
    let c = CorpusProgram::parse(&name, &text).map_err(|e| e.to_string())?;
    Ok(Case {
        wrt: c.wrt.iter().map(|w| w.to_string()).collect(),
        prog: c.program,
        size_sets: c.size_sets,
        seed: c.seed,
    })
}

/// The snapshots' relation entries: reals in `[-1, 1]` from a 64-bit LCG
/// (MMIX constants, top 53 bits); see the module documentation.
fn relation_stream(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// The fixed relations of `case` at its `k`-th size set.
fn relations(case: &Case, k: usize) -> Result<HashMap<Symbol, Relation>, String> {
    let sizes = &case.size_sets[k];
    let mut next = relation_stream(case.seed.wrapping_add(k as u64));
    let mut out = HashMap::new();
    for p in &case.prog.params {
        if let ParamKind::Relation(dims) = &p.kind {
            let r = random_relation(dims, sizes, 0.3, &mut next)
                .map_err(|e| format!("relation {} at {}: {e}", p.name, label(sizes)))?;
            out.insert(p.name, r);
        }
    }
    Ok(out)
}

fn label(sizes: &Sizes) -> String {
    if sizes.is_empty() {
        return "(no sizes)".into();
    }
    sizes.to_string()
}

fn show_cost(r: atl_egg::Result<u128>) -> String {
    match r {
        Ok(c) => c.to_string(),
        Err(e) => format!("error: {e}"),
    }
}

fn write_stats(out: &mut String, stats: &Stats) {
    out.push_str("phases:\n");
    for p in &stats.phases {
        writeln!(
            out,
            "  {}: iterations {}, nodes {}, classes {}, stop: {}",
            p.phase, p.iterations, p.nodes, p.classes, p.stop_reason
        )
        .unwrap();
    }
    writeln!(out, "kept input: {}", stats.kept_input).unwrap();
}

fn front(case: &Case) -> Result<String, String> {
    let mut out = String::new();
    writeln!(out, "{}", program_to_string(&case.prog)).unwrap();
    out.push_str("\ncost at each size set (work cost / io cost):\n");
    for (k, sizes) in case.size_sets.iter().enumerate() {
        let rels = relations(case, k)?;
        writeln!(
            out,
            "  {}: {} / {}",
            label(sizes),
            show_cost(cost(&case.prog, sizes, &rels)),
            show_cost(io_cost(&case.prog, sizes, &rels)),
        )
        .unwrap();
    }
    Ok(out)
}

/// The program of command `kind` (`optimize`, `grad`) on the corpus file
/// `name`, and its statistics: those of the corpus's shared derivation
/// (`common::derived`).
struct Made {
    program: &'static Program,
    stats: &'static Stats,
}

fn made(name: &str, kind: &str) -> Result<Made, String> {
    let d = common::derived::named(name);
    let program = match kind {
        "optimize" => Some(&d.optimize),
        "grad" => d.grad.as_ref(),
        _ => None,
    };
    match (program, d.stats(kind)) {
        (Some(program), Some(stats)) => Ok(Made { program, stats }),
        _ => Err(format!("{kind}: not derived")),
    }
}

/// The `optimize` snapshot, and the program as the command line prints it.
fn optimized(name: &str, case: &Case) -> Result<(String, String), String> {
    let res = made(name, "optimize")?;
    bad_names(&common::printed::check_printed("optimize", res.program))?;
    let printed = program_to_string(res.program);
    let mut out = String::new();
    writeln!(out, "{printed}").unwrap();
    out.push_str("\ncost at each size set (before -> after):\n");
    for (k, sizes) in case.size_sets.iter().enumerate() {
        let rels = relations(case, k)?;
        writeln!(
            out,
            "  {}: {} -> {}",
            label(sizes),
            show_cost(cost(&case.prog, sizes, &rels)),
            show_cost(cost(res.program, sizes, &rels)),
        )
        .unwrap();
    }
    write_stats(&mut out, res.stats);
    Ok((out, printed))
}

/// The `grad` snapshot, and the program as the command line prints it.
fn gradient(name: &str, case: &Case) -> Result<(String, String), String> {
    let wrt: Vec<&str> = case.wrt.iter().map(String::as_str).collect();
    let res = made(name, "grad")?;
    bad_names(&common::printed::check_printed("grad", res.program))?;
    let shown: Vec<String> = if wrt.is_empty() {
        case.prog
            .real_params()
            .map(|(n, _)| n.to_string())
            .collect()
    } else {
        case.wrt.clone()
    };
    let printed = program_to_string(res.program);
    let mut out = String::new();
    writeln!(out, "wrt: {}\n", shown.join(",")).unwrap();
    writeln!(out, "{printed}").unwrap();
    out.push_str("\nio cost at each size set (f / grad = ratio):\n");
    for (k, sizes) in case.size_sets.iter().enumerate() {
        let rels = relations(case, k)?;
        let f = io_cost(&case.prog, sizes, &rels);
        let g = io_cost(res.program, sizes, &rels);
        let ratio = match (&f, &g) {
            (Ok(f), Ok(g)) if *f > 0 => format!("{:.3}", *g as f64 / *f as f64),
            _ => "-".into(),
        };
        writeln!(
            out,
            "  {}: {} / {} = {}",
            label(sizes),
            show_cost(f),
            show_cost(g),
            ratio
        )
        .unwrap();
    }
    write_stats(&mut out, res.stats);
    Ok((out, printed))
}

/// An error listing the names a printed program should not use.
fn bad_names(bad: &[String]) -> Result<(), String> {
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "names that are not readable C identifiers: {bad:?}"
        ))
    }
}

/// The snapshot of one kind, or the error that stopped it as its content (so
/// that it differs from the stored snapshot and the test fails, showing why).
fn assert_kind(kind: &str, content: Result<String, String>) {
    let content = content.unwrap_or_else(|e| format!("error: {e}"));
    insta::assert_snapshot!(kind, content)
}

/// The snapshots of one corpus file: `front`, `optimize` and, for a function
/// returning `R`, `grad`; or why the file did not load.
/// Also the programs the command line must print for `optimize` and `grad`.
struct Computed {
    front: Result<String, String>,
    optimize: Result<String, String>,
    grad: Option<Result<String, String>>,
    printed: Vec<(&'static str, String)>,
    wrt: Vec<String>,
}

fn compute(path: &Path) -> Result<Computed, String> {
    let case = case(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut printed = vec![];
    let mut split = |kind: &'static str, r: Result<(String, String), String>| {
        r.map(|(content, program)| {
            printed.push((kind, program));
            content
        })
    };
    let name = path.file_stem().unwrap_or_default().to_string_lossy();
    let optimize = split("optimize", optimized(&name, &case));
    let grad = (case.prog.ret == Type::Real).then(|| split("grad", gradient(&name, &case)));
    Ok(Computed {
        front: front(&case),
        optimize,
        grad,
        printed,
        wrt: case.wrt.clone(),
    })
}

/// The phases of the corpus's snapshots that still stop at a default limit
/// where the command line warns (a per-binding phase: not a whole-program
/// pass, not differentiation): `(kind, file, phase)`. Every other phase of
/// every corpus program finishes under the default limits.
const STILL_LIMITED: [(&str, &str, &str); 0] = [];

/// The phases of one snapshot's statistics that stopped at a node or
/// iteration limit and that the command line warns about.
fn limited_phases(content: &str) -> Vec<String> {
    content
        .lines()
        .filter_map(|l| l.trim().split_once(": iterations "))
        .filter(|(phase, rest)| {
            let stop = rest.rsplit("stop: ").next().unwrap_or_default();
            (stop.starts_with("node limit") || stop.starts_with("iteration limit"))
                && !phase.contains("(whole,")
                && !phase.starts_with("differentiat")
        })
        .map(|(phase, _)| phase.to_string())
        .collect()
}

/// Every phase that stops at a default limit (the snapshots' statistics,
/// as computed), sorted.
fn all_limited(computed: &HashMap<std::ffi::OsString, Result<Computed, String>>) -> Vec<String> {
    let mut out = vec![];
    for (file, c) in computed {
        let Ok(c) = c else { continue };
        let kinds = [("optimize", Some(&c.optimize)), ("grad", c.grad.as_ref())];
        for (kind, content) in kinds {
            if let Some(Ok(content)) = content {
                for phase in limited_phases(content) {
                    out.push(format!("{kind} {} {phase}", file.to_string_lossy()));
                }
            }
        }
    }
    out.sort();
    out
}

/// One test per corpus file: the body runs for each `corpus/*.atl`, naming
/// its snapshots `<kind>@<file>`; a failing file does not stop the
/// others, and the test fails at the end listing every failed snapshot. The
/// snapshots' contents are computed first, on every core.
#[test]
fn corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus/ reads")
        .map(|e| e.expect("corpus/ reads").path())
        .filter(|p| p.extension().is_some_and(|e| e == "atl"))
        .collect();
    paths.sort();
    // the corpus's optimized programs and gradients, derived once (on every
    // core) for every file's tests
    common::derived::derived();
    let computed: HashMap<std::ffi::OsString, Result<Computed, String>> = paths
        .iter()
        .map(|p| p.file_name().unwrap_or_default().to_owned())
        .zip(par_map(&paths, |p| compute(p)))
        .collect();
    // no limit warning under the default limits, but for the known cases
    let mut known: Vec<String> = STILL_LIMITED
        .iter()
        .map(|(kind, file, phase)| format!("{kind} {file} {phase}"))
        .collect();
    known.sort();
    assert_eq!(
        all_limited(&computed),
        known,
        "phases stopped at a default limit (update STILL_LIMITED only for a reason)"
    );
    let expected = command_line_expectations(&paths, &computed);
    atl_egg::with_big_stack(move || {
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            let mut failed = vec![];
            for path in &paths {
                let name = path.file_name().unwrap_or_default();
                let c = match computed.get(name) {
                    Some(Ok(c)) => c,
                    Some(Err(e)) => panic!("{e}"),
                    None => panic!("{}: not computed", path.display()),
                };
                let mut settings = insta::Settings::clone_current();
                settings.set_snapshot_suffix(name.to_string_lossy());
                settings.set_input_file(path);
                // a failing file does not stop the others
                let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    settings.bind(|| {
                        assert_kind("front", c.front.clone());
                        assert_kind("optimize", c.optimize.clone());
                        if let Some(g) = &c.grad {
                            assert_kind("grad", g.clone());
                        }
                    })
                }));
                if checked.is_err() {
                    failed.push(path.display().to_string());
                }
            }
            assert!(failed.is_empty(), "snapshots differ for: {failed:#?}");
        });
    });
    the_command_line_prints_the_same_under_load(&expected);
}

/// What `atl-egg KIND FILE` must print: the program computed here, and on
/// stderr one warning per phase stopped at a limit (its phase named).
struct Expected {
    kind: &'static str,
    path: PathBuf,
    /// `--wrt` from the file's metadata, for `grad`
    wrt: Vec<String>,
    stdout: String,
    warned_phases: Vec<String>,
}

fn command_line_expectations(
    paths: &[PathBuf],
    computed: &HashMap<std::ffi::OsString, Result<Computed, String>>,
) -> Vec<Expected> {
    let mut out = vec![];
    for path in common::sampled("the command line under load", paths, 3) {
        let Some(Ok(c)) = computed.get(path.file_name().unwrap_or_default()) else {
            continue;
        };
        for (kind, program) in &c.printed {
            let content = match *kind {
                "optimize" => &c.optimize,
                _ => c.grad.as_ref().expect("a gradient"),
            };
            out.push(Expected {
                kind,
                path: path.clone(),
                wrt: if *kind == "grad" {
                    c.wrt.clone()
                } else {
                    vec![]
                },
                stdout: program.clone(),
                warned_phases: content.as_deref().map(limited_phases).unwrap_or_default(),
            });
        }
    }
    out
}

/// One answer per input, whatever the machine's load: the command line's
/// `optimize` and `grad` of every corpus program (one in three without
/// `ATL_TEST_FULL=1`), run on every core beside a busy thread, print the
/// programs computed above (on a machine doing nothing else; byte for
/// byte), and warn about exactly the phases their
/// statistics show stopped at a limit. Only counts (e-nodes, iterations, matches,
/// costings) decide where a phase stops; the time limit only fails a
/// command that runs too long (raised here, as the test's load slows every
/// command). tests/determinism.rs runs `hvp` and the examples twice.
fn the_command_line_prints_the_same_under_load(expected: &[Expected]) {
    let load = common::load::Load::start();
    let results = par_map(expected, |e| {
        let out = common::cli::run(e.kind, &e.path, &e.wrt);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("{} {}", e.kind, e.path.display());
        if !out.status.success() {
            return Some(format!("{what}: failed: {stderr}"));
        }
        if out.stdout != e.stdout.as_bytes() {
            return Some(format!(
                "{what}: printed\n{}\nnot\n{}",
                String::from_utf8_lossy(&out.stdout),
                e.stdout
            ));
        }
        let warned: Vec<&str> = stderr.lines().collect();
        let expected_warnings = e.warned_phases.len() == warned.len()
            && e.warned_phases.iter().zip(&warned).all(|(phase, line)| {
                line.starts_with("atl-egg: warning: ")
                    && line.contains(&format!("the {phase} phase stopped"))
            });
        (!expected_warnings).then(|| {
            format!(
                "{what}: warned {warned:?}, its statistics show limits in {:?}",
                e.warned_phases
            )
        })
    });
    drop(load);
    let differ: Vec<String> = results.into_iter().flatten().collect();
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}
