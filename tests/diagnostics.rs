//! Snapshots of the error reports the binary prints for malformed inputs:
//! the cases of the conformance suite's `--bad-inputs` (same programs,
//! inputs and command lines; `binary-garbage` with bytes of our own), run
//! from a scratch folder so that file names are stable, with `NO_COLOR`
//! set. Each snapshot holds the exit status and the whole standard error.
//!
//! Stored under `snapshots/diagnostics__*.snap`; update with
//! `INSTA_UPDATE=always cargo test --release --test diagnostics`.

use std::io::Write;
use std::process::{Command, Stdio};

struct Case {
    name: &'static str,
    args: &'static [&'static str],
    prog: Option<&'static [u8]>,
    inputs: Option<&'static str>,
    stdin: Option<&'static [u8]>,
}

const VEC: &[u8] = b"(fn f ((x (tensor n R)))\n  (sum i n (get x i)))\n";
/// A matrix stored by the pattern of `S`.
const STORED: &[u8] =
    b"(fn f ((A (tensor n n R (stored-by S))) (S (relation n n)))\n  (sum i n (sum j n (get A i j))))\n";
const CHK: &[&str] = &["check", "prog.atl"];
const EV: &[&str] = &["eval", "prog.atl", "--inputs", "in.json", "--sizes", "n=3"];

const fn chk(name: &'static str, prog: &'static [u8]) -> Case {
    Case {
        name,
        args: CHK,
        prog: Some(prog),
        inputs: None,
        stdin: None,
    }
}

const fn ev(name: &'static str, inputs: &'static str) -> Case {
    Case {
        name,
        args: EV,
        prog: Some(VEC),
        inputs: Some(inputs),
        stdin: None,
    }
}

const fn cmd(
    name: &'static str,
    args: &'static [&'static str],
    prog: Option<&'static [u8]>,
) -> Case {
    Case {
        name,
        args,
        prog,
        inputs: None,
        stdin: None,
    }
}

