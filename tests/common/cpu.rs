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
