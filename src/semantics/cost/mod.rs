//! The paper's work cost (Figure "(Work) Cost Model"; docs/language.md, "Cost"), with
//! concrete sizes and relation values, computed by counting rather than by
//! running the loops.
//!
//! # The rules
//!
//! `x`, `c`: 0; `(* a b)`: 1+a+b; `(F a)`: 1+a; pair/let: a+b; fst/snd/get:
//! the subject; `(iverson p e)`: `e` where `p` holds, else 0; `(gen i D e)`:
//! Σ_i e; `(+ a b)`: a+b+[p_a ∧ p_b] (p_x is x's predicate when x is literally
//! an iverson, else true); a maximal chain of directly nested sums whose body
//! is `(iverson p e)` (else p = true, e = body): Σ over the tuples where p
//! holds of (1 + e), minus 1 if any tuple holds.
//!
//! # Design: a cost is a signed sum of lattice-point counts
//!
//! Every rule is linear except the "minus one if any tuple holds" of a sum
//! chain, and that one is `-1` times the indicator of an existential
//! predicate. So the cost of any sub-term, as a function of the index
//! variables bound *inside* the costed term, is
//!
//! ```text
//!     k + Σ_t  coef_t · #{ loop tuple of t : guard_t holds }
//! ```
//!
//! where a guard is a conjunction of predicates (affine comparisons, `or`,
//! relation tests, existentials). The rules (`Compiler::cost` in `rules`,
//! with the symbolic algebra) build this symbolic form bottom-up:
//!
//! * `*`, `F`, pair, let, get: add the parts (constants fold, terms append);
//! * `(iverson p e)`: conjoin `p` to every term of `e` (a zero-cost `e` is 0
//!   and `p` is never looked at, as in the reference);
//! * `(+ a b)`: the parts plus the term `1 · #{() : p_a ∧ p_b}`;
//! * `gen i D`: every term whose guard mentions `i` gets `i ∈ [0, D)` as a
//!   loop; every other term is multiplied by `D` (checked);
//! * a sum chain over `i1..ik` with predicate `p`: the body's terms, plus one
//!   (the chain's own `1 +`), lifted through the chain like `gen` with `p`
//!   conjoined, plus the term `-1 · [∃ i1..ik : p]`.
//!
//! Free index variables of an open term take their values from the
//! [`CostCtx`] and are substituted as constants, like sizes; every binder
//! inside the term gets a numbered *slot*. Predicates live in an arena, their
//! comparisons as constraints of the shared constraint module
//! (`crate::constraints`, over slots, checked `i128`), and any predicate that
//! mentions no slot is decided at once. Existentials (`exists` and the sum-chain
//! indicator) are simplified when built: equalities with coefficient ±1 on a
//! bound variable are solved (with a range check), and variables whose
//! constraints are all comparisons with coefficient ±1 are eliminated by
//! Fourier–Motzkin (exact for unit coefficients), so that e.g.
//! `∃j<n. j<=i` becomes `0<=i`. What remains is an opaque predicate with a
//! precomputed counting `Plan`.
//!
//! Counting one term (`Compiler::finish`, `build_plan`,
//! `count`): a guard conjunct that is a small `or` of comparisons is split
//! by inclusion–exclusion (#(G∧(A∨B)) = #(G∧A) + #(G∧B) − #(G∧A∧B)), and an
//! existential over one by distribution, so that they too are counted, not
//! enumerated. Then equalities (`==` with coefficient ±1 on a loop variable,
//! in the top-level conjunction) are solved instead of enumerated, with
//! range checks; loop variables that no constraint mentions contribute a
//! factor; one remaining variable whose constraints are all affine
//! comparisons is counted by intersecting intervals (floor/ceil division for
//! other coefficients); the others are enumerated, outermost first, each
//! narrowed to the interval its closed comparisons allow, with every
//! constraint checked at the first level where all its variables are known.
//! A relation test also bounds its indices by the relation's dimensions.
//! Other `or`s, relation tests and what is left of existentials are
//! evaluated per tuple. Every enumerated value and every interval count
//! takes one unit of a budget of [`ENUMERATION_BUDGET`]; beyond it costing
//! fails with an evaluation error ("too large to cost"), so nothing hangs
//! (a level whose whole range exceeds what is left fails at once). Terms
//! with the same loops and guard are merged before counting (e.g. a body's
//! constant cost and the chain's own `1 +`).
//!
//! The symbolic form of a term nested `d` deep under predicates on an
//! enclosing loop variable has size `O(d²)`. Past `SYMBOLIC_WORK_LIMIT` the
//! compiler gives up and evaluates a tree (`Ir`) directly instead, as the
//! reference does: `gen` and sum chains whose body does not depend on their
//! variables multiply (chains count with a `Plan`), the others enumerate
//! within the same budget.
//!
//! Typical programs at size 10000 cost in microseconds to a fraction of a
//! millisecond (release build): a triangular `gen`/`sum` enumerates the
//! outer variable and counts the inner one; a diagonal `(iverson (== i j)
//! ..)` is solved; matrix products are constants times products of ranges.
//! A small term costs in about a microsecond.
//!
//! Errors follow the reference: a gen/sum dimension that is negative at the
//! given sizes is an evaluation error wherever it occurs; an `exists`
//! dimension only where its predicate is consulted; a relation test with no
//! relation value is an input error naming the relation; index arithmetic or
//! cost overflow is an evaluation error, never a wrap.
//!
//! # Layout
//!
//! [`spec`](cost_by_enumeration): the rules as written, by enumeration (the
//! specification and the tests' oracle); `rules`: the same rules once more,
//! as one walk generic over what a cost is (`Algebra`), which the two
//! compiled paths implement: `symbolic` (the signed sum of counts, counted
//! by `finish`) and `direct` (the tree fallback, `run`); `compiler`: the
//! state they share (slots, compiled predicates, existentials);
//! `predicates`: the predicate arena; `plan`: counting plans; `slots`: the
//! shared constraint module over slots, its results as the cost's errors
//! (a thin layer, no second copy). Affine forms,
//! comparisons, equality solving, Fourier–Motzkin and interval narrowing
//! are `crate::constraints`' (over slots); this module keeps the choices
//! that make a count exact (solve and eliminate only with coefficient ±1)
//! and fast (plans, the budget).

