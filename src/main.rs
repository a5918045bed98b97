//! The `cudablame` command: runs a program under `libcudablame.so`, or a built-in demo.
//!
//! This binary does not link the library (it would export `dlsym` into itself); it finds
//! `libcudablame.so` beside its own executable.

mod cli;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "cudablame",
    version,
    about = "Names the kernel launch that caused an asynchronous CUDA error",
    after_help = "Examples:\n  cudablame                        run the built-in demo (GPU if present, else the simulated driver)\n  cudablame run -- ./app --flag    run ./app with cudablame\n  cudablame run --report 'out/cb-%r.json' -- python train.py"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program with libcudablame.so preloaded; exits with the program's own status.
    Run(cli::run::RunArgs),
    /// Run a built-in faulty program and show cudablame's report (GPU if present, else simulated).
    Demo(cli::demo::DemoArgs),
    /// (internal) the demo's faulty program, run under the shim by `demo`.
    #[command(hide = true)]
    DemoChild,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Run(args)) => cli::run::run(args),
        Some(Command::Demo(args)) => cli::demo::demo(args),
        Some(Command::DemoChild) => cli::demo::child(),
        None => cli::demo::demo(cli::demo::DemoArgs::default()),
    }
}
