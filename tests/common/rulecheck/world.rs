//! The environment of instantiated terms: sizes `n`, `m`, relations `S`
//! over `n` and `T` over `n m`, the outer real variables and their tangents,
//! the index variable `o`, and random values for all of them ([`World`]).

use super::*;

// ---------------------------------------------------------------------------
// the environment of instantiated terms

pub(super) fn sym(s: &str) -> Symbol {
    Symbol::from(s)
}
pub(super) fn n_() -> Affine {
    Affine::var(sym("n"))
}
pub(super) fn m_() -> Affine {
    Affine::var(sym("m"))
}
pub(super) fn tensor(d: Affine, t: Type) -> Type {
    Type::Tensor(d, Box::new(t))
}
pub(super) fn pair(a: Type, b: Type) -> Type {
    Type::Pair(Box::new(a), Box::new(b))
}

/// The real-valued variables free in every instantiation.
pub(super) fn outer_vars() -> Vec<(String, Type)> {
    vec![
        ("x".into(), Type::Real),
        ("y".into(), Type::Real),
        ("v".into(), tensor(n_(), Type::Real)),
        ("u".into(), tensor(m_(), Type::Real)),
        ("w".into(), tensor(n_(), tensor(m_(), Type::Real))),
        ("q".into(), pair(Type::Real, tensor(n_(), Type::Real))),
        ("r".into(), tensor(n_(), pair(Type::Real, Type::Real))),
    ]
}

/// The free index variable and its extent.
pub(super) const OUTER_INDEX: &str = "o";

pub(super) fn random_dim(rng: &mut Rng) -> Affine {
    match rng.weighted(&[5, 2, 1, 1, 1, 1, 1]) {
        0 => n_(),
        1 => m_(),
        2 => Affine::constant(2),
        3 => Affine::constant(3),
        4 => n_().add_constant(1).unwrap(),
        5 => Affine::constant(1),
        _ => Affine::constant(0),
    }
}

pub(super) fn random_type(rng: &mut Rng) -> Type {
    match rng.weighted(&[6, 4, 1, 1, 1]) {
        0 => Type::Real,
        1 => tensor(random_dim(rng), Type::Real),
        2 => pair(Type::Real, tensor(random_dim(rng), Type::Real)),
        3 => tensor(random_dim(rng), tensor(random_dim(rng), Type::Real)),
        _ => pair(Type::Real, Type::Real),
    }
}

/// The tangent variable of an outer variable.
pub(super) fn tangent_name(x: &str) -> String {
    format!("d{x}")
}

/// Random values for one environment.
/// Loop iterations one evaluation of a term may take.
pub(super) const EVAL_BUDGET: u64 = 5_000_000;

/// Evaluate `t` in `ev`: a predicate as 0 or 1.
pub(super) fn eval_term(ev: &mut ExtEval, t: &Term) -> Result<Value, String> {
    let top = t.top();
    if t.sort == Sort::Pred {
        let b = ev.eval_pred(&t.rec, top)?;
        return Ok(Value::Real(if b { 1.0 } else { 0.0 }));
    }
    ev.eval(&t.rec, &t.ext, top)
}

pub(super) struct World {
    pub(super) sizes: Sizes,
    pub(super) rels: HashMap<Symbol, Relation>,
    pub(super) vars: Vec<(Symbol, Value)>,
    pub(super) o: i64,
}

impl World {
    pub(super) fn random(rng: &mut Rng, need_o: bool) -> World {
        let n = rng.range(if need_o { 1 } else { 0 }, 4);
        let m = rng.range(0, 4);
        let sizes: Sizes = [(sym("n"), n), (sym("m"), m)].into_iter().collect();
        let mut vars = vec![];
        for (name, t) in outer_vars() {
            for x in [name.clone(), tangent_name(&name)] {
                let v = random_value(&t, &sizes, &mut || rng.unit()).expect("random value");
                vars.push((sym(&x), v));
            }
        }
        let mut rels = HashMap::new();
        for (name, dims) in [("S", vec![n_()]), ("T", vec![n_(), m_()])] {
            let density = *rng.pick(&[0.3, 0.6, 1.0]);
            let r = random_relation(&dims, &sizes, density, &mut || rng.unit())
                .expect("random relation");
            rels.insert(sym(name), r);
        }
        let o = if n > 0 { rng.range(0, n - 1) } else { 0 };
        World {
            sizes,
            rels,
            vars,
            o,
        }
    }

    pub(super) fn evaluator<'a>(
        &self,
        sigma: &'a HashMap<Symbol, Symbol>,
        constants: &'a HashMap<Symbol, Type>,
    ) -> ExtEval<'a> {
        let mut ev = ExtEval::new(
            self.sizes.clone(),
            self.rels.clone(),
            self.vars.clone(),
            vec![(sym(OUTER_INDEX), self.o)],
            sigma,
            EVAL_BUDGET,
        );
        ev.constants = Some(constants);
        ev
    }

    pub(super) fn show(&self) -> String {
        let mut inputs = Inputs::new(self.sizes.clone());
        inputs.values = self.vars.iter().cloned().collect();
        inputs.relations = self.rels.clone();
        format!(
            "{OUTER_INDEX}={}, {}",
            self.o,
            show_inputs(&inputs).trim_end()
        )
    }
}
