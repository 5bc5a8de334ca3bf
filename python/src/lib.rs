//! `atl_egg._native`: the atl-egg compiler inside Python.
//!
//! Two classes, both thin over the library: [`NativeProgram`] (a checked ATL
//! function: parse, print, differentiate, optimize, compile) and
//! [`Kernel`] (a compiled function: its manifest, the shapes of its
//! arguments at given sizes, and a call on buffers). The Python package
//! (`atl_egg`) binds arguments by name, checks and converts them, and
//! reassembles results; this module re-checks every buffer's type and
//! length against the manifest before the native code runs, so no call
//! from Python can read or write outside an array.

use atl_egg::backend::{Compiled, PackedEntry, PrepareFn, PreparedEntry, PreparedFree};
use atl_egg::{Error, Options, Program};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    atl_egg,
    AtlError,
    PyException,
    "An error of atl-egg: a program that does not parse or type-check, a \
     derivative that cannot be taken, a failed C build, or an error code of \
     compiled code. Attributes: `kind` (syntax, type, input, evaluation, ...), \
     `message` (one sentence), `line` and `col` (in the ATL text, or None), \
     `code` (the compiled code's return code, or None)."
);

/// `e` as an `AtlError`, rendered against `source` (name and text) when it
/// has a position; `kind`, `message`, `line`, `col` and `code` set.
fn atl_error(py: Python<'_>, e: &Error, source: Option<(&str, &str)>) -> PyErr {
    let text = atl_egg::diagnostics::render(e, source, false);
    make_error(
        py,
        text.trim_end(),
        e.kind.word(),
        &e.msg,
        e.pos.map(|p| (p.line, p.col)),
        None,
    )
}

fn make_error(
    py: Python<'_>,
    text: &str,
    kind: &str,
    message: &str,
    pos: Option<(u32, u32)>,
    code: Option<i32>,
) -> PyErr {
    let err = AtlError::new_err(text.to_string());
    let value = err.value(py);
    // Setting attributes on a fresh exception object cannot fail.
    let _ = value.setattr("kind", kind);
    let _ = value.setattr("message", message);
    let _ = value.setattr("line", pos.map(|p| p.0));
    let _ = value.setattr("col", pos.map(|p| p.1));
    let _ = value.setattr("code", code);
    err
}

/// Run a pass of the compiler off the Python thread's stack (passes
/// recurse as deep as the program nests) with the GIL released.
fn on_compiler_stack<T: Send + 'static>(
    py: Python<'_>,
    depth: usize,
    f: impl FnOnce() -> atl_egg::Result<T> + Send + 'static,
) -> PyResult<atl_egg::Result<T>> {
    py.detach(|| atl_egg::with_stack_for(depth, f))
        .map_err(|e| PyException::new_err(format!("cannot start the compiler's thread: {e}")))
}

/// A checked ATL function (calls expanded, core forms).
#[pyclass(frozen, module = "atl_egg._native", name = "Program")]
struct NativeProgram {
    program: Program,
    /// How deep its text nests (for the compiler's stack).
    depth: usize,
}

impl NativeProgram {
    fn new(program: Program) -> NativeProgram {
        let depth = atl_egg::nesting_depth(atl_egg::print(&program).as_bytes());
        NativeProgram { program, depth }
    }
}

