//! Short reductions of a row loop run a block of rows at a time, the rows
//! innermost (done on the finished loop IR, before [`super::edges`]).
//!
//! A loop over rows `c` whose body opens with a sum over a short range
//! (a convolution's taps, `acc = Σ_j x[c + m - 1 - j]·w[j]`, then the rest
//! of the row reads `acc`) runs its taps as a loop of a few iterations per
//! row: too short to vectorize, and its bounds are set up again for every
//! row. Here such a loop runs over blocks of [`BLOCK`] rows; in each block
//! the sum's loops run first with the rows innermost, accumulating into one
//! real per row of the block (`acc[c - c0] += x[c + m - 1 - j]·w[j]`: a
//! vector loop over the block, its operands in cache), then the rest of the
//! body runs row by row, reading its row's sum. Every row still adds the
//! same terms in the same order (the sum's loops keep their order; only the
//! rows are interleaved), so the values, and the counting build's
//! operations, are those of the loop as it was: a per-row first-term flag
//! becomes a flag per element of the block (`ATL_FIRST_AT`).
//!
//! A sum is moved only when nothing of the row body before or around it
//! feeds it: its texts name no local of the row body and no buffer the body
//! writes, its loop bounds and bracket do not depend on the row, its
//! innermost body only accumulates (and counts), and every tensor read that
//! moves with the row moves by one element (the block's loop then walks
//! memory contiguously; a read down a column stays where it was).

use super::edges::{declarations, each_text, map_text};
use super::ir::{pragma_before, Stmt};
use std::collections::HashSet;

/// The C macro of the rows in a block (the prelude's `ATL_ROW_BLOCK`).
pub(crate) const BLOCK: &str = "ATL_ROW_BLOCK";

/// Run the short reductions of the row loops of `body` by blocks of rows.
pub(super) fn block_rows(body: &mut Vec<Stmt>) {
    let mut next = 0;
    walk(body, &mut next);
}

fn walk(ss: &mut Vec<Stmt>, next: &mut usize) {
    let mut i = 0;
    while i < ss.len() {
        let s = &mut ss[i];
        for b in s.blocks_mut() {
            walk(b, next);
        }
        if let Some(b) = block_loop(s, next).or_else(|| block_reduction(s, next)) {
            *s = b;
            // A loop's pragma goes with the loop into each branch; the
            // blocks of rows stay parallel, a vector loop's pragma does not
            // apply to them.
            let pragma = pragma_before(ss, i);
            if let (Some(p), Stmt::If { then, els, .. }) = (pragma, &mut ss[i]) {
                if p.starts_with("ATL_PARALLEL_FOR(") {
                    then.insert(0, Stmt::Line(p.clone()));
                }
                els.insert(0, Stmt::Line(p));
                ss.remove(i - 1);
                i -= 1;
            }
        }
        i += 1;
    }
}

/// A sum of the row body moved before the rows: where it stands in the
/// body, its accumulator and first-term flag, its loops.
struct Hoisted {
    at: usize,
    acc: String,
    flag: String,
    nest: Stmt,
}

