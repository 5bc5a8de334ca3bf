//! Printing core programs as ATL text (core forms only, so the output
//! reads back with the same meaning and cost): the inverse of the reader,
//! used by every layer that shows a term, and the `sexp` output format
//! ([`crate::backend::sexp`]).
//!
//! Layout: a form is printed on one line when it fits in `WIDTH`
//! columns, otherwise its head stays on the line and its parts go one per
//! line, indented. Indentation stops growing past `MAX_INDENT` so that
//! deeply nested programs print in linear space.

use super::affine::Affine;
use super::ast::{Expr, ParamKind, Pred, Program, Type};
use std::fmt::Write;

const WIDTH: usize = 96;
const MAX_INDENT: usize = 40;

/// A type as ATL text (`R`, `(tensor n m R)`, `(pair R R)`): how messages
/// name types too.
impl std::fmt::Display for Type {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&type_to_string(self))
    }
}

pub fn type_to_string(t: &Type) -> String {
    match t {
        Type::Real => "R".to_string(),
        Type::Pair(a, b) => format!("(pair {} {})", type_to_string(a), type_to_string(b)),
        Type::Tensor(..) => {
            let mut dims = vec![];
            let mut t = t;
            while let Type::Tensor(d, e) = t {
                dims.push(d.to_string());
                t = e;
            }
            format!("(tensor {} {})", dims.join(" "), type_to_string(t))
        }
    }
}

pub fn pred_to_string(p: &Pred) -> String {
    match p {
        Pred::True => "true".into(),
        Pred::False => "false".into(),
        Pred::Cmp(op, a, b) => format!("({} {} {})", op.name(), a, b),
        Pred::And(ps) if ps.is_empty() => "true".into(),
        Pred::Or(ps) if ps.is_empty() => "false".into(),
        Pred::And(ps) | Pred::Or(ps) => {
            let head = if matches!(p, Pred::And(_)) {
                "and"
            } else {
                "or"
            };
            let parts: Vec<String> = ps.iter().map(pred_to_string).collect();
            format!("({head} {})", parts.join(" "))
        }
        Pred::Exists(i, d, q) => format!("(exists {i} {d} {})", pred_to_string(q)),
        Pred::Rel(r, idx) if idx.is_empty() => format!("({r})"),
        Pred::Rel(r, idx) => {
            let parts: Vec<String> = idx.iter().map(Affine::to_string).collect();
            format!("({r} {})", parts.join(" "))
        }
    }
}

pub fn param_to_string(p: &super::ast::Param) -> String {
    match &p.kind {
        ParamKind::Real(t) => format!("({} {})", p.name, type_to_string(t)),
        ParamKind::Size => format!("({} size)", p.name),
        ParamKind::Relation(dims) => {
            let ds: String = dims.iter().map(|d| format!(" {d}")).collect();
            format!("({} (relation{ds}))", p.name)
        }
    }
}

/// A parameter as it is declared, its storage (`(stored-by S)`) included.
fn declared_param(prog: &Program, p: &super::ast::Param) -> String {
    match (&p.kind, prog.stored.param(p.name)) {
        (ParamKind::Real(t), Some(rel)) => format!("({} {})", p.name, stored_type(t, rel)),
        _ => param_to_string(p),
    }
}

/// `(tensor D ... R (stored-by REL))`.
fn stored_type(t: &Type, rel: crate::symbol::Symbol) -> String {
    let dense = type_to_string(t);
    format!("{} (stored-by {rel}))", &dense[..dense.len() - 1])
}

/// The result type with its stored leaves (`first` is the index of the
/// first leaf of `t`).
fn result_type(prog: &Program, t: &Type, first: usize) -> String {
    match t {
        Type::Pair(a, b) if !prog.stored.ret.is_empty() => {
            let na = super::ast::leaf_count(a);
            format!(
                "(pair {} {})",
                result_type(prog, a, first),
                result_type(prog, b, first + na)
            )
        }
        _ => match prog.stored.leaf(first) {
            Some(rel) => stored_type(t, rel),
            None => type_to_string(t),
        },
    }
}

/// `(fn NAME (PARAMS) -> RET)`: what `atl-egg check` prints.
pub fn signature(prog: &Program) -> String {
    let ps: Vec<String> = prog
        .params
        .iter()
        .map(|p| declared_param(prog, p))
        .collect();
    format!(
        "(fn {} ({}) -> {})",
        prog.name,
        ps.join(" "),
        result_type(prog, &prog.ret, 0)
    )
}

