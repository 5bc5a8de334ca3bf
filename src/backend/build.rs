//! Building shared libraries with the system C compiler, cached by a hash
//! of the source, the flags and the compiler's version.
//!
//! The compiler is `$CC` (default `cc`); flags `-O3 -march=native
//! -ffp-contract=off -fno-math-errno -fopenmp-simd -DATL_SIMD -fPIC -shared`
//! (never `-ffast-math`: results must equal the evaluator's up to
//! reassociation; `-fopenmp-simd` only enables the `omp simd reduction`
//! pragmas the emitter puts on innermost sums, the one reassociation). The cache is
//! `$ATL_EGG_CACHE`, else `$XDG_CACHE_HOME/atl-egg`, else
//! `$HOME/.cache/atl-egg`, else the system's temporary directory.

use crate::error::{Error, Result};

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiler flags.
#[derive(Clone, Debug)]
pub struct Flags {
    pub flags: Vec<String>,
}

impl Default for Flags {
    fn default() -> Flags {
        Flags {
            flags: [
                "-O3",
                "-march=native",
                "-ffp-contract=off",
                "-fno-math-errno",
                "-fopenmp-simd",
                "-DATL_SIMD",
                "-fPIC",
                "-shared",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

/// The C compiler to use.
pub fn compiler() -> String {
    std::env::var("CC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cc".into())
}

/// The cache directory.
pub fn cache_dir() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("ATL_EGG_CACHE")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("atl-egg")))
        .or_else(|| env("HOME").map(|d| d.join(".cache").join("atl-egg")))
        .unwrap_or_else(|| std::env::temp_dir().join("atl-egg"))
}

fn compiler_version(cc: &str) -> Result<String> {
    let out = Command::new(cc)
        .arg("--version")
        .output()
        .map_err(|e| Error::eval(format!("cannot run the C compiler '{cc}' (set CC): {e}")))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// 64-bit FNV-1a twice with different seeds: a stable 128-bit key.
fn hash_key(parts: &[&str]) -> String {
    let mut out = String::new();
    for seed in [0xcbf29ce484222325u64, 0x84222325cbf29ce4] {
        let mut h = seed;
        for p in parts {
            for b in p.bytes().chain([0u8]) {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        }
        out += &format!("{h:016x}");
    }
    out
}

/// Compile `source` (C) into a shared library, or find it in the cache.
/// `count_ops` adds `-DATL_COUNT_OPS`.
pub fn shared_library(source: &str, count_ops: bool, flags: &Flags) -> Result<PathBuf> {
    let cc = compiler();
    let version = compiler_version(&cc)?;
    let mut all = flags.flags.clone();
    if count_ops {
        all.push("-DATL_COUNT_OPS".into());
    }
    let key = hash_key(&[source, &all.join(" "), &cc, &version]);
    let dir = cache_dir();
    let lib = dir.join(format!("atl-{key}.so"));
    if lib.is_file() {
        return Ok(lib);
    }
    std::fs::create_dir_all(&dir).map_err(|e| {
        Error::eval(format!(
            "cannot create the cache directory {}: {e}",
            dir.display()
        ))
    })?;
    compile_to(&cc, source, &all, &lib)?;
    Ok(lib)
}

/// Compile `source` with `flags` into `out` (written atomically: a
/// temporary file renamed into place, so concurrent builds do not clash).
pub fn compile_to(cc: &str, source: &str, flags: &[String], out: &Path) -> Result<()> {
    let dir = out.parent().unwrap_or(Path::new("."));
    let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id());
    let tag: String = tag
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let c_path = dir.join(format!(".tmp-{tag}.c"));
    let so_tmp = dir.join(format!(".tmp-{tag}.so"));
    std::fs::write(&c_path, source)
        .map_err(|e| Error::eval(format!("cannot write {}: {e}", c_path.display())))?;
    let result = Command::new(cc)
        .args(flags)
        .arg("-o")
        .arg(&so_tmp)
        .arg(&c_path)
        .arg("-lm")
        .output();
    let _ = std::fs::remove_file(&c_path);
    let output = result
        .map_err(|e| Error::eval(format!("cannot run the C compiler '{cc}' (set CC): {e}")))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&so_tmp);
        let msg = String::from_utf8_lossy(&output.stderr);
        let msg: String = msg.lines().take(20).collect::<Vec<_>>().join("\n");
        return Err(Error::eval(format!("the C compiler '{cc}' failed:\n{msg}")));
    }
    std::fs::rename(&so_tmp, out)
        .map_err(|e| Error::eval(format!("cannot write {}: {e}", out.display())))
}