#[pymethods]
impl NativeProgram {
    /// Parse and type-check `text`; `filename` names it in errors; `name`
    /// picks a function of a file of several (default: the last).
    #[staticmethod]
    #[pyo3(signature = (text, filename = "<string>", name = None))]
    fn parse(
        py: Python<'_>,
        text: String,
        filename: &str,
        name: Option<String>,
    ) -> PyResult<NativeProgram> {
        let depth = atl_egg::nesting_depth(text.as_bytes());
        let source = text.clone();
        let parsed = on_compiler_stack(py, depth, move || match name {
            Some(n) => atl_egg::parse_fn(&source, &n),
            None => atl_egg::parse(&source),
        })?;
        match parsed {
            Ok(program) => Ok(NativeProgram { program, depth }),
            Err(e) => Err(atl_error(py, &e, Some((filename, &text)))),
        }
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> String {
        self.program.name.as_str().to_string()
    }

    /// The program in ATL syntax (core forms), readable by `parse`.
    fn text(&self) -> String {
        atl_egg::print(&self.program)
    }

    /// The program in the paper's notation.
    fn pretty(&self) -> String {
        atl_egg::pretty(&self.program)
    }

    /// `(fn NAME (PARAMS) -> TYPE)`.
    fn signature(&self) -> String {
        atl_egg::check(&self.program)
    }

    /// The parameters in order: (name, kind), kind one of `size`, `real`,
    /// `relation`.
    fn params(&self) -> Vec<(String, &'static str)> {
        self.program
            .params
            .iter()
            .map(|p| {
                let kind = match p.kind {
                    atl_egg::ParamKind::Size => "size",
                    atl_egg::ParamKind::Real(_) => "real",
                    atl_egg::ParamKind::Relation(_) => "relation",
                };
                (p.name.as_str().to_string(), kind)
            })
            .collect()
    }

    /// A derivative, optimized: `kind` is `grad`, `jvp`, `vjp` or `hvp`,
    /// with respect to the inputs `wrt` (the library's rules for each).
    fn derive(&self, py: Python<'_>, kind: &str, wrt: Vec<String>) -> PyResult<NativeProgram> {
        let derive = match kind {
            "grad" => atl_egg::grad,
            "jvp" => atl_egg::jvp,
            "vjp" => atl_egg::vjp,
            "hvp" => atl_egg::hvp,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "unknown derivative {kind:?}"
                )))
            }
        };
        let program = self.program.clone();
        let derived = on_compiler_stack(py, self.depth, move || {
            let wrt: Vec<&str> = wrt.iter().map(String::as_str).collect();
            derive(&program, &wrt, &Options::default()).map(|d| d.program)
        })?;
        derived
            .map(NativeProgram::new)
            .map_err(|e| atl_error(py, &e, None))
    }

    /// The program optimized by equality saturation.
    fn optimize(&self, py: Python<'_>) -> PyResult<NativeProgram> {
        let program = self.program.clone();
        let optimized = on_compiler_stack(py, self.depth, move || {
            atl_egg::optimize(&program, &Options::default()).map(|o| o.program)
        })?;
        optimized
            .map(NativeProgram::new)
            .map_err(|e| atl_error(py, &e, None))
    }

    /// The function returning `(pair SELF OTHER)`: both bodies over the same
    /// parameters (a function and its gradient, computed in one call).
    /// Printed (which gives every binder a distinct readable name) and read
    /// back, so that the result is a program as the reader makes them.
    fn paired_with(&self, py: Python<'_>, other: &NativeProgram) -> PyResult<NativeProgram> {
        use atl_egg::front::ast::Expr;
        if self.program.params != other.program.params {
            return Err(PyValueError::new_err(
                "the two programs do not have the same parameters",
            ));
        }
        let paired = Program {
            body: Expr::Pair(
                Box::new(self.program.body.clone()),
                Box::new(other.program.body.clone()),
            ),
            ret: atl_egg::Type::Pair(
                Box::new(self.program.ret.clone()),
                Box::new(other.program.ret.clone()),
            ),
            ..self.program.clone()
        };
        NativeProgram::parse(py, atl_egg::print(&paired), "<pair>", None)
    }

    /// The reference evaluator's value on inputs given as JSON text (as
    /// `atl-egg eval --inputs` reads them), as JSON text.
    fn eval_json(&self, py: Python<'_>, inputs: String) -> PyResult<String> {
        let program = self.program.clone();
        on_compiler_stack(py, self.depth, move || {
            atl_egg::eval_json(&program, &inputs, &[])
        })?
        .map_err(|e| atl_error(py, &e, None))
    }

    /// Compile to native code (cached) and load it.
    fn compile(&self, py: Python<'_>) -> PyResult<Kernel> {
        let program = self.program.clone();
        let compiled = on_compiler_stack(py, self.depth, move || atl_egg::compile(&program))?
            .map_err(|e| atl_error(py, &e, None))?;
        Kernel::new(compiled).map_err(|e| atl_error(py, &e, None))
    }
}

/// A dimension of the manifest, `constant + Σ coeff · sizes[index]`.
#[derive(Clone, Debug, PartialEq)]
struct Dim {
    constant: i64,
    terms: Vec<(usize, i64)>,
}

impl Dim {
    /// Read a manifest dimension (`n`, `3`, `(- (+ m n) 1)`, `(* 2 n)`)
    /// over the size parameters `sizes`.
    fn parse(text: &str, sizes: &[String]) -> Result<Dim, String> {
        let spaced = text.replace('(', " ( ").replace(')', " ) ");
        let tokens: Vec<&str> = spaced.split_whitespace().collect();
        let mut at = 0;
        let dim = Dim::parse_at(&tokens, &mut at, sizes)?;
        if at != tokens.len() {
            return Err(format!("unexpected text after the dimension {text:?}"));
        }
        Ok(dim)
    }

