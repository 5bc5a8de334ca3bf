//! The tables of docs/performance.md, "Compiled code":
//!
//!     cargo run --release --example compiled_report            # both tables
//!     cargo run --release --example compiled_report -- ops     # ops/cost only
//!     cargo run --release --example compiled_report -- time    # timings only
//!     cargo run --release --example compiled_report -- time conv1d_padded matmul
//!     cargo run --release --example compiled_report -- threads            # 1 thread against 2
//!
//! * ops: per program of `corpus/` (and `examples/programs/`), executed
//!   operations / model cost of the function and of its derivative (`grad`
//!   when it returns R, else `vjp`) at every size set of the file;
//! * time: CPU time of the process running f and the derivative (one
//!   thread: run with `OMP_NUM_THREADS=1`) at a large size
//!   (best of 5 to 50 calls, as many as fit in about 0.3 s, inputs
//!   marshalled once), their ratio beside the model's (the io-cost ratio of
//!   the derivative to f at those sizes), and the time ratio at about a
//!   quarter of that size (flat as sizes grow?);
//! * threads: wall time of the derivative at the large size on one thread
//!   and on two (best of 9 to 60 calls each, in rounds of 3 that alternate
//!   between the two, so that other processes on the machine slow both
//!   alike), and the speed-up.

use atl_egg::backend;
use atl_egg::corpus::{random_inputs, CorpusProgram};
use atl_egg::front::ast::{Program, Type};
use atl_egg::rng::Rng;
use atl_egg::semantics::cost;
use atl_egg::semantics::sizes::Sizes;
use atl_egg::{derive, egraph};
use std::path::Path;

/// Forward derivatives timed besides (program of `examples/programs/`, the
/// input differentiated, large and about 1/4 sizes): a jvp's loops walk
/// its tangent's matrix as well as the function's.
const FORWARD: &[(&str, &str, &str, &str)] = &[("quadratic_form_gram", "A", "n=400", "n=100")];

/// The optimizer's options: a time limit generous enough for a loaded
/// machine (the result does not depend on it; counts decide).
fn options() -> egraph::Options {
    egraph::Options {
        time_limit: std::time::Duration::from_secs(1800),
        ..Default::default()
    }
}

fn derivative(p: &CorpusProgram) -> (String, Program) {
    let o = options();
    let wrt = p.wrt_or_all();
    if p.program.ret == Type::Real {
        (
            "grad".into(),
            derive::grad(&p.program, &wrt, &o).expect("grad").program,
        )
    } else {
        (
            "vjp".into(),
            derive::vjp(&p.program, &wrt, &o).expect("vjp").program,
        )
    }
}

fn ratio(prog: &Program, sizes: &atl_egg::semantics::value::Sizes, seed: u64) -> String {
    let inputs = random_inputs(prog, sizes, &mut Rng::new(seed)).expect("inputs");
    let compiled = backend::compile_with(prog, true).expect("compile");
    let (_, ops) = compiled.call_counted(&inputs).expect("run");
    let total: u64 = ops.expect("counters")[..3].iter().sum();
    let c = cost::cost(prog, &inputs.sizes, &inputs.relations).expect("cost");
    format!("{:.2}", total as f64 / c.max(1) as f64)
}

fn time(
    prog: &Program,
    sizes: &atl_egg::semantics::value::Sizes,
    seed: u64,
) -> Result<f64, String> {
    let inputs = random_inputs(prog, sizes, &mut Rng::new(seed)).map_err(|e| e.to_string())?;
    let compiled = backend::compile(prog).map_err(|e| e.to_string())?;
    // One call to calibrate, then as many as fit in about 0.3 s (5 to 50).
    let (_, _, once) = compiled
        .call_timed_cpu(&inputs, 1)
        .map_err(|e| e.to_string())?;
    let repeat = (0.3 / once[0].max(1e-9)).clamp(5.0, 50.0) as usize;
    let (_, _, times) = compiled
        .call_timed_cpu(&inputs, repeat)
        .map_err(|e| e.to_string())?;
    Ok(times.into_iter().fold(f64::INFINITY, f64::min))
}

