//! The optimizer: what drives the e-graphs of [`crate::egraph`] over a
//! program.
//!
//! * [`bindings`]: the entry point [`optimize`], binding by binding: each
//!   binding's definition a unit in an e-graph of its own, the let-level
//!   passes of [`crate::terms::letpasses`] between them (inlining and
//!   sharing across bindings), then the whole program when it is small;
//! * [`phases`]: one program through the phases (`normalize`, then
//!   `simplify`), one e-graph each, extracted by the work cost;
//! * [`guard`]: of the candidates, the cheapest that costs no more than the
//!   input at every checked sample.

pub mod bindings;
pub mod guard;
pub mod phases;

pub use crate::egraph::runner::Options;
pub use bindings::optimize;
pub use guard::Stats;

/// An optimized program and the statistics of its optimization.
#[derive(Clone, Debug)]
pub struct Optimized {
    /// The optimized program.
    pub program: Program,
    /// The statistics of its phases.
    pub stats: Stats,
}

use crate::front::ast::Program;
