//! The `atl-egg` binary: parses the command line and runs it on a large stack.

mod cli;

use clap::Parser;
use cli::{exit_code, run, Cli};
use std::io::Write;

fn main() {
    let cli = Cli::parse(); // exits with status 2 on a bad command line
    let outcome = atl_egg::with_big_stack(move || run(cli.command));
    match outcome {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            // A closed pipe is not an error of ours.
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        Err(e) => {
            eprintln!("atl-egg: {e}");
            std::process::exit(exit_code(&e));
        }
    }
}
