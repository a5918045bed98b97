//! The error-string exports (issue 23): the driver's `cuGetErrorString` and the runtime's
//! `cudaGetErrorString`. Each calls the real function and returns its result, except that the
//! text of the sticky error cudablame has reported carries one more line
//! (`detect::error_string`). Return codes, `cuGetErrorName`/`cudaGetErrorName` (not exported),
//! other codes and everything before a report are the real ones, byte for byte.
//!
//! In the hooks: atomic loads and byte comparisons only, no allocation and no lock, except the
//! first lookup of the real function (`dlsym`, once per process where the runtime is in the
//! global scope; per call where it is only in a library's local scope).
//!
//! Reached as: the exported symbols (a program or library linked with `-lcuda` / a shared
//! `libcudart`: PyTorch's `libc10_cuda.so` imports `cudaGetErrorString@libcudart.so.13`, which
//! an unversioned definition in a preloaded library binds, measured on the H200), and
//! `cuGetErrorString` through `dlsym` on the driver handle and `cuGetProcAddress*`
//! (`wrap_resolved`). A static `libcudart` links its own `cudaGetErrorString` into the program:
//! that one is decorated only if it asks the driver's `cuGetErrorString` for the text
//! (`scripts/gpu-errstr.sh` says which).

#![allow(non_snake_case)]

use super::next_definition;
use crate::cuda::*;
use crate::detect::error_string::{self, RUNTIME_FORWARD};
use crate::real;
use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;

type ErrorStringFn = unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult;
type RuntimeErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;

/// The driver's `cuGetErrorString`, 0 if there is none.
fn real_cu_get_error_string() -> usize {
    let found = crate::safety::catching(|| {
        real::driver()
            .and_then(|d| d.own.get_error_string)
            .map_or(0, |f| f as usize)
    })
    .unwrap_or(0);
    if found != 0 {
        return found;
    }
    // SAFETY: a pseudo-handle and a C string.
    unsafe { real::dlsym(libc::RTLD_NEXT, c"cuGetErrorString".as_ptr()) as usize }
}

/// The address of [`cuGetErrorString`], for `dlsym` and `cuGetProcAddress*` (`wrap_resolved`).
pub(crate) fn cu_get_error_string_address() -> usize {
    cuGetErrorString as *const () as usize
}

/// The address of [`cudaGetErrorString`], for `dlsym(RTLD_DEFAULT, ...)`.
pub(crate) fn cuda_get_error_string_address() -> usize {
    cudaGetErrorString as *const () as usize
}

/// Interposed `cuGetErrorString(CUresult error, const char **pStr)` (driver API, "Error
/// Handling"): the driver's result; `*pStr` is the driver's static string, or for the reported
/// sticky error a static string of cudablame's (the driver's text + ` [cudablame: ...]`), valid
/// for the life of the process.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn cuGetErrorString(error: CUresult, p_str: *mut *const c_char) -> CUresult {
    let real = real_cu_get_error_string();
    if real == 0 {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    // SAFETY: `real` is the driver's cuGetErrorString, of this signature (cuda.h).
    let f: ErrorStringFn = unsafe { std::mem::transmute(real) };
    // SAFETY: the program's own arguments, passed on unchanged.
    let rc = unsafe { f(error, p_str) };
    if rc == CUDA_SUCCESS && !p_str.is_null() {
        // SAFETY: the driver succeeded, so `*p_str` is its NUL-terminated static string.
        let text = unsafe { *p_str };
        // SAFETY: as above.
        let shown = crate::safety::catching(|| unsafe { error_string::for_driver(error, text) })
            .unwrap_or(text);
        // SAFETY: the program's out pointer, written by the driver just before.
        unsafe { *p_str = shown };
    }
    rc
}

/// The runtime's `cudaGetErrorString` for a caller at return address `caller` (0: unknown):
/// the next definition in the global scope (cached), else one in the caller's own scope.
fn real_cuda_get_error_string(caller: usize) -> usize {
    let cached = RUNTIME_FORWARD.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    let ours = cuda_get_error_string_address();
    // SAFETY: a pseudo-handle and a C string.
    let global = unsafe { real::dlsym(libc::RTLD_NEXT, c"cudaGetErrorString".as_ptr()) } as usize;
    if global != 0 && global != ours {
        RUNTIME_FORWARD.store(global, Ordering::Release);
        return global;
    }
    if super::copies::later_copy() {
        // Reached from the first copy, whose scope is not searched (`copies`).
        return 0;
    }
    crate::safety::catching(|| next_definition(c"cudaGetErrorString", ours, caller)).unwrap_or(0)
}

/// Interposed `cudaGetErrorString(cudaError_t error)` (runtime API, "Error Handling"), an
/// unversioned definition (it binds versioned references such as
/// `cudaGetErrorString@libcudart.so.13` too). On x86-64 a naked entry adds the caller's
/// return address (to find a runtime only in the caller's scope) and jumps to the body.
#[cfg(target_arch = "x86_64")]
#[cfg_attr(not(test), no_mangle)]
#[unsafe(naked)]
pub unsafe extern "C" fn cudaGetErrorString(error: c_int) -> *const c_char {
    std::arch::naked_asm!(
        "mov rsi, qword ptr [rsp]",
        "jmp {imp}",
        imp = sym cuda_get_error_string
    )
}

/// Interposed `cudaGetErrorString` where no naked entry is written (not x86-64).
#[cfg(not(target_arch = "x86_64"))]
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn cudaGetErrorString(error: c_int) -> *const c_char {
    // SAFETY: the program's own argument; 0: no caller.
    unsafe { cuda_get_error_string(error, 0) }
}

/// What a runtime returns for a code it does not know (`cudaGetErrorString`'s text for one):
/// what cudablame returns when no runtime is found at all (the program has none loaded).
const NO_RUNTIME: &std::ffi::CStr = c"unrecognized error code";

/// The body of [`cudaGetErrorString`].
///
/// # Safety
/// Any `error`; `caller` any address (0: unknown).
unsafe extern "C" fn cuda_get_error_string(error: c_int, caller: usize) -> *const c_char {
    let real = real_cuda_get_error_string(caller);
    if real == 0 {
        return NO_RUNTIME.as_ptr();
    }
    // SAFETY: `real` is the runtime's cudaGetErrorString, of this signature
    // (cuda_runtime_api.h).
    let f: RuntimeErrorStringFn = unsafe { std::mem::transmute(real) };
    // SAFETY: the program's own argument, passed on unchanged.
    let text = unsafe { f(error) };
    // SAFETY: the runtime returns a static NUL-terminated string (or NULL).
    crate::safety::catching(|| unsafe { error_string::for_runtime(error, text) }).unwrap_or(text)
}