mod closed;
mod compiler;
mod direct;
mod plan;
mod predicates;
mod rules;
mod slots;
mod spec;
mod symbolic;
#[cfg(test)]
mod tests;

use closed::*;
use compiler::*;
use direct::*;
use plan::*;
pub use predicates::MAX_DISJUNCTS;
use predicates::*;
use rules::*;
use slots::*;
use symbolic::*;

pub use spec::cost_by_enumeration;

use super::value::{type_size, Relation, Sizes};
use crate::constraints::system::{decide_closed, eliminate, solve_for, Solved};
use crate::constraints::Constraint;
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{CmpOp, Expr, Pred, Program, Type};
use crate::symbol::Symbol;
use std::collections::HashMap;

/// How many loop values (enumerated index values and interval counts) one
/// costing may visit before it gives up.
pub const ENUMERATION_BUDGET: u64 = 300_000_000;

/// Where an open term is costed: sizes, relation values, and the values of
/// index variables bound outside the term.
#[derive(Clone, Copy, Debug)]
pub struct CostCtx<'a> {
    pub sizes: &'a Sizes,
    pub relations: &'a HashMap<Symbol, Relation>,
    /// Values of free index variables; later entries shadow earlier ones.
    /// Index variables shadow sizes of the same name.
    pub bindings: &'a [(Symbol, i64)],
}

impl<'a> CostCtx<'a> {
    pub fn new(sizes: &'a Sizes, relations: &'a HashMap<Symbol, Relation>) -> CostCtx<'a> {
        CostCtx {
            sizes,
            relations,
            bindings: &[],
        }
    }

    pub fn with_bindings(self, bindings: &'a [(Symbol, i64)]) -> CostCtx<'a> {
        CostCtx { bindings, ..self }
    }
}

