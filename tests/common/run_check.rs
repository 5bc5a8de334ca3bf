//! Compiled code against the evaluator, for one program and its inputs:
//! equal values (within 1e-8 of the largest magnitude), executed operations
//! within `2 * cost + 1`, and loop overhead within [`LOOP_OVERHEAD`] times
//! the work and the data. Used by tests/compiled.rs and, on the corpus's
//! derivatives, by tests/derivatives.rs.

use atl_egg::backend::{self, build};
use atl_egg::front::ast::Program;
use atl_egg::semantics::cost;
use atl_egg::semantics::eval;
use atl_egg::semantics::value::Inputs;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use super::par::par_map;
use super::{compare_values, Tolerance};

/// Is there a C compiler (`$CC`, default `cc`)? Says why not when not.
pub fn have_cc() -> bool {
    let ok = Command::new(build::compiler())
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: no C compiler ('{}')", build::compiler());
    }
    ok
}

/// Compile, run counted, compare with eval and with the cost model.
pub fn check(prog: &Program, inputs: &Inputs, what: &str) -> Result<(u128, u128), String> {
    let want = eval::evaluate(prog, inputs).map_err(|e| format!("{what}: eval: {e}"))?;
    let compiled = backend::compile_with_flags(prog, true, &check_flags())
        .map_err(|e| format!("{what}: compile: {e}"))?;
    let (got, ops) = {
        // The counters are the library's globals: one call at a time per
        // library (the same C is one library, whichever test builds it).
        let lock = library_lock(compiled.path());
        let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
        compiled
            .call_counted(inputs)
            .map_err(|e| format!("{what}: run: {e}"))?
    };
    compare_values(
        &want,
        &got,
        Tolerance {
            rel: 1e-8,
            abs: 1e-12,
        },
    )
    .map_err(|e| format!("{what}: run differs from eval: {e}"))?;
    let ops = ops.ok_or("no counters")?;
    let total: u128 = ops[..3].iter().map(|&k| k as u128).sum();
    let c = cost::cost(prog, &inputs.sizes, &inputs.relations)
        .map_err(|e| format!("{what}: cost: {e}"))?;
    if total > 2 * c + 1 {
        return Err(format!("{what}: executed {total} ops ({ops:?}), cost {c}"));
    }
    let overhead = ops[3] as u128 + ops[4] as u128;
    let scale = c + data_size(prog, inputs).map_err(|e| format!("{what}: sizes: {e}"))?;
    if overhead > LOOP_OVERHEAD * scale {
        return Err(format!(
            "{what}: {} loop iterations and {} tests, above {LOOP_OVERHEAD} x (cost {c} + data {})",
            ops[3],
            ops[4],
            scale - c
        ));
    }
    note_overhead((overhead, scale.max(1), what.to_string()));
    Ok((total, c))
}

/// The lock of the library at `path`, shared by every thread of the process.
fn library_lock(path: &std::path::Path) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    locks.entry(path.to_path_buf()).or_default().clone()
}

/// Record an overhead (overhead, scale, which run) on this thread, if its
/// ratio is the largest seen.
fn note_overhead(o: (u128, u128, String)) {
    WORST_OVERHEAD.with(|w| {
        let mut w = w.borrow_mut();
        if o.0 * w.1 > w.0 * o.1 {
            *w = o;
        }
    });
}

/// The checks of every item, `f(item)` returning the failures of its
/// checks, run on every core ([`par_map`]): the failures in the items'
/// order. The largest loop overhead of the workers' checks is recorded on
/// this thread, for [`report_worst_overhead`].
pub fn par_checks<T: Sync>(items: &[T], f: impl Fn(&T) -> Vec<String> + Sync) -> Vec<String> {
    let results = par_map(items, |item| {
        let failures = f(item);
        let worst =
            WORST_OVERHEAD.with(|w| std::mem::replace(&mut *w.borrow_mut(), (0, 1, String::new())));
        (failures, worst)
    });
    let mut failures = vec![];
    for (f, worst) in results {
        note_overhead(worst);
        failures.extend(f);
    }
    failures
}

/// The C compiler's flags of [`check`]: the library's defaults with `-O0`
/// for `-O3`. The check compares values (within its tolerance) and counted
/// operations, which do not depend on GCC's optimisation level, and GCC
/// builds the generated C three times faster at `-O0` than at `-O1` (a 3x3
/// stencil's gradient: 1.3 s against 4.1 s), more than the tests' small
/// sizes lose in running it. The tests of the code GCC makes (vector loops,
/// assembly, speed) build with the defaults, as users do.
pub fn check_flags() -> build::Flags {
    let mut flags = build::Flags::default();
    for f in &mut flags.flags {
        if f == "-O3" {
            *f = "-O0".into();
        }
    }
    flags
}

/// The loop overhead bound: loop iterations plus predicate tests are at most
/// this many times the work cost plus the data's size ([`data_size`]).
pub const LOOP_OVERHEAD: u128 = 8;

thread_local! {
    /// The largest overhead ratio seen: overhead, scale, which run.
    static WORST_OVERHEAD: std::cell::RefCell<(u128, u128, String)> =
        const { std::cell::RefCell::new((0, 1, String::new())) };
}

/// The reals and relation tuples the compiled code is given, the reals it
/// returns and the reals of its intermediates (each relation also counts
/// its first dimension: the rows its dense level has), the sizes loops over
/// data cannot avoid visiting.
pub fn data_size(prog: &Program, inputs: &Inputs) -> Result<u128, String> {
    use atl_egg::front::ast::ParamKind;
    use atl_egg::semantics::value::type_size;
    let mut n = type_size(&prog.ret, &inputs.sizes).map_err(|e| e.to_string())?;
    for p in &prog.params {
        match &p.kind {
            ParamKind::Real(t) => n += type_size(t, &inputs.sizes).map_err(|e| e.to_string())?,
            ParamKind::Relation(_) => {
                let r = &inputs.relations[&p.name];
                n += r.nnz() as u128;
                n += r.dims().first().copied().unwrap_or(0) as u128;
            }
            ParamKind::Size => {}
        }
    }
    let env: std::collections::HashMap<atl_egg::Symbol, i64> =
        inputs.sizes.iter().map(|(k, v)| (*k, *v)).collect();
    let f = backend::generate(prog).map_err(|e| e.to_string())?.function;
    for slot in &f.slots {
        let mut k: u128 = 1;
        for d in &slot.dims {
            k *= d.eval(&env).map_err(|e| e.to_string())?.max(0) as u128;
        }
        n += k;
    }
    Ok(n)
}

pub fn report_worst_overhead() {
    WORST_OVERHEAD.with(|w| {
        let w = w.borrow();
        eprintln!(
            "largest loop overhead: {} / {} = {:.2} ({})",
            w.0,
            w.1,
            w.0 as f64 / w.1 as f64,
            w.2
        );
    });
}
