//! Derivative forms inside programs (`(grad F ARG ...)` and the others, see
//! `crate::front::elaborate`): the front end reads them and asks for the
//! derivative it cannot take itself; this is the answer, the same program
//! the command of the same name prints (with the default options), and the
//! parse that supplies it.

use super::{grad, hvp, jvp, vjp};
use crate::egraph::Options;
use crate::error::Result;
use crate::front::ast::Program;
use crate::front::elaborate::DerivativeKind;
use crate::symbol::Symbol;

/// `kind`'s derivative of `prog` with respect to `wrt` (every real-valued
/// parameter when empty), as `atl-egg grad`/`jvp`/`vjp`/`hvp` print it.
pub fn derivative(kind: DerivativeKind, prog: &Program, wrt: &[Symbol]) -> Result<Program> {
    let opts = Options::default();
    let derived = match kind {
        DerivativeKind::Grad => grad(prog, wrt, &opts),
        DerivativeKind::Jvp => jvp(prog, wrt, &opts),
        DerivativeKind::Vjp => vjp(prog, wrt, &opts),
        DerivativeKind::Hvp => hvp(prog, wrt, &opts),
    }?;
    Ok(derived.program)
}

/// Read, type-check and desugar a program text (the function named
/// `function`, else the last), calls and derivative forms expanded.
pub fn parse_program_fn(text: &[u8], function: Option<&str>) -> Result<Program> {
    crate::front::parse_program_with(text, function, Some(derivative))
}
