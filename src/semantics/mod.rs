//! Semantics: values, evaluation, forward-mode dual numbers, work cost.

pub mod arrays;
pub mod cost;
pub mod dual;
pub mod eval;
pub mod json;
pub mod numerics;
pub mod sizes;
pub mod stored;
pub mod tuples;
pub mod value;
