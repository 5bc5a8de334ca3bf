//! Rewrite rules as data.
//!
//! The files of `rules/` are S-expressions, read with `symbolic_expressions`
//! (the format is `rules/README.md`):
//!
//! ```text
//! (group "Figure 'Gen-Pushout'" :tags (normalize simplify)   <- figure, rule sets
//!   (rule NAME LHS RHS :if (not-free ?i ?p))                  <- egg patterns, conditions
//!   (rule NAME LHS :applier (gen-pushout ?i ?n ?e ?a))        <- a Rust applier
//!   (rule NAME (F ?a) ... :for (F fst snd)))                  <- a template
//! ```
//!
//! Phases ask for rule sets by tag ([`rule_set`]); the rules are parsed and
//! compiled once.
//!
//! Conditions and appliers are registered by name: the optimizer's in this
//! module, the differentiation rules' in [`crate::derive::appliers`]; each
//! applier says beside it why a pattern cannot express its rule. Every rule
//! is validated by `tests/rule_validation.rs`, which evaluates both sides on
//! random instantiations.

use super::analysis::{name_of, smallest, AtlAnalysis, AtlGraph};
use super::language::{from_rec, to_rec, Atl, FromRec};
use crate::front::affine::Affine;
use crate::front::ast::{build, CmpOp, Expr, Pred};
use crate::front::subst::{Replace, Substituter};
use egg::{Applier, ConditionalApplier, Id, Pattern, PatternAst, Rewrite, Subst, Symbol, Var};
use std::sync::OnceLock;

/// The rule files, compiled into the binary.
pub const RULE_FILES: &[(&str, &str)] = &[
    (
        "let-lifting.rules",
        include_str!("../../rules/let-lifting.rules"),
    ),
    (
        "pair-elimination.rules",
        include_str!("../../rules/pair-elimination.rules"),
    ),
    (
        "gen-pushout.rules",
        include_str!("../../rules/gen-pushout.rules"),
    ),
    ("iverson.rules", include_str!("../../rules/iverson.rules")),
    ("algebra.rules", include_str!("../../rules/algebra.rules")),
    ("forward.rules", include_str!("../../rules/forward.rules")),
    ("adjoint.rules", include_str!("../../rules/adjoint.rules")),
];

/// One rule as written in a file.
#[derive(Clone, Debug)]
pub struct RuleSpec {
    pub file: &'static str,
    /// The title of the rule's group: the paper's figure or section.
    pub group: String,
    pub name: String,
    pub lhs: String,
    pub rhs: Rhs,
    pub conditions: Vec<(String, Vec<String>)>,
    /// The rule sets the rule belongs to (its group's and its own `:tags`).
    pub tags: Vec<String>,
}

#[derive(Clone, Debug)]
pub enum Rhs {
    Pattern(String),
    Applier(String, Vec<String>),
}

use symbolic_expressions::Sexp;

/// `text` without `;` comments (outside strings).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        for c in line.chars() {
            match c {
                '"' => in_string = !in_string,
                ';' if !in_string => break,
                _ => {}
            }
            out.push(c);
        }
        out.push('\n');
    }
    out
}

fn atom(s: &Sexp) -> Option<&str> {
    match s {
        Sexp::String(a) => Some(a),
        _ => None,
    }
}

/// A pattern written back as text (egg parses patterns from text).
fn sexp_text(s: &Sexp) -> String {
    match s {
        Sexp::String(a) => a.clone(),
        Sexp::List(v) => format!(
            "({})",
            v.iter().map(sexp_text).collect::<Vec<_>>().join(" ")
        ),
        Sexp::Empty => String::new(),
    }
}

