//! Software prefetch of gathered rows in loops over a relation's stored
//! coordinates. A loop over the last level of a layout visits the edges
//! `q` in order and reads rows of tensors at the coordinate `crd[q]`: the
//! coordinates are sequential (the hardware prefetches them), the rows are
//! at random places. Once the tensor outgrows the caches, each read is a
//! miss, and how many are in flight is bounded by what the core runs ahead
//! of, which the mispredicted exit of every short row loop cuts off. So the
//! loop prefetches, at the top of each iteration, the rows it will read
//! `ATL_PREFETCH_AHEAD` edges later (16; a C build may set it with `-D`),
//! or `ATL_PREFETCH_AHEAD_SCALAR` (32) when every row it gathers is one
//! double: such a loop does little work per edge, so the same time to
//! memory covers more edges (at 10⁶ nodes, `sparse_matvec`'s loss and
//! `graph_smoothness`' loss ran 5 to 15% faster 32 edges ahead than 16,
//! where `gcn_mean`'s rows of 16 doubles ran slower 32 ahead than 16):
//! `crd[q + ahead]` is read from the whole level's
//! coordinate array (clipped to its last entry), not from the current row,
//! so the prefetches run on across rows. A row is a tensor read whose first
//! index is the loop's variable itself (`x[j]`, `x[j][c]` for all `c`); the
//! prefetch reads nothing and writes nothing, so values, the operation
//! counts and their determinism are unchanged.
//!
//! A gathered tensor that fits in the caches gains nothing from being
//! prefetched, and the look-ahead costs a load and a prefetch per edge
//! (`mesh_laplacian`'s gradient at 10⁴ nodes, its 240 kB of positions in
//! L2, ran 10 to 15% slower with them). So the loop prefetches only when
//! one of the tensors it gathers from spans at least
//! `ATL_PREFETCH_MIN_BYTES` (1 MiB, twice a core's L2 here; a C build may
//! set it with `-D`) over the relation's dimension: a test on the sizes,
//! made once before the loop, which the compiler may take out of it.

use super::ir::Stmt;
use super::Lowerer;

/// A row a loop over stored coordinates gathers: the buffer, and the
/// number of doubles in a row (a C expression).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Gather {
    pub buf: String,
    pub row: String,
}

impl Lowerer {
    /// A read of `buf` at `idx * row` (its first index `idx`, `row`
    /// doubles a row): recorded with the open loop over the last level of
    /// a layout whose variable `idx` is (by its C name, so that a read
    /// through a view's parameter counts too).
    pub(crate) fn note_gather(&mut self, idx: &str, buf: &str, row: &str) {
        let Some(dl) = self
            .driven
            .values_mut()
            .find(|dl| dl.gathers_rows() && dl.is_var(idx))
        else {
            return;
        };
        let g = Gather {
            buf: buf.to_string(),
            row: row.to_string(),
        };
        if !dl.gathers.contains(&g) {
            dl.gathers.push(g);
        }
    }
}

/// The test, made before a loop over `rows` stored coordinates, that a
/// tensor it gathers spans at least `ATL_PREFETCH_MIN_BYTES` (`rows` rows
/// of its row's doubles): the loop prefetches only then.
pub(crate) fn prefetch_worth(rows: &str, gathers: &[Gather]) -> String {
    let mut tests: Vec<String> = vec![];
    for g in gathers {
        let t = format!("ATL_PREFETCH_WORTH({rows}, {})", g.row);
        if !tests.contains(&t) {
            tests.push(t);
        }
    }
    tests.join(" || ")
}

/// The statements at the top of an iteration of the loop at position `q`
/// over the coordinates `crd` of the last level of `index` (which holds
/// `index[1]` tuples) that prefetch the rows of `gathers` read
/// `ATL_PREFETCH_AHEAD` iterations later (`ATL_PREFETCH_AHEAD_SCALAR` when
/// every row is one double); none without gathers.
pub(crate) fn prefetches(
    index: &str,
    crd: &str,
    q: &str,
    ahead: &str,
    gathers: &[Gather],
) -> Vec<Stmt> {
    if gathers.is_empty() {
        return vec![];
    }
    let distance = if gathers.iter().all(|g| g.row == "1") {
        "ATL_PREFETCH_AHEAD_SCALAR"
    } else {
        "ATL_PREFETCH_AHEAD"
    };
    let mut out = vec![Stmt::Decl {
        ty: "const int64_t",
        name: ahead.to_string(),
        init: format!("{crd}[atlh_min({q} + {distance}, {index}[1] - 1)]"),
    }];
    for g in gathers {
        let at = if g.row == "1" {
            ahead.to_string()
        } else {
            format!("{ahead}*{}", g.row)
        };
        out.push(Stmt::Line(format!(
            "ATL_PREFETCH_ROW({} + {at}, {});",
            g.buf, g.row
        )));
    }
    out
}
