//! The CPU time of the calling thread: what a single-threaded piece of
//! work costs, whatever else the machine runs at the time (tests run side
//! by side, and wall time on a loaded machine says little).

use std::time::Duration;

/// CPU time the calling thread has used so far.
pub fn thread_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write into; the clock id is a
    // constant every Linux and macOS libc defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Run `f` and return its result with the CPU time the thread spent in it.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = thread_time();
    let out = f();
    (out, thread_time() - started)
}

/// A finished child process: its exit code, what it printed, and the CPU
/// time it used (user and system, from `wait4`: that child's alone, not
/// the other tests' children).
pub struct Finished {
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub cpu: Duration,
}

/// Run `cmd` to its end, capturing its output and its CPU time.
pub fn run_child(cmd: &mut std::process::Command) -> Finished {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = vec![];
        out_pipe.read_to_end(&mut v).unwrap();
        v
    });
    let mut stderr = vec![];
    err_pipe.read_to_end(&mut stderr).unwrap();
    let stdout = reader.join().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to write into.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child (not waited for elsewhere: `child`
    // is dropped without `wait`), writing into locals we own.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4 failed");
    drop(child);
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Finished {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout,
        stderr,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
    }
}
