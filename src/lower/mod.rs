//! Lowering core ATL to the loop IR ([`ir`]).
//!
//! The program is lowered as elaborated (no let-lifting: lifting a binding
//! out of a bracketed loop body would run it where the bracket is false,
//! which the cost model does not count). Values are flattened into their
//! leaves (struct of arrays): `[n](R × [m]R)` is two buffers `[n]` and
//! `[n][m]`. What runs is what the paper's cost model counts:
//!
//! * a chain of nested `sum`s with an `iverson` body becomes loops whose
//!   bounds come from the bracket's affine conjuncts ([`crate::constraints`]):
//!   an equality on a sum variable removes its loop, inequalities bound the
//!   loops, other conjuncts are guards at the level where their variables
//!   are bound; the summand runs only where the bracket holds, and the
//!   first term needs no addition;
//! * `(+ [p0]e0 [p1]e1)` counts its addition only where both hold;
//!   `(iverson p e)` runs `e` only where `p` holds (a tensor `e` is zero
//!   filled where it does not);
//! * `let` runs once where it stands: a scalar is a C local, a tensor a
//!   slot of the per-call arena (a binding inside a loop reuses its slot);
//!   a binding that is a view (`x`, `(get x i)`, `(fst x)`) is not copied;
//! * an out-of-range `get` reads zero: every access is guarded by its
//!   range unless its index is a loop variable over exactly that range;
//! * loop order and fusion change only memory traffic, never which terms
//!   are added or their order per element: a gen over a reduction whose
//!   accesses are strided is interchanged (`order.rs`), a let-bound matrix
//!   read by columns is stored transposed (`layout.rs`), and a let spine's
//!   gens over one extent run as one loop over rows (`fuse.rs`);
//! * a loop whose iterations write disjoint rows, and a large outer sum,
//!   run on all cores (`parallel.rs`);
//! * a gen of a gen over a sum of products of two tensor reads (a matrix
//!   product at any strides) runs as one call of a tiled kernel
//!   (`contract.rs`); a sum of such products, and such a product under a
//!   sum, are first rewritten into that shape (`expose.rs`);
//! * a relation tested at every point of a gen over its dimensions is read
//!   from a dense mask built on entry (`mask.rs`);
//! * a row loop whose body opens with a short sum (a convolution's taps)
//!   runs by blocks of rows, the sum's loops first with the rows innermost
//!   (`tile.rs`), adding a few taps per pass over the block (`jam.rs`);
//! * a loop whose body reads out of range at its edges (a stencil) runs as
//!   three loops, the interior one without the range guards (`edges.rs`);
//! * a loop whose body tests a bracket that changes at a few points of its
//!   range (a band) runs as one loop per piece between them, each without
//!   those tests (`pieces.rs`);
//! * a let-bound matrix that is zero outside a narrow band around its
//!   diagonal is stored by diagonals (`band.rs`);
//! * a gen over a band sum whose taps move with the row (a correlation)
//!   runs its interior rows with the sum re-indexed by its offset, so its
//!   bounds are fixed (`skew.rs`);
//! * a loop whose body tests divisibility by a few (`exists` over
//!   `i == 2j`) runs by blocks of residues, each copy without those tests
//!   (`residue.rs`);
//! * a loop that writes large outputs in order stores them with streaming
//!   stores, which do not read the lines they write (`stream.rs`).
//!
//! Where each part lives: the function's frame (parameters, results,
//! dimensions, arena slots) in `frame.rs`; expressions, lets and stores in
//! `expr.rs`; sum chains in `sum.rs`; predicates in `pred.rs` (and what
//! an enclosing bracket already established in `facts.rs`); values in
//! `value.rs`; the C text they all emit through in `emit.rs`.

mod band;
mod contract;
mod edges;
mod emit;
mod expose;
mod expr;
mod facts;
mod frame;
mod fuse;
pub mod ir;
mod jam;
mod layout;
mod mask;
mod order;
pub(crate) mod parallel;
mod pieces;
mod pred;
mod prefetch;
mod relation;
mod residue;
mod skew;
mod stored;
mod stream;
mod sum;
mod tile;
mod value;

use crate::constraints::LinForm;
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::Program;
use crate::front::types::TypeEnv;
use crate::symbol::Symbol;
pub use emit::{int_literal, real_literal, sanitize};
use ir::{statements, Function, Slot, Stmt};
use std::cell::RefCell;
use std::collections::HashMap;
use value::V;

