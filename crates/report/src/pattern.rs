//! Report and trace path patterns (`CUDABLAME_REPORT`, `CUDABLAME_TRACE`, `cudablame run
//! --report`): `%p` the pid, `%h` the host name, `%r` the rank, `%%` a `%`. Shared by the library
//! and the command: std only. [`host_name`] and [`rank_from_env`] give `%h` and `%r` for both.

/// One step of reading a pattern.
enum Piece {
    Char(char),
    /// `%` followed by this character.
    Escape(char),
    /// A `%` at the very end.
    Lone,
}

fn pieces(pattern: &str) -> impl Iterator<Item = Piece> + '_ {
    let mut chars = pattern.chars();
    std::iter::from_fn(move || {
        let c = chars.next()?;
        Some(if c != '%' {
            Piece::Char(c)
        } else {
            chars.next().map_or(Piece::Lone, Piece::Escape)
        })
    })
}

/// Expands the escapes of `pattern` for a process; unknown escapes and a lone `%` stay as
/// written (they are warned about once, see [`escape_problem`]).
pub fn expand(pattern: &str, pid: u32, host: &str, rank: u32) -> String {
    let mut out = String::new();
    for piece in pieces(pattern) {
        match piece {
            Piece::Char(c) => out.push(c),
            Piece::Escape('p') => out.push_str(&pid.to_string()),
            Piece::Escape('h') => out.push_str(host),
            Piece::Escape('r') => out.push_str(&rank.to_string()),
            Piece::Escape('%') => out.push('%'),
            Piece::Escape(other) => {
                out.push('%');
                out.push(other);
            }
            Piece::Lone => out.push('%'),
        }
    }
    out
}

/// Whether a report or trace path pattern (already trimmed) asks for no file: `off` (any case),
/// or `/dev/null`, the usual way to discard output (a report is never written through an
/// existing path, so it would have become `/dev/null.1`, or a "cannot write" line for a user
/// who may not create files in `/dev`). Read alike by the library (`CUDABLAME_REPORT`,
/// `CUDABLAME_TRACE`) and the command (`run --report/--trace`, `demo --report`).
pub fn is_off(pattern: &str) -> bool {
    pattern.eq_ignore_ascii_case("off") || pattern == "/dev/null"
}

/// What is wrong with a report or trace path pattern, if anything, in words for a warning: an
/// on/off word where a path belongs (`on`, `1`, `true`, `yes` would name a file), or a `%`
/// escape other than `%p`, `%h`, `%r` and `%%` ([`escape_problem`]). Read alike by the library
/// (`CUDABLAME_REPORT`, `CUDABLAME_TRACE`) and the command (`run --report/--trace`).
pub fn problem(pattern: &str) -> Option<String> {
    if ["on", "1", "true", "yes"]
        .iter()
        .any(|w| pattern.eq_ignore_ascii_case(w))
    {
        return Some(
            "is not a path (give a path pattern such as reports/cb-%h-%p.json, or off)".into(),
        );
    }
    escape_problem(pattern)
}

