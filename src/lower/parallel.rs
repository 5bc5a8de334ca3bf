//! Parallel loops (OpenMP), marked on the finished loop IR.
//!
//! A `gen` writes disjoint elements: the loop that stores `(gen i n e)`
//! writes, in iteration `i`, only the `i`-th sub-block of its destination.
//! The lowering records such loops ([`Disjoint`]: the loop's C variable and
//! the buffers its iterations write apart). Here every outermost loop (one
//! not nested in another loop) is checked against what its body writes:
//!
//! * every shared name it writes (a name not declared inside the body) is
//!   one of its disjoint buffers: the loop runs as
//!   `#pragma omp parallel for schedule(guided)`; every element is computed
//!   by the same operations in the same order as serially, so the result
//!   does not depend on the number of threads at all, nor on which thread
//!   takes which iterations. Guided, not static: iterations of unequal work
//!   (the rows of a triangle) and a thread the machine deschedules would
//!   otherwise leave the other threads waiting at the loop's end;
//! * its only shared write is `acc += x` into one scalar (a sum over the
//!   loop's variable): the range is cut into `ATL_CHUNKS` (64) chunks, a number
//!   fixed independently of the threads; each chunk sums its terms into a
//!   local, in parallel, and the chunks' sums are added serially in chunk
//!   order. The result is the serial one up to that reassociation, and the
//!   same for every number of threads;
//! * a slot that lives for one iteration (the lowering records them in
//!   `scratch`: slots allocated while lowering the body, a fused loop's
//!   contracted rows) gets a copy per chunk, allocated only when the loop
//!   is large, there are several threads and the copies fit in
//!   `ATL_SCRATCH_MAX` reals; otherwise the loop runs serially as it is;
//! * a buffer every iteration adds into (`row[k] += x`, an interchanged
//!   column reduction such as a kernel's adjoint `dw[k] += r[i]·x[i+k]`)
//!   is accumulated by each chunk in a zero-filled copy of its own (when
//!   the copies fit, as slots of one iteration do, and writing and adding
//!   them is at most `1 / ATL_COPY_SHARE` of the loop's work: a scatter
//!   `x̄[j] += ...` over the edges of a graph into a vector as long as its
//!   node count runs as written), and the copies are
//!   added to it element by element in chunk order afterwards: the value
//!   is the serial one up to that reassociation, the same for every
//!   number of threads;
//! * anything else (an `exists` search) stays serial.
//!
//! A loop runs in parallel only when its estimated work is at least
//! `ATL_PAR_WORK` statements (an `if` clause evaluated at run time from the
//! loop bounds, see [`work`]): a short loop is not worth a thread team's
//! start-up. The counting build (`ATL_COUNT_OPS`) and a build without
//! OpenMP ignore the pragmas and run every loop serially; the chunked sum
//! then counts the same additions (its first-term flag is shared by the
//! chunks, and combining the chunks' sums is not counted: together they
//! add exactly the terms the serial sum adds).

use super::ir::{Slot, Stmt};
use super::value::V;
use crate::front::affine::Affine;
use std::collections::{HashMap, HashSet};

/// The bound of a parallel sum's chunk loops (the C macro): the number of
/// chunks, fixed whatever the threads.
pub(crate) const CHUNKS: &str = "ATL_CHUNKS";

/// Loops whose iterations write disjoint parts of buffers: the loop's C
/// variable and those buffers' C names.
pub(crate) type Disjoint = HashMap<String, Vec<String>>;

/// The buffers of a place's leaves.
pub(crate) fn buffers(v: &V) -> Vec<String> {
    match v {
        V::Leaf { buf, .. } => vec![buf.clone()],
        V::Pair(a, b) => {
            let mut out = buffers(a);
            out.extend(buffers(b));
            out
        }
        _ => vec![],
    }
}

/// The counting build's macros: they write only its counters and flags,
/// and that build runs serially.
const COUNTING: [&str; 6] = [
    "ATL_ADD",
    "ATL_MUL",
    "ATL_CALL",
    "ATL_SUMADD",
    "ATL_SUMADD_AT",
    "ATL_FIRST_AT_END",
];

