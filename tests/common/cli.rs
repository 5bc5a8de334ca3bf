//! The command line as a test sees it: one command on a file.

use std::path::Path;
use std::process::{Command, Output};

/// `atl-egg COMMAND FILE [--wrt W]` with a time limit raised for a loaded
/// machine (the limit only fails a command; it never shapes the output).
pub fn run(command: &str, path: &Path, wrt: &[String]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_atl-egg"));
    cmd.arg(command).arg(path);
    if !wrt.is_empty() {
        cmd.args(["--wrt", &wrt.join(",")]);
    }
    cmd.args(["--time-limit", "600"])
        .env("NO_COLOR", "1")
        .output()
        .expect("atl-egg runs")
}
