//! Running independent checks on every core: the corpus-wide tests spend
//! their time in the optimizer, one program at a time, while `cargo test`
//! runs one test binary at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The stack of each worker: as deep as the library's own big stack, for
/// the deeply nested programs some tests build.
const WORKER_STACK: usize = 256 << 20;

/// `f` of every item, in the items' order, computed on as many threads as
/// the machine has cores (items are taken in order as threads free up).
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(items.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            std::thread::Builder::new()
                .stack_size(WORKER_STACK)
                .spawn_scoped(s, || loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(k) else { break };
                    let r = f(item);
                    results.lock().unwrap()[k] = Some(r);
                })
                .expect("a worker thread starts");
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every item was computed"))
        .collect()
}
