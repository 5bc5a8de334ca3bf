//! ATL as an egg [`egg::Language`], and conversion between core [`Expr`] and
//! egg's [`RecExpr`].
//!
//! Five sorts share one language: real expressions, predicates, index
//! expressions, names and black-box functions. Names (`Sym`), index
//! expressions (`Aff`, an affine normal form written `@2*i+n-1`) and
//! functions (`Fun`) are leaves, so that rules written as patterns can bind
//! them (`(gen ?i ?n ?e)`, `(call ?f ?x)`). A variable reference is
//! `(var x)`, never the bare name: a name class stays a name and is never
//! merged with an expression. Every black box is one `call` node over the
//! front end's one table of them ([`Func`]). Comparisons are only `<`, `<=`,
//! `==` (the front end's `>`/`>=` are flipped); `and`/`or` are binary.

use crate::front::affine::Affine;
use crate::front::ast::{CmpOp, Expr, Func, MaxMin, Pred, Real, Reduce};
use crate::symbol::Symbol;
use egg::{define_language, Id, RecExpr};
use std::fmt;
use std::str::FromStr;

define_language! {
    pub enum Atl {
        "var" = Var(Id),
        "+" = Add([Id; 2]),
        "*" = Mul([Id; 2]),
        // (max a b), (min a b): the first operand unless the second is
        // strictly better or NaN
        "max" = Max([Id; 2]),
        "min" = Min([Id; 2]),
        // (real a): the index expression a (an `Aff` leaf) as a real
        "real" = IndexReal(Id),
        // (call f x), (call f x k): the black box f (a [`Fun`] leaf) at x;
        // pow and dpow take their exponent k, a constant class. One operator
        // of two arities, read through [`Atl::as_call`] (with a slice of
        // children, boxed or inline, programs full of calls took 3-6% longer:
        // egg's node matching was no longer inlined)
        "call" = Call([Id; 2]),
        "call" = CallK([Id; 3]),
        "pair" = Pair([Id; 2]),
        "fst" = Fst(Id),
        "snd" = Snd(Id),
        // (gen i D e), (sum i D e): i a name, D an index expression
        "gen" = Gen([Id; 3]),
        "sum" = Sum([Id; 3]),
        // (maximum i D e), (minimum i D e), (argmax i D e), (argmin i D e):
        // the reductions beside sum ([`crate::front::ast::Reduce`])
        "maximum" = Maximum([Id; 3]),
        "minimum" = Minimum([Id; 3]),
        "argmax" = ArgMax([Id; 3]),
        "argmin" = ArgMin([Id; 3]),
        // (get e a)
        "get" = Get([Id; 2]),
        // (iverson p e)
        "iverson" = Iverson([Id; 2]),
        // (let x e0 e1)
        "let" = Let([Id; 3]),
        "true" = True,
        "false" = False,
        "and" = And([Id; 2]),
        "or" = Or([Id; 2]),
        "<" = Lt([Id; 2]),
        "<=" = Le([Id; 2]),
        "==" = Eq([Id; 2]),
        // (exists i D p)
        "exists" = Exists([Id; 3]),
        // (rel R a ...)
        "rel" = Rel(Box<[Id]>),
        // Differentiation only, never part of an extracted program
        // ([`Atl::is_extension`]):
        // (D e): the forward derivative of e, pushed down by rules/forward.rules;
        "D" = D(Id),
        // (dot w e): the inner product <w | e> of two values of one type (the
        // paper's Figure "Grammar and Semantics for the extension of the
        // language with inner-products"), rules/adjoint.rules;
        "dot" = Dot([Id; 2]),
        // (dlet x d s): the paper's `mlet dx = d in s`, binding the tangent of
        // the variable x (its name under sigma) in the linear form s;
        "dlet" = DLet([Id; 3]),
        // (coeff P s): the coefficient of the tangent entry P (a path
        // (get (var dx) @g)...) in the linear form s: d s / d P at zero tangents;
        "coeff" = Coeff([Id; 2]),
        // (drop x s): s with the tangent of x set to zero.
        "drop" = Drop([Id; 2]),
        Num(Num),
        Aff(Idx),
        // before Sym: a leaf spelled like a black box reads as one ([`Fun`])
        Fun(Fun),
        Sym(Symbol),
    }
}