/// The loop `s` over blocks of rows, when its body has a sum to move.
fn block_loop(s: &Stmt, next: &mut usize) -> Option<Stmt> {
    let Stmt::For { var, lo, hi, body } = s else {
        return None;
    };
    let hoisted = hoistable(var, body);
    // A reduction alone in the row body is [`block_reduction`]'s.
    let moved = trailing_reduction(var, body).filter(|t| {
        !hoisted.is_empty()
            || body[..t.at]
                .iter()
                .any(|s| !matches!(s, Stmt::Line(l) if is_count(l)))
    });
    if hoisted.is_empty() && moved.is_none() {
        return None;
    }
    *next += 1;
    let (k, c0, c1) = (
        format!("atlblk{next}_k"),
        format!("atlblk{next}_lo"),
        format!("atlblk{next}_hi"),
    );
    let at = format!("{var} - {c0}");
    let mut out = vec![
        Stmt::Decl {
            ty: "const int64_t",
            name: c0.clone(),
            init: format!("({lo}) + {k}*(int64_t){BLOCK}"),
        },
        Stmt::Decl {
            ty: "const int64_t",
            name: c1.clone(),
            init: format!("{c0} + atlh_min((int64_t){BLOCK}, ({hi}) - {c0})"),
        },
    ];
    let mut rest = body.clone();
    if let Some(t) = &moved {
        rest.truncate(t.at);
    }
    for (n, h) in hoisted.iter().enumerate().rev() {
        let (buf, flags) = (format!("atlblk{next}_s{n}"), format!("atlblk{next}_h{n}"));
        let mut part = vec![
            Stmt::Line(format!("double {buf}[{BLOCK}];")),
            Stmt::For {
                var: var.clone(),
                lo: c0.clone(),
                hi: c1.clone(),
                body: vec![Stmt::Line(format!("{buf}[{at}] = 0.0;"))],
            },
            Stmt::Line(format!("ATL_FIRST_AT({flags}, {BLOCK});")),
        ];
        let row = Stmt::For {
            var: var.clone(),
            lo: c0.clone(),
            hi: c1.clone(),
            body: vec![],
        };
        part.push(interchange(
            &h.nest, &row, &h.acc, &h.flag, &buf, &flags, &at,
        ));
        part.push(Stmt::Line(format!("ATL_FIRST_AT_END({flags});")));
        out.splice(2..2, part);
        rest.splice(
            h.at..h.at + 3,
            [Stmt::Decl {
                ty: "const double",
                name: h.acc.clone(),
                init: format!("{buf}[{at}]"),
            }],
        );
    }
    let after = moved
        .as_ref()
        .map(|t| t.after_rows(var, &c0, &c1, &at, *next, &mut out, &mut rest));
    if let Some(a) = reduction_of(var, &rest) {
        out.push(Stmt::Line(format!("ATL_SIMD_REDUCE({a})")));
    }
    out.push(Stmt::For {
        var: var.clone(),
        lo: c0,
        hi: c1,
        body: rest,
    });
    out.extend(after.into_iter().flatten());
    let blocked = Stmt::For {
        var: k,
        lo: "0".into(),
        hi: format!("atlh_ceildiv(atlh_max(({hi}) - ({lo}), 0), (int64_t){BLOCK})"),
        body: out,
    };
    let (lo2, hi2) = match (hoisted.first(), &moved) {
        (Some(h), _) => innermost_range(&h.nest)?,
        (None, Some(t)) => (t.glo.clone(), t.ghi.clone()),
        (None, None) => return None,
    };
    Some(longer_inside(lo, hi, &lo2, &hi2, blocked, s))
}

/// The last statement of a row body over `c` when it is a short loop over
/// `g` (possibly under a test that does not depend on the row) adding one
/// term a point to `out[g]`, [`block_reduction`]'s shape: a reduction of
/// the rows that a row fusion runs after each row's values (a kernel
/// gradient `Σ_c r[c]·x[c + m - 1 - g]` fused with the residual `r`).
/// It reads of the row body only the locals declared at its top level
/// (real scalars or one-real arrays), which the block then keeps a real
/// per row of; nothing else the body declares or writes.
struct Trailing {
    /// Where it stands in the row body (its last statement).
    at: usize,
    cond: Option<String>,
    g: String,
    glo: String,
    ghi: String,
    inner: Vec<Stmt>,
    target: String,
    flags_at: String,
    /// The row body's locals it reads: name, and whether a one-real array.
    locals: Vec<(String, bool)>,
}

