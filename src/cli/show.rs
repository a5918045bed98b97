//! `cudablame show REPORT.json`: a JSON report rendered as the text cudablame prints on stderr.

use crate::report::{model::Report, text};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const ABOUT: &str = "Print a JSON report as the human-readable text report";

pub const EXAMPLES: &str = "\
Examples:
  cudablame show cudablame-node7-r3.json
  cudablame show reports/cudablame-node7-r3.json | less";

#[derive(clap::Args)]
pub struct ShowArgs {
    /// A JSON report written by cudablame
    #[arg(value_name = "REPORT.json")]
    report: PathBuf,
}

pub fn show(args: ShowArgs) -> ExitCode {
    match load(&args.report) {
        Ok(mut r) => {
            r.path = Some(args.report.display().to_string());
            print!("{}", text::render(&r));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cudablame show: {e}");
            ExitCode::from(2)
        }
    }
}

/// Reads one report; the error is one line naming the file.
pub fn load(path: &Path) -> Result<Report, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&bytes).map_err(|e| format!("{} is not a cudablame report: {e}", path.display()))
}

/// A report from JSON text: the schema must be `cudablame.report/1`.
pub fn parse(bytes: &[u8]) -> Result<Report, String> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON ({e})"))?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(crate::report::model::SCHEMA) => {}
        Some(other) => {
            return Err(format!(
                "schema is {other:?}, expected {:?}",
                crate::report::model::SCHEMA
            ))
        }
        None => return Err(format!("no \"schema\": {:?}", crate::report::model::SCHEMA)),
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}