/// Mark the outermost loops of `body` that may run in parallel.
pub(super) fn parallelize(
    body: &mut Vec<Stmt>,
    disjoint: &Disjoint,
    scratch: &Disjoint,
    slots: &[Slot],
    dims: &[(String, Affine)],
) {
    let mut next = 0;
    let cx = Context {
        disjoint,
        scratch,
        slots,
        dims,
    };
    mark(body, &cx, &mut next);
}

/// What the lowering knows about the loops and the frame.
struct Context<'a> {
    disjoint: &'a Disjoint,
    scratch: &'a Disjoint,
    slots: &'a [Slot],
    dims: &'a [(String, Affine)],
}

impl Context<'_> {
    /// A slot's number of reals as a C expression over the dimension
    /// locals.
    fn slot_size(&self, name: &str) -> Option<String> {
        let slot = self.slots.iter().find(|s| s.cname == name)?;
        let mut parts = vec!["(int64_t)1".to_string()];
        for d in &slot.dims {
            parts.push(self.dims.iter().find(|(_, a)| a == d)?.0.clone());
        }
        Some(parts.join(" * "))
    }
}

fn mark(ss: &mut Vec<Stmt>, cx: &Context, next: &mut usize) {
    let disjoint = cx.disjoint;
    let old = std::mem::take(ss);
    for s in old {
        match s {
            Stmt::For { var, lo, hi, body } => {
                let shared = shared_writes(&var, &body);
                let rows = disjoint.get(&var).cloned().unwrap_or_default();
                let own = cx.scratch.get(&var).cloned().unwrap_or_default();
                // Slots of one iteration: a copy per chunk.
                let privs: Option<Vec<(String, String)>> = shared
                    .iter()
                    .filter(|w| own.contains(w) && !rows.contains(w))
                    .map(|w| cx.slot_size(w).map(|n| (w.clone(), n)))
                    .collect();
                let Some(privs) = privs else {
                    ss.push(Stmt::For { var, lo, hi, body });
                    continue;
                };
                let breaks = body
                    .iter()
                    .any(|s| matches!(s, Stmt::Line(l) if l.contains("break;")));
                // Shared writes that are not disjoint rows must be sums:
                // into scalars, or into buffers (rows every iteration adds
                // into), which each chunk accumulates in a copy of its own.
                let (accs, buffers): (Vec<String>, Vec<String>) = shared
                    .iter()
                    .filter(|w| !rows.contains(w) && !own.contains(w))
                    .cloned()
                    .partition(|a| !accumulates_into_row(a, &body));
                let sums: Option<Vec<(String, String)>> = buffers
                    .iter()
                    .map(|w| cx.slot_size(w).map(|n| (w.clone(), n)))
                    .collect();
                let Some(sums) = sums else {
                    ss.push(Stmt::For { var, lo, hi, body });
                    continue;
                };
                let parallel = !breaks
                    && (disjoint.contains_key(&var) || !accs.is_empty() || !sums.is_empty())
                    && accs.iter().all(|a| a != "?" && only_accumulates(a, &body));
                if !parallel {
                    ss.push(Stmt::For { var, lo, hi, body });
                } else if !privs.is_empty() || !sums.is_empty() {
                    *next += 1;
                    let lp = Loop { var, lo, hi, body };
                    ss.push(with_scratch(&accs, &privs, &sums, lp, *next));
                } else if accs.is_empty() {
                    *next += 1;
                    let (work, cond) =
                        work_condition(&var, &lo, &hi, &body, format!("atlpar_work{next}"));
                    ss.push(Stmt::Block(vec![
                        work,
                        Stmt::Line(format!("ATL_PARALLEL_FOR({cond})")),
                        Stmt::For { var, lo, hi, body },
                    ]));
                } else {
                    // The SIMD pragma of a one-level sum moves into the chunk.
                    let simd = matches!(
                        (ss.last(), accs.as_slice()),
                        (Some(Stmt::Line(l)), [acc]) if *l == format!("ATL_SIMD_REDUCE({acc})")
                    );
                    if simd {
                        ss.pop();
                    }
                    *next += 1;
                    let lp = Loop { var, lo, hi, body };
                    ss.push(chunked_sums(&accs, &[], 0, lp, simd, *next));
                }
            }
            Stmt::If {
                cond,
                mut then,
                mut els,
            } => {
                mark(&mut then, cx, next);
                mark(&mut els, cx, next);
                ss.push(Stmt::If { cond, then, els });
            }
            Stmt::Block(mut body) => {
                mark(&mut body, cx, next);
                ss.push(Stmt::Block(body));
            }
            s => ss.push(s),
        }
    }
}

