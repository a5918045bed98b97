//! `cudablame run -- CMD ARGS...`

use std::os::unix::process::CommandExt;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct RunArgs {
    /// JSON report path pattern (%p pid, %h host, %r rank), or `off` [CUDABLAME_REPORT]
    #[arg(long)]
    report: Option<String>,
    /// Progress markers after each op: on or off [CUDABLAME_MARKERS]
    #[arg(long)]
    markers: Option<String>,
    /// Launch stacks: native or off [CUDABLAME_STACK]
    #[arg(long)]
    stack: Option<String>,
    /// Path of libcudablame.so (default: beside this executable)
    #[arg(long)]
    lib: Option<std::path::PathBuf>,
    /// The program and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<std::ffi::OsString>,
}

/// Replaces this process with the program (so the exit status and signals are the program's own).
pub fn run(args: RunArgs) -> ExitCode {
    let Some(lib) = args.lib.or_else(|| super::beside_exe("libcudablame.so")) else {
        eprintln!("cudablame: libcudablame.so not found beside this executable; build it with `cargo build --release` or pass --lib");
        return ExitCode::from(127);
    };
    let lib = lib.canonicalize().unwrap_or(lib);
    let mut cmd = std::process::Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    let existing = std::env::var("LD_PRELOAD").ok();
    cmd.env("LD_PRELOAD", super::preload_value(&lib, existing.as_deref()));
    for (var, value) in [("CUDABLAME_REPORT", args.report), ("CUDABLAME_MARKERS", args.markers), ("CUDABLAME_STACK", args.stack)] {
        if let Some(v) = value {
            cmd.env(var, v);
        }
    }
    let err = cmd.exec();
    eprintln!("cudablame: cannot run {}: {err}", args.command[0].to_string_lossy());
    ExitCode::from(127)
}
