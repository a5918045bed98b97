//! Never changing the program: cudablame's own code runs under [`guarded`], which turns a panic
//! into "cudablame is off from now on" (one line on stderr, the real results still returned);
//! stderr is written with [`write_stderr`], which never panics and never raises `SIGPIPE` in the
//! program; and a forked child forgets the parent's tables ([`register_fork_handler`], given the
//! reset of every table by `interpose`, the top of the data path).

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, Ordering};

/// Set by the first panic in cudablame's code: every hook then only makes the real call.
static DISABLED: AtomicBool = AtomicBool::new(false);
/// The panic hook: 0 not installed, 1 being installed (by one thread; the others do not wait),
/// 2 installed. Not a `std::sync::Once`: see [`ForkSafeOnce`].
static HOOK: AtomicU8 = AtomicU8::new(0);

/// Whether an internal error turned cudablame off.
#[inline]
pub(crate) fn disabled() -> bool {
    DISABLED.load(Ordering::Relaxed)
}

/// Runs cudablame's own work, never letting a panic cross into the program: `None` if it
/// panicked, or if an earlier panic turned cudablame off.
#[inline]
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    if disabled() {
        return None;
    }
    catching(f)
}

/// Runs `f`, turning a panic into `None`, even when cudablame is off: for finding what the
/// program's call needs (the real function), which must keep working after an internal error.
#[inline]
pub(crate) fn catching<T>(f: impl FnOnce() -> T) -> Option<T> {
    if HOOK.load(Ordering::Acquire) == 0
        && HOOK
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        install_panic_hook();
        HOOK.store(2, Ordering::Release);
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(_) => {
            DISABLED.store(true, Ordering::Relaxed);
            None
        }
    }
}

/// Replaces the default panic hook of cudablame's own copy of `std` (a Rust host program has
/// its own, untouched): one line, the first time, instead of a message and a backtrace hint.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        DISABLED.store(true, Ordering::Relaxed);
        static SAID: AtomicBool = AtomicBool::new(false);
        if SAID.swap(true, Ordering::Relaxed) {
            return;
        }
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("panic");
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        say(&format!(
            "cudablame: internal error ({message}{at}); continuing without it"
        ));
    }));
}

/// Writes one line (a newline is added) to stderr; see [`write_stderr`].
pub(crate) fn say(line: &str) {
    let mut s = String::with_capacity(line.len() + 1);
    s.push_str(line);
    s.push('\n');
    write_stderr(s.as_bytes());
}

/// Writes `bytes` to file descriptor 2 and ignores failures. Unlike `eprint!` it never panics
/// (a closed or broken stderr is the program's business), and `SIGPIPE` is blocked on this thread
/// for the write, a `SIGPIPE` it raised is consumed: a program whose stderr reader went away is
/// not killed because cudablame wrote there.
pub(crate) fn write_stderr(bytes: &[u8]) {
    // SAFETY: signal-mask and write system calls on local, initialized data.
    unsafe {
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        let masked = libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old) == 0;
        let mut pending: libc::sigset_t = std::mem::zeroed();
        let was_pending = masked
            && libc::sigpending(&mut pending) == 0
            && libc::sigismember(&pending, libc::SIGPIPE) == 1;
        let mut rest = bytes;
        let mut broken = false;
        while !rest.is_empty() {
            let n = libc::write(2, rest.as_ptr() as *const libc::c_void, rest.len());
            if n > 0 {
                rest = &rest[n as usize..];
                continue;
            }
            let err = *libc::__errno_location();
            if n < 0 && err == libc::EINTR {
                continue;
            }
            broken = err == libc::EPIPE;
            break;
        }
        if masked {
            if broken && !was_pending {
                let zero = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                libc::sigtimedwait(&pipe, std::ptr::null_mut(), &zero);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }
}

/// `s`, cut to `max` characters with a `…` when longer: user input echoed in one-line messages.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &s[..end]),
        None => s.to_string(),
    }
}

/// A process-wide value that a forked child can drop without touching it.
///
/// After `fork` only the forking thread exists in the child: a lock that another parent thread
/// held at that moment would never be released there. Instead of clearing tables under their
/// locks, the child replaces them: [`Resettable::reset_in_child`] forgets the parent's value
/// (leaked, never read or freed) and the next [`Resettable::get`] makes a fresh one.
pub(crate) struct Resettable<T: Default> {
    ptr: AtomicPtr<T>,
}