    fn parse_at(tokens: &[&str], at: &mut usize, sizes: &[String]) -> Result<Dim, String> {
        let bad = || "a malformed dimension in the manifest".to_string();
        let token = *tokens.get(*at).ok_or_else(bad)?;
        *at += 1;
        if token != "(" {
            if let Ok(k) = token.parse::<i64>() {
                return Ok(Dim {
                    constant: k,
                    terms: vec![],
                });
            }
            let index = sizes
                .iter()
                .position(|s| s == token)
                .ok_or_else(|| format!("the dimension mentions {token}, not a size"))?;
            return Ok(Dim {
                constant: 0,
                terms: vec![(index, 1)],
            });
        }
        let op = *tokens.get(*at).ok_or_else(bad)?;
        *at += 1;
        let mut args = vec![];
        while *tokens.get(*at).ok_or_else(bad)? != ")" {
            args.push(Dim::parse_at(tokens, at, sizes)?);
        }
        *at += 1;
        let mut args = args.into_iter();
        let first = args.next().ok_or_else(bad)?;
        let overflow = || format!("a dimension of the manifest overflows 64 bits: {op}");
        args.try_fold(first, |acc, d| match op {
            "+" => acc.plus(&d, 1).ok_or_else(overflow),
            "-" => acc.plus(&d, -1).ok_or_else(overflow),
            "*" if acc.terms.is_empty() => d.scaled(acc.constant).ok_or_else(overflow),
            "*" if d.terms.is_empty() => acc.scaled(d.constant).ok_or_else(overflow),
            _ => Err(bad()),
        })
    }

    /// `self + sign · other`, or None on overflow.
    fn plus(&self, other: &Dim, sign: i64) -> Option<Dim> {
        let mut terms = self.terms.clone();
        for &(i, k) in &other.terms {
            terms.push((i, sign.checked_mul(k)?));
        }
        let constant = self
            .constant
            .checked_add(sign.checked_mul(other.constant)?)?;
        Some(Dim { constant, terms })
    }

    /// `k · self`, or None on overflow.
    fn scaled(&self, k: i64) -> Option<Dim> {
        let terms = self
            .terms
            .iter()
            .map(|&(i, c)| Some((i, c.checked_mul(k)?)))
            .collect::<Option<_>>()?;
        Some(Dim {
            constant: self.constant.checked_mul(k)?,
            terms,
        })
    }

    /// The value at `sizes`, or None when it overflows 64 bits.
    fn at(&self, sizes: &[i64]) -> Option<i64> {
        self.terms.iter().try_fold(self.constant, |acc, &(i, k)| {
            acc.checked_add(k.checked_mul(*sizes.get(i)?)?)
        })
    }
}

/// The dimensions of an array, outer first.
type Shape = Vec<usize>;

/// The kinds of the C parameters (the manifest's `kind`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Leaf {
    Real,
    Tensor,
    Relation,
    /// A tensor stored by the pattern of the relation leaf at this index.
    Stored(usize),
}

/// A compiled function: the library (kept loaded), its manifest and its
/// entry point.
#[pyclass(frozen, module = "atl_egg._native")]
struct Kernel {
    /// Keeps the library loaded (and a private cache alive) while the entry
    /// point is used.
    _compiled: Compiled,
    entry: PackedEntry,
    manifest: String,
    size_names: Vec<String>,
    /// The non-size C parameters in order, with their dimensions.
    leaves: Vec<(Leaf, Vec<Dim>)>,
    outputs: Vec<Vec<Dim>>,
    /// For each output, the relation leaf storing it (one value per tuple).
    output_by: Vec<Option<usize>>,
    /// The entry points for prepared relations (a function with relations).
    prepared: Option<(PrepareFn, PreparedEntry, PreparedFree)>,
}

/// A relation prepared once for one kernel (`Kernel.prepare`): the
/// compiled library's own copy of its layout and of the permuted layouts
/// the function reads, freed with this object.
#[pyclass(frozen, module = "atl_egg._native", name = "PreparedLayout")]
struct Prepared {
    /// The kernel it was made for (and whose library stays loaded).
    kernel: Py<Kernel>,
    /// The library's prepared relation (`void *`).
    handle: usize,
    free: PreparedFree,
    /// The parameter leaf (not sizes) it was made for, its dimensions and
    /// its number of tuples.
    leaf: usize,
    shape: Vec<usize>,
    nnz: usize,
}

// SAFETY: the handle is only read by the library's calls, never changed.
unsafe impl Send for Prepared {}
unsafe impl Sync for Prepared {}

impl Drop for Prepared {
    fn drop(&mut self) {
        // SAFETY: made by this library's `atlpacked_prepare`, freed once.
        unsafe { (self.free)(self.handle as *mut std::ffi::c_void) }
    }
}

#[pymethods]
impl Prepared {
    /// The relation's dimensions.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.shape.clone()
    }

    /// Its number of tuples.
    #[getter]
    fn nnz(&self) -> usize {
        self.nnz
    }
}

