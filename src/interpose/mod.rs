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
//! Every export catches panics around cudablame's own work and always returns the real result.
//!
//! Lookups keep the caller's point of view: `dlsym(RTLD_NEXT | RTLD_DEFAULT, ...)` jumps straight
//! to glibc's `dlsym` with the caller's return address in place (glibc computes "next" and the
//! scope from it), and `cudaGetDriverEntryPoint*` look the runtime up in the caller's scope.
//!
//! Safety of the exports: each is the C function of the same name and has exactly its contract
//! (`dlsym(3)`, `cuda.h`); the program calls them as it would call the real ones.
#![allow(clippy::missing_safety_doc)]

pub mod exports;

use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use crate::record::{self, Call};
use crate::{detect, real};
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void};

thread_local! {
    /// Set while this thread is inside a hook: a nested hooked call goes straight to the driver.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Runs one hooked call: describe it, record around the real call, observe its result.
#[inline]
pub fn hook(
    ep: EntryPoint,
    entry: &crate::stack::EntryRegs,
    describe: impl FnOnce() -> Call,
    call_real: impl FnOnce(usize) -> CUresult,
) -> CUresult {
    let real = real_function(ep);
    if real == 0 {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    let real_call = || call_real(real);
    if crate::safety::disabled() || !IN_HOOK.try_with(|c| !c.replace(true)).unwrap_or(false) {
        return real_call();
    }
    crate::safety::register_fork_handler(after_fork_in_child);
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
    let Some(call) = crate::safety::guarded(describe) else {
        return real_call();
    };
    let (rc, unrecorded) = match call {
        Call::Enqueue(launch) => record::enqueue(ep, launch, entry, real_call),
        _ => {
            let mark = crate::safety::guarded(|| record::before(ep, &call)).flatten();
            let rc = real_call();
            crate::safety::guarded(|| record::after(ep, &call, mark, rc, entry));
            (rc, None)
        }
    };
    if rc != CUDA_SUCCESS {
        crate::safety::guarded(|| detect::observe(ep, &call, rc, unrecorded));
    }
    rc
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
pub fn wrap_resolved(address: usize) -> usize {
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

/// Interposed `dlsym`. `RTLD_NEXT` lookups, and `RTLD_DEFAULT` lookups of names cudablame does
/// not export, are glibc's own made as if the caller had called it: this entry jumps to glibc's
/// `dlsym` with the caller's return address still on the stack, so "next" is computed after the
/// caller's object (not after libcudablame) and the caller's scope is searched. `RTLD_DEFAULT`
/// lookups of names cudablame exports go to [`dlsym_default`] (so that a function the driver
/// lacks is still absent); lookups in a library handle go to [`dlsym_in_handle`].
#[cfg(target_arch = "x86_64")]
#[cfg_attr(not(test), no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    std::arch::naked_asm!(
        // handle + 1 > 1 (unsigned): neither RTLD_NEXT (-1) nor RTLD_DEFAULT (0).
        "lea rax, [rdi + 1]",
        "cmp rax, 1",
        "ja {in_handle}",
        "test rdi, rdi",
        "jnz 2f",
        // RTLD_DEFAULT: dlsym_default(symbol, caller, &answer) says whether it answered. On entry
        // rsp is 8 mod 16: two pushes and 24 bytes align it for the call; [rsp] is the answer.
        "push rdi",
        "push rsi",
        "sub rsp, 24",
        "mov rdi, rsi",
        "mov rsi, qword ptr [rsp + 40]",
        "mov rdx, rsp",
        "call {default}",
        "mov rcx, qword ptr [rsp]",
        "add rsp, 24",
        "pop rsi",
        "pop rdi",
        "test al, al",
        "jz 2f",
        "mov rax, rcx",
        "ret",
        // glibc's dlsym, found on first use (arguments kept, stack aligned for the call).
        "2:",
        "mov rax, qword ptr [rip + {real}]",
        "test rax, rax",
        "jnz 3f",
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {resolve}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jz 4f",
        "3:",
        "jmp rax",
        "4:",
        "ret",
        in_handle = sym dlsym_in_handle,
        default = sym dlsym_default,
        real = sym real::REAL_DLSYM,
        resolve = sym real::resolve_real_dlsym,
    )
}

/// Interposed `dlsym` where no naked entry is written (not x86-64): pseudo-handle lookups are
/// made from inside libcudablame, so `RTLD_NEXT` means "after libcudablame" there.
#[cfg(not(target_arch = "x86_64"))]
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let mut answer = std::ptr::null_mut();
    // SAFETY: the program's own arguments, passed on.
    unsafe {
        if handle.is_null() && dlsym_default(symbol, 0, &mut answer) {
            return answer;
        }
        dlsym_in_handle(handle, symbol)
    }
}

/// Interposed `dlclose` (`dlclose(3)`): glibc's, with the unwinder's module list dropped
/// around it ([`crate::stack::unwind::unloading`]) so that no launch stack is unwound through a
/// library being unmapped and the next one sees the new list at once.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let real = real::real_dlclose();
    if real == 0 {
        return -1;
    }
    type F = unsafe extern "C" fn(*mut c_void) -> c_int;
    // SAFETY: `real` is glibc's dlclose; the program's own handle, passed on.
    let close = || unsafe { std::mem::transmute::<usize, F>(real)(handle) };
    if crate::safety::disabled() {
        return close();
    }
    let mut rc = None;
    let mut close = Some(close);
    crate::safety::catching(|| {
        crate::stack::unwind::unloading(|| rc = close.take().map(|c| c()));
    });
    match (rc, close) {
        (Some(rc), _) => rc,
        // The unwinder panicked before the real call: make it now.
        (None, Some(c)) => c(),
        (None, None) => -1,
    }
}

