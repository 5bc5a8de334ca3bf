//! How `grad` scales with the length of a program, measured by one command
//! (the tables of docs/performance.md):
//!
//!     cargo build --release && cargo run --release --example scaling [-- KS]
//!
//! For each family of programs (the k-binding tensor chain of `benches/`,
//! a k-layer MLP, a chain of k 3-tap stencils, a sum of k slice dot
//! products) and each k (default 8 16 32 64 128 256 512), runs
//! `target/release/atl-egg grad` on the program under `/usr/bin/time` and
//! prints its wall time, peak memory (max RSS) and the gradient's io-cost
//! ratio at n = 16; then the growth exponent of the time fitted over
//! k >= 64. `--time-limit 600` so that no limit changes the work done.
//!
//!     cargo run --release --example scaling -- --corpus [DIR]
//!
//! instead measures every program of a corpus directory (default
//! `corpus/`): `grad` (or `vjp` for a tensor result) with its `; wrt:` and
//! the default limits, its wall time, peak memory and io-cost ratio at the
//! largest size set.

use atl_egg::corpus::{random_inputs, CorpusProgram};
use atl_egg::front::ast::{Program, Type};
use atl_egg::front::parse_program;
use atl_egg::rng::Rng;
use atl_egg::semantics::cost::io_cost;
use atl_egg::semantics::eval::evaluate;
use atl_egg::semantics::value::{flatten, Relation, Sizes};
use atl_egg::Symbol;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::Command;

/// A k-layer MLP: `h_{l+1} = tanh(W_l h_l)`, loss `sum h_k`.
fn mlp(k: usize) -> String {
    let mut text = String::from("(fn mlp ((x (tensor n R)) (W (tensor ");
    writeln!(text, "{k} n n R)))").unwrap();
    let mut prev = "x".to_string();
    for l in 0..k {
        let name = format!("h{l}");
        writeln!(
            text,
            "  (let {name} (gen i n (tanh (sum j n (* (get W {l} i j) (get {prev} j)))))"
        )
        .unwrap();
        prev = name;
    }
    text.push_str(&format!("  (sum i n (get {prev} i)){})\n", ")".repeat(k)));
    text
}

/// A chain of k 3-tap stencils `y_{l+1}[i] = sum_j w[l][j] y_l[i+j-1]`.
fn stencil(k: usize) -> String {
    let mut text = String::from("(fn stencil ((x (tensor n R)) (w (tensor ");
    writeln!(text, "{k} 3 R)))").unwrap();
    let mut prev = "x".to_string();
    for l in 0..k {
        let name = format!("y{l}");
        writeln!(
            text,
            "  (let {name} (gen i n (sum j 3 (* (get w {l} j) (get {prev} (- (+ i j) 1)))))"
        )
        .unwrap();
        prev = name;
    }
    text.push_str(&format!("  (sum i n (get {prev} i)){})\n", ")".repeat(k)));
    text
}

