//! Link settings of the fake driver.
//!
//! * soname `libcuda.so.1`, like the real driver, so programs linked with `-lcuda` load it.
//! * `-Bsymbolic-functions`: references from inside the library to its own exported functions
//!   (the `cuGetProcAddress` table, internal calls) bind to the library's own definitions. Without
//!   it, an `LD_PRELOAD` shim that exports `cuLaunchKernel` would be what the fake's
//!   `cuGetProcAddress("cuLaunchKernel")` returns, and the shim would end up calling itself.
//! * `src/assert_print.c`: the device-assert printer (a `va_list` call to `vfprintf`), compiled
//!   with the system C compiler into a static library linked into the fake.
fn main() {
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let obj = format!("{out}/assert_print.o");
    let ok = std::process::Command::new(&cc)
        .args(["-c", "-fPIC", "-O1", "-o", &obj, "src/assert_print.c"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "compiling src/assert_print.c with {cc} failed");
    let ok = std::process::Command::new("ar")
        .args(["crs", &format!("{out}/libfakeprint.a"), &obj])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ar failed");
    println!("cargo:rerun-if-changed=src/assert_print.c");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-search=native={out}");
    println!("cargo:rustc-link-lib=static=fakeprint");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");
}
