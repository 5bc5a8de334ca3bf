//! Printing core programs back to ATL text (core forms only, so the output
//! reads back with the same meaning and cost), and in the paper's notation
//! for people (`pretty`).
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

/// `(fn NAME (PARAMS) -> RET)`: what `atl-egg check` prints.
pub fn signature(prog: &Program) -> String {
    let ps: Vec<String> = prog.params.iter().map(param_to_string).collect();
    format!(
        "(fn {} ({}) -> {})",
        prog.name,
        ps.join(" "),
        type_to_string(&prog.ret)
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
        Expr::Call(f, a) => match f.exponent() {
            Some(k) => (f.name().into(), vec![Sub(a), Text(k.to_string())]),
            None => (f.name().into(), vec![Sub(a)]),
        },
        Expr::Pair(a, b) => ("pair".into(), vec![Sub(a), Sub(b)]),
        Expr::Fst(a) => ("fst".into(), vec![Sub(a)]),
        Expr::Snd(a) => ("snd".into(), vec![Sub(a)]),
        Expr::Gen(i, d, b) => (format!("gen {i} {d}"), vec![Sub(b)]),
        Expr::Sum(i, d, b) => (format!("sum {i} {d}"), vec![Sub(b)]),
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
    let prog = &super::names::readable(prog, &Default::default());
    let ps: Vec<String> = prog.params.iter().map(param_to_string).collect();
    let mut out = String::new();
    let _ = writeln!(out, "(fn {} ({})", prog.name, ps.join(" "));
    out.push_str("  ");
    write_expr(&prog.body, 2, &mut out);
    out.push_str(")\n");
    out
}

// -- the paper's notation ------------------------------------------------------

pub(crate) fn pretty_pred(p: &Pred) -> String {
    match p {
        Pred::True => "true".into(),
        Pred::False => "false".into(),
        Pred::Cmp(op, a, b) => format!("{} {} {}", pretty_aff(a), op.name(), pretty_aff(b)),
        Pred::And(ps) => ps.iter().map(pretty_pred).collect::<Vec<_>>().join(" ∧ "),
        Pred::Or(ps) => format!(
            "({})",
            ps.iter().map(pretty_pred).collect::<Vec<_>>().join(" ∨ ")
        ),
        Pred::Exists(i, d, q) => format!("∃{i}<{}. {}", pretty_aff(d), pretty_pred(q)),
        Pred::Rel(r, idx) => format!(
            "{r}({})",
            idx.iter().map(pretty_aff).collect::<Vec<_>>().join(", ")
        ),
    }
}

pub(crate) fn pretty_aff(a: &Affine) -> String {
    let mut s = String::new();
    for (n, k) in &a.terms {
        let sign = if *k < 0 { "-" } else { "+" };
        let mag = k.unsigned_abs();
        if s.is_empty() {
            if *k < 0 {
                s.push('-');
            }
        } else {
            let _ = write!(s, " {sign} ");
        }
        if mag == 1 {
            let _ = write!(s, "{n}");
        } else {
            let _ = write!(s, "{mag}{n}");
        }
    }
    if s.is_empty() {
        return a.constant.to_string();
    }
    if a.constant > 0 {
        let _ = write!(s, " + {}", a.constant);
    } else if a.constant < 0 {
        let _ = write!(s, " - {}", a.constant.unsigned_abs());
    }
    s
}

fn pretty_expr(e: &Expr, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent.min(MAX_INDENT));
    match e {
        Expr::Var(x) => {
            let _ = write!(out, "{x}");
        }
        Expr::Const(c) => {
            let _ = write!(out, "{c}");
        }
        Expr::Add(a, b) | Expr::Mul(a, b) => {
            out.push('(');
            pretty_expr(a, indent, out);
            out.push_str(if matches!(e, Expr::Add(..)) {
                " + "
            } else {
                " · "
            });
            pretty_expr(b, indent, out);
            out.push(')');
        }
        Expr::Call(f, a) => {
            let _ = write!(out, "{}(", f.name());
            pretty_expr(a, indent, out);
            if let Some(k) = f.exponent() {
                let _ = write!(out, ", {k}");
            }
            out.push(')');
        }
        Expr::Pair(a, b) => {
            out.push('(');
            pretty_expr(a, indent, out);
            out.push_str(", ");
            pretty_expr(b, indent, out);
            out.push(')');
        }
        Expr::Fst(a) | Expr::Snd(a) => {
            out.push_str(if matches!(e, Expr::Fst(_)) {
                "π0 "
            } else {
                "π1 "
            });
            pretty_expr(a, indent, out);
        }
        Expr::Gen(i, d, b) => {
            let _ = write!(out, "⊞[{i}<{}] ", pretty_aff(d));
            pretty_expr(b, indent, out);
        }
        Expr::Sum(i, d, b) => {
            let _ = write!(out, "Σ[{i}<{}] ", pretty_aff(d));
            pretty_expr(b, indent, out);
        }
        Expr::Get(a, i) => {
            let atomic = matches!(**a, Expr::Var(_) | Expr::Get(..));
            if !atomic {
                out.push('(');
            }
            pretty_expr(a, indent, out);
            if !atomic {
                out.push(')');
            }
            let _ = write!(out, "[{}]", pretty_aff(i));
        }
        Expr::Iverson(p, a) => {
            let _ = write!(out, "[{}]·", pretty_pred(p));
            pretty_expr(a, indent, out);
        }
        Expr::Let(x, a, b) => {
            let _ = write!(out, "let {x} = ");
            pretty_expr(a, indent + 4, out);
            let _ = write!(out, " in\n{pad}");
            pretty_expr(b, indent, out);
        }
    }
}

/// The program in the paper's notation (⊞ for gen, Σ, `[p]·e`, `let .. in`).
pub fn program_to_pretty(prog: &Program) -> String {
    let prog = &super::names::readable(prog, &Default::default());
    let ps: Vec<String> = prog.params.iter().map(param_to_string).collect();
    let mut out = format!("{}({}) =\n  ", prog.name, ps.join(", "));
    pretty_expr(&prog.body, 2, &mut out);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use crate::front::parse_program;

    #[test]
    fn print_then_read_is_identity() {
        let src = b"(fn f ((x (tensor n R)) (S (relation n n)) (p (pair R R)))
          (let y (gen i n (* (get x (- i 1)) (fst p)))
            (sum i n (iverson (and (S i i) (exists k 3 (== (* 2 k) i)) (or (< i 2) (>= i (- n 1))))
              (+ (get y i) (pow (get x i) 2.5))))))";
        let p = parse_program(src).unwrap();
        let text = super::program_to_string(&p);
        // binder names are printed readable (the second `i` as `i1`), so the
        // text, not the tree, is the fixed point
        let q = parse_program(text.as_bytes()).unwrap();
        assert_eq!(text, super::program_to_string(&q));
        assert!(text.contains("(sum i1 n"), "{text}");
    }
}
