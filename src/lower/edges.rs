//! Loops split at the edges of their index ranges, so that the interior
//! runs without bounds guards (Halide's boundary handling, done on the
//! finished loop IR).
//!
//! An out-of-range `get` reads zero, so a stencil's read `x[i + a - 1]`
//! is guarded by `0 <= i + a - 1 && i + a - 1 < n` inside its innermost
//! loop, and the select stops the loop from vectorizing. The lowering
//! records every such range guard it writes ([`RangeGuard`]: the text and
//! the affine form it tests). A loop over `v` whose body contains guards
//! whose form is `±v + r` (with `r` over names bound outside the loop)
//! runs as three loops over `[lo, a)`, `[a, b)` and `[b, hi)`: `[a, b)` is
//! the largest range where every such guard holds, computed on entry from
//! `r`; the first and last loops run the body as it was, the middle one a
//! copy with those guards replaced by `1`. The iterations, their order and
//! every statement they run are the same as the one loop's: the values
//! and the counting build's counts do not change, only the tests that are
//! known to pass are gone. Inner loops are split first, so a 2-D stencil's
//! interior copy has both of its loops split.
//!
//! A loop's OpenMP pragma (a parallel `gen`'s `ATL_PARALLEL_FOR`, an
//! innermost sum's `ATL_SIMD_REDUCE`) goes to the interior loop only: the
//! edges are a few iterations (a stencil's half width), often none, and a
//! vectorized or parallel loop's set-up would cost more than they run. A
//! body longer than [`MAX_BODY`] statements is not copied.

use super::ir::{pragma_before, statements, Stmt};
use super::Lowerer;
use crate::constraints::LinForm;
use crate::front::affine::Affine;
use std::collections::HashSet;

/// Statements (counted through nesting) of the largest loop body that is
/// copied for its interior.
pub(crate) const MAX_BODY: usize = 300;

/// A range guard the lowering wrote: `text` is `0 <= X && X < dim`, with
/// `X = constant + Σ k·name` (C names of index variables and sizes).
#[derive(Clone, Debug)]
pub(crate) struct RangeGuard {
    text: String,
    constant: i64,
    terms: Vec<(String, i64)>,
    dim: String,
}

impl Lowerer {
    /// The guard `0 <= idx && idx < d` of a read at index `i` (`idx` its C
    /// text), recorded for [`split`] when its form is known.
    pub(crate) fn range_cond(&mut self, i: &Affine, idx: &str, d: &str) -> String {
        let text = format!("0 <= {idx} && {idx} < {d}");
        if let Some(g) = self.guard_form(i, &text, d) {
            if !self.range_guards.iter().any(|h| h.text == g.text) {
                self.range_guards.push(g);
            }
        }
        text
    }

    fn guard_form(&self, i: &Affine, text: &str, d: &str) -> Option<RangeGuard> {
        let f = self.expand(&LinForm::from_affine(i)).ok()?;
        let mut terms = vec![];
        for (v, k) in f.terms() {
            terms.push((self.names.get(v)?.clone(), i64::try_from(*k).ok()?));
        }
        Some(RangeGuard {
            text: text.to_string(),
            constant: i64::try_from(f.constant).ok()?,
            terms,
            dim: d.to_string(),
        })
    }
}

/// Split the loops of `body` at the edges of the guards in `guards`.
pub(super) fn split(body: &mut Vec<Stmt>, guards: &[RangeGuard]) {
    if guards.is_empty() {
        return;
    }
    let mut next = 0;
    replace_loops(body, &mut |s, pragma| {
        split_loop(s, pragma, guards, &mut next)
    });
}