/// The best gradient of [`stencil`] by hand (`corpus/hand/stencil_chain.atl`
/// for any k): the layers, the cotangents of their inputs `a_l[m] = sum_j
/// w[l][j] a_{l+1}[m-j+1]` (the last from a vector of ones: only its
/// bracket), and
/// 3 dot products per layer for w, each under its own `[l == t]` so that
/// adding them is free. Any exact gradient does this work (about 16n per
/// layer against the function's 5n), so its io-cost ratio is the floor for
/// atl-egg's.
fn stencil_by_hand(k: usize) -> String {
    let mut text = String::from("(fn stencil_grad ((x (tensor n R)) (w (tensor ");
    writeln!(text, "{k} 3 R)))").unwrap();
    // layer l reads input(l) and writes y_l; the loss sums y_{k-1}
    let input = |l: usize| match l {
        0 => "x".to_string(),
        l => format!("y{}", l - 1),
    };
    for l in 0..k - 1 {
        let y = input(l);
        writeln!(
            text,
            "  (let y{l} (gen i n (sum j 3 (* (get w {l} j) (get {y} (- (+ i j) 1)))))"
        )
        .unwrap();
    }
    // a_l: the cotangent of input(l); y_{k-1}'s is a vector of ones
    let inside = "(and (<= 0 (- (+ m 1) j)) (< (- (+ m 1) j) n))";
    let last = k - 1;
    writeln!(
        text,
        "  (let a{last} (gen m n (sum j 3 (iverson {inside} (get w {last} j))))"
    )
    .unwrap();
    for l in (0..last).rev() {
        let next = l + 1;
        writeln!(
            text,
            "  (let a{l} (gen m n (sum j 3 (* (get w {l} j) (get a{next} (- (+ m 1) j)))))"
        )
        .unwrap();
    }
    let terms: Vec<String> = (0..k)
        .map(|l| {
            let read = format!("(get {} (- (+ i j) 1))", input(l));
            let term = match l == last {
                true => read,
                false => format!("(* (get a{} i) {read})", l + 1),
            };
            format!("(iverson (== l {l}) (sum i n {term}))")
        })
        .collect();
    let w_bar = match terms.len() {
        1 => terms[0].clone(),
        _ => format!("(+ {})", terms.join("\n    ")),
    };
    let closing = 2 * k; // the lets, and the fn
    writeln!(
        text,
        "  (pair a0 (gen l {k} (gen j 3 {w_bar}))){}",
        ")".repeat(closing)
    )
    .unwrap();
    text
}

/// The sum of k dot products of disjoint slices.
fn slice_sum(k: usize) -> String {
    let mut text = String::new();
    write!(
        text,
        "(fn slices ((x (tensor (* {k} n) R)) (y (tensor (* {k} n) R)))\n  (+ 0"
    )
    .unwrap();
    for t in 0..k {
        let a = if t == 0 {
            "i".to_string()
        } else {
            format!("(+ i (* {t} n))")
        };
        let b = format!("(+ i (* {} n))", k - 1 - t);
        write!(text, "\n    (sum i n (* (get x {a}) (get y {b})))").unwrap();
    }
    text.push_str("))\n");
    text
}

const BIN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/atl-egg");

/// One run of the binary under `/usr/bin/time`: wall seconds, peak memory
/// in MiB, and the output (or the first line of the error).
fn measure(args: &[&str]) -> (f64, f64, Result<Vec<u8>, String>) {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "TIME %e %M", BIN])
        .args(args)
        .output()
        .expect("runs /usr/bin/time");
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().find(|l| l.starts_with("TIME")).unwrap_or("");
    let field = |k: usize| -> f64 {
        line.split_whitespace()
            .nth(k)
            .and_then(|s| s.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let result = if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!("error: {}", err.lines().next().unwrap_or("")))
    };
    (field(1), field(2) / 1024.0, result)
}

/// The io-cost ratio of a derivative `d` of `f` at `sizes` (and the
/// relation values `rel`).
fn ratio(f: &Program, d: &[u8], sizes: &Sizes, rel: &HashMap<Symbol, Relation>) -> String {
    io_ratio(f, &parse_program(d).unwrap(), sizes, rel)
}

/// The io-cost ratio of `g` to `f`.
fn io_ratio(f: &Program, g: &Program, sizes: &Sizes, rel: &HashMap<Symbol, Relation>) -> String {
    let a = io_cost(f, sizes, rel).unwrap() as f64;
    let b = io_cost(g, sizes, rel).unwrap() as f64;
    format!("{:.3}", b / a.max(1.0))
}

/// The io-cost ratio of the hand-written gradient `hand` of `f`, after
/// checking that it computes what atl-egg's gradient `d` does (on random
/// inputs at `sizes`).
fn same_gradient(f: &Program, d: &[u8], hand: &[u8], sizes: &Sizes) -> String {
    let ours = parse_program(d).unwrap();
    let hand = parse_program(hand).expect("the hand-written gradient parses");
    let inputs = random_inputs(f, sizes, &mut Rng::new(9)).expect("inputs");
    let flat = |p: &Program| {
        let v = evaluate(p, &inputs).expect("evaluates");
        flatten(&v, &p.ret, &inputs.sizes).expect("flattens")
    };
    let (a, b) = (flat(&ours), flat(&hand));
    let close = a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, y)| (x - y).abs() <= 1e-9 * (1.0 + x.abs().max(y.abs())));
    assert!(close, "the hand-written gradient differs from atl-egg's");
    io_ratio(f, &hand, sizes, &HashMap::new())
}