/// A loop taken apart.
struct Loop {
    var: String,
    lo: String,
    hi: String,
    body: Vec<Stmt>,
}

/// A loop whose iterations use the slots `privs` (name, size) only for
/// themselves: when it is large, there are several threads and the copies
/// fit in `ATL_SCRATCH_MAX` reals, in chunks each with its own copy of
/// those slots (and its own partial sums of `accs`); otherwise as it is.
///
/// The buffers `sums` (name, size) are rows every iteration adds into: each
/// chunk adds into its own copy, zero filled, and the copies are added to
/// the buffer element by element in chunk order afterwards (a
/// reassociation, the same for every number of threads). The counting
/// build runs the loop as it is.
fn with_scratch(
    accs: &[String],
    privs: &[(String, String)],
    sums: &[(String, String)],
    lp: Loop,
    k: usize,
) -> Stmt {
    let per_chunk = format!("atlpar_n{k}");
    let scratch = format!("atlpar_scratch{k}");
    let privs: Vec<(String, String)> = privs.iter().chain(sums).cloned().collect();
    let privs = privs.as_slice();
    let total: Vec<&str> = privs.iter().map(|(_, n)| n.as_str()).collect();
    let work_name = format!("atlpar_scratch_work{k}");
    let (work, mut cond) = work_condition(&lp.var, &lp.lo, &lp.hi, &lp.body, work_name.clone());
    if !sums.is_empty() {
        // The zero-filled copies are written once and added once more: a
        // loop whose work they would outweigh (a scatter into a vector as
        // long as its loop) runs as written.
        let copied: Vec<&str> = sums.iter().map(|(_, n)| n.as_str()).collect();
        cond = format!(
            "{cond} && (double)({}) * ATL_CHUNKS * ATL_COPY_SHARE <= {work_name}",
            copied.join(" + ")
        );
    }
    let serial = Stmt::For {
        var: lp.var.clone(),
        lo: lp.lo.clone(),
        hi: lp.hi.clone(),
        body: lp.body.clone(),
    };
    let mut parallel = chunked_sums(accs, privs, sums.len(), lp, false, k);
    if let Stmt::Block(then) = &mut parallel {
        // Each copy added to its buffer, chunk after chunk.
        let mut offset = String::from("0");
        for (slot, size) in &privs[..privs.len() - sums.len()] {
            let _ = slot;
            offset = format!("{offset} + {size}");
        }
        for (buf, size) in sums {
            then.push(Stmt::Line(format!(
                "for (int64_t atlpar_c = 0; atlpar_c < ATL_CHUNKS; atlpar_c++) {{ const double *atlpar_p = {scratch} + atlpar_c * {per_chunk} + {offset}; for (int64_t atlpar_z = 0; atlpar_z < {size}; atlpar_z++) {buf}[atlpar_z] += atlpar_p[atlpar_z]; }}"
            )));
            offset = format!("{offset} + {size}");
        }
    }
    Stmt::Block(vec![
        work,
        Stmt::Decl {
            ty: "const int64_t",
            name: per_chunk.clone(),
            init: total.join(" + "),
        },
        Stmt::Line(format!(
            "double *{scratch} = (ATL_CHUNK_SCRATCH && {per_chunk} <= ATL_SCRATCH_MAX / ATL_CHUNKS && {cond}) ? (double *)malloc((size_t)({per_chunk} * ATL_CHUNKS) * sizeof(double)) : NULL;"
        )),
        Stmt::If {
            cond: format!("{scratch} != NULL"),
            then: vec![parallel, Stmt::Line(format!("free({scratch});"))],
            els: vec![serial],
        },
    ])
}

