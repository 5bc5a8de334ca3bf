//! Dense membership masks of relations, for loops that test every point.
//!
//! A test `(R a ...)` is a binary search per level of the relation's
//! compressed layout (`atlh_rel_at`). A derivative often tests a relation
//! at every element of a `gen` over its dimensions (a softmax loss's
//! labels `[Y(s, k)]` in its logits' cotangent, a graph's edges in its
//! pairwise cotangent), where the function iterates the relation's tuples
//! instead: the binary searches then cost several times the function's
//! whole run. Such a relation is written once, on entry, as a dense array
//! of `0.0` and `1.0` (an arena slot of its dimensions), and every test
//! whose arguments are loop variables over exactly the relation's
//! dimensions reads it.
//!
//! The mask is made only for a test inside `gen` loops over all of the
//! relation's dimensions, each over its full range: that `gen` writes an
//! array at least as large, and runs at least as many iterations as the
//! mask costs to build (zero fill and one write per tuple). Later tests
//! of the same relation over full ranges (sums included) read it too.
//! Each test is still one counted predicate test (`ATL_TEST`).

use super::ir::Stmt;
use super::value::V;
use super::Lowerer;
use crate::error::Result;
use crate::front::affine::Affine;

impl Lowerer {
    /// The mask of the relation `buf` (dimensions `dims`) for a test at
    /// `args`, every one a loop variable over exactly its dimension
    /// (checked by the caller): the existing one, or a new one when every
    /// argument is a `gen` variable; `None` otherwise (module doc).
    pub(super) fn rel_mask(
        &mut self,
        buf: &str,
        dims: &[Affine],
        args: &[Affine],
    ) -> Result<Option<String>> {
        if let Some(m) = self.masks.get(buf) {
            return Ok(Some(m.clone()));
        }
        let gen_var = |a: &Affine| {
            a.constant == 0
                && a.terms.len() == 1
                && a.terms[0].1 == 1
                && self.gen_vars.contains(&a.terms[0].0)
        };
        if dims.is_empty() || !args.iter().all(gen_var) {
            return Ok(None);
        }
        let m = self.slot("mask", dims)?;
        let dn = dims
            .iter()
            .map(|d| self.dim(d))
            .collect::<Result<Vec<_>>>()?;
        let saved = std::mem::take(&mut self.out);
        V::leaf(m.clone(), dims.to_vec()).zero_fill(self)?;
        self.out.push(Stmt::Line(format!(
            "atlh_rel_mask({buf}, (const int64_t[]){{{}}}, {m});",
            dn.join(", ")
        )));
        let built = std::mem::replace(&mut self.out, saved);
        self.entry.extend(built);
        self.masks.insert(buf.to_string(), m.clone());
        Ok(Some(m))
    }
}
