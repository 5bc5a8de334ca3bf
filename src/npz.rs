//! NumPy files: inputs from an `.npz` archive or a folder of `.npy` files,
//! results to `.npy` or `.npz`.
//!
//! The `.npy` format is read and written by `npyz` (pure Rust, maintained,
//! reads every dtype NumPy writes by default and reports the rest clearly);
//! the `.npz` archive (a zip of `.npy` members, as `numpy.savez` and
//! `numpy.savez_compressed` write it) by `zip` with only its pure-Rust
//! `deflate` backend: `npyz`'s own `npz` feature pulls in `zip` with every
//! compression method, C libraries (bzip2, zstd) included.
//!
//! Conventions (docs/cli.md):
//! * an input is the array named after its parameter (`x.npy` or the
//!   member `x` of the archive); reals may be stored as any float, integer
//!   or bool dtype; a real is a 0-d array (or one element);
//! * a relation is a boolean array (integer 0/1 arrays are accepted), or
//!   its tuples as the integer array `E.tuples` of shape `(nnz, arity)`;
//! * a pair-typed input `p` is given as two arrays `p.0` and `p.1` (nested
//!   pairs as `p.1.0`, ...);
//! * results: `result` for a real or a tensor, `result.0`, `result.1`, ...
//!   for the components of a pair. A `.npy` file holds a single array.
//!   Tensors of pairs are not representable as NumPy arrays of reals.
//!
//! Arrays are converted to the JSON form the rest of the tool reads, so the
//! same checks (shapes, sizes inferred from dimensions) apply to both.
//! Before that, nothing is allocated on an array's word: its header is
//! checked against the shape its parameter expects at the sizes given and
//! against [`MAX_INPUT_ELEMENTS`], and component-named arrays (`p.1`,
//! `x.3`) must lie within the type and be numbered without gaps.

use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{Param, ParamKind, Program, Type};
use crate::semantics::arrays::{shape_text, Array, Arrays, Data, Role};
use crate::semantics::json;
use crate::semantics::value::{self, Sizes, Value};
use std::io::{Read, Write};
use std::path::Path;

fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::input(format!("{}: {e}", path.display()))
}

/// Nested JSON arrays of `shape` from row-major elements.
fn nest(elems: &mut impl Iterator<Item = serde_json::Value>, shape: &[u64]) -> serde_json::Value {
    match shape.split_first() {
        None => elems.next().unwrap_or(serde_json::Value::Null),
        Some((&n, rest)) => serde_json::Value::Array((0..n).map(|_| nest(elems, rest)).collect()),
    }
}

/// One `.npy` file's bytes as nested JSON (numbers or booleans); its
/// header is checked against [`MAX_INPUT_ELEMENTS`] before its data is read.
pub fn npy_to_json(bytes: &[u8], name: &str) -> Result<serde_json::Value> {
    let spec = MemberSpec {
        param: name.to_string(),
        path: vec![],
        dims: None,
        is_real: false,
        tuples: false,
        whole: false,
    };
    Ok(to_json(&read_array(bytes, name, &spec, &Sizes::default())?))
}

/// An array as nested JSON arrays of numbers or booleans.
fn to_json(a: &Array) -> serde_json::Value {
    let elems: Vec<serde_json::Value> = match &a.data {
        Data::Reals(x) => x.iter().map(|&x| json::real_to_json(x)).collect(),
        Data::Ints(x) => x.iter().map(|&k| serde_json::json!(k)).collect(),
        Data::Bools(x) => x.iter().map(|&b| serde_json::Value::Bool(b)).collect(),
    };
    nest(&mut elems.into_iter(), &a.shape)
}