fn trailing_reduction(c: &str, body: &[Stmt]) -> Option<Trailing> {
    let at = body.len().checked_sub(1)?;
    let mut s = &body[at];
    let mut cond = None;
    loop {
        match s {
            Stmt::Block(b) if b.len() == 1 => s = &b[0],
            Stmt::If { cond: k, then, els }
                if cond.is_none() && els.is_empty() && then.len() == 1 =>
            {
                cond = Some(k.clone());
                s = &then[0];
            }
            _ => break,
        }
    }
    let Stmt::For {
        var: g,
        lo: glo,
        hi: ghi,
        body: inner,
    } = s
    else {
        return None;
    };
    let (target, flags_at) = row_add(c, g, inner)?;
    let rest = &body[..at];
    // The row body does not read what the reduction adds to.
    let name = &target[..target.find('[')?];
    let mut read = false;
    each_text(rest, &mut |t| read |= mentions(t, name));
    if read {
        return None;
    }
    let mut top: Vec<(String, bool)> = vec![];
    for t in rest {
        match t {
            Stmt::Decl { ty, name, .. } if ty.ends_with("double") => {
                top.push((name.clone(), false))
            }
            Stmt::Line(l) => {
                if let Some(a) = l
                    .strip_prefix("double ")
                    .and_then(|a| a.strip_suffix("[1];"))
                {
                    top.push((a.to_string(), true));
                }
            }
            _ => {}
        }
    }
    let mut forbidden = HashSet::new();
    declarations(rest, &mut forbidden);
    written(rest, &mut forbidden);
    forbidden.insert(c.to_string());
    let outside: Vec<String> = [glo, ghi]
        .into_iter()
        .chain(cond.as_ref())
        .cloned()
        .collect();
    let mut texts = vec![];
    each_text(inner, &mut |t| texts.push(t.to_string()));
    let mut locals = vec![];
    for n in &forbidden {
        if outside.iter().any(|t| mentions(t, n)) {
            return None;
        }
        if n == c || !texts.iter().any(|t| mentions(t, n)) {
            continue;
        }
        let &(_, array) = top.iter().find(|(l, _)| l == n)?;
        // A one-real array is read only as its element.
        if array
            && texts
                .iter()
                .any(|t| t.matches(n.as_str()).count() != t.matches(&format!("{n}[0]")).count())
        {
            return None;
        }
        locals.push((n.clone(), array));
    }
    locals.sort();
    Some(Trailing {
        at,
        cond,
        g: g.clone(),
        glo: glo.clone(),
        ghi: ghi.clone(),
        inner: inner.clone(),
        target,
        flags_at,
        locals,
    })
}

impl Trailing {
    /// The reduction run after the block's rows (`c` from `c0` to `c1`,
    /// its element `at` of a block buffer): a block buffer per local it
    /// reads, declared in `out` and filled at the end of each row of
    /// `rest`; then, for each `g`, the block's terms summed in a local and
    /// added to `out[g]`, as [`block_reduction`] does.
    #[allow(clippy::too_many_arguments)]
    fn after_rows(
        &self,
        c: &str,
        c0: &str,
        c1: &str,
        at: &str,
        next: usize,
        out: &mut Vec<Stmt>,
        rest: &mut Vec<Stmt>,
    ) -> Vec<Stmt> {
        let mut inner = self.inner.clone();
        for (j, (n, array)) in self.locals.iter().enumerate() {
            let buf = format!("atlblk{next}_r{j}");
            out.push(Stmt::Line(format!("double {buf}[{BLOCK}];")));
            let read = if *array { format!("{n}[0]") } else { n.clone() };
            rest.push(Stmt::Line(format!("{buf}[{at}] = {read};")));
            let by = format!("{buf}[{at}]");
            map_text(&mut inner, &|t: &str| replace_word(t, &read, &by));
        }
        let per_g = per_block_sum(c, c0, c1, &inner, &self.target, &self.flags_at, next);
        let lp = Stmt::For {
            var: self.g.clone(),
            lo: self.glo.clone(),
            hi: self.ghi.clone(),
            body: per_g,
        };
        match &self.cond {
            Some(k) => vec![Stmt::If {
                cond: k.clone(),
                then: vec![lp],
                els: vec![],
            }],
            None => vec![lp],
        }
    }
}

/// `t` with every whole occurrence of `from` (an identifier, possibly
/// followed by a subscript) replaced by `to`.
pub(super) fn replace_word(t: &str, from: &str, to: &str) -> String {
    let ident = |ch: u8| ch.is_ascii_alphanumeric() || ch == b'_';
    let b = t.as_bytes();
    let mut out = String::new();
    let mut at = 0;
    while let Some(p) = t[at..].find(from) {
        let start = at + p;
        let end = start + from.len();
        let whole = (start == 0 || !ident(b[start - 1]))
            && (end == b.len() || !ident(b[end]) || from.ends_with(']'));
        out.push_str(&t[at..start]);
        out.push_str(if whole { to } else { from });
        at = end;
    }
    out.push_str(&t[at..]);
    out
}

