//! Building shared libraries with the system C compiler, cached by a hash
//! of the source, the flags and the compiler's version.
//!
//! The compiler is `$CC` (default `cc`); flags `-O3 -march=native
//! -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD -fPIC -shared
//! -Wl,-z,nodelete` (never `-ffast-math`: results must equal the
//! evaluator's up to reassociation). `-fopenmp` enables the `omp simd
//! reduction` pragmas on innermost sums and the parallel loops (see
//! `lower/parallel.rs`); where the build fails with it (a compiler
//! without OpenMP), it is retried with `-fopenmp-simd` instead (SIMD
//! only, every loop serial), cached under the same key. `-z nodelete` keeps a library
//! loaded once it is: unloading it could unload the OpenMP runtime under
//! its own idle threads. `$ATL_EGG_CFLAGS` (split at whitespace) comes
//! last, so a user's `-O1` there replaces `-O3`.
//!
//! The cache trusts nothing it did not write. It is `$ATL_EGG_CACHE`, else
//! `$XDG_CACHE_HOME/atl-egg`, else `$HOME/.cache/atl-egg`, created with
//! mode 0700; an existing one owned by another user or writable by the
//! group or others is refused (an error). With none of these variables
//! set, each process builds in a private temporary directory of its own,
//! removed when the library is dropped (there is no shared fallback).
//! Beside each library `atl-KEY.so` its SHA-256 is recorded in
//! `atl-KEY.sha256`, written only after a successful build; a library is
//! used only if both files are regular files private to the user and the
//! hash matches, and otherwise rebuilt; a library that fails to load is
//! rebuilt once. The C source and the unfinished library are temporary
//! files removed on every path.

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
                "-fopenmp",
                "-DATL_SIMD",
                "-fPIC",
                "-shared",
                "-Wl,-z,nodelete",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

/// The flags a user adds to every build: `$ATL_EGG_CFLAGS`, split at
/// whitespace (no quoting), e.g. `-O1` to compile a large program faster
/// (its code then runs slower).
pub fn user_flags() -> Vec<String> {
    std::env::var("ATL_EGG_CFLAGS")
        .map(|s| s.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// The C compiler to use.
pub fn compiler() -> String {
    std::env::var("CC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cc".into())
}

/// Where compiled libraries are kept: the configured cache directory, or,
/// when none is configured, a private temporary directory of this process
/// (removed when the `Cache`, and every library built in it, is dropped).
pub struct Cache {
    dir: PathBuf,
    _private: Option<tempfile::TempDir>,
}

/// The configured cache directory: `$ATL_EGG_CACHE`, else
/// `$XDG_CACHE_HOME/atl-egg`, else `$HOME/.cache/atl-egg`; `None` when none
/// of these variables is set.
pub fn configured_cache_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("ATL_EGG_CACHE")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("atl-egg")))
        .or_else(|| env("HOME").map(|d| d.join(".cache").join("atl-egg")))
}

impl Cache {
    /// The configured directory, created with mode 0700 if missing and
    /// refused if another user owns it or others may write to it; without
    /// one, a fresh private temporary directory.
    pub fn open() -> Result<Cache> {
        match configured_cache_dir() {
            Some(dir) => {
                ensure_private_dir(&dir)?;
                Ok(Cache {
                    dir,
                    _private: None,
                })
            }
            None => {
                let tmp = tempfile::Builder::new()
                    .prefix("atl-egg-")
                    .tempdir()
                    .map_err(|e| {
                        Error::eval(format!(
                            "cannot create a temporary directory for the compiled library: {e}"
                        ))
                    })?;
                Ok(Cache {
                    dir: tmp.path().to_path_buf(),
                    _private: Some(tmp),
                })
            }
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn library_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("atl-{key}.so"))
    }

