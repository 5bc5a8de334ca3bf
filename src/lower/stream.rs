//! Large outputs written by streaming (non-temporal) stores (done on the
//! finished loop IR).
//!
//! A gradient often writes n-vectors where its function only reads them:
//! each store first reads its cache line from memory (write-allocate), so
//! writing a vector costs twice the traffic of reading one, and the
//! derivative of a memory-bound function runs slower than its cost ratio
//! says. A loop over `v` whose body writes outputs of the function only as
//! whole statements `out[v] = e;` (each output once per iteration, in the
//! loop's order, and read nowhere in the body) runs, when it writes at
//! least `ATL_STREAM_BYTES` and the target has AVX-512, by blocks of
//! `ATL_STREAM_BLOCK` iterations: each block runs the body as it was with
//! those stores going to a buffer on the stack (the C compiler vectorizes
//! it as it did the loop), then copies the buffers to the outputs with
//! streaming stores (`atlh_stream`), which write whole lines without
//! reading them. A whole block (`ATL_STREAM_BLOCK` iterations, every output
//! starting a line) runs a loop of that constant number of iterations
//! instead, when blocks are short (`ATL_STREAM_WHOLE`, the blocks of 16 of
//! AVX and SSE2 targets): the compiler keeps its buffers in vector
//! registers and streams them from there (`atlh_stream_whole`), as a vector
//! loop storing by streaming stores itself would. A store fence after the loop orders the calling thread's
//! streaming stores before what follows; the other threads' (a parallel
//! loop's) are ordered by the locked instructions of the barrier that ends
//! the loop (x86 never moves a store, streaming or not, past a locked
//! instruction). Blocks start where the first
//! output's lines start, so that only the first and last block write a
//! partial line (with ordinary stores). Smaller loops, other targets and
//! the counting build run the loop as it was. The iterations, their order
//! and every statement they run are the same: values and counts do not
//! change, and every element of an output is still written exactly once.
//!
//! Only a `gen`'s loop that may run in parallel (its `ATL_PARALLEL_FOR`,
//! which goes to the loop over blocks: each thread's blocks have their own
//! buffers) is streamed, not the short loops the splits make at its edges;
//! a loop with another pragma (an innermost sum's `ATL_SIMD_REDUCE`) or
//! none, or a body longer than
//! [`MAX_BODY`](super::edges::MAX_BODY) statements is left as it is.

use super::edges::{copyable, each_text, map_text, Copyable};
use super::ir::{pragma_before, Stmt};

/// Run the loops of `body` that write the outputs `outputs` (C names) in
/// order with streaming stores when they are large.
pub(super) fn split(body: &mut Vec<Stmt>, outputs: &[String]) {
    if outputs.is_empty() {
        return;
    }
    let mut next = 0;
    outer_loops(body, outputs, &mut next);
}

/// Stream the runs of outputs that innermost loops write ([`rows`]);
/// `sizes` gives the number of reals of the outputs whose size is known (a
/// C expression over the dimension locals).
pub(super) fn split_rows(body: &mut Vec<Stmt>, sizes: &[(String, String)]) {
    let mut next = 0;
    rows(body, sizes, &mut next);
}

/// Stream the runs that innermost loops nested in other loops write: a
/// loop over `v`, inside another loop, whose body writes an output only as
/// `out[e + v] = x;` (`e` not depending on `v` nor on the body's locals),
/// once per iteration, writes the run `out[e + lo .. e + hi)` in order
/// (a gen's row inside a fused loop over rows, such as a gradient's rows of
/// `dT[b][i][·]`). Each top-level statement with such loops tests once,
/// before it runs, whether the outputs they write together have at least
/// `ATL_STREAM_BYTES`; when they do, each loop whose run has at least
/// `ATL_STREAM_RUN` elements (a short run's blocks would cost more than
/// the lines they save) runs by blocks of
/// `ATL_STREAM_BLOCK` iterations into buffers that are then streamed (as in
/// [`stream_loop`]), and a store fence follows the statement.
fn rows(body: &mut Vec<Stmt>, sizes: &[(String, String)], next: &mut usize) {
    if sizes.is_empty() {
        return;
    }
    let mut i = 0;
    while i < body.len() {
        *next += 1;
        let on = format!("atlrow{}_on", *next);
        let mut used: Vec<String> = vec![];
        inner_loops(
            std::slice::from_mut(&mut body[i]),
            0,
            sizes,
            &on,
            next,
            &mut used,
        );
        if used.is_empty() {
            i += 1;
            continue;
        }
        let total: Vec<String> = sizes
            .iter()
            .filter(|(o, _)| used.contains(o))
            .map(|(_, n)| format!("({n})"))
            .collect();
        body.insert(
            i,
            Stmt::Decl {
                ty: "const int",
                name: on,
                init: format!("ATL_STREAM_OK({}, 1)", total.join(" + ")),
            },
        );
        body.insert(i + 2, Stmt::Line("atlh_stream_fence();".into()));
        i += 3;
    }
}

