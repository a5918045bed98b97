//! The process boundary: the only module with `#[no_mangle]` exports.
//!
//! Three ways in, as real programs reach the driver (shared/notes/cuda-facts.md):
//! - [`dlsym`]: the static CUDA runtime, Triton and others `dlopen("libcuda.so.1")` and look
//!   functions up by name; a hooked function or `cuGetProcAddress*` comes back as our wrapper.
//! - [`cuGetProcAddress`] / [`cuGetProcAddress_v2`]: CUDA >= 11.3 runtimes resolve every driver
//!   function through it; we call the real resolver first (so `cudaVersion` and `flags` pick the
//!   variant, e.g. `_ptsz`) and wrap what it returned, chosen by the returned address.
//! - the driver symbols themselves ([`exports`]), for programs linked with `-lcuda`.
//!
//! Also exported: `cudablame_version` ([`version`]), by which the command knows the library, and
//! `cudablame_pause` ([`pause`]), a benchmark's switch between recording and pass-through.
//!
//! Every export catches panics around cudablame's own work and always returns the real result.
//!
//! Lookups keep the caller's point of view: `dlsym(RTLD_NEXT | RTLD_DEFAULT, ...)` jumps straight
//! to glibc's `dlsym` with the caller's return address in place (glibc computes "next" and the
//! scope from it), and `cudaGetDriverEntryPoint*` look the runtime up in the caller's scope.
//!
//! Safety of the exports: each is the C function of the same name and has exactly its contract
//! (`dlsym(3)`, `cuda.h`); the program calls them as it would call the real ones.
#![allow(clippy::missing_safety_doc)]

mod copies;
mod dl;
mod errstr;
pub(crate) mod exports;
mod pause;
mod pthread;
mod resolvers;
mod version;

use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use crate::record::{self, Call};
use crate::{detect, real};
use resolvers::{cuGetProcAddress, cuGetProcAddress_v2};
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};

