//! Measurements of costs and optimizer times (docs/performance.md), reproducible:
//!
//!     cargo run --release --example report [-- SECTION]
//!
//! SECTION is `cost10k`, `optimize`, `gradients`, `ratios` or `flat` (default: all).
//! Costs come from the paper's model (`atl_egg::semantics::cost`); times
//! are wall-clock on this machine and only indicative.

use atl_egg::corpus::{random_inputs, CorpusProgram};
use atl_egg::derive;
use atl_egg::front::ast::{ParamKind, Program, Type};
use atl_egg::front::parse_program;
use atl_egg::optimizer::{optimize, Options};
use atl_egg::rng::Rng;
use atl_egg::semantics::cost::{cost, io_cost};
use atl_egg::semantics::value::Sizes;
use atl_egg::Symbol;
use std::path::Path;
use std::time::{Duration, Instant};

fn label(s: &Sizes) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.to_string()
    }
}

fn corpora() -> Vec<(String, Vec<CorpusProgram>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![(
        "corpus/".to_string(),
        CorpusProgram::load_dir(&root.join("corpus")).expect("corpus"),
    )];
    let conf = root.join("../shared/conformance/corpus");
    if let Ok(c) = CorpusProgram::load_dir(&conf) {
        out.push(("conformance corpus".to_string(), c));
    }
    out
}

fn has_relations(p: &Program) -> bool {
    p.params
        .iter()
        .any(|q| matches!(q.kind, ParamKind::Relation(_)))
}

fn cost10k() {
    println!("## cost with every size = 10000 (programs without relations)\n");
    println!("| corpus | program | cost | time |\n|---|---|---:|---:|");
    let mut worst = Duration::ZERO;
    for (name, progs) in corpora() {
        for c in progs.iter().filter(|c| !has_relations(&c.program)) {
            let sizes: Sizes = c.program.sizes.iter().map(|s| (*s, 10_000)).collect();
            let t = Instant::now();
            let k = cost(&c.program, &sizes, &Default::default());
            let dt = t.elapsed();
            worst = worst.max(dt);
            let k = k.map(|k| k.to_string()).unwrap_or_else(|e| e.to_string());
            println!(
                "| {name} | {} | {k} | {:.2} ms |",
                c.name,
                dt.as_secs_f64() * 1e3
            );
        }
    }
    println!("\nslowest: {:.2} ms\n", worst.as_secs_f64() * 1e3);
}

fn optimize_table() {
    println!("## optimize: cost before -> after (smallest and largest size sets), e-graph, time\n");
    println!("| program | sizes | before | after | sizes | before | after | e-nodes (normalize/simplify) | stop | time |");
    println!("|---|---|---:|---:|---|---:|---:|---|---|---:|");
    let progs = &corpora()[0].1;
    for c in progs {
        let t = Instant::now();
        let out = optimize(&c.program, &Options::default()).expect("optimize");
        let dt = t.elapsed();
        let mut rng = Rng::new(c.seed);
        let mut cells = vec![];
        for s in [c.size_sets.first(), c.size_sets.last()]
            .into_iter()
            .flatten()
        {
            let inputs = random_inputs(&c.program, s, &mut rng).unwrap();
            let b = cost(&c.program, s, &inputs.relations).unwrap();
            let a = cost(&out.program, s, &inputs.relations).unwrap();
            cells.push(format!("{} | {b} | {a}", label(s)));
        }
        let nodes: Vec<String> = out
            .stats
            .phases
            .iter()
            .map(|p| p.nodes.to_string())
            .collect();
        let stops: Vec<String> = out
            .stats
            .phases
            .iter()
            .map(|p| p.stop_reason.clone())
            .collect();
        println!(
            "| {} | {} | {} | {} | {:.2} s |",
            c.name,
            cells.join(" | "),
            nodes.join("/"),
            stops.join("/"),
            dt.as_secs_f64()
        );
    }
    println!();
}