/// One `.npy` array from `reader`; its header is checked against `spec` at
/// `sizes` before its data is read.
fn read_array(reader: impl Read, name: &str, spec: &MemberSpec, sizes: &Sizes) -> Result<Array> {
    let bad = |e: &dyn std::fmt::Display| Error::input(format!("{name}: not a NumPy array: {e}"));
    let file = npyz::NpyFile::new(reader).map_err(|e| bad(&e))?;
    if file.order() == npyz::Order::Fortran && file.shape().len() > 1 {
        return Err(Error::input(format!(
            "{name}: the array is stored in Fortran (column-major) order"
        ))
        .with_hint("save it with numpy.ascontiguousarray(a)"));
    }
    check_header(file.shape(), spec, sizes, name)?;
    let shape = file.shape().to_vec();
    let dtype = file.dtype().descr();
    let data = match file.try_data::<f64>() {
        Ok(d) => d.collect::<std::io::Result<_>>().map(Data::Reals),
        Err(f) => match f.try_data::<f32>() {
            Ok(d) => d
                .map(|x| x.map(f64::from))
                .collect::<std::io::Result<_>>()
                .map(Data::Reals),
            Err(f) => match f.try_data::<i64>() {
                Ok(d) => d.collect::<std::io::Result<_>>().map(Data::Ints),
                Err(f) => match f.try_data::<i32>() {
                    Ok(d) => d
                        .map(|x| x.map(i64::from))
                        .collect::<std::io::Result<_>>()
                        .map(Data::Ints),
                    Err(f) => match f.try_data::<bool>() {
                        Ok(d) => d.collect::<std::io::Result<_>>().map(Data::Bools),
                        Err(f) => match f.try_data::<u8>() {
                            Ok(d) => d
                                .map(|x| x.map(i64::from))
                                .collect::<std::io::Result<_>>()
                                .map(Data::Ints),
                            Err(_) => {
                                return Err(Error::input(format!(
                                    "{name}: unsupported dtype {dtype}"
                                ))
                                .with_hint("use float64, float32, int64, int32, uint8 or bool"))
                            }
                        },
                    },
                },
            },
        },
    }
    .map_err(|e| {
        Error::input(format!(
            "{name}: cannot read the data of shape {}: {e}",
            shape_text(shape.iter().map(u64::to_string))
        ))
    })?;
    Ok(Array { shape, data })
}

/// Put `v` at `path` (`p.1.0` -> [1, 0]) under `param` in the inputs
/// object, making arrays (padded with `null`) on the way.
fn insert(
    obj: &mut serde_json::Map<String, serde_json::Value>,
    param: &str,
    path: &[u64],
    v: serde_json::Value,
) {
    let mut slot = obj
        .entry(param.to_string())
        .or_insert(serde_json::Value::Null);
    for &k in path {
        if !slot.is_array() {
            *slot = serde_json::Value::Array(vec![]);
        }
        let arr = slot.as_array_mut().expect("just made an array");
        let k = k as usize;
        while arr.len() <= k {
            arr.push(serde_json::Value::Null);
        }
        slot = &mut arr[k];
    }
    *slot = v;
}

/// The most elements (and the most nested arrays) one input array may
/// declare: an array's header is checked against it, and against the
/// shape its parameter expects, before any of its data is read.
pub const MAX_INPUT_ELEMENTS: u64 = 50_000_000;

/// What one member (`x`, `p.1`, `x.3`) of the inputs must hold, from its
/// parameter's type and the sizes known so far.
#[derive(Debug)]
struct MemberSpec {
    /// The parameter it belongs to.
    param: String,
    /// The indices after the parameter's name (`p.1.0` -> [1, 0]).
    path: Vec<u64>,
    /// The array's dimensions, as the type gives them, or `None` where the
    /// type has no one-array form checked here (a pair, a tensor of pairs:
    /// the JSON checks then apply).
    dims: Option<Vec<Affine>>,
    /// The parameter is a real (a 0-d array, or a single element).
    is_real: bool,
    /// The member is a relation's tuples (`E.tuples`, an integer array of
    /// shape `(nnz, arity)`), checked as JSON tuples are.
    tuples: bool,
    /// The member is read as an array ([`Arrays`]), not as JSON: a
    /// parameter's whole value (a real, a tensor of reals, a relation, a
    /// stored tensor's values) or a relation's tuples.
    whole: bool,
}

/// A dimension's value at the sizes known so far (`None` if it needs one
/// that is not known, or is negative).
fn known_dim(d: &Affine, sizes: &Sizes) -> Option<u64> {
    value::affine_at(d, sizes)
        .ok()
        .and_then(|n| u64::try_from(n).ok())
}