const CASES: &[Case] = &[
    // syntax errors
    chk("unbalanced-open", b"(fn f ((x R))\n  (+ x 1.0)\n"),
    chk("unbalanced-close", b"(fn f ((x R))\n  (+ x 1.0)))\n"),
    chk("stray-close-first", b")\n(fn f ((x R)) x)\n"),
    chk("unknown-form", b"(fn f ((x R))\n  (frobnicate x))\n"),
    chk("misspelled-form", b"(fn f ((x R))\n  (sigmod x))\n"),
    chk("not-fn", b"(foo f ((x R))\n  x)\n"),
    chk("two-functions", b"(fn f ((x R)) x)\n(fn g ((y R)) y)\n"),
    chk("string-token", b"(fn f ((x R))\n  \"hello\")\n"),
    chk("bracket-token", b"(fn f ((x (tensor n R)))\n  x[0])\n"),
    // functions and calls
    chk(
        "call-undefined-function",
        b"(fn f ((x R))\n  (+ x (g x)))\n",
    ),
    chk(
        "call-recursive",
        b"(fn sq ((x R)) (* x x))\n(fn f ((x R))\n  (+ (sq x) (f x)))\n",
    ),
    chk(
        "call-later-function",
        b"(fn f ((x R))\n  (g x))\n(fn g ((y R)) (* y y))\n",
    ),
    chk(
        "call-argument-count",
        b"(fn sq ((x R)) (* x x))\n(fn f ((x R))\n  (sq x x))\n",
    ),
    chk(
        "call-argument-type",
        b"(fn sq ((x R)) (* x x))\n(fn f ((p (pair R R)))\n  (sq p))\n",
    ),
    chk(
        "call-argument-shape",
        b"(fn dot ((a (tensor n R)) (b (tensor n R)))\n  (sum i n (* (get a i) (get b i))))\n(fn f ((x (tensor 3 R)) (y (tensor 4 R)))\n  (dot x y))\n",
    ),
    chk(
        "duplicate-function",
        b"(fn f ((x R)) x)\n(fn f ((y R)) (f y))\n",
    ),
    cmd(
        "fn-flag-names-no-function",
        &["check", "prog.atl", "--fn", "sqr"],
        Some(b"(fn sq ((x R)) (* x x))\n(fn f ((x R))\n  (sq x))\n"),
    ),
    // wrong arity
    chk("arity-get", b"(fn f ((x (tensor n R)))\n  (get x))\n"),
    chk("arity-gen", b"(fn f ((x (tensor n R)))\n  (gen i n))\n"),
    chk("arity-let", b"(fn f ((x R))\n  (let y 1.0))\n"),
    chk("arity-exp", b"(fn f ((x R))\n  (exp x x))\n"),
    chk("arity-fst", b"(fn f ((p (pair R R)))\n  (fst p p))\n"),
    chk("arity-fn", b"(fn f ((x R)))\n"),
    chk("arity-max", b"(fn f ((x R) (y R))\n  (max x y 1.0))\n"),
    chk("arity-real", b"(fn f ((x (tensor n R)))\n  (sum i n (real)))\n"),
    // max, min and (real a) misused
    chk(
        "max-of-a-pair",
        b"(fn f ((x R) (p (pair R R)))\n  (max x p))\n",
    ),
    chk(
        "min-shapes-differ",
        b"(fn f ((x (tensor n R)) (y (tensor m R)))\n  (min x y))\n",
    ),
    chk(
        "real-of-a-real",
        b"(fn f ((x (tensor n R)))\n  (sum i n (* (real (get x i)) (get x i))))\n",
    ),
    chk(
        "real-of-a-variable",
        b"(fn f ((x R))\n  (real x))\n",
    ),
    chk("fn-named-max", b"(fn max ((x R)) x)\n(fn f ((y R)) (max y y))\n"),
    // the reductions misused
    chk(
        "maximum-of-a-tensor",
        b"(fn f ((x (tensor n m R)))\n  (maximum i n (get x i)))\n",
    ),
    chk(
        "argmin-of-a-pair",
        b"(fn f ((x (tensor n R)) (p (pair R R)))\n  (argmin i n (pair (get x i) (get x i))))\n",
    ),
    chk("arity-minimum", b"(fn f ((x (tensor n R)))\n  (minimum i n))\n"),
    chk(
        "maximum-index-not-a-name",
        b"(fn f ((x (tensor n R)))\n  (maximum 3 n (get x 0)))\n",
    ),
    chk("fn-named-argmax", b"(fn argmax ((x R)) x)\n"),
    // type errors
    chk(
        "type-tensor-plus-pair",
        b"(fn f ((x (tensor n R)) (p (pair R R)))\n  (+ x p))\n",
    ),
    chk(
        "type-shape-mismatch",
        b"(fn f ((x (tensor n R)) (y (tensor m R)))\n  (+ x y))\n",
    ),
    chk("type-get-of-real", b"(fn f ((x R))\n  (get x 0))\n"),
    chk(
        "type-fst-of-tensor",
        b"(fn f ((x (tensor n R)))\n  (fst x))\n",
    ),
    chk(
        "type-sum-of-pair",
        b"(fn f ((p (pair R R)))\n  (sum i 3 p))\n",
    ),
    chk("unbound-variable", b"(fn f ((x R))\n  (+ x y))\n"),
    chk(
        "unbound-variable-near",
        b"(fn f ((x R) (y R))\n  (+ x yy))\n",
    ),
    chk(
        "unbound-index-near",
        b"(fn f ((x (tensor n R)))\n  (sum idx n (get x idy)))\n",
    ),
    chk(
        "index-used-as-real",
        b"(fn f ((x (tensor n R)))\n  (sum i n (* i (get x i))))\n",
    ),
    chk("size-used-as-real", b"(fn f ((n size))\n  (* n 2.0))\n"),
    chk(
        "real-used-as-index",
        b"(fn f ((x (tensor n R)) (y R))\n  (get x y))\n",
    ),
    chk("non-integer-size", b"(fn f ((x R))\n  (gen i 2.5 x))\n"),
    chk(
        "non-integer-size-in-type",
        b"(fn f ((x (tensor 2.5 R)))\n  x)\n",
    ),
    chk(
        "non-integer-index",
        b"(fn f ((x (tensor n R)))\n  (get x 1.5))\n",
    ),
    chk(
        "index-var-as-dimension",
        b"(fn f ((x (tensor n R)))\n  (gen i n (sum j i (get x j))))\n",
    ),
    chk("pow-nonconstant-exponent", b"(fn f ((x R))\n  (pow x x))\n"),
    chk(
        "polygamma-fractional-order",
        b"(fn f ((x R))\n  (polygamma x 0.5))\n",
    ),
    chk(
        "iverson-non-predicate",
        b"(fn f ((x R))\n  (iverson x 1.0))\n",
    ),
    chk(
        "relation-arity",
        b"(fn f ((x (tensor n R)) (S (relation n n)))\n  (sum i n (iverson (S i) (get x i))))\n",
    ),
    chk(
        "duplicate-parameter",
        b"(fn f ((x R)\n       (x R))\n  x)\n",
    ),
    chk(
        "tensor-type-missing-element",
        b"(fn f ((x (tensor n)))\n  x)\n",
    ),
    chk(
        "stored-by-not-a-relation",
        b"(fn f ((A (tensor n R (stored-by x))) (x (tensor n R)))\n  (sum i n (get A i)))\n",
    ),
    chk(
        "stored-by-wrong-dimensions",
        b"(fn f ((A (tensor n n R (stored-by S))) (S (relation n m)))\n  (sum i n (get A i i)))\n",
    ),
    chk(
        "stored-by-inside-a-type",
        b"(fn f ((A (pair R (stored-by S))) (S (relation n)))\n  (fst A))\n",
    ),
    chk(
        "stored-by-malformed",
        b"(fn f ((A (tensor n R (stored-by))) (S (relation n)))\n  (sum i n (get A i)))\n",
    ),
    chk(
        "declared-result-type-differs",
        b"(fn f ((A (tensor n R)) (S (relation n))) -> (tensor n R (stored-by S))\n  (sum i n (get A i)))\n",
    ),
    chk(
        "stored-function-called",
        b"(fn f ((A (tensor n R (stored-by S))) (S (relation n)))\n  (sum i n (get A i)))\n(fn g ((B (tensor n R)) (S (relation n)))\n  (f B S))\n",
    ),
    Case {
        name: "input-stored-count",
        args: &["eval", "prog.atl", "--inputs", "in.json"],
        prog: Some(STORED),
        inputs: Some("{\"S\": {\"tuples\": [[0, 1], [2, 0]], \"shape\": [3, 3]}, \"A\": [1, 2, 3]}"),
        stdin: None,
    },
    Case {
        name: "input-stored-unsorted-tuples",
        args: &["eval", "prog.atl", "--inputs", "in.json"],
        prog: Some(STORED),
        inputs: Some("{\"S\": {\"tuples\": [[2, 0], [0, 1]], \"shape\": [3, 3]}, \"A\": [1, 2]}"),
        stdin: None,
    },
    Case {
        name: "stdin-syntax-error",
        args: &["check", "-"],
        prog: None,
        inputs: None,
        stdin: Some(b"(fn f ((x R))\n  (+ x\n"),
    },
    // garbage
    chk("empty-file", b""),
    chk("comment-only-file", b"; nothing here\n"),
    chk("binary-garbage", b"\x00\xff\xfe(fn\x01\x80 \xc3\x28 \x7f"),
    chk("ascii-garbage", b"@#$%^&*!~ <<>> ?? \x07\x01\n"),
    // command line and inputs
    cmd(
        "negative-size",
        &["eval", "prog.atl", "--inputs", "in.json", "--sizes", "n=-3"],
        Some(VEC),
    ),
    cmd(
        "non-integer-size-flag",
        &[
            "eval", "prog.atl", "--inputs", "in.json", "--sizes", "n=2.5",
        ],
        Some(VEC),
    ),
    cmd(
        "malformed-sizes-flag",
        &["eval", "prog.atl", "--inputs", "in.json", "--sizes", "n"],
        Some(VEC),
    ),
    ev("malformed-json", "{\"x\": [1, 2,"),
    ev("json-not-object", "[1, 2, 3]"),
    ev("input-wrong-length", "{\"x\": [1, 2]}"),
    ev("input-wrong-nesting", "{\"x\": [[1], [2], [3]]}"),
    ev("input-scalar-for-tensor", "{\"x\": 1.5}"),
    ev("input-strings", "{\"x\": [\"a\", \"b\", \"c\"]}"),
    ev("input-missing", "{}"),
    Case {
        name: "input-missing-no-sizes",
        args: &["eval", "prog.atl", "--inputs", "in.json"],
        prog: Some(VEC),
        inputs: Some("{}"),
        stdin: None,
    },
    Case {
        name: "input-bad-relation",
        args: &["eval", "prog.atl", "--inputs", "in.json"],
        prog: Some(
            b"(fn f ((S (relation n)) (x (tensor n R)))\n  (sum i n (iverson (S i) (get x i))))\n",
        ),
        inputs: Some("{\"S\": [0.5, \"yes\", 2], \"x\": [1, 2, 3]}"),
        stdin: None,
    },
    cmd(
        "inputs-file-missing",
        &[
            "eval",
            "prog.atl",
            "--inputs",
            "/nonexistent/inputs.json",
            "--sizes",
            "n=3",
        ],
        Some(VEC),
    ),
    cmd("cost-without-sizes", &["cost", "prog.atl"], Some(VEC)),
    cmd(
        "nonexistent-file",
        &["check", "/nonexistent/dir/prog.atl"],
        None,
    ),
    cmd(
        "grad-of-non-scalar",
        &["grad", "prog.atl"],
        Some(b"(fn f ((x (tensor n R)))\n  x)\n"),
    ),
    cmd(
        "wrt-unknown-input",
        &["grad", "prog.atl", "--wrt", "zz"],
        Some(VEC),
    ),
    cmd(
        "wrt-misspelled-input",
        &["grad", "prog.atl", "--wrt", "xs"],
        Some(VEC),
    ),
    cmd(
        "size-overflow",
        &[
            "eval",
            "prog.atl",
            "--inputs",
            "in.json",
            "--sizes",
            "n=100000000000000000000000000000",
        ],
        Some(VEC),
    ),
    Case {
        name: "huge-size-gen",
        args: &[
            "eval",
            "prog.atl",
            "--inputs",
            "in.json",
            "--sizes",
            "n=1000000000000",
        ],
        prog: Some(b"(fn f ((n size))\n  (gen i n 1.0))\n"),
        inputs: Some("{}"),
        stdin: None,
    },
    // the compiled path reports like eval
    Case {
        name: "run-input-missing",
        args: &["run", "prog.atl", "--inputs", "in.json", "--sizes", "n=3"],
        prog: Some(VEC),
        inputs: Some("{}"),
        stdin: None,
    },
    Case {
        name: "run-input-wrong-length",
        args: &["run", "prog.atl", "--inputs", "in.json", "--sizes", "n=3"],
        prog: Some(VEC),
        inputs: Some("{\"x\": [1, 2]}"),
        stdin: None,
    },
    Case {
        name: "run-syntax-error",
        args: &["run", "prog.atl", "--inputs", "in.json"],
        prog: Some(b"(fn f ((x R))\n  (+ x\n"),
        inputs: Some("{\"x\": 1}"),
        stdin: None,
    },
    Case {
        name: "run-huge-size",
        args: &[
            "run",
            "prog.atl",
            "--inputs",
            "in.json",
            "--sizes",
            "n=1000000000000000",
        ],
        prog: Some(b"(fn f ((n size))\n  (gen i n 1.0))\n"),
        inputs: Some("{}"),
        stdin: None,
    },
    Case {
        name: "huge-size-sum",
        args: &[
            "eval",
            "prog.atl",
            "--inputs",
            "in.json",
            "--sizes",
            "n=1000000000000",
        ],
        prog: Some(b"(fn f ((n size))\n  (sum i n (* 2.0 3.0)))\n"),
        inputs: Some("{}"),
        stdin: None,
    },
    cmd("unknown-command", &["frobnicate", "prog.atl"], Some(VEC)),
    cmd("missing-file-argument", &["check"], None),
    cmd("unknown-flag", &["check", "prog.atl", "--bogus"], Some(VEC)),
    cmd(
        "misspelled-flag",
        &["grad", "prog.atl", "--with", "x"],
        Some(VEC),
    ),
    cmd(
        "wrt-size",
        &["grad", "prog.atl", "--wrt", "n"],
        Some(b"(fn f ((n size) (x (tensor n R)))\n  (sum i n (get x i)))\n"),
    ),
    // derivative forms
    chk(
        "grad-form-unknown-function",
        b"(fn sq ((x R)) (* x x))\n(fn g ((x R))\n  (+ (sq x) (grad sqr x)))\n",
    ),
    chk(
        "grad-form-of-a-pair",
        b"(fn p ((x R)) (pair x x))\n(fn g ((x R))\n  (grad p x))\n",
    ),
    chk(
        "grad-form-wrt-a-size",
        b"(fn f ((n size) (x (tensor n R))) (sum i n (get x i)))\n(fn g ((n size) (x (tensor n R)))\n  (grad f (wrt n) n x))\n",
    ),
];

