//! NumPy files end to end: inputs from an `.npz` archive and from a folder
//! of `.npy` files give the same gradient values as the same inputs in
//! JSON, and `eval -o result.npz` writes what `eval` prints.

use std::path::Path;
use std::process::Command;

fn atl(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_atl-egg"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An `.npy` file of float64 values (little-endian, C order), written by
/// hand to the format's specification (version 1.0), independently of the
/// crate's writer.
fn npy(shape: &[usize], data: &[f64]) -> Vec<u8> {
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    npy_claiming(&shape, &bytes)
}

/// An `.npy` file of float64 values whose header claims `shape`, followed
/// by `data` (however few bytes that is).
fn npy_claiming(shape: &[u64], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

/// The reals of a JSON value, flattened in order.
fn reals(j: &serde_json::Value, out: &mut Vec<f64>) {
    match j {
        serde_json::Value::Array(xs) => xs.iter().for_each(|x| reals(x, out)),
        serde_json::Value::Number(n) => out.push(n.as_f64().unwrap()),
        _ => panic!("not a real: {j}"),
    }
}

#[test]
fn npz_round_trip_matches_json() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("npz-round-trip");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("inputs")).unwrap();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/deconv_signal_loss.atl");
    let corpus = corpus.to_str().unwrap();
    // the gradient program
    let (code, grad, err) = atl(&["grad", corpus, "-o", "grad.atl"], &dir);
    assert_eq!(code, 0, "{err}");
    assert!(grad.is_empty());
    // inputs at n=4, m=3: x has n+m-1 = 6 reals
    let x = [0.5, -1.0, 0.25, 2.0, -0.75, 1.5];
    let c = [1.0, 0.5, -0.25];
    let z = [0.1, 0.2, -0.3, 0.4];
    let json = serde_json::json!({"x": x, "c": c, "z": z});
    std::fs::write(dir.join("in.json"), json.to_string()).unwrap();
    for (name, data) in [("x", &x[..]), ("c", &c[..]), ("z", &z[..])] {
        std::fs::write(
            dir.join("inputs").join(format!("{name}.npy")),
            npy(&[data.len()], data),
        )
        .unwrap();
    }
    // an .npz archive of the same arrays (stored, as numpy.savez writes)
    {
        use std::io::Write;
        let f = std::fs::File::create(dir.join("in.npz")).unwrap();
        let mut zip = zip::ZipWriter::new(f);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, data) in [("x", &x[..]), ("c", &c[..]), ("z", &z[..])] {
            zip.start_file(format!("{name}.npy"), opts).unwrap();
            zip.write_all(&npy(&[data.len()], data)).unwrap();
        }
        zip.finish().unwrap();
    }
    let (code, from_json, err) = atl(&["eval", "grad.atl", "--inputs", "in.json"], &dir);
    assert_eq!(code, 0, "{err}");
    let (code, from_npz, err) = atl(&["eval", "grad.atl", "--inputs", "in.npz"], &dir);
    assert_eq!(code, 0, "{err}");
    let (code, from_dir, err) = atl(&["eval", "grad.atl", "--inputs", "inputs"], &dir);
    assert_eq!(code, 0, "{err}");
    assert_eq!(from_json, from_npz);
    assert_eq!(from_json, from_dir);
    // the gradient out as .npz, read back as inputs of a program taking
    // the three gradients (pairs are split into result.0, result.1.0, ...)
    let (code, _, err) = atl(
        &["eval", "grad.atl", "--inputs", "in.npz", "-o", "result.npz"],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    std::fs::write(
        dir.join("id.atl"),
        "(fn id ((result (pair (tensor (- (+ m n) 1) R) (pair (tensor m R) (tensor n R))))) result)",
    )
    .unwrap();
    let (code, back, err) = atl(&["eval", "id.atl", "--inputs", "result.npz"], &dir);
    assert_eq!(code, 0, "{err}");
    let (mut a, mut b) = (vec![], vec![]);
    reals(&serde_json::from_str(&from_json).unwrap(), &mut a);
    reals(&serde_json::from_str(&back).unwrap(), &mut b);
    assert_eq!(a.len(), 13);
    assert_eq!(a, b);
    // a single tensor as .npy
    let (code, _, err) = atl(
        &["eval", "id.atl", "--inputs", "result.npz", "-o", "pair.npy"],
        &dir,
    );
    assert_eq!(code, 1);
    assert!(err.contains("-o result.npz"), "{err}");
}