// SAFETY: the entry point is a plain C function of a library that `Kernel`
// keeps loaded; it keeps no state between calls (its arena is per call).
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

fn dims_of(value: &serde_json::Value, sizes: &[String]) -> atl_egg::Result<Vec<Dim>> {
    let shape = value["shape"].as_array().cloned().unwrap_or_default();
    shape
        .iter()
        .map(|d| Dim::parse(d.as_str().unwrap_or(""), sizes).map_err(Error::eval))
        .collect()
}

impl Kernel {
    fn new(compiled: Compiled) -> atl_egg::Result<Kernel> {
        let manifest = compiled.manifest();
        let entry = compiled.packed_entry()?;
        let params = manifest["params"].as_array().cloned().unwrap_or_default();
        let size_names: Vec<String> = params
            .iter()
            .filter(|p| p["kind"] == "size")
            .map(|p| p["source"].as_str().unwrap_or("").to_string())
            .collect();
        let leaf_params: Vec<&serde_json::Value> =
            params.iter().filter(|p| p["kind"] != "size").collect();
        // the relation leaf of the source `by` (what stores a tensor)
        let relation_leaf = |by: &serde_json::Value| {
            leaf_params
                .iter()
                .position(|p| p["kind"] == "relation" && p["source"] == *by)
                .ok_or_else(|| Error::eval(format!("no relation {by} stores a tensor")))
        };
        let mut leaves = vec![];
        for p in &leaf_params {
            let kind = match p["kind"].as_str() {
                Some("real") => Leaf::Real,
                Some("tensor") => Leaf::Tensor,
                Some("relation") => Leaf::Relation,
                Some("stored") => Leaf::Stored(relation_leaf(&p["stored_by"])?),
                other => return Err(Error::eval(format!("unknown parameter kind {other:?}"))),
            };
            leaves.push((kind, dims_of(p, &size_names)?));
        }
        let outs = manifest["outputs"].as_array().cloned().unwrap_or_default();
        let outputs = outs
            .iter()
            .map(|o| dims_of(o, &size_names))
            .collect::<atl_egg::Result<_>>()?;
        let output_by = outs
            .iter()
            .map(|o| match o.get("stored_by") {
                Some(by) => relation_leaf(by).map(Some),
                None => Ok(None),
            })
            .collect::<atl_egg::Result<_>>()?;
        let prepared = compiled.prepared_entries();
        Ok(Kernel {
            prepared,
            _compiled: compiled,
            entry,
            manifest: manifest.to_string(),
            size_names,
            leaves,
            outputs,
            output_by,
        })
    }

    fn shape_at(dims: &[Dim], sizes: &[i64], what: &str) -> PyResult<Shape> {
        dims.iter()
            .map(|d| {
                let n = d.at(sizes).ok_or_else(|| {
                    PyValueError::new_err(format!("{what}: a dimension overflows 64 bits"))
                })?;
                usize::try_from(n).map_err(|_| {
                    PyValueError::new_err(format!("{what}: a dimension is negative ({n})"))
                })
            })
            .collect()
    }

    fn check_sizes(&self, sizes: &[i64]) -> PyResult<()> {
        if sizes.len() != self.size_names.len() {
            return Err(PyValueError::new_err(format!(
                "{} sizes given, the function has {}",
                sizes.len(),
                self.size_names.len()
            )));
        }
        if let Some(k) = sizes.iter().position(|&s| s < 0) {
            return Err(PyValueError::new_err(format!(
                "size {} is negative ({})",
                self.size_names[k], sizes[k]
            )));
        }
        Ok(())
    }
}

/// Check that `buffer` is C-contiguous with exactly the elements of `shape`.
fn check_buffer<T: pyo3::buffer::Element>(
    buffer: &PyBuffer<T>,
    shape: &[usize],
    what: &str,
) -> PyResult<()> {
    let want = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| PyValueError::new_err(format!("{what} is too large")))?;
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err(format!("{what} is not C-contiguous")));
    }
    if buffer.item_count() != want {
        return Err(PyValueError::new_err(format!(
            "{what} has {} elements, expected {want} (shape {shape:?})",
            buffer.item_count()
        )));
    }
    Ok(())
}

/// The layout of a relation input: a uint8 buffer of its dense map, or an
/// int64 buffer of its tuples (nnz, arity).
fn relation_buffer_layout(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    shape: &[usize],
    what: &str,
) -> PyResult<Vec<i64>> {
    if let Ok(b) = PyBuffer::<u8>::get(obj) {
        check_buffer(&b, shape, what)?;
        return Ok(relation_layout(&b.to_vec(py)?, shape));
    }
    let b = PyBuffer::<i64>::get(obj)?;
    if !b.is_c_contiguous() {
        return Err(PyValueError::new_err(format!("{what} is not C-contiguous")));
    }
    let rows = b.shape().first().copied().unwrap_or(0);
    relation_layout_of_tuples(&b.to_vec(py)?, rows, shape, what)
}

