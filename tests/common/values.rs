//! Random inputs for a program, and comparison of values.

use super::Value;
use atl_egg::front::ast::{ParamKind, Program};
use atl_egg::rng::Rng;
use atl_egg::semantics::value::{random_relation, random_value, Inputs, Sizes};

/// Random inputs for `prog`: every size uniform in `[min_size, max_size]`,
/// every real-valued input uniform in `[-1, 1]`, every relation bit true with
/// probability `density`.
pub fn random_inputs(
    prog: &Program,
    rng: &mut Rng,
    min_size: i64,
    max_size: i64,
    density: f64,
) -> Inputs {
    let sizes: Sizes = prog
        .sizes
        .iter()
        .map(|s| (*s, rng.range(min_size, max_size)))
        .collect();
    inputs_at(prog, rng, sizes, density)
}

/// Random inputs for `prog` at the given sizes.
pub fn inputs_at(prog: &Program, rng: &mut Rng, sizes: Sizes, density: f64) -> Inputs {
    let mut inputs = Inputs::new(sizes);
    for p in &prog.params {
        match &p.kind {
            ParamKind::Real(t) => {
                let v = random_value(t, &inputs.sizes, &mut || rng.unit()).expect("random value");
                inputs.values.insert(p.name, v);
            }
            ParamKind::Relation(dims) => {
                let r = random_relation(dims, &inputs.sizes, density, &mut || rng.unit())
                    .expect("random relation");
                inputs.relations.insert(p.name, r);
            }
            ParamKind::Size => {}
        }
    }
    inputs
}

/// How close two values must be. Reals `x`, `y` agree when both are NaN,
/// when they are equal (infinities included), or when both are finite and
/// `|x - y| <= rel * M + abs`, where `M` is the largest finite magnitude in
/// either value.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub rel: f64,
    pub abs: f64,
}

impl Tolerance {
    /// Bit-for-bit up to the sign of zero (and NaN equals NaN).
    pub const EXACT: Tolerance = Tolerance { rel: 0.0, abs: 0.0 };
}

/// The largest finite magnitude of a real in `v`.
pub fn max_magnitude(v: &Value) -> f64 {
    match v {
        Value::Real(x) if x.is_finite() => x.abs(),
        Value::Real(_) | Value::Zero => 0.0,
        Value::Pair(a, b) => max_magnitude(a).max(max_magnitude(b)),
        Value::Tensor(xs) => xs.iter().map(max_magnitude).fold(0.0, f64::max),
    }
}

/// Compare two values; `Zero` stands for the zero of the other side's
/// shape. `Err` describes the first difference (with its path).
pub fn compare_values(a: &Value, b: &Value, tol: Tolerance) -> Result<(), String> {
    let m = max_magnitude(a).max(max_magnitude(b));
    let eps = tol.rel * m + tol.abs;
    let mut path = String::new();
    go(a, b, eps, &mut path)
}

fn reals_agree(x: f64, y: f64, eps: f64) -> bool {
    if x.is_nan() || y.is_nan() {
        return x.is_nan() && y.is_nan();
    }
    if !x.is_finite() || !y.is_finite() {
        return x == y;
    }
    (x - y).abs() <= eps
}

fn go(a: &Value, b: &Value, eps: f64, path: &mut String) -> Result<(), String> {
    let here = |path: &String, what: String| {
        Err(format!(
            "at {}: {what}",
            if path.is_empty() { "the root" } else { path }
        ))
    };
    match (a, b) {
        (Value::Zero, Value::Zero) => Ok(()),
        (Value::Real(x), Value::Real(y)) => {
            if reals_agree(*x, *y, eps) {
                Ok(())
            } else {
                here(path, format!("{x:?} vs {y:?}"))
            }
        }
        (Value::Real(x), Value::Zero) | (Value::Zero, Value::Real(x)) => {
            if reals_agree(*x, 0.0, eps) {
                Ok(())
            } else {
                here(path, format!("{x:?} vs zero"))
            }
        }
        (Value::Pair(a0, a1), Value::Pair(b0, b1)) => {
            sub(path, ".0", |p| go(a0, b0, eps, p))?;
            sub(path, ".1", |p| go(a1, b1, eps, p))
        }
        (Value::Pair(a0, a1), Value::Zero) | (Value::Zero, Value::Pair(a0, a1)) => {
            sub(path, ".0", |p| go(a0, &Value::Zero, eps, p))?;
            sub(path, ".1", |p| go(a1, &Value::Zero, eps, p))
        }
        (Value::Tensor(xs), Value::Tensor(ys)) => {
            if xs.len() != ys.len() {
                return here(path, format!("tensor lengths {} vs {}", xs.len(), ys.len()));
            }
            for (k, (x, y)) in xs.iter().zip(ys.iter()).enumerate() {
                sub(path, &format!("[{k}]"), |p| go(x, y, eps, p))?;
            }
            Ok(())
        }
        (Value::Tensor(xs), Value::Zero) | (Value::Zero, Value::Tensor(xs)) => {
            for (k, x) in xs.iter().enumerate() {
                sub(path, &format!("[{k}]"), |p| go(x, &Value::Zero, eps, p))?;
            }
            Ok(())
        }
        _ => here(path, format!("different shapes: {a:?} vs {b:?}")),
    }
}

fn sub(
    path: &mut String,
    seg: &str,
    f: impl FnOnce(&mut String) -> Result<(), String>,
) -> Result<(), String> {
    let len = path.len();
    path.push_str(seg);
    let r = f(path);
    path.truncate(len);
    r
}

/// A short text of a value, for failure messages.
pub fn show_value(v: &Value) -> String {
    match v {
        Value::Real(x) => format!("{x:?}"),
        Value::Zero => "0".into(),
        Value::Pair(a, b) => format!("({}, {})", show_value(a), show_value(b)),
        Value::Tensor(xs) => format!(
            "[{}]",
            xs.iter().map(show_value).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The sizes and inputs as text, for failure messages.
pub fn show_inputs(inputs: &Inputs) -> String {
    let mut out = String::new();
    let sizes = inputs.sizes.to_string();
    out.push_str(&format!("sizes: {sizes}\n"));
    let mut names: Vec<_> = inputs.values.keys().collect();
    names.sort_by_key(|s| s.as_str());
    for k in names {
        out.push_str(&format!("  {k} = {}\n", show_value(&inputs.values[k])));
    }
    let mut rels: Vec<_> = inputs.relations.keys().collect();
    rels.sort_by_key(|s| s.as_str());
    for k in rels {
        let r = &inputs.relations[k];
        let bits: String = r
            .to_dense()
            .iter()
            .map(|b| if *b { '1' } else { '0' })
            .collect();
        out.push_str(&format!("  {k} = dims {:?} bits {bits}\n", r.dims()));
    }
    out
}

/// The `n` parts of a right-nested pair (`grad`'s result for `n` inputs);
/// a zero stands for zeros of every part.
pub fn unnest(v: &Value, n: usize) -> Vec<Value> {
    let mut out = vec![];
    let mut cur = v.clone();
    for _ in 1..n {
        match cur {
            Value::Pair(a, b) => {
                out.push((*a).clone());
                cur = (*b).clone();
            }
            Value::Zero => out.push(Value::Zero),
            other => panic!("expected a pair, got {other:?}"),
        }
    }
    out.push(cur);
    out
}
