//! `cudablame summary DIR_OR_FILES...`: one line per rank of a multi-process job and which rank
//! failed first. In a collective job one rank's fault brings the others down with it (their own
//! sticky errors, NCCL timeouts, watchdogs): the first error in wall-clock time is the one to read.

use crate::show;
use cudablame_report::model::{Confidence, Report, SCHEMA};
use cudablame_report::text::{brief, op_brief};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const ABOUT: &str = "Summarize the reports of a multi-process job: which rank failed first";

pub const LONG_ABOUT: &str = "\
Summarize the reports of a multi-process job: which rank failed first.

Reads every cudablame JSON report given (a directory is scanned for *.json files whose schema is
cudablame.report/1; other JSON files, such as traces, are skipped) and prints one line per rank:
host, pid, error, the call that reported it, the culprit kernel and its confidence, and when the
error surfaced relative to the first failure. Then a verdict: the rank whose error came first is
the first failure; ranks whose errors came later are secondary (probably caused by the first
rank's fault); ranks of the job (world size) with no report are listed too. Several runs in one
folder (a job re-run with the same report pattern) are told apart by job id and process start
time, each with its own table and verdict. Reports of a newer schema, truncated reports and
empty files are named on stderr. Exits 0 when at least one report was read, 1 when none was found
(\"no reports found in DIR\").";

pub const EXAMPLES: &str = "\
Examples:
  cudablame summary .                          # every report in the working directory
  cudablame summary reports/                   # a directory of reports of one job
  cudablame summary cudablame-node1-r*.json    # some files";

/// What a rank with no report probably did.
pub const NO_REPORT: &str = "no CUDA error reported (check its log: NCCL watchdog / peer failure)";

#[derive(clap::Args)]
pub struct SummaryArgs {
    /// Report files, or directories holding them; `-` reads one report from standard input
    #[arg(required = true, value_name = "DIR_OR_FILE")]
    paths: Vec<PathBuf>,
}

/// A report and where it was read from.
struct Found {
    path: PathBuf,
    report: Report,
}

pub fn summary(args: SummaryArgs) -> ExitCode {
    let mut found = Vec::new();
    let mut skipped = Skipped::default();
    // The folders scanned, named when none held a report (a missing or unreadable file has
    // said so already: one line, found by a break-it helper).
    let mut scanned = Vec::new();
    for p in &args.paths {
        if p.is_dir() {
            scan(p, &mut found, &mut skipped);
            scanned.push(p.display().to_string());
        } else if !p.exists() && p.as_os_str() != "-" {
            eprintln!("cudablame summary: {} does not exist", p.display());
        } else {
            match show::load_report(p) {
                Ok(report) => found.push(Found {
                    path: p.clone(),
                    report,
                }),
                Err(e) => eprintln!("cudablame summary: {e}"),
            }
        }
    }
    for (path, why) in &skipped.named {
        eprintln!("cudablame summary: skipped {}: {why}", path.display());
    }
    // One report however often it is named (a file and its folder, or a file twice): counted
    // twice, a rank was both its own first failure and its own secondary (found by a break-it
    // helper).
    let mut seen = std::collections::HashSet::new();
    found
        .retain(|f| seen.insert(std::fs::canonicalize(&f.path).unwrap_or_else(|_| f.path.clone())));
    if found.is_empty() {
        if scanned.is_empty() {
            return ExitCode::from(1);
        }
        let places = scanned.join(", ");
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let mut others = Vec::new();
        if skipped.other > 0 {
            others.push(format!(
                "{} other JSON file{} skipped: traces or not cudablame's",
                skipped.other,
                plural(skipped.other)
            ));
        }
        if skipped.not_json > 0 {
            // A report named otherwise (`--report r.txt`) is read when named itself (a
            // fresh-user trial: "no reports found" alone).
            others.push(format!(
                "{} file{} not named *.json, which a folder's scan leaves out: name a report \
                 file itself to read it",
                skipped.not_json,
                plural(skipped.not_json)
            ));
        }
        let others = if others.is_empty() {
            String::new()
        } else {
            format!(" ({})", others.join("; "))
        };
        eprintln!("cudablame summary: no reports found in {places}{others}");
        return ExitCode::from(1);
    }
    let runs = runs(found);
    let text = if runs.len() == 1 {
        render(&runs[0])
    } else {
        let mut text = format!(
            "cudablame summary: {} runs (told apart by job id and process start time), oldest first\n",
            runs.len()
        );
        for (i, run) in runs.iter().enumerate() {
            text += &format!(
                "\n==== run {} of {}: {} ====\n{}",
                i + 1,
                runs.len(),
                run_label(run),
                render(run)
            );
        }
        text
    };
    match crate::common::print_out("summary", &text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

/// Files of a directory that were not read as reports.
#[derive(Default)]
struct Skipped {
    /// Traces and other JSON files: counted.
    other: usize,
    /// Reports that could not be used (a newer schema, truncated, unreadable): named, with why.
    named: Vec<(PathBuf, String)>,
    /// Files not named `*.json` (not read).
    not_json: usize,
}

/// Reads the reports of a directory into `found`.
fn scan(dir: &Path, found: &mut Vec<Found>, skipped: &mut Skipped) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cudablame summary: cannot read {}: {e}", dir.display());
            return;
        }
    };
    let (mut files, others): (Vec<PathBuf>, Vec<PathBuf>) = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .partition(|p| p.extension().is_some_and(|x| x == "json"));
    skipped.not_json += others.len();
    files.sort();
    for path in files {
        let bytes = match show::read_limited(&path) {
            Ok(b) => b,
            Err(e) => {
                skipped.named.push((path, e));
                continue;
            }
        };
        match classify(&bytes) {
            Kind::Ours => match show::parse(&bytes) {
                Ok(report) => found.push(Found { path, report }),
                Err(e) => skipped
                    .named
                    .push((path, format!("not a readable report: {e}"))),
            },
            Kind::Other => skipped.other += 1,
            Kind::Unusable(why) => skipped.named.push((path, why)),
        }
    }
}

enum Kind {
    Ours,
    Other,
    Unusable(String),
}

/// What a JSON file of a report directory is.
fn classify(bytes: &[u8]) -> Kind {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Kind::Unusable("empty file".into());
    }
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v) => match v.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => Kind::Ours,
            Some(s) if crate::common::newer_schema(s).is_some() => {
                Kind::Unusable(crate::common::newer_schema(s).unwrap_or_default())
            }
            _ => Kind::Other,
        },
        Err(e) => {
            if crate::common::cut_short_report(bytes) {
                Kind::Unusable(format!("a truncated or damaged report ({e})"))
            } else {
                Kind::Other
            }
        }
    }
}