fn run_case(dir: &std::path::Path, case: &Case) -> String {
    let _ = std::fs::remove_file(dir.join("prog.atl"));
    if let Some(p) = case.prog {
        std::fs::write(dir.join("prog.atl"), p).unwrap();
    }
    if let Some(j) = case.inputs {
        std::fs::write(dir.join("in.json"), j).unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_atl-egg"))
        .args(case.args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(case.stdin.unwrap_or(b""));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    format!(
        "$ atl-egg {}\nexit status: {}\n{}",
        case.args.join(" "),
        out.status.code().unwrap_or(-1),
        stderr
    )
}

/// The time limit guards the whole command and never shapes its result:
/// a command that does not finish within it fails (exit 1) with an error
/// naming the flag to raise, rather than print whatever it reached.
#[test]
fn a_tiny_time_limit_fails_with_an_error_naming_the_flag() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("diagnostics-limit");
    std::fs::create_dir_all(&dir).unwrap();
    let commands: [&'static [&'static str]; 4] = [
        &["grad", "prog.atl", "--time-limit", "0.000001"],
        &["jvp", "prog.atl", "--time-limit", "0.000001"],
        &["hvp", "prog.atl", "--time-limit", "0.000001"],
        &["optimize", "prog.atl", "--time-limit", "0.000001"],
    ];
    for args in commands {
        let case = cmd("time-limit", args, Some(VEC));
        let text = run_case(&dir, &case);
        assert!(text.contains("exit status: 1\n"), "{text}");
        assert!(
            text.contains("time limit") && text.contains("--time-limit"),
            "{text}"
        );
        assert!(!text.contains("panicked"), "{text}");
    }
}

