//! Runtime values, data relations, sizes and inputs, and their JSON forms.
//!
//! Key decisions:
//!
//! * **[`Value::Zero`]** is the zero of *whatever type is expected*. An
//!   out-of-range `get` and a false `iverson` produce it, so the evaluator
//!   never needs types (and never allocates a zero tensor). Every operation
//!   treats it as zero: `get`/`fst`/`snd` of `Zero` is `Zero`, arithmetic reads
//!   it as `0.0` (exactly what a materialized zero would give, including
//!   `0 * inf = NaN`). Only printing and flattening, which know the type,
//!   expand it.
//! * Tensors and pairs are reference counted, so `get`, `let` and variables
//!   share structure instead of copying.
//! * JSON conversion follows the conformance reference (`atl_ref.py`):
//!   the same shape checks and the same messages, naming the input path
//!   (`x[2]: expected a number, got "a"`). JSON itself bounds what is
//!   allocated while reading; writing a value (which may expand a lazy `Zero`
//!   of a huge type) is capped at [`MAX_OUTPUT_REALS`] reals.
//! * Non-finite reals cannot be JSON numbers. Every writer spells them the
//!   one way documented in docs/cli.md, in strict JSON that Python's and
//!   JavaScript's readers take as the same value: NaN as `null`, infinities
//!   as `1e999` and `-1e999` (numbers that overflow to ±inf). The reader
//!   ([`parse_json`]) takes those back, and also Python's `NaN`, `Infinity`,
//!   `-Infinity` and the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.

use crate::error::{Error, ErrorKind, Result};
use crate::front::affine::{Affine, EvalAffineError};
use crate::front::ast::{ParamKind, Program, Type};
use crate::front::print::type_to_string as type_str;
use egg::Symbol;
use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::rc::Rc;

/// A runtime value of ATL.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A real.
    Real(f64),
    /// A pair.
    Pair(Rc<Value>, Rc<Value>),
    /// A tensor: its elements.
    Tensor(Rc<Vec<Value>>),
    /// The zero of whatever type is expected (see the module docs).
    Zero,
}

impl Value {
    pub fn pair(a: Value, b: Value) -> Value {
        Value::Pair(Rc::new(a), Rc::new(b))
    }

    pub fn tensor(elems: Vec<Value>) -> Value {
        Value::Tensor(Rc::new(elems))
    }

    /// A tensor of reals.
    pub fn reals(xs: &[f64]) -> Value {
        Value::tensor(xs.iter().map(|&x| Value::Real(x)).collect())
    }

    /// The real this value stands for (`Zero` is `0.0`).
    pub fn real(&self) -> Result<f64> {
        match self {
            Value::Real(x) => Ok(*x),
            Value::Zero => Ok(0.0),
            _ => Err(Error::eval(format!(
                "expected a real, got {}",
                self.describe()
            ))),
        }
    }

    /// `(get v k)`: the element at `k`, or `Zero` when `k` is out of range.
    pub fn get(&self, k: i64) -> Result<Value> {
        match self {
            Value::Tensor(xs) => Ok(usize::try_from(k)
                .ok()
                .and_then(|k| xs.get(k))
                .cloned()
                .unwrap_or(Value::Zero)),
            Value::Zero => Ok(Value::Zero),
            _ => Err(Error::eval(format!(
                "get of {}, which is not a tensor",
                self.describe()
            ))),
        }
    }

    pub fn fst(&self) -> Result<Value> {
        match self {
            Value::Pair(a, _) => Ok((**a).clone()),
            Value::Zero => Ok(Value::Zero),
            _ => Err(Error::eval(format!(
                "fst of {}, which is not a pair",
                self.describe()
            ))),
        }
    }

    pub fn snd(&self) -> Result<Value> {
        match self {
            Value::Pair(_, b) => Ok((**b).clone()),
            Value::Zero => Ok(Value::Zero),
            _ => Err(Error::eval(format!(
                "snd of {}, which is not a pair",
                self.describe()
            ))),
        }
    }

    fn describe(&self) -> String {
        match self {
            Value::Real(_) => "a real".into(),
            Value::Pair(..) => "a pair".into(),
            Value::Tensor(xs) => format!("a tensor of length {}", xs.len()),
            Value::Zero => "zero".into(),
        }
    }
}

/// A data relation: a boolean tensor with concrete dimensions, row-major.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Relation {
    pub dims: Vec<usize>,
    pub bits: Vec<bool>,
}

impl Relation {
    /// Does the relation hold at `idx`? False when the arity differs or any
    /// index lies outside its dimension.
    pub fn test(&self, idx: &[i64]) -> bool {
        if idx.len() != self.dims.len() {
            return false;
        }
        let mut flat: usize = 0;
        for (&k, &d) in idx.iter().zip(&self.dims) {
            let k = match usize::try_from(k) {
                Ok(k) if k < d => k,
                _ => return false,
            };
            flat = match flat.checked_mul(d).and_then(|f| f.checked_add(k)) {
                Some(f) => f,
                None => return false,
            };
        }
        self.bits.get(flat).copied().unwrap_or(false)
    }
}

/// Concrete sizes, in declaration order.
pub type Sizes = indexmap::IndexMap<Symbol, i64>;

/// Everything a program is evaluated at.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// The value of every size.
    pub sizes: Sizes,
    /// The real-valued inputs.
    pub values: HashMap<Symbol, Value>,
    /// The relations.
    pub relations: HashMap<Symbol, Relation>,
}

impl Inputs {
    pub fn new(sizes: Sizes) -> Inputs {
        Inputs {
            sizes,
            ..Inputs::default()
        }
    }
}

/// Most reals a value may expand to when it is written out or flattened.
pub const MAX_OUTPUT_REALS: u128 = 50_000_000;
/// Most JSON nodes (reals and arrays) a value may expand to.
const MAX_OUTPUT_NODES: u128 = 100_000_000;

// ---------------------------------------------------------------------------
// sizes and dimensions

/// Value of a dimension at `sizes` (`kind` is the kind of a negative-dimension
/// error). An unknown size is an input error.
pub(crate) fn dim_at(d: &Affine, sizes: &Sizes, kind: ErrorKind) -> Result<usize> {
    let n = affine_at(d, sizes)?;
    usize::try_from(n).map_err(|_| {
        Error::new(
            kind,
            format!("dimension {d} is negative ({n}) at these sizes"),
        )
    })
}

