//! The optimizer's named conditions and Rust appliers (the rules of
//! let-lifting, gen pushout, index elimination and the Iverson algebra that
//! a pattern cannot express).

use super::engine::{check, Built, Check, Ctx};
use crate::egraph::analysis::{name_of, smallest, AtlGraph};
use crate::egraph::language::{Atl, FromRec};
use crate::front::affine::Affine;
use crate::front::ast::{build, CmpOp, Expr, Pred};
use crate::front::subst::Replace;
use crate::terms::brackets::fixes_index;
use egg::{Id, Symbol, Var};

/// `not-free(?x, ?e)`: the name in class `?x` is not free in `?e`.
pub(super) fn not_free(x: Var, e: Var) -> Check {
    check(move |g, s| name_of(g, s[x]).is_some_and(|n| !g.analysis.is_free(&g[s[e]].data, n)))
}

/// `distinct(?x, ?y)`: two name classes hold different names.
pub(super) fn distinct(x: Var, y: Var) -> Check {
    check(move |g, s| name_of(g, s[x]) != name_of(g, s[y]))
}

/// `is-const(?k)`: the class holds a real constant.
pub(super) fn is_const(k: Var) -> Check {
    check(move |g, s| g[s[k]].data.num.is_some())
}

/// What a class is to the regrouping of a product: a constant, a constant
/// multiple of a term (it holds `k·e` or `e·k`, `e` not constant), or
/// neither.
#[derive(Clone, Copy, PartialEq)]
enum Factor {
    Constant(f64),
    Multiple,
    Other,
}

fn factor_of(g: &AtlGraph, id: Id) -> Factor {
    let class = &g[id];
    if let Some(k) = class.data.num {
        return Factor::Constant(k.0);
    }
    let constant = |c: &Id| g[*c].data.num.is_some();
    let multiple = class
        .nodes
        .iter()
        .any(|n| matches!(n, Atl::Mul([a, b]) if constant(a) != constant(b)));
    if multiple {
        Factor::Multiple
    } else {
        Factor::Other
    }
}

/// Whether the product `p·q` would be a new constant multiple `k·e` (`k`
/// neither 0 nor 1) of a class `e` that is already one.
fn new_multiple_of_multiple(g: &AtlGraph, p: Id, q: Id) -> bool {
    if g.lookup(Atl::Mul([p, q])).is_some() || g.lookup(Atl::Mul([q, p])).is_some() {
        return false;
    }
    match (factor_of(g, p), factor_of(g, q)) {
        (Factor::Constant(k), Factor::Multiple) | (Factor::Multiple, Factor::Constant(k)) => {
            k != 0.0 && k != 1.0
        }
        _ => false,
    }
}

/// `no-new-multiple(?a, ?b)`: the product `a·b` that a regrouping makes
/// (the one new class it can make: the other product joins the matched
/// class) is no new constant multiple `k·e` of a class `e` that is already
/// a constant multiple. Once a class holds both `a` and `2·(0.5·a)`,
/// associativity and commutativity otherwise make `4·a`, `8·a`, ... (and
/// `0.25·a`, ...) without end; products that fold constants together
/// (`2·(3·e)` to `6·e`) are still made, through the innermost term that is
/// no multiple, and so is `-0.5·(-2·x)` in the class of `x`.
pub(super) fn no_new_multiple(a: Var, b: Var) -> Check {
    check(move |g, s| !new_multiple_of_multiple(g, s[a], s[b]))
}

/// The conjuncts of the smallest predicate of class `id`.
fn class_conjuncts(g: &AtlGraph, id: Id) -> Option<Vec<Pred>> {
    let rec = smallest(g, id)?;
    let root = Id::from(rec.as_ref().len() - 1);
    let p = FromRec {
        node: |i: Id| &rec[i],
    }
    .pred(root)
    .ok()?;
    let mut out = vec![];
    conjuncts(p, &mut out);
    Some(out)
}