/// Lower a program to the loop IR.
pub fn lower(prog: &Program) -> Result<Function> {
    let mut lw = Lowerer::default();
    let mut f = lw.function(prog)?;
    // The buffers a loop may accumulate into: slots and (dense) outputs.
    let mut sized = f.slots.clone();
    for (k, (cname, _, dims)) in f.outputs.iter().enumerate() {
        if !f.stored_outputs.iter().any(|(o, _)| *o == k) {
            sized.push(Slot {
                cname: cname.clone(),
                dims: dims.clone(),
            });
        }
    }
    parallel::parallelize(&mut f.body, &lw.disjoint, &lw.scratch, &sized, &f.dims);
    let budget = (statements(&f.body) * CODE_GROWTH).max(CODE_FLOOR);
    within(&mut f.body, budget, |b| pieces::split(b, &lw.bracket_cmps));
    within(&mut f.body, budget, tile::block_rows);
    within(&mut f.body, budget, |b| edges::split(b, &lw.range_guards));
    within(&mut f.body, budget, |b| jam::taps(b));
    within(&mut f.body, budget, |b| {
        residue::split(b, &lw.mod_conds.borrow())
    });
    let dense: Vec<String> = (f.outputs.iter().enumerate())
        .filter(|(k, _)| !f.stored_outputs.iter().any(|(o, _)| o == k))
        .map(|(_, (cname, _, _))| cname.clone())
        .collect();
    // The outputs' numbers of reals, where every dimension is a local.
    let sizes: Vec<(String, String)> = (f.outputs.iter())
        .filter(|(cname, _, _)| dense.contains(cname))
        .filter_map(|(cname, _, dims)| {
            let mut parts = vec!["(int64_t)1".to_string()];
            for d in dims {
                parts.push(f.dims.iter().find(|(_, a)| a == d)?.0.clone());
            }
            Some((cname.clone(), parts.join(" * ")))
        })
        .collect();
    within(&mut f.body, budget, |b| stream::split(b, &dense));
    within(&mut f.body, budget, |b| stream::split_rows(b, &sizes));
    Ok(f)
}

/// How much code the schedules applied after lowering (pieces where a
/// bracket changes, blocks of rows, loops split at their edges, unrolled by
/// residues, streamed outputs) may make of a function: at most this many
/// times the statements it had, and [`CODE_FLOOR`] statements whatever it
/// had. Each schedule copies loop bodies, and copies of copies multiply: a
/// small program whose brackets nest could otherwise give tens of thousands
/// of lines of C that take the C compiler minutes. A schedule that would
/// take the function past the budget is not applied to it; the values and
/// the operations executed are the same either way, only the speed differs.
const CODE_GROWTH: usize = 16;
/// See [`CODE_GROWTH`].
const CODE_FLOOR: usize = 4096;

/// Apply `schedule` to `body` unless it leaves more than `budget`
/// statements ([`CODE_GROWTH`]), in which case `body` is left as it was.
fn within(body: &mut Vec<Stmt>, budget: usize, schedule: impl FnOnce(&mut Vec<Stmt>)) {
    let before = body.clone();
    schedule(body);
    if statements(body) > budget {
        *body = before;
    }
}

#[derive(Default)]
pub(crate) struct Lowerer {
    /// C names of sizes and index variables.
    names: HashMap<Symbol, String>,
    /// Index variables: the C local of the dimension `D` such that the
    /// variable is in `[0, D)` wherever code that reads it runs. A name in
    /// `names` but not here is a size.
    ranges: HashMap<Symbol, String>,
    /// The indices of a lazy view being read: the index form (over index
    /// variables and sizes) each stands for.
    lazy_args: HashMap<Symbol, LinForm>,
    /// The index forms the C code evaluates, checked on entry (see
    /// [`ir::IndexCheck`]); a set, in first-use order.
    checks: RefCell<Vec<ir::IndexCheck>>,
    /// Index variables whose range is exactly `[0, D)`: `D`.
    full_range: HashMap<Symbol, Affine>,
    /// Values of variables in scope.
    vals: HashMap<Symbol, V>,
    tenv: TypeEnv,
    dims: Vec<(String, Affine)>,
    slots: Vec<Slot>,
    /// Permuted relation layouts the loops iterate (built on entry).
    permuted: Vec<ir::PermutedRelation>,
    /// Loop variables whose loop iterates a relation's stored tuples.
    driven: HashMap<Symbol, relation::DrivenLevel>,
    /// Conjuncts known true where the code being lowered runs
    /// ([`facts`]).
    facts: Vec<facts::Fact>,
    out: Vec<Stmt>,
    next: usize,
    /// Loops whose iterations write disjoint parts of buffers (a `gen`'s
    /// rows), for [`parallel`].
    disjoint: parallel::Disjoint,
    /// Slots whose contents do not outlive one iteration of a loop, by
    /// the loop's variable (a parallel loop gives each chunk its own).
    scratch: parallel::Disjoint,
    /// The range guards of reads, for splitting loops at their edges.
    range_guards: Vec<edges::RangeGuard>,
    /// The comparisons of brackets, for splitting loops where they change.
    bracket_cmps: Vec<pieces::BracketCmp>,
    /// The divisibility tests of brackets, for unrolling loops by the
    /// residues that decide them.
    mod_conds: RefCell<Vec<residue::ModCond>>,
    /// Index variables of the `gen` loops (over their full range).
    gen_vars: std::collections::HashSet<Symbol>,
    /// Dense membership masks of relations, by the relation's C name
    /// (`relation.rs`, [`Lowerer::rel_mask`]).
    masks: HashMap<String, String>,
    /// Statements run once on entry, before the body (masks built).
    entry: Vec<Stmt>,
}