/// Value of an affine form over sizes only.
pub(crate) fn affine_at(d: &Affine, sizes: &Sizes) -> Result<i64> {
    d.eval_with(|n| sizes.get(&n).copied())
        .map_err(|e| match e {
            EvalAffineError::Unbound(n) => Error::input(format!("size {n} is not given"))
                .with_hint(format!("give it with --sizes {n}=N")),
            EvalAffineError::Overflow => Error::eval(format!(
                "dimension {d} overflows 64-bit integers at these sizes"
            )),
        })
}

/// Number of reals in a value of type `ty`; a negative dimension counts 0
/// (as the reference's `type_size`). Errors: an unknown size, or a count
/// beyond `u128`.
pub fn type_size(ty: &Type, sizes: &Sizes) -> Result<u128> {
    let overflow = || Error::eval("the number of reals of a type overflows");
    match ty {
        Type::Real => Ok(1),
        Type::Pair(a, b) => type_size(a, sizes)?
            .checked_add(type_size(b, sizes)?)
            .ok_or_else(overflow),
        Type::Tensor(d, t) => {
            let n = affine_at(d, sizes)?.max(0) as u128;
            n.checked_mul(type_size(t, sizes)?).ok_or_else(overflow)
        }
    }
}

/// Check that a value of `ty` can be written out: no negative dimension, at
/// most [`MAX_OUTPUT_REALS`] reals and a bounded number of arrays.
fn check_output_size(ty: &Type, sizes: &Sizes) -> Result<()> {
    // (reals, nodes), saturating: anything huge is refused anyway.
    fn count(ty: &Type, sizes: &Sizes) -> Result<(u128, u128)> {
        Ok(match ty {
            Type::Real => (1, 1),
            Type::Pair(a, b) => {
                let (ra, na) = count(a, sizes)?;
                let (rb, nb) = count(b, sizes)?;
                (
                    ra.saturating_add(rb),
                    na.saturating_add(nb).saturating_add(1),
                )
            }
            Type::Tensor(d, t) => {
                let n = dim_at(d, sizes, ErrorKind::Eval)? as u128;
                let (r, k) = count(t, sizes)?;
                (n.saturating_mul(r), n.saturating_mul(k).saturating_add(1))
            }
        })
    }
    let (reals, nodes) = count(ty, sizes)?;
    if reals > MAX_OUTPUT_REALS || nodes > MAX_OUTPUT_NODES {
        return Err(Error::eval(format!(
            "a value of type {} at these sizes is too large to write out ({} reals; the limit is {})",
            type_str(ty),
            reals,
            MAX_OUTPUT_REALS
        )));
    }
    Ok(())
}

/// Parse `--sizes n=4,m=3` (usage errors). An empty string gives no sizes.
pub fn parse_sizes_flag(s: &str) -> Result<Sizes> {
    let mut out = Sizes::new();
    if s.trim().is_empty() {
        return Ok(out);
    }
    for item in s.split(',') {
        let Some((k, v)) = item.split_once('=') else {
            return Err(Error::usage(format!(
                "malformed --sizes item '{item}' (expected name=integer)"
            )));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::usage(format!(
                "malformed --sizes item '{item}' (expected name=non-negative integer)"
            )));
        }
        let n: i64 = v.parse().map_err(|_| {
            Error::usage(format!(
                "size {k}={v} is too large (it does not fit in a 64-bit integer)"
            ))
        })?;
        let name = Symbol::from(k);
        if out.contains_key(&name) {
            return Err(Error::usage(format!("size {k} given twice")));
        }
        out.insert(name, n);
    }
    Ok(out)
}

/// All sizes of `prog`, in its declaration order: from `given`, else inferred
/// from the JSON inputs (an input dimension that is exactly the size name).
pub fn resolve_sizes(
    prog: &Program,
    given: &Sizes,
    json: Option<&serde_json::Value>,
) -> Result<Sizes> {
    for (&k, &v) in given {
        if !prog.sizes.contains(&k) {
            let names: Vec<&str> = prog.sizes.iter().map(|s| s.as_str()).collect();
            return Err(Error::input(format!(
                "unknown size '{k}' (the program has sizes: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ))
            .with_hint_opt(crate::diagnostics::did_you_mean(
                k.as_str(),
                names.iter().copied(),
            )));
        }
        if v < 0 {
            return Err(Error::input(format!(
                "size {k} must be a non-negative integer, got {v}"
            )));
        }
    }
    let obj = json.and_then(|j| j.as_object());
    let mut out = Sizes::new();
    for &s in &prog.sizes {
        if let Some(&v) = given.get(&s) {
            out.insert(s, v);
            continue;
        }
        let found = obj.and_then(|obj| {
            prog.params.iter().find_map(|p| {
                let j = obj.get(p.name.as_str())?;
                match &p.kind {
                    ParamKind::Size => None,
                    ParamKind::Real(ty) => infer(j, ty, s),
                    ParamKind::Relation(dims) => infer_rel(j, dims, s),
                }
            })
        });
        match found {
            Some(n) => {
                out.insert(s, n);
            }
            None => {
                // the inputs that would give it, when they are missing
                let carriers: Vec<&str> = prog
                    .params
                    .iter()
                    .filter(|p| obj.is_none_or(|o| !o.contains_key(p.name.as_str())))
                    .filter(|p| match &p.kind {
                        ParamKind::Size => false,
                        ParamKind::Real(ty) => type_has_dim(ty, s),
                        ParamKind::Relation(dims) => dims.contains(&Affine::var(s)),
                    })
                    .map(|p| p.name.as_str())
                    .collect();
                return Err(match carriers.first().filter(|_| obj.is_some()) {
                    Some(x) => Error::input(format!("missing input '{x}'")).with_hint(format!(
                        "the size {s} is taken from the input {x}; give {x}, or give --sizes {s}=N",
                    )),
                    None => Error::input(format!(
                        "size {s} is not given by --sizes and cannot be inferred from the inputs"
                    ))
                    .with_hint(format!("give it with --sizes {s}=N")),
                });
            }
        }
    }
    Ok(out)
}

/// Does a dimension of `ty` equal the size `s` exactly?
fn type_has_dim(ty: &Type, s: Symbol) -> bool {
    match ty {
        Type::Real => false,
        Type::Pair(a, b) => type_has_dim(a, s) || type_has_dim(b, s),
        Type::Tensor(d, t) => *d == Affine::var(s) || type_has_dim(t, s),
    }
}

fn infer(j: &serde_json::Value, ty: &Type, s: Symbol) -> Option<i64> {
    match ty {
        Type::Real => None,
        Type::Pair(a, b) => match j.as_array() {
            Some(xs) if xs.len() == 2 => infer(&xs[0], a, s).or_else(|| infer(&xs[1], b, s)),
            _ => None,
        },
        Type::Tensor(d, t) => {
            let xs = j.as_array()?;
            if *d == Affine::var(s) {
                return i64::try_from(xs.len()).ok();
            }
            infer(xs.first()?, t, s)
        }
    }
}

fn infer_rel(mut j: &serde_json::Value, dims: &[Affine], s: Symbol) -> Option<i64> {
    for d in dims {
        let xs = j.as_array()?;
        if *d == Affine::var(s) {
            return i64::try_from(xs.len()).ok();
        }
        j = xs.first()?;
    }
    None
}

// ---------------------------------------------------------------------------
// reading JSON

/// Where in the inputs a JSON value sits, built without allocating and
/// printed only for an error message.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root(&'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Path::Root(s) => write!(f, "{s}"),
            Path::Index(p, i) => write!(f, "{p}[{i}]"),
        }
    }
}