/// The reports grouped into runs, oldest first. Reports of different job ids are different
/// runs; within one job id, a process of a rank that the run already has, started after the
/// run's first error, begins a new run (the processes of one run start before it fails; a rank
/// seen twice before that is a forked child). Reports without a start time (older ones) stay in
/// one run.
fn runs(found: Vec<Found>) -> Vec<Vec<Found>> {
    let mut by_job: std::collections::BTreeMap<Option<String>, Vec<Found>> = Default::default();
    for f in found {
        by_job
            .entry(f.report.process.job_id.clone())
            .or_default()
            .push(f);
    }
    let mut runs: Vec<Vec<Found>> = Vec::new();
    for (_, mut fs) in by_job {
        fs.sort_by_key(|f| {
            (
                f.report.process.start_time_ns.unwrap_or(0),
                f.report.reporting_call.time_ns,
            )
        });
        let mut run: Vec<Found> = Vec::new();
        let mut first_error = u64::MAX;
        for f in fs {
            let starts_later = f
                .report
                .process
                .start_time_ns
                .is_some_and(|s| s > first_error);
            let rank_seen = run
                .iter()
                .any(|g| g.report.process.rank == f.report.process.rank);
            if starts_later && rank_seen {
                runs.push(std::mem::take(&mut run));
                first_error = u64::MAX;
            }
            first_error = first_error.min(f.report.reporting_call.time_ns);
            run.push(f);
        }
        if !run.is_empty() {
            runs.push(run);
        }
    }
    runs.sort_by_key(|r| r.iter().map(|f| f.report.reporting_call.time_ns).min());
    runs
}

