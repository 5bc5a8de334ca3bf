//! Command-line conventions: `--version`, `help COMMAND`, completions,
//! `--inputs -`, `-o FILE`, `--stats` (summary, JSON, limit warnings),
//! `--format json` labels, `--format pretty` layout.

use std::io::Write;
use std::process::{Command, Stdio};

fn atl(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_atl-egg"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn version_help_and_completions() {
    let (code, out, _) = atl(&["--version"], "");
    assert_eq!(code, 0);
    assert_eq!(out.trim(), format!("atl-egg {}", env!("CARGO_PKG_VERSION")));
    for (cmd, says) in [
        ("grad", "right-nested pairs"),
        ("jvp", "one tangent"),
        ("vjp", "one cotangent"),
        ("hvp", "one direction"),
    ] {
        let (code, out, _) = atl(&["help", cmd], "");
        assert_eq!(code, 0);
        assert!(out.contains(says), "help {cmd}: {out}");
        assert!(out.contains("--wrt"), "help {cmd}: {out}");
    }
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, _) = atl(&["completions", shell], "");
        assert_eq!(code, 0);
        assert!(out.contains("atl-egg") && out.contains("grad"), "{shell}");
    }
}

#[test]
fn inputs_from_stdin_and_output_to_a_file() {
    let (code, out, err) = atl(
        &["eval", "corpus/trace_diag_k8.atl", "--inputs", "-"],
        r#"{"x": [1, 2, 3]}"#,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "48.0\n");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-out.atl");
    let p = path.to_str().unwrap();
    let (code, out, err) = atl(&["grad", "corpus/deconv_signal_loss.atl", "-o", p], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty());
    let (code, out, _) = atl(&["check", p], "");
    assert_eq!(code, 0);
    assert!(out.starts_with("(fn deconv_signal_loss"), "{out}");
    // the program and the inputs cannot both come from standard input
    let (code, _, err) = atl(&["eval", "-", "--inputs", "-"], "(fn f ((x R)) x)");
    assert_eq!(code, 2, "{err}");
}

#[test]
fn stats_summary_json_and_limit_warnings() {
    let prog = "corpus/deconv_signal_loss.atl";
    let (code, _, err) = atl(&["grad", prog, "--sizes", "n=4,m=3", "--stats"], "");
    assert_eq!(code, 0, "{err}");
    assert!(err.starts_with("phase "), "{err}");
    assert!(err.contains("\nsimplify "), "{err}");
    assert!(err.contains("cost at n=4,m=3: "), "{err}");
    assert!(err.lines().count() < 12, "{err}");
    let (code, _, err) = atl(&["grad", prog, "--stats=json"], "");
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&err).unwrap();
    // differentiation, then the optimizer's phases: per binding, then (a
    // small program) the whole program from the per-binding result and from
    // the input
    let names: Vec<&str> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "differentiate (adjoint)",
            "normalize (per binding)",
            "simplify (per binding)",
            "normalize (whole, from bindings)",
            "simplify (whole, from bindings)",
            "normalize (whole, from input)",
            "simplify (whole, from input)"
        ]
    );
    let costs = v["costs"].as_array().unwrap();
    let labels: Vec<&str> = costs.iter().map(|c| c["sizes"].as_str().unwrap()).collect();
    let mut unique = labels.clone();
    unique.dedup();
    assert_eq!(labels.len(), unique.len(), "duplicates: {labels:?}");
    // a limit that stops a phase early is reported, naming the flag
    let (code, _, err) = atl(&["grad", prog, "--iter-limit", "2"], "");
    assert_eq!(code, 0);
    assert!(
        err.contains("stopped at the iteration limit (2); raise --iter-limit"),
        "{err}"
    );
    let (_, _, quiet) = atl(&["grad", prog], "");
    assert!(!quiet.contains("warning"), "{quiet}");
}

#[test]
fn json_labels_each_gradient_and_pretty_breaks_lines() {
    let prog = "corpus/deconv_signal_loss.atl";
    let (code, out, _) = atl(&["grad", prog, "--wrt", "c,z", "--format", "json"], "");
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["returns"],
        serde_json::json!([
            {"wrt": "c", "type": "(tensor m R)", "select": "(fst result)"},
            {"wrt": "z", "type": "(tensor n R)", "select": "(snd result)"}
        ])
    );
    let (code, out, _) = atl(&["grad", prog, "--format", "pretty"], "");
    assert_eq!(code, 0);
    assert!(out.lines().count() > 3, "{out}");
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    assert!(out.contains("let "), "{out}");
}
