//! Rewrite rules as data.
//!
//! The files of `rules/` hold one rule a line:
//!
//! ```text
//! ## Figure "Gen-Pushout"                      <- a group header (kept for reports)
//! name: LHS => RHS                             <- both sides egg patterns
//! name: LHS => RHS if cond(?a, ?b), cond2(?c)  <- named side conditions
//! name: LHS => !applier(?a, ?b)                <- a Rust applier, by name
//! name[F=exp,log]: (F ?x) => ...               <- a template, one rule per value
//! ```
//!
//! Conditions and appliers are registered by name in this module; each
//! applier says beside it why a pattern cannot express its rule. Every rule
//! is validated by `tests/rule_validation.rs`, which evaluates both sides on
//! random instantiations.

use super::analysis::{name_of, smallest, AtlAnalysis, AtlGraph};
use super::language::{from_rec, to_rec, Atl, FromRec};
use crate::front::affine::Affine;
use crate::front::ast::{build, CmpOp, Expr, Pred};
use crate::front::names;
use crate::front::subst::{Replace, Substituter};
use egg::{
    Applier, Condition, ConditionalApplier, Id, Pattern, PatternAst, Rewrite, Subst, Symbol, Var,
};
use std::sync::Arc;

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

/// The black boxes' derivatives, as data: `F: (F ?x) => F'(?x)`.
pub const DERIVATIVES: &str = include_str!("../../rules/derivatives.rules");

/// The derivative table: (black box name, lhs pattern, derivative pattern).
pub fn derivative_table() -> Vec<(String, String, String)> {
    parse_rules("derivatives.rules", DERIVATIVES)
        .unwrap_or_else(|e| panic!("bad derivative table: {e}"))
        .into_iter()
        .filter_map(|s| match s.rhs {
            Rhs::Pattern(p) => Some((s.name, s.lhs, p)),
            Rhs::Applier(..) => None,
        })
        .collect()
}

/// The forward rules of the black boxes, made from the table:
/// `(D (F ?x)) => (* F'(?x) (D ?x))`.
pub fn forward_blackbox_specs() -> Vec<RuleSpec> {
    derivative_table()
        .into_iter()
        .map(|(name, lhs, d)| RuleSpec {
            file: "derivatives.rules",
            group: "black-box derivatives".into(),
            name: format!("d-{name}"),
            lhs: format!("(D {lhs})"),
            rhs: Rhs::Pattern(format!("(* {d} (D ?x))")),
            conditions: vec![],
        })
        .collect()
}

/// One rule as written in a file.
#[derive(Clone, Debug)]
pub struct RuleSpec {
    pub file: &'static str,
    pub group: String,
    pub name: String,
    pub lhs: String,
    pub rhs: Rhs,
    pub conditions: Vec<(String, Vec<String>)>,
}

#[derive(Clone, Debug)]
pub enum Rhs {
    Pattern(String),
    Applier(String, Vec<String>),
}

fn parse_call(s: &str) -> Result<(String, Vec<String>), String> {
    let s = s.trim();
    let open = s
        .find('(')
        .ok_or_else(|| format!("expected name(args) in '{s}'"))?;
    let close = s
        .rfind(')')
        .ok_or_else(|| format!("expected ')' in '{s}'"))?;
    let args = s[open + 1..close]
        .split(',')
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    Ok((s[..open].trim().to_string(), args))
}

