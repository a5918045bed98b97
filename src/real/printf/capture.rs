//! The replacements for the driver's stdio imports (x86-64 SysV): each feeds a copy of what the
//! driver prints on stdout or stderr to the assert buffer (`super::feed`; a `va_list` is copied,
//! as `va_copy` does, and formatted with `vsnprintf`), then calls the function its slot held.

use super::feed;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

/// x86-64 SysV `va_list` element (`__va_list_tag`): a `va_list` argument is a pointer to it.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct VaListTag {
    gp_offset: u32,
    fp_offset: u32,
    overflow_arg_area: *mut c_void,
    reg_save_area: *mut c_void,
}

extern "C" {
    fn vsnprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ap: *mut VaListTag) -> c_int;
}

type Vfprintf = unsafe extern "C" fn(*mut c_void, *const c_char, *mut VaListTag) -> c_int;
type VfprintfChk = unsafe extern "C" fn(*mut c_void, c_int, *const c_char, *mut VaListTag) -> c_int;
type Fputs = unsafe extern "C" fn(*const c_char, *mut c_void) -> c_int;
type Puts = unsafe extern "C" fn(*const c_char) -> c_int;
type Fwrite = unsafe extern "C" fn(*const c_void, usize, usize, *mut c_void) -> usize;

// What each patched slot held: the function the driver would have called.
static VFPRINTF: AtomicUsize = AtomicUsize::new(0);
static VFPRINTF_CHK: AtomicUsize = AtomicUsize::new(0);
static FPUTS: AtomicUsize = AtomicUsize::new(0);
static PUTS: AtomicUsize = AtomicUsize::new(0);
static FWRITE: AtomicUsize = AtomicUsize::new(0);

/// Formats a copy of the arguments and feeds the text; never panics out.
///
/// # Safety
/// `fmt` and `ap` are NULL or the format and `va_list` of a live `vfprintf` call.
unsafe fn capture(fmt: *const c_char, ap: *mut VaListTag) {
    if fmt.is_null() || ap.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `ap` is the caller's live `va_list` (checked non-NULL); copying the tag is
        // what `va_copy` does on x86-64, so the original is left unconsumed.
        let mut copy = unsafe { *ap };
        let mut buf = [0u8; 1024];
        // SAFETY: `fmt` and the copied arguments are the driver's own, valid for this
        // format; `buf` is writable for `buf.len()` bytes and vsnprintf never writes more.
        let n = unsafe { vsnprintf(buf.as_mut_ptr() as *mut c_char, buf.len(), fmt, &mut copy) };
        if n > 0 {
            let n = (n as usize).min(buf.len() - 1);
            feed(&buf[..n]);
        }
    });
}

fn real(slot: &AtomicUsize) -> usize {
    slot.load(Ordering::Acquire)
}

extern "C" {
    /// glibc's standard streams (`<stdio.h>`).
    static stdout: *mut c_void;
    static stderr: *mut c_void;
}

/// Whether `f` is the process's stdout or stderr: the driver also writes other files with
/// the same functions (thread names into `/proc/self/task/TID/comm`, seen on the H200), and
/// only what it prints is an assert.
fn printed(f: *mut c_void) -> bool {
    // SAFETY: reads glibc's two FILE pointers.
    !f.is_null() && unsafe { f == stdout || f == stderr }
}

