//! The differentiation rules' Rust appliers and conditions: forward
//! (`d-var`, `d-const`, `d-let`) and adjoint (`adj-gen`, `adj-rev-let`,
//! `adj-coeff-dot`, and the conditions on tangents and access paths), and
//! the forward rules made from the black boxes' derivative table
//! (`rules/derivatives.rules`).
//!
//! They are named in the one registry ([`super::registry`]) with the
//! optimizer's. Each applier says beside it why a pattern cannot express its
//! rule.

use super::engine::{check, Built, Check, Ctx};
use super::files::{parse_rules, Rhs, RuleSpec};
use crate::egraph::analysis::{name_of, AtlGraph};
use crate::egraph::language::{Atl, Fun, Idx};
use crate::front::affine::Affine;
use crate::front::ast::{build, Expr, Reduce, Type};
use crate::front::names;
use crate::symbol::Symbol;
use egg::{ENodeOrVar, Id, Pattern, Var};
use indexmap::IndexMap;
use std::sync::OnceLock;

// -- the black boxes' derivatives ---------------------------------------------

/// The black boxes' derivatives, as data: `F: (call F ?x) => F'(?x)`.
pub const DERIVATIVES: &str = include_str!("../../../rules/derivatives.rules");

/// One entry of the derivative table.
#[derive(Clone, Debug)]
pub struct Derivative {
    /// The black box: `(call F ?x)`, or `(call F ?x ?k)` for `pow`, `dpow`.
    pub lhs: String,
    /// Its derivative at `?x` (with the exponent `?k`), a pattern.
    pub rhs: Pattern<Atl>,
    /// The rule sets of the forward rules made from the table.
    pub tags: Vec<String>,
}

/// The derivative table of `rules/derivatives.rules`, read once: keyed by
/// the black box, in file order.
pub fn derivative_table() -> &'static IndexMap<Fun, Derivative> {
    static TABLE: OnceLock<IndexMap<Fun, Derivative>> = OnceLock::new();
    TABLE.get_or_init(|| {
        parse_derivatives(DERIVATIVES).unwrap_or_else(|e| panic!("bad derivative table: {e}"))
    })
}

/// Read a derivative table: entries `(rule F (call F ?x) F'(?x))` (`?k`
/// after `?x` for a black box with an exponent), one per black box, named
/// by it.
pub fn parse_derivatives(text: &str) -> Result<IndexMap<Fun, Derivative>, String> {
    let mut table = IndexMap::new();
    for s in parse_rules("derivatives.rules", text)? {
        let bad = |m: &str| format!("derivatives.rules, {}: {m}", s.name);
        let Rhs::Pattern(rhs) = &s.rhs else {
            return Err(bad("an applier in the derivative table"));
        };
        let lhs: Pattern<Atl> = s.lhs.parse().map_err(|e| bad(&format!("{e}")))?;
        let ast = lhs.ast.as_ref();
        let node = |id: Id| &ast[usize::from(id)];
        let is = |id: Id, v: &str| matches!(node(id), ENodeOrVar::Var(w) if w.to_string() == v);
        let fun = match ast.last() {
            Some(ENodeOrVar::ENode(n)) => n.as_call(),
            _ => None,
        }
        .filter(|(_, x, k)| is(*x, "?x") && k.is_none_or(|k| is(k, "?k")))
        .and_then(|(f, _, k)| match node(f) {
            ENodeOrVar::ENode(Atl::Fun(f)) if f.takes_exponent() == k.is_some() => Some(*f),
            _ => None,
        })
        .ok_or_else(|| bad("the left-hand side is not (call F ?x) or (call F ?x ?k)"))?;
        if fun.name() != s.name {
            return Err(bad("an entry is named by its black box"));
        }
        let entry = Derivative {
            lhs: s.lhs.clone(),
            rhs: rhs.parse().map_err(|e| bad(&format!("{e}")))?,
            tags: s.tags.clone(),
        };
        if table.insert(fun, entry).is_some() {
            return Err(bad("a second entry"));
        }
    }
    Ok(table)
}