/// For one `g`: the terms of the rows `c0..c1` (the body `inner` of the
/// loop over `g`, its `target += x` now into a local) summed in a local, a
/// vector loop, then added to `target` with its first-term count merged.
fn per_block_sum(
    c: &str,
    c0: &str,
    c1: &str,
    inner: &[Stmt],
    target: &str,
    flags_at: &str,
    next: usize,
) -> Vec<Stmt> {
    let (part, first) = (format!("atlblk{next}_s"), format!("atlblk{next}_h"));
    let mut b = inner.to_vec();
    b.retain(|t| !matches!(t, Stmt::Line(l) if l.starts_with("ATL_SUMADD_AT(")));
    for t in b.iter_mut() {
        if let Stmt::Line(l) = t {
            if let Some(x) = l.strip_prefix(&format!("{target} += ")) {
                *l = format!("{part} += {x}");
            }
        }
    }
    b.push(Stmt::Line(format!("ATL_SUMADD({first});")));
    vec![
        Stmt::Decl {
            ty: "double",
            name: part.clone(),
            init: "0.0".into(),
        },
        Stmt::Decl {
            ty: "int",
            name: first.clone(),
            init: "0".into(),
        },
        Stmt::Line(format!("ATL_SIMD_REDUCE({part})")),
        Stmt::For {
            var: c.to_string(),
            lo: c0.to_string(),
            hi: c1.to_string(),
            body: b,
        },
        Stmt::Line(format!("{target} += {part};")),
        Stmt::Line(format!("ATL_SUMADD_MERGE({flags_at}, {first});")),
    ]
}

/// The bounds of the innermost loop of a sum's loops.
fn innermost_range(nest: &Stmt) -> Option<(String, String)> {
    match nest {
        Stmt::Block(b) | Stmt::If { then: b, .. } => b.iter().find_map(innermost_range),
        Stmt::For { lo, hi, body, .. } => body
            .iter()
            .find_map(innermost_range)
            .or_else(|| Some((lo.clone(), hi.clone()))),
        _ => None,
    }
}

/// The accumulator of a row body that, its sums moved, has no loop left
/// and adds to one scalar declared outside: the rows' loop is then that
/// scalar's sum, which may add its terms in any order (SIMD lanes, as an
/// innermost sum does); every other line declares a local, counts, or
/// stores into the row's element of an array or into a local array.
fn reduction_of(c: &str, rest: &[Stmt]) -> Option<String> {
    let mut acc = None;
    let mut declared = HashSet::new();
    declarations(rest, &mut declared);
    for s in rest {
        if let Stmt::Line(l) = s {
            if let Some(a) = l.strip_prefix("double ").filter(|a| a.ends_with("];")) {
                declared.insert(a[..a.find('[')?].to_string());
            }
        }
    }
    for s in rest {
        let Stmt::Line(l) = s else {
            if matches!(s, Stmt::Decl { .. }) {
                continue;
            }
            return None;
        };
        if (l.starts_with("ATL_") && !l.starts_with("ATL_FIRST_AT"))
            || (l.starts_with("double ") && l.ends_with("];"))
        {
            continue;
        }
        let ident: String = l
            .chars()
            .take_while(|ch| ch.is_ascii_alphanumeric() || *ch == '_')
            .collect();
        let after = l[ident.len()..].trim_start();
        if after.starts_with("+= ") && !declared.contains(&ident) && acc.is_none() {
            if mentions(&after[3..], &ident) {
                return None;
            }
            acc = Some(ident);
        } else {
            let store = after.starts_with('[') && l.contains("] = ");
            let own =
                declared.contains(&ident) || l.split("] = ").next().is_some_and(|t| mentions(t, c));
            if !(store && own) {
                return None;
            }
        }
    }
    let a = acc?;
    // The accumulator is read nowhere else in the body.
    let mut reads = 0;
    each_text(rest, &mut |t| reads += usize::from(mentions(t, &a)));
    (reads == 1).then_some(a)
}

