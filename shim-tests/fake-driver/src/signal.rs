//! One process-wide "something progressed" condition variable.
//!
//! All progress in the fake (an op completed, an event completed, a context was poisoned, a
//! stream worker exited) is published by updating atomics and then calling [`notify`]. Every
//! blocking wait (stream/context/event synchronization, stream-to-stream dependencies, kernel
//! sleeps that must end early when the context faults) re-checks its condition under the same
//! lock, so no wakeup is ever lost and no wait can outlive the condition it waits for. A single
//! condition variable is plenty for a test double and makes deadlock-freedom easy to see: the
//! lock is a leaf lock, only ever held while reading atomics.

use parking_lot::{Condvar, Mutex};
use std::time::Instant;

static LOCK: Mutex<()> = parking_lot::const_mutex(());
static CONDVAR: Condvar = Condvar::new();

/// Wakes every waiter so it re-checks its condition. Call after publishing progress.
pub fn notify() {
    let _guard = LOCK.lock();
    CONDVAR.notify_all();
}

/// Blocks until `done()` is true.
pub fn wait_until(mut done: impl FnMut() -> bool) {
    let mut guard = LOCK.lock();
    while !done() {
        CONDVAR.wait(&mut guard);
    }
}

/// Blocks until `done()` is true or `deadline` passes; returns the final value of `done()`.
pub fn wait_deadline(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    let mut guard = LOCK.lock();
    loop {
        if done() {
            return true;
        }
        if CONDVAR.wait_until(&mut guard, deadline).timed_out() {
            return done();
        }
    }
}