impl Atl {
    /// Is this node one of the differentiation phase's extension forms
    /// (`D`, `dot`, `dlet`, `coeff`, `drop`), which no extracted program may
    /// contain?
    /// The node of a reduction over the children `[i, D, e]`.
    pub fn reduce(r: Reduce, kids: [Id; 3]) -> Atl {
        match r {
            Reduce::Maximum => Atl::Maximum(kids),
            Reduce::Minimum => Atl::Minimum(kids),
            Reduce::ArgMax => Atl::ArgMax(kids),
            Reduce::ArgMin => Atl::ArgMin(kids),
        }
    }

    /// A reduction node: which one, and its children `[i, D, e]`.
    pub fn as_reduce(&self) -> Option<(Reduce, [Id; 3])> {
        Some(match self {
            Atl::Maximum(k) => (Reduce::Maximum, *k),
            Atl::Minimum(k) => (Reduce::Minimum, *k),
            Atl::ArgMax(k) => (Reduce::ArgMax, *k),
            Atl::ArgMin(k) => (Reduce::ArgMin, *k),
            _ => return None,
        })
    }

    pub fn is_extension(&self) -> bool {
        matches!(
            self,
            Atl::D(_) | Atl::Dot(_) | Atl::DLet(_) | Atl::Coeff(_) | Atl::Drop(_)
        )
    }

    /// Is this node a predicate (`true`, `false`, `and`, `or`, a
    /// comparison, `exists`, `rel`)?
    pub fn is_predicate(&self) -> bool {
        matches!(
            self,
            Atl::True
                | Atl::False
                | Atl::And(_)
                | Atl::Or(_)
                | Atl::Lt(_)
                | Atl::Le(_)
                | Atl::Eq(_)
                | Atl::Exists(_)
                | Atl::Rel(_)
        )
    }

    /// Is this node a real-valued expression (not a predicate, an index
    /// expression, a name or a function leaf)?
    pub fn is_expression(&self) -> bool {
        !self.is_predicate() && !matches!(self, Atl::Sym(_) | Atl::Fun(_) | Atl::Aff(_))
    }

    /// The call `(call f x [k])`.
    pub fn call(f: Id, x: Id, k: Option<Id>) -> Atl {
        match k {
            Some(k) => Atl::CallK([f, x, k]),
            None => Atl::Call([f, x]),
        }
    }

    /// A call's classes: its function leaf, its argument and its exponent.
    pub fn as_call(&self) -> Option<(Id, Id, Option<Id>)> {
        match *self {
            Atl::Call([f, x]) => Some((f, x, None)),
            Atl::CallK([f, x, k]) => Some((f, x, Some(k))),
            _ => None,
        }
    }

    /// What the node adds to the size of a term: nothing for a function
    /// leaf, which is the operator of its call rather than an operand (a
    /// call weighs what one node per black box did), one for the others.
    pub fn weight(&self) -> usize {
        usize::from(!matches!(self, Atl::Fun(_)))
    }
}

/// A black-box function leaf: a [`Func`] by name, without the exponent of
/// `pow` and `dpow`, which is the call's last child, a constant class (so
/// that rules compute with it: `(call dpow ?x (+ ?k -1))`). One call node
/// over the front end's one table of black boxes, so rules the same for
/// every function are written once, over `(call ?f ...)`.
///
/// A leaf's text is read as a function before it is read as a name, so in
/// the text of a term (a rule file) `exp` is the function. Programs never
/// reach the e-graph as text: their names are added as [`Atl::Sym`] leaves
/// ([`ToRec`]), so a variable named `exp` is `(var exp)` over a `Sym`, in
/// another class than the function `exp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fun(&'static str);

