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
    /// Progress markers: budget (default: sparse, about 1% of host and 2% of GPU time), every
    /// (after each op: exact illegal-address verdicts, +2.1 us GPU per op), off (culprits are
    /// named as suspects only) [CUDABLAME_MARKERS]
    #[arg(long, value_name = "budget|every|off", value_parser = ["budget", "every", "on", "off"])]
    markers: Option<String>,
    /// Launch stacks [CUDABLAME_STACK]
    #[arg(long, value_name = "native|off", value_parser = ["native", "off"])]
    stack: Option<String>,
    /// Path of libcudablame.so (default: $CUDABLAME_LIB, beside this executable, ../lib/cudablame/,
    /// the Python package, else the copy embedded in this command)
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
    /// The program and its arguments (after `--`)
    #[arg(required = true, value_name = "CMD", trailing_var_arg = true)]
    command: Vec<OsString>,
}

/// Replaces this process with the program (so the exit status and signals are the program's own).
/// Exits 127 when the program (or the library) is not found, 126 when it cannot be executed.
pub fn run(args: RunArgs) -> ExitCode {
    let lib = match crate::locate::library(args.lib.as_deref()) {
        Ok(lib) => lib,
        Err(e) => {
            eprintln!("cudablame run: {e}");
            return ExitCode::from(127);
        }
    };
    let lib = lib.canonicalize().unwrap_or(lib);
    // The report and trace folders are made now: at fault time a missing folder loses the report.
    let patterns = [
        (
            "--report",
            args.report
                .clone()
                .or_else(|| std::env::var("CUDABLAME_REPORT").ok()),
        ),
        (
            "--trace",
            args.trace
                .clone()
                .or_else(|| std::env::var("CUDABLAME_TRACE").ok()),
        ),
    ];
    for (option, pattern) in patterns {
        let Some(pattern) = pattern.filter(|p| !p.trim().eq_ignore_ascii_case("off")) else {
            continue;
        };
        if let Some(dir) = crate::common::pattern_dir(&pattern) {
            if let Err(e) = std::fs::create_dir_all(&dir) {
                eprintln!(
                    "cudablame run: cannot make the folder {} of {option} {pattern}: {e}",
                    dir.display()
                );
                return ExitCode::from(2);
            }
            let probe = tempfile::Builder::new()
                .prefix(".cudablame-probe-")
                .tempfile_in(&dir);
            if let Err(e) = probe {
                eprintln!(
                    "cudablame run: cannot write in {} (the folder of {option} {pattern}): {e}",
                    dir.display()
                );
                return ExitCode::from(2);
            }
        }
    }
    let program = &args.command[0];
    let mut cmd = std::process::Command::new(program);
    cmd.args(&args.command[1..]);
    let existing = std::env::var("LD_PRELOAD").ok();
    cmd.env(
        "LD_PRELOAD",
        crate::common::preload_value(&lib, existing.as_deref()),
    );
    let settings = [
        ("CUDABLAME_REPORT", args.report),
        ("CUDABLAME_TRACE", args.trace),
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
