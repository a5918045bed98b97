//! Link settings of the fake driver.
//!
//! * soname `libcuda.so.1`, like the real driver, so programs linked with `-lcuda` load it.
//! * `-Bsymbolic-functions`: references from inside the library to its own exported functions
//!   (the `cuGetProcAddress` table, internal calls) bind to the library's own definitions. Without
//!   it, an `LD_PRELOAD` shim that exports `cuLaunchKernel` would be what the fake's
//!   `cuGetProcAddress("cuLaunchKernel")` returns, and the shim would end up calling itself.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");
}
