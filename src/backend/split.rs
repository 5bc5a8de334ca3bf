//! Long function bodies split into functions of bounded length.
//!
//! A deep expression lowers to one C statement per operation, so its C
//! expressions stay shallow; but a program of 100,000 operations is then a
//! function of 100,000 statements, and C compilers' optimizers take time
//! superlinear in a function's length (GCC at `-O3`: about a minute for
//! 10,000 nested `sin`, 16 s of it in one function of 20,000 statements).
//! A body longer than [`PART`] statements is
//! therefore cut, between its top-level statements, into parts of about
//! [`PART`] statements, each a `noinline` function the main function calls
//! in order. The top-level locals, which later parts may read, live in two
//! per-call arrays instead (`atlv_sd` for reals, `atlv_si` for integers),
//! each local's name a macro for its element; a cut never falls between a
//! row's first-term flags and their release (`ATL_FIRST_AT` ...
//! `ATL_FIRST_AT_END`). Locals inside loops and branches, and top-level
//! locals no later part reads, stay locals. The black boxes are then
//! functions of their own, not inlined (`ATL_SPLIT`): with 10,000 `sin`
//! in parts GCC takes 3.4 s inlined, 1 s not.

use crate::lower::ir::{statements, Stmt};
use std::collections::HashSet;

/// Statements per part, and the length from which a body is split.
pub const PART: usize = 500;

/// A body cut into parts, with its top-level locals moved to arrays.
pub struct Split {
    pub parts: Vec<Vec<Stmt>>,
    /// The top-level locals: name, and whether it is a real (else an
    /// integer), in order; a local's index among those of its kind is its
    /// element.
    pub spilled: Vec<(String, bool)>,
}

/// Drop the SIMD reduction pragmas on accumulators that are array elements
/// now (a pragma names a variable).
fn drop_pragmas(ss: &mut Vec<Stmt>, spilled: &[(String, bool)]) {
    ss.retain(|s| match s {
        Stmt::Line(l) => !spilled
            .iter()
            .any(|(n, _)| *l == format!("ATL_SIMD_REDUCE({n})")),
        _ => true,
    });
    for s in ss.iter_mut() {
        for b in s.blocks_mut() {
            drop_pragmas(b, spilled);
        }
    }
}

/// The identifiers a block mentions.
fn mentioned(ss: &[Stmt], out: &mut HashSet<String>) {
    fn words(text: &str, out: &mut HashSet<String>) {
        for w in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if !w.is_empty() {
                out.insert(w.to_string());
            }
        }
    }
    for s in ss {
        match s {
            Stmt::Line(l) => words(l, out),
            Stmt::Decl { init, .. } => words(init, out),
            Stmt::For { lo, hi, body, .. } => {
                words(lo, out);
                words(hi, out);
                mentioned(body, out);
            }
            Stmt::If { cond, then, els } => {
                words(cond, out);
                mentioned(then, out);
                mentioned(els, out);
            }
            Stmt::Block(body) => mentioned(body, out),
            Stmt::Chunks { var, body } => {
                words(var, out);
                mentioned(body, out);
            }
        }
    }
}

/// `body` cut into parts, or `None` when it is short enough as it is.
pub fn split(body: &[Stmt]) -> Option<Split> {
    if statements(body) <= 2 * PART {
        return None;
    }
    // Cut between top-level statements, never inside a row's flags.
    let mut parts: Vec<Vec<Stmt>> = vec![];
    let mut part = vec![];
    let (mut len, mut open_flags) = (0, 0usize);
    for s in body {
        if let Stmt::Line(l) = s {
            if l.starts_with("ATL_FIRST_AT(") {
                open_flags += 1;
            } else if l.starts_with("ATL_FIRST_AT_END(") {
                open_flags = open_flags.saturating_sub(1);
            }
        }
        len += statements(std::slice::from_ref(s));
        part.push(s.clone());
        if len >= PART && open_flags == 0 {
            parts.push(std::mem::take(&mut part));
            len = 0;
        }
    }
    if !part.is_empty() {
        parts.push(part);
    }
    // A top-level local that a later part reads becomes an array element.
    let mut later: HashSet<String> = HashSet::new();
    let mut spilled_rev = vec![];
    for p in parts.iter_mut().rev() {
        for s in p.iter_mut().rev() {
            if let Stmt::Decl { ty, name, init } = s {
                if later.contains(name.as_str()) {
                    spilled_rev.push((name.clone(), ty.ends_with("double")));
                    *s = Stmt::Line(format!("{name} = {init};"));
                }
            }
        }
        mentioned(p, &mut later);
    }
    spilled_rev.reverse();
    let spilled = spilled_rev;
    for p in &mut parts {
        drop_pragmas(p, &spilled);
    }
    Some(Split { parts, spilled })
}
