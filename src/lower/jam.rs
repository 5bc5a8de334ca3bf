//! The taps of a block of rows added [`TAPS`] at a time (unroll and jam,
//! done on the finished loop IR, after [`super::tile`] and
//! [`super::edges`]).
//!
//! [`super::tile`] runs a short sum of a row loop (a convolution's taps)
//! with the block's rows innermost: for each tap `j`, one pass over the
//! block, `acc[c - c0] += x[c + m - 1 - j]·w[j]`. Each pass loads and
//! stores every partial sum of the block, so a loop of a few operations
//! per element is bound by its stores. Here the tap loop runs by groups of
//! [`TAPS`] taps: one pass over the block per group loads a row's partial
//! sum into a local, adds the group's terms to it tap after tap, and
//! stores it once; the taps left over run one pass each, as before. Where
//! [`super::edges`] split the pass at the edges of its reads, the group's
//! interior is where every tap of the group reads in range, and the rows
//! outside it run tap after tap with their guards.
//!
//! Every row still adds the same terms in the same order (taps ascending),
//! so the values are the same bit for bit; every statement of a tap's
//! pass, its counts included, runs for the same rows and taps, so the
//! counting build counts the same operations.

use super::edges::each_text;
use super::ir::Stmt;
use super::tile::{is_count, mentions, replace_word};

/// Taps added per pass over a block of rows.
pub(crate) const TAPS: usize = 4;

/// Run the tap loops of `body`'s blocks of rows by groups of [`TAPS`].
pub(super) fn taps(body: &mut [Stmt]) {
    let mut next = 0;
    walk(body, &mut next);
}

fn walk(ss: &mut [Stmt], next: &mut usize) {
    for s in ss.iter_mut() {
        for b in s.blocks_mut() {
            walk(b, next);
        }
        if let Some(j) = jam(s, next) {
            *s = j;
        }
    }
}

/// One pass of a tap over the block's rows: the rows' variable and range
/// and, where the pass is split at its edges, the names of the interior's
/// bounds (their initial values) and the guarded body.
struct Pass {
    row: String,
    c0: String,
    c1: String,
    edges: Option<Edges>,
    interior: Vec<Stmt>,
    /// The accumulation `buf[at] += ...`: `buf[at]`.
    target: String,
}

struct Edges {
    /// The interior's start: its name and value.
    a_name: String,
    a: String,
    /// The interior's end (clamped to be at least its start).
    b: String,
    guarded: Vec<Stmt>,
}

/// The body of a tap loop over `j`: counts, then one pass over the rows.
fn pass(j: &str, body: &[Stmt]) -> Option<(Vec<Stmt>, Pass)> {
    let counts: Vec<Stmt> = body
        .iter()
        .filter(|s| matches!(s, Stmt::Line(l) if is_count(l)))
        .cloned()
        .collect();
    let rest: Vec<&Stmt> = body
        .iter()
        .filter(|s| !matches!(s, Stmt::Line(l) if is_count(l)))
        .collect();
    let [one] = rest.as_slice() else {
        return None;
    };
    let p = match one {
        Stmt::For { var, lo, hi, body } => Pass {
            row: var.clone(),
            c0: lo.clone(),
            c1: hi.clone(),
            edges: None,
            target: accumulation(var, j, body)?,
            interior: body.clone(),
        },
        Stmt::Block(b) => {
            let [Stmt::Decl {
                name: a, init: ai, ..
            }, Stmt::Decl {
                name: bn, init: bi, ..
            }, Stmt::For {
                var,
                lo,
                hi: h0,
                body: g0,
            }, Stmt::For {
                var: v1,
                lo: l1,
                hi: h1,
                body: inner,
            }, Stmt::For {
                var: v2,
                lo: l2,
                hi,
                body: g2,
            }] = b.as_slice()
            else {
                return None;
            };
            let chained = h0 == a && l1 == a && h1 == bn && l2 == bn;
            if !chained || v1 != var || v2 != var || g0 != g2 {
                return None;
            }
            let target = accumulation(var, j, inner)?;
            if accumulation(var, j, g0)? != target {
                return None;
            }
            Pass {
                row: var.clone(),
                c0: lo.clone(),
                c1: hi.clone(),
                edges: Some(Edges {
                    a_name: a.clone(),
                    a: ai.clone(),
                    b: bi.clone(),
                    guarded: g0.clone(),
                }),
                target,
                interior: inner.clone(),
            }
        }
        _ => return None,
    };
    if [&p.c0, &p.c1]
        .iter()
        .any(|t| mentions(t, j) || mentions(t, &p.row))
    {
        return None;
    }
    Some((counts, p))
}

