//! The adjoint (reverse-mode) derivative, purely functional: no `+=`, no
//! tape (paper section 5.3, Figures "Adjoint Derivative of Tensors").
//!
//! The program is first put in the paper's flat form ([`super::normalize`]):
//! let-free bindings `X1 = e1; ...; Xk = ek` and a result, with every
//! operand of a product or black box an atom. Bindings are then visited in
//! reverse. The cotangent of a binding is known once every later binding
//! has been visited: it is the sum of the *contributions* made to it. A
//! contribution is the paper's guarded inner product `<dY | D[X[a]]>_[p]`
//! kept as data: the loops around the use (`gen` and `sum` indices alike:
//! the adjoint of a broadcast is a sum), the Iverson predicates around it,
//! the access indices `a`, and the scalar cotangent at the use.
//!
//! Turning contributions into a tensor is where sparsity is kept (the
//! reason for the paper's predicates): the cotangent `dX[g]` gathers
//! `Σ_loops [p ∧ g == a] · ct`, and every equation `g == a` whose `a` has a
//! loop variable with coefficient ±1 is *solved* for it and the loop
//! removed (the index elimination of section 2.1), so that the adjoint of
//! `trace` costs `n`, not `n²`. Contributions are added under the bracket
//! of the disjunction of their predicates (rule "add-inner-prods": `let dY =
//! [p0]e0 + [p1]e1 in <dY|dX>_[p0 ∨ p1]`), so an addition counts only where
//! both sides are non-zero.
//!
//! Values with pairs are handled component by component (struct of arrays):
//! the cotangent of a variable is one tensor of reals per real component of
//! its type, rebuilt into the variable's own type only for the inputs.

use super::normalize::{anf, dead_code, lift, Fresh};
use crate::egraph::extract::{build_term, Term};
use crate::egraph::language::Atl;
use crate::egraph::rules::derivative_table;
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{build, CmpOp, Expr, Func, Pred, Program, Real, Type};
use crate::front::subst::{Replace, Substituter};
use crate::front::types::{param_env, type_of, zero_of, TypeEnv};
use egg::{ENodeOrVar, Id, Pattern, Symbol};
use std::collections::HashMap;
use std::rc::Rc;

/// One step into a value: an element of a tensor, or a side of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Step {
    T,
    Fst,
    Snd,
}

/// A real component of a type: the steps to reach it, with the dimension
/// of every tensor step.
type Comp = Vec<Step>;

fn components(t: &Type) -> Vec<(Comp, Vec<Affine>)> {
    match t {
        Type::Real => vec![(vec![], vec![])],
        Type::Tensor(d, e) => components(e)
            .into_iter()
            .map(|(mut c, mut ds)| {
                c.insert(0, Step::T);
                ds.insert(0, d.clone());
                (c, ds)
            })
            .collect(),
        Type::Pair(a, b) => {
            let mut out = vec![];
            for (side, t) in [(Step::Fst, a), (Step::Snd, b)] {
                for (mut c, ds) in components(t) {
                    c.insert(0, side);
                    out.push((c, ds));
                }
            }
            out
        }
    }
}

/// Where the cotangent of a component comes from.
#[derive(Clone, Debug)]
enum Base {
    /// A tensor of reals indexed by the component's tensor steps only.
    Soa(Expr),
    /// A value of the variable's own type (the seed): walk every step.
    Whole(Expr),
}

/// The cotangent of the sub-expression being visited.
#[derive(Clone, Debug)]
enum Ct {
    /// Part of a binding's cotangent: its components, the steps taken so far
    /// and the indices of the tensor steps among them.
    Tree {
        bases: Rc<HashMap<Comp, Base>>,
        prefix: Comp,
        idx: Vec<Affine>,
    },
    /// A real cotangent computed at a use (after products, black boxes).
    Scalar(Expr),
}

