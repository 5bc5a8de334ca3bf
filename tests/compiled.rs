//! Compiled code (`atl_egg::compile`) against the evaluator: equal values
//! (within 1e-8 of the largest magnitude) and executed operations within
//! `2 * cost + 1` (`common::run_check`), on the conformance suite's corpus
//! (when present) with its derivatives and optimized form, and on random
//! programs (our own corpus and its derivatives: tests/derivatives.rs, which
//! derives them once for all its checks). Also: the generated C compiles without warnings under
//! `-Wall -Wextra -Werror`, and runs clean under AddressSanitizer and
//! UBSan where the sanitizer runtime exists.
//!
//! Needs a C compiler (`$CC`, default `cc`); without one every test prints
//! why and passes vacuously.

use crate::common;

use atl_egg::backend::{self, build};
use atl_egg::corpus::{random_inputs, CorpusProgram};
use atl_egg::front::ast::Program;
use atl_egg::semantics::value::{Inputs, Sizes};
use atl_egg::semantics::{cost, eval};
use atl_egg::{derive, egraph};
use common::run_check::{check, check_flags, have_cc, par_checks, report_worst_overhead};
use common::{compare_values, generate, GenConfig, Rng, Tolerance};
use std::path::Path;
use std::process::Command;

/// The compiled program's value at one and at two threads, each compared
/// with `want` (within 1e-12 relative): the failures, described.
fn at_one_and_two_threads(
    compiled: &backend::Compiled,
    inputs: &Inputs,
    want: &atl_egg::semantics::value::Value,
) -> Vec<String> {
    let tol = Tolerance {
        rel: 1e-12,
        abs: 0.0,
    };
    let mut failures = vec![];
    for threads in [1, 2] {
        compiled.set_threads(threads).expect("threads");
        let got = compiled.call(inputs).expect("run");
        if let Err(e) = compare_values(want, &got, tol) {
            failures.push(format!("at {threads} threads: {e}"));
        }
    }
    failures
}

/// `prog`, compiled as `compiled`, at `inputs`: the counting build executes
/// exactly the cost's operations, and the values are `eval`'s at one and at
/// two threads.
fn assert_counted_and_evaluated(
    compiled: &backend::Compiled,
    prog: &Program,
    inputs: &Inputs,
    what: &str,
) {
    let (ops, c) = check(prog, inputs, what).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ops, c, "{what}: executed operations differ from the cost");
    let want = eval::evaluate(prog, inputs).expect("eval");
    let failures = at_one_and_two_threads(compiled, inputs, &want);
    assert!(failures.is_empty(), "{what} {}", failures.join("; "));
}

/// As [`assert_counted_and_evaluated`], with the counting build `counted`
/// compiled with the same flags as `compiled` (a block size or limit made
/// small so that small sizes reach the blocked code): exactly the cost's
/// operations, loop iterations and tests within the overhead bound, and
/// `eval`'s values at one and two threads.
fn assert_counted_and_evaluated_as_built(
    compiled: &backend::Compiled,
    counted: &backend::Compiled,
    prog: &Program,
    inputs: &Inputs,
    what: &str,
) {
    let want = eval::evaluate(prog, inputs).expect("eval");
    let (_, ops) = counted.call_counted(inputs).expect("run");
    let ops = ops.expect("counters");
    let total: u128 = ops[..3].iter().map(|&k| k as u128).sum();
    let c = cost::cost(prog, &inputs.sizes, &inputs.relations).expect("cost");
    assert_eq!(total, c, "{what}: executed operations differ from the cost");
    let data = common::run_check::data_size(prog, inputs).expect("sizes");
    let overhead = ops[3] as u128 + ops[4] as u128;
    let bound = common::run_check::LOOP_OVERHEAD * (c + data);
    assert!(
        overhead <= bound,
        "{what}: loop overhead {overhead} > {bound}"
    );
    let failures = at_one_and_two_threads(compiled, inputs, &want);
    assert!(failures.is_empty(), "{what} {}", failures.join("; "));
}

