//! The compiled-library cache trusts nothing it did not write: a library
//! planted under a program's key is not run, a truncated one is rebuilt, a
//! cache directory others may write to is refused, a failed compile leaves
//! no temporary files, and without any cache variable the build happens in
//! a private temporary directory that is gone when `run` ends.
//!
//! Every test runs the binary with `ATL_EGG_CACHE` (or `TMPDIR`) pointing
//! at a directory of its own. Needs a C compiler (`$CC`, default `cc`);
//! without one every test prints why and passes vacuously.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROGRAM: &str = "(fn f ((x (tensor n R))) (sum i n (* (get x i) (get x i))))";
const INPUTS: &str = r#"{"x": [1, 2, 3]}"#;
const EXPECTED: &str = "14.0";

fn have_cc() -> bool {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let ok = Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: no C compiler ('{cc}')");
    }
    ok
}

/// A fresh directory for one test, with the program and its inputs.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cache-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.atl"), PROGRAM).unwrap();
    std::fs::write(dir.join("in.json"), INPUTS).unwrap();
    dir
}

/// `atl-egg run f.atl --inputs in.json` in `dir` with the cache `cache`
/// (and `env` on top): (exit status, stdout, stderr).
fn run(dir: &Path, cache: &Path, env: &[(&str, &Path)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_atl-egg"));
    cmd.args(["run", "f.atl", "--inputs", "in.json"])
        .current_dir(dir)
        .env("ATL_EGG_CACHE", cache);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The one library in `cache`.
fn library_in(cache: &Path) -> PathBuf {
    let libs: Vec<String> = listing(cache)
        .into_iter()
        .filter(|n| n.ends_with(".so"))
        .collect();
    assert_eq!(libs.len(), 1, "one library in the cache: {libs:?}");
    cache.join(&libs[0])
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn cache_directory_is_created_private_with_a_hash_beside_each_library() {
    if !have_cc() {
        return;
    }
    let dir = scratch("private");
    let cache = dir.join("cache");
    let (code, out, err) = run(&dir, &cache, &[]);
    assert_eq!((code, out.as_str()), (0, EXPECTED), "{err}");
    assert_eq!(mode(&cache), 0o700);
    let lib = library_in(&cache);
    let names = listing(&cache);
    assert_eq!(names.len(), 2, "the library and its hash only: {names:?}");
    let hash = std::fs::read_to_string(lib.with_extension("sha256")).unwrap();
    assert_eq!(hash.trim().len(), 64, "a SHA-256 in hex: {hash}");
    assert_eq!(mode(&lib) & 0o022, 0);
}

/// A library whose constructor leaves a marker file and whose entry point
/// returns a wrong value.
fn planted_library(dir: &Path, marker: &Path) -> Vec<u8> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let src = dir.join("planted.c");
    std::fs::write(
        &src,
        format!(
            r#"#include <stdio.h>
#include <stdint.h>
__attribute__((constructor)) static void planted(void) {{
  FILE *f = fopen("{}", "w"); if (f) {{ fputs("ran", f); fclose(f); }}
}}
int atlpacked_entry(const int64_t *s, const double **r, const int64_t **b, double **o) {{
  (void)s; (void)r; (void)b; o[0][0] = 666.0; return 0;
}}
"#,
            marker.display()
        ),
    )
    .unwrap();
    let so = dir.join("planted.so");
    let out = Command::new(cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&so).unwrap()
}

#[test]
fn planted_library_is_not_run() {
    if !have_cc() {
        return;
    }
    let dir = scratch("planted");
    let cache = dir.join("cache");
    let marker = dir.join("marker");
    let planted = planted_library(&dir, &marker);
    // Learn the program's key, then plant a library under it: once beside
    // the genuine hash, once with no hash at all.
    let (code, _, err) = run(&dir, &cache, &[]);
    assert_eq!(code, 0, "{err}");
    let lib = library_in(&cache);
    for drop_hash in [false, true] {
        std::fs::write(&lib, &planted).unwrap();
        if drop_hash {
            std::fs::remove_file(lib.with_extension("sha256")).unwrap();
        }
        let (code, out, err) = run(&dir, &cache, &[]);
        assert_eq!((code, out.as_str()), (0, EXPECTED), "{err}");
        assert!(!marker.exists(), "the planted library ran");
        assert_ne!(std::fs::read(&lib).unwrap(), planted, "it was replaced");
    }
}

#[test]
fn truncated_library_is_rebuilt() {
    if !have_cc() {
        return;
    }
    let dir = scratch("truncated");
    let cache = dir.join("cache");
    let (code, _, err) = run(&dir, &cache, &[]);
    assert_eq!(code, 0, "{err}");
    let lib = library_in(&cache);
    let whole = std::fs::read(&lib).unwrap();
    for keep in [whole.len() / 2, 0] {
        std::fs::write(&lib, &whole[..keep]).unwrap();
        let (code, out, err) = run(&dir, &cache, &[]);
        assert_eq!((code, out.as_str()), (0, EXPECTED), "{err}");
        assert_eq!(std::fs::read(&lib).unwrap().len(), whole.len());
    }
}

#[test]
fn cache_directory_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    if !have_cc() {
        return;
    }
    let dir = scratch("shared-dir");
    let cache = dir.join("cache");
    for m in [0o770, 0o757, 0o777] {
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(m)).unwrap();
        let (code, out, err) = run(&dir, &cache, &[]);
        assert_eq!(code, 1, "mode {m:o}: {out} {err}");
        assert!(
            err.contains("writable by other users") && err.contains("ATL_EGG_CACHE"),
            "{err}"
        );
        assert!(
            listing(&cache).is_empty(),
            "nothing written: {:?}",
            listing(&cache)
        );
    }
}