/// Short description of a JSON value, as the reference's `_jdesc`.
fn jdesc(j: &serde_json::Value) -> String {
    match j {
        serde_json::Value::Array(xs) => format!("an array of length {}", xs.len()),
        serde_json::Value::Object(_) => "an object".into(),
        _ => {
            let s = j.to_string();
            if s.chars().count() < 40 {
                s
            } else {
                let head: String = s.chars().take(37).collect();
                format!("{head}...")
            }
        }
    }
}

/// A value of type `ty` from JSON; `path` names it in error messages (for
/// example `x` or `tangent x`). Errors are input errors.
pub fn value_from_json(
    j: &serde_json::Value,
    ty: &Type,
    sizes: &Sizes,
    path: &str,
) -> Result<Value> {
    from_json(j, ty, sizes, Path::Root(path))
}

fn from_json(j: &serde_json::Value, ty: &Type, sizes: &Sizes, path: Path) -> Result<Value> {
    match ty {
        Type::Real => match j {
            serde_json::Value::Number(n) => n.as_f64().map(Value::Real).ok_or_else(|| {
                Error::input(format!("{path}: expected a number, got {}", jdesc(j)))
            }),
            // the spellings of non-finite reals (see `parse_json`)
            serde_json::Value::Null => Ok(Value::Real(f64::NAN)),
            serde_json::Value::String(s) if non_finite_from_str(s).is_some() => {
                Ok(Value::Real(non_finite_from_str(s).unwrap_or(f64::NAN)))
            }
            _ => Err(Error::input(format!(
                "{path}: expected a number, got {}",
                jdesc(j)
            ))),
        },
        Type::Pair(a, b) => match j.as_array() {
            Some(xs) if xs.len() == 2 => Ok(Value::pair(
                from_json(&xs[0], a, sizes, Path::Index(&path, 0))?,
                from_json(&xs[1], b, sizes, Path::Index(&path, 1))?,
            )),
            _ => Err(Error::input(format!(
                "{path}: expected a pair (a 2-element array), got {}",
                jdesc(j)
            ))),
        },
        Type::Tensor(d, t) => {
            let n = input_dim(d, sizes, path)?;
            let Some(xs) = j.as_array() else {
                return Err(Error::input(format!(
                    "{path}: expected an array of length {n}, got {}",
                    jdesc(j)
                )));
            };
            if xs.len() != n {
                return Err(Error::input(format!(
                    "{path}: expected an array of length {n} ({d}), got length {}",
                    xs.len()
                )));
            }
            let elems = xs
                .iter()
                .enumerate()
                .map(|(i, x)| from_json(x, t, sizes, Path::Index(&path, i)))
                .collect::<Result<Vec<_>>>()?;
            Ok(Value::tensor(elems))
        }
    }
}

fn input_dim(d: &Affine, sizes: &Sizes, path: Path) -> Result<usize> {
    let n = affine_at(d, sizes)?;
    usize::try_from(n).map_err(|_| {
        Error::input(format!(
            "{path}: dimension {d} is negative ({n}) at these sizes"
        ))
    })
}

/// A relation of dimensions `dims` from nested JSON arrays of `true`/`false`
/// (or `0`/`1`). Errors are input errors naming `path`.
pub fn relation_from_json(
    j: &serde_json::Value,
    dims: &[Affine],
    sizes: &Sizes,
    path: &str,
) -> Result<Relation> {
    let path = Path::Root(path);
    let concrete = dims
        .iter()
        .map(|d| input_dim(d, sizes, path))
        .collect::<Result<Vec<_>>>()?;
    let mut bits = vec![];
    rel_bits(j, &concrete, path, &mut bits)?;
    Ok(Relation {
        dims: concrete,
        bits,
    })
}

fn rel_bits(j: &serde_json::Value, dims: &[usize], path: Path, out: &mut Vec<bool>) -> Result<()> {
    let Some((&n, rest)) = dims.split_first() else {
        let bit = match j {
            serde_json::Value::Bool(b) => Some(*b),
            serde_json::Value::Number(k) if k.is_i64() || k.is_u64() => match k.as_i64() {
                Some(0) => Some(false),
                Some(1) => Some(true),
                _ => None,
            },
            _ => None,
        };
        return match bit {
            Some(b) => {
                out.push(b);
                Ok(())
            }
            None => Err(Error::input(format!(
                "{path}: expected true/false or 0/1, got {}",
                jdesc(j)
            ))),
        };
    };
    match j.as_array() {
        Some(xs) if xs.len() == n => {
            for (i, x) in xs.iter().enumerate() {
                rel_bits(x, rest, Path::Index(&path, i), out)?;
            }
            Ok(())
        }
        _ => Err(Error::input(format!(
            "{path}: expected an array of length {n}, got {}",
            jdesc(j)
        ))),
    }
}

