//! The core ATL abstract syntax: the paper's grammar (Figure "Grammar for Core
//! Tensor Language") one to one, after the elaborator has removed all sugar.
//!
//! Invariants established by [`crate::front::elaborate`]:
//! * the program is well typed;
//! * every binder (`let`, `gen`, `sum`, `exists`) has a name that is bound
//!   nowhere else in the program and differs from every parameter and size
//!   (later passes rely on it: substitution under a binder never captures);
//! * every dimension and index expression is an [`Affine`] normal form.

use super::affine::Affine;
use crate::symbol::Symbol;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A real constant, compared and hashed by its bits so it can live in
/// e-graph nodes and hash maps (`0.0` and `-0.0` are distinct constants).
#[derive(Clone, Copy, Debug)]
pub struct Real(pub f64);

impl PartialEq for Real {
    fn eq(&self, o: &Real) -> bool {
        self.0.to_bits() == o.0.to_bits()
    }
}
impl Eq for Real {}
impl Hash for Real {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.to_bits().hash(h)
    }
}
impl PartialOrd for Real {
    fn partial_cmp(&self, o: &Real) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Real {
    fn cmp(&self, o: &Real) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}
impl fmt::Display for Real {
    /// Shortest text that reads back to the same f64 (Rust's `{:?}` is
    /// round-trip exact); non-finite values cannot be written in ATL.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let x = self.0;
        if x.is_finite() {
            let s = format!("{x:?}");
            write!(f, "{}", s.strip_suffix(".0").unwrap_or(&s))
        } else if x.is_nan() {
            // (* 0 (recip 0)) would cost; callers avoid printing non-finite constants.
            write!(f, "0")
        } else {
            write!(f, "{}", if x > 0.0 { "1e999" } else { "-1e999" })
        }
    }
}

pub use super::blackbox::Func;

/// Comparison operators of predicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CmpOp {
    Lt,
    Le,
    Eq,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn from_name(s: &str) -> Option<CmpOp> {
        Some(match s {
            "<" => CmpOp::Lt,
            "<=" => CmpOp::Le,
            "==" => CmpOp::Eq,
            ">" => CmpOp::Gt,
            ">=" => CmpOp::Ge,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "==",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
    pub fn holds(self, a: i64, b: i64) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Eq => a == b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

/// The two extrema of reals: `(max a b)` and `(min a b)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MaxMin {
    Max,
    Min,
}

impl MaxMin {
    /// The binary form's name.
    pub fn name(self) -> &'static str {
        match self {
            MaxMin::Max => "max",
            MaxMin::Min => "min",
        }
    }

    /// Does `b` replace `a` (`a` the first operand)? `b` is taken when it
    /// is strictly better or NaN, so ties keep the first operand and a NaN
    /// operand gives NaN. Compiled code tests the same comparisons.
    pub fn takes_second(self, a: f64, b: f64) -> bool {
        b.is_nan()
            || match self {
                MaxMin::Max => a < b,
                MaxMin::Min => b < a,
            }
    }

    /// `(max a b)` or `(min a b)`.
    pub fn apply(self, a: f64, b: f64) -> f64 {
        if self.takes_second(a, b) {
            b
        } else {
            a
        }
    }

    /// Is the derivative that of the second operand? Where `b` is strictly
    /// better: a tie, or a NaN, gives the first operand's derivative.
    pub fn selects_second(self, a: f64, b: f64) -> bool {
        match self {
            MaxMin::Max => a < b,
            MaxMin::Min => b < a,
        }
    }

    /// The real `s` of [`Self::selects_second`], 1 where the derivative is
    /// the second operand's and 0 where it is the first's: `(step (- b a))`
    /// for `max`, `(step (- a b))` for `min` (a difference of doubles is
    /// positive exactly where the comparison holds; NaN steps to 0). The
    /// derivative is `Da - s·Da + s·Db` (exactly `(1 - s)·Da + s·Db`, as `s`
    /// is 0 or 1), so that in reverse mode the weight `w` of the result
    /// gives `Da` the coefficient `w - w·s` and `Db` the coefficient `w·s`:
    /// one product read twice. The forward rules `d-max`, `d-min`
    /// (rules/forward.rules) write the same terms.
    pub fn selection(self, a: &Expr, b: &Expr) -> Expr {
        use build::*;
        let (hi, lo) = match self {
            MaxMin::Max => (b, a),
            MaxMin::Min => (a, b),
        };
        call(
            Func::named("step"),
            add(hi.clone(), mul(num(-1.0), lo.clone())),
        )
    }
}

/// The reductions over an index beside `sum`: `(maximum i D e)` and
/// `(minimum i D e)`, reals, and their one-hot selections `(argmax i D e)`
/// and `(argmin i D e)`, tensors `[D]R` with a 1 at the element selected.
/// Each is the left fold of the binary form over `i = 0, 1, ...`: the value
/// starts from the fold's identity (`-inf` for `maximum`, `+inf` for
/// `minimum`, so an empty reduction is that infinity) and the element
/// selected is the one whose derivative the fold keeps ([`MaxMin::selects_second`]):
/// the first attaining the extremum; with a NaN (the value is NaN) the one
/// selected before the first NaN, or the first element if it is NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reduce {
    Maximum,
    Minimum,
    ArgMax,
    ArgMin,
}