/// The io-cost of the derivative over the function's at `sizes` (the
/// relations of the same random inputs the timing uses).
fn io_ratio(
    f: &Program,
    d: &Program,
    sizes: &atl_egg::semantics::value::Sizes,
    seed: u64,
) -> String {
    let inputs = match random_inputs(f, sizes, &mut Rng::new(seed)) {
        Ok(i) => i,
        Err(e) => return format!("({e})"),
    };
    match (
        cost::io_cost(f, &inputs.sizes, &inputs.relations),
        cost::io_cost(d, &inputs.sizes, &inputs.relations),
    ) {
        (Ok(cf), Ok(cd)) => format!("{:.2}", cd as f64 / cf.max(1) as f64),
        (Err(e), _) | (_, Err(e)) => format!("({e})"),
    }
}

/// Large sizes per program (vectors of 10^6, matrices of 512-1024), and
/// about a quarter of them (is the ratio flat as sizes grow?).
const LARGE: &[(&str, &str, &str)] = &[
    ("activation_zoo", "n=1000000", "n=250000"),
    ("band_comparisons", "n=2048", "n=1024"),
    (
        "batched_deconv_loss",
        "B=64,n=16384,m=16",
        "B=16,n=16384,m=16",
    ),
    // f as written applies the Hessian-vector product to n unit vectors: O(n^3).
    ("calls_hessian_columns", "n=256", "n=128"),
    ("calls_nbody_accel", "n=1024", "n=512"),
    ("calls_nbody_energy", "n=1024", "n=512"),
    ("calls_rot2d_four_times", "n=1000000", "n=250000"),
    ("clipped_ramp_fit", "n=1000000", "n=250000"),
    ("forms_gauss_newton", "n=1024,m=1024", "n=512,m=512"),
    // f as written: one jvp of the gradient per unit vector, O(n^3).
    ("forms_hessian", "n=512", "n=256"),
    ("gamma_negbin_loglik", "n=1000000,d=8", "n=250000,d=8"),
    ("hinge_loss", "n=200000,d=16", "n=50000,d=16"),
    ("logsumexp_stable", "n=1000000", "n=250000"),
    ("logsumexp_tree", "n=1000000", "n=250000"),
    ("nearest_centre", "P=100000,K=16,d=8", "P=25000,K=16,d=8"),
    ("ridge_regression", "n=100000,d=32", "n=25000,d=32"),
    ("softmax_xent_stable", "B=1024,K=1024", "B=512,K=512"),
    ("sparse_matvec_stored", "n=4096,m=4096", "n=2048,m=2048"),
    ("stencil_chain", "n=1000000", "n=250000"),
    ("causal_attention", "t=512,d=64", "t=256,d=64"),
    ("conv1d_padded", "n=1000000,m=16", "n=250000,m=16"),
    ("deconv_kernel_loss", "n=1000000,m=16", "n=250000,m=16"),
    ("deconv_signal_loss", "n=1000000,m=16", "n=250000,m=16"),
    ("derivative_boxes", "n=1000000", "n=250000"),
    ("diag_matvec", "n=4096", "n=2048"),
    ("dot_diag_col_row", "n=1000000", "n=250000"),
    ("exists_parity", "n=100000,m=100", "n=25000,m=100"),
    ("graph_smoothness", "n=1024", "n=512"),
    ("iverson_any_type", "n=1000000", "n=250000"),
    ("laplacian_energy", "n=1000000", "n=250000"),
    ("let_chain_tensor", "n=1000000", "n=250000"),
    ("matmul", "n=512,k=512,m=512", "n=256,k=256,m=256"),
    // W of 64 MiB: at h=1024, d=512 its 4 MiB stayed in an 8 MiB L3 between
    // f's calls (f in 0.2 ms), while the gradient writes another 4 MiB.
    ("mlp_sigmoid_bce", "h=4096,d=2048", "h=2048,d=1024"),
    ("nested_lets", "n=1024,m=1024", "n=512,m=512"),
    ("pair_moments", "n=1000000", "n=250000"),
    ("quadratic_form_gram", "n=400", "n=100"),
    ("polar_points", "n=1000000", "n=250000"),
    (
        "rank3_batched_bilinear",
        "B=64,n=128,m=128",
        "B=16,n=128,m=128",
    ),
    (
        "rank3_transpose_scale",
        "a=128,b=128,c=64",
        "a=64,b=64,c=64",
    ),
    ("skip_x1_predicate", "n=1000000", "n=250000"),
    (
        "softmax_labels_relation",
        "b=1024,c=512,d=64",
        "b=512,c=256,d=64",
    ),
    ("strided_pool", "n=500000", "n=125000"),
    ("sugar_tour", "a=64,n=128,m=128", "a=32,n=64,m=64"),
    // f as written multiplies by the whole Toeplitz matrix: O(n^2).
    ("toeplitz_conv1d", "n=20000,m=16", "n=10000,m=16"),
    ("trace_diag_k2", "n=1000000", "n=250000"),
    ("trace_diag_k8", "n=1000000", "n=250000"),
    (
        "two_layer_mlp",
        "b=512,d=512,h=512,o=64",
        "b=256,d=256,h=256,o=64",
    ),
    ("blur3x3", "h=1024,w=1024", "h=512,w=512"),
];

