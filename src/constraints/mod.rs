//! Symbolic affine constraint systems: the one place where index
//! constraints are solved, for loop bounds (`crate::lower`) and, later, for
//! counting (`crate::semantics::cost`, which still has its own concrete
//! version).
//!
//! * [`linear`]: affine forms over named variables and sizes;
//! * [`system`]: constraints (`f >= 0`, `f == 0`, `k | f`), equality
//!   solving and Fourier–Motzkin projection;
//! * [`bounds`]: the query lowering needs: for loop variables ordered outer
//!   to inner, each one's bounds as max/min of ceil/floor divisions of affine
//!   forms in the outer variables and the sizes, the guards placed at the
//!   outermost level where their variables are bound, and the variables an
//!   equality fixed (no loop: a definition).
//!
//! Everything is symbolic: a name that is not a loop variable is a
//! parameter (a size or an outer loop variable). Concrete sizes are handled
//! by substituting constants ([`linear::LinForm::substitute`]).

pub mod bounds;
pub mod linear;
pub mod system;

pub use bounds::{plan, Bound, Def, Level, LoopPlan};
pub use linear::LinForm;
pub use system::Constraint;
