//! Readable names for printed programs: every binder gets the base of its
//! made name (or the user's name it stands for), then `base1`, `base2`, ...
//! where taken; every printed name is a C identifier. Also fresh made names
//! for the binders of terms put together from parts optimized apart.

use super::ast::{Expr, Pred, Program};
use super::names::{base, make, Fresh};
use crate::symbol::Symbol;
use std::collections::{HashMap, HashSet};

const C_KEYWORDS: &[&str] = &[
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
    "main",
];

/// `base` as the stem of a C identifier: invalid characters become `_`, no
/// leading digit, no trailing `_` or `_N` (numbers are appended to it).
fn c_stem(base: &str) -> String {
    let mut s: String = base
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    // a trailing `_N` would read as a numbering suffix
    loop {
        let t = s.trim_end_matches(|c: char| c.is_ascii_digit());
        if t.len() < s.len() && t.ends_with('_') {
            s = t.trim_end_matches('_').to_string();
        } else {
            s = s.trim_end_matches('_').to_string();
            break;
        }
    }
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'v');
    }
    s
}

/// Every parameter, size and relation name of `prog` (free in its body).
fn declared(prog: &Program) -> HashSet<String> {
    let mut out: HashSet<String> = prog.params.iter().map(|p| p.name.to_string()).collect();
    out.insert(prog.name.to_string());
    for s in super::subst::free_names(&prog.body) {
        out.insert(s.to_string());
    }
    out
}

struct Readable<'h, 'f> {
    hints: &'h HashMap<Symbol, Symbol>,
    taken: HashSet<String>,
    /// Per stem, the next numeric suffix to try.
    next_suffix: HashMap<String, usize>,
    scope: HashMap<Symbol, Vec<Symbol>>,
    /// When set, binders get made names from this supply (see
    /// [`fresh_binders`]) instead of readable ones.
    fresh: Option<&'f mut Fresh>,
}

impl Readable<'_, '_> {
    fn pick(&mut self, b: Symbol) -> Symbol {
        let hinted = self.hints.get(&b).copied().unwrap_or(b);
        if let Some(fresh) = self.fresh.as_deref_mut() {
            return fresh.name(hinted.as_str());
        }
        let stem = c_stem(base(hinted.as_str()));
        let ok = |s: &str, taken: &HashSet<String>| {
            !taken.contains(s) && !C_KEYWORDS.contains(&s) && !super::ast::Func::is_name(s)
        };
        let mut name = stem.clone();
        // suffixes below the last one given for this stem are all taken
        // (names are only ever added), so the search resumes there: a
        // program with k binders named `i` is named in linear time
        let k = self.next_suffix.entry(stem.clone()).or_insert(1);
        while !ok(&name, &self.taken) {
            name = format!("{stem}{k}");
            *k += 1;
        }
        self.taken.insert(name.clone());
        Symbol::from(name)
    }
    fn enter(&mut self, b: Symbol) -> Symbol {
        let n = self.pick(b);
        self.scope.entry(b).or_default().push(n);
        n
    }
    fn leave(&mut self, b: Symbol) {
        if let Some(v) = self.scope.get_mut(&b) {
            v.pop();
        }
    }
    fn name(&self, s: Symbol) -> Symbol {
        self.scope
            .get(&s)
            .and_then(|v| v.last())
            .copied()
            .unwrap_or(s)
    }
    fn aff(&self, a: &super::Affine) -> super::Affine {
        let mut out = a.clone();
        let names: Vec<Symbol> = a.names().collect();
        // rename through a temporary so that a swap cannot merge two names
        let tmp: Vec<Symbol> = names
            .iter()
            .enumerate()
            .map(|(k, _)| make("tmp", format!("r{k}")))
            .collect();
        for (n, t) in names.iter().zip(&tmp) {
            out = out.rename(*n, *t);
        }
        for (n, t) in names.iter().zip(&tmp) {
            out = out.rename(*t, self.name(*n));
        }
        out
    }
    fn pred(&mut self, p: &Pred) -> Pred {
        match p {
            Pred::True | Pred::False => p.clone(),
            Pred::Cmp(op, a, b) => Pred::Cmp(*op, self.aff(a), self.aff(b)),
            Pred::And(ps) => Pred::And(ps.iter().map(|q| self.pred(q)).collect()),
            Pred::Or(ps) => Pred::Or(ps.iter().map(|q| self.pred(q)).collect()),
            Pred::Exists(i, d, q) => {
                let d = self.aff(d);
                let n = self.enter(*i);
                let q = self.pred(q);
                self.leave(*i);
                Pred::Exists(n, d, Box::new(q))
            }
            Pred::Rel(r, idx) => Pred::Rel(*r, idx.iter().map(|a| self.aff(a)).collect()),
        }
    }
    fn expr(&mut self, e: &Expr) -> Expr {
        use super::ast::build::*;
        match e {
            Expr::Var(x) => var(self.name(*x)),
            Expr::Get(a, i) => get(self.expr(a), self.aff(i)),
            Expr::IndexReal(a) => Expr::IndexReal(self.aff(a)),
            Expr::Iverson(p, a) => iverson(self.pred(p), self.expr(a)),
            Expr::Let(x, a, b) => {
                let a = self.expr(a);
                let n = self.enter(*x);
                let b = self.expr(b);
                self.leave(*x);
                let_(n, a, b)
            }
            Expr::Gen(i, d, b) | Expr::Sum(i, d, b) | Expr::Reduce(_, i, d, b) => {
                let d = self.aff(d);
                let n = self.enter(*i);
                let b = self.expr(b);
                self.leave(*i);
                e.same_loop(n, d, b).expect("a loop")
            }
            // no names of their own: rename inside
            _ => e.map_children(|c| self.expr(c)),
        }
    }
}

