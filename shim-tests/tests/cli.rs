//! The `cudablame` command: `run` (parsing, exit status, LD_PRELOAD, options), `show`, `summary`
//! over the reports of several ranks, and the Chrome trace export (CUDABLAME_TRACE).

mod common;

use common::*;
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cudablame() -> PathBuf {
    let p = target_dir().join("cudablame");
    assert!(
        p.exists(),
        "{} missing: run `cargo build --release --workspace` (scripts/test.sh)",
        p.display()
    );
    p
}

/// Runs `cudablame args` with the fake driver on the library path and no inherited LD_PRELOAD.
fn cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    cli_in(Path::new("."), args, env)
}

/// [`cli`] in the folder `dir`.
fn cli_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(cudablame());
    cmd.current_dir(dir)
        .args(args)
        .env("LD_LIBRARY_PATH", driver_dir())
        .env_remove("LD_PRELOAD");
    for var in [
        "CUDABLAME_REPORT",
        "CUDABLAME_TRACE",
        "CUDABLAME_TEXT",
        "RANK",
        "WORLD_SIZE",
        "SLURM_PROCID",
    ] {
        cmd.env_remove(var);
    }
    // A marker after every op, as for every harness run (see `common::TEST_MARKERS`).
    cmd.env("CUDABLAME_MARKERS", TEST_MARKERS);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run cudablame")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory under this test binary's scratch directory.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn scenarios() -> PathBuf {
    compile("scenarios", false)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn run_without_a_command_fails_with_usage() {
    let o = cli(&["run"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Usage: cudablame run [OPTIONS] -- CMD"),
        "{}",
        stderr(&o)
    );
    let o = cli(&["run", "--text", "maybe", "--", "true"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // A mistyped option is a usage error, not a program called "--reprot".
    let o = cli(&["run", "--reprot", "x", "--", "true"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unexpected argument '--reprot'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn help_documents_commands_jobs_and_examples() {
    let o = cli(&["--help"], &[]);
    assert_eq!(o.status.code(), Some(0));
    let top = stdout(&o);
    for word in [
        "run",
        "show",
        "summary",
        "demo",
        "Examples:",
        "CUDABLAME_TRACE",
    ] {
        assert!(top.contains(word), "--help lacks {word}:\n{top}");
    }
    let o = cli(&["run", "--help"], &[]);
    assert_eq!(o.status.code(), Some(0));
    let run = stdout(&o);
    for word in [
        "srun",
        "torchrun",
        "mpirun",
        "sbatch",
        "DataLoader",
        "inherit",
        "--trace",
        "--text",
        "Examples:",
    ] {
        assert!(run.contains(word), "run --help lacks {word}:\n{run}");
    }
    // `--markers`' values as its value name lists them; `on` (budget's other name) still taken.
    assert!(
        run.contains("[possible values: budget, every, off]"),
        "{run}"
    );
    let o = cli(&["run", "--markers", "on", "--", "true"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A report not named *.json: one note (summary FOLDER would not find it), the program runs.
    let dir = fresh_dir("no-json-ending");
    let o = cli(
        &["run", "--report", s(&dir.join("x-%p")), "--", "true"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("does not end in .json"),
        "{}",
        stderr(&o)
    );
    let o = cli(
        &["run", "--report", s(&dir.join("x-%p.json")), "--", "true"],
        &[],
    );
    assert_eq!(stderr(&o), "");
    for cmd in ["show", "summary", "demo"] {
        let o = cli(&[cmd, "--help"], &[]);
        assert_eq!(o.status.code(), Some(0));
        assert!(
            stdout(&o).contains("Examples:"),
            "{cmd} --help:\n{}",
            stdout(&o)
        );
    }
}

#[test]
fn run_exits_with_the_programs_status() {
    let o = cli(&["run", "--", "sh", "-c", "exit 7"], &[]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    // run exec()s the program: a signal that kills it is the status the caller sees.
    let o = cli(&["run", "--", "sh", "-c", "kill -TERM $$"], &[]);
    assert_eq!(o.status.signal(), Some(15), "{:?} {}", o.status, stderr(&o));
    // The pid is the program's own.
    let mut child = Command::new(cudablame())
        .args(["run", "--", "sh", "-c", "echo $$"])
        .env_remove("LD_PRELOAD")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(out.trim(), pid.to_string());
}

#[test]
fn run_reports_a_missing_command_with_127() {
    for missing in ["/nonexistent/dir/program", "cudablame-no-such-command"] {
        let o = cli(&["run", "--", missing, "arg"], &[]);
        assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(missing) && err.contains("command not found"),
            "{err}"
        );
    }
}

#[test]
fn run_puts_the_library_first_in_an_existing_ld_preload() {
    let dir = fresh_dir("preload");
    let other = dir.join("libother.so");
    let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-shared", "-fPIC", "-x", "c", "/dev/null", "-o"])
        .arg(&other)
        .status()
        .unwrap();
    assert!(st.success());
    let lib = shim().canonicalize().unwrap();
    let o = cli(
        &["run", "--", "sh", "-c", "echo \"$LD_PRELOAD\""],
        &[("LD_PRELOAD", s(&other))],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        format!("{}:{}", lib.display(), other.display())
    );
    // Without one, it is the library alone; with the library already there, nothing changes.
    let o = cli(&["run", "--", "sh", "-c", "echo \"$LD_PRELOAD\""], &[]);
    assert_eq!(stdout(&o).trim(), lib.display().to_string());
    let both = format!("{}:{}", other.display(), lib.display());
    let o = cli(
        &["run", "--", "sh", "-c", "echo \"$LD_PRELOAD\""],
        &[("LD_PRELOAD", &both)],
    );
    assert_eq!(stdout(&o).trim(), both);
}

#[test]
fn run_options_become_variables() {
    let dir = fresh_dir("run-options");
    let report = dir.join("r-%p.json");
    let trace = dir.join("t-%p.json");
    let o = cli(
        &[
            "run",
            "--report",
            s(&report),
            "--trace",
            s(&trace),
            "--text",
            "off",
            "--",
            s(&scenarios()),
            "oob",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("==== cudablame:"),
        "--text off printed a report:\n{}",
        stderr(&o)
    );
    let pid = stdout(&o)
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .unwrap()
        .to_string();
    let rep: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("r-{pid}.json"))).unwrap()).unwrap();
    assert_eq!(rep["culprit"]["op"]["kernel"], "oob_write");
    let tr: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("t-{pid}.json"))).unwrap()).unwrap();
    assert!(tr["traceEvents"].is_array());
}

#[test]
fn show_prints_a_report_as_text() {
    let r = run(&scenarios(), &["oob"], true, &[("CUDABLAME_TEXT", "off")]);
    assert!(r.report.is_some(), "{}", r.stderr);
    let o = cli(&["show", s(&r.report_path)], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("CUDA_ERROR_ILLEGAL_ADDRESS (700)"), "{text}");
    assert!(
        text.contains("culprit [Exact]: #4 kernel oob_write"),
        "{text}"
    );
    assert!(text.contains("launch_bad_kernel"), "{text}");
    // The lead block, right under the error line: kernel, the program's launching line and its
    // code, the reporting call's line.
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("==== cudablame:"))
        .collect();
    assert_eq!(lines[1], "culprit:  oob_write  (op #4, exact)", "{text}");
    let source = common::programs_dir().join("scenarios.c");
    let code = std::fs::read_to_string(&source).unwrap();
    let line_of = |needle: &str| code.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let launch = line_of("return p_cuLaunchKernel(f, grid");
    assert_eq!(
        lines[2],
        format!("launched: launch at {}:{launch}", source.display()),
        "{text}"
    );
    assert!(
        lines[3].trim()
            == "return p_cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL);",
        "{text}"
    );
    let memcpy = line_of("report_rc(\"memcpy_rc\", p_cuMemcpyDtoH");
    assert_eq!(
        lines[4],
        format!(
            "reported: main at {}:{memcpy} (cuMemcpyDtoH_v2, which only noticed the error)",
            source.display()
        ),
        "{text}"
    );
    assert_eq!(lines[6], "---- details ----", "{text}");
    // The timeline: CPU side and GPU side on one line, culprit and reporting call marked.
    let culprit_row = text
        .lines()
        .find(|l| l.contains("<== CULPRIT"))
        .expect("timeline culprit row");
    assert!(
        culprit_row.contains("ms") && culprit_row.contains("#4 oob_write"),
        "{culprit_row}"
    );
    let reported = text
        .lines()
        .find(|l| l.contains("REPORTED HERE"))
        .expect("reporting row");
    assert!(reported.contains("cuMemcpyDtoH_v2"), "{reported}");
    assert!(
        text.lines()
            .all(|l| !l.contains(" | ") || l.chars().count() <= 100),
        "{text}"
    );
    assert!(
        text.contains(&format!("json report: {}", r.report_path.display())),
        "{text}"
    );

    // Unreadable and invalid files: exit 2 and one line.
    let dir = fresh_dir("show-bad");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"something/else\"}").unwrap();
    let trunc = dir.join("trunc.json");
    std::fs::write(&trunc, &std::fs::read(&r.report_path).unwrap()[..100]).unwrap();
    for path in [bad, trunc, dir.join("missing.json")] {
        let o = cli(&["show", s(&path)], &[]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
        assert!(stderr(&o).contains(s(&path)), "{}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
}

#[test]
fn reports_carry_the_job_layout() {
    let env = [
        ("RANK", "5"),
        ("LOCAL_RANK", "1"),
        ("WORLD_SIZE", "8"),
        ("SLURM_JOB_ID", "4242"),
        ("CUDABLAME_TEXT", "off"),
    ];
    let r = run(&scenarios(), &["oob"], true, &env);
    let p = &r.report()["process"];
    assert_eq!(
        (
            p["rank"].as_u64(),
            p["local_rank"].as_u64(),
            p["world_size"].as_u64()
        ),
        (Some(5), Some(1), Some(8))
    );
    assert_eq!(p["job_id"], "4242");
    let r = run(
        &scenarios(),
        &["oob"],
        true,
        &[("CUDABLAME_TEXT", "off"), ("TORCHELASTIC_RUN_ID", "rdzv-9")],
    );
    let p = &r.report()["process"];
    assert_eq!(
        (p["local_rank"].is_null(), p["world_size"].is_null()),
        (true, true)
    );
    assert_eq!(p["job_id"], "rdzv-9");
    // An absurd WORLD_SIZE is not a job layout (summary would list billions of missing ranks).
    let r = run(
        &scenarios(),
        &["oob"],
        true,
        &[("CUDABLAME_TEXT", "off"), ("WORLD_SIZE", "4000000000")],
    );
    assert!(r.report()["process"]["world_size"].is_null());
}

#[test]
fn summary_names_the_first_failing_rank() {
    let dir = fresh_dir("summary-job");
    let pattern = dir.join("cudablame-%h-r%r.json");
    let trace = dir.join("trace-r%r.json");
    let rank = |rank: &str, scenario: &str| {
        let env = [
            ("RANK", rank),
            ("WORLD_SIZE", "3"),
            ("SLURM_JOB_ID", "977"),
            ("CUDABLAME_REPORT", s(&pattern)),
            ("CUDABLAME_TRACE", s(&trace)),
            ("CUDABLAME_TEXT", "off"),
        ];
        run(&scenarios(), &[scenario], true, &env)
    };
    // Rank 1 faults first; rank 0 gets its (secondary) error later; rank 2 reports nothing.
    let r1 = rank("1", "oob");
    assert_eq!(r1.code, 1, "{}", r1.stderr);
    let r0 = rank("0", "secondary");
    assert_eq!(r0.printed("launch_rc"), "700");
    let r2 = rank("2", "ok");
    assert_eq!(r2.code, 0, "{}", r2.stderr);
    std::fs::write(dir.join("unrelated.json"), "[1, 2, 3]").unwrap();

    let o = cli(&["summary", s(&dir)], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    assert!(out.contains("2 reports, world size 3, job 977"), "{out}");
    let row = |rank: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(rank))
            .unwrap_or_else(|| panic!("no row {rank}:\n{out}"))
    };
    let (first, second, none) = (row("1"), row("0"), row("2"));
    for word in [
        "FIRST FAILURE",
        "oob_write (exact)",
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "cuMemcpyDtoH_v2",
        "+0.000 ms",
    ] {
        assert!(first.contains(word), "{word} missing in {first:?}\n{out}");
    }
    assert!(first.contains(&r1.printed("pid")), "{first}");
    for word in ["secondary", "instant_oob (exact)", "cuLaunchKernel"] {
        assert!(second.contains(word), "{word} missing in {second:?}\n{out}");
    }
    assert!(
        none.contains("no CUDA error reported (check its log: NCCL watchdog / peer failure)"),
        "{none}"
    );
    // The verdict.
    let verdict = &out[out.find("verdict:").expect("a verdict")..];
    assert!(
        verdict.contains("rank 1: first failure: CUDA_ERROR_ILLEGAL_ADDRESS"),
        "{verdict}"
    );
    assert!(
        verdict.contains("culprit #4 oob_write (exact)"),
        "{verdict}"
    );
    assert!(
        verdict.contains("rank 0: secondary: probably caused by rank 1's fault"),
        "{verdict}"
    );
    assert!(
        verdict.contains("rank 2: no CUDA error reported"),
        "{verdict}"
    );
    assert!(
        verdict.contains("cudablame show ") && verdict.contains("-r1.json"),
        "{verdict}"
    );

    // Files named one by one work the same; a bad one is reported and skipped.
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.contains("cudablame-"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    files.push(dir.join("missing.json").display().to_string());
    let args: Vec<&str> = std::iter::once("summary")
        .chain(files.iter().map(String::as_str))
        .collect();
    let o = cli(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("missing.json"), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("rank 1: first failure"),
        "{}",
        stdout(&o)
    );
    // A report named twice, and again through its folder, is one report.
    let o = cli(&["summary", &files[0], &files[0], &files[1], s(&dir)], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("2 reports, world size 3, job 977"),
        "{}",
        stdout(&o)
    );

    // No report at all: exit 1.
    let empty = fresh_dir("summary-empty");
    let o = cli(&["summary", s(&empty)], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    // Into a pipe whose reader is gone (`cudablame summary DIR | head -1`): ended by SIGPIPE as
    // any printer, not a panic (a fresh-user trial: "failed printing to stdout: Broken pipe",
    // exit 101). The reader closes before the command has started, so its first write fails.
    for cmd in ["summary", "show"] {
        let target = if cmd == "show" {
            files[0].as_str()
        } else {
            s(&dir)
        };
        let mut child = Command::new(cudablame())
            .args([cmd, target])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert!(!stderr(&o).contains("panicked"), "{cmd}: {}", stderr(&o));
        assert!(
            o.status.signal() == Some(13) || o.status.success(), // 13: SIGPIPE
            "{cmd}: {:?} {}",
            o.status,
            stderr(&o)
        );
    }
    // The demo writes its lines to stderr (`cudablame demo 2>&1 | head -1`): ended by SIGPIPE at
    // its first line, not a panic in `eprintln!` (a fresh-user trial: exit 101).
    let mut child = Command::new(cudablame())
        .args(["demo", "--simulated", "--report", "off"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(13), "demo: {status:?}");
}

#[test]
fn trace_export_is_chrome_trace_format() {
    let dir = fresh_dir("trace");
    let r = run(
        &scenarios(),
        &["oob"],
        true,
        &[("CUDABLAME_TRACE", s(&dir.join("trace-%p.json")))],
    );
    assert_eq!(r.code, 1);
    let path = dir.join(format!("trace-{}.json", r.printed("pid")));
    assert!(
        r.stderr.contains(&format!("trace: {}", path.display())),
        "{}",
        r.stderr
    );
    let trace: Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("trace is JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents array");
    for e in events {
        assert!(e["name"].is_string(), "{e}");
        assert!(e["ph"].is_string(), "{e}");
        for k in ["pid", "tid", "ts"] {
            assert!(e[k].is_number(), "{k} in {e}");
        }
        if e["ph"] == "X" {
            assert!(e["dur"].as_f64().expect("X has dur") >= 0.0, "{e}");
        }
    }
    let culprits: Vec<&Value> = events
        .iter()
        .filter(|e| e["args"]["culprit"] == true)
        .collect();
    assert_eq!(culprits.len(), 1, "{culprits:?}");
    let name = culprits[0]["name"].as_str().unwrap();
    assert!(
        name.contains("oob_write") && name.starts_with("CULPRIT"),
        "{name}"
    );
    assert_eq!(culprits[0]["ph"], "X");
    let reported: Vec<&Value> = events
        .iter()
        .filter(|e| e["name"].as_str().unwrap().contains("REPORTED HERE"))
        .collect();
    assert_eq!(reported.len(), 1);
    assert_eq!(reported[0]["ph"], "i");
    assert_eq!(reported[0]["tid"].to_string(), r.printed("main_tid"));
    // Tracks are named: the process, the CPU thread, the stream.
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("scenarios")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("CPU thread")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("GPU stream legacy")),
        "{names:?}"
    );
    // Launches are instants on the CPU track; the stream's 7 ops are slices.
    assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 7);
    assert_eq!(
        events
            .iter()
            .filter(|e| e["ph"] == "i" && e["name"].as_str().unwrap().starts_with("launch "))
            .count(),
        7
    );
}

/// Issue 22: with launch stacks off there is no stack below, and the lead says why.
#[test]
fn stack_off_does_not_point_at_a_stack_below() {
    let dir = fresh_dir("stack-off");
    let report = dir.join("r.json");
    let o = cli(
        &[
            "run",
            "--stack",
            "off",
            "--report",
            s(&report),
            "--",
            s(&scenarios()),
            "oob",
        ],
        &[],
    );
    let e = stderr(&o);
    assert!(e.contains("culprit:  oob_write"), "{e}");
    let launched = e.lines().find(|l| l.starts_with("launched:")).unwrap_or("");
    assert!(
        launched.contains("(no launch stack recorded: launch stacks are off"),
        "{e}"
    );
    assert!(!e.contains("see the launch stack below"), "{e}");
    let o = cli(&["show", s(&report)], &[]);
    assert!(
        stdout(&o).contains("(no launch stack recorded"),
        "{}",
        stdout(&o)
    );
}

/// `demo --report` refuses what `run --report` refuses (a device, a path in /dev or /proc) with
/// exit status 2, and a report pattern naming an endless device through CUDABLAME_REPORT is not
/// read (the demo read /dev/zero and /dev/full into memory until the kernel killed it: found by
/// a break-it helper, twentieth session).
#[test]
fn demo_refuses_devices_as_run_does_and_never_reads_one() {
    for path in ["/dev/full", "/proc/x"] {
        let o = cli(&["demo", "--simulated", "--report", path], &[]);
        assert_eq!(o.status.code(), Some(2), "{path}: {}", stderr(&o));
        assert!(stderr(&o).contains("not a file"), "{path}: {}", stderr(&o));
        let r = cli(&["run", "--report", path, "--", "true"], &[]);
        assert_eq!(r.status.code(), Some(2), "run {path}: {}", stderr(&r));
    }
    // A device in the variable: said once, and the demo's default taken, as `run` does (the
    // library would write its own default where the demo does not look).
    let dir = fresh_dir("demo-dev-zero");
    let o = cli_in(
        &dir,
        &["demo", "--simulated"],
        &[("CUDABLAME_REPORT", "/dev/zero")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("CUDABLAME_REPORT=\"/dev/zero\": ") && e.contains("using the demo's default"),
        "{e}"
    );
    let written: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let name = written[0].file_name().to_string_lossy().into_owned();
    assert!(name.starts_with("cudablame-demo-"), "{name}");
    // A folder that depends on the pid (the demo's is not its program's): no folder made for
    // the demo's pid (a review found a stray one); the library, finding no such folder, writes
    // its default here, and the demo finds the report there.
    let dir = fresh_dir("demo-pid-folder");
    let o = cli_in(
        &dir,
        &["demo", "--simulated"],
        &[("CUDABLAME_REPORT", "rep-%p/r.json")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let written: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let name = written[0].file_name().to_string_lossy().into_owned();
    assert!(
        name.starts_with("cudablame-") && name.ends_with(".json"),
        "{name}"
    );
    assert!(
        stderr(&o).contains(&format!("JSON report: {name}")),
        "{}",
        stderr(&o)
    );
}

/// `cudablame run` fixes a relative report or trace path at the folder it was started in, where
/// it checked it, also for a program that a script starts after a `cd` (found by a break-it
/// review: the library anchors relative paths at its own process's start folder, so the report
/// `--report reports/r.json` had checked was lost, and the default one landed in `sub/`). Given
/// as an option, set in the variable, or the default (unset, blank, or a value the library
/// would refuse); in a folder whose name holds `%p`, which must stay as it is.
#[test]
fn run_keeps_relative_report_paths_where_it_was_started() {
    let dir = fresh_dir("run-from-here-%p");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::create_dir_all(dir.join("reports")).unwrap();
    let prog = scenarios();
    let script = ["sh", "-c", "cd sub && exec \"$0\" oob", s(&prog)];
    // (run's options, the environment, the files expected under the start folder, sorted)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: [Case; 5] = [
        (
            &["--report", "reports/r.json", "--trace", "reports/"],
            &[],
            &["reports/cudablame-trace", "reports/r.json"],
        ),
        (
            &[],
            &[("CUDABLAME_REPORT", "reports/e.json")],
            &["reports/e.json"],
        ),
        (&[], &[], &["cudablame-"]),
        // Blank, or a value the library warns about: the default, here too (it was left to
        // the library, whose default then landed in `sub/`; a fresh-user trial), said once.
        (&[], &[("CUDABLAME_REPORT", " ")], &["cudablame-"]),
        (&[], &[("CUDABLAME_REPORT", "on")], &["cudablame-"]),
    ];
    for (options, env, expect) in cases {
        let _ = std::fs::remove_dir_all(dir.join("reports"));
        std::fs::create_dir_all(dir.join("reports")).unwrap();
        let args: Vec<&str> = ["run"]
            .iter()
            .chain(options)
            .chain(&["--"])
            .chain(&script)
            .copied()
            .collect();
        let o = cli_in(&dir, &args, env);
        assert_eq!(o.status.code(), Some(1), "{options:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("cannot write"), "{}", stderr(&o));
        let replaced = env.iter().any(|(_, v)| v.trim().is_empty() || *v == "on");
        let said = stderr(&o)
            .lines()
            .filter(|l| l.contains("CUDABLAME_REPORT") && l.contains("using the default"))
            .count();
        assert_eq!(said, usize::from(replaced), "{}", stderr(&o));
        assert!(
            !stderr(&o).contains("cudablame: CUDABLAME_REPORT"),
            "{}",
            stderr(&o)
        );
        let mut written: Vec<String> = ["", "reports/"]
            .iter()
            .flat_map(|sub| std::fs::read_dir(dir.join(sub)).unwrap().flatten())
            .filter(|e| e.path().is_file())
            .map(|e| e.path().strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        written.sort();
        assert_eq!(
            written.len(),
            expect.len(),
            "{options:?} {env:?}: {written:?}"
        );
        for (w, e) in written.iter().zip(expect) {
            assert!(w.starts_with(e), "{options:?} {env:?}: {written:?}");
        }
        assert_eq!(std::fs::read_dir(dir.join("sub")).unwrap().count(), 0);
        for w in &written {
            let _ = std::fs::remove_file(dir.join(w));
        }
    }
}

/// `--report` and `--trace` naming one file: refused before the program starts (a fresh-user
/// trial: the trace went to `NAME.1.json` beside the report, unsaid); `off` for both is fine.
#[test]
fn run_refuses_one_path_for_report_and_trace() {
    let dir = fresh_dir("same-path");
    let same = dir.join("same.json");
    let o = cli(
        &[
            "run",
            "--report",
            s(&same),
            "--trace",
            s(&same),
            "--",
            "sh",
            "-c",
            "echo RAN",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("both name"), "{}", stderr(&o));
    let o = cli(
        &[
            "run", "--report", "off", "--trace", "off", "--", "sh", "-c", "echo RAN",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "RAN\n");
}