/// cudablame's own export named `symbol` (a hooked entry point, `cuGetProcAddress*`,
/// `cudaGetDriverEntryPoint*`), if it is one.
///
/// # Safety
/// `symbol` is NULL or NUL-terminated.
unsafe fn own_export(symbol: *const c_char) -> Option<usize> {
    // SAFETY: per the contract; the second byte is read only if the first is 'c'.
    if symbol.is_null() || unsafe { *symbol != b'c' as c_char || *symbol.add(1) != b'u' as c_char }
    {
        return None;
    }
    // SAFETY: as above.
    let name = unsafe { std::ffi::CStr::from_ptr(symbol) }.to_bytes();
    Some(match name {
        b"cuGetProcAddress" => cuGetProcAddress as *const () as usize,
        b"cuGetProcAddress_v2" => cuGetProcAddress_v2 as *const () as usize,
        b"cudaGetDriverEntryPoint" => cudaGetDriverEntryPoint as *const () as usize,
        b"cudaGetDriverEntryPointByVersion" => {
            cudaGetDriverEntryPointByVersion as *const () as usize
        }
        _ => exports::wrapper_address(EntryPoint::from_name(name)?),
    })
}

/// `dlsym(RTLD_DEFAULT, symbol)` for the names cudablame exports: cudablame's export when the
/// caller would have found a definition without cudablame (the driver's, or another library's),
/// NULL otherwise, so that probing for a driver function the installed driver lacks (or before the
/// driver is loaded) still finds nothing. Returns false for other names (glibc answers those).
///
/// # Safety
/// `symbol` is NULL or NUL-terminated; `answer` is a valid out slot (the naked `dlsym` entry
/// passes its own stack slot).
unsafe extern "C" fn dlsym_default(
    symbol: *const c_char,
    caller: usize,
    answer: *mut *mut c_void,
) -> bool {
    // SAFETY: dlsym's contract: symbol is NUL-terminated.
    let Some(ours) = (unsafe { own_export(symbol) }) else {
        return false;
    };
    let found = crate::safety::catching(|| {
        // SAFETY: a pseudo-handle and the program's C string.
        let first = unsafe { real::dlsym(libc::RTLD_DEFAULT, symbol) } as usize;
        if first != ours {
            return first; // Defined before cudablame (the program itself): that one.
        }
        // SAFETY: as above.
        let name = unsafe { std::ffi::CStr::from_ptr(symbol) };
        if next_definition(name, ours, caller) != 0 {
            ours
        } else {
            0
        }
    });
    match found {
        Some(p) => {
            // SAFETY: the caller's out slot.
            unsafe { *answer = p as *mut c_void };
            true
        }
        None => false,
    }
}

