//! The C emitter: one C99 function per program, destination-passing, and
//! its JSON manifest.
//!
//! `int atl_NAME(...)` takes the implicit sizes (in declaration order),
//! then the parameters in order: sizes as `int64_t`, reals as `double`,
//! tensors as `const double *` (row-major, contiguous), relations as
//! `const uint8_t *` (row-major), parameters of pair type as their leaves;
//! then one `double *` per leaf of the result (pairs flattened left to
//! right, a tensor of pairs as one array per leaf). It returns
//! [`RET_OK`], or [`RET_NEGATIVE_DIMENSION`], [`RET_ALLOCATION`],
//! [`RET_OVERFLOW`]. Compiled with `-DATL_COUNT_OPS` it also counts the
//! additions, multiplications and black-box calls it executes into the
//! exported `uint64_t atlpacked_ops[3]` (reset on every call).
//! `atlpacked_entry` is the same function with its arguments in arrays,
//! for callers that do not know the signature at compile time.

use crate::front::affine::Affine;
use crate::lower::ir::{Function, ParamC, Stmt};
use std::fmt::Write as _;

pub const RET_OK: i32 = 0;
/// A size or dimension is negative.
pub const RET_NEGATIVE_DIMENSION: i32 = 1;
/// The arena for the intermediates could not be allocated.
pub const RET_ALLOCATION: i32 = 2;
/// The intermediates' total size overflows 64 bits.
pub const RET_OVERFLOW: i32 = 3;

const PRELUDE: &str = r#"#include <stdint.h>
#include <stdlib.h>
#include <math.h>

#if defined(__GNUC__) || defined(__clang__)
#define ATL_MAYBE_UNUSED __attribute__((unused))
#else
#define ATL_MAYBE_UNUSED
#endif

/* ATL_SIMD (set by the default build flags with -fopenmp-simd): an
   innermost sum may add its terms in any order (SIMD lanes); never in the
   counting build, whose first-term flag is a loop-carried dependence. */
#define ATL_PRAGMA(x) _Pragma(#x)
#if defined(ATL_SIMD) && !defined(ATL_COUNT_OPS)
#define ATL_SIMD_REDUCE(a) ATL_PRAGMA(omp simd reduction(+:a))
#else
#define ATL_SIMD_REDUCE(a)
#endif
#ifdef ATL_COUNT_OPS
uint64_t atlpacked_ops[3];
#define ATL_ADD(c) (atlpacked_ops[0] += (uint64_t)((c) != 0))
#define ATL_MUL() (atlpacked_ops[1]++)
#define ATL_CALL() (atlpacked_ops[2]++)
#define ATL_FIRST(h) int h = 0
#define ATL_SUMADD(h) (atlpacked_ops[0] += (uint64_t)(h), (h) = 1)
#define ATL_FIRST_AT(h, n) uint8_t *h = (uint8_t *)calloc((size_t)(n) + 1, 1); if (h == NULL) { free(atlv_arena); return 2; }
#define ATL_SUMADD_AT(h, i) (atlpacked_ops[0] += (uint64_t)(h)[i], (h)[i] = 1)
#define ATL_FIRST_AT_END(h) free(h)
#else
#define ATL_ADD(c) ((void)0)
#define ATL_MUL() ((void)0)
#define ATL_CALL() ((void)0)
#define ATL_FIRST(h) ((void)0)
#define ATL_SUMADD(h) ((void)0)
#define ATL_FIRST_AT(h, n) ((void)0)
#define ATL_SUMADD_AT(h, i) ((void)0)
#define ATL_FIRST_AT_END(h) ((void)0)
#endif

/* Index arithmetic (b > 0). */
static inline int64_t atlh_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t atlh_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t atlh_floordiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && a < 0) ? q - 1 : q; }
static inline int64_t atlh_ceildiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && a > 0) ? q + 1 : q; }
static inline int64_t atlh_mod(int64_t a, int64_t b) { int64_t r = a % b; return r < 0 ? r + b : r; }

/* Black boxes, exactly as atl-egg's evaluator. */
static inline double atlh_exp(double x) { return exp(x); }
static inline double atlh_log(double x) { return x > 0.0 ? log(x) : (x == 0.0 ? -INFINITY : NAN); }
static inline double atlh_sin(double x) { return isfinite(x) ? sin(x) : NAN; }
static inline double atlh_cos(double x) { return isfinite(x) ? cos(x) : NAN; }
static inline double atlh_tanh(double x) { return tanh(x); }
static inline double atlh_sqrt(double x) { return x >= 0.0 ? sqrt(x) : NAN; }
static inline double atlh_recip(double x) { return x == 0.0 ? copysign(INFINITY, x) : 1.0 / x; }
static inline double atlh_sigmoid(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}
static inline double atlh_relu(double x) { return x > 0.0 ? x : 0.0; }
static inline double atlh_step(double x) { return x > 0.0 ? 1.0 : 0.0; }
/* pow's exponent goes through a volatile so that the C compiler never sees
   a constant one: with -fno-math-errno GCC turns pow(x, 0.5) in a
   vectorized loop into sqrt(x), which differs at -0 and -inf, and it may
   fold other constant exponents into cheaper code; the evaluator calls pow. */