/// The forward rules of the black boxes, made from the table:
/// `d-F: (D (call F ?x)) => (* F'(?x) (D ?x))`.
pub fn forward_blackbox_specs() -> Vec<RuleSpec> {
    derivative_table()
        .iter()
        .map(|(fun, d)| RuleSpec {
            file: "derivatives.rules",
            group: "black-box derivatives".into(),
            name: format!("d-{fun}"),
            lhs: format!("(D {})", d.lhs),
            rhs: Rhs::Pattern(format!("(* {} (D ?x))", d.rhs)),
            conditions: vec![],
            tags: d.tags.clone(),
        })
        .collect()
}

// -- conditions ---------------------------------------------------------------

/// The tangent of the variable named in class `id` (sigma(x)).
fn tangent_of(egraph: &AtlGraph, id: Id) -> Option<Symbol> {
    let x = name_of(egraph, id)?;
    egraph.analysis.diff.tangents.get(&x).copied()
}

/// `tangent-free(?a)`: no tangent name is free in `?a`.
pub(super) fn tangent_free(a: Var) -> Check {
    check(move |g, s| !g.analysis.mentions_tangent(&g[s[a]].data))
}

/// `tangent-not-free(?x, ?e)`: the tangent of the variable `?x` is not free
/// in `?e` (true when `?x` has no tangent).
pub(super) fn tangent_not_free(x: Var, e: Var) -> Check {
    check(move |g, s| match tangent_of(g, s[x]) {
        Some(dx) => !g.analysis.is_free(&g[s[e]].data, dx),
        None => name_of(g, s[x]).is_some(),
    })
}

/// One step of an access path: an element, or a side of a pair.
#[derive(Clone, Debug, PartialEq)]
pub enum PathStep {
    Get(Affine),
    Fst,
    Snd,
}

/// The access path `(get (fst (var x)) @a)` ... held by a class: its root
/// variable and its steps, outermost last.
pub fn path_of(egraph: &AtlGraph, id: Id) -> Option<(Symbol, Vec<PathStep>)> {
    let mut steps = vec![];
    let mut id = id;
    for _ in 0..256 {
        let node = egraph[id]
            .nodes
            .iter()
            .find(|n| matches!(n, Atl::Var(_) | Atl::Get(_) | Atl::Fst(_) | Atl::Snd(_)))?;
        match node {
            Atl::Var(x) => {
                steps.reverse();
                return Some((name_of(egraph, *x)?, steps));
            }
            Atl::Get([a, i]) => {
                steps.push(PathStep::Get(egraph[*i].data.aff.clone()?));
                id = *a;
            }
            Atl::Fst(a) => {
                steps.push(PathStep::Fst);
                id = *a;
            }
            Atl::Snd(a) => {
                steps.push(PathStep::Snd);
                id = *a;
            }
            _ => unreachable!(),
        }
    }
    None
}

/// `root-not-free(?P, ?s)`: the variable at the root of the path `?P` is not
/// free in `?s`.
pub(super) fn root_not_free(p: Var, e: Var) -> Check {
    check(move |g, s| path_of(g, s[p]).is_some_and(|(r, _)| !g.analysis.is_free(&g[s[e]].data, r)))
}

/// `rooted-at(?q, ?x)` / `not-rooted-at(?q, ?x)` (`yes` false): the path
/// `?q` is (is not) an access to the tangent of `?x`.
pub(super) fn rooted_at(q: Var, x: Var, yes: bool) -> Check {
    check(move |g, s| match (path_of(g, s[q]), tangent_of(g, s[x])) {
        (Some((r, _)), Some(dx)) => (r == dx) == yes,
        (Some(_), None) => !yes,
        _ => false,
    })
}

/// `settled(?b)`: the class is not a differential binding still waiting to
/// be turned around (it holds no `dlet`, or also a `let` made from one).
/// adj-swap-let moves a differential binding only past settled bodies, so
/// the bindings are turned around innermost first, as in the paper, and the
/// e-graph does not hold every interleaving of the pending ones (a number
/// exponential in the length of the chain).
pub(super) fn settled(b: Var) -> Check {
    check(move |g, s| {
        let nodes = &g[s[b]].nodes;
        !nodes.iter().any(|n| matches!(n, Atl::DLet(_)))
            || nodes.iter().any(|n| matches!(n, Atl::Let(_)))
    })
}

