//! atl-egg: differentiate and optimize programs in A Tensor Language (ATL)
//! by equality saturation.
//!
//! The crate is layered the way a program flows through it:
//!
//! * [`front`]: reading S-expressions with positions, elaboration (type
//!   checking, desugaring to core forms, unique binder names), printing;
//! * [`semantics`]: values and JSON, the reference evaluator, forward-mode
//!   dual numbers, and the paper's sparsity-aware work cost;
//! * [`egraph`]: ATL as an egg language, analyses, rules loaded from
//!   `rules/`, extraction by the work cost, the phased runner;
//! * [`mod@derive`]: forward and adjoint derivatives;
//! * the `atl-egg` binary (`src/main.rs`) drives all of it.

pub mod backend;
pub mod constraints;
pub mod corpus;
pub mod derive;
pub mod egraph;
pub mod error;
pub mod front;
pub mod lower;
pub mod semantics;

pub use error::{Error, ErrorKind, Pos, Result};

/// Run `f` on a thread with a large stack. Every pass of the compiler is a
/// structural recursion over expressions; programs nested 100,000 deep are
/// legal, so the binary and the tests run passes through this.
pub fn with_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(4 << 30)
        .spawn(f)
        .expect("cannot spawn the worker thread")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

pub use backend::{compile, Compiled};
