//! A loaded machine: a busy thread until dropped. The tests of one answer
//! per input run commands under it, one per core, and compare their output
//! with what a machine doing nothing else computes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A busy thread until dropped: beside the commands run one per core, more
/// threads want the cores than there are, so every command is preempted
/// (one busy thread per core would burn as much again and load no more).
pub struct Load {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    pub fn start() -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let busy = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut x = 0u64;
            while !busy.load(Ordering::Relaxed) {
                for _ in 0..10_000 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005) + 1);
                }
            }
        });
        Load {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
