//! Compiled f and gradient of the paper's examples (criterion): native
//! calls only (inputs marshalled once per benchmark).
//!
//!     cargo bench -p atl-egg-benches --bench compiled

use atl_egg::backend;
use atl_egg::corpus::{random_inputs, CorpusProgram};
use atl_egg::front::ast::{Program, Type};
use atl_egg::rng::Rng;
use atl_egg::semantics::sizes::Sizes;
use atl_egg::{derive, egraph};
use criterion::{criterion_group, criterion_main, Criterion};
use std::path::Path;

const CASES: &[(&str, &str)] = &[
    ("conv1d_padded", "n=100000,m=16"),
    ("deconv_kernel_loss", "n=100000,m=16"),
    ("blur3x3", "h=256,w=256"),
    ("matmul", "n=128,k=128,m=128"),
    ("trace_diag_k2", "n=1000000"),
    ("trace_diag_k8", "n=1000000"),
    ("dot_diag_col_row", "n=1000000"),
    ("paper_linear_dag", ""),
];

fn bench(c: &mut Criterion) {
    // the repository, above this crate's directory
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut progs = CorpusProgram::load_dir(&root.join("corpus")).expect("corpus");
    progs.extend(CorpusProgram::load_dir(&root.join("examples/programs")).expect("examples"));
    for (name, sizes) in CASES {
        let p = progs.iter().find(|p| p.name == *name).expect("program");
        let sizes = sizes.parse::<Sizes>().expect("sizes");
        let o = egraph::Options::default();
        let wrt = p.wrt_or_all();
        let d = if p.program.ret == Type::Real {
            derive::grad(&p.program, &wrt, &o)
        } else {
            derive::vjp(&p.program, &wrt, &o)
        }
        .expect("derivative")
        .program;
        for (what, prog) in [("f", &p.program), ("grad", &d)] {
            let prog: &Program = prog;
            let compiled = backend::compile(prog).expect("compile");
            let inputs = random_inputs(prog, &sizes, &mut Rng::new(p.seed)).expect("inputs");
            c.bench_function(&format!("compiled {name} {what}"), |b| {
                b.iter(|| compiled.call_timed(&inputs, 1).expect("run"))
            });
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
