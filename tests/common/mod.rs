//! Shared test infrastructure for the integration tests:
//!
//! * [`progen`]: random *well-typed* ATL programs as source text, with sugar,
//!   together with the core program that docs/language.md says the sugar means
//!   (desugared by hand, independently of the elaborator); usable as a
//!   proptest `Strategy` ([`progen::arb_program`]) or from a seed
//!   ([`progen::generate`]);
//! * [`values`]: random inputs for a program and value comparison
//!   (with [`Value::Zero`] read as the zero of the other side's shape);
//! * [`rulecheck`]: the rule validator used by `tests/rule_validation.rs`;
//! * [`par`]: independent checks run on every core;
//! * [`cli`]: one command of the binary, and printed programs compared up
//!   to binder names;
//! * [`cpu`]: the CPU time of the calling thread or of a child process, for
//!   bounds on work;
//! * [`load`]: busy threads on every core, for the tests of one answer per
//!   input;
//! * [`printed`]: the names a printed program may use;
//! * [`derived`]: the corpus optimized and differentiated once, shared by
//!   the tests of every file;
//! * [`run_check`]: compiled code against the evaluator and the cost model;
//! * [`extension`]: the evaluator of the extended language (`D`, `dot`,
//!   `dlet`, `coeff`, `drop`) that both rule validators use.
#![allow(dead_code, unused_imports)]

pub mod cli;
pub mod cpu;
pub mod derived;
pub mod extension;
pub mod load;
pub mod par;
pub mod printed;
pub mod progen;
pub mod rulecheck;
pub mod run_check;
pub mod values;

/// The crate's seeded generator: every generated case is reproducible from
/// one `u64`.
pub use atl_egg::rng::Rng;
pub use progen::{arb_program, generate, GenConfig, Generated};
pub use values::{compare_values, random_inputs, Tolerance};

use atl_egg::semantics::value::Value;