thread_local! {
    /// Set while this thread is inside a hook: a nested hooked call goes straight to the driver.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Runs one hooked call: describe it, record around the real call, observe its result.
/// `describe` reads only the call's arguments (so calling it twice is cheap).
///
/// Inlined into each exported wrapper, which keeps only the two closures; the work is one
/// function for every entry point ([`run`]).
#[inline(always)]
pub(crate) fn hook(
    ep: EntryPoint,
    entry: &crate::stack::EntryRegs,
    describe: impl Fn() -> Call,
    call_real: impl Fn(usize) -> CUresult,
) -> CUresult {
    run(ep, entry, &describe, &call_real)
}

/// [`hook`]'s work, one instance for all entry points (the closures called through
/// references): a program that launches, copies, records events and waits on them runs the
/// same code lines for each, where one instance per entry point (2.4-3 KiB each) made every
/// distinct entry point of a step its own footprint in the instruction cache. Out of line: the
/// exported wrapper that calls it keeps a frame of about 100 bytes, where the stack copy starts
/// (`entry`). Inlined into the wrapper, the hook's locals made that frame 984 bytes, copied with
/// every launch and never worth a frame in a report.
///
/// The common case (cudablame set up, recording, not measuring: [`crate::safety::gate`] is 0)
/// takes one load of the gate and one of the driver's function, then [`record_call`]
/// (`CUDABLAME_STATS` takes the same path, timed; a paused benchmark the same opening, then
/// [`paused_call`]); anything else (setting up, off) goes through [`run_general`], out of line, so that the common path's code stays in as
/// few cache lines as possible (the hook's cost in a host-bound PyTorch step is mostly its own
/// code and data missing the caches, issue 21).
#[link_section = "cudablame_hot_text"] // every launch runs it: see lib.rs
#[inline(never)]
fn run(
    ep: EntryPoint,
    entry: &crate::stack::EntryRegs,
    describe: &dyn Fn() -> Call,
    call_real: &dyn Fn(usize) -> CUresult,
) -> CUresult {
    use crate::safety::Gate;
    let gate = crate::safety::gate();
    if gate & !(Gate::TIMED | Gate::PAUSED) == 0 {
        if let Some(d) = real::found_driver() {
            let real = d.real[ep as usize];
            if real != 0 {
                if gate == 0 {
                    return record_call::<false>(d, ep, entry, describe, call_real, real, 0);
                }
                // `CUDABLAME_STATS` (the same path, timed: what it measures is this path's
                // cost) or a paused benchmark: both sides of `train_step.py --paired` open the
                // same way, so recording minus paused is recording's own work.
                let entered = if gate & Gate::TIMED != 0 {
                    record::cost::start()
                } else {
                    0
                };
                if gate & Gate::PAUSED != 0 {
                    let errno = crate::safety::KeepErrno::now();
                    if let Some(rc) = paused_call(&errno, describe, call_real, real, entered) {
                        return rc;
                    }
                }
                return record_call_from(d, ep, entry, describe, call_real, real, entered);
            }
        }
    }
    run_general(ep, entry, describe, call_real)
}

/// A call while a benchmark paused cudablame (`cudablame_pause`): the driver's call alone,
/// except a capture's begin and end, which still keep the capture count, and the graph table's
/// calls (`Call::kept_while_paused`): for those `None`, record it. (Telling them apart costs the
/// paused path one `describe`, a few stores.) `entered`: the hook's entry under
/// `CUDABLAME_STATS` (0: not measuring); `errno`: the hook's keeper of the program's `errno`,
/// through which the real call is made. Cold, out of line.
#[cold]
#[inline(never)]
fn paused_call(
    errno: &crate::safety::KeepErrno,
    describe: &dyn Fn() -> Call,
    call_real: &dyn Fn(usize) -> CUresult,
    real: usize,
    entered: u64,
) -> Option<CUresult> {
    let real_call = || errno.around(|| call_real(real));
    match while_paused(describe) {
        Paused::Kept => None,
        Paused::Op => Some(record::cost::paused_op(entered, real_call)),
        Paused::Other => {
            record::cost::break_gap(entered);
            Some(real_call())
        }
    }
}

/// [`run`] when the gate is not open: the first calls (finding the driver, reading the
/// configuration, installing the panic hook and the fork handler, then opening the gate; a
/// benchmark may pause before that), cudablame turned off by an internal error.
#[cold]
#[inline(never)]
fn run_general(
    ep: EntryPoint,
    entry: &crate::stack::EntryRegs,
    describe: &dyn Fn() -> Call,
    call_real: &dyn Fn(usize) -> CUresult,
) -> CUresult {
    let errno = crate::safety::KeepErrno::now();
    let real = real_function(ep);
    if real == 0 {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if crate::safety::disabled() {
        return errno.around(|| call_real(real));
    }
    // The hook's entry, for the whole hook's time under `CUDABLAME_STATS` (0: not measuring).
    let entered = record::cost::start();
    if pause::paused() {
        if let Some(rc) = paused_call(&errno, describe, call_real, real, entered) {
            return rc;
        }
    }
    crate::safety::register_fork_handler(after_fork_in_child);
    let Some(d) = real::found_driver() else {
        // No driver found (a `RTLD_NEXT` definition): nothing to record against.
        return errno.around(|| call_real(real));
    };
    open_gate();
    drop(errno); // `record_call` keeps it from here
    record_call_from(d, ep, entry, describe, call_real, real, entered)
}

/// Opens the gate ([`crate::safety::Gate::NOT_READY`]) once everything the common path relies on
/// is set up: the driver found, the configuration read, the panic hook installed (by the first
/// [`crate::safety::catching`]) and the fork handler registered (the caller's). With
/// `CUDABLAME_STATS` it sets [`crate::safety::Gate::TIMED`]: every op is timed.
fn open_gate() {
    use crate::safety::{set_gate, Gate};
    if crate::safety::gate() & Gate::NOT_READY == 0 {
        return;
    }
    set_gate(Gate::TIMED, crate::config::get().stats);
    if crate::safety::panic_hook_installed() {
        set_gate(Gate::NOT_READY, false);
    }
}

/// [`record_call`], timed from `entered` when it is a reading (`CUDABLAME_STATS`), else untimed.
#[inline(always)]
fn record_call_from(
    d: &'static real::Driver,
    ep: EntryPoint,
    entry: &crate::stack::EntryRegs,
    describe: &dyn Fn() -> Call,
    call_real: &dyn Fn(usize) -> CUresult,
    real: usize,
    entered: u64,
) -> CUresult {
    if entered != 0 {
        record_call::<true>(d, ep, entry, describe, call_real, real, entered)
    } else {
        record_call::<false>(d, ep, entry, describe, call_real, real, 0)
    }
}

/// A hooked call while recording: describe it, record around the real call (`real`, the
/// driver's function, called through `call_real`), observe its result. `TIMED`: under
/// `CUDABLAME_STATS`, from `entered` ([`record::cost::start`]). A nested hooked call (the
/// driver calling itself through an exported symbol) only makes the real call.
#[inline(always)]
fn record_call<const TIMED: bool>(
    d: &'static real::Driver,
    ep: EntryPoint,
    entry: &crate::stack::EntryRegs,
    describe: &dyn Fn() -> Call,
    call_real: &dyn Fn(usize) -> CUresult,
    real: usize,
    entered: u64,
) -> CUresult {
    let errno = crate::safety::KeepErrno::now();
    let real_call = || errno.around(|| call_real(real));
    if !IN_HOOK.try_with(|c| !c.replace(true)).unwrap_or(false) {
        return real_call();
    }
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            let _ = IN_HOOK.try_with(|c| c.set(false));
        }
    }
    let _leave = Leave;
    let describe = || {
        crate::config::test_panic(crate::config::PanicPoint::Describe);
        describe()
    };
    let Some(call) = crate::safety::contained(describe) else {
        return real_call();
    };
    match &call {
        Call::Enqueue(launch) => {
            let mut refused = std::mem::MaybeUninit::uninit();
            let (rc, unrecorded) =
                record::enqueue::<TIMED>(d, ep, launch, entry, entered, &real_call, &mut refused);
            if rc == CUDA_SUCCESS {
                // An op that failed (recorded by none) has no whole hook.
                if TIMED {
                    record::cost::whole_hook(entered);
                }
            } else {
                // SAFETY: `enqueue` wrote the refused op when it says so.
                let unrecorded = unrecorded.then(|| unsafe { refused.assume_init() });
                enqueue_failed(ep, &call, rc, unrecorded);
            }
            rc
        }
        call => other_call(ep, entry, call, entered, &real_call),
    }
}

