//! Random well-typed ATL programs, as source text with sugar.
//!
//! Every program is generated twice at once: as the *sugared* source, and
//! as the *core* program that docs/language.md says the sugar stands for, desugared
//! here by hand from the contract's text (n-ary `+`/`*` nest to the left,
//! `(- e)` is `(* -1 e)`, pointwise operators let-bind non-atomic operands
//! left first, a sum of a tensor body is a `let` of a `gen`, ...), using
//! fresh names (`tq..`, `jq..`, `kq..`) that the source never uses. The two
//! texts must elaborate to programs with the same value and the same cost.
//!
//! The generator tracks types (with [`Type`] and normalized [`Affine`]
//! dimensions) and scopes, so every program type-checks. It produces every
//! form of the language: `let` (also nested in `gen`/`sum`), `gen`, `sum`,
//! `get` with affine indices (shifts, strides, constants, sizes; possibly
//! out of range), `iverson` with every kind of predicate, pairs, black boxes
//! (with arguments kept in their domains), constants, and all the sugar.
//! Sizes and dimensions stay small; depth is bounded.

use atl_egg::backend::sexp::type_to_string;
use atl_egg::front::affine::Affine;
use atl_egg::front::ast::Type;
use atl_egg::rng::Rng;
use atl_egg::Symbol;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::fmt;

/// Knobs of the program generator.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Maximum nesting depth of expressions (leaves at 0).
    pub max_depth: u32,
    /// Use sugar (n-ary ops, `-`, `/`, multi-index `get`, pointwise ops,
    /// sums of tensors); without it the program is in core forms.
    pub sugar: bool,
    /// Probability that a binder reuses (shadows) a visible name.
    pub shadow: f64,
    /// Allow relation parameters and relation tests.
    pub relations: bool,
    /// Allow pair types.
    pub pairs: bool,
    /// Probability that a variable leaf is taken from the innermost variable
    /// in scope (when its type fits): makes bodies use their binders.
    pub prefer_innermost: f64,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig {
            max_depth: 4,
            sugar: true,
            shadow: 0.15,
            relations: true,
            pairs: true,
            prefer_innermost: 0.0,
        }
    }
}

/// A generated program: the sugared source and the core program it stands
/// for, desugared by hand.
#[derive(Clone)]
pub struct Generated {
    pub seed: u64,
    /// The depth it was generated with (`GenConfig::max_depth`).
    pub depth: u32,
    pub sugar: String,
    pub core: String,
    /// Which sugar and other notable productions were used: `"nary"`,
    /// `"neg"`, `"sub"`, `"div"`, `"multi-get"`, `"pointwise"` (two tensor
    /// operands), `"pointwise-scalar"` (a tensor and a real),
    /// `"pointwise-call"` (a black box on a tensor), `"sum-tensor"`,
    /// `"shadow"` (a binder reuses a visible name), `"let-in-loop"`.
    pub features: BTreeSet<&'static str>,
}

impl fmt::Debug for Generated {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "Generated {{ seed: {}, depth: {} }}\n--- sugared source:\n{}\n--- desugared by hand (docs/language.md):\n{}\n",
            self.seed, self.depth, self.sugar, self.core
        )
    }
}

/// What a generated open term may refer to.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// Real-valued variables and their types (innermost last).
    pub vars: Vec<(String, Type)>,
    /// Index variables (innermost last).
    pub idx: Vec<String>,
    /// Size names (at least one).
    pub sizes: Vec<&'static str>,
    /// Relations and their arities.
    pub rels: Vec<(&'static str, usize)>,
}

fn scoped<'a>(rng: &'a mut Rng, cfg: &'a GenConfig, scope: &Scope) -> G<'a> {
    let mut g = G::new(rng, cfg);
    g.vars = scope.vars.clone();
    g.idx = scope.idx.clone();
    g.sizes = scope.sizes.clone();
    g.rels = scope.rels.clone();
    g
}

/// An open term of type `ty` in `scope`, as source text (with sugar when
/// `cfg.sugar`).
pub fn term_text(rng: &mut Rng, cfg: &GenConfig, scope: &Scope, ty: &Type, depth: u32) -> String {
    scoped(rng, cfg, scope).expr(ty, depth).s
}

/// A predicate in `scope`.
pub fn pred_text(rng: &mut Rng, cfg: &GenConfig, scope: &Scope, depth: u32) -> String {
    scoped(rng, cfg, scope).pred(depth)
}

/// An index expression in `scope`.
pub fn index_text(rng: &mut Rng, cfg: &GenConfig, scope: &Scope) -> String {
    scoped(rng, cfg, scope).index()
}

/// The program of a seed.
pub fn generate(seed: u64, cfg: &GenConfig) -> Generated {
    let mut rng = Rng::new(seed);
    let mut g = G::new(&mut rng, cfg);
    let (sugar, core) = g.program(seed);
    let features = std::mem::take(&mut g.features);
    Generated {
        seed,
        depth: cfg.max_depth,
        sugar,
        core,
        features,
    }
}