/// The parameter and the indices a member name denotes: the parameter of
/// exactly that name, else one whose name is followed by `.` and numbers.
fn split_member<'p>(prog: &'p Program, stem: &str) -> Option<(&'p Param, Vec<u64>)> {
    let real_params = || prog.params.iter().filter(|p| p.kind != ParamKind::Size);
    if let Some(p) = real_params().find(|p| p.name.as_str() == stem) {
        return Some((p, vec![]));
    }
    real_params().find_map(|p| {
        let rest = stem.strip_prefix(p.name.as_str())?.strip_prefix('.')?;
        let path = rest
            .split('.')
            .map(|k| {
                (!k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| k.parse::<u64>().ok())
                    .flatten()
            })
            .collect::<Option<Vec<_>>>()?;
        Some((p, path))
    })
}

/// What the member `stem` must hold (`None`: it names no parameter, and is
/// not read). An index out of its pair or tensor is an error.
fn member_spec(prog: &Program, sizes: &Sizes, stem: &str) -> Result<Option<MemberSpec>> {
    if let Some(name) = stem.strip_suffix(".tuples") {
        let relation = prog
            .params
            .iter()
            .any(|p| p.name.as_str() == name && matches!(p.kind, ParamKind::Relation(_)));
        if relation {
            return Ok(Some(MemberSpec {
                param: name.to_string(),
                path: vec![],
                dims: None,
                is_real: false,
                tuples: true,
                whole: true,
            }));
        }
    }
    let Some((param, path)) = split_member(prog, stem) else {
        return Ok(None);
    };
    let name = param.name.as_str();
    let out_of_range = |k: u64, why: String| {
        Error::input(format!(
            "array '{stem}': index {k} is out of range for input '{name}' ({why})"
        ))
    };
    let dims = match &param.kind {
        ParamKind::Size => return Ok(None),
        // one value per tuple of its relation: the JSON checks apply
        ParamKind::Real(_) if prog.stored.param(param.name).is_some() && path.is_empty() => None,
        ParamKind::Relation(dims) => {
            if path.len() > dims.len() {
                return Err(out_of_range(
                    path[dims.len()],
                    format!("a relation of {} dimensions", dims.len()),
                ));
            }
            for (&k, d) in path.iter().zip(dims) {
                if let Some(n) = known_dim(d, sizes).filter(|&n| k >= n) {
                    return Err(out_of_range(k, format!("dimension {d} is {n}")));
                }
            }
            Some(dims[path.len()..].to_vec())
        }
        ParamKind::Real(ty) => {
            let mut ty = ty;
            for &k in &path {
                ty = match ty {
                    Type::Pair(a, b) => match k {
                        0 => a,
                        1 => b,
                        _ => {
                            return Err(out_of_range(k, "a pair has the components 0 and 1".into()))
                        }
                    },
                    Type::Tensor(d, inner) => {
                        if let Some(n) = known_dim(d, sizes).filter(|&n| k >= n) {
                            return Err(out_of_range(k, format!("dimension {d} is {n}")));
                        }
                        inner
                    }
                    Type::Real => return Err(out_of_range(k, "a real has no components".into())),
                };
            }
            let mut dims = vec![];
            while let Type::Tensor(d, inner) = ty {
                dims.push(d.clone());
                ty = inner;
            }
            (*ty == Type::Real).then_some(dims)
        }
    };
    let stored = prog.stored.param(param.name).is_some();
    Ok(Some(MemberSpec {
        param: name.to_string(),
        is_real: dims.as_ref().is_some_and(Vec::is_empty),
        whole: path.is_empty() && (dims.is_some() || stored),
        path,
        dims,
        tuples: false,
    }))
}

/// Index-named members (`p.0`, `p.1`; `x.0` ... `x.4`) must be numbered
/// from 0 without a gap at every level, so assembling them never makes more
/// slots than there are members.
fn check_member_numbering(specs: &[Option<MemberSpec>]) -> Result<()> {
    let mut children: std::collections::BTreeMap<(String, Vec<u64>), Vec<u64>> = Default::default();
    for s in specs.iter().flatten() {
        for depth in 0..s.path.len() {
            children
                .entry((s.param.clone(), s.path[..depth].to_vec()))
                .or_default()
                .push(s.path[depth]);
        }
    }
    for ((param, prefix), mut ks) in children {
        ks.sort_unstable();
        ks.dedup();
        if let Some(missing) = (0..).zip(&ks).find(|(i, k)| i != *k).map(|(i, _)| i) {
            let name = |k: u64| {
                let mut parts = vec![param.clone()];
                parts.extend(prefix.iter().chain([&k]).map(u64::to_string));
                parts.join(".")
            };
            let last = ks[ks.len() - 1];
            return Err(Error::input(format!(
                "array '{}' is given but '{}' is not",
                name(last),
                name(missing)
            ))
            .with_hint("number the arrays of an input from 0, without gaps"));
        }
    }
    Ok(())
}

