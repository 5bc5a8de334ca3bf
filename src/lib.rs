//! atl-egg: differentiate and optimize programs in A Tensor Language (ATL)
//! by equality saturation.
//!
//! # The workflow
//!
//! Everything a user needs is at the crate root; inputs are named by `&str`
//! everywhere:
//!
//! | step | call |
//! | --- | --- |
//! | read and type-check a program | [`parse`], [`check`] |
//! | give it inputs | [`inputs`] (JSON text and sizes) |
//! | run it | [`eval`], then [`to_json`]; or [`eval_json`] for both |
//! | count its work | [`cost`] |
//! | optimize it | [`optimize`] |
//! | differentiate it | [`grad`], [`jvp`], [`vjp`], [`hvp`], [`optimize_gradient`] |
//! | print it | [`print()`] (ATL core forms), [`pretty`] (the paper's notation) |
//! | report an error | [`diagnostics::render`] |
//!
//! ```
//! use atl_egg::Options;
//!
//! // the squared norm of a vector
//! let f = atl_egg::parse("(fn norm2 ((x (tensor n R))) (sum i n (* (get x i) (get x i))))")?;
//! // its gradient, optimized
//! let g = atl_egg::grad(&f, &["x"], &Options::default())?;
//! println!("{}", atl_egg::print(&g.program));
//! // evaluated at x = [1, 2, 3] (the size n comes from the input's length)
//! let inputs = atl_egg::inputs(&g.program, r#"{"x": [1, 2, 3]}"#, &[])?;
//! let value = atl_egg::eval(&g.program, &inputs)?;
//! assert_eq!(atl_egg::to_json(&g.program, &value, &inputs)?, "[2.0, 4.0, 6.0]");
//! # Ok::<(), atl_egg::Error>(())
//! ```
//!
//! # Inside
//!
//! The crate is layered the way a program flows through it: `front`
//! (reading with positions, elaboration: type checking, desugaring to core
//! forms, unique binder names), `semantics` (values and JSON, the reference
//! evaluator, dual numbers, the paper's sparsity-aware work cost), `terms` (passes
//! over core terms shared by the optimizer and the derivatives), `egraph`
//! (ATL as an egg language, analyses, the rules of `rules/`, extraction by
//! the work cost, the phased runner), `derive` (forward and adjoint
//! derivatives), `lower` (loop nests) and `backend` (the output formats:
//! core forms, the paper's notation, JSON; C code). These modules are public only for the
//! crate's tests, benchmarks and examples and are hidden from the
//! documentation: their items may change without notice. `docs/design.md`
//! in the repository describes them and the order in which they import
//! each other.

#![warn(missing_docs)]

#[doc(hidden)]
pub mod backend;
#[doc(hidden)]
pub mod constraints;
#[doc(hidden)]
pub mod corpus;
#[doc(hidden)]
pub mod derive;
pub mod diagnostics;
#[doc(hidden)]
pub mod egraph;
pub mod error;
#[doc(hidden)]
pub mod front;
#[doc(hidden)]
pub mod limits;
#[doc(hidden)]
pub mod lower;
pub mod npz;
#[doc(hidden)]
pub mod optimizer;
#[doc(hidden)]
pub mod rng;
#[doc(hidden)]
pub mod semantics;
#[doc(hidden)]
pub mod stack;
pub mod symbol;
#[doc(hidden)]
pub mod terms;

pub use backend::{compile, Compiled};
pub use derive::Derived;
pub use error::{Error, ErrorKind, Pos, Result};
pub use front::{Param, ParamKind, Program, Type};
pub use optimizer::{Optimized, Options, Stats};
pub use semantics::value::{Inputs, Value};
pub use stack::{stack_for_depth, with_big_stack, with_stack_for};
pub use symbol::Symbol;