/// The inputs of `prog` from a JSON object (parameter name to value).
/// With `require_reals == false` (costing) missing real inputs are skipped;
/// relations are always required. Errors are input errors.
pub fn inputs_from_json(
    prog: &Program,
    json: &serde_json::Value,
    sizes: &Sizes,
    require_reals: bool,
) -> Result<Inputs> {
    let Some(obj) = json.as_object() else {
        return Err(Error::input(
            "the inputs must be a JSON object from parameter names to values",
        ));
    };
    let mut out = Inputs::new(sizes.clone());
    for p in &prog.params {
        let name = p.name.as_str();
        let j = match (obj.get(name), &p.kind) {
            (_, ParamKind::Size) => continue,
            (None, ParamKind::Real(_)) if !require_reals => continue,
            (None, _) => {
                let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
                let hint = crate::diagnostics::did_you_mean(name, keys.iter().copied())
                    .unwrap_or_else(|| {
                        if keys.is_empty() {
                            "the inputs are empty".to_string()
                        } else {
                            format!("the inputs give: {}", keys.join(", "))
                        }
                    });
                return Err(Error::input(format!("missing input '{name}'")).with_hint(hint));
            }
            (Some(j), _) => j,
        };
        match &p.kind {
            ParamKind::Real(ty) => {
                out.values
                    .insert(p.name, value_from_json(j, ty, sizes, name)?);
            }
            ParamKind::Relation(dims) => {
                out.relations
                    .insert(p.name, relation_from_json(j, dims, sizes, name)?);
            }
            ParamKind::Size => {}
        }
    }
    Ok(out)
}

/// Check that `v` is a value of type `ty` (a `Zero` anywhere fits any type).
/// `what` names the value in the message; errors are input errors.
pub fn check_value(v: &Value, ty: &Type, sizes: &Sizes, what: &str) -> Result<()> {
    fn go(v: &Value, ty: &Type, sizes: &Sizes, path: Path) -> Result<()> {
        match (v, ty) {
            (Value::Zero, _) | (Value::Real(_), Type::Real) => Ok(()),
            (Value::Pair(a, b), Type::Pair(ta, tb)) => {
                go(a, ta, sizes, Path::Index(&path, 0))?;
                go(b, tb, sizes, Path::Index(&path, 1))
            }
            (Value::Tensor(xs), Type::Tensor(d, t)) => {
                let n = input_dim(d, sizes, path)?;
                if xs.len() != n {
                    return Err(Error::input(format!(
                        "{path}: expected a tensor of length {n} ({d}), got length {}",
                        xs.len()
                    )));
                }
                for (i, x) in xs.iter().enumerate() {
                    go(x, t, sizes, Path::Index(&path, i))?;
                }
                Ok(())
            }
            _ => Err(Error::input(format!(
                "{path}: expected a value of type {}, got {}",
                type_str(ty),
                v.describe()
            ))),
        }
    }
    go(v, ty, sizes, Path::Root(what))
}

// ---------------------------------------------------------------------------
// expanding values along their types

enum Event {
    Real(f64),
    BeginPair,
    BeginTensor,
    End,
}

/// Walk `v` as a value of `ty`, expanding `Zero`s, reporting reals and the
/// opening and closing of pairs and tensors. Callers bound the size first.
fn walk(v: &Value, ty: &Type, sizes: &Sizes, out: &mut impl FnMut(Event)) -> Result<()> {
    match (v, ty) {
        (Value::Real(x), Type::Real) => out(Event::Real(*x)),
        (Value::Zero, Type::Real) => out(Event::Real(0.0)),
        (Value::Pair(a, b), Type::Pair(ta, tb)) => {
            out(Event::BeginPair);
            walk(a, ta, sizes, out)?;
            walk(b, tb, sizes, out)?;
            out(Event::End);
        }
        (Value::Zero, Type::Pair(ta, tb)) => {
            out(Event::BeginPair);
            walk(v, ta, sizes, out)?;
            walk(v, tb, sizes, out)?;
            out(Event::End);
        }
        (Value::Tensor(xs), Type::Tensor(d, t)) => {
            let n = dim_at(d, sizes, ErrorKind::Eval)?;
            if xs.len() != n {
                return Err(Error::eval(format!(
                    "a tensor of length {} where {} was expected",
                    xs.len(),
                    type_str(ty)
                )));
            }
            out(Event::BeginTensor);
            for x in xs.iter() {
                walk(x, t, sizes, out)?;
            }
            out(Event::End);
        }
        (Value::Zero, Type::Tensor(d, t)) => {
            let n = dim_at(d, sizes, ErrorKind::Eval)?;
            out(Event::BeginTensor);
            for _ in 0..n {
                walk(v, t, sizes, out)?;
            }
            out(Event::End);
        }
        _ => {
            return Err(Error::eval(format!(
                "{} where a value of type {} was expected",
                v.describe(),
                type_str(ty)
            )))
        }
    }
    Ok(())
}

/// `v` as a JSON value (`Zero` expanded; NaN as `null`, infinities, which a
/// `serde_json` number cannot hold, as the strings `"Infinity"` and
/// `"-Infinity"`; the text writer [`value_to_json_string`] writes ±`1e999`).
pub fn value_to_json(v: &Value, ty: &Type, sizes: &Sizes) -> Result<serde_json::Value> {
    check_output_size(ty, sizes)?;
    let mut stack: Vec<Vec<serde_json::Value>> = vec![vec![]];
    walk(v, ty, sizes, &mut |ev| match ev {
        Event::Real(x) => {
            let j = real_to_json(x);
            if let Some(top) = stack.last_mut() {
                top.push(j);
            }
        }
        Event::BeginPair | Event::BeginTensor => stack.push(vec![]),
        Event::End => {
            if stack.len() > 1 {
                if let (Some(done), Some(top)) = (stack.pop(), stack.last_mut()) {
                    top.push(serde_json::Value::Array(done));
                }
            }
        }
    })?;
    stack
        .pop()
        .and_then(|mut top| top.pop())
        .ok_or_else(|| Error::eval("empty value"))
}

/// A real as a JSON value: a number; NaN as `null`; an infinity, which a
/// `serde_json` number cannot hold, as the string `"Infinity"` or
/// `"-Infinity"` (read back by [`from_json`]; the text writers use ±`1e999`).
pub fn real_to_json(x: f64) -> serde_json::Value {
    match serde_json::Number::from_f64(x) {
        Some(n) => serde_json::Value::Number(n),
        None if x.is_nan() => serde_json::Value::Null,
        None => serde_json::Value::String(if x > 0.0 { "Infinity" } else { "-Infinity" }.into()),
    }
}