static inline double atlh_pow(double x, double k) { volatile double e = k; return pow(x, e); }
static inline double atlh_dtanh(double x) { double t = tanh(x); return 1.0 - t * t; }
static inline double atlh_dsigmoid(double x) { double v = atlh_sigmoid(x); return v * (1.0 - v); }
static inline double atlh_dsqrt(double x) { return 0.5 * atlh_recip(atlh_sqrt(x)); }
static inline double atlh_drecip(double x) { double r = atlh_recip(x); return -(r * r); }
static inline double atlh_dcos(double x) { return -atlh_sin(x); }
static inline double atlh_dpow(double x, double k) { volatile double e = k - 1.0; return k * pow(x, e); }
"#;

fn stmts(out: &mut String, ss: &[Stmt], depth: usize) {
    let pad = "  ".repeat(depth);
    for s in ss {
        match s {
            Stmt::Line(l) => {
                let _ = writeln!(out, "{pad}{l}");
            }
            Stmt::For { var, lo, hi, body } => {
                let _ = writeln!(
                    out,
                    "{pad}for (int64_t {var} = {lo}; {var} < {hi}; {var}++) {{"
                );
                stmts(out, body, depth + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            Stmt::If { cond, then, els } => {
                let _ = writeln!(out, "{pad}if ({cond}) {{");
                stmts(out, then, depth + 1);
                if els.is_empty() {
                    let _ = writeln!(out, "{pad}}}");
                } else {
                    let _ = writeln!(out, "{pad}}} else {{");
                    stmts(out, els, depth + 1);
                    let _ = writeln!(out, "{pad}}}");
                }
            }
        }
    }
}

/// A dimension product as a C expression over the dimension locals.
fn dims_product(f: &Function, dims: &[Affine]) -> Vec<String> {
    dims.iter()
        .map(|d| {
            f.dims
                .iter()
                .find(|(_, a)| a == d)
                .map(|(n, _)| n.clone())
                .unwrap_or_else(|| "0".into())
        })
        .collect()
}

fn c_type(k: &ParamC) -> &'static str {
    match k {
        ParamC::Size => "int64_t",
        ParamC::Real => "double",
        ParamC::Tensor(_) => "const double *",
        ParamC::Relation(_) => "const uint8_t *",
    }
}

/// The C source of a lowered program.
pub fn emit(f: &Function, source_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "/* Generated by atl-egg from the ATL program `{}`. */",
        source_name.replace("*/", "* /")
    );
    out += PRELUDE;
    let mut args: Vec<String> = f
        .params
        .iter()
        .map(|p| {
            format!(
                "{}{}{}",
                c_type(&p.kind),
                if matches!(p.kind, ParamC::Tensor(_) | ParamC::Relation(_)) {
                    ""
                } else {
                    " "
                },
                p.cname
            )
        })
        .collect();
    args.extend(f.outputs.iter().map(|(c, _, _)| format!("double *{c}")));
    let _ = writeln!(
        out,
        "\nint {}({}) {{",
        f.name,
        if args.is_empty() {
            "void".into()
        } else {
            args.join(", ")
        }
    );
    for p in &f.params {
        let _ = writeln!(out, "  (void){};", p.cname);
    }
    out += "#ifdef ATL_COUNT_OPS\n  atlpacked_ops[0] = atlpacked_ops[1] = atlpacked_ops[2] = 0;\n#endif\n";
    for p in &f.params {
        if p.kind == ParamC::Size {
            let _ = writeln!(
                out,
                "  if ({} < 0) return {RET_NEGATIVE_DIMENSION};",
                p.cname
            );
        }
    }
    let ix = |a: &Affine, f: &Function| -> String {
        // Dimensions mention sizes only; sizes are parameters.
        let mut s = a.constant.to_string();
        for (n, k) in &a.terms {
            let c = f
                .params
                .iter()
                .find(|p| p.kind == ParamC::Size && p.source == n.as_str())
                .map(|p| p.cname.clone())
                .unwrap_or_else(|| "0".into());
            let _ = write!(s, " + ({k})*{c}");
        }
        s
    };
    for (n, a) in &f.dims {
        let _ = writeln!(out, "  const int64_t {n} = {};", ix(a, f));
        let _ = writeln!(out, "  if ({n} < 0) return {RET_NEGATIVE_DIMENSION};");
    }
    // The arena: one block per call, one slot per intermediate.
    out += "  int64_t atlv_total = 0;\n";
    for s in &f.slots {
        let _ = writeln!(out, "  const int64_t atlv_at_{} = atlv_total;", s.cname);
        let _ = writeln!(out, "  {{\n    int64_t atlv_n = 1;");
        for d in dims_product(f, &s.dims) {
            let _ = writeln!(
                out,
                "    if ({d} != 0 && atlv_n > INT64_MAX / {d}) return {RET_OVERFLOW};\n    atlv_n *= {d};"
            );
        }
        let _ = writeln!(
            out,
            "    if (atlv_total > INT64_MAX - atlv_n) return {RET_OVERFLOW};\n    atlv_total += atlv_n;\n  }}"
        );
    }
    let _ = writeln!(
        out,
        "  if ((uint64_t)atlv_total > SIZE_MAX / sizeof(double)) return {RET_OVERFLOW};"
    );
    let _ = writeln!(
        out,
        "  double *atlv_arena = atlv_total > 0 ? (double *)malloc((size_t)atlv_total * sizeof(double)) : NULL;"
    );
    let _ = writeln!(
        out,
        "  if (atlv_total > 0 && atlv_arena == NULL) return {RET_ALLOCATION};"
    );
    for s in &f.slots {
        let _ = writeln!(out, "  double *{0} = atlv_arena + atlv_at_{0};", s.cname);
    }
    stmts(&mut out, &f.body, 1);
    out += "  free(atlv_arena);\n  return 0;\n}\n";
    // The packed entry.
    let mut call = vec![];
    let (mut ns, mut nr, mut nrel) = (0, 0, 0);
    for p in &f.params {
        call.push(match p.kind {
            ParamC::Size => {
                ns += 1;
                format!("sz[{}]", ns - 1)
            }
            ParamC::Real => {
                nr += 1;
                format!("re[{}][0]", nr - 1)
            }
            ParamC::Tensor(_) => {
                nr += 1;
                format!("re[{}]", nr - 1)
            }
            ParamC::Relation(_) => {
                nrel += 1;
                format!("rel[{}]", nrel - 1)
            }
        });
    }
    for k in 0..f.outputs.len() {
        call.push(format!("out[{k}]"));
    }
    let _ = writeln!(
        out,
        "\nint atlpacked_entry(const int64_t *sz, const double *const *re, const uint8_t *const *rel, double *const *out) {{\n  (void)sz; (void)re; (void)rel; (void)out;\n  return {}({});\n}}",
        f.name,
        call.join(", ")
    );
    out
}

