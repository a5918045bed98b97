//! Two copies of `libcudablame.so` in one process (a pip-installed one and a built one, or
//! `LD_PRELOAD` set by hand and again by `cudablame run`): the first in the global scope records
//! and reports; every later one only passes calls through.
//!
//! Why: a later copy is reached only through the first's `RTLD_NEXT` lookups (the program's calls
//! bind to the first copy's exports), and the runtime error-string lookup made that way
//! (`errstr`) crashed the program in the loader at its first sticky error: the later copy, finding
//! no runtime after itself, searched the scope of its caller, the first copy, with that
//! library's link map as a `dlsym` handle (found by a break-it test, twentieth session; test
//! `two_copies_of_cudablame_preloaded`).

use crate::real;
use crate::stack::module_of;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether another copy of the library comes before this one in the global scope.
static LATER_COPY: AtomicBool = AtomicBool::new(false);

/// Whether this copy stands down for an earlier one (then it is off: [`crate::safety::disabled`]).
pub(crate) fn later_copy() -> bool {
    LATER_COPY.load(Ordering::Relaxed)
}

/// Library constructor: stands this copy down when the global scope's `cudablame_pause` is
/// another object's (one line on stderr naming both files). Compared by object, not by address:
/// this library's own references to its exported functions may bind to the first copy's.
extern "C" fn check_at_load() {
    let _errno = crate::safety::KeepErrno::now();
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: a pseudo-handle and a C string.
        let first =
            unsafe { real::dlsym(libc::RTLD_DEFAULT, c"cudablame_pause".as_ptr()) } as usize;
        let (Some(first), Some(ours)) = (
            (first != 0).then(|| module_of(first)).flatten(),
            module_of(check_at_load as *const () as usize),
        ) else {
            return;
        };
        if first.0 == ours.0 {
            return;
        }
        LATER_COPY.store(true, Ordering::Relaxed);
        crate::safety::set_gate(crate::safety::Gate::DISABLED, true);
        crate::safety::write_stderr(
            format!(
                "cudablame: {} is loaded too, before this copy ({}): this one stays off and passes \
                 every call through\n",
                first.1, ours.1
            )
            .as_bytes(),
        );
    });
}

#[used]
#[link_section = ".init_array"]
static CHECK_AT_LOAD: extern "C" fn() = check_at_load;