impl Fun {
    pub fn of(f: Func) -> Fun {
        Fun(f.name())
    }
    /// Every black box: those of no parameter, then those with one, each
    /// in the order of their table.
    pub fn all() -> impl Iterator<Item = Fun> {
        let plain = Func::names().filter(|f| Func::param_of(f).is_none());
        let with_param = Func::names().filter(|f| Func::param_of(f).is_some());
        plain.chain(with_param).map(Fun)
    }
    pub fn name(self) -> &'static str {
        self.0
    }
    /// Does the call take an exponent (`pow`, `dpow`)?
    pub fn takes_exponent(self) -> bool {
        Func::param_of(self.0).is_some()
    }
    /// The black box called with exponent `k` (`None` for a wrong arity).
    pub fn at(self, k: Option<Real>) -> Option<Func> {
        Func::from_name(self.0, k.map(|k| k.0))
    }
}

impl FromStr for Fun {
    type Err = ();
    fn from_str(s: &str) -> Result<Fun, ()> {
        Fun::all().find(|f| f.0 == s).ok_or(())
    }
}

impl fmt::Display for Fun {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A real constant leaf; reads only ATL number syntax (so that names like
/// `inf` stay names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Num(pub Real);

impl FromStr for Num {
    type Err = ();
    fn from_str(s: &str) -> Result<Num, ()> {
        let t = s.strip_prefix(['+', '-']).unwrap_or(s);
        let first = t.bytes().next().ok_or(())?;
        if !(first.is_ascii_digit() || first == b'.') {
            return Err(());
        }
        s.parse::<f64>().map(|x| Num(Real(x))).map_err(|_| ())
    }
}

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An index-expression leaf: an affine form, written `@` + compact text.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Idx(pub Affine);

impl fmt::Display for Idx {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "@")?;
        let a = &self.0;
        let mut first = true;
        for (n, k) in &a.terms {
            let sign = if *k < 0 {
                "-"
            } else if first {
                ""
            } else {
                "+"
            };
            let m = k.unsigned_abs();
            if m == 1 {
                write!(f, "{sign}{n}")?;
            } else {
                write!(f, "{sign}{m}*{n}")?;
            }
            first = false;
        }
        if first {
            write!(f, "{}", a.constant)
        } else if a.constant > 0 {
            write!(f, "+{}", a.constant)
        } else if a.constant < 0 {
            write!(f, "{}", a.constant)
        } else {
            Ok(())
        }
    }
}

impl FromStr for Idx {
    type Err = ();
    /// `@3`, `@i`, `@2*i+n-1`, `@-i+3`.
    fn from_str(s: &str) -> Result<Idx, ()> {
        let body = s.strip_prefix('@').ok_or(())?;
        if body.is_empty() {
            return Err(());
        }
        let mut acc = Affine::constant(0);
        let mut rest = body;
        while !rest.is_empty() {
            let (neg, r) = match rest.as_bytes()[0] {
                b'-' => (true, &rest[1..]),
                b'+' => (false, &rest[1..]),
                _ => (false, rest),
            };
            let end = r.find(['+', '-']).unwrap_or(r.len());
            let term = &r[..end];
            rest = &r[end..];
            let sign = if neg { -1 } else { 1 };
            let part = match term.split_once('*') {
                Some((k, n)) => {
                    let k: i64 = k.parse().map_err(|_| ())?;
                    Affine::var(Symbol::from(n))
                        .scale(k * sign)
                        .map_err(|_| ())?
                }
                None => match term.parse::<i64>() {
                    Ok(k) => Affine::constant(k * sign),
                    Err(_) if !term.is_empty() => Affine::var(Symbol::from(term))
                        .scale(sign)
                        .map_err(|_| ())?,
                    Err(_) => return Err(()),
                },
            };
            acc = acc.add(&part).map_err(|_| ())?;
        }
        Ok(Idx(acc))
    }
}

/// Adds core expressions to a [`RecExpr`].
#[derive(Default)]
pub struct ToRec {
    pub rec: RecExpr<Atl>,
}

impl ToRec {
    fn add(&mut self, n: Atl) -> Id {
        self.rec.add(n)
    }
    fn sym(&mut self, s: Symbol) -> Id {
        self.add(Atl::Sym(s))
    }
    fn aff(&mut self, a: &Affine) -> Id {
        self.add(Atl::Aff(Idx(a.clone())))
    }

