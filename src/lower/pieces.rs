//! Loops split where a bracket changes (index-set splitting, done on the
//! finished loop IR).
//!
//! A `gen`'s bracketed body, `⊞[j<n] [i - 1 <= j ∧ j <= i + 1]·e`, tests
//! its comparisons at every element, and the branch keeps the loop from
//! vectorizing. The lowering records every comparison it writes as a C
//! condition ([`BracketCmp`]: the text and the affine form it tests). A
//! loop over `v` whose body tests comparisons of the form `±v + r >= 0`
//! or `±v + r == 0` changes their truth only at thresholds `T + c`, where
//! `T` is a form over names bound outside the loop; the comparisons whose
//! thresholds share one `T` (the most numerous such group) have their
//! constants `c` sorted at compile time, and the loop runs as one loop per
//! piece between consecutive thresholds (clamped to the loop's range, on
//! entry), each a copy of the body with those comparisons replaced by the
//! `1` or `0` they are throughout the piece. The iterations, their order
//! and every statement they run are the same as the one loop's (a test
//! replaced by a constant is still a counted test in the counting build):
//! values and counts do not change, only branches that are known are gone.
//!
//! The first and last pieces are unbounded on one side and carry the
//! loop's OpenMP pragma (a parallel `gen`'s `ATL_PARALLEL_FOR`, an
//! innermost sum's `ATL_SIMD_REDUCE`); the pieces between two thresholds
//! run at most their constant difference of iterations and carry none.
//! Constant thresholds at or below the loop's least value (its start, or 0:
//! loop variables are indices or positions) cut nothing, the first piece
//! starting there. An unbounded piece whose body still tests comparisons
//! of another group (`i < 2m` beside `i < n - 1`, as an `exists` over
//! index arithmetic gives) is split again by that group, and so on, while
//! the loop runs as at most [`MAX_PIECES`] pieces in all.
//! Inner loops are split first. A body longer than [`MAX_BODY`](super::edges::MAX_BODY)
//! statements is not split.

use super::edges::{copyable, find_from, map_text, Copyable};
use super::ir::Stmt;
use super::Lowerer;
use crate::constraints::{Constraint, LinForm};
use crate::front::affine::Affine;
use crate::front::ast::CmpOp;
use std::collections::{BTreeSet, HashSet};

/// The most pieces one loop is split into.
const MAX_PIECES: usize = 9;

/// A comparison the lowering wrote as the C text `text`: it holds where
/// `constant + Σ k·name >= 0` (`== 0` when `eq`), names being C names of
/// index variables and sizes.
#[derive(Clone, Debug)]
pub(crate) struct BracketCmp {
    text: String,
    eq: bool,
    constant: i64,
    terms: Vec<(String, i64)>,
}

impl Lowerer {
    /// Record the comparison `a op b`, written as `text`, for [`split`]
    /// (when its form is known).
    pub(crate) fn record_cmp(&mut self, op: CmpOp, a: &Affine, b: &Affine, text: &str) {
        if self.bracket_cmps.iter().any(|c| c.text == text) {
            return;
        }
        let Some(c) = Constraint::compare(op, &LinForm::from_affine(a), &LinForm::from_affine(b))
        else {
            return;
        };
        self.record_constraint(&c, text);
    }

    /// Record the constraint `c` (`>= 0` or `== 0`), written as `text`, for
    /// [`split`] (when its form is known).
    pub(crate) fn record_constraint(&mut self, c: &Constraint, text: &str) {
        if matches!(c, Constraint::Divides(..)) || self.bracket_cmps.iter().any(|b| b.text == text)
        {
            return;
        }
        let Ok(f) = self.expand(c.form()) else {
            return;
        };
        let mut terms = vec![];
        for (v, k) in f.terms() {
            let (Some(n), Ok(k)) = (self.names.get(v), i64::try_from(*k)) else {
                return;
            };
            terms.push((n.clone(), k));
        }
        let Ok(constant) = i64::try_from(f.constant) else {
            return;
        };
        self.bracket_cmps.push(BracketCmp {
            text: text.to_string(),
            eq: matches!(c, Constraint::Eq(_)),
            constant,
            terms,
        });
    }
}

/// Where a comparison holds as a function of the loop variable `v`:
/// `v >= T + c`, `v < T + c` or `v == T + c`, with `T` a sorted form
/// over names bound outside the loop.
struct Threshold<'a> {
    text: &'a str,
    eq: bool,
    t: Vec<(String, i64)>,
    c: i64,
}

/// Split the loops of `body` where the comparisons in `cmps` change.
pub(super) fn split(body: &mut Vec<Stmt>, cmps: &[BracketCmp]) {
    if cmps.is_empty() {
        return;
    }
    let mut next = 0;
    super::edges::replace_loops(body, &mut |s, pragma| {
        split_loop(s, pragma, cmps, &mut next)
    });
}

/// `cmp` as a threshold of `var` (`None` unless `var`'s coefficient is
/// ±1 and every other name is bound outside the loop).
fn threshold<'a>(
    cmp: &'a BracketCmp,
    var: &str,
    declared: &HashSet<String>,
) -> Option<Threshold<'a>> {
    let k = cmp.terms.iter().find(|(n, _)| n == var)?.1;
    if k.abs() != 1 {
        return None;
    }
    let mut rest = vec![];
    for (n, c) in &cmp.terms {
        if n == var {
            continue;
        }
        if declared.contains(n) {
            return None;
        }
        rest.push((n.clone(), *c));
    }
    rest.sort();
    // k = 1: v + r >= 0 is v >= -r (== likewise); k = -1: r - v >= 0 is
    // v < r + 1, i.e. not v >= r + 1, and r - v == 0 is v == r.
    let (t, c) = if k == 1 {
        let t = rest.into_iter().map(|(n, c)| (n, -c)).collect();
        (t, cmp.constant.checked_neg()?)
    } else if cmp.eq {
        (rest, cmp.constant)
    } else {
        (rest, cmp.constant.checked_add(1)?)
    };
    Some(Threshold {
        text: &cmp.text,
        eq: cmp.eq,
        t,
        c,
    })
}

