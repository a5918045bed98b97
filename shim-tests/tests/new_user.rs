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

/// The name of the one file in `dir` (fails when there are none or several).
fn only_file(dir: &std::path::Path) -> String {
    let files: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].file_name().to_string_lossy().into_owned()
}

#[test]
fn demo_accepts_the_report_pattern_of_its_help() {
    let dir = fresh("demo-report");
    let pattern = dir.join("sub/demo-%p.json");
    let o = cli(&["demo", "--simulated", "--report", s(&pattern)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let name = only_file(&dir.join("sub"));
    assert!(
        name.starts_with("demo-") && name.ends_with(".json"),
        "{name}"
    );
    assert!(err(&o).contains(&name), "{}", err(&o));
}

#[test]
fn demo_reads_an_exported_report_variable_and_report_off_succeeds() {
    // Found by a new-user trial: `demo --report off` ended "no report at off" with exit 1, and
    // an exported CUDABLAME_REPORT was ignored (the report went to the current folder).
    let o = cli(&["demo", "--simulated", "--report", "off"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        err(&o).contains("no JSON report (report off)"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("histogram_oob"), "{}", err(&o));
    let dir = fresh("demo-env-report");
    let path = dir.join("from-env.json");
    let o = cli_in(
        &cudablame(),
        &["demo", "--simulated"],
        &[("CUDABLAME_REPORT", s(&path))],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(path.exists(), "{}", err(&o));
    assert!(!err(&o).contains("exit status:"), "{}", err(&o));
}

/// A setting that keeps the demo from naming its culprit (`CUDABLAME_MARKERS=off`: a suspect
/// only) ends with exit status 1 and a line saying why (a fresh-user trial: the status alone).
#[test]
fn a_demo_that_names_another_kernel_says_why_it_fails() {
    let dir = fresh("demo-markers-off");
    let report = dir.join("r.json");
    let o = cli_in(
        &cudablame(),
        &["demo", "--simulated", "--report", s(&report)],
        &[("CUDABLAME_MARKERS", "off")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("the demo's culprit is histogram_oob; a CUDABLAME_* setting"),
        "{}",
        err(&o)
    );
}

/// Found by a new-user trial: `demo` looked for its report only at the expanded path, so a second
/// run with the same `--report` path (the library then writes `NAME.1.json`: a report never
/// replaces a file) and a folder pattern (`DIR/`, the report inside it) ended "no report at ..."
/// with exit 1 although a report was written; a bad pattern (`a%`, `on`) went to the library,
/// which warned about a `CUDABLAME_REPORT` the user never set and wrote its own default.
#[test]
fn demo_finds_its_report_where_the_library_wrote_it_and_refuses_a_bad_pattern() {
    let dir = fresh("demo-where");
    let fixed = dir.join("fixed.json");
    for want in ["fixed.json", "fixed.1.json"] {
        let o = cli(&["demo", "--simulated", "--report", s(&fixed)]);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        let line = format!("JSON report: {}", dir.join(want).display());
        assert!(err(&o).contains(&line), "{want}: {}", err(&o));
    }
    let folder = format!("{}/", dir.join("sub").display());
    let o = cli(&["demo", "--simulated", "--report", &folder]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let name = only_file(&dir.join("sub"));
    assert!(err(&o).contains(&format!("{folder}{name}")), "{}", err(&o));
    for bad in ["a%", "on"] {
        let o = cli(&["demo", "--simulated", "--report", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", err(&o));
        assert_eq!(err(&o).lines().count(), 1, "{bad}: {}", err(&o));
        assert!(
            err(&o).starts_with("cudablame demo: --report"),
            "{}",
            err(&o)
        );
    }
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

    // `-`, or no path with standard input redirected (`cudablame show < r.json`; a fresh-user
    // trial got clap's "required arguments" error): the same report.
    for args in [&["show", "-"][..], &["show"]] {
        let mut cmd = command(&cudablame(), args);
        cmd.stdin(std::fs::File::open(&a).unwrap());
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", err(&o));
        assert!(
            out(&o).contains("culprit:  oob_write  (op #4, exact)"),
            "{args:?}: {}",
            out(&o)
        );
    }

    // --verbose: every detail (thread ids, shared memory, the whole reasoning).
    let o = cli(&["show", "--verbose", s(&a)]);
    let v = out(&o);
    assert!(v.contains("shared 0 B") && v.contains(", thread "), "{v}");
    assert!(!v.contains("show --verbose"), "{v}");
}

#[test]
fn summary_says_where_it_found_nothing_and_names_unusable_reports() {
    // A path that does not exist: said once (it was also "no reports found in" it).
    let missing = scratch().join("no-such-dir");
    let o = cli(&["summary", s(&missing)]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        err(&o).trim_end(),
        format!("cudablame summary: {} does not exist", missing.display())
    );
    let empty = fresh("summary-empty");
    let o = cli(&["summary", s(&empty)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!("no reports found in {}", empty.display())),
        "{}",
        err(&o)
    );
    // A report named otherwise: the folder's scan leaves it out and says so (a fresh-user
    // trial: "no reports found" alone), and the file named itself is read.
    let txt = fresh("summary-txt");
    std::fs::copy(report(), txt.join("r.txt")).unwrap();
    let o = cli(&["summary", s(&txt)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains("(1 file not named *.json, which a folder's scan leaves out"),
        "{}",
        err(&o)
    );
    let o = cli(&["summary", s(&txt.join("r.txt"))]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));

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
    // `show` words the cut report as `summary` does (a fresh-user trial: "is not a cudablame
    // report: invalid JSON" there).
    let o = cli(&["show", s(&dir.join("cut.json"))]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("cut.json is a truncated or damaged report ("),
        "{}",
        err(&o)
    );

    // `-`: one report from standard input, as `show` reads it.
    let mut cmd = command(&cudablame(), &["summary", "-"]);
    cmd.stdin(std::fs::File::open(dir.join("good.json")).unwrap());
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        out(&o).starts_with("cudablame summary: 1 report"),
        "{}",
        out(&o)
    );
    // No file to name for `show` (it said `details: cudablame show -`).
    assert!(!out(&o).contains("cudablame show -"), "{}", out(&o));
}

/// Copies the command alone to `dir/bin/` (it carries the library: crates/cli/build.rs).
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

    // Nothing beside it: the copy it carries (the_command_alone_carries_its_library_...).
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

// ---- issue 22: diagnostics that name the real problem, a demo that points at the launching
// ---- function, and a command that carries its library.

/// `cli_in` with a working directory.
fn cli_at(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = command(&cudablame(), args);
    cmd.current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    output_within(&mut cmd, Duration::from_secs(60)).0
}

#[test]
fn run_refuses_a_folder_or_a_non_library_as_the_library_before_starting() {
    let dir = fresh("bad-lib");
    let typo = dir.join("typo.py");
    std::fs::write(&typo, "print('not a library')\n").unwrap();
    let program = ["run", "--", "sh", "-c", "echo PROGRAM-RAN"];
    for (args, env, said) in [
        (vec!["--lib", s(&dir)], vec![], "is a folder, not a library"),
        (vec!["--lib", s(&typo)], vec![], "is not a shared library"),
        (
            vec![],
            vec![("CUDABLAME_LIB", s(&typo))],
            "is not a shared library",
        ),
    ] {
        let mut all = vec![program[0]];
        all.extend(&args);
        all.extend(&program[1..]);
        let o = cli_in(&cudablame(), &all, &env);
        assert_eq!(o.status.code(), Some(127), "{all:?}: {}", err(&o));
        assert!(!out(&o).contains("PROGRAM-RAN"), "ran unwatched: {all:?}");
        assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
        assert!(err(&o).contains(said), "{all:?}: {}", err(&o));
        assert!(!err(&o).contains("does not exist"), "{}", err(&o));
    }
}

#[test]
fn run_names_a_folder_given_as_the_program() {
    let dir = fresh("folder-program");
    let o = cli(&["run", "--report", "off", "--", s(&dir)]);
    assert_eq!(o.status.code(), Some(126), "{}", err(&o));
    assert_eq!(
        err(&o).trim(),
        format!("cudablame run: {}: is a folder, not a program", s(&dir))
    );
}

#[test]
fn a_bad_report_pattern_given_to_run_is_refused_before_starting() {
    // Read as the library reads the variable (a fresh-user trial: `--report '%'` passed, and
    // the library then warned about CUDABLAME_REPORT, which the user never set).
    for (pattern, said) in [
        ("", "is empty"),
        ("%", "ends in a lone %"),
        ("r-%x-%q.json", "unknown escape %x"),
        ("on", "is not a path"),
        (
            "/dev/stdout",
            "/dev/stdout is a device, pipe or socket or lies in /dev or /proc, not a file",
        ),
    ] {
        for option in ["--report", "--trace"] {
            let o = cli(&["run", option, pattern, "--", "sh", "-c", "echo PROGRAM-RAN"]);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{option} {pattern:?}: {}",
                err(&o)
            );
            assert!(!out(&o).contains("PROGRAM-RAN"));
            let e = err(&o);
            assert_eq!(e.lines().count(), 1, "{e}");
            assert!(e.contains(&format!("{option} {pattern:?}: {said}")), "{e}");
            assert!(!e.contains("CUDABLAME_"), "{e}");
            // The advice once (`on`'s problem carries its own; a fresh-user trial: twice).
            assert_eq!(
                e.matches("(give ").count() + e.matches("; give ").count(),
                1,
                "{e}"
            );
        }
    }
}

/// A report or trace name longer than a file name may have (255 bytes) is refused before the
/// program starts when given as an option, and replaced by the default when set in the variable:
/// the OS would refuse it only at fault time, losing the report (a fresh-user trial). `%p` counts
/// at its longest, 7 digits.
#[test]
fn a_report_name_too_long_for_the_os_is_refused_before_starting() {
    let dir = fresh("report-name-too-long");
    // `r-` + b's + `-%p.json`: 253 bytes with a 7-digit pid for 238 b's (fits), 260 for 245.
    let name = |bs: usize| format!("r-{}-%p.json", "b".repeat(bs));
    for (bs, refused) in [(238, false), (245, true)] {
        let long = name(bs);
        for option in ["--report", "--trace"] {
            let run = ["run", option, &long, "--", "sh", "-c", "echo PROGRAM-RAN"];
            let o = cli_at(&dir, &run, &[]);
            let e = err(&o);
            assert_eq!(
                o.status.code(),
                Some(if refused { 2 } else { 0 }),
                "{bs} {option}: {e}"
            );
            assert_eq!(out(&o).contains("PROGRAM-RAN"), !refused, "{e}");
            if refused {
                assert_eq!(e.lines().count(), 1, "{e}");
                // The value quoted and cut at 64 characters, as the library echoes a value.
                let cut: String = format!("{long:?}").chars().take(64).collect();
                let said = format!("{option} {cut}…: its file name is 260 bytes long");
                assert!(e.contains(&said), "{e}");
            }
        }
    }
    let long = name(245);
    let o = cli_at(
        &dir,
        &["run", "--", "sh", "-c", SAYS_SETTINGS],
        &[("CUDABLAME_REPORT", &long)],
    );
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    // The default, made absolute from the folder `run` started in (`run::from_here`).
    let here = dir.canonicalize().unwrap(); // as getcwd names it
    let expect = format!("PROGRAM-RAN\nREPORT={}/cudablame-%h-%p.json ", s(&here));
    assert!(out(&o).starts_with(&expect), "{}", out(&o));
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("its file name is 260 bytes long"), "{e}");
    assert!(
        e.ends_with("using the default report path cudablame-%h-%p.json\n"),
        "{e}"
    );
}

#[test]
fn a_report_path_through_a_file_names_the_file() {
    let dir = fresh("report-through-file");
    let file = dir.join("afile");
    std::fs::write(&file, "x").unwrap();
    let pattern = file.join("r.json");
    let o = cli(&[
        "run",
        "--report",
        s(&pattern),
        "--",
        "sh",
        "-c",
        "echo PROGRAM-RAN",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(!out(&o).contains("PROGRAM-RAN"));
    let e = err(&o);
    assert!(e.contains(&format!("{} is a file", s(&file))), "{e}");
    assert!(!e.contains("os error 17"), "{e}");
    // The same for a folder pattern naming the file (`afile/` does not exist for the OS:
    // ENOTDIR) and for `demo --report-dir` (both said "cannot make ...: File exists", found by
    // break-it helpers); the file is untouched.
    let folder_pattern = format!("{}/", s(&file));
    let o = cli(&[
        "run",
        "--report",
        &folder_pattern,
        "--",
        "sh",
        "-c",
        "echo PROGRAM-RAN",
    ]);
    let under = s(&file.join("sub")).to_string();
    let d = cli(&["demo", "--simulated", "--report-dir", &under]);
    for (o, label) in [
        (o, "run --report afile/"),
        (d, "demo --report-dir afile/sub"),
    ] {
        assert_eq!(o.status.code(), Some(2), "{label}: {}", err(&o));
        assert!(!out(&o).contains("PROGRAM-RAN"), "{label}");
        let e = err(&o);
        assert!(
            e.contains(&format!("{} is a file, so the folder", s(&file))),
            "{label}: {e}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

#[test]
fn an_unwritable_current_folder_sends_the_default_report_to_the_temporary_folder() {
    // /proc cannot hold files, even for root (the tests may run as root, for whom permission
    // bits do not stop writes). A job started there runs, with one line saying where the
    // report goes (a fresh-user trial: it used to stop with exit 2, the program not started).
    let tmp = fresh("default-fallback");
    let o = cli_at(
        Path::new("/proc"),
        &["run", "--", "sh", "-c", SAYS_SETTINGS],
        &[("TMPDIR", s(&tmp))],
    );
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    let moved = tmp.join("cudablame-%h-%p.json");
    assert_eq!(
        out(&o),
        format!("PROGRAM-RAN\nREPORT={} TRACE=unset\n", s(&moved)),
        "{}",
        err(&o)
    );
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("cannot write in the current folder"), "{e}");
    assert!(
        e.contains("the default report path cudablame-%h-%p.json"),
        "{e}"
    );
    assert!(
        e.trim_end()
            .ends_with(&format!("the report goes to {}", s(&moved))),
        "{e}"
    );
    // The OS's reason, not the name of cudablame's probe file (a new-user trial saw
    // `at path "/proc/./.cudablame-probe-DWCRGO"`).
    assert!(!e.contains(".cudablame-probe"), "{e}");
    // No writable temporary folder either: no JSON report, the program still runs.
    let o = cli_at(
        Path::new("/proc"),
        &["run", "--", "sh", "-c", SAYS_SETTINGS],
        &[("TMPDIR", "/proc")],
    );
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert_eq!(out(&o), "PROGRAM-RAN\nREPORT=off TRACE=unset\n");
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("no JSON report is written"), "{e}");
    // Told where to write instead, it runs as told, without a word.
    let o = cli_at(
        Path::new("/proc"),
        &[
            "run",
            "--report",
            "off",
            "--",
            "sh",
            "-c",
            "echo PROGRAM-RAN",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).contains("PROGRAM-RAN"));
    assert_eq!(err(&o), "");
}

#[test]
fn show_tells_white_space_from_empty_and_skips_traces() {
    let dir = fresh("show-space-trace");
    let spaces = dir.join("spaces.json");
    std::fs::write(&spaces, vec![b' '; 200 << 20]).unwrap();
    let o = cli(&["show", s(&spaces)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("holds only white space (209715200 bytes)"),
        "{}",
        err(&o)
    );
    assert!(!err(&o).contains("empty file"), "{}", err(&o));
    std::fs::remove_file(&spaces).unwrap();
    // A trace first, then a report (`show reports/*.json` over a folder holding both).
    let trace = dir.join("a-trace.json");
    std::fs::write(&trace, r#"{"traceEvents": [], "displayTimeUnit": "ns"}"#).unwrap();
    let good = report();
    let o = cli(&["show", s(&trace), s(&good)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).contains("culprit:  oob_write"), "{}", out(&o));
    assert!(err(&o).contains("a-trace.json is a trace"), "{}", err(&o));
}

#[test]
fn show_and_summary_word_a_newer_schema_alike() {
    let dir = fresh("newer-schema");
    let future = std::fs::read_to_string(report())
        .unwrap()
        .replace("cudablame.report/1", "cudablame.report/2");
    let path = dir.join("future.json");
    std::fs::write(&path, future).unwrap();
    let wording = "a report of schema \"cudablame.report/2\", newer than this command reads \
                   (\"cudablame.report/1\"): update cudablame";
    let shown = cli(&["show", s(&path)]);
    let summed = cli(&["summary", s(&dir)]);
    assert!(err(&shown).contains(wording), "show: {}", err(&shown));
    assert!(err(&summed).contains(wording), "summary: {}", err(&summed));
}

/// The line of `needle` in the demo's source (crates/cli/src/demo.rs), 1-based.
fn demo_line(needle: &str) -> usize {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/cli/src/demo.rs");
    let text = std::fs::read_to_string(src).unwrap();
    1 + text
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} not in demo.rs"))
}

#[test]
fn the_demo_points_at_the_launching_function_hints_and_writes_where_the_user_stands() {
    let here = fresh("demo-here");
    let tmp = fresh("demo-tmp");
    let o = cli_at(&here, &["demo", "--simulated"], &[("TMPDIR", s(&tmp))]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let e = err(&o);
    let launched = e
        .lines()
        .find(|l| l.starts_with("launched:"))
        .unwrap_or_else(|| panic!("no launched: line in {e}"));
    let line = demo_line("let rc = unsafe { (d.launch)(d.histogram");
    assert!(
        launched.contains("enqueue_histogram at ")
            && launched.ends_with(&format!("demo.rs:{line}")),
        "{launched} (expected enqueue_histogram at demo.rs:{line})"
    );
    assert!(!e.contains("Demo::run"), "{e}");
    let hint = e.lines().find(|l| l.starts_with("hint:")).unwrap_or("");
    assert!(hint.contains("number of bins"), "{e}");
    assert!(
        e.contains("What to check (the report's hint): a histogram kernel"),
        "{e}"
    );
    // The report is in the current folder, and the last line says so; nothing went to TMPDIR.
    let files: Vec<String> = std::fs::read_dir(&here)
        .unwrap()
        .flatten()
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].starts_with("cudablame-demo-") && files[0].ends_with(".json"),
        "{files:?}"
    );
    assert!(
        e.contains(&format!(
            "JSON report: {} (in the current folder)",
            files[0]
        )),
        "{e}"
    );
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(here.join(&files[0])).unwrap()).unwrap();
    assert_eq!(r["culprit"]["op"]["kernel"], "histogram_oob");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "left in TMPDIR"
    );
    // A current folder that cannot be written: the temporary folder, said.
    let o = cli_at(
        Path::new("/proc"),
        &["demo", "--simulated"],
        &[("TMPDIR", s(&tmp))],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        err(&o).contains(&format!(
            "(the current folder is not writable, so it went to {})",
            s(&tmp)
        )),
        "{}",
        err(&o)
    );
}

#[test]
fn an_exported_cudablame_embed_is_not_called_a_typo() {
    // The README once said to export CUDABLAME_EMBED=1 for `cargo install`.
    let r = run(
        &compile("scenarios", false),
        &["oob"],
        true,
        &[("CUDABLAME_EMBED", "1"), ("CUDABLAME_TEXT", "off")],
    );
    assert!(r.report.is_some(), "{}", r.stderr);
    assert!(
        !r.stderr.contains("not a cudablame variable"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_command_alone_carries_its_library_and_simulated_driver() {
    // What `cargo install --path crates/cli` installs: the command by itself, in a fresh HOME.
    let bare = fresh("command-alone");
    let exe = copy_command(&bare);
    let home = bare.join("home");
    let env = [("HOME", s(&home)), ("XDG_CACHE_HOME", "")];
    let o = cli_in(&exe, &["run", "--", "/bin/true"], &env);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let cache: Vec<PathBuf> = std::fs::read_dir(home.join(".cache/cudablame"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(cache.len(), 1, "{cache:?}");
    assert!(cache[0].join("libcudablame.so").is_file());
    let o = cli_in(
        &exe,
        &["demo", "--simulated", "--report-dir", s(&bare)],
        &env,
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(
        err(&o).contains("names histogram_oob (exact)"),
        "{}",
        err(&o)
    );
    assert!(
        err(&o).contains(s(&cache[0].join("libfakecuda.so"))),
        "{}",
        err(&o)
    );
}

// ---- leftovers of the new-user trial and a review (branch `leftovers`).

/// A copy of `scripts/cudablame` in `root/scripts/` beside a stand-in `cargo` on `PATH` that
/// "builds" `root/target/release/cudablame` (a script printing its arguments): the launcher's
/// own lines are what is left on stderr.
fn launcher_at(root: &Path) -> (PathBuf, String) {
    let scripts = root.join("scripts");
    let bin = root.join("bin");
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let launcher = scripts.join("cudablame");
    std::fs::copy(repo.join("scripts/cudablame"), &launcher).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\nmkdir -p '{0}/target/release'\n\
             printf '#!/bin/sh\\necho \"BUILT-COMMAND $*\"\\n' > '{0}/target/release/cudablame'\n\
             chmod +x '{0}/target/release/cudablame'\n",
            s(root)
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", s(&bin), std::env::var("PATH").unwrap_or_default());
    (launcher, path)
}

/// Runs the launcher copy `launcher` (from [`launcher_at`] under `root`) with `path` as PATH and
/// `root/target` as CARGO_TARGET_DIR, which the launcher honours: an inherited one sent it to
/// the real build (a fresh-user trial, `CARGO_TARGET_DIR=... scripts/test.sh`).
fn launch(root: &Path, launcher: &Path, path: &str, args: &[&str]) -> Output {
    let target = root.join("target");
    cli_in(
        launcher,
        args,
        &[("PATH", path), ("CARGO_TARGET_DIR", s(&target))],
    )
}

#[test]
fn the_launcher_says_it_is_building_on_its_first_run_and_nothing_once_built() {
    let root = fresh("launcher-first-run");
    let (launcher, path) = launcher_at(&root);
    let o = launch(&root, &launcher, &path, &["demo"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    // The first build takes minutes (about 6 on 2 cores): one line first, on stderr.
    assert_eq!(
        err(&o),
        "building cudablame (first run: a few minutes)...\n",
        "{}",
        err(&o)
    );
    assert_eq!(out(&o), "BUILT-COMMAND demo\n");
    // Built: the command's own output only, as before.
    let o = launch(&root, &launcher, &path, &["run", "--", "./app"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(err(&o), "");
    assert_eq!(out(&o), "BUILT-COMMAND run -- ./app\n");
}

/// What the program saw of the report settings, and its exit status 3.
const SAYS_SETTINGS: &str =
    "echo PROGRAM-RAN; echo \"REPORT=${CUDABLAME_REPORT-unset} TRACE=${CUDABLAME_TRACE-unset}\"; exit 3";

#[test]
fn an_unwritable_report_variable_warns_and_runs_the_program_with_the_default() {
    let dir = fresh("report-variable");
    let file = dir.join("afile");
    std::fs::write(&file, "x").unwrap();
    let bad = file.join("r-%p.json");
    let bad_trace = file.join("t-%p.json");
    let o = cli_at(
        &dir,
        &["run", "--", "sh", "-c", SAYS_SETTINGS],
        &[
            ("CUDABLAME_REPORT", s(&bad)),
            ("CUDABLAME_TRACE", s(&bad_trace)),
        ],
    );
    // The program ran, with its own exit status; the bad paths were replaced by the defaults.
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    // The default made absolute from the folder `run` started in (`run::from_here`).
    assert_eq!(
        out(&o),
        format!(
            "PROGRAM-RAN\nREPORT={}/cudablame-%h-%p.json TRACE=off\n",
            s(&dir)
        ),
        "{}",
        err(&o)
    );
    let e = err(&o);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(
        lines[0].starts_with("cudablame run: CUDABLAME_REPORT="),
        "{e}"
    );
    assert!(lines[0].contains(&format!("{} is a file", s(&file))), "{e}");
    assert!(
        lines[0].ends_with("using the default report path cudablame-%h-%p.json"),
        "{e}"
    );
    assert!(
        lines[1].starts_with("cudablame run: CUDABLAME_TRACE="),
        "{e}"
    );
    assert!(lines[1].ends_with("no trace is written"), "{e}");
    assert!(!e.contains("--report"), "{e}");
    // In a folder that cannot hold the default either: the temporary folder's, said once (a
    // fresh-user trial saw the current folder's reason twice in that line).
    let tmp = fresh("report-variable-tmp");
    let o = cli_at(
        Path::new("/proc"),
        &["run", "--", "sh", "-c", SAYS_SETTINGS],
        &[("CUDABLAME_REPORT", s(&bad)), ("TMPDIR", s(&tmp))],
    );
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    let moved = tmp.join("cudablame-%h-%p.json");
    assert_eq!(
        out(&o),
        format!("PROGRAM-RAN\nREPORT={} TRACE=unset\n", s(&moved))
    );
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("cudablame run: CUDABLAME_REPORT="), "{e}");
    assert_eq!(e.matches("cannot write").count(), 0, "{e}");
    assert!(
        e.trim_end()
            .ends_with(&format!("the report goes to {}", s(&moved))),
        "{e}"
    );
    // Nor the temporary folder: no JSON report, the program still runs.
    let o = cli_at(
        Path::new("/proc"),
        &["run", "--", "sh", "-c", SAYS_SETTINGS],
        &[("CUDABLAME_REPORT", s(&bad)), ("TMPDIR", "/proc")],
    );
    assert_eq!(o.status.code(), Some(3), "{}", err(&o));
    assert_eq!(out(&o), "PROGRAM-RAN\nREPORT=off TRACE=unset\n");
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
    assert!(err(&o).contains("no JSON report is written"), "{}", err(&o));
    // An explicit --report is still refused before the program starts (exit 2).
    let o = cli_at(
        &dir,
        &["run", "--report", s(&bad), "--", "sh", "-c", SAYS_SETTINGS],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(!out(&o).contains("PROGRAM-RAN"));
    assert!(
        err(&o).contains("(the program was not started)"),
        "{}",
        err(&o)
    );
}

#[test]
fn a_library_that_is_not_cudablame_is_refused_and_every_lib_refusal_says_so() {
    let dir = fresh("lib-not-cudablame");
    // An ELF shared library of the right kind, but another one: the simulated driver.
    let other = target_dir().join("libfakecuda.so");
    let missing = dir.join("libcudablame.so");
    let program = ["sh", "-c", "echo PROGRAM-RAN"];
    for (lib, said) in [
        (s(&other), "is a shared library but not a cudablame library"),
        (s(&dir), "is a folder, not a library"),
        (s(&missing), "does not exist"),
    ] {
        let mut args = vec!["run", "--lib", lib, "--"];
        args.extend(program);
        let o = cli(&args);
        assert_eq!(o.status.code(), Some(127), "{lib}: {}", err(&o));
        assert!(!out(&o).contains("PROGRAM-RAN"), "ran: {lib}");
        let e = err(&o);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains(said), "{e}");
        assert!(
            e.trim_end().ends_with("(the program was not started)"),
            "{e}"
        );
    }
    // The real one is taken.
    let lib = target_dir().join("libcudablame.so");
    let mut args = vec!["run", "--report", "off", "--lib", s(&lib), "--"];
    args.extend(program);
    let o = cli(&args);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(out(&o).contains("PROGRAM-RAN"));
}

#[test]
fn the_jupyter_kernel_keeps_the_users_preload() {
    let dir = fresh("jupyter-preload");
    let lib = target_dir().join("libcudablame.so");
    // libm.so.6 is in every process already: preloading it changes nothing for the command.
    let o = cli_in(
        &cudablame(),
        &[
            "jupyter",
            "install",
            "--python",
            "python3",
            "--prefix",
            s(&dir),
            "--report",
            s(&dir.join("r-%p.json")),
            "--lib",
            s(&lib),
        ],
        &[("LD_PRELOAD", "libm.so.6")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let spec = dir.join("share/jupyter/kernels/cudablame/kernel.json");
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    // As `run` does: cudablame's library first, the user's kept after it.
    let canonical = lib.canonicalize().unwrap();
    assert_eq!(
        spec["env"]["LD_PRELOAD"],
        format!("{}:libm.so.6", s(&canonical)),
        "{spec}"
    );
}

#[test]
fn show_and_summary_say_when_their_output_cannot_be_written() {
    // A full disk: one line and exit status 1 (it was a panic in `print!`, status 101: found by
    // a fresh-user trial).
    let a = report();
    for (name, args) in [
        ("show", vec!["show", s(&a)]),
        ("summary", vec!["summary", s(&a)]),
    ] {
        let mut cmd = command(&cudablame(), &args);
        cmd.stdout(std::fs::File::create("/dev/full").unwrap());
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{name}: {}", err(&o));
        assert_eq!(
            err(&o).trim_end(),
            format!("cudablame {name}: cannot write to standard output: No space left on device (os error 28)")
        );
    }
}