fn dims_json(dims: &[Affine]) -> serde_json::Value {
    serde_json::Value::Array(
        dims.iter()
            .map(|d| serde_json::Value::String(d.to_string()))
            .collect(),
    )
}

/// The manifest: the C function's name, parameters (with their shapes in
/// terms of the sizes), outputs and return codes.
pub fn manifest(f: &Function) -> serde_json::Value {
    let params: Vec<serde_json::Value> = f
        .params
        .iter()
        .map(|p| {
            let (kind, shape) = match &p.kind {
                ParamC::Size => ("size", vec![]),
                ParamC::Real => ("real", vec![]),
                ParamC::Tensor(d) => ("tensor", d.clone()),
                ParamC::Relation(d) => ("relation", d.clone()),
            };
            serde_json::json!({
                "c_name": p.cname, "source": p.source, "kind": kind,
                "c_type": c_type(&p.kind), "shape": dims_json(&shape),
            })
        })
        .collect();
    let outputs: Vec<serde_json::Value> = f
        .outputs
        .iter()
        .map(|(c, path, d)| serde_json::json!({"c_name": c, "leaf": path, "c_type": "double *", "shape": dims_json(d)}))
        .collect();
    serde_json::json!({
        "function": f.name,
        "packed_entry": "atlpacked_entry",
        "params": params,
        "outputs": outputs,
        "returns": {
            "0": "success",
            "1": "a size or dimension is negative",
            "2": "allocation failure",
            "3": "the intermediates' size overflows 64 bits",
        },
        "count_ops": "compile with -DATL_COUNT_OPS: uint64_t atlpacked_ops[3] = additions, multiplications, black-box calls of the last call",
    })
}
