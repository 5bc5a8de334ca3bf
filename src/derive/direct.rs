//! The adjoint of one binding built directly, without an e-graph: the
//! fallback of the per-binding differentiation when a binding's e-graph
//! stops at a limit. It follows the same rules as `rules/adjoint.rules`
//! (the inner product pushed through every form, a coefficient at a leaf
//! `<c | dx[a]>` being `[g == a]·c`) but applies each exactly once, in one
//! pass over the term, so it always finishes in time linear in the term;
//! the brackets it leaves are for the simplify phase to solve.

use crate::egraph::language::{Atl, Fun};
use crate::front::affine::Affine;
use crate::front::ast::{build, CmpOp, Expr, Func, Pred, Real, Type};
use crate::front::names::Fresh;
use crate::front::subst::free_names;
use crate::symbol::Symbol;
use egg::{ENodeOrVar, Id, PatternAst};

/// One step of a path into a value: an access or a projection.
#[derive(Clone, Debug)]
enum Step {
    Get(Affine),
    Fst,
    Snd,
}

fn is_zero(e: &Expr) -> bool {
    matches!(e, Expr::Const(Real(x)) if *x == 0.0)
}

fn add(a: Expr, b: Expr) -> Expr {
    if is_zero(&a) {
        b
    } else if is_zero(&b) {
        a
    } else {
        build::add(a, b)
    }
}

fn mul(a: Expr, b: Expr) -> Expr {
    if is_zero(&a) || is_zero(&b) {
        build::num(0.0)
    } else {
        build::mul(a, b)
    }
}

fn wrap_sum(i: Symbol, n: &Affine, e: Expr) -> Expr {
    if is_zero(&e) {
        e
    } else {
        build::sum(i, n.clone(), e)
    }
}

fn wrap_iverson(p: Pred, e: Expr) -> Expr {
    if is_zero(&e) {
        e
    } else {
        build::iverson(p, e)
    }
}

/// The derivative of a black box at `a`: the entry of `f` in the table of
/// `rules/derivatives.rules` (the one the rewrite rules are made from),
/// instantiated with `?x := a` and `?k :=` the exponent.
pub fn derivative(f: &Func, a: Expr) -> Expr {
    let entry = crate::egraph::rules::derivatives::derivative_table()
        .get(&Fun::of(*f))
        .unwrap_or_else(|| panic!("derivatives.rules has no entry for {}", f.name()));
    let ast = &entry.rhs.ast;
    let root = Id::from(ast.as_ref().len() - 1);
    let k = f.exponent().map(|k| k.0);
    instantiate(ast, root, &a, k)
        .unwrap_or_else(|| panic!("derivatives.rules, {}: bad pattern", f.name()))
}

/// A derivative pattern as an expression (`+`, `*`, numbers, black boxes
/// and `?x`, `?k`); exponents are folded to numbers.
fn instantiate(p: &PatternAst<Atl>, id: Id, x: &Expr, k: Option<f64>) -> Option<Expr> {
    use build::{call, num};
    let arg = |c: Id| instantiate(p, c, x, k);
    let n = match &p[id] {
        ENodeOrVar::Var(v) => {
            return match v.to_string().as_str() {
                "?x" => Some(x.clone()),
                "?k" => k.map(num),
                _ => None,
            }
        }
        ENodeOrVar::ENode(n) => n,
    };
    match n {
        Atl::Num(c) => Some(Expr::Const(c.0)),
        Atl::Add([a, b]) => Some(add(arg(*a)?, arg(*b)?)),
        Atl::Mul([a, b]) => Some(mul(arg(*a)?, arg(*b)?)),
        _ => {
            let (f, a, e) = n.as_call()?;
            let ENodeOrVar::ENode(Atl::Fun(f)) = &p[f] else {
                return None;
            };
            // the exponent, folded: (call dpow ?x (+ ?k -1))
            let e = match e.map(arg) {
                None => None,
                Some(Some(Expr::Const(e))) => Some(e),
                Some(Some(Expr::Add(a, b))) => match (*a, *b) {
                    (Expr::Const(Real(a)), Expr::Const(Real(b))) => Some(Real(a + b)),
                    _ => return None,
                },
                Some(_) => return None,
            };
            Some(call(f.at(e)?, arg(a)?))
        }
    }
}