/// Builds `prog` with `flags`, plain and counting, and checks both at each
/// `(n, m)` of `sizes` (the sizes `prog` has) on inputs drawn from `seed`:
/// `assert_counted_and_evaluated_as_built`, and with `also_check` the value
/// check of the default build too.
fn assert_built_as_evaluated_at(
    prog: &Program,
    flags: &build::Flags,
    sizes: &[(i64, i64)],
    seed: u64,
    what: &str,
    also_check: bool,
) {
    let compiled = backend::compile_with_flags(prog, false, flags).expect("compile");
    let counted = backend::compile_with_flags(prog, true, flags).expect("compile");
    for &(n, m) in sizes {
        let at: Sizes = [("n", n), ("m", m)]
            .iter()
            .filter(|(k, _)| prog.sizes.contains(&atl_egg::Symbol::from(*k)))
            .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
            .collect();
        let what = format!("{what} at n={n}, m={m}");
        let inputs = random_inputs(prog, &at, &mut Rng::new(seed)).expect("inputs");
        assert_counted_and_evaluated_as_built(&compiled, &counted, prog, &inputs, &what);
        if also_check {
            check(prog, &inputs, &what).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

fn options() -> egraph::Options {
    egraph::Options {
        time_limit: std::time::Duration::from_secs(600),
        ..egraph::Options::default()
    }
}

/// The function, its optimized form and its derivatives.
fn variants(p: &CorpusProgram) -> Vec<(String, Program)> {
    let mut out = derivatives(p);
    if let Ok(d) = atl_egg::optimizer::optimize(&p.program, &options()) {
        out.insert(1, ("optimize".into(), d.program));
    }
    out
}

/// The function and its derivatives.
fn derivatives(p: &CorpusProgram) -> Vec<(String, Program)> {
    let prog = &p.program;
    let wrt = p.wrt_or_all();
    let o = options();
    let mut out = vec![("f".to_string(), prog.clone())];
    if prog.ret == atl_egg::front::ast::Type::Real {
        out.push((
            "grad".into(),
            derive::grad(prog, &wrt, &o).expect("grad").program,
        ));
    }
    out.push((
        "vjp".into(),
        derive::vjp(prog, &wrt, &o).expect("vjp").program,
    ));
    out.push((
        "jvp".into(),
        derive::jvp(prog, &wrt, &o).expect("jvp").program,
    ));
    out
}

fn corpus_dir(dir: &Path) {
    if !have_cc() {
        return;
    }
    if !dir.is_dir() {
        eprintln!("skipped: {} not found", dir.display());
        return;
    }
    let progs = CorpusProgram::load_dir(dir).expect("corpus");
    let failures = par_checks(&progs, |p| {
        let mut failures = vec![];
        for (what, prog) in variants(p) {
            for sizes in &p.size_sets {
                let mut rng = Rng::new(p.seed);
                let inputs = random_inputs(&prog, sizes, &mut rng).expect("inputs");
                if let Err(e) = check(&prog, &inputs, &format!("{} {what} {sizes:?}", p.name)) {
                    failures.push(e);
                }
            }
        }
        failures
    });
    report_worst_overhead();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn conformance_corpus_runs_as_evaluated() {
    corpus_dir(Path::new("../shared/conformance/corpus"));
}

#[test]
fn random_programs_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let cfg = GenConfig::default();
    let mut failures = vec![];
    for seed in 0..60u64 {
        let g = generate(seed, &cfg);
        let Ok(prog) = atl_egg::front::parse_program(g.sugar.as_bytes()) else {
            continue;
        };
        let mut rng = Rng::new(seed);
        let inputs = common::random_inputs(&prog, &mut rng, 0, 4, 0.3);
        if eval::evaluate(&prog, &inputs).is_err() {
            continue;
        }
        if let Err(e) = check(&prog, &inputs, &format!("seed {seed}:\n{}\n", g.sugar)) {
            failures.push(e);
        }
    }
    report_worst_overhead();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Some programs and their derivatives, for the compiler-flag tests, with
/// the sizes and seed of their inputs ([`sample_inputs`]).
fn sample_programs() -> &'static [(String, Program, Sizes, u64)] {
    static SAMPLE: std::sync::OnceLock<Vec<(String, Program, Sizes, u64)>> =
        std::sync::OnceLock::new();
    SAMPLE.get_or_init(|| SAMPLE_NAMES.iter().flat_map(sample_one).collect())
}

/// A program of [`sample_programs`] with its inputs.
fn sample_inputs(
    (name, prog, sizes, seed): &(String, Program, Sizes, u64),
) -> (&str, &Program, Inputs) {
    let inputs = random_inputs(prog, sizes, &mut Rng::new(*seed)).expect("inputs");
    (name.as_str(), prog, inputs)
}

/// The programs of [`sample_programs`].
const SAMPLE_NAMES: [&str; 11] = [
    "conv1d_padded",
    "softmax_labels_relation",
    "polar_points",
    "exists_parity",
    "trace_diag_k8",
    "activation_zoo",
    // interchanged, fused and skewed loops
    "nested_lets",
    "rank3_batched_bilinear",
    "band_comparisons",
    "causal_attention",
    "let_chain_tensor",
];

/// One program of [`sample_programs`] and its derivatives (the corpus's,
/// derived once for every file's tests), with the sizes and seed of their
/// inputs.
fn sample_one(name: &&str) -> Vec<(String, Program, Sizes, u64)> {
    let d = common::derived::named(name);
    let sizes = d.c.size_sets.last().expect("sizes");
    let mut progs = vec![("f", &d.c.program)];
    if let Some(g) = &d.grad {
        progs.push(("grad", g));
    }
    progs.extend([("vjp", &d.vjp), ("jvp", &d.jvp)]);
    progs
        .into_iter()
        .map(|(what, prog)| {
            (
                format!("{name} {what}"),
                prog.clone(),
                sizes.clone(),
                d.c.seed,
            )
        })
        .collect()
}

#[test]
fn generated_c_is_warning_free() {
    if !have_cc() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("atl-egg-wall-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // the programs on every core, each in a directory of its own; without
    // ATL_TEST_FULL=1, one in two (the sanitizers test takes the others)
    let sample = common::sampled("warnings", sample_programs(), 2);
    let failures: Vec<String> = common::par::par_map(&sample, |(name, prog, ..)| {
        let src = backend::generate(prog).expect("generate").source;
        let here = tempfile::tempdir_in(&dir).expect("temp dir");
        let c = here.path().join("p.c");
        std::fs::write(&c, &src).expect("write");
        let mut failures = vec![];
        for extra in [
            &[][..],
            &["-DATL_COUNT_OPS"][..],
            &["-fopenmp-simd", "-DATL_SIMD"][..],
            &["-fopenmp", "-DATL_SIMD"][..],
        ] {
            let out = Command::new(build::compiler())
                .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-c", "-o"])
                .arg(here.path().join("p.o"))
                .args(extra)
                .arg(&c)
                .output()
                .expect("cc");
            if !out.status.success() {
                failures.push(format!(
                    "{name} {extra:?}: warnings or errors:\n{}\n{src}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        failures
    })
    .concat();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn sanitizers_report_nothing() {
    if !have_cc() {
        return;
    }
    let flags = build::Flags {
        flags: [
            "-O1",
            "-g",
            "-fPIC",
            "-shared",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
        ]
        .map(String::from)
        .to_vec(),
    };
    // A shared library with ASan needs the runtime preloaded into this
    // process; run the programs in a child `atl-egg`-free harness instead:
    // a tiny C driver per program would need the inputs, so the check is
    // that a standalone executable built with the sanitizers runs clean.
    let dir = std::env::temp_dir().join(format!("atl-egg-san-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let probe = dir.join("probe.c");
    std::fs::write(&probe, "int main(void) { return 0; }\n").expect("write");
    let ok = Command::new(build::compiler())
        .args(["-fsanitize=address,undefined", "-o"])
        .arg(dir.join("probe"))
        .arg(&probe)
        .output()
        .is_ok_and(|o| o.status.success())
        && Command::new(dir.join("probe"))
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: the sanitizer runtime is not available");
        return;
    }
    // the programs on every core, each in a directory of its own; without
    // ATL_TEST_FULL=1, the half that the warnings test does not take
    let sample = common::sampled("sanitizers", sample_programs().iter().skip(1), 2);
    let failures: Vec<String> = common::par::par_map(&sample, |p| {
        let (name, prog, inputs) = sample_inputs(p);
        let src = backend::generate(prog).expect("generate");
        let driver = sanitizer_driver(&src, prog, &inputs);
        let here = tempfile::tempdir_in(&dir).expect("temp dir");
        let mut failures = vec![];
        for count in [false, true] {
            let exe = executable(
                here.path(),
                &format!("{}\n{driver}", src.source),
                &flags,
                count.then_some("-DATL_COUNT_OPS"),
                name,
            );
            let run = Command::new(&exe).output().expect("run");
            if !(run.status.success() && run.stderr.is_empty()) {
                failures.push(format!(
                    "{name} (counting: {count}): sanitizer report:\n{}",
                    String::from_utf8_lossy(&run.stderr)
                ));
            }
        }
        failures
    })
    .concat();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `source` (generated C with a `main`) built as the executable `dir/p`
/// with `flags` (those of a shared library left out) and `extra`; the
/// build must succeed (`what` names the program in the message).
fn executable(
    dir: &std::path::Path,
    source: &str,
    flags: &build::Flags,
    extra: Option<&str>,
    what: &str,
) -> std::path::PathBuf {
    let c = dir.join("p.c");
    std::fs::write(&c, source).expect("write");
    let exe = dir.join("p");
    let out = Command::new(build::compiler())
        .args(
            flags
                .flags
                .iter()
                .filter(|f| *f != "-shared" && *f != "-fPIC"),
        )
        .args(extra)
        .arg("-o")
        .arg(&exe)
        .arg(&c)
        .arg("-lm")
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// A `main` calling the packed entry on the inputs, written as C arrays.
fn sanitizer_driver(src: &backend::CSource, prog: &Program, inputs: &Inputs) -> String {
    let (mut s, outs, _) = driver_arrays(src, prog, inputs);
    s += "  int rc = atlpacked_entry(sz + 1, re + 1, rel + 1, out + 1);\n";
    for o in &outs {
        s += &format!("  free({o});\n");
    }
    s += "  return rc;\n}\n";
    s
}

/// The start of a C `main` holding the inputs as arrays `sz`, `re`, `rel`
/// and the outputs as `out` (each with a leading 0 entry: pass `sz + 1`
/// ...): the text, the outputs' names and each relation's layout length
/// (the layout `qK + 1`).
fn driver_arrays(
    src: &backend::CSource,
    prog: &Program,
    inputs: &Inputs,
) -> (String, Vec<String>, Vec<usize>) {
    use atl_egg::front::ast::ParamKind;
    use atl_egg::lower::ir::ParamC;
    let mut s = String::from("#include <stdio.h>\n#include <string.h>\nint main(void) {\n");
    let mut lens = vec![];
    let sizes: Vec<String> = src
        .function
        .params
        .iter()
        .filter(|p| p.kind == ParamC::Size)
        .map(|p| inputs.sizes[&atl_egg::Symbol::from(p.source.as_str())].to_string())
        .collect();
    s += &format!(
        "  static const int64_t sz[] = {{0{}}};\n",
        sizes.iter().map(|x| format!(", {x}")).collect::<String>()
    );
    let mut reals = vec![];
    let mut rels = vec![];
    for p in &prog.params {
        match &p.kind {
            ParamKind::Real(t) => {
                let leaves = backend::marshal::leaves_of(&inputs.values[&p.name], t, &inputs.sizes)
                    .expect("leaves");
                for l in leaves {
                    let k = reals.len();
                    let body: Vec<String> = l.iter().map(|x| format!("{x:e}")).collect();
                    s += &format!(
                        "  static const double r{k}[] = {{0.0, {}}};\n",
                        body.join(", ")
                    );
                    reals.push(format!("r{k} + 1"));
                }
            }
            ParamKind::Relation(_) => {
                let k = rels.len();
                let r = &inputs.relations[&p.name];
                let layout = backend::marshal::compressed_layout(
                    r.dims(),
                    &backend::marshal::relation_tuples(r),
                );
                let words: Vec<String> = layout.iter().map(|w| w.to_string()).collect();
                s += &format!(
                    "  static const int64_t q{k}[] = {{0, {}}};\n",
                    words.join(", ")
                );
                rels.push(format!("q{k} + 1"));
                lens.push(layout.len());
            }
            ParamKind::Size => {}
        }
    }
    let outs: Vec<String> = src
        .function
        .outputs
        .iter()
        .enumerate()
        .map(|(k, (_, _, dims))| {
            let n: i64 = dims
                .iter()
                .map(|d| {
                    d.eval(&inputs.sizes.iter().map(|(k, v)| (*k, *v)).collect())
                        .expect("dim")
                })
                .product();
            s += &format!(
                "  const size_t n{k} = {};\n  double *o{k} = malloc(sizeof(double) * n{k});\n",
                n.max(1)
            );
            format!("o{k}")
        })
        .collect();
    s += &format!(
        "  const double *re[] = {{0{}}};\n  const int64_t *rel[] = {{0{}}};\n  double *out[] = {{0{}}};\n",
        reals.iter().map(|x| format!(", {x}")).collect::<String>(),
        rels.iter().map(|x| format!(", {x}")).collect::<String>(),
        outs.iter().map(|x| format!(", {x}")).collect::<String>(),
    );
    (s, outs, lens)
}

/// A relation prepared once (`atlpacked_prepare`) gives, through
/// `atlpacked_entry_prepared`, the per-call values bit for bit, also once
/// its source buffer is overwritten (it holds its own copy); a layout that
/// is not valid, another parameter, other sizes or another relation
/// buffer are refused with code 5. On graph_smoothness's gradient (a
/// transpose) and a program walking a relation of three arguments
/// permuted.
#[test]
fn prepared_relations_give_the_per_call_values_and_refuse_misuse() {
    if !have_cc() {
        return;
    }
    let arity3 = atl_egg::front::parse_program(
        b"(fn t4 ((T (relation n m n)) (x (tensor n R)))
            (sum i n (sum j m (sum k n (iverson (or (T i j k) (T k j i)) (* (get x i) (get x k)))))))",
    )
    .expect("parse");
    let progs = [
        (corpus_gradient("graph_smoothness").1, "n=40"),
        (arity3, "n=9,m=4"),
    ];
    let dir = std::env::temp_dir().join(format!("atl-egg-prep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (k, (prog, sizes)) in progs.iter().enumerate() {
        let sizes: Sizes = sizes.parse().expect("sizes");
        let inputs = random_inputs(prog, &sizes, &mut Rng::new(11 + k as u64)).expect("inputs");
        let src = backend::generate(prog).expect("generate");
        assert!(
            src.source.contains("atlh_rel_permute(atlv_r0"),
            "{k}: no permuted layout"
        );
        let (mut s, outs, lens) = driver_arrays(&src, prog, &inputs);
        s += &prepared_checks(&outs, lens[0]);
        let exe = executable(
            &dir,
            &format!("{}\n{s}", src.source),
            &check_flags(),
            None,
            &format!("program {k}"),
        );
        let run = Command::new(&exe).output().expect("run");
        assert_eq!(
            run.status.code(),
            Some(0),
            "program {k}: {}",
            String::from_utf8_lossy(&run.stdout)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The checks of [`prepared_relations_give_the_per_call_values_and_refuse_misuse`]
/// on the first relation (layout `q0 + 1`, `len` words), after
/// [`driver_arrays`]: exit 0 when all hold, else the number of the first
/// that failed.
fn prepared_checks(outs: &[String], len: usize) -> String {
    let mut s =
        String::from("  if (atlpacked_entry(sz + 1, re + 1, rel + 1, out + 1) != 0) return 10;\n");
    for (k, o) in outs.iter().enumerate() {
        s += &format!("  double *w{k} = malloc(sizeof(double) * n{k});\n  memcpy(w{k}, {o}, sizeof(double) * n{k});\n  for (size_t i = 0; i < n{k}; i++) {o}[i] = NAN;\n");
    }
    s += &format!(
        "  const int64_t len = {len};\n  int64_t *src = malloc(sizeof(int64_t) * len);\n  memcpy(src, q0 + 1, sizeof(int64_t) * len);\n  int rc = -1;\n  void *prep[] = {{0, 0, 0, 0}};\n  const int64_t *none[] = {{0, 0, 0, 0}};\n  prep[1] = atlpacked_prepare(0, sz + 1, src, len, &rc);\n  if (prep[1] == NULL || rc != 0) return 11;\n  memset(src, 0x5a, sizeof(int64_t) * len);\n  if (atlpacked_entry_prepared(sz + 1, re + 1, none + 1, prep + 1, out + 1) != 0) return 12;\n"
    );
    for (k, o) in outs.iter().enumerate() {
        s += &format!("  if (memcmp(w{k}, {o}, sizeof(double) * n{k}) != 0) return 13;\n");
    }
    // misuse: another relation buffer, other sizes, another parameter, a
    // short or broken layout
    s += "  if (atlpacked_entry_prepared(sz + 1, re + 1, rel + 1, prep + 1, out + 1) != 5) return 14;\n";
    s += "  int64_t sz2[sizeof sz / sizeof sz[0]];\n  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) sz2[i] = sz[i] + 1;\n  if (atlpacked_entry_prepared(sz2 + 1, re + 1, none + 1, prep + 1, out + 1) != 5) return 15;\n";
    s += "  if (atlpacked_prepare(1, sz + 1, q0 + 1, len, &rc) != NULL || rc != 5) return 16;\n";
    s +=
        "  if (atlpacked_prepare(0, sz + 1, q0 + 1, len - 1, &rc) != NULL || rc != 5) return 17;\n";
    s += "  memcpy(src, q0 + 1, sizeof(int64_t) * len);\n  src[len - 1] = -1;\n  if (atlpacked_prepare(0, sz + 1, src, len, &rc) != NULL || rc != 5) return 18;\n";
    s += "  src[len - 1] = sz[1] + 7;\n  if (atlpacked_prepare(0, sz + 1, src, len, &rc) != NULL || rc != 5) return 19;\n";
    s += "  memcpy(src, q0 + 1, sizeof(int64_t) * len);\n  src[src[4] + 1] = src[1] + 1;\n  if (atlpacked_prepare(0, sz + 1, src, len, &rc) != NULL || rc != 5) return 20;\n";
    s += "  atlpacked_prepared_free(prep[1]);\n  free(src);\n";
    for (k, o) in outs.iter().enumerate() {
        s += &format!("  free(w{k});\n  free({o});\n");
    }
    s += "  return 0;\n}\n";
    s
}

/// The loop order, layout and fusion of the lowering (`src/lower/order.rs`,
/// `src/lower/layout.rs`, `src/lower/fuse.rs`), read off the generated code.
#[test]
fn loops_are_interchanged_and_fused() {
    // A column sum: the sum's loop outside, the gen's inside (stride 1).
    let colsum = atl_egg::front::parse_program(
        b"(fn colsum ((A (tensor n m R))) (gen j m (sum i n (get A i j))))",
    )
    .expect("parse");
    let src = backend::generate(&colsum).expect("generate").source;
    let (i, j) = (
        src.find("_i = ").expect("i loop"),
        src.find("_j = ").expect("j loop"),
    );
    assert!(i < j, "the sum's loop should be outer:\n{src}");
    // nested_lets' gradient: u1 and u_bar (n x m) contracted to rows.
    let progs = CorpusProgram::load_dir(Path::new("corpus")).expect("corpus");
    assert_gradient_keeps_no_matrix(&progs, "nested_lets");
    // A sum over k under sums over i and j that is no matrix product (a
    // third factor): the sum over k runs outside the loop over j (a row
    // over j accumulated), so A[k][j] and dA[k][j] walk rows.
    let quad = atl_egg::front::parse_program(
        b"(fn q ((A (tensor n n R)) (x (tensor n R)) (dA (tensor n n R)))
            (sum i n (* (get x i) (sum j n (* (sum k n (+ (* (get dA k i) (* (get A k j) (get x k)))
                                                        (* (get A k i) (get dA k j))))
                                              (get x j))))))",
    )
    .expect("parse");
    let src = backend::generate(&quad).expect("generate").source;
    let (k, j) = (
        src.find("_k = ").expect("k loop"),
        src.find("_j = ").expect("j loop"),
    );
    assert!(k < j, "the sum over k should be outer to j:\n{src}");
    // rank3_batched_bilinear's gradient: its n x B intermediate, read by
    // columns, is stored B x n and fused into the loop over B (a row).
    assert_gradient_keeps_no_matrix(&progs, "rank3_batched_bilinear");
    // A graph layer reads XW's rows through the edges (j jumps from row to
    // row): XW stays row-major, one row's features read in turn.
    let layer = atl_egg::front::parse_program(
        b"(fn g ((E (relation n n)) (X (tensor n f R)) (W (tensor f h R)))
            (let XW (gen j n (gen c h (sum k f (* (get X j k) (get W k c)))))
              (sum i n (sum c h (sum j n (iverson (E i j) (get XW j c)))))))",
    )
    .expect("parse");
    let src = backend::generate(&layer).expect("generate").source;
    let read = src
        .lines()
        .find(|l| l.contains("+= b") && l.contains("_XW["))
        .unwrap_or_else(|| panic!("no read of XW:\n{src}"));
    assert!(
        read.contains("_j") && read.find("_j") < read.find("_c"),
        "XW should be read as XW[j][c]: {read}"
    );
}

/// The compiled gradient of the corpus program `name` keeps no matrix
/// intermediate: every arena slot is a scalar or a row.
fn assert_gradient_keeps_no_matrix(progs: &[CorpusProgram], name: &str) {
    let p = progs.iter().find(|p| p.name == name).expect(name);
    let g = derive::grad(&p.program, &p.wrt_or_all(), &options())
        .expect("grad")
        .program;
    let f = backend::generate(&g).expect("generate").function;
    assert!(
        f.slots.iter().all(|s| s.dims.len() <= 1),
        "{name}'s gradient materialized a matrix intermediate: {:?}",
        f.slots
    );
}

/// Special values for the black boxes: signed zeros, infinities, NaN, ±1,
/// the tiniest and hugest doubles, negatives, and arguments where `exp`
/// and `pow` overflow or underflow.
const SPECIAL_VALUES: [f64; 20] = [
    0.0,
    -0.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1.0,
    -1.0,
    5e-324,
    -5e-324,
    f64::MIN_POSITIVE,
    f64::MAX,
    f64::MIN,
    1e-300,
    -1e300,
    0.5,
    -0.5,
    -2.0,
    -3.0,
    710.0,
    -746.0,
];

/// Every black box, every derivative black box, and `pow`/`dpow` at
/// exponents a C compiler might rewrite (0.5, 2, -1, 0, 1/3, ...), in a
/// `gen` loop long enough to be vectorized, over [`SPECIAL_VALUES`]: the
/// compiled values equal `eval`'s bit for bit (any NaN equals any NaN).
#[test]
fn black_boxes_equal_eval_bit_for_bit_on_special_values() {
    if !have_cc() {
        return;
    }
    let boxes = atl_egg::front::blackbox::BLACK_BOXES;
    let mut calls: Vec<String> = boxes
        .iter()
        .filter(|b| b.param.is_none())
        .map(|b| format!("({} (get x i))", b.name))
        .collect();
    for k in [
        "0.5",
        "2.0",
        "-1.0",
        "0.0",
        "1.0",
        "0.3333333333333333",
        "3.0",
        "-0.5",
        "-2.0",
        "2.5",
        "5.0",
    ] {
        for b in boxes.iter().filter(|b| b.param.is_some()) {
            if (b.check_param)(k.parse().expect("a number")).is_ok() {
                calls.push(format!("({} (get x i) {k})", b.name));
            }
        }
    }
    // Three copies of the values: the vectorized body and its remainder.
    let xs: Vec<f64> = SPECIAL_VALUES.iter().cycle().take(60).copied().collect();
    let n = xs.len() as i64;
    let mut failures = vec![];
    for call in &calls {
        let src = format!("(fn f ((x (tensor n R))) (gen i n {call}))");
        let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let mut inputs = Inputs::new([(atl_egg::Symbol::from("n"), n)].into_iter().collect());
        inputs.values.insert(
            atl_egg::Symbol::from("x"),
            atl_egg::semantics::value::Value::reals(&xs),
        );
        let want = eval::evaluate(&prog, &inputs).expect("eval");
        let got = backend::compile(&prog)
            .and_then(|c| c.call(&inputs))
            .unwrap_or_else(|e| panic!("{call}: {e}"));
        for (k, &x) in xs.iter().enumerate() {
            let (w, g) = (
                want.get(k as i64).and_then(|v| v.real()).expect("real"),
                got.get(k as i64).and_then(|v| v.real()).expect("real"),
            );
            if !(w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan())) {
                failures.push(format!("{call} at x = {x:e}: eval {w:e}, run {g:e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `max` and `min` over every pair of [`SPECIAL_VALUES`] (NaN, infinities,
/// signed zeros, subnormals) and `(real a)`, in a `gen` loop long enough to
/// be vectorized: the compiled values equal `eval`'s bit for bit (ties keep
/// the first operand, so `(max -0 0)` is `-0`; a NaN operand gives NaN).
#[test]
fn max_min_and_real_equal_eval_bit_for_bit_on_special_values() {
    if !have_cc() {
        return;
    }
    let k = SPECIAL_VALUES.len();
    let xs: Vec<f64> = (0..k * k).map(|m| SPECIAL_VALUES[m / k]).collect();
    let ys: Vec<f64> = (0..k * k).map(|m| SPECIAL_VALUES[m % k]).collect();
    let n = xs.len() as i64;
    let bodies = [
        "(max (get x i) (get y i))",
        "(min (get x i) (get y i))",
        "(max (get y i) (get x i))",
        "(min (max (get x i) 0) (get y i))",
        "(* (real (- i 7)) (max (get x i) (real (* 2 i))))",
    ];
    let mut failures = vec![];
    for body in bodies {
        let src = format!("(fn f ((x (tensor n R)) (y (tensor n R))) (gen i n {body}))");
        let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let mut inputs = Inputs::new([(atl_egg::Symbol::from("n"), n)].into_iter().collect());
        let reals = atl_egg::semantics::value::Value::reals;
        inputs.values.insert(atl_egg::Symbol::from("x"), reals(&xs));
        inputs.values.insert(atl_egg::Symbol::from("y"), reals(&ys));
        let want = eval::evaluate(&prog, &inputs).expect("eval");
        let got = backend::compile(&prog)
            .and_then(|c| c.call(&inputs))
            .unwrap_or_else(|e| panic!("{body}: {e}"));
        for m in 0..xs.len() {
            let (w, g) = (
                want.get(m as i64).and_then(|v| v.real()).expect("real"),
                got.get(m as i64).and_then(|v| v.real()).expect("real"),
            );
            if !(w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan())) {
                failures.push(format!(
                    "{body} at x = {:e}, y = {:e}: eval {w:e}, run {g:e}",
                    xs[m], ys[m]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `maximum`, `minimum`, `argmax` and `argmin` of every row of a table of
/// special values (ties, signed zeros, infinities, NaN) and of an empty
/// range: compiled code equals eval bit for bit, and executes exactly the
/// operations the work cost counts (`n - 1` comparisons a row, none for an
/// empty one).
#[test]
fn reductions_equal_eval_bit_for_bit_and_count_their_cost() {
    if !have_cc() {
        return;
    }
    // rows of three: every ordered triple of special values would be many;
    // each value at each position beside each other value is enough
    let mut rows: Vec<[f64; 3]> = vec![];
    for a in SPECIAL_VALUES {
        for b in SPECIAL_VALUES {
            rows.push([a, b, a]);
            rows.push([b, a, a]);
        }
    }
    let bodies = [
        "(gen r rows (maximum i n (get x r i)))",
        "(gen r rows (minimum i n (get x r i)))",
        "(gen r rows (argmax i n (get x r i)))",
        "(gen r rows (argmin i n (* -1 (get x r i))))",
        "(gen r rows (maximum i n (+ (get x r i) (real i))))",
    ];
    let mut failures = vec![];
    for body in bodies {
        let src = format!("(fn f ((x (tensor rows n R))) {body})");
        let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        for n in [3usize, 0] {
            let sizes = [("rows", rows.len() as i64), ("n", n as i64)];
            let mut inputs = Inputs::new(
                sizes
                    .iter()
                    .map(|(s, v)| (atl_egg::Symbol::from(*s), *v))
                    .collect(),
            );
            let reals = atl_egg::semantics::value::Value::reals;
            let x = rows.iter().map(|r| reals(&r[..n])).collect();
            inputs.values.insert(
                atl_egg::Symbol::from("x"),
                atl_egg::semantics::value::Value::tensor(x),
            );
            let want = eval::evaluate(&prog, &inputs).expect("eval");
            let (got, ops) = backend::compile_with(&prog, true)
                .and_then(|c| c.call_counted(&inputs))
                .unwrap_or_else(|e| panic!("{body}: {e}"));
            let (w, g) = (leaves(&want), leaves(&got));
            for (m, (w, g)) in w.iter().zip(&g).enumerate() {
                if !(w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan())) {
                    failures.push(format!(
                        "{body}, n = {n}, element {m}: eval {w:e}, run {g:e}"
                    ));
                }
            }
            let ops = ops.expect("counters");
            let total: u128 = ops[..3].iter().map(|&k| k as u128).sum();
            let c = cost::cost(&prog, &inputs.sizes, &inputs.relations).expect("cost");
            if total != c {
                failures.push(format!("{body}, n = {n}: executed {total} ops, cost {c}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The reals of a value, in order (a lazy zero has none).
fn leaves(v: &atl_egg::semantics::value::Value) -> Vec<f64> {
    use atl_egg::semantics::value::Value;
    match v {
        Value::Real(x) => vec![*x],
        Value::Zero => vec![],
        Value::Pair(a, b) => [leaves(a), leaves(b)].concat(),
        Value::Tensor(xs) => xs.iter().flat_map(leaves).collect(),
    }
}

/// The softmax cross-entropy through `maximum` at logits of ±1,000: `run`
/// of the function and of its gradient is finite and equals `eval`.
#[test]
fn softmax_cross_entropy_runs_finite_at_logits_of_1000() {
    if !have_cc() {
        return;
    }
    let prog = atl_egg::front::parse_program(
        &std::fs::read("corpus/softmax_xent_stable.atl").expect("corpus"),
    )
    .expect("parse");
    let g = derive::grad(&prog, &[atl_egg::Symbol::from("z")], &options())
        .expect("grad")
        .program;
    let sizes = [("B", 2), ("K", 3)];
    let mut inputs = Inputs::new(
        sizes
            .iter()
            .map(|(s, v)| (atl_egg::Symbol::from(*s), *v))
            .collect(),
    );
    let reals = atl_egg::semantics::value::Value::reals;
    let tensor = atl_egg::semantics::value::Value::tensor;
    let z = [1000.0, -1000.0, 1000.0, -1000.0, 1000.0, -1000.0];
    let y = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    inputs.values.insert(
        atl_egg::Symbol::from("z"),
        tensor(z.chunks(3).map(reals).collect()),
    );
    inputs.values.insert(
        atl_egg::Symbol::from("y"),
        tensor(y.chunks(3).map(reals).collect()),
    );
    for (what, p) in [("function", &prog), ("gradient", &g)] {
        let want = eval::evaluate(p, &inputs).expect("eval");
        let got = backend::compile(p)
            .and_then(|c| c.call(&inputs))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let (w, g) = (leaves(&want), leaves(&got));
        assert!(
            w.iter().chain(&g).all(|v| v.is_finite()),
            "{what}: {w:?} {g:?}"
        );
        compare_values(
            &want,
            &got,
            Tolerance {
                rel: 1e-12,
                abs: 1e-12,
            },
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// Run `src` at `sizes` (counted) on random inputs and compare with eval.
fn check_source(src: &str, sizes: &[(&str, i64)]) -> Result<(), String> {
    let prog = atl_egg::front::parse_program(src.as_bytes()).map_err(|e| format!("{e}"))?;
    let sizes = sizes
        .iter()
        .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
        .collect();
    let inputs = random_inputs(&prog, &sizes, &mut Rng::new(11)).map_err(|e| format!("{e}"))?;
    check(&prog, &inputs, src).map(|_| ())
}

/// Names a user may write that look like the names the lowering and the
/// emitter make: the rows, accumulators and copy indices of the lowering
/// (`%row14`, `%acc12`, `k9`), the emitter's locals and helpers, fresh C
/// names, C keywords and libm functions.
fn lookalike_names() -> Vec<String> {
    let mut names = vec![];
    for k in 0..=60 {
        names.extend([format!("%row{k}"), format!("%acc{k}"), format!("k{k}")]);
    }
    for s in [
        "int",
        "for",
        "while",
        "return",
        "double",
        "const",
        "static",
        "void",
        "if",
        "else",
        "main",
        "exp",
        "sqrt",
        "pow",
        "sin",
        "log",
        "nan",
        "NAN",
        "INFINITY",
        "atl_total",
        "atl_arena",
        "atlv_total",
        "atlv_arena",
        "atlv_n",
        "atl_f",
        "atlh_max",
        "atlpacked_entry",
        "ATL_ADD",
        "d0",
        "d1",
        "i4_i",
        "acc7",
        "t2_x",
        "b5_row",
        "sz",
        "re",
        "rel",
        "out",
    ] {
        names.push(s.to_string());
    }
    names
}

/// Lets named like the lowering's own variables, in scope while a fused
/// run of gens (rows, an accumulator) is lowered and read after it: `run`
/// equals `eval`.
#[test]
fn let_names_like_the_lowerings_own_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let names = lookalike_names();
    for group in names.chunks(64) {
        let mut src = String::from("(fn f ((x (tensor n R)))\n");
        for (k, p) in group.iter().enumerate() {
            src += &format!("(let {p} (get x {})\n", k % 4);
        }
        src += "(let u (gen i n (* 2.0 (get x i)))
                (let w (gen i n (+ (get u i) 1.0))
                (let s (sum i n (* (get w i) (get u i)))
                (gen i n (+ (* s (get w i)) ";
        let reads: Vec<String> = group.iter().map(|p| format!("(+ {p} ")).collect();
        src += &reads.concat();
        src += "0.0";
        // The reads, the `+`, the gen, the three lets, the probes' lets, the fn.
        src += &")".repeat(group.len() + 1 + 1 + 3 + group.len() + 1);
        if let Err(e) = check_source(&src, &[("n", 4)]) {
            panic!("{e}");
        }
    }
}

/// Indices and parameters named like the lowering's own variables (a band
/// offset `%o6_j`, a copy index `k9`), C keywords, libm functions and the
/// emitter's names: `run` equals `eval`.
#[test]
fn index_and_parameter_names_like_the_lowerings_own_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    for k in 0..=40 {
        let (o, c) = (format!("%o{k}_j"), format!("k{k}"));
        // A band (its sum runs re-indexed by an offset) under an index
        // named like the offset; a lazy view copied (by a copy index)
        // under an index named like that copy index.
        let src = format!(
            "(fn f ((x (tensor n R)))
               (pair (gen {o} n (sum j n (iverson (and (<= {o} j) (<= j (+ {o} 2))) (get x j))))
                     (gen {c} n (pair (let v (gen i n (get x i)) (let w v w)) (get x {c})))))"
        );
        if let Err(e) = check_source(&src, &[("n", 5)]) {
            panic!("{e}");
        }
    }
    let src = "(fn main ((exp (tensor int R)) (sqrt R) (for size) (atlv_total (tensor for R)))
                 (gen while int (sum return for (* (get exp while)
                   (+ sqrt (* (get atlv_total return) (get exp (+ while 1))))))))";
    if let Err(e) = check_source(src, &[("int", 4), ("for", 3)]) {
        panic!("{e}");
    }
}

/// `run` as `eval`: both fail with an error of the same kind and message
/// (up to eval's naming the form), or both give equal values.
fn run_agrees_with_eval(src: &str, sizes: &[(&str, i64)], xs: &[f64]) -> Result<(), String> {
    let prog = atl_egg::front::parse_program(src.as_bytes()).map_err(|e| format!("{e}"))?;
    let mut inputs = Inputs::new(
        sizes
            .iter()
            .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
            .collect(),
    );
    inputs.values.insert(
        atl_egg::Symbol::from("x"),
        atl_egg::semantics::value::Value::reals(xs),
    );
    let want = eval::evaluate(&prog, &inputs);
    let got = backend::compile_with_flags(&prog, false, &check_flags())
        .map_err(|e| format!("{src}: compile: {e}"))?
        .call(&inputs);
    let what = format!("{src} at {sizes:?}");
    match (want, got) {
        (Ok(w), Ok(g)) => compare_values(&w, &g, Tolerance { rel: 0.0, abs: 0.0 })
            .map_err(|e| format!("{what}: run differs from eval: {e}")),
        (Err(w), Err(g)) => {
            let overflow = |m: &str| m.contains("overflows 64-bit integers");
            if w.kind == g.kind && (w.msg == g.msg || overflow(&w.msg) && overflow(&g.msg)) {
                Ok(())
            } else {
                Err(format!("{what}: eval: {w}; run: {g}"))
            }
        }
        (w, g) => Err(format!("{what}: eval {w:?}, run {g:?}")),
    }
}

/// Sizes that make index arithmetic overflow: `run` reports it as `eval`
/// does (it crashed, or read the wrong element), and a size that keeps
/// the arithmetic in range gives `eval`'s value.
#[test]
fn index_overflow_is_reported_as_eval_reports_it() {
    if !have_cc() {
        return;
    }
    let xs: Vec<f64> = (1..=9).map(f64::from).collect();
    let cases: [(&str, i64); 5] = [
        // 5m + i + j overflows for the larger i + j only: a segfault before.
        (
            "(fn f ((x (tensor n R)) (m size)) (sum i n (sum j n (* (get x j) (get x (+ (* 5 m) (+ i j)))))))",
            3074457345618258603,
        ),
        // i + m overflows from i = 1 on: run returned x before.
        ("(fn f ((x (tensor n R)) (m size)) (gen i n (get x (+ i m))))", i64::MAX),
        ("(fn f ((x (tensor n R)) (m size)) (gen i n (get x (+ i m))))", i64::MAX - 8),
        // A stride of 2^61 m: out of range (zeros) at m = 1, overflows at 2.
        (
            "(fn f ((x (tensor n R)) (m size)) (sum i n (* (get x i) (+ (get x i) (get x (* 2305843009213693952 (+ m i)))))))",
            1,
        ),
        (
            "(fn f ((x (tensor n R)) (m size)) (sum i n (* (get x i) (+ (get x i) (get x (* 2305843009213693952 (+ m i)))))))",
            2,
        ),
    ];
    for (src, m) in cases {
        run_agrees_with_eval(src, &[("n", 9), ("m", m)], &xs).unwrap_or_else(|e| panic!("{e}"));
    }
    // A dimension that overflows.
    run_agrees_with_eval(
        "(fn f ((x (tensor n R)) (m size)) (sum i (+ m m) (get x i)))",
        &[("n", 9), ("m", 1 << 62)],
        &xs,
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Index forms `K + a i + b m + c` over a grid of coefficients and sizes
/// at the edges of `int64_t`: wherever `eval` overflows, `run` reports it,
/// and elsewhere the two give the same values (a gen evaluates its index at
/// every `i`, so the entry check over `i`'s range is exact).
#[test]
fn index_arithmetic_at_the_edges_of_int64_runs_as_evaluated() {
    if !have_cc() {
        return;
    }
    let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
    let big = [0i64, 1, 3, 1 << 61, (1 << 62) - 1, i64::MAX - 4, i64::MAX];
    for a in [1i64, -3, 1 << 61, i64::MAX] {
        for b in [1i64, -(1 << 62)] {
            for k in [0i64, i64::MIN + 5] {
                let src = format!(
                    "(fn f ((x (tensor n R)) (m size) (c size)) (gen i n (get x (+ {k} (+ (* {a} i) (+ (* {b} m) c))))))"
                );
                for &m in &big {
                    for &c in &big[..4] {
                        run_agrees_with_eval(&src, &[("n", 5), ("m", m), ("c", c)], &xs)
                            .unwrap_or_else(|e| panic!("{e}"));
                    }
                }
            }
        }
    }
}

/// A long program mixing the lowering's forms (scalar and tensor lets,
/// sums at the top level, brackets, column sums run interchanged): its
/// body is split into part functions; counted, it still equals `eval`
/// and its operations the cost, and its C compiles without warnings.
#[test]
fn long_programs_split_into_parts_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let mut src = String::from("(fn f ((x (tensor n R)) (A (tensor n n R)))\n(let s0 (get x 0)\n");
    let blocks = 150;
    for k in 1..=blocks {
        let p = k - 1;
        src += &format!(
            "(let s{k} (+ (* 0.5 s{p}) (sum i n (* (get x i) (sin s{p}))))
             (let v{k} (gen j n (+ (get x j) s{k}))
             (let t{k} (+ s{k} (sum i n (iverson (< i 2) (get v{k} i))))
             (let c{k} (gen j n (sum i n (get A i j)))
             (let s{k} (+ (* 0.25 t{k}) (get c{k} 1))\n"
        );
    }
    src += &format!("(gen j n (* s{blocks} (get x j)))");
    src += &")".repeat(5 * blocks + 2);
    let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
    let generated = backend::generate(&prog).expect("generate");
    assert!(
        generated.source.contains("_part1("),
        "the body was not split"
    );
    let sizes = [(atl_egg::Symbol::from("n"), 3)].into_iter().collect();
    let inputs = random_inputs(&prog, &sizes, &mut Rng::new(5)).expect("inputs");
    check(&prog, &inputs, "a long program").unwrap_or_else(|e| panic!("{e}"));
    let dir = std::env::temp_dir().join(format!("atl-egg-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let c = dir.join("long.c");
    std::fs::write(&c, &generated.source).expect("write");
    let out = Command::new(build::compiler())
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
        .arg(&c)
        .output()
        .expect("cc");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A two-line program whose brackets nest: the schedules applied after
/// lowering (pieces, blocks of rows, edges, residues) copied loop bodies
/// into copies, 8,282 lines of C that took the C compiler about 24 CPU
/// seconds; within the code budget it is about 3,300 lines. Counted, it
/// still equals `eval` and its operations the cost.
#[test]
fn schedules_stay_within_their_code_budget() {
    if !have_cc() {
        return;
    }
    let src = "(fn f ((n size) (m size) (x0 (tensor 3 R)) (x1 (tensor 3 R))) (gen i1 2 (pair \
        (sum s2 m (+ (* (sum s3 (+ n 1) 0.25) (iverson (exists e4 3 (< (* 2 (- e4 i1)) i1)) 0.25)) \
        (get (gen i5 n 3e-1) (- (* -1 1) (* -1 i1))))) (+ (let v6 (pair (* -1 (let v7 (gen i8 1 \
        0.25) (let v9 (pair 0.25 2) (gen i10 2 2)))) (iverson (>= i1 2) 0.25)) (max (+ 0.25 0.25) \
        (get (gen i11 m 0.25) 0))) (* (+ (sum s12 n 0.25) (let v13 1.5 v13)) (let v14 (sum s15 m \
        (gen i16 (+ n 1) (gen i17 (+ n 1) 0.25))) (* 0.25 3e-1)))))))";
    let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
    let generated = backend::generate(&prog).expect("generate");
    let lines = generated.source.lines().count();
    assert!(lines < 5000, "{lines} lines of C");
    for (n, m) in [(2, 1), (0, 0), (5, 3)] {
        let sizes = [
            (atl_egg::Symbol::from("n"), n),
            (atl_egg::Symbol::from("m"), m),
        ]
        .into_iter()
        .collect();
        let inputs = random_inputs(&prog, &sizes, &mut Rng::new(7)).expect("inputs");
        check(&prog, &inputs, &format!("n={n}, m={m}")).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// 100,000 nested `(+ 1 ...)`, 100,000 nested `sin` and a condition of
/// 20,000 nested `and`/`or`: `run` builds and runs them (the C compiler
/// takes time superlinear in a function's length, so the body is split into
/// part functions; a long condition is a local of its own) and prints what
/// `eval` prints, without hanging.
#[test]
fn deep_expressions_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("atl-egg-deep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let bin = env!("CARGO_BIN_EXE_atl-egg");
    std::fs::write(dir.join("in.json"), r#"{"x": [0.5, 1.0]}"#).expect("write");
    // A bracket whose condition nests `and` and `or` 20,000 deep.
    let mut cond = String::from("(< i 1)");
    for k in 0..20_000 {
        cond = if k % 2 == 0 {
            format!("(and (< i 7) (or (> i 100) {cond}))")
        } else {
            format!("(or (> i 100) (and (< i 8) {cond}))")
        };
    }
    let bracket = format!("(fn f ((x (tensor 2 R))) (gen i 2 (iverson {cond} (get x i))))");
    for (what, wrap) in [("(+ 1 ", ")"), ("(sin ", ")"), ("", "")] {
        let depth = 100_000;
        let src = if what.is_empty() {
            bracket.clone()
        } else {
            format!(
                "(fn f ((x (tensor 2 R))) {}(get x 0){})",
                what.repeat(depth),
                wrap.repeat(depth)
            )
        };
        let file = dir.join("deep.atl");
        std::fs::write(&file, src).expect("write");
        let run = |cmd: &str| {
            let t = std::time::Instant::now();
            let out = Command::new(bin)
                .arg(cmd)
                .arg(&file)
                .arg("--inputs")
                .arg(dir.join("in.json"))
                .env("ATL_EGG_CACHE", dir.join("cache"))
                // what is checked is the lowering of deep terms: the C
                // compiler's optimizations are not, and take it 30 s of
                // CPU at `-O3` on these 8 MB of C
                .env("ATL_EGG_CFLAGS", "-O1")
                .output()
                .expect("atl-egg");
            assert!(
                out.status.success(),
                "{cmd} of {depth} nested {what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                t.elapsed(),
            )
        };
        let (want, _) = run("eval");
        let (got, took) = run("run");
        assert_eq!(got, want, "{depth} nested {what}");
        // a guard against a hang, not a measurement: on a loaded machine
        // the C compiler alone has taken over 90 s here
        assert!(
            took.as_secs() < 600,
            "run of {depth} nested {what} took {took:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The corpus programs whose derivatives the parallel-loop test also runs:
/// the dense ones (contractions, convolutions, stencils, fused rows).
const DENSE: [&str; 8] = [
    "matmul",
    "deconv_signal_loss",
    "deconv_kernel_loss",
    "causal_attention",
    "two_layer_mlp",
    "stencil_chain",
    "rank3_batched_bilinear",
    "nested_lets",
];

/// Parallel loops, forced at every size (`-DATL_PAR_WORK=0`), at one and at
/// two threads: every corpus program, and the gradient (or vector-Jacobian
/// product) of the dense ones, at its largest sizes equals `eval` within
/// 1e-12 relative to the largest magnitude (a parallel sum adds its
/// chunks' sums, a reassociation).
#[test]
fn parallel_loops_run_as_evaluated_at_one_and_two_threads() {
    if !have_cc() {
        return;
    }
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    let progs = CorpusProgram::load_dir(Path::new("corpus")).expect("corpus");
    let (mut failures, mut parallel, mut total) = (vec![], 0, 0);
    for p in &progs {
        let prog = &p.program;
        let wrt = p.wrt_or_all();
        let mut runs = vec![("f", prog.clone())];
        if DENSE.contains(&p.name.as_str()) {
            let derivative = if prog.ret == atl_egg::front::ast::Type::Real {
                derive::grad(prog, &wrt, &options())
            } else {
                derive::vjp(prog, &wrt, &options())
            };
            runs.push(("derivative", derivative.expect("derivative").program));
        }
        for (what, prog) in runs {
            let sizes = p.size_sets.last().expect("a size set");
            let mut rng = Rng::new(p.seed);
            let inputs = random_inputs(&prog, sizes, &mut rng).expect("inputs");
            let want = eval::evaluate(&prog, &inputs).expect("eval");
            let src = backend::generate(&prog).expect("generate").source;
            total += 1;
            if src.contains("ATL_PARALLEL_FOR(") {
                parallel += 1;
            }
            let compiled = backend::compile_with_flags(&prog, false, &flags).expect("compile");
            for e in at_one_and_two_threads(&compiled, &inputs, &want) {
                failures.push(format!("{} {what} {e}", p.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Most programs have a loop that runs in parallel.
    assert!(
        2 * parallel >= total,
        "only {parallel} of {total} programs have a parallel loop"
    );
}

/// Matrix products run by the tiled contraction kernel (`src/lower/contract.rs`):
/// plain, with either operand transposed, narrow (12 and 3 columns: fewer
/// than a panel), under another expression, under `relu` (applied by the
/// kernel to its tiles, wide and narrow), into a batch's slice and in
/// matmul's gradient, at sizes with remainders in every
/// blocking (rows, columns, more than one block of the summed index). The
/// kernel is called; values equal `eval` (within 1e-12 relative to the
/// largest magnitude, at one and at two threads, forced parallel) and the
/// counting build counts the cost exactly.
#[test]
fn contractions_run_by_the_tiled_kernel_as_evaluated() {
    if !have_cc() {
        return;
    }
    let sizes = [("n", 29), ("k", 300), ("m", 37), ("B", 3), ("w", 12)];
    let sources = [
        "(fn ab ((A (tensor n k R)) (X (tensor k m R))) (gen i n (gen j m (sum l k (* (get A i l) (get X l j))))))",
        "(fn narrow ((A (tensor n k R)) (X (tensor k w R))) (gen i n (gen j w (sum l k (* (get A i l) (get X l j))))))",
        "(fn narrow_t ((A (tensor k n R)) (X (tensor k B R))) (gen i n (gen j B (sum l k (* (get X l j) (get A l i))))))",
        "(fn atb ((A (tensor k n R)) (X (tensor k m R))) (gen i n (gen j m (sum l k (* (get X l j) (get A l i))))))",
        "(fn abt ((A (tensor n k R)) (X (tensor m k R))) (gen i n (gen j m (+ 1.0 (exp (* 0.01 (sum l k (* (get A i l) (get X j l)))))))))",
        "(fn batch ((A (tensor B n k R)) (X (tensor B k m R))) (gen b B (gen i n (gen j m (sum l k (* (get A b i l) (get X b l j)))))))",
        "(fn relu_ab ((A (tensor n k R)) (X (tensor k m R))) (gen i n (gen j m (relu (sum l k (* (get A i l) (get X l j)))))))",
        "(fn relu_narrow ((A (tensor n k R)) (X (tensor k w R))) (gen i n (gen j w (relu (sum l k (* (get A i l) (get X l j)))))))",
    ];
    let mut progs = vec![];
    for src in sources {
        progs.push(atl_egg::front::parse_program(src.as_bytes()).expect("parse"));
    }
    let lsq = "(fn lsq ((A (tensor n k R)) (X (tensor k m R)) (B (tensor n m R)))
      (let R (gen i n (gen j m (- (sum l k (* (get A i l) (get X l j))) (get B i j))))
        (* 0.5 (sum i n (sum j m (* (get R i j) (get R i j)))))))";
    let lsq = atl_egg::front::parse_program(lsq.as_bytes()).expect("parse");
    let wrt = [atl_egg::Symbol::from("X"), atl_egg::Symbol::from("A")];
    progs.push(derive::grad(&lsq, &wrt, &options()).expect("grad").program);
    progs.push(lsq);
    let sizes = sizes
        .iter()
        .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
        .collect();
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    for prog in &progs {
        let what = prog.name.to_string();
        let src = backend::generate(prog).expect("generate").source;
        assert!(
            src.contains("  atlh_gemm(") || src.contains("  atlh_gemm_relu("),
            "{what}: no kernel call:\n{src}"
        );
        // relu of a product is applied by the kernel: no pass after it.
        if what.starts_with("relu") {
            let body = &src[src.find(&format!("int atl_{what}(")).expect("function")..];
            assert!(
                body.contains("  atlh_gemm_relu(") && !body.contains("atlh_relu("),
                "{what}: relu not applied by the kernel:\n{body}"
            );
        }
        let inputs = random_inputs(prog, &sizes, &mut Rng::new(5)).expect("inputs");
        let (ops, c) = check(prog, &inputs, &what).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ops, c, "{what}: executed operations differ from the cost");
        let want = eval::evaluate(prog, &inputs).expect("eval");
        let compiled = backend::compile_with_flags(prog, false, &flags).expect("compile");
        let failures = at_one_and_two_threads(&compiled, &inputs, &want);
        assert!(failures.is_empty(), "{what} {}", failures.join("; "));
    }
}

/// Under AVX2 with FMA (and without AVX-512) the kernel's micro-kernel
/// keeps its 6×8 tile of sums in ymm registers: built for `x86-64-v3`, no
/// vector fused multiply-add of the generated C reads an accumulator from
/// the stack (the portable path's array of accumulators is spilled by GCC
/// there, at less than half the speed), and the values equal `eval` at one
/// and two threads. Skipped off x86-64 or with a compiler without the
/// target.
#[test]
fn contractions_keep_their_sums_in_registers_under_avx2() {
    if !have_cc() || !cfg!(target_arch = "x86_64") {
        return;
    }
    let src = "(fn ab ((A (tensor n k R)) (X (tensor k m R))) (gen i n (gen j m (sum l k (* (get A i l) (get X l j))))))";
    let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
    let c = backend::generate(&prog).expect("generate").source;
    let Some(asm) = assembly(&c, &["-march=x86-64-v3", "-mno-avx512f"]) else {
        return;
    };
    let fmas: Vec<&str> = asm
        .lines()
        .filter(|l| l.trim_start().starts_with("vfmadd") && l.contains("pd") && l.contains("%ymm"))
        .collect();
    assert!(fmas.len() >= 12, "no 6x8 tile of ymm multiply-adds:\n{asm}");
    let spilled: Vec<&&str> = fmas
        .iter()
        .filter(|l| l.contains("(%rsp)") || l.contains("(%rbp)"))
        .collect();
    assert!(spilled.is_empty(), "accumulators on the stack: {spilled:?}");
    let mut flags = build::Flags::default();
    flags.flags.retain(|f| f != "-march=native");
    flags.flags.push("-march=x86-64-v3".into());
    flags.flags.push("-mno-avx512f".into());
    flags.flags.push("-DATL_PAR_WORK=0".into());
    let sizes = [("n", 29), ("k", 300), ("m", 37)]
        .iter()
        .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
        .collect();
    let inputs = random_inputs(&prog, &sizes, &mut Rng::new(5)).expect("inputs");
    let want = eval::evaluate(&prog, &inputs).expect("eval");
    let compiled = backend::compile_with_flags(&prog, false, &flags).expect("compile");
    let failures = at_one_and_two_threads(&compiled, &inputs, &want);
    assert!(
        failures.is_empty(),
        "ab under AVX2: {}",
        failures.join("; ")
    );
}

/// `clipped_ramp_fit`'s gradient vectorizes under AVX2 with the library's
/// flags (`-ftrapping-math` included): `real(i + 1)` converts from 32 bits
/// when the loop's range fits (AVX2 has no vector conversion from 64-bit
/// integers), and `step` masks the bits of 1.0 with its comparison instead
/// of branching (GCC otherwise sinks `d̄·(1 - step(...))`'s product into
/// the branches and then cannot if-convert them). Its values equal `eval`
/// and it counts its cost; a form past 32 bits (`real(i·10⁶)` up to 5·10⁹)
/// converts from 64 and equals `eval` too. Skipped off x86-64 or with a
/// compiler without the target.
#[test]
fn index_reals_and_steps_vectorize_under_avx2() {
    if !have_cc() || !cfg!(target_arch = "x86_64") {
        return;
    }
    let (_, grad) = corpus_gradient("clipped_ramp_fit");
    let c = backend::generate(&grad).expect("generate").source;
    let Some(asm) = assembly(&c, &["-march=x86-64-v3", "-mno-avx512f"]) else {
        return;
    };
    let packed = |op: &str| {
        asm.lines()
            .any(|l| l.trim_start().starts_with(op) && l.contains("%ymm"))
    };
    assert!(
        packed("vcvtdq2pd") && packed("vmulpd"),
        "the gradient's loop is not vectorized:\n{asm}"
    );
    counts_exactly_at(
        &grad,
        "clipped_ramp_fit grad",
        &["n=4", "n=25", "n=1", "n=1003"],
        11,
    );
    let src = "(fn f ((x (tensor n R))) (sum i n (* (get x i) (real (* 1000000 i)))))";
    let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
    counts_exactly_at(&prog, "real past 32 bits", &["n=5000", "n=3"], 3);
}

/// On AVX2 CPUs whose GCC tuning prefers 128-bit vectors (`-march=znver1`,
/// AMD Zen 1) the generated C's vector loops still use 256-bit ones: the
/// convolution loss's blocked rows, built for `znver1`, multiply and add in
/// ymm registers, and the values equal `eval` at one and two threads, the
/// counting build counting the cost. Skipped off x86-64, with Clang, or
/// with a compiler without the target.
#[test]
fn vector_loops_use_256_bits_on_avx2_tuned_for_128() {
    if !have_cc() || !cfg!(target_arch = "x86_64") {
        return;
    }
    let version = Command::new(build::compiler())
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    if version.contains("clang") {
        eprintln!("skipped: Clang");
        return;
    }
    let src = "(fn conv ((x (tensor (- (+ m n) 1) R)) (c (tensor m R)) (z (tensor n R)))
  (sum i n
    (let d (+ (sum j m (* (get x (- (+ i m) (+ j 1))) (get c j))) (* -1 (get z i))) (* d d))))";
    let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
    let c = backend::generate(&prog).expect("generate").source;
    let Some(asm) = assembly(&c, &["-march=znver1"]) else {
        return;
    };
    let wide = asm
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            (l.starts_with("vmulpd") || l.starts_with("vaddpd")) && l.contains("%ymm")
        })
        .count();
    assert!(wide >= 2, "no 256-bit vector multiplies and adds:\n{asm}");
    let mut flags = build::Flags::default();
    flags.flags.retain(|f| f != "-march=native");
    flags.flags.push("-march=znver1".into());
    flags.flags.push("-DATL_PAR_WORK=0".into());
    flags.flags.push("-DATL_ROW_BLOCK=64".into());
    let compiled = backend::compile_with_flags(&prog, false, &flags).expect("compile");
    for (n, m) in [(1, 1), (7, 3), (300, 9), (1000, 9)] {
        let sizes = [("n", n), ("m", m)]
            .iter()
            .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
            .collect();
        let inputs = random_inputs(&prog, &sizes, &mut Rng::new(n as u64)).expect("inputs");
        assert_counted_and_evaluated(&compiled, &prog, &inputs, &format!("n={n} m={m}"));
    }
}

/// Contractions confined by a bracket to a band (`atlh_gemm_band`): the
/// output's elements `j` around `i` (attention's `[j <= i]·QKᵀ`), or each
/// element's terms `k` around `i` or around `j` (`PV`), lower and upper,
/// strict and not, shifted, both bounds at once; at sizes smaller than a
/// block of rows, odd, several blocks and more than one block of the summed
/// index (`B` packed once per call). Values equal `eval` at one and
/// two threads (every call parallel), the counting build counts the cost:
/// the bracketed terms only.
#[test]
fn banded_contractions_run_by_the_kernel_as_evaluated() {
    if !have_cc() {
        return;
    }
    let out = |p: &str| {
        format!("(fn out ((A (tensor n k R)) (X (tensor m k R))) (gen i n (gen j m (iverson {p} (exp (* 0.1 (sum l k (* (get A i l) (get X j l)))))))))")
    };
    let rows = |p: &str| {
        format!("(fn rows ((A (tensor n k R)) (X (tensor k m R))) (gen i n (gen j m (sum l k (iverson {p} (* (get A i l) (get X l j)))))))")
    };
    let cols = |p: &str| {
        format!("(fn cols ((A (tensor k n R)) (X (tensor k m R))) (gen i n (gen j m (* 2.0 (sum l k (iverson {p} (* (get X l j) (get A l i))))))))")
    };
    let sources = [
        out("(<= j i)"),
        out("(> j (+ i 2))"),
        out("(and (<= j (+ i 3)) (>= (+ j 5) i))"),
        out("(== j i)"),
        rows("(<= l i)"),
        rows("(< (+ l 3) i)"),
        rows("(>= l (- i 4))"),
        rows("(and (< l (+ i 7)) (> l (- i 9)))"),
        cols("(<= l j)"),
        cols("(> l (+ j 1))"),
    ];
    let mut progs = vec![];
    for src in &sources {
        progs.push(atl_egg::front::parse_program(src.as_bytes()).expect("parse"));
    }
    let attention = CorpusProgram::load_dir(Path::new("corpus"))
        .expect("corpus")
        .into_iter()
        .find(|p| p.name == "causal_attention")
        .expect("causal_attention");
    let wrt: Vec<atl_egg::Symbol> = ["Q", "K", "V"]
        .iter()
        .map(|s| atl_egg::Symbol::from(*s))
        .collect();
    progs.push(
        derive::grad(&attention.program, &wrt, &options())
            .expect("grad")
            .program,
    );
    progs.push(attention.program);
    let mut flags = check_flags();
    flags.flags.push("-DATL_GEMM_PAR_WORK=0".into());
    let size_sets = [
        [("n", 5), ("k", 3), ("m", 4), ("t", 5), ("d", 3)],
        [("n", 77), ("k", 70), ("m", 131), ("t", 77), ("d", 13)],
        [("n", 150), ("k", 200), ("m", 67), ("t", 150), ("d", 9)],
        // More than one block of the summed index (B is packed once per
        // call, in blocks that the row blocks' calls start on or not).
        [("n", 300), ("k", 300), ("m", 29), ("t", 70), ("d", 5)],
    ];
    for prog in &progs {
        let what = prog.name.to_string();
        let src = backend::generate(prog).expect("generate").source;
        assert!(
            src.contains("  atlh_gemm_band("),
            "{what}: no banded kernel call:\n{src}"
        );
        let compiled = backend::compile_with_flags(prog, false, &flags).expect("compile");
        for (n, set) in size_sets.iter().enumerate() {
            let sizes: Sizes = set
                .iter()
                .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
                .collect();
            let inputs = random_inputs(prog, &sizes, &mut Rng::new(7 + n as u64)).expect("inputs");
            let what = format!("{what} at {set:?}");
            assert_counted_and_evaluated(&compiled, prog, &inputs, &what);
        }
    }
}

/// A gen whose bracket has an equality fixing one of its variables (a
/// one-hot vector, a diagonal, an anti-diagonal, every second row) is
/// stored as a zero fill and a loop over the points the equality leaves
/// (`store_gen_pattern`): no loop over the whole range tests it. Values
/// equal `eval`, the counting build counts the cost, at sizes 1 to 9.
#[test]
fn gens_fixed_by_an_equality_fill_and_store_their_points() {
    if !have_cc() {
        return;
    }
    let sources = [
        "(fn onehot ((x (tensor n R))) (gen i n (iverson (== i 1) (* 2 (get x 1)))))",
        "(fn diag ((x (tensor n R))) (gen i n (gen j n (iverson (== i j) (get x i)))))",
        "(fn anti ((x (tensor n R))) (gen i n (gen j n (iverson (== (+ i j) (- n 1)) (* (get x i) (get x j))))))",
        "(fn rows ((x (tensor n R))) (gen i n (gen j n (iverson (and (== i (* 2 j)) (< j 3)) (get x j)))))",
    ];
    for src in sources {
        let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let what = prog.name.to_string();
        let c = backend::generate(&prog).expect("generate").source;
        let f = &c[c.find(&format!("int atl_{what}(")).expect("the function")..];
        assert!(
            !f.contains("ATL_TEST(c"),
            "{what}: an element-by-element test of the bracket:\n{f}"
        );
        for n in [1, 2, 5, 9] {
            let sizes = [(atl_egg::Symbol::from("n"), n)].into_iter().collect();
            let inputs = random_inputs(&prog, &sizes, &mut Rng::new(3)).expect("inputs");
            let (ops, cost) = check(&prog, &inputs, &what).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(ops, cost, "{what} at n = {n}: executed operations differ");
        }
    }
}

/// A bracket around a gen's body that reads none of the gens' variables
/// (a derivative's `[0 < n]` around its sum over `n`) is tested once, outside
/// the gens, so that the sum is interchanged as it would be without it: the
/// column sum walks `A` by rows, and `nearest_centre`'s gradient adds its
/// rows of `e` into a row per centre instead of walking `e` once per
/// coordinate. Values and counted operations as `eval` and the cost, also at
/// `n = 0` (the bracket false).
#[test]
fn brackets_free_of_the_gens_variables_are_tested_outside_them() {
    if !have_cc() {
        return;
    }
    let prog = atl_egg::front::parse_program(
        b"(fn colsum ((A (tensor n m R)))
            (gen j m (iverson (< 0 n) (* 2 (sum i n (get A i j))))))",
    )
    .expect("parse");
    let src = backend::generate(&prog).expect("generate").source;
    let f = &src[src.find("int atl_colsum(").expect("the function")..];
    let (i, j) = (
        f.find("_i = ").expect("i loop"),
        f.find("_j = ").expect("j loop"),
    );
    assert!(i < j, "the sum's loop should be outer:\n{f}");
    for (n, m) in [(0, 3), (1, 1), (7, 5)] {
        let sizes = [
            (atl_egg::Symbol::from("n"), n),
            (atl_egg::Symbol::from("m"), m),
        ]
        .into_iter()
        .collect();
        let inputs = random_inputs(&prog, &sizes, &mut Rng::new(5)).expect("inputs");
        let (ops, cost) = check(&prog, &inputs, "colsum").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ops, cost, "colsum at n = {n}: executed operations differ");
    }
    let (_, grad) = corpus_gradient("nearest_centre");
    let src = backend::generate(&grad).expect("generate").source;
    assert!(
        src.contains("ATL_SUMADD_AT("),
        "nearest_centre's gradient should add rows of e into a row:\n{src}"
    );
    counts_exactly_at(
        &grad,
        "nearest_centre grad",
        &["P=3,K=2,d=2", "P=20,K=4,d=3", "P=0,K=2,d=2", "P=2,K=3,d=0"],
        6,
    );
}

/// A result that is a gen of gens over one sum over the rows of a fused run
/// joins the run: `nearest_centre`'s gradient `dC[g][g1] = [0 < P]·-2·Σp
/// h[p][g]·e[p][g][g1]` adds each point's row of differences into a block
/// of K×d accumulators, so neither the P×K×d differences `e` nor the
/// one-hot `h` is stored whole. Values and counted operations as `eval`
/// and the cost, also at `P = 0` (the bracket false) and `d = 0`.
#[test]
fn reductions_of_gens_of_gens_join_their_row_fusion() {
    if !have_cc() {
        return;
    }
    let (_, grad) = corpus_gradient("nearest_centre");
    let f = backend::generate(&grad).expect("generate").function;
    let p = atl_egg::Symbol::from("P");
    assert!(
        f.slots
            .iter()
            .all(|s| s.dims.iter().all(|d| d.terms.iter().all(|(v, _)| *v != p))),
        "nearest_centre's gradient stored a P-sized intermediate: {:?}",
        f.slots
    );
    counts_exactly_at(
        &grad,
        "nearest_centre grad",
        &[
            "P=3,K=2,d=2",
            "P=20,K=4,d=3",
            "P=0,K=2,d=2",
            "P=2,K=3,d=0",
            "P=5,K=0,d=2",
        ],
        7,
    );
    // blur3x3's gradient: the kernel's 3×3 adjoint joins the loop over the
    // rows of `b_bar`; the image's adjoint, whose bracket bounds its outer
    // gen's variable by the row's, does not (most of an h-long loop per
    // row would be empty).
    let progs = CorpusProgram::load_dir(Path::new("examples/programs")).expect("examples");
    let blur = progs.iter().find(|p| p.name == "blur3x3").expect("blur3x3");
    let grad = derive::grad(&blur.program, &blur.wrt_or_all(), &options())
        .expect("grad")
        .program;
    let f = backend::generate(&grad).expect("generate").function;
    let (h, w) = (atl_egg::Symbol::from("h"), atl_egg::Symbol::from("w"));
    assert!(
        !f.slots.iter().any(|s| s.dims.len() == 2
            && s.dims.iter().any(|d| d.terms.iter().any(|(v, _)| *v == h))
            && s.dims.iter().any(|d| d.terms.iter().any(|(v, _)| *v == w))
            && s.cname.ends_with("_row")),
        "blur3x3's image adjoint should not accumulate into an h×w block: {:?}",
        f.slots
    );
    counts_exactly_at(
        &grad,
        "blur3x3 grad",
        &["h=1,w=1", "h=5,w=7", "h=0,w=3", "h=4,w=0"],
        8,
    );
}

/// Minor page faults of the calling thread so far (Linux): other tests
/// running beside it in the process do not count.
fn minor_faults() -> u64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid rusage for the kernel to fill.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
    u.ru_minflt as u64
}

/// A library keeps the last call's arena for the next call up to 1 GiB:
/// `logsumexp_tree`'s gradient binds 85 n-vectors (544 MB at n = 800,000),
/// which a call would otherwise map and fault in afresh (130,000 pages)
/// every time. Minor page faults of the third call, from the kernel's count
/// for this thread (Linux), which makes the call on one thread: other tests
/// running beside it in the process do not count.
#[test]
fn a_large_arena_is_kept_for_the_next_call() {
    if !have_cc() || !Path::new("/proc/self/stat").exists() {
        return;
    }
    let (_, grad) = corpus_gradient("logsumexp_tree");
    let sizes = [(atl_egg::Symbol::from("n"), 800_000)]
        .into_iter()
        .collect();
    let inputs = random_inputs(&grad, &sizes, &mut Rng::new(8)).expect("inputs");
    let compiled = backend::compile_with_flags(&grad, false, &check_flags()).expect("compile");
    compiled.set_threads(1).expect("threads");
    for _ in 0..2 {
        compiled.call(&inputs).expect("run");
    }
    let before = minor_faults();
    compiled.call(&inputs).expect("run");
    let faults = minor_faults() - before;
    assert!(
        faults < 30_000,
        "{faults} page faults in a call: the arena was not kept"
    );
}

/// A layout built in a call (a relation read transposed) goes to a buffer
/// the library keeps for the next call, as the arena does:
/// `graph_smoothness`' gradient at 300,000 nodes and 3·10⁶ edges builds
/// `Eᵀ` (26 MB, 6,400 pages) in every call, which would otherwise be
/// mapped and faulted in afresh each time. Minor page faults on this
/// thread, as for the arena: four calls more on inputs marshalled once.
#[test]
fn a_transposed_layout_is_kept_for_the_next_call() {
    if !have_cc() || !Path::new("/proc/self/stat").exists() {
        return;
    }
    let (_, grad) = corpus_gradient("graph_smoothness");
    let n = 300_000i64;
    let mut rng = Rng::new(5);
    let mut edges = vec![];
    for i in 0..n {
        let mut row: Vec<i64> = (0..10).map(|_| rng.range(0, n - 1)).collect();
        row.sort();
        row.dedup();
        edges.extend(row.into_iter().map(|j| vec![i, j]));
    }
    let sizes: Sizes = [(atl_egg::Symbol::from("n"), n)].into_iter().collect();
    let mut inputs = Inputs::new(sizes);
    let rel = atl_egg::semantics::value::Relation::from_tuples(vec![n as usize; 2], &edges)
        .expect("relation");
    inputs.relations.insert(atl_egg::Symbol::from("E"), rel);
    let x: Vec<f64> = (0..n).map(|i| ((i * 7 % 23) as f64) / 23.0).collect();
    inputs.values.insert(
        atl_egg::Symbol::from("x"),
        atl_egg::semantics::value::Value::reals(&x),
    );
    inputs.values.insert(
        atl_egg::Symbol::from("lam"),
        atl_egg::semantics::value::Value::Real(0.5),
    );
    assert!(!backend::generate(&grad)
        .unwrap()
        .function
        .permuted
        .is_empty());
    let compiled = backend::compile_with_flags(&grad, false, &check_flags()).expect("compile");
    compiled.set_threads(1).expect("threads");
    compiled.call(&inputs).expect("run");
    // one call and five on inputs marshalled once: the four calls more
    let faults = |repeat| {
        let before = minor_faults();
        compiled.call_timed(&inputs, repeat).expect("run");
        minor_faults() - before
    };
    let (one, five) = (faults(1), faults(5));
    assert!(
        five < one + 6_000,
        "{one} page faults in a call, {five} in five: the transposed layout was not kept"
    );
}

/// A stored result computed by a loop over every tuple of its relation
/// (the bracket is the relation alone, over its whole extent) is written
/// once per tuple with no zero fill before: `sparse_matvec_stored`'s
/// gradient w.r.t. `A` (10⁷ values at 10⁶ nodes) has no loop setting its
/// values to zero, and still equals the evaluator (the output buffers start
/// as NaN, so a tuple left unwritten would show) and counts its cost.
#[test]
fn a_stored_result_written_at_every_tuple_is_not_zeroed_first() {
    let (_, grad) = corpus_gradient("sparse_matvec_stored");
    let src = backend::generate(&grad).expect("generate").source;
    let zeroed: Vec<&str> = src
        .lines()
        .filter(|l| l.contains("_out_0[k") && l.contains("= 0.0;"))
        .collect();
    assert!(
        zeroed.is_empty(),
        "the stored gradient is zeroed before its loop writes every tuple: {zeroed:?}"
    );
    if !have_cc() {
        return;
    }
    counts_exactly_at(
        &grad,
        "sparse_matvec_stored grad",
        &["n=3,m=4", "n=8,m=6", "n=20,m=15", "n=0,m=3", "n=5,m=0"],
        9,
    );
}

/// A stored result leaf joins row fusion as rows of its relation's tuples:
/// `sparse_matvec_stored`'s gradient computes its residual `r̄[i]`, its
/// stored `dA` (a row of `S`'s tuples) and its scatter `dx[j] += ...` in
/// one loop over the rows, so each row's coordinates and values are read
/// from memory once and walked again while in cache, where three loops read
/// the 5 million tuples three times at n = m = 4096; `dA`'s and `dx`'s
/// terms come from one walk of the row. The loop runs in parallel chunks, and
/// equals `eval` (at one and two threads, every loop forced parallel) and
/// counts its cost.
#[test]
fn a_stored_result_joins_the_row_fusion_of_its_rows() {
    let (_, grad) = corpus_gradient("sparse_matvec_stored");
    let src = backend::generate(&grad).expect("generate").source;
    let start = src
        .find("int atl_sparse_matvec_stored(")
        .expect("the function");
    let body = &src[start..];
    let body = &body[..body.find("\n}\n").expect("its end")];
    assert!(
        !body.contains("_r_bar = atlv_arena"),
        "the residual is stored as an n-vector:\n{body}"
    );
    // Each tuple's dA is stored and its dx term added in the same walk.
    let lines: Vec<&str> = body.lines().collect();
    let store = lines
        .iter()
        .position(|l| l.contains("_out_0[q") && l.contains(" = "))
        .expect("the stored write");
    let rest = &lines[store + 1..];
    let scatter = rest
        .iter()
        .position(|l| l.contains("] += "))
        .expect("the scatter");
    assert!(
        rest[..scatter]
            .iter()
            .all(|l| !l.trim_start().starts_with("for (") && l.trim() != "}"),
        "dA and dx walk the tuples in separate loops:\n{body}"
    );
    assert!(
        body.contains("ATL_PARALLEL_FOR("),
        "the fused loop does not run in parallel chunks"
    );
    if !have_cc() {
        return;
    }
    counts_exactly_at(
        &grad,
        "sparse_matvec_stored grad",
        &["n=3,m=4", "n=20,m=15", "n=0,m=3", "n=5,m=0", "n=64,m=48"],
        5,
    );
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    let compiled = backend::compile_with_flags(&grad, false, &flags).expect("compile");
    for sizes in ["n=20,m=15", "n=200,m=150"] {
        let sizes: Sizes = sizes.parse().expect("sizes");
        let inputs = random_inputs(&grad, &sizes, &mut Rng::new(3)).expect("inputs");
        let want = eval::evaluate(&grad, &inputs).expect("eval");
        let failures = at_one_and_two_threads(&compiled, &inputs, &want);
        assert!(failures.is_empty(), "{sizes}: {}", failures.join("\n"));
    }
}

/// A loop over a relation's stored coordinates that adds into a tensor at
/// its coordinate (`sparse_matvec_stored`'s gradient, `dx[j] += r̄[i]·A[i,j]`:
/// a read-modify-write at a random place once `dx` is out of the caches)
/// prefetches the element it will add into, as it prefetches the rows it
/// gathers: in its serial form and, renamed with it, into a parallel
/// chunk's own copy. Built to prefetch at every size it gives the plain
/// build's values bit for bit, equals `eval` at one and two threads with
/// every loop forced parallel, and counts its cost.
#[test]
fn scatters_prefetch_the_elements_they_add_into() {
    let (_, grad) = corpus_gradient("sparse_matvec_stored");
    let src = backend::generate(&grad).expect("generate").source;
    let start = src
        .find("int atl_sparse_matvec_stored(")
        .expect("the function");
    let body = &src[start..];
    let body = &body[..body.find("\n}\n").expect("its end")];
    // the buffers added into at an index that is a variable: `buf[v] += `
    let mut scattered = vec![];
    for l in body.lines().map(str::trim) {
        let Some((target, _)) = l.split_once(" += ") else {
            continue;
        };
        let Some((buf, idx)) = target.strip_suffix(']').and_then(|t| t.split_once('[')) else {
            continue;
        };
        let word =
            |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if word(buf) && word(idx) && !scattered.contains(&buf) {
            scattered.push(buf);
        }
    }
    assert!(
        scattered.len() >= 2,
        "a scatter in serial and in parallel chunks expected, found {scattered:?}:\n{body}"
    );
    for buf in &scattered {
        assert!(
            body.contains(&format!("ATL_PREFETCH_ROW({buf} + ")),
            "the scatter into {buf} does not prefetch its elements:\n{body}"
        );
    }
    if !have_cc() {
        return;
    }
    counts_exactly_at(
        &grad,
        "sparse_matvec_stored grad",
        &["n=3,m=4", "n=20,m=15", "n=0,m=3", "n=64,m=48"],
        7,
    );
    let build = |always: bool| {
        let mut flags = check_flags();
        flags.flags.push("-DATL_PAR_WORK=0".into());
        if always {
            flags.flags.push("-DATL_PREFETCH_MIN_BYTES=0".into());
        }
        backend::compile_with_flags(&grad, false, &flags).expect("compile")
    };
    let (always, plain) = (build(true), build(false));
    for sizes in ["n=20,m=15", "n=300,m=200"] {
        let sizes: Sizes = sizes.parse().expect("sizes");
        let inputs = random_inputs(&grad, &sizes, &mut Rng::new(8)).expect("inputs");
        let want = eval::evaluate(&grad, &inputs).expect("eval");
        let failures = at_one_and_two_threads(&always, &inputs, &want);
        assert!(failures.is_empty(), "{sizes}: {}", failures.join("\n"));
        for threads in [1, 2] {
            always.set_threads(threads).expect("threads");
            plain.set_threads(threads).expect("threads");
            let (a, b) = (always.call(&inputs), plain.call(&inputs));
            assert_eq!(
                format!("{a:?}"),
                format!("{b:?}"),
                "{sizes} at {threads} threads: prefetching and not differ"
            );
        }
    }
}

/// A large arena asks for transparent huge pages (Linux, when the kernel
/// gives them on request): `logsumexp_tree`'s gradient at n = 100,000 binds
/// 68 MB of intermediates, and the process's anonymous huge pages grow by
/// at least one 2 MiB page over its first call. Gathers of rows at random
/// places in such intermediates (a sparse gradient's) otherwise miss the
/// TLB on nearly every row.
#[test]
fn a_large_arena_asks_for_huge_pages() {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
    let on_request = mode.is_ok_and(|m| m.contains("[madvise]") || m.contains("[always]"));
    if !have_cc() || !on_request || !Path::new("/proc/self/smaps_rollup").exists() {
        return;
    }
    fn huge_kib() -> u64 {
        let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").expect("smaps_rollup");
        rollup
            .lines()
            .find_map(|l| l.strip_prefix("AnonHugePages:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("AnonHugePages")
    }
    let (_, grad) = corpus_gradient("logsumexp_tree");
    let sizes = [(atl_egg::Symbol::from("n"), 100_000)]
        .into_iter()
        .collect();
    let inputs = random_inputs(&grad, &sizes, &mut Rng::new(8)).expect("inputs");
    let compiled = backend::compile_with_flags(&grad, false, &check_flags()).expect("compile");
    compiled.set_threads(1).expect("threads");
    let before = huge_kib();
    compiled.call(&inputs).expect("run");
    let after = huge_kib();
    assert!(
        after >= before + 2048,
        "anonymous huge pages {before} kB before the call, {after} kB after: the arena has none"
    );
}

/// Stencils and convolutions (`src/lower/edges.rs`): their loops are split
/// at the edges so the interior runs without range guards. At sizes where
/// the interior is empty (a kernel wider than the signal), a single point,
/// or most of the loop, in both orders of a convolution's index (`i - j`
/// and `j - i`), in two dimensions, and in gradients: values equal `eval`
/// within 1e-12 at one and two threads and the counting build counts the
/// cost exactly.
#[test]
fn stencils_split_at_their_edges_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let sources = [
        "(fn conv ((x (tensor (- (+ n m) 1) R)) (c (tensor m R))) (gen i n (sum j m (* (get x (- (+ i m) (+ j 1))) (get c j)))))",
        "(fn corr ((x (tensor n R)) (c (tensor m R))) (gen i n (sum j m (* (get x (+ i (- j 1))) (get c j)))))",
        "(fn blur ((img (tensor n n R)) (k (tensor 3 3 R))) (gen i n (gen j n (sum a 3 (sum c 3 (* (get k a c) (get img (- (+ i a) 1) (- (+ j c) 1))))))))",
        "(fn diff ((x (tensor n R))) (gen i n (- (get x (+ i 1)) (get x (- i 1)))))",
    ];
    let mut progs = vec![];
    for src in sources {
        let p = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let wrt: Vec<atl_egg::Symbol> = p.params.iter().map(|x| x.name).take(1).collect();
        let loss = derive::vjp(&p, &wrt, &options()).map(|d| d.program);
        progs.push(p);
        if let Ok(d) = loss {
            progs.push(d);
        }
    }
    let sizes = [(1, 1), (2, 5), (3, 3), (40, 7)];
    assert_marked_and_evaluated_forced_parallel(&progs, "atlsplit1_a", &[], &sizes, 7);
}

/// Row loops whose bodies open with a short sum (`src/lower/tile.rs`) run
/// by blocks of rows, the sum's loops first with the rows innermost. Built
/// with blocks of 4 rows, at sizes below one block, of exactly one, of
/// several with a partial last one, and with more taps than rows (m > n):
/// convolution losses and their gradients, two sums in one row, a 2-D
/// stencil, values equal `eval` within 1e-12 at one and two threads and the
/// counting build counts the cost exactly. A sum reading down a column
/// (a matrix-vector product's rows) is not moved.
#[test]
fn short_sums_of_row_loops_run_by_blocks_as_evaluated() {
    if !have_cc() {
        return;
    }
    let sources = [
        "(fn kloss ((x (tensor (- (+ n m) 1) R)) (w (tensor m R)) (z (tensor n R))) (let f (gen i n (sum j m (* (get x (- (+ i m) (+ j 1))) (get w j)))) (let r (- f z) (sum i n (* (get r i) (get r i))))))",
        "(fn sloss ((x (tensor (- (+ n m) 1) R)) (c (tensor m R)) (z (tensor n R))) (sum k n (let d (- (sum j m (* (get x (- (+ k m) (+ j 1))) (get c j))) (get z k)) (* d d))))",
        "(fn two ((x (tensor n R)) (c (tensor m R))) (sum i n (* (sum j m (* (get x (+ i (- j 1))) (get c j))) (sum j m (* (get x (- i j)) (get c j))))))",
        "(fn blur ((img (tensor n n R)) (k (tensor 3 3 R))) (sum i n (sum j n (let b (sum a 3 (sum c 3 (* (get k a c) (get img (- (+ i a) 1) (- (+ j c) 1))))) (* b b)))))",
    ];
    let mut progs = vec![];
    for src in sources {
        let p = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let wrt: Vec<atl_egg::Symbol> = p.params.iter().map(|x| x.name).take(1).collect();
        let g = derive::grad(&p, &wrt, &options()).expect("grad").program;
        progs.push(p);
        progs.push(g);
    }
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    flags.flags.push("-DATL_ROW_BLOCK=4".into());
    for prog in &progs {
        let what = prog.name.to_string();
        let src = backend::generate(prog).expect("generate").source;
        assert!(src.contains("atlblk1_k"), "{what}: no blocked rows:\n{src}");
        assert_built_as_evaluated_at(
            prog,
            &flags,
            &[(1, 1), (3, 5), (4, 3), (11, 2), (40, 7)],
            9,
            &what,
            true,
        );
    }
    let matvec = "(fn mv ((a (tensor n m R)) (x (tensor m R))) (sum i n (let y (sum j m (* (get a i j) (get x j))) (* y y))))";
    let p = atl_egg::front::parse_program(matvec.as_bytes()).expect("parse");
    let src = backend::generate(&p).expect("generate").source;
    assert!(!src.contains("atlblk"), "a column read moved:\n{src}");
}

/// The taps of a block of rows run by groups of four per pass over the
/// block (`src/lower/jam.rs`), each row's partial sum loaded and stored
/// once per group, the rows outside the group's interior tap after tap
/// with their guards and the taps left over one pass each. Built with
/// blocks of 4 rows, with fewer taps than a group, a group and a few more,
/// several groups, and more taps than rows: convolution losses and their
/// gradients, values equal `eval` within 1e-12 at one and two threads and
/// the counting build counts the cost exactly.
#[test]
fn taps_of_blocks_of_rows_are_added_by_groups_as_evaluated() {
    if !have_cc() {
        return;
    }
    let kloss = "(fn kloss ((x (tensor (- (+ n m) 1) R)) (w (tensor m R)) (z (tensor n R))) (let f (gen i n (sum j m (* (get x (- (+ i m) (+ j 1))) (get w j)))) (let r (- f z) (sum i n (* (get r i) (get r i))))))";
    let sloss = "(fn sloss ((x (tensor (- (+ n m) 1) R)) (c (tensor m R)) (z (tensor n R))) (sum k n (let d (- (sum j m (* (get x (- (+ k m) (+ j 1))) (get c j))) (get z k)) (* d d))))";
    let mut progs = vec![];
    for (src, wrt) in [(kloss, "w"), (sloss, "x")] {
        let p = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let wrt = vec![atl_egg::Symbol::from(wrt)];
        progs.push(derive::grad(&p, &wrt, &options()).expect("grad").program);
        progs.push(p);
    }
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    flags.flags.push("-DATL_ROW_BLOCK=4".into());
    for prog in &progs {
        let what = prog.name.to_string();
        let src = backend::generate(prog).expect("generate").source;
        assert!(
            src.contains("atljam1_groups"),
            "{what}: no taps added by groups:\n{src}"
        );
        assert_built_as_evaluated_at(
            prog,
            &flags,
            &[(1, 1), (6, 3), (4, 4), (11, 6), (40, 9), (3, 13)],
            13,
            &what,
            true,
        );
    }
}

/// A reduction over the rows of a fused run whose loop order is a tie (a
/// kernel's gradient `Σ_i r[i]·x[i + m - 1 - g]`, `r` the residual the run
/// makes row by row): with the reduction's extent at most `ATL_ROW_LIMIT`
/// it joins the run (`src/lower/fuse.rs`) and runs after each block of
/// rows from a block buffer of the row values it reads (`src/lower/tile.rs`),
/// the residual never stored; above it (`ATL_ROW_LIMIT=0`) the run leaves
/// it out, or the spine runs unfused when no run is left. Values equal
/// `eval` within 1e-12 at one and two threads and the counting build
/// counts the cost exactly, at sizes below, at and above one block, and
/// with kernels longer than the signal.
#[test]
fn tied_reductions_join_their_row_fusion_and_run_by_blocks() {
    if !have_cc() {
        return;
    }
    let kloss = "(fn kloss ((x (tensor (- (+ n m) 1) R)) (w (tensor m R)) (z (tensor n R))) (let f (gen i n (sum j m (* (get x (- (+ i m) (+ j 1))) (get w j)))) (let r (- f z) (sum i n (* (get r i) (get r i))))))";
    let p = atl_egg::front::parse_program(kloss.as_bytes()).expect("parse");
    let w = vec![atl_egg::Symbol::from("w")];
    let mut progs = vec![derive::grad(&p, &w, &options()).expect("grad").program];
    for src in [
        // One let and the reduction: no sum to hoist, no run without it.
        "(fn corr ((x (tensor (+ n m) R)) (z (tensor n R))) (let r (gen i n (* (get x i) (get z i))) (gen g m (sum i n (* (get r i) (get x (+ i g)))))))",
        // The reduction reads two rows of the run.
        "(fn two ((x (tensor (+ n m) R)) (z (tensor n R))) (let a (gen i n (* (get z i) (get z i))) (let b (gen i n (+ (get a i) (get x i))) (gen g m (sum i n (* (* (get a i) (get b i)) (get x (+ i g))))))))",
    ] {
        progs.push(atl_egg::front::parse_program(src.as_bytes()).expect("parse"));
    }
    for limit in ["4096", "0"] {
        let mut flags = check_flags();
        flags.flags.push("-DATL_PAR_WORK=0".into());
        flags.flags.push("-DATL_ROW_BLOCK=4".into());
        flags.flags.push(format!("-DATL_ROW_LIMIT={limit}"));
        for prog in &progs {
            let what = format!("{} with ATL_ROW_LIMIT={limit}", prog.name);
            let src = backend::generate(prog).expect("generate").source;
            assert!(
                src.contains("_r0[ATL_ROW_BLOCK];"),
                "{what}: the reduction did not join the blocks of rows:\n{src}"
            );
            assert_built_as_evaluated_at(
                prog,
                &flags,
                &[(1, 1), (3, 5), (4, 3), (9, 2), (40, 7)],
                5,
                &what,
                true,
            );
        }
    }
}

/// Gens over band sums whose taps move with the row (`src/lower/skew.rs`):
/// a correlation with a kernel of symbolic length (the signal's gradient of
/// a deconvolution), one of constant width with offsets on both sides, a
/// band beside another term, a 2-D stencil's adjoint, and a band whose
/// bracket keeps a conjunct that does not name the tap; their rows split
/// where the band leaves the range, the interior run by blocks of rows.
/// Values equal `eval` within 1e-12 at one and two threads and the
/// counting build counts the cost exactly, at sizes below, at and above
/// one block, odd sizes, and kernels longer than the signal.
#[test]
fn band_sums_reindexed_by_their_offset_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let sloss = "(fn sloss ((x (tensor (- (+ n m) 1) R)) (c (tensor m R)) (z (tensor n R))) (let f (gen i n (sum j m (* (get x (- (+ i m) (+ j 1))) (get c j)))) (sum k n (let d (- (get f k) (get z k)) (* d d)))))";
    let blur = "(fn blur ((img (tensor n n R)) (k (tensor 3 3 R))) (let b (gen i n (gen j n (sum a 3 (sum c 3 (* (get k a c) (get img (- (+ i a) 1) (- (+ j c) 1))))))) (sum i n (sum j n (* (get b i j) (get b i j))))))";
    let mut progs = vec![];
    for src in [sloss, blur] {
        let p = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let wrt: Vec<atl_egg::Symbol> = p.params.iter().map(|x| x.name).take(1).collect();
        progs.push(derive::grad(&p, &wrt, &options()).expect("grad").program);
    }
    for src in [
        "(fn corr ((d (tensor n R)) (c (tensor m R))) (gen g (- (+ n m) 1) (sum i n (iverson (and (<= (- g (- m 1)) i) (<= i g)) (* (get d i) (get c (- (+ i m) (+ g 1))))))))",
        "(fn wide ((x (tensor n R)) (w (tensor 5 R))) (gen g n (+ (get x g) (sum i n (iverson (and (<= (- g 3) i) (< i (+ g 2))) (* (get x i) (get w (- (+ i 3) g))))))))",
        "(fn kept ((x (tensor n R)) (y (tensor m R))) (gen g n (sum a m (sum i n (iverson (and (<= (- g 1) i) (<= i (+ g 1)) (< a 2)) (* (get x i) (get y a)))))))",
    ] {
        progs.push(atl_egg::front::parse_program(src.as_bytes()).expect("parse"));
    }
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    flags.flags.push("-DATL_ROW_BLOCK=4".into());
    flags.flags.push("-DATL_ROW_LIMIT=0".into());
    for prog in &progs {
        let what = prog.name.to_string();
        let src = backend::generate(prog).expect("generate").source;
        assert!(
            src.contains("_lo = atlh_min("),
            "{what}: no band split:\n{src}"
        );
        assert_built_as_evaluated_at(
            prog,
            &flags,
            &[(1, 1), (2, 5), (3, 3), (4, 2), (7, 9), (11, 4), (40, 7)],
            5,
            &what,
            false,
        );
    }
}

/// A let-bound image summed by a chain over its rows and their elements
/// (a blur's loss) is computed a row at a time, each row's terms added to
/// the chain's accumulator as they are made: the image is never stored
/// whole. Values equal `eval` at one and two threads and the counting
/// build counts the cost exactly, also where the rows or the elements are
/// empty and under a bracket of the inner sum.
#[test]
fn sum_chains_over_a_let_bound_image_fuse_with_its_rows() {
    if !have_cc() {
        return;
    }
    let sources = [
        "(fn blur ((img (tensor h w R)) (k (tensor 3 3 R))) (let b (gen i h (gen j w (sum a 3 (sum c 3 (* (get k a c) (get img (- (+ i a) 1) (- (+ j c) 1))))))) (sum i h (sum j w (* (get b i j) (get b i j))))))",
        "(fn tri ((x (tensor h w R))) (let b (gen i h (gen j w (* 2.0 (get x i j)))) (sum i h (sum j w (iverson (< j i) (* (get b i j) (get x i j)))))))",
    ];
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    for src in sources {
        let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let what = prog.name.to_string();
        let c_src = backend::generate(&prog).expect("generate").source;
        assert!(
            c_src.contains("atlv_n *= d1;") && !c_src.contains("atlv_n *= d0;"),
            "{what}: the image is stored whole:\n{c_src}"
        );
        let compiled = backend::compile_with_flags(&prog, false, &flags).expect("compile");
        for (h, w) in [(0, 3), (3, 0), (1, 1), (2, 5), (7, 4)] {
            let sizes = [("h", h), ("w", w)]
                .iter()
                .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
                .collect();
            let what = format!("{what} at h={h}, w={w}");
            let inputs = random_inputs(&prog, &sizes, &mut Rng::new(3)).expect("inputs");
            assert_counted_and_evaluated(&compiled, &prog, &inputs, &what);
        }
    }
}

/// Programs whose loops iterate relations' stored tuples (`src/lower/relation.rs`):
/// atoms in and out of loop order (permuted layouts), of arity 1 to 3, with
/// bound arguments, beside other conjuncts, under `exists` and in `or` (whose
/// later parts test the earlier ones negated), atoms tested by a cursor
/// (`Lowerer::cursor_test`), over ranges unlike the relation's dimensions, and gens over a
/// relation's pattern; each against eval on empty, sparse and full relations.
#[test]
fn loops_over_relations_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let programs = [
        "(fn a ((E (relation n n)) (x (tensor n R))) (sum i n (sum j n (iverson (E j i) (* (get x i) (get x j))))))",
        "(fn b ((E (relation n m)) (x (tensor n R)) (y (tensor m R))) (gen i n (sum j m (iverson (and (E i j) (< j i)) (* (get y j) (get x i))))))",
        "(fn c ((E (relation n m)) (y (tensor m R))) (gen i m (sum j n (iverson (E j i) (get y i)))))",
        "(fn d ((T (relation n n m)) (x (tensor n R))) (sum i n (sum k m (sum j n (iverson (T j k i) (* (get x i) (get x j)))))))",
        "(fn e ((S (relation n)) (x (tensor n R))) (+ (sum i n (iverson (S i) (get x i))) (sum i (+ n 2) (iverson (or (< i 1) (S i)) 1.0))))",
        "(fn f ((E (relation n n)) (x (tensor n R))) (sum i n (iverson (exists j n (and (E i j) (< i j) (E j i))) (get x i))))",
        "(fn g ((E (relation n n)) (x (tensor n R))) (gen i n (gen j n (iverson (or (E i j) (E j i)) (* (get x i) (get x j))))))",
        "(fn h ((E (relation n n)) (x (tensor n R))) (sum i (+ n 1) (sum j (- n 1) (iverson (E i j) (* 2.0 (get x j))))))",
        "(fn k ((E (relation n n)) (x (tensor n R))) (sum i n (iverson (exists j (- n 1) (E j i)) (get x i))))",
        "(fn l ((E (relation n n)) (x (tensor n R))) (sum i n (sum j n (iverson (and (E i j) (E j i) (== (+ i j) 3)) (get x j)))))",
        // reads of a view over a pattern under brackets that establish its
        // own (known, not tested), part of it, or a different atom under a
        // shadowing binder (tested)
        "(fn m ((E (relation n n)) (x (tensor n R))) (let d (gen i n (gen j n (iverson (and (< i j) (or (E i j) (E j i))) (* (get x i) (get x j))))) (sum i n (sum j n (iverson (and (or (E j i) (E i j)) (< (+ i 1) j)) (get (get d i) j))))))",
        "(fn o ((E (relation n n)) (x (tensor n R))) (let d (gen i n (gen j n (iverson (and (< i j) (E i j)) (* (get x i) (get x j))))) (sum i n (sum j n (iverson (and (<= i j) (E i j)) (+ (get (get d i) j) (get (get d j) i)))))))",
        "(fn p ((E (relation n n)) (x (tensor n R))) (sum i n (sum j n (iverson (E i j) (sum i n (iverson (E i j) (* (get x i) (get x j))))))))",
        // atoms tested by a cursor kept in step with the loop of their last
        // argument: a row of arity 3, a row out of range, a negated atom
        "(fn r ((T (relation n n n)) (E (relation n n)) (x (tensor n R))) (gen i n (gen k n (sum j n (iverson (and (E i j) (T i k j)) (get x j))))))",
        "(fn s ((E (relation n n)) (F (relation n n)) (x (tensor n R))) (gen i n (sum j n (iverson (and (E i j) (F (+ i 1) j)) (get x j)))))",
        "(fn t ((E (relation n n)) (F (relation n n)) (x (tensor n R))) (gen i n (sum j n (iverson (or (E i j) (F i j)) (get x j)))))",
    ];
    let mut failures = vec![];
    for (k, src) in programs.iter().enumerate() {
        let prog = atl_egg::front::parse_program(src.as_bytes()).expect("program");
        let cases = [(0.0, 4), (0.3, 5), (1.0, 3), (0.2, 9)];
        let size = |s: &str, n| if s == "m" { n - 1 } else { n };
        failures.extend(failures_at_densities(&prog, k as u64, &cases, size, src));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The failures of `check` on `prog` at each `(density, n)` of `cases`:
/// random inputs from `seed`, each size named `s` set to `size(s, n)`,
/// relations of that density; `label` names the program.
fn failures_at_densities(
    prog: &Program,
    seed: u64,
    cases: &[(f64, i64)],
    size: impl Fn(&str, i64) -> i64,
    label: &str,
) -> Vec<String> {
    let mut failures = vec![];
    for &(density, n) in cases {
        let mut rng = Rng::new(seed);
        let sizes = prog
            .sizes
            .iter()
            .map(|s| (*s, size(s.as_str(), n)))
            .collect();
        let inputs = common::values::inputs_at(prog, &mut rng, sizes, density);
        if let Err(e) = check(prog, &inputs, &format!("{label} at density {density}")) {
            failures.push(e);
        }
    }
    failures
}

/// Loops over the last level of a relation's layout prefetch the rows they
/// gather a few edges ahead (`src/lower/prefetch.rs`): rows of 1, 3 and `f`
/// doubles, through the layout, a permuted layout and a relation of arity 1
/// and 3, and a gradient; reads not at the loop's coordinate (the row's own
/// `x[i]`, a shifted `x[j + 1]`) prefetch nothing. A loop whose rows are all
/// one double looks further ahead (`ATL_PREFETCH_AHEAD_SCALAR`), the others
/// `ATL_PREFETCH_AHEAD`, and only when a gathered tensor spans at least
/// `ATL_PREFETCH_MIN_BYTES` (a test before the loop). Each equals eval on
/// relations with no tuple, a single one (the look-ahead stops at the last
/// tuple), sparse and full.
#[test]
fn gathering_loops_prefetch_the_rows_they_read() {
    if !have_cc() {
        return;
    }
    let gathering = [
        "(fn a ((E (relation n n)) (x (tensor n R))) (sum i n (sum j n (iverson (E i j) (* (get x i) (get x j))))))",
        "(fn b ((E (relation n n)) (x (tensor n 3 R))) (sum i n (sum j n (iverson (E i j) (sum c 3 (let d (- (get x i c) (get x j c)) (* d d)))))))",
        "(fn c ((E (relation n m)) (y (tensor n f R))) (gen j m (gen c f (sum i n (iverson (E i j) (get y i c))))))",
        "(fn d ((S (relation n)) (x (tensor n R))) (sum i n (iverson (S i) (* (get x i) (get x i)))))",
        "(fn e ((T (relation n m n)) (x (tensor n R))) (sum i n (sum k m (sum j n (iverson (T i k j) (* (get x i) (get x j)))))))",
        "(fn g ((E (relation n n)) (X (tensor n f R))) (sum i n (sum c f (let z (sum j n (iverson (E i j) (get X j c))) (* z z)))))",
    ];
    let plain = [
        "(fn p ((E (relation n n)) (x (tensor n R))) (sum i n (sum j n (iverson (E i j) (get x i)))))",
        "(fn q ((E (relation n n)) (x (tensor n R))) (sum i n (sum j (- n 1) (iverson (E i j) (get x (+ j 1))))))",
    ];
    let mut progs = vec![];
    for src in gathering.iter().chain(&plain) {
        let p = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        if p.name.as_str() == "g" {
            let wrt = vec![atl_egg::Symbol::from("X")];
            let g = derive::grad(&p, &wrt, &options()).expect("grad").program;
            progs.push((g, true));
        }
        progs.push((p, !plain.contains(src)));
    }
    let mut failures = vec![];
    for (k, (prog, gathers)) in progs.iter().enumerate() {
        let src = backend::generate(prog).expect("generate").source;
        let body = &src[src.find("int atl_").expect("function")..];
        if body.contains("ATL_PREFETCH_ROW(") != *gathers {
            failures.push(format!(
                "{}: prefetch expected {gathers}:\n{body}",
                prog.name
            ));
        }
        // each loop prefetches only when a tensor it gathers is larger
        // than the caches: a test on the sizes before the loop
        let lines: Vec<&str> = body.lines().map(str::trim).collect();
        for (k, l) in lines.iter().enumerate() {
            if !l.starts_with("ATL_PREFETCH_ROW(") {
                continue;
            }
            let guard = lines[..k].iter().rev().find_map(|g| {
                g.strip_prefix("if (ATL_SCHEDULE(")
                    .and_then(|g| g.strip_suffix(")) {"))
            });
            let tested = guard.is_some_and(|on| {
                lines[..k]
                    .iter()
                    .any(|d| d.contains(&format!(" {on} = ATL_PREFETCH_WORTH(")))
            });
            if !tested {
                failures.push(format!(
                    "{}: a prefetch not under a test of the gathered size:\n{body}",
                    prog.name
                ));
            }
        }
        // rows of one double: the functions a, d and e
        let scalar = *gathers && ["a", "d", "e"].contains(&prog.name.as_str());
        let wide = *gathers && !scalar;
        if body.contains("+ ATL_PREFETCH_AHEAD_SCALAR,") != scalar
            || body.contains("+ ATL_PREFETCH_AHEAD,") != wide
        {
            failures.push(format!(
                "{}: expected the look-ahead of rows of one double {scalar}, of wider rows {wide}:\n{body}",
                prog.name
            ));
        }
        let cases = [(0.0, 4), (0.05, 5), (0.3, 6), (1.0, 3)];
        let size = |s: &str, n| if s == "n" { n } else { n - 1 };
        let seed = k as u64 + 40;
        // at these sizes nothing is worth prefetching: built to prefetch
        // at every size, the same values bit for bit
        if *gathers {
            let mut flags = check_flags();
            flags.flags.push("-DATL_PREFETCH_MIN_BYTES=0".into());
            let always = backend::compile_with_flags(prog, false, &flags).expect("compile");
            let plain = backend::compile_with_flags(prog, false, &check_flags()).expect("compile");
            for &(density, n) in &cases {
                let sizes = prog
                    .sizes
                    .iter()
                    .map(|s| (*s, size(s.as_str(), n)))
                    .collect();
                let inputs = common::values::inputs_at(prog, &mut Rng::new(seed), sizes, density);
                let (a, b) = (always.call(&inputs), plain.call(&inputs));
                if format!("{a:?}") != format!("{b:?}") {
                    failures.push(format!(
                        "{} at density {density}: {a:?} prefetching, {b:?} not",
                        prog.name
                    ));
                }
            }
        }
        failures.extend(failures_at_densities(
            prog,
            seed,
            &cases,
            size,
            prog.name.as_str(),
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A gen whose sum's bracket tests a relation in both orders of the two
/// variables (a union, as `graph_smoothness`' gradient has) keeps the order
/// as written at every size: it walks one atom's layout and the other's
/// transposed layout with a cursor, where running the gen innermost would
/// test an atom by a search per pair (`ATL_REL_HAS`). Values as evaluated.
#[test]
fn union_brackets_keep_their_cursor_order_in_gens() {
    if !have_cc() {
        return;
    }
    let union = atl_egg::front::parse_program(
        b"(fn u ((E (relation n n)) (x (tensor n R)))
            (gen k n (sum j n (iverson (or (E k j) (E j k)) (* (get x j) (get x k))))))",
    )
    .expect("parse");
    let progs = [union, corpus_gradient("graph_smoothness").1];
    let mut failures = vec![];
    for (k, prog) in progs.iter().enumerate() {
        let src = backend::generate(prog).expect("generate").source;
        let body = &src[src.find("int atl_").expect("function")..];
        if body.contains("ATL_REL_HAS(") {
            failures.push(format!("{}: a search per pair:\n{body}", prog.name));
        }
        let cases = [(0.0, 4), (0.3, 7), (1.0, 5)];
        let seed = k as u64 + 60;
        failures.extend(failures_at_densities(
            prog,
            seed,
            &cases,
            |_, n| n,
            prog.name.as_str(),
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A loss over a graph's edges and its gradient visit the edges, not all
/// pairs of nodes: at 300 nodes and 3 edges a node, their loop iterations
/// and tests stay within a few times the edges and nodes (not 90,000), and
/// no intermediate has more than n reals.
#[test]
fn graph_loss_loops_over_its_edges() {
    if !have_cc() {
        return;
    }
    let progs = CorpusProgram::load_dir(Path::new("corpus")).expect("corpus");
    let p = progs
        .iter()
        .find(|p| p.name == "graph_smoothness")
        .expect("graph_smoothness");
    let n = 300usize;
    let mut rng = Rng::new(7);
    let mut bits = vec![false; n * n];
    for i in 0..n {
        for _ in 0..3 {
            let j = rng.range(0, n as i64 - 1) as usize;
            bits[i * n + j] = true;
        }
    }
    let edges = bits.iter().filter(|&&b| b).count() as u64;
    let sizes: atl_egg::semantics::value::Sizes = [(atl_egg::Symbol::from("n"), n as i64)]
        .into_iter()
        .collect();
    let mut inputs = common::values::inputs_at(&p.program, &mut rng, sizes, 0.0);
    inputs.relations.insert(
        atl_egg::Symbol::from("E"),
        atl_egg::semantics::value::Relation::from_dense(vec![n, n], &bits),
    );
    let wrt = [atl_egg::Symbol::from("x")];
    let gradient = derive::grad(&p.program, &wrt, &options())
        .expect("grad")
        .program;
    for (what, prog) in [("f", &p.program), ("grad", &gradient)] {
        // the gradient's adjoint of the edge terms is a gen over the edge
        // pattern: computed where it is read, never stored as n x n
        let c = backend::generate(prog).expect("generate");
        let f = c.function;
        // f's pairs with (E j i) but not (E i j) walk row i of the
        // transposed layout with a cursor into row i of E (i outermost,
        // as written), never a membership search in a row per pair
        let body = c.source.split("int atl_graph_smoothness").nth(1).unwrap();
        assert!(
            what != "f"
                || (f.permuted.len() == 1
                    && body.contains("atlh_advance(")
                    && !body.contains("ATL_REL_HAS(")),
            "f tests its excluded pairs by a search"
        );
        let env: std::collections::HashMap<atl_egg::Symbol, i64> =
            inputs.sizes.iter().map(|(k, v)| (*k, *v)).collect();
        for slot in &f.slots {
            let size: i64 = slot.dims.iter().map(|d| d.eval(&env).unwrap()).product();
            assert!(
                size <= n as i64,
                "{what}: a slot of {size} reals on {n} nodes"
            );
        }
        let compiled = backend::compile_with(prog, true).expect("compile");
        let (got, ops) = compiled.call_counted(&inputs).expect("run");
        let want = eval::evaluate(prog, &inputs).expect("eval");
        compare_values(
            &want,
            &got,
            Tolerance {
                rel: 1e-8,
                abs: 1e-12,
            },
        )
        .expect("values");
        let ops = ops.expect("counters");
        let loops = ops[3] + ops[4];
        // the gradient reads the adjoint of each edge term twice; a read
        // under loops driven by the edge's own atoms does not test its
        // bracket again (the position is a stored tuple)
        let per_edge = if what == "f" { 8 } else { 12 };
        assert!(
            loops <= per_edge * (edges + n as u64),
            "{what}: {loops} iterations and tests for {edges} edges on {n} nodes"
        );
    }
}

/// A transposed layout over many columns is built by blocks of columns
/// (`atlh_rel_transpose`): on 5 blocks of nodes and a part (an empty
/// column every so often, self-loops, edges both ways), graph_smoothness'
/// value and its gradient, which reads `E` transposed, equal the sums
/// computed here; and on more than 2^21 nodes, where a bucket entry (a
/// column within its block and a row) no longer fits in 32 bits. Twice
/// each, the second call's transpose in the buffer kept from the first.
#[test]
fn transposed_layouts_by_blocks_of_columns_equal_direct_sums() {
    if !have_cc() {
        return;
    }
    transposes_equal_direct_sums(300, 5 * 2048 + 37);
    transposes_equal_direct_sums(200, (1 << 21) + 3000);
}

fn transposes_equal_direct_sums(n: usize, m: usize) {
    let mut rng = Rng::new(11);
    let mut tuples = vec![];
    for i in 0..n {
        for _ in 0..40 {
            let j = rng.range(0, m as i64 - 1);
            if j % 97 != 5 {
                tuples.push(vec![i as i64, j]);
            }
        }
    }
    tuples.sort();
    tuples.dedup();
    // graph_smoothness on m nodes: edges i -> j for i < n, a few both ways
    let mut edges: Vec<Vec<i64>> = tuples
        .iter()
        .filter(|t| t[1] < 40 || t[1] % 7 == 3)
        .map(|t| vec![t[1], t[0]])
        .collect();
    edges.extend(tuples.iter().cloned());
    edges.extend((0..5).map(|i| vec![i, i]));
    edges.sort();
    edges.dedup();
    let x: Vec<f64> = (0..m).map(|i| ((i * 7 % 23) as f64) / 23.0 - 0.5).collect();
    let lam = 0.25;
    let mut pairs: Vec<(usize, usize)> = edges
        .iter()
        .filter(|t| t[0] != t[1])
        .map(|t| (t[0].min(t[1]) as usize, t[0].max(t[1]) as usize))
        .collect();
    pairs.sort();
    pairs.dedup();
    let mut has_out = vec![false; m];
    for t in &edges {
        has_out[t[0] as usize] = true;
    }
    let f: f64 = pairs
        .iter()
        .map(|&(i, j)| (x[i] - x[j]).powi(2))
        .sum::<f64>()
        + lam
            * (0..m)
                .filter(|&i| has_out[i])
                .map(|i| x[i] * x[i])
                .sum::<f64>();
    let mut g: Vec<f64> = (0..m)
        .map(|i| if has_out[i] { 2.0 * lam * x[i] } else { 0.0 })
        .collect();
    for &(i, j) in &pairs {
        g[i] += 2.0 * (x[i] - x[j]);
        g[j] += 2.0 * (x[j] - x[i]);
    }
    let progs = CorpusProgram::load_dir(Path::new("corpus")).expect("corpus");
    let p = progs.iter().find(|p| p.name == "graph_smoothness").unwrap();
    let gradient = derive::grad(&p.program, &[atl_egg::Symbol::from("x")], &options())
        .unwrap()
        .program;
    let sizes: Sizes = [(atl_egg::Symbol::from("n"), m as i64)]
        .into_iter()
        .collect();
    let mut inputs = Inputs::new(sizes);
    let rel = atl_egg::semantics::value::Relation::from_tuples(vec![m, m], &edges).unwrap();
    inputs.relations.insert(atl_egg::Symbol::from("E"), rel);
    inputs.values.insert(
        atl_egg::Symbol::from("x"),
        atl_egg::semantics::value::Value::reals(&x),
    );
    inputs.values.insert(
        atl_egg::Symbol::from("lam"),
        atl_egg::semantics::value::Value::Real(lam),
    );
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * (1.0 + b.abs());
    let got = backend::compile(&p.program).unwrap().call(&inputs).unwrap();
    assert!(close(got.real().unwrap(), f), "f {got:?} vs {f}");
    assert!(!backend::generate(&gradient)
        .unwrap()
        .function
        .permuted
        .is_empty());
    let compiled = backend::compile(&gradient).unwrap();
    for _ in 0..2 {
        let got = compiled.call(&inputs).unwrap();
        for (i, w) in g.iter().enumerate() {
            let v = got.get(i as i64).unwrap().real().unwrap();
            assert!(close(v, *w), "gradient at {i}: {v} vs {w}");
        }
    }
}

/// Matrix products a program hides (`src/lower/expose.rs`): a sum of two
/// or three products (a jvp's `dAᵀA + AᵀdA`), a product under a sum (a
/// gradient's `(AᵀA)·x`, a quadratic form, a residual bound by a scalar
/// `let`), each run by one kernel call per product; and relations tested
/// at every point of a `gen` read from a dense mask (`src/lower/mask.rs`),
/// by later sums too. Values equal `eval` within 1e-12 relative at one and
/// two threads (forced parallel), on empty, sparse and full relations, and
/// the counting build counts the cost exactly.
#[test]
fn hidden_products_and_relation_masks_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let cases = [
        (
            "(fn quad_tangent ((A (tensor k n R)) (x (tensor n R)) (dA (tensor k n R)))
               (sum i n (* (get x i) (sum j n (* (sum l k (+ (* (get dA l i) (get A l j))
                                                           (* (get A l i) (get dA l j))))
                                                 (get x j))))))",
            2,
            0,
        ),
        (
            "(fn three ((A (tensor n k R)) (X (tensor k m R)) (C (tensor n k R)) (Y (tensor k m R)))
               (gen i n (gen j m (* 2.0 (sum l k (+ (* (get A i l) (get X l j))
                                                  (+ (* (get C i l) (get Y l j)) (* (get A i l) (get Y l j)))))))))",
            3,
            0,
        ),
        (
            "(fn gram ((A (tensor k n R)) (x (tensor n R)))
               (gen i n (* 2.0 (sum j n (* (get x j) (sum l k (* (get A l i) (get A l j))))))))",
            1,
            0,
        ),
        (
            "(fn lsq ((A (tensor n k R)) (X (tensor k m R)) (B (tensor n m R)))
               (sum i n (sum j m (let d (- (sum l k (* (get A i l) (get X l j))) (get B i j)) (* d d)))))",
            1,
            0,
        ),
        (
            "(fn labels ((Y (relation n m)) (Z (tensor n m R)))
               (let t (gen i n (gen j m (+ (get Z i j) (iverson (Y i j) -1.0))))
                 (+ (sum i n (sum j m (iverson (Y i j) (get t i j))))
                    (sum i n (get t i 0)))))",
            0,
            1,
        ),
        (
            "(fn edges ((E (relation n n)) (x (tensor n R)))
               (gen j n (gen i n (+ (get x i) (iverson (or (E i j) (E j i)) (* (get x i) (get x j)))))))",
            0,
            1,
        ),
    ];
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    for (src, gemms, masks) in cases {
        let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let what = prog.name.to_string();
        let c = backend::generate(&prog).expect("generate").source;
        assert_eq!(c.matches("  atlh_gemm(").count(), gemms, "{what}:\n{c}");
        assert_eq!(c.matches("  atlh_rel_mask(").count(), masks, "{what}:\n{c}");
        let compiled = backend::compile_with_flags(&prog, false, &flags).expect("compile");
        for (density, n) in [(0.0, 4), (0.3, 29), (1.0, 5)] {
            let sizes = prog
                .sizes
                .iter()
                .map(|s| {
                    (
                        *s,
                        if s.as_str() == "k" {
                            300
                        } else {
                            n + (s.as_str() == "m") as i64
                        },
                    )
                })
                .collect();
            let inputs = common::values::inputs_at(&prog, &mut Rng::new(9), sizes, density);
            let (ops, cost) = check(&prog, &inputs, &what).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                ops, cost,
                "{what}: executed operations differ from the cost"
            );
            let want = eval::evaluate(&prog, &inputs).expect("eval");
            let failures = at_one_and_two_threads(&compiled, &inputs, &want);
            assert!(
                failures.is_empty(),
                "{what}, n = {n}: {}",
                failures.join("; ")
            );
        }
    }
}

/// Loops split where a bracket changes (`src/lower/pieces.rs`) and banded
/// intermediates stored by diagonals (`src/lower/band.rs`): a band, a
/// triangle, a diagonal, a bracket at a constant point, bands on either side
/// of the diagonal and wider than the matrix, and the gradient of
/// `band_comparisons`, which has a band intermediate and an output whose
/// brackets change at four points a row. The loops are split (no test of a
/// band's bracket element by element), the band intermediate takes `n×3`
/// reals, not `n×n`; values equal `eval` within 1e-12 at one and two threads
/// (forced parallel) and the counting build counts the cost exactly, at
/// sizes from 1 to past every piece.
#[test]
fn loops_split_where_brackets_change_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let sources = [
        "(fn band ((x (tensor n R)) (A (tensor n n R))) (gen i n (gen j n (iverson (and (<= (- i 1) j) (<= j (+ i 1))) (* (get x i) (get A i j))))))",
        "(fn lower ((A (tensor n n R))) (gen i n (gen j n (iverson (< j i) (* 2 (get A i j))))))",
        "(fn mixed ((x (tensor n R))) (gen i n (gen j n (+ (iverson (== i j) (get x i)) (iverson (or (< (+ j 2) i) (> j (+ i 3))) (* (get x j) (get x i)))))))",
        "(fn first ((x (tensor n R))) (gen i n (+ (iverson (== i 0) 1) (get x i))))",
        "(fn shifted ((x (tensor n R)) (A (tensor n n R))) (let t (gen i n (gen j n (iverson (and (<= (+ i 2) j) (<= j (+ i 4))) (* (get x j) (get A i j))))) (gen j n (sum i n (* (get x i) (get t i j))))))",
        "(fn below ((x (tensor n R)) (A (tensor n n R))) (let t (gen i n (gen j n (iverson (and (<= j (- i 1)) (>= j (- i 2)) (< j (- n 2))) (* (get x j) (get A j i))))) (sum i n (sum j n (* (get t i j) (get t j i))))))",
    ];
    let mut progs = vec![];
    for src in sources {
        progs.push(atl_egg::front::parse_program(src.as_bytes()).expect("parse"));
    }
    let (_, grad) = corpus_gradient("band_comparisons");
    let f = atl_egg::lower::lower(&grad).expect("lower");
    assert!(
        f.slots
            .iter()
            .all(|s| s.dims.len() < 2 || s.dims.iter().any(|d| d.as_constant().is_some())),
        "band_comparisons: an n×n intermediate: {:?}",
        f.slots
    );
    progs.push(grad);
    let sizes = [1, 2, 3, 4, 6, 11].map(|n| (n, 1));
    assert_marked_and_evaluated_forced_parallel(&progs, "atlpiece1_0", &[], &sizes, 11);
}

/// A loop every iteration of which adds into one row (the kernel adjoint of
/// a convolution, `dw[k] += r[i]·x[i+m-1-k]` over the signal) runs in
/// chunks, each adding into its own zero-filled copy of the row, the copies
/// added in chunk order afterwards: the combination is in the code, values
/// equal `eval` within 1e-12 at one and two threads (forced parallel), and
/// the counting build counts the cost exactly.
#[test]
fn rows_accumulated_by_every_iteration_run_in_chunks() {
    if !have_cc() {
        return;
    }
    let all = CorpusProgram::load_dir(Path::new("corpus")).expect("corpus");
    let p = all
        .iter()
        .find(|p| p.name == "deconv_kernel_loss")
        .expect("deconv_kernel_loss");
    let prog = derive::grad(&p.program, &p.wrt_or_all(), &options())
        .expect("grad")
        .program;
    let src = backend::generate(&prog).expect("generate").source;
    assert!(
        src.contains("+= atlpar_p[atlpar_z];"),
        "no row combined from chunks:\n{src}"
    );
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    let compiled = backend::compile_with_flags(&prog, false, &flags).expect("compile");
    for (n, m) in [(1, 1), (3, 2), (70, 5), (300, 16)] {
        let sizes = [("n", n), ("m", m)]
            .iter()
            .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
            .collect();
        let what = format!("deconv_kernel_loss grad at n={n}, m={m}");
        let inputs = random_inputs(&prog, &sizes, &mut Rng::new(5)).expect("inputs");
        assert_counted_and_evaluated(&compiled, &prog, &inputs, &what);
    }
}

/// A loop whose body tests divisibility (an `exists` over `i == 2j`, the
/// test `atlh_mod(i, 2) == 0`) runs by blocks of residues, each copy
/// without the test: values equal `eval` at one and two threads (forced
/// parallel), at sizes whose ranges start and end at every residue, and
/// the counting build counts the cost exactly.
#[test]
fn loops_unrolled_by_residues_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let sources = [
        "(fn third ((x (tensor n R))) (gen i n (iverson (exists j n (== i (* 3 j))) (get x i))))",
        "(fn even_sum ((x (tensor n R))) (sum i n (iverson (exists j n (== (+ i 1) (* 2 j))) (* (get x i) (get x i)))))",
        "(fn six ((x (tensor n R))) (gen i n (+ (iverson (exists j n (== i (* 2 j))) (get x i)) (iverson (exists j n (== (+ i 1) (* 3 j))) (* (get x i) (get x i))))))",
        "(fn rows ((A (tensor n m R))) (gen i n (gen j m (iverson (exists k m (== (+ j (* 2 i)) (* 2 k))) (* 2 (get A i j))))))",
    ];
    let sizes = [
        (1, 1),
        (2, 1),
        (3, 2),
        (4, 3),
        (5, 2),
        (6, 4),
        (7, 3),
        (13, 6),
    ];
    let progs = with_exists_parity_and_its_gradient(&sources);
    assert_marked_and_evaluated_forced_parallel(&progs, "atlres1_q", &[], &sizes, 12);
}

/// The corpus program `name` and its gradient (w.r.t. its header's inputs).
fn corpus_gradient(name: &str) -> (Program, Program) {
    let all = CorpusProgram::load_dir(Path::new("corpus")).expect("corpus");
    let p = all.iter().find(|p| p.name == name).expect("in the corpus");
    let grad = derive::grad(&p.program, &p.wrt_or_all(), &options()).expect("grad");
    (p.program.clone(), grad.program)
}

/// The programs of `sources`, then `exists_parity` of the corpus and its
/// gradient.
fn with_exists_parity_and_its_gradient(sources: &[&str]) -> Vec<Program> {
    let mut progs = vec![];
    for src in sources {
        progs.push(atl_egg::front::parse_program(src.as_bytes()).expect("parse"));
    }
    let (parity, grad) = corpus_gradient("exists_parity");
    progs.extend([parity, grad]);
    progs
}

/// Each program's C contains `marker`, and its compiled code (parallel
/// loops forced, and `flags`) equals `eval` and counts the cost at each
/// `(n, m)`; a size a program does not have is left out.
fn assert_marked_and_evaluated_forced_parallel(
    progs: &[Program],
    marker: &str,
    flags: &[&str],
    sizes: &[(i64, i64)],
    seed: u64,
) {
    let mut build_flags = check_flags();
    build_flags.flags.push("-DATL_PAR_WORK=0".into());
    build_flags
        .flags
        .extend(flags.iter().map(|f| f.to_string()));
    for prog in progs {
        let what = prog.name.to_string();
        let src = backend::generate(prog).expect("generate").source;
        assert!(src.contains(marker), "{what}: no {marker} in:\n{src}");
        let compiled = backend::compile_with_flags(prog, false, &build_flags).expect("compile");
        for &(n, m) in sizes {
            let sizes = [("n", n), ("m", m)]
                .into_iter()
                .map(|(k, v)| (atl_egg::Symbol::from(k), v))
                .filter(|(k, _)| prog.sizes.contains(k))
                .collect();
            let what = format!("{what} at n={n},m={m}");
            let inputs = random_inputs(prog, &sizes, &mut Rng::new(seed)).expect("inputs");
            assert_counted_and_evaluated(&compiled, prog, &inputs, &what);
        }
    }
}

/// A gen of a function of a matrix product, `tanh(A·X)`, runs the kernel
/// into its destination and the function over it in place (`relu` is
/// applied by the kernel itself, `atlh_gemm_relu`): no
/// intermediate matrix; values equal `eval` (one and two threads, forced
/// parallel), the counting build counts the cost. A destination stored
/// transposed for its reader, and a body that is not a call of the sum,
/// keep the intermediate.
#[test]
fn functions_of_products_run_in_their_destination_as_evaluated() {
    if !have_cc() {
        return;
    }
    let sizes = [("n", 29), ("k", 300), ("m", 37)];
    let sources = [
        ("(fn relu_ab ((A (tensor n k R)) (X (tensor k m R))) (gen i n (gen j m (relu (sum l k (* (get A i l) (get X l j)))))))", true),
        ("(fn mlp ((X (tensor n k R)) (W (tensor k m R)) (V (tensor m n R))) (let H (gen i n (gen j m (tanh (sum l k (* (get X i l) (get W l j)))))) (gen i n (gen j n (sum l m (* (get H i l) (get V l j)))))))", true),
        ("(fn cols ((A (tensor n k R)) (X (tensor k m R))) (let H (gen i n (gen j m (relu (sum l k (* (get A i l) (get X l j)))))) (gen j m (sum i n (* (get H i j) (get H i j))))))", false),
        ("(fn shifted ((A (tensor n k R)) (X (tensor k m R))) (gen i n (gen j m (+ 1.0 (sum l k (* (get A i l) (get X l j)))))))", false),
    ];
    let sizes = sizes
        .iter()
        .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
        .collect();
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    for (src, in_place) in sources {
        let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let what = prog.name.to_string();
        let c = backend::generate(&prog).expect("generate").source;
        assert!(
            c.contains("  atlh_gemm(") || c.contains("  atlh_gemm_relu("),
            "{what}: no kernel call:\n{c}"
        );
        if in_place {
            assert!(
                !c.contains("_mm = atlv_arena"),
                "{what}: an intermediate product:\n{c}"
            );
        }
        let inputs = random_inputs(&prog, &sizes, &mut Rng::new(6)).expect("inputs");
        let compiled = backend::compile_with_flags(&prog, false, &flags).expect("compile");
        assert_counted_and_evaluated(&compiled, &prog, &inputs, &what);
    }
}

/// A let whose gen holds a contraction inside its body (`exp` of a scaled
/// product, attention's scores under their bracket) runs the kernel into a
/// slot first and binds the gen reading it as any other gen, so that row
/// fusion takes it with what reads its rows next: the `exp` of attention's
/// scores and their row sums are one loop over the rows (one parallel loop
/// between its two banded calls, where they were two), and so are a
/// product's `exp` and its row sums. Values equal `eval` (one and two
/// threads, forced parallel), the counting build counts the cost.
#[test]
fn contractions_inside_a_let_run_first_and_its_rows_fuse() {
    if !have_cc() {
        return;
    }
    let attention = CorpusProgram::load_dir(Path::new("corpus"))
        .expect("corpus")
        .into_iter()
        .find(|p| p.name == "causal_attention")
        .expect("causal_attention");
    let c = backend::generate(&attention.program)
        .expect("generate")
        .source;
    let body = &c[c.find("int atl_causal_attention(").expect("function")..];
    let first = body.find("atlh_gemm_band(").expect("a banded call");
    let second = first
        + 1
        + body[first + 1..]
            .find("atlh_gemm_band(")
            .expect("two banded calls");
    let between = &body[first..second];
    assert!(
        between.matches("ATL_PARALLEL_FOR(").count() == 1 && between.contains("atlh_exp("),
        "the scores' exp and row sums are not one loop:\n{between}"
    );
    let src = "(fn rowsum ((A (tensor n k R)) (X (tensor k m R))) (let e (gen i n (gen j m (exp (* 0.01 (sum l k (* (get A i l) (get X l j))))))) (gen i1 n (sum j1 m (get e i1 j1)))))";
    let prog = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
    let c = backend::generate(&prog).expect("generate").source;
    let body = &c[c.find("int atl_rowsum(").expect("function")..];
    let after = &body[body.find("  atlh_gemm(").expect("a kernel call")..];
    assert_eq!(
        after.matches("ATL_PARALLEL_FOR(").count(),
        1,
        "exp and row sums are not one loop:\n{after}"
    );
    let sizes = [("n", 29), ("k", 300), ("m", 37)]
        .iter()
        .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
        .collect();
    let mut flags = check_flags();
    flags.flags.push("-DATL_PAR_WORK=0".into());
    let inputs = random_inputs(&prog, &sizes, &mut Rng::new(8)).expect("inputs");
    let compiled = backend::compile_with_flags(&prog, false, &flags).expect("compile");
    assert_counted_and_evaluated(&compiled, &prog, &inputs, "rowsum");
}

/// Loops that write their outputs in order store them with streaming
/// stores by blocks (`lower/stream.rs`); built with a threshold and a
/// block small enough for small sizes to reach the blocked code, at sizes
/// that leave partial lines and blocks at both ends: values equal `eval`
/// (one and two threads, forced parallel), the counting build counts the
/// cost.
#[test]
fn outputs_written_in_order_stream_as_evaluated() {
    if !have_cc() {
        return;
    }
    let sources = [
        "(fn twice ((x (tensor n R))) (gen i n (* 2 (get x i))))",
        "(fn both ((x (tensor n R)) (y (tensor n R))) (pair (gen i n (+ (get x i) (get y i))) (gen i n (* (get x i) (get y i)))))",
        "(fn shifted ((x (tensor n R))) (gen i n (+ (get x i) (get x (+ i 1)))))",
    ];
    let mut progs = vec![];
    for src in sources {
        progs.push(atl_egg::front::parse_program(src.as_bytes()).expect("parse"));
    }
    progs.push(corpus_gradient("iverson_any_type").1);
    let flags = ["-DATL_STREAM_BYTES=8", "-DATL_STREAM_BLOCK=16"];
    let sizes = [0, 1, 3, 8, 15, 17, 40, 101, 259].map(|n| (n, 1));
    assert_marked_and_evaluated_forced_parallel(&progs, "atlh_stream(t", &flags, &sizes, 5);
}

/// A whole block of a streamed loop (`ATL_STREAM_BLOCK` iterations, each
/// output starting a line; blocks of 16 on AVX and SSE2 targets) runs a
/// loop of a constant number of iterations whose buffers the C compiler
/// keeps in registers, streamed from them (`lower/stream.rs`): the gradient
/// of `iverson_any_type` at sizes with whole and partial blocks (and with
/// blocks too long to be whole) equals `eval`, the counting build counts
/// the cost, and GCC's code for AVX2 and SSE2 stores the registers one
/// after another, where a copy through a buffer on the stack loads each
/// vector before its store.
#[test]
fn whole_stream_blocks_store_from_registers() {
    if !have_cc() {
        return;
    }
    let (_, grad) = corpus_gradient("iverson_any_type");
    let c = backend::generate(&grad).expect("generate").source;
    assert!(
        c.contains("atlh_stream_whole(t"),
        "no whole blocks in:\n{c}"
    );
    for block in ["16", "8", "64"] {
        let mut flags = check_flags();
        flags.flags.extend([
            "-DATL_PAR_WORK=0".to_string(),
            "-DATL_STREAM_BYTES=8".to_string(),
            format!("-DATL_STREAM_BLOCK={block}"),
        ]);
        let compiled = backend::compile_with_flags(&grad, false, &flags).expect("compile");
        let counted = backend::compile_with_flags(&grad, true, &flags).expect("compile");
        for n in [0, 3, 4, 16, 19, 40, 101, 1000] {
            let sizes: Sizes = format!("n={n}").parse().expect("sizes");
            let inputs = random_inputs(&grad, &sizes, &mut Rng::new(n as u64)).expect("inputs");
            let what = format!("blocks of {block} at n={n}");
            assert_counted_and_evaluated_as_built(&compiled, &counted, &grad, &inputs, &what);
        }
    }
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    for (march, store) in [
        (&["-march=x86-64-v3", "-mno-avx512f"][..], "vmovntpd"),
        (&["-march=x86-64"][..], "movntpd"),
    ] {
        let Some(asm) = assembly(&c, march) else {
            continue;
        };
        let stores: Vec<bool> = asm
            .lines()
            .map(|l| l.trim_start().starts_with(store))
            .collect();
        assert!(
            stores.windows(2).any(|w| w[0] && w[1]),
            "{march:?}: no {store} right after another in the gradient's code"
        );
    }
}

/// Rows of a gen written by an innermost loop inside another loop (the
/// rank-3 loss's gradient writes `dT[b][i][·]` in its fused loop over `b`;
/// a nested gen's inner loop) are streamed by blocks when the outputs they
/// write are large (`lower/stream.rs`, `rows`): built with a threshold and
/// a block small enough for small sizes, at sizes that leave partial lines
/// and blocks at both ends of a row, values equal `eval` at one and two
/// threads (forced parallel) and the counting build counts the cost. GCC's
/// code of the gradient for AVX2 and for SSE2 has the streaming stores.
#[test]
fn rows_written_by_inner_loops_stream_as_evaluated() {
    if !have_cc() {
        return;
    }
    let (_, rank3) = corpus_gradient("rank3_batched_bilinear");
    let src = "(fn outer ((x (tensor n R)) (y (tensor m R))) (gen i n (gen j m (* (get x i) (get y j)))))";
    let outer = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
    let mut flags = check_flags();
    flags.flags.extend(
        [
            "-DATL_PAR_WORK=0",
            "-DATL_STREAM_BYTES=8",
            "-DATL_STREAM_BLOCK=16",
            "-DATL_STREAM_RUN=2",
        ]
        .map(String::from),
    );
    let cases: [(&Program, &[&str]); 2] = [
        (
            &rank3,
            &[
                "B=3,n=5,m=17",
                "B=2,n=1,m=40",
                "B=0,n=3,m=3",
                "B=4,n=7,m=0",
                "B=5,n=9,m=101",
            ],
        ),
        (&outer, &["n=3,m=17", "n=0,m=5", "n=7,m=101", "n=2,m=1"]),
    ];
    for (prog, sizes) in cases {
        let what = prog.name.to_string();
        let c = backend::generate(prog).expect("generate").source;
        assert!(
            c.contains("_on = ATL_STREAM_OK("),
            "{what}: no streamed rows in:\n{c}"
        );
        let compiled = backend::compile_with_flags(prog, false, &flags).expect("compile");
        let counted = backend::compile_with_flags(prog, true, &flags).expect("compile");
        for (k, sizes) in sizes.iter().enumerate() {
            let sizes: Sizes = sizes.parse().expect("sizes");
            let inputs = random_inputs(prog, &sizes, &mut Rng::new(k as u64)).expect("inputs");
            let what = format!("{what} at {sizes}");
            assert_counted_and_evaluated_as_built(&compiled, &counted, prog, &inputs, &what);
        }
    }
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let c = backend::generate(&rank3).expect("generate").source;
    for (march, store) in [
        (&["-march=x86-64-v3", "-mno-avx512f"][..], "vmovntpd"),
        (&["-march=x86-64"][..], "movntpd"),
    ] {
        let Some(asm) = assembly(&c, march) else {
            continue;
        };
        assert!(
            asm.lines().any(|l| l.trim_start().starts_with(store)),
            "{march:?}: no {store} in the gradient's code"
        );
    }
}

/// A loop whose comparisons change at thresholds of several forms (`m`,
/// `n`, constants; an `exists` over index arithmetic, whose closed form is
/// such comparisons) is split by each group in turn, in its long pieces:
/// values equal `eval` at sizes that order the thresholds every way (one
/// and two threads, forced parallel), the counting build counts the cost.
#[test]
fn loops_split_by_several_groups_of_thresholds_run_as_evaluated() {
    if !have_cc() {
        return;
    }
    let sources = [
        "(fn groups ((x (tensor n R)) (w (tensor m R))) (gen i n (+ (iverson (< i m) (get x i)) (+ (iverson (< (+ i 3) n) 1) (iverson (>= i 2) (* (get x i) (get x i)))))))",
        "(fn total ((x (tensor n R)) (w (tensor m R))) (sum i n (+ (iverson (< i (* 2 m)) (get x i)) (iverson (exists k n (> k (+ i 1))) (* 3 (get x i))))))",
    ];
    let sizes: Vec<(i64, i64)> = [1, 2, 3, 5, 8, 13]
        .into_iter()
        .flat_map(|n| [1, 2, 4, 9, 20].map(|m| (n, m)))
        .collect();
    let progs = with_exists_parity_and_its_gradient(&sources);
    // split by a second group: its pieces are numbered 2_
    assert_marked_and_evaluated_forced_parallel(&progs, "atlpiece2_0", &[], &sizes, 21);
}

/// A reduction over a relation's row inside a loop over features (a graph
/// convolution's `Σ_c relu(s·Σ_j [E i j]·XW[j][c])²`, through the `let` of
/// its non-linearity, and its gradient) walks each row once into a row of
/// accumulators, the feature loop innermost (`Lowerer::sum_rows`), when the
/// feature extent is at most `ATL_ROW_LIMIT`; above it (built with the limit
/// 0) each feature walks the row as written. A walk over a whole row, its
/// bounds the relation's own dimension, searches nothing (no `atlh_seek`).
/// Sums (under a `let`, or directly under the sum over rows) and gens,
/// square and not, feature extents of 0, 1 and 5, relations
/// with no tuple, empty rows among full ones, sparse and full: both builds
/// count exactly the cost (iterations and tests within the bound) and equal
/// `eval` at one and two threads.
#[test]
fn feature_loops_walk_each_relation_row_once() {
    if !have_cc() {
        return;
    }
    let gcn = std::fs::read_to_string("benches/sparse/gcn_mean.atl").expect("gcn_mean");
    let f = atl_egg::front::parse_program(gcn.as_bytes()).expect("parse");
    let wrt = vec![atl_egg::Symbol::from("X"), atl_egg::Symbol::from("W")];
    let g = derive::grad(&f, &wrt, &options()).expect("grad").program;
    // (program, whether a sum's rows are chosen at run time)
    let mut progs = vec![(f, true), (g, false)];
    for src in [
        // a gen, over a relation that is not square, the row under a let
        "(fn rect ((E (relation n m)) (Y (tensor m h R))) (gen i n (gen c h (let z (sum j m (iverson (E i j) (get Y j c))) (* z (relu z))))))",
        // the loop over features directly under the loop over rows
        "(fn chain ((E (relation n m)) (Y (tensor m h R))) (sum i n (sum c h (let z (sum j m (iverson (E i j) (get Y j c))) (* z (relu z))))))",
        // two rows in one feature loop, one of them in the let's body
        "(fn two ((E (relation n m)) (x (tensor n R)) (Y (tensor m h R)) (V (tensor m h R))) (sum i n (* (get x i) (sum c h (let a (sum j m (iverson (E i j) (get Y j c))) (* a (sum j m (iverson (E i j) (get V j c)))))))))",
    ] {
        let p = atl_egg::front::parse_program(src.as_bytes()).expect("parse");
        let is_sum = p.name.as_str() != "rect";
        progs.push((p, is_sum));
    }
    // rows 1 and 3 empty, row 2 full (4 columns fit n x n and n x m)
    let tuples: Vec<Vec<i64>> = [(0, 1), (0, 3), (2, 0), (2, 1), (2, 2), (2, 3), (4, 3)]
        .iter()
        .map(|&(a, b)| vec![a, b])
        .collect();
    for (prog, sum_rows) in &progs {
        let name = prog.name.as_str();
        let body = backend::generate(prog).expect("generate").source;
        let body = &body[body.find("int atl_").expect("function")..];
        assert!(
            body.contains("_row[") && !body.contains("atlh_seek("),
            "{name}: no row of accumulators, or a seek:\n{body}"
        );
        assert_eq!(body.contains("ATL_ROW_LIMIT"), *sum_rows, "{name}:\n{body}");
        for limit in ["4096", "0"] {
            let mut flags = check_flags();
            flags.flags.push("-DATL_PAR_WORK=0".into());
            flags.flags.push(format!("-DATL_ROW_LIMIT={limit}"));
            let compiled = backend::compile_with_flags(prog, false, &flags).expect("compile");
            let counted = backend::compile_with_flags(prog, true, &flags).expect("compile");
            for (h, density) in [
                (5, 0.0f64),
                (0, 0.3),
                (1, 0.3),
                (5, 0.3),
                (5, 1.0),
                (1, -1.0),
                (5, -1.0),
            ] {
                let sizes: Sizes = [("n", 5), ("m", 4), ("f", 3), ("h", h)]
                    .iter()
                    .map(|(k, v)| (atl_egg::Symbol::from(*k), *v))
                    .collect();
                let mut rng = Rng::new(h as u64 + 17);
                let mut inputs = common::values::inputs_at(prog, &mut rng, sizes, density.max(0.0));
                if density < 0.0 {
                    let rel = inputs.relations.values_mut().next().expect("a relation");
                    let dims = rel.dims().to_vec();
                    *rel = atl_egg::semantics::value::Relation::from_tuples(dims, &tuples)
                        .expect("tuples");
                }
                let what = format!("{name} at h={h}, density {density}, ATL_ROW_LIMIT={limit}");
                assert_counted_and_evaluated_as_built(&compiled, &counted, prog, &inputs, &what);
            }
        }
    }
}

/// A relation of arity 2 given as a few tuples over a first dimension near
/// 2^63: its layout's row offsets cannot be allocated, which `run` reports
/// as an error naming the relation (the layout's allocation panicked on a
/// capacity overflow before); at a small size the same call runs.
#[test]
fn a_relation_too_large_to_lay_out_is_an_error() {
    if !have_cc() {
        return;
    }
    let src =
        "(fn f ((n size) (E (relation n n))) (sum i n (sum j n (iverson (E i j) (real (+ i j))))))";
    let prog = atl_egg::front::parse_program(src.as_bytes()).unwrap();
    let compiled = backend::compile(&prog).unwrap();
    for (n, want) in [(i64::MAX, None), (6, Some(9.0))] {
        let mut inputs = Inputs::new([(atl_egg::Symbol::from("n"), n)].into_iter().collect());
        let rel = atl_egg::semantics::value::Relation::from_tuples(
            vec![n as usize; 2],
            &[vec![0, 1], vec![5, 3]],
        )
        .unwrap();
        inputs.relations.insert(atl_egg::Symbol::from("E"), rel);
        match (compiled.call(&inputs), want) {
            (Ok(v), Some(w)) => assert_eq!(v.real().unwrap(), w),
            (Err(e), None) => assert!(e.msg.contains("relation 'E'"), "{e}"),
            (got, _) => panic!("n = {n}: {got:?}"),
        }
    }
}

/// The column sums of a matrix (the vjp of copying a vector into every
/// row): a loop whose rows add into one buffer, run in chunks with a copy
/// of the buffer each. Its value is the same bytes at one and at two
/// threads (the single thread ran the loop as written, another association
/// of the sums, before).
#[test]
fn chunked_buffer_sums_are_the_same_at_every_thread_count() {
    if !have_cc() {
        return;
    }
    let src = "(fn f ((ct (tensor n n R))) (gen g n (sum i n (get ct i g))))";
    let prog = atl_egg::front::parse_program(src.as_bytes()).unwrap();
    let compiled = backend::compile(&prog).unwrap();
    let n = 700usize;
    let mut rng = Rng::new(7);
    let rows: Vec<atl_egg::semantics::value::Value> = (0..n)
        .map(|_| {
            let xs: Vec<f64> = (0..n).map(|_| rng.unit()).collect();
            atl_egg::semantics::value::Value::reals(&xs)
        })
        .collect();
    let mut inputs = Inputs::new(
        [(atl_egg::Symbol::from("n"), n as i64)]
            .into_iter()
            .collect(),
    );
    inputs.values.insert(
        atl_egg::Symbol::from("ct"),
        atl_egg::semantics::value::Value::tensor(rows),
    );
    let mut got = vec![];
    for threads in [1, 2] {
        compiled.set_threads(threads).expect("threads");
        got.push(compiled.call(&inputs).expect("run"));
    }
    assert_eq!(
        got[0], got[1],
        "the values differ between one and two threads"
    );
}

/// `prog` compiled matches `eval` at each of `sizes` (random inputs drawn
/// from `seed`), and executes exactly the operations its cost counts.
fn counts_exactly_at(prog: &Program, name: &str, sizes: &[&str], seed: u64) {
    for sizes in sizes {
        let sizes: Sizes = sizes.parse().expect("sizes");
        let inputs = random_inputs(prog, &sizes, &mut Rng::new(seed)).expect("inputs");
        let what = format!("{name} {sizes}");
        let (ops, cost) = check(prog, &inputs, &what).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ops, cost, "{what}: executed operations differ");
    }
}

/// The assembly GCC makes of the C `c` at `-O3` with the library's
/// floating-point flags for the target `march` (flags such as
/// `-march=znver1`); `None`, said on stderr, when the compiler lacks it.
fn assembly(c: &str, march: &[&str]) -> Option<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("p.c"), c).expect("write");
    let out = Command::new(build::compiler())
        .arg("-O3")
        .args(march)
        .args(["-ffp-contract=off", "-fno-math-errno", "-fopenmp"])
        .args(["-DATL_SIMD", "-S", "-o"])
        .arg(dir.path().join("p.s"))
        .arg(dir.path().join("p.c"))
        .output()
        .expect("cc");
    if !out.status.success() {
        eprintln!(
            "skipped: no {march:?} target: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(std::fs::read_to_string(dir.path().join("p.s")).expect("read"))
}