#[test]
fn non_finite_values_read_back() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("non-finite");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("f.atl"),
        "(fn f ((x (tensor n R))) (gen i n (log (get x i))))",
    )
    .unwrap();
    std::fs::write(dir.join("in.json"), r#"{"x": [0, -1, 1, "Infinity"]}"#).unwrap();
    let (code, out, err) = atl(&["eval", "f.atl", "--inputs", "in.json"], &dir);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "[-1e999, null, 0.0, 1e999]\n");
    // valid JSON, and read back as inputs
    let v: serde_json::Value = atl_egg::semantics::json::parse_json(&out).unwrap();
    std::fs::write(
        dir.join("back.json"),
        serde_json::json!({ "x": v }).to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("id.atl"), "(fn id ((x (tensor n R))) x)").unwrap();
    let (code, again, err) = atl(&["eval", "id.atl", "--inputs", "back.json"], &dir);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again, out);
}

/// A `.npy` file of booleans (`|b1`), written by hand.
fn npy_bool(shape: &[usize], data: &[bool]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| format!("{d},")).collect();
    let mut header = format!(
        "{{'descr': '|b1', 'fortran_order': False, 'shape': ({}), }}",
        dims.join(" ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data.iter().map(|&b| b as u8));
    out
}

/// Relations as boolean arrays, a real as a 0-d array: the gradient of a
/// loss over a graph's edges, from a folder of `.npy` files and from JSON.
#[test]
fn relations_as_boolean_arrays() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("npz-relations");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("inputs")).unwrap();
    let prog = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/graph_smoothness.atl");
    let (code, _, err) = atl(
        &["grad", prog.to_str().unwrap(), "--wrt", "x", "-o", "g.atl"],
        &dir,
    );
    assert_eq!(code, 0, "{err}");
    let e = [false, true, false, true, false, true, false, false, false];
    std::fs::write(dir.join("inputs/E.npy"), npy_bool(&[3, 3], &e)).unwrap();
    std::fs::write(dir.join("inputs/x.npy"), npy(&[3], &[0.5, -1.0, 2.0])).unwrap();
    std::fs::write(dir.join("inputs/lam.npy"), npy(&[], &[0.25])).unwrap();
    std::fs::write(
        dir.join("in.json"),
        r#"{"E": [[false, true, false], [true, false, true], [false, false, false]],
            "x": [0.5, -1.0, 2.0], "lam": 0.25}"#,
    )
    .unwrap();
    let (code, from_json, err) = atl(&["eval", "g.atl", "--inputs", "in.json"], &dir);
    assert_eq!(code, 0, "{err}");
    let (code, from_npy, err) = atl(&["eval", "g.atl", "--inputs", "inputs"], &dir);
    assert_eq!(code, 0, "{err}");
    assert_eq!(from_json, from_npy);
}

