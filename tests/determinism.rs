//! One answer per input: `optimize`, `grad` and `hvp` of every program of
//! `examples/programs/` print the same bytes (output and warnings) on a
//! quiet machine and on one loaded by a busy thread. Only counts (e-nodes,
//! iterations, matches, costings) decide where a phase stops; the time limit
//! only fails a command that runs too long. The corpus is compared under
//! load with the programs the other tests compute on a quiet machine:
//! `optimize` and `grad` in tests/snapshots.rs, `hvp` in
//! tests/derivatives.rs.

use crate::common;

use std::sync::atomic::Ordering;
use std::time::Instant;

/// Every program file of the examples, sorted.
fn examples() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![];
    for dir in ["examples/programs"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "atl") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The commands to compare: `optimize`, and `grad` and `hvp` for a function
/// returning R, of every example.
fn cases() -> Vec<(&'static str, std::path::PathBuf)> {
    let mut out = vec![];
    for path in examples() {
        let text = std::fs::read_to_string(&path).unwrap();
        let prog = atl_egg::parse(&text).unwrap();
        out.push(("optimize", path.clone()));
        if prog.ret == atl_egg::front::ast::Type::Real {
            out.push(("grad", path.clone()));
            out.push(("hvp", path));
        }
    }
    out
}

/// Stdout and stderr of one command (which must succeed).
fn run(command: &str, path: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    run_with(command, path, &[])
}

/// Run every case on `workers` threads at once; the outputs in case order.
fn run_all(
    cases: &[(&'static str, std::path::PathBuf)],
    workers: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out = std::sync::Mutex::new(vec![None; cases.len()]);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some((c, p)) = cases.get(k) else { break };
                let r = run(c, p);
                out.lock().unwrap()[k] = Some(r);
            });
        }
    });
    out.into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every case ran"))
        .collect()
}

#[test]
fn every_command_prints_the_same_bytes_on_a_loaded_machine() {
    let started = Instant::now();
    let cases = cases();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    // once as fast as the machine allows, once with a busy thread besides
    // (more threads than cores: every command is preempted)
    let quiet = run_all(&cases, cores);
    let quiet_time = started.elapsed();
    let load = common::load::Load::start();
    let loaded = run_all(&cases, cores);
    drop(load);
    let mut differ = vec![];
    for (((c, p), a), b) in cases.iter().zip(&quiet).zip(&loaded) {
        if a != b {
            differ.push(format!("{c} {}", p.display()));
        }
    }
    assert!(differ.is_empty(), "output differs under load: {differ:?}");
    eprintln!(
        "{} commands, twice: {:.1} s unloaded, {:.1} s in all",
        cases.len(),
        quiet_time.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// The corpus programs the history test derives: the one whose gradient
/// showed the process's history (binder names and iteration counts), and
/// others with many binders, lets, reductions and calls.
const HISTORY_CASES: [&str; 5] = [
    "hinge_loss",
    "nested_lets",
    "logsumexp_tree",
    "polar_points",
    "ridge_regression",
];

/// `optimize`, and `grad` along the metadata's `wrt` for a function
/// returning R, of one corpus program, printed as the command line prints
/// them.
fn printed_derivations(c: &atl_egg::corpus::CorpusProgram) -> Vec<(&'static str, String)> {
    use atl_egg::backend::sexp::program_to_string;
    let opts = common::derived::opts();
    let o = atl_egg::optimizer::optimize(&c.program, &opts).expect("optimizes");
    let mut out = vec![("optimize", program_to_string(&o.program))];
    if c.program.ret == atl_egg::front::ast::Type::Real {
        let g = atl_egg::derive::grad(&c.program, &c.wrt_or_all(), &opts).expect("differentiates");
        out.push(("grad", program_to_string(&g.program)));
    }
    out
}

/// A derivation is a function of its program alone, whatever the process
/// derived before: names order and hash by their text, so the e-graph's
/// node order, matches and extraction ties do not follow the order in which
/// the process first met each name. Here the process first makes the
/// corpus's words and compiler-made names in the reverse of their order
/// and derives unrelated programs (the examples), then derives some corpus
/// programs in one order and again in the reverse order: every printed
/// program is the same bytes both times, and the same as the command
/// line's (a fresh process per program).
#[test]
fn a_derivation_does_not_depend_on_what_the_process_derived_before() {
    // every word of the corpus's texts, in the reverse of their order (a
    // fresh process meets a program's names in the order of its text)
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut words: Vec<String> = vec![];
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        words.extend(
            text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .map(str::to_string),
        );
    }
    words.sort();
    words.dedup();
    for w in words.iter().rev() {
        let _ = atl_egg::Symbol::from(w.as_str());
    }
    for k in (1..=400).rev() {
        for base in ["t", "i", "g", "j", "t_bar", "dx", "x_bar"] {
            let _ = atl_egg::front::names::make(base, k);
            let _ = atl_egg::Symbol::from(format!("{base}{k}"));
        }
    }
    for path in examples() {
        let text = std::fs::read_to_string(&path).unwrap();
        let c = atl_egg::corpus::CorpusProgram::parse("example", &text).unwrap();
        printed_derivations(&c);
    }
    let corpus = common::derived::corpus();
    let cases: Vec<_> = HISTORY_CASES
        .iter()
        .map(|name| {
            corpus
                .iter()
                .find(|c| c.name == *name)
                .unwrap_or_else(|| panic!("no corpus program {name}"))
        })
        .collect();
    let mut first: Vec<_> = cases.iter().rev().map(|c| printed_derivations(c)).collect();
    first.reverse();
    let second: Vec<_> = cases.iter().map(|c| printed_derivations(c)).collect();
    let mut differ = vec![];
    for ((c, a), b) in cases.iter().zip(&first).zip(&second) {
        for ((kind, a), (_, b)) in a.iter().zip(b) {
            if a != b {
                differ.push(format!(
                    "{kind} {}: in one order\n{a}\nin the other\n{b}",
                    c.name
                ));
            }
            let wrt: Vec<String> = if *kind == "grad" {
                c.wrt_or_all().iter().map(|w| w.to_string()).collect()
            } else {
                vec![]
            };
            let path = dir.join(format!("{}.atl", c.name));
            let (stdout, _) = run_with(kind, &path, &wrt);
            if stdout != a.as_bytes() {
                differ.push(format!(
                    "{kind} {}: the command line printed\n{}\nthe library\n{a}",
                    c.name,
                    String::from_utf8_lossy(&stdout)
                ));
            }
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}

/// Stdout and stderr of one command with `--wrt` (which must succeed).
fn run_with(command: &str, path: &std::path::Path, wrt: &[String]) -> (Vec<u8>, Vec<u8>) {
    let out = common::cli::run(command, path, wrt);
    assert!(
        out.status.success(),
        "{command} {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.stdout, out.stderr)
}