/// A proptest strategy over generated programs: a seed and a depth up to
/// `cfg.max_depth` (shrinking lowers the depth, giving smaller programs). A
/// failing case is reported with its seed and both texts.
pub fn arb_program(cfg: GenConfig) -> impl Strategy<Value = Generated> {
    (any::<u64>(), 1..=cfg.max_depth.max(1)).prop_map(move |(seed, depth)| {
        let cfg = GenConfig {
            max_depth: depth,
            ..cfg.clone()
        };
        generate(seed, &cfg)
    })
}

// ---------------------------------------------------------------------------

/// A generated expression: sugared text, core text (desugared by hand), its
/// type, and whether the core is a variable or a constant (used in place by
/// the pointwise sugar).
#[derive(Clone, Debug)]
struct Out {
    s: String,
    c: String,
    ty: Type,
    atom: bool,
}

impl Out {
    fn same(text: String, ty: Type, atom: bool) -> Out {
        Out {
            s: text.clone(),
            c: text,
            ty,
            atom,
        }
    }
    /// A core form `(head parts...)` over children (rendered in both texts).
    fn form(head: &str, parts: &[&Out], ty: Type) -> Out {
        let s: Vec<&str> = parts.iter().map(|p| p.s.as_str()).collect();
        let c: Vec<&str> = parts.iter().map(|p| p.c.as_str()).collect();
        Out {
            s: format!("({head} {})", s.join(" ")),
            c: format!("({head} {})", c.join(" ")),
            ty,
            atom: false,
        }
    }
    fn core(&self) -> (String, Type, bool) {
        (self.c.clone(), self.ty.clone(), self.atom)
    }
}

/// A black box, possibly with its constant exponent.
#[derive(Clone, Copy, Debug)]
struct Fun {
    name: &'static str,
    k: Option<&'static str>,
}

impl Fun {
    fn apply(&self, arg: &str) -> String {
        match self.k {
            Some(k) => format!("({} {arg} {k})", self.name),
            None => format!("({} {arg})", self.name),
        }
    }
}

const fn f(name: &'static str) -> Fun {
    Fun { name, k: None }
}
const fn fk(name: &'static str, k: &'static str) -> Fun {
    Fun { name, k: Some(k) }
}

/// Black boxes defined and tame on all reals.
const TOTAL_FUNS: &[Fun] = &[
    f("sin"),
    f("cos"),
    f("tanh"),
    f("sigmoid"),
    f("relu"),
    f("dtanh"),
    f("dsigmoid"),
    f("dcos"),
    fk("pow", "2"),
    fk("pow", "3"),
    fk("dpow", "2"),
    fk("dpow", "3"),
];
/// Black boxes that need a positive argument.
const POSITIVE_FUNS: &[Fun] = &[
    f("log"),
    f("sqrt"),
    f("recip"),
    f("dsqrt"),
    f("drecip"),
    fk("pow", "0.5"),
    fk("pow", "-1"),
    fk("dpow", "1.5"),
    f("lgamma"),
    f("digamma"),
    fk("polygamma", "1"),
];
const CONSTANTS: &[&str] = &[
    "0", "1", "2", "-1", "0.5", "2.5", "-0.75", "3e-2", "1.25", "-0.0",
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    Get,
    Fst,
    Snd,
}

struct G<'a> {
    rng: &'a mut Rng,
    cfg: &'a GenConfig,
    sizes: Vec<&'static str>,
    /// Relations: name and arity.
    rels: Vec<(&'static str, usize)>,
    /// Real-valued variables in scope (innermost last).
    vars: Vec<(String, Type)>,
    /// Index variables in scope (innermost last).
    idx: Vec<String>,
    names: usize,
    fresh: usize,
    features: BTreeSet<&'static str>,
}

fn size(name: &str) -> Affine {
    Affine::var(Symbol::from(name))
}

fn tensor(d: Affine, t: Type) -> Type {
    Type::Tensor(d, Box::new(t))
}

fn pair(a: Type, b: Type) -> Type {
    Type::Pair(Box::new(a), Box::new(b))
}

fn shape(t: &Type) -> Option<Vec<Affine>> {
    t.real_shape()
}

/// Every access path of at most `max` steps into a value of type `t`, with
/// the type it reaches.
fn paths(t: &Type, max: usize) -> Vec<(Vec<Step>, Type)> {
    let mut out = vec![(vec![], t.clone())];
    if max == 0 {
        return out;
    }
    let mut next = |step: Step, sub: &Type| {
        for (mut p, ty) in paths(sub, max - 1) {
            p.insert(0, step);
            out.push((p, ty));
        }
    };
    match t {
        Type::Real => {}
        Type::Tensor(_, e) => next(Step::Get, e),
        Type::Pair(a, b) => {
            next(Step::Fst, a);
            next(Step::Snd, b);
        }
    }
    out
}

