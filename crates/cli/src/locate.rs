//! Where the command finds `libcudablame.so` and the simulated driver (`libfakecuda.so`): one
//! lookup order for every subcommand.
//!
//! The library, first found wins:
//! 1. `--lib PATH` (`run`), then the variable `CUDABLAME_LIB`;
//! 2. beside this executable (`target/release/`, a copied pair);
//! 3. `<prefix>/lib/cudablame/` for an executable in `<prefix>/bin/` (system packages);
//! 4. the Python package `cudablame` of the environment whose `bin/` holds this executable
//!    (`<prefix>/lib/python3.*/site-packages/cudablame/`);
//! 5. the copy embedded in this executable (every build: see `build.rs`),
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

/// `libcudablame.so`, by the lookup order above; the error names every place tried. A path given
/// (`--lib`, `CUDABLAME_LIB`) must be a 64-bit ELF shared object: anything else would be ignored
/// by the dynamic loader (`cannot be preloaded ... ignored`) and the program would run unwatched.
pub fn library(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return check_library(p, "--lib").map(|()| p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("CUDABLAME_LIB").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return check_library(&p, "CUDABLAME_LIB").map(|()| p);
    }
    find(LIB, &[], embedded::LIB)
}

/// Whether `path` (given by `source`) is a cudablame library that the dynamic loader can preload:
/// it exists, is not a folder, starts with the ELF header of a 64-bit shared object (`e_ident`
/// and `e_type == ET_DYN`, System V ABI, ELF header) and exports [`VERSION_SYMBOL`]. The error is
/// one line naming the problem.
pub fn check_library(path: &Path, source: &str) -> Result<(), String> {
    use std::io::Read;
    let name = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{name} ({source}) does not exist"))
        }
        Err(e) => return Err(format!("{name} ({source}): {e}")),
    };
    if meta.is_dir() {
        return Err(format!(
            "{name} ({source}) is a folder, not a library: give the path of libcudablame.so"
        ));
    }
    let mut head = [0u8; 18];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
    if let Err(e) = read {
        if e.kind() != std::io::ErrorKind::UnexpectedEof {
            return Err(format!("{name} ({source}) cannot be read: {e}"));
        }
    }
    // e_ident: 0x7f 'E' 'L' 'F', EI_CLASS 2 (64-bit); e_type (bytes 16-17, little-endian) 3 = ET_DYN.
    let elf = head[..4] == *b"\x7fELF";
    if !elf || head[4] != 2 || u16::from_le_bytes([head[16], head[17]]) != 3 {
        let what = if elf {
            "an ELF file but not a 64-bit shared library"
        } else {
            "not a shared library (no ELF header)"
        };
        return Err(format!(
            "{name} ({source}) is {what}: give the path of libcudablame.so"
        ));
    }
    // A shared library, but another one (the driver, another tool's): it would be preloaded
    // and the program would run unwatched. Only libcudablame.so exports `cudablame_version`
    // (src/interpose/version.rs), in the dynamic symbol table that ld.so itself looks names up in.
    match exports(path, VERSION_SYMBOL) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "{name} ({source}) is a shared library but not a cudablame library (it does not \
             export {VERSION_SYMBOL}): give the path of libcudablame.so"
        )),
        Err(e) => Err(format!(
            "{name} ({source}) cannot be read as a shared library: {e}"
        )),
    }
}

/// The symbol only libcudablame.so exports (its version string; src/interpose/version.rs).
pub const VERSION_SYMBOL: &str = "cudablame_version";

/// Whether the ELF file at `path` defines `symbol` in its dynamic symbol table (`.dynsym`, System V
/// ABI "Symbol Table"), read with the `object` crate without loading the whole file.
fn exports(path: &Path, symbol: &str) -> Result<bool, String> {
    use object::{Object, ObjectSymbol};
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache).map_err(|e| e.to_string())?;
    let found = elf
        .dynamic_symbols()
        .any(|s| !s.is_undefined() && s.name() == Ok(symbol));
    Ok(found)
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
            "{name} not found (looked in {tried}; this command was built without the workspace's \
             source, so it carries no copy: build or install it from a clone, README: Install)"
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

    #[test]
    fn folders_scripts_and_executables_are_not_libraries() {
        let d = tempfile::tempdir().unwrap();
        let e = check_library(d.path(), "--lib").unwrap_err();
        assert!(e.contains("is a folder, not a library"), "{e}");
        let script = d.path().join("typo.py");
        std::fs::write(&script, "print('hi')\n").unwrap();
        let e = check_library(&script, "--lib").unwrap_err();
        assert!(e.contains("not a shared library (no ELF header)"), "{e}");
        let empty = d.path().join("empty.so");
        std::fs::write(&empty, "").unwrap();
        assert!(check_library(&empty, "--lib").is_err());
        // A real shared library, but not cudablame's (libc, wherever this system keeps it).
        let libc = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/libc.so.6",
            "/usr/lib64/libc.so.6",
        ]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file());
        if let Some(libc) = libc {
            let e = check_library(libc, "--lib").unwrap_err();
            assert!(
                e.contains("is a shared library but not a cudablame library"),
                "{e}"
            );
        }
    }
}