/// The work cost of a whole program at concrete sizes. Every size of the
/// program must be given and non-negative (input errors otherwise).
pub fn cost(prog: &Program, sizes: &Sizes, relations: &HashMap<Symbol, Relation>) -> Result<u128> {
    sizes.require(&prog.sizes)?;
    cost_expr(&prog.body, &CostCtx::new(sizes, relations))
}

/// `cost` plus the number of reals in the real-valued inputs and in the
/// output (a negative dimension counts 0 there, as in the reference). A
/// tensor stored by a relation's pattern counts one real per tuple.
pub fn io_cost(
    prog: &Program,
    sizes: &Sizes,
    relations: &HashMap<Symbol, Relation>,
) -> Result<u128> {
    let mut n = cost(prog, sizes, relations)?;
    for (x, t) in prog.real_params() {
        let size = stored_size(prog.stored.param(x), t, sizes, relations)?;
        n = n.checked_add(size).ok_or_else(too_large)?;
    }
    n.checked_add(result_size(prog, &prog.ret, 0, sizes, relations)?)
        .ok_or_else(too_large)
}

/// The reals of a value of type `t`, stored by relation `rel` or dense.
fn stored_size(
    rel: Option<Symbol>,
    t: &Type,
    sizes: &Sizes,
    relations: &HashMap<Symbol, Relation>,
) -> Result<u128> {
    match rel.and_then(|r| relations.get(&r)) {
        Some(r) => Ok(super::stored::nnz(r) as u128),
        None => type_size(t, sizes),
    }
}

/// The reals of the result's part `t`, whose first leaf is leaf `first`.
fn result_size(
    prog: &Program,
    t: &Type,
    first: usize,
    sizes: &Sizes,
    relations: &HashMap<Symbol, Relation>,
) -> Result<u128> {
    match t {
        Type::Pair(a, b) if !prog.stored.ret.is_empty() => {
            let na = crate::front::ast::leaf_count(a);
            let x = result_size(prog, a, first, sizes, relations)?;
            let y = result_size(prog, b, first + na, sizes, relations)?;
            x.checked_add(y).ok_or_else(too_large)
        }
        _ => stored_size(prog.stored.leaf(first), t, sizes, relations),
    }
}

/// The work cost of an open term: free index variables take their values
/// from `ctx.bindings`, names not bound there from `ctx.sizes`.
pub fn cost_expr(e: &Expr, ctx: &CostCtx) -> Result<u128> {
    cost_expr_budget(e, ctx, ENUMERATION_BUDGET)
}

/// [`cost_expr`] with a smaller enumeration budget (the optimizer's
/// extraction costs many terms and prefers a quick failure to a slow count).
pub fn cost_expr_budget(e: &Expr, ctx: &CostCtx, budget: u64) -> Result<u128> {
    let mut c = Compiler::new(ctx, budget);
    let symbolic = c.cost::<Sym>(e).and_then(|sym| c.finish(sym));
    if !c.gave_up {
        return symbolic;
    }
    // Too big to keep symbolically (deep nesting under open predicates):
    // evaluate directly, like the reference.
    cost_direct(e, ctx, budget)
}

fn cost_direct(e: &Expr, ctx: &CostCtx, budget: u64) -> Result<u128> {
    let mut c = Compiler::new(ctx, budget);
    let tree: Tree = c.cost(e)?;
    let total = c.run(&tree.ir)?;
    u128::try_from(total).map_err(|_| internal("negative cost"))
}

pub(super) fn overflow() -> Error {
    Error::eval("index arithmetic overflows 128-bit integers while costing")
}

pub(super) fn too_large() -> Error {
    Error::eval("the cost is too large to represent")
}

pub(super) fn internal(what: &str) -> Error {
    Error::eval(format!("internal error in the cost model: {what}"))
}
