//! `cudablame run [OPTIONS] -- CMD ARGS...`

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

pub const ABOUT: &str =
    "Run a program with libcudablame.so preloaded; exits with the program's own status";

pub const LONG_ABOUT: &str = "\
Run a program with libcudablame.so preloaded.

cudablame sets LD_PRELOAD (libcudablame.so first, keeping what was already there) and the
CUDABLAME_* variables of the options given, then replaces itself with the program (exec): the
exit status, signals and process id are the program's own. When a sticky CUDA error surfaces the
program writes a report naming the culprit launch: text on stderr, JSON in the --report file.

Jobs: use it as the wrapped command of srun, mpirun, torchrun or an sbatch script. Children
(DataLoader workers, torchrun's worker processes, mpirun's ranks) inherit LD_PRELOAD and the
CUDABLAME_* variables through the environment, so one `cudablame run` covers the whole process
tree. Put %r (rank) and %h (host) in the report path so every rank writes its own file, then run
`cudablame summary` over them.";

pub const EXAMPLES: &str = "\
Examples:
  cudablame run -- ./app --size 1024
  cudablame run --report 'reports/cudablame-%h-r%r.json' -- python train.py
  cudablame run --trace 'trace-%p.json' --text off -- ./app        # Perfetto trace, no text
  srun cudablame run --report 'cudablame-%h-r%r.json' -- python train.py
  mpirun -np 8 cudablame run --report 'cudablame-%h-r%r.json' -- ./app
  cudablame run --report 'cudablame-%h-r%r.json' -- torchrun --nproc-per-node 8 train.py
  cudablame summary .                                                 # after the job";

#[derive(clap::Args)]
pub struct RunArgs {
    /// JSON report path pattern (%p pid, %h host, %r rank, %% a %), or `off` [CUDABLAME_REPORT]
    #[arg(long, value_name = "PATH")]
    report: Option<String>,
    /// Also write a Chrome trace / Perfetto JSON of the last ops (same patterns) [CUDABLAME_TRACE]
    #[arg(long, value_name = "PATH")]
    trace: Option<String>,
    /// The human report on stderr [CUDABLAME_TEXT]
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    text: Option<String>,
    /// Progress markers: budget (default: sparse, one per 500 us of host time between calls, at
    /// most 32 ops apart, and before each wait), every (after each op: exact illegal-address
    /// verdicts, about +2 us GPU per op), off (culprits are
    /// named as suspects only) [CUDABLAME_MARKERS]
    #[arg(long, value_name = "budget|every|off", value_parser = markers_values())]
    markers: Option<String>,
    /// Launch stacks: native (a copy per launch site, shared by its launches through the same
    /// native frames), every (a copy per launch), off [CUDABLAME_STACK]
    #[arg(long, value_name = "native|every|off", value_parser = ["native", "every", "off"])]
    stack: Option<String>,
    /// Path of libcudablame.so (default: $CUDABLAME_LIB, beside this executable, ../lib/cudablame/,
    /// the Python package, else the copy embedded in this command)
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
    /// The program and its arguments (after `--`)
    #[arg(required = true, value_name = "CMD", trailing_var_arg = true)]
    command: Vec<OsString>,
}

/// `--markers`' values: `on`, the library's other name for `budget`, is taken but not listed
/// (the help said `<budget|every|off>` over "possible values: budget, every, on, off").
fn markers_values() -> clap::builder::PossibleValuesParser {
    use clap::builder::PossibleValue;
    clap::builder::PossibleValuesParser::new([
        PossibleValue::new("budget"),
        PossibleValue::new("every"),
        PossibleValue::new("on").hide(true),
        PossibleValue::new("off"),
    ])
}

/// The library's default report path pattern (`CUDABLAME_REPORT` unset; src/config.rs): the
/// current folder.
pub const DEFAULT_REPORT: &str = "cudablame-%h-%p.json";