/// Replace, innermost first, each loop of `ss` that `split` gives a
/// replacement for. The pragma line before a loop (parallel or SIMD) is
/// passed to `split` and dropped with the loop: the replacement carries
/// it where it belongs.
pub(super) fn replace_loops(
    ss: &mut Vec<Stmt>,
    split: &mut dyn FnMut(&Stmt, Option<&str>) -> Option<Stmt>,
) {
    let mut i = 0;
    while i < ss.len() {
        for b in ss[i].blocks_mut() {
            replace_loops(b, split);
        }
        let pragma = pragma_before(ss, i);
        if let Some(block) = split(&ss[i], pragma.as_deref()) {
            ss[i] = block;
            if pragma.is_some() {
                ss.remove(i - 1);
                i -= 1;
            }
        }
        i += 1;
    }
}

/// A loop whose body is short enough to copy ([`MAX_BODY`] statements):
/// its variable, bounds and body, the names its body declares and the texts
/// of its statements (what the splits test their conditions against).
pub(super) struct Copyable<'a> {
    pub var: &'a String,
    pub lo: &'a String,
    pub hi: &'a String,
    pub body: &'a Vec<Stmt>,
    pub declared: HashSet<String>,
    texts: Vec<String>,
}

impl Copyable<'_> {
    /// The conditions among `conds` (each written as `text(c)`) that a
    /// statement of the body tests, as an operand of `&&` ([`find_from`]).
    pub(super) fn tested<'c, C>(&self, conds: &'c [C], text: impl Fn(&C) -> &str) -> Vec<&'c C> {
        conds
            .iter()
            .filter(|c| self.texts.iter().any(|t| find(t, text(c)).is_some()))
            .collect()
    }
}

/// `s` as a [`Copyable`] loop, if it is a loop with a short enough body.
pub(super) fn copyable(s: &Stmt) -> Option<Copyable<'_>> {
    let Stmt::For { var, lo, hi, body } = s else {
        return None;
    };
    if statements(body) > MAX_BODY {
        return None;
    }
    let mut declared = HashSet::new();
    declarations(body, &mut declared);
    let mut texts = vec![];
    each_text(body, &mut |t| texts.push(t.to_string()));
    Some(Copyable {
        var,
        lo,
        hi,
        body,
        declared,
        texts,
    })
}

/// The three loops of one loop split at its guards' edges, if it has any.
fn split_loop(
    s: &Stmt,
    pragma: Option<&str>,
    guards: &[RangeGuard],
    next: &mut usize,
) -> Option<Stmt> {
    let copy = copyable(s)?;
    let tested = copy.tested(guards, |g| &g.text);
    let Copyable {
        var,
        lo,
        hi,
        body,
        declared,
        ..
    } = copy;
    let mut lows = vec![];
    let mut highs = vec![];
    let mut known = vec![];
    for g in tested {
        if let Some((l, h)) = interval(g, var, &declared) {
            lows.push(l);
            highs.push(h);
            known.push(g.text.as_str());
        }
    }
    if known.is_empty() {
        return None;
    }
    *next += 1;
    let (a, b) = (format!("atlsplit{next}_a"), format!("atlsplit{next}_b"));
    let fold = |f: &str, xs: &[String]| {
        xs[1..]
            .iter()
            .fold(xs[0].clone(), |acc, x| format!("{f}({acc}, {x})"))
    };
    let mut interior = body.clone();
    map_text(&mut interior, &|t| {
        known.iter().fold(t.to_string(), |t, g| replace(&t, g))
    });
    let mut out = vec![
        Stmt::Decl {
            ty: "const int64_t",
            name: a.clone(),
            init: format!("atlh_clamp({}, {lo}, {hi})", fold("atlh_max128", &lows)),
        },
        Stmt::Decl {
            ty: "const int64_t",
            name: b.clone(),
            init: format!("atlh_clamp({}, {a}, {hi})", fold("atlh_min128", &highs)),
        },
    ];
    let parts = [
        (lo.clone(), a.clone(), body.clone(), None),
        (a.clone(), b.clone(), interior, pragma),
        (b, hi.clone(), body.clone(), None),
    ];
    for (lo, hi, body, pragma) in parts {
        if let Some(p) = pragma {
            out.push(Stmt::Line(p.to_string()));
        }
        out.push(Stmt::For {
            var: var.clone(),
            lo,
            hi,
            body,
        });
    }
    Some(Stmt::Block(out))
}