/// `job 555, started 2026-11-29 10:04:05 UTC, pids 22144 22145`.
fn run_label(run: &[Found]) -> String {
    let job = run
        .iter()
        .find_map(|f| f.report.process.job_id.as_deref())
        .map_or("no job id".to_string(), |j| format!("job {j}"));
    let started = run
        .iter()
        .filter_map(|f| f.report.process.start_time_ns)
        .min()
        .map(|t| format!(", started {}", utc(t)))
        .unwrap_or_default();
    let mut pids: Vec<String> = run
        .iter()
        .map(|f| format!("r{}:{}", f.report.process.rank, f.report.process.pid))
        .collect();
    pids.sort();
    format!("{job}{started}, rank:pid {}", pids.join(" "))
}

/// Wall-clock ns since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A duration after the first failure: `+0.000 ms`, `+201.345 ms`, `+3.200 s`.
fn after(ns: u64) -> String {
    if ns < 1_000_000_000 {
        format!("+{:.3} ms", ns as f64 / 1e6)
    } else {
        format!("+{:.3} s", ns as f64 / 1e9)
    }
}

/// Whether the report names a kernel of its own with some certainty.
fn own_kernel(r: &Report) -> bool {
    r.culprit.confidence != Confidence::Suspect
        && r.culprit.op.as_ref().is_some_and(|o| o.kernel.is_some())
}

fn culprit(r: &Report) -> String {
    let what = match &r.culprit.op {
        Some(o) => match &o.kernel {
            Some(k) => brief(k),
            None => op_brief(o),
        },
        None => "not identified".into(),
    };
    format!("{what} ({})", r.culprit.verdict())
}

