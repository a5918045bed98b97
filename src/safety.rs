//! Never changing the program: cudablame's own code runs under [`guarded`], which turns a panic
//! into "cudablame is off from now on" (one line on stderr, the real results still returned);
//! stderr is written with [`write_stderr`], which never panics and never raises `SIGPIPE` in the
//! program; and a forked child forgets the parent's tables ([`register_fork_handler`], given the
//! reset of every table by `interpose`, the top of the data path).

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// The panic hook: 0 not installed, 1 being installed (by one thread; the others do not wait),
/// 2 installed. Not a `std::sync::Once`: see [`ForkSafeOnce`].
#[link_section = "cudablame_hot"] // read by every hook: see lib.rs
static HOOK: AtomicU8 = AtomicU8::new(0);

pub(crate) mod lock;
pub(crate) mod own_thread;

/// Whether an internal error turned cudablame off (the first panic in its code: every hook
/// then only makes the real call): the gate's [`Gate::DISABLED`] bit, its only state.
#[inline]
pub(crate) fn disabled() -> bool {
    gate() & Gate::DISABLED != 0
}

/// The hot path's one switch: 0 when a hooked call may take the common path (everything set up,
/// recording, nothing measured, cudablame on), else the [`Gate`] bits that send it the general
/// way. One relaxed load per hooked call instead of one per condition (each of which also
/// brought its own cold code into the hot path's cache lines).
#[link_section = "cudablame_hot"] // read by every hook: see lib.rs
static GATE: AtomicU8 = AtomicU8::new(Gate::NOT_READY);

/// The reasons a hooked call takes the general path ([`gate`]).
pub(crate) struct Gate;

impl Gate {
    /// Not yet set up: the driver, the configuration, the panic hook or the fork handler
    /// (`interpose` sets them up, then clears this bit).
    pub(crate) const NOT_READY: u8 = 1;
    /// An internal error turned cudablame off ([`disabled`]).
    pub(crate) const DISABLED: u8 = 2;
    /// A benchmark paused recording (`interpose::pause`).
    pub(crate) const PAUSED: u8 = 4;
    /// `CUDABLAME_STATS`: the ops are timed.
    pub(crate) const TIMED: u8 = 8;
}

/// The [`Gate`] bits set now (0: the common path).
#[inline(always)]
pub(crate) fn gate() -> u8 {
    GATE.load(Ordering::Relaxed)
}

/// Sets (`on`) or clears the gate bits `bits`; returns the bits set before. One atomic
/// read-modify-write: a bit is the only state of what it stands for (`interpose::pause` keeps
/// no flag of its own), so two threads switching at once cannot leave two states disagreeing.
pub(crate) fn set_gate(bits: u8, on: bool) -> u8 {
    if on {
        GATE.fetch_or(bits, Ordering::Relaxed)
    } else {
        GATE.fetch_and(!bits, Ordering::Relaxed)
    }
}

/// Turns cudablame off for good (the first panic in its code).
fn disable() {
    set_gate(Gate::DISABLED, true);
}

/// Whether the panic hook is installed ([`catching`] installs it on first use).
pub(crate) fn panic_hook_installed() -> bool {
    HOOK.load(Ordering::Acquire) == 2
}

/// [`guarded`] without its check that the panic hook is installed (where a hooked call has
/// made sure of it, or left it to another thread installing it now: `catching`): `None` if `f`
/// panicked (then cudablame is off from now on) or if a panic turned it off already.
#[inline(always)]
pub(crate) fn contained<T>(f: impl FnOnce() -> T) -> Option<T> {
    if disabled() {
        return None;
    }
    caught(f)
}

/// Runs `f`, turning a panic into `None` and cudablame off.
#[inline(always)]
fn caught<T>(f: impl FnOnce() -> T) -> Option<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(_) => {
            disable();
            None
        }
    }
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
    caught(f)
}

/// Replaces the default panic hook of cudablame's own copy of `std` (a Rust host program has
/// its own, untouched): one line, the first time, instead of a message and a backtrace hint.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        disable();
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

