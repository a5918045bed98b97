//! [`on_new_thread`]: cudablame's own work run on a thread of its own, with a stack of known size,
//! for a caller whose stack is too small for it (the report: symbolizing and rendering take tens
//! of KiB of stack; a program's thread created with a small stack crashed with SIGSEGV when the
//! sticky error came back to it, test `a_report_on_a_thread_with_a_small_stack_is_written`).

use super::lock::Mutex;
use std::ffi::c_void;
use std::sync::{Arc, Condvar};
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce() + Send>;

/// The new thread's start routine: runs the job (which catches its own panics, see
/// [`on_new_thread`]) and ends.
extern "C" fn run_job(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `arg` is the `Box<Job>` that `on_new_thread` leaked for this thread alone.
    let job = unsafe { Box::from_raw(arg.cast::<Job>()) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    std::ptr::null_mut()
}

/// Runs `f` under [`super::catching`] (a panic turns cudablame off and is `None`; the caller
/// checked that cudablame is on) on a new detached thread with a stack of `stack_bytes` bytes,
/// created with `create`, glibc's `pthread_create` itself (`real::pthread_create`; not
/// cudablame's hook, nor Rust's `std::thread`, whose thread-locals with destructors would take
/// the loader lock), and waits at most `wait` for it. `None`: no thread could be created, `f` panicked, or it was still
/// running after `wait` (it then finishes on its own; the wait is bounded because the caller may
/// hold a lock `f` needs, such as glibc's loader lock inside a library constructor).
pub(crate) fn on_new_thread<R: Send + 'static>(
    create: usize,
    stack_bytes: usize,
    wait: Duration,
    f: impl FnOnce() -> R + Send + 'static,
) -> Option<R> {
    type PthreadCreate = unsafe extern "C" fn(
        *mut libc::pthread_t,
        *const libc::pthread_attr_t,
        Option<extern "C" fn(*mut c_void) -> *mut c_void>,
        *mut c_void,
    ) -> libc::c_int;
    if create == 0 {
        return None;
    }
    // SAFETY: `create` is glibc's pthread_create (this function's contract).
    let create: PthreadCreate = unsafe { std::mem::transmute::<usize, PthreadCreate>(create) };
    // None until the thread is done; then `guarded`'s result (None: `f` panicked).
    let done: Arc<(Mutex<Option<Option<R>>>, Condvar)> =
        Arc::new((Mutex::new(None), Condvar::new()));
    let theirs = done.clone();
    let job: Job = Box::new(move || {
        let r = super::catching(f);
        *theirs.0.lock() = Some(r);
        theirs.1.notify_all();
    });
    let arg = Box::into_raw(Box::new(job)).cast::<c_void>();
    // SAFETY: a zeroed attr is initialized before use and destroyed after; `run_job` owns `arg`
    // once the thread exists, and `arg` is taken back here when it does not.
    let created = unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        let mut thread: libc::pthread_t = 0;
        // Every signal blocked in the new thread (it inherits the creating thread's mask,
        // blocked only while creating it): the program's handlers never run on cudablame's
        // thread (a break-it review: a handler that looks at its thread's state, or
        // `pthread_kill`s, found a thread it never made).
        let (mut all, mut before): (libc::sigset_t, libc::sigset_t) =
            (std::mem::zeroed(), std::mem::zeroed());
        libc::sigfillset(&mut all);
        let masked = libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before) == 0;
        let ok = libc::pthread_attr_init(&mut attr) == 0
            && libc::pthread_attr_setstacksize(&mut attr, stack_bytes) == 0
            && create(&mut thread, &attr, Some(run_job), arg) == 0;
        if masked {
            libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        }
        libc::pthread_attr_destroy(&mut attr);
        if ok {
            libc::pthread_detach(thread);
        } else {
            drop(Box::from_raw(arg.cast::<Job>()));
        }
        ok
    };
    if !created {
        return None;
    }
    let deadline = Instant::now() + wait;
    let mut result = done.0.lock();
    while result.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        result = (done.1.wait_timeout(result, left))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
    result.take().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's stack size (bytes) and thread id.
    fn stack_and_tid() -> (usize, i32) {
        // SAFETY: pthread_getattr_np fills attr for the calling thread, destroyed after use;
        // gettid has no preconditions.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            let mut size = 0;
            assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
            libc::pthread_attr_getstacksize(&attr, &mut size);
            libc::pthread_attr_destroy(&mut attr);
            (size, libc::gettid())
        }
    }

    fn create() -> usize {
        // SAFETY: a pseudo-handle and a C string.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"pthread_create".as_ptr()) as usize }
    }

    /// The calling thread's signal mask.
    fn mask() -> libc::sigset_t {
        // SAFETY: reads this thread's mask into a local set.
        unsafe {
            let mut m: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut m);
            m
        }
    }

    /// Whether `signal` is in `set`.
    fn has(set: &libc::sigset_t, signal: libc::c_int) -> bool {
        // SAFETY: an initialized set.
        unsafe { libc::sigismember(set, signal) == 1 }
    }

    /// The job's thread blocks every signal (the program's handlers never run on it, a break-it
    /// review), and the caller's mask is as it was.
    #[test]
    fn the_jobs_thread_blocks_every_signal() {
        let wait = Duration::from_secs(5);
        let before = mask();
        let theirs = on_new_thread(create(), 1 << 20, wait, mask).unwrap();
        for signal in [libc::SIGINT, libc::SIGUSR1, libc::SIGTERM, libc::SIGCHLD] {
            assert!(has(&theirs, signal), "{signal}");
            assert_eq!(has(&mask(), signal), has(&before, signal), "{signal}");
        }
    }

    #[test]
    fn a_job_runs_on_its_own_stack_and_a_slow_one_is_not_waited_for() {
        let wait = Duration::from_secs(5);
        let there = on_new_thread(create(), 1 << 20, wait, stack_and_tid).unwrap();
        // At least the size asked for (glibc may hand out a larger cached stack).
        assert!(there.0 >= 1 << 20, "{there:?}");
        assert_ne!(there.1, stack_and_tid().1);
        assert_eq!(on_new_thread(0, 1 << 20, wait, || 1), None);
        let t = Instant::now();
        let slow = || {
            std::thread::sleep(Duration::from_millis(500));
            1
        };
        assert_eq!(
            on_new_thread(create(), 1 << 20, Duration::from_millis(50), slow),
            None
        );
        assert!(t.elapsed() < Duration::from_millis(400));
    }
}