/// A loop whose iterations add into the scalars `accs` (and write only
/// disjoint rows and the slots `privs` otherwise), in `ATL_CHUNKS` chunks
/// run in parallel, each with its own partial sums (and copies of the
/// slots), the sums then added in chunk order.
fn chunked_sums(
    accs: &[String],
    privs: &[(String, String)],
    zeroed: usize,
    lp: Loop,
    simd: bool,
    k: usize,
) -> Stmt {
    let Loop { var, lo, hi, body } = lp;
    let name = |what: &str| format!("atlpar_{what}{k}");
    let (from, len, c, combine) = (name("lo"), name("len"), name("c"), name("k"));
    let (a, b) = (name("a"), name("b"));
    let mut locals: Vec<(String, String)> = accs
        .iter()
        .enumerate()
        .map(|(j, acc)| (acc.clone(), format!("atlpar_acc{k}_{j}")))
        .collect();
    let own: Vec<(String, String)> = privs
        .iter()
        .enumerate()
        .map(|(j, (slot, _))| (slot.clone(), format!("atlpar_slot{k}_{j}")))
        .collect();
    locals.extend(own.iter().cloned());
    let parts = |j: usize| format!("atlpar_parts{k}_{j}");
    let body: Vec<Stmt> = body.iter().map(|s| rename_stmt(s, &locals)).collect();
    locals.truncate(accs.len());
    let (work, cond) = work_condition(&var, &lo, &hi, &body, name("work"));
    let int = |name: &str, init: String| Stmt::Decl {
        ty: "const int64_t",
        name: name.to_string(),
        init,
    };
    let mut chunk = vec![
        int(&a, format!("{from} + atlh_chunk({len}, {c})")),
        int(&b, format!("{from} + atlh_chunk({len}, {c} + 1)")),
    ];
    // Each chunk's copies of the slots, one after the other.
    let mut offset = format!("atlpar_scratch{k} + {c} * atlpar_n{k}");
    for (j, ((_, local), (_, size))) in own.iter().zip(privs).enumerate() {
        chunk.push(Stmt::Line(format!("double *const {local} = {offset};")));
        if j + zeroed >= privs.len() {
            // A copy of a buffer the iterations add into.
            chunk.push(Stmt::Line(format!(
                "for (int64_t atlpar_z = 0; atlpar_z < {size}; atlpar_z++) {local}[atlpar_z] = 0.0;"
            )));
        }
        offset = format!("{local} + {size}");
    }
    for (_, local) in &locals {
        chunk.push(Stmt::Decl {
            ty: "double",
            name: local.clone(),
            init: "0.0".into(),
        });
    }
    if simd {
        chunk.push(Stmt::Line(format!("ATL_SIMD_REDUCE({})", locals[0].1)));
    }
    chunk.push(Stmt::For {
        var,
        lo: a,
        hi: b,
        body,
    });
    let mut then = vec![];
    let mut sums = vec![];
    for (j, (acc, local)) in locals.iter().enumerate() {
        chunk.push(Stmt::Line(format!("{}[{c}] = {local};", parts(j))));
        then.push(Stmt::Line(format!("double {}[ATL_CHUNKS];", parts(j))));
        sums.push(Stmt::Line(format!("{acc} += {}[{combine}];", parts(j))));
    }
    then.extend([
        int(&from, lo),
        int(&len, format!("atlh_max({hi} - {from}, 0)")),
        work,
        Stmt::Line(format!("ATL_PARALLEL_FOR({cond})")),
        Stmt::Chunks {
            var: c,
            body: chunk,
        },
        Stmt::Chunks {
            var: combine,
            body: sums,
        },
    ]);
    Stmt::Block(then)
}

