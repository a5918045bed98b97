//! Detection: every hooked call's result passes here. The first sticky error of the process (and
//! the first launch that fails on its own) triggers a report, written before the call returns to
//! the program; later errors are only counted.

use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use crate::record::{Call, OpRecord};
use crate::report;
use crate::safety::lock::Mutex;
use crate::safety::Resettable;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) mod error_string;

/// Which reports were written: bit 0 the sticky-error report, bit 1 the launch-error report.
/// A mutex, not a flag: a second thread that hits the error meanwhile waits until the report is
/// on disk before its call returns (at most [`REPORT_WAIT`]). The report is written with it
/// held. Resettable: a forked child starts with none written.
static WRITTEN: Resettable<Mutex<u8>> = Resettable::new();

/// How long a thread that gets an error waits for the report another thread is writing, at
/// most. The wait keeps a program from exiting (an exception raised on the main thread) before
/// the report is out; it is bounded because the waiting thread may hold a lock the report
/// needs: glibc's loader lock when the call is made by a library constructor inside `dlopen`
/// (the report's first thread-local with a destructor and `dladdr` take that lock; test
/// `a_thread_waiting_for_the_report_inside_dlopen_does_not_hang_it`), or a lock of the CUDA
/// runtime or of the program that the report's calls into the driver and the runtime may need.
/// Unbounded, each waited for the other forever. Past it the call returns its error unchanged
/// and the report is finished once the reporting thread can go on. A report slower than this
/// (not seen: under a second on the simulated driver) may then be cut short by a program that
/// exits on the error.
pub(crate) const REPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
const STICKY: u8 = 1;
const LAUNCH: u8 = 2;

/// Error results seen by hooked calls (all codes), and sticky ones among them.
pub(crate) static ERRORS_SEEN: AtomicU64 = AtomicU64::new(0);
pub(crate) static STICKY_SEEN: AtomicU64 = AtomicU64::new(0);

/// Looks at one hooked call's result. `unrecorded` is the op of an enqueueing call that failed.
/// Cold (only calls that did not succeed come here): the hooks' recording code stays dense.
#[cold]
pub(crate) fn observe(ep: EntryPoint, call: &Call, rc: CUresult, unrecorded: Option<OpRecord>) {
    if rc == CUDA_SUCCESS || rc == CUDA_ERROR_NOT_READY {
        return;
    }
    ERRORS_SEEN.fetch_add(1, Ordering::Relaxed);
    let trigger = if is_sticky(rc) {
        STICKY_SEEN.fetch_add(1, Ordering::Relaxed);
        STICKY
    } else if unrecorded.is_some() && !is_capture_error(rc) {
        LAUNCH
    } else {
        return;
    };
    let Some(mut written) = WRITTEN.get().try_lock_for(REPORT_WAIT) else {
        return; // Another thread is still writing the report (see REPORT_WAIT).
    };
    if *written & (STICKY | trigger) != 0 {
        return; // One report per process; a sticky report also ends launch-error reports.
    }
    *written |= trigger;
    if trigger == LAUNCH && !crate::config::get().report_nonsticky {
        // A launch refused by itself is not sticky: the program got the error and may well
        // handle it (an autotuner trying configurations after 701). One quiet line, once.
        crate::config::test_panic(crate::config::PanicPoint::Report);
        if let Some(op) = unrecorded {
            quiet_line(ep, rc, &op);
        }
        return;
    }
    let failed_launch = unrecorded.filter(|_| trigger == LAUNCH);
    let written = report::emit(ep, call, rc, failed_launch, REPORT_WAIT);
    // No report when it was built on a thread of its own that did not finish in time
    // (`report::emit`): the error strings then stay the driver's.
    if let Some(note) = written.filter(|_| trigger == STICKY && crate::config::get().error_string) {
        remember_error_string(rc, &note);
    }
}