/// Where `g` holds as a range of `var`, `[l, h)` (C expressions of
/// 128-bit integers), when its form is `±var + r` with `r` over names not
/// declared in the loop's body.
fn interval(g: &RangeGuard, var: &str, declared: &HashSet<String>) -> Option<(String, String)> {
    let k = g.terms.iter().find(|(n, _)| n == var)?.1;
    if k.abs() != 1 {
        return None;
    }
    let mut r = format!("(atlh_i128){}", g.constant);
    for (n, c) in &g.terms {
        if n == var {
            continue;
        }
        if declared.contains(n) {
            return None;
        }
        r = format!("{r} + (atlh_i128){c}*{n}");
    }
    let d = &g.dim;
    Some(if k == 1 {
        // 0 <= var + r < d
        (format!("-({r})"), format!("(atlh_i128){d} - ({r})"))
    } else {
        // 0 <= r - var < d
        (format!("({r}) - {d} + 1"), format!("({r}) + 1"))
    })
}

/// The names a block declares: locals and loop variables.
pub(super) fn declarations(ss: &[Stmt], out: &mut HashSet<String>) {
    for s in ss {
        match s {
            Stmt::Decl { name, .. } => {
                out.insert(name.clone());
            }
            Stmt::For { var, body, .. } | Stmt::Chunks { var, body } => {
                out.insert(var.clone());
                declarations(body, out);
            }
            Stmt::Block(body) => declarations(body, out),
            Stmt::If { then, els, .. } => {
                declarations(then, out);
                declarations(els, out);
            }
            Stmt::Line(_) => {}
        }
    }
}

/// Every C text of a block.
pub(super) fn each_text(ss: &[Stmt], f: &mut impl FnMut(&str)) {
    for s in ss {
        match s {
            Stmt::Line(l) => f(l),
            Stmt::Decl { init, .. } => f(init),
            Stmt::For { lo, hi, body, .. } => {
                f(lo);
                f(hi);
                each_text(body, f);
            }
            Stmt::If { cond, then, els } => {
                f(cond);
                each_text(then, f);
                each_text(els, f);
            }
            Stmt::Block(body) | Stmt::Chunks { body, .. } => each_text(body, f),
        }
    }
}

/// A block with every C text rewritten by `f`.
pub(super) fn map_text(ss: &mut [Stmt], f: &impl Fn(&str) -> String) {
    for s in ss {
        match s {
            Stmt::Line(l) => *l = f(l),
            Stmt::Decl { init, .. } => *init = f(init),
            Stmt::For { lo, hi, body, .. } => {
                *lo = f(lo);
                *hi = f(hi);
                map_text(body, f);
            }
            Stmt::If { cond, then, els } => {
                *cond = f(cond);
                map_text(then, f);
                map_text(els, f);
            }
            Stmt::Block(body) | Stmt::Chunks { body, .. } => map_text(body, f),
        }
    }
}

/// The first place from `from` on where `g` stands in `t` as an operand
/// of `&&` (or of a whole condition): between `(`, `&&`, `||` or the
/// start, and `)`, `&&`, `||`, `?` or the end.
pub(super) fn find_from(t: &str, g: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(p) = t[at..].find(g) {
        let start = at + p;
        let end = start + g.len();
        let before = t[..start].trim_end();
        let after = t[end..].trim_start();
        let left = before.is_empty()
            || before.ends_with('(')
            || before.ends_with("&&")
            || before.ends_with("||");
        let right = after.is_empty()
            || after.starts_with(')')
            || after.starts_with("&&")
            || after.starts_with("||")
            || after.starts_with('?');
        if left && right {
            return Some(start);
        }
        at = start + 1;
    }
    None
}

