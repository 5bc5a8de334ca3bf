//! One answer per input: `optimize`, `grad` and `hvp` of every program of
//! `examples/programs/` print the same bytes (output and warnings) on a
//! quiet machine and on one loaded by busy threads. Only counts (e-nodes,
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
    let out = common::cli::run(command, path, &[]);
    assert!(
        out.status.success(),
        "{command} {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.stdout, out.stderr)
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
    // once as fast as the machine allows, once with every core busy besides
    // (the commands then get about half the time they had)
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