#[test]
fn failed_compile_leaves_no_temporary_files() {
    use std::os::unix::fs::PermissionsExt;
    if !have_cc() {
        return;
    }
    let dir = scratch("failed-compile");
    let cache = dir.join("cache");
    // A compiler that writes part of its output, then fails.
    let cc = dir.join("broken-cc");
    std::fs::write(
        &cc,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do\n  if [ \"$1\" = -o ]; then echo partial > \"$2\"; fi\n  shift\ndone\necho 'broken-cc: failed' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, _, err) = run(&dir, &cache, &[("CC", &cc)]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("broken-cc: failed"), "{err}");
    assert!(
        listing(&cache).is_empty(),
        "left behind: {:?}",
        listing(&cache)
    );
}

#[test]
fn without_cache_variables_the_build_is_private_and_removed() {
    if !have_cc() {
        return;
    }
    let dir = scratch("no-home");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_atl-egg"))
        .args(["run", "f.atl", "--inputs", "in.json"])
        .current_dir(&dir)
        .env_remove("ATL_EGG_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("HOME")
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        (out.status.code(), stdout.trim()),
        (Some(0), EXPECTED),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(listing(&tmp).is_empty(), "left behind: {:?}", listing(&tmp));
}

#[test]
fn library_that_fails_to_load_is_rebuilt_once() {
    use sha2::{Digest, Sha256};
    if !have_cc() {
        return;
    }
    let dir = scratch("unloadable");
    let cache = dir.join("cache");
    let (code, _, err) = run(&dir, &cache, &[]);
    assert_eq!(code, 0, "{err}");
    let lib = library_in(&cache);
    // Not a library, yet with its hash recorded: loading it fails.
    let garbage = b"not an ELF file".to_vec();
    std::fs::write(&lib, &garbage).unwrap();
    std::fs::write(
        lib.with_extension("sha256"),
        format!("{:x}\n", Sha256::digest(&garbage)),
    )
    .unwrap();
    let (code, out, err) = run(&dir, &cache, &[]);
    assert_eq!((code, out.as_str()), (0, EXPECTED), "{err}");
    assert_ne!(std::fs::read(&lib).unwrap(), garbage);
}