#[test]
fn bad_inputs_reports() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("diagnostics");
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = vec![];
    for case in CASES {
        let text = run_case(&dir, case);
        assert!(
            text.contains("exit status: 1\n") || text.contains("exit status: 2\n"),
            "{text}"
        );
        assert!(
            !text.contains("Some(") && !text.contains("Error {"),
            "{text}"
        );
        let r = std::panic::catch_unwind(|| {
            insta::with_settings!({
                snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
                // named after this file, whichever test binary runs it
                prepend_module_to_snapshot => false,
                omit_expression => true,
            }, {
                insta::assert_snapshot!(format!("diagnostics__{}", case.name), text);
            });
        });
        if r.is_err() {
            failures.push(case.name);
        }
    }
    assert!(failures.is_empty(), "snapshots differ: {failures:?}");
}

/// The conformance suite's 100000-deep programs: the report shows where,
/// with an excerpt of the (600 KB) line rather than the line itself.
#[test]
fn deep_programs_report_briefly() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("diagnostics-deep");
    std::fs::create_dir_all(&dir).unwrap();
    let depth = 100_000;
    let cases: [(&'static str, String); 3] = [
        (
            "deep-unbalanced",
            format!(
                "(fn f ((x R)) {}x{}\n",
                "(+ x ".repeat(depth),
                ")".repeat(depth)
            ),
        ),
        (
            "deep-list-heads",
            format!(
                "(fn f ((x R)) {}{})\n",
                "(".repeat(depth),
                ")".repeat(depth)
            ),
        ),
        (
            "deep-valid-expression",
            format!(
                "(fn f ((x R)) {}x{})\n",
                "(+ x ".repeat(depth),
                ")".repeat(depth)
            ),
        ),
    ];
    for (name, prog) in cases {
        let prog: &'static [u8] = Box::leak(prog.into_bytes().into_boxed_slice());
        let case = Case {
            name,
            args: CHK,
            prog: Some(prog),
            inputs: None,
            stdin: None,
        };
        let text = run_case(&dir, &case);
        assert!(text.len() < 2000, "{name}: {} bytes of report", text.len());
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(format!("diagnostics__{name}"), text);
        });
    }
}

#[test]
fn hints_name_the_closest_name() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("diagnostics-hints");
    std::fs::create_dir_all(&dir).unwrap();
    let find = |name: &str| CASES.iter().find(|c| c.name == name).unwrap();
    let t = run_case(&dir, find("unbound-variable-near"));
    assert!(t.contains("prog.atl:2:8"), "{t}");
    assert!(t.contains("did you mean `y`?"), "{t}");
    let t = run_case(&dir, find("wrt-misspelled-input"));
    assert!(t.contains("did you mean `x`?"), "{t}");
    let t = run_case(&dir, find("input-missing-no-sizes"));
    assert!(t.contains("missing input 'x'"), "{t}");
}