fn main() {
    let what = std::env::args().nth(1).unwrap_or_default();
    let mut progs = CorpusProgram::load_dir(Path::new("corpus")).expect("corpus");
    progs.extend(CorpusProgram::load_dir(Path::new("examples/programs")).expect("examples"));
    if what != "time" && what != "threads" {
        println!("| program | derivative | f: ops/cost per size set | derivative: ops/cost per size set |");
        println!("| --- | --- | --- | --- |");
        for p in &progs {
            let (dname, d) = derivative(p);
            let rf: Vec<String> = p
                .size_sets
                .iter()
                .map(|s| ratio(&p.program, s, p.seed))
                .collect();
            let rd: Vec<String> = p.size_sets.iter().map(|s| ratio(&d, s, p.seed)).collect();
            println!(
                "| {} | {dname} | {} | {} |",
                p.name,
                rf.join(" "),
                rd.join(" ")
            );
        }
        println!();
    }
    if what == "threads" {
        threads_table(&progs);
    } else if what != "ops" {
        time_table(&progs);
    }
}

/// The threads table: each program of [`LARGE`] (or the ones named), its
/// derivative's wall time at the large size on one thread and on two.
fn threads_table(progs: &[CorpusProgram]) {
    println!("| program | sizes | t_derivative, 1 thread (ms) | 2 threads (ms) | speed-up |");
    println!("| --- | --- | ---: | ---: | ---: |");
    let only: Vec<String> = std::env::args().skip(2).collect();
    for p in progs {
        if !only.is_empty() && !only.contains(&p.name) {
            continue;
        }
        let Some(Ok(sizes)) = LARGE
            .iter()
            .find(|(n, _, _)| *n == p.name)
            .map(|(_, s, _)| s.parse::<Sizes>())
        else {
            continue;
        };
        let (dname, d) = derivative(p);
        let label = format!("{} ({dname})", p.name);
        match wall_one_and_two(&d, &sizes, p.seed) {
            Ok((t1, t2)) => println!(
                "| {label} | {sizes} | {:.3} | {:.3} | {:.2} |",
                t1 * 1e3,
                t2 * 1e3,
                t1 / t2.max(1e-9)
            ),
            Err(e) => println!("| {label} | {sizes} | not run: {e} | | |"),
        }
    }
}