/// The C condition under which a loop is worth running in parallel, and
/// the declaration of the local `name` it reads: the loop's estimated work,
/// computed before the pragma (an OpenMP clause holding the estimate itself,
/// with a relation lookup's compound literal, crashes GCC 12).
fn work_condition(var: &str, lo: &str, hi: &str, body: &[Stmt], name: String) -> (Stmt, String) {
    let looped = [Stmt::For {
        var: var.to_string(),
        lo: lo.to_string(),
        hi: hi.to_string(),
        body: body.to_vec(),
    }];
    let cond = format!("{name} >= ATL_PAR_WORK");
    let decl = Stmt::Decl {
        ty: "const double",
        name,
        init: work(&looped, &mut HashMap::new()),
    };
    (decl, cond)
}

/// Longest substituted expression kept in a work estimate; a longer one
/// counts as one iteration.
const MAX_EXPR: usize = 2000;

/// An estimate of the statements a block executes, as a C `double`
/// expression over the names in scope before it: a loop counts its trip
/// count times its body, with its variable taken at the middle of its range
/// in inner bounds (a triangular loop counts half), and an inner
/// `int64_t` local by its definition; a bound that still mentions a name of
/// the block counts one iteration. `subst` maps names of the block to
/// their expressions.
fn work(ss: &[Stmt], subst: &mut HashMap<String, String>) -> String {
    let mut statements = 0usize;
    let mut terms = vec![];
    for s in ss {
        match s {
            Stmt::Line(_) => statements += 1,
            Stmt::Decl { ty, name, init } => {
                statements += 1;
                if ty.ends_with("int64_t") {
                    let e = substitute(init, subst);
                    subst.insert(name.clone(), format!("({e})"));
                }
            }
            Stmt::For { var, lo, hi, body } => {
                let (lo, hi) = (substitute(lo, subst), substitute(hi, subst));
                let mut declared = HashSet::new();
                declarations(body, &mut declared);
                let known =
                    |e: &str| e.len() <= MAX_EXPR && identifiers(e).all(|w| !declared.contains(w));
                let (trip, mid) = if known(&lo) && known(&hi) {
                    (
                        format!("atlh_trip({lo}, {hi})"),
                        format!("atlh_mid({lo}, {hi})"),
                    )
                } else {
                    ("1.0".to_string(), "0".to_string())
                };
                subst.insert(var.clone(), mid);
                terms.push(format!("{trip} * ({})", work(body, subst)));
            }
            Stmt::If { then, els, .. } => {
                statements += 1;
                terms.push(work(then, subst));
                terms.push(work(els, subst));
            }
            Stmt::Block(body) => {
                statements += 1;
                terms.push(work(body, subst));
            }
            Stmt::Chunks { var, body } => {
                subst.insert(var.clone(), format!("atlh_mid(0, {CHUNKS})"));
                terms.push(format!("atlh_trip(0, {CHUNKS}) * ({})", work(body, subst)));
            }
        }
    }
    let mut e = format!("{statements}.0");
    for t in terms {
        e = format!("{e} + {t}");
    }
    e
}

/// The identifiers of a C expression or statement.
fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
}