// -- Rust appliers ----------------------------------------------------------------

/// d-var `(D (var ?x))`: the tangent variable of `x` under sigma, or the
/// zero of `x`'s type for inputs that are not differentiated (a lookup in
/// the environment sigma, which patterns cannot do).
pub(super) fn d_var(c: &mut Ctx) -> Option<Built> {
    let x = c.name(0)?;
    if let Some(dx) = c.egraph.analysis.diff.tangents.get(&x).copied() {
        return Some(Built::Expr(Expr::Var(dx)));
    }
    let t = c.egraph.analysis.diff.constants.get(&x)?.clone();
    let mut made = vec![];
    let zero = crate::front::types::zero_of(&t, &mut || {
        let k = c.fresh(Symbol::from("z"));
        made.push(k);
        k
    });
    let analysis = &mut c.egraph.analysis;
    // register the extents of the zero's generators, outermost first
    let mut ty = &t;
    let mut k = 0;
    while let Type::Tensor(d, e) = ty {
        if let Some(name) = made.get(k) {
            analysis.extents.insert(*name, d.clone());
        }
        k += 1;
        ty = e;
    }
    Some(Built::Expr(zero))
}

/// d-const `(D ?c)` for a constant `c`: zero (a pattern cannot say "any
/// constant").
pub(super) fn d_const(c: &mut Ctx) -> Option<Built> {
    let id = c.id(0);
    c.egraph[id]
        .nodes
        .iter()
        .any(|n| matches!(n, Atl::Num(_)))
        .then(|| Built::Expr(build::num(0.0)))
}

/// d-let `(D (let ?x ?a ?b))` => `(let x a (let dx (D a) (D b)))` with
/// sigma extended by x -> dx: the fresh name dx and the extension of sigma
/// are beyond patterns.
pub(super) fn d_let(c: &mut Ctx) -> Option<Built> {
    let x = c.name(0)?;
    let (xid, a, b) = (c.id(0), c.id(1), c.id(2));
    let dx = match c.egraph.analysis.diff.tangents.get(&x) {
        Some(dx) => *dx,
        None => {
            let dx = c
                .egraph
                .analysis
                .fresh_name(Symbol::from(format!("d{}", names::base(x.as_str()))));
            c.egraph.analysis.add_tangent(x, dx);
            dx
        }
    };
    let g = &mut *c.egraph;
    let dxid = g.add(Atl::Sym(dx));
    let da = g.add(Atl::D(a));
    let db = g.add(Atl::D(b));
    let inner = g.add(Atl::Let([dxid, da, db]));
    Some(Built::Class(g.add(Atl::Let([xid, a, inner]))))
}

/// d-maximum `(D (maximum ?i ?n ?e))` =>
/// `(sum i n (* (get (argmax i n e) @i) (D e)))`: the tangent of the element
/// selected ([`Reduce::tangent`]); the binder `i` turns into the index `@i`
/// of the read, which patterns cannot do. d-minimum likewise with `argmin`.
pub(super) fn d_maximum(c: &mut Ctx) -> Option<Built> {
    d_extremum(c, Reduce::Maximum)
}

pub(super) fn d_minimum(c: &mut Ctx) -> Option<Built> {
    d_extremum(c, Reduce::Minimum)
}

fn d_extremum(c: &mut Ctx, r: Reduce) -> Option<Built> {
    let (iname, i, n, e) = (c.id(0), c.name(0)?, c.id(1), c.id(2));
    let g = &mut *c.egraph;
    let hot = g.add(Atl::reduce(r.arg(), [iname, n, e]));
    let iaff = g.add(Atl::Aff(Idx(Affine::var(i))));
    let read = g.add(Atl::Get([hot, iaff]));
    let de = g.add(Atl::D(e));
    let term = g.add(Atl::Mul([read, de]));
    Some(Built::Class(g.add(Atl::Sum([iname, n, term]))))
}

