//! Values as JSON, following the conformance reference (`atl_ref.py`):
//! the same shape checks and the same messages, naming the input path
//! (`x[2]: expected a number, got "a"`). JSON itself bounds what is
//! allocated while reading.
//!
//! Non-finite reals cannot be JSON numbers. Every writer spells them the
//! one way documented in docs/cli.md, in strict JSON that Python's and
//! JavaScript's readers take as the same value: NaN as `null`, infinities
//! as `1e999` and `-1e999` (numbers that overflow to ±inf). The reader
//! ([`parse_json`]) takes those back, and also Python's `NaN`, `Infinity`,
//! `-Infinity` and the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.

use super::arrays::{Array, Arrays, Role};
use super::value::{
    check_output_size, input_dim, walk, Event, Inputs, Path, Relation, Sizes, Value,
};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{ParamKind, Program, Type};
use std::fmt::Write as _;

// ---------------------------------------------------------------------------
// reading JSON

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

/// A relation of dimensions `dims` from nested JSON arrays of `true`/`false`
/// (or `0`/`1`), or from its tuples (`{"tuples": [[0, 1], ...]}`, any
/// order). Errors are input errors naming `path`.
pub fn relation_from_json(
    j: &serde_json::Value,
    dims: &[Affine],
    sizes: &Sizes,
    path: &str,
) -> Result<Relation> {
    let name = path;
    let path = Path::Root(path);
    let concrete = dims
        .iter()
        .map(|d| input_dim(d, sizes, path))
        .collect::<Result<Vec<_>>>()?;
    if let Some(tuples) = super::tuples::tuples_from_json(&format!("input '{name}'"), j) {
        let what = format!("input '{name}'");
        super::tuples::check_json_shape(&what, j, &concrete)?;
        return super::tuples::relation_from_tuples(&what, &concrete, &tuples?);
    }
    let mut bits = vec![];
    rel_bits(j, &concrete, path, &mut bits)?;
    Ok(Relation::from_dense(concrete, &bits))
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
    inputs_from(prog, json, &Arrays::new(), sizes, require_reals)
}

/// The inputs of `prog` from `arrays` (read whole from NumPy files) and,
/// for the parameters they do not give, from a JSON object, as
/// [`inputs_from_json`].
pub fn inputs_from(
    prog: &Program,
    json: &serde_json::Value,
    arrays: &Arrays,
    sizes: &Sizes,
    require_reals: bool,
) -> Result<Inputs> {
    let Some(obj) = json.as_object() else {
        return Err(Error::input(
            "the inputs must be a JSON object from parameter names to values",
        ));
    };
    let mut out = Inputs::new(sizes.clone());
    let mut stored = vec![];
    for p in &prog.params {
        let name = p.name.as_str();
        let given = match (arrays.get(name), obj.get(name)) {
            (Some((role, a)), _) => Given::Array(*role, a),
            (None, Some(j)) => Given::Json(j),
            (None, None) => match &p.kind {
                ParamKind::Size => continue,
                ParamKind::Real(_) if !require_reals => continue,
                _ => return Err(missing(name, obj.keys().chain(arrays.keys()))),
            },
        };
        match (&p.kind, given) {
            (ParamKind::Size, _) => {}
            (ParamKind::Real(_), g) if prog.stored.param(p.name).is_some() => {
                stored.push((p.name, g))
            }
            (ParamKind::Real(ty), Given::Json(j)) => {
                out.values
                    .insert(p.name, value_from_json(j, ty, sizes, name)?);
            }
            (ParamKind::Real(ty), Given::Array(_, a)) => {
                out.values.insert(p.name, a.value(ty, sizes, name)?);
            }
            (ParamKind::Relation(dims), Given::Json(j)) => {
                out.relations
                    .insert(p.name, relation_from_json(j, dims, sizes, name)?);
            }
            (ParamKind::Relation(dims), Given::Array(role, a)) => {
                let rel = match role {
                    Role::Whole => a.relation(dims, sizes, name)?,
                    Role::Tuples => a.tuples(dims, sizes, name)?,
                };
                out.relations.insert(p.name, rel);
            }
        }
    }
    for (x, given) in stored {
        let r = prog.stored.param(x).expect("a stored parameter");
        let (xs, rs) = (x.as_str(), r.as_str());
        match (arrays.get(rs), obj.get(rs)) {
            (Some((Role::Tuples, a)), _) => a.check_tuple_order(rs, xs)?,
            (None, Some(rj)) => super::stored::check_tuple_order(rj, rs, xs)?,
            _ => {}
        }
        let rel = &out.relations[&r];
        let values = match given {
            Given::Json(j) => super::stored::stored_from_json(j, xs, r, rel, sizes)?,
            Given::Array(_, a) => a.stored(xs, rs, rel)?,
        };
        out.stored.insert(x, values);
    }
    Ok(out)
}

/// How a parameter's value is given.
enum Given<'a> {
    Json(&'a serde_json::Value),
    Array(Role, &'a Array),
}

/// The error for a missing input, naming the inputs given.
fn missing<'a>(name: &str, given: impl Iterator<Item = &'a String>) -> Error {
    let mut keys: Vec<&str> = given.map(String::as_str).collect();
    keys.sort_unstable();
    keys.dedup();
    let hint = crate::diagnostics::did_you_mean(name, keys.iter().copied()).unwrap_or_else(|| {
        if keys.is_empty() {
            "the inputs are empty".to_string()
        } else {
            format!("the inputs give: {}", keys.join(", "))
        }
    });
    Error::input(format!("missing input '{name}'")).with_hint(hint)
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
/// `"-Infinity"` (read back by [`value_from_json`]; the text writers use ±`1e999`).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::front::ast::Param;
    use crate::semantics::sizes::resolve_sizes;
    use crate::semantics::value::test_support::*;
    use serde_json::json;

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
        // inputs that are not an object are named as such, even where a
        // size would have been inferred from them
        for bad in [json!([1, 2]), json!(null), json!(5)] {
            let e = resolve_sizes(&p, &Sizes::new(), Some(&bad)).unwrap_err();
            assert!(e.msg.contains("must be a JSON object"), "{}", e.msg);
        }
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
}