/// The compressed layout the compiled code reads (see the library's
/// `backend::marshal`) of a relation given as its dense map of `shape`
/// (non-zero bytes hold), in time linear in the map.
fn relation_layout(bits: &[u8], shape: &[usize]) -> Vec<i64> {
    use atl_egg::backend::marshal::{compressed_layout, relation_tuples};
    let bits: Vec<bool> = bits.iter().map(|&b| b != 0).collect();
    let relation = atl_egg::semantics::value::Relation::from_dense(shape.to_vec(), &bits);
    compressed_layout(shape, &relation_tuples(&relation))
}

/// The compressed layout of a relation of `shape` given as its tuples (an
/// int64 buffer of shape (nnz, arity)), which must be sorted row-major,
/// distinct and within the shape: linear in the tuples.
fn relation_layout_of_tuples(
    flat: &[i64],
    rows: usize,
    shape: &[usize],
    what: &str,
) -> PyResult<Vec<i64>> {
    let k = shape.len();
    if flat.len() != rows * k {
        return Err(PyValueError::new_err(format!(
            "{what}: tuples must be an array of shape (nnz, {k})"
        )));
    }
    let mut tuples: Vec<Vec<usize>> = Vec::with_capacity(rows);
    for (r, t) in flat.chunks(k.max(1)).take(rows).enumerate() {
        let mut u = Vec::with_capacity(k);
        for (&c, &d) in t.iter().zip(shape) {
            match usize::try_from(c) {
                Ok(c) if c < d => u.push(c),
                _ => {
                    return Err(PyValueError::new_err(format!(
                        "{what}: the tuple {t:?} is out of range (shape {shape:?})"
                    )))
                }
            }
        }
        if let Some(prev) = tuples.last() {
            if *prev >= u {
                return Err(PyValueError::new_err(format!(
                    "{what}: tuple {r} {t:?} does not come after tuple {} {prev:?}: the tuples \
                     must be sorted (row-major) and distinct",
                    r - 1
                )));
            }
        }
        tuples.push(u);
    }
    atl_egg::backend::marshal::checked_layout(what, shape, &tuples)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The pointers of one call, moved to the thread that runs without the GIL.
struct CallArgs {
    sizes: Vec<i64>,
    reals: Vec<*const f64>,
    rels: Vec<*const i64>,
    /// Per relation leaf, its prepared relation or null (all null: the
    /// plain entry point is called).
    preps: Vec<*mut std::ffi::c_void>,
    outs: Vec<*mut f64>,
}

// SAFETY: the pointers are to buffers held (and so kept alive and
// unresized) by the caller for the whole call.
unsafe impl Send for CallArgs {}

#[pymethods]
impl Kernel {
    /// The manifest, as JSON text (as `atl-egg compile -o F.json` writes).
    #[getter]
    fn manifest(&self) -> &str {
        &self.manifest
    }

    /// The size parameters of the C function, in order.
    #[getter]
    fn sizes(&self) -> Vec<String> {
        self.size_names.clone()
    }

    /// For each parameter leaf (not sizes) and each result leaf, the index
    /// of the parameter leaf of the relation storing it (then it is one
    /// value per tuple of that relation), else None.
    fn stored(&self) -> (Vec<Option<usize>>, Vec<Option<usize>>) {
        let inputs = self
            .leaves
            .iter()
            .map(|(k, _)| match k {
                Leaf::Stored(r) => Some(*r),
                _ => None,
            })
            .collect();
        (inputs, self.output_by.clone())
    }

    /// The shapes of the parameters' leaves (not sizes; a real is `()`)
    /// and of the result's leaves at `sizes` (in the order of `sizes`).
    fn shapes(&self, sizes: Vec<i64>) -> PyResult<(Vec<Shape>, Vec<Shape>)> {
        self.check_sizes(&sizes)?;
        let inputs = self
            .leaves
            .iter()
            .map(|(_, dims)| Kernel::shape_at(dims, &sizes, "an input"))
            .collect::<PyResult<_>>()?;
        let outputs = self
            .outputs
            .iter()
            .map(|dims| Kernel::shape_at(dims, &sizes, "the result"))
            .collect::<PyResult<_>>()?;
        Ok((inputs, outputs))
    }

    /// Call the function: `sizes` in order, `inputs` one buffer per
    /// non-size parameter leaf (float64; for a relation uint8, its dense
    /// map, or int64 of shape (nnz, arity), its tuples sorted and distinct;
    /// a real as one element; a stored tensor one value per tuple), `outputs` one writable float64 buffer per result
    /// leaf; `threads` the threads of its parallel loops (default
    /// `OMP_NUM_THREADS`, else one per core). Every buffer is checked
    /// against the manifest first; a non-zero return code raises `AtlError`
    /// with its `code`.
    #[pyo3(signature = (sizes, inputs, outputs, threads=None))]
    fn call(
        &self,
        py: Python<'_>,
        sizes: Vec<i64>,
        inputs: Vec<Bound<'_, PyAny>>,
        outputs: Vec<Bound<'_, PyAny>>,
        threads: Option<usize>,
    ) -> PyResult<()> {
        self.check_sizes(&sizes)?;
        if threads == Some(0) {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        if inputs.len() != self.leaves.len() || outputs.len() != self.outputs.len() {
            return Err(PyTypeError::new_err(format!(
                "{} input and {} output buffers given, the function takes {} and {}",
                inputs.len(),
                outputs.len(),
                self.leaves.len(),
                self.outputs.len()
            )));
        }
        // the relations first: a stored tensor has one value per tuple
        let (mut layouts, counts, preps) = self.relations(py, &sizes, &inputs)?;
        // the values of a leaf stored by relation leaf `r`: its tuples
        let nnz = |r: usize| counts[r];
        let mut held_reals = vec![];
        let mut held_rels = vec![];
        for (k, ((kind, dims), obj)) in self.leaves.iter().zip(&inputs).enumerate() {
            let what = format!("input buffer {k}");
            match kind {
                Leaf::Relation => held_rels.push(layouts[k].take()),
                Leaf::Stored(r) => {
                    let b = PyBuffer::<f64>::get(obj)?;
                    check_buffer(&b, &[nnz(*r)], &format!("{what} (one value per tuple)"))?;
                    held_reals.push(b);
                }
                _ => {
                    let b = PyBuffer::<f64>::get(obj)?;
                    check_buffer(&b, &Kernel::shape_at(dims, &sizes, &what)?, &what)?;
                    held_reals.push(b);
                }
            }
        }
        let mut held_outs = vec![];
        for (k, (dims, obj)) in self.outputs.iter().zip(&outputs).enumerate() {
            let what = format!("output buffer {k}");
            let b = PyBuffer::<f64>::get(obj)?;
            if b.readonly() {
                return Err(PyValueError::new_err(format!("{what} is read-only")));
            }
            let shape = match self.output_by[k] {
                Some(r) => vec![nnz(r)],
                None => Kernel::shape_at(dims, &sizes, &what)?,
            };
            check_buffer(&b, &shape, &what)?;
            held_outs.push(b);
        }
        let args = CallArgs {
            sizes,
            reals: held_reals
                .iter()
                .map(|b| b.buf_ptr() as *const f64)
                .collect(),
            // a prepared relation's leaf is null: the call uses its own copy
            rels: held_rels
                .iter()
                .map(|l| l.as_ref().map_or(std::ptr::null(), |l| l.as_ptr()))
                .collect(),
            preps,
            outs: held_outs.iter().map(|b| b.buf_ptr() as *mut f64).collect(),
        };
        let prepared_entry = match self.prepared {
            Some((_, e, _)) if args.preps.iter().any(|p| !p.is_null()) => Some(e),
            _ => None,
        };
        // the thread count is per calling thread, and the call below runs on
        // this one (detaching only releases the interpreter's lock)
        self._compiled
            .set_threads(threads.unwrap_or_else(default_threads))
            .map_err(|e| atl_error(py, &e, None))?;
        let entry = self.entry;
        // SAFETY: every buffer was checked above to hold exactly the
        // elements the manifest gives at these sizes, C-contiguous, of the
        // C type (float64; a relation is passed as its compressed layout, built above), and the outputs writable; the buffers
        // are held until the call returns.
        // The prepared relations are held by `inputs` until the call returns.
        let rc = py.detach(move || {
            let a = args;
            unsafe {
                match prepared_entry {
                    Some(e) => e(
                        a.sizes.as_ptr(),
                        a.reals.as_ptr(),
                        a.rels.as_ptr(),
                        a.preps.as_ptr(),
                        a.outs.as_ptr(),
                    ),
                    None => entry(
                        a.sizes.as_ptr(),
                        a.reals.as_ptr(),
                        a.rels.as_ptr(),
                        a.outs.as_ptr(),
                    ),
                }
            }
        });
        drop((held_reals, held_rels, held_outs));
        if rc == 0 {
            return Ok(());
        }
        Err(self.rc_error(py, rc))
    }

    /// Prepare the relation leaf `leaf` (not sizes; its buffer as `call`
    /// takes it) at `sizes` once for many calls: a `PreparedLayout`, which
    /// `call` takes in place of that leaf's buffer at sizes that give the
    /// same dimensions. The library checks the layout, keeps its own copy
    /// and builds the permuted layouts the function reads of it.
    fn prepare(
        slf: &Bound<'_, Self>,
        sizes: Vec<i64>,
        leaf: usize,
        relation: Bound<'_, PyAny>,
    ) -> PyResult<Prepared> {
        let py = slf.py();
        let this = slf.get();
        this.check_sizes(&sizes)?;
        let (prepare, _, free) = this
            .prepared
            .ok_or_else(|| PyTypeError::new_err("this function takes no relation"))?;
        let dims = match this.leaves.get(leaf) {
            Some((Leaf::Relation, dims)) => dims,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "input buffer {leaf} is not a relation"
                )))
            }
        };
        let what = format!("input buffer {leaf}");
        let shape = Kernel::shape_at(dims, &sizes, &what)?;
        let layout = relation_buffer_layout(py, &relation, &shape, &what)?;
        let k = this.leaves[..leaf]
            .iter()
            .filter(|(l, _)| *l == Leaf::Relation)
            .count() as i64;
        let mut rc = 0i32;
        // SAFETY: the sizes in the manifest's order (checked above) and the
        // layout's words, both live for the call.
        let handle = unsafe {
            prepare(
                k,
                sizes.as_ptr(),
                layout.as_ptr(),
                layout.len() as i64,
                &mut rc,
            )
        };
        if handle.is_null() {
            return Err(this.rc_error(py, rc));
        }
        Ok(Prepared {
            kernel: slf.clone().unbind(),
            handle: handle as usize,
            free,
            leaf,
            shape,
            nnz: layout[1] as usize,
        })
    }
}