/// Record the sizes an accepted array's `shape` gives: those its
/// parameter's type names as a whole dimension (`n` in `(tensor n R)`), as
/// the JSON inputs give them.
fn learn_sizes(spec: &MemberSpec, shape: &[u64], sizes: &mut Sizes) {
    let Some(dims) = &spec.dims else { return };
    for (d, &n) in dims.iter().zip(shape) {
        if let ([(s, 1)], 0) = (d.terms.as_slice(), d.constant) {
            if let (false, Ok(n)) = (sizes.contains_key(s), i64::try_from(n)) {
                sizes.insert(*s, n);
            }
        }
    }
}

/// Check an array's declared `shape` (its header) against `spec` at the
/// `sizes` known so far, then against [`MAX_INPUT_ELEMENTS`], before its
/// data is read.
fn check_header(shape: &[u64], spec: &MemberSpec, sizes: &Sizes, label: &str) -> Result<()> {
    let got = shape_text(shape.iter().map(u64::to_string));
    // elements, and nested arrays (a shape (10^8, 0) has no element but
    // 10^8 empty rows), with overflow-checked arithmetic
    let mut elements: Option<u64> = Some(1);
    let mut arrays: Option<u64> = Some(0);
    for &d in shape {
        arrays = arrays.zip(elements).and_then(|(a, r)| a.checked_add(r));
        elements = elements.and_then(|r| r.checked_mul(d));
    }
    let known: Option<Vec<Option<u64>>> = spec
        .dims
        .as_ref()
        .map(|ds| ds.iter().map(|d| known_dim(d, sizes)).collect());
    if let Some(dims) = known.filter(|_| !(spec.is_real && elements == Some(1))) {
        let fits = shape.len() == dims.len()
            && shape
                .iter()
                .zip(&dims)
                .all(|(&s, d)| d.is_none_or(|d| d == s));
        if !fits {
            let want = shape_text(
                dims.iter()
                    .map(|d| d.map_or_else(|| "?".to_string(), |d| d.to_string())),
            );
            return Err(Error::input(format!(
                "{label}: the array has shape {got}, but input '{}' expects {want}",
                spec.param
            ))
            .with_hint("'?' is a size not given with --sizes nor by an array read before"));
        }
    }
    let too_big = |n: Option<u64>| n.is_none_or(|n| n > MAX_INPUT_ELEMENTS);
    if too_big(elements) || too_big(arrays) {
        return Err(Error::input(format!(
            "{label}: the array's shape {got} has more than {MAX_INPUT_ELEMENTS} elements or rows \
             (input '{}')",
            spec.param
        )));
    }
    Ok(())
}

/// The members of an `.npz` archive or a folder of `.npy` files, in order:
/// (name without `.npy`, index in the archive or path in the folder).
enum Members {
    Folder(Vec<(String, std::path::PathBuf)>),
    Archive(zip::ZipArchive<std::fs::File>, Vec<(String, usize)>),
}

fn list_members(path: &Path) -> Result<Members> {
    if path.is_dir() {
        let mut files = vec![];
        for entry in std::fs::read_dir(path).map_err(|e| io_err(path, e))? {
            let p = entry.map_err(|e| io_err(path, e))?.path();
            let stem = p
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".npy"));
            if let Some(stem) = stem {
                files.push((stem.to_string(), p.clone()));
            }
        }
        if files.is_empty() {
            return Err(Error::input(format!(
                "{}: the folder holds no .npy files",
                path.display()
            )));
        }
        files.sort();
        return Ok(Members::Folder(files));
    }
    let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    let zip = zip::ZipArchive::new(file)
        .map_err(|e| io_err(path, format!("not an .npz archive: {e}")))?;
    let mut names = vec![];
    for k in 0..zip.len() {
        let name = zip
            .name_for_index(k)
            .ok_or_else(|| io_err(path, format!("cannot read member {k}")))?
            .map_err(|e| io_err(path, e))?;
        names.push((name.strip_suffix(".npy").unwrap_or(&name).to_string(), k));
    }
    Ok(Members::Archive(zip, names))
}

