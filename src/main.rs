//! The `atl-egg` binary: parses the command line and runs it on a stack
//! sized by the program's depth.

mod cli;
mod cli_stats;

use clap::Parser;
use cli::{exit_code, run, Cli, Session};
use std::io::Write;

/// The system allocator, counting live bytes to hold `--memory-limit`.
#[global_allocator]
static ALLOCATOR: atl_egg::limits::Counting = atl_egg::limits::Counting;

fn main() {
    let cli = Cli::parse(); // exits with status 2 on a bad command line
    match cli.memory_limit_bytes() {
        Ok(bytes) => atl_egg::limits::set_memory_limit(bytes),
        Err(e) => {
            eprint!("{}", atl_egg::diagnostics::render(&e, None, false));
            std::process::exit(exit_code(&e));
        }
    }
    let (mut session, depth) = Session::for_command(&cli.command);
    let worker = atl_egg::with_stack_for(depth, move || {
        let outcome = run(cli.command, &mut session);
        (outcome, session.source)
    });
    let (outcome, source) = worker.unwrap_or_else(|e| {
        let e = atl_egg::Error::input(format!(
            "the program nests {depth} deep: no stack of {} MiB for its passes ({e})",
            atl_egg::stack_for_depth(depth) >> 20
        ))
        .with_hint("raise the memory limit (ulimit -v) or nest the program less deeply");
        (Err(e), None)
    });
    match outcome {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            // A closed pipe is not an error of ours.
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        Err(e) => {
            let source = source.as_ref().map(|(n, t)| (n.as_str(), t.as_str()));
            let color = atl_egg::diagnostics::stderr_wants_color();
            eprint!("{}", atl_egg::diagnostics::render(&e, source, color));
            std::process::exit(exit_code(&e));
        }
    }
}