/// The sums of the row body over `c` that can be moved (module doc).
fn hoistable(c: &str, body: &[Stmt]) -> Vec<Hoisted> {
    let mut found = vec![];
    let mut k = 0;
    while k + 2 < body.len() {
        let (
            Stmt::Decl { ty, name, init },
            Stmt::Decl {
                ty: ty1,
                name: h,
                init: init1,
            },
        ) = (&body[k], &body[k + 1])
        else {
            k += 1;
            continue;
        };
        if *ty != "double" || init != "0.0" || *ty1 != "int" || init1 != "0" {
            k += 1;
            continue;
        }
        // Everything of the body but this sum: its locals and the buffers
        // it writes may not be read by the sum, nor the flag named.
        let others: Vec<Stmt> = body[..k].iter().chain(&body[k + 3..]).cloned().collect();
        let mut forbidden = HashSet::new();
        declarations(&others, &mut forbidden);
        written(&others, &mut forbidden);
        let mut flag_used = false;
        each_text(&others, &mut |t| flag_used |= mentions(t, h));
        if !flag_used && movable(c, &body[k + 2], name, h, &forbidden) {
            found.push(Hoisted {
                at: k,
                acc: name.clone(),
                flag: h.clone(),
                nest: body[k + 2].clone(),
            });
            k += 3;
        } else {
            k += 1;
        }
    }
    found
}

/// The names a block's lines may write: what they assign or declare as
/// arrays (`b[...] = `, `s += `, `double b[1];`), and every name of a line
/// that calls a function (a kernel writing its arguments).
fn written(ss: &[Stmt], out: &mut HashSet<String>) {
    let ident = |ch: char| ch.is_ascii_alphanumeric() || ch == '_';
    each_line(ss, &mut |l| {
        let l = l.trim_start();
        let l = l.strip_prefix("double ").unwrap_or(l);
        let id: String = l.chars().take_while(|ch| ident(*ch)).collect();
        let after = l[id.len()..].trim_start();
        if after.starts_with('[') || after.starts_with('=') || after.starts_with("+=") {
            out.insert(id);
        } else if !id.starts_with("ATL_") {
            out.extend(
                l.split(|ch: char| !ident(ch))
                    .filter(|w| w.starts_with(|ch: char| ch.is_ascii_alphabetic() || ch == '_'))
                    .map(str::to_string),
            );
        }
    });
}

fn each_line(ss: &[Stmt], f: &mut impl FnMut(&str)) {
    for s in ss {
        match s {
            Stmt::Line(l) => f(l),
            Stmt::Decl { .. } => {}
            Stmt::For { body, .. } | Stmt::Block(body) | Stmt::Chunks { body, .. } => {
                each_line(body, f)
            }
            Stmt::If { then, els, .. } => {
                each_line(then, f);
                each_line(els, f);
            }
        }
    }
}

/// Is `nest` (a sum's loops, possibly under its bracket's test) a sum into
/// `acc` that does not depend on the row body (module doc)?
fn movable(c: &str, nest: &Stmt, acc: &str, flag: &str, forbidden: &HashSet<String>) -> bool {
    let free = |t: &str| !mentions(t, c) && !forbidden.iter().any(|n| mentions(t, n));
    let mut s = nest;
    while let Stmt::Block(b) = s {
        match b.as_slice() {
            [inner] => s = inner,
            _ => return false,
        }
    }
    if let Stmt::If { cond, then, els } = s {
        let then: Vec<&Stmt> = then
            .iter()
            .filter(|t| !matches!(t, Stmt::Line(l) if is_simd(l, acc)))
            .collect();
        match (then.as_slice(), els.is_empty()) {
            ([inner @ Stmt::For { .. }], true) if free(cond) => s = inner,
            _ => return false,
        }
    }
    loop {
        let Stmt::For { lo, hi, body, .. } = s else {
            return false;
        };
        if !free(lo) || !free(hi) {
            return false;
        }
        let loops: Vec<&Stmt> = body
            .iter()
            .filter(|t| !matches!(t, Stmt::Line(l) if is_count(l) || is_simd(l, acc)))
            .collect();
        match loops.as_slice() {
            [inner @ Stmt::For { .. }] => s = inner,
            _ => return innermost(c, body, acc, flag, forbidden),
        }
    }
}