/// The inputs object of `prog` from an `.npz` archive or a folder of
/// `.npy` files. Each array's header is checked against the shape its
/// parameter expects at the sizes `given` and those the arrays read before
/// it give (and against [`MAX_INPUT_ELEMENTS`]) before its data is read.
/// A parameter's whole value and a relation's tuples come back as arrays
/// ([`MemberSpec::whole`]); the components of pairs (`p.0`, `x.3`) are
/// assembled in the JSON object, where arrays that name no parameter are
/// not read (their names stay, as `null`, for the messages about missing
/// inputs).
pub fn read_inputs(
    path: &Path,
    prog: &Program,
    given: &Sizes,
) -> Result<(serde_json::Value, Arrays)> {
    let members = list_members(path)?;
    let names: Vec<&str> = match &members {
        Members::Folder(files) => files.iter().map(|(s, _)| s.as_str()).collect(),
        Members::Archive(_, names) => names.iter().map(|(s, _)| s.as_str()).collect(),
    };
    let specs = names
        .iter()
        .map(|stem| member_spec(prog, given, stem))
        .collect::<Result<Vec<_>>>()?;
    check_member_numbering(&specs)?;
    for t in specs.iter().flatten().filter(|s| s.tuples) {
        if specs
            .iter()
            .flatten()
            .filter(|s| s.param == t.param)
            .count()
            > 1
        {
            return Err(Error::input(format!(
                "relation '{}' is given both as its tuples ('{0}.tuples') and as an array",
                t.param
            )));
        }
    }
    let whole = |s: &&MemberSpec| s.path.is_empty() && !s.tuples;
    for w in specs.iter().flatten().filter(whole) {
        if specs
            .iter()
            .flatten()
            .any(|s| s.param == w.param && !s.path.is_empty())
        {
            return Err(Error::input(format!(
                "input '{0}' is given both whole ('{0}') and by its components ('{0}.0', ...)",
                w.param
            )));
        }
    }
    let mut known = given.clone();
    let mut read = |reader: &mut dyn Read, label: &str, spec: &MemberSpec| {
        let array = read_array(reader, label, spec, &known)?;
        learn_sizes(spec, &array.shape, &mut known);
        Ok::<_, Error>(array)
    };
    let mut obj = serde_json::Map::new();
    let mut arrays = Arrays::new();
    let mut put = |stem: &str, spec: &Option<MemberSpec>, array: Option<Array>| match (spec, array)
    {
        (Some(spec), Some(array)) if spec.whole => {
            let role = if spec.tuples {
                Role::Tuples
            } else {
                Role::Whole
            };
            arrays.insert(spec.param.clone(), (role, array));
        }
        (Some(spec), Some(array)) => insert(&mut obj, &spec.param, &spec.path, to_json(&array)),
        _ => {
            obj.entry(stem.to_string())
                .or_insert(serde_json::Value::Null);
        }
    };
    match members {
        Members::Folder(files) => {
            for ((stem, p), spec) in files.iter().zip(&specs) {
                let value = match spec {
                    Some(spec) => {
                        let file = std::fs::File::open(p).map_err(|e| io_err(p, e))?;
                        let mut reader = std::io::BufReader::new(file);
                        Some(read(&mut reader, &p.display().to_string(), spec)?)
                    }
                    None => None,
                };
                put(stem, spec, value);
            }
        }
        Members::Archive(mut zip, names) => {
            for ((stem, k), spec) in names.iter().zip(&specs) {
                let value = match spec {
                    Some(spec) => {
                        let member = zip.by_index(*k).map_err(|e| io_err(path, e))?;
                        // an element at a time from the archive would be a
                        // read system call each (a stored member is not
                        // buffered by the zip reader)
                        let mut reader = std::io::BufReader::with_capacity(1 << 16, member);
                        Some(read(
                            &mut reader,
                            &format!("{}[{stem}]", path.display()),
                            spec,
                        )?)
                    }
                    None => None,
                };
                put(stem, spec, value);
            }
        }
    }
    Ok((serde_json::Value::Object(obj), arrays))
}

