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
//! * [`load`]: a busy thread beside commands on every core, for the tests
//!   of one answer per input;
//! * [`sampled`]: the whole of a long list of programs, or every few of
//!   them (`ATL_TEST_FULL`);
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

/// Whether the tests that repeat one check over a long list of programs
/// (the command line under load over the corpus, the C compiler's warnings
/// and sanitizers over the sample programs) take every program:
/// `ATL_TEST_FULL=1`. Without it (the default, and CI's) they take a fixed
/// sample, every few programs, and say so on stderr; each check is
/// exercised either way.
pub fn full() -> bool {
    std::env::var_os("ATL_TEST_FULL").is_some_and(|v| !v.is_empty() && v != "0")
}

/// `items`, or with [`full`] off one in `every` of them (the first, then
/// every `every`-th after it), with a line on stderr naming the test.
pub fn sampled<T>(what: &str, items: impl IntoIterator<Item = T>, every: usize) -> Vec<T> {
    let all: Vec<T> = items.into_iter().collect();
    if full() || every <= 1 {
        return all;
    }
    let n = all.len();
    let taken: Vec<T> = all.into_iter().step_by(every).collect();
    eprintln!(
        "{what}: {} of {n} (one in {every}; ATL_TEST_FULL=1 takes all)",
        taken.len()
    );
    taken
}