/// The head and the parts of a form, for layout.
enum Part<'a> {
    Text(String),
    Sub(&'a Expr),
}

fn parts(e: &Expr) -> (String, Vec<Part<'_>>) {
    use Part::*;
    match e {
        Expr::Var(x) => (x.to_string(), vec![]),
        Expr::Const(c) => (c.to_string(), vec![]),
        Expr::Add(a, b) => ("+".into(), vec![Sub(a), Sub(b)]),
        Expr::Mul(a, b) => ("*".into(), vec![Sub(a), Sub(b)]),
        Expr::MaxMin(m, a, b) => (m.name().into(), vec![Sub(a), Sub(b)]),
        Expr::IndexReal(a) => ("real".into(), vec![Text(a.to_string())]),
        Expr::Call(f, a) => match f.exponent() {
            Some(k) => (f.name().into(), vec![Sub(a), Text(k.to_string())]),
            None => (f.name().into(), vec![Sub(a)]),
        },
        Expr::Pair(a, b) => ("pair".into(), vec![Sub(a), Sub(b)]),
        Expr::Fst(a) => ("fst".into(), vec![Sub(a)]),
        Expr::Snd(a) => ("snd".into(), vec![Sub(a)]),
        Expr::Gen(i, d, b) => (format!("gen {i} {d}"), vec![Sub(b)]),
        Expr::Sum(i, d, b) => (format!("sum {i} {d}"), vec![Sub(b)]),
        Expr::Reduce(r, i, d, b) => (format!("{} {i} {d}", r.name()), vec![Sub(b)]),
        Expr::Get(a, i) => ("get".into(), vec![Sub(a), Text(i.to_string())]),
        Expr::Iverson(p, a) => (format!("iverson {}", pred_to_string(p)), vec![Sub(a)]),
        Expr::Let(x, a, b) => (format!("let {x}"), vec![Sub(a), Sub(b)]),
    }
}

/// Flat length of `e`, counting at most up to `limit`.
fn flat_len(e: &Expr, limit: usize) -> usize {
    let (head, ps) = parts(e);
    if ps.is_empty() {
        return head.len();
    }
    let mut n = head.len() + 2;
    for p in ps {
        if n > limit {
            return n;
        }
        n += 1 + match p {
            Part::Text(t) => t.len(),
            Part::Sub(x) => flat_len(x, limit - n.min(limit)),
        };
    }
    n
}

fn write_flat(e: &Expr, out: &mut String) {
    let (head, ps) = parts(e);
    if ps.is_empty() {
        out.push_str(&head);
        return;
    }
    out.push('(');
    out.push_str(&head);
    for p in ps {
        out.push(' ');
        match p {
            Part::Text(t) => out.push_str(&t),
            Part::Sub(x) => write_flat(x, out),
        }
    }
    out.push(')');
}

fn write_expr(e: &Expr, indent: usize, out: &mut String) {
    if indent + flat_len(e, WIDTH) <= WIDTH || indent >= MAX_INDENT {
        write_flat(e, out);
        return;
    }
    let (head, ps) = parts(e);
    out.push('(');
    out.push_str(&head);
    let inner = indent + 2;
    for p in ps {
        match p {
            Part::Text(t) => {
                out.push(' ');
                out.push_str(&t);
            }
            Part::Sub(x) => {
                out.push('\n');
                out.push_str(&" ".repeat(inner));
                write_expr(x, inner, out);
            }
        }
    }
    out.push(')');
}

pub fn expr_to_string(e: &Expr) -> String {
    let mut s = String::new();
    write_expr(e, 0, &mut s);
    s
}

/// The program in ATL syntax, core forms only.
pub fn program_to_string(prog: &Program) -> String {
    let prog = &super::readable::readable(prog, &Default::default());
    let ps: Vec<String> = prog
        .params
        .iter()
        .map(|p| declared_param(prog, p))
        .collect();
    let mut out = String::new();
    let _ = write!(out, "(fn {} ({})", prog.name, ps.join(" "));
    if !prog.stored.ret.is_empty() {
        let _ = write!(out, " -> {}", result_type(prog, &prog.ret, 0));
    }
    out.push('\n');
    out.push_str("  ");
    write_expr(&prog.body, 2, &mut out);
    out.push_str(")\n");
    out
}
