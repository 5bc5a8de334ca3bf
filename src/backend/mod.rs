//! Backends: what a program becomes on its way out.
//!
//! Text in an output format ([`Format`], [`render`]): ATL S-expressions in
//! core forms ([`sexp`]), the paper's notation ([`pretty`]), one JSON
//! object ([`json`]). A new format is a variant of [`Format`], its module
//! and its arm in [`render`].
//!
//! Native code: the C emitter ([`c`]) over the loop IR of `lower`, building
//! shared libraries with the system C compiler and a cache ([`build`]), and
//! loading and calling them ([`Compiled`]).

pub mod build;
pub mod c;
mod gemm;
pub mod json;
pub mod marshal;
pub mod prepared;
pub mod pretty;
pub mod sexp;
pub mod split;

use crate::error::{Error, Result};
use crate::front::ast::{ParamKind, Program, Type};
use crate::lower::ir::{Function, ParamC};
use crate::semantics::eval::checked_inputs;
use crate::semantics::value::{type_size, Inputs, Value, MAX_OUTPUT_REALS};

/// The formats a program is printed in (`--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// ATL S-expressions, core forms only (reads back with `check -`).
    Sexp,
    /// A JSON object: the program, its signature, what it returns (each
    /// gradient labelled by its input), the statistics.
    Json,
    /// The paper's notation, for people: one binding a line.
    Pretty,
}

/// What a format may show beside the program (only [`Format::Json`] shows
/// any of it).
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// What a derivative returns, labelled by input
    /// ([`json::labelled_returns`]).
    pub returns: Option<Vec<serde_json::Value>>,
    /// The optimizer's statistics, as JSON.
    pub stats: Option<serde_json::Value>,
}

/// `prog` as text in `format`.
pub fn render(prog: &Program, format: Format, extras: &Extras) -> String {
    match format {
        Format::Sexp => sexp::program_to_string(prog),
        Format::Pretty => pretty::program(prog),
        Format::Json => json::program(prog, extras),
    }
}

/// A program's C source and manifest.
pub struct CSource {
    pub function: Function,
    pub source: String,
    pub manifest: serde_json::Value,
}

/// Lower `prog` and emit its C source and manifest. The manifest is the
/// C function's ([`c::manifest`]) with the program's parameters added as
/// `inputs` (name and kind, in declaration order): a C parameter's `source`
/// is its parameter's name followed by `.0`/`.1` steps into pairs, which
/// only the names make unambiguous (a name may itself contain `.`).
pub fn generate(prog: &Program) -> Result<CSource> {
    let function = crate::lower::lower(prog)?;
    let source = c::emit(&function, prog.name.as_str());
    let mut manifest = c::manifest(&function);
    if let Some(obj) = manifest.as_object_mut() {
        obj.insert("inputs".into(), generate_inputs(prog));
    }
    Ok(CSource {
        function,
        source,
        manifest,
    })
}

/// The manifest's `inputs`: the program's parameters, name and kind, in
/// declaration order.
fn generate_inputs(prog: &Program) -> serde_json::Value {
    let inputs: Vec<serde_json::Value> = prog
        .params
        .iter()
        .map(|p| {
            let kind = match &p.kind {
                ParamKind::Size => "size",
                ParamKind::Real(_) => "real",
                ParamKind::Relation(_) => "relation",
            };
            serde_json::json!({"name": p.name.as_str(), "kind": kind})
        })
        .collect();
    serde_json::Value::Array(inputs)
}

/// A program compiled to a loaded shared library.
pub struct Compiled {
    program: Program,
    function: Function,
    library: libloading::Library,
    /// The library's path (in the cache), kept alive with it.
    cached: build::CachedLibrary,
    counts_ops: bool,
}

/// Compile `prog` to native code (cached) and load it.
pub fn compile(prog: &Program) -> Result<Compiled> {
    compile_with(prog, false)
}

/// As [`compile`]; `count_ops` builds the instrumented variant
/// (`-DATL_COUNT_OPS`), whose calls also report the operations executed.
pub fn compile_with(prog: &Program, count_ops: bool) -> Result<Compiled> {
    compile_with_flags(prog, count_ops, &build::Flags::default())
}

/// As [`compile_with`], with the C compiler's flags given.
pub fn compile_with_flags(
    prog: &Program,
    count_ops: bool,
    flags: &build::Flags,
) -> Result<Compiled> {
    let src = generate(prog)?;
    let (library, cached) = build::load_library(&src.source, count_ops, flags)?;
    Ok(Compiled {
        program: prog.clone(),
        function: src.function,
        library,
        cached,
        counts_ops: count_ops,
    })
}