/// The calling thread's `errno` (glibc's per-thread slot).
#[inline(always)]
pub(crate) fn errno() -> libc::c_int {
    // SAFETY: `__errno_location` is valid on any live thread.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno` to `value`.
#[inline(always)]
pub(crate) fn set_errno(value: libc::c_int) {
    // SAFETY: as in [`errno`].
    unsafe { *libc::__errno_location() = value };
}

/// The calling thread's `errno`, put back when dropped: cudablame's own system calls (report
/// files, `/proc` and `/sys` reads, `getcwd`, a failed write to stderr, a progress marker's
/// driver call) must not change what the program reads in `errno` at `main` (ISO C: 0 there) or
/// after a hooked call. Around a hooked call the real call made through [`around`](Self::around)
/// starts from the program's value, and what it left is what is put back (a break-it review:
/// `errno` 2, `ENOENT`, after a `cuStreamSynchronize` whose report was written, where it was the
/// program's own 4242 without cudablame).
pub(crate) struct KeepErrno {
    /// The program's value when this was made.
    program: libc::c_int,
    /// What is put back: the program's value, or what the call made through `around` left.
    left: std::cell::Cell<libc::c_int>,
}

impl KeepErrno {
    #[inline(always)]
    pub(crate) fn now() -> KeepErrno {
        let program = errno();
        KeepErrno {
            program,
            left: std::cell::Cell::new(program),
        }
    }

    /// Runs the program's own call `f` with the program's `errno`, and keeps what it left.
    #[inline(always)]
    pub(crate) fn around<T>(&self, f: impl FnOnce() -> T) -> T {
        set_errno(self.program);
        let r = f();
        self.left.set(errno());
        r
    }
}

impl Drop for KeepErrno {
    #[inline(always)]
    fn drop(&mut self) {
        set_errno(self.left.get());
    }
}

/// Writes one line (a newline is added) to stderr; see [`write_stderr`].
pub(crate) fn say(line: &str) {
    let mut s = String::with_capacity(line.len() + 1);
    s.push_str(line);
    s.push('\n');
    write_stderr(s.as_bytes());
}

/// Writes `bytes` to file descriptor 2 and ignores failures. Unlike `eprint!` it never panics
/// (a closed or broken stderr is the program's business), and `SIGPIPE` and `SIGXFSZ` are blocked
/// on this thread for the write, and one it raised is consumed: a program whose stderr reader
/// went away, or whose stderr is a file at its `ulimit -f` (a break-it review: exit 153, stdout
/// cut), is not killed because cudablame wrote there.
pub(crate) fn write_stderr(bytes: &[u8]) {
    let _errno = KeepErrno::now();
    // SAFETY: signal-mask and write system calls on local, initialized data.
    unsafe {
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut blocked);
        libc::sigaddset(&mut blocked, libc::SIGPIPE);
        // SIGXFSZ too: a stderr redirected to a file under `ulimit -f` would kill the program
        // for cudablame's own text (the write then fails with EFBIG instead).
        libc::sigaddset(&mut blocked, libc::SIGXFSZ);
        let mut old: libc::sigset_t = std::mem::zeroed();
        let masked = libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut old) == 0;
        let mut pending: libc::sigset_t = std::mem::zeroed();
        let got_pending = masked && libc::sigpending(&mut pending) == 0;
        let was_pending = got_pending && libc::sigismember(&pending, libc::SIGPIPE) == 1;
        let xfsz_was_pending = got_pending && libc::sigismember(&pending, libc::SIGXFSZ) == 1;
        let mut rest = bytes;
        let mut broken = false;
        let mut too_big = false;
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
            too_big = err == libc::EFBIG;
            break;
        }
        if masked {
            // Each signal this write raised (not one pending before it) is consumed.
            let raised = [
                (libc::SIGPIPE, broken && !was_pending),
                (libc::SIGXFSZ, too_big && !xfsz_was_pending),
            ];
            for (signal, _) in raised.into_iter().filter(|&(_, r)| r) {
                let zero = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                let mut one: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut one);
                libc::sigaddset(&mut one, signal);
                libc::sigtimedwait(&one, std::ptr::null_mut(), &zero);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        }
    }
}

/// `s`, cut to `max` characters with a `…` when longer: user input echoed in one-line messages
/// (one rule for the library and the command: `cudablame_report::text::shorten`).
pub(crate) use cudablame_report::text::shorten;

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