impl Reduce {
    pub const ALL: [Reduce; 4] = [
        Reduce::Maximum,
        Reduce::Minimum,
        Reduce::ArgMax,
        Reduce::ArgMin,
    ];

    /// The form's name.
    pub fn name(self) -> &'static str {
        match self {
            Reduce::Maximum => "maximum",
            Reduce::Minimum => "minimum",
            Reduce::ArgMax => "argmax",
            Reduce::ArgMin => "argmin",
        }
    }

    pub fn from_name(s: &str) -> Option<Reduce> {
        Reduce::ALL.into_iter().find(|r| r.name() == s)
    }

    /// The binary form folded.
    pub fn maxmin(self) -> MaxMin {
        match self {
            Reduce::Maximum | Reduce::ArgMax => MaxMin::Max,
            Reduce::Minimum | Reduce::ArgMin => MaxMin::Min,
        }
    }

    /// Is the result the one-hot selection (a tensor) rather than the value?
    pub fn is_arg(self) -> bool {
        matches!(self, Reduce::ArgMax | Reduce::ArgMin)
    }

    /// The one-hot selection of the same extremum.
    pub fn arg(self) -> Reduce {
        match self.maxmin() {
            MaxMin::Max => Reduce::ArgMax,
            MaxMin::Min => Reduce::ArgMin,
        }
    }

    /// The tangent of `(maximum i d body)` (or `minimum`) given the tangent
    /// `dbody` of its body: the tangent of the element selected, as the
    /// sum over `i` of the one-hot selection read at `i` times `dbody`,
    /// `(sum i d (* (get (argmax i d body) i) dbody))` (the selection binds
    /// its own `i`; it does not depend on the outer one, so the optimizer
    /// computes it once). The forward rule `d-maximum` builds the same term.
    pub fn tangent(self, i: Symbol, d: &Affine, body: &Expr, dbody: Expr) -> Expr {
        use build::*;
        let hot = reduce(self.arg(), i, d.clone(), body.clone());
        sum(i, d.clone(), mul(get(hot, Affine::var(i)), dbody))
    }

    /// The value of the empty reduction, where the fold starts.
    pub fn identity(self) -> f64 {
        match self.maxmin() {
            MaxMin::Max => f64::NEG_INFINITY,
            MaxMin::Min => f64::INFINITY,
        }
    }

    /// The fold over `xs`: the extremum and the index selected (`None` for
    /// no elements). The compiled code runs the same steps.
    pub fn fold(self, xs: impl IntoIterator<Item = f64>) -> (f64, Option<usize>) {
        let m = self.maxmin();
        let mut acc = self.identity();
        let mut sel = None;
        for (k, x) in xs.into_iter().enumerate() {
            if k == 0 || m.selects_second(acc, x) {
                sel = Some(k);
            }
            acc = m.apply(acc, x);
        }
        (acc, sel)
    }
}

