//! Derivatives of functions with tensors stored by a relation's pattern
//! ([`Storage`]). Such a tensor is, inside the program, the dense tensor
//! that is zero off its pattern: taking it in is a scatter of its values,
//! giving a stored result out is a gather (`[S i j]·e[i][j]` at the tuples).
//! So the derivatives are those of the dense program, and
//!
//! * a tangent (jvp, hvp's directions) of a stored input is stored by the
//!   same relation, and the tangent of a stored result is stored (the
//!   gather is linear);
//! * the adjoint of a stored input is gathered: a gradient with respect to
//!   it is stored by its relation; where the optimized adjoint is not
//!   already bracketed by the relation it is masked by it
//!   (`gen i n (gen j m (iverson (S i j) (get g i j)))`) and optimized
//!   again, which pushes the bracket into the adjoint so that only the
//!   tuples are computed; the cotangent of a stored result is stored
//!   (scatter is the adjoint of gather).

use super::forward::{names_in, unused_name};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::{build, leaf_count, Expr, ParamKind, Pred, Program, Storage, Type};
use crate::symbol::Symbol;
use std::collections::BTreeSet;

/// The storage of a jvp program: the function's, and each tangent `(x, dx)`
/// of a stored `x` stored like it.
pub fn forward_storage(prog: &Program, tangents: &[(Symbol, Symbol)]) -> Storage {
    let mut stored = prog.stored.clone();
    for (x, dx) in tangents {
        if let Some(rel) = prog.stored.param(*x) {
            stored.params.push((*dx, rel));
        }
    }
    stored
}

/// The storage of a reverse program (grad, vjp) with respect to `wrt`
/// (returning right-nested pairs of their adjoints), with its cotangent
/// parameter `ct` (vjp) stored like the function's result.
pub fn reverse_storage(prog: &Program, wrt: &[Symbol], ct: Option<Symbol>) -> Result<Storage> {
    let mut stored = Storage {
        params: prog.stored.params.clone(),
        ret: vec![],
    };
    if let (Some(ct), false) = (ct, prog.stored.ret.is_empty()) {
        match (&prog.ret, prog.stored.leaf(0)) {
            (Type::Tensor(..), Some(rel)) => stored.params.push((ct, rel)),
            _ => {
                return Err(Error::input(
                    "vjp of a function whose result is a pair holding a stored tensor \
                     is not supported; return the stored tensor alone",
                ))
            }
        }
    }
    let mut first = 0;
    for w in wrt {
        let ty = match &prog.param(*w).expect("resolved").kind {
            ParamKind::Real(t) => t,
            _ => unreachable!("resolve_wrt keeps real inputs"),
        };
        if let Some(rel) = prog.stored.param(*w) {
            stored.ret.push((first, rel));
        }
        first += leaf_count(ty);
    }
    Ok(stored)
}

/// `p` with the stored leaves of its result that are not yet masked by
/// their relations masked (`None` when every one is): an extracted
/// derivative keeps what the optimizer found, and a leaf computed densely
/// gets the mask, which the optimizer can then push into it.
pub fn mask_unmasked(p: &Program) -> Option<Program> {
    let spine = spine_leaves(&p.body, &p.ret, 0);
    let all_masked = p
        .stored
        .ret
        .iter()
        .all(|(k, rel)| spine.iter().any(|(l, e)| l == k && masked_by(e, *rel)));
    if all_masked {
        return None;
    }
    let mut q = p.clone();
    let mut taken = names_in(&q);
    let body = std::mem::replace(&mut q.body, build::num(0.0));
    q.body = mask(body, &q.ret, &q.stored, 0, &mut taken);
    Some(q)
}

/// The leaves of the result that the body's spine (lets, pairs) shows,
/// with their index.
fn spine_leaves<'a>(e: &'a Expr, ty: &Type, first: usize) -> Vec<(usize, &'a Expr)> {
    match (e, ty) {
        (Expr::Let(_, _, b), _) => spine_leaves(b, ty, first),
        (Expr::Pair(x, y), Type::Pair(a, b)) => {
            let mut v = spine_leaves(x, a, first);
            v.extend(spine_leaves(y, b, first + leaf_count(a)));
            v
        }
        (_, Type::Pair(..)) => vec![],
        _ => vec![(first, e)],
    }
}

/// Is `e` (the whole leaf, of tensor type) `gen i .. (iverson p ..)` with
/// `(rel i ..)` a conjunct of `p`?
fn masked_by(e: &Expr, rel: Symbol) -> bool {
    let mut idx = vec![];
    let mut e = e;
    while let Expr::Gen(i, _, b) = e {
        idx.push(Affine::var(*i));
        e = b;
    }
    let Expr::Iverson(p, _) = e else {
        return false;
    };
    let atom = Pred::Rel(rel, idx);
    match p {
        Pred::And(ps) => ps.contains(&atom),
        p => *p == atom,
    }
}

fn mask(e: Expr, ty: &Type, stored: &Storage, first: usize, taken: &mut BTreeSet<String>) -> Expr {
    let n = leaf_count(ty);
    if !stored
        .ret
        .iter()
        .any(|(k, _)| (first..first + n).contains(k))
    {
        return e;
    }
    match (ty, e) {
        (Type::Pair(a, b), Expr::Pair(x, y)) => {
            let na = leaf_count(a);
            let x = mask(*x, a, stored, first, taken);
            build::pair(x, mask(*y, b, stored, first + na, taken))
        }
        (Type::Pair(a, b), e) => {
            let t = unused_name("g", taken);
            let na = leaf_count(a);
            let x = mask(build::fst(build::var(t)), a, stored, first, taken);
            let y = mask(build::snd(build::var(t)), b, stored, first + na, taken);
            build::let_(t, e, build::pair(x, y))
        }
        (ty, e) => {
            let rel = stored.leaf(first).expect("a stored leaf");
            let mut dims = vec![];
            let mut t = ty;
            while let Type::Tensor(d, elem) = t {
                dims.push((unused_name("i", taken), d.clone()));
                t = elem;
            }
            let idx: Vec<Affine> = dims.iter().map(|(i, _)| Affine::var(*i)).collect();
            let read = idx.iter().fold(e, |acc, a| build::get(acc, a.clone()));
            let body = build::iverson(Pred::Rel(rel, idx), read);
            dims.into_iter()
                .rev()
                .fold(body, |acc, (i, d)| build::gen(i, d, acc))
        }
    }
}
