//! The optimizer's named conditions and Rust appliers (the rules of
//! let-lifting, gen pushout, index elimination and the Iverson algebra that
//! a pattern cannot express).

use super::engine::{check, Built, Check, Ctx};
use crate::egraph::analysis::{name_of, smallest, AtlGraph};
use crate::egraph::language::{Atl, FromRec};
use crate::front::affine::Affine;
use crate::front::ast::{build, CmpOp, Expr, Pred};
use crate::front::subst::Replace;
use crate::symbol::Symbol;
use crate::terms::brackets::fixes_index;
use egg::{Id, Var};

/// `not-free(?x, ?e)`: the name in class `?x` is not free in `?e`.
pub(super) fn not_free(x: Var, e: Var) -> Check {
    check(move |g, s| name_of(g, s[x]).is_some_and(|n| !g.analysis.is_free(&g[s[e]].data, n)))
}

/// `has-loop(?e)`: the class holds a `sum`: work worth computing outside
/// a loop. (Only the class itself: a sum under a product would let the rule
/// fire on every regrouping of the product that associativity makes, and the
/// whole-program e-graphs grow to their node limits.)
pub(super) fn has_loop(e: Var) -> Check {
    check(move |g, s| g[s[e]].nodes.iter().any(|n| matches!(n, Atl::Sum(_))))
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

/// What the summands of a class (its nodes, and through its additions
/// those of the classes it adds, up to [`SUMMAND_CLASSES`] classes) give a
/// regrouping to work with.
#[derive(Default)]
struct Summands {
    /// The summand classes themselves.
    classes: Vec<Id>,
    /// The factors of their products.
    factors: Vec<Id>,
    /// The predicates of their brackets.
    brackets: Vec<Id>,
    /// A summand is a constant or a `let`.
    folds: bool,
}

/// How many classes [`summands`] looks through.
const SUMMAND_CLASSES: usize = 64;

fn summands(g: &AtlGraph, id: Id) -> Summands {
    let mut out = Summands::default();
    let mut todo = vec![g.find(id)];
    let mut seen = vec![];
    while let Some(c) = todo.pop() {
        if seen.contains(&c) || seen.len() >= SUMMAND_CLASSES {
            continue;
        }
        seen.push(c);
        out.classes.push(c);
        out.folds |= g[c].data.num.is_some();
        for n in &g[c].nodes {
            match n {
                Atl::Add([a, b]) => todo.extend([g.find(*a), g.find(*b)]),
                Atl::Mul([a, b]) => out.factors.extend([g.find(*a), g.find(*b)]),
                Atl::Iverson([p, _]) => out.brackets.push(g.find(*p)),
                Atl::Let(_) => out.folds = true,
                _ => {}
            }
        }
    }
    out
}

/// How many terms the class adds: through its first addition node, each
/// class once (every addition node of a class adds the same terms, in
/// another order or grouping).
fn width(g: &AtlGraph, id: Id, seen: &mut Vec<Id>) -> usize {
    let c = g.find(id);
    if seen.contains(&c) || seen.len() >= SUMMAND_CLASSES {
        return 1;
    }
    seen.push(c);
    let first = g[c].nodes.iter().find_map(|n| match n {
        Atl::Add([a, b]) => Some((*a, *b)),
        _ => None,
    });
    match first {
        Some((a, b)) => width(g, a, seen) + width(g, b, seen),
        None => 1,
    }
}

/// Sums of at most this many terms are regrouped every way.
const REGROUP_ALL: usize = 5;

/// `worth-grouping(?a, ?b, ?c)`: regrouping `a + (b + c)` as `(a + b) + c`
/// is worth its new addition `a + b`: the whole adds at most
/// [`REGROUP_ALL`] terms, or some term of `a` and some term of `b` (their
/// nodes, looking through their additions) can be combined by a rule that
/// is not a regrouping: equal terms or a term and a multiple of it (like
/// terms), products with a common factor (factoring), brackets of one
/// predicate, a constant or a `let` (folding, lifting). With commutativity,
/// associativity makes every grouping of a sum's k terms, about 3^k
/// e-nodes (seen: eight sums of products filling the simplify phase's node
/// limit); past a few terms, only the groupings that something combines.
pub(super) fn worth_grouping(a: Var, b: Var, c: Var) -> Check {
    check(move |g, s| {
        let mut seen = vec![];
        let terms =
            width(g, s[a], &mut seen) + width(g, s[b], &mut seen) + width(g, s[c], &mut seen);
        if terms <= REGROUP_ALL {
            return true;
        }
        let (x, y) = (summands(g, s[a]), summands(g, s[b]));
        let meets = |u: &[Id], v: &[Id]| u.iter().any(|i| v.contains(i));
        x.folds
            || y.folds
            || meets(&x.classes, &y.classes)
            || meets(&x.factors, &y.factors)
            || meets(&x.classes, &y.factors)
            || meets(&x.factors, &y.classes)
            || meets(&x.brackets, &y.brackets)
    })
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

/// iverson-merge `(iverson ?p (iverson ?q ?e))` => `[c]·e`, `c` the
/// conjuncts of `p` and `q` once each, in one fixed order (by their
/// printed form). Every nesting, order and grouping of the same brackets
/// over `e` merges into the one bracket `[c]·e`, and a bracket implied by
/// the one inside it goes (`[p]·[p ∧ q]·e` is `[p ∧ q]·e`): merging into
/// `p ∧ q` as written gave a new conjunction for each order and grouping,
/// which splitting and merging again multiplied without end. Sorting and
/// removing repeated conjuncts is beyond patterns.
pub(super) fn iverson_merge(c: &mut Ctx) -> Option<Built> {
    let (p, q) = (c.pred(0)?, c.pred(1)?);
    let mut all = vec![];
    conjuncts(p, &mut all);
    conjuncts(q, &mut all);
    let mut keyed: Vec<(String, Pred)> = all
        .into_iter()
        .map(|x| (crate::front::print::pred_to_string(&x), x))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.dedup_by(|a, b| a.0 == b.0);
    let merged = match keyed.len() {
        0 => Pred::True,
        1 => keyed.pop()?.1,
        _ => Pred::And(keyed.into_iter().map(|k| k.1).collect()),
    };
    let mut t = crate::egraph::language::ToRec::default();
    t.pred(&merged);
    let p = c.egraph.add_expr(&t.rec);
    let e = c.id(2);
    Some(Built::Class(c.egraph.add(Atl::Iverson([p, e]))))
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

/// hoist-gen-invariant `(gen ?i ?n (* ?a ?b))` with `i` not free in `b` =>
/// `(let t b (gen i n (* a t)))`: a factor that does not depend on the
/// loop's index is computed once, before the loop (let-lifting read
/// backwards: the binding made is one the inliner would undo, and the
/// extraction keeps whichever costs less). A fresh name, beyond patterns.
pub(super) fn hoist_gen_invariant(c: &mut Ctx) -> Option<Built> {
    let (iname, n, a, b) = (c.id(0), c.id(1), c.id(2), c.id(3));
    let t = c.fresh(Symbol::from("t"));
    let g = &mut *c.egraph;
    let tname = g.add(Atl::Sym(t));
    let tvar = g.add(Atl::Var(tname));
    let prod = g.add(Atl::Mul([a, tvar]));
    let gen = g.add(Atl::Gen([iname, n, prod]));
    Some(Built::Class(g.add(Atl::Let([tname, b, gen]))))
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

/// The conjuncts of `p` ([`crate::terms::brackets::conjuncts`]), owned.
fn conjuncts(p: Pred, out: &mut Vec<Pred>) {
    out.extend(crate::terms::brackets::conjuncts(&p).into_iter().cloned());
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