    fn hash_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("atl-{key}.sha256"))
    }

    /// Whether the library under `key` is one this user built: both files
    /// private to the user, and the library's SHA-256 the one recorded
    /// after its build.
    fn verified(&self, key: &str) -> bool {
        let (lib, hash) = (self.library_path(key), self.hash_path(key));
        if !is_private_file(&lib) || !is_private_file(&hash) {
            return false;
        }
        let (Ok(bytes), Ok(recorded)) = (std::fs::read(&lib), std::fs::read_to_string(&hash))
        else {
            return false;
        };
        recorded.trim() == sha256_hex(&bytes)
    }

    /// The library of `job`: the cached one if it is verified, else a
    /// fresh build.
    fn verified_or_built(&self, job: &BuildJob) -> Result<PathBuf> {
        if self.verified(&job.key) {
            return Ok(self.library_path(&job.key));
        }
        self.discard(&job.key);
        self.build(job)
    }

    /// Remove the library under `key` and its recorded hash.
    fn discard(&self, key: &str) {
        let _ = std::fs::remove_file(self.hash_path(key));
        let _ = std::fs::remove_file(self.library_path(key));
    }

    /// Compile `job` into the cache under its key; the hash is recorded
    /// only once the library is in place.
    fn build(&self, job: &BuildJob) -> Result<PathBuf> {
        let lib = self.library_path(&job.key);
        if let Err(e) = compile_to(&job.cc, &job.source, &job.flags, &lib) {
            // A compiler without OpenMP: SIMD pragmas only, loops serial.
            if !job.flags.iter().any(|f| f == "-fopenmp") {
                return Err(e);
            }
            let serial: Vec<String> = job
                .flags
                .iter()
                .map(|f| match f.as_str() {
                    "-fopenmp" => "-fopenmp-simd".to_string(),
                    _ => f.clone(),
                })
                .collect();
            compile_to(&job.cc, &job.source, &serial, &lib).map_err(|_| e)?;
        }
        let bytes = std::fs::read(&lib)
            .map_err(|e| Error::eval(format!("cannot read {}: {e}", lib.display())))?;
        write_atomically(
            &self.hash_path(&job.key),
            format!("{}\n", sha256_hex(&bytes)).as_bytes(),
        )?;
        Ok(lib)
    }
}

/// Create `dir` (mode 0700) if missing; refuse it unless it is a directory
/// owned by the current user that no one else may write to.
fn ensure_private_dir(dir: &Path) -> Result<()> {
    let fail = |what: String| {
        Error::eval(format!(
            "the cache directory {} {what}; compiled libraries are not stored in it",
            dir.display()
        ))
        .with_hint("use a private directory (chmod 700), or set ATL_EGG_CACHE to one")
    };
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| fail(format!("cannot be created ({e})")))?;
    }
    match private_dir_builder().create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail(format!("cannot be created ({e})"))),
    }
    // A symbolic link must be the user's own too: another user's link could
    // be pointed elsewhere after this check.
    let link = std::fs::symlink_metadata(dir).map_err(|e| fail(format!("cannot be read ({e})")))?;
    if link.file_type().is_symlink() {
        if let Some(why) = foreign_owner(&link) {
            return Err(fail(format!("is a symbolic link that {why}")));
        }
    }
    let meta = std::fs::metadata(dir).map_err(|e| fail(format!("cannot be read ({e})")))?;
    if !meta.is_dir() {
        return Err(fail("is not a directory".into()));
    }
    match unsafe_ownership(&meta) {
        Some(why) => Err(fail(why)),
        None => Ok(()),
    }
}

#[cfg(unix)]
fn private_dir_builder() -> std::fs::DirBuilder {
    use std::os::unix::fs::DirBuilderExt;
    let mut b = std::fs::DirBuilder::new();
    b.mode(0o700);
    b
}

#[cfg(not(unix))]
fn private_dir_builder() -> std::fs::DirBuilder {
    std::fs::DirBuilder::new()
}

/// Why a file or directory with `meta` is not private to the current user
/// (owned by someone else, or writable by the group or others), if it is not.
#[cfg(unix)]
fn unsafe_ownership(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if let Some(why) = foreign_owner(meta) {
        return Some(why);
    }
    if meta.mode() & 0o022 != 0 {
        return Some(format!(
            "is writable by other users (mode {:o})",
            meta.mode() & 0o777
        ));
    }
    None
}

/// Why `meta`'s owner is not the current user, if it is not.
#[cfg(unix)]
fn foreign_owner(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    (meta.uid() != me).then(|| format!("is owned by another user (uid {})", meta.uid()))
}

#[cfg(not(unix))]
fn foreign_owner(_meta: &std::fs::Metadata) -> Option<String> {
    None
}

#[cfg(not(unix))]
fn unsafe_ownership(_meta: &std::fs::Metadata) -> Option<String> {
    None
}