impl Ct {
    /// The real cotangent of sub-component `sub` (extra tensor indices
    /// `more`), or None where it is zero.
    fn at(&self, sub: &[Step], more: &[Affine]) -> Option<Expr> {
        match self {
            Ct::Scalar(e) => sub.is_empty().then(|| e.clone()),
            Ct::Tree { bases, prefix, idx } => {
                let mut comp = prefix.clone();
                comp.extend_from_slice(sub);
                let mut indices = idx.iter().chain(more.iter());
                match bases.get(&comp)? {
                    Base::Soa(e) => {
                        let mut out = e.clone();
                        for s in &comp {
                            if *s == Step::T {
                                out = build::get(out, indices.next()?.clone());
                            }
                        }
                        Some(out)
                    }
                    Base::Whole(e) => {
                        let mut out = e.clone();
                        for s in &comp {
                            out = match s {
                                Step::T => build::get(out, indices.next()?.clone()),
                                Step::Fst => build::fst(out),
                                Step::Snd => build::snd(out),
                            };
                        }
                        Some(out)
                    }
                }
            }
        }
    }

    fn step(&self, s: Step, index: Option<Affine>) -> Ct {
        match self {
            Ct::Tree { bases, prefix, idx } => {
                let mut prefix = prefix.clone();
                prefix.push(s);
                let mut idx = idx.clone();
                idx.extend(index);
                Ct::Tree {
                    bases: bases.clone(),
                    prefix,
                    idx,
                }
            }
            Ct::Scalar(_) => self.clone(),
        }
    }
}

/// The loops and brackets around a use.
#[derive(Clone, Debug, Default)]
struct Ctx {
    loops: Vec<(Symbol, Affine)>,
    guards: Vec<Pred>,
}

/// `<ct | D[x[targets]]>` over `loops` where `guards` hold, for one real
/// component of `x`.
#[derive(Clone, Debug)]
struct Contrib {
    comp: Comp,
    targets: Vec<Affine>,
    loops: Vec<(Symbol, Affine)>,
    guards: Vec<Pred>,
    body: Expr,
}

struct Adjoint<'a> {
    fresh: &'a mut Fresh,
    types: TypeEnv,
    /// Variables whose cotangent is wanted: `--wrt` inputs and bindings.
    active: std::collections::HashSet<Symbol>,
    contribs: HashMap<Symbol, Vec<Contrib>>,
    derivs: HashMap<String, (Pattern<Atl>, Pattern<Atl>)>,
}

/// Split an atom into its variable and the accesses/projections on it.
/// Accesses and projections applied to a variable, innermost first.
type AccessPath = Vec<(Step, Option<Affine>)>;

fn atom_path(e: &Expr) -> Option<(Symbol, AccessPath)> {
    match e {
        Expr::Var(x) => Some((*x, vec![])),
        Expr::Get(a, i) => {
            let (x, mut p) = atom_path(a)?;
            p.push((Step::T, Some(i.clone())));
            Some((x, p))
        }
        Expr::Fst(a) | Expr::Snd(a) => {
            let (x, mut p) = atom_path(a)?;
            p.push((
                if matches!(e, Expr::Fst(_)) {
                    Step::Fst
                } else {
                    Step::Snd
                },
                None,
            ));
            Some((x, p))
        }
        _ => None,
    }
}

/// Walk a type along steps.
fn type_after(mut t: &Type, path: &[(Step, Option<Affine>)]) -> Option<Type> {
    for (s, _) in path {
        t = match (s, t) {
            (Step::T, Type::Tensor(_, e)) => e,
            (Step::Fst, Type::Pair(a, _)) => a,
            (Step::Snd, Type::Pair(_, b)) => b,
            _ => return None,
        };
    }
    Some(t.clone())
}

fn fold_consts(e: Expr) -> Expr {
    match &e {
        Expr::Add(a, b) | Expr::Mul(a, b) => match (&**a, &**b) {
            (Expr::Const(x), Expr::Const(y)) => Expr::Const(Real(if matches!(e, Expr::Add(..)) {
                x.0 + y.0
            } else {
                x.0 * y.0
            })),
            _ => e,
        },
        _ => e,
    }
}

/// Instantiate a derivative pattern with `?x := arg`, `?k := k`.
fn instantiate(p: &Pattern<Atl>, arg: &Expr, k: Option<Real>) -> Option<Expr> {
    let ast = p.ast.as_ref();
    let mut terms: Vec<Rc<Term>> = Vec::with_capacity(ast.len());
    for node in ast {
        let t = match node {
            ENodeOrVar::Var(v) => match v.to_string().as_str() {
                "?x" => Term::Expr(arg.clone()),
                "?k" => Term::Expr(Expr::Const(k?)),
                _ => return None,
            },
            ENodeOrVar::ENode(n) => {
                let mut kid = |id: Id| Some((*terms[usize::from(id)]).clone());
                match build_term(n, &mut kid)? {
                    Term::Expr(e) => Term::Expr(fold_consts(e)),
                    t => t,
                }
            }
        };
        terms.push(Rc::new(t));
    }
    match &*terms.pop()? {
        Term::Expr(e) => Some(e.clone()),
        _ => None,
    }
}