struct Adjoint {
    x: Symbol,
    /// The path to the coefficient's entry: `dx[P]`.
    path: Vec<Step>,
}

impl Adjoint {
    /// The coefficient of `dx[P]` in `<c | (D e)[acc]>`.
    fn coef(&self, c: Expr, e: &Expr, acc: &[Step]) -> Expr {
        if !free_names(e).contains(&self.x) {
            return build::num(0.0);
        }
        match e {
            Expr::Const(_) | Expr::IndexReal(_) => build::num(0.0),
            Expr::Var(_) => self.leaf(c, acc),
            Expr::MaxMin(m, a, b) => {
                // c·s read twice: the coefficient of Da is c - c·s, that of
                // Db is c·s (MaxMin::selection)
                let cs = mul(c.clone(), m.selection(a, b));
                add(
                    self.coef(add(c, mul(build::num(-1.0), cs.clone())), a, acc),
                    self.coef(cs, b, acc),
                )
            }
            Expr::Add(a, b) => add(self.coef(c.clone(), a, acc), self.coef(c, b, acc)),
            Expr::Mul(a, b) => add(
                self.coef(mul(c.clone(), (**b).clone()), a, acc),
                self.coef(mul(c, (**a).clone()), b, acc),
            ),
            Expr::Call(f, a) => self.coef(mul(c, derivative(f, (**a).clone())), a, acc),
            Expr::Pair(a, b) => match acc.split_first() {
                Some((Step::Fst, rest)) => self.coef(c, a, rest),
                Some((Step::Snd, rest)) => self.coef(c, b, rest),
                _ => add(
                    self.coef(build::fst(c.clone()), a, acc),
                    self.coef(build::snd(c), b, acc),
                ),
            },
            Expr::Fst(a) => self.coef(c, a, &prepend(Step::Fst, acc)),
            Expr::Snd(a) => self.coef(c, a, &prepend(Step::Snd, acc)),
            Expr::Get(a, i) => self.coef(c, a, &prepend(Step::Get(i.clone()), acc)),
            Expr::Gen(i, n, body) => match acc.split_first() {
                Some((Step::Get(idx), rest)) => wrap_sum(
                    *i,
                    n,
                    wrap_iverson(
                        Pred::Cmp(CmpOp::Eq, Affine::var(*i), idx.clone()),
                        self.coef(c, body, rest),
                    ),
                ),
                _ => wrap_sum(*i, n, self.coef(build::get(c, Affine::var(*i)), body, acc)),
            },
            Expr::Sum(i, n, body) => wrap_sum(*i, n, self.coef(c, body, acc)),
            // the selection is constant; the extremum's tangent is that of
            // the element selected (Reduce::tangent)
            Expr::Reduce(r, ..) if r.is_arg() => build::num(0.0),
            Expr::Reduce(r, i, n, body) => {
                let hot = build::reduce(r.arg(), *i, n.clone(), (**body).clone());
                let w = build::get(hot, Affine::var(*i));
                wrap_sum(*i, n, self.coef(mul(c, w), body, acc))
            }
            Expr::Iverson(p, body) => wrap_iverson(p.clone(), self.coef(c, body, acc)),
            Expr::Let(..) => unreachable!("the tensor SSA's bindings are let-free"),
        }
    }

