//! Size sets: the [`Sizes`] type and its one text form `n=4,m=3` (read by
//! [`FromStr`] from the `--sizes` flag and the corpus' `; sizes:` lines,
//! written by [`Display`](fmt::Display)), the check every run of a whole
//! program makes first ([`Sizes::require`]), and sizes resolved from the
//! flag and the inputs (a size not given is taken from an input whose
//! dimension is exactly that size name, as the conformance reference does).

use super::arrays::{tensor_dims, Arrays, Role};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{ParamKind, Program, Type};
use crate::symbol::Symbol;
use indexmap::IndexMap;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::str::FromStr;

/// Concrete sizes, in declaration order (equal as maps, whatever the
/// order). It reads as its map.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Sizes(IndexMap<Symbol, i64>);

/// As the map (`{"n": 4}`), as failure messages printed it before.
impl fmt::Debug for Sizes {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Sizes {
    pub fn new() -> Sizes {
        Sizes::default()
    }

    /// Every size of `names` given and non-negative (input errors otherwise).
    pub fn require(&self, names: &[Symbol]) -> Result<()> {
        for s in names {
            match self.get(s) {
                None => return Err(Error::input(format!("size {s} is not given"))),
                Some(&v) if v < 0 => {
                    return Err(Error::input(format!(
                        "size {s} must be a non-negative integer, got {v}"
                    )))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

impl Deref for Sizes {
    type Target = IndexMap<Symbol, i64>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for Sizes {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl FromIterator<(Symbol, i64)> for Sizes {
    fn from_iter<I: IntoIterator<Item = (Symbol, i64)>>(iter: I) -> Sizes {
        Sizes(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a Sizes {
    type Item = (&'a Symbol, &'a i64);
    type IntoIter = indexmap::map::Iter<'a, Symbol, i64>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// A size set `n=4,m=3` (usage errors, worded for the `--sizes` flag):
/// distinct names, non-negative integers. An empty string gives no sizes.
impl FromStr for Sizes {
    type Err = Error;

    fn from_str(s: &str) -> Result<Sizes> {
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
}

/// `n=4,m=3`, in its order (empty for no sizes); what [`FromStr`] reads back.
impl fmt::Display for Sizes {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, (k, v)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

/// All sizes of `prog`, in its declaration order: from `given`, else inferred
/// from the JSON inputs (an input dimension that is exactly the size name).
pub fn resolve_sizes(
    prog: &Program,
    given: &Sizes,
    json: Option<&serde_json::Value>,
) -> Result<Sizes> {
    resolve_sizes_from(prog, given, json, &Arrays::new())
}

/// All sizes of `prog`, as [`resolve_sizes`], inferred from `arrays` (read
/// whole from NumPy files) and the JSON inputs.
pub fn resolve_sizes_from(
    prog: &Program,
    given: &Sizes,
    json: Option<&serde_json::Value>,
    arrays: &Arrays,
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
    // inputs that are not an object give no size: say what is wrong with
    // them rather than that a size cannot be inferred
    if json.is_some_and(|j| !j.is_object()) {
        return Err(Error::input(
            "the inputs must be a JSON object from parameter names to values",
        ));
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
                if let Some((role, a)) = arrays.get(p.name.as_str()) {
                    return match &p.kind {
                        ParamKind::Real(_) if prog.stored.param(p.name).is_some() => None,
                        ParamKind::Real(ty) => a.infer(&tensor_dims(ty)?, s),
                        ParamKind::Relation(dims) if *role == Role::Whole => a.infer(dims, s),
                        _ => None,
                    };
                }
                let j = obj.get(p.name.as_str())?;
                match &p.kind {
                    ParamKind::Size => None,
                    ParamKind::Real(_) if prog.stored.param(p.name).is_some() => None,
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
                    .filter(|p| !arrays.contains_key(p.name.as_str()))
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
    // Tuples fix a dimension only through their optional "shape".
    if let Some(obj) = j.as_object() {
        let shape = obj.get("shape")?.as_array()?;
        let k = dims.iter().position(|d| *d == Affine::var(s))?;
        return shape.get(k)?.as_i64();
    }
    for d in dims {
        let xs = j.as_array()?;
        if *d == Affine::var(s) {
            return i64::try_from(xs.len()).ok();
        }
        j = xs.first()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::semantics::value::test_support::*;

    #[test]
    fn sizes_flag() {
        let m: Sizes = "n=4, m = 3".parse().unwrap();
        assert_eq!(m.get(&s("n")), Some(&4));
        assert_eq!(m.get(&s("m")), Some(&3));
        assert_eq!(m.to_string(), "n=4,m=3");
        assert_eq!(m.to_string().parse::<Sizes>().unwrap(), m);
        assert!("".parse::<Sizes>().unwrap().is_empty());
        assert_eq!(Sizes::new().to_string(), "");
        assert_eq!(format!("{m:?}"), r#"{"n": 4, "m": 3}"#);
        for bad in [
            "n",
            "n=-3",
            "n=2.5",
            "=3",
            "n=4,n=5",
            "n=4,",
            "n=100000000000000000000000000000",
        ] {
            let e = bad.parse::<Sizes>().unwrap_err();
            assert_eq!(e.kind, ErrorKind::Usage, "{bad}");
        }
        let e = "n=100000000000000000000000000000"
            .parse::<Sizes>()
            .unwrap_err();
        assert!(e.msg.contains("too large"), "{}", e.msg);
    }
}