/// Predicates of Iverson brackets.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pred {
    True,
    False,
    Cmp(CmpOp, Affine, Affine),
    And(Vec<Pred>),
    Or(Vec<Pred>),
    /// `(exists i D p)`: `i` ranges over `[0, D)`.
    Exists(Symbol, Affine, Box<Pred>),
    /// `(R a ...)`: a data relation tested at indices; false out of range.
    Rel(Symbol, Vec<Affine>),
}

/// Core expressions.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Expr {
    Var(Symbol),
    Const(Real),
    Add(Box<Expr>, Box<Expr>),
    Mul(Box<Expr>, Box<Expr>),
    Call(Func, Box<Expr>),
    /// `(max a b)`, `(min a b)`: the first operand unless the second is
    /// strictly better or NaN ([`MaxMin::apply`]).
    MaxMin(MaxMin, Box<Expr>, Box<Expr>),
    /// `(real a)`: the index expression `a` as a real.
    IndexReal(Affine),
    Pair(Box<Expr>, Box<Expr>),
    Fst(Box<Expr>),
    Snd(Box<Expr>),
    /// `(gen i D e)`
    Gen(Symbol, Affine, Box<Expr>),
    /// `(sum i D e)`, `e` real.
    Sum(Symbol, Affine, Box<Expr>),
    /// `(maximum i D e)`, `(minimum i D e)`, `(argmax i D e)`,
    /// `(argmin i D e)`, `e` real: [`Reduce`].
    Reduce(Reduce, Symbol, Affine, Box<Expr>),
    /// `(get e a)`
    Get(Box<Expr>, Affine),
    /// `(iverson p e)`, `e` of any type.
    Iverson(Pred, Box<Expr>),
    /// `(let x e0 e1)`
    Let(Symbol, Box<Expr>, Box<Expr>),
}

impl Expr {
    /// The direct subexpressions, left to right (binder bodies included;
    /// index expressions and predicates are not expressions).
    pub fn children(&self) -> impl Iterator<Item = &Expr> {
        let (a, b): (Option<&Expr>, Option<&Expr>) = match self {
            Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => (None, None),
            Expr::Add(a, b)
            | Expr::Mul(a, b)
            | Expr::MaxMin(_, a, b)
            | Expr::Pair(a, b)
            | Expr::Let(_, a, b) => (Some(a), Some(b)),
            Expr::Call(_, a)
            | Expr::Fst(a)
            | Expr::Snd(a)
            | Expr::Gen(_, _, a)
            | Expr::Sum(_, _, a)
            | Expr::Reduce(_, _, _, a)
            | Expr::Get(a, _)
            | Expr::Iverson(_, a) => (Some(a), None),
        };
        a.into_iter().chain(b)
    }

    /// The same node with each direct subexpression replaced by `f` of it,
    /// left to right; the first error stops the walk. Binders, index
    /// expressions and predicates are kept as they are.
    pub fn try_map_children<E>(
        &self,
        mut f: impl FnMut(&Expr) -> Result<Expr, E>,
    ) -> Result<Expr, E> {
        let mut g = |e: &Expr| f(e).map(Box::new);
        Ok(match self {
            Expr::Var(_) | Expr::Const(_) | Expr::IndexReal(_) => self.clone(),
            Expr::Add(a, b) => Expr::Add(g(a)?, g(b)?),
            Expr::MaxMin(m, a, b) => Expr::MaxMin(*m, g(a)?, g(b)?),
            Expr::Mul(a, b) => Expr::Mul(g(a)?, g(b)?),
            Expr::Pair(a, b) => Expr::Pair(g(a)?, g(b)?),
            Expr::Call(h, a) => Expr::Call(*h, g(a)?),
            Expr::Fst(a) => Expr::Fst(g(a)?),
            Expr::Snd(a) => Expr::Snd(g(a)?),
            Expr::Gen(i, d, a) => Expr::Gen(*i, d.clone(), g(a)?),
            Expr::Sum(i, d, a) => Expr::Sum(*i, d.clone(), g(a)?),
            Expr::Reduce(r, i, d, a) => Expr::Reduce(*r, *i, d.clone(), g(a)?),
            Expr::Get(a, i) => Expr::Get(g(a)?, i.clone()),
            Expr::Iverson(p, a) => Expr::Iverson(p.clone(), g(a)?),
            Expr::Let(x, a, b) => Expr::Let(*x, g(a)?, g(b)?),
        })
    }