fn ratios() {
    println!("## io-cost(derivative) / io-cost(f) at each size set\n");
    println!("| corpus | program | derivative | ratios (small .. large) |\n|---|---|---|---|");
    let mut worst = (0.0f64, String::new());
    for (name, progs) in corpora() {
        for c in &progs {
            let wrt = c.wrt_or_all();
            let kinds: Vec<(&str, Program)> = [
                (
                    "grad",
                    (c.program.ret == Type::Real)
                        .then(|| derive::grad(&c.program, &wrt, &Options::default())),
                ),
                (
                    "jvp",
                    Some(derive::jvp(&c.program, &wrt, &Options::default())),
                ),
                (
                    "vjp",
                    Some(derive::vjp(&c.program, &wrt, &Options::default())),
                ),
            ]
            .into_iter()
            .filter_map(|(k, d)| Some((k, d?.expect("derivative").program)))
            .collect();
            for (kind, d) in kinds {
                let rs: Vec<String> = c
                    .size_sets
                    .iter()
                    .map(|s| {
                        let inputs = random_inputs(&c.program, s, &mut Rng::new(c.seed)).unwrap();
                        // derivative parameters beyond f's are real inputs too
                        let r = io_cost(&d, s, &inputs.relations).unwrap() as f64
                            / io_cost(&c.program, s, &inputs.relations).unwrap().max(1) as f64;
                        if r > worst.0 {
                            worst = (r, format!("{} {kind} {}", c.name, label(s)));
                        }
                        format!("{r:.3}")
                    })
                    .collect();
                println!("| {name} | {} | {kind} | {} |", c.name, rs.join(" "));
            }
        }
    }
    println!("\nlargest ratio: {:.3} ({})\n", worst.0, worst.1);
}

/// The table of docs/performance.md, "The cheap-gradient principle": per
/// corpus program returning R, the io-cost ratio of its optimized gradient
/// at each size set and the median wall time of `optimize_gradient` over
/// three runs.
fn gradients() {
    println!("## grad: io-cost ratio at each size set, and optimize_gradient time\n");
    println!("| corpus | program | ratios (small .. large) | optimize_gradient (median of 3) |");
    println!("|---|---|---|---:|");
    for (name, progs) in corpora() {
        for c in progs.iter().filter(|c| c.program.ret == Type::Real) {
            let wrt: Vec<String> = c.wrt_or_all().iter().map(|w| w.to_string()).collect();
            let wrt: Vec<&str> = wrt.iter().map(|w| w.as_str()).collect();
            let mut times = vec![];
            let mut g = None;
            for _ in 0..3 {
                let t = std::time::Instant::now();
                let d = atl_egg::optimize_gradient(&c.program, &wrt, &Options::default());
                times.push(t.elapsed().as_secs_f64());
                g = Some(d);
            }
            times.sort_by(f64::total_cmp);
            let ratios = match g.expect("ran") {
                Ok(d) => c
                    .size_sets
                    .iter()
                    .map(|s| {
                        let inputs = random_inputs(&c.program, s, &mut Rng::new(c.seed)).unwrap();
                        let r = io_cost(&d.program, s, &inputs.relations).unwrap() as f64
                            / io_cost(&c.program, s, &inputs.relations).unwrap().max(1) as f64;
                        format!("{r:.3}")
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
                Err(e) => format!("error: {e}"),
            };
            println!(
                "| {name} | {} | {ratios} | {:.0} ms |",
                c.name,
                times[1] * 1000.0
            );
        }
    }
    println!();
}

fn flat() {
    println!("## the paper's pathological programs: grad ratio from N = 8 to N = 4096\n");
    let programs = [
        (
            "trace(diag(x)) + ... (k = 4)",
            "(fn f ((x (tensor n R))) (let A (gen i n (gen j n (iverson (== i j) (get x i))))
               (+ (sum i n (get A i i)) (sum i n (get A i i)) (sum i n (get A i i)) (sum i n (get A i i)))))",
        ),
        (
            "dot(A[:,0], A[0,:]), A = diag(x)",
            "(fn f ((x (tensor n R))) (let A (gen i n (gen j n (iverson (== i j) (get x i))))
               (sum k n (* (get A k 0) (get A 0 k)))))",
        ),
    ];
    println!("| program | N | io-cost f | io-cost grad | ratio |\n|---|---:|---:|---:|---:|");
    for (name, src) in programs {
        let f = parse_program(src.as_bytes()).unwrap();
        let g = derive::grad(&f, &[], &Options::default()).unwrap().program;
        for n in [8i64, 64, 512, 4096] {
            let s: Sizes = [(Symbol::from("n"), n)].into_iter().collect();
            let (a, b) = (
                io_cost(&f, &s, &Default::default()).unwrap(),
                io_cost(&g, &s, &Default::default()).unwrap(),
            );
            println!("| {name} | {n} | {a} | {b} | {:.3} |", b as f64 / a as f64);
        }
    }
    println!();
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let run = move |s: &str| which.is_empty() || which == s;
    atl_egg::with_big_stack(move || {
        if run("cost10k") {
            cost10k();
        }
        if run("optimize") {
            optimize_table();
        }
        if run("gradients") {
            gradients();
        }
        if run("ratios") {
            ratios();
        }
        if run("flat") {
            flat();
        }
    });
}
