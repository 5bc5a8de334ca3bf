//! Programs in the paper's notation, laid out for reading (`--format
//! pretty`): one `let` binding a line, sums and products broken one term a
//! line when they do not fit, the body of `⊞`/`Σ`/`[p]·` indented under it.
//!
//! Notation: types are `R`, `[n]T` for `(tensor n T)` and `(A × B)` for
//! pairs; `⊞[i<n] e` is `(gen i n e)`, `Σ[i<n] e` is `(sum i n e)`,
//! `[p]·e` is `(iverson p e)`, `x[i]` is `(get x i)`, `π0(e)`/`π1(e)` are
//! `fst`/`snd`, `(a, b)` is a pair, `·` is multiplication. Sums and products
//! are printed as flat chains (`a + b + c`) whatever their nesting (the
//! notation is for people; `--format sexp` keeps the exact tree). A binder
//! form (`⊞`, `Σ`, `[p]·`, `let`) extends as far right as it can, so it is
//! parenthesized when it is a term of a chain.

use crate::front::affine::Affine;
use crate::front::ast::{Expr, Param, ParamKind, Pred, Program, Type};
use std::fmt::Write;

/// Lines are broken to stay within this many columns where possible.
const WIDTH: usize = 88;
/// Indentation stops growing here, so deep programs print in linear space.
const MAX_INDENT: usize = 48;

/// A predicate in the paper's notation: `i < n ∧ S(i, j)`, `∃k<3. ...`.
fn pretty_pred(p: &Pred) -> String {
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

/// An index expression in the paper's notation: `2i - j + 1`.
fn pretty_aff(a: &Affine) -> String {
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

/// The head of the loop `e` binding `i` over `[0, d)`: `⊞[i<d]` for a
/// `gen`, `Σ[i<d]` for a `sum`.
fn loop_head(e: &Expr, i: crate::symbol::Symbol, d: &Affine) -> String {
    let sym = match e {
        Expr::Gen(..) => "⊞",
        Expr::Reduce(r, ..) => r.name(),
        _ => "Σ",
    };
    format!("{sym}[{i}<{}]", pretty_aff(d))
}

/// The opening of a projection: `π0(` for `fst`, `π1(` for `snd`.
fn projection(e: &Expr) -> &'static str {
    if matches!(e, Expr::Fst(_)) {
        "π0("
    } else {
        "π1("
    }
}

/// A type in the paper's notation: `R`, `[n][m]R`, `(A × B)`.
pub fn type_str(t: &Type) -> String {
    match t {
        Type::Real => "R".into(),
        Type::Tensor(d, t) => format!("[{}]{}", pretty_aff(d), type_str(t)),
        Type::Pair(a, b) => format!("({} × {})", type_str(a), type_str(b)),
    }
}

/// A parameter: `x : [n]R`, `n : size`, `E : relation [n][n]`.
fn param_str(p: &Param) -> String {
    match &p.kind {
        ParamKind::Real(t) => format!("{} : {}", p.name, type_str(t)),
        ParamKind::Size => format!("{} : size", p.name),
        ParamKind::Relation(dims) => {
            let ds: String = dims
                .iter()
                .map(|d| format!("[{}]", pretty_aff(d)))
                .collect();
            format!("{} : relation {ds}", p.name)
        }
    }
}

/// The result type, a leaf stored by a relation's pattern marked
/// `stored by S` (`first`: the index of the first leaf of `t`).
fn ret_str(prog: &Program, t: &Type, first: usize) -> String {
    match (t, prog.stored.ret.is_empty()) {
        (Type::Pair(a, b), false) => {
            let na = crate::front::ast::leaf_count(a);
            format!(
                "({} × {})",
                ret_str(prog, a, first),
                ret_str(prog, b, first + na)
            )
        }
        _ => match prog.stored.leaf(first) {
            Some(rel) => format!("{} stored by {rel}", type_str(t)),
            None => type_str(t),
        },
    }
}

/// The program as `name(params) -> type =` and its body, indented by two.
pub fn program(prog: &Program) -> String {
    let ps: Vec<String> = prog
        .params
        .iter()
        .map(|p| match prog.stored.param(p.name) {
            Some(rel) => format!("{} stored by {rel}", param_str(p)),
            None => param_str(p),
        })
        .collect();
    let ret = ret_str(prog, &prog.ret, 0);
    let one_line = format!("{}({}) -> {ret} =", prog.name, ps.join(", "));
    let mut out = if one_line.chars().count() <= WIDTH {
        one_line
    } else {
        // one parameter a line
        format!("{}(\n    {}\n) -> {ret} =", prog.name, ps.join(",\n    "))
    };
    out.push_str("\n  ");
    layout(&prog.body, 2, &mut out);
    out.push('\n');
    out
}

/// The expression alone, laid out from column 0.
pub fn expr(e: &Expr) -> String {
    let mut out = String::new();
    layout(e, 0, &mut out);
    out
}

fn is_open(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Gen(..) | Expr::Sum(..) | Expr::Reduce(..) | Expr::Iverson(..) | Expr::Let(..)
    )
}