/// A real as JSON text: the shortest round-trip decimal form for finite
/// numbers (`0.1`, `3.0`, `1e-7`); NaN as `null` and infinities as `1e999`,
/// `-1e999` (JSON has no non-finite numbers; these are strict JSON that
/// Python and JavaScript read as NaN/None and ±inf, and `--inputs` reads
/// them back through [`parse_json`]).
pub fn real_to_json_string(x: f64) -> String {
    if x.is_nan() {
        "null".into()
    } else if x.is_infinite() {
        if x > 0.0 { "1e999" } else { "-1e999" }.into()
    } else {
        format!("{x:?}")
    }
}

/// Parse JSON input text, reading the spellings of non-finite reals that
/// strict JSON lacks: numbers that overflow a double (`1e999`, what this
/// tool writes) and Python's bare `NaN`, `Infinity`, `-Infinity` become the
/// strings that [`non_finite_from_str`] reads (serde_json rejects both).
pub fn parse_json(text: &str) -> serde_json::Result<serde_json::Value> {
    serde_json::from_str(text)
        .or_else(|e| serde_json::from_str(&quote_non_finite(text)).map_err(|_| e))
}

/// `text` with every non-finite number token outside strings quoted.
fn quote_non_finite(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 16);
    let (mut i, mut in_str, mut esc) = (0, false, false);
    while i < b.len() {
        let c = b[i];
        let rest = &text[i..];
        if in_str {
            in_str = esc || c != b'"';
            esc = !esc && c == b'\\';
            let ch = rest.chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        let word = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|w| rest.starts_with(w));
        let num_len = if c == b'-' || c.is_ascii_digit() {
            rest.find(|ch: char| !(ch.is_ascii_digit() || "+-.eE".contains(ch)))
                .unwrap_or(rest.len())
        } else {
            0
        };
        if let Some(w) = word {
            out.push('"');
            out.push_str(w);
            out.push('"');
            i += w.len();
        } else if num_len > 0 {
            let tok = &rest[..num_len];
            match tok.parse::<f64>() {
                Ok(x) if x.is_infinite() => out.push_str(if x > 0.0 {
                    "\"Infinity\""
                } else {
                    "\"-Infinity\""
                }),
                _ => out.push_str(tok),
            }
            i += num_len;
        } else {
            in_str = c == b'"';
            let ch = rest.chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// The non-finite real a JSON string spells (`"NaN"`, `"Infinity"`,
/// `"-Infinity"`), if it is one of them.
pub fn non_finite_from_str(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// `v` as JSON text in the style of Python's `json.dumps` (`[1.0, 2.5]`),
/// `Zero` expanded, NaN as `null`, infinities as `1e999`, `-1e999`.
pub fn value_to_json_string(v: &Value, ty: &Type, sizes: &Sizes) -> Result<String> {
    check_output_size(ty, sizes)?;
    let mut s = String::new();
    // Whether the innermost open array already has an element.
    let mut nonempty: Vec<bool> = vec![false];
    let sep = |s: &mut String, nonempty: &mut Vec<bool>| {
        if let Some(top) = nonempty.last_mut() {
            if *top {
                s.push_str(", ");
            }
            *top = true;
        }
    };
    walk(v, ty, sizes, &mut |ev| match ev {
        Event::Real(x) => {
            sep(&mut s, &mut nonempty);
            let _ = write!(s, "{}", real_to_json_string(x));
        }
        Event::BeginPair | Event::BeginTensor => {
            sep(&mut s, &mut nonempty);
            s.push('[');
            nonempty.push(false);
        }
        Event::End => {
            s.push(']');
            nonempty.pop();
        }
    })?;
    Ok(s)
}

/// The reals of `v` (a value of `ty`) in order, `Zero` expanded.
pub fn flatten(v: &Value, ty: &Type, sizes: &Sizes) -> Result<Vec<f64>> {
    check_output_size(ty, sizes)?;
    let mut out = vec![];
    walk(v, ty, sizes, &mut |ev| {
        if let Event::Real(x) = ev {
            out.push(x)
        }
    })?;
    Ok(out)
}

/// `v` with every `Zero` replaced by explicit zeros of its type.
pub fn materialize(v: &Value, ty: &Type, sizes: &Sizes) -> Result<Value> {
    check_output_size(ty, sizes)?;
    // Open pairs/tensors with their elements so far; the bottom collects the result.
    let mut stack: Vec<(bool, Vec<Value>)> = vec![(false, vec![])];
    walk(v, ty, sizes, &mut |ev| match ev {
        Event::Real(x) => {
            if let Some(top) = stack.last_mut() {
                top.1.push(Value::Real(x));
            }
        }
        Event::BeginPair => stack.push((true, vec![])),
        Event::BeginTensor => stack.push((false, vec![])),
        Event::End => {
            if stack.len() > 1 {
                if let Some((is_pair, elems)) = stack.pop() {
                    let built = if is_pair && elems.len() == 2 {
                        let mut it = elems.into_iter();
                        let a = it.next().unwrap_or(Value::Zero);
                        let b = it.next().unwrap_or(Value::Zero);
                        Value::pair(a, b)
                    } else {
                        Value::tensor(elems)
                    };
                    if let Some(top) = stack.last_mut() {
                        top.1.push(built);
                    }
                }
            }
        }
    })?;
    stack
        .pop()
        .and_then(|(_, mut top)| top.pop())
        .ok_or_else(|| Error::eval("empty value"))
}

/// The explicit zero of `ty` (every real `0.0`).
pub fn zero_of(ty: &Type, sizes: &Sizes) -> Result<Value> {
    materialize(&Value::Zero, ty, sizes)
}

// ---------------------------------------------------------------------------
// inner products

/// The flattened dot product `<a, b>`, summed exactly rounded (as Python's
/// `math.fsum`). A `Zero` on either side contributes `0 * x` for every real
/// `x` of the other (so `0 * inf` is NaN, as with explicit zeros). Values of
/// different shapes give NaN.
pub fn inner_product(a: &Value, b: &Value) -> f64 {
    fn leaves(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Real(y) => out.push(0.0 * y),
            Value::Pair(a, b) => {
                leaves(a, out);
                leaves(b, out)
            }
            Value::Tensor(xs) => xs.iter().for_each(|x| leaves(x, out)),
            Value::Zero => {}
        }
    }
    fn products(a: &Value, b: &Value, out: &mut Vec<f64>) -> bool {
        match (a, b) {
            (Value::Real(x), Value::Real(y)) => {
                out.push(x * y);
                true
            }
            (Value::Zero, v) | (v, Value::Zero) => {
                leaves(v, out);
                true
            }
            (Value::Pair(a0, a1), Value::Pair(b0, b1)) => {
                products(a0, b0, out) && products(a1, b1, out)
            }
            (Value::Tensor(xs), Value::Tensor(ys)) => {
                xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| products(x, y, out))
            }
            _ => false,
        }
    }
    let mut out = vec![];
    if products(a, b, &mut out) {
        fsum(out)
    } else {
        f64::NAN
    }
}

/// Exactly rounded sum of floats (Shewchuk's algorithm as in CPython's
/// `math.fsum`). Non-finite summands give their IEEE sum; an intermediate
/// overflow of finite summands gives the plain floating-point sum.
pub fn fsum(xs: impl IntoIterator<Item = f64>) -> f64 {
    let mut partials: Vec<f64> = vec![];
    let mut special = 0.0_f64;
    let mut any_special = false;
    let mut plain = 0.0_f64;
    let mut overflow = false;
    for x0 in xs {
        plain += x0;
        if overflow {
            continue;
        }
        if !x0.is_finite() {
            special += x0;
            any_special = true;
            continue;
        }
        let mut x = x0;
        let mut i = 0;
        for j in 0..partials.len() {
            let mut y = partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        partials.truncate(i);
        if x != 0.0 {
            if !x.is_finite() {
                overflow = true;
            } else {
                partials.push(x);
            }
        }
    }
    if any_special {
        return special;
    }
    if overflow {
        return plain;
    }
    let mut n = partials.len();
    let mut hi = 0.0;
    if n > 0 {
        n -= 1;
        hi = partials[n];
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = partials[n];
            hi = x + y;
            let yr = hi - x;
            lo = y - yr;
            if lo != 0.0 {
                break;
            }
        }
        // Round half to even when the rest of the partials push past a tie.
        if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            let yr = x - hi;
            if y == yr {
                hi = x;
            }
        }
    }
    hi
}