    pub fn pred(&mut self, p: &Pred) -> Id {
        match p {
            Pred::True => self.add(Atl::True),
            Pred::False => self.add(Atl::False),
            Pred::Cmp(op, a, b) => {
                let (a, b) = (self.aff(a), self.aff(b));
                self.add(match op {
                    CmpOp::Lt => Atl::Lt([a, b]),
                    CmpOp::Le => Atl::Le([a, b]),
                    CmpOp::Eq => Atl::Eq([a, b]),
                    CmpOp::Gt => Atl::Lt([b, a]),
                    CmpOp::Ge => Atl::Le([b, a]),
                })
            }
            Pred::And(ps) | Pred::Or(ps) => {
                let is_and = matches!(p, Pred::And(_));
                let mut ids = ps
                    .iter()
                    .map(|q| self.pred(q))
                    .collect::<Vec<_>>()
                    .into_iter();
                let Some(mut acc) = ids.next() else {
                    return self.add(if is_and { Atl::True } else { Atl::False });
                };
                for id in ids {
                    acc = self.add(if is_and {
                        Atl::And([acc, id])
                    } else {
                        Atl::Or([acc, id])
                    });
                }
                acc
            }
            Pred::Exists(i, d, q) => {
                let (i, d) = (self.sym(*i), self.aff(d));
                let q = self.pred(q);
                self.add(Atl::Exists([i, d, q]))
            }
            Pred::Rel(r, idx) => {
                let mut ids = vec![self.sym(*r)];
                ids.extend(idx.iter().map(|a| self.aff(a)));
                self.add(Atl::Rel(ids.into_boxed_slice()))
            }
        }
    }

    pub fn expr(&mut self, e: &Expr) -> Id {
        match e {
            Expr::Var(x) => {
                let s = self.sym(*x);
                self.add(Atl::Var(s))
            }
            Expr::Const(c) => self.add(Atl::Num(Num(*c))),
            Expr::Add(a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                self.add(Atl::Add([a, b]))
            }
            Expr::Mul(a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                self.add(Atl::Mul([a, b]))
            }
            Expr::MaxMin(m, a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                self.add(match m {
                    MaxMin::Max => Atl::Max([a, b]),
                    MaxMin::Min => Atl::Min([a, b]),
                })
            }
            Expr::IndexReal(a) => {
                let a = self.aff(a);
                self.add(Atl::IndexReal(a))
            }
            Expr::Call(f, a) => {
                let a = self.expr(a);
                let k = f.exponent().map(|k| self.add(Atl::Num(Num(k))));
                let f = self.add(Atl::Fun(Fun::of(*f)));
                self.add(Atl::call(f, a, k))
            }
            Expr::Pair(a, b) => {
                let (a, b) = (self.expr(a), self.expr(b));
                self.add(Atl::Pair([a, b]))
            }
            Expr::Fst(a) => {
                let a = self.expr(a);
                self.add(Atl::Fst(a))
            }
            Expr::Snd(a) => {
                let a = self.expr(a);
                self.add(Atl::Snd(a))
            }
            Expr::Gen(i, d, b) | Expr::Sum(i, d, b) => {
                let (i, d) = (self.sym(*i), self.aff(d));
                let b = self.expr(b);
                self.add(if matches!(e, Expr::Gen(..)) {
                    Atl::Gen([i, d, b])
                } else {
                    Atl::Sum([i, d, b])
                })
            }
            Expr::Reduce(r, i, d, b) => {
                let (i, d) = (self.sym(*i), self.aff(d));
                let b = self.expr(b);
                self.add(Atl::reduce(*r, [i, d, b]))
            }
            Expr::Get(a, i) => {
                let a = self.expr(a);
                let i = self.aff(i);
                self.add(Atl::Get([a, i]))
            }
            Expr::Iverson(p, a) => {
                let p = self.pred(p);
                let a = self.expr(a);
                self.add(Atl::Iverson([p, a]))
            }
            Expr::Let(x, a, b) => {
                let x = self.sym(*x);
                let (a, b) = (self.expr(a), self.expr(b));
                self.add(Atl::Let([x, a, b]))
            }
        }
    }
}