/// `dlsym` in a library handle: glibc's result, with hooked driver functions replaced by our
/// wrappers (the static CUDA runtime and Triton look the driver up this way).
///
/// # Safety
/// As `dlsym(3)`: `handle` is a handle from `dlopen` or a pseudo-handle, `symbol` NULL or
/// NUL-terminated.
unsafe extern "C" fn dlsym_in_handle(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    // SAFETY: the program's own arguments, passed on.
    let p = unsafe { real::dlsym(handle, symbol) };
    // Only names starting with "cu" can be driver functions: everything else returns at once.
    if p.is_null()
        || symbol.is_null()
        // SAFETY: symbol is non-NULL and NUL-terminated (dlsym's contract); the second byte is
        // read only if the first is 'c' (so not the terminator).
        || unsafe { *symbol != b'c' as c_char || *symbol.add(1) != b'u' as c_char }
    {
        return p;
    }
    // SAFETY: as above.
    let Some(ours) = (unsafe { own_export(symbol) }) else {
        return p;
    };
    if p as usize == ours {
        // The handle's scope holds libcudablame (`dlopen(NULL)`: the program's global scope): as
        // for RTLD_DEFAULT, a name no other library defines stays absent.
        // SAFETY: as above.
        let name = unsafe { std::ffi::CStr::from_ptr(symbol) };
        let other = crate::safety::catching(|| next_definition(name, ours, 0)).unwrap_or(1);
        return if other != 0 { p } else { std::ptr::null_mut() };
    }
    if ours == cudaGetDriverEntryPoint as *const () as usize
        || ours == cudaGetDriverEntryPointByVersion as *const () as usize
    {
        return p; // A runtime's own entry: not a driver function.
    }
    let wrapped = crate::safety::guarded(|| wrap_resolved(p as usize)).unwrap_or(p as usize);
    crate::safety::guarded(|| debug_resolution("dlsym", symbol, p as usize, wrapped));
    wrapped as *mut c_void
}

/// Replaces a successfully resolved function pointer in `*pfn` by its wrapper.
///
/// # Safety
/// `pfn` is NULL or a valid, initialized `void*` slot (the real resolver succeeded).
unsafe fn wrap_out(how: &str, symbol: *const c_char, pfn: *mut *mut c_void) {
    // SAFETY: the caller checked the real call succeeded, so pfn is a valid out pointer.
    let p = unsafe { pfn.as_mut() };
    if let Some(p) = p.filter(|p| !p.is_null()) {
        let from = *p as usize;
        let to = crate::safety::guarded(|| wrap_resolved(from)).unwrap_or(from);
        crate::safety::guarded(|| debug_resolution(how, symbol, from, to));
        *p = to as *mut c_void;
    }
}