/// Makes the folder a report or trace pattern writes into (`common::pattern_dir`, the current
/// folder when it has none) and checks that a file can be created there under the pattern's
/// name (`pattern::name_too_long`, `%p` at its longest). The error names the real problem: a
/// path component that is a file, a folder that cannot be made or written, a file name too long.
///
/// A path that is no file to write (`pattern::not_a_file`: a device, or in `/dev` or `/proc`)
/// is refused first, so that `/dev/stdout` is named as such even where `/dev` cannot be
/// written; a bare file name is checked after its folder, the current one, so that a job
/// started in `/proc` hears that the current folder cannot be written.
fn check_report_folder(pattern: &str) -> Result<(), String> {
    use cudablame_report::pattern::{name_too_long, LONGEST_PID};
    let not_a_file = || {
        let expanded = crate::common::expand_pattern(pattern, std::process::id());
        cudablame_report::pattern::not_a_file(&expanded).map_or(Ok(()), Err)
    };
    let in_current_folder = crate::common::pattern_dir(pattern).is_none();
    if !in_current_folder {
        not_a_file()?;
    }
    check_folder(pattern)?;
    not_a_file()?;
    name_too_long(&crate::common::expand_pattern(pattern, LONGEST_PID)).map_or(Ok(()), Err)
}

/// Why a report or trace pattern given on the command line is refused (the pattern as the
/// library reads it, then [`check_report_folder`] unless it writes no file); `None`: usable.
/// `demo --report` refuses the same.
pub(crate) fn given_report_problem(p: &str) -> Option<String> {
    crate::common::given_pattern_problem(p).or_else(|| {
        (!no_path(p))
            .then(|| check_report_folder(p).err())
            .flatten()
    })
}

/// [`check_report_folder`]'s folder part: the folder can be made and a file created in it.
fn check_folder(pattern: &str) -> Result<(), String> {
    let dir = crate::common::pattern_dir(pattern).unwrap_or_else(|| ".".into());
    crate::common::make_folder(&dir)?;
    tempfile::Builder::new()
        .prefix(".cudablame-probe-")
        .tempfile_in(&dir)
        .map(drop)
        .map_err(|e| {
            let name = if dir.as_os_str() == "." {
                let cwd = std::env::current_dir().unwrap_or_default();
                format!("the current folder {}", cwd.display())
            } else {
                dir.display().to_string()
            };
            // The OS's words, without tempfile's probe file name.
            let why = cudablame_report::pattern::os_reason(&e);
            format!("cannot write in {name}: {why}")
        })
}

/// Whether `pattern` asks for no file (`off` or `/dev/null`, as the library reads them:
/// `pattern::is_off`; or blank: the library then warns and takes its default).
fn no_path(pattern: &str) -> bool {
    let p = pattern.trim();
    p.is_empty() || cudablame_report::pattern::is_off(p)
}