/// `adds-conjunct(?p, ?q)`: neither predicate's conjuncts all appear among
/// the other's, so `p ∧ q` says more than each alone. Merging `[p]·[q]·e`
/// into `[p ∧ q]·e` only then keeps a class that holds both `x` and
/// `[q]·x` from growing `p ∧ q`, `(p ∧ q) ∧ q`, ... without end (seen: 30,000
/// merges in one iteration on a two-line program).
pub(super) fn adds_conjunct(p: Var, q: Var) -> Check {
    check(
        move |g, s| match (class_conjuncts(g, s[p]), class_conjuncts(g, s[q])) {
            (Some(a), Some(b)) => {
                !b.iter().all(|x| a.contains(x)) && !a.iter().all(|x| b.contains(x))
            }
            _ => true,
        },
    )
}

/// `index-fixed(?i, ?p)`: [`fixes_index`] on the class's smallest
/// predicate.
pub(super) fn index_fixed(i: Var, p: Var) -> Check {
    check(move |g, s| {
        let (Some(i), Some(cs)) = (name_of(g, s[i]), class_conjuncts(g, s[p])) else {
            return false;
        };
        fixes_index(i, &Pred::And(cs))
    })
}

/// `not-bracket(?e)`: the class holds no `iverson` node, so a match of
/// `(iverson ?p ?e)` binds the whole bracket, not one of the nested brackets
/// that splitting a conjunction makes.
pub(super) fn not_bracket(e: Var) -> Check {
    check(move |g, s| !g[s[e]].nodes.iter().any(|n| matches!(n, Atl::Iverson(_))))
}

/// `not-false(?p)`: the predicate is not known false. A bracket known
/// false makes its term zero, and a zero class can hold `(sum ?i ?n z)`
/// with `z` itself: moving `[false]` out of that sum would make
/// `[false]·Σ e`, `[false]·ΣΣ e`, ... without end, every one zero.
pub(super) fn not_false(p: Var) -> Check {
    check(move |g, s| g[s[p]].data.truth != Some(false))
}

/// `not-exists(?p)`: the predicate class holds no `exists` node.
pub(super) fn not_exists(p: Var) -> Check {
    check(move |g, s| !g[s[p]].nodes.iter().any(|n| matches!(n, Atl::Exists(_))))
}

/// `0 <= a < n` as a predicate.
fn in_range(a: &Affine, n: &Affine) -> Pred {
    Pred::And(vec![
        Pred::Cmp(CmpOp::Le, Affine::constant(0), a.clone()),
        Pred::Cmp(CmpOp::Lt, a.clone(), n.clone()),
    ])
}

/// gen-pushout `(get (gen ?i ?n ?e) ?a)` => `[0 <= a < n] * e[i := a]`:
/// substitution of an index, which patterns cannot express.
pub(super) fn gen_pushout(c: &mut Ctx) -> Option<Built> {
    let (i, n, e, a) = (c.name(0)?, c.aff(1)?, c.expr(2)?, c.aff(3)?);
    let body = c.subst(&e, Replace::Index(i, a.clone()))?;
    Some(Built::Expr(build::iverson(in_range(&a, &n), body)))
}

/// let-inline `(let ?x ?a ?b)` => `b[x := a]` (substitution).
pub(super) fn let_inline(c: &mut Ctx) -> Option<Built> {
    let (x, a, b) = (c.name(0)?, c.expr(1)?, c.expr(2)?);
    Some(Built::Expr(c.subst(&b, Replace::Var(x, a))?))
}

/// let-lift out of gen/sum: `(gen i n (let x a b))` =>
/// `(let x (gen i n a) (gen i n b[x := x[i]]))`: the substitution of `x`
/// by `x[i]` is beyond patterns.
fn let_lift_loop(c: &mut Ctx, is_sum: bool) -> Option<Built> {
    let (i, n, x, a, b) = (c.name(0)?, c.aff(1)?, c.name(2)?, c.expr(3)?, c.expr(4)?);
    let b = c.subst(
        &b,
        Replace::Var(x, build::get(Expr::Var(x), Affine::var(i))),
    )?;
    let outer = if is_sum {
        build::sum(i, n.clone(), b)
    } else {
        build::gen(i, n.clone(), b)
    };
    Some(Built::Expr(build::let_(x, build::gen(i, n, a), outer)))
}

