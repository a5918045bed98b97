//! `cudablame_version`: the export that tells libcudablame.so from any other shared library.
//!
//! `cudablame run --lib PATH` and `CUDABLAME_LIB` (crates/cli/src/locate.rs) look this name up in
//! the file's dynamic symbol table before starting the program: no other library (the driver,
//! another interposer) exports it. Nothing in the library calls it.

use std::ffi::c_char;

/// The version of this library (the package version, e.g. `0.1.0`), a static NUL-terminated
/// string. Callable by anyone (`dlsym(RTLD_DEFAULT, "cudablame_version")`); it has no effect.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn cudablame_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_is_the_package_version() {
        // SAFETY: the function returns a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(super::cudablame_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }
}