/// Per leaf, a relation's layout (None for a prepared relation and other
/// leaves) and its number of tuples; per relation leaf, its prepared
/// relation or null.
type Relations = (
    Vec<Option<Vec<i64>>>,
    Vec<usize>,
    Vec<*mut std::ffi::c_void>,
);

impl Kernel {
    /// The relation leaves of a call's `inputs` at `sizes`.
    fn relations(
        &self,
        py: Python<'_>,
        sizes: &[i64],
        inputs: &[Bound<'_, PyAny>],
    ) -> PyResult<Relations> {
        let mut layouts = vec![None; self.leaves.len()];
        let mut counts = vec![0usize; self.leaves.len()];
        let mut preps = vec![];
        for (k, ((kind, dims), obj)) in self.leaves.iter().zip(inputs).enumerate() {
            if *kind == Leaf::Relation {
                let what = format!("input buffer {k}");
                let shape = Kernel::shape_at(dims, sizes, &what)?;
                if let Some(p) = self.prepared_leaf(obj, k, &shape, &what)? {
                    counts[k] = p.nnz;
                    preps.push(p.handle as *mut std::ffi::c_void);
                    continue;
                }
                let layout = relation_buffer_layout(py, obj, &shape, &what)?;
                counts[k] = layout[1] as usize;
                layouts[k] = Some(layout);
                preps.push(std::ptr::null_mut());
            }
        }
        Ok((layouts, counts, preps))
    }

    /// The prepared relation given as relation leaf `k`'s buffer, checked:
    /// made by this kernel, for this leaf, at these dimensions.
    fn prepared_leaf<'a>(
        &self,
        obj: &'a Bound<'_, PyAny>,
        k: usize,
        shape: &[usize],
        what: &str,
    ) -> PyResult<Option<&'a Prepared>> {
        let Ok(p) = obj.cast::<Prepared>() else {
            return Ok(None);
        };
        let p = p.get();
        if !std::ptr::eq(p.kernel.get(), self) {
            return Err(PyValueError::new_err(format!(
                "{what}: a relation prepared for another compiled function"
            )));
        }
        if p.leaf != k || p.shape != shape {
            return Err(PyValueError::new_err(format!(
                "{what}: a relation prepared for input buffer {} of shape {:?}, not {k} of shape {shape:?}",
                p.leaf, p.shape
            )));
        }
        Ok(Some(p))
    }

    /// The error of the compiled code's return code `rc`.
    fn rc_error(&self, py: Python<'_>, rc: i32) -> PyErr {
        let meaning: serde_json::Value = serde_json::from_str(&self.manifest).unwrap_or_default();
        let meaning = meaning["returns"][rc.to_string()]
            .as_str()
            .unwrap_or("an undocumented error code")
            .to_string();
        let text = format!("compiled code returned {rc}: {meaning}");
        make_error(py, &text, "evaluation", &meaning, None, Some(rc))
    }
}

