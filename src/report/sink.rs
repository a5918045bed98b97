//! Writing the JSON report and the trace: path pattern expansion and a crash-safe, no-clobber
//! write.

use super::model::Report;
use std::io::Write;

pub(crate) use super::pattern::expand;

/// Writes the report to the expanded pattern and returns the path written (see [`write_new`]).
/// Failures print one line on stderr and return `None`.
pub(crate) fn write_json(pattern: &str, report: &Report, rank: u32) -> Option<String> {
    let p = &report.process;
    write_file(
        "JSON report",
        "CUDABLAME_REPORT",
        "cudablame-%h-%p.json",
        pattern,
        p.pid,
        &p.host,
        rank,
        |f| {
            serde_json::to_writer_pretty(&mut *f, report)?;
            f.write_all(b"\n")
        },
    )
}

/// Writes a Chrome trace (any serializable value, compact) to the expanded pattern and returns
/// the path written. Failures print one line on stderr and return `None`.
pub(crate) fn write_trace<T: serde::Serialize>(
    pattern: &str,
    trace: &T,
    report: &Report,
    rank: u32,
) -> Option<String> {
    let p = &report.process;
    write_file(
        "trace",
        "CUDABLAME_TRACE",
        "cudablame-trace-%h-%p.json",
        pattern,
        p.pid,
        &p.host,
        rank,
        |f| {
            serde_json::to_writer(&mut *f, trace)?;
            f.write_all(b"\n")
        },
    )
}

/// Expands `pattern` and writes a new file there with `fill` (see [`write_new`]). A pattern that
/// names a directory (an existing one, or ending in `/`) gets the file `in_directory` inside it.
/// Where that fails (a device or `/proc`, a missing or unwritable folder, a full disk, over the
/// file size limit, ...) the file goes to `in_directory` itself, the default path (bad
/// configuration gives the default, as `cudablame run` does before the program starts; found
/// by a fresh-user trial: the bare library wrote no report at all), and one line names `what`,
/// the variable that sets the path, and where the file went (or that the default failed too:
/// `None`). The program goes on as without cudablame either way.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_file(
    what: &str,
    var: &str,
    in_directory: &str,
    pattern: &str,
    pid: u32,
    host: &str,
    rank: u32,
    fill: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
) -> Option<String> {
    let mut content = Vec::new();
    if let Err(e) = fill(&mut content) {
        crate::safety::say(&format!("cudablame: cannot write the {what}: {e}"));
        return None;
    }
    let in_folder = expand(in_directory, pid, host, rank);
    let to = |pattern: &str| {
        write_to(
            &anchored(expand(pattern, pid, host, rank)),
            &in_folder,
            &content,
        )
    };
    let problem = match to(pattern) {
        Ok(p) => return Some(p),
        Err(problem) => crate::safety::shorten(&problem, 200),
    };
    let default = (pattern != in_directory).then(|| to(in_directory));
    let (written, instead) = match default {
        None => (None, String::new()),
        Some(Ok(p)) => {
            let instead = format!("; wrote it to {p} instead");
            (Some(p), instead)
        }
        Some(Err(e)) => (
            None,
            format!(
                "; nor to the default path: {}",
                crate::safety::shorten(&e, 200)
            ),
        ),
    };
    crate::safety::say(&format!(
        "cudablame: cannot write the {what} {problem}{instead} (fix {var})"
    ));
    written
}

/// Writes `content` as a new file at `expanded` (inside it as `in_folder` where it names a
/// folder: `pattern::file_path`); returns the path written, or why not (": PROBLEM" or
/// "to PATH: ERROR", to follow "cannot write the report").
fn write_to(expanded: &std::path::Path, in_folder: &str, content: &[u8]) -> Result<String, String> {
    if let Some(problem) = cudablame_report::pattern::not_a_file(expanded) {
        return Err(format!(": {problem}"));
    }
    // A real directory only: a symlink planted at the path is never followed, not even to one.
    let path = cudablame_report::pattern::file_path(expanded, in_folder);
    write_new(&path, content).map_err(|e| format!("to {}: {e}", path.display()))
}

/// A relative `path` made relative to the directory the program started in
/// (`super::anchor_dir`) where the program has changed its working directory since (found by a
/// fresh-user trial: a training script that moved into its run folder lost the report
/// `cudablame run --report reports/r.json` had checked, and the default report landed where no
/// one looked); unchanged otherwise, so a report's path reads as it was given. A path, not a
/// string: the start folder's name may not be UTF-8.
fn anchored(path: String) -> std::path::PathBuf {
    if std::path::Path::new(&path).is_absolute() {
        return path.into();
    }
    match super::anchor_dir() {
        Some(dir) => dir.join(&path),
        None => path.into(),
    }
}

/// `RLIMIT_FSIZE` (`ulimit -f`) in bytes, if limited. Writing past it would kill the program with
/// `SIGXFSZ`.
fn file_size_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(lim.rlim_cur)
}

/// Writes a new file at `path` holding `content` and returns the path written. The content
/// (refused when larger than the file size limit) is written to a file created exclusively in
/// the target directory (a temporary name), flushed to disk, then linked to its final name without
/// replacing anything there: a planted symlink or another process's file is never followed or
/// overwritten (the file then goes to `NAME.1.json`, `NAME.2.json`, ...).
pub(crate) fn write_new(
    path: impl AsRef<std::path::Path>,
    content: &[u8],
) -> std::io::Result<String> {
    if let Some(limit) = file_size_limit().filter(|&l| content.len() as u64 > l) {
        return Err(std::io::Error::other(format!(
            "{} bytes exceed the file size limit of {limit} bytes (ulimit -f)",
            content.len()
        )));
    }
    let target = path.as_ref();
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    // Mode 0666 less the umask, like any program's output file (tempfile's default, 0600, kept
    // others from running `summary` over a shared report folder).
    let mut tmp = tempfile::Builder::new()
        .prefix(".cudablame-")
        .suffix(".json.tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(&dir)
        .map_err(|e| std::io::Error::new(e.kind(), cudablame_report::pattern::os_reason(&e)))?;
    tmp.as_file_mut().write_all(content)?;
    tmp.as_file().sync_all()?;
    use cudablame_report::pattern::{numbered, MAX_NUMBERED};
    for n in 0..=MAX_NUMBERED {
        let candidate = numbered(target, n);
        match tmp.persist_noclobber(&candidate) {
            Ok(_) => return Ok(candidate.display().to_string()),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => tmp = e.file,
            Err(e) => return Err(e.error),
        }
    }
    Err(std::io::Error::other(format!(
        "{} files with this name exist already",
        MAX_NUMBERED + 1
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_every_placeholder() {
        assert_eq!(
            expand("r-%h-%p-%r-%%-%x.json", 42, "node7", 3),
            "r-node7-42-3-%-%x.json"
        );
        assert_eq!(expand("trailing%", 1, "h", 0), "trailing%");
    }

    #[test]
    fn report_files_follow_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json").display().to_string();
        let written = write_new(&path, b"{}").unwrap();
        // What any program's File::create gets here (0666 less the umask).
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(std::path::Path::new(&written)), mode(&plain));
    }

    #[test]
    fn never_overwrites_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json").display().to_string();
        std::fs::write(&path, "theirs").unwrap();
        let written = write_new(&path, b"ours").unwrap();
        assert_eq!(written, dir.path().join("r.1.json").display().to_string());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "theirs");
        assert_eq!(std::fs::read_to_string(&written).unwrap(), "ours");
    }
}
