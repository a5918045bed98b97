//! `cudablame show REPORT.json...`: JSON reports rendered as the text cudablame prints on stderr.

use cudablame_report::{model::Report, text};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const ABOUT: &str = "Print JSON reports as the human-readable text report";

pub const EXAMPLES: &str = "\
Examples:
  cudablame show cudablame-node7-r3.json
  cudablame show --verbose reports/cudablame-node7-r3.json | less   # every frame and detail
  cudablame show reports/*.json
  ssh node7 cat /tmp/cudablame-node7-4242.json | cudablame show -";

/// Reports are a few MB at most (rings of 256 ops per stream, 32 frames each); a file larger
/// than this is refused before it is read.
pub const MAX_REPORT_BYTES: u64 = 256 << 20;

#[derive(clap::Args)]
pub struct ShowArgs {
    /// Every frame of every stack, the whole confidence reasoning and every other unfinished op
    #[arg(long, short)]
    verbose: bool,
    /// JSON reports written by cudablame; `-` (or none, with standard input not a terminal:
    /// `cudablame show < r.json`) reads one from standard input
    #[arg(value_name = "REPORT.json")]
    reports: Vec<PathBuf>,
}

pub fn show(args: ShowArgs) -> ExitCode {
    let mut status = ExitCode::SUCCESS;
    let mut reports = args.reports;
    if reports.is_empty() {
        // `cudablame show < r.json` (a fresh-user trial: clap's "required arguments" error).
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() {
            eprintln!(
                "cudablame show: give a report (cudablame show REPORT.json), or - to read one \
                 from standard input"
            );
            return ExitCode::from(2);
        }
        reports.push(PathBuf::from("-"));
    }
    for path in &reports {
        match load(path) {
            Ok(Loaded::Trace) => {
                eprintln!(
                    "cudablame show: {} is a trace (open it in https://ui.perfetto.dev), not a report: skipped",
                    path.display()
                );
            }
            Ok(Loaded::Report(mut r)) => {
                if path.as_os_str() != "-" {
                    r.path = Some(path.display().to_string());
                }
                if let Err(code) =
                    crate::common::print_out("show", &text::render_read(&r, args.verbose))
                {
                    return code;
                }
            }
            Err(e) => {
                eprintln!("cudablame show: {e}");
                status = ExitCode::from(2);
            }
        }
    }
    status
}

/// What a file given to `show` holds.
enum Loaded {
    Report(Box<Report>),
    /// A Chrome trace / Perfetto JSON (`--trace`, often beside the reports): skipped.
    Trace,
}

/// Reads one report (`-`: from standard input); the error is one line naming the file. Empty
/// and oversized files are told apart before parsing (an oversized one is not read at all).
fn load(path: &Path) -> Result<Loaded, String> {
    if path.as_os_str() == "-" {
        return load_stdin();
    }
    let bytes = read_limited(path)?;
    parse_named(&bytes, &path.display().to_string())
}

/// One report file for `summary` (`-`: standard input, as for `show`): a trace is an error
/// there (named, not shown).
pub fn load_report(path: &Path) -> Result<Report, String> {
    match load(path)? {
        Loaded::Report(r) => Ok(*r),
        Loaded::Trace => Err(format!("{} is a trace, not a report", path.display())),
    }
}

/// A report from JSON text (the schema must be `cudablame.report/1`); the error does not name
/// the file.
pub fn parse(bytes: &[u8]) -> Result<Report, String> {
    match parse_named(bytes, "the file")? {
        Loaded::Report(r) => Ok(*r),
        Loaded::Trace => Err("a trace, not a report".into()),
    }
}

fn load_stdin() -> Result<Loaded, String> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_REPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read standard input: {e}"))?;
    if bytes.len() as u64 > MAX_REPORT_BYTES {
        return Err(format!(
            "standard input is larger than {} MiB: not a cudablame report",
            MAX_REPORT_BYTES >> 20
        ));
    }
    parse_named(&bytes, "standard input")
}

/// The file's bytes, refusing directories, empty files and files over [`MAX_REPORT_BYTES`]
/// (checked by size first).
pub fn read_limited(path: &Path) -> Result<Vec<u8>, String> {
    let name = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {name}: {e}"))?;
    if meta.is_dir() {
        return Err(format!(
            "{name} is a directory (give the report files, or use `cudablame summary {name}`)"
        ));
    }
    if meta.len() > MAX_REPORT_BYTES {
        return Err(format!(
            "{name} is {} MiB, larger than any cudablame report ({} MiB at most): not read",
            meta.len() >> 20,
            MAX_REPORT_BYTES >> 20
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_REPORT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read {name}: {e}"))?;
    Ok(bytes)
}

fn parse_named(bytes: &[u8], name: &str) -> Result<Loaded, String> {
    if bytes.is_empty() {
        return Err(format!("{name} is an empty file, not a cudablame report"));
    }
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(format!(
            "{name} holds only white space ({} bytes), not a cudablame report",
            bytes.len()
        ));
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        // Worded as `summary` words it (a fresh-user trial).
        if crate::common::cut_short_report(bytes) {
            format!("{name} is a truncated or damaged report ({e})")
        } else {
            format!("{name} is not a cudablame report: invalid JSON ({e})")
        }
    })?;
    if value.get("traceEvents").is_some() && value.get("schema").is_none() {
        return Ok(Loaded::Trace);
    }
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(cudablame_report::model::SCHEMA) => {}
        Some(other) => {
            return Err(match crate::common::newer_schema(other) {
                Some(why) => format!("{name}: {why}"),
                None => format!(
                    "{name} is not a cudablame report: its schema is {other:?}, not {:?}",
                    cudablame_report::model::SCHEMA
                ),
            })
        }
        None => {
            return Err(format!(
                "{name} is not a cudablame report: no \"schema\": {:?}",
                cudablame_report::model::SCHEMA
            ))
        }
    }
    let mut value = value;
    escape_control_characters(&mut value);
    serde_json::from_value(value)
        .map(|r| Loaded::Report(Box::new(r)))
        .map_err(|e| format!("{name} is not a cudablame report: {e}"))
}

/// Replaces every control character (newlines and escape sequences included) in the report's
/// strings with its Rust escape (`cudablame_report::text::printable`): a report written by
/// cudablame has none where the text puts a string, but an edited or foreign one could move the
/// cursor, clear the screen or forge lines on the terminal `show` prints to.
fn escape_control_characters(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            if let std::borrow::Cow::Owned(clean) = text::printable(s) {
                *s = clean;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(escape_control_characters),
        serde_json::Value::Object(fields) => {
            fields.values_mut().for_each(escape_control_characters)
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_of_a_report_never_reach_the_terminal() {
        let mut r = cudablame_report::fixtures::sample();
        if let Some(op) = r.culprit.op.as_mut() {
            op.kernel = Some("evil\u{1b}[2J\nculprit: forged (exact)".to_string());
        }
        let json = serde_json::to_vec(&r).unwrap();
        let Ok(Loaded::Report(read)) = parse_named(&json, "r.json") else {
            panic!("not read back");
        };
        for verbose in [false, true] {
            let text = cudablame_report::text::render_read(&read, verbose);
            assert!(!text.contains('\u{1b}'), "{text}");
            assert!(
                !text.lines().any(|l| l.starts_with("culprit: forged")),
                "{text}"
            );
            assert!(text.contains("evil\\u{1b}[2J\\nculprit: forged"), "{text}");
        }
    }
}