/// The threads of a call that sets none: the library's default
/// (`OMP_NUM_THREADS`, else one per core), read again on every call while
/// `OMP_NUM_THREADS` is set, and else counted once: counting the cores
/// reads the process's CPU affinity and cgroup quota files, a dozen system
/// calls, longer than a call of a small function.
fn default_threads() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if std::env::var_os("OMP_NUM_THREADS").is_some() {
        atl_egg::backend::default_threads()
    } else {
        *CORES.get_or_init(atl_egg::backend::default_threads)
    }
}

/// The library's cache directory as configured (`$ATL_EGG_CACHE`, else
/// `$XDG_CACHE_HOME/atl-egg`, else `$HOME/.cache/atl-egg`), or None.
/// The flat index of the first element of `values` (a C-contiguous
/// float64 buffer) that is NaN or infinite, else None. One pass over the
/// elements that allocates nothing (NumPy's `isfinite(a).all()` writes a
/// boolean array and reads it again, as long as the call it guards).
#[pyfunction]
fn first_nonfinite(values: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    let b = PyBuffer::<f64>::get(values)?;
    if !b.is_c_contiguous() {
        return Err(PyValueError::new_err("the array is not C-contiguous"));
    }
    // SAFETY: the buffer holds `item_count` contiguous float64 elements and
    // is held (`b`) until this function returns.
    let xs = unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const f64, b.item_count()) };
    Ok(first_nonfinite_in(xs))
}