impl Adjoint<'_> {
    fn derivative(&self, f: Func, arg: &Expr) -> Result<Expr> {
        let (_, d) = self
            .derivs
            .get(f.name())
            .ok_or_else(|| Error::transform(format!("no derivative for {}", f.name())))?;
        instantiate(d, arg, f.exponent())
            .ok_or_else(|| Error::transform(format!("bad derivative pattern for {}", f.name())))
    }

    /// Visit `e` with cotangent `ct`, recording contributions.
    fn visit(&mut self, e: &Expr, ct: &Ct, ctx: &Ctx) -> Result<()> {
        if let Some((x, path)) = atom_path(e) {
            return self.use_of(x, &path, ct, ctx);
        }
        match e {
            Expr::Const(_) => Ok(()),
            Expr::Add(a, b) => {
                self.visit(a, ct, ctx)?;
                self.visit(b, ct, ctx)
            }
            Expr::Mul(a, b) => {
                let Some(s) = ct.at(&[], &[]) else {
                    return Ok(());
                };
                if !matches!(**a, Expr::Const(_)) {
                    self.visit(a, &Ct::Scalar(build::mul(s.clone(), (**b).clone())), ctx)?;
                }
                if !matches!(**b, Expr::Const(_)) {
                    self.visit(b, &Ct::Scalar(build::mul((**a).clone(), s)), ctx)?;
                }
                Ok(())
            }
            Expr::Call(f, a) => {
                let Some(s) = ct.at(&[], &[]) else {
                    return Ok(());
                };
                if matches!(**a, Expr::Const(_)) {
                    return Ok(());
                }
                let d = self.derivative(*f, a)?;
                self.visit(a, &Ct::Scalar(build::mul(s, d)), ctx)
            }
            Expr::Pair(a, b) => {
                self.visit(a, &ct.step(Step::Fst, None), ctx)?;
                self.visit(b, &ct.step(Step::Snd, None), ctx)
            }
            Expr::Gen(i, d, b) => {
                let mut inner = ctx.clone();
                inner.loops.push((*i, d.clone()));
                self.visit(b, &ct.step(Step::T, Some(Affine::var(*i))), &inner)
            }
            Expr::Sum(i, d, b) => {
                let mut inner = ctx.clone();
                inner.loops.push((*i, d.clone()));
                self.visit(b, ct, &inner)
            }
            Expr::Iverson(p, b) => {
                let mut inner = ctx.clone();
                inner.guards.push(p.clone());
                self.visit(b, ct, &inner)
            }
            Expr::Var(_) | Expr::Get(..) | Expr::Fst(_) | Expr::Snd(_) | Expr::Let(..) => Err(
                Error::transform("adjoint: expected a flat program in A-normal form"),
            ),
        }
    }

    /// A use `x.path` with cotangent `ct`: one contribution per real
    /// component of the used value.
    fn use_of(
        &mut self,
        x: Symbol,
        path: &[(Step, Option<Affine>)],
        ct: &Ct,
        ctx: &Ctx,
    ) -> Result<()> {
        if !self.active.contains(&x) {
            return Ok(());
        }
        let tx = self
            .types
            .get(&x)
            .cloned()
            .ok_or_else(|| Error::transform(format!("adjoint: no type for {x}")))?;
        let used = type_after(&tx, path)
            .ok_or_else(|| Error::transform(format!("adjoint: bad access path on {x}")))?;
        for (sub, dims) in components(&used) {
            let ks: Vec<Symbol> = dims.iter().map(|_| self.fresh.name("k")).collect();
            let kaff: Vec<Affine> = ks.iter().map(|k| Affine::var(*k)).collect();
            let Some(body) = ct.at(&sub, &kaff) else {
                continue;
            };
            let mut comp: Comp = path.iter().map(|(s, _)| *s).collect();
            comp.extend(sub.iter().copied());
            let mut targets: Vec<Affine> = path.iter().filter_map(|(_, a)| a.clone()).collect();
            targets.extend(kaff);
            let mut loops = ctx.loops.clone();
            loops.extend(ks.into_iter().zip(dims));
            self.contribs.entry(x).or_default().push(Contrib {
                comp,
                targets,
                loops,
                guards: ctx.guards.clone(),
                body,
            });
        }
        Ok(())
    }

    fn subst(&mut self, c: &mut Contrib, v: Symbol, by: &Affine) -> Result<()> {
        let r = Replace::Index(v, by.clone());
        let fresh = &mut *self.fresh;
        let mut f = |b: Symbol| fresh.name(b.as_str());
        let mut s = Substituter::new(&mut f);
        let overflow = |_| Error::transform("index arithmetic overflow in the adjoint");
        c.body = s.expr(&c.body, &r).map_err(overflow)?;
        c.guards = c
            .guards
            .iter()
            .map(|g| s.pred(g, &r))
            .collect::<Result<_, _>>()
            .map_err(overflow)?;
        for t in &mut c.targets {
            *t = t.substitute(v, by).map_err(|_| ovf())?;
        }
        Ok(())
    }

    /// `Σ_loops [guards ∧ g == targets] body`, with the equations solved for
    /// loop variables wherever a coefficient is ±1 (index elimination).
    /// Returns the term and, when no loop is left, its predicate.
    fn gather(&mut self, mut c: Contrib, gs: &[Symbol]) -> Result<(Expr, Option<Pred>)> {
        let mut guards = std::mem::take(&mut c.guards);
        for (j, g) in gs.iter().enumerate() {
            let t = c.targets[j].clone();
            let solvable = c.loops.iter().rposition(|(v, _)| t.coeff(*v).abs() == 1);
            match solvable {
                Some(pos) => {
                    let (v, d) = c.loops.remove(pos);
                    let k = t.coeff(v);
                    // g = k v + r  =>  v = k (g - r)
                    let r = t.substitute(v, &Affine::constant(0)).map_err(|_| ovf())?;
                    let sol = Affine::var(*g)
                        .sub(&r)
                        .and_then(|x| x.scale(k))
                        .map_err(|_| ovf())?;
                    c.guards = guards;
                    self.subst(&mut c, v, &sol)?;
                    guards = std::mem::take(&mut c.guards);
                    guards.push(Pred::Cmp(CmpOp::Le, Affine::constant(0), sol.clone()));
                    guards.push(Pred::Cmp(CmpOp::Lt, sol, d));
                }
                None => guards.push(Pred::Cmp(CmpOp::Eq, Affine::var(*g), t)),
            }
        }
        let pred = (!guards.is_empty()).then_some(Pred::And(guards));
        let mut body = match &pred {
            Some(p) => build::iverson(p.clone(), c.body),
            None => c.body,
        };
        if c.loops.is_empty() {
            return Ok((body, pred));
        }
        for (v, d) in c.loops.into_iter().rev() {
            body = build::sum(v, d, body);
        }
        Ok((body, None))
    }

    /// The cotangent tensor of one real component of `x` (dims `dims`), or
    /// None when nothing contributes to it.
    fn combine(&mut self, x: Symbol, comp: &Comp, dims: &[Affine]) -> Result<Option<Expr>> {
        let mine: Vec<Contrib> = self
            .contribs
            .get(&x)
            .map(|v| v.iter().filter(|c| &c.comp == comp).cloned().collect())
            .unwrap_or_default();
        if mine.is_empty() {
            return Ok(None);
        }
        let gs: Vec<Symbol> = dims.iter().map(|_| self.fresh.name("g")).collect();
        let mut acc: Option<(Expr, Option<Pred>)> = None;
        for c in mine {
            let (t, p) = self.gather(c, &gs)?;
            acc = Some(match acc {
                None => (t, p),
                Some((a, pa)) => match (pa, p) {
                    (Some(pa), Some(p)) => {
                        let both = Pred::Or(vec![pa, p]);
                        (build::iverson(both.clone(), build::add(a, t)), Some(both))
                    }
                    _ => (build::add(a, t), None),
                },
            });
        }
        let (mut e, _) = acc.expect("at least one contribution");
        for (g, d) in gs.iter().zip(dims).rev() {
            e = build::gen(*g, d.clone(), e);
        }
        Ok(Some(e))
    }
}

