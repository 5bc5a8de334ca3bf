//! Term-level passes over core ATL, outside any e-graph: shared by the
//! optimizer ([`crate::egraph`]) and the derivatives ([`crate::derive`]),
//! which both sit above this layer.
//!
//! * [`normalize`]: A-normal form, let-lifting ("tensor SSA"), dead bindings;
//! * [`letpasses`]: the let-level passes of the optimizer (inlining, sharing,
//!   broadcast dimensions, `[false]` terms, brackets of empty products);
//! * [`brackets`]: the existential bracket of a sum whose bracket fixes its
//!   index, for an addition above it;
//! * [`canonical`]: index binders renamed by nesting depth and extent;
//! * [`extents`]: the extent of every index binder of a term;
//! * [`shape`]: a term up to the values of its constant indices;
//! * [`size`]: the number of nodes of a term.

pub mod brackets;
pub mod canonical;
pub mod extents;
pub mod letpasses;
pub mod normalize;
pub mod shape;
pub mod size;