pub fn to_rec(e: &Expr) -> RecExpr<Atl> {
    let mut t = ToRec::default();
    t.expr(e);
    t.rec
}

/// Why a term could not be read back as a core expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortError(pub String);

/// Reads terms of the language back into core syntax; `node(id)` gives the
/// node chosen for an id (a RecExpr's node, or an extracted class's best).
pub struct FromRec<'a, F: Fn(Id) -> &'a Atl> {
    pub node: F,
}

fn sort_err<T>(what: &str, n: &Atl) -> Result<T, SortError> {
    Err(SortError(format!("expected {what}, found {n}")))
}

impl<'a, F: Fn(Id) -> &'a Atl> FromRec<'a, F> {
    pub fn name(&self, id: Id) -> Result<Symbol, SortError> {
        match (self.node)(id) {
            Atl::Sym(s) => Ok(*s),
            n => sort_err("a name", n),
        }
    }

    pub fn aff(&self, id: Id) -> Result<Affine, SortError> {
        match (self.node)(id) {
            Atl::Aff(a) => Ok(a.0.clone()),
            n => sort_err("an index expression", n),
        }
    }

    pub fn pred(&self, id: Id) -> Result<Pred, SortError> {
        let n = (self.node)(id);
        Ok(match n {
            Atl::True => Pred::True,
            Atl::False => Pred::False,
            Atl::And([a, b]) | Atl::Or([a, b]) => {
                let is_and = matches!(n, Atl::And(_));
                let mut parts = vec![];
                for q in [self.pred(*a)?, self.pred(*b)?] {
                    match (q, is_and) {
                        (Pred::And(v), true) | (Pred::Or(v), false) => parts.extend(v),
                        (q, _) => parts.push(q),
                    }
                }
                if is_and {
                    Pred::And(parts)
                } else {
                    Pred::Or(parts)
                }
            }
            Atl::Lt([a, b]) => Pred::Cmp(CmpOp::Lt, self.aff(*a)?, self.aff(*b)?),
            Atl::Le([a, b]) => Pred::Cmp(CmpOp::Le, self.aff(*a)?, self.aff(*b)?),
            Atl::Eq([a, b]) => Pred::Cmp(CmpOp::Eq, self.aff(*a)?, self.aff(*b)?),
            Atl::Exists([i, d, q]) => {
                Pred::Exists(self.name(*i)?, self.aff(*d)?, Box::new(self.pred(*q)?))
            }
            Atl::Rel(ids) => {
                let r = self.name(ids[0])?;
                let idx = ids[1..]
                    .iter()
                    .map(|a| self.aff(*a))
                    .collect::<Result<Vec<_>, _>>()?;
                Pred::Rel(r, idx)
            }
            n => return sort_err("a predicate", n),
        })
    }

    pub fn fun(&self, id: Id) -> Result<Fun, SortError> {
        match (self.node)(id) {
            Atl::Fun(f) => Ok(*f),
            n => sort_err("a black box", n),
        }
    }

    fn num(&self, id: Id) -> Result<Real, SortError> {
        match (self.node)(id) {
            Atl::Num(k) => Ok(k.0),
            n => sort_err("a constant exponent", n),
        }
    }

    pub fn expr(&self, id: Id) -> Result<Expr, SortError> {
        use crate::front::ast::build::*;
        let n = (self.node)(id);
        if let Some((f, a, k)) = n.as_call() {
            let k = k.map(|k| self.num(k)).transpose()?;
            let Some(f) = self.fun(f)?.at(k) else {
                return sort_err("a call with the arguments of its black box", n);
            };
            return Ok(call(f, self.expr(a)?));
        }
        Ok(match n {
            Atl::Var(x) => Expr::Var(self.name(*x)?),
            Atl::Num(k) => Expr::Const(k.0),
            Atl::Add([a, b]) => add(self.expr(*a)?, self.expr(*b)?),
            Atl::Mul([a, b]) => mul(self.expr(*a)?, self.expr(*b)?),
            Atl::Max([a, b]) => maxmin(MaxMin::Max, self.expr(*a)?, self.expr(*b)?),
            Atl::Min([a, b]) => maxmin(MaxMin::Min, self.expr(*a)?, self.expr(*b)?),
            Atl::IndexReal(a) => Expr::IndexReal(self.aff(*a)?),
            Atl::Pair([a, b]) => pair(self.expr(*a)?, self.expr(*b)?),
            Atl::Fst(a) => fst(self.expr(*a)?),
            Atl::Snd(a) => snd(self.expr(*a)?),
            Atl::Gen([i, d, b]) => gen(self.name(*i)?, self.aff(*d)?, self.expr(*b)?),
            Atl::Sum([i, d, b]) => sum(self.name(*i)?, self.aff(*d)?, self.expr(*b)?),
            Atl::Maximum([i, d, b])
            | Atl::Minimum([i, d, b])
            | Atl::ArgMax([i, d, b])
            | Atl::ArgMin([i, d, b]) => {
                let r = n.as_reduce().expect("a reduction").0;
                reduce(r, self.name(*i)?, self.aff(*d)?, self.expr(*b)?)
            }
            Atl::Get([a, i]) => get(self.expr(*a)?, self.aff(*i)?),
            Atl::Iverson([p, a]) => iverson(self.pred(*p)?, self.expr(*a)?),
            Atl::Let([x, a, b]) => let_(self.name(*x)?, self.expr(*a)?, self.expr(*b)?),
            n => return sort_err("an expression", n),
        })
    }
}