/// adj-gen `(dot ?w (gen ?i ?n ?e))` => `(sum i n (dot (get w @i) e))`:
/// the index `i` turns from a name (the binder) into an index expression
/// (the access `w[i]`), which patterns cannot do.
pub(super) fn adj_gen(c: &mut Ctx) -> Option<Built> {
    let (w, i, n, e) = (c.id(0), c.name(1)?, c.id(2), c.id(3));
    if c.egraph.analysis.is_free(&c.egraph[w].data, i) {
        return None;
    }
    let g = &mut *c.egraph;
    let iname = g.add(Atl::Sym(i));
    let iaff = g.add(Atl::Aff(Idx(Affine::var(i))));
    let wi = g.add(Atl::Get([w, iaff]));
    let dot = g.add(Atl::Dot([wi, e]));
    Some(Built::Class(g.add(Atl::Sum([iname, n, dot]))))
}

/// The coefficients of the tangent entry path `path` (of type `t`) in the
/// linear form `s`, as a value of type `t`: `(coeff path s)` for a real,
/// `(gen g n ...)` for a tensor, a pair of both sides. The indices are named
/// after `key` (the variable) and their position, once.
pub fn coefficients(g: &mut AtlGraph, t: &Type, key: &str, path: Id, s: Id) -> Id {
    match t {
        Type::Real => g.add(Atl::Coeff([path, s])),
        Type::Tensor(n, e) => {
            let key = format!("{key}.");
            let k = g.analysis.name_for(&key, "g");
            g.analysis.extents.insert(k, n.clone());
            let kname = g.add(Atl::Sym(k));
            let kaff = g.add(Atl::Aff(Idx(Affine::var(k))));
            let inner_path = g.add(Atl::Get([path, kaff]));
            let body = coefficients(g, e, &key, inner_path, s);
            let nid = g.add(Atl::Aff(Idx(n.clone())));
            g.add(Atl::Gen([kname, nid, body]))
        }
        Type::Pair(a, b) => {
            let pa = g.add(Atl::Fst(path));
            let pb = g.add(Atl::Snd(path));
            let ca = coefficients(g, a, &format!("{key}0"), pa, s);
            let cb = coefficients(g, b, &format!("{key}1"), pb, s);
            g.add(Atl::Pair([ca, cb]))
        }
    }
}

/// adj-rev-let `(dlet ?x ?d ?s)` =>
/// `(let cx C (+ (dot (var cx) d) (drop x s)))` with `C` the coefficients
/// of the tangent of `x` in `s`: a fresh name, and a value built by the
/// type of `x` (a gen per tensor dimension, a pair per pair). Applies once
/// `s` is a sum of inner products (the paper applies it when no ordinary
/// binding is left between the differential binding and them).
pub(super) fn adj_rev_let(c: &mut Ctx) -> Option<Built> {
    let (xid, d, s) = (c.id(0), c.id(1), c.id(2));
    let x = c.name(0)?;
    if c.egraph[s]
        .nodes
        .iter()
        .any(|n| matches!(n, Atl::Let(_) | Atl::DLet(_)))
    {
        return None;
    }
    let dx = *c.egraph.analysis.diff.tangents.get(&x)?;
    let t = c.egraph.analysis.diff.types.get(&x)?.clone();
    let cx = c
        .egraph
        .analysis
        .name_for(&format!("{x}"), &format!("{}_bar", names::base(x.as_str())));
    c.egraph.analysis.diff.types.insert(cx, t.clone());
    let g = &mut *c.egraph;
    let dxname = g.add(Atl::Sym(dx));
    let root = g.add(Atl::Var(dxname));
    let coeffs = coefficients(g, &t, x.as_str(), root, s);
    let cxname = g.add(Atl::Sym(cx));
    let cxvar = g.add(Atl::Var(cxname));
    let back = g.add(Atl::Dot([cxvar, d]));
    let rest = g.add(Atl::Drop([xid, s]));
    let body = g.add(Atl::Add([back, rest]));
    Some(Built::Class(g.add(Atl::Let([cxname, coeffs, body]))))
}