// ---------------------------------------------------------------------------
// random values (for tests)

/// A random value of `ty`; `rng` yields reals uniform in `[-1, 1]`.
pub fn random_value(ty: &Type, sizes: &Sizes, rng: &mut impl FnMut() -> f64) -> Result<Value> {
    check_output_size(ty, sizes)?;
    fn go(ty: &Type, sizes: &Sizes, rng: &mut impl FnMut() -> f64) -> Result<Value> {
        Ok(match ty {
            Type::Real => Value::Real(rng()),
            Type::Pair(a, b) => Value::pair(go(a, sizes, rng)?, go(b, sizes, rng)?),
            Type::Tensor(d, t) => {
                let n = dim_at(d, sizes, ErrorKind::Eval)?;
                Value::tensor((0..n).map(|_| go(t, sizes, rng)).collect::<Result<_>>()?)
            }
        })
    }
    go(ty, sizes, rng)
}

/// A random relation of dimensions `dims`: each bit holds with probability
/// `density`; `rng` yields reals uniform in `[-1, 1]` (as for
/// [`random_value`]), and a bit holds when `(u + 1) / 2 < density`.
pub fn random_relation(
    dims: &[Affine],
    sizes: &Sizes,
    density: f64,
    rng: &mut impl FnMut() -> f64,
) -> Result<Relation> {
    let concrete = dims
        .iter()
        .map(|d| dim_at(d, sizes, ErrorKind::Eval))
        .collect::<Result<Vec<_>>>()?;
    let total = concrete
        .iter()
        .try_fold(1u128, |acc, &n| acc.checked_mul(n as u128))
        .filter(|&t| t <= MAX_OUTPUT_REALS)
        .ok_or_else(|| Error::eval("a relation at these sizes is too large to generate"))?;
    let bits = (0..total).map(|_| (rng() + 1.0) / 2.0 < density).collect();
    Ok(Relation {
        dims: concrete,
        bits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::ast::{Param, Program};
    use serde_json::json;

    fn s(x: &str) -> Symbol {
        Symbol::from(x)
    }
    fn n() -> Affine {
        Affine::var(s("n"))
    }
    fn vec_n() -> Type {
        Type::Tensor(n(), Box::new(Type::Real))
    }
    fn sizes(pairs: &[(&str, i64)]) -> Sizes {
        pairs.iter().map(|&(k, v)| (s(k), v)).collect()
    }
    fn prog(params: Vec<Param>, sz: &[&str]) -> Program {
        Program {
            name: s("f"),
            params,
            sizes: sz.iter().map(|x| s(x)).collect(),
            body: crate::front::ast::build::num(0.0),
            ret: Type::Real,
        }
    }
    fn real_param(name: &str, ty: Type) -> Param {
        Param {
            name: s(name),
            kind: ParamKind::Real(ty),
        }
    }

    #[test]
    fn zero_behaves_as_zero() {
        assert_eq!(Value::Zero.get(3).unwrap(), Value::Zero);
        assert_eq!(Value::Zero.fst().unwrap(), Value::Zero);
        assert_eq!(Value::Zero.real().unwrap(), 0.0);
        let t = Value::reals(&[1.0, 2.0]);
        assert_eq!(t.get(1).unwrap(), Value::Real(2.0));
        assert_eq!(t.get(2).unwrap(), Value::Zero);
        assert_eq!(t.get(-1).unwrap(), Value::Zero);
        assert!(Value::Real(1.0).get(0).is_err());
        assert!(t.real().is_err());
    }

    #[test]
    fn relation_test_bounds() {
        let r = Relation {
            dims: vec![2, 3],
            bits: vec![false, true, false, false, false, true],
        };
        assert!(r.test(&[0, 1]));
        assert!(r.test(&[1, 2]));
        assert!(!r.test(&[1, 1]));
        assert!(!r.test(&[2, 0]));
        assert!(!r.test(&[0, 3]));
        assert!(!r.test(&[-1, 1]));
        assert!(!r.test(&[0]));
    }

    #[test]
    fn sizes_flag() {
        let m = parse_sizes_flag("n=4, m = 3").unwrap();
        assert_eq!(m.get(&s("n")), Some(&4));
        assert_eq!(m.get(&s("m")), Some(&3));
        assert!(parse_sizes_flag("").unwrap().is_empty());
        for bad in [
            "n",
            "n=-3",
            "n=2.5",
            "=3",
            "n=4,n=5",
            "n=4,",
            "n=100000000000000000000000000000",
        ] {
            let e = parse_sizes_flag(bad).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Usage, "{bad}");
        }
        let e = parse_sizes_flag("n=100000000000000000000000000000").unwrap_err();
        assert!(e.msg.contains("too large"), "{}", e.msg);
    }

    #[test]
    fn resolve_and_read_inputs() {
        let p = prog(
            vec![
                real_param("x", vec_n()),
                Param {
                    name: s("S"),
                    kind: ParamKind::Relation(vec![n(), Affine::var(s("m"))]),
                },
            ],
            &["n", "m"],
        );
        let j = json!({"x": [1, 2.5, -3], "S": [[true, 0], [1, false], [false, false]]});
        let sz = resolve_sizes(&p, &Sizes::new(), Some(&j)).unwrap();
        assert_eq!(sz, sizes(&[("n", 3), ("m", 2)]));
        let inp = inputs_from_json(&p, &j, &sz, true).unwrap();
        assert_eq!(inp.values[&s("x")], Value::reals(&[1.0, 2.5, -3.0]));
        let r = &inp.relations[&s("S")];
        assert!(r.test(&[0, 0]) && r.test(&[1, 0]) && !r.test(&[0, 1]));

        let e = resolve_sizes(&p, &sizes(&[("k", 1)]), Some(&j)).unwrap_err();
        assert!(e.msg.contains("unknown size 'k'"), "{}", e.msg);
        let e = resolve_sizes(&p, &Sizes::new(), Some(&json!({"x": [1]}))).unwrap_err();
        // the size m comes from S, which is missing: say so
        assert!(e.msg.contains("missing input 'S'"), "{}", e.msg);
        assert!(e.hint.unwrap().contains("--sizes m=N"));
        // --sizes wins over the inputs
        let sz2 = resolve_sizes(&p, &sizes(&[("n", 5)]), Some(&j)).unwrap();
        assert_eq!(sz2[&s("n")], 5);
    }

    #[test]
    fn input_errors_name_the_path() {
        let p = prog(
            vec![real_param(
                "x",
                Type::Tensor(
                    n(),
                    Box::new(Type::Pair(Box::new(Type::Real), Box::new(Type::Real))),
                ),
            )],
            &["n"],
        );
        let sz = sizes(&[("n", 2)]);
        let cases = [
            (
                json!({"x": [[1, 2], [3, "a"]]}),
                "x[1][1]: expected a number, got \"a\"",
            ),
            (
                json!({"x": [[1, 2]]}),
                "x: expected an array of length 2 (n), got length 1",
            ),
            (
                json!({"x": [[1, 2], [3]]}),
                "x[1]: expected a pair (a 2-element array), got an array of length 1",
            ),
            (
                json!({"x": 1.5}),
                "x: expected an array of length 2, got 1.5",
            ),
            (
                json!({"x": [[1, 2], [true, 1]]}),
                "x[1][0]: expected a number, got true",
            ),
            (json!({}), "missing input 'x'"),
            (json!([1]), "the inputs must be a JSON object"),
        ];
        for (j, msg) in cases {
            let e = inputs_from_json(&p, &j, &sz, true).unwrap_err();
            assert_eq!(e.kind, ErrorKind::Input);
            assert!(e.msg.contains(msg), "{} vs {}", e.msg, msg);
        }
        assert!(inputs_from_json(&p, &json!({}), &sz, false).is_ok());
        let long = "a".repeat(100);
        let e = value_from_json(&json!(long), &Type::Real, &sz, "y").unwrap_err();
        assert_eq!(
            e.msg,
            format!("y: expected a number, got \"{}...", &long[..36])
        );
    }

    #[test]
    fn relation_inputs() {
        let p = prog(
            vec![Param {
                name: s("S"),
                kind: ParamKind::Relation(vec![n()]),
            }],
            &["n"],
        );
        let sz = sizes(&[("n", 3)]);
        let e = inputs_from_json(&p, &json!({"S": [0.5, "yes", 2]}), &sz, true).unwrap_err();
        assert!(
            e.msg.contains("S[0]: expected true/false or 0/1, got 0.5"),
            "{}",
            e.msg
        );
        let e = inputs_from_json(&p, &json!({"S": [0, 1, 2]}), &sz, true).unwrap_err();
        assert!(e.msg.contains("S[2]"), "{}", e.msg);
        assert!(inputs_from_json(&p, &json!({}), &sz, false).is_err());
        let neg = sizes(&[("n", -1)]);
        let p2 = prog(
            vec![Param {
                name: s("S"),
                kind: ParamKind::Relation(vec![n().add_constant(-1).unwrap()]),
            }],
            &["n"],
        );
        let e = inputs_from_json(&p2, &json!({"S": []}), &neg, true).unwrap_err();
        assert!(e.msg.contains("negative"), "{}", e.msg);
    }

    #[test]
    fn json_output_expands_zero() {
        let sz = sizes(&[("n", 2)]);
        let ty = Type::Pair(Box::new(vec_n()), Box::new(Type::Real));
        let v = Value::pair(Value::Zero, Value::Real(f64::NAN));
        assert_eq!(
            value_to_json(&v, &ty, &sz).unwrap(),
            json!([[0.0, 0.0], null])
        );
        assert_eq!(
            value_to_json_string(&v, &ty, &sz).unwrap(),
            "[[0.0, 0.0], null]"
        );
        let w = Value::tensor(vec![Value::Real(0.1), Value::Real(-f64::INFINITY)]);
        assert_eq!(
            value_to_json_string(&w, &vec_n(), &sz).unwrap(),
            "[0.1, -1e999]"
        );
        // every spelling of a non-finite real reads back
        let back =
            parse_json("[null, 1e999, -1e999, NaN, -Infinity, \"Infinity\", \"a1e999\"]").unwrap();
        let xs = back.as_array().unwrap();
        let v = |k: usize| from_json(&xs[k], &Type::Real, &sz, Path::Root("x")).unwrap();
        assert!(matches!(v(0), Value::Real(x) if x.is_nan()));
        assert!(matches!(v(1), Value::Real(x) if x == f64::INFINITY));
        assert!(matches!(v(2), Value::Real(x) if x == f64::NEG_INFINITY));
        assert!(matches!(v(3), Value::Real(x) if x.is_nan()));
        assert!(matches!(v(4), Value::Real(x) if x == f64::NEG_INFINITY));
        assert!(matches!(v(5), Value::Real(x) if x == f64::INFINITY));
        assert_eq!(xs[6], json!("a1e999"));
        assert_eq!(real_to_json_string(1e-7), "1e-7");
        assert_eq!(real_to_json_string(3.0), "3.0");
        let m = Type::Tensor(n(), Box::new(vec_n()));
        assert_eq!(
            value_to_json_string(&Value::Zero, &m, &sz).unwrap(),
            "[[0.0, 0.0], [0.0, 0.0]]"
        );
        assert_eq!(
            value_to_json_string(&Value::Real(2.5), &Type::Real, &sz).unwrap(),
            "2.5"
        );
        let empty = sizes(&[("n", 0)]);
        assert_eq!(
            value_to_json_string(&Value::Zero, &m, &empty).unwrap(),
            "[]"
        );
        // The string form parses back to the same numbers.
        let txt = value_to_json_string(&Value::reals(&[0.1, 1e300]), &vec_n(), &sz).unwrap();
        let back: serde_json::Value = serde_json::from_str(&txt).unwrap();
        assert_eq!(back, json!([0.1, 1e300]));
        // Shape mismatch is an error, not a panic.
        assert!(value_to_json(&Value::reals(&[1.0]), &vec_n(), &sz).is_err());
        assert!(value_to_json(&Value::Real(1.0), &vec_n(), &sz).is_err());
    }

    #[test]
    fn huge_outputs_are_refused() {
        let sz = sizes(&[("n", 1_000_000_000_000)]);
        let e = value_to_json_string(&Value::Zero, &vec_n(), &sz).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Eval);
        let zero_inner = Type::Tensor(
            n(),
            Box::new(Type::Tensor(Affine::constant(0), Box::new(Type::Real))),
        );
        assert!(flatten(&Value::Zero, &zero_inner, &sz).is_err());
        let neg = sizes(&[("n", -2)]);
        let e = flatten(&Value::Zero, &vec_n(), &neg).unwrap_err();
        assert!(e.msg.contains("negative"), "{}", e.msg);
    }

    #[test]
    fn sizes_of_types() {
        let sz = sizes(&[("n", 3)]);
        let ty = Type::Pair(
            Box::new(Type::Tensor(n(), Box::new(vec_n()))),
            Box::new(Type::Real),
        );
        assert_eq!(type_size(&ty, &sz).unwrap(), 10);
        assert_eq!(type_size(&vec_n(), &sizes(&[("n", -3)])).unwrap(), 0);
        assert_eq!(
            type_size(&vec_n(), &Sizes::new()).unwrap_err().kind,
            ErrorKind::Input
        );
        let big = sizes(&[("n", i64::MAX)]);
        let deep = Type::tensor(&[n(), n(), n()], Type::Real);
        assert!(type_size(&deep, &big).is_err());
    }

    #[test]
    fn flatten_materialize_inner() {
        let sz = sizes(&[("n", 2)]);
        let ty = Type::Pair(Box::new(vec_n()), Box::new(Type::Real));
        let v = Value::pair(Value::reals(&[1.0, 2.0]), Value::Real(3.0));
        assert_eq!(flatten(&v, &ty, &sz).unwrap(), vec![1.0, 2.0, 3.0]);
        let z = zero_of(&ty, &sz).unwrap();
        assert_eq!(z, Value::pair(Value::reals(&[0.0, 0.0]), Value::Real(0.0)));
        assert_eq!(
            materialize(&Value::pair(Value::Zero, Value::Real(1.0)), &ty, &sz).unwrap(),
            Value::pair(Value::reals(&[0.0, 0.0]), Value::Real(1.0))
        );
        assert_eq!(inner_product(&v, &v), 14.0);
        assert_eq!(inner_product(&v, &Value::Zero), 0.0);
        assert_eq!(
            inner_product(&Value::pair(Value::Zero, Value::Real(2.0)), &v),
            6.0
        );
        assert!(inner_product(&v, &Value::reals(&[1.0])).is_nan());
        assert!(inner_product(&Value::Zero, &Value::Real(f64::INFINITY)).is_nan());
    }

    #[test]
    fn fsum_is_exact() {
        assert_eq!(fsum([1e100, 1.0, -1e100]), 1.0);
        assert_eq!(fsum([0.1; 10]), 1.0);
        assert_eq!(fsum([]), 0.0);
        assert!(fsum([f64::INFINITY, -f64::INFINITY]).is_nan());
        assert_eq!(fsum([f64::INFINITY, 1.0]), f64::INFINITY);
        assert_eq!(fsum([f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(fsum([1.0, 1e-16, 1e-16]), 1.0000000000000002);
    }

    #[test]
    fn check_value_shapes() {
        let sz = sizes(&[("n", 2)]);
        assert!(check_value(&Value::reals(&[1.0, 2.0]), &vec_n(), &sz, "t").is_ok());
        assert!(check_value(&Value::Zero, &vec_n(), &sz, "t").is_ok());
        let e = check_value(&Value::reals(&[1.0]), &vec_n(), &sz, "t").unwrap_err();
        assert!(e.msg.starts_with("t: "), "{}", e.msg);
        assert!(check_value(
            &Value::tensor(vec![Value::Real(1.0), Value::reals(&[])]),
            &vec_n(),
            &sz,
            "t"
        )
        .is_err());
    }

    #[test]
    fn random_values() {
        let sz = sizes(&[("n", 3)]);
        let mut k = 0.0;
        let mut rng = || {
            k += 0.25;
            k - 1.0
        };
        let v = random_value(&Type::tensor(&[n(), n()], Type::Real), &sz, &mut rng).unwrap();
        assert_eq!(
            flatten(&v, &Type::tensor(&[n(), n()], Type::Real), &sz)
                .unwrap()
                .len(),
            9
        );
        let r = random_relation(&[n(), n()], &sz, 0.5, &mut rng).unwrap();
        assert_eq!(r.bits.len(), 9);
        assert_eq!(r.dims, vec![3, 3]);
        let big = sizes(&[("n", 1 << 40)]);
        assert!(random_value(&vec_n(), &big, &mut rng).is_err());
        assert!(random_relation(&[n(), n()], &big, 0.5, &mut rng).is_err());
    }
}