/// How deep a program text nests: its deepest parenthesis (comments, from
/// `;` to the end of the line, skipped). A bound on the depth of every
/// term made from the program, up to a factor the passes' stack allows for.
pub fn nesting_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut comment) = (0usize, 0usize, false);
    for b in text {
        match b {
            b'\n' => comment = false,
            _ if comment => {}
            b';' => comment = true,
            b'(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Read, type-check and desugar a program text: `(fn NAME (PARAM ...) BODY)`.
///
/// Errors are syntax or type errors with a position; render them with
/// [`diagnostics::render`].
///
/// ```
/// let f = atl_egg::parse("(fn f ((x R)) (* x x))").unwrap();
/// assert_eq!(atl_egg::check(&f), "(fn f ((x R)) -> R)");
/// ```
pub fn parse(text: &str) -> Result<Program> {
    derive::forms::parse_program_fn(text.as_bytes(), None)
}

/// Parse and type-check the function `name` of a program text (a file may
/// define several functions, each calling those before it; [`parse`] takes
/// the last one). Calls are expanded: the result is one function.
///
/// ```
/// let text = "(fn sq ((x R)) (* x x))\n(fn f ((y R)) (+ (sq y) 1))";
/// let f = atl_egg::parse_fn(text, "sq").unwrap();
/// assert_eq!(atl_egg::check(&f), "(fn sq ((x R)) -> R)");
/// ```
pub fn parse_fn(text: &str, name: &str) -> Result<Program> {
    derive::forms::parse_program_fn(text.as_bytes(), Some(name))
}

/// The signature of a checked program, `(fn NAME (PARAMS) -> TYPE)`, as
/// `atl-egg check` prints it.
pub fn check(prog: &Program) -> String {
    backend::sexp::signature(prog)
}

/// The inputs of `prog`: values from a JSON object (parameter names to
/// values: reals, nested arrays, pairs as 2-arrays, relations as booleans;
/// `null` for NaN, `1e999`/`-1e999` for infinities) and sizes;
/// a size not given is taken from an input whose dimension is that size.
///
/// ```
/// let f = atl_egg::parse("(fn f ((n size) (x (tensor n R))) (sum i n (get x i)))").unwrap();
/// let inputs = atl_egg::inputs(&f, r#"{"x": [1, 2]}"#, &[("n", 2)]).unwrap();
/// let v = atl_egg::eval(&f, &inputs).unwrap();
/// assert_eq!(atl_egg::to_json(&f, &v, &inputs).unwrap(), "3.0");
/// ```
pub fn inputs(prog: &Program, json: &str, sizes: &[(&str, i64)]) -> Result<Inputs> {
    let json: serde_json::Value = semantics::json::parse_json(json)
        .map_err(|e| Error::input(format!("malformed JSON inputs: {e}")))?;
    let given: semantics::value::Sizes =
        sizes.iter().map(|(k, v)| (Symbol::from(*k), *v)).collect();
    let sizes = semantics::sizes::resolve_sizes(prog, &given, Some(&json))?;
    semantics::json::inputs_from_json(prog, &json, &sizes, true)
}

/// Evaluate `prog` on `inputs` (IEEE doubles; a `get` out of range reads
/// zero). Deeply nested programs need a large stack: see [`with_big_stack`].
pub fn eval(prog: &Program, inputs: &Inputs) -> Result<Value> {
    semantics::eval::evaluate(prog, inputs)
}

/// A value of `prog`'s result as JSON text (`[1.0, 2.5]`; pairs as
/// 2-arrays; NaN as `null`, infinities as `1e999` and `-1e999`).
pub fn to_json(prog: &Program, value: &Value, inputs: &Inputs) -> Result<String> {
    let (value, ret) = semantics::stored::result_out(prog, value, inputs)?;
    semantics::json::value_to_json_string(&value, &ret, &inputs.sizes)
}

/// [`inputs`], [`eval`] and [`to_json`] in one call: the value of `prog` on
/// the inputs in `json`, as JSON text.
///
/// ```
/// let f = atl_egg::parse("(fn f ((x (tensor n R))) (sum i n (* (get x i) (get x i))))")?;
/// let g = atl_egg::grad(&f, &[], &atl_egg::Options::default())?;
/// assert_eq!(atl_egg::eval_json(&g.program, r#"{"x": [1, -2]}"#, &[])?, "[2.0, -4.0]");
/// # Ok::<(), atl_egg::Error>(())
/// ```
pub fn eval_json(prog: &Program, json: &str, sizes: &[(&str, i64)]) -> Result<String> {
    let inputs = inputs(prog, json, sizes)?;
    to_json(prog, &eval(prog, &inputs)?, &inputs)
}

/// The paper's work cost of `prog` (additions, multiplications and
/// black-box calls) at the sizes and relations of `inputs`.
///
/// ```
/// let f = atl_egg::parse("(fn f ((x (tensor n R))) (sum i n (* (get x i) (get x i))))").unwrap();
/// let at = atl_egg::inputs(&f, "{}", &[("n", 10)]).unwrap_err(); // x is missing
/// assert!(at.msg.contains("missing input 'x'"));
/// let mut inputs = atl_egg::Inputs::default();
/// inputs.sizes.insert("n".into(), 10);
/// assert_eq!(atl_egg::cost(&f, &inputs).unwrap(), 19); // 10 products, 9 additions
/// ```
pub fn cost(prog: &Program, inputs: &Inputs) -> Result<u128> {
    semantics::cost::cost(prog, &inputs.sizes, &inputs.relations)
}

/// Optimize `prog` by equality saturation: an equal program (up to
/// floating-point reassociation) that costs no more at every size checked,
/// and the statistics of the run.
pub fn optimize(prog: &Program, opts: &Options) -> Result<Optimized> {
    optimizer::optimize(prog, opts)
}

/// The names of inputs to differentiate, checked (see
/// [`derive::forward::resolve_wrt`]): each a real-valued input of `prog`,
/// none twice; empty means every real input, in parameter order.
pub fn resolve_wrt(prog: &Program, wrt: &[&str]) -> Result<Vec<Symbol>> {
    let wrt: Vec<Symbol> = wrt.iter().map(|w| Symbol::from(*w)).collect();
    derive::forward::resolve_wrt(prog, &wrt)
}

/// The gradient of a function returning `R` with respect to the inputs
/// `wrt` (all real inputs when empty), optimized: the original parameters;
/// it returns one gradient, or several as right-nested pairs in `wrt` order.
pub fn grad(prog: &Program, wrt: &[&str], opts: &Options) -> Result<Derived> {
    derive::grad(prog, &resolve_wrt(prog, wrt)?, opts)
}

/// The forward derivative (Jacobian-vector product): the original
/// parameters then one tangent per `wrt` input (named after it); returns
/// the output's tangent.
pub fn jvp(prog: &Program, wrt: &[&str], opts: &Options) -> Result<Derived> {
    derive::jvp(prog, &resolve_wrt(prog, wrt)?, opts)
}

/// The reverse derivative (vector-Jacobian product): the original
/// parameters then one cotangent of the output's type; returns what
/// [`grad`] returns.
pub fn vjp(prog: &Program, wrt: &[&str], opts: &Options) -> Result<Derived> {
    derive::vjp(prog, &resolve_wrt(prog, wrt)?, opts)
}

/// The Hessian-vector product of a function returning `R` (forward over
/// reverse): the original parameters then one direction per `wrt` input;
/// returns the derivative of the gradient along the directions.
pub fn hvp(prog: &Program, wrt: &[&str], opts: &Options) -> Result<Derived> {
    derive::hvp(prog, &resolve_wrt(prog, wrt)?, opts)
}

/// The call the design names: the optimized gradient program (the same as
/// [`grad`]).
///
/// ```
/// let f = atl_egg::parse(
///     "(fn dot ((x (tensor n R)) (y (tensor n R))) (sum i n (* (get x i) (get y i))))",
/// )?;
/// let g = atl_egg::optimize_gradient(&f, &["x"], &atl_egg::Options::default())?;
/// print!("{}", atl_egg::pretty(&g.program));
/// let inputs = atl_egg::inputs(&g.program, r#"{"x": [1, 2], "y": [3, 4]}"#, &[])?;
/// let dx = atl_egg::eval(&g.program, &inputs)?;
/// assert_eq!(atl_egg::to_json(&g.program, &dx, &inputs)?, "[3.0, 4.0]");
/// # Ok::<(), atl_egg::Error>(())
/// ```
pub fn optimize_gradient(prog: &Program, wrt: &[&str], opts: &Options) -> Result<Derived> {
    grad(prog, wrt, opts)
}

/// The program in ATL syntax, core forms only: what the command line
/// prints, and valid input to [`parse`].
pub fn print(prog: &Program) -> String {
    backend::sexp::program_to_string(prog)
}

/// The program in the paper's notation, one binding a line: `⊞` for
/// `gen`, `Σ` for `sum`, `[p]·e` for Iverson brackets, `let … in`.
pub fn pretty(prog: &Program) -> String {
    backend::pretty::program(prog)
}