/// Publishes the decorated error strings of the reported sticky error `rc` (see
/// [`error_string`]; `note`: the report's, `text::error_string_note`), with the real texts of
/// the driver's `cuGetErrorString` and of the runtime's `cudaGetErrorString` that cudablame's
/// export forwards to, where found.
#[inline(never)] // out of `observe`'s frame, which a small-stack thread's report path must fit
fn remember_error_string(rc: CUresult, note: &str) {
    use std::ffi::{c_char, c_int, CStr};
    let driver_text = crate::real::driver()
        .and_then(|d| d.own.get_error_string)
        .and_then(|f| {
            let mut s: *const c_char = std::ptr::null();
            // SAFETY: the driver's cuGetErrorString with a valid out pointer; it stores a static
            // NUL-terminated string it owns (driver API, "Error Handling").
            (unsafe { f(rc, &mut s) } == CUDA_SUCCESS && !s.is_null())
                // SAFETY: non-NULL, static and NUL-terminated (checked above).
                .then(|| unsafe { CStr::from_ptr(s) })
        });
    let mut forward = error_string::RUNTIME_FORWARD.load(Ordering::Acquire);
    // Only where a shared runtime is loaded: a lookup that fails leaves its message for the
    // program's next `dlerror()`, where it would have read NULL (a break-it review; a driver
    // API program, or one with the static runtime, has none to find).
    if forward == 0 && shared_runtime_loaded() {
        // Not called yet: the next definition in the global scope (a runtime only in a
        // library's local scope is not found here; its text is then matched against the
        // driver's, which scripts/gpu-errstr.sh checks is the same text).
        // SAFETY: a pseudo-handle and a C string.
        forward =
            unsafe { crate::real::dlsym(libc::RTLD_NEXT, c"cudaGetErrorString".as_ptr()) } as usize;
        if forward == 0 {
            // Its message is cudablame's, not the program's (a runtime loaded `RTLD_LOCAL`
            // only): cleared, as the failed lookup already replaced any message pending.
            // SAFETY: dlerror has no preconditions.
            unsafe { libc::dlerror() };
        }
    }
    let runtime_text = error_string::runtime_code(rc)
        .filter(|_| forward != 0)
        .and_then(|code| {
            // SAFETY: `forward` is the runtime's `cudaGetErrorString(cudaError_t)`
            // (cuda_runtime_api.h), found by `interpose::errstr`; it returns a static string.
            let f: unsafe extern "C" fn(c_int) -> *const c_char =
                unsafe { std::mem::transmute(forward) };
            // SAFETY: as above.
            let s = unsafe { f(code) };
            // SAFETY: NULL or a static NUL-terminated string of the runtime.
            (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) })
        });
    error_string::publish(rc, note, driver_text, runtime_text);
}

/// Whether a shared CUDA runtime (`libcudart.so*`) is loaded (`dl_iterate_phdr`, which sets no
/// `dlerror` message).
fn shared_runtime_loaded() -> bool {
    unsafe extern "C" fn is_runtime(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        found: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid entry whose name is NULL or NUL-terminated, and
        // `found` is the `bool` below.
        unsafe {
            let name = (*info).dlpi_name;
            if !name.is_null()
                && crate::real::is_runtime_file(std::ffi::CStr::from_ptr(name).to_bytes())
            {
                *found.cast::<bool>() = true;
                return 1;
            }
        }
        0
    }
    let mut found = false;
    // SAFETY: the callback only reads the entries and writes `found`, alive for the call.
    unsafe { libc::dl_iterate_phdr(Some(is_runtime), (&mut found as *mut bool).cast()) };
    found
}

/// The one stderr line for a launch that failed by itself (not sticky).
#[inline(never)] // out of `observe`'s frame, like `remember_error_string`
fn quiet_line(ep: EntryPoint, rc: CUresult, op: &OpRecord) {
    let driver = crate::real::driver();
    let (name, _) = match driver {
        Some(d) => d.error_text(rc),
        None => {
            let (n, d) = error_name(rc);
            (n.to_string(), d.to_string())
        }
    };
    let kernel = crate::record::names::name(driver, op.launch.handle)
        .unwrap_or_else(|| format!("{:#x}", op.launch.handle));
    crate::safety::say(&format!(
        "cudablame: {} returned {name} ({rc}) for kernel {} (grid {:?}, block {:?}); not sticky, \
         the program may handle it; reported once (CUDABLAME_REPORT_NONSTICKY=on for a full report)",
        ep.name(),
        crate::safety::shorten(&kernel, 120),
        op.launch.grid,
        op.launch.block,
    ));
}

/// Forgets written reports and error counts (a forked child reports its own errors). Takes no
/// lock: another parent thread may have held it at fork time (see `safety::Resettable`).
pub(crate) fn reset_after_fork() {
    WRITTEN.reset_in_child();
    error_string::reset_after_fork();
    ERRORS_SEEN.store(0, Ordering::Relaxed);
    STICKY_SEEN.store(0, Ordering::Relaxed);
}
