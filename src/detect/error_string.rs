//! The error string of the reported sticky error (issue 23): once a report for a sticky error is
//! written, `cuGetErrorString` and `cudaGetErrorString` of that code return the real text followed
//! by `cudablame_report::text::error_string_note` (` [cudablame: culprit ...]`), so that the
//! culprit reaches the exception message a framework builds from the string (PyTorch:
//! `CUDA error: <cudaGetErrorString>`) and a notebook cell.
//!
//! What the hooks (`interpose::errstr`) may do: one atomic load of [`DECORATED`], then byte
//! comparisons. The decorated strings are built here at report time, leaked, published once
//! and never freed or rewritten, so a pointer handed to the program stays valid for the life of
//! the process. A real text that matches none of the texts known at report time is returned
//! unchanged (nothing is built in a hook).

use crate::cuda::CUresult;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// What one report published: the reported code and the decorated texts.
pub(crate) struct Decorated {
    /// The reported `CUresult`.
    code: CUresult,
    /// The same error as a runtime `cudaError_t` ([`runtime_code`]), if it has one.
    runtime: Option<c_int>,
    /// `(real text, real text + " " + note)`: the driver's text, and the runtime's where it
    /// differs (both looked up at report time).
    texts: Vec<(CString, CString)>,
}

/// The published strings; NULL before any report, with `CUDABLAME_ERROR_STRING=off`, and in a
/// forked child until it writes its own report.
static DECORATED: AtomicPtr<Decorated> = AtomicPtr::new(std::ptr::null_mut());

/// The runtime's `cudaGetErrorString` that cudablame's export forwards to, when it is found in
/// the global scope (0: not looked up or not found there). Written by `interpose::errstr`, read
/// here at report time to learn the runtime's own text.
pub(crate) static RUNTIME_FORWARD: AtomicUsize = AtomicUsize::new(0);

/// The runtime's `cudaError_t` for a sticky `CUresult`. The codes cudablame treats as sticky
/// (`cuda::is_sticky`) have the same number in both enums: `cuda.h` `cudaError_enum`
/// (`CUDA_ERROR_ILLEGAL_ADDRESS` 700, `LAUNCH_TIMEOUT` 702, `ASSERT` 710, `HARDWARE_STACK_ERROR`
/// 714, `ILLEGAL_INSTRUCTION` 715, `MISALIGNED_ADDRESS` 716, `INVALID_ADDRESS_SPACE` 717,
/// `INVALID_PC` 718, `LAUNCH_FAILED` 719, `UNKNOWN` 999) and `driver_types.h` `cudaError`
/// (`cudaErrorIllegalAddress` 700, `cudaErrorLaunchTimeout` 702, `cudaErrorAssert` 710,
/// `cudaErrorHardwareStackError` 714, `cudaErrorIllegalInstruction` 715,
/// `cudaErrorMisalignedAddress` 716, `cudaErrorInvalidAddressSpace` 717, `cudaErrorInvalidPc`
/// 718, `cudaErrorLaunchFailure` 719, `cudaErrorUnknown` 999). Other codes are not mapped: many
/// differ (`CUDA_ERROR_NOT_INITIALIZED` 3 is `cudaErrorInitializationError` 3, but
/// `CUDA_ERROR_INVALID_CONTEXT` 201 is `cudaErrorDeviceUninitialized` 201 and
/// `CUDA_ERROR_NOT_FOUND` 500 is `cudaErrorSymbolNotFound` 500), so nothing else is decorated.
pub(crate) fn runtime_code(code: CUresult) -> Option<c_int> {
    matches!(code, 700 | 702 | 710 | 714..=719 | 999).then_some(code as c_int)
}

/// Builds and publishes the decorated strings of the reported sticky error `code` (called once,
/// by `detect::observe`, after the report is written). `driver_text` and `runtime_text` are the
/// real functions' texts for `code`, where known.
pub(crate) fn publish(
    code: CUresult,
    note: &str,
    driver_text: Option<&CStr>,
    runtime_text: Option<&CStr>,
) {
    let mut texts: Vec<(CString, CString)> = Vec::new();
    for base in [driver_text, runtime_text].into_iter().flatten() {
        if texts.iter().any(|(b, _)| b.as_c_str() == base) {
            continue;
        }
        let mut full = base.to_bytes().to_vec();
        full.push(b' ');
        full.extend(note.bytes().filter(|&b| b != 0));
        if let Ok(full) = CString::new(full) {
            texts.push((base.to_owned(), full));
        }
    }
    if texts.is_empty() {
        return;
    }
    let d = Box::into_raw(Box::new(Decorated {
        code,
        runtime: runtime_code(code),
        texts,
    }));
    if DECORATED
        .compare_exchange(std::ptr::null_mut(), d, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // Another report published first (not expected: one per process). Ours was never
        // visible to anyone.
        // SAFETY: `d` came from Box::into_raw above and was not published.
        drop(unsafe { Box::from_raw(d) });
    }
}

