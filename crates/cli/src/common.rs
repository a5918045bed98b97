//! Helpers shared by the subcommands: report path patterns as the library expands them, the
//! `LD_PRELOAD` value.

/// Expands a report or trace path pattern as the library does (`report::sink::expand`: `%p`,
/// `%h`, `%r`, `%%`) for a process of pid `pid` started by this command with its environment.
pub fn expand_pattern(pattern: &str, pid: u32) -> String {
    use cudablame_report::pattern::{expand, host_name, rank_from_env};
    expand(pattern, pid, &host_name(), rank_from_env())
}

/// What is wrong with a report or trace pattern given as an option (`--report`, `--trace`), as
/// the library would read it: empty, or `pattern::problem` (an on/off word, an unknown `%`
/// escape). `run` and `demo` refuse such an option rather than let the library warn about a
/// variable the user never set and write its own default.
pub fn given_pattern_problem(pattern: &str) -> Option<String> {
    if pattern.trim().is_empty() {
        Some("is empty".to_string())
    } else {
        cudablame_report::pattern::problem(pattern.trim())
    }
}

/// The directory a report or trace pattern writes into (for this process's pid: `run` execs the
/// program, which keeps it): the pattern itself when it ends in `/`, else its parent. `None` for
/// the working directory.
pub fn pattern_dir(pattern: &str) -> Option<std::path::PathBuf> {
    let expanded = expand_pattern(pattern.trim(), std::process::id());
    if expanded.ends_with('/') {
        return Some(expanded.into());
    }
    std::path::Path::new(&expanded)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(std::path::Path::to_path_buf)
}

/// Writes `text` to standard output; a failed write (a full disk, `> /dev/full`) is one line on
/// stderr naming `command`, and `Err` with exit status 1 (it panicked in `print!`, status 101:
/// found by a fresh-user trial). A reader that went away ends the process by SIGPIPE first
/// (`main::default_sigpipe`).
pub fn print_out(command: &str, text: &str) -> Result<(), std::process::ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| {
            eprintln!("cudablame {command}: cannot write to standard output: {e}");
            std::process::ExitCode::from(1)
        })
}

/// Makes the folder `dir` and the folders above it; the error is one line naming it. A part of
/// its path that exists and is not a folder is named as such (`create_dir_all` says only "File
/// exists": found by a break-it helper with `demo --report-dir /etc/passwd`).
pub fn make_folder(dir: &std::path::Path) -> Result<(), String> {
    // Without a trailing `/`: `afile/` does not "exist" when `afile` is a file (ENOTDIR).
    let parts: std::path::PathBuf = dir.components().collect();
    if let Some(file) = parts
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| a.exists() && !a.is_dir())
    {
        return Err(format!(
            "{} is a file, so the folder {} cannot be made",
            file.display(),
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot make the folder {}: {e}", dir.display()))
}

/// The one wording of `show` and `summary` for a report of another `cudablame.report/N` schema
/// than this command reads (`cudablame_report::model::SCHEMA`); `None` when `schema` is not
/// cudablame's at all.
pub fn newer_schema(schema: &str) -> Option<String> {
    use cudablame_report::model::SCHEMA;
    schema.starts_with("cudablame.report/").then(|| {
        format!("a report of schema {schema:?}, newer than this command reads ({SCHEMA:?}): update cudablame")
    })
}

/// `LD_PRELOAD` with `lib` first, keeping what was there.
pub fn preload_value(lib: &std::path::Path, existing: Option<&str>) -> String {
    match existing.map(str::trim).filter(|e| !e.is_empty()) {
        Some(e) if e.split([' ', ':']).any(|x| x == lib.to_string_lossy()) => e.to_string(),
        Some(e) => format!("{}:{e}", lib.display()),
        None => lib.display().to_string(),
    }
}

/// Whether `bytes`, which are not valid JSON, are a report cut short (a full disk, a killed
/// writer): a report still starts with its schema (`"cudablame.report/`) within its first 200
/// bytes. `show` and `summary` word such a file alike.
pub fn cut_short_report(bytes: &[u8]) -> bool {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]);
    head.contains("\"cudablame.report/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn pattern_directories() {
        let pid = std::process::id();
        assert_eq!(pattern_dir("r.json"), None);
        assert_eq!(pattern_dir("reports/"), Some("reports/".into()));
        assert_eq!(
            pattern_dir("reports-%p/cb-%r.json"),
            Some(format!("reports-{pid}").into())
        );
        assert_eq!(expand_pattern("a-%p-%%-%q", 7), "a-7-%-%q");
    }

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