pub(super) fn let_lift_gen(c: &mut Ctx) -> Option<Built> {
    let_lift_loop(c, false)
}
pub(super) fn let_lift_sum(c: &mut Ctx) -> Option<Built> {
    let_lift_loop(c, true)
}

/// let-pair-split `(let ?x (pair ?a ?b) ?c)` =>
/// `(let x0 a (let x1 b c[x := (pair x0 x1)]))` (Pair-Elimination's let rule,
/// for definitions that are pairs; substitution).
pub(super) fn let_pair_split(c: &mut Ctx) -> Option<Built> {
    let (x, a, b, body) = (c.name(0)?, c.expr(1)?, c.expr(2)?, c.expr(3)?);
    let (x0, x1) = (c.fresh(x), c.fresh(x));
    let body = c.subst(
        &body,
        Replace::Var(x, build::pair(Expr::Var(x0), Expr::Var(x1))),
    )?;
    Some(Built::Expr(build::let_(x0, a, build::let_(x1, b, body))))
}

fn conjuncts(p: Pred, out: &mut Vec<Pred>) {
    match p {
        Pred::And(ps) => ps.into_iter().for_each(|q| conjuncts(q, out)),
        Pred::True => {}
        q => out.push(q),
    }
}

/// Find a conjunct `a == b` that determines `i` (coefficient +-1) and return
/// its solution and the other conjuncts.
fn solve_for(i: Symbol, p: Pred) -> Option<(Affine, Vec<Pred>)> {
    let mut cs = vec![];
    conjuncts(p, &mut cs);
    let k = cs.iter().position(|q| match q {
        Pred::Cmp(CmpOp::Eq, a, b) => a.sub(b).is_ok_and(|d| d.coeff(i).abs() == 1),
        _ => false,
    })?;
    let Pred::Cmp(_, a, b) = cs.remove(k) else {
        unreachable!()
    };
    let d = a.sub(&b).ok()?;
    let k = d.coeff(i);
    // d = k*i + r = 0  =>  i = -r/k = -k*r
    let r = d.substitute(i, &Affine::constant(0)).ok()?;
    Some((r.scale(-k).ok()?, cs))
}

/// index elimination `(sum ?i ?n (iverson ?p ?e))` with `i == a` among the
/// conjuncts of `p` => `[0 <= a < n and rest[i := a]] * e[i := a]`: solving
/// an equation and substituting are beyond patterns.
pub(super) fn sum_index_elim(c: &mut Ctx) -> Option<Built> {
    let (i, n, p, e) = (c.name(0)?, c.aff(1)?, c.pred(2)?, c.expr(3)?);
    let (s, rest) = solve_for(i, p)?;
    if s.mentions(i) {
        return None;
    }
    let rest = c.subst_pred(&Pred::And(rest), Replace::Index(i, s.clone()))?;
    let e = c.subst(&e, Replace::Index(i, s.clone()))?;
    let mut guard = vec![in_range(&s, &n)];
    conjuncts(rest, &mut guard);
    Some(Built::Expr(build::iverson(Pred::And(guard), e)))
}

/// `(exists ?i ?n ?p)` with `i == a` among the conjuncts of `p` =>
/// `0 <= a < n and rest[i := a]`.
pub(super) fn exists_index_elim(c: &mut Ctx) -> Option<Built> {
    let (i, n, p) = (c.name(0)?, c.aff(1)?, c.pred(2)?);
    let (s, rest) = solve_for(i, p)?;
    if s.mentions(i) {
        return None;
    }
    let rest = c.subst_pred(&Pred::And(rest), Replace::Index(i, s.clone()))?;
    let mut out = vec![in_range(&s, &n)];
    conjuncts(rest, &mut out);
    Some(Built::Pred(Pred::And(out)))
}
