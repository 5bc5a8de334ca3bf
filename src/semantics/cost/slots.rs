//! The shared affine forms and constraints (`crate::constraints`) over the
//! cost's loop slots: a slot is a binder of the costed term, numbered, with
//! sizes and outer index variables already constants; slot values live in
//! a vector (`Machine::env`). Only adapters here: the constraint module's
//! checked results (`None` on overflow) become the cost's errors.

use super::*;
use crate::constraints::LinForm;

/// A binder of the costed term, numbered (sizes and outer index variables
/// are constants by then).
pub(super) type Slot = u32;
/// An affine form over slots.
pub(super) type Lin = LinForm<Slot>;
/// A comparison over slots (`Ge` or `Eq`: the cost never makes divisibility
/// constraints, as it solves only equalities with coefficient ±1).
pub(super) type Con = Constraint<Slot>;

/// A checked result of the constraint module as the cost's error.
pub(super) fn ck<T>(x: Option<T>) -> Result<T> {
    x.ok_or_else(overflow)
}

/// The slot values of `env` as the constraint module reads them.
pub(super) fn at(env: &[i64]) -> impl Fn(Slot) -> Option<i128> + '_ {
    move |s| env.get(s as usize).map(|&x| x as i128)
}

pub(super) fn holds(c: &Con, env: &[i64]) -> Result<bool> {
    ck(c.holds(&at(env)))
}

/// The constraint `a op b`.
pub(super) fn compare(op: CmpOp, a: &Lin, b: &Lin) -> Result<Con> {
    ck(Con::compare(op, a, b))
}

/// `0 <= e < n`.
pub(super) fn in_range(e: &Lin, n: i64) -> Result<[Con; 2]> {
    Ok([
        Con::Ge(e.clone()),
        compare(CmpOp::Lt, e, &Lin::constant(n as i128))?,
    ])
}

/// The values of slot `s` in `[0, n)` allowed by `cons` at `env`, as an
/// inclusive interval (empty when `lo > hi`).
pub(super) fn interval(s: Slot, n: i64, cons: &[Con], env: &[i64]) -> Result<(i128, i128)> {
    let range = (0, n as i128 - 1);
    ck(crate::constraints::system::interval(
        s,
        range,
        cons,
        &at(env),
    ))
}
