//! What a new user hits first (issue 12, section 3): the demo's options, report folders made at
//! start, warnings for paths that are not paths, `show` on odd input, `summary` on empty or mixed
//! folders, and the command finding its library and the simulated driver where it is installed.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

fn cudablame() -> PathBuf {
    target_dir().join("cudablame")
}

fn cli_in(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = command(exe, args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    output_within(&mut cmd, Duration::from_secs(60)).0
}

fn cli(args: &[&str]) -> Output {
    cli_in(&cudablame(), args, &[])
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fresh(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A real report of the `oob` scenario, written with the text report off.
fn report() -> PathBuf {
    let r = run(
        &compile("scenarios", false),
        &["oob"],
        true,
        &[("CUDABLAME_TEXT", "off")],
    );
    assert!(r.report.is_some(), "{}", r.stderr);
    r.report_path
}

#[test]
fn demo_accepts_the_report_pattern_of_its_help() {
    let dir = fresh("demo-report");
    let pattern = dir.join("sub/demo-%p.json");
    let o = cli(&["demo", "--simulated", "--report", s(&pattern)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let files: Vec<_> = std::fs::read_dir(dir.join("sub"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().to_string_lossy().into_owned();
    assert!(
        name.starts_with("demo-") && name.ends_with(".json"),
        "{name}"
    );
    assert!(err(&o).contains(&name), "{}", err(&o));
}

#[test]
fn run_makes_the_report_and_trace_folders_at_start() {
    let dir = fresh("run-folders");
    let report = dir.join("reports/cb-%h-r%r.json");
    let trace = dir.join("traces/");
    let o = cli(&[
        "run",
        "--report",
        s(&report),
        "--trace",
        s(&trace),
        "--",
        "/bin/true",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(dir.join("reports").is_dir() && dir.join("traces").is_dir());
    // A folder that cannot be made: one line, exit 2, the program is not run.
    let file = dir.join("a-file");
    std::fs::write(&file, "").unwrap();
    let o = cli(&[
        "run",
        "--report",
        &format!("{}/sub/r.json", s(&file)),
        "--",
        "/bin/true",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
    assert!(err(&o).contains("--report"), "{}", err(&o));
}

#[test]
fn trace_on_and_unknown_escapes_warn_once_and_keep_the_default() {
    let dir = fresh("trace-on");
    let program = compile("scenarios", false);
    for (var, value) in [
        ("CUDABLAME_TRACE", "on"),
        ("CUDABLAME_TRACE", "true"),
        ("CUDABLAME_REPORT", "%q%"),
    ] {
        let mut cmd = command(&program, &["oob"]);
        cmd.current_dir(&dir)
            .env("LD_PRELOAD", shim())
            .env("CUDABLAME_TEXT", "off")
            .env(var, value);
        let (o, _) = output_within(&mut cmd, Duration::from_secs(60));
        let warnings: Vec<String> = err(&o)
            .lines()
            .filter(|l| l.contains(var))
            .map(String::from)
            .collect();
        assert_eq!(warnings.len(), 1, "{var}={value}: {}", err(&o));
        assert!(
            !dir.join(value).exists(),
            "{var}={value} wrote a file named {value}"
        );
    }
    // The report of the `%q%` run went to the default name.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("cudablame-")),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains('%')), "{names:?}");
}

#[test]
fn show_refuses_huge_and_empty_files_and_reads_several_and_stdin() {
    let dir = fresh("show-input");
    let huge = dir.join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(4 << 30)
        .unwrap(); // sparse
    let started = Instant::now();
    let o = cli(&["show", s(&huge)]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("larger than any cudablame report"),
        "{}",
        err(&o)
    );
    let empty = dir.join("empty.json");
    std::fs::write(&empty, "").unwrap();
    let o = cli(&["show", s(&empty)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("empty file"), "{}", err(&o));

    let a = report();
    let b = report();
    let o = cli(&["show", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(
        out(&o)
            .matches("==== cudablame: CUDA_ERROR_ILLEGAL_ADDRESS")
            .count(),
        2
    );
    // One bad file among good ones: the good ones are shown, exit 2.
    let o = cli(&["show", s(&a), s(&empty)]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(out(&o).matches("==== cudablame:").count(), 1);

    let mut cmd = command(&cudablame(), &["show", "-"]);
    cmd.stdin(std::fs::File::open(&a).unwrap());
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        out(&o).contains("culprit:  oob_write  (op #4, exact)"),
        "{}",
        out(&o)
    );

    // --verbose: every detail (thread ids, shared memory, the whole reasoning).
    let o = cli(&["show", "--verbose", s(&a)]);
    let v = out(&o);
    assert!(v.contains("shared 0 B") && v.contains(", thread "), "{v}");
    assert!(!v.contains("show --verbose"), "{v}");
}

#[test]
fn summary_says_where_it_found_nothing_and_names_unusable_reports() {
    let missing = scratch().join("no-such-dir");
    let o = cli(&["summary", s(&missing)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!("no reports found in {}", missing.display())),
        "{}",
        err(&o)
    );
    let empty = fresh("summary-empty");
    let o = cli(&["summary", s(&empty)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!("no reports found in {}", empty.display())),
        "{}",
        err(&o)
    );

    let dir = fresh("summary-mixed");
    let good = std::fs::read(report()).unwrap();
    std::fs::write(dir.join("good.json"), &good).unwrap();
    std::fs::write(dir.join("cut.json"), &good[..good.len() / 2]).unwrap();
    let future = String::from_utf8(good.clone())
        .unwrap()
        .replace("cudablame.report/1", "cudablame.report/2");
    std::fs::write(dir.join("future.json"), future).unwrap();
    std::fs::write(dir.join("trace.json"), "{\"traceEvents\": []}").unwrap();
    let o = cli(&["summary", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        out(&o).starts_with("cudablame summary: 1 report"),
        "{}",
        out(&o)
    );
    let e = err(&o);
    assert!(e.contains("cut.json: a truncated or damaged report"), "{e}");
    assert!(
        e.contains("future.json: a report of schema \"cudablame.report/2\""),
        "{e}"
    );
    assert!(!e.contains("trace.json"), "{e}");
}

/// Copies the command alone to `dir/bin/` (a copy of the workspace build has no embedded library).
fn copy_command(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("cudablame");
    std::fs::copy(cudablame(), &exe).unwrap();
    exe
}

fn copy_libraries(to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for name in ["libcudablame.so", "libfakecuda.so"] {
        std::fs::copy(target_dir().join(name), to.join(name)).unwrap();
    }
}

#[test]
fn demo_finds_the_library_and_simulated_driver_where_they_are_installed() {
    // <prefix>/bin/cudablame with <prefix>/lib/cudablame/
    let prefix = fresh("install-prefix");
    let exe = copy_command(&prefix);
    copy_libraries(&prefix.join("lib/cudablame"));
    let o = cli_in(
        &exe,
        &["demo", "--simulated", "--report-dir", s(&prefix)],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(err(&o).contains("names histogram_oob"), "{}", err(&o));

    // CUDABLAME_LIB elsewhere: the simulated driver is found beside it.
    let apart = fresh("install-apart");
    let exe = copy_command(&apart);
    copy_libraries(&apart.join("libs"));
    let lib = apart.join("libs/libcudablame.so");
    let o = cli_in(
        &exe,
        &["demo", "--simulated", "--report-dir", s(&apart)],
        &[("CUDABLAME_LIB", s(&lib))],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        err(&o).contains(s(&apart.join("libs/libfakecuda.so"))),
        "{}",
        err(&o)
    );

    // Nothing anywhere: one line naming the places looked in, and how to get the library.
    let bare = fresh("install-bare");
    let exe = copy_command(&bare);
    let o = cli_in(&exe, &["run", "--", "/bin/true"], &[]);
    assert_eq!(o.status.code(), Some(127), "{}", err(&o));
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
    assert!(err(&o).contains(s(&bare.join("bin"))), "{}", err(&o));
}

#[test]
fn summary_tells_two_runs_of_one_job_apart() {
    let dir = fresh("summary-two-runs");
    let pattern = dir.join("cb-%h-r%r.json");
    let program = compile("scenarios", false);
    let mut pids = Vec::new();
    for _run in 0..2 {
        for rank in ["1", "0"] {
            let r = run(
                &program,
                &["oob"],
                true,
                &[
                    ("RANK", rank),
                    ("WORLD_SIZE", "2"),
                    ("SLURM_JOB_ID", "4242"),
                    ("CUDABLAME_REPORT", s(&pattern)),
                    ("CUDABLAME_TEXT", "off"),
                ],
            );
            pids.push(r.printed("pid"));
        }
    }
    let o = cli(&["summary", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = out(&o);
    assert!(text.starts_with("cudablame summary: 2 runs"), "{text}");
    // Each run: its own header (job, start time, rank:pid) and its own first failure, rank 1.
    let run2 = text
        .find("==== run 2 of 2: job 4242, started ")
        .expect("run 2 header");
    let (first, second) = text.split_at(run2);
    assert!(
        first.contains(&format!("r0:{} r1:{}", pids[1], pids[0])),
        "{text}"
    );
    assert!(
        second.contains(&format!("r0:{} r1:{}", pids[3], pids[2])),
        "{text}"
    );
    for part in [first, second] {
        assert_eq!(part.matches("FIRST FAILURE").count(), 1, "{text}");
        assert!(part.contains("rank 1: first failure"), "{text}");
    }
}