/// The innermost body of a movable sum: declarations, counts, and one
/// accumulation; the row's reads unit-stride.
fn innermost(c: &str, body: &[Stmt], acc: &str, flag: &str, forbidden: &HashSet<String>) -> bool {
    let mut adds = 0;
    for s in body {
        let text = match s {
            Stmt::Decl { init, .. } => init.as_str(),
            Stmt::Line(l) if l.starts_with(&format!("{acc} += ")) => {
                adds += 1;
                l.as_str()
            }
            Stmt::Line(l) if *l == format!("ATL_SUMADD({flag});") => continue,
            Stmt::Line(l) if is_count(l) => l.as_str(),
            _ => return false,
        };
        let named = |n: &str| mentions(text, n);
        let acc_ok = matches!(s, Stmt::Line(l) if l.starts_with(&format!("{acc} += ")))
            && !mentions(&text[acc.len()..], acc);
        if (named(acc) && !acc_ok) || named(flag) || forbidden.iter().any(|n| named(n)) {
            return false;
        }
        if !unit_reads(text, c) {
            return false;
        }
    }
    adds == 1
}

/// A count of the counting build (no effect otherwise) that names nothing
/// of the row.
pub(super) fn is_count(l: &str) -> bool {
    matches!(l, "ATL_ITER();" | "ATL_MUL();" | "ATL_CALL();") || l.starts_with("ATL_ADD(")
}

fn is_simd(l: &str, acc: &str) -> bool {
    l == format!("ATL_SIMD_REDUCE({acc})")
}

/// Does every subscript `[...]` of `t` that names `c` move by one element
/// when `c` steps (`c` with coefficient ±1, in no group that is scaled)?
fn unit_reads(t: &str, c: &str) -> bool {
    let b = t.as_bytes();
    let scaled_after = |q: usize| t[q..].trim_start().starts_with('*');
    let scaled_before = |q: usize| t[..q].trim_end().ends_with('*');
    let mut at = 0;
    while let Some(p) = word_at(t, c, at) {
        at = p + c.len();
        if scaled_before(p) || scaled_after(at) {
            return false;
        }
        // The groups that enclose `c`, out to its subscript's `[`.
        let mut depth = 0i32;
        let mut groups = vec![];
        let mut open = None;
        for q in (0..p).rev() {
            match b[q] {
                b')' | b']' => depth += 1,
                b'(' if depth == 0 => groups.push(q),
                b'[' if depth == 0 => {
                    open = Some(q);
                    break;
                }
                b'(' | b'[' => depth -= 1,
                _ => {}
            }
        }
        if open.is_none() {
            continue;
        }
        if groups.into_iter().any(scaled_before) {
            return false;
        }
        let mut depth = 0i32;
        for (q, ch) in t[at..].char_indices() {
            let q = at + q;
            match ch {
                ')' if depth == 0 && scaled_after(q + 1) => return false,
                ')' if depth == 0 => {}
                ']' if depth == 0 => break,
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                _ => {}
            }
        }
    }
    true
}

/// Does `t` name `n` (as a whole identifier)?
pub(super) fn mentions(t: &str, n: &str) -> bool {
    word_at(t, n, 0).is_some()
}

fn word_at(t: &str, n: &str, from: usize) -> Option<usize> {
    let ident = |ch: u8| ch.is_ascii_alphanumeric() || ch == b'_';
    let b = t.as_bytes();
    let mut at = from;
    while let Some(p) = t.get(at..)?.find(n) {
        let start = at + p;
        let end = start + n.len();
        if (start == 0 || !ident(b[start - 1])) && (end == b.len() || !ident(b[end])) {
            return Some(start);
        }
        at = start + 1;
    }
    None
}