    /// The coefficient of `dx[P]` in `<c | dx[acc]>`: brackets where the
    /// accesses meet the path's indices, then `c` at the rest of the path.
    fn leaf(&self, mut c: Expr, acc: &[Step]) -> Expr {
        let mut conds = vec![];
        for (k, p) in self.path.iter().enumerate() {
            match (p, acc.get(k)) {
                (Step::Get(g), Some(Step::Get(a))) => {
                    conds.push(Pred::Cmp(CmpOp::Eq, g.clone(), a.clone()))
                }
                (Step::Fst, Some(Step::Fst)) | (Step::Snd, Some(Step::Snd)) => {}
                (_, Some(_)) => return build::num(0.0),
                (Step::Get(g), None) => c = build::get(c, g.clone()),
                (Step::Fst, None) => c = build::fst(c),
                (Step::Snd, None) => c = build::snd(c),
            }
        }
        match conds.len() {
            0 => c,
            1 => build::iverson(conds.pop().expect("one"), c),
            _ => build::iverson(Pred::And(conds), c),
        }
    }
}

fn prepend(s: Step, acc: &[Step]) -> Vec<Step> {
    let mut v = vec![s];
    v.extend_from_slice(acc);
    v
}

/// The coefficients of the tangent of `x` (of type `t`) in the sum of the
/// inner products `<c | D[e]>` of `forms`, as a value of type `t`, built
/// directly. The expressions must be let-free.
pub fn coefficient(x: Symbol, t: &Type, forms: &[(&Expr, &Expr)], fresh: &mut Fresh) -> Expr {
    fn build_value(
        x: Symbol,
        t: &Type,
        path: &mut Vec<Step>,
        forms: &[(&Expr, &Expr)],
        fresh: &mut Fresh,
    ) -> Expr {
        match t {
            Type::Real => {
                let adj = Adjoint {
                    x,
                    path: path.clone(),
                };
                forms.iter().fold(build::num(0.0), |acc, (c, e)| {
                    add(acc, adj.coef((*c).clone(), e, &[]))
                })
            }
            Type::Pair(a, b) => {
                path.push(Step::Fst);
                let va = build_value(x, a, path, forms, fresh);
                path.pop();
                path.push(Step::Snd);
                let vb = build_value(x, b, path, forms, fresh);
                path.pop();
                build::pair(va, vb)
            }
            Type::Tensor(n, elem) => {
                let g = fresh.name("g");
                path.push(Step::Get(Affine::var(g)));
                let v = build_value(x, elem, path, forms, fresh);
                path.pop();
                build::gen(g, n.clone(), v)
            }
        }
    }
    build_value(x, t, &mut vec![], forms, fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derivative read from `rules/derivatives.rules` agrees with the
    /// dual numbers' derivative of every black box.
    #[test]
    fn the_table_gives_each_black_box_its_derivative() {
        let x = Symbol::from("x");
        let funcs = crate::front::blackbox::BLACK_BOXES.iter().map(|b| {
            // pow at 2.5, dpow at 1.5, polygamma (of integer orders) at 2
            let k = b.param.map(|_| {
                let k = if b.name.starts_with('d') { 1.5 } else { 2.5 };
                if (b.check_param)(k).is_ok() {
                    k
                } else {
                    2.0
                }
            });
            Func::from_name(b.name, k).expect("a box")
        });
        for f in funcs {
            let d = derivative(&f, Expr::Var(x));
            for v in [0.3, 1.7, 2.9] {
                let mut env = crate::semantics::eval::Env::new(&Default::default());
                env.push_var(x, crate::semantics::value::Value::Real(v));
                let got = crate::semantics::eval::eval_expr(
                    &d,
                    &mut env,
                    &mut crate::semantics::eval::Budget::default(),
                )
                .unwrap();
                let want = f.derivative(v, f.apply(v));
                let crate::semantics::value::Value::Real(got) = got else {
                    panic!("{f:?}: not a real")
                };
                assert!(
                    (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                    "{f:?} at {v}: {got} vs {want}"
                );
            }
        }
    }
}
