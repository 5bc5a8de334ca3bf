//! The `atl-egg` binary: parses the command line and runs it on a large stack.

mod cli;
mod cli_stats;

use clap::Parser;
use cli::{exit_code, run, Cli, Session};
use std::io::Write;

fn main() {
    let cli = Cli::parse(); // exits with status 2 on a bad command line
    let (outcome, source) = atl_egg::with_big_stack(move || {
        let mut session = Session::default();
        let outcome = run(cli.command, &mut session);
        (outcome, session.source)
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