/// An `.npz` archive (stored, not compressed) of `(member name, bytes)`.
fn npz_of(path: &Path, members: &[(&str, Vec<u8>)]) {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in members {
        zip.start_file(format!("{name}.npy"), opts).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

/// `atl-egg eval f.atl --inputs INPUTS [--sizes S]` in `dir` under an
/// address-space limit: the binary reserves 4 GiB of address space for its
/// worker thread's stack, and the limit leaves 1 GiB beyond that, far less
/// than the gigabytes an input's claimed shape could ask for. Returns
/// (exit status, stderr, seconds).
fn eval_limited(dir: &Path, inputs: &str, sizes: Option<&str>) -> (i32, String, f64) {
    let limit_kb = (4u64 << 20) + (1 << 20);
    let mut args = vec!["eval", "f.atl", "--inputs", inputs];
    if let Some(s) = sizes {
        args.extend(["--sizes", s]);
    }
    let start = std::time::Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {limit_kb}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_atl-egg"))
        .args(&args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed().as_secs_f64(),
    )
}

/// A fresh directory holding `program` as `f.atl`.
fn hostile_dir(name: &str, program: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("npz-hostile-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.atl"), program).unwrap();
    dir
}

fn assert_clean_failure(what: &str, (code, err, secs): (i32, String, f64), needles: &[&str]) {
    assert_eq!(code, 1, "{what}: exit status {code}: {err}");
    // well under a second on an idle machine; the bound allows for tests
    // running side by side, and still catches a reader that walks
    // gigabytes an input's header claims
    assert!(secs < 20.0, "{what}: took {secs:.1} s");
    for n in needles {
        assert!(err.contains(n), "{what}: message lacks '{n}': {err}");
    }
}

#[test]
fn huge_claimed_shapes_fail_before_any_allocation() {
    let dir = hostile_dir(
        "shapes",
        "(fn f ((x (tensor n (tensor m R)))) (sum i n (sum j m (get x i j))))",
    );
    for (k, shape) in [[1u64 << 32, 0], [1 << 32, 1 << 32], [100_000_000, 0]]
        .iter()
        .enumerate()
    {
        let bytes = npy_claiming(shape, &[]);
        let folder = dir.join(format!("folder{k}"));
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("x.npy"), &bytes).unwrap();
        let archive = format!("in{k}.npz");
        npz_of(&dir.join(&archive), &[("x", bytes)]);
        let shown = format!("({}, {})", shape[0], shape[1]);
        for inputs in [format!("folder{k}"), archive] {
            assert_clean_failure(
                &format!("{inputs} {shown}"),
                eval_limited(&dir, &inputs, None),
                &[&shown, "input 'x'", "50000000"],
            );
        }
    }
}

#[test]
fn claimed_shapes_must_match_the_parameter() {
    let dir = hostile_dir("mismatch", "(fn f ((x (tensor n R))) (sum i n (get x i)))");
    let bytes = npy_claiming(&[1 << 32], &[0; 24]);
    npz_of(&dir.join("long.npz"), &[("x", bytes)]);
    assert_clean_failure(
        "declared length against --sizes",
        eval_limited(&dir, "long.npz", Some("n=3")),
        &["(4294967296,)", "input 'x' expects (3,)"],
    );
    npz_of(&dir.join("rank.npz"), &[("x", npy(&[2, 2], &[1.0; 4]))]);
    assert_clean_failure(
        "rank",
        eval_limited(&dir, "rank.npz", None),
        &["(2, 2)", "input 'x' expects (?,)"],
    );
    // a header promising more than the file holds
    npz_of(
        &dir.join("short.npz"),
        &[("x", npy_claiming(&[3], &[0; 8]))],
    );
    assert_clean_failure(
        "short data",
        eval_limited(&dir, "short.npz", None),
        &["short.npz[x]"],
    );
}

#[test]
fn index_named_arrays_are_bounded_by_the_shape() {
    let dir = hostile_dir(
        "indices",
        "(fn f ((w (tensor n R)) (p (pair R R))) (+ (fst p) (sum i n (get w i))))",
    );
    let three = npy(&[3], &[1.0, 2.0, 3.0]);
    let real = npy(&[], &[1.0]);
    let folder = dir.join("far");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("w.1000000000.npy"), &three).unwrap();
    std::fs::write(folder.join("p.0.npy"), &real).unwrap();
    std::fs::write(folder.join("p.1.npy"), &real).unwrap();
    assert_clean_failure(
        "folder w.1000000000",
        eval_limited(&dir, "far", None),
        &["'w.1000000000' is given but 'w.0' is not"],
    );
    npz_of(
        &dir.join("far.npz"),
        &[
            ("w.3000000000", three.clone()),
            ("p.0", real.clone()),
            ("p.1", real.clone()),
        ],
    );
    assert_clean_failure(
        "npz w.3000000000",
        eval_limited(&dir, "far.npz", None),
        &["'w.3000000000' is given but 'w.0' is not"],
    );
    assert_clean_failure(
        "an index past a known size",
        eval_limited(&dir, "far.npz", Some("n=3")),
        &[
            "index 3000000000 is out of range for input 'w'",
            "dimension n is 3",
        ],
    );
    npz_of(
        &dir.join("pair.npz"),
        &[
            ("w", three),
            ("p.0", real.clone()),
            ("p.1", real.clone()),
            ("p.2", real),
        ],
    );
    assert_clean_failure(
        "a third component of a pair",
        eval_limited(&dir, "pair.npz", None),
        &[
            "index 2 is out of range for input 'p'",
            "components 0 and 1",
        ],
    );
}