/// The string to return for driver code `code` whose real text is `real`: the decorated one
/// when `code` is the reported sticky error and `real` is a text known at report time, else
/// `real` unchanged. No allocation, no lock.
///
/// # Safety
/// `real` is NULL or a NUL-terminated string.
pub(crate) unsafe fn for_driver(code: CUresult, real: *const c_char) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { pick(|d| d.code == code, real) }
}

/// As [`for_driver`], for the runtime's `cudaError_t` `code`.
///
/// # Safety
/// `real` is NULL or a NUL-terminated string.
pub(crate) unsafe fn for_runtime(code: c_int, real: *const c_char) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { pick(|d| d.runtime == Some(code), real) }
}

/// # Safety
/// `real` is NULL or a NUL-terminated string.
unsafe fn pick(matches: impl Fn(&Decorated) -> bool, real: *const c_char) -> *const c_char {
    let d = DECORATED.load(Ordering::Acquire);
    if d.is_null() || real.is_null() {
        return real;
    }
    // SAFETY: published once by `publish` and never freed (a forked child only forgets it).
    let d = unsafe { &*d };
    if !matches(d) {
        return real;
    }
    // SAFETY: per the contract, a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(real) };
    match d.texts.iter().find(|(base, _)| base.as_c_str() == text) {
        Some((_, full)) => full.as_ptr(),
        None => real,
    }
}

/// A forked child forgets the parent's strings (it reports its own errors); the parent's stay
/// allocated (a pointer the child inherited stays valid).
pub(crate) fn reset_after_fork() {
    DECORATED.store(std::ptr::null_mut(), Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_codes_map_to_the_same_runtime_numbers_and_others_not_at_all() {
        for code in [700, 702, 710, 714, 715, 716, 717, 718, 719, 999] {
            assert!(crate::cuda::is_sticky(code));
            assert_eq!(runtime_code(code), Some(code as c_int));
        }
        for code in [0, 1, 2, 201, 500, 701, 720] {
            assert_eq!(runtime_code(code), None);
        }
        // Every sticky code is mapped (a new sticky code needs its runtime number checked).
        for code in 0..1000 {
            assert_eq!(crate::cuda::is_sticky(code), runtime_code(code).is_some());
        }
    }

    #[test]
    fn only_the_reported_code_and_known_text_are_decorated_and_the_pointer_stays() {
        let assert_text = c"device-side assert triggered";
        let other = c"an illegal memory access was encountered";
        // Before any report: unchanged.
        // SAFETY: static C strings.
        unsafe {
            assert_eq!(for_driver(710, assert_text.as_ptr()), assert_text.as_ptr());
        }
        publish(
            710,
            "[cudablame: culprit k, launched at t.py:3 (exact); report r.json]",
            Some(assert_text),
            Some(c"device-side assert triggered (runtime)"),
        );
        // SAFETY: static C strings and published ones.
        unsafe {
            let p = for_driver(710, assert_text.as_ptr());
            assert_eq!(
                CStr::from_ptr(p).to_str().unwrap(),
                "device-side assert triggered [cudablame: culprit k, launched at t.py:3 (exact); report r.json]"
            );
            assert_eq!(for_driver(710, assert_text.as_ptr()), p, "built once");
            let rt = for_runtime(710, c"device-side assert triggered (runtime)".as_ptr());
            assert!(CStr::from_ptr(rt)
                .to_str()
                .unwrap()
                .starts_with("device-side assert triggered (runtime) [cudablame:"));
            // Other codes, unknown texts and NULL: the real pointer.
            assert_eq!(for_driver(700, other.as_ptr()), other.as_ptr());
            assert_eq!(for_runtime(700, other.as_ptr()), other.as_ptr());
            assert_eq!(for_driver(710, other.as_ptr()), other.as_ptr());
            assert!(for_driver(710, std::ptr::null()).is_null());
            // A second publish changes nothing.
            publish(710, "[cudablame: other]", Some(assert_text), None);
            assert_eq!(for_driver(710, assert_text.as_ptr()), p);
            reset_after_fork();
            assert_eq!(for_driver(710, assert_text.as_ptr()), assert_text.as_ptr());
            // The pointer handed out before stays readable.
            assert!(CStr::from_ptr(p).to_bytes().ends_with(b"report r.json]"));
        }
    }
}
