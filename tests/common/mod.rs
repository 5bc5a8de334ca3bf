//! Shared test infrastructure for the integration tests:
//!
//! * [`rng`]: a small seeded RNG (SplitMix64), so every generated case is
//!   reproducible from one `u64`;
//! * [`progen`]: random *well-typed* ATL programs as source text, with sugar,
//!   together with the core program that ATL.md says the sugar means
//!   (desugared by hand, independently of the elaborator); usable as a
//!   proptest `Strategy` ([`progen::arb_program`]) or from a seed
//!   ([`progen::generate`]);
//! * [`values`]: random inputs for a program and value comparison
//!   (with [`Value::Zero`] read as the zero of the other side's shape);
//! * [`rulecheck`]: the rule validator used by `tests/rule_validation.rs`.
#![allow(dead_code, unused_imports)]

pub mod progen;
pub mod rng;
pub mod rulecheck;
pub mod values;

pub use progen::{arb_program, generate, GenConfig, Generated};
pub use rng::Rng;
pub use values::{compare_values, random_inputs, Tolerance};

use atl_egg::semantics::value::Value;