/// `(NAME ARG ...)` of a condition or applier.
fn call_of(s: &Sexp) -> Result<(String, Vec<String>), String> {
    match s {
        Sexp::List(v) if !v.is_empty() => {
            let name = atom(&v[0]).ok_or("a call starts with a name")?;
            let args = v[1..]
                .iter()
                .map(|a| {
                    atom(a)
                        .map(str::to_string)
                        .ok_or("call arguments are atoms")
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((name.to_string(), args))
        }
        _ => Err(format!("expected (NAME ARG ...), found {}", sexp_text(s))),
    }
}

/// A list of atoms, `(a b c)`.
fn atoms(s: &Sexp) -> Result<Vec<String>, String> {
    match s {
        Sexp::List(v) => v
            .iter()
            .map(|a| {
                atom(a)
                    .map(str::to_string)
                    .ok_or_else(|| "expected atoms".into())
            })
            .collect(),
        _ => Err(format!("expected a list, found {}", sexp_text(s))),
    }
}

/// `(rule NAME LHS [RHS] :if C ... :applier (F ?a ...) :tags (..) :for (X a b ..))`.
fn parse_rule(
    file: &'static str,
    group: &str,
    group_tags: &[String],
    items: &[Sexp],
    out: &mut Vec<RuleSpec>,
) -> Result<(), String> {
    let name = items
        .get(1)
        .and_then(atom)
        .ok_or("(rule NAME LHS RHS ...): missing name")?
        .to_string();
    let at = |m: String| format!("rule {name}: {m}");
    let lhs = items
        .get(2)
        .ok_or_else(|| at("missing left-hand side".into()))?;
    let mut rest = &items[3..];
    let mut rhs = None;
    if let Some(r) = rest.first() {
        if !atom(r).is_some_and(|a| a.starts_with(':')) {
            rhs = Some(Rhs::Pattern(sexp_text(r)));
            rest = &rest[1..];
        }
    }
    let (mut conditions, mut tags, mut template) = (vec![], group_tags.to_vec(), None);
    while let Some(key) = rest.first() {
        let value = rest
            .get(1)
            .ok_or_else(|| at(format!("{} without a value", sexp_text(key))))?;
        match atom(key) {
            Some(":if") => conditions.push(call_of(value).map_err(at)?),
            Some(":applier") => {
                let (n, a) = call_of(value).map_err(at)?;
                if rhs.replace(Rhs::Applier(n, a)).is_some() {
                    return Err(at("both a right-hand side and an applier".into()));
                }
            }
            Some(":tags") => tags.extend(atoms(value).map_err(at)?),
            Some(":for") => {
                let v = atoms(value).map_err(at)?;
                if v.len() < 2 {
                    return Err(at(":for (VAR value ...)".into()));
                }
                template = Some((v[0].clone(), v[1..].to_vec()));
            }
            _ => return Err(at(format!("unknown keyword {}", sexp_text(key)))),
        }
        rest = &rest[2..];
    }
    let rhs = rhs.ok_or_else(|| at("no right-hand side and no :applier".into()))?;
    let spec = RuleSpec {
        file,
        group: group.to_string(),
        name: name.clone(),
        lhs: sexp_text(lhs),
        rhs,
        conditions,
        tags,
    };
    let Some((var, vals)) = template else {
        out.push(spec);
        return Ok(());
    };
    // one rule per value, the template variable replaced by the value
    for val in vals {
        let replace = |text: &str| -> Result<String, String> {
            let parsed =
                symbolic_expressions::parser::parse_str(text).map_err(|e| at(format!("{e}")))?;
            fn go(s: &Sexp, var: &str, val: &str) -> Sexp {
                match s {
                    Sexp::String(a) if a == var => Sexp::String(val.to_string()),
                    Sexp::List(v) => Sexp::List(v.iter().map(|x| go(x, var, val)).collect()),
                    other => other.clone(),
                }
            }
            Ok(sexp_text(&go(&parsed, &var, &val)))
        };
        let mut s = spec.clone();
        s.name = format!("{name}-{val}");
        s.lhs = replace(&spec.lhs)?;
        if let Rhs::Pattern(p) = &spec.rhs {
            s.rhs = Rhs::Pattern(replace(p)?);
        }
        out.push(s);
    }
    Ok(())
}

/// Parse one rule file (templates expanded): a sequence of
/// `(group "TITLE" :tags (SET ...) (rule ...) ...)`; see `rules/README.md`.
pub fn parse_rules(file: &'static str, text: &str) -> Result<Vec<RuleSpec>, String> {
    let at = |m: String| format!("{file}: {m}");
    let whole = format!("({})", strip_comments(text));
    let top = symbolic_expressions::parser::parse_str(&whole).map_err(|e| at(format!("{e}")))?;
    let Sexp::List(groups) = top else {
        return Err(at("expected (group ...) forms".into()));
    };
    let mut out = vec![];
    for g in &groups {
        let items = match g {
            Sexp::List(v) if v.first().and_then(atom) == Some("group") => v,
            _ => {
                return Err(at(format!(
                    "expected (group \"TITLE\" ...), found {}",
                    sexp_text(g)
                )))
            }
        };
        let title = items
            .get(1)
            .and_then(atom)
            .ok_or_else(|| at("(group \"TITLE\" ...): missing title".into()))?;
        let mut rest = &items[2..];
        let mut tags = vec![];
        if rest.first().and_then(atom) == Some(":tags") {
            tags = atoms(
                rest.get(1)
                    .ok_or_else(|| at(":tags without a value".into()))?,
            )
            .map_err(at)?;
            rest = &rest[2..];
        }
        for r in rest {
            match r {
                Sexp::List(v) if v.first().and_then(atom) == Some("rule") => {
                    parse_rule(file, title, &tags, v, &mut out).map_err(at)?
                }
                _ => return Err(at(format!("expected (rule ...), found {}", sexp_text(r)))),
            }
        }
    }
    Ok(out)
}

/// Every rule of every file (the black-box forward rules included).
pub fn all_specs() -> Vec<RuleSpec> {
    let mut out: Vec<RuleSpec> = RULE_FILES
        .iter()
        .flat_map(|(f, t)| parse_rules(f, t).unwrap_or_else(|e| panic!("bad rule file: {e}")))
        .collect();
    out.extend(crate::derive::appliers::forward_blackbox_specs());
    out
}

// -- conditions ---------------------------------------------------------------

fn var(s: &str) -> Result<Var, String> {
    s.parse()
        .map_err(|e| format!("bad pattern variable {s}: {e:?}"))
}

/// A side condition: a plain function of the e-graph and the classes a
/// match binds (as egg takes any closure for a [`egg::Condition`]).
pub type Check = Box<dyn Fn(&mut AtlGraph, &Subst) -> bool + Send + Sync>;

/// `f` as a [`Check`].
pub fn check(f: impl Fn(&mut AtlGraph, &Subst) -> bool + Send + Sync + 'static) -> Check {
    Box::new(f)
}

/// `not-free(?x, ?e)`: the name in class `?x` is not free in `?e`.
fn not_free(x: Var, e: Var) -> Check {
    check(move |g, s| name_of(g, s[x]).is_some_and(|n| !g.analysis.is_free(&g[s[e]].data, n)))
}

/// `distinct(?x, ?y)`: two name classes hold different names.
fn distinct(x: Var, y: Var) -> Check {
    check(move |g, s| name_of(g, s[x]) != name_of(g, s[y]))
}

/// `is-const(?k)`: the class holds a real constant.
fn is_const(k: Var) -> Check {
    check(move |g, s| g[s[k]].data.num.is_some())
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
fn adds_conjunct(p: Var, q: Var) -> Check {
    check(
        move |g, s| match (class_conjuncts(g, s[p]), class_conjuncts(g, s[q])) {
            (Some(a), Some(b)) => {
                !b.iter().all(|x| a.contains(x)) && !a.iter().all(|x| b.contains(x))
            }
            _ => true,
        },
    )
}

/// `index-fixed(?i, ?p)`: a conjunct of `p` is an equality that mentions
/// the index `i` (so a sum over `i` under `[p]` has at most one term, and
/// `∃i. p` has a closed form), and no conjunct is an `exists` (so moving
/// the bracket out of a sum as `∃i. p` happens once, not again on the
/// result).
fn index_fixed(i: Var, p: Var) -> Check {
    check(move |g, s| {
        let (Some(i), Some(cs)) = (name_of(g, s[i]), class_conjuncts(g, s[p])) else {
            return false;
        };
        let fixes = |q: &Pred| match q {
            Pred::Cmp(CmpOp::Eq, a, b) => a.sub(b).is_ok_and(|d| d.coeff(i) != 0),
            _ => false,
        };
        cs.iter().any(fixes) && !cs.iter().any(|q| matches!(q, Pred::Exists(..)))
    })
}

/// `not-bracket(?e)`: the class holds no `iverson` node, so a match of
/// `(iverson ?p ?e)` binds the whole bracket, not one of the nested brackets
/// that splitting a conjunction makes.
fn not_bracket(e: Var) -> Check {
    check(move |g, s| !g[s[e]].nodes.iter().any(|n| matches!(n, Atl::Iverson(_))))
}

/// `not-exists(?p)`: the predicate class holds no `exists` node.
fn not_exists(p: Var) -> Check {
    check(move |g, s| !g[s[p]].nodes.iter().any(|n| matches!(n, Atl::Exists(_))))
}

/// The condition `(name args...)` of `rules/`: the optimizer's own here,
/// the differentiation rules' in [`crate::derive::appliers`]; `None` for an
/// unknown name or a wrong number of arguments.
fn condition(name: &str, args: &[Var]) -> Option<Check> {
    Some(match (name, args) {
        ("not-free", &[x, e]) => not_free(x, e),
        ("distinct", &[x, y]) => distinct(x, y),
        ("is-const", &[k]) => is_const(k),
        ("adds-conjunct", &[p, q]) => adds_conjunct(p, q),
        ("index-fixed", &[i, p]) => index_fixed(i, p),
        ("not-bracket", &[e]) => not_bracket(e),
        ("not-exists", &[p]) => not_exists(p),
        _ => return crate::derive::appliers::condition(name, args),
    })
}

// -- Rust appliers ----------------------------------------------------------------

/// Terms bigger than this are not substituted into (keeps appliers cheap).
const MAX_SUBST_SIZE: usize = 4000;

/// What an applier sees: the matched classes, readable as core terms.
pub struct Ctx<'a> {
    pub(crate) egraph: &'a mut AtlGraph,
    ids: Vec<Id>,
    /// What this application is (rule and matched classes): names made by
    /// the applier are keyed by it, so reapplying makes the same names.
    key: String,
    /// Names made so far in this application.
    made: usize,
}

impl Ctx<'_> {
    pub(crate) fn id(&self, k: usize) -> Id {
        self.ids[k]
    }
    pub(crate) fn expr(&self, k: usize) -> Option<Expr> {
        let id = self.id(k);
        if self.egraph[id].data.size > MAX_SUBST_SIZE {
            return None;
        }
        from_rec(&smallest(self.egraph, id)?).ok()
    }
    pub(crate) fn pred(&self, k: usize) -> Option<Pred> {
        let rec = smallest(self.egraph, self.id(k))?;
        let root = Id::from(rec.as_ref().len() - 1);
        FromRec {
            node: |i: Id| &rec[i],
        }
        .pred(root)
        .ok()
    }
    pub(crate) fn name(&self, k: usize) -> Option<Symbol> {
        name_of(self.egraph, self.id(k))
    }
    pub(crate) fn aff(&self, k: usize) -> Option<Affine> {
        self.egraph[self.id(k)].data.aff.clone()
    }
    /// The `made`-th name of this application, based on `base`: the same
    /// each time the rule fires on the same classes.
    pub(crate) fn fresh(&mut self, base: Symbol) -> Symbol {
        let key = format!("{}/{}", self.key, self.made);
        self.made += 1;
        self.egraph.analysis.name_for(&key, base.as_str())
    }
    fn subst(&mut self, e: &Expr, r: Replace) -> Option<Expr> {
        let (key, made) = (&self.key, &mut self.made);
        let analysis: &mut AtlAnalysis = &mut self.egraph.analysis;
        let mut fresh = |b: Symbol| {
            let k = format!("{key}/{made}");
            *made += 1;
            analysis.name_for(&k, b.as_str())
        };
        Substituter::new(&mut fresh).expr(e, &r).ok()
    }
    fn subst_pred(&mut self, p: &Pred, r: Replace) -> Option<Pred> {
        let (key, made) = (&self.key, &mut self.made);
        let analysis: &mut AtlAnalysis = &mut self.egraph.analysis;
        let mut fresh = |b: Symbol| {
            let k = format!("{key}/{made}");
            *made += 1;
            analysis.name_for(&k, b.as_str())
        };
        Substituter::new(&mut fresh).pred(p, &r).ok()
    }
}

/// The result of an applier: an expression or a predicate to union with the
/// matched class.
pub enum Built {
    Expr(Expr),
    Pred(Pred),
    /// A class the applier added itself (terms with `D` nodes).
    Class(Id),
}

pub type ApplierFn = fn(&mut Ctx) -> Option<Built>;

/// `0 <= a < n` as a predicate.
fn in_range(a: &Affine, n: &Affine) -> Pred {
    Pred::And(vec![
        Pred::Cmp(CmpOp::Le, Affine::constant(0), a.clone()),
        Pred::Cmp(CmpOp::Lt, a.clone(), n.clone()),
    ])
}

/// gen-pushout `(get (gen ?i ?n ?e) ?a)` => `[0 <= a < n] * e[i := a]`:
/// substitution of an index, which patterns cannot express.
fn gen_pushout(c: &mut Ctx) -> Option<Built> {
    let (i, n, e, a) = (c.name(0)?, c.aff(1)?, c.expr(2)?, c.aff(3)?);
    let body = c.subst(&e, Replace::Index(i, a.clone()))?;
    Some(Built::Expr(build::iverson(in_range(&a, &n), body)))
}

/// let-inline `(let ?x ?a ?b)` => `b[x := a]` (substitution).
fn let_inline(c: &mut Ctx) -> Option<Built> {
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

fn let_lift_gen(c: &mut Ctx) -> Option<Built> {
    let_lift_loop(c, false)
}
fn let_lift_sum(c: &mut Ctx) -> Option<Built> {
    let_lift_loop(c, true)
}

/// let-pair-split `(let ?x (pair ?a ?b) ?c)` =>
/// `(let x0 a (let x1 b c[x := (pair x0 x1)]))` (Pair-Elimination's let rule,
/// for definitions that are pairs; substitution).
fn let_pair_split(c: &mut Ctx) -> Option<Built> {
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
fn sum_index_elim(c: &mut Ctx) -> Option<Built> {
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
fn exists_index_elim(c: &mut Ctx) -> Option<Built> {
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

/// The registry of Rust appliers, by the name used in `rules/`: the
/// optimizer's own here, the differentiation rules' in
/// [`crate::derive::appliers`].
pub fn applier_fn(name: &str) -> Option<ApplierFn> {
    Some(match name {
        "gen-pushout" => gen_pushout,
        "let-inline" => let_inline,
        "let-lift-gen" => let_lift_gen,
        "let-lift-sum" => let_lift_sum,
        "let-pair-split" => let_pair_split,
        "sum-index-elim" => sum_index_elim,
        "exists-index-elim" => exists_index_elim,
        _ => return crate::derive::appliers::applier_fn(name),
    })
}

struct RustApplier {
    f: ApplierFn,
    vars: Vec<Var>,
}

impl Applier<Atl, AtlAnalysis> for RustApplier {
    fn apply_one(
        &self,
        egraph: &mut AtlGraph,
        eclass: Id,
        subst: &Subst,
        _ast: Option<&PatternAst<Atl>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let ids: Vec<Id> = self.vars.iter().map(|v| egraph.find(subst[*v])).collect();
        let key = format!("{rule}/{}/{ids:?}", egraph.find(eclass));
        let mut ctx = Ctx {
            egraph,
            ids,
            key,
            made: 0,
        };
        let Some(built) = (self.f)(&mut ctx) else {
            return vec![];
        };
        let new = match built {
            Built::Expr(e) => egraph.add_expr(&to_rec(&e)),
            Built::Pred(p) => {
                let mut t = super::language::ToRec::default();
                t.pred(&p);
                egraph.add_expr(&t.rec)
            }
            Built::Class(id) => id,
        };
        if egraph.union(eclass, new) {
            vec![new]
        } else {
            vec![]
        }
    }

    fn vars(&self) -> Vec<Var> {
        self.vars.clone()
    }
}

/// Build an egg rewrite from a rule spec.
pub fn compile(spec: &RuleSpec) -> Result<Rewrite<Atl, AtlAnalysis>, String> {
    let err = |m: String| format!("{}: rule {}: {m}", spec.file, spec.name);
    let lhs: Pattern<Atl> = spec.lhs.parse().map_err(|e| err(format!("lhs: {e}")))?;
    let conds = spec
        .conditions
        .iter()
        .map(|(n, a)| {
            let vars = a.iter().map(|a| var(a)).collect::<Result<Vec<_>, _>>()?;
            condition(n, &vars).ok_or_else(|| {
                let s = if vars.len() == 1 { "" } else { "s" };
                format!("no condition '{n}' of {} argument{s}", vars.len())
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(err)?;
    let name = spec.name.clone();
    macro_rules! with_conditions {
        ($applier:expr) => {
            if conds.is_empty() {
                Rewrite::new(name, lhs, $applier)
            } else {
                Rewrite::new(
                    name,
                    lhs,
                    ConditionalApplier {
                        condition: move |g: &mut AtlGraph, _: Id, s: &Subst| {
                            conds.iter().all(|c| c(g, s))
                        },
                        applier: $applier,
                    },
                )
            }
        };
    }
    match &spec.rhs {
        Rhs::Pattern(p) => {
            let rhs: Pattern<Atl> = p.parse().map_err(|e| err(format!("rhs: {e}")))?;
            with_conditions!(rhs).map_err(err)
        }
        Rhs::Applier(n, args) => {
            let f = applier_fn(n).ok_or_else(|| err(format!("unknown applier '{n}'")))?;
            let vars = args
                .iter()
                .map(|a| var(a))
                .collect::<Result<Vec<_>, _>>()
                .map_err(err)?;
            with_conditions!(RustApplier { f, vars }).map_err(err)
        }
    }
}

/// A compiled rule and the rule sets it belongs to.
type Tagged = (Vec<String>, Rewrite<Atl, AtlAnalysis>);

/// Every rule, compiled once, with its rule sets.
fn compiled() -> &'static [Tagged] {
    static RULES: OnceLock<Vec<Tagged>> = OnceLock::new();
    RULES.get_or_init(|| {
        all_specs()
            .iter()
            .map(|s| (s.tags.clone(), compile(s).unwrap_or_else(|e| panic!("{e}"))))
            .collect()
    })
}

/// The rules of the rule sets `tags` (the tags written in `rules/`): those
/// of the first set in file order, then those of the next set not taken yet,
/// and so on.
pub fn rule_set(tags: &[&str]) -> Vec<Rewrite<Atl, AtlAnalysis>> {
    let all = compiled();
    let mut taken = vec![false; all.len()];
    let mut out = vec![];
    for tag in tags {
        for (k, (ts, r)) in all.iter().enumerate() {
            if !taken[k] && ts.iter().any(|t| t == tag) {
                taken[k] = true;
                out.push(r.clone());
            }
        }
    }
    out
}