/// An op whose real call failed: observed (the report of a sticky error, or the line of a
/// refused launch). Cold, out of line: the common path's code stays dense.
#[cold]
#[inline(never)]
fn enqueue_failed(ep: EntryPoint, call: &Call, rc: CUresult, unrecorded: Option<record::OpRecord>) {
    crate::safety::guarded(|| detect::observe(ep, call, rc, unrecorded));
}

/// A hooked call that enqueues no op (a synchronization, a query, an event or memory call, the
/// graph table's calls): recorded around its real call and observed. Out of line: not the
/// launches' path.
#[inline(never)]
fn other_call(
    ep: EntryPoint,
    entry: &crate::stack::EntryRegs,
    call: &Call,
    entered: u64,
    real_call: &dyn Fn() -> CUresult,
) -> CUresult {
    let mut time = record::cost::OtherCall::from(entered);
    let mark = crate::safety::guarded(|| record::before(ep, call)).flatten();
    let rc = time.real(real_call);
    let teardown = crate::safety::guarded(|| record::after(ep, call, mark, rc, entry)).flatten();
    // cudablame's time in the call ends here: a report built below is not its cost.
    time.finish(ep);
    if rc != CUDA_SUCCESS {
        // `observe` is cold: this block is laid out away from the recording path's code. (Not a
        // function of its own: its frame would come on top of the report path's, which a
        // small-stack thread must fit, `robust.rs`.)
        crate::safety::guarded(|| detect::observe(ep, call, rc, None));
    }
    // A context the call ended (`cuCtxDestroy`, a primary-context reset or last release, which
    // destroy it even when they return a sticky error) is forgotten only now: the report of
    // that error, just written, was built from its rings.
    if let Some(teardown) = teardown {
        crate::safety::guarded(|| teardown.apply());
    }
    rc
}

