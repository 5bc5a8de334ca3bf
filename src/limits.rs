//! The limits of one command that are not counts: its deadline
//! (`--time-limit`) and its memory (`--memory-limit`).
//!
//! * [`CpuTime`], the clock deadlines are measured on: the CPU time of the
//!   thread running the command, so that other work on the machine does
//!   not bring a command's deadline nearer.
//! * The deadline of the command running on this thread, set for a scope
//!   by [`deadline_scope`] (the optimizer's and the derivatives' entry
//!   points, the `cost` command). Code that has no [`crate::egraph::Options`]
//!   at hand, such as cost counting, reads it with [`check_deadline`] every
//!   few thousand steps.
//! * [`Counting`], a global allocator over the system's that keeps the
//!   live bytes of the process. The binary installs it; with a cap set
//!   ([`set_memory_limit`]), an allocation that would take the live bytes
//!   past the cap, or that the system refuses (`ulimit -v`), ends the
//!   command at once with an error naming `--memory-limit` and exit status
//!   1, never an abort. It writes that report itself, without allocating.

use crate::error::{Error, Result};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::Duration;

/// A reading of the CPU time the calling thread has used. A command runs
/// on one thread, so its deadline is a reading of this clock: a machine
/// busy with other work slows the command's wall time, not its CPU time,
/// and the same command fails its time limit (or not) whatever the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuTime(Duration);