/// Best wall times of `prog` on one thread and on two, calls interleaved.
fn wall_one_and_two(
    prog: &Program,
    sizes: &atl_egg::semantics::value::Sizes,
    seed: u64,
) -> Result<(f64, f64), String> {
    let inputs = random_inputs(prog, sizes, &mut Rng::new(seed)).map_err(|e| e.to_string())?;
    let compiled = backend::compile(prog).map_err(|e| e.to_string())?;
    let e = |e: atl_egg::error::Error| e.to_string();
    compiled.set_threads(1).map_err(e)?;
    let (_, _, once) = compiled.call_timed(&inputs, 2).map_err(e)?;
    // Rounds of 3 calls on one output (the first call of a round faults
    // its pages in), the best of each thread count.
    let rounds = (0.1 / once[1].max(1e-9)).clamp(3.0, 20.0) as usize;
    let (mut t1, mut t2) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..rounds {
        for (threads, best) in [(1, &mut t1), (2, &mut t2)] {
            compiled.set_threads(threads).map_err(e)?;
            let (_, _, t) = compiled.call_timed(&inputs, 3).map_err(e)?;
            *best = t.into_iter().fold(*best, f64::min);
        }
    }
    Ok((t1, t2))
}

/// The time table: every program at its large size (from [`LARGE`], else
/// the last size set of its file, beside its first), then [`FORWARD`].
fn time_table(progs: &[CorpusProgram]) {
    println!(
        "| program | sizes | t_f (ms) | t_derivative (ms) | t_derivative / t_f | io-cost ratio | t ratio at about 1/4 size |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    // `time NAME ...`: only these programs.
    let only: Vec<String> = std::env::args().skip(2).collect();
    let o = options();
    for p in progs {
        if !only.is_empty() && !only.contains(&p.name) {
            continue;
        }
        let sizes = match LARGE.iter().find(|(n, _, _)| *n == p.name) {
            Some((_, s, q)) => match (s.parse::<Sizes>(), q.parse::<Sizes>()) {
                (Ok(s), Ok(q)) => (s, q),
                _ => continue,
            },
            None => match (p.size_sets.last(), p.size_sets.first()) {
                (Some(s), Some(q)) => (s.clone(), q.clone()),
                _ => continue,
            },
        };
        if sizes.0.keys().any(|k| !p.program.sizes.contains(k))
            || sizes.0.len() != p.program.sizes.len()
        {
            println!(
                "| {} | {} | (size names differ from the program's) | | | | |",
                p.name, sizes.0
            );
            continue;
        }
        let (dname, d) = derivative(p);
        row(&format!("{} ({dname})", p.name), p, &d, &sizes);
        for (name, wrt, s, q) in FORWARD.iter().filter(|f| f.0 == p.name) {
            let wrt = [atl_egg::Symbol::from(*wrt)];
            let (Ok(s), Ok(q)) = (s.parse::<Sizes>(), q.parse::<Sizes>()) else {
                continue;
            };
            let d = derive::jvp(&p.program, &wrt, &o).expect("jvp").program;
            row(&format!("{name} (jvp --wrt {})", wrt[0]), p, &d, &(s, q));
        }
    }
}

/// One row: f and `d` timed at the large sizes and at the small ones.
fn row(label: &str, p: &CorpusProgram, d: &Program, (sizes, small): &(Sizes, Sizes)) {
    let run = |sizes| match (time(&p.program, sizes, p.seed), time(d, sizes, p.seed)) {
        (Ok(tf), Ok(td)) => Ok((tf, td)),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let ((tf, td), (sf, sd)) = match (run(sizes), run(small)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            println!("| {label} | {sizes} | not run: {e} | | | | |");
            return;
        }
    };
    println!(
        "| {label} | {sizes} | {:.3} | {:.3} | {:.2} | {} | {:.2} ({small}) |",
        tf * 1e3,
        td * 1e3,
        td / tf.max(1e-9),
        io_ratio(&p.program, d, sizes, p.seed),
        sd / sf.max(1e-9)
    );
}