type Entry =
    unsafe extern "C" fn(*const i64, *const *const f64, *const *const i64, *const *mut f64) -> i32;

/// What the counting build (`-DATL_COUNT_OPS`) counts in one call.
pub const COUNTERS: usize = 5;

/// The counts of one call of the counting build: additions,
/// multiplications, black-box calls, loop iterations (bodies entered) and
/// predicate tests (conditions and relation lookups evaluated).
pub type Counts = [u64; COUNTERS];

impl Compiled {
    /// The library's path.
    pub fn path(&self) -> &std::path::Path {
        &self.cached.path
    }

    /// Run the parallel loops of later calls from this thread on `threads`
    /// threads (the default is `OMP_NUM_THREADS`, else one per core).
    pub fn set_threads(&self, threads: usize) -> Result<()> {
        let n = i32::try_from(threads.max(1)).unwrap_or(i32::MAX);
        // SAFETY: `atlpacked_threads` has this signature (see `c::emit`).
        let set: libloading::Symbol<unsafe extern "C" fn(i32)> =
            unsafe { self.library.get(b"atlpacked_threads\0") }
                .map_err(|e| Error::eval(format!("compiled library has no thread setting: {e}")))?;
        // SAFETY: it only sets the OpenMP thread count of the calling thread.
        unsafe { set(n) };
        Ok(())
    }

    /// Run on `inputs`: the program's value (as `eval` gives it).
    pub fn call(&self, inputs: &Inputs) -> Result<Value> {
        Ok(self.call_counted(inputs)?.0)
    }

    /// Run on `inputs`; with an instrumented build also what it executed
    /// ([`Counts`]).
    pub fn call_counted(&self, inputs: &Inputs) -> Result<(Value, Option<Counts>)> {
        let (v, ops, _) = self.call_timed(inputs, 1)?;
        Ok((v, ops))
    }

    /// Run `repeat >= 1` times on `inputs` (marshalled once): the value,
    /// the operations of the last call (instrumented builds) and the
    /// seconds each native call took (wall time).
    pub fn call_timed(
        &self,
        inputs: &Inputs,
        repeat: usize,
    ) -> Result<(Value, Option<Counts>, Vec<f64>)> {
        let (outs, ops, times) = self.call_clocked(inputs, repeat, false)?;
        Ok((self.as_evaluated(inputs, outs)?, ops, times))
    }

    /// As [`Compiled::call_timed`], but the value as it is given out, with
    /// its type: a stored result as its values at the tuples
    /// ([`crate::semantics::stored::out_type`]), never expanded.
    pub fn call_given_out(
        &self,
        inputs: &Inputs,
        repeat: usize,
    ) -> Result<(Value, Type, Option<Counts>, Vec<f64>)> {
        let (outs, ops, times) = self.call_clocked(inputs, repeat, false)?;
        let ty = crate::semantics::stored::out_type(&self.program, inputs)?;
        let v = marshal::value_from_leaves(&ty, &inputs.sizes, &outs)?;
        Ok((v, ty, ops, times))
    }

    /// The value of the output leaves `outs` as `eval` gives it: a stored
    /// result expanded to its dense form.
    fn as_evaluated(&self, inputs: &Inputs, mut outs: Vec<Vec<f64>>) -> Result<Value> {
        for (k, r) in &self.function.stored_outputs {
            let rel = stored_relation(inputs, crate::symbol::Symbol::from(r.as_str()))?;
            outs[*k] = crate::semantics::stored::dense_flat(&outs[*k], rel)?;
        }
        marshal::value_from_leaves(&self.program.ret, &inputs.sizes, &outs)
    }

    /// As [`Compiled::call_timed`], but the seconds are the process's CPU
    /// time (all its threads), which other processes on a loaded machine
    /// disturb less than wall time.
    pub fn call_timed_cpu(
        &self,
        inputs: &Inputs,
        repeat: usize,
    ) -> Result<(Value, Option<Counts>, Vec<f64>)> {
        let (outs, ops, times) = self.call_clocked(inputs, repeat, true)?;
        Ok((self.as_evaluated(inputs, outs)?, ops, times))
    }

