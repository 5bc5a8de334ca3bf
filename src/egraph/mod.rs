//! Equality saturation over ATL with egg.
//!
//! # Representation of binders
//!
//! Binders (`let`, `gen`, `sum`, `exists`) keep their **names** in the
//! e-graph, as children that are name leaves (`(gen i @n body)`), and a
//! variable reference is `(var x)`. We weighed three options (see also
//! docs/design.md, "Binders in the e-graph"):
//!
//! * explicit substitution nodes pushed down by rules (egg's `lambda.rs`):
//!   complete, but it needs a push-down rule per form and sort (expressions,
//!   predicates, index expressions) and multiplies the e-graph; capture
//!   avoidance then renames with e-class ids;
//! * de Bruijn indices: no capture, but shifting rules on every
//!   binder-crossing rewrite, and index expressions (affine forms over
//!   several bound indices) would need shifting inside their leaves;
//! * **substituting on a representative term** (what we do): a Rust applier
//!   extracts the smallest term of the class being substituted into
//!   ([`analysis::smallest`]), substitutes in Rust with capture avoidance
//!   ([`crate::front::subst`]), and adds the result. It is cheap and simple;
//!   it misses the other members of that class, which later iterations
//!   partly recover as the smallest term changes.
//!
//! Named binders are workable because the front end makes every binder name
//! unique: substitution then almost never needs to rename, rules that move a
//! binder (let-lifting out of `gen`) keep its name, and the extent of an
//! index variable can be kept in one global map keyed by name
//! ([`analysis::AtlAnalysis::extents`]). Names made by appliers come from
//! the one name supply, [`crate::front::names`] (`base#id`, a name no user can
//! write), keyed by rule and matched classes so that reapplying a rule makes
//! the same names. Before saturation the optimizer renames
//! index binders canonically, by nesting depth and extent
//! ([`crate::terms::canonical::canonical_binders`]): loops equal up to the names of their
//! indices then become the same term and share an e-class (a cheap, partial
//! alpha-equivalence); one name still means one extent.
//!
//! # Binders of the adjoint
//!
//! The reverse-mode rules add one binder, `(dlet x d s)`, which binds the
//! *tangent* of `x` (sigma's name for it, kept in the analysis) rather than
//! a name written in the node, and two forms that hide names: `(coeff P s)`
//! mentions no tangent (a coefficient of a linear form does not depend on
//! the tangents), `(drop x s)` not the tangent of `x`. The free-name analysis
//! says so, and the conditions `tangent-free`, `tangent-not-free`,
//! `root-not-free` read it. Two prunings keep the union-merged free names
//! usable there: a class known to be a constant is its literal and mentions
//! nothing, and (in differentiation) a class holding `(var x)` is `x` and
//! mentions only `x` (see `analysis::modify`).
//!
//! # Modules
//! * [`language`]: the egg language and conversion to and from core syntax;
//! * [`context`]: the differentiation state the analysis keeps for the
//!   forms of differentiation (tangents, types), empty in the optimizer;
//! * [`analysis`]: free names (merged by union), smallest terms, constant
//!   folding, index leaves, truth of predicates from index extents;
//! * [`rules`]: the rule files of `rules/` (data, rule sets by tag) and the
//!   one registry of named Rust conditions and appliers, the optimizer's and
//!   the differentiation rules' alike;
//! * [`extract`]: the paper's sparsity-aware work cost as an egg
//!   `CostFunction`;
//! * [`runner`]: the limits of a run, its statistics, and the samples
//!   terms are costed at;
//! * [`bounded`]: the rewrite scheduler that holds the node limit.
//!
//! The optimizer that drives these e-graphs (per-binding units, phases,
//! the guard) is [`crate::optimizer`].

pub mod analysis;
pub mod bounded;
pub mod context;
pub mod extract;
pub mod language;
pub mod rules;
pub mod runner;

pub use runner::Options;