fn corpus(dir: &str) {
    println!(
        "| program | command | time (s) | peak memory (MiB) | io-cost ratio (largest sizes) |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for p in CorpusProgram::load_dir(std::path::Path::new(dir)).expect("reads the corpus") {
        let command = if p.program.ret == Type::Real {
            "grad"
        } else {
            "vjp"
        };
        let file = format!("{dir}/{}.atl", p.name);
        let wrt = p
            .wrt
            .iter()
            .map(|w| w.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let mut args = vec![command, &file];
        if !wrt.is_empty() {
            args.extend(["--wrt", &wrt]);
        }
        let (secs, mib, out) = measure(&args);
        let sizes = p.size_sets.last().cloned().unwrap_or_default();
        let mut rng = Rng::new(p.seed);
        let inputs = random_inputs(&p.program, &sizes, &mut rng).expect("inputs");
        let ratio = match out {
            Ok(d) => ratio(&p.program, &d, &inputs.sizes, &inputs.relations),
            Err(e) => e,
        };
        println!(
            "| {} | {command} | {secs:.2} | {mib:.0} | {ratio} |",
            p.name
        );
    }
}

fn main() {
    let all: Vec<String> = std::env::args().skip(1).collect();
    if let Some(k) = all.iter().position(|a| a == "--corpus") {
        return corpus(all.get(k + 1).map(String::as_str).unwrap_or("corpus"));
    }
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ks = if args.is_empty() {
        vec![8, 16, 32, 64, 128, 256, 512]
    } else {
        args
    };
    let dir = std::env::temp_dir().join("atl-egg-scaling");
    std::fs::create_dir_all(&dir).unwrap();
    // a family, and the best gradient written by hand where there is one
    type Family = (
        &'static str,
        fn(usize) -> String,
        Option<fn(usize) -> String>,
    );
    let families: [Family; 4] = [
        ("let_chain", atl_egg::corpus::let_chain, None),
        ("mlp", mlp, None),
        ("stencil", stencil, Some(stencil_by_hand)),
        ("slice_sum", slice_sum, None),
    ];
    println!(
        "| program | k | grad time (s) | peak memory (MiB) | io-cost ratio (n=16) | by hand |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, make, by_hand) in families {
        let mut points = vec![];
        for &k in &ks {
            let text = make(k);
            let file = dir.join(format!("{name}_{k}.atl"));
            std::fs::write(&file, &text).unwrap();
            let path = file.to_string_lossy().to_string();
            let (secs, mib, out) = measure(&["grad", &path, "--time-limit", "600"]);
            let sizes: Sizes = [(Symbol::from("n"), 16)].into_iter().collect();
            let f = parse_program(text.as_bytes()).unwrap();
            let hand = match (by_hand, &out) {
                (Some(h), Ok(d)) => same_gradient(&f, d, h(k).as_bytes(), &sizes),
                _ => String::new(),
            };
            let ratio = match out {
                Ok(d) => ratio(&f, &d, &sizes, &HashMap::new()),
                Err(e) => e,
            };
            println!("| {name} | {k} | {secs:.2} | {mib:.0} | {ratio} | {hand} |");
            if k >= 64 && secs.is_finite() {
                points.push(((k as f64).ln(), secs.max(1e-3).ln()));
            }
        }
        if points.len() >= 2 {
            let n = points.len() as f64;
            let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
            let my = points.iter().map(|p| p.1).sum::<f64>() / n;
            let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
            let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
            println!(
                "| {name} | growth exponent (k >= 64) | {:.2} | | | |",
                sxy / sxx
            );
        }
    }
}