#[cfg(unix)]
fn set_private_mode(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::eval(format!("cannot set the mode of {}: {e}", path.display())))
}

#[cfg(not(unix))]
fn set_private_mode(_path: &Path) -> Result<()> {
    Ok(())
}

/// A regular file (not a link) private to the current user.
fn is_private_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.file_type().is_file() && unsafe_ownership(&m).is_none())
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(bytes))
}

/// Write `bytes` to `path` through a temporary file in the same directory,
/// renamed into place (removed if anything fails).
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let fail =
        |e: &dyn std::fmt::Display| Error::eval(format!("cannot write {}: {e}", path.display()));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| fail(&e))?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(|e| fail(&e))?;
    tmp.persist(path).map_err(|e| fail(&e.error))?;
    Ok(())
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

/// What to compile, with the key it is cached under.
struct BuildJob {
    cc: String,
    source: String,
    flags: Vec<String>,
    key: String,
}

impl BuildJob {
    fn new(source: &str, count_ops: bool, flags: &Flags) -> Result<BuildJob> {
        BuildJob::with_user_flags(source, count_ops, flags, &user_flags())
    }

    /// The job with `user` (the flags of `$ATL_EGG_CFLAGS`) after every
    /// other flag: the compiler takes the last of conflicting options.
    fn with_user_flags(
        source: &str,
        count_ops: bool,
        flags: &Flags,
        user: &[String],
    ) -> Result<BuildJob> {
        let cc = compiler();
        let version = compiler_version(&cc)?;
        let mut all = flags.flags.clone();
        if count_ops {
            // The counting build checks the work, not the speed: at `-O2`
            // GCC builds a large program several times faster than at `-O3`
            // (a 3x3 stencil's gradient, 325 KB of C: 23 s against 4 s).
            for f in all.iter_mut().filter(|f| *f == "-O3") {
                *f = "-O2".into();
            }
            all.push("-DATL_COUNT_OPS".into());
        }
        all.extend(user.iter().cloned());
        let key = hash_key(&[source, &all.join(" "), &cc, &version]);
        Ok(BuildJob {
            cc,
            source: source.to_string(),
            flags: all,
            key,
        })
    }
}

/// A shared library in the cache, checked against its recorded hash. It
/// keeps the cache alive: a private temporary cache is removed when this
/// is dropped.
pub struct CachedLibrary {
    pub path: PathBuf,
    _cache: Cache,
}

/// Compile `source` (C) into a shared library, or find it in the cache
/// (only if its hash is the one recorded when it was built; otherwise it is
/// rebuilt). `count_ops` adds `-DATL_COUNT_OPS` (and builds at `-O2` where
/// the flags say `-O3`).
pub fn shared_library(source: &str, count_ops: bool, flags: &Flags) -> Result<CachedLibrary> {
    let job = BuildJob::new(source, count_ops, flags)?;
    let cache = Cache::open()?;
    let path = cache.verified_or_built(&job)?;
    Ok(CachedLibrary {
        path,
        _cache: cache,
    })
}

/// As [`shared_library`], and loaded; a library that fails to load is
/// rebuilt once.
pub fn load_library(
    source: &str,
    count_ops: bool,
    flags: &Flags,
) -> Result<(libloading::Library, CachedLibrary)> {
    let job = BuildJob::new(source, count_ops, flags)?;
    let cache = Cache::open()?;
    let mut path = cache.verified_or_built(&job)?;
    let library = match open_library(&path) {
        Ok(l) => l,
        Err(first) => {
            cache.discard(&job.key);
            path = cache.build(&job)?;
            open_library(&path).map_err(|e| {
                Error::eval(format!(
                    "cannot load {} (rebuilt after: {first}): {e}",
                    path.display()
                ))
            })?
        }
    };
    Ok((
        library,
        CachedLibrary {
            path,
            _cache: cache,
        },
    ))
}

fn open_library(path: &Path) -> std::result::Result<libloading::Library, libloading::Error> {
    idle_threads_sleep_by_default();
    // SAFETY: the library is one this user compiled from generated C (its
    // hash was checked); its initializers only set up the C runtime.
    unsafe { libloading::Library::new(path) }
}