/// The terms of a chain of `+` (or of `·`).
fn chain(e: &Expr, add: bool) -> Vec<&Expr> {
    let mut out = vec![];
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        match (x, add) {
            (Expr::Add(a, b), true) | (Expr::Mul(a, b), false) => {
                stack.push(b);
                stack.push(a);
            }
            _ => out.push(x),
        }
    }
    out
}

/// The one-line form of `e`, or `None` when it is longer than `limit`
/// (or holds a `let`, which always takes lines of its own).
fn flat(e: &Expr, limit: usize) -> Option<String> {
    let mut s = String::new();
    if write_flat(e, &mut s, limit) {
        Some(s)
    } else {
        None
    }
}

/// Appends the one-line form of `e`; false as soon as `out` exceeds `limit`.
fn write_flat(e: &Expr, out: &mut String, limit: usize) -> bool {
    if out.chars().count() > limit {
        return false;
    }
    let ok = match e {
        Expr::Var(x) => {
            out.push_str(x.as_str());
            true
        }
        Expr::Const(c) => {
            out.push_str(&c.to_string());
            true
        }
        Expr::Add(..) | Expr::Mul(..) => {
            let add = matches!(e, Expr::Add(..));
            let terms = chain(e, add);
            let mut ok = true;
            for (k, t) in terms.iter().enumerate() {
                if k > 0 {
                    out.push_str(if add { " + " } else { " · " });
                }
                let paren = is_open(t) || (!add && matches!(t, Expr::Add(..)));
                if paren {
                    out.push('(');
                }
                ok = ok && write_flat(t, out, limit);
                if paren {
                    out.push(')');
                }
                if !ok {
                    break;
                }
            }
            ok
        }
        Expr::Call(f, a) => {
            out.push_str(f.name());
            out.push('(');
            let ok = write_flat(a, out, limit);
            if let Some(k) = f.exponent() {
                out.push_str(&format!(", {k}"));
            }
            out.push(')');
            ok
        }
        Expr::Pair(a, b) | Expr::MaxMin(_, a, b) => {
            if let Expr::MaxMin(m, ..) = e {
                out.push_str(m.name());
            }
            out.push('(');
            let ok = write_flat(a, out, limit) && {
                out.push_str(", ");
                write_flat(b, out, limit)
            };
            out.push(')');
            ok
        }
        Expr::IndexReal(a) => {
            out.push_str(&format!("real({})", pretty_aff(a)));
            true
        }
        Expr::Fst(a) | Expr::Snd(a) => {
            out.push_str(projection(e));
            let ok = write_flat(a, out, limit);
            out.push(')');
            ok
        }
        Expr::Gen(i, d, b) | Expr::Sum(i, d, b) | Expr::Reduce(_, i, d, b) => {
            out.push_str(&loop_head(e, *i, d));
            out.push(' ');
            write_flat(b, out, limit)
        }
        Expr::Iverson(p, a) => {
            out.push_str(&format!("[{}]·", pretty_pred(p)));
            let paren = matches!(**a, Expr::Add(..));
            if paren {
                out.push('(');
            }
            let ok = write_flat(a, out, limit);
            if paren {
                out.push(')');
            }
            ok
        }
        Expr::Get(a, i) => {
            let atomic = matches!(**a, Expr::Var(_) | Expr::Get(..));
            if !atomic {
                out.push('(');
            }
            let ok = write_flat(a, out, limit);
            if !atomic {
                out.push(')');
            }
            out.push_str(&format!("[{}]", pretty_aff(i)));
            ok
        }
        Expr::Let(..) => false,
    };
    ok && out.chars().count() <= limit
}

fn newline(indent: usize, out: &mut String) {
    out.push('\n');
    out.push_str(&" ".repeat(indent.min(MAX_INDENT)));
}

