//! The interposed `dlsym` and `dlclose`: lookups by name keep the caller's point of view, and
//! a hooked function comes back as its wrapper.

use super::resolvers::*;
use super::*;
use crate::cuda::entry_points::EntryPoint;
use crate::real;
use std::ffi::{c_char, c_int, c_void};

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
/// `cudaGetDriverEntryPoint*`, the error strings), if it is one.
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
        b"cuGetErrorString" => super::errstr::cu_get_error_string_address(),
        b"cudaGetErrorString" => super::errstr::cuda_get_error_string_address(),
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
        || ours == super::errstr::cuda_get_error_string_address()
    {
        // A runtime's own entry: not a driver function. (`cudaGetErrorString` looked up in a
        // runtime's handle stays that runtime's plain one.)
        return p;
    }
    let wrapped = crate::safety::guarded(|| wrap_resolved(p as usize)).unwrap_or(p as usize);
    crate::safety::guarded(|| debug_resolution("dlsym", symbol, p as usize, wrapped));
    wrapped as *mut c_void
}