/// What a paused hook does with its call ([`hook`]).
enum Paused {
    /// Recorded all the same (`Call::kept_while_paused`).
    Kept,
    /// An op: the driver's call alone, timed as a paused op.
    Op,
    /// Anything else: the driver's call alone.
    Other,
}

/// Which [`Paused`] case `describe`'s call is. Cold: only a benchmark pauses, and out of line
/// the recording path's code stays dense (its cache lines are most of the hook's cost).
#[cold]
#[inline(never)]
fn while_paused(describe: &dyn Fn() -> Call) -> Paused {
    match crate::safety::guarded(describe) {
        Some(c) if c.kept_while_paused() => Paused::Kept,
        Some(Call::Enqueue(_)) => Paused::Op,
        _ => Paused::Other,
    }
}

/// The driver's function for `ep`: found in the driver library, else the next definition after
/// cudablame. 0 when there is none (the program has not loaded a driver).
#[inline]
fn real_function(ep: EntryPoint) -> usize {
    let found =
        crate::safety::catching(|| real::driver().map(|d| d.real[ep as usize]).unwrap_or(0))
            .unwrap_or(0);
    if found != 0 {
        return found;
    }
    // SAFETY: a pseudo-handle and a C string.
    unsafe { real::dlsym(libc::RTLD_NEXT, ep.c_name().as_ptr()) as usize }
}

/// `pthread_atfork` child handler, registered at the first hook: the child must never use its
/// parent's contexts, streams, marker slots, kernel names or captured assert text, and reports its
/// own errors under its own pid. Each table's owner resets its own tables; this is the one place
/// that knows every owner (a new table's reset goes here). Takes no lock.
extern "C" fn after_fork_in_child() {
    let _ = std::panic::catch_unwind(|| {
        record::forget_after_fork();
        detect::reset_after_fork();
        real::printf::reset_after_fork();
        crate::stack::forget_after_fork();
        crate::threads::reset_after_fork();
    });
}

/// Our replacement for a resolved driver function address: the wrapper of the hooked variant
/// that lives at `address`, our resolvers for the real `cuGetProcAddress*`, else `address` itself.
pub(crate) fn wrap_resolved(address: usize) -> usize {
    crate::config::test_panic(crate::config::PanicPoint::Resolve);
    let Some(d) = real::driver_near(address) else {
        return address;
    };
    if address == d.get_proc_address {
        return cuGetProcAddress as *const () as usize;
    }
    if address == d.get_proc_address_v2 {
        return cuGetProcAddress_v2 as *const () as usize;
    }
    if d.own.get_error_string.map(|f| f as usize) == Some(address) {
        return errstr::cu_get_error_string_address();
    }
    match d.entry_point_at(address) {
        Some(ep) => exports::wrapper_address(ep),
        None => address,
    }
}

fn debug_resolution(how: &str, symbol: *const c_char, from: usize, to: usize) {
    if crate::config::get().debug && !symbol.is_null() {
        // SAFETY: symbol is a NUL-terminated name given by the program.
        let name = unsafe { std::ffi::CStr::from_ptr(symbol) }.to_string_lossy();
        let verdict = if from == to {
            "passed through"
        } else {
            "wrapped"
        };
        crate::safety::say(&format!("cudablame: {how}({name}) = {from:#x}: {verdict}"));
    }
}