/// The one body of the `vfprintf` and `__vfprintf_chk` hooks: feeds a copy of what goes to
/// stdout or stderr (`capture`, which leaves `ap` unconsumed), then calls the function the
/// hook's slot held with the same `va_list`: `vfprintf(f, fmt, ap)`, or with `flag` (the
/// `_FORTIFY_SOURCE` level) `__vfprintf_chk(f, flag, fmt, ap)` (glibc's fortified form; LSB
/// Core specifies it as `vfprintf` with the flag first).
///
/// # Safety
/// The arguments are those of a live `vfprintf` / `__vfprintf_chk` call made through a patched
/// slot (so its saved original is set).
unsafe fn vfprintf_body(
    f: *mut c_void,
    flag: Option<c_int>,
    fmt: *const c_char,
    ap: *mut VaListTag,
) -> c_int {
    if printed(f) {
        // SAFETY: the driver's own format and `va_list`, for this call.
        unsafe {
            capture(fmt, ap);
        }
    }
    match flag {
        None => {
            // SAFETY: the slot held this libc function (of this signature) before it was
            // patched, and the hook is only reachable through a patched slot, so it is set.
            let r: Vfprintf = unsafe { std::mem::transmute::<usize, Vfprintf>(real(&VFPRINTF)) };
            // SAFETY: the driver's own arguments, passed on unchanged.
            unsafe { r(f, fmt, ap) }
        }
        Some(flag) => {
            // SAFETY: as above, for `__vfprintf_chk`'s slot and signature.
            let r: VfprintfChk =
                unsafe { std::mem::transmute::<usize, VfprintfChk>(real(&VFPRINTF_CHK)) };
            // SAFETY: the driver's own arguments, passed on unchanged.
            unsafe { r(f, flag, fmt, ap) }
        }
    }
}

unsafe extern "C" fn hook_vfprintf(
    f: *mut c_void,
    fmt: *const c_char,
    ap: *mut VaListTag,
) -> c_int {
    // SAFETY: this hook's own arguments (a `vfprintf` call through its patched slot).
    unsafe { vfprintf_body(f, None, fmt, ap) }
}

unsafe extern "C" fn hook_vfprintf_chk(
    f: *mut c_void,
    flag: c_int,
    fmt: *const c_char,
    ap: *mut VaListTag,
) -> c_int {
    // SAFETY: this hook's own arguments (a `__vfprintf_chk` call through its patched slot).
    unsafe { vfprintf_body(f, Some(flag), fmt, ap) }
}

unsafe extern "C" fn hook_fputs(s: *const c_char, f: *mut c_void) -> c_int {
    if !s.is_null() && printed(f) {
        // SAFETY: fputs's contract: `s` is NUL-terminated.
        feed(unsafe { CStr::from_ptr(s) }.to_bytes());
    }
    // SAFETY: as in `vfprintf_body`: the slot's original function, of this signature.
    let r: Fputs = unsafe { std::mem::transmute::<usize, Fputs>(real(&FPUTS)) };
    // SAFETY: the driver's own arguments, passed on unchanged.
    unsafe { r(s, f) }
}

unsafe extern "C" fn hook_puts(s: *const c_char) -> c_int {
    if !s.is_null() {
        // SAFETY: puts's contract: `s` is NUL-terminated.
        feed(unsafe { CStr::from_ptr(s) }.to_bytes());
        feed(b"\n");
    }
    // SAFETY: as in `vfprintf_body`: the slot's original function, of this signature.
    let r: Puts = unsafe { std::mem::transmute::<usize, Puts>(real(&PUTS)) };
    // SAFETY: the driver's own argument, passed on unchanged.
    unsafe { r(s) }
}

unsafe extern "C" fn hook_fwrite(p: *const c_void, size: usize, n: usize, f: *mut c_void) -> usize {
    if !p.is_null() && printed(f) {
        if let Some(len) = size.checked_mul(n).filter(|&l| l <= 4096) {
            // SAFETY: fwrite's contract: `p` holds `size * n` readable bytes.
            feed(unsafe { std::slice::from_raw_parts(p as *const u8, len) });
        }
    }
    // SAFETY: as in `vfprintf_body`: the slot's original function, of this signature.
    let r: Fwrite = unsafe { std::mem::transmute::<usize, Fwrite>(real(&FWRITE)) };
    // SAFETY: the driver's own arguments, passed on unchanged.
    unsafe { r(p, size, n, f) }
}

/// `(symbol, our function, where the original goes)`.
pub(super) fn targets() -> [(&'static [u8], usize, &'static AtomicUsize); 5] {
    [
        (b"vfprintf", hook_vfprintf as *const () as usize, &VFPRINTF),
        (
            b"__vfprintf_chk",
            hook_vfprintf_chk as *const () as usize,
            &VFPRINTF_CHK,
        ),
        (b"fputs", hook_fputs as *const () as usize, &FPUTS),
        (b"puts", hook_puts as *const () as usize, &PUTS),
        (b"fwrite", hook_fwrite as *const () as usize, &FWRITE),
    ]
}