    /// [`Self::try_map_children`] for a transformation that cannot fail.
    pub fn map_children(&self, mut f: impl FnMut(&Expr) -> Expr) -> Expr {
        match self.try_map_children(|e| Ok::<_, std::convert::Infallible>(f(e))) {
            Ok(e) => e,
            Err(never) => match never {},
        }
    }

    /// Does `p` hold of this expression or of any subexpression?
    pub fn any(&self, p: &mut impl FnMut(&Expr) -> bool) -> bool {
        p(self) || self.children().any(|c| c.any(p))
    }

    /// A loop over an index (`gen`, `sum` or a [`Reduce`]) of the same
    /// kind as this one, with index `i`, extent `d` and body `body`; `None`
    /// for any other node.
    pub fn same_loop(&self, i: Symbol, d: Affine, body: Expr) -> Option<Expr> {
        let b = Box::new(body);
        Some(match self {
            Expr::Gen(..) => Expr::Gen(i, d, b),
            Expr::Sum(..) => Expr::Sum(i, d, b),
            Expr::Reduce(r, ..) => Expr::Reduce(*r, i, d, b),
            _ => return None,
        })
    }

    /// The name this node binds (`let`, `gen`, `sum`), if any.
    pub fn binder(&self) -> Option<Symbol> {
        match self {
            Expr::Gen(i, ..) | Expr::Sum(i, ..) | Expr::Reduce(_, i, ..) | Expr::Let(i, ..) => {
                Some(*i)
            }
            _ => None,
        }
    }
}

impl Pred {
    /// The direct sub-predicates, left to right.
    pub fn children(&self) -> impl Iterator<Item = &Pred> {
        let (many, one): (&[Pred], Option<&Pred>) = match self {
            Pred::And(ps) | Pred::Or(ps) => (ps, None),
            Pred::Exists(_, _, q) => (&[], Some(q)),
            Pred::True | Pred::False | Pred::Cmp(..) | Pred::Rel(..) => (&[], None),
        };
        many.iter().chain(one)
    }
}

/// Types: `R`, `(pair T T)`, `[D]T`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// `R`, a real.
    Real,
    /// `(pair A B)`.
    Pair(Box<Type>, Box<Type>),
    /// `(tensor D T)`: `D` values of type `T`.
    Tensor(Affine, Box<Type>),
}

impl Type {
    /// `Some([D1..Dk])` if the type is `[D1]...[Dk]R` (k >= 0).
    pub fn real_shape(&self) -> Option<Vec<Affine>> {
        let mut dims = vec![];
        let mut t = self;
        loop {
            match t {
                Type::Real => return Some(dims),
                Type::Tensor(d, e) => {
                    dims.push(d.clone());
                    t = e;
                }
                Type::Pair(..) => return None,
            }
        }
    }

    pub fn tensor(dims: &[Affine], elem: Type) -> Type {
        dims.iter()
            .rev()
            .fold(elem, |t, d| Type::Tensor(d.clone(), Box::new(t)))
    }
}

/// What a parameter is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A real-valued input of the given type.
    Real(Type),
    /// An explicit `(n size)` parameter.
    Size,
    /// A boolean relation of the given dimensions.
    Relation(Vec<Affine>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name.
    pub name: Symbol,
    /// What it is: a real-valued input, a size, a relation.
    pub kind: ParamKind,
}

/// A whole function `(fn NAME (PARAM ...) BODY)` in core form.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The function's name.
    pub name: Symbol,
    /// Parameters in source order (implicit sizes are not parameters).
    pub params: Vec<Param>,
    /// Every size name, explicit and implicit, in order of declaration.
    pub sizes: Vec<Symbol>,
    /// The body, in core forms.
    pub body: Expr,
    /// The type of the result.
    pub ret: Type,
    /// The tensors stored by a relation's pattern (none in most programs).
    pub stored: Storage,
}