impl<T: Default> Resettable<T> {
    pub(crate) const fn new() -> Self {
        Resettable {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The current value, created on first use.
    #[inline]
    pub(crate) fn get(&self) -> &T {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: values are leaked boxes, never freed once published.
            return unsafe { &*p };
        }
        let fresh = Box::into_raw(Box::<T>::default());
        match self.ptr.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: just published, never freed.
            Ok(_) => unsafe { &*fresh },
            Err(existing) => {
                // SAFETY: `fresh` was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: published by another thread, never freed.
                unsafe { &*existing }
            }
        }
    }

    /// Forgets the value without reading, locking or freeing it. Only for a forked child (the
    /// single thread left), or for tests.
    pub(crate) fn reset_in_child(&self) {
        self.ptr.store(std::ptr::null_mut(), Ordering::Release);
    }
}

impl<T: Default> Default for Resettable<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Registers `child` (interpose's `after_fork_in_child`) with `pthread_atfork`, once (at the first hooked call: a
/// process that never reaches the driver has nothing to forget).
pub(crate) fn register_fork_handler(child: extern "C" fn()) {
    // Not a `std::sync::Once`: a thread forking while another is inside `call_once` would leave
    // the child's copy "running" forever, and the child's first hook would wait on it forever.
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    if !REGISTERED.load(Ordering::Acquire) && !REGISTERED.swap(true, Ordering::AcqRel) {
        // SAFETY: registers a plain extern "C" function that takes no lock and never unwinds
        // (`child` catches panics); pthread_atfork has no other precondition.
        unsafe { libc::pthread_atfork(None, None, Some(child)) };
    }
}

/// A value computed once, like `std::sync::OnceLock`, but safe where `OnceLock` is not inside a
/// preloaded library: across `fork`, under the dynamic loader's lock, and when re-entered.
///
/// One thread (the *builder*, noted as `pid << 32 | tid`) computes the value; threads that find it
/// being computed wait for it, at most [`ForkSafeOnce::WAIT`], then compute their own (the first
/// value published wins, the others are dropped). So:
/// - normally the value is computed **once** (issue 19 item 1: eight threads making their first
///   hooked call at once each rebuilt the driver table, and each patched the driver's import
///   slots, one re-protecting the page while another was writing it: SIGSEGV);
/// - a `fork()` while another thread builds cannot leave the child waiting forever (`OnceLock`
///   does: its state stays "running" in the child): a builder of another pid is replaced;
/// - the builder re-entering (its computation reaching a hooked call that needs the value)
///   computes a value of its own instead of waiting for itself;
/// - a builder blocked by its waiter (a waiter holding glibc's loader lock in a library
///   constructor while the builder needs it for `dladdr`) delays the waiter by [`Self::WAIT`]
///   once instead of deadlocking;
/// - a builder that panics gives the role back.
///
/// Because a value may still be computed twice in those rare cases, the computation must be
/// idempotent; side effects that must happen once (patching the driver's import slots) take a
/// once-flag of their own (`real::printf::hook_driver`).
pub(crate) struct ForkSafeOnce<T> {
    value: AtomicPtr<T>,
    /// `pid << 32 | tid` of the thread computing the value, 0 when none.
    builder: AtomicU64,
}

/// `pid << 32 | tid` of the calling thread.
fn process_and_thread() -> u64 {
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
    ((pid as u32 as u64) << 32) | tid as u32 as u64
}

impl<T> ForkSafeOnce<T> {
    /// How long a thread waits for another thread's computation before computing its own.
    pub(crate) const WAIT: std::time::Duration = std::time::Duration::from_millis(200);

    pub(crate) const fn new() -> Self {
        ForkSafeOnce {
            value: AtomicPtr::new(std::ptr::null_mut()),
            builder: AtomicU64::new(0),
        }
    }

    /// The value, if published.
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<&T> {
        let p = self.value.load(Ordering::Acquire);
        // SAFETY: a published pointer comes from Box::into_raw and is never freed.
        unsafe { p.as_ref() }
    }

    /// Publishes `v` unless a value is published already; returns the published one.
    fn publish(&self, v: T) -> &T {
        let mine = Box::into_raw(Box::new(v));
        match self.value.compare_exchange(
            std::ptr::null_mut(),
            mine,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: just published, never freed.
            Ok(_) => unsafe { &*mine },
            Err(theirs) => {
                // SAFETY: `mine` was never shared; `theirs` is published and never freed.
                drop(unsafe { Box::from_raw(mine) });
                // SAFETY: `theirs` was published by another computation and is never freed.
                unsafe { &*theirs }
            }
        }
    }

    /// The value, computing it if missing: by this thread if no other is computing it, else
    /// waiting for that one (see the type's documentation for when it does not wait).
    pub(crate) fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        let me = process_and_thread();
        let started = std::time::Instant::now();
        let mut spins = 0u32;
        loop {
            let b = self.builder.load(Ordering::Acquire);
            if b == me {
                // Re-entered by our own computation: waiting would wait for ourselves.
                return self.publish(f());
            }
            if b == 0 || b >> 32 != me >> 32 {
                // Nobody builds, or the builder was a thread of the parent of a forked child.
                if self
                    .builder
                    .compare_exchange(b, me, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    /// Gives the builder role back unless the value was published (a panic).
                    struct Release<'a>(&'a AtomicU64, u64, bool);
                    impl Drop for Release<'_> {
                        fn drop(&mut self) {
                            if !self.2 {
                                let _ = self.0.compare_exchange(
                                    self.1,
                                    0,
                                    Ordering::AcqRel,
                                    Ordering::Acquire,
                                );
                            }
                        }
                    }
                    let mut role = Release(&self.builder, me, false);
                    if let Some(v) = self.get() {
                        role.2 = true;
                        return v;
                    }
                    let v = self.publish(f());
                    role.2 = true;
                    return v;
                }
                continue;
            }
            if let Some(v) = self.get() {
                return v;
            }
            if started.elapsed() >= Self::WAIT {
                // The builder is blocked (possibly by a lock this thread holds) or very slow.
                return self.publish(f());
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }
}

