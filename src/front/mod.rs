//! Front end: text to a typed, desugared core [`ast::Program`].

pub mod affine;
pub mod ast;
pub mod blackbox;
pub mod elaborate;
pub mod names;
pub mod print;
pub mod readable;
pub mod reader;
pub mod subst;
pub mod types;

pub use affine::Affine;
pub use ast::{CmpOp, Expr, Func, Param, ParamKind, Pred, Program, Real, Type};

/// Read, type-check and desugar a program text: its last function, calls
/// expanded.
pub fn parse_program(text: &[u8]) -> crate::error::Result<Program> {
    parse_program_fn(text, None)
}

/// Read, type-check and desugar a program text: the function named
/// `function` (the last one when `None`), calls expanded.
pub fn parse_program_fn(text: &[u8], function: Option<&str>) -> crate::error::Result<Program> {
    parse_program_with(text, function, None)
}

/// As [`parse_program_fn`], with derivative forms expanded by `deriver`
/// (the library's parse, `crate::derive::forms`, supplies one; without it
/// a derivative form is an error).
pub fn parse_program_with(
    text: &[u8],
    function: Option<&str>,
    deriver: Option<elaborate::Deriver>,
) -> crate::error::Result<Program> {
    let sexps = reader::read(text)?;
    elaborate::elaborate_fn_with(&sexps, function, deriver)
}