/// Split the condition list `a(?x), b(?y, ?z)` at top-level commas.
fn split_conditions(s: &str) -> Vec<String> {
    let mut out = vec![];
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// Parse one rule file (templates expanded).
pub fn parse_rules(file: &'static str, text: &str) -> Result<Vec<RuleSpec>, String> {
    let mut group = String::from("(none)");
    let mut out = vec![];
    for (k, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let at = |m: String| format!("{file}:{}: {m}", k + 1);
        if let Some(h) = line.strip_prefix("##") {
            group = h.trim().to_string();
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (head, rest) = line
            .split_once(':')
            .ok_or_else(|| at("expected 'name: lhs => rhs'".into()))?;
        let (lhs, rhs_all) = rest
            .split_once("=>")
            .ok_or_else(|| at("expected '=>'".into()))?;
        let (rhs, conds) = match rhs_all.split_once(" if ") {
            Some((r, c)) => (r.trim(), c.trim()),
            None => (rhs_all.trim(), ""),
        };
        let conditions = split_conditions(conds)
            .iter()
            .map(|c| parse_call(c).map_err(at))
            .collect::<Result<Vec<_>, _>>()?;
        let rhs = match rhs.strip_prefix('!') {
            Some(call) => {
                let (n, a) = parse_call(call).map_err(at)?;
                Rhs::Applier(n, a)
            }
            None => Rhs::Pattern(rhs.to_string()),
        };
        let head = head.trim();
        let (name, instances) = match head.split_once('[') {
            Some((n, t)) => {
                let t = t
                    .strip_suffix(']')
                    .ok_or_else(|| at("unclosed template".into()))?;
                let (var, vals) = t
                    .split_once('=')
                    .ok_or_else(|| at("template is [X=a,b]".into()))?;
                let vals: Vec<(String, String)> = vals
                    .split(',')
                    .map(|v| (var.trim().to_string(), v.trim().to_string()))
                    .collect();
                (n.trim().to_string(), vals)
            }
            None => (head.to_string(), vec![]),
        };
        let spec = RuleSpec {
            file,
            group: group.clone(),
            name: name.clone(),
            lhs: lhs.trim().to_string(),
            rhs,
            conditions,
        };
        if instances.is_empty() {
            out.push(spec);
        } else {
            for (var, val) in instances {
                let subst = |s: &str| {
                    s.split_inclusive(['(', ' ', ')'])
                        .map(|tok| {
                            let core = tok.trim_end_matches(['(', ' ', ')']);
                            if core == var {
                                format!("{val}{}", &tok[core.len()..])
                            } else {
                                tok.to_string()
                            }
                        })
                        .collect::<String>()
                };
                let mut s = spec.clone();
                s.name = format!("{name}-{val}");
                s.lhs = subst(&spec.lhs);
                s.rhs = match &spec.rhs {
                    Rhs::Pattern(p) => Rhs::Pattern(subst(p)),
                    a => a.clone(),
                };
                out.push(s);
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
    out.extend(forward_blackbox_specs());
    out
}

// -- conditions ---------------------------------------------------------------

fn var(s: &str) -> Result<Var, String> {
    s.parse()
        .map_err(|e| format!("bad pattern variable {s}: {e:?}"))
}

/// `not-free(?x, ?e)`: the name in class `?x` is not free in `?e`.
struct NotFree(Var, Var);

impl Condition<Atl, AtlAnalysis> for NotFree {
    fn check(&self, egraph: &mut AtlGraph, _eclass: Id, subst: &Subst) -> bool {
        match name_of(egraph, subst[self.0]) {
            Some(x) => !egraph.analysis.is_free(&egraph[subst[self.1]].data, x),
            None => false,
        }
    }
}

/// `distinct(?x, ?y)`: two name classes hold different names.
struct Distinct(Var, Var);

impl Condition<Atl, AtlAnalysis> for Distinct {
    fn check(&self, egraph: &mut AtlGraph, _eclass: Id, subst: &Subst) -> bool {
        name_of(egraph, subst[self.0]) != name_of(egraph, subst[self.1])
    }
}

/// `is-const(?k)`: the class holds a real constant.
struct IsConst(Var);

impl Condition<Atl, AtlAnalysis> for IsConst {
    fn check(&self, egraph: &mut AtlGraph, _eclass: Id, subst: &Subst) -> bool {
        egraph[subst[self.0]].data.num.is_some()
    }
}

/// The tangent of the variable named in class `id` (sigma(x)).
fn tangent_of(egraph: &AtlGraph, id: Id) -> Option<Symbol> {
    let x = name_of(egraph, id)?;
    egraph.analysis.tangents.get(&x).copied()
}

/// `tangent-free(?a)`: no tangent name is free in `?a`.
struct TangentFree(Var);

impl Condition<Atl, AtlAnalysis> for TangentFree {
    fn check(&self, egraph: &mut AtlGraph, _eclass: Id, subst: &Subst) -> bool {
        !egraph
            .analysis
            .mentions_tangent(&egraph[subst[self.0]].data)
    }
}

/// `tangent-not-free(?x, ?e)`: the tangent of the variable `?x` is not free
/// in `?e` (true when `?x` has no tangent).
struct TangentNotFree(Var, Var);

impl Condition<Atl, AtlAnalysis> for TangentNotFree {
    fn check(&self, egraph: &mut AtlGraph, _eclass: Id, subst: &Subst) -> bool {
        match tangent_of(egraph, subst[self.0]) {
            Some(dx) => !egraph.analysis.is_free(&egraph[subst[self.1]].data, dx),
            None => name_of(egraph, subst[self.0]).is_some(),
        }
    }
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
struct RootNotFree(Var, Var);

impl Condition<Atl, AtlAnalysis> for RootNotFree {
    fn check(&self, egraph: &mut AtlGraph, _eclass: Id, subst: &Subst) -> bool {
        match path_of(egraph, subst[self.0]) {
            Some((r, _)) => !egraph.analysis.is_free(&egraph[subst[self.1]].data, r),
            None => false,
        }
    }
}

/// `rooted-at(?q, ?x)` / `not-rooted-at(?q, ?x)`: the path `?q` is (is not)
/// an access to the tangent of `?x`.
struct RootedAt(Var, Var, bool);

impl Condition<Atl, AtlAnalysis> for RootedAt {
    fn check(&self, egraph: &mut AtlGraph, _eclass: Id, subst: &Subst) -> bool {
        match (
            path_of(egraph, subst[self.0]),
            tangent_of(egraph, subst[self.1]),
        ) {
            (Some((r, _)), Some(dx)) => (r == dx) == self.2,
            (Some(_), None) => !self.2,
            _ => false,
        }
    }
}

/// `settled(?b)`: the class is not a differential binding still waiting to
/// be turned around (it holds no `dlet`, or also a `let` made from one).
/// adj-swap-let moves a differential binding only past settled bodies, so
/// the bindings are turned around innermost first, as in the paper, and the
/// e-graph does not hold every interleaving of the pending ones (a number
/// exponential in the length of the chain).
struct Settled(Var);

impl Condition<Atl, AtlAnalysis> for Settled {
    fn check(&self, egraph: &mut AtlGraph, _eclass: Id, subst: &Subst) -> bool {
        let nodes = &egraph[subst[self.0]].nodes;
        !nodes.iter().any(|n| matches!(n, Atl::DLet(_)))
            || nodes.iter().any(|n| matches!(n, Atl::Let(_)))
    }
}

struct AllOf(Vec<Box<dyn Condition<Atl, AtlAnalysis> + Send + Sync>>);

impl Condition<Atl, AtlAnalysis> for AllOf {
    fn check(&self, egraph: &mut AtlGraph, eclass: Id, subst: &Subst) -> bool {
        self.0.iter().all(|c| c.check(egraph, eclass, subst))
    }
}

fn condition(
    name: &str,
    args: &[String],
) -> Result<Box<dyn Condition<Atl, AtlAnalysis> + Send + Sync>, String> {
    let two = || -> Result<(Var, Var), String> {
        match args {
            [a, b] => Ok((var(a)?, var(b)?)),
            _ => Err(format!("{name} takes 2 arguments")),
        }
    };
    Ok(match name {
        "not-free" => {
            let (a, b) = two()?;
            Box::new(NotFree(a, b))
        }
        "is-const" => match args {
            [a] => Box::new(IsConst(var(a)?)),
            _ => return Err(format!("{name} takes 1 argument")),
        },
        "distinct" => {
            let (a, b) = two()?;
            Box::new(Distinct(a, b))
        }
        "tangent-free" => match args {
            [a] => Box::new(TangentFree(var(a)?)),
            _ => return Err(format!("{name} takes 1 argument")),
        },
        "settled" => match args {
            [a] => Box::new(Settled(var(a)?)),
            _ => return Err(format!("{name} takes 1 argument")),
        },
        "tangent-not-free" => {
            let (a, b) = two()?;
            Box::new(TangentNotFree(a, b))
        }
        "root-not-free" => {
            let (a, b) = two()?;
            Box::new(RootNotFree(a, b))
        }
        "rooted-at" => {
            let (a, b) = two()?;
            Box::new(RootedAt(a, b, true))
        }
        "not-rooted-at" => {
            let (a, b) = two()?;
            Box::new(RootedAt(a, b, false))
        }
        _ => return Err(format!("unknown condition '{name}'")),
    })
}

// -- Rust appliers ----------------------------------------------------------------

/// Terms bigger than this are not substituted into (keeps appliers cheap).
const MAX_SUBST_SIZE: usize = 4000;

/// What an applier sees: the matched classes, readable as core terms.
pub struct Ctx<'a> {
    egraph: &'a mut AtlGraph,
    ids: Vec<Id>,
    /// What this application is (rule and matched classes): names made by
    /// the applier are keyed by it, so reapplying makes the same names.
    key: String,
    /// Names made so far in this application.
    made: usize,
}

impl Ctx<'_> {
    fn id(&self, k: usize) -> Id {
        self.ids[k]
    }
    fn expr(&self, k: usize) -> Option<Expr> {
        let id = self.id(k);
        if self.egraph[id].data.size > MAX_SUBST_SIZE {
            return None;
        }
        from_rec(&smallest(self.egraph, id)?).ok()
    }
    fn pred(&self, k: usize) -> Option<Pred> {
        let rec = smallest(self.egraph, self.id(k))?;
        let root = Id::from(rec.as_ref().len() - 1);
        FromRec {
            node: |i: Id| &rec[i],
        }
        .pred(root)
        .ok()
    }
    fn name(&self, k: usize) -> Option<Symbol> {
        name_of(self.egraph, self.id(k))
    }
    fn aff(&self, k: usize) -> Option<Affine> {
        self.egraph[self.id(k)].data.aff.clone()
    }
    /// The `made`-th name of this application, based on `base`: the same
    /// each time the rule fires on the same classes.
    fn fresh(&mut self, base: Symbol) -> Symbol {
        let key = format!("{}/{}", self.key, self.made);
        self.made += 1;
        self.egraph.analysis.name_for(&key, base.as_str())
    }
    fn subst(&mut self, e: &Expr, r: Replace) -> Option<Expr> {
        let (key, made) = (&self.key, &mut self.made);
        let analysis: &mut AtlAnalysis = &mut self.egraph.analysis;
        let mut fresh = |b: Symbol| {
            *made += 1;
            analysis.name_for(&format!("{key}/{made}"), b.as_str())
        };
        Substituter::new(&mut fresh).expr(e, &r).ok()
    }
    fn subst_pred(&mut self, p: &Pred, r: Replace) -> Option<Pred> {
        let (key, made) = (&self.key, &mut self.made);
        let analysis: &mut AtlAnalysis = &mut self.egraph.analysis;
        let mut fresh = |b: Symbol| {
            *made += 1;
            analysis.name_for(&format!("{key}/{made}"), b.as_str())
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

type ApplierFn = fn(&mut Ctx) -> Option<Built>;

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

/// d-var `(D (var ?x))`: the tangent variable of `x` under sigma, or the
/// zero of `x`'s type for inputs that are not differentiated (a lookup in
/// the environment sigma, which patterns cannot do).
fn d_var(c: &mut Ctx) -> Option<Built> {
    let x = c.name(0)?;
    if let Some(dx) = c.egraph.analysis.tangents.get(&x).copied() {
        return Some(Built::Expr(Expr::Var(dx)));
    }
    let t = c.egraph.analysis.constants.get(&x)?.clone();
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
    while let crate::front::ast::Type::Tensor(d, e) = ty {
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
fn d_const(c: &mut Ctx) -> Option<Built> {
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
fn d_let(c: &mut Ctx) -> Option<Built> {
    let x = c.name(0)?;
    let (xid, a, b) = (c.id(0), c.id(1), c.id(2));
    let dx = match c.egraph.analysis.tangents.get(&x) {
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

/// adj-gen `(dot ?w (gen ?i ?n ?e))` => `(sum i n (dot (get w @i) e))`:
/// the index `i` turns from a name (the binder) into an index expression
/// (the access `w[i]`), which patterns cannot do.
fn adj_gen(c: &mut Ctx) -> Option<Built> {
    let (w, i, n, e) = (c.id(0), c.name(1)?, c.id(2), c.id(3));
    if c.egraph.analysis.is_free(&c.egraph[w].data, i) {
        return None;
    }
    let g = &mut *c.egraph;
    let iname = g.add(Atl::Sym(i));
    let iaff = g.add(Atl::Aff(super::language::Idx(Affine::var(i))));
    let wi = g.add(Atl::Get([w, iaff]));
    let dot = g.add(Atl::Dot([wi, e]));
    Some(Built::Class(g.add(Atl::Sum([iname, n, dot]))))
}

/// The coefficients of the tangent entry path `path` (of type `t`) in the
/// linear form `s`, as a value of type `t`: `(coeff path s)` for a real,
/// `(gen g n ...)` for a tensor, a pair of both sides. The indices are named
/// after `key` (the variable) and their position, once.
pub fn coefficients(
    g: &mut AtlGraph,
    t: &crate::front::ast::Type,
    key: &str,
    path: Id,
    s: Id,
) -> Id {
    use crate::front::ast::Type;
    match t {
        Type::Real => g.add(Atl::Coeff([path, s])),
        Type::Tensor(n, e) => {
            let key = format!("{key}.");
            let k = g.analysis.name_for(&key, "g");
            g.analysis.extents.insert(k, n.clone());
            let kname = g.add(Atl::Sym(k));
            let kaff = g.add(Atl::Aff(super::language::Idx(Affine::var(k))));
            let inner_path = g.add(Atl::Get([path, kaff]));
            let body = coefficients(g, e, &key, inner_path, s);
            let nid = g.add(Atl::Aff(super::language::Idx(n.clone())));
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
fn adj_rev_let(c: &mut Ctx) -> Option<Built> {
    let (xid, d, s) = (c.id(0), c.id(1), c.id(2));
    let x = c.name(0)?;
    if c.egraph[s]
        .nodes
        .iter()
        .any(|n| matches!(n, Atl::Let(_) | Atl::DLet(_)))
    {
        return None;
    }
    let dx = *c.egraph.analysis.tangents.get(&x)?;
    let t = c.egraph.analysis.types.get(&x)?.clone();
    let cx = c
        .egraph
        .analysis
        .name_for(&format!("{x}"), &format!("{}_bar", names::base(x.as_str())));
    c.egraph.analysis.types.insert(cx, t.clone());
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
fn adj_coeff_dot(c: &mut Ctx) -> Option<Built> {
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
                let a = g.add(Atl::Aff(super::language::Idx(i.clone())));
                g.add(Atl::Get([out, a]))
            }
            PathStep::Fst => g.add(Atl::Fst(out)),
            PathStep::Snd => g.add(Atl::Snd(out)),
        };
    }
    let mut pred: Option<Id> = None;
    for (i, j) in eqs {
        let (a, b) = (
            g.add(Atl::Aff(super::language::Idx(i))),
            g.add(Atl::Aff(super::language::Idx(j))),
        );
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

/// The registry of Rust appliers, by the name used in `rules/`.
pub fn applier_fn(name: &str) -> Option<ApplierFn> {
    Some(match name {
        "gen-pushout" => gen_pushout,
        "let-inline" => let_inline,
        "let-lift-gen" => let_lift_gen,
        "let-lift-sum" => let_lift_sum,
        "let-pair-split" => let_pair_split,
        "sum-index-elim" => sum_index_elim,
        "exists-index-elim" => exists_index_elim,
        "d-var" => d_var,
        "d-const" => d_const,
        "d-let" => d_let,
        "adj-gen" => adj_gen,
        "adj-rev-let" => adj_rev_let,
        "adj-coeff-dot" => adj_coeff_dot,
        _ => return None,
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
        .map(|(n, a)| condition(n, a))
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
                        condition: AllOf(conds),
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

/// Rewrites of the named files (every optimization file when `files` is
/// empty; the derivative files only when named).
pub fn rewrites(files: &[&str]) -> Vec<Rewrite<Atl, AtlAnalysis>> {
    const DERIVATIVE_FILES: [&str; 3] = ["forward.rules", "derivatives.rules", "adjoint.rules"];
    all_specs()
        .iter()
        .filter(|s| {
            if files.is_empty() {
                !DERIVATIVE_FILES.contains(&s.file)
            } else {
                files.contains(&s.file)
            }
        })
        .map(|s| compile(s).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// Shared, compiled rule sets.
pub fn shared_rewrites(files: &[&str]) -> Arc<Vec<Rewrite<Atl, AtlAnalysis>>> {
    Arc::new(rewrites(files))
}