impl<T> Default for ForkSafeOnce<T> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: as for `OnceLock<T>`: threads sharing the cell get `&T` to a value another thread made
// (hence `T: Sync + Send`); the pointer is published once by compare-exchange and never freed.
unsafe impl<T: Send + Sync> Sync for ForkSafeOnce<T> {}
// SAFETY: moving the cell moves ownership of the published `T` to another thread (`T: Send`).
unsafe impl<T: Send> Send for ForkSafeOnce<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_value_is_replaced_even_while_locked() {
        static V: Resettable<parking_lot::Mutex<u32>> = Resettable::new();
        *V.get().lock() = 7;
        let held = V.get().lock();
        V.reset_in_child();
        assert_eq!(*V.get().lock(), 0, "a fresh value, not the locked one");
        drop(held);
    }

    #[test]
    fn a_fork_safe_once_is_computed_once_while_others_wait() {
        static CELL: ForkSafeOnce<usize> = ForkSafeOnce::new();
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let barrier = std::sync::Barrier::new(8);
        let got: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        let v = CELL.get_or_init(|| {
                            RUNS.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            7
                        });
                        v as *const usize as usize
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(RUNS.load(Ordering::SeqCst), 1, "computed once");
        assert!(got.iter().all(|&p| p == got[0]), "one value for all");
    }

    #[test]
    fn a_re_entered_or_panicking_builder_never_waits_forever() {
        static CELL: ForkSafeOnce<u32> = ForkSafeOnce::new();
        // The computation needs the value itself: it gets one of its own instead of waiting.
        assert_eq!(*CELL.get_or_init(|| *CELL.get_or_init(|| 1) + 1), 1);
        static PANICS: ForkSafeOnce<u32> = ForkSafeOnce::new();
        let r = std::panic::catch_unwind(|| *PANICS.get_or_init(|| panic!("builder fails")));
        assert!(r.is_err());
        let started = std::time::Instant::now();
        assert_eq!(*PANICS.get_or_init(|| 3), 3);
        assert!(
            started.elapsed() < ForkSafeOnce::<u32>::WAIT,
            "the role was given back"
        );
    }

    #[test]
    fn shorten_cuts_long_input() {
        assert_eq!(shorten("abc", 5), "abc");
        assert_eq!(shorten("abcdef", 3), "abc…");
    }
}
