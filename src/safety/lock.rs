//! cudablame's locks: [`Mutex`] and [`RwLock`], std's futex locks behind the small API the hook
//! paths use (guards without `Result`, waits with a bound).
//!
//! Why not `parking_lot` (which this crate used before): a thread's first *wait* on a
//! parking_lot lock creates parking_lot's per-thread parking data, a thread-local with a
//! destructor, and Rust registers that destructor with glibc's `__cxa_thread_atexit_impl`, which
//! takes the loader lock (`dl_load_lock`). A library constructor runs with that lock held; if it
//! joins a thread that waits for one of cudablame's locks (a ring lock held by another thread's
//! launch, still inside the driver), the thread waits for the constructor and the constructor
//! for the thread: the program hangs (`shim-tests/tests/robust.rs`,
//! `a_constructor_joining_a_thread_that_waits_for_a_ring_lock_does_not_hang`). std's locks on
//! Linux wait with `futex(2)` on the lock word itself: no per-thread data, no allocation.
//!
//! Poisoning is ignored: a panic in cudablame's work turns cudablame off (`safety::guarded`), and a
//! lock it held stays usable for the report and the fork child's resets.
//!
//! Uncontended, both cost what parking_lot's did: one atomic read-modify-write to take and one to
//! release.

use std::sync::{PoisonError, TryLockError};
use std::time::{Duration, Instant};

pub(crate) use std::sync::{MutexGuard, RwLockReadGuard, RwLockWriteGuard};

/// A mutual-exclusion lock (std's, poisoning ignored).
#[derive(Default)]
pub(crate) struct Mutex<T: ?Sized>(std::sync::Mutex<T>);

/// A reader-writer lock (std's, poisoning ignored).
#[derive(Default)]
pub(crate) struct RwLock<T: ?Sized>(std::sync::RwLock<T>);

/// Retries `attempt` until it succeeds or `wait` has passed since the first try: a few yields,
/// then sleeps of 50 µs (the waits that use it are on report and first-use paths, never per op).
fn within<G>(wait: Duration, mut attempt: impl FnMut() -> Option<G>) -> Option<G> {
    if let Some(g) = attempt() {
        return Some(g);
    }
    let start = Instant::now();
    let mut tries = 0u32;
    loop {
        if tries < 16 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
        tries += 1;
        if let Some(g) = attempt() {
            return Some(g);
        }
        if start.elapsed() >= wait {
            return None;
        }
    }
}

/// A `try_*` result as an option: held by another thread is `None`, poisoned is the guard.
fn taken<G>(r: Result<G, TryLockError<G>>) -> Option<G> {
    match r {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Takes the lock, waiting as long as it takes.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lock if no other thread holds it.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        taken(self.0.try_lock())
    }

    /// Takes the lock, waiting at most about `wait` (`None`: still held by another thread).
    pub(crate) fn try_lock_for(&self, wait: Duration) -> Option<MutexGuard<'_, T>> {
        within(wait, || self.try_lock())
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Takes the lock shared, waiting as long as it takes.
    #[inline]
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lock exclusive, waiting as long as it takes.
    #[inline]
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lock exclusive, waiting at most about `wait` (`None`: still held).
    pub(crate) fn try_write_for(&self, wait: Duration) -> Option<RwLockWriteGuard<'_, T>> {
        within(wait, || taken(self.0.try_write()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_times_out_and_a_free_one_is_taken() {
        let m = Mutex::new(5);
        let held = m.lock();
        let t = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| assert!(m.try_lock_for(Duration::from_millis(30)).is_none()));
        });
        assert!(t.elapsed() >= Duration::from_millis(30));
        drop(held);
        assert_eq!(*m.try_lock_for(Duration::from_millis(30)).unwrap(), 5);
        let rw = RwLock::<i32>::default();
        *rw.write() = 1;
        let r = rw.read();
        assert!(rw.try_write_for(Duration::from_millis(5)).is_none());
        assert_eq!(*rw.read(), 1);
        drop(r);
        *rw.try_write_for(Duration::from_millis(5)).unwrap() = 2;
        assert_eq!(*rw.read(), 2);
    }

    #[test]
    fn a_lock_poisoned_by_a_panic_stays_usable() {
        let m = Mutex::new(1);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = m.lock();
            panic!("inside");
        }));
        *m.lock() += 1;
        assert_eq!(*m.try_lock().unwrap(), 2);
    }
}
