//! One answer per input: `optimize` and `grad` of every program of `corpus/`
//! and `examples/programs/`, and `hvp` of a sample of each kind, print the
//! same bytes (output and warnings) on a quiet machine and on one loaded by
//! busy threads. Only
//! counts (e-nodes, iterations, matches, costings) decide where a phase
//! stops; the time limit only fails a command that runs too long.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Every program file of the corpus and of the examples, sorted.
fn programs() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![];
    for dir in ["corpus", "examples/programs"] {
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

/// The programs whose `hvp` is compared too: `hvp` differentiates the
/// gradient forward, so it runs every phase `grad` runs and then some; a
/// sample of each kind keeps the test short (the paper's programs,
/// relations and `exists`, black boxes, the reduction tree, an MLP).
const HVP_SAMPLE: [&str; 12] = [
    "trace_diag_k2",
    "dot_diag_col_row",
    "deconv_signal_loss",
    "deconv_kernel_loss",
    "skip_x1_chain8",
    "graph_smoothness",
    "laplacian_energy",
    "softmax_labels_relation",
    "exists_parity",
    "activation_zoo",
    "logsumexp_tree",
    "two_layer_mlp",
];

/// The commands to compare for one program: `optimize`, and `grad` (and
/// `hvp` for the sample) for a function returning R.
fn commands(path: &std::path::Path) -> Vec<&'static str> {
    let text = std::fs::read_to_string(path).unwrap();
    let prog = atl_egg::parse(&text).unwrap();
    let name = path.file_stem().unwrap_or_default().to_string_lossy();
    if prog.ret != atl_egg::front::ast::Type::Real {
        vec!["optimize"]
    } else if HVP_SAMPLE.contains(&name.as_ref()) {
        vec!["optimize", "grad", "hvp"]
    } else {
        vec!["optimize", "grad"]
    }
}

/// Stdout and stderr of one command (which must succeed).
fn run(command: &str, path: &std::path::Path) -> (Vec<u8>, Vec<u8>) {
    let out = Command::new(env!("CARGO_BIN_EXE_atl-egg"))
        .arg(command)
        .arg(path)
        // the limit only fails a command (it never shapes the output);
        // under the test's load a long one may need more than the default
        .args(["--time-limit", "600"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{command} {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.stdout, out.stderr)
}

/// Busy threads (one per core) until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start() -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..10_000 {
                            x = std::hint::black_box(x.wrapping_mul(6364136223846793005) + 1);
                        }
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
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
    for name in HVP_SAMPLE {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("corpus")
            .join(format!("{name}.atl"));
        assert!(
            path.is_file(),
            "the hvp sample names {name}, not in corpus/"
        );
    }
    let started = Instant::now();
    let cases: Vec<(&'static str, std::path::PathBuf)> = programs()
        .into_iter()
        .flat_map(|p| commands(&p).into_iter().map(move |c| (c, p.clone())))
        .collect();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    // once as fast as the machine allows, once with every core busy besides
    // (the commands then get about half the time they had)
    let quiet = run_all(&cases, cores);
    let quiet_time = started.elapsed();
    let load = Load::start();
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
