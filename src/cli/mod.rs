//! Subcommands of the `cudablame` binary.

pub mod demo;
pub mod run;
pub mod show;
pub mod summary;

use std::path::PathBuf;

/// A file that sits beside this executable (`libcudablame.so`, the simulated driver).
pub fn beside_exe(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join(name);
    p.exists().then_some(p)
}

/// `LD_PRELOAD` with `lib` first, keeping what was there.
pub fn preload_value(lib: &std::path::Path, existing: Option<&str>) -> String {
    match existing.map(str::trim).filter(|e| !e.is_empty()) {
        Some(e) if e.split([' ', ':']).any(|x| x == lib.to_string_lossy()) => e.to_string(),
        Some(e) => format!("{}:{e}", lib.display()),
        None => lib.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn preload_keeps_existing_libraries() {
        let lib = Path::new("/x/libcudablame.so");
        assert_eq!(preload_value(lib, None), "/x/libcudablame.so");
        assert_eq!(preload_value(lib, Some("")), "/x/libcudablame.so");
        assert_eq!(
            preload_value(lib, Some("/y/libother.so")),
            "/x/libcudablame.so:/y/libother.so"
        );
        assert_eq!(
            preload_value(lib, Some("/y/a.so:/x/libcudablame.so")),
            "/y/a.so:/x/libcudablame.so"
        );
    }
}