/// Whether `l` is a pragma line that must stay just before its loop.
fn is_pragma(l: &str) -> bool {
    l.starts_with("ATL_PARALLEL_FOR(") || l.starts_with("ATL_SIMD_REDUCE(") || l.starts_with('#')
}

/// [`rows`] on the statements `ss`, `depth` loops deep.
fn inner_loops(
    ss: &mut [Stmt],
    depth: usize,
    sizes: &[(String, String)],
    on: &str,
    next: &mut usize,
    used: &mut Vec<String>,
) {
    for i in 0..ss.len() {
        let after_pragma = i > 0 && matches!(&ss[i - 1], Stmt::Line(l) if is_pragma(l));
        match &mut ss[i] {
            Stmt::Block(b) => inner_loops(b, depth, sizes, on, next, used),
            Stmt::If { then, els, .. } => {
                inner_loops(then, depth, sizes, on, next, used);
                inner_loops(els, depth, sizes, on, next, used);
            }
            Stmt::Chunks { body, .. } => inner_loops(body, depth + 1, sizes, on, next, used),
            Stmt::For { body, .. } if has_loop(body) => {
                inner_loops(body, depth + 1, sizes, on, next, used)
            }
            Stmt::For { .. } if depth > 0 && !after_pragma => {
                if let Some((s, outs)) = stream_run(&ss[i], sizes, on, next) {
                    ss[i] = s;
                    for o in outs {
                        if !used.contains(&o) {
                            used.push(o);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Whether `ss` has a loop.
fn has_loop(ss: &[Stmt]) -> bool {
    ss.iter().any(|s| match s {
        Stmt::For { .. } | Stmt::Chunks { .. } => true,
        Stmt::Block(b) => has_loop(b),
        Stmt::If { then, els, .. } => has_loop(then) || has_loop(els),
        _ => false,
    })
}

/// The outputs among `sizes` that `body`, a loop's over `var`, writes only
/// as top-level statements `out[e + var] = x;` (once each, `e` mentioning
/// neither `var` nor a local of the body, `x` not mentioning `out`), with
/// their offsets `e`; `None` if an output is mentioned otherwise.
fn runs(
    body: &[Stmt],
    var: &str,
    declared: &std::collections::HashSet<String>,
    sizes: &[(String, String)],
) -> Option<Vec<(String, String)>> {
    let mut found = vec![];
    let tail = format!(" + {var}] = ");
    for (out, _) in sizes {
        let prefix = format!("{out}[");
        let mut run: Option<String> = None;
        for s in body {
            if let Stmt::Line(l) = s {
                if let Some(rest) = l.strip_prefix(&prefix) {
                    let (e, x) = rest.split_once(&tail)?;
                    if run.is_some()
                        || !x.ends_with(';')
                        || mentions(x, out)
                        || mentions(e, var)
                        || mentions(e, out)
                        || e.contains(['[', ']', '='])
                        || declared.iter().any(|d| mentions(e, d))
                    {
                        return None;
                    }
                    run = Some(e.to_string());
                    continue;
                }
            }
            let mut other = false;
            each_text(std::slice::from_ref(s), &mut |t| other |= mentions(t, out));
            if other {
                return None;
            }
        }
        if let Some(e) = run {
            found.push((out.clone(), e));
        }
    }
    Some(found)
}

/// The streamed schedule of a loop over `var` in `[{p}_lo, {p}_hi)` whose
/// body stores each output `out` at `out[off + var]` (`off` none: at
/// `out[var]`): the declaration of the first line-aligned start, the block
/// variable, and the body of block `k` (the stores go to a buffer per output
/// over the block's part of the range, then stream out).
fn stream_blocks(
    p: &str,
    var: &str,
    body: &[Stmt],
    outs: &[(String, Option<String>)],
) -> (Stmt, String, Vec<Stmt>) {
    let (l, h) = (format!("{p}_lo"), format!("{p}_hi"));
    let (a, b, k, start) = (
        format!("{p}_a"),
        format!("{p}_b"),
        format!("{p}_k"),
        format!("{p}_s"),
    );
    let buf = |j: usize| format!("{p}_buf{j}");
    let base = |(out, off): &(String, Option<String>)| match off {
        Some(e) => format!("{out} + ({e})"),
        None => out.clone(),
    };
    let mut inner = body.to_vec();
    for (j, (out, off)) in outs.iter().enumerate() {
        let from = match off {
            Some(e) => format!("{out}[{e} + {var}] = "),
            None => format!("{out}[{var}] = "),
        };
        let to = format!("{}[{var} - {a}] = ", buf(j));
        map_text(&mut inner, &|t| match t.strip_prefix(&from) {
            Some(rest) => format!("{to}{rest}"),
            None => t.to_string(),
        });
    }
    let mut block = vec![
        decl(
            &a,
            format!("atlh_max({l}, {start} + {k} * ATL_STREAM_BLOCK)"),
        ),
        decl(
            &b,
            format!("atlh_min({h}, {start} + ({k} + 1) * ATL_STREAM_BLOCK)"),
        ),
    ];
    for j in 0..outs.len() {
        block.push(Stmt::Line(format!("double {}[ATL_STREAM_BLOCK];", buf(j))));
    }
    // A whole block whose outputs all start a line: a loop of a constant
    // number of iterations, its buffers kept in registers and streamed
    // from them.
    let u = format!("{p}_u");
    let mut whole_body = vec![decl(var, format!("{a} + {u}"))];
    whole_body.extend(inner.iter().cloned());
    let mut whole = vec![Stmt::For {
        var: u,
        lo: "0".into(),
        hi: "ATL_STREAM_BLOCK".into(),
        body: whole_body,
    }];
    let mut partial = vec![Stmt::For {
        var: var.to_string(),
        lo: a.clone(),
        hi: b.clone(),
        body: inner,
    }];
    let mut cond = format!("ATL_STREAM_WHOLE && {b} - {a} == ATL_STREAM_BLOCK");
    for (j, o) in outs.iter().enumerate() {
        cond.push_str(&format!(" && atlh_line_offset({} + {a}) == 0", base(o)));
        whole.push(Stmt::Line(format!(
            "atlh_stream_whole({} + {a}, {});",
            base(o),
            buf(j)
        )));
        partial.push(Stmt::Line(format!(
            "atlh_stream({} + {a}, {}, {b} - {a});",
            base(o),
            buf(j)
        )));
    }
    block.push(Stmt::If {
        // the choice of a schedule, not a test of the program
        cond: format!("ATL_SCHEDULE({cond})"),
        then: whole,
        els: partial,
    });
    let first = decl(
        &start,
        format!("{l} - atlh_line_offset({} + {l})", base(&outs[0])),
    );
    (first, k, block)
}

/// A `const int64_t` local.
fn decl(name: &str, init: String) -> Stmt {
    Stmt::Decl {
        ty: "const int64_t",
        name: name.to_string(),
        init,
    }
}

/// One innermost loop as its streaming version beside itself, if it writes
/// runs of outputs; with the outputs it streams.
fn stream_run(
    s: &Stmt,
    sizes: &[(String, String)],
    on: &str,
    next: &mut usize,
) -> Option<(Stmt, Vec<String>)> {
    let c = copyable(s)?;
    let outs = runs(c.body, c.var, &c.declared, sizes)?;
    if outs.is_empty() {
        return None;
    }
    let var = c.var;
    *next += 1;
    let p = format!("atlrow{next}");
    let (l, h) = (format!("{p}_lo"), format!("{p}_hi"));
    let rows: Vec<(String, Option<String>)> = outs
        .iter()
        .map(|(o, e)| (o.clone(), Some(e.clone())))
        .collect();
    let (first, k, block) = stream_blocks(&p, var, c.body, &rows);
    let streaming = vec![
        first,
        Stmt::For {
            var: k,
            lo: "0".into(),
            hi: format!("atlh_ceildiv({h} - {p}_s, ATL_STREAM_BLOCK)"),
            body: block,
        },
    ];
    let plain = vec![Stmt::For {
        var: var.clone(),
        lo: l.clone(),
        hi: h.clone(),
        body: c.body.clone(),
    }];
    let stmt = Stmt::Block(vec![
        decl(&l, c.lo.clone()),
        decl(&h, c.hi.clone()),
        Stmt::If {
            // the choice of a schedule, not a test of the program
            cond: format!("ATL_SCHEDULE({on} && {h} - {l} >= ATL_STREAM_RUN)"),
            then: streaming,
            els: plain,
        },
    ]);
    Some((stmt, outs.into_iter().map(|(o, _)| o).collect()))
}

/// Stream the loops of `ss` that no other loop encloses (a loop nested in
/// another may write its outputs more than once).
fn outer_loops(ss: &mut Vec<Stmt>, outputs: &[String], next: &mut usize) {
    let mut i = 0;
    while i < ss.len() {
        match &mut ss[i] {
            Stmt::Block(body) => outer_loops(body, outputs, next),
            Stmt::If { then, els, .. } => {
                outer_loops(then, outputs, next);
                outer_loops(els, outputs, next);
            }
            _ => {}
        }
        let pragma = pragma_before(ss, i);
        if let Some(block) = stream_loop(&ss[i], pragma.as_deref(), outputs, next) {
            ss[i] = block;
            if pragma.is_some() {
                ss.remove(i - 1);
                i -= 1;
            }
        }
        i += 1;
    }
}

/// Whether `name` occurs in `t` as a whole C identifier.
fn mentions(t: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut at = 0;
    while let Some(p) = t[at..].find(name) {
        let start = at + p;
        let end = start + name.len();
        let before = t[..start].chars().next_back();
        let after = t[end..].chars().next();
        if !before.is_some_and(ident) && !after.is_some_and(ident) {
            return true;
        }
        at = end;
    }
    false
}

/// The outputs among `outputs` that `body` writes only as top-level
/// statements `out[var] = e;` (once each, `e` not mentioning it), and
/// mentions nowhere else; `None` if an output is mentioned otherwise.
fn streamed<'a>(body: &[Stmt], var: &str, outputs: &'a [String]) -> Option<Vec<&'a String>> {
    let mut found = vec![];
    for out in outputs {
        let prefix = format!("{out}[{var}] = ");
        let mut stores = 0;
        for s in body {
            if let Stmt::Line(l) = s {
                if let Some(rest) = l.strip_prefix(&prefix) {
                    if !rest.ends_with(';') || mentions(rest, out) {
                        return None;
                    }
                    stores += 1;
                    continue;
                }
            }
            let mut other = false;
            each_text(std::slice::from_ref(s), &mut |t| other |= mentions(t, out));
            if other {
                return None;
            }
        }
        match stores {
            0 => {}
            1 => found.push(out),
            _ => return None,
        }
    }
    Some(found)
}

/// One loop as its streaming version beside itself, if it writes outputs
/// in order.
fn stream_loop(
    s: &Stmt,
    pragma: Option<&str>,
    outputs: &[String],
    next: &mut usize,
) -> Option<Stmt> {
    let pragma = pragma.filter(|p| p.starts_with("ATL_PARALLEL_FOR("))?;
    let Copyable {
        var, lo, hi, body, ..
    } = copyable(s)?;
    let outs = streamed(body, var, outputs)?;
    if outs.is_empty() {
        return None;
    }
    *next += 1;
    let p = format!("atlstr{next}");
    let (l, h) = (format!("{p}_lo"), format!("{p}_hi"));
    let whole: Vec<(String, Option<String>)> = outs.iter().map(|o| (o.to_string(), None)).collect();
    let (first, k, block) = stream_blocks(&p, var, body, &whole);
    let mut streaming = vec![first];
    streaming.push(Stmt::Line(pragma.to_string()));
    streaming.push(Stmt::For {
        var: k,
        lo: "0".into(),
        hi: format!("atlh_ceildiv({h} - {p}_s, ATL_STREAM_BLOCK)"),
        body: block,
    });
    streaming.push(Stmt::Line("atlh_stream_fence();".into()));
    let mut plain = vec![Stmt::Line(pragma.to_string())];
    plain.push(Stmt::For {
        var: var.clone(),
        lo: l.clone(),
        hi: h.clone(),
        body: body.clone(),
    });
    Some(Stmt::Block(vec![
        decl(&l, lo.clone()),
        decl(&h, hi.clone()),
        Stmt::If {
            // the choice of a schedule, not a test of the program
            cond: format!("ATL_SCHEDULE(ATL_STREAM_OK({h} - {l}, {}))", outs.len()),
            then: streaming,
            els: plain,
        },
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: "i".into(),
            lo: "0".into(),
            hi: "n".into(),
            body,
        }
    }

    fn partial_inner(partial: &[Stmt]) -> &[Stmt] {
        match &partial[0] {
            Stmt::For { body, .. } => body,
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn only_outputs_written_once_at_the_loop_variable_are_streamed() {
        let outs = vec!["out".to_string(), "out2".to_string()];
        let store = Stmt::Line("out[i] = x[i] + 1.0;".into());
        assert_eq!(
            streamed(std::slice::from_ref(&store), "i", &outs),
            Some(vec![&outs[0]])
        );
        // read back, written twice, or at another index: left alone
        let read = Stmt::Line("y = out[i];".into());
        assert_eq!(streamed(&[store.clone(), read], "i", &outs), None);
        assert_eq!(streamed(&[store.clone(), store.clone()], "i", &outs), None);
        let shifted = Stmt::Line("out[i + 1] = 0.0;".into());
        assert_eq!(streamed(&[shifted], "i", &outs), None);
        // `out2` and `out_x` are other names
        let other = Stmt::Line("out_x[i] = out2[0];".into());
        assert_eq!(streamed(&[other], "i", &outs[..1]), Some(vec![]));
    }

    #[test]
    fn a_streamed_loop_keeps_its_plain_copy_and_moves_its_pragma() {
        let outs = vec!["out".to_string()];
        let mut ss = vec![
            Stmt::Line("ATL_PARALLEL_FOR(w >= ATL_PAR_WORK)".into()),
            lp(vec![Stmt::Line("out[i] = 2.0 * x[i];".into())]),
        ];
        split(&mut ss, &outs);
        let [Stmt::Block(parts)] = ss.as_slice() else {
            panic!("{ss:?}")
        };
        let Stmt::If { then, els, .. } = &parts[2] else {
            panic!("{parts:?}")
        };
        assert!(matches!(&then[1], Stmt::Line(l) if l.starts_with("ATL_PARALLEL_FOR(")));
        assert!(matches!(&els[0], Stmt::Line(l) if l.starts_with("ATL_PARALLEL_FOR(")));
        let Stmt::For { body, .. } = &then[2] else {
            panic!("{then:?}")
        };
        let Stmt::If {
            then: whole,
            els: partial,
            ..
        } = &body[3]
        else {
            panic!("{body:?}")
        };
        let Stmt::For { body: inner, .. } = &partial[0] else {
            panic!("{partial:?}")
        };
        assert_eq!(
            inner,
            &vec![Stmt::Line(
                "atlstr1_buf0[i - atlstr1_a] = 2.0 * x[i];".into()
            )]
        );
        // a whole block: a constant number of iterations, streamed whole
        let Stmt::For {
            hi, body: inner, ..
        } = &whole[0]
        else {
            panic!("{whole:?}")
        };
        assert_eq!(hi, "ATL_STREAM_BLOCK");
        assert_eq!(inner[1..], partial_inner(partial)[..]);
        assert!(
            matches!(&whole[1], Stmt::Line(l) if l.starts_with("atlh_stream_whole(out + atlstr1_a,"))
        );
        assert_eq!(
            els[1],
            Stmt::For {
                var: "i".into(),
                lo: "atlstr1_lo".into(),
                hi: "atlstr1_hi".into(),
                body: vec![Stmt::Line("out[i] = 2.0 * x[i];".into())],
            }
        );
        // a reduction's loop is not streamed
        let mut ss = vec![
            Stmt::Line("ATL_SIMD_REDUCE(s)".into()),
            lp(vec![Stmt::Line("out[i] = 2.0 * x[i];".into())]),
        ];
        let before = ss.clone();
        split(&mut ss, &outs);
        assert_eq!(ss, before);
    }
}