/// Settles one output path (the JSON report, the trace) before the program starts, and returns
/// the value to give the program's `var`, if any (`None`: leave the environment as it is).
/// - An option given (`--report`, `--trace`) whose folder cannot be made or written: one line,
///   and `Err` with exit status 2 (the program is not started: the user just asked for it).
/// - The variable (`CUDABLAME_REPORT`, `CUDABLAME_TRACE`) naming such a folder: bad configuration
///   gives one line and the default (the brief): the report goes to `default` when that can be
///   written, else to the temporary folder ([`fallback`]), else nowhere (`off`); the program
///   runs either way.
/// - Neither: the `default` report path, in the current folder, when it can be written; else one
///   line saying where the report goes instead ([`fallback`]), and the program runs (a job
///   started in a read-only folder must not fail because of cudablame).
fn settle(
    option: &str,
    given: Option<&str>,
    var: &str,
    default: Option<&str>,
) -> Result<Option<String>, ExitCode> {
    if let Some(p) = given {
        // The pattern itself first, as the library would read it (else the library warned
        // about a variable the user never set, and took its default).
        if let Some(e) = given_report_problem(p) {
            // The advice once (a pattern's problem may carry its own), and a long value cut as
            // the library cuts what it echoes (a fresh-user trial: both in full).
            let advice = if e.contains("(give ") {
                String::new()
            } else {
                format!("; give a writable path pattern with {option}, or {option} off")
            };
            let shown = cudablame_report::text::shown(p);
            eprintln!("cudablame run: {option} {shown}: {e}{advice} (the program was not started)");
            return Err(ExitCode::from(2));
        }
        // A report file not named `*.json`: written, but `summary FOLDER` looks for that ending
        // (a fresh-user trial: `--report x-%p`, then `summary .` found nothing). Said, not refused.
        let lands_inside = cudablame_report::pattern::lands_inside(std::path::Path::new(p));
        if default.is_some() && !no_path(p) && !lands_inside && !p.ends_with(".json") {
            eprintln!(
                "cudablame run: note: {option} {p:?} does not end in .json; `cudablame summary \
                 FOLDER` reads only *.json files (name the report itself to read it)"
            );
        }
        return Ok(Some(p.to_string()));
    }
    let from_env = std::env::var(var).ok();
    match from_env.as_deref() {
        // Blank, or a value the library would warn about (an on/off word but `off`, a bad
        // escape): the library would take its default in the program's own start folder, which
        // a script's `cd` moves (a fresh-user trial: the text then named a file that was not
        // there); said here, and the default anchored here as when unset.
        Some(v)
            if default.is_some()
                && (v.trim().is_empty()
                    || cudablame_report::pattern::problem(v.trim()).is_some()) =>
        {
            let d = default.unwrap_or_default();
            match cudablame_report::pattern::problem(v.trim()) {
                Some(problem) if !v.trim().is_empty() => eprintln!(
                    "cudablame run: {var}={:?}: {problem}; using the default report path {d}",
                    v.trim()
                ),
                _ => eprintln!("cudablame run: {var} is empty; using the default report path {d}"),
            }
            match check_report_folder(d) {
                Ok(()) => Ok(Some(d.to_string())),
                Err(e) => {
                    let (what, value) = fallback(d);
                    eprintln!("cudablame run: {e} (the default report path {d}); {what}");
                    Ok(Some(value))
                }
            }
        }
        Some(v) if !no_path(v) => {
            let Err(e) = check_report_folder(v) else {
                return Ok(None);
            };
            let (what, value) = match default {
                Some(d) => match check_report_folder(d) {
                    Ok(()) => (format!("using the default report path {d}"), d.to_string()),
                    // The default's folder is as bad (often the same one): say so, once.
                    Err(_) => {
                        let (what, value) = fallback(d);
                        let what =
                            format!("the default report path {d} cannot be written either: {what}");
                        (what, value)
                    }
                },
                None => ("no trace is written".to_string(), "off".to_string()),
            };
            eprintln!("cudablame run: {var}={v}: {e}; {what}");
            Ok(Some(value))
        }
        Some(_) => Ok(None),
        None => match default.map(|d| (d, check_report_folder(d))) {
            Some((d, Err(e))) => {
                let (what, value) = fallback(d);
                eprintln!("cudablame run: {e} (the default report path {d}); {what}");
                Ok(Some(value))
            }
            _ => Ok(None),
        },
    }
}

/// Where the report goes when the default path (`default`, in the current folder) cannot be
/// written: the same file name in the temporary folder (`std::env::temp_dir`, `$TMPDIR` or
/// `/tmp`), else nowhere. Returns what to tell the user and the `CUDABLAME_REPORT` value.
fn fallback(default: &str) -> (String, String) {
    let tmp = std::env::temp_dir().join(default).display().to_string();
    match check_report_folder(&tmp) {
        Ok(()) => (format!("the report goes to {tmp}"), tmp),
        Err(e) => (
            format!("and {e}: no JSON report is written (give a writable path with --report)"),
            "off".to_string(),
        ),
    }
}

/// The value the program's `var` gets: `settled` ([`settle`]'s), else the variable as set, else
/// `default`; a relative path pattern made absolute from the folder `run` started in, where it
/// was checked, with each `%` of that folder's name written `%%`. The library anchors a
/// relative path at the folder its own process started in, which for a program that a script
/// starts after a `cd` (`cudablame run -- sh -c 'cd sub && python train.py'`) is that other folder
/// (found by a break-it review: the report `run` had checked was lost, or the default one
/// landed in `sub/`). Left as it is (`None`: the environment unchanged) where the variable holds
/// no UTF-8, names no file (`off`, blank) or is absolute, or this folder's name is not UTF-8.
fn from_here(settled: Option<String>, var: &str, default: Option<&str>) -> Option<String> {
    let set = std::env::var_os(var);
    let value = match (&settled, &set) {
        (Some(v), _) => v.clone(),
        (None, Some(v)) => v.to_str()?.to_string(),
        (None, None) => default?.to_string(),
    };
    // As the library reads it: trimmed (a value ` /abs/r.json` became `HERE/ /abs/r.json`), and
    // one it warns about (an on/off word such as `1`, a bad escape) left as it is, for that
    // warning and its default (`HERE/1` was no on/off word: a report file named `1`, unsaid; a
    // break-it review).
    let value = value.trim();
    let warned = cudablame_report::pattern::problem(value).is_some();
    if no_path(value) || value.starts_with('/') || warned {
        return settled;
    }
    let Some(here) = std::env::current_dir()
        .ok()
        .and_then(|d| d.to_str().map(str::to_string))
    else {
        return settled;
    };
    let here = here.trim_end_matches('/').replace('%', "%%");
    Some(format!("{here}/{value}"))
}