/// Registers `child` (interpose's `after_fork_in_child`) with `pthread_atfork`, once (at the
/// first hooked call: a process that never reaches the driver has nothing to forget).
pub(crate) fn register_fork_handler(child: extern "C" fn()) {
    // Not a `std::sync::Once`: a thread forking while another is inside `call_once` would leave
    // the child's copy "running" forever, and the child's first hook would wait on it forever.
    // Read only until the gate opens (`interpose::run_general`): not in the hot section.
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
    /// waiting for that one (see the type's documentation for when it does not wait). Once
    /// published, one load inlined into the caller (several hot-path tables are read so).
    #[inline(always)]
    pub(crate) fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        match self.get() {
            Some(v) => v,
            None => self.build(f),
        }
    }

    /// [`get_or_init`](Self::get_or_init) before the value is published.
    #[cold]
    #[inline(never)]
    fn build(&self, f: impl FnOnce() -> T) -> &T {
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

/// A value of type `T` for each thread, created on its first use and dropped when the thread
/// exits, **without a Rust thread-local destructor** (docs/guarantees.md section 12).
///
/// Why: a `thread_local!` whose type needs `Drop` makes Rust's std register its destructor on
/// first access with `__cxa_thread_atexit_impl`, which takes glibc's loader lock. A library
/// constructor (running inside `dlopen`, that lock held) that starts a thread making CUDA calls
/// and joins it then waits forever: the thread's first hook waits for the lock the constructor
/// holds (test `a_constructor_joining_a_thread_that_launches_does_not_hang`).
///
/// How: the owner declares it with [`per_thread!`], which makes a `const` thread-local
/// `Cell<*mut T>` (no destructor, so nothing is registered) and a [`PerThreadKey`] for it.
/// [`PerThread::with`] reads that cell (one TLS load and a compare on the hot path; no
/// `pthread_getspecific`; the `PerThread` static itself has no interior mutability, so its
/// fields are constants the compiler folds into the caller); at the thread's first use it
/// allocates the value and hands it to a POSIX thread-specific key (`pthread_key_create`, once
/// per `PerThread`; `pthread_setspecific` once per thread). glibc runs key destructors from
/// `start_thread` after the thread's function returned, taking no loader lock
/// (`nptl/nptl_deallocate_tsd.c`). That destructor first stores the [`GONE`](Self) sentinel in
/// the cell, then drops the value: a hook on that thread afterwards (another library's key
/// destructor making CUDA calls) gets `None`, the same fallback as a `thread_local!`'s failed
/// `try_with` today, never freed memory and never a new allocation.
///
/// Order at thread exit: glibc runs C++ and Rust thread-local destructors (`__call_tls_dtors`)
/// before key destructors, so the value now outlives those (hooks made from them still find it).
/// The main thread's key destructors do not run at `exit()` (only at `pthread_exit`): its value
/// is never dropped. That is harmless: the process is ending, the memory goes with it, and what
/// a drop does (`record::streams` retiring the thread's per-thread default streams) only moves
/// state that an exit-time report reads either way.
///
/// If no key can be had (`PTHREAD_KEYS_MAX`, 1024 in glibc, used up by the program), nothing is
/// allocated and `with` returns `None` (each owner has its fallback for that).
pub(crate) struct PerThread<T: 'static> {
    /// The owner's `const` thread-local cell: null before first use, [`GONE`] after the drop.
    cell: &'static std::thread::LocalKey<std::cell::Cell<*mut T>>,
    /// The pthread key (apart: a `PerThread` is then a constant, see above).
    key: &'static PerThreadKey,
    /// Makes a thread's value (must not make a hooked call).
    make: fn() -> T,
}

/// The POSIX thread-specific key of one [`PerThread`]: the key plus one; 0 before it is made,
/// [`NO_KEY`] if it could not be.
pub(crate) struct PerThreadKey(AtomicUsize);

impl PerThreadKey {
    /// No key yet (made at the first use).
    pub(crate) const fn new() -> Self {
        PerThreadKey(AtomicUsize::new(0))
    }
}

