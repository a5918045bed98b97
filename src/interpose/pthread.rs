//! The interposed `pthread_create`: the real one, with what each thread was started to run noted.

use crate::real;
use std::ffi::{c_int, c_void};

type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>,
    *mut c_void,
) -> c_int;

/// Library constructor: finds glibc's `pthread_create` and libstdc++'s text ranges while the
/// loader initializes this library (in the loading thread, under the loader's recursive lock).
extern "C" fn find_at_load() {
    let _errno = crate::safety::KeepErrno::now();
    let _ = std::panic::catch_unwind(|| {
        real::pthread_create();
        crate::threads::note_modules();
    });
}

#[used]
#[link_section = ".init_array"]
static FIND_AT_LOAD: extern "C" fn() = find_at_load;

/// Interposed `pthread_create`: the real one, unchanged (same arguments, same thread, same
/// start routine); around it cudablame notes what the thread was started to run
/// (`threads`), so a launch from it can be named when its stack cannot. Takes no lock the loader
/// holds, calls nothing that may (no `dladdr`/`dlsym`), allocates nothing, and nothing runs in
/// the new thread: safe inside `dlopen` and cheap (see `threads`).
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>,
    arg: *mut c_void,
) -> c_int {
    let real = real::pthread_create();
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