impl CpuTime {
    /// The calling thread's CPU time so far.
    #[cfg(unix)]
    pub fn now() -> CpuTime {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid timespec to write into; the clock id is a
        // constant that Linux and macOS define.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        if rc != 0 {
            return CpuTime(wall_since_start());
        }
        CpuTime(Duration::new(t.tv_sec as u64, t.tv_nsec as u32))
    }

    /// Where the thread's CPU time cannot be read: wall time since the
    /// first reading.
    #[cfg(not(unix))]
    pub fn now() -> CpuTime {
        CpuTime(wall_since_start())
    }

    /// The CPU time from `earlier` to this reading (zero if it is later).
    pub fn saturating_duration_since(self, earlier: CpuTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl std::ops::Add<Duration> for CpuTime {
    type Output = CpuTime;
    fn add(self, d: Duration) -> CpuTime {
        CpuTime(self.0.saturating_add(d))
    }
}

/// Wall time since this process first asked: the fallback clock.
fn wall_since_start() -> Duration {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}

thread_local! {
    static DEADLINE: Cell<Option<(CpuTime, Duration)>> = const { Cell::new(None) };
}

/// The error of a command past its time limit `limit`.
pub fn time_limit_error(limit: Duration) -> Error {
    Error::transform(format!(
        "the command did not finish within its time limit ({} s)",
        limit.as_secs_f64()
    ))
    .with_hint("raise --time-limit (the result does not depend on it: it only stops a command that runs too long)")
}

/// Restores the enclosing deadline when dropped.
pub struct DeadlineScope {
    previous: Option<(CpuTime, Duration)>,
}

impl Drop for DeadlineScope {
    fn drop(&mut self) {
        DEADLINE.with(|d| d.set(self.previous));
    }
}

/// Until the returned scope is dropped, this thread's command ends at
/// `deadline` (its time limit being `limit`); an enclosing scope's earlier
/// deadline stays in force.
pub fn deadline_scope(deadline: CpuTime, limit: Duration) -> DeadlineScope {
    let previous = DEADLINE.with(Cell::get);
    let now = match previous {
        Some((t, l)) if t <= deadline => (t, l),
        _ => (deadline, limit),
    };
    DEADLINE.with(|d| d.set(Some(now)));
    DeadlineScope { previous }
}

/// This thread's deadline and time limit, if a scope set one.
pub fn deadline() -> Option<(CpuTime, Duration)> {
    DEADLINE.with(Cell::get)
}

/// The time-limit error when this thread's deadline (if any) has passed.
pub fn check_deadline() -> Result<()> {
    match deadline() {
        Some((t, limit)) if CpuTime::now() >= t => Err(time_limit_error(limit)),
        _ => Ok(()),
    }
}

/// The default of `--memory-limit`, in GiB.
pub const DEFAULT_MEMORY_LIMIT_GIB: f64 = 8.0;

/// Live bytes (signed: a thread may free what another allocated before
/// either added its count).
static LIVE: AtomicIsize = AtomicIsize::new(0);
/// The cap on live bytes; 0 for none.
static CAP: AtomicUsize = AtomicUsize::new(0);

/// Cap the live bytes of the process (through [`Counting`]) at `bytes`.
pub fn set_memory_limit(bytes: usize) {
    CAP.store(bytes, Ordering::Relaxed);
}

/// The live bytes allocated through [`Counting`] (0 when it is not the
/// global allocator), to within [`FLUSH`] bytes per thread.
pub fn memory_in_use() -> usize {
    LIVE.load(Ordering::Relaxed).max(0) as usize
}

/// The system allocator, counting live bytes and holding the cap.
pub struct Counting;

thread_local! {
    /// Bytes this thread allocated (or freed, negative) since it last added
    /// them to [`LIVE`]: one atomic operation per [`FLUSH`] bytes, not per
    /// allocation (an atomic per call cost a tenth of an allocation-heavy
    /// run).
    static PENDING: Cell<isize> = const { Cell::new(0) };
}

/// How far a thread's count may run ahead of [`LIVE`].
const FLUSH: isize = 256 << 10;

impl Counting {
    /// Count `size` more bytes; past the cap, end the command.
    fn take(size: usize) {
        let size = isize::try_from(size).unwrap_or(isize::MAX);
        let pending = PENDING.with(|p| {
            let n = p.get().saturating_add(size);
            if n < FLUSH {
                p.set(n);
                0
            } else {
                p.set(0);
                n
            }
        });
        if pending > 0 {
            let live = LIVE
                .fetch_add(pending, Ordering::Relaxed)
                .saturating_add(pending);
            let cap = CAP.load(Ordering::Relaxed);
            if cap != 0 && live > 0 && live as usize > cap {
                out_of_memory(size as usize, cap, false);
            }
        }
    }

    fn give(size: usize) {
        let size = isize::try_from(size).unwrap_or(isize::MAX);
        let pending = PENDING.with(|p| {
            let n = p.get().saturating_sub(size);
            if n > -FLUSH {
                p.set(n);
                0
            } else {
                p.set(0);
                n
            }
        });
        if pending < 0 {
            LIVE.fetch_add(pending, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call goes to `System` with the caller's layout; the counts
// are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Counting::take(layout.size());
        let p = System.alloc(layout);
        if p.is_null() {
            out_of_memory(layout.size(), CAP.load(Ordering::Relaxed), true);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Counting::take(layout.size());
        let p = System.alloc_zeroed(layout);
        if p.is_null() {
            out_of_memory(layout.size(), CAP.load(Ordering::Relaxed), true);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        Counting::give(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            Counting::take(new_size - layout.size());
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            out_of_memory(new_size, CAP.load(Ordering::Relaxed), true);
        }
        if new_size < layout.size() {
            Counting::give(layout.size() - new_size);
        }
        p
    }
}

/// A fixed buffer that formats without allocating.
struct Buf {
    bytes: [u8; 512],
    len: usize,
}

impl std::fmt::Write for Buf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// End the process with the memory-limit report on standard error and
/// exit status 1 (no allocation, no unwinding: this runs inside the
/// allocator).
fn out_of_memory(size: usize, cap: usize, refused: bool) -> ! {
    use std::fmt::Write;
    let mut b = Buf {
        bytes: [0; 512],
        len: 0,
    };
    let gib = |n: usize| n as f64 / (1u64 << 30) as f64;
    let _ = if refused {
        write!(
            b,
            "error[limit]: the system refused an allocation of {size} bytes (out of memory)\n = hint: raise the system's limit (ulimit -v), or set --memory-limit below it\n"
        )
    } else {
        write!(
            b,
            "error[limit]: the command needs more memory than its limit ({:.3} GiB; an allocation of {size} bytes passed it)\n = hint: raise --memory-limit (in GiB)\n",
            gib(cap)
        )
    };
    // SAFETY: writing a buffer we own to file descriptor 2, then leaving
    // without running anything else of the process.
    unsafe {
        libc::write(2, b.bytes.as_ptr().cast(), b.len);
        libc::_exit(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inner_scope_keeps_the_earlier_deadline_and_restores_on_drop() {
        let now = CpuTime::now();
        let far = now + Duration::from_secs(100);
        assert!(deadline().is_none());
        {
            let _a = deadline_scope(now, Duration::from_secs(1));
            assert!(check_deadline().is_err());
            {
                let _b = deadline_scope(far, Duration::from_secs(100));
                assert_eq!(deadline().map(|d| d.0), Some(now));
            }
            assert_eq!(deadline().map(|d| d.0), Some(now));
        }
        assert!(deadline().is_none());
        assert!(check_deadline().is_ok());
        let _c = deadline_scope(far, Duration::from_secs(100));
        assert!(check_deadline().is_ok());
    }

    #[test]
    fn the_deadline_clock_counts_the_threads_work_not_its_waiting() {
        let before = CpuTime::now();
        std::thread::sleep(Duration::from_millis(300));
        let slept = CpuTime::now().saturating_duration_since(before);
        assert!(
            slept < Duration::from_millis(150),
            "{slept:?} of CPU time asleep"
        );
        let before = CpuTime::now();
        let mut x = 1u64;
        while CpuTime::now().saturating_duration_since(before) < Duration::from_millis(20) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        assert_ne!(x, 0);
    }
}