/// The sum's loops with the block's rows innermost: the accumulation into
/// `buf[at]`, its first term flagged per element.
fn interchange(
    nest: &Stmt,
    row: &Stmt,
    acc: &str,
    flag: &str,
    buf: &str,
    flags: &str,
    at: &str,
) -> Stmt {
    match nest {
        Stmt::Block(b) => Stmt::Block(
            b.iter()
                .map(|s| interchange(s, row, acc, flag, buf, flags, at))
                .collect(),
        ),
        Stmt::If { cond, then, els } => Stmt::If {
            cond: cond.clone(),
            then: then
                .iter()
                .filter(|s| !matches!(s, Stmt::Line(l) if is_simd(l, acc)))
                .map(|s| interchange(s, row, acc, flag, buf, flags, at))
                .collect(),
            els: els.clone(),
        },
        Stmt::For { var, lo, hi, body } => {
            let body: Vec<Stmt> = body
                .iter()
                .filter(|s| !matches!(s, Stmt::Line(l) if is_simd(l, acc)))
                .cloned()
                .collect();
            let inner = if body.iter().any(|s| matches!(s, Stmt::For { .. })) {
                body.iter()
                    .map(|s| interchange(s, row, acc, flag, buf, flags, at))
                    .collect()
            } else {
                let Stmt::For {
                    var: c,
                    lo: c0,
                    hi: c1,
                    ..
                } = row
                else {
                    unreachable!("the rows are a loop")
                };
                let mut b = body;
                let add = format!("{acc} += ");
                let count = format!("ATL_SUMADD({flag});");
                map_text(&mut b, &|t: &str| {
                    if let Some(x) = t.strip_prefix(&add) {
                        format!("{buf}[{at}] += {x}")
                    } else if t == count {
                        format!("ATL_SUMADD_AT({flags}, {at});")
                    } else {
                        t.to_string()
                    }
                });
                vec![Stmt::For {
                    var: c.clone(),
                    lo: c0.clone(),
                    hi: c1.clone(),
                    body: b,
                }]
            };
            Stmt::For {
                var: var.clone(),
                lo: lo.clone(),
                hi: hi.clone(),
                body: inner,
            }
        }
        _ => nest.clone(),
    }
}

/// A long loop over `i` around a short one over `g` that adds one term to
/// `out[g]` per point (a reduction the loop order ran with `g` innermost,
/// as a kernel's gradient `Σ_i r[i]·x[i + m - 1 - g]`): run by blocks of
/// `i`, `g` outside, each block's terms summed in a local (a vector loop
/// over the block, its reads in cache) and the local added to `out[g]`.
/// Every `out[g]` still sums the same terms, `i` ascending up to the
/// reassociation a vectorized sum allows; the counting build counts a
/// block's first term free and its merge as the addition it replaces.
fn block_reduction(s: &Stmt, next: &mut usize) -> Option<Stmt> {
    let Stmt::For { var, lo, hi, body } = s else {
        return None;
    };
    let loops: Vec<&Stmt> = body
        .iter()
        .filter(|t| !matches!(t, Stmt::Line(l) if is_count(l)))
        .collect();
    let [Stmt::For {
        var: g,
        lo: glo,
        hi: ghi,
        body: inner,
    }] = loops.as_slice()
    else {
        return None;
    };
    if [glo, ghi].iter().any(|t| mentions(t, var)) {
        return None;
    }
    let (target, flags_at) = row_add(var, g, inner)?;
    *next += 1;
    let (k, c0, c1) = (
        format!("atlblk{next}_k"),
        format!("atlblk{next}_lo"),
        format!("atlblk{next}_hi"),
    );
    let per_g = per_block_sum(var, &c0, &c1, inner, &target, &flags_at, *next);
    let blocked = Stmt::For {
        var: k.clone(),
        lo: "0".into(),
        hi: format!("atlh_ceildiv(atlh_max(({hi}) - ({lo}), 0), (int64_t){BLOCK})"),
        body: vec![
            Stmt::Decl {
                ty: "const int64_t",
                name: c0.clone(),
                init: format!("({lo}) + {k}*(int64_t){BLOCK}"),
            },
            Stmt::Decl {
                ty: "const int64_t",
                name: c1,
                init: format!("{c0} + atlh_min((int64_t){BLOCK}, ({hi}) - {c0})"),
            },
            Stmt::For {
                var: g.clone(),
                lo: glo.clone(),
                hi: ghi.clone(),
                body: per_g,
            },
        ],
    };
    Some(longer_inside(lo, hi, glo, ghi, blocked, s))
}

/// `blocked` (the loop over `[lo, hi)` made innermost) where that loop is
/// longer than the one over `[lo2, hi2)` it replaces innermost, `plain`
/// otherwise (a short sum over a long row stays as it was).
fn longer_inside(lo: &str, hi: &str, lo2: &str, hi2: &str, blocked: Stmt, plain: &Stmt) -> Stmt {
    Stmt::If {
        cond: format!("ATL_SCHEDULE(({hi}) - ({lo}) > ({hi2}) - ({lo2}))"),
        then: vec![blocked],
        els: vec![plain.clone()],
    }
}