/// See [`first_nonfinite`]: blocks tested without a branch per element
/// (the test vectorizes), the position searched only in a failing block.
fn first_nonfinite_in(xs: &[f64]) -> Option<usize> {
    const BLOCK: usize = 2048;
    const EXPONENT: u64 = 0x7ff0_0000_0000_0000;
    xs.chunks(BLOCK).enumerate().find_map(|(k, block)| {
        let bad = block.iter().fold(0u64, |acc, x| {
            acc | u64::from(x.to_bits() & EXPONENT == EXPONENT)
        });
        if bad == 0 {
            return None;
        }
        block
            .iter()
            .position(|x| !x.is_finite())
            .map(|i| k * BLOCK + i)
    })
}

#[pyfunction]
fn cache_dir() -> Option<String> {
    atl_egg::backend::build::configured_cache_dir().map(|p| p.display().to_string())
}

/// The black boxes, from the compiler's one table: name, the name of its
/// constant parameter (`None` for a function of one real) and its
/// documentation line.
#[pyfunction]
fn black_boxes() -> Vec<(&'static str, Option<&'static str>, &'static str)> {
    atl_egg::front::blackbox::BLACK_BOXES
        .iter()
        .map(|b| (b.name, b.param, b.doc))
        .collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeProgram>()?;
    m.add_class::<Kernel>()?;
    m.add_class::<Prepared>()?;
    m.add_function(wrap_pyfunction!(cache_dir, m)?)?;
    m.add_function(wrap_pyfunction!(black_boxes, m)?)?;
    m.add_function(wrap_pyfunction!(first_nonfinite, m)?)?;
    m.add("AtlError", m.py().get_type::<AtlError>())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Dim;

    #[test]
    fn the_first_non_finite_element_is_found_in_any_block() {
        use super::first_nonfinite_in as first;
        let mut xs = vec![1.5; 5000];
        assert_eq!(first(&xs), None);
        assert_eq!(first(&[]), None);
        for (at, bad) in [
            (0, f64::NAN),
            (2047, f64::INFINITY),
            (2048, f64::NEG_INFINITY),
            (4999, -f64::NAN),
        ] {
            xs[at] = bad;
            assert_eq!(first(&xs), Some(at));
            xs[at] = f64::MAX;
        }
        assert_eq!(first(&xs), None);
        xs[4000] = f64::NAN;
        xs[3000] = f64::INFINITY;
        assert_eq!(first(&xs), Some(3000));
    }

    #[test]
    fn dimensions_of_the_manifest() {
        let sizes = ["m".to_string(), "n".to_string()];
        let d = Dim::parse("(- (+ m n) 1)", &sizes).unwrap();
        assert_eq!(d.at(&[3, 7]), Some(9));
        assert_eq!(Dim::parse("(* 2 n)", &sizes).unwrap().at(&[3, 7]), Some(14));
        assert_eq!(Dim::parse("4", &sizes).unwrap().at(&[0, 0]), Some(4));
        assert!(Dim::parse("(* m n)", &sizes).is_err());
        assert!(Dim::parse("k", &sizes).is_err());
        assert_eq!(
            Dim::parse("n", &sizes).unwrap().at(&[1, i64::MAX]),
            Some(i64::MAX)
        );
        assert_eq!(
            Dim::parse("(+ n 1)", &sizes).unwrap().at(&[1, i64::MAX]),
            None
        );
    }
}