fn ovf() -> Error {
    Error::transform("index arithmetic overflow in the adjoint")
}

/// Rebuild a value of type `t` from its components' cotangent tensors.
fn rebuild(
    t: &Type,
    prefix: &mut Comp,
    idx: &mut Vec<Affine>,
    comps: &HashMap<Comp, Expr>,
    fresh: &mut Fresh,
) -> Expr {
    match t {
        Type::Real => match comps.get(prefix) {
            Some(e) => idx
                .iter()
                .fold(e.clone(), |acc, i| build::get(acc, i.clone())),
            None => build::num(0.0),
        },
        Type::Tensor(d, e) => {
            let k = fresh.name("k");
            prefix.push(Step::T);
            idx.push(Affine::var(k));
            let inner = rebuild(e, prefix, idx, comps, fresh);
            prefix.pop();
            idx.pop();
            build::gen(k, d.clone(), inner)
        }
        Type::Pair(a, b) => {
            prefix.push(Step::Fst);
            let x = rebuild(a, prefix, idx, comps, fresh);
            prefix.pop();
            prefix.push(Step::Snd);
            let y = rebuild(b, prefix, idx, comps, fresh);
            prefix.pop();
            build::pair(x, y)
        }
    }
}

/// The body of the vector-Jacobian product: with `seed` the cotangent of
/// the output, the cotangents of the `wrt` inputs (one as itself, several
/// as right-nested pairs).
pub fn vjp_body(prog: &Program, wrt: &[Symbol], seed: Expr, seed_ty: &Type) -> Result<Expr> {
    let mut fresh = Fresh::above(&prog.body);
    let (mut binds, result) = lift(&anf(&prog.body, &mut fresh), &mut fresh);
    let y = fresh.name("y");
    binds.push((y, result));
    let mut types = param_env(prog);
    for (x, e) in &binds {
        let t = type_of(e, &mut types.clone())?;
        types.insert(*x, t);
    }
    let derivs = derivative_table()
        .into_iter()
        .map(|(name, lhs, d)| {
            let l: Pattern<Atl> = lhs.parse().expect("derivative table lhs");
            let r: Pattern<Atl> = d.parse().expect("derivative table rhs");
            (name, (l, r))
        })
        .collect();
    let mut active: std::collections::HashSet<Symbol> = wrt.iter().copied().collect();
    active.extend(binds.iter().map(|(x, _)| *x));
    let mut adj = Adjoint {
        fresh: &mut fresh,
        types,
        active,
        contribs: HashMap::new(),
        derivs,
    };
    let mut adjoint_binds: Vec<(Symbol, Expr)> = vec![];
    for (k, (x, e)) in binds.iter().enumerate().rev() {
        let bases: HashMap<Comp, Base> = if k == binds.len() - 1 {
            components(seed_ty)
                .into_iter()
                .map(|(c, _)| (c, Base::Whole(seed.clone())))
                .collect()
        } else {
            let tx = adj.types[x].clone();
            let mut bases = HashMap::new();
            for (c, dims) in components(&tx) {
                if let Some(ct) = adj.combine(*x, &c, &dims)? {
                    let name = adj.fresh.name(&format!("d{x}"));
                    adjoint_binds.push((name, ct));
                    bases.insert(c, Base::Soa(Expr::Var(name)));
                }
            }
            bases
        };
        if bases.is_empty() {
            continue;
        }
        let ct = Ct::Tree {
            bases: Rc::new(bases),
            prefix: vec![],
            idx: vec![],
        };
        adj.visit(e, &ct, &Ctx::default())?;
    }
    let mut outs = vec![];
    for w in wrt {
        let tw = adj.types[w].clone();
        let mut comps = HashMap::new();
        for (c, dims) in components(&tw) {
            if let Some(ct) = adj.combine(*w, &c, &dims)? {
                let name = adj.fresh.name(&format!("d{w}"));
                adjoint_binds.push((name, ct));
                comps.insert(c, Expr::Var(name));
            }
        }
        let out = if comps.is_empty() {
            zero_of(&tw, &mut || adj.fresh.name("z"))
        } else {
            rebuild(&tw, &mut vec![], &mut vec![], &comps, adj.fresh)
        };
        outs.push(out);
    }
    let mut result = outs.pop().expect("at least one input");
    while let Some(o) = outs.pop() {
        result = build::pair(o, result);
    }
    binds.pop(); // the output binding is not needed by the adjoint
    binds.extend(adjoint_binds);
    let flat = dead_code((binds, result));
    Ok(super::normalize::unflatten(flat))
}
