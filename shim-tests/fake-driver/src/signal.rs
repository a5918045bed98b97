//! One process-wide "something progressed" condition variable.
//!
//! All progress in the fake (an op completed, an event completed, a context was poisoned, a
//! stream worker exited) is published by updating atomics and then calling [`notify`]. Every
//! blocking wait (stream/context/event synchronization, stream-to-stream dependencies, kernel
//! sleeps that must end early when the context faults) re-checks its condition under the same
//! lock, so no wakeup is ever lost and no wait can outlive the condition it waits for. A single
//! condition variable is plenty for a test double and makes deadlock-freedom easy to see: the
//! lock is a leaf lock, only ever held while reading atomics.

//!
//! `std::sync` (futex words inside each object), not `parking_lot`, for every lock a thread can
//! block on: parking_lot parks waiters in one process-wide table, and a process forked while the
//! parent's stream workers were parked inherits entries for threads that do not exist in the child,
//! which crashed the child's first wakeup (seen in `process_life`'s fork test).

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

static LOCK: Mutex<()> = Mutex::new(());
static CONDVAR: Condvar = Condvar::new();

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Wakes every waiter so it re-checks its condition. Call after publishing progress.
pub fn notify() {
    let _guard = lock();
    CONDVAR.notify_all();
}

/// Blocks until `done()` is true.
pub fn wait_until(mut done: impl FnMut() -> bool) {
    let mut guard = lock();
    while !done() {
        guard = CONDVAR.wait(guard).unwrap_or_else(PoisonError::into_inner);
    }
}

/// Blocks until `done()` is true or `deadline` passes; returns the final value of `done()`.
pub fn wait_deadline(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    let mut guard = lock();
    loop {
        if done() {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return done();
        }
        guard = CONDVAR
            .wait_timeout(guard, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}