fn find(t: &str, g: &str) -> Option<usize> {
    find_from(t, g, 0)
}

/// `t` with every operand `g` (see [`find_from`]) replaced by `1`.
fn replace(t: &str, g: &str) -> String {
    let mut out = String::new();
    let mut at = 0;
    while let Some(p) = find_from(t, g, at) {
        out.push_str(&t[at..p]);
        out.push('1');
        at = p + g.len();
    }
    out.push_str(&t[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(var: &str, k: i64) -> RangeGuard {
        let idx = if k == 1 {
            format!("(-1+a+{var})")
        } else {
            format!("(-1+a-{var})")
        };
        RangeGuard {
            text: format!("0 <= {idx} && {idx} < d1"),
            constant: -1,
            terms: vec![("a".into(), 1), (var.into(), k)],
            dim: "d1".into(),
        }
    }

    fn body(g: &RangeGuard) -> Vec<Stmt> {
        vec![Stmt::Line(format!("s += (({}) ? x[0] : 0.0);", g.text))]
    }

    #[test]
    fn a_guarded_loop_becomes_edges_and_an_unguarded_interior() {
        let g = guard("j", 1);
        let mut ss = vec![
            Stmt::Line("ATL_SIMD_REDUCE(s)".into()),
            Stmt::For {
                var: "j".into(),
                lo: "0".into(),
                hi: "n".into(),
                body: body(&g),
            },
        ];
        split(&mut ss, std::slice::from_ref(&g));
        let [Stmt::Block(parts)] = ss.as_slice() else {
            panic!("{ss:?}")
        };
        assert_eq!(parts.len(), 6, "{parts:?}");
        assert!(matches!(&parts[3], Stmt::Line(l) if l == "ATL_SIMD_REDUCE(s)"));
        let Stmt::For { lo, hi, body, .. } = &parts[4] else {
            panic!("{parts:?}")
        };
        assert_eq!((lo.as_str(), hi.as_str()), ("atlsplit1_a", "atlsplit1_b"));
        assert_eq!(body, &vec![Stmt::Line("s += ((1) ? x[0] : 0.0);".into())]);
        let Stmt::For { body: edge, .. } = &parts[5] else {
            panic!("{parts:?}")
        };
        assert_eq!(edge, &super::tests::body(&g));
    }

    #[test]
    fn a_guard_over_an_inner_variable_is_left() {
        // `a` is declared inside the loop over `j`: the guard's range in `j`
        // moves with it (and `2a` is no edge of the loop over `a`).
        let mut g = guard("j", 1);
        g.terms[0].1 = 2;
        let inner = Stmt::For {
            var: "a".into(),
            lo: "0".into(),
            hi: "3".into(),
            body: body(&g),
        };
        let mut ss = vec![Stmt::For {
            var: "j".into(),
            lo: "0".into(),
            hi: "n".into(),
            body: vec![inner.clone()],
        }];
        let before = ss.clone();
        split(&mut ss, std::slice::from_ref(&g));
        assert_eq!(ss, before);
    }

    #[test]
    fn only_whole_operands_are_replaced() {
        let g = "0 <= (i) && (i) < d1";
        assert_eq!(
            replace("(x && 0 <= (i) && (i) < d1) ? a : b", g),
            "(x && 1) ? a : b"
        );
        // `d10` is another dimension, `!` another operator.
        assert_eq!(
            replace("(0 <= (i) && (i) < d10)", g),
            "(0 <= (i) && (i) < d10)"
        );
        assert_eq!(
            replace("(!0 <= (i) && (i) < d1)", g),
            "(!0 <= (i) && (i) < d1)"
        );
        let k = interval(&guard("j", -1), "j", &HashSet::new()).unwrap();
        assert_eq!(
            k,
            (
                "((atlh_i128)-1 + (atlh_i128)1*a) - d1 + 1".to_string(),
                "((atlh_i128)-1 + (atlh_i128)1*a) + 1".to_string()
            )
        );
    }
}
