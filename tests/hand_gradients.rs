//! atl-egg's gradients against gradients written by hand: are they as good
//! as an expert's?
//!
//! `corpus/hand/NAME.atl` is a hand-written gradient of `corpus/NAME.atl`
//! (named by its `; of:` line) with respect to that program's `; wrt:`
//! inputs (all real inputs if none), written the way an expert would: values
//! shared through `let`, loop-invariant factors out of loops, sparsity and
//! symmetry used. For every size set of the program this test
//!
//! * checks the hand-written gradient against atl-egg's, value for value on
//!   random inputs (atl-egg's gradients are checked against dual numbers in
//!   `tests/derivatives.rs`), so the comparison is between correct programs;
//! * records the io cost of f, of atl-egg's gradient and of the hand-written
//!   one, and the ratio of the two gradients, in one snapshot
//!   (`snapshots/hand_gradients__comparison.snap`): a change in either
//!   direction shows in review.
//!
//! atl-egg's gradient may cost at most 2 times the hand-written one at
//! every size set; where it costs more than the hand-written one, the
//! snapshot shows by how much.

use crate::common;

use atl_egg::corpus::CorpusProgram;
use atl_egg::derive;
use atl_egg::egraph::Options;
use atl_egg::front::parse_program;
use atl_egg::rng::Rng;
use atl_egg::semantics::cost::io_cost;
use atl_egg::semantics::eval::evaluate;
use common::values::inputs_at;
use common::{compare_values, Tolerance};
use std::fmt::Write as _;
use std::path::Path;

const BOUND: f64 = 2.0;

#[test]
fn comparison() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let hands = CorpusProgram::load_dir(&root.join("hand")).expect("reads corpus/hand");
    assert!(hands.len() >= 8, "{} hand-written gradients", hands.len());
    let mut table = String::from("program | sizes | f | atl-egg | by hand | atl-egg / by hand\n");
    let mut failures = vec![];
    for hand in &hands {
        let of = hand
            .text
            .lines()
            .find_map(|l| l.strip_prefix("; of:"))
            .unwrap_or_else(|| panic!("{}: no '; of:' line", hand.name))
            .trim();
        let text = std::fs::read_to_string(root.join(format!("{of}.atl"))).unwrap();
        let f = CorpusProgram::parse(of, &text).unwrap();
        let wrt = f.wrt_or_all();
        let grad = derive::grad(&f.program, &wrt, &Options::default())
            .unwrap_or_else(|e| panic!("{of}: grad failed: {e}"));
        // The printed gradient, read back: what a user of the binary gets.
        let ours =
            parse_program(atl_egg::backend::sexp::program_to_string(&grad.program).as_bytes())
                .expect("the printed gradient reads back");
        let mut rng = Rng::new(f.seed);
        for sizes in &f.size_sets {
            let inputs = inputs_at(&f.program, &mut rng, sizes.clone(), 0.5);
            let a = evaluate(&ours, &inputs).expect("atl-egg's gradient evaluates");
            let b = evaluate(&hand.program, &inputs).expect("the hand-written gradient evaluates");
            let tol = Tolerance {
                rel: 1e-9,
                abs: 1e-12,
            };
            if let Err(e) = compare_values(&a, &b, tol) {
                failures.push(format!("{of} at {}: values differ {e}", sizes));
            }
            let cost = |p| io_cost(p, &inputs.sizes, &inputs.relations).unwrap();
            let (cf, ca, ch) = (cost(&f.program), cost(&ours), cost(&hand.program));
            let ratio = ca as f64 / ch.max(1) as f64;
            writeln!(table, "{of} | {} | {cf} | {ca} | {ch} | {ratio:.3}", sizes).unwrap();
            if ratio > BOUND {
                failures.push(format!(
                    "{of} at {}: atl-egg's gradient costs {ratio:.3} times the hand-written one",
                    sizes
                ));
            }
        }
    }
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
        // named after this file, whichever test binary runs it
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("hand_gradients__comparison", table);
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