/// Whether `th` holds throughout the piece `[T + from, T + to)` (`from`
/// is `None` for the first piece, `to` for the last); `up`: `v >= T + c`,
/// else `v < T + c`. The pieces' ends are the thresholds, so it holds
/// throughout the piece or nowhere in it.
fn holds(th: &Threshold, up: bool, from: Option<i64>, to: Option<i64>) -> bool {
    if th.eq {
        from == Some(th.c) && to == th.c.checked_add(1)
    } else if up {
        from.is_some_and(|f| f >= th.c)
    } else {
        to.is_some_and(|t| t <= th.c)
    }
}

/// The loops of one loop split where its comparisons change, if any.
fn split_loop(
    s: &Stmt,
    pragma: Option<&str>,
    cmps: &[BracketCmp],
    next: &mut usize,
) -> Option<Stmt> {
    let mut budget = MAX_PIECES;
    split_within(s, pragma, cmps, next, &mut budget)
}

/// [`split_loop`] with at most `budget` more loops: the group of
/// comparisons with the most thresholds first, then, in the pieces that
/// are unbounded (the long ones), the next group, as long as the budget
/// lasts.
fn split_within(
    s: &Stmt,
    pragma: Option<&str>,
    cmps: &[BracketCmp],
    next: &mut usize,
    budget: &mut usize,
) -> Option<Stmt> {
    let copy = copyable(s)?;
    let tested = copy.tested(cmps, |c| &c.text);
    let Copyable {
        var,
        lo,
        hi,
        body,
        declared,
        ..
    } = copy;
    let mut found: Vec<(Threshold, bool)> = vec![];
    for c in tested {
        if let Some(th) = threshold(c, var, &declared) {
            let k = c.terms.iter().find(|(n, _)| n == var).map_or(1, |t| t.1);
            found.push((th, k == 1));
        }
    }
    // The most numerous group of thresholds with one `T`.
    let mut best: Option<(&Vec<(String, i64)>, usize)> = None;
    for (th, _) in &found {
        let n = found.iter().filter(|(o, _)| o.t == th.t).count();
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((&th.t, n));
        }
    }
    let t = best?.0.clone();
    let group: Vec<&(Threshold, bool)> = found.iter().filter(|(o, _)| o.t == t).collect();
    let mut cuts = BTreeSet::new();
    for (th, _) in &group {
        cuts.insert(th.c);
        if th.eq {
            cuts.insert(th.c.checked_add(1)?);
        }
    }
    // Thresholds that are constants at or below the loop's least value
    // (its start if a constant, else 0: every loop variable is an index
    // or a position, never negative) cut nothing: the first piece starts
    // there. A loop written to start below 0 keeps all its cuts.
    let least = match lo.parse::<i64>() {
        Ok(l) => (l >= 0).then_some(l),
        Err(_) => Some(0),
    };
    let start = least.filter(|_| t.is_empty());
    if let Some(l) = start {
        cuts.retain(|&c| c > l);
    }
    let cuts: Vec<i64> = cuts.into_iter().collect();
    if cuts.len() + 1 > *budget {
        return None;
    }
    *budget -= cuts.len();
    *next += 1;
    let mut tform = String::new();
    for (n, k) in &t {
        tform += &format!(" + (atlh_i128){k}*{n}");
    }
    let mut out = vec![];
    let mut ends = vec![lo.clone()];
    for (j, c) in cuts.iter().enumerate() {
        let name = format!("atlpiece{next}_{j}");
        let prev = ends.last().cloned().unwrap_or_default();
        out.push(Stmt::Decl {
            ty: "const int64_t",
            name: name.clone(),
            init: format!("atlh_clamp((atlh_i128){c}{tform}, {prev}, {hi})"),
        });
        ends.push(name);
    }
    ends.push(hi.clone());
    for j in 0..=cuts.len() {
        let from = j.checked_sub(1).map(|p| cuts[p]).or(start);
        let to = cuts.get(j).copied();
        let mut piece = body.clone();
        for (th, up) in &group {
            let by = if holds(th, *up, from, to) { "1" } else { "0" };
            map_text(&mut piece, &|x| replace(x, th.text, by));
        }
        let piece = Stmt::For {
            var: var.clone(),
            lo: ends[j].clone(),
            hi: ends[j + 1].clone(),
            body: piece,
        };
        if from.is_some() && to.is_some() {
            out.push(piece);
            continue;
        }
        if let Some(split) = split_within(&piece, pragma, cmps, next, budget) {
            out.push(split);
            continue;
        }
        if let Some(p) = pragma {
            out.push(Stmt::Line(p.to_string()));
        }
        out.push(piece);
    }
    Some(Stmt::Block(out))
}

/// `t` with every operand `g` (see [`find_from`]) replaced by `by`.
pub(super) fn replace(t: &str, g: &str, by: &str) -> String {
    let mut out = String::new();
    let mut at = 0;
    while let Some(p) = find_from(t, g, at) {
        out.push_str(&t[at..p]);
        out.push_str(by);
        at = p + g.len();
    }
    out.push_str(&t[at..]);
    out
}
