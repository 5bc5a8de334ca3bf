//! Corpus files: an ATL program with metadata comment lines, as in
//! `corpus/` and the conformance suite:
//!
//! ```text
//! ; sizes: n=3,m=2 | n=8,m=5      size sets, separated by |
//! ; wrt: x,w                      inputs to differentiate (optional)
//! ; seed: 17                      seed for random inputs (optional)
//! ```
//!
//! Tests, benchmarks and reports share this reader, the input generator
//! below (drawing from [`crate::rng::Rng`]) and the synthetic let chain
//! ([`let_chain`]) that the benchmarks and the scaling report grow.

use crate::error::{Error, Result};
use crate::front::ast::Program;
use crate::semantics::value::Sizes;
use crate::symbol::Symbol;
use std::fmt::Write as _;

/// A corpus program with its metadata.
#[derive(Clone, Debug)]
pub struct CorpusProgram {
    pub name: String,
    pub text: String,
    pub program: Program,
    pub size_sets: Vec<Sizes>,
    pub wrt: Vec<Symbol>,
    pub seed: u64,
}

fn meta<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let l = l.trim_start().strip_prefix(';')?.trim();
        l.strip_prefix(key)?.trim().strip_prefix(':').map(str::trim)
    })
}

impl CorpusProgram {
    pub fn parse(name: &str, text: &str) -> Result<CorpusProgram> {
        let program = crate::derive::forms::parse_program_fn(text.as_bytes(), None)?;
        let size_sets = match meta(text, "sizes") {
            Some(s) => s
                .split('|')
                .map(|set| {
                    set.parse::<Sizes>()
                        .map_err(|e| Error::input(format!("{name}: '; sizes:' {e}")))
                })
                .collect::<Result<_>>()?,
            None => vec![Sizes::default()],
        };
        let wrt = meta(text, "wrt")
            .map(|w| w.split(',').map(|x| Symbol::from(x.trim())).collect())
            .unwrap_or_default();
        let seed = meta(text, "seed").and_then(|s| s.parse().ok()).unwrap_or(1);
        Ok(CorpusProgram {
            name: name.to_string(),
            text: text.to_string(),
            program,
            size_sets,
            wrt,
            seed,
        })
    }

    /// Every `.atl` file of a directory, sorted by name.
    pub fn load_dir(dir: &std::path::Path) -> Result<Vec<CorpusProgram>> {
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| Error::input(format!("cannot read {}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "atl"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| Error::input(format!("cannot read {}: {e}", p.display())))?;
                let name = p
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string();
                CorpusProgram::parse(&name, &text)
            })
            .collect()
    }

    /// The inputs to differentiate: the metadata's, else every real input.
    pub fn wrt_or_all(&self) -> Vec<Symbol> {
        if self.wrt.is_empty() {
            self.program.real_params().map(|(n, _)| n).collect()
        } else {
            self.wrt.clone()
        }
    }
}

pub use crate::semantics::value::random_inputs;

/// A synthetic function of `k` lets over `x : [n]R`, each referencing the
/// previous vector and an earlier one (`a(j/2)`), cycling through a product,
/// a scaled sum, a dot product (a scalar let) and a black box scaled by that
/// scalar; the result adds the last vector's sum and the last scalar.
pub fn let_chain(k: usize) -> String {
    let mut vecs: Vec<String> = vec!["x".into()]; // vector names so far
    let mut last_scalar: Option<String> = None;
    let mut text = String::from("(fn let_chain ((x (tensor n R)))\n");
    for j in 1..=k {
        let v = vecs.last().unwrap().clone();
        let u = vecs[vecs.len() / 2].clone();
        let name = format!("a{j}");
        let e = match (j % 4, &last_scalar) {
            (1, _) if j == 1 => "(gen i n (* (get x i) 2.0))".to_string(),
            (0, _) => format!("(gen i n (* (get {v} i) (get {u} i)))"),
            (1, _) => format!("(gen i n (+ (get {v} i) (* 0.5 (get {u} i))))"),
            (2, _) => format!("(sum i n (* (get {v} i) (get x i)))"),
            (_, Some(s)) => format!("(gen i n (+ (* {s} (get {v} i)) (tanh (get {u} i))))"),
            (_, None) => format!("(gen i n (tanh (get {v} i)))"),
        };
        writeln!(text, "  (let {name} {e}").unwrap();
        if j % 4 == 2 {
            last_scalar = Some(name);
        } else {
            vecs.push(name);
        }
    }
    let v = vecs.last().unwrap();
    let tail = match &last_scalar {
        Some(s) => format!("(+ (sum i n (get {v} i)) {s})"),
        None => format!("(sum i n (get {v} i))"),
    };
    text.push_str(&format!("  {tail}{})\n", ")".repeat(k)));
    text
}