/// Which parameters and which leaves of the result are tensors stored by a
/// relation's pattern (`(tensor n m R (stored-by S))`): passed and returned
/// as one value per tuple of the relation. Inside the program such a tensor
/// is the dense tensor that is zero off the pattern, so nothing but the
/// interfaces (values in and out, their sizes, compiled code) reads this.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Storage {
    /// Stored parameters: (parameter, relation), in parameter order.
    pub params: Vec<(Symbol, Symbol)>,
    /// Stored leaves of the result (pairs flattened left to right):
    /// (leaf index, relation), in leaf order.
    pub ret: Vec<(usize, Symbol)>,
}

/// How many leaves a value of type `t` has (pairs flattened).
pub fn leaf_count(t: &Type) -> usize {
    match t {
        Type::Pair(a, b) => leaf_count(a) + leaf_count(b),
        _ => 1,
    }
}

impl Storage {
    pub fn is_empty(&self) -> bool {
        self.params.is_empty() && self.ret.is_empty()
    }

    /// The relation storing parameter `x`, if it is stored.
    pub fn param(&self, x: Symbol) -> Option<Symbol> {
        self.params.iter().find(|(p, _)| *p == x).map(|(_, r)| *r)
    }

    /// The relation storing leaf `k` of the result, if it is stored.
    pub fn leaf(&self, k: usize) -> Option<Symbol> {
        self.ret.iter().find(|(l, _)| *l == k).map(|(_, r)| *r)
    }
}

impl Program {
    pub fn param(&self, name: Symbol) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The real-valued parameters with their types, in order.
    pub fn real_params(&self) -> impl Iterator<Item = (Symbol, &Type)> {
        self.params.iter().filter_map(|p| match &p.kind {
            ParamKind::Real(t) => Some((p.name, t)),
            _ => None,
        })
    }
}

/// Small constructors that keep transformation code readable.
pub mod build {
    use super::*;
    pub fn var(s: Symbol) -> Expr {
        Expr::Var(s)
    }
    pub fn num(x: f64) -> Expr {
        Expr::Const(Real(x))
    }
    pub fn add(a: Expr, b: Expr) -> Expr {
        Expr::Add(Box::new(a), Box::new(b))
    }
    pub fn mul(a: Expr, b: Expr) -> Expr {
        Expr::Mul(Box::new(a), Box::new(b))
    }
    pub fn maxmin(m: MaxMin, a: Expr, b: Expr) -> Expr {
        Expr::MaxMin(m, Box::new(a), Box::new(b))
    }
    pub fn call(f: Func, a: Expr) -> Expr {
        Expr::Call(f, Box::new(a))
    }
    pub fn pair(a: Expr, b: Expr) -> Expr {
        Expr::Pair(Box::new(a), Box::new(b))
    }
    pub fn fst(a: Expr) -> Expr {
        Expr::Fst(Box::new(a))
    }
    pub fn snd(a: Expr) -> Expr {
        Expr::Snd(Box::new(a))
    }
    pub fn gen(i: Symbol, d: Affine, e: Expr) -> Expr {
        Expr::Gen(i, d, Box::new(e))
    }
    pub fn sum(i: Symbol, d: Affine, e: Expr) -> Expr {
        Expr::Sum(i, d, Box::new(e))
    }
    pub fn reduce(r: Reduce, i: Symbol, d: Affine, e: Expr) -> Expr {
        Expr::Reduce(r, i, d, Box::new(e))
    }
    pub fn get(e: Expr, a: Affine) -> Expr {
        Expr::Get(Box::new(e), a)
    }
    pub fn iverson(p: Pred, e: Expr) -> Expr {
        Expr::Iverson(p, Box::new(e))
    }
    pub fn let_(x: Symbol, e0: Expr, e1: Expr) -> Expr {
        Expr::Let(x, Box::new(e0), Box::new(e1))
    }
}
