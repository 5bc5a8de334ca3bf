//! Step 1: what each pattern variable of a left-hand side stands for
//! (expression of some type, predicate, index, dimension, binder, exponent,
//! black box), inferred from its positions by unification.

use super::*;

// ---------------------------------------------------------------------------
// 1. inference over the pattern

#[derive(Clone, Debug)]
pub(super) enum Ty {
    Real,
    Pair(Box<Ty>, Box<Ty>),
    Tensor(usize, Box<Ty>),
    Var(usize),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Sort {
    Expr,
    Pred,
    Index,
    Dim,
    Num,
    /// A black box; does it take an exponent?
    Fun(bool),
}

#[derive(Clone, Debug)]
pub(super) enum Role {
    Expr(Ty),
    Pred,
    Index,
    Dim(usize),
    Num,
    /// A black box of the arity of [`Sort::Fun`].
    Fun(bool),
    IndexBinder(usize),
    VarBinder(Ty),
    /// `(var ?x)`: a reference to a variable in scope, of this type.
    VarRef(Ty),
}

#[derive(Clone, Debug)]
pub(super) struct VarInfo {
    pub(super) role: Role,
    /// The pattern binders in scope (outermost first), intersected over
    /// occurrences.
    pub(super) scope: Option<Vec<Var>>,
}

#[derive(Default)]
pub(super) struct Infer {
    pub(super) tv: Vec<Option<Ty>>,
    pub(super) dparent: Vec<usize>,
    pub(super) dfix: Vec<Option<Affine>>,
    pub(super) vars: HashMap<Var, VarInfo>,
    pub(super) order: Vec<Var>,
}

impl Infer {
    pub(super) fn new_tv(&mut self) -> Ty {
        self.tv.push(None);
        Ty::Var(self.tv.len() - 1)
    }
    pub(super) fn new_dv(&mut self, fixed: Option<Affine>) -> usize {
        let k = self.dparent.len();
        self.dparent.push(k);
        self.dfix.push(fixed);
        k
    }
    pub(super) fn droot(&self, mut d: usize) -> usize {
        while self.dparent[d] != d {
            d = self.dparent[d];
        }
        d
    }
    pub(super) fn dunify(&mut self, a: usize, b: usize) -> Result<(), String> {
        let (ra, rb) = (self.droot(a), self.droot(b));
        if ra == rb {
            return Ok(());
        }
        match (&self.dfix[ra], &self.dfix[rb]) {
            (Some(x), Some(y)) if x != y => return Err(format!("dimensions {x} and {y} differ")),
            (Some(x), None) => self.dfix[rb] = Some(x.clone()),
            _ => {}
        }
        self.dparent[ra] = rb;
        Ok(())
    }
    pub(super) fn shallow(&self, t: &Ty) -> Ty {
        let mut t = t.clone();
        while let Ty::Var(k) = t {
            match &self.tv[k] {
                Some(u) => t = u.clone(),
                None => break,
            }
        }
        t
    }
    pub(super) fn occurs(&self, v: usize, t: &Ty) -> bool {
        match self.shallow(t) {
            Ty::Var(k) => k == v,
            Ty::Real => false,
            Ty::Pair(a, b) => self.occurs(v, &a) || self.occurs(v, &b),
            Ty::Tensor(_, e) => self.occurs(v, &e),
        }
    }
    pub(super) fn unify(&mut self, a: &Ty, b: &Ty) -> Result<(), String> {
        match (self.shallow(a), self.shallow(b)) {
            (Ty::Var(x), Ty::Var(y)) if x == y => Ok(()),
            (Ty::Var(x), t) | (t, Ty::Var(x)) => {
                if self.occurs(x, &t) {
                    return Err("infinite type".into());
                }
                self.tv[x] = Some(t);
                Ok(())
            }
            (Ty::Real, Ty::Real) => Ok(()),
            (Ty::Pair(a0, a1), Ty::Pair(b0, b1)) => {
                self.unify(&a0, &b0)?;
                self.unify(&a1, &b1)
            }
            (Ty::Tensor(d, e), Ty::Tensor(d2, e2)) => {
                self.dunify(d, d2)?;
                self.unify(&e, &e2)
            }
            (x, y) => Err(format!("type mismatch: {x:?} vs {y:?}")),
        }
    }