impl<'a> G<'a> {
    fn new(rng: &'a mut Rng, cfg: &'a GenConfig) -> G<'a> {
        G {
            rng,
            cfg,
            sizes: vec![],
            rels: vec![],
            vars: vec![],
            idx: vec![],
            names: 0,
            fresh: 0,
            features: BTreeSet::new(),
        }
    }

    // -- names ----------------------------------------------------------------

    fn fresh(&mut self, base: &str) -> String {
        self.fresh += 1;
        format!("{base}{}", self.fresh)
    }

    fn visible_vars(&self) -> Vec<(String, Type)> {
        let mut seen = std::collections::HashSet::new();
        let mut out = vec![];
        for (n, t) in self.vars.iter().rev() {
            if seen.insert(n.clone()) {
                out.push((n.clone(), t.clone()));
            }
        }
        out
    }

    fn visible_idx(&self) -> Vec<String> {
        let mut out: Vec<String> = vec![];
        for n in self.idx.iter().rev() {
            if !out.contains(n) {
                out.push(n.clone());
            }
        }
        out
    }

    /// A binder name for a `let` (a fresh one, or a visible variable's).
    fn let_name(&mut self) -> String {
        let vis = self.visible_vars();
        if !vis.is_empty() && self.rng.chance(self.cfg.shadow) {
            self.features.insert("shadow");
            return self.rng.pick(&vis).0.clone();
        }
        self.names += 1;
        format!("a{}", self.names)
    }

    /// A binder name for `gen`/`sum`/`exists`.
    fn index_name(&mut self, base: &str) -> String {
        let vis = self.visible_idx();
        if !vis.is_empty() && self.rng.chance(self.cfg.shadow) {
            self.features.insert("shadow");
            return self.rng.pick(&vis).clone();
        }
        self.names += 1;
        format!("{base}{}", self.names)
    }

    // -- dimensions, types, indices, predicates --------------------------------

    fn a_size(&mut self) -> &'static str {
        self.sizes[self.rng.below(self.sizes.len())]
    }

    fn dim(&mut self) -> Affine {
        let s = size(self.a_size());
        match self.rng.weighted(&[8, 2, 1, 2, 1, 1, 1]) {
            0 => s,
            1 => Affine::constant(2),
            2 => Affine::constant(3),
            3 => s.add_constant(1).unwrap(),
            4 => s.scale(2).unwrap(),
            5 => Affine::constant(1),
            _ => Affine::constant(0),
        }
    }

    fn rtype(&mut self, depth: u32) -> Type {
        let pairs = self.cfg.pairs as u32;
        let deep = (depth > 0) as u32;
        match self
            .rng
            .weighted(&[8, 4, 2 * deep, pairs, pairs * deep, pairs * deep])
        {
            0 => Type::Real,
            1 => tensor(self.dim(), Type::Real),
            2 => tensor(self.dim(), tensor(self.dim(), Type::Real)),
            3 => pair(Type::Real, Type::Real),
            4 => pair(Type::Real, tensor(self.dim(), Type::Real)),
            _ => tensor(self.dim(), pair(Type::Real, Type::Real)),
        }
    }

    fn index(&mut self) -> String {
        let ivs = self.visible_idx();
        let s = self.a_size();
        let consts = ["0", "1", "2", "3", "5", "-1"];
        if ivs.is_empty() {
            return match self.rng.weighted(&[4, 1, 1]) {
                0 => self.rng.pick(&consts).to_string(),
                1 => s.to_string(),
                _ => format!("(- {s} 1)"),
            };
        }
        // the innermost index is the likeliest
        let i = if self.rng.chance(0.6) {
            ivs[0].clone()
        } else {
            self.rng.pick(&ivs).clone()
        };
        let j = self.rng.pick(&ivs).clone();
        match self.rng.weighted(&[8, 2, 2, 1, 1, 1, 1, 1, 1]) {
            0 => i,
            1 => format!("(+ {i} 1)"),
            2 => format!("(- {i} 1)"),
            3 => format!("(* 2 {i})"),
            4 => format!("(+ {i} {j})"),
            5 => format!("(- (- {s} 1) {i})"),
            6 => format!("(+ {i} {j} -1)"),
            7 => self.rng.pick(&consts).to_string(),
            _ => s.to_string(),
        }
    }

    fn pred(&mut self, depth: u32) -> String {
        let deep = (depth > 0) as u32;
        let rel = (!self.rels.is_empty()) as u32;
        match self
            .rng
            .weighted(&[8, 3 * deep, 2 * deep, 2 * deep, 3 * rel, 1, 1])
        {
            0 => {
                let op = *self.rng.pick(&["<", "<=", "==", ">", ">="]);
                let (a, b) = (self.index(), self.index());
                format!("({op} {a} {b})")
            }
            1 | 2 => {
                let head = if self.rng.chance(0.6) { "and" } else { "or" };
                let k = self.rng.range(1, 3);
                let ps: Vec<String> = (0..k).map(|_| self.pred(depth - 1)).collect();
                format!("({head} {})", ps.join(" "))
            }
            3 => {
                let k = self.index_name("e");
                let d = self.dim();
                self.idx.push(k.clone());
                let p = self.pred(depth - 1);
                self.idx.pop();
                format!("(exists {k} {d} {p})")
            }
            4 => {
                let (r, arity) = *self.rng.pick(&self.rels.clone());
                let args: Vec<String> = (0..arity).map(|_| self.index()).collect();
                format!("({r} {})", args.join(" "))
            }
            5 => "true".into(),
            _ => "false".into(),
        }
    }

    // -- the hand desugaring (docs/language.md) -------------------------------

    /// The pointwise sugar (docs/language.md) over core operands `(text, type, atom)`.
    fn core_pointwise(
        &mut self,
        shape: &[Affine],
        ops: Vec<(String, Type, bool)>,
        op: impl FnOnce(Vec<String>) -> String,
    ) -> (String, Type) {
        let mut binds = vec![];
        let mut refs = vec![];
        match ops.len() {
            1 => self.features.insert("pointwise-call"),
            _ if ops.iter().any(|o| o.1 == Type::Real) => self.features.insert("pointwise-scalar"),
            _ => self.features.insert("pointwise"),
        };
        for (c, t, atom) in ops {
            if atom {
                refs.push((c, t));
            } else {
                let name = self.fresh("tq");
                binds.push((name.clone(), c));
                refs.push((name, t));
            }
        }
        let js: Vec<String> = shape.iter().map(|_| self.fresh("jq")).collect();
        let elems = refs
            .into_iter()
            .map(|(r, t)| match t {
                Type::Tensor(..) => js.iter().fold(r, |e, j| format!("(get {e} {j})")),
                _ => r,
            })
            .collect();
        let mut body = op(elems);
        for (j, d) in js.iter().zip(shape).rev() {
            body = format!("(gen {j} {d} {body})");
        }
        for (t, o) in binds.into_iter().rev() {
            body = format!("(let {t} {o} {body})");
        }
        (body, Type::tensor(shape, Type::Real))
    }

    fn core_arith(
        &mut self,
        add: bool,
        a: (String, Type, bool),
        b: (String, Type, bool),
    ) -> (String, Type) {
        let head = if add { "+" } else { "*" };
        let (sa, sb) = (
            shape(&a.1).expect("real shape"),
            shape(&b.1).expect("real shape"),
        );
        if sa.is_empty() && sb.is_empty() {
            return (format!("({head} {} {})", a.0, b.0), Type::Real);
        }
        let sh = if sa.is_empty() { sb } else { sa };
        self.core_pointwise(&sh, vec![a, b], |xs| {
            format!("({head} {} {})", xs[0], xs[1])
        })
    }

    fn core_call(&mut self, fun: Fun, a: (String, Type, bool)) -> (String, Type) {
        let sh = shape(&a.1).expect("real shape");
        if sh.is_empty() {
            return (fun.apply(&a.0), Type::Real);
        }
        self.core_pointwise(&sh, vec![a], |xs| fun.apply(&xs[0]))
    }

    fn arith(&mut self, add: bool, a: &Out, b: &Out) -> Out {
        let (c, ty) = self.core_arith(add, a.core(), b.core());
        let head = if add { "+" } else { "*" };
        Out {
            s: format!("({head} {} {})", a.s, b.s),
            c,
            ty,
            atom: false,
        }
    }

    fn call(&mut self, fun: Fun, a: &Out) -> Out {
        let (c, ty) = self.core_call(fun, a.core());
        Out {
            s: fun.apply(&a.s),
            c,
            ty,
            atom: false,
        }
    }

    /// `(OP a b c ...)`, n-ary, nesting to the left.
    fn nary(&mut self, add: bool, xs: &[Out]) -> Out {
        self.features.insert("nary");
        let mut acc = xs[0].core();
        for x in &xs[1..] {
            let (c, t) = self.core_arith(add, acc, x.core());
            acc = (c, t, false);
        }
        let head = if add { "+" } else { "*" };
        let s: Vec<&str> = xs.iter().map(|x| x.s.as_str()).collect();
        Out {
            s: format!("({head} {})", s.join(" ")),
            c: acc.0,
            ty: acc.1,
            atom: false,
        }
    }

    fn minus_one() -> (String, Type, bool) {
        ("-1".into(), Type::Real, true)
    }

    /// `(- a)` = `(* -1 a)`.
    fn neg(&mut self, a: &Out) -> Out {
        self.features.insert("neg");
        let (c, ty) = self.core_arith(false, Self::minus_one(), a.core());
        Out {
            s: format!("(- {})", a.s),
            c,
            ty,
            atom: false,
        }
    }

    /// `(- a b)` = `(+ a (* -1 b))`.
    fn sub(&mut self, a: &Out, b: &Out) -> Out {
        self.features.insert("sub");
        let (nb, tb) = self.core_arith(false, Self::minus_one(), b.core());
        let (c, ty) = self.core_arith(true, a.core(), (nb, tb, false));
        Out {
            s: format!("(- {} {})", a.s, b.s),
            c,
            ty,
            atom: false,
        }
    }

    /// `(/ a b)` = `(* a (recip b))`.
    fn div(&mut self, a: &Out, b: &Out) -> Out {
        self.features.insert("div");
        let (rb, tb) = self.core_call(f("recip"), b.core());
        let (c, ty) = self.core_arith(false, a.core(), (rb, tb, false));
        Out {
            s: format!("(/ {} {})", a.s, b.s),
            c,
            ty,
            atom: false,
        }
    }

    // -- expressions ------------------------------------------------------------

    fn constant(&mut self) -> Out {
        Out::same(self.rng.pick(CONSTANTS).to_string(), Type::Real, true)
    }

    /// Access paths from visible variables that reach type `ty`.
    fn var_paths(&self, ty: &Type) -> Vec<(String, Vec<Step>)> {
        let mut out = vec![];
        for (name, t) in self.visible_vars() {
            for (p, reached) in paths(&t, 4) {
                if &reached == ty {
                    out.push((name.clone(), p));
                }
            }
        }
        out
    }

    /// `base` followed by `steps`, with fresh indices; consecutive `get`s
    /// may use the multi-index sugar in the sugared text.
    fn render_path(&mut self, base: &Out, steps: &[Step], ty: Type) -> Out {
        if steps.is_empty() {
            return base.clone();
        }
        let idx: Vec<Option<String>> = steps
            .iter()
            .map(|s| (*s == Step::Get).then(|| self.index()))
            .collect();
        let mut c = base.c.clone();
        for (s, i) in steps.iter().zip(&idx) {
            c = match s {
                Step::Get => format!("(get {c} {})", i.as_ref().unwrap()),
                Step::Fst => format!("(fst {c})"),
                Step::Snd => format!("(snd {c})"),
            };
        }
        let mut s = base.s.clone();
        let mut k = 0;
        while k < steps.len() {
            match steps[k] {
                Step::Get => {
                    let mut end = k;
                    while end < steps.len() && steps[end] == Step::Get {
                        end += 1;
                    }
                    let run: Vec<&str> =
                        idx[k..end].iter().map(|i| i.as_deref().unwrap()).collect();
                    if self.cfg.sugar && run.len() > 1 && self.rng.chance(0.7) {
                        self.features.insert("multi-get");
                        s = format!("(get {s} {})", run.join(" "));
                    } else {
                        for i in run {
                            s = format!("(get {s} {i})");
                        }
                    }
                    k = end;
                }
                Step::Fst => {
                    s = format!("(fst {s})");
                    k += 1;
                }
                Step::Snd => {
                    s = format!("(snd {s})");
                    k += 1;
                }
            }
        }
        Out {
            s,
            c,
            ty,
            atom: false,
        }
    }

    /// A variable (or an access path into one) of type `ty`, if any.
    fn var_of(&mut self, ty: &Type) -> Option<Out> {
        let mut cands = self.var_paths(ty);
        if cands.is_empty() {
            return None;
        }
        if self.rng.chance(self.cfg.prefer_innermost) {
            let inner = self.visible_vars()[0].0.clone();
            if cands.iter().any(|c| c.0 == inner) {
                cands.retain(|c| c.0 == inner);
            }
        }
        // prefer short paths
        let (name, steps) = if self.rng.chance(0.5) {
            let shortest = cands.iter().map(|c| c.1.len()).min().unwrap();
            let short: Vec<_> = cands
                .iter()
                .filter(|c| c.1.len() == shortest)
                .cloned()
                .collect();
            self.rng.pick(&short).clone()
        } else {
            self.rng.pick(&cands).clone()
        };
        let vty = self
            .visible_vars()
            .into_iter()
            .find(|v| v.0 == name)
            .unwrap()
            .1;
        let base = Out::same(name, vty, true);
        Some(self.render_path(&base, &steps, ty.clone()))
    }

    fn leaf(&mut self, ty: &Type) -> Out {
        if let Some(v) = (!self.rng.chance(0.25)).then(|| self.var_of(ty)).flatten() {
            return v;
        }
        match ty {
            Type::Real => self.constant(),
            Type::Tensor(d, e) => self.gen_form(d, e, 0),
            Type::Pair(a, b) => {
                let (x, y) = (self.leaf(a), self.leaf(b));
                Out::form("pair", &[&x, &y], ty.clone())
            }
        }
    }

    fn expr(&mut self, ty: &Type, depth: u32) -> Out {
        let early = if depth == 1 { 0.2 } else { 0.04 };
        if depth == 0 || self.rng.chance(early) {
            return self.leaf(ty);
        }
        match ty {
            Type::Real => self.real(depth),
            Type::Tensor(d, e) => self.tensor_expr(d, e, depth),
            Type::Pair(a, b) => self.pair_expr(a, b, depth),
        }
    }

    /// Forms of every type: iverson, let, projections, get, variables.
    fn any_form(&mut self, ty: &Type, depth: u32, which: usize) -> Out {
        match which {
            0 => {
                let p = self.pred(2);
                let e = self.expr(ty, depth - 1);
                Out {
                    s: format!("(iverson {p} {})", e.s),
                    c: format!("(iverson {p} {})", e.c),
                    ty: ty.clone(),
                    atom: false,
                }
            }
            1 => {
                let t0 = self.rtype(1);
                let e0 = self.expr(&t0, depth - 1);
                let x = self.let_name();
                if !self.idx.is_empty() {
                    self.features.insert("let-in-loop");
                }
                self.vars.push((x.clone(), t0));
                let body = self.expr(ty, depth - 1);
                self.vars.pop();
                Out {
                    s: format!("(let {x} {} {})", e0.s, body.s),
                    c: format!("(let {x} {} {})", e0.c, body.c),
                    ty: ty.clone(),
                    atom: false,
                }
            }
            2 => {
                let other = self.rtype(0);
                let first = self.rng.chance(0.5);
                let pt = if first {
                    pair(ty.clone(), other)
                } else {
                    pair(other, ty.clone())
                };
                let e = self.expr(&pt, depth - 1);
                Out::form(if first { "fst" } else { "snd" }, &[&e], ty.clone())
            }
            3 => {
                let d = self.dim();
                let e = self.expr(&tensor(d, ty.clone()), depth - 1);
                let i = self.index();
                Out {
                    s: format!("(get {} {i})", e.s),
                    c: format!("(get {} {i})", e.c),
                    ty: ty.clone(),
                    atom: false,
                }
            }
            _ => self.var_of(ty).unwrap_or_else(|| self.leaf(ty)),
        }
    }

    fn gen_form(&mut self, d: &Affine, elem: &Type, depth: u32) -> Out {
        let i = self.index_name("i");
        self.idx.push(i.clone());
        let body = self.expr(elem, depth.saturating_sub(1));
        self.idx.pop();
        Out {
            s: format!("(gen {i} {d} {})", body.s),
            c: format!("(gen {i} {d} {})", body.c),
            ty: tensor(d.clone(), elem.clone()),
            atom: false,
        }
    }

    /// A real of small magnitude (for `exp`).
    fn small_real(&mut self, depth: u32) -> Out {
        let a = self.expr(&Type::Real, depth);
        let g = *self.rng.pick(&[f("tanh"), f("sin"), f("sigmoid")]);
        self.call(g, &a)
    }

    /// A positive real (for `log`, `sqrt`, `recip`, ...).
    fn positive_real(&mut self, depth: u32) -> Out {
        let two = Out::same("2".into(), Type::Real, true);
        match self.rng.below(3) {
            0 => {
                // (+ 2 (* a a)) with `a` an atom or a variable path
                let a = self.var_of(&Type::Real).unwrap_or_else(|| self.constant());
                let sq = self.arith(false, &a, &a);
                self.arith(true, &two, &sq)
            }
            1 => {
                let a = self.expr(&Type::Real, depth);
                let t = self.call(f("tanh"), &a);
                self.arith(true, &two, &t)
            }
            _ => {
                let a = self.small_real(depth);
                self.call(f("exp"), &a)
            }
        }
    }

    fn scalar_call(&mut self, depth: u32) -> Out {
        match self.rng.weighted(&[5, 3, 1, 1]) {
            0 => {
                let fun = *self.rng.pick(TOTAL_FUNS);
                let a = self.expr(&Type::Real, depth - 1);
                self.call(fun, &a)
            }
            1 => {
                let fun = *self.rng.pick(POSITIVE_FUNS);
                let a = self.positive_real(depth - 1);
                self.call(fun, &a)
            }
            2 => {
                let a = self.small_real(depth - 1);
                self.call(f("exp"), &a)
            }
            _ => {
                // step is discontinuous: only on an input, never on a result
                // that rounding could move across 0
                let a = self.var_of(&Type::Real).unwrap_or_else(|| self.constant());
                self.call(f("step"), &a)
            }
        }
    }

    /// `(maximum i D e)`, `(minimum i D e)`, or an element of the one-hot
    /// `(argmax i D e)`, `(argmin i D e)`: a real.
    fn reduction(&mut self, d: u32) -> Out {
        self.features.insert("reduction");
        let i = self.index_name("i");
        // never empty: an empty reduction is an infinity, which
        // the algebra rules (0 · inf) do not keep
        let dim = format!("(+ {} 1)", self.dim());
        self.idx.push(i.clone());
        let body = self.expr(&Type::Real, d);
        self.idx.pop();
        let max = self.rng.chance(0.5);
        let (s, c) = if self.rng.chance(0.6) {
            let head = if max { "maximum" } else { "minimum" };
            (
                format!("({head} {i} {dim} {})", body.s),
                format!("({head} {i} {dim} {})", body.c),
            )
        } else {
            let head = if max { "argmax" } else { "argmin" };
            let at = self.index();
            (
                format!("(get ({head} {i} {dim} {}) {at})", body.s),
                format!("(get ({head} {i} {dim} {}) {at})", body.c),
            )
        };
        Out {
            s,
            c,
            ty: Type::Real,
            atom: false,
        }
    }

    fn real(&mut self, depth: u32) -> Out {
        let sugar = self.cfg.sugar as u32;
        let d = depth - 1;
        // leaves are rarer high up
        let low = (depth <= 1) as u32;
        let w = [
            1 + low,
            1 + 3 * low,
            3,
            3,
            2 * sugar,
            2 * sugar,
            sugar,
            2 * sugar,
            sugar,
            4,
            4,
            3,
            3,
            2,
            3,
            2,
            1,
            1,
            1,
        ];
        match self.rng.weighted(&w) {
            0 => self.constant(),
            17 | 18 => self.reduction(d),
            1 => self.any_form(&Type::Real, depth, 4),
            15 => {
                self.features.insert("max-min");
                let (a, b) = (self.expr(&Type::Real, d), self.expr(&Type::Real, d));
                let head = if self.rng.chance(0.5) { "max" } else { "min" };
                Out::form(head, &[&a, &b], Type::Real)
            }
            16 => {
                self.features.insert("real-index");
                let i = self.index();
                Out::same(format!("(real {i})"), Type::Real, false)
            }
            2 | 3 => {
                let (a, b) = (self.expr(&Type::Real, d), self.expr(&Type::Real, d));
                let add = self.rng.chance(0.5);
                self.arith(add, &a, &b)
            }
            4 | 5 => {
                let k = self.rng.range(3, 4) as usize;
                let xs: Vec<Out> = (0..k).map(|_| self.expr(&Type::Real, d)).collect();
                let add = self.rng.chance(0.5);
                self.nary(add, &xs)
            }
            6 => {
                let a = self.expr(&Type::Real, d);
                self.neg(&a)
            }
            7 => {
                let (a, b) = (self.expr(&Type::Real, d), self.expr(&Type::Real, d));
                self.sub(&a, &b)
            }
            8 => {
                let a = self.expr(&Type::Real, d);
                let b = self.positive_real(d);
                self.div(&a, &b)
            }
            9 => self.scalar_call(depth),
            10 => {
                let i = self.index_name("i");
                let dim = self.dim();
                self.idx.push(i.clone());
                let body = self.expr(&Type::Real, d);
                self.idx.pop();
                Out {
                    s: format!("(sum {i} {dim} {})", body.s),
                    c: format!("(sum {i} {dim} {})", body.c),
                    ty: Type::Real,
                    atom: false,
                }
            }
            11 => self.any_form(&Type::Real, depth, 0),
            12 => self.any_form(&Type::Real, depth, 1),
            13 => self.any_form(&Type::Real, depth, 2),
            _ => self.any_form(&Type::Real, depth, 3),
        }
    }

    /// A scalar operand for pointwise `*` and `/`.
    fn scalar_operand(&mut self, depth: u32) -> Out {
        if self.rng.chance(0.4) {
            self.constant()
        } else {
            self.expr(&Type::Real, depth)
        }
    }

    fn tensor_expr(&mut self, dim: &Affine, elem: &Type, depth: u32) -> Out {
        let ty = tensor(dim.clone(), elem.clone());
        let real_shaped = shape(&ty).is_some();
        let pw = (self.cfg.sugar && real_shaped) as u32;
        let d = depth - 1;
        let low = (depth <= 1) as u32;
        let w = [
            1 + 2 * low,
            6,
            2 * pw,
            2 * pw,
            2 * pw,
            pw,
            pw,
            pw,
            pw,
            2 * pw,
            2,
            2,
            1,
            2,
        ];
        match self.rng.weighted(&w) {
            0 => self.any_form(&ty, depth, 4),
            1 => self.gen_form(dim, elem, depth),
            2 => {
                let (a, b) = (self.expr(&ty, d), self.expr(&ty, d));
                self.arith(true, &a, &b)
            }
            3 => {
                let (a, b) = match self.rng.below(3) {
                    0 => (self.expr(&ty, d), self.expr(&ty, d)),
                    1 => (self.scalar_operand(d), self.expr(&ty, d)),
                    _ => (self.expr(&ty, d), self.scalar_operand(d)),
                };
                self.arith(false, &a, &b)
            }
            4 => {
                let a = self.expr(&ty, d);
                let fun = *self.rng.pick(TOTAL_FUNS);
                self.call(fun, &a)
            }
            5 => {
                let a = self.expr(&ty, d);
                self.neg(&a)
            }
            6 => {
                let (a, b) = (self.expr(&ty, d), self.expr(&ty, d));
                self.sub(&a, &b)
            }
            7 => {
                let a = self.expr(&ty, d);
                let b = self.positive_real(d);
                self.div(&a, &b)
            }
            8 => {
                let add = self.rng.chance(0.5);
                let xs: Vec<Out> = (0..3)
                    .map(|k| {
                        if !add && k > 0 && self.rng.chance(0.3) {
                            self.scalar_operand(d)
                        } else {
                            self.expr(&ty, d)
                        }
                    })
                    .collect();
                self.nary(add, &xs)
            }
            9 => self.sum_of_tensor(&ty, d),
            10 => self.any_form(&ty, depth, 0),
            11 => self.any_form(&ty, depth, 1),
            12 => self.any_form(&ty, depth, 2),
            _ => self.any_form(&ty, depth, 3),
        }
    }

    /// `(sum i D e)` with `e` of tensor type `ty` (sugar).
    fn sum_of_tensor(&mut self, ty: &Type, depth: u32) -> Out {
        self.features.insert("sum-tensor");
        let sh = shape(ty).expect("real shape");
        let i = self.index_name("i");
        let dim = self.dim();
        self.idx.push(i.clone());
        let body = self.expr(ty, depth);
        self.idx.pop();
        let t = self.fresh("tq");
        let k = self.fresh("kq");
        let js: Vec<String> = sh.iter().map(|_| self.fresh("jq")).collect();
        let mut acc = format!("(get {t} {k})");
        for j in &js {
            acc = format!("(get {acc} {j})");
        }
        let mut c = format!("(sum {k} {dim} {acc})");
        for (j, dd) in js.iter().zip(&sh).rev() {
            c = format!("(gen {j} {dd} {c})");
        }
        Out {
            s: format!("(sum {i} {dim} {})", body.s),
            c: format!("(let {t} (gen {i} {dim} {}) {c})", body.c),
            ty: ty.clone(),
            atom: false,
        }
    }

    fn pair_expr(&mut self, a: &Type, b: &Type, depth: u32) -> Out {
        let ty = pair(a.clone(), b.clone());
        let low = (depth <= 1) as u32;
        match self.rng.weighted(&[1 + 2 * low, 6, 2, 2, 1, 1]) {
            0 => self.any_form(&ty, depth, 4),
            1 => {
                let (x, y) = (self.expr(a, depth - 1), self.expr(b, depth - 1));
                Out::form("pair", &[&x, &y], ty)
            }
            2 => self.any_form(&ty, depth, 0),
            3 => self.any_form(&ty, depth, 1),
            4 => self.any_form(&ty, depth, 2),
            _ => self.any_form(&ty, depth, 3),
        }
    }

    // -- programs ---------------------------------------------------------------

    fn program(&mut self, seed: u64) -> (String, String) {
        let menu: Vec<(Type, Vec<&'static str>)> = {
            let (n, m) = (size("n"), size("m"));
            let mut v = vec![
                (Type::Real, vec![]),
                (tensor(n.clone(), Type::Real), vec!["n"]),
                (tensor(m.clone(), Type::Real), vec!["m"]),
                (
                    tensor(n.clone(), tensor(m.clone(), Type::Real)),
                    vec!["n", "m"],
                ),
                (tensor(Affine::constant(3), Type::Real), vec![]),
                (tensor(n.add_constant(1).unwrap(), Type::Real), vec!["n"]),
                (
                    tensor(Affine::constant(2), tensor(n.clone(), Type::Real)),
                    vec!["n"],
                ),
            ];
            if self.cfg.pairs {
                v.push((pair(Type::Real, tensor(n.clone(), Type::Real)), vec!["n"]));
                v.push((tensor(n.clone(), pair(Type::Real, Type::Real)), vec!["n"]));
            }
            v
        };
        let names = ["x", "y", "v", "w", "z", "u"];
        let count = self.rng.range(1, 4) as usize;
        let mut params: Vec<String> = vec![];
        let mut declared: Vec<&'static str> = vec![];
        if self.rng.chance(0.2) {
            params.push("(n size)".into());
            declared.push("n");
        }
        for (k, name) in names.iter().take(count).enumerate() {
            // the first input always mentions n, so that every program has a size
            let (t, sz) = if k == 0 {
                menu[*self.rng.pick(&[1usize, 3, 5, 6])].clone()
            } else {
                self.rng.pick(&menu).clone()
            };
            for s in sz {
                if !declared.contains(&s) {
                    declared.push(s);
                }
            }
            params.push(format!("({name} {})", type_to_string(&t)));
            self.vars.push((name.to_string(), t));
        }
        if self.cfg.relations {
            if self.rng.chance(0.4) {
                params.push("(S (relation n))".into());
                self.rels.push(("S", 1));
            }
            if self.rng.chance(0.3) {
                params.push("(T (relation n m))".into());
                self.rels.push(("T", 2));
                if !declared.contains(&"m") {
                    declared.push("m");
                }
            }
        }
        self.sizes = declared;
        let ret = match self.rng.weighted(&[6, 2, 1, 1]) {
            0 => Type::Real,
            1 => tensor(size("n"), Type::Real),
            2 => self.rtype(1),
            _ => {
                let t = self.rtype(0);
                pair(Type::Real, t)
            }
        };
        let body = self.expr(&ret, self.cfg.max_depth);
        let head = format!(
            "; generated program, seed {seed}, depth {}\n(fn f ({})\n  ",
            self.cfg.max_depth,
            params.join(" ")
        );
        (
            format!("{head}{})\n", body.s),
            format!("{head}{})\n", body.c),
        )
    }
}