#[test]
fn sizes_from_earlier_arrays_bound_later_headers() {
    let dir = hostile_dir(
        "learned-size",
        "(fn f ((x (tensor n R)) (y (tensor n R))) (sum i n (* (get x i) (get y i))))",
    );
    // y's header claims more rows than x gave n, and the file holds none
    npz_of(
        &dir.join("in.npz"),
        &[
            ("x", npy(&[3], &[1.0, 2.0, 3.0])),
            ("y", npy_claiming(&[40_000_000], &[])),
        ],
    );
    assert_clean_failure(
        "y against the n of x",
        eval_limited(&dir, "in.npz", None),
        &["(40000000,)", "input 'y' expects (3,)"],
    );
}

/// An `.npy` file of int64 values (little-endian, C order).
fn npy_i64(shape: &[usize], data: &[i64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<i8', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data.iter().flat_map(|x| x.to_le_bytes()));
    out
}

/// A relation given by its tuples (`E.tuples`, shape `(nnz, 2)`, any order)
/// in an `.npz` archive: `eval` and `run` print what its dense map gives;
/// tuples out of range or given twice are errors naming the relation.
#[test]
fn relations_as_tuples() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("npz-tuples");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let prog = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/graph_smoothness.atl");
    let prog = prog.to_str().unwrap();
    std::fs::write(
        dir.join("in.json"),
        r#"{"E": [[false, true, false], [true, false, true], [false, false, false]],
            "x": [0.5, -1.0, 2.0], "lam": 0.25}"#,
    )
    .unwrap();
    let x = npy(&[3], &[0.5, -1.0, 2.0]);
    let lam = npy(&[], &[0.25]);
    let tuples = |t: &[i64]| npy_i64(&[t.len() / 2, 2], t);
    npz_of(
        &dir.join("in.npz"),
        &[
            ("E.tuples", tuples(&[1, 2, 0, 1, 1, 0])),
            ("x", x.clone()),
            ("lam", lam.clone()),
        ],
    );
    let (code, want, err) = atl(&["eval", prog, "--inputs", "in.json"], &dir);
    assert_eq!(code, 0, "{err}");
    for cmd in ["eval", "run"] {
        let (code, got, err) = atl(&[cmd, prog, "--inputs", "in.npz"], &dir);
        assert_eq!(code, 0, "{cmd}: {err}");
        assert_eq!(got, want, "{cmd}");
    }
    for (bad, needle) in [
        (tuples(&[0, 1, 0, 3]), "out of range"),
        (tuples(&[0, 1, 0, 1]), "given twice"),
        (npy_i64(&[1, 3], &[0, 1, 2]), "3 coordinate(s)"),
    ] {
        npz_of(
            &dir.join("bad.npz"),
            &[("E.tuples", bad), ("x", x.clone()), ("lam", lam.clone())],
        );
        let (code, _, err) = atl(&["run", prog, "--inputs", "bad.npz"], &dir);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("input 'E'") && err.contains(needle), "{err}");
    }
}