    pub(super) fn note(&mut self, v: Var, role: Role, scope: &[Var]) -> Result<Role, String> {
        let info = match self.vars.get_mut(&v) {
            Some(info) => info,
            None => {
                self.order.push(v);
                self.vars.insert(v, VarInfo { role, scope: None });
                self.vars.get_mut(&v).unwrap()
            }
        };
        info.scope = Some(match info.scope.take() {
            None => scope.to_vec(),
            Some(old) => old.into_iter().filter(|b| scope.contains(b)).collect(),
        });
        Ok(info.role.clone())
    }

    pub(super) fn binder(
        &mut self,
        ast: &PatternAst<Atl>,
        id: Id,
        role: Role,
    ) -> Result<Var, String> {
        match &ast[id] {
            ENodeOrVar::Var(v) => {
                let r = self.note(*v, role.clone(), &[])?;
                match (&r, &role) {
                    (Role::IndexBinder(a), Role::IndexBinder(b)) => self.dunify(*a, *b)?,
                    (Role::VarBinder(a), Role::VarBinder(b)) => self.unify(a, b)?,
                    _ => return Err(format!("{v} is used as binders of two kinds")),
                }
                Ok(*v)
            }
            n => Err(format!("binder position holds {n}, not a pattern variable")),
        }
    }