/// adj-coeff-dot `(coeff ?P (dot ?w ?q))` for a real entry `P` of a tangent
/// and an access `q` to a tangent: zero for another tangent or another side
/// of a pair, else `[P's indices == q's indices] * w[P's remaining steps]`.
/// Comparing two access paths of any depth is beyond a pattern.
pub(super) fn adj_coeff_dot(c: &mut Ctx) -> Option<Built> {
    let (p, w, q) = (c.id(0), c.id(1), c.id(2));
    let (pr, ps) = path_of(c.egraph, p)?;
    let (qr, qs) = path_of(c.egraph, q)?;
    if !c.egraph.analysis.tangent_set_has(pr) || !c.egraph.analysis.tangent_set_has(qr) {
        return None;
    }
    let g = &mut *c.egraph;
    let zero = || Some(Built::Expr(build::num(0.0)));
    if pr != qr {
        return zero();
    }
    let mut eqs = vec![];
    for (a, b) in ps.iter().zip(&qs) {
        match (a, b) {
            (PathStep::Get(i), PathStep::Get(j)) => eqs.push((i.clone(), j.clone())),
            (PathStep::Fst, PathStep::Fst) | (PathStep::Snd, PathStep::Snd) => {}
            (PathStep::Fst, PathStep::Snd) | (PathStep::Snd, PathStep::Fst) => return zero(),
            _ => return None,
        }
    }
    if qs.len() > ps.len() {
        // P is not an entry (ill-typed use): leave it
        return None;
    }
    let mut out = w;
    for step in &ps[qs.len()..] {
        out = match step {
            PathStep::Get(i) => {
                let a = g.add(Atl::Aff(Idx(i.clone())));
                g.add(Atl::Get([out, a]))
            }
            PathStep::Fst => g.add(Atl::Fst(out)),
            PathStep::Snd => g.add(Atl::Snd(out)),
        };
    }
    let mut pred: Option<Id> = None;
    for (i, j) in eqs {
        let (a, b) = (g.add(Atl::Aff(Idx(i))), g.add(Atl::Aff(Idx(j))));
        let e = g.add(Atl::Eq([a, b]));
        pred = Some(match pred {
            None => e,
            Some(p) => g.add(Atl::And([p, e])),
        });
    }
    Some(Built::Class(match pred {
        None => out,
        Some(p) => g.add(Atl::Iverson([p, out])),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rules/derivatives.rules` names exactly the boxes of the table of
    /// black boxes, each with its arity.
    #[test]
    fn the_rule_file_names_exactly_the_table_of_black_boxes() {
        let mut in_rules: Vec<(&str, bool)> = derivative_table()
            .keys()
            .map(|f| (f.name(), f.takes_exponent()))
            .collect();
        let mut in_table: Vec<(&str, bool)> = crate::front::blackbox::BLACK_BOXES
            .iter()
            .map(|b| (b.name, b.param.is_some()))
            .collect();
        in_rules.sort();
        in_table.sort();
        assert_eq!(in_rules, in_table);
    }

    #[test]
    fn the_derivative_table_is_one_entry_per_black_box() {
        let table = derivative_table();
        assert!(Fun::all().all(|f| table.contains_key(&f)));
        let read = |entries: &str| parse_derivatives(&format!("(group \"t\" {entries})"));
        assert!(read("(rule exp (call exp ?x) (call exp ?x))").is_ok());
        for (entries, why) in [
            (
                "(rule log (call exp ?x) (call exp ?x))",
                "named by its black box",
            ),
            ("(rule exp (call exp ?y) (call exp ?y))", "not (call F ?x)"),
            ("(rule pow (call pow ?x) 1)", "not (call F ?x)"),
            ("(rule exp (call exp ?x ?k) 1)", "not (call F ?x)"),
            ("(rule exp (call exp 1) 1)", "not (call F ?x)"),
            ("(rule exp (exp ?x) 1)", "could not parse"),
            (
                "(rule exp (call exp ?x) 1) (rule exp (call exp ?x) 2)",
                "a second entry",
            ),
            ("(rule exp (call exp ?x) :applier (d-var ?x))", "an applier"),
        ] {
            let e = read(entries).expect_err(entries);
            assert!(e.contains(why), "{entries}: {e}");
        }
    }
}
