//! Threads with a stack sized for the program: every pass of the compiler
//! is a structural recursion over expressions.

/// Run `f` on a thread whose stack holds the passes over programs nested
/// up to 200,000 deep (the tests' and examples' deepest); see
/// [`with_stack_for`].
pub fn with_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    with_stack_for(200_000, f).expect("cannot make the worker thread's stack")
}

/// Run `f` on a thread with a stack for a program nested `depth` deep.
/// Every pass of the compiler is a structural recursion over expressions
/// and programs may nest 100,000 deep, but a stack reserved for the
/// deepest program would take address space from every run (a fixed 4 GiB
/// made every command fail under `ulimit -v` below that): the stack is
/// sized by the depth, [`stack_for_depth`]. An error when the system
/// cannot give that much.
pub fn with_stack_for<T: Send + 'static>(
    depth: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<T> {
    let handle = std::thread::Builder::new()
        .stack_size(stack_for_depth(depth))
        .spawn(f)?;
    Ok(handle
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e)))
}

/// The stack every run gets, whatever the depth of its program.
const BASE_STACK: usize = 64 << 20;

/// The stack one level of nesting may take across the passes (measured: the
/// deepest recursion per level of a program, with a margin of 4).
const STACK_PER_LEVEL: usize = 8 << 10;

/// The stack for a program nested `depth` deep.
pub fn stack_for_depth(depth: usize) -> usize {
    BASE_STACK.saturating_add(depth.saturating_mul(STACK_PER_LEVEL))
}