/// Unless the user chose how idle OpenMP threads wait (`OMP_WAIT_POLICY`,
/// or GNU's `GOMP_SPINCOUNT`), they sleep (`OMP_WAIT_POLICY=passive`),
/// set before the first library (and with it the OpenMP runtime, which
/// reads the variable once) is loaded. GNU's default spins each idle
/// thread for a while after every parallel loop: on a machine whose cores
/// are busy with other work, the spinning threads take the cores from the
/// thread doing the work (a 10⁵-element gradient took 12 ms on 2 threads
/// of a loaded 2-core machine, 40 µs on one thread, 30 µs with sleeping
/// threads). Waking a sleeping thread costs microseconds, against the
/// hundreds a loop must be estimated to take to run in parallel.
fn idle_threads_sleep_by_default() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("OMP_WAIT_POLICY").is_none()
            && std::env::var_os("GOMP_SPINCOUNT").is_none()
        {
            std::env::set_var("OMP_WAIT_POLICY", "passive");
        }
    });
}

/// Compile `source` with `flags` into `out`: the source and the library are
/// written to temporary files beside `out` that are removed on every path
/// (a failed compile, an error, a panic), and the library is renamed into
/// place only once the compiler has succeeded, so concurrent builds do not
/// clash.
pub fn compile_to(cc: &str, source: &str, flags: &[String], out: &Path) -> Result<()> {
    let dir = out.parent().unwrap_or(Path::new("."));
    let temp = |suffix: &str| {
        tempfile::Builder::new()
            .prefix(".tmp-")
            .suffix(suffix)
            .tempfile_in(dir)
            .map_err(|e| {
                Error::eval(format!(
                    "cannot create a temporary file in {}: {e}",
                    dir.display()
                ))
            })
    };
    let mut c_file = temp(".c")?;
    let so_tmp = temp(".so.tmp")?;
    std::io::Write::write_all(&mut c_file, source.as_bytes())
        .map_err(|e| Error::eval(format!("cannot write {}: {e}", c_file.path().display())))?;
    let output = Command::new(cc)
        .args(flags)
        .arg("-o")
        .arg(so_tmp.path())
        .arg(c_file.path())
        .arg("-lm")
        .output()
        .map_err(|e| Error::eval(format!("cannot run the C compiler '{cc}' (set CC): {e}")))?;
    if !output.status.success() {
        let msg = String::from_utf8_lossy(&output.stderr);
        let msg: String = msg.lines().take(20).collect::<Vec<_>>().join("\n");
        return Err(Error::eval(format!("the C compiler '{cc}' failed:\n{msg}")));
    }
    // The linker may have made a new file with the umask's mode: make it
    // private again, as the cache requires.
    set_private_mode(so_tmp.path())?;
    so_tmp
        .persist(out)
        .map_err(|e| Error::eval(format!("cannot write {}: {e}", out.display())))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_builds_compile_at_o2_where_the_flags_say_o3() {
        let Ok(counted) = BuildJob::new("int x;", true, &Flags::default()) else {
            return; // no C compiler
        };
        assert!(counted.flags.iter().any(|f| f == "-O2"));
        assert!(!counted.flags.iter().any(|f| f == "-O3"));
        assert!(counted.flags.iter().any(|f| f == "-DATL_COUNT_OPS"));
        let plain = BuildJob::new("int x;", false, &Flags::default()).expect("job");
        assert!(plain.flags.iter().any(|f| f == "-O3"));
        let mut own = Flags::default();
        own.flags[0] = "-O1".into();
        let counted = BuildJob::new("int x;", true, &own).expect("job");
        assert!(counted.flags.iter().any(|f| f == "-O1"));
        assert!(!counted.flags.iter().any(|f| f == "-O2"));
    }

    #[test]
    fn user_flags_come_last_and_change_the_cache_key() {
        let Ok(plain) = BuildJob::with_user_flags("int x;", true, &Flags::default(), &[]) else {
            return; // no C compiler
        };
        let user = ["-O1".to_string(), "-g".to_string()];
        let own = BuildJob::with_user_flags("int x;", true, &Flags::default(), &user).expect("job");
        assert_eq!(own.flags[own.flags.len() - 2..], user);
        assert_eq!(own.flags[..own.flags.len() - 2], plain.flags[..]);
        assert_ne!(own.key, plain.key);
    }
}