/// A tensor stored by a relation's pattern: a one-dimensional array of one
/// value per tuple, as in JSON; `eval` and `run` agree with the JSON inputs,
/// and a wrong count names the parameter.
#[test]
fn stored_tensors_as_value_arrays() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("npz-stored");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let prog = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/sparse_matvec_stored.atl");
    let prog = prog.to_str().unwrap();
    std::fs::write(
        dir.join("in.json"),
        r#"{"S": {"tuples": [[0, 1], [0, 2], [1, 0], [2, 2]], "shape": [3, 3]},
            "A": [1, 2, 3, 4], "x": [1, -1, 0.5], "y": [1, 2, 3]}"#,
    )
    .unwrap();
    let members = |a: Vec<u8>| {
        [
            ("S.tuples", npy_i64(&[4, 2], &[0, 1, 0, 2, 1, 0, 2, 2])),
            ("A", a),
            ("x", npy(&[3], &[1.0, -1.0, 0.5])),
            ("y", npy(&[3], &[1.0, 2.0, 3.0])),
        ]
    };
    npz_of(
        &dir.join("in.npz"),
        &members(npy(&[4], &[1.0, 2.0, 3.0, 4.0])),
    );
    let sizes = ["--sizes", "n=3,m=3"];
    let (code, want, err) = atl(&["eval", prog, "--inputs", "in.json"], &dir);
    assert_eq!((code, want.as_str()), (0, "3.0\n"), "{err}");
    for cmd in ["eval", "run"] {
        let (code, got, err) = atl(&[cmd, prog, "--inputs", "in.npz", sizes[0], sizes[1]], &dir);
        assert_eq!(code, 0, "{cmd}: {err}");
        assert_eq!(got, want, "{cmd}");
    }
    npz_of(&dir.join("bad.npz"), &members(npy(&[3], &[1.0, 2.0, 3.0])));
    let (code, _, err) = atl(
        &["eval", prog, "--inputs", "bad.npz", sizes[0], sizes[1]],
        &dir,
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("input 'A'") && err.contains("4 tuple(s)"),
        "{err}"
    );
}

/// Arrays that give a whole input are checked as JSON values are: a
/// boolean array is no tensor of reals, a relation's array holds 0 and 1,
/// and an input is given whole or by its components, not both.
#[test]
fn whole_arrays_are_checked_as_json_is() {
    let dir = hostile_dir(
        "whole",
        "(fn f ((E (relation n n)) (x (tensor n R)) (p (pair R R)))
           (+ (fst p) (sum i n (sum j n (iverson (E i j) (get x j))))))",
    );
    let x = npy(&[2], &[1.0, 2.0]);
    let real = npy(&[], &[1.0]);
    let e = npy_bool(&[2, 2], &[false, true, true, false]);
    type Members<'a> = Vec<(&'a str, Vec<u8>)>;
    let cases: [(&str, Members, &str); 4] = [
        (
            "booleans as reals",
            vec![
                ("E", e.clone()),
                ("x", npy_bool(&[2], &[true, false])),
                ("p.0", real.clone()),
                ("p.1", real.clone()),
            ],
            "holds booleans, where reals are expected",
        ),
        (
            "a relation of twos",
            vec![
                ("E", npy_i64(&[2, 2], &[0, 2, 1, 0])),
                ("x", x.clone()),
                ("p.0", real.clone()),
                ("p.1", real.clone()),
            ],
            "element 1 is 2",
        ),
        (
            "whole and components",
            vec![
                ("E", e.clone()),
                ("x", x.clone()),
                ("x.0", real.clone()),
                ("x.1", real.clone()),
                ("p.0", real.clone()),
                ("p.1", real.clone()),
            ],
            "given both whole",
        ),
        (
            "reals as a relation",
            vec![
                ("E", npy(&[2, 2], &[0.0, 1.0, 1.0, 0.0])),
                ("x", x.clone()),
                ("p.0", real.clone()),
                ("p.1", real.clone()),
            ],
            "not reals",
        ),
    ];
    for (what, members, needle) in cases {
        npz_of(&dir.join("in.npz"), &members);
        assert_clean_failure(what, eval_limited(&dir, "in.npz", None), &[needle]);
    }
    npz_of(
        &dir.join("good.npz"),
        &[("E", e), ("x", x), ("p.0", real.clone()), ("p.1", real)],
    );
    let (code, out, err) = atl(&["eval", "f.atl", "--inputs", "good.npz"], &dir);
    assert_eq!((code, out.as_str()), (0, "4.0\n"), "{err}");
}
