//! The state the differentiation rules need in the e-graph analysis
//! ([`crate::egraph::analysis::AtlAnalysis::diff`]), kept apart from the
//! optimizer's own: the optimizer leaves it empty.

use crate::egraph::analysis::{AtlAnalysis, NameSet};
use crate::front::affine::Affine;
use crate::symbol::Symbol;
use std::collections::HashMap;

/// The analysis a differentiation e-graph starts from: the index extents,
/// and classes holding a variable pruned to it; sigma and the types are
/// added by the caller.
pub fn analysis(extents: HashMap<Symbol, Affine>) -> AtlAnalysis {
    AtlAnalysis {
        extents,
        diff: DiffContext {
            prune_to_variables: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Sigma and the types of the derivative being taken.
#[derive(Default, Clone, Debug)]
pub struct DiffContext {
    /// The tangent name of each differentiated variable (the paper's
    /// sigma: x -> dx); add with
    /// [`crate::egraph::analysis::AtlAnalysis::add_tangent`].
    pub tangents: HashMap<Symbol, Symbol>,
    /// The bits of the tangent names (values of `tangents`).
    pub tangent_set: NameSet,
    /// The types of variables (inputs, bindings, cotangents made by the
    /// adjoint rules) and of tangents.
    pub types: HashMap<Symbol, crate::front::ast::Type>,
    /// Real inputs that are not differentiated, with their types (their
    /// derivative is the zero of that type).
    pub constants: HashMap<Symbol, crate::front::ast::Type>,
    /// Prune classes holding a variable to that variable (see
    /// `AtlAnalysis::modify`): in differentiation a class holding `(var x)`
    /// is `x`.
    pub prune_to_variables: bool,
}
