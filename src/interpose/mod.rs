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
pub fn hook(ep: EntryPoint, describe: impl FnOnce() -> Call, call_real: impl FnOnce(usize) -> CUresult) -> CUresult {
    let real = real::driver().map(|d| d.real[ep as usize]).unwrap_or(0);
    // SAFETY: a pseudo-handle and a C string.
    let real = if real != 0 { real } else { unsafe { real::dlsym(libc::RTLD_NEXT, ep.c_name().as_ptr()) as usize } };
    if real == 0 {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    let real_call = || call_real(real);
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
    let Some(call) = crate::guarded(describe) else {
        return real_call();
    };
    let (rc, unrecorded) = match call {
        Call::Enqueue(launch) => record::enqueue(ep, launch, real_call),
        _ => {
            let mark = crate::guarded(|| record::before(ep, &call)).flatten();
            let rc = real_call();
            crate::guarded(|| record::after(ep, &call, mark, rc));
            (rc, None)
        }
    };
    if rc != CUDA_SUCCESS {
        crate::guarded(|| detect::observe(ep, &call, rc, unrecorded));
    }
    rc
}

/// Our replacement for a resolved driver function address: the wrapper of the hooked variant
/// that lives at `address`, our resolvers for the real `cuGetProcAddress*`, else `address` itself.
pub fn wrap_resolved(address: usize) -> usize {
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
        let verdict = if from == to { "passed through" } else { "wrapped" };
        eprintln!("cudablame: {how}({name}) = {from:#x}: {verdict}");
    }
}

/// Interposed `dlsym`: glibc's result, with hooked driver functions replaced by our wrappers.
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    // SAFETY: the program's own arguments, passed on.
    let p = unsafe { real::dlsym(handle, symbol) };
    // Only names starting with "cu" can be driver functions: everything else returns at once.
    // SAFETY: symbol is NUL-terminated (dlsym's contract); the second byte is read only if the first is 'c'.
    if p.is_null() || symbol.is_null() || unsafe { *symbol != b'c' as c_char || *symbol.add(1) != b'u' as c_char } {
        return p;
    }
    // SAFETY: as above.
    let name = unsafe { std::ffi::CStr::from_ptr(symbol) }.to_bytes();
    let hooked = name == b"cuGetProcAddress" || name == b"cuGetProcAddress_v2" || EntryPoint::from_name(name).is_some();
    if !hooked {
        return p;
    }
    let wrapped = crate::guarded(|| wrap_resolved(p as usize)).unwrap_or(p as usize);
    crate::guarded(|| debug_resolution("dlsym", symbol, p as usize, wrapped));
    wrapped as *mut c_void
}

type GetProcAddress = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
type GetProcAddressV2 =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut CUdriverProcAddressQueryResult) -> CUresult;

/// Replaces a successfully resolved function pointer in `*pfn` by its wrapper.
unsafe fn wrap_out(how: &str, symbol: *const c_char, pfn: *mut *mut c_void) {
    // SAFETY: the caller checked the real call succeeded, so pfn is a valid out pointer.
    let p = unsafe { pfn.as_mut() };
    if let Some(p) = p.filter(|p| !p.is_null()) {
        let from = *p as usize;
        let to = crate::guarded(|| wrap_resolved(from)).unwrap_or(from);
        crate::guarded(|| debug_resolution(how, symbol, from, to));
        *p = to as *mut c_void;
    }
}

/// Interposed `cuGetProcAddress` (CUDA 11.3-11.8 signature, driver API doc "Entry Point Access").
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult {
    let real = real::driver().map(|d| d.get_proc_address).unwrap_or(0);
    if real == 0 {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    // SAFETY: the driver's own cuGetProcAddress.
    let rc = unsafe { std::mem::transmute::<usize, GetProcAddress>(real)(symbol, pfn, cuda_version, flags) };
    if rc == CUDA_SUCCESS {
        unsafe { wrap_out("cuGetProcAddress", symbol, pfn) };
    }
    rc
}

/// Interposed `cuGetProcAddress_v2` (CUDA >= 12.0: adds the query-result out parameter).
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    status: *mut CUdriverProcAddressQueryResult,
) -> CUresult {
    let real = real::driver().map(|d| d.get_proc_address_v2).unwrap_or(0);
    if real == 0 {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    // SAFETY: the driver's own cuGetProcAddress_v2.
    let rc = unsafe { std::mem::transmute::<usize, GetProcAddressV2>(real)(symbol, pfn, cuda_version, flags, status) };
    if rc == CUDA_SUCCESS {
        unsafe { wrap_out("cuGetProcAddress_v2", symbol, pfn) };
    }
    rc
}

/// `cudaErrorSymbolNotFound` (driver_types.h): returned when no CUDA runtime is loaded.
const CUDA_ERROR_SYMBOL_NOT_FOUND_RT: c_uint = 500;

/// Interposed `cudaGetDriverEntryPoint` (CUDA runtime API, "Driver Entry Point Access"; the
/// fourth parameter exists from CUDA 12.0 and is passed through as is for older callers).
#[no_mangle]
pub unsafe extern "C" fn cudaGetDriverEntryPoint(
    symbol: *const c_char,
    func: *mut *mut c_void,
    flags: u64,
    status: *mut c_uint,
) -> c_uint {
    type F = unsafe extern "C" fn(*const c_char, *mut *mut c_void, u64, *mut c_uint) -> c_uint;
    // SAFETY: a pseudo-handle and a C string.
    let real = unsafe { real::dlsym(libc::RTLD_NEXT, c"cudaGetDriverEntryPoint".as_ptr()) };
    if real.is_null() {
        return CUDA_ERROR_SYMBOL_NOT_FOUND_RT;
    }
    // SAFETY: the runtime's own function of this signature.
    let rc = unsafe { std::mem::transmute::<*mut c_void, F>(real)(symbol, func, flags, status) };
    if rc == 0 {
        unsafe { wrap_out("cudaGetDriverEntryPoint", symbol, func) };
    }
    rc
}

/// Interposed `cudaGetDriverEntryPointByVersion` (CUDA >= 12.5 runtime API).
#[no_mangle]
pub unsafe extern "C" fn cudaGetDriverEntryPointByVersion(
    symbol: *const c_char,
    func: *mut *mut c_void,
    cuda_version: c_uint,
    flags: u64,
    status: *mut c_uint,
) -> c_uint {
    type F = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_uint, u64, *mut c_uint) -> c_uint;
    // SAFETY: a pseudo-handle and a C string.
    let real = unsafe { real::dlsym(libc::RTLD_NEXT, c"cudaGetDriverEntryPointByVersion".as_ptr()) };
    if real.is_null() {
        return CUDA_ERROR_SYMBOL_NOT_FOUND_RT;
    }
    // SAFETY: the runtime's own function of this signature.
    let rc = unsafe { std::mem::transmute::<*mut c_void, F>(real)(symbol, func, cuda_version, flags, status) };
    if rc == 0 {
        unsafe { wrap_out("cudaGetDriverEntryPointByVersion", symbol, func) };
    }
    rc
}
