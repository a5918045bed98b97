//! Where the command finds `libcudablame.so` and the simulated driver (`libfakecuda.so`): one
//! lookup order for every subcommand.
//!
//! The library, first found wins:
//! 1. `--lib PATH` (`run`), then the variable `CUDABLAME_LIB`;
//! 2. beside this executable (`target/release/`, a copied pair);
//! 3. `<prefix>/lib/cudablame/` for an executable in `<prefix>/bin/` (system packages);
//! 4. the Python package `cudablame` of the environment whose `bin/` holds this executable
//!    (`<prefix>/lib/python3.*/site-packages/cudablame/`);
//! 5. the copy embedded in this executable (`cargo install`, the pip wheel: see `build.rs`),
//!    written on first use to `$XDG_CACHE_HOME/cudablame/<version>-<hash>/` (default
//!    `~/.cache`; when that is not writable, `$TMPDIR/cudablame-<uid>/`), atomically: a temporary
//!    file in that directory renamed into place, so concurrent first uses (the ranks of a job)
//!    never see a partial file.
//!
//! The simulated driver: beside the library found, then 2-5 the same way.

use std::io::Write;
use std::path::{Path, PathBuf};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
}

pub const LIB: &str = "libcudablame.so";
pub const DRIVER: &str = "libfakecuda.so";

/// Directories searched after the explicit ones, in order (steps 2-4).
fn install_dirs() -> Vec<PathBuf> {
    let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    let mut dirs = vec![exe_dir.clone()];
    if let Some(prefix) = exe_dir.parent() {
        dirs.push(prefix.join("lib/cudablame"));
        let mut pythons: Vec<PathBuf> = std::fs::read_dir(prefix.join("lib"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .map(|p| p.join("site-packages/cudablame"))
            .collect();
        pythons.sort();
        dirs.extend(pythons);
    }
    dirs
}

/// `libcudablame.so`, by the lookup order above; the error names every place tried.
pub fn library(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("{} (--lib) does not exist", p.display()))
        };
    }
    if let Some(p) = std::env::var_os("CUDABLAME_LIB").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{} (CUDABLAME_LIB) does not exist", p.display()))
        };
    }
    find(LIB, &[], embedded::LIB)
}

/// The simulated driver, looked for beside `lib` first.
pub fn simulated_driver(lib: Option<&Path>) -> Result<PathBuf, String> {
    let first: Vec<PathBuf> = lib
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .into_iter()
        .collect();
    find(DRIVER, &first, embedded::FAKE)
}

fn find(name: &str, first: &[PathBuf], embedded: &[u8]) -> Result<PathBuf, String> {
    let dirs: Vec<PathBuf> = first.iter().cloned().chain(install_dirs()).collect();
    if let Some(p) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
        return Ok(p);
    }
    let tried = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if embedded.is_empty() {
        return Err(format!(
            "{name} not found (looked in {tried}; this command was built without an embedded copy: \
             build it with `cargo build --release --workspace` in the source tree, or install with pip, \
             or with `CUDABLAME_EMBED=1 cargo install --path .`)"
        ));
    }
    extract(name, embedded).map_err(|e| {
        format!("{name} not found in {tried}, and its embedded copy could not be written: {e}")
    })
}

/// Cache directories for the embedded copies, preferred first.
fn cache_dirs() -> Vec<PathBuf> {
    let version = format!("{}-{}", env!("CARGO_PKG_VERSION"), embedded::HASH);
    let mut dirs = Vec::new();
    let xdg = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        });
    if let Some(x) = xdg {
        dirs.push(x.join("cudablame").join(&version));
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    dirs.push(
        std::env::temp_dir()
            .join(format!("cudablame-{uid}"))
            .join(version),
    );
    dirs
}

/// Writes `bytes` as `name` into the first usable cache directory, unless a file of that size is
/// already there (the directory name carries the content hash).
fn extract(name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let mut last = std::io::Error::other("no cache directory");
    for dir in cache_dirs() {
        let path = dir.join(name);
        if std::fs::read(&path).is_ok_and(|b| b == bytes) && private(&dir) && private(&path) {
            return Ok(path);
        }
        match write_atomically(&dir, &path, bytes) {
            Ok(()) if private(&dir) => return Ok(path),
            Ok(()) => {
                last = std::io::Error::other(format!(
                    "{}: not owned by this user, or writable by others",
                    dir.display()
                ))
            }
            Err(e) => last = std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())),
        }
    }
    Err(last)
}

/// Whether `path` and its parent directory belong to this user and nobody else can write
/// them: a library preloaded into every program run must not be replaceable by someone else
/// (the `$TMPDIR` fallback is shared).
fn private(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let ok = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.uid() == uid && m.mode() & 0o022 == 0)
    };
    ok(path) && path.parent().is_none_or(ok)
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".extract-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o755))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_is_atomic_and_reused() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("cache/x");
        let path = dir.join("libx.so");
        write_atomically(&dir, &path, b"abc").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
        // A second writer replaces it whole; no temporary file is left behind.
        write_atomically(&dir, &path, b"abc").unwrap();
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn only_private_cache_directories_are_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("cudablame-0/v");
        let path = dir.join("libx.so");
        write_atomically(&dir, &path, b"abc").unwrap();
        assert!(private(&dir) && private(&path));
        // Writable by others (a directory planted in a shared /tmp): not trusted.
        std::fs::set_permissions(
            d.path().join("cudablame-0"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        assert!(!private(&dir));
    }

    #[test]
    fn missing_explicit_library_is_an_error() {
        let e = library(Some(Path::new("/nonexistent/libcudablame.so"))).unwrap_err();
        assert!(e.contains("/nonexistent/libcudablame.so"), "{e}");
    }
}