/// Left-aligned columns, two spaces apart.
fn table(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (cell, w) in row.iter().zip(&widths) {
            let _ = write!(line, "{cell:<w$}  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn render(found: &[Found]) -> String {
    let mut order: Vec<&Found> = found.iter().collect();
    order.sort_by_key(|f| {
        (
            f.report.reporting_call.time_ns,
            f.report.process.rank,
            f.report.process.pid,
        )
    });
    let first = order[0];
    let t0 = first.report.reporting_call.time_ns;
    let world = found
        .iter()
        .filter_map(|f| f.report.process.world_size)
        .max();
    let reported: BTreeSet<u32> = found.iter().map(|f| f.report.process.rank).collect();
    // Ranks without a report, as runs of consecutive ranks (first, last): one line each, so a
    // huge world size (a bad variable in some report) is a line, not millions.
    // Only a known world size says which ranks the job had.
    let mut missing: Vec<(u32, u32)> = Vec::new();
    let mut next = 0u32;
    let below_world = reported.iter().filter(|&&r| world.is_some_and(|w| r < w));
    for &r in below_world.chain(world.iter()) {
        if r > next {
            missing.push((next, r - 1));
        }
        next = next.max(r.saturating_add(1));
    }
    let jobs: BTreeSet<&str> = found
        .iter()
        .filter_map(|f| f.report.process.job_id.as_deref())
        .collect();
    let hosts: BTreeSet<&str> = found
        .iter()
        .map(|f| f.report.process.host.as_str())
        .collect();

    let verdict = |f: &Found| -> String {
        if std::ptr::eq(f, first) {
            return "first failure".into();
        }
        let (r, r0) = (&f.report, &first.report);
        let why = if r.process.rank == r0.process.rank {
            format!(
                "secondary: probably caused by pid {}'s fault in the same rank",
                r0.process.pid
            )
        } else {
            format!(
                "secondary: probably caused by rank {}'s fault",
                r0.process.rank
            )
        };
        let own = if own_kernel(r) {
            ""
        } else {
            "; no culprit kernel of its own"
        };
        format!(
            "{why} ({} later{own})",
            after(r.reporting_call.time_ns.saturating_sub(t0)).trim_start_matches('+')
        )
    };

    let mut out = String::new();
    let _ = writeln!(
        out,
        "cudablame summary: {} report{}{}{}{}",
        found.len(),
        if found.len() == 1 { "" } else { "s" },
        world
            .map(|w| format!(", world size {w}"))
            .unwrap_or_default(),
        match jobs.len() {
            0 => String::new(),
            1 => format!(", job {}", jobs.iter().next().unwrap_or(&"")),
            _ => format!(
                ", jobs {} (mixed!)",
                jobs.iter().copied().collect::<Vec<_>>().join(" ")
            ),
        },
        if hosts.len() > 1 {
            format!(", {} hosts (times assume synchronized clocks)", hosts.len())
        } else {
            String::new()
        }
    );

    // One line per rank, in rank order; ranks with no report among them.
    let mut by_rank: Vec<&Found> = found.iter().collect();
    by_rank.sort_by_key(|f| (f.report.process.rank, f.report.reporting_call.time_ns));
    let mut rows = vec![[
        "RANK",
        "HOST",
        "PID",
        "ERROR",
        "REPORTED BY",
        "CULPRIT",
        "TIME",
        "STATUS",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    let ranks = |&(first, last): &(u32, u32)| match first == last {
        true => first.to_string(),
        false => format!("{first}-{last}"),
    };
    let mut missing_left = missing.iter().peekable();
    let missing_row = |run: &(u32, u32)| {
        let mut row = vec![ranks(run)];
        row.extend(std::iter::repeat_n("-".to_string(), 6));
        row.push(NO_REPORT.to_string());
        row
    };
    for f in &by_rank {
        let r = &f.report;
        while let Some(&m) = missing_left.peek() {
            if m.0 > r.process.rank {
                break;
            }
            rows.push(missing_row(m));
            missing_left.next();
        }
        let status = if std::ptr::eq(*f, first) {
            "FIRST FAILURE"
        } else {
            "secondary"
        };
        rows.push(vec![
            r.process.rank.to_string(),
            r.process.host.clone(),
            r.process.pid.to_string(),
            r.error.name.clone(),
            r.reporting_call.entry_point.clone(),
            fit(&culprit(r), 40),
            after(r.reporting_call.time_ns.saturating_sub(t0)),
            status.into(),
        ]);
    }
    for m in missing_left {
        rows.push(missing_row(m));
    }
    out.push_str(&table(&rows));
    let r0 = &first.report;
    let _ = writeln!(out, "\nverdict:");
    let _ = writeln!(
        out,
        "  rank {}: first failure: {} reported by {} on {} (pid {}); culprit {}",
        r0.process.rank,
        r0.error.name,
        r0.reporting_call.entry_point,
        r0.process.host,
        r0.process.pid,
        match &r0.culprit.op {
            Some(o) => format!("{} ({})", op_brief(o), r0.culprit.verdict()),
            None => "not identified".into(),
        }
    );
    // A report read from standard input has no file to name (`show -` would read nothing).
    if first.path.as_os_str() != "-" {
        let _ = writeln!(out, "    details: cudablame show {}", first.path.display());
    }
    for f in &order[1..] {
        let _ = writeln!(out, "  rank {}: {}", f.report.process.rank, verdict(f));
    }
    for m in &missing {
        let s = if m.0 == m.1 { "" } else { "s" };
        let _ = writeln!(out, "  rank{s} {}: {NO_REPORT}", ranks(m));
    }
    out
}

/// Cuts `s` to `width` characters, ending in `...` when cut.
fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let kept: String = s.chars().take(width.saturating_sub(3)).collect();
    format!("{kept}...")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudablame_report::fixtures::sample;

    fn found(rank: u32, pid: u32, dt_ms: i64, world: Option<u32>) -> Found {
        let mut report = sample();
        report.process.rank = rank;
        report.process.pid = pid;
        report.process.world_size = world;
        report.reporting_call.time_ns =
            (report.reporting_call.time_ns as i64 + dt_ms * 1_000_000) as u64;
        Found {
            path: PathBuf::from(format!("r{rank}-{pid}.json")),
            report,
        }
    }

    #[test]
    fn earliest_error_is_the_first_failure_and_missing_ranks_are_listed() {
        let mut late = found(1, 12, 1500, None);
        late.report.culprit.confidence = Confidence::Suspect;
        let out = render(&[found(3, 10, 0, Some(5)), found(1, 11, -5, None), late]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "cudablame summary: 3 reports, world size 5");
        // Rows in rank order, ranks without a report among them.
        let ranks: Vec<&str> = lines[2..8]
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(ranks, ["0", "1", "1", "2", "3", "4"], "{out}");
        assert!(lines[2].ends_with(NO_REPORT), "{out}");
        assert!(
            lines[3].contains("+0.000 ms") && lines[3].ends_with("FIRST FAILURE"),
            "{out}"
        );
        assert!(lines[3].contains("k2 (exact)"), "{out}");
        assert!(
            lines[4].contains("+1.505 s") && lines[4].ends_with("secondary"),
            "{out}"
        );
        assert!(
            lines[6].contains("+5.000 ms") && lines[6].ends_with("secondary"),
            "{out}"
        );
        assert!(
            out.contains(
                "rank 1: first failure: CUDA_ERROR_ILLEGAL_ADDRESS reported by cuMemcpyDtoH_v2"
            ),
            "{out}"
        );
        assert!(out.contains("details: cudablame show r1-11.json"), "{out}");
        assert!(
            out.contains("rank 3: secondary: probably caused by rank 1's fault (5.000 ms later)"),
            "{out}"
        );
        assert!(
            out.contains("rank 1: secondary: probably caused by pid 11's fault in the same rank (1.505 s later; no culprit kernel of its own)"),
            "{out}"
        );
        for r in [0, 2, 4] {
            assert!(out.contains(&format!("rank {r}: {NO_REPORT}")), "{out}");
        }
    }

    #[test]
    fn ranks_without_a_report_are_runs_of_ranks() {
        // A world size of a million (a bad variable, or a real job): a line per run of missing
        // ranks, not one per rank.
        let out = render(&[found(3, 10, 0, Some(1_000_000)), found(7, 11, 5, None)]);
        let lines: Vec<&str> = out.lines().collect();
        let ranks: Vec<&str> = lines[2..7]
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(ranks, ["0-2", "3", "4-6", "7", "8-999999"], "{out}");
        assert!(out.contains("  ranks 8-999999: "), "{out}");
        assert!(out.lines().count() < 20, "{out}");
    }

    #[test]
    fn two_runs_of_one_job_are_told_apart() {
        let s = 1_000_000_000u64;
        let at = |rank, pid, start: u64, dt_ms| {
            let mut f = found(rank, pid, dt_ms, Some(2));
            f.report.process.job_id = Some("555".into());
            // Start times count from one hour before the sample's error time.
            let t = sample().reporting_call.time_ns;
            f.report.process.start_time_ns = Some(t - 3_600 * s + start);
            f
        };
        // Run 1: both ranks start at t-1h, fail at t (rank 1 first). Run 2 starts 10 s after
        // that error, rank 0 fails first. A rank new to the run that starts late (rank 2 here,
        // started after run 1's error) stays in it.
        let run1 = [
            at(0, 10, 0, 200),
            at(1, 11, 0, 0),
            at(2, 12, 3_600 * s + 1, 300),
        ];
        let run2 = [
            at(0, 20, 3_610 * s, 3_700_000),
            at(1, 21, 3_610 * s, 3_700_500),
        ];
        let all: Vec<Found> = run2.into_iter().chain(run1).collect();
        let runs = runs(all);
        assert_eq!(runs.len(), 2);
        let mut first: Vec<u32> = runs[0].iter().map(|f| f.report.process.pid).collect();
        first.sort();
        assert_eq!(first, [10, 11, 12]);
        let out = render(&runs[1]);
        assert!(out.contains("rank 0: first failure"), "{out}");
        assert!(
            run_label(&runs[1]).contains("job 555") && run_label(&runs[1]).contains("r0:20 r1:21")
        );
        // Without start times (older reports) they stay one run.
        let mut old: Vec<Found> = vec![found(0, 1, 0, None), found(1, 2, 5, None)];
        old.iter_mut()
            .for_each(|f| f.report.process.start_time_ns = None);
        assert_eq!(super::runs(old).len(), 1);
    }

    #[test]
    fn utc_formats_wall_clock_time() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            utc(1_764_590_645 * 1_000_000_000),
            "2025-12-01 12:04:05 UTC"
        );
    }

    #[test]
    fn future_schema_and_truncated_reports_are_named() {
        assert!(matches!(
            classify(br#"{"schema":"cudablame.report/1","x":1}"#),
            Kind::Ours
        ));
        assert!(matches!(classify(br#"{"traceEvents":[]}"#), Kind::Other));
        match classify(br#"{"schema":"cudablame.report/2"}"#) {
            Kind::Unusable(w) => assert!(
                w.contains("cudablame.report/2") && w.contains("newer"),
                "{w}"
            ),
            _ => panic!("future schema not named"),
        }
        match classify(b"{\n  \"schema\": \"cudablame.report/1\",\n  \"process\": {") {
            Kind::Unusable(w) => assert!(w.contains("truncated"), "{w}"),
            _ => panic!("truncated report not named"),
        }
        assert!(matches!(classify(b"  \n"), Kind::Unusable(_)));
    }
}