/// Writes `e` starting at column `indent` (the cursor is already there).
fn layout(e: &Expr, indent: usize, out: &mut String) {
    let room = WIDTH.saturating_sub(indent.min(MAX_INDENT)).max(24);
    if let Some(s) = flat(e, room) {
        out.push_str(&s);
        return;
    }
    let inner = indent + 2;
    match e {
        Expr::Let(x, a, b) => {
            // `let x = VALUE in` when it fits, else the value on the lines
            // below, indented
            let head = format!("let {x} =");
            out.push_str(&head);
            let room = WIDTH.saturating_sub(indent.min(MAX_INDENT) + head.chars().count() + 4);
            match flat(a, room) {
                Some(s) => {
                    out.push(' ');
                    out.push_str(&s);
                }
                None => {
                    newline(indent + 4, out);
                    layout(a, indent + 4, out);
                }
            }
            out.push_str(" in");
            newline(indent, out);
            layout(b, indent, out);
        }
        Expr::Add(..) | Expr::Mul(..) => {
            let add = matches!(e, Expr::Add(..));
            for (k, t) in chain(e, add).into_iter().enumerate() {
                if k > 0 {
                    newline(indent, out);
                    out.push_str(if add { "+ " } else { "· " });
                }
                let paren = is_open(t) || (!add && matches!(t, Expr::Add(..)));
                let at = indent + 2 + paren as usize;
                if paren {
                    out.push('(');
                }
                layout(t, at, out);
                if paren {
                    out.push(')');
                }
            }
        }
        Expr::Gen(i, d, b) | Expr::Sum(i, d, b) | Expr::Reduce(_, i, d, b) => {
            out.push_str(&loop_head(e, *i, d));
            newline(inner, out);
            layout(b, inner, out);
        }
        Expr::Iverson(p, a) => {
            out.push_str(&format!("[{}]·", pretty_pred(p)));
            newline(inner, out);
            let paren = matches!(**a, Expr::Add(..));
            if paren {
                out.push('(');
            }
            layout(a, inner + paren as usize, out);
            if paren {
                out.push(')');
            }
        }
        Expr::Pair(a, b) | Expr::MaxMin(_, a, b) => {
            let head = match e {
                Expr::MaxMin(m, ..) => m.name(),
                _ => "",
            };
            out.push_str(head);
            out.push('(');
            let at = indent + head.len() + 1;
            layout(a, at, out);
            out.push(',');
            newline(at, out);
            layout(b, at, out);
            out.push(')');
        }
        Expr::Call(f, a) => {
            out.push_str(f.name());
            out.push('(');
            layout(a, indent + f.name().len() + 1, out);
            if let Some(k) = f.exponent() {
                out.push_str(&format!(", {k}"));
            }
            out.push(')');
        }
        Expr::Fst(a) | Expr::Snd(a) => {
            out.push_str(projection(e));
            layout(a, indent + 3, out);
            out.push(')');
        }
        Expr::Get(a, i) => {
            out.push('(');
            layout(a, indent + 1, out);
            out.push_str(&format!(")[{}]", pretty_aff(i)));
        }
        Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => {
            let _ = write_flat(e, out, usize::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::front::parse_program;

    #[test]
    fn one_binding_a_line() {
        let p = parse_program(
            b"(fn f ((x (tensor n R)) (c (tensor n R)))
                (let a (gen i n (* (get x i) (get c i)))
                  (let b (sum j n (get a j))
                    (* b b))))",
        )
        .unwrap();
        let s = super::program(&p);
        assert_eq!(
            s,
            "f(x : [n]R, c : [n]R) -> R =\n  \
             let a = ⊞[i<n] x[i] · c[i] in\n  \
             let b = Σ[j<n] a[j] in\n  \
             b · b\n"
        );
    }

    #[test]
    fn long_sums_break_one_term_a_line() {
        let terms: Vec<String> = (0..12)
            .map(|k| format!("(* (get x {k}) (get long_name_{k} 0))"))
            .collect();
        let params: Vec<String> = (0..12)
            .map(|k| format!("(long_name_{k} (tensor 1 R))"))
            .collect();
        let src = format!(
            "(fn f ((x (tensor 12 R)) {}) (+ {}))",
            params.join(" "),
            terms.join(" ")
        );
        let s = super::program(&parse_program(src.as_bytes()).unwrap());
        assert!(s.lines().all(|l| l.chars().count() <= 100), "{s}");
        assert!(s.contains("\n  + x[1] · long_name_1[0]"), "{s}");
    }

    #[test]
    fn deep_programs_print_in_linear_space() {
        let depth = 3000;
        let src = format!(
            "(fn f ((x R)) {}x{})",
            "(+ x (exp ".repeat(depth),
            "))".repeat(depth)
        );
        let s = crate::stack::with_big_stack(move || {
            super::program(&parse_program(src.as_bytes()).unwrap())
        });
        assert!(s.len() < 400 * depth, "{}", s.len());
    }
}
