//! The `cudablame` command: runs a program under `libcudablame.so`, reads its reports (`show`,
//! `summary` across the ranks of a job), or runs a built-in demo.
//!
//! This binary does not link the library (it would export `dlsym` into itself); it finds
//! `libcudablame.so` by the lookup order of `locate` (beside its own executable, ..., else
//! the copy embedded by `build.rs`).

mod common;
mod demo;
mod jupyter;
mod locate;
mod run;
mod show;
mod summary;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

const EXAMPLES: &str = "\
Examples:
  cudablame                                   run the built-in demo (GPU if present, else simulated)
  cudablame run -- ./app --flag               run ./app under cudablame
  cudablame run --report 'cb-%h-r%r.json' -- python train.py
  srun cudablame run --report 'cb-%h-r%r.json' -- python train.py     (each rank reports)
  cudablame summary .                         which rank failed first, from all reports here
  cudablame show cb-node1-r3.json             a JSON report as text
  cudablame jupyter install                   a notebook kernel running under cudablame

Variables (set by `run` options, or directly): CUDABLAME_REPORT, CUDABLAME_TRACE, CUDABLAME_TEXT,
CUDABLAME_MARKERS, CUDABLAME_MARKER_GAP_US, CUDABLAME_MARKER_WINDOW, CUDABLAME_STACK, CUDABLAME_STACK_DEPTH, CUDABLAME_STACK_BYTES, CUDABLAME_PYTHON,
CUDABLAME_PYTHON_DEPTH, CUDABLAME_RING, CUDABLAME_DEBUG, CUDABLAME_STATS, CUDABLAME_REPORT_NONSTICKY,
CUDABLAME_ERROR_STRING (README, docs/cli.md).
CUDABLAME_LIB: the libcudablame.so that `run` and `demo` preload (default: beside this command,
../lib/cudablame/, the Python package, else the copy this command carries, written once to
~/.cache/cudablame/). Use `cudablame help <command>` for a command's options and examples.";

#[derive(Parser)]
#[command(
    name = "cudablame",
    version,
    about = "Names the kernel launch that caused an asynchronous CUDA error",
    after_help = EXAMPLES
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    #[command(
        about = run::ABOUT,
        long_about = run::LONG_ABOUT,
        after_help = run::EXAMPLES,
        override_usage = "cudablame run [OPTIONS] -- CMD [ARGS]..."
    )]
    Run(run::RunArgs),
    #[command(about = show::ABOUT, after_help = show::EXAMPLES)]
    Show(show::ShowArgs),
    #[command(
        about = summary::ABOUT,
        long_about = summary::LONG_ABOUT,
        after_help = summary::EXAMPLES
    )]
    Summary(summary::SummaryArgs),
    /// Run a built-in faulty program and show cudablame's report (GPU if present, else simulated).
    #[command(
        after_help = "Examples:\n  cudablame demo\n  cudablame demo --simulated --report /tmp/demo-%p.json"
    )]
    Demo(demo::DemoArgs),
    #[command(about = jupyter::ABOUT, after_help = jupyter::EXAMPLES)]
    Jupyter(jupyter::JupyterArgs),
    /// (internal) the demo's faulty program, run under the shim by `demo`.
    #[command(hide = true)]
    DemoChild,
}

/// Lets every command but `run` (`show`, `summary`, the demo, `jupyter`) end like any Unix printer when their reader is gone
/// (`cudablame summary DIR | head -1`, `cudablame demo 2>&1 | head -1`): killed by SIGPIPE, not
/// a panic in `println!` or `eprintln!` (Rust's runtime ignores SIGPIPE, so the write fails with
/// EPIPE: exit 101, found by fresh-user trials). Not for `run`, whose own lines come after its
/// program ended and whose exit status is the program's. (A child started by `std::process`
/// gets SIGPIPE at its default whatever this process has: the demo's child is killed the same
/// way when it writes its text report into a closed pipe.)
fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to its default is async-signal-safe and affects
    // nothing else; no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Some(Command::Run(_))) {
        default_sigpipe();
    }
    match cli.command {
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Show(args)) => show::show(args),
        Some(Command::Summary(args)) => summary::summary(args),
        Some(Command::Demo(args)) => demo::demo(args),
        Some(Command::Jupyter(args)) => jupyter::jupyter(args),
        Some(Command::DemoChild) => demo::child(),
        None => demo::demo(demo::DemoArgs::default()),
    }
}