/// Replaces this process with the program (so the exit status and signals are the program's own).
/// Exits 127 when the program (or the library) is not found, 126 when it cannot be executed.
pub fn run(args: RunArgs) -> ExitCode {
    let lib = match crate::locate::library(args.lib.as_deref()) {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!("cudablame run: {e} (the program was not started)");
            return ExitCode::from(127);
        }
    };
    let lib = lib.canonicalize().unwrap_or(lib);
    if let (Some(r), Some(t)) = (args.report.as_deref(), args.trace.as_deref()) {
        // One file for both: the trace went to `NAME.1.json` beside the report, unsaid (a
        // fresh-user trial).
        if r == t && !no_path(r) {
            eprintln!(
                "cudablame run: --report and --trace both name {r:?}: give each its own path \
                 (the program was not started)"
            );
            return ExitCode::from(2);
        }
    }
    // The report and trace folders are made now: at fault time a missing folder loses the report.
    let report = match settle(
        "--report",
        args.report.as_deref(),
        "CUDABLAME_REPORT",
        Some(DEFAULT_REPORT),
    ) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let trace = match settle("--trace", args.trace.as_deref(), "CUDABLAME_TRACE", None) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let report = from_here(report, "CUDABLAME_REPORT", Some(DEFAULT_REPORT));
    let trace = from_here(trace, "CUDABLAME_TRACE", None);
    let program = &args.command[0];
    let program_path = std::path::Path::new(program);
    if program.to_string_lossy().contains('/') && program_path.is_dir() {
        eprintln!(
            "cudablame run: {}: is a folder, not a program",
            program.to_string_lossy()
        );
        return ExitCode::from(126);
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(&args.command[1..]);
    let existing = std::env::var("LD_PRELOAD").ok();
    cmd.env(
        "LD_PRELOAD",
        crate::common::preload_value(&lib, existing.as_deref()),
    );
    let settings = [
        ("CUDABLAME_REPORT", report),
        ("CUDABLAME_TRACE", trace),
        ("CUDABLAME_TEXT", args.text),
        ("CUDABLAME_MARKERS", args.markers),
        ("CUDABLAME_STACK", args.stack),
    ];
    for (var, value) in settings {
        if let Some(v) = value {
            cmd.env(var, v);
        }
    }
    let err = cmd.exec();
    let name = program.to_string_lossy();
    match err.kind() {
        std::io::ErrorKind::NotFound => {
            let where_ = if name.contains('/') {
                "no such file"
            } else {
                "not found in PATH"
            };
            eprintln!("cudablame run: {name}: command not found ({where_})");
            ExitCode::from(127)
        }
        std::io::ErrorKind::PermissionDenied => {
            eprintln!("cudablame run: {name}: permission denied (not executable?)");
            ExitCode::from(126)
        }
        _ => {
            eprintln!("cudablame run: cannot run {name}: {err}");
            ExitCode::from(126)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::from_here;

    /// A value the library trims or warns about is not prefixed with this folder: ` /abs`
    /// became `HERE/ /abs` (the report lost to the fallback), `1` became `HERE/1` (a report
    /// file named `1`, where the library would have said "is not a path"; a break-it review).
    #[test]
    fn from_here_reads_the_value_as_the_library_does() {
        let var = "CUDABLAME_REVIEW_UNSET_VAR";
        for v in [" /abs/r.json", "1", "on", " yes ", "r-%q.json"] {
            assert_eq!(
                from_here(Some(v.into()), var, None),
                Some(v.to_string()),
                "{v:?}"
            );
        }
        let here = std::env::current_dir().unwrap();
        let here = here.to_str().unwrap().replace('%', "%%");
        assert_eq!(
            from_here(Some(" r.json ".into()), var, None),
            Some(format!("{here}/r.json"))
        );
    }
}