/// Defines an interposed driver resolver `$name(symbol, pfn, ...)`: the driver's own resolver
/// (`Driver::$field`) first, so that `cudaVersion` and `flags` pick the variant, then the
/// function it returned replaced by its wrapper.
macro_rules! driver_resolver {
    ($(#[doc = $doc:literal])* $name:ident => $field:ident
     ($symbol:ident, $pfn:ident $(, $p:ident : $t:ty)*)) => {
        $(#[doc = $doc])*
        #[cfg_attr(not(test), no_mangle)]
        #[allow(non_snake_case)] // The C name (no_mangle is off in unit tests).
        pub unsafe extern "C" fn $name(
            $symbol: *const c_char,
            $pfn: *mut *mut c_void,
            $($p: $t),*
        ) -> CUresult {
            type F = unsafe extern "C" fn(*const c_char, *mut *mut c_void $(, $t)*) -> CUresult;
            let real = real::driver().map(|d| d.$field).unwrap_or(0);
            if real == 0 {
                return CUDA_ERROR_NOT_INITIALIZED;
            }
            // SAFETY: `real` is the driver's own resolver of this name, whose signature `F` is
            // (`cuda.h`); the program's arguments are passed on unchanged.
            let rc = unsafe { std::mem::transmute::<usize, F>(real)($symbol, $pfn $(, $p)*) };
            if rc == CUDA_SUCCESS {
                // SAFETY: the real call succeeded, so `pfn` is the program's valid out slot,
                // written.
                unsafe { wrap_out(stringify!($name), $symbol, $pfn) };
            }
            rc
        }
    };
}

driver_resolver! {
    /// Interposed `cuGetProcAddress` (CUDA 11.3-11.8 signature, driver API doc "Entry Point
    /// Access"): `(symbol, pfn, cudaVersion, flags)`.
    cuGetProcAddress => get_proc_address (symbol, pfn, cuda_version: c_int, flags: u64)
}

driver_resolver! {
    /// Interposed `cuGetProcAddress_v2` (CUDA >= 12.0: adds the query-result out parameter):
    /// `(symbol, pfn, cudaVersion, flags, symbolStatus)`.
    cuGetProcAddress_v2 => get_proc_address_v2 (
        symbol, pfn, cuda_version: c_int, flags: u64, status: *mut CUdriverProcAddressQueryResult
    )
}

/// `cudaErrorSymbolNotFound` (driver_types.h): returned when no CUDA runtime is loaded.
const CUDA_ERROR_SYMBOL_NOT_FOUND_RT: c_uint = 500;

/// Defines an interposed runtime resolver `$name(symbol, func, ...)` and its body `$imp`, which
/// takes the caller's return address as one more argument: the runtime's own function is looked
/// up in the caller's scope (see [`next_definition`]), called, and the function it returned
/// replaced by its wrapper. On x86-64 a naked entry adds the caller's address (`$caller`: the
/// instruction that puts `[rsp]` in the first free argument register) and jumps to `$imp`;
/// elsewhere the address is 0 (unknown).
macro_rules! runtime_resolver {
    ($(#[doc = $doc:literal])* $name:ident => $imp:ident, $cname:literal, $caller:literal,
     ($symbol:ident, $func:ident $(, $p:ident : $t:ty)*)) => {
        $(#[doc = $doc])*
        #[cfg(target_arch = "x86_64")]
        #[cfg_attr(not(test), no_mangle)]
        #[allow(non_snake_case)] // The C name (no_mangle is off in unit tests).
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name(
            $symbol: *const c_char,
            $func: *mut *mut c_void,
            $($p: $t),*
        ) -> c_uint {
            std::arch::naked_asm!($caller, "jmp {imp}", imp = sym $imp)
        }

        $(#[doc = $doc])*
        /// Not x86-64: without the caller's address.
        #[cfg(not(target_arch = "x86_64"))]
        #[cfg_attr(not(test), no_mangle)]
        #[allow(non_snake_case)] // The C name (no_mangle is off in unit tests).
        pub unsafe extern "C" fn $name(
            $symbol: *const c_char,
            $func: *mut *mut c_void,
            $($p: $t),*
        ) -> c_uint {
            // SAFETY: the program's own arguments, as the runtime function takes them; 0: no
            // caller.
            unsafe { $imp($symbol, $func $(, $p)*, 0) }
        }

        /// The body of the export of the same name.
        ///
        /// # Safety
        /// The contract of the runtime function (CUDA runtime API, "Driver Entry Point Access"):
        /// `symbol` NUL-terminated, `func` a valid out slot, `status` NULL or valid; `caller` any
        /// address (0: unknown).
        unsafe extern "C" fn $imp(
            $symbol: *const c_char,
            $func: *mut *mut c_void,
            $($p: $t,)*
            caller: usize,
        ) -> c_uint {
            type F = unsafe extern "C" fn(*const c_char, *mut *mut c_void $(, $t)*) -> c_uint;
            let real = next_definition($cname, $name as *const () as usize, caller);
            if real == 0 {
                return CUDA_ERROR_SYMBOL_NOT_FOUND_RT;
            }
            // SAFETY: `real` is the runtime's own function of this name, whose signature `F` is
            // (`cuda_runtime_api.h`); the program's arguments are passed on unchanged.
            let rc = unsafe { std::mem::transmute::<usize, F>(real)($symbol, $func $(, $p)*) };
            if rc == 0 {
                // SAFETY: the runtime succeeded, so `func` is the program's valid out slot,
                // written.
                unsafe { wrap_out(stringify!($name), $symbol, $func) };
            }
            rc
        }
    };
}

runtime_resolver! {
    /// Interposed `cudaGetDriverEntryPoint` (CUDA runtime API, "Driver Entry Point Access"):
    /// `(symbol, funcPtr, flags, driverStatus)`; the fourth parameter exists from CUDA 12.0 and is
    /// passed through as is for older callers.
    cudaGetDriverEntryPoint => get_driver_entry_point, c"cudaGetDriverEntryPoint",
    "mov r8, qword ptr [rsp]",
    (symbol, func, flags: u64, status: *mut c_uint)
}

runtime_resolver! {
    /// Interposed `cudaGetDriverEntryPointByVersion` (CUDA >= 12.5 runtime API):
    /// `(symbol, funcPtr, cudaVersion, flags, driverStatus)`.
    cudaGetDriverEntryPointByVersion => get_driver_entry_point_by_version,
    c"cudaGetDriverEntryPointByVersion", "mov r9, qword ptr [rsp]",
    (symbol, func, cuda_version: c_uint, flags: u64, status: *mut c_uint)
}

/// What the caller would have found without cudablame, for a name that cudablame exports
/// (`ours`): the next definition in the global scope, else one in the caller's own scope. A CUDA runtime that a library loaded with `RTLD_LOCAL` depends on (Python
/// extension modules) is only in that library's scope, which a lookup made from libcudablame
/// would never see. `caller` is a return address in the caller's code (0: unknown).
fn next_definition(name: &std::ffi::CStr, ours: usize, caller: usize) -> usize {
    // SAFETY: a pseudo-handle and a C string.
    let next = unsafe { real::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    if next != 0 && next != ours {
        return next;
    }
    if caller == 0 {
        return 0;
    }
    // SAFETY: dladdr1 only reads loader data; with RTLD_DL_LINKMAP it stores the caller's
    // `struct link_map *`, which glibc accepts as a handle (it is what dlopen returns).
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
        let found = real::dlsym(map, name.as_ptr()) as usize;
        if found == ours {
            0
        } else {
            found
        }
    }
}

type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>,
    *mut c_void,
) -> c_int;

/// glibc's `pthread_create` (the next definition after libcudablame), 0 if none.
fn real_pthread_create() -> usize {
    static REAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    real::glibc_next(c"pthread_create", &REAL)
}

/// Interposed `pthread_create`: the real one, unchanged (same arguments, same thread, same
/// start routine); around it cudablame notes what the thread was started to run
/// (`threads`), so a launch from it can be named when its stack cannot.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>,
    arg: *mut c_void,
) -> c_int {
    let real = real_pthread_create();
    if real == 0 {
        return libc::EAGAIN;
    }
    // SAFETY: real is glibc's pthread_create.
    let real: PthreadCreate = unsafe { std::mem::transmute::<usize, PthreadCreate>(real) };
    let start_addr = start.map_or(0, |f| f as usize);
    let noted =
        std::panic::catch_unwind(|| crate::threads::before_create(start_addr, arg as usize));
    // SAFETY: the caller's arguments, passed on unchanged.
    let rc = unsafe { real(thread, attr, start, arg) };
    if let (0, Ok(noted)) = (rc, noted) {
        if !thread.is_null() {
            // SAFETY: pthread_create succeeded and wrote *thread.
            let t = unsafe { *thread } as usize;
            let _ = std::panic::catch_unwind(|| crate::threads::created(t, noted));
        }
    }
    rc
}