    /// The output leaves (a stored result as its values), the operations
    /// of the last call and the seconds each call took.
    fn call_clocked(&self, inputs: &Inputs, repeat: usize, cpu: bool) -> Result<Clocked> {
        let prog = &self.program;
        checked_inputs::<Value>(prog, inputs)?;
        // A negative or overflowing dimension, reported as eval reports it
        // (the compiled code's own entry checks only return a code).
        crate::semantics::eval::check_dimensions(&prog.body, &inputs.sizes)?;
        let out_type = crate::semantics::stored::out_type(prog, inputs)?;
        if type_size(&out_type, &inputs.sizes)? > MAX_OUTPUT_REALS {
            return Err(Error::eval(format!(
                "the result would have more than {MAX_OUTPUT_REALS} reals at these sizes"
            )));
        }
        let mut sizes = vec![];
        for p in &self.function.params {
            if p.kind == ParamC::Size {
                let s = crate::symbol::Symbol::from(p.source.as_str());
                sizes.push(
                    *inputs
                        .sizes
                        .get(&s)
                        .ok_or_else(|| Error::input(format!("size {s} is not given")))?,
                );
            }
        }
        let (reals, rels) = marshal_inputs(prog, inputs)?;
        // a stored result's buffer holds its values (out_type)
        let mut outs = marshal::output_buffers(&out_type, &inputs.sizes)?;
        let real_ptrs: Vec<*const f64> = reals.iter().map(|v| v.as_ptr()).collect();
        let rel_ptrs: Vec<*const i64> = rels.iter().map(|v| v.as_ptr()).collect();
        let out_ptrs: Vec<*mut f64> = outs.iter_mut().map(|v| v.as_mut_ptr()).collect();
        // SAFETY: `atlpacked_entry` has the `Entry` signature (see `c::emit`).
        let entry: libloading::Symbol<Entry> = unsafe { self.library.get(b"atlpacked_entry\0") }
            .map_err(|e| Error::eval(format!("compiled library has no entry point: {e}")))?;
        let mut times = vec![];
        let mut rc = c::RET_OK;
        for _ in 0..repeat.max(1) {
            let t = std::time::Instant::now();
            let c = cpu.then(process_cpu_seconds);
            // SAFETY: every pointer is to a live buffer of the size the
            // manifest says, checked above against the program's types at
            // these sizes.
            rc = unsafe {
                entry(
                    sizes.as_ptr(),
                    real_ptrs.as_ptr(),
                    rel_ptrs.as_ptr(),
                    out_ptrs.as_ptr(),
                )
            };
            times.push(match c {
                Some(c) => process_cpu_seconds() - c,
                None => t.elapsed().as_secs_f64(),
            });
            if rc != c::RET_OK {
                break;
            }
        }
        match rc {
            c::RET_OK => {}
            c::RET_NEGATIVE_DIMENSION => {
                return Err(Error::eval(
                    "compiled code: a size or dimension is negative",
                ))
            }
            c::RET_ALLOCATION => {
                return Err(Error::eval(
                    "compiled code: cannot allocate the intermediates (out of memory)",
                ))
            }
            c::RET_OVERFLOW => {
                return Err(Error::eval(
                    "compiled code: the intermediates' size overflows 64 bits",
                ))
            }
            c::RET_INDEX_OVERFLOW => return Err(Error::eval(c::INDEX_OVERFLOW_MESSAGE)),
            k => {
                return Err(Error::eval(format!(
                    "compiled code returned the unknown code {k}"
                )))
            }
        }
        let ops = if self.counts_ops {
            // SAFETY: the instrumented build exports `uint64_t atlpacked_ops[5]`.
            unsafe {
                let sym: libloading::Symbol<*const Counts> =
                    self.library.get(b"atlpacked_ops\0").map_err(|e| {
                        Error::eval(format!("instrumented library has no counters: {e}"))
                    })?;
                Some(**sym)
            }
        } else {
            None
        };
        Ok((outs, ops, times))
    }
}

/// A call's output leaves, the operations of its last run (instrumented
/// builds) and the seconds each run took.
type Clocked = (Vec<Vec<f64>>, Option<Counts>, Vec<f64>);

/// The real leaves and the relations' layouts of a call's inputs.
type Marshalled = (Vec<Vec<f64>>, Vec<Vec<i64>>);