/// Whether `path` (expanded) names something that is not a file or folder: a device, pipe or
/// socket, directly or through a symlink (`/dev/stdout`, `/dev/stderr`, a FIFO), or anything in
/// `/dev` (but `/dev/shm`, a memory file system) or `/proc`, as given or through its folder's
/// real path. A report is a file written next to its final name and linked there (never
/// following a symlink), so such a path would get a new file beside the device
/// (`/dev/stdout.1`); `/dev/stdout` of a process whose output is a regular file is that file,
/// which the device test alone let through (a fresh-user trial: the report went to a new
/// `/dev/stdout.1`, made in `/dev` when run as root). The library and the command refuse such
/// paths instead, in words for a warning.
///
/// The folder checked is the one the report lands in ([`file_path`]: the path itself for a
/// folder pattern, else its parent), by the real path of its nearest existing ancestor, so that
/// a symlink to `/dev` given as a folder (`link/`), `/dev/shm/..`, or a folder still to be made
/// under such a link are refused too (a fifth review).
pub fn not_a_file(path: impl AsRef<std::path::Path>) -> Option<String> {
    use std::path::Path;
    let system =
        |p: &Path| (p.starts_with("/dev") && !p.starts_with("/dev/shm")) || p.starts_with("/proc");
    let p = path.as_ref();
    let is_folder = lands_inside(p);
    let folder = match p.parent() {
        _ if is_folder => p,
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let real_folder = folder
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .chain([Path::new(".")])
        .find_map(|a| std::fs::canonicalize(a).ok());
    let special = std::fs::metadata(p).is_ok_and(|m| !m.is_file() && !m.is_dir());
    let in_system = system(p) || real_folder.is_some_and(|d| system(&d));
    (special || in_system).then(|| {
        format!(
            "{} is a device, pipe or socket or lies in /dev or /proc, not a file: reports \
             and traces are JSON files (off: none)",
            p.display()
        )
    })
}

/// Linux's longest file name, in bytes (`NAME_MAX`, `<linux/limits.h>`; the limit of the common
/// file systems).
pub const NAME_MAX: usize = 255;

/// The longest pid on Linux (`PID_MAX_LIMIT`, 2^22: proc(5), `/proc/sys/kernel/pid_max`): `%p`
/// is checked at this length, since a process the job starts later (a worker) can get a longer
/// pid than the command that checks.
pub const LONGEST_PID: u32 = 4_194_304;

/// What is wrong with the name of the file a report whose expanded path is `path` lands in: more
/// than [`NAME_MAX`] bytes, which the OS refuses ("File name too long") only when the report is
/// written, at fault time, so the report is lost (a fresh-user trial: `--report` with a 300-byte
/// name started the program). `None` when it fits, and for a folder (the report takes
/// cudablame's own name inside it: [`file_path`]). A longer folder name is refused where the
/// folder is made.
pub fn name_too_long(path: &str) -> Option<String> {
    if lands_inside(std::path::Path::new(path)) {
        return None;
    }
    let name = std::path::Path::new(path).file_name()?.len();
    (name > NAME_MAX).then(|| {
        format!("its file name is {name} bytes long, more than a file name may have ({NAME_MAX})")
    })
}

/// Whether a report whose expanded path is `path` lands inside it ([`file_path`]): `path` ends
/// in `/` or is a real folder (a symlink planted there is not followed). A path, not a string:
/// the library's may begin with a start folder whose name is not UTF-8 (`report::anchor_dir`).
pub fn lands_inside(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().ends_with(b"/")
        || std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Where a report whose expanded path is `path` lands: inside it, as `in_folder` (expanded by the
/// caller), when `path` ends in `/` or is a real folder (a symlink planted there is not
/// followed), else `path` itself. The library writes there (`report::sink::write_file`) and the
/// command looks there (`demo`).
pub fn file_path(path: impl AsRef<std::path::Path>, in_folder: &str) -> std::path::PathBuf {
    let path = path.as_ref();
    if lands_inside(path) {
        path.join(in_folder)
    } else {
        path.to_path_buf()
    }
}

/// The `n`th name a report takes when `target` exists already (a report never replaces a
/// file): `target` itself for 0, else `STEM.n.EXT` beside it (`r.json`, `r.1.json`, ...).
/// Names past [`MAX_NUMBERED`] are not tried.
pub fn numbered(target: &std::path::Path, n: usize) -> std::path::PathBuf {
    if n == 0 {
        return target.to_path_buf();
    }
    let stem = target
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = target
        .extension()
        .map(|s| format!(".{}", s.to_string_lossy()))
        .unwrap_or_default();
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    dir.join(format!("{stem}.{n}{ext}"))
}

/// The last [`numbered`] name tried (`STEM.99.EXT`: 100 names in all).
pub const MAX_NUMBERED: usize = 99;

/// What is wrong with the escapes of `pattern`, in words for a warning; `None` when nothing is.
pub fn escape_problem(pattern: &str) -> Option<String> {
    pieces(pattern).find_map(|piece| match piece {
        Piece::Escape('p' | 'h' | 'r' | '%') | Piece::Char(_) => None,
        Piece::Escape(o) => Some(format!(
            "unknown escape %{o} (known: %p pid, %h host, %r rank, %% a %)"
        )),
        Piece::Lone => Some("ends in a lone % (write %% for a %)".into()),
    })
}

/// This host's name for `%h` and the report's `process.host`: what `gethostname` returns (the
/// UTS namespace's node name, read from `/proc/sys/kernel/hostname`), `"unknown-host"` if it
/// cannot be read. The library and the command both call this, so that `run` prepares the folder
/// the library writes to.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim_end_matches('\n').to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// The variables that give a process's rank in a multi-process job, first set one wins:
/// torchrun, Slurm, Open MPI.
pub const RANK_VARS: [&str; 3] = ["RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"];

/// This process's rank for `%r` and `process.rank`: the first of [`RANK_VARS`] set to a number
/// (surrounding spaces allowed), else 0.
pub fn rank_from_env() -> u32 {
    rank_from(|k| std::env::var(k).ok())
}

/// [`rank_from_env`] with the variables read by `get`.
pub fn rank_from(get: impl Fn(&str) -> Option<String>) -> u32 {
    RANK_VARS
        .iter()
        .find_map(|k| get(k)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Why a report file (or a probe file beside it) could not be created, in the operating system's
/// words: `tempfile`, with which both the library and the command create them, appends the
/// temporary file's own name (`{os error} at path "DIR/.cudablame-XXXXXX.json.tmp"`: its
/// `PathError`, whose source it does not expose), an internal detail that would only confuse.
pub fn os_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at path \"") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths in /dev (but /dev/shm) and /proc are refused even where nothing exists yet or the
    /// path resolves to a regular file; /dev/shm and ordinary folders are not.
    #[test]
    fn report_paths_in_dev_and_proc_are_refused() {
        for p in [
            "/dev/cudablame-r.json",
            "/dev/stdout",
            "/proc/self/cudablame-r.json",
            "/dev/fd/../cudablame-r.json",
        ] {
            assert!(not_a_file(p).is_some(), "{p}");
        }
        let dir = std::env::temp_dir().join(format!("cb-pattern-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A symlinked folder that leads into /dev: its real path is checked.
        let link = dir.join("to-dev");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/dev", &link).unwrap();
        assert!(not_a_file(link.join("r.json").to_str().unwrap()).is_some());
        // As a folder (the report lands inside), through `..`, and a folder still to be made
        // under the link.
        for p in [
            format!("{}/", link.display()),
            "/dev/shm/..".into(),
            "/dev/shm/../".into(),
            format!("{}/new/r.json", link.display()),
        ] {
            assert!(not_a_file(&p).is_some(), "{p}");
        }
        for p in [
            dir.join("r.json"),
            dir.join("new/deeper/r.json"),
            format!("{}/", dir.display()).into(),
            "/dev/shm/cudablame-r.json".into(),
        ] {
            assert_eq!(not_a_file(p.to_str().unwrap()), None, "{p:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file name over NAME_MAX bytes is refused, one of NAME_MAX is not, and a folder's own
    /// name is the folder's business.
    #[test]
    fn a_file_name_longer_than_the_os_allows_is_refused() {
        let fits = format!("/tmp/{}", "b".repeat(NAME_MAX));
        assert_eq!(name_too_long(&fits), None);
        let over = format!("/tmp/{}", "b".repeat(NAME_MAX + 1));
        let problem = name_too_long(&over).expect("refused");
        assert!(problem.contains("256 bytes long"), "{problem}");
        assert_eq!(name_too_long(&format!("{over}/")), None);
        assert_eq!(name_too_long("r.json"), None);
        // Written as the OS sees it: the limit is in bytes, not characters.
        assert!(name_too_long(&"é".repeat(128)).is_some());
    }

    #[test]
    fn a_report_lands_in_a_folder_pattern_under_the_first_free_name() {
        use std::path::{Path, PathBuf};
        let t = Path::new("/r/cb.json");
        assert_eq!(numbered(t, 0), PathBuf::from("/r/cb.json"));
        assert_eq!(numbered(t, 1), PathBuf::from("/r/cb.1.json"));
        assert_eq!(numbered(t, MAX_NUMBERED), PathBuf::from("/r/cb.99.json"));
        assert_eq!(
            numbered(Path::new("cb.json"), 2),
            PathBuf::from("./cb.2.json")
        );
        assert_eq!(
            file_path("reports/", "cb-1.json"),
            PathBuf::from("reports/cb-1.json")
        );
        assert_eq!(file_path("/", "cb-1.json"), PathBuf::from("/cb-1.json"));
        assert_eq!(file_path("r.json", "cb-1.json"), PathBuf::from("r.json"));
    }

    #[test]
    fn rank_is_the_first_numeric_variable() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(rank_from(env(&[])), 0);
        assert_eq!(rank_from(env(&[("OMPI_COMM_WORLD_RANK", "5")])), 5);
        assert_eq!(rank_from(env(&[("RANK", " 3 "), ("SLURM_PROCID", "4")])), 3);
        // A variable that is not a number is skipped, not taken as 0.
        assert_eq!(rank_from(env(&[("RANK", "x"), ("SLURM_PROCID", "4")])), 4);
    }

    #[test]
    fn host_name_is_the_node_name() {
        let h = host_name();
        assert!(!h.is_empty() && !h.contains('\n'), "{h:?}");
        // What gethostname(2) says, where `uname -n` can tell.
        if let Ok(o) = std::process::Command::new("uname").arg("-n").output() {
            if o.status.success() {
                assert_eq!(h, String::from_utf8_lossy(&o.stdout).trim_end());
            }
        }
    }

    #[test]
    fn expands_known_escapes_and_keeps_the_rest() {
        assert_eq!(
            expand("r-%h-%p-%r-%%.json", 7, "node1", 3),
            "r-node1-7-3-%.json"
        );
        assert_eq!(expand("a-%q-%", 7, "h", 0), "a-%q-%");
        assert_eq!(escape_problem("r-%h-%p-%r-%%.json"), None);
        assert!(escape_problem("a-%q").unwrap().contains("%q"));
        assert!(escape_problem("a-%").unwrap().contains("lone"));
    }

    #[test]
    fn the_reason_keeps_the_os_words_and_drops_the_temporary_name() {
        let dir = std::env::temp_dir().join("cudablame-no-such-folder-4711");
        let e = tempfile::Builder::new()
            .prefix(".cudablame-")
            .tempfile_in(&dir)
            .expect_err("no such folder");
        assert!(e.to_string().contains(".cudablame-"), "{e}");
        assert_eq!(os_reason(&e), "No such file or directory (os error 2)");
        let plain = std::io::Error::from_raw_os_error(13);
        assert_eq!(os_reason(&plain), plain.to_string());
    }
}