pub fn from_rec(rec: &RecExpr<Atl>) -> Result<Expr, SortError> {
    let root = Id::from(rec.as_ref().len() - 1);
    FromRec {
        node: |id: Id| &rec[id],
    }
    .expr(root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::parse_program;

    #[test]
    fn idx_text_round_trips() {
        for s in ["@0", "@-3", "@i", "@-i+3", "@2*i+n-1", "@-2*j"] {
            let a: Idx = s.parse().unwrap();
            assert_eq!(a.to_string(), s);
        }
        assert!("i".parse::<Idx>().is_err());
        assert!("inf".parse::<Num>().is_err());
        assert_eq!("2.5".parse::<Num>().unwrap().0 .0, 2.5);
    }

    #[test]
    fn expr_round_trips_through_recexpr() {
        let p = parse_program(
            b"(fn f ((x (tensor n R)) (S (relation n)))
                (let y (gen i n (pow (get x (- i 1)) 3))
                  (sum i n (iverson (and (S i) (or (< i 2) (> i 4)) (exists k n (== k i)))
                     (* (get y i) (exp (get x i)))))))",
        )
        .unwrap();
        let rec = to_rec(&p.body);
        let back = from_rec(&rec).unwrap();
        // `>` is flipped to `<`, so compare after a second trip.
        assert_eq!(from_rec(&to_rec(&back)).unwrap(), back);
        let text = rec.to_string();
        let reparsed: RecExpr<Atl> = text.parse().unwrap();
        assert_eq!(from_rec(&reparsed), from_rec(&rec));
    }

    #[test]
    fn calls_name_their_black_box_in_a_leaf_of_its_own() {
        let p = parse_program(b"(fn f ((exp R)) (+ (exp exp) (pow exp 2.5)))").unwrap();
        let rec = to_rec(&p.body);
        let nodes = rec.as_ref();
        // the variable `exp` is a name leaf, the function `exp` a function leaf
        assert!(nodes.contains(&Atl::Sym(Symbol::from("exp"))));
        assert!(nodes.contains(&Atl::Fun("exp".parse().unwrap())));
        assert_eq!(from_rec(&rec).unwrap(), p.body);
        assert_eq!(
            rec.to_string(),
            "(+ (call exp (var exp)) (call pow (var exp) 2.5))"
        );
        // a call with the arguments of another black box is not an expression
        let wrong: RecExpr<Atl> = "(call exp 1 2)".parse().unwrap();
        assert!(from_rec(&wrong).is_err());
        let wrong: RecExpr<Atl> = "(call pow 1)".parse().unwrap();
        assert!(from_rec(&wrong).is_err());
        assert!("expo".parse::<Fun>().is_err());
        for f in Fun::all() {
            assert_eq!(f.name().parse::<Fun>(), Ok(f));
        }
    }
}