/// `text` with every identifier in `subst` replaced by its expression.
fn substitute(text: &str, subst: &HashMap<String, String>) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(word);
        } else {
            out.push_str(subst.get(word.as_str()).unwrap_or(word));
        }
        word.clear();
    };
    for ch in text.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            word.push(ch);
        } else {
            flush(&mut word, &mut out);
            out.push(ch);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// `s` with identifiers renamed (pairs `from`, `to`).
fn rename_stmt(s: &Stmt, pairs: &[(String, String)]) -> Stmt {
    let subst: HashMap<String, String> = pairs.iter().cloned().collect();
    let r = |t: &str| substitute(t, &subst);
    let rs = |ss: &[Stmt]| ss.iter().map(|s| rename_stmt(s, pairs)).collect();
    match s {
        Stmt::Line(l) => Stmt::Line(r(l)),
        Stmt::Decl { ty, name, init } => Stmt::Decl {
            ty,
            name: r(name),
            init: r(init),
        },
        Stmt::For { var, lo, hi, body } => Stmt::For {
            var: r(var),
            lo: r(lo),
            hi: r(hi),
            body: rs(body),
        },
        Stmt::If { cond, then, els } => Stmt::If {
            cond: r(cond),
            then: rs(then),
            els: rs(els),
        },
        Stmt::Block(body) => Stmt::Block(rs(body)),
        Stmt::Chunks { var, body } => Stmt::Chunks {
            var: r(var),
            body: rs(body),
        },
    }
}

/// The names a block declares (locals, loop variables, first-term flags).
fn declarations(ss: &[Stmt], out: &mut HashSet<String>) {
    for s in ss {
        match s {
            Stmt::Decl { name, .. } => {
                out.insert(name.clone());
            }
            Stmt::Line(l) => {
                if let Some(rest) = l.strip_prefix("ATL_FIRST_AT(") {
                    out.insert(rest.split(',').next().unwrap_or("").trim().to_string());
                }
                // A local array `double NAME[N];`, a pointer `double *const NAME = ...;`.
                if let Some(rest) = l.strip_prefix("double *const ") {
                    if let Some((name, _)) = rest.split_once(' ') {
                        out.insert(name.to_string());
                    }
                } else if let Some(rest) = l.strip_prefix("double ") {
                    if let Some((name, _)) = rest.split_once('[') {
                        out.insert(name.to_string());
                    }
                }
            }
            Stmt::For { var, body, .. } => {
                out.insert(var.clone());
                declarations(body, out);
            }
            Stmt::If { then, els, .. } => {
                declarations(then, out);
                declarations(els, out);
            }
            Stmt::Block(body) => declarations(body, out),
            Stmt::Chunks { var, body } => {
                out.insert(var.clone());
                declarations(body, out);
            }
        }
    }
}

/// What one piece of a C statement writes: `Some(name)` for an assignment
/// `name = ...`, `name[...] += ...`; `None` for no write (a counting macro,
/// a pragma, a condition, `break`); `Some("?")`, which no loop may write,
/// for anything not recognized.
fn piece_write(piece: &str) -> Option<String> {
    let p = piece.trim();
    if p.is_empty()
        || p == "break"
        || p.starts_with("if (")
        || p.starts_with("ATL_SIMD_REDUCE(")
        || p.starts_with("double ")
    {
        return None;
    }
    let end = p
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(p.len());
    let name = &p[..end];
    let mut rest = p[end..].trim_start();
    // A prefetch only reads (its locals are its own block's).
    if rest.starts_with('(')
        && (COUNTING.contains(&name) || name == "ATL_FIRST_AT" || name == "ATL_PREFETCH_ROW")
    {
        return None;
    }
    if name == "atlh_gemm" && rest.starts_with('(') {
        // The contraction kernel writes its first argument's buffer.
        let arg = rest[1..].trim_start();
        let end = arg
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(arg.len());
        return Some(if end == 0 { "?" } else { &arg[..end] }.to_string());
    }
    if rest.starts_with('[') {
        let mut depth = 0;
        let mut close = None;
        for (k, ch) in rest.char_indices() {
            match ch {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(k);
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = match close {
            Some(k) => rest[k + 1..].trim_start(),
            None => return Some("?".into()),
        };
    }
    let assigns = (rest.starts_with('=') && !rest.starts_with("=="))
        || ["+=", "-=", "*=", "/="]
            .iter()
            .any(|op| rest.starts_with(op));
    Some(if !name.is_empty() && assigns {
        name.to_string()
    } else {
        "?".to_string()
    })
}

/// The names a block writes.
fn writes(ss: &[Stmt], out: &mut Vec<String>) {
    for s in ss {
        match s {
            Stmt::Line(l) => {
                for piece in l.split([';', '{', '}']) {
                    if let Some(w) = piece_write(piece) {
                        if !out.contains(&w) {
                            out.push(w);
                        }
                    }
                }
            }
            Stmt::Decl { .. } => {}
            Stmt::For { body, .. } | Stmt::Block(body) | Stmt::Chunks { body, .. } => {
                writes(body, out)
            }
            Stmt::If { then, els, .. } => {
                writes(then, out);
                writes(els, out);
            }
        }
    }
}

/// The names the loop over `var` writes that are not its own (declared
/// outside its body), in first-write order.
fn shared_writes(var: &str, body: &[Stmt]) -> Vec<String> {
    let mut declared = HashSet::from([var.to_string()]);
    declarations(body, &mut declared);
    let mut w = vec![];
    writes(body, &mut w);
    w.retain(|n| !declared.contains(n));
    w
}

/// Whether every write of `acc` in `ss` is `acc += ...;`, and nothing else
/// reads it.
/// Does `ss` mention the buffer `buf` only in statements `buf[...] += ...;`
/// (one mention each, at the start), and at least once?
fn accumulates_into_row(buf: &str, ss: &[Stmt]) -> bool {
    let mut seen = false;
    let ok = rows_only(buf, ss, &mut seen);
    ok && seen
}

fn rows_only(buf: &str, ss: &[Stmt], seen: &mut bool) -> bool {
    let free = |t: &str| identifiers(t).all(|w| w != buf);
    ss.iter().all(|s| match s {
        Stmt::Line(l) => {
            // a prefetch of the row only reads (and follows the row to a
            // chunk's copy)
            if free(l) || l.starts_with("ATL_PREFETCH_ROW(") {
                return true;
            }
            let mut pieces = l.split(';').filter(|p| !p.trim().is_empty());
            let one = pieces.next().map(str::trim);
            let ok = pieces.next().is_none()
                && one.is_some_and(|p| {
                    p.starts_with(&format!("{buf}["))
                        && identifiers(p).filter(|w| *w == buf).count() == 1
                        && p.contains("] += ")
                        && !p.contains('{')
                });
            *seen |= ok;
            ok
        }
        Stmt::Decl { init, .. } => free(init),
        Stmt::For { lo, hi, body, .. } => free(lo) && free(hi) && rows_only(buf, body, seen),
        Stmt::If { cond, then, els } => {
            free(cond) && rows_only(buf, then, seen) && rows_only(buf, els, seen)
        }
        Stmt::Block(body) | Stmt::Chunks { body, .. } => rows_only(buf, body, seen),
    })
}

fn only_accumulates(acc: &str, ss: &[Stmt]) -> bool {
    let ok_line = |l: &str| {
        let mentions = identifiers(l).any(|w| w == acc);
        !mentions
            || l.starts_with(&format!("{acc} += "))
                && identifiers(l).filter(|w| *w == acc).count() == 1
            || *l == format!("ATL_SIMD_REDUCE({acc})")
    };
    ss.iter().all(|s| match s {
        Stmt::Line(l) => ok_line(l),
        Stmt::Decl { init, .. } => identifiers(init).all(|w| w != acc),
        Stmt::For { lo, hi, body, .. } => {
            identifiers(lo).chain(identifiers(hi)).all(|w| w != acc) && only_accumulates(acc, body)
        }
        Stmt::If { cond, then, els } => {
            identifiers(cond).all(|w| w != acc)
                && only_accumulates(acc, then)
                && only_accumulates(acc, els)
        }
        Stmt::Block(body) | Stmt::Chunks { body, .. } => only_accumulates(acc, body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Stmt {
        Stmt::Line(s.into())
    }

    #[test]
    fn writes_are_read_from_assignments_only() {
        assert_eq!(
            piece_write("t6_out[i7*d2 + k8] = 0.0"),
            Some("t6_out".into())
        );
        assert_eq!(piece_write("acc3 += m4"), Some("acc3".into()));
        assert_eq!(piece_write("ATL_SUMADD(h9)"), None);
        assert_eq!(piece_write("ATL_FIRST_AT(h9, d2)"), None);
        assert_eq!(piece_write("if (c2)"), None);
        assert_eq!(piece_write("something odd"), Some("?".into()));
        // The contraction kernel writes its first argument.
        assert_eq!(
            piece_write("atlh_gemm(t7_out + i9_b*d3, d2, 1, d0, d2, d1, t4_A, d1, 1, t5_X, d2, 1)"),
            Some("t7_out".into())
        );
        assert_eq!(piece_write("atlh_gemm((t7_out), 1)"), Some("?".into()));
    }

    #[test]
    fn a_scatter_adds_into_copies_only_when_its_work_outweighs_them() {
        // x̄[j] += r[i] over a graph's edges: the copies of x̄ (one per
        // chunk) are made only when the loop's work is ATL_COPY_SHARE times
        // their size.
        let body = vec![line("t1_xbar[t2_col[e3]] += t4_r[t5_row[e3]];")];
        let n = Affine::var(crate::symbol::Symbol::from("n"));
        let slots = [Slot {
            cname: "t1_xbar".into(),
            dims: vec![n.clone()],
        }];
        let dims = [("d0".to_string(), n)];
        let mut ss = vec![Stmt::For {
            var: "e3".into(),
            lo: "0".into(),
            hi: "d1".into(),
            body,
        }];
        parallelize(&mut ss, &Disjoint::new(), &Disjoint::new(), &slots, &dims);
        let Stmt::Block(then) = &ss[0] else {
            panic!("not marked: {ss:?}")
        };
        let alloc = then
            .iter()
            .find_map(|s| match s {
                Stmt::Line(l) if l.contains("malloc") => Some(l.clone()),
                _ => None,
            })
            .expect("the copies' allocation");
        assert!(
            alloc.contains(
                "(double)((int64_t)1 * d0) * ATL_CHUNKS * ATL_COPY_SHARE <= atlpar_scratch_work1"
            ),
            "{alloc}"
        );
    }

    #[test]
    fn a_row_reused_by_every_iteration_stays_serial() {
        let body = vec![line("b3_row[k4] = 0.0;"), line("t1_out[i2] = b3_row[0];")];
        let disjoint = Disjoint::from([("i2".to_string(), vec!["t1_out".to_string()])]);
        let mut ss = vec![Stmt::For {
            var: "i2".into(),
            lo: "0".into(),
            hi: "d0".into(),
            body,
        }];
        parallelize(&mut ss, &disjoint, &Disjoint::new(), &[], &[]);
        assert!(matches!(ss[0], Stmt::For { .. }));
    }

    #[test]
    fn a_disjoint_gen_runs_in_parallel_when_large() {
        let body = vec![
            Stmt::Decl {
                ty: "const double",
                name: "m5".into(),
                init: "t3_x[i2] * 2.0".into(),
            },
            line("t1_out[i2] = m5;"),
        ];
        let disjoint = Disjoint::from([("i2".to_string(), vec!["t1_out".to_string()])]);
        let mut ss = vec![Stmt::For {
            var: "i2".into(),
            lo: "0".into(),
            hi: "d0".into(),
            body,
        }];
        parallelize(&mut ss, &disjoint, &Disjoint::new(), &[], &[]);
        let Stmt::Block(then) = &ss[0] else {
            panic!("not marked: {ss:?}")
        };
        assert_eq!(
            then[0],
            Stmt::Decl {
                ty: "const double",
                name: "atlpar_work1".into(),
                init: "0.0 + atlh_trip(0, d0) * (2.0)".into(),
            }
        );
        assert_eq!(
            then[1],
            line("ATL_PARALLEL_FOR(atlpar_work1 >= ATL_PAR_WORK)")
        );
    }

    #[test]
    fn a_scalar_sum_is_chunked() {
        let body = vec![line("acc3 += t1_x[i2];"), line("ATL_SUMADD(h4);")];
        let mut ss = vec![
            line("ATL_SIMD_REDUCE(acc3)"),
            Stmt::For {
                var: "i2".into(),
                lo: "0".into(),
                hi: "d0".into(),
                body,
            },
        ];
        parallelize(&mut ss, &Disjoint::new(), &Disjoint::new(), &[], &[]);
        assert_eq!(ss.len(), 1);
        let text = format!("{ss:?}");
        assert!(text.contains("atlpar_acc1_0 += t1_x[i2];"), "{text}");
        assert!(
            text.contains("acc3 += atlpar_parts1_0[atlpar_k1];"),
            "{text}"
        );
        assert!(text.contains("ATL_SIMD_REDUCE(atlpar_acc1_0)"), "{text}");
    }
}
