//! Criterion benchmarks of the optimizer and the gradient pipeline.
//!
//! Groups:
//! * `parse/corpus`: reading and elaborating every corpus file;
//! * `optimize/<program>`: `optimizer::optimize` on every corpus program;
//! * `optimize_gradient/<program>`: `atl_egg::optimize_gradient` (the
//!   gradient, then the optimizer) on every corpus program returning `R`,
//!   with respect to its `; wrt:` metadata (all real inputs without one);
//! * `let_chain/optimize/<k>` and `let_chain/optimize_gradient/<k>`:
//!   synthetic chains of `k` lets ([`let_chain`]) for k = 8, 16, 32, 64.
//!   The gradient at k = 64 is the slowest benchmark (about 11 s a run,
//!   2 minutes in all); `ATL_BENCH_QUICK=1` skips it.
//!
//! The optimizer runs with the default node and iteration limits and a
//! 600 s time limit (as the snapshot tests do), so every iteration does the
//! same work whatever the machine's load. Samples are few (10, about 2 s
//! of measurement each) so the whole run stays within minutes on a small
//! machine; criterion switches to flat sampling for the slow programs.
//! A program the optimizer rejects (an error) is timed all the same (its
//! error path); the snapshot tests are where errors are reported.
//! Filter as usual: `cargo bench -p atl-egg-benches --bench optimize -- let_chain`.

use atl_egg::corpus::CorpusProgram;
use atl_egg::front::ast::{Program, Type};
use atl_egg::front::parse_program;
use atl_egg::optimize_gradient;
use atl_egg::optimizer::{optimize, Options};
use criterion::{criterion_group, BenchmarkId, Criterion};
use std::hint::black_box;
use std::time::Duration;

struct Case {
    name: String,
    text: Vec<u8>,
    prog: Program,
    wrt: Vec<String>,
}

fn options() -> Options {
    Options {
        time_limit: Duration::from_secs(600),
        ..Options::default()
    }
}

fn corpus() -> Vec<Case> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    CorpusProgram::load_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot load the corpus: {e}"))
        .into_iter()
        .map(|c| Case {
            wrt: c.wrt.iter().map(|w| w.to_string()).collect(),
            text: c.text.into_bytes(),
            name: c.name,
            prog: c.program,
        })
        .collect()
}

fn group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g
}

fn bench_parse(c: &mut Criterion) {
    let cases = corpus();
    let mut g = group(c, "parse");
    g.bench_function("corpus", |b| {
        b.iter(|| {
            for case in &cases {
                black_box(parse_program(black_box(&case.text)).ok());
            }
        })
    });
    g.finish();
}

fn bench_optimize(c: &mut Criterion) {
    let opts = options();
    let mut g = group(c, "optimize");
    for case in corpus() {
        g.bench_function(&case.name, |b| {
            b.iter(|| optimize(black_box(&case.prog), &opts).is_ok())
        });
    }
    g.finish();
}

fn bench_gradient(c: &mut Criterion) {
    let opts = options();
    let mut g = group(c, "optimize_gradient");
    for case in corpus().into_iter().filter(|c| c.prog.ret == Type::Real) {
        let wrt: Vec<&str> = case.wrt.iter().map(String::as_str).collect();
        g.bench_function(&case.name, |b| {
            b.iter(|| optimize_gradient(black_box(&case.prog), &wrt, &opts).is_ok())
        });
    }
    g.finish();
}

fn bench_let_chain(c: &mut Criterion) {
    let opts = options();
    let mut g = group(c, "let_chain");
    for k in [8, 16, 32, 64] {
        let text = atl_egg::corpus::let_chain(k);
        let prog = parse_program(text.as_bytes())
            .unwrap_or_else(|e| panic!("let_chain({k}) does not elaborate: {e}\n{text}"));
        g.bench_with_input(BenchmarkId::new("optimize", k), &prog, |b, p| {
            b.iter(|| optimize(black_box(p), &opts).is_ok())
        });
        if k > 32 && std::env::var_os("ATL_BENCH_QUICK").is_some() {
            eprintln!("skipping let_chain/optimize_gradient/{k} (ATL_BENCH_QUICK is set)");
            continue;
        }
        g.bench_with_input(BenchmarkId::new("optimize_gradient", k), &prog, |b, p| {
            b.iter(|| optimize_gradient(black_box(p), &["x"], &opts).is_ok())
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_parse,
    bench_optimize,
    bench_gradient,
    bench_let_chain
);

/// `criterion_main!`, but on a thread with a large stack, as the binary
/// runs every pass (deep programs recurse deeply).
fn main() {
    atl_egg::with_big_stack(|| {
        benches();
        Criterion::default().configure_from_args().final_summary();
    });
}