/// What the caller would have found without cudablame, for a name that cudablame exports
/// (`ours`): the next definition in the global scope, else one in the caller's own scope (0:
/// none). A CUDA runtime that a library loaded with `RTLD_LOCAL` depends on (Python extension
/// modules) is only in that library's scope, which a lookup made from libcudablame would never
/// see. Where both scopes hold a runtime (`libcudart.so*`), of different files, the caller's own
/// is the one the loader bound it to (a runtime's symbols are versioned: a reference to
/// `cudaGetDriverEntryPoint@libcudart.so.11.0` skips the global `libcudart.so.12`, whose function
/// takes a fourth, out parameter the caller never passes; a break-it review). Any other next
/// definition (another tool preloaded after cudablame, wrapping the function) stays first, as the
/// loader's global-scope-first order has it. `caller` is a return address in the caller's code
/// (0: unknown). Takes the loader's lock (`dlsym`, `dladdr1`, `dlopen`): called by the runtime's
/// resolvers and by `dlsym`, which take it anyway.
fn next_definition(name: &std::ffi::CStr, ours: usize, caller: usize) -> usize {
    // SAFETY: a pseudo-handle and a C string.
    let next = unsafe { real::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    if next == 0 || next == ours {
        return in_callers_scope(name, ours, caller);
    }
    if name.to_bytes().starts_with(b"cuda") && caller != 0 {
        let own = in_callers_scope(name, ours, caller);
        if own != 0 && own != next {
            if let (Some(a), Some(b)) = (runtime_file(own), runtime_file(next)) {
                if a != b {
                    return own;
                }
            }
        }
    }
    next
}

/// The file name of the CUDA runtime (`libcudart.so*`) that defines `address`, if it is one
/// (the name, not the path: two copies of one runtime version in two folders are one runtime).
fn runtime_file(address: usize) -> Option<String> {
    let (_, path) = crate::stack::module_of(address)?;
    let file = path.rsplit('/').next().unwrap_or(&path);
    real::is_runtime_file(file.as_bytes()).then(|| file.to_string())
}

/// `name` looked up in the scope of the object holding `caller` (0: unknown), unless that finds
/// cudablame's own export `ours` (a caller in the global scope, where cudablame comes first).
fn in_callers_scope(name: &std::ffi::CStr, ours: usize, caller: usize) -> usize {
    if caller == 0 {
        return 0;
    }
    let _errno = crate::safety::KeepErrno::now();
    // SAFETY: dladdr1 only reads loader data (with RTLD_DL_LINKMAP it also stores the caller's
    // `struct link_map *`); dlopen with RTLD_NOLOAD only finds an object already loaded, whose
    // handle is closed again.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        let mut map: *mut c_void = std::ptr::null_mut();
        const RTLD_DL_LINKMAP: c_int = 2; // <dlfcn.h>
        if libc::dladdr1(
            caller as *const c_void,
            &mut info,
            &mut map,
            RTLD_DL_LINKMAP,
        ) == 0
            || map.is_null()
        {
            return 0;
        }
        // A link map is a `dlsym` handle only once its search list is built: an object loaded
        // at startup (not the program) has none, and glibc reads a NULL list (SIGSEGV; a
        // break-it review). `dlopen(RTLD_NOLOAD)` of the object builds it; the main program's
        // handle is `dlopen(NULL)`, whose `dli_fname` is only `argv[0]`.
        let main = libc::dlopen(std::ptr::null(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        let handle = if map == main || info.dli_fname.is_null() {
            main
        } else {
            libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD)
        };
        let found = if handle.is_null() {
            0
        } else {
            real::dlsym(handle, name.as_ptr()) as usize
        };
        if !handle.is_null() && handle != main {
            libc::dlclose(handle);
        }
        if !main.is_null() {
            libc::dlclose(main);
        }
        if found == ours {
            0
        } else {
            found
        }
    }
}
