//! The names a printed program uses: readable, valid C identifiers that
//! are not C keywords, without the optimizer's internal separators or
//! numeric `_N` suffixes. Checked on every program the corpus tests derive
//! or optimize (tests/snapshots.rs, tests/derivatives.rs).

use atl_egg::backend::sexp::program_to_string;
use atl_egg::front::ast::Program;
use atl_egg::front::parse_program;
use atl_egg::Symbol;

/// Is `s` a C identifier that is not a C keyword?
fn c_identifier(s: &str) -> bool {
    // C99's keywords, written out as an oracle for `readable::C_KEYWORDS` rather than taken from it
    const KEYWORDS: &[&str] = &[
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "_Bool",
        "_Complex",
        "_Imaginary",
        "bool",
        "true",
        "false",
    ];
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&s)
}

/// Every name a printed program binds or declares.
pub fn printed_names(p: &Program) -> Vec<Symbol> {
    use atl_egg::front::ast::{Expr, Pred};
    fn pred(p: &Pred, out: &mut Vec<Symbol>) {
        if let Pred::Exists(i, _, _) = p {
            out.push(*i);
        }
        p.children().for_each(|q| pred(q, out));
    }
    fn expr(e: &Expr, out: &mut Vec<Symbol>) {
        out.extend(e.binder());
        if let Expr::Iverson(p, _) = e {
            pred(p, out);
        }
        e.children().for_each(|c| expr(c, out));
    }
    let mut out: Vec<Symbol> = p.params.iter().map(|q| q.name).collect();
    expr(&p.body, &mut out);
    out
}

/// The printed names of one derived or optimized program: readable, C
/// identifiers, no internal separators, no `_N` suffixes.
pub fn check_printed(what: &str, p: &Program) -> Vec<String> {
    let text = program_to_string(p);
    let mut bad = vec![];
    if text.contains('~') || text.contains('#') {
        bad.push(format!("{what}: internal separator in {text}"));
    }
    let reread = parse_program(text.as_bytes()).unwrap();
    for s in printed_names(&reread) {
        let s = s.as_str();
        let suffixed = s
            .rsplit_once('_')
            .is_some_and(|(_, d)| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        if !c_identifier(s) || suffixed {
            bad.push(format!("{what}: name {s:?}"));
        }
    }
    bad
}