/// The one accumulation of a pass's row body over `c`, `buf[c - ...] +=
/// x`, into a block buffer of [`super::tile`] that nothing else of the
/// body names, its element not moving with the tap `j`; the rest of the
/// body declares locals and counts.
fn accumulation(c: &str, j: &str, body: &[Stmt]) -> Option<String> {
    let mut target = None;
    for s in body {
        match s {
            Stmt::Decl { .. } => {}
            Stmt::Line(l) if is_count(l) || l.starts_with("ATL_SUMADD_AT(") => {}
            Stmt::Line(l) if target.is_none() && l.starts_with("atlblk") => {
                let (t, _) = l.split_once(" += ")?;
                let (buf, at) = t.split_once('[')?;
                let at = at.strip_suffix(']')?;
                if !at.starts_with(&format!("{c} - ")) || mentions(at, j) {
                    return None;
                }
                target = Some((t.to_string(), buf.to_string()));
            }
            _ => return None,
        }
    }
    let (t, buf) = target?;
    let mut named = 0;
    each_text(body, &mut |x| named += x.matches(buf.as_str()).count());
    (named == 1).then_some(t)
}

/// The tap loop `s` run by groups of [`TAPS`] taps, if it is one.
fn jam(s: &Stmt, next: &mut usize) -> Option<Stmt> {
    let Stmt::For {
        var: j,
        lo,
        hi,
        body,
    } = s
    else {
        return None;
    };
    let (counts, p) = pass(j, body)?;
    *next += 1;
    let n = *next;
    let (groups, g) = (format!("atljam{n}_groups"), format!("atljam{n}_g"));
    let tap = |k: usize| format!("atljam{n}_j{k}");
    let on = |ss: &[Stmt], k: usize| {
        let mut ss = ss.to_vec();
        let to = tap(k);
        super::edges::map_text(&mut ss, &|t: &str| replace_word(t, j, &to));
        ss
    };
    // A loop counts its iterations (`ATL_ITER`) on entry to its body: the
    // group's loop counts one tap, its body the others.
    let iters = || (1..TAPS).map(|_| Stmt::Line("ATL_ITER();".into()));
    let mut group: Vec<Stmt> = iters().collect();
    for k in 0..TAPS {
        group.push(Stmt::Decl {
            ty: "const int64_t",
            name: tap(k),
            init: format!("({lo}) + {TAPS}*{g} + {k}"),
        });
        group.extend(counts.iter().cloned());
    }
    let (a, b) = (format!("atljam{n}_a"), format!("atljam{n}_b"));
    let fold = |f: &str, xs: Vec<String>| {
        xs[1..]
            .iter()
            .fold(xs[0].clone(), |acc, x| format!("{f}({acc}, {x})"))
    };
    let rows = |lo: &str, hi: &str, body: Vec<Stmt>| Stmt::For {
        var: p.row.clone(),
        lo: lo.to_string(),
        hi: hi.to_string(),
        body,
    };
    if let Some(e) = &p.edges {
        let (ak, bk) = (|k| format!("atljam{n}_a{k}"), |k| format!("atljam{n}_b{k}"));
        for k in 0..TAPS {
            // The interior's end is clamped to start at its start.
            let b = replace_word(&e.b, &e.a_name, &ak(k));
            for (name, init) in [(ak(k), &e.a), (bk(k), &b)] {
                group.push(Stmt::Decl {
                    ty: "const int64_t",
                    name,
                    init: replace_word(init, j, &tap(k)),
                });
            }
        }
        group.push(Stmt::Decl {
            ty: "const int64_t",
            name: a.clone(),
            init: fold("atlh_max", (0..TAPS).map(ak).collect()),
        });
        group.push(Stmt::Decl {
            ty: "const int64_t",
            name: b.clone(),
            init: format!(
                "atlh_max({a}, {})",
                fold("atlh_min", (0..TAPS).map(bk).collect())
            ),
        });
        for k in 0..TAPS {
            group.push(rows(&p.c0, &a, on(&e.guarded, k)));
        }
    }
    let (from, to) = match &p.edges {
        Some(_) => (a.clone(), b.clone()),
        None => (p.c0.clone(), p.c1.clone()),
    };
    let t = format!("atljam{n}_t");
    let add = format!("{} += ", p.target);
    let mut jammed: Vec<Stmt> = iters().collect();
    jammed.push(Stmt::Decl {
        ty: "double",
        name: t.clone(),
        init: p.target.clone(),
    });
    for k in 0..TAPS {
        let mut copy = on(&p.interior, k);
        super::edges::map_text(&mut copy, &|x: &str| match x.strip_prefix(&add) {
            Some(v) => format!("{t} += {v}"),
            None => x.to_string(),
        });
        jammed.push(Stmt::Block(copy));
    }
    jammed.push(Stmt::Line(format!("{} = {t};", p.target)));
    group.push(rows(&from, &to, jammed));
    if let Some(e) = &p.edges {
        for k in 0..TAPS {
            group.push(rows(&b, &p.c1, on(&e.guarded, k)));
        }
    }
    Some(Stmt::Block(vec![
        Stmt::Decl {
            ty: "const int64_t",
            name: groups.clone(),
            init: format!("atlh_max(({hi}) - ({lo}), 0) / {TAPS}"),
        },
        Stmt::For {
            var: g.clone(),
            lo: "0".into(),
            hi: groups.clone(),
            body: group,
        },
        Stmt::For {
            var: j.clone(),
            lo: format!("({lo}) + {TAPS}*{groups}"),
            hi: hi.clone(),
            body: body.clone(),
        },
    ]))
}
