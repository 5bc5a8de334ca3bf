//! The reference's table of black boxes (`docs/language.md`, "Black
//! boxes") is the table of `src/front/blackbox.rs` with each box's
//! derivative from `rules/derivatives.rules`.

use atl_egg::egraph::language::Fun;
use atl_egg::egraph::rules::derivatives::derivative_table;
use atl_egg::front::blackbox::{reference_rows, BlackBox};

const BEGIN: &str = "<!-- black boxes: generated from src/front/blackbox.rs and rules/derivatives.rules; tests/black_boxes.rs checks it -->\n";
const END: &str = "<!-- end of black boxes -->";
const HEADER: &str = "| form | value | derivative |\n| --- | --- | --- |\n";

/// A box's derivative entry in the notation of programs: `(call F ?x)`
/// written `(F e)`.
fn derivative(b: &BlackBox) -> String {
    let fun: Fun = b.name.parse().expect("a black box");
    let rhs = derivative_table()
        .get(&fun)
        .unwrap_or_else(|| panic!("no derivative of {}", b.name))
        .rhs
        .to_string();
    format!(
        "`{}`",
        rhs.replace("(call ", "(")
            .replace("?x", "x")
            .replace("?k", "k")
    )
}

#[test]
fn the_reference_lists_every_black_box() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/language.md"))
        .expect("docs/language.md");
    let want = format!("{BEGIN}{HEADER}{}{END}", reference_rows(derivative));
    let start = doc.find(BEGIN).expect("the black boxes' marker");
    let end = doc[start..].find(END).expect("the end marker") + start + END.len();
    assert!(
        doc[start..end] == want,
        "docs/language.md's table of black boxes is out of date; it should read:\n{want}"
    );
}