/// The arrays of a value: (name, shape, row-major reals), pairs split into
/// `NAME.0`, `NAME.1`.
fn arrays(
    v: &Value,
    ty: &Type,
    sizes: &Sizes,
    name: String,
    out: &mut Vec<(String, Vec<u64>, Vec<f64>)>,
) -> Result<()> {
    match ty {
        Type::Pair(a, b) => {
            let v = value::materialize(v, ty, sizes)?;
            arrays(&v.fst()?, a, sizes, format!("{name}.0"), out)?;
            arrays(&v.snd()?, b, sizes, format!("{name}.1"), out)
        }
        _ => {
            let mut shape = vec![];
            let mut t = ty;
            while let Type::Tensor(d, inner) = t {
                shape.push(value::affine_at(d, sizes)?.max(0) as u64);
                t = inner;
            }
            if *t != Type::Real {
                return Err(Error::input(
                    "a tensor of pairs cannot be written as NumPy arrays of reals",
                )
                .with_hint("write the result as JSON instead"));
            }
            out.push((name, shape, value::flatten(v, ty, sizes)?));
            Ok(())
        }
    }
}

fn npy_bytes(shape: &[u64], data: &[f64]) -> Result<Vec<u8>> {
    use npyz::WriterBuilder;
    let mut buf = vec![];
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(&mut buf)
        .begin_nd()
        .map_err(|e| Error::input(format!("cannot write a NumPy array: {e}")))?;
    w.extend(data.iter().copied())
        .and_then(|()| w.finish())
        .map_err(|e| Error::input(format!("cannot write a NumPy array: {e}")))?;
    Ok(buf)
}

/// Write a value of type `ty` to `path`: `.npy` (a real or a tensor) or
/// `.npz` (any value; see the module docs for the names of the arrays).
pub fn write_value(path: &Path, v: &Value, ty: &Type, sizes: &Sizes) -> Result<()> {
    let mut out = vec![];
    arrays(v, ty, sizes, "result".into(), &mut out)?;
    let is_npy = path.extension().is_some_and(|e| e == "npy");
    let bytes = if is_npy {
        if out.len() != 1 {
            return Err(Error::input(format!(
                "{}: the result is a pair, which one .npy file cannot hold",
                path.display()
            ))
            .with_hint("write an .npz archive instead (-o result.npz)"));
        }
        npy_bytes(&out[0].1, &out[0].2)?
    } else {
        let mut buf = std::io::Cursor::new(vec![]);
        {
            let mut zip = zip::ZipWriter::new(&mut buf);
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored);
            for (name, shape, data) in &out {
                zip.start_file(format!("{name}.npy"), opts)
                    .map_err(|e| io_err(path, e))?;
                zip.write_all(&npy_bytes(shape, data)?)
                    .map_err(|e| io_err(path, e))?;
            }
            zip.finish().map_err(|e| io_err(path, e))?;
        }
        buf.into_inner()
    };
    std::fs::write(path, bytes).map_err(|e| io_err(path, format!("cannot write: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_names_nest_pairs() {
        let mut obj = serde_json::Map::new();
        insert(&mut obj, "p", &[1], serde_json::json!(2.0));
        insert(&mut obj, "p", &[0], serde_json::json!(1.0));
        insert(&mut obj, "x", &[], serde_json::json!([1.0]));
        assert_eq!(
            serde_json::Value::Object(obj),
            serde_json::json!({"p": [1.0, 2.0], "x": [1.0]})
        );
    }

    #[test]
    fn npy_round_trip_keeps_shape_and_non_finite_values() {
        let bytes = npy_bytes(&[2, 2], &[1.0, f64::NAN, f64::INFINITY, -0.5]).unwrap();
        let j = npy_to_json(&bytes, "a").unwrap();
        assert_eq!(j, serde_json::json!([[1.0, null], ["Infinity", -0.5]]));
        let scalar = npy_bytes(&[], &[3.0]).unwrap();
        assert_eq!(npy_to_json(&scalar, "s").unwrap(), serde_json::json!(3.0));
    }
}