    /// Walk the pattern at `id`, expected of `sort`; returns the type (for
    /// expressions) or the dimension variable (as `Ty::Tensor(d, Real)`, for
    /// dimensions).
    pub(super) fn walk(
        &mut self,
        ast: &PatternAst<Atl>,
        id: Id,
        sort: Sort,
        scope: &[Var],
    ) -> Result<Ty, String> {
        let node = match &ast[id] {
            ENodeOrVar::Var(v) => {
                let role = match sort {
                    Sort::Expr => Role::Expr(self.new_tv()),
                    Sort::Pred => Role::Pred,
                    Sort::Index => Role::Index,
                    Sort::Dim => Role::Dim(self.new_dv(None)),
                    Sort::Num => Role::Num,
                    Sort::Fun(k) => Role::Fun(k),
                };
                let existing = self.note(*v, role, scope)?;
                return match (sort, existing) {
                    (Sort::Expr, Role::Expr(t)) => Ok(t),
                    (Sort::Dim, Role::Dim(d)) => Ok(Ty::Tensor(d, Box::new(Ty::Real))),
                    (Sort::Pred, Role::Pred)
                    | (Sort::Index, Role::Index)
                    | (Sort::Num, Role::Num) => Ok(Ty::Real),
                    (Sort::Fun(a), Role::Fun(b)) if a == b => Ok(Ty::Real),
                    (s, r) => Err(format!("{v} is used as {s:?} and as {r:?}")),
                };
            }
            ENodeOrVar::ENode(n) => n.clone(),
        };
        let want = |s: Sort| -> Result<(), String> {
            if s == sort {
                Ok(())
            } else {
                Err(format!("'{node}' where {sort:?} is expected"))
            }
        };
        let real = |me: &mut Infer, c: Id| -> Result<(), String> {
            let t = me.walk(ast, c, Sort::Expr, scope)?;
            me.unify(&t, &Ty::Real)
        };
        if let Some((f, a, k)) = node.as_call() {
            want(Sort::Expr)?;
            self.walk(ast, f, Sort::Fun(k.is_some()), scope)?;
            real(self, a)?;
            if let Some(k) = k {
                self.walk(ast, k, Sort::Num, scope)?;
            }
            return Ok(Ty::Real);
        }
        let dim_of = |me: &mut Infer, c: Id| -> Result<usize, String> {
            match me.walk(ast, c, Sort::Dim, scope)? {
                Ty::Tensor(d, _) => Ok(d),
                _ => unreachable!(),
            }
        };
        Ok(match node {
            Atl::D(a) => {
                // the tangent has the type of its argument
                want(Sort::Expr)?;
                self.walk(ast, a, Sort::Expr, scope)?
            }
            Atl::Var(x) => {
                want(Sort::Expr)?;
                let ENodeOrVar::Var(v) = &ast[x] else {
                    return Err("(var NAME) with a literal name".into());
                };
                let t = self.new_tv();
                match self.note(*v, Role::VarRef(t), scope)? {
                    Role::VarRef(t) => t,
                    r => return Err(format!("{v} is a variable reference and {r:?}")),
                }
            }
            Atl::Num(_) => {
                if sort == Sort::Num {
                    return Ok(Ty::Real);
                }
                want(Sort::Expr)?;
                Ty::Real
            }
            Atl::Add([a, b]) | Atl::Mul([a, b]) | Atl::Max([a, b]) | Atl::Min([a, b]) => {
                want(Sort::Expr)?;
                real(self, a)?;
                real(self, b)?;
                Ty::Real
            }
            Atl::IndexReal(a) => {
                want(Sort::Expr)?;
                self.walk(ast, a, Sort::Index, scope)?;
                Ty::Real
            }
            Atl::Pair([a, b]) => {
                want(Sort::Expr)?;
                let ta = self.walk(ast, a, Sort::Expr, scope)?;
                let tb = self.walk(ast, b, Sort::Expr, scope)?;
                Ty::Pair(Box::new(ta), Box::new(tb))
            }
            Atl::Fst(a) | Atl::Snd(a) => {
                want(Sort::Expr)?;
                let ta = self.walk(ast, a, Sort::Expr, scope)?;
                let (x, y) = (self.new_tv(), self.new_tv());
                self.unify(&ta, &Ty::Pair(Box::new(x.clone()), Box::new(y.clone())))?;
                if matches!(node, Atl::Fst(_)) {
                    x
                } else {
                    y
                }
            }
            Atl::Gen([i, d, e])
            | Atl::Sum([i, d, e])
            | Atl::Maximum([i, d, e])
            | Atl::Minimum([i, d, e])
            | Atl::ArgMax([i, d, e])
            | Atl::ArgMin([i, d, e]) => {
                want(Sort::Expr)?;
                let dv = dim_of(self, d)?;
                let iv = self.binder(ast, i, Role::IndexBinder(dv))?;
                let mut inner = scope.to_vec();
                inner.push(iv);
                let te = self.walk(ast, e, Sort::Expr, &inner)?;
                if matches!(node, Atl::Gen(_)) {
                    return Ok(Ty::Tensor(dv, Box::new(te)));
                }
                self.unify(&te, &Ty::Real)?;
                match node {
                    Atl::ArgMax(_) | Atl::ArgMin(_) => Ty::Tensor(dv, Box::new(Ty::Real)),
                    _ => Ty::Real,
                }
            }
            Atl::Get([e, a]) => {
                want(Sort::Expr)?;
                let te = self.walk(ast, e, Sort::Expr, scope)?;
                let dv = self.new_dv(None);
                let el = self.new_tv();
                self.unify(&te, &Ty::Tensor(dv, Box::new(el.clone())))?;
                self.walk(ast, a, Sort::Index, scope)?;
                el
            }
            Atl::Iverson([p, e]) => {
                want(Sort::Expr)?;
                self.walk(ast, p, Sort::Pred, scope)?;
                self.walk(ast, e, Sort::Expr, scope)?
            }
            Atl::Let([x, a, b]) => {
                want(Sort::Expr)?;
                let ta = self.walk(ast, a, Sort::Expr, scope)?;
                let xv = self.binder(ast, x, Role::VarBinder(ta))?;
                let mut inner = scope.to_vec();
                inner.push(xv);
                self.walk(ast, b, Sort::Expr, &inner)?
            }
            Atl::True | Atl::False => {
                want(Sort::Pred)?;
                Ty::Real
            }
            Atl::And([p, q]) | Atl::Or([p, q]) => {
                want(Sort::Pred)?;
                self.walk(ast, p, Sort::Pred, scope)?;
                self.walk(ast, q, Sort::Pred, scope)?;
                Ty::Real
            }
            Atl::Lt([a, b]) | Atl::Le([a, b]) | Atl::Eq([a, b]) => {
                want(Sort::Pred)?;
                self.walk(ast, a, Sort::Index, scope)?;
                self.walk(ast, b, Sort::Index, scope)?;
                Ty::Real
            }
            Atl::Exists([i, d, p]) => {
                want(Sort::Pred)?;
                let dv = dim_of(self, d)?;
                let iv = self.binder(ast, i, Role::IndexBinder(dv))?;
                let mut inner = scope.to_vec();
                inner.push(iv);
                self.walk(ast, p, Sort::Pred, &inner)?;
                Ty::Real
            }
            Atl::Fun(f) if sort == Sort::Fun(f.takes_exponent()) => Ty::Real,
            Atl::Aff(Idx(a)) => match sort {
                Sort::Index => Ty::Real,
                Sort::Dim => Ty::Tensor(self.new_dv(Some(a)), Box::new(Ty::Real)),
                _ => return Err(format!("index literal where {sort:?} is expected")),
            },
            n => return Err(format!("unsupported pattern node '{n}'")),
        })
    }

