//! The loop IR the lowering produces and the C emitter prints: structured
//! statements (`for` over `[lo, hi)`, `if`/`else`, straight-line C
//! statements) whose leaves are C expressions over `int64_t` indices and
//! `double` scalars, plus the function's frame: parameters, result leaves,
//! the dimensions it checks and the arena slots of its intermediates.

use crate::front::affine::Affine;

/// A statement of the loop IR.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// One C statement (assignment, counter update).
    Line(String),
    /// A local: `ty name = init;` (marked maybe-unused).
    Decl {
        ty: &'static str,
        name: String,
        init: String,
    },
    /// `for (int64_t var = lo; var < hi; var++) body`
    For {
        var: String,
        lo: String,
        hi: String,
        body: Vec<Stmt>,
    },
    /// `if (cond) then else els`
    If {
        cond: String,
        then: Vec<Stmt>,
        els: Vec<Stmt>,
    },
    /// `{ body }`: a scope for the locals of a schedule (a parallel loop's
    /// work estimate and partial sums), not a test.
    Block(Vec<Stmt>),
    /// `for (int64_t var = 0; var < ATL_CHUNKS; var++) body`: the chunks of
    /// a parallel loop, its schedule rather than one of the program's
    /// loops (the counting build does not count its iterations).
    Chunks { var: String, body: Vec<Stmt> },
}

impl Stmt {
    /// The blocks directly inside: a loop's or a scope's body, a test's
    /// two branches.
    pub fn blocks(&self) -> impl Iterator<Item = &Vec<Stmt>> {
        let (a, b) = match self {
            Stmt::For { body, .. } | Stmt::Block(body) | Stmt::Chunks { body, .. } => {
                (Some(body), None)
            }
            Stmt::If { then, els, .. } => (Some(then), Some(els)),
            Stmt::Line(_) | Stmt::Decl { .. } => (None, None),
        };
        a.into_iter().chain(b)
    }

    /// [`Stmt::blocks`], to rewrite them.
    pub fn blocks_mut(&mut self) -> impl Iterator<Item = &mut Vec<Stmt>> {
        let (a, b) = match self {
            Stmt::For { body, .. } | Stmt::Block(body) | Stmt::Chunks { body, .. } => {
                (Some(body), None)
            }
            Stmt::If { then, els, .. } => (Some(then), Some(els)),
            Stmt::Line(_) | Stmt::Decl { .. } => (None, None),
        };
        a.into_iter().chain(b)
    }
}

/// The statements of a block, nested ones included (the measure of code
/// size the lowering's budgets use).
pub fn statements(ss: &[Stmt]) -> usize {
    ss.iter()
        .map(|s| 1 + s.blocks().map(|b| statements(b)).sum::<usize>())
        .sum()
}

/// The loop pragma (a parallel loop's or a vector reduction's) that
/// stands just before statement `i` of `ss`, if any.
pub fn pragma_before(ss: &[Stmt], i: usize) -> Option<String> {
    match i.checked_sub(1).map(|j| &ss[j]) {
        Some(Stmt::Line(l))
            if l.starts_with("ATL_PARALLEL_FOR(") || l.starts_with("ATL_SIMD_REDUCE(") =>
        {
            Some(l.clone())
        }
        _ => None,
    }
}

/// What a C parameter is.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamC {
    /// `int64_t`: a size (implicit sizes come first, then the parameters).
    Size,
    /// `double`: a real parameter (or a real leaf of a pair parameter).
    Real,
    /// `const double *`: a row-major tensor leaf.
    Tensor(Vec<Affine>),
    /// `const int64_t *`: a relation in its compressed layout (see
    /// [`crate::backend::marshal::compressed_layout`]).
    Relation(Vec<Affine>),
    /// `const double *`: a tensor of these dimensions stored by the pattern
    /// of the relation parameter `by` (its ATL name): one value per stored
    /// tuple, in the order of the relation's layout (row-major).
    Stored { dims: Vec<Affine>, by: String },
}

/// One C parameter: its C name, the ATL name it comes from (with a
/// `.0`/`.1` path for leaves of pairs) and its kind.
#[derive(Clone, Debug, PartialEq)]
pub struct CParam {
    pub cname: String,
    pub source: String,
    pub kind: ParamC,
}

/// An intermediate tensor: a slot of the per-call arena.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    pub cname: String,
    pub dims: Vec<Affine>,
}

/// An index form the C code evaluates, `constant + Σ k·x` left to right,
/// each `x` a size or an index variable over `[lo, hi]` (C expressions:
/// a size's C name twice; `0` and its dimension minus one). On entry the
/// function checks that every step stays in `int64_t` for every value of
/// the variables ([`crate::backend::c::RET_INDEX_OVERFLOW`] otherwise).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IndexCheck {
    pub constant: i64,
    pub terms: Vec<(i64, String, String)>,
}

/// A relation's layout with its arguments permuted (a tuple `t` stored as
/// `(t[perm[0]], ...)`), built once per call from the parameter `of`
/// (dimensions `dims`, in the parameter's order) before the body runs.
#[derive(Clone, Debug, PartialEq)]
pub struct PermutedRelation {
    pub cname: String,
    pub of: String,
    pub dims: Vec<Affine>,
    pub perm: Vec<usize>,
}

/// A lowered program.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// The C name (`atl_` and the program name with non-identifier
    /// characters replaced).
    pub name: String,
    pub params: Vec<CParam>,
    /// One `double *` per leaf of the result (pairs flattened left to
    /// right): C name, leaf path, dimensions.
    pub outputs: Vec<(String, String, Vec<Affine>)>,
    /// The outputs stored by a relation's pattern: (output index, the
    /// relation parameter's ATL name); such an output holds one value per
    /// stored tuple, in the layout's order, not its dimensions' product.
    pub stored_outputs: Vec<(usize, String)>,
    /// Dimension locals: C name and the affine form in sizes; each is
    /// checked non-negative on entry.
    pub dims: Vec<(String, Affine)>,
    pub slots: Vec<Slot>,
    /// Permuted layouts of relation parameters the loops iterate.
    pub permuted: Vec<PermutedRelation>,
    /// The index forms checked on entry.
    pub checks: Vec<IndexCheck>,
    pub body: Vec<Stmt>,
}