/// The body of the short loop over `g` of [`block_reduction`]: locals,
/// counts, one `out[.. g ..] += x;` (its element not moving with `i`, `out`
/// not read) and its first-term count. Returns `out[..]` and the count's
/// arguments; every read that moves with `i` moves by one element.
fn row_add(i: &str, g: &str, body: &[Stmt]) -> Option<(String, String)> {
    let mut add = None;
    let mut count = None;
    let mut texts = vec![];
    for s in body {
        match s {
            Stmt::Decl { init, .. } => texts.push(init.clone()),
            Stmt::Line(l) if is_count(l) => {}
            Stmt::Line(l) if l.starts_with("ATL_SUMADD_AT(") && count.is_none() => {
                count = Some(l["ATL_SUMADD_AT(".len()..l.len().checked_sub(2)?].to_string());
            }
            Stmt::Line(l) if add.is_none() && l.contains("] += ") => {
                let (target, x) = l.split_once(" += ")?;
                let name = &target[..target.find('[')?];
                if name.is_empty() || !mentions(target, g) || mentions(target, i) {
                    return None;
                }
                add = Some((target.to_string(), name.to_string()));
                texts.push(x.to_string());
            }
            _ => return None,
        }
    }
    let ((target, name), count) = (add?, count?);
    if mentions(&count, i)
        || texts
            .iter()
            .any(|t| mentions(t, &name) || !unit_reads(t, i))
    {
        return None;
    }
    Some((target, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_moves_by_one_element_only_in_its_last_unscaled_index() {
        assert!(unit_reads("x[(-1+c-j+m)] * w[(j)]", "c"));
        assert!(unit_reads(
            "k[(a)*d1 + (b)] * img[(-1+a+i)*d0 + (-1+b+c)]",
            "c"
        ));
        assert!(!unit_reads("img[(-1+a+c)*d0 + (-1+b+j)]", "c"));
        assert!(!unit_reads("x[(2*c+j)]", "c"));
        assert!(!unit_reads("x[d0*(c+j)]", "c"));
        assert!(!unit_reads("b[c*d1 + j]", "c"));
        // A guard is no read; `c1` is another name.
        assert!(unit_reads(
            "((0 <= (c) && (c) < n) ? 2.0 * x[(c1)*d + (c)] : 0.0)",
            "c"
        ));
        assert!(!unit_reads("x[(c1+c)*d]", "c"));
    }

    fn row_loop(nest_body: Vec<Stmt>, rest: Vec<Stmt>) -> Stmt {
        let mut body = vec![
            Stmt::Decl {
                ty: "double",
                name: "acc".into(),
                init: "0.0".into(),
            },
            Stmt::Decl {
                ty: "int",
                name: "h".into(),
                init: "0".into(),
            },
            Stmt::For {
                var: "j".into(),
                lo: "0".into(),
                hi: "m".into(),
                body: nest_body,
            },
        ];
        body.extend(rest);
        Stmt::For {
            var: "c".into(),
            lo: "0".into(),
            hi: "n".into(),
            body,
        }
    }

    #[test]
    fn a_sum_that_reads_the_row_body_stays() {
        let add = |x: &str| {
            vec![
                Stmt::Line(format!("acc += {x};")),
                Stmt::Line("ATL_SUMADD(h);".into()),
            ]
        };
        let rest = vec![Stmt::Line("y[c] = acc;".into())];
        let mut ok = vec![row_loop(add("x[(c+j)] * w[(j)]"), rest.clone())];
        block_rows(&mut ok);
        let Stmt::If { then, .. } = &ok[0] else {
            panic!("{ok:?}")
        };
        assert!(
            matches!(&then[0], Stmt::For { var, .. } if var == "atlblk1_k"),
            "{ok:?}"
        );
        // Reads a buffer the row body writes, reads down a column.
        for x in ["y[(c+j)]", "a[(c)*m + (j)]"] {
            let mut s = vec![row_loop(add(x), rest.clone())];
            let before = s.clone();
            block_rows(&mut s);
            assert_eq!(s, before, "{x}");
        }
    }
}
