//! The command line as a test sees it: one command on a file, and the
//! comparison of its printed program with the library's.

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

/// Two printed programs equal up to the names of their binders. The command
/// line and the library may name a binder differently (`i3` or `g2`) where
/// their passes run in another order; what the load must not change is the
/// program.
pub fn alpha_equivalent(printed: &[u8], expected: &str) -> bool {
    use atl_egg::terms::canonical::canonical_binders;
    let (Ok(a), Ok(b)) = (
        atl_egg::front::parse_program(printed),
        atl_egg::front::parse_program(expected.as_bytes()),
    ) else {
        return false;
    };
    a.params == b.params && canonical_binders(&a.body) == canonical_binders(&b.body)
}