/// The real leaves (a stored tensor as its values at the tuples, in the
/// layout's order) and the relations' layouts of the inputs, in order.
fn marshal_inputs(prog: &Program, inputs: &Inputs) -> Result<Marshalled> {
    let mut reals: Vec<Vec<f64>> = vec![];
    let mut rels: Vec<Vec<i64>> = vec![];
    for p in &prog.params {
        match &p.kind {
            ParamKind::Size => {}
            ParamKind::Relation(_) => {
                let r = inputs
                    .relations
                    .get(&p.name)
                    .ok_or_else(|| Error::input(format!("missing input '{}'", p.name)))?;
                rels.push(marshal::checked_layout(
                    p.name.as_str(),
                    r.dims(),
                    &marshal::relation_tuples(r),
                )?);
            }
            ParamKind::Real(t) => match prog.stored.param(p.name) {
                // one value per tuple, in the layout's order
                Some(r) => reals
                    .push(crate::semantics::stored::values_of(inputs, p.name, t, r)?.into_owned()),
                None => reals.extend(marshal::leaves_of(
                    &inputs.values[&p.name],
                    t,
                    &inputs.sizes,
                )?),
            },
        }
    }
    Ok((reals, rels))
}

/// The relation `r` of the inputs, which stores a tensor.
fn stored_relation(
    inputs: &Inputs,
    r: crate::symbol::Symbol,
) -> Result<&crate::semantics::value::Relation> {
    inputs
        .relations
        .get(&r)
        .ok_or_else(|| Error::input(format!("missing input '{r}'")))
}

/// The packed entry point's signature, `atlpacked_entry(sz, re, rel, out)`
/// ([`c`]): the sizes, the real leaves (a real as an array of one), the
/// relations and the result's leaves, each an array in the manifest's order.
pub type PackedEntry =
    unsafe extern "C" fn(*const i64, *const *const f64, *const *const i64, *const *mut f64) -> i32;

/// For callers that marshal their own arguments (the Python extension):
/// the manifest and the entry point of the loaded library.
impl Compiled {
    /// The manifest, as `compile -o OUT.json` writes it ([`generate`]).
    pub fn manifest(&self) -> serde_json::Value {
        let mut manifest = c::manifest(&self.function);
        let inputs = generate_inputs(&self.program);
        if let Some(obj) = manifest.as_object_mut() {
            obj.insert("inputs".into(), inputs);
        }
        manifest
    }

    /// The library's packed entry point, valid while `self` lives. The
    /// caller must pass arrays of the lengths the manifest gives.
    pub fn packed_entry(&self) -> Result<PackedEntry> {
        // SAFETY: `atlpacked_entry` has the `PackedEntry` signature (see `c::emit`).
        let entry: libloading::Symbol<PackedEntry> =
            unsafe { self.library.get(b"atlpacked_entry\0") }
                .map_err(|e| Error::eval(format!("compiled library has no entry point: {e}")))?;
        Ok(*entry)
    }
}

/// `atlpacked_prepare(k, sz, layout, len, rc)` ([`prepared`]).
pub type PrepareFn =
    unsafe extern "C" fn(i64, *const i64, *const i64, i64, *mut i32) -> *mut std::ffi::c_void;
/// `atlpacked_entry_prepared(sz, re, rel, prep, out)` ([`prepared`]).
pub type PreparedEntry = unsafe extern "C" fn(
    *const i64,
    *const *const f64,
    *const *const i64,
    *const *mut std::ffi::c_void,
    *const *mut f64,
) -> i32;
/// `atlpacked_prepared_free(p)` ([`prepared`]).
pub type PreparedFree = unsafe extern "C" fn(*mut std::ffi::c_void);

impl Compiled {
    /// The entry points for relations prepared once for many calls
    /// ([`prepared`]), valid while `self` lives; None when the function
    /// takes no relation.
    pub fn prepared_entries(&self) -> Option<(PrepareFn, PreparedEntry, PreparedFree)> {
        // SAFETY: these symbols have these signatures (see `prepared::emit`).
        unsafe {
            let prepare: libloading::Symbol<PrepareFn> =
                self.library.get(b"atlpacked_prepare\0").ok()?;
            let entry: libloading::Symbol<PreparedEntry> =
                self.library.get(b"atlpacked_entry_prepared\0").ok()?;
            let free: libloading::Symbol<PreparedFree> =
                self.library.get(b"atlpacked_prepared_free\0").ok()?;
            Some((*prepare, *entry, *free))
        }
    }
}

/// The threads that parallel loops run on when none are set, as OpenMP
/// chooses them: `OMP_NUM_THREADS` (its first number, if positive), else
/// one per core.
pub fn default_threads() -> usize {
    std::env::var("OMP_NUM_THREADS")
        .ok()
        .and_then(|v| v.split(',').next()?.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The CPU time of this process, all threads, in seconds.
fn process_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; the clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
