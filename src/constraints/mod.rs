//! Affine constraint systems: the one place where index constraints are
//! represented and solved, for loop bounds (`crate::lower`) and for the
//! work cost's counting (`crate::semantics::cost`).
//!
//! * [`linear`]: affine forms `c + Σ k·v`, checked `i128` arithmetic, over
//!   names ([`crate::symbol::Symbol`]: sizes and loop variables, symbolic) or over
//!   numbered loop slots (`u32`: the cost's binders, sizes already
//!   substituted as constants);
//! * [`system`]: constraints (`f >= 0`, `f == 0`, `k | f`) and comparisons
//!   as constraints, equality solving and substitution, Fourier–Motzkin
//!   projection, and the bounds a constraint puts on one variable, as forms
//!   ([`system::ge_bound`]) or as a concrete interval ([`system::interval`]);
//! * [`bounds`]: the query lowering needs: for loop variables ordered outer
//!   to inner, each one's bounds as max/min of ceil/floor divisions of affine
//!   forms in the outer variables and the sizes, the guards placed at the
//!   outermost level where their variables are bound, and the variables an
//!   equality fixed (no loop: a definition).
//!
//! What stays with the cost model is what only counting needs: which
//! equalities to solve and which variables to eliminate so that a count is
//! exact (coefficient ±1 only: no divisibility guards, integer-exact
//! projection), the counting plans and their enumeration budget, and the
//! predicates that are not affine (relation tests, `or`, existentials).
//! Lowering, which may over-approximate an outer loop and guard inside,
//! takes any coefficient.

pub mod bounds;
pub mod linear;
pub mod system;

pub use bounds::{plan, Bound, Def, Level, LoopPlan};
pub use linear::LinForm;
pub use system::Constraint;