/// Declares `static NAME: PerThread<T>` whose value `make` (a closure without captures) builds:
/// `per_thread! { static NAME: T = || value; }`. The thread-local cell and the key are declared
/// inside the static's initializer, reachable only through it.
macro_rules! per_thread {
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $make:expr;) => {
        $(#[$attr])*
        $vis static $name: $crate::safety::PerThread<$t> = {
            ::std::thread_local! {
                static CELL: ::std::cell::Cell<*mut $t> =
                    const { ::std::cell::Cell::new(::std::ptr::null_mut()) };
            }
            static KEY: $crate::safety::PerThreadKey = $crate::safety::PerThreadKey::new();
            $crate::safety::PerThread::new(&CELL, &KEY, $make)
        };
    };
}
pub(crate) use per_thread;

/// What a thread's cell holds after its value was dropped (never a valid `T` address: odd and
/// in the first page).
const GONE: usize = 1;
/// A [`PerThreadKey`] when `pthread_key_create` failed.
const NO_KEY: usize = usize::MAX;

/// What a key's value points to: the value and the `PerThread` it belongs to (for its cell).
struct Entry<T: 'static> {
    owner: &'static PerThread<T>,
    value: T,
}

impl<T: 'static> PerThread<T> {
    /// Use [`per_thread!`]: `cell` and `key` must be used by nothing else, `cell` declared
    /// `const { Cell::new(std::ptr::null_mut()) }`.
    pub(crate) const fn new(
        cell: &'static std::thread::LocalKey<std::cell::Cell<*mut T>>,
        key: &'static PerThreadKey,
        make: fn() -> T,
    ) -> Self {
        PerThread { cell, key, make }
    }

    /// Runs `f` with this thread's value (created now if this is its first use). `None`, and `f`
    /// not run, after the thread's value was dropped (the thread is exiting) or without a key.
    #[inline]
    pub(crate) fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Option<R> {
        // A `const` thread-local without destructor: `with` cannot fail and registers nothing.
        let p = self.cell.with(|c| c.get());
        if p as usize == GONE {
            return None;
        }
        let p = if p.is_null() { self.create()? } else { p };
        // SAFETY: `p` is this thread's live value: set by `create` on this thread, and replaced
        // by GONE before the key destructor (on this thread, after any `with` returned, since
        // it runs when the thread's function returned) frees it. Only shared references are
        // handed out; `T` takes care of its own interior mutability.
        Some(f(unsafe { &*p }))
    }

    /// Runs `f` with this thread's value if it has one (made and not yet dropped); never makes
    /// one (for resets: a value not made yet has nothing to reset).
    pub(crate) fn if_made<R>(&'static self, f: impl FnOnce(&T) -> R) -> Option<R> {
        let p = self.cell.with(|c| c.get());
        if p.is_null() || p as usize == GONE {
            return None;
        }
        // SAFETY: as in `with`: a value made by `create` on this thread and not yet dropped.
        Some(f(unsafe { &*p }))
    }

    /// Allocates this thread's value and hands it to the key (cold: once per thread).
    #[cold]
    fn create(&'static self) -> Option<*mut T> {
        let key = self.key()?;
        let entry = Box::into_raw(Box::new(Entry {
            owner: self,
            value: (self.make)(),
        }));
        // SAFETY: `key` was made by pthread_key_create and is never deleted; the value is the
        // box just made, freed only by `drop_entry::<T>` (the key's destructor).
        if unsafe { libc::pthread_setspecific(key, entry as *const libc::c_void) } != 0 {
            // SAFETY: `entry` was not handed out.
            drop(unsafe { Box::from_raw(entry) });
            return None;
        }
        // SAFETY: `entry` is a valid box; `value` lives as long as it does.
        let value = unsafe { &raw mut (*entry).value };
        self.cell.with(|c| c.set(value));
        Some(value)
    }

    /// The key, made at the first use in the process. Threads racing here each make one; the
    /// first published wins and the others delete theirs (no thread waits for another).
    fn key(&'static self) -> Option<libc::pthread_key_t> {
        match self.key.0.load(Ordering::Acquire) {
            0 => {}
            NO_KEY => return None,
            k => return Some((k - 1) as libc::pthread_key_t),
        }
        let mut key: libc::pthread_key_t = 0;
        // SAFETY: `key` is a valid out pointer; the destructor is an extern "C" function that
        // never unwinds (`drop_entry` catches panics) and takes no lock the loader holds.
        if unsafe { libc::pthread_key_create(&mut key, Some(drop_entry::<T>)) } != 0 {
            // Not remembered: a key may be freed later by the program.
            return None;
        }
        let mine = key as usize + 1;
        match self
            .key
            .0
            .compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Some(key),
            Err(other) => {
                // SAFETY: this key was never given a value or handed out.
                unsafe { libc::pthread_key_delete(key) };
                (other != NO_KEY).then(|| (other - 1) as libc::pthread_key_t)
            }
        }
    }
}

