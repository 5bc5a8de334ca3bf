//! Loops unrolled by the residue their divisibility tests depend on (done
//! on the finished loop IR).
//!
//! An `exists` over index arithmetic, `[∃j<n. i == 2j]`, is tested as
//! `atlh_mod(i, 2) == 0` at every iteration of the loop over `i`: a
//! division and a branch per element, and the branch keeps the loop from
//! vectorizing. The lowering records every divisibility test it writes
//! ([`ModCond`]: the text and the affine form it tests). A loop over `v`
//! whose body tests `k | a·v + r`, with every term of `r` bound outside
//! the loop and a multiple of `k`, passes or fails that test by the
//! residue of `v` modulo `k` alone. Such a loop runs as a short prologue up
//! to the first `v` that is a multiple of `u` (the least common multiple
//! of the tests' `k`), a main loop over blocks of `u` iterations, each a
//! copy of the body per residue with the tests replaced by the `1` or `0`
//! they are at that residue, and a short epilogue. The iterations, their
//! order and every statement they run are the same as the one loop's (a
//! test replaced by a constant is still a counted test in the counting
//! build, and each copy counts its iteration): values and counts do not
//! change, only divisions and branches that are known are gone.
//!
//! The loop's OpenMP pragma (a parallel `gen`'s `ATL_PARALLEL_FOR`, an
//! innermost sum's `ATL_SIMD_REDUCE`) goes to the main loop. Inner loops
//! are unrolled first. A body longer than
//! [`MAX_BODY`](super::edges::MAX_BODY) statements, or a loop whose
//! residues would make more than [`MAX_UNROLL`] copies, is left as it is.

use super::edges::{copyable, map_text, Copyable};
use super::ir::Stmt;
use super::Lowerer;
use crate::constraints::LinForm;
use std::collections::HashSet;

/// The most copies of a body one block of the main loop runs.
const MAX_UNROLL: i64 = 8;

/// A divisibility test the lowering wrote as the C condition `text`: it
/// holds where `k` divides `constant + Σ c·name`, names being C names of
/// index variables and sizes.
#[derive(Clone, Debug)]
pub(crate) struct ModCond {
    text: String,
    k: i64,
    constant: i64,
    terms: Vec<(String, i64)>,
}

impl Lowerer {
    /// Record the test `k | f`, written as `text`, for [`split`] (when its
    /// form is known).
    pub(crate) fn record_mod(&self, k: i64, f: &LinForm, text: &str) {
        if k < 2 || self.mod_conds.borrow().iter().any(|c| c.text == text) {
            return;
        }
        let Ok(f) = self.expand(f) else {
            return;
        };
        let mut terms = vec![];
        for (v, c) in f.terms() {
            let (Some(n), Ok(c)) = (self.names.get(v), i64::try_from(*c)) else {
                return;
            };
            terms.push((n.clone(), c));
        }
        let Ok(constant) = i64::try_from(f.constant) else {
            return;
        };
        self.mod_conds.borrow_mut().push(ModCond {
            text: text.to_string(),
            k,
            constant,
            terms,
        });
    }
}

/// Unroll the loops of `body` by the residues their tests in `conds`
/// depend on.
pub(super) fn split(body: &mut Vec<Stmt>, conds: &[ModCond]) {
    if conds.is_empty() {
        return;
    }
    let mut next = 0;
    super::edges::replace_loops(body, &mut |s, pragma| {
        unroll_loop(s, pragma, conds, &mut next)
    });
}

/// `c`'s coefficient of `var`, if the residue of `var` modulo `c.k`
/// decides `c` (every other term bound outside the loop and a multiple
/// of `c.k`).
fn decided_by(c: &ModCond, var: &str, declared: &HashSet<String>) -> Option<i64> {
    let a = c.terms.iter().find(|(n, _)| n == var)?.1;
    if a.rem_euclid(c.k) == 0 {
        return None;
    }
    let rest_fixed = c
        .terms
        .iter()
        .filter(|(n, _)| n != var)
        .all(|(n, k)| !declared.contains(n) && k.rem_euclid(c.k) == 0);
    rest_fixed.then_some(a)
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// One loop run by blocks of its residues, if its body has tests they
/// decide.
fn unroll_loop(
    s: &Stmt,
    pragma: Option<&str>,
    conds: &[ModCond],
    next: &mut usize,
) -> Option<Stmt> {
    let copy = copyable(s)?;
    let tested = copy.tested(conds, |c| &c.text);
    let Copyable {
        var,
        lo,
        hi,
        body,
        declared,
        ..
    } = copy;
    let mut found = vec![];
    let mut u = 1i64;
    for c in tested {
        if let Some(a) = decided_by(c, var, &declared) {
            u = u.checked_mul(c.k / gcd(u, c.k))?;
            if u > MAX_UNROLL {
                return None;
            }
            found.push((c, a));
        }
    }
    if found.is_empty() {
        return None;
    }
    *next += 1;
    let (a, b, q) = (
        format!("atlres{next}_a"),
        format!("atlres{next}_b"),
        format!("atlres{next}_q"),
    );
    let mut blocks = vec![];
    for r in 0..u {
        let mut copy = body.clone();
        for (c, k) in &found {
            let holds = (k * r + c.constant).rem_euclid(c.k) == 0;
            let by = if holds { "1" } else { "0" };
            map_text(&mut copy, &|x| super::pieces::replace(x, &c.text, by));
        }
        let mut block = vec![Stmt::Decl {
            ty: "const int64_t",
            name: var.clone(),
            init: format!("{u}*{q} + {r}"),
        }];
        if r > 0 {
            // the main loop counts the block's first iteration
            block.push(Stmt::Line("ATL_ITER();".into()));
        }
        block.extend(copy);
        blocks.push(Stmt::Block(block));
    }
    let mut out = vec![
        Stmt::Decl {
            ty: "const int64_t",
            name: a.clone(),
            init: format!(
                "atlh_clamp((atlh_i128)({lo}) + ({u} - atlh_mod({lo}, {u})) % {u}, {lo}, {hi})"
            ),
        },
        Stmt::Decl {
            ty: "const int64_t",
            name: b.clone(),
            init: format!("atlh_clamp({a} + ((atlh_i128)({hi}) - {a}) / {u} * {u}, {a}, {hi})"),
        },
        Stmt::For {
            var: var.clone(),
            lo: lo.clone(),
            hi: a.clone(),
            body: body.clone(),
        },
    ];
    if let Some(p) = pragma {
        out.push(Stmt::Line(p.to_string()));
    }
    // `a` and `b` (computed in 128 bits, so no bound near the ends of
    // int64 overflows) are multiples of `u` (or equal): the main loop's `q`
    // runs over `[a/u, b/u)` and its copies' `v` are `u·q + r`, a form in
    // which the C compiler sees `(v - r) / u` is `q`.
    out.push(Stmt::For {
        var: q,
        lo: format!("{a} / {u}"),
        hi: format!("{b} / {u}"),
        body: blocks,
    });
    out.push(Stmt::For {
        var: var.clone(),
        lo: b,
        hi: hi.clone(),
        body: body.clone(),
    });
    Some(Stmt::Block(out))
}
