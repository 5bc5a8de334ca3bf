//! The README's examples, run: every command of its `sh` example block must
//! succeed, and print the value written after `#` when that is a value (a
//! number or a JSON array); the transcript after `$ atl-egg ...` in an
//! indented block must be exactly what the command prints; the first lines'
//! `cargo run --release -- ...` command must succeed.
//!
//! `$B` and `cargo run ... --` stand for the binary under test.

use std::path::Path;
use std::process::Command;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap()
}

fn bash(line: &str) -> (bool, String, String) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(line)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("B", env!("CARGO_BIN_EXE_atl-egg"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The lines of the first fenced block that starts with `start`.
fn block(text: &str, start: &str) -> Vec<String> {
    let from = text.find(start).expect("the README's example block");
    text[from + start.len()..]
        .lines()
        .take_while(|l| !l.starts_with("```"))
        .map(str::to_string)
        .collect()
}

#[test]
fn readme_shell_examples_run() {
    let text = readme();
    let lines = block(&text, "```sh\nB=\"cargo run -q --release --\"\n");
    assert!(lines.len() >= 10, "{lines:?}");
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let (cmd, expect) = match line.find("  #") {
            Some(k) => (&line[..k], Some(line[k + 3..].trim())),
            None => (line.as_str(), None),
        };
        assert!(cmd.contains("$B"), "{line}");
        let (ok, out, err) = bash(cmd);
        assert!(ok, "README example failed: {cmd}\n{err}");
        if let Some(e) = expect.filter(|e| {
            e.starts_with(|c: char| c.is_ascii_digit() || c == '[' || c == '-')
                && serde_json::from_str::<serde_json::Value>(e).is_ok()
        }) {
            let last = out.lines().last().unwrap_or("").trim();
            assert_eq!(last, e, "README example printed something else: {cmd}");
        }
    }
}

#[test]
fn readme_transcripts_match() {
    let text = readme();
    let lines: Vec<&str> = text.lines().collect();
    let mut checked = 0;
    for (k, l) in lines.iter().enumerate() {
        let Some(cmd) = l.strip_prefix("    $ atl-egg ") else {
            continue;
        };
        let want: Vec<&str> = lines[k + 1..]
            .iter()
            .take_while(|x| x.starts_with("    ") && !x.starts_with("    $ "))
            .map(|x| &x[4..])
            .collect();
        let (ok, out, err) = bash(&format!("\"$B\" {cmd}"));
        assert!(ok, "{cmd}: {err}");
        let got: Vec<&str> = out.lines().collect();
        assert_eq!(
            got, want,
            "README transcript of `atl-egg {cmd}` is out of date"
        );
        checked += 1;
    }
    assert!(checked >= 1);
}

#[test]
fn readme_first_command_runs() {
    let text = readme();
    let first = text
        .lines()
        .find(|l| l.trim_start().starts_with("cargo run --release --"))
        .expect("the README starts with a command");
    let cmd = first
        .trim_start()
        .trim_start_matches("cargo run --release --");
    let cmd = cmd.split("  #").next().unwrap();
    let (ok, out, err) = bash(&format!("\"$B\" {cmd}"));
    assert!(ok, "{cmd}: {err}");
    assert!(out.contains("deconv_signal_loss("), "{out}");
    let install = text.find("cargo install --path .").expect("installation");
    assert!(install < text.find("## Commands").unwrap());
}

/// Every relative link of the README and of `docs/` names a file of the
/// repository (and nothing points outside it).
#[test]
fn links_resolve_inside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        files.push(e.unwrap().path());
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains("../shared"),
            "{} points outside",
            f.display()
        );
        let mut rest = text.as_str();
        while let Some(k) = rest.find("](") {
            let tail = &rest[k + 2..];
            let end = tail.find(')').unwrap();
            let target = &tail[..end];
            rest = &tail[end..];
            if target.starts_with('#') {
                continue;
            }
            assert!(
                !target.contains("://"),
                "{}: external link {target}",
                f.display()
            );
            let path = target.split('#').next().unwrap();
            let resolved = f.parent().unwrap().join(path);
            assert!(resolved.exists(), "{}: broken link {target}", f.display());
        }
    }
}
