//! The interposed resolvers: `cuGetProcAddress` / `cuGetProcAddress_v2` (the driver's) and
//! `cudaGetDriverEntryPoint` / `cudaGetDriverEntryPointByVersion` (the runtime's); each calls
//! the real one and returns the wrapper of what it resolved.

use super::*;
use crate::cuda::*;
use crate::real;
use std::ffi::{c_char, c_int, c_uint, c_void};

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
