//! A program as one JSON object (`--format json`): its text in core forms
//! ([`super::sexp`]), its signature, and what [`super::Extras`] adds: what a
//! derivative returns, each part labelled by its input, and the optimizer's
//! statistics. Values as JSON are `semantics::json`.

use super::{sexp, Extras};
use crate::front::ast::Program;
use crate::symbol::Symbol;

/// The object, pretty-printed, with a final newline.
pub fn program(prog: &Program, extras: &Extras) -> String {
    let mut v = serde_json::json!({
        "program": sexp::program_to_string(prog),
        "signature": sexp::signature(prog),
    });
    if let Some(r) = &extras.returns {
        v["returns"] = serde_json::Value::Array(r.clone());
    }
    if let Some(s) = &extras.stats {
        v["stats"] = s.clone();
    }
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// The type the result of `grad`/`vjp`/`hvp` of `prog` has for each `wrt`
/// input, and how to select it from the result (`(fst result)`, ...).
pub fn labelled_returns(prog: &Program, wrt: &[Symbol]) -> Vec<serde_json::Value> {
    let n = wrt.len();
    wrt.iter()
        .enumerate()
        .map(|(k, w)| {
            let ty = prog
                .real_params()
                .find(|(p, _)| p == w)
                .map(|(_, t)| sexp::type_to_string(t))
                .unwrap_or_default();
            // right-nested pairs: k snds, then a fst unless it is the last
            let mut sel = "result".to_string();
            for _ in 0..k {
                sel = format!("(snd {sel})");
            }
            if k + 1 < n {
                sel = format!("(fst {sel})");
            }
            serde_json::json!({ "wrt": w.as_str(), "type": ty, "select": sel })
        })
        .collect()
}