/// `prog` with readable binder names: each binder gets the base of its name
/// (or of `hints[name]`, the user's name a canonical name stands for), made
/// unique in the whole program with a number, a C identifier. Parameters are
/// kept. Idempotent on programs whose binder names are already distinct
/// readable identifiers.
pub fn readable(prog: &Program, hints: &HashMap<Symbol, Symbol>) -> Program {
    let mut r = Readable {
        hints,
        taken: declared(prog),
        next_suffix: HashMap::new(),
        scope: HashMap::new(),
        fresh: None,
    };
    Program {
        body: r.expr(&prog.body),
        ..prog.clone()
    }
}

/// `e` with every binder renamed to a made name no other binder has: the
/// base of its name (or of `hints[name]`) and an id from `fresh`. Free
/// names are kept. Used to put together terms optimized apart, whose binder
/// names may repeat.
pub fn fresh_binders(e: &Expr, hints: &HashMap<Symbol, Symbol>, fresh: &mut Fresh) -> Expr {
    Readable {
        hints,
        taken: HashSet::new(),
        next_suffix: HashMap::new(),
        scope: HashMap::new(),
        fresh: Some(fresh),
    }
    .expr(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems() {
        assert_eq!(c_stem("x_1"), "x");
        assert_eq!(c_stem("i"), "i");
        assert_eq!(c_stem("a-b"), "a_b");
        assert_eq!(c_stem("1x"), "v1x");
        assert_eq!(c_stem("x_bar"), "x_bar");
    }

    #[test]
    fn readable_names() {
        let p = crate::front::parse_program(
            b"(fn f ((x (tensor n R))) (+ (sum i n (get x i)) (sum i n (get x i))))",
        )
        .unwrap();
        let Expr::Add(a, b) = readable(&p, &HashMap::new()).body else {
            panic!("expected a sum of two terms")
        };
        let (Expr::Sum(i, _, a), Expr::Sum(j, _, b)) = (*a, *b) else {
            panic!("expected two sums")
        };
        assert_eq!((i.as_str(), j.as_str()), ("i", "i1"));
        assert!(matches!(*a, Expr::Get(_, ref k) if k.names().eq([i])));
        assert!(matches!(*b, Expr::Get(_, ref k) if k.names().eq([j])));
    }
}