/// The key destructor: marks the thread's cell [`GONE`], then drops the value (glibc calls it at
/// thread exit with the non-null value, after resetting the key's value to null).
unsafe extern "C" fn drop_entry<T: 'static>(p: *mut libc::c_void) {
    // SAFETY: glibc passes back what `PerThread::create` stored: a leaked `Box<Entry<T>>`, given
    // to this destructor once and used by nobody else after this thread's cell is GONE.
    let entry = unsafe { Box::from_raw(p as *mut Entry<T>) };
    entry.owner.cell.with(|c| c.set(GONE as *mut T));
    let _ = catching(move || drop(entry));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_value_is_replaced_even_while_locked() {
        static V: Resettable<crate::safety::lock::Mutex<u32>> = Resettable::new();
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

    /// Makes and drops of [`COUNTED`]'s values, and what hooks after the drop saw.
    static MADE: AtomicUsize = AtomicUsize::new(0);
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    static AFTER_DROP: AtomicUsize = AtomicUsize::new(0);

    struct Counted(std::cell::Cell<u32>);
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPPED.fetch_add(1, Ordering::SeqCst);
        }
    }
    per_thread! {
        static COUNTED: Counted = || {
            MADE.fetch_add(1, Ordering::SeqCst);
            Counted(std::cell::Cell::new(0))
        };
    }

    /// A later key's destructor (glibc runs them in key order, after ours): what a CUDA call
    /// from another library's thread-exit code would see.
    unsafe extern "C" fn late_destructor(_: *mut libc::c_void) {
        // 1: `None` (the GONE fallback), 2: a value (re-created or freed memory read).
        let seen = COUNTED.with(|c| c.0.get()).map_or(1, |_| 2);
        AFTER_DROP.store(seen, Ordering::SeqCst);
    }

    #[test]
    fn a_per_thread_value_is_made_once_dropped_at_exit_and_gone_after() {
        // The first use makes the value and the key (before `late`, so its destructor runs first).
        assert_eq!(COUNTED.with(|c| c.0.replace(7)), Some(0));
        assert_eq!(COUNTED.with(|c| c.0.get()), Some(7), "the same value");
        let made = MADE.load(Ordering::SeqCst);
        let mut late: libc::pthread_key_t = 0;
        // SAFETY: valid out pointer; the destructor never unwinds.
        let made_key = unsafe { libc::pthread_key_create(&mut late, Some(late_destructor)) };
        assert_eq!(made_key, 0);
        let dropped = DROPPED.load(Ordering::SeqCst);
        std::thread::spawn(move || {
            assert_eq!(COUNTED.with(|c| c.0.replace(3)), Some(0), "a fresh value");
            assert_eq!(COUNTED.with(|c| c.0.get()), Some(3));
            // SAFETY: `late` is a live key; any non-null value makes glibc call its destructor.
            unsafe { libc::pthread_setspecific(late, std::ptr::dangling::<libc::c_void>()) };
        })
        .join()
        .unwrap();
        assert_eq!(
            MADE.load(Ordering::SeqCst),
            made + 1,
            "made once on the thread"
        );
        assert_eq!(
            DROPPED.load(Ordering::SeqCst),
            dropped + 1,
            "dropped at its exit"
        );
        assert_eq!(AFTER_DROP.load(Ordering::SeqCst), 1, "after the drop: None");
        assert_eq!(
            COUNTED.with(|c| c.0.get()),
            Some(7),
            "this thread's value untouched"
        );
    }
}