    pub(super) fn concrete_dim(
        &self,
        d: usize,
        rng: &mut Rng,
        memo: &mut HashMap<usize, Affine>,
    ) -> Affine {
        let r = self.droot(d);
        if let Some(a) = &self.dfix[r] {
            return a.clone();
        }
        memo.entry(r).or_insert_with(|| random_dim(rng)).clone()
    }

    pub(super) fn concrete(
        &self,
        t: &Ty,
        rng: &mut Rng,
        tmemo: &mut HashMap<usize, Type>,
        dmemo: &mut HashMap<usize, Affine>,
    ) -> Type {
        match self.shallow(t) {
            Ty::Real => Type::Real,
            Ty::Pair(a, b) => pair(
                self.concrete(&a, rng, tmemo, dmemo),
                self.concrete(&b, rng, tmemo, dmemo),
            ),
            Ty::Tensor(d, e) => {
                let d = self.concrete_dim(d, rng, dmemo);
                tensor(d, self.concrete(&e, rng, tmemo, dmemo))
            }
            Ty::Var(k) => tmemo.entry(k).or_insert_with(|| random_type(rng)).clone(),
        }
    }
}

/// What a rule's left-hand side needs, inferred once per rule.
pub struct Shape {
    pub(super) ast: PatternAst<Atl>,
    pub(super) infer: Infer,
    pub(super) root_sort: Sort,
    /// `not-free(?x, ?e)` conditions.
    pub(super) not_free: Vec<(Var, Var)>,
}

pub(super) fn analyze(spec: &RuleSpec) -> Result<Shape, String> {
    let pat: Pattern<Atl> = spec
        .lhs
        .parse()
        .map_err(|e| format!("lhs does not parse: {e}"))?;
    let ast = pat.ast.clone();
    let root = Id::from(ast.as_ref().len() - 1);
    let root_sort = match &ast[root] {
        ENodeOrVar::ENode(n) if n.is_predicate() => Sort::Pred,
        ENodeOrVar::ENode(_) => Sort::Expr,
        ENodeOrVar::Var(_) => return Err("the left-hand side is a bare variable".into()),
    };
    let mut infer = Infer::default();
    infer.walk(&ast, root, root_sort, &[])?;
    let mut not_free = vec![];
    for (name, args) in &spec.conditions {
        if name == "not-free" && args.len() == 2 {
            let a: Var = args[0].parse().map_err(|e| format!("{e:?}"))?;
            let b: Var = args[1].parse().map_err(|e| format!("{e:?}"))?;
            not_free.push((a, b));
        }
    }
    Ok(Shape {
        ast,
        infer,
        root_sort,
        not_free,
    })
}
