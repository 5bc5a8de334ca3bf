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
//! * a relation is a boolean array (integer 0/1 arrays are accepted);
//! * a pair-typed input `p` is given as two arrays `p.0` and `p.1` (nested
//!   pairs as `p.1.0`, ...);
//! * results: `result` for a real or a tensor, `result.0`, `result.1`, ...
//!   for the components of a pair. A `.npy` file holds a single array.
//!   Tensors of pairs are not representable as NumPy arrays of reals.
//!
//! Arrays are converted to the JSON form the rest of the tool reads, so the
//! same checks (shapes, sizes inferred from dimensions) apply to both.

use crate::error::{Error, Result};
use crate::front::ast::Type;
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

/// One `.npy` file's bytes as nested JSON (numbers or booleans).
pub fn npy_to_json(bytes: &[u8], name: &str) -> Result<serde_json::Value> {
    let bad = |e: &dyn std::fmt::Display| Error::input(format!("{name}: not a NumPy array: {e}"));
    let file = npyz::NpyFile::new(bytes).map_err(|e| bad(&e))?;
    if file.order() == npyz::Order::Fortran && file.shape().len() > 1 {
        return Err(Error::input(format!(
            "{name}: the array is stored in Fortran (column-major) order"
        ))
        .with_hint("save it with numpy.ascontiguousarray(a)"));
    }
    let shape = file.shape().to_vec();
    let dtype = file.dtype().descr();
    let elems: Vec<serde_json::Value> = match file.try_data::<f64>() {
        Ok(d) => d
            .map(|x| x.map(json::real_to_json))
            .collect::<std::io::Result<_>>(),
        Err(f) => match f.try_data::<f32>() {
            Ok(d) => d.map(|x| x.map(|x| json::real_to_json(x as f64))).collect(),
            Err(f) => match f.try_data::<i64>() {
                Ok(d) => d.map(|x| x.map(|x| serde_json::json!(x))).collect(),
                Err(f) => match f.try_data::<i32>() {
                    Ok(d) => d.map(|x| x.map(|x| serde_json::json!(x))).collect(),
                    Err(f) => match f.try_data::<bool>() {
                        Ok(d) => d.map(|x| x.map(serde_json::Value::Bool)).collect(),
                        Err(f) => match f.try_data::<u8>() {
                            Ok(d) => d.map(|x| x.map(|x| serde_json::json!(x))).collect(),
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
    .map_err(|e| bad(&e))?;
    Ok(nest(&mut elems.into_iter(), &shape))
}

/// Put `v` at the dotted path `name` (`p.1.0`) of the inputs object.
fn insert(obj: &mut serde_json::Map<String, serde_json::Value>, name: &str, v: serde_json::Value) {
    let mut parts = name.split('.');
    let root = parts.next().unwrap_or(name);
    let path: Vec<usize> = match parts.map(str::parse).collect::<std::result::Result<_, _>>() {
        Ok(p) => p,
        Err(_) => {
            obj.insert(name.to_string(), v);
            return;
        }
    };
    let mut slot = obj
        .entry(root.to_string())
        .or_insert(serde_json::Value::Null);
    for k in path {
        if !slot.is_array() {
            *slot = serde_json::Value::Array(vec![]);
        }
        let arr = slot.as_array_mut().expect("just made an array");
        while arr.len() <= k {
            arr.push(serde_json::Value::Null);
        }
        slot = &mut arr[k];
    }
    *slot = v;
}

/// The inputs object from an `.npz` archive or a folder of `.npy` files.
pub fn read_inputs(path: &Path) -> Result<serde_json::Value> {
    let mut obj = serde_json::Map::new();
    if path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| io_err(path, e))?;
        let mut any = false;
        for entry in entries {
            let p = entry.map_err(|e| io_err(path, e))?.path();
            let Some(stem) = p
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".npy"))
            else {
                continue;
            };
            let bytes = std::fs::read(&p).map_err(|e| io_err(&p, e))?;
            insert(
                &mut obj,
                stem,
                npy_to_json(&bytes, &p.display().to_string())?,
            );
            any = true;
        }
        if !any {
            return Err(Error::input(format!(
                "{}: the folder holds no .npy files",
                path.display()
            )));
        }
    } else {
        let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
        let mut zip = zip::ZipArchive::new(file)
            .map_err(|e| io_err(path, format!("not an .npz archive: {e}")))?;
        for k in 0..zip.len() {
            let mut member = zip.by_index(k).map_err(|e| io_err(path, e))?;
            let name = member.name().map_err(|e| io_err(path, e))?.to_string();
            let stem = name.strip_suffix(".npy").unwrap_or(&name).to_string();
            let mut bytes = vec![];
            member
                .read_to_end(&mut bytes)
                .map_err(|e| io_err(path, e))?;
            let label = format!("{}[{stem}]", path.display());
            insert(&mut obj, &stem, npy_to_json(&bytes, &label)?);
        }
    }
    Ok(serde_json::Value::Object(obj))
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
        insert(&mut obj, "p.1", serde_json::json!(2.0));
        insert(&mut obj, "p.0", serde_json::json!(1.0));
        insert(&mut obj, "x", serde_json::json!([1.0]));
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
