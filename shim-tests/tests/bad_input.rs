//! Bad input: every CUDABLAME_* variable with garbage, empty, huge, negative and non-UTF-8
//! values; report paths that cannot be written (missing directory, /proc, a directory, a full
//! disk, the file size limit), a symlink planted at the report path, argv with odd bytes, a
//! stderr nobody reads. Each bad variable gets exactly one line on stderr, and the program behaves
//! as without cudablame (same exit status, same stdout).

mod common;
use common::*;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn scenarios() -> PathBuf {
    compile("scenarios", false)
}

struct Outcome {
    ending: String,
    stdout: String,
    stderr: String,
}

fn run_env(
    dir: &Path,
    args: &[&OsStr],
    shim_on: bool,
    env: &[(&str, OsString)],
    setup: impl FnOnce(&mut Command),
) -> Outcome {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = command(&scenarios(), &[]);
    cmd.args(args).current_dir(dir);
    if shim_on {
        cmd.env("LD_PRELOAD", shim());
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    setup(&mut cmd);
    let (out, _) = output_within(&mut cmd, Duration::from_secs(60));
    Outcome {
        ending: ending(&out.status),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The lines cudablame said on its own (not the text report, whose lines do not start so).
fn said(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("cudablame: "))
        .collect()
}

fn os(s: &str) -> OsString {
    s.into()
}

fn bytes(b: &[u8]) -> OsString {
    OsStr::from_bytes(b).to_os_string()
}

/// The values every variable is tried with, and whether each is bad for that variable.
fn cases() -> Vec<(&'static str, OsString, bool)> {
    let huge_number = "9".repeat(4096);
    let huge_word = "x".repeat(4096);
    let mut v = Vec::new();
    for var in [
        "CUDABLAME_STACK_DEPTH",
        "CUDABLAME_RING",
        "CUDABLAME_PYTHON_DEPTH",
    ] {
        for (value, bad) in [
            (os(""), true),
            (os(" "), true),
            (os("abc"), true),
            (os("-1"), true),
            (os("0"), true),
            (os("1e3"), true),
            (os(&huge_number), true),
            (bytes(b"\xff\xfe"), true),
            (os("32"), false),
        ] {
            v.push((var, value, bad));
        }
    }
    for var in [
        "CUDABLAME_MARKERS",
        "CUDABLAME_TEXT",
        "CUDABLAME_DEBUG",
        "CUDABLAME_PYTHON",
    ] {
        for (value, bad) in [
            (os(""), true),
            (os("maybe"), true),
            (os("-1"), true),
            (os("2"), true),
            (os(&huge_word), true),
            (bytes(b"o\xffn"), true),
            (os(" ON "), false),
        ] {
            v.push((var, value, bad));
        }
    }
    for var in [
        "CUDABLAME_STACK",
        "CUDABLAME_UNWINDER",
        "CUDABLAME_TEST_PANIC",
    ] {
        for (value, bad) in [
            (os(""), true),
            (os("sideways"), true),
            (os("-1"), true),
            (os(&huge_word), true),
            (bytes(b"\xff"), true),
        ] {
            v.push((var, value, bad));
        }
    }
    for var in ["CUDABLAME_REPORT", "CUDABLAME_TRACE"] {
        for (value, bad) in [
            (os(""), true),
            (os("   "), true),
            (bytes(b"r\xff.json"), true),
            // Too long a name: the write fails, said in one line.
            (os(&format!("{huge_word}.json")), true),
            (os("-1"), false),
            (os("%p-%h-%r-%%.json"), false),
            // An unknown escape, a lone % and an on/off word are not what was meant: one line.
            (os("%p-%h-%r-%%-%x-%.json"), true),
            (os("r-%"), true),
            (os("on"), true),
        ] {
            v.push((var, value, bad));
        }
    }
    v.push(("CUDABLAME_RINGS", os("64"), true));
    v.push(("CUDABLAME_", os(""), true));
    v
}

#[test]
fn every_variable_with_bad_values_gets_one_line_and_changes_nothing() {
    let base = scratch().join("bad-vars");
    let plain = run_env(
        &base.join("plain"),
        &[OsStr::new("oob")],
        false,
        &[],
        |_| {},
    );
    assert_eq!(plain.ending, "exit 1");
    let (mut tried, mut bad_values) = (0, 0);
    for (i, (var, value, bad)) in cases().into_iter().enumerate() {
        let dir = base.join(format!("case-{i}"));
        let mut env = vec![(var, value.clone())];
        if var != "CUDABLAME_TEXT" {
            env.push(("CUDABLAME_TEXT", os("off")));
        }
        let r = run_env(&dir, &[OsStr::new("oob")], true, &env, |_| {});
        let label = format!("{var}={value:?}");
        assert_same_run(
            &label,
            (&plain.ending, &plain.stdout),
            (&r.ending, &r.stdout),
            &r.stderr,
        );
        let about: Vec<&str> = said(&r.stderr)
            .into_iter()
            .filter(|l| l.contains(var) && !l.contains(" = 0x"))
            .collect();
        let want = usize::from(bad);
        assert_eq!(
            about.len(),
            want,
            "{label}: want {want} line(s) about it, stderr:\n{}",
            r.stderr
        );
        for line in &about {
            assert!(
                line.len() < 400,
                "{label}: one clear line, not {} characters",
                line.len()
            );
        }
        assert!(!r.stderr.contains("panicked"), "{label}: {}", r.stderr);
        tried += 1;
        bad_values += want;
    }
    // All at once: one line per variable.
    let all: Vec<(&str, OsString)> = [
        "CUDABLAME_STACK_DEPTH",
        "CUDABLAME_RING",
        "CUDABLAME_PYTHON_DEPTH",
        "CUDABLAME_MARKERS",
        "CUDABLAME_DEBUG",
        "CUDABLAME_PYTHON",
        "CUDABLAME_STACK",
        "CUDABLAME_UNWINDER",
        "CUDABLAME_TEST_PANIC",
        "CUDABLAME_REPORT",
        "CUDABLAME_TRACE",
        "CUDABLAME_TYPO",
    ]
    .into_iter()
    .map(|k| (k, os("")))
    .chain([("CUDABLAME_TEXT", os("off!"))])
    .collect();
    let r = run_env(&base.join("all"), &[OsStr::new("oob")], true, &all, |_| {});
    assert_eq!(r.ending, plain.ending);
    assert_eq!(said(&r.stderr).len(), all.len(), "{}", r.stderr);
    println!("bad variables: {tried} values tried ({bad_values} bad, each one line), plus all {} at once", all.len());
}

/// Writes that cannot succeed: one line naming the path, the variable and the default path the
/// file went to instead (bad configuration gives the default, as `cudablame run` does; a
/// fresh-user trial found that the bare library wrote no report); same exit and stdout.
#[test]
fn unwritable_report_paths_get_one_line() {
    let base = scratch().join("unwritable");
    let plain = run_env(
        &base.join("plain"),
        &[OsStr::new("oob")],
        false,
        &[],
        |_| {},
    );
    let mut tried = 0;
    for (label, path) in [
        ("missing directory", "/nonexistent-cudablame-dir/r.json"),
        ("inside /proc", "/proc/self/cudablame-r.json"),
        ("a file as directory", "/dev/null/r.json"),
        // Devices behind symlinks: before, the report went to a new file beside them
        // (`/dev/stdout.1`, made in /dev when run as root; a fresh-user trial).
        ("a device", "/dev/stdout"),
        ("a device", "/dev/stderr"),
    ] {
        for var in ["CUDABLAME_REPORT", "CUDABLAME_TRACE"] {
            let r = run_env(
                &base.join("run"),
                &[OsStr::new("oob")],
                true,
                &[(var, os(path))],
                |_| {},
            );
            assert_same_run(
                &format!("{label} {var}"),
                (&plain.ending, &plain.stdout),
                (&r.ending, &r.stdout),
                &r.stderr,
            );
            let lines: Vec<&str> = said(&r.stderr)
                .into_iter()
                .filter(|l| l.contains("cannot write"))
                .collect();
            assert_eq!(lines.len(), 1, "{label} {var}: {}", r.stderr);
            assert!(
                lines[0].contains(path) && lines[0].contains(var),
                "{}",
                lines[0]
            );
            // The OS's reason, not the temporary file's name (`at path ".../.cudablame-XXXXXX
            // .json.tmp"` before).
            assert!(!lines[0].contains(".cudablame-"), "{}", lines[0]);
            assert!(
                r.stderr.contains("culprit [Exact]"),
                "the text report still comes: {}",
                r.stderr
            );
            // The default path instead, in the folder the program started in.
            let default = match var {
                "CUDABLAME_REPORT" => "cudablame-",
                _ => "cudablame-trace-",
            };
            // (the report's default is written under CUDABLAME_TRACE too: it is unset then)
            let all: Vec<PathBuf> = std::fs::read_dir(base.join("run"))
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect();
            let is_trace = |p: &PathBuf| p.to_string_lossy().contains("/cudablame-trace-");
            let written: Vec<&PathBuf> = (all.iter())
                .filter(|p| is_trace(p) == (var == "CUDABLAME_TRACE"))
                .collect();
            assert_eq!(written.len(), 1, "{label} {var}: {all:?}");
            let name = written[0]
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            assert!(name.starts_with(default), "{name}");
            assert!(
                lines[0].ends_with(&format!("; wrote it to {name} instead (fix {var})")),
                "{}",
                lines[0]
            );
            let json: serde_json::Value =
                serde_json::from_slice(&std::fs::read(written[0]).unwrap()).unwrap();
            if var == "CUDABLAME_REPORT" {
                assert_eq!(json["culprit"]["op"]["kernel"], "oob_write");
            }
            for p in &all {
                std::fs::remove_file(p).unwrap();
            }
            tried += 1;
        }
    }
    println!("unwritable paths: {tried} tried");
    for beside in ["/dev/stdout.1", "/dev/stderr.1"] {
        assert!(!Path::new(beside).exists(), "{beside} was made");
    }
}

/// `CUDABLAME_REPORT=/dev/stdout` when the program's output is a regular file: `/dev/stdout`
/// is then that file, which the device test let through, and the report went to a new file
/// `/dev/stdout.1` (made in `/dev` when run as root; a fresh-user trial). Now refused like a
/// device: one line, the text report, no file in `/dev`, the program's output unchanged.
#[test]
fn dev_stdout_redirected_to_a_file_is_refused() {
    let dir = scratch().join("stdout-file");
    std::fs::create_dir_all(&dir).unwrap();
    let plain = run_env(&dir, &[OsStr::new("oob")], false, &[], |_| {});
    for var in ["CUDABLAME_REPORT", "CUDABLAME_TRACE"] {
        let out_path = dir.join(format!("out-{var}.txt"));
        // The program's output goes to a file by the shell (the harness pipes stdout).
        let mut cmd = command(Path::new("/bin/sh"), &["-c", "exec \"$0\" oob > \"$1\""]);
        cmd.arg(scenarios())
            .arg(&out_path)
            .current_dir(&dir)
            .env("LD_PRELOAD", shim())
            .env(var, "/dev/stdout");
        let (o, _) = output_within(&mut cmd, Duration::from_secs(60));
        // Removed before any assertion, so that a failing run leaves nothing in /dev.
        let beside = Path::new("/dev/stdout.1");
        let made = beside.exists();
        let _ = std::fs::remove_file(beside);
        let r = Outcome {
            ending: ending(&o.status),
            stdout: String::new(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        };
        assert_eq!(r.ending, plain.ending, "{var}");
        let written = std::fs::read_to_string(&out_path).unwrap();
        assert_eq!(stable_lines(&written), stable_lines(&plain.stdout), "{var}");
        let lines: Vec<&str> = said(&r.stderr)
            .into_iter()
            .filter(|l| l.contains("cannot write"))
            .collect();
        assert_eq!(lines.len(), 1, "{var}: {}", r.stderr);
        assert!(
            lines[0].contains("/dev/stdout") && lines[0].contains(var),
            "{}",
            lines[0]
        );
        assert!(r.stderr.contains("culprit [Exact]"), "{}", r.stderr);
        assert!(!made, "{var}: /dev/stdout.1 was made");
    }
}

/// `/dev/null` as the report or trace path means no file, like `off`. Before: a file is never
/// written through an existing path, so the report went to `/dev/null.1` (created in `/dev`
/// when run as root; for other users a "cannot write the JSON report" line), and the text report
/// named that file. Also through `cudablame run --report /dev/null --trace /dev/null`.
#[test]
fn dev_null_as_the_report_path_writes_no_file() {
    /// Removes, even when an assertion fails, the files a failing run leaves in `/dev`.
    struct Leftovers(Vec<&'static str>);
    impl Drop for Leftovers {
        fn drop(&mut self) {
            for p in &self.0 {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let leftovers = ["/dev/null.1", "/dev/null.2"];
    let cleanup = Leftovers(
        (leftovers.iter().copied())
            .filter(|p| !Path::new(p).exists())
            .collect(),
    );
    let plain = run_env(
        &scratch().join("devnull-plain"),
        &[OsStr::new("oob")],
        false,
        &[],
        |_| {},
    );
    for var in ["CUDABLAME_REPORT", "CUDABLAME_TRACE"] {
        let r = run_env(
            &scratch().join("devnull"),
            &[OsStr::new("oob")],
            true,
            &[(var, os("/dev/null"))],
            |_| {},
        );
        assert_same_run(
            var,
            (&plain.ending, &plain.stdout),
            (&r.ending, &r.stdout),
            &r.stderr,
        );
        assert!(said(&r.stderr).is_empty(), "{var}: {}", r.stderr);
        assert!(!r.stderr.contains("/dev/null"), "{var}: {}", r.stderr);
        assert!(r.stderr.contains("culprit [Exact]"), "{var}: {}", r.stderr);
    }
    let bin = target_dir().join("cudablame");
    let mut cmd = Command::new(&bin);
    cmd.args(["run", "--report", "/dev/null", "--trace", "/dev/null", "--"])
        .arg(scenarios())
        .arg("oob")
        .env("LD_LIBRARY_PATH", driver_dir())
        .env("CUDABLAME_MARKERS", TEST_MARKERS)
        .env_remove("CUDABLAME_REPORT")
        .env_remove("CUDABLAME_TRACE")
        .env_remove("LD_PRELOAD")
        .current_dir(scratch().join("devnull"));
    let (out, _) = output_within(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(ending(&out.status), plain.ending, "{stderr}");
    assert!(!stderr.contains("/dev/null"), "{stderr}");
    assert!(stderr.contains("no JSON report was written"), "{stderr}");
    for p in &cleanup.0 {
        assert!(!Path::new(p).exists(), "a report was written to {p}");
    }
}

/// A directory as report path: the report goes inside it, under the default name.
#[test]
fn a_directory_as_report_path_gets_the_report_inside() {
    let dir = scratch().join("report-dir");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for pattern in [dir.display().to_string(), format!("{}/sub/", dir.display())] {
        let _ = std::fs::create_dir_all(dir.join("sub"));
        let r = run_env(
            &scratch().join("report-dir-cwd"),
            &[OsStr::new("oob")],
            true,
            &[("CUDABLAME_REPORT", os(&pattern))],
            |_| {},
        );
        assert_eq!(r.ending, "exit 1");
        assert!(said(&r.stderr).is_empty(), "{}", r.stderr);
        let pid = r
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("pid="))
            .unwrap()
            .to_string();
        let inside = Path::new(&pattern)
            .read_dir()
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .find(|n| n.ends_with(&format!("-{pid}.json")));
        let name = inside.unwrap_or_else(|| panic!("no report in {pattern}: {}", r.stderr));
        assert!(name.starts_with("cudablame-"), "{name}");
        let rep: serde_json::Value =
            serde_json::from_slice(&std::fs::read(Path::new(&pattern).join(&name)).unwrap())
                .unwrap();
        assert_eq!(rep["culprit"]["op"]["kernel"], "oob_write");
    }
}

/// A full disk (a 4 KiB tmpfs, mounted in a user namespace where allowed) and the file size limit
/// (`ulimit -f`, which would kill the program with SIGXFSZ if the report were written past it).
#[test]
fn full_disk_and_file_size_limit() {
    let base = scratch().join("full");
    let plain = run_env(
        &base.join("plain"),
        &[OsStr::new("oob")],
        false,
        &[],
        |_| {},
    );
    // The file size limit: 4 KiB, less than the report.
    for shim_on in [false, true] {
        let r = run_env(
            &base.join("fsize"),
            &[OsStr::new("oob")],
            shim_on,
            &[("CUDABLAME_REPORT", os("r.json"))],
            |cmd| limit_file_size(cmd, 4096),
        );
        assert_eq!(
            r.ending, plain.ending,
            "file size limit, shim {shim_on}: {}",
            r.stderr
        );
        if shim_on {
            let lines = said(&r.stderr);
            assert_eq!(lines.len(), 1, "{}", r.stderr);
            assert!(lines[0].contains("file size limit"), "{}", lines[0]);
            assert!(!base.join("fsize/r.json").exists());
        }
    }
    // A full file system.
    let mnt = base.join("tmpfs");
    std::fs::create_dir_all(&mnt).unwrap();
    let listing = base.join("listing.txt");
    let mounted = base.join("mounted");
    let _ = std::fs::remove_file(&listing);
    let _ = std::fs::remove_file(&mounted);
    let script = format!(
        "mount -t tmpfs -o size=4k tmpfs {m} || exit 99; touch {t}; {prog} oob; rc=$?; ls -A {m} > {l}; exit $rc",
        m = mnt.display(),
        t = mounted.display(),
        prog = scenarios().display(),
        l = listing.display()
    );
    let unshare = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("unshare"))
            .find(|f| f.is_file())
    });
    let Some(unshare) = unshare else {
        println!("full disk: no unshare(1) here: skipped");
        return;
    };
    let mut cmd = command(&unshare, &["-r", "-m", "sh", "-c", &script]);
    // In `base`: the report that the full disk refused goes to the default path there.
    cmd.env("LD_PRELOAD", shim())
        .env("CUDABLAME_REPORT", mnt.join("r.json"))
        .current_dir(&base);
    let (out, _) = output_within(&mut cmd, Duration::from_secs(60));
    if !mounted.exists() {
        println!(
            "full disk: no tmpfs in a user namespace here ({}): skipped",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(ending(&out.status), plain.ending, "{stderr}");
    let lines = said(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("No space left on device"), "{}", lines[0]);
    let instead = (lines[0].split("; wrote it to ").nth(1))
        .and_then(|rest| rest.strip_suffix(" instead (fix CUDABLAME_REPORT)"));
    let instead = base.join(instead.unwrap_or_else(|| panic!("{}", lines[0])));
    assert!(instead.is_file(), "{}", lines[0]);
    std::fs::remove_file(&instead).unwrap();
    assert_eq!(
        std::fs::read_to_string(&listing).unwrap(),
        "",
        "a partial or temporary file was left on the full disk"
    );
    println!("full disk: tmpfs of 4 KiB, one line, nothing left behind");
}

#[repr(C)]
struct libc_rlimit {
    cur: u64,
    max: u64,
}
extern "C" {
    fn setrlimit(resource: i32, rlim: *const libc_rlimit) -> i32;
}

/// A symlink planted at the report path is never followed: its target is untouched and the report
/// goes to NAME.1.json.
#[test]
fn a_planted_symlink_is_not_followed() {
    let dir = scratch().join("symlink");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let precious = dir.join("precious.txt");
    std::fs::write(&precious, "precious").unwrap();
    std::os::unix::fs::symlink(&precious, dir.join("report.json")).unwrap();
    std::os::unix::fs::symlink(dir.join("victim.json"), dir.join("dangling.json")).unwrap();
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("to-dir.json")).unwrap();
    for (name, written) in [
        ("report.json", "report.1.json"),
        ("dangling.json", "dangling.1.json"),
        ("to-dir.json", "to-dir.1.json"),
    ] {
        let r = run_env(
            &dir,
            &[OsStr::new("oob")],
            true,
            &[(
                "CUDABLAME_REPORT",
                os(&dir.join(name).display().to_string()),
            )],
            |_| {},
        );
        assert_eq!(r.ending, "exit 1");
        assert!(said(&r.stderr).is_empty(), "{}", r.stderr);
        let rep: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(written)).unwrap()).unwrap();
        assert_eq!(rep["culprit"]["op"]["kernel"], "oob_write");
        assert!(std::fs::symlink_metadata(dir.join(name))
            .unwrap()
            .file_type()
            .is_symlink());
    }
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious");
    assert!(
        !dir.join("victim.json").exists(),
        "the dangling symlink was followed"
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "the symlink to a directory was followed"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Arguments with invalid UTF-8, newlines, quotes and a long one: the report records them,
/// replacing what is not UTF-8, and the program sees them unchanged.
#[test]
fn odd_bytes_in_argv() {
    let long = "a".repeat(100_000);
    let args: Vec<OsString> = vec![
        bytes(b"\xff\xfe\x01"),
        os("new\nline \"quoted\" \\"),
        os(&long),
        os("oob"),
    ];
    let args: Vec<&OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let dir = scratch().join("argv");
    let plain = run_env(&dir, &args, false, &[], |_| {});
    let r = run_env(
        &dir,
        &args,
        true,
        &[("CUDABLAME_REPORT", os("argv.json"))],
        |_| {},
    );
    assert_same_run(
        "argv",
        (&plain.ending, &plain.stdout),
        (&r.ending, &r.stdout),
        &r.stderr,
    );
    let rep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("argv.json")).unwrap()).unwrap();
    let argv: Vec<&str> = rep["process"]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv.len(), 5);
    assert_eq!(argv[1], "\u{fffd}\u{fffd}\u{1}");
    assert_eq!(argv[2], "new\nline \"quoted\" \\");
    assert_eq!(argv[3].len(), 100_000);
}

/// A stderr whose reader went away: writing the text report there must not kill the program
/// with SIGPIPE (it would not have written there itself).
#[test]
fn a_broken_stderr_pipe_does_not_kill_the_program() {
    for shim_on in [false, true] {
        let mut cmd = command(&scenarios(), &["oob"]);
        cmd.env("CUDABLAME_REPORT", "off");
        if shim_on {
            cmd.env("LD_PRELOAD", shim());
        }
        let mut child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stderr.take()); // nobody reads stderr any more
        let status = child.wait().unwrap();
        assert_eq!(ending(&status), "exit 1", "shim {shim_on}");
    }
}

/// A program that changes its working directory after it started: a relative report or trace
/// path is relative to where it started, as `cudablame run` checked it (found by a fresh-user
/// trial: the report went to the program's new folder, or was lost where that folder had no
/// `reports/`), and the text names the path written.
#[test]
fn a_relative_report_path_stays_where_the_program_started() {
    let dir = scratch().join("moved");
    let _ = std::fs::remove_dir_all(&dir);
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(dir.join("reports")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let r = run_env(
        &dir,
        &[OsStr::new("oob")],
        true,
        &[
            ("SCENARIO_CHDIR", elsewhere.clone().into_os_string()),
            ("CUDABLAME_REPORT", os("reports/r.json")),
            ("CUDABLAME_TRACE", os("t-%p.json")),
        ],
        |_| {},
    );
    assert!(said(&r.stderr).is_empty(), "{}", r.stderr);
    let report = dir.join("reports/r.json");
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("the report where it started"))
            .unwrap();
    assert_eq!(written["culprit"]["op"]["kernel"], "oob_write");
    assert!(
        r.stderr.contains(&report.display().to_string()),
        "{}",
        r.stderr
    );
    let traces: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("t-"))
        .collect();
    assert_eq!(traces.len(), 1, "the trace where it started");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

/// The JSON report files under `dir`, any depth.
fn reports_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().filter_map(|e| e.ok()) {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                found.push(p);
            }
        }
    }
    found
}

/// A start folder renamed while the program runs (found by a break-it review: the report went
/// to the start folder's old path, which names nothing now, and was lost, where before it was
/// written in the current folder): the program that stayed where it started writes its report
/// there under the folder's new name (the start folder renamed, or a parent of it); one that
/// moved out before its start folder was renamed away writes it in its current folder. No
/// "cannot write" line in any case, and the program ends as without cudablame.
#[test]
fn a_renamed_start_folder_still_gets_the_report() {
    let root = scratch().join("renamed-start");
    let _ = std::fs::remove_dir_all(&root);
    let cases: [(&str, &str, &str, Option<&str>, &str); 3] = [
        // start (under root), renamed from, to, moved to, where the report must be
        ("a", "a", "b", None, "b/reports"),
        ("p/a", "p", "q", None, "q/a/reports"),
        ("a", "a", "gone", Some("run"), "run/reports"),
    ];
    for (start, from, to, moved, expect) in cases {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(start).join("reports")).unwrap();
        std::fs::create_dir_all(root.join("run/reports")).unwrap();
        let mut env = vec![
            (
                "SCENARIO_RENAME",
                format!("{}:{}", root.join(from).display(), root.join(to).display()).into(),
            ),
            ("CUDABLAME_REPORT", os("reports/r.json")),
        ];
        if let Some(m) = moved {
            env.push(("SCENARIO_CHDIR", root.join(m).into_os_string()));
        }
        let r = run_env(&root.join(start), &[OsStr::new("oob")], true, &env, |_| {});
        assert!(
            said(&r.stderr).is_empty(),
            "{start} {from}->{to}: {}",
            r.stderr
        );
        assert_eq!(
            reports_under(&root),
            vec![root.join(expect).join("r.json")],
            "{start} {from}->{to}: {}",
            r.stderr
        );
        if moved.is_some() {
            // Named in full: a relative path would read as the user's own folder (a review).
            let full = root.join(expect).join("r.json").display().to_string();
            assert!(r.stderr.contains(&full), "{full}: {}", r.stderr);
        }
        // The same run without cudablame ends the same way.
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(start).join("reports")).unwrap();
        std::fs::create_dir_all(root.join("run/reports")).unwrap();
        let plain = run_env(&root.join(start), &[OsStr::new("oob")], false, &env, |_| {});
        assert_eq!(r.ending, plain.ending);
    }
}

/// A program started in a folder whose name is not UTF-8 that then moved elsewhere (found by a
/// break-it review: the start folder's path was made a string, its odd byte became U+FFFD, and
/// the report was lost with "No such file or directory"): the report lands in the start folder.
#[test]
fn a_start_folder_named_in_odd_bytes_gets_the_report() {
    let root = scratch().join("odd-start");
    let _ = std::fs::remove_dir_all(&root);
    let start = root.join(OsStr::from_bytes(b"run-\xff\xfe"));
    std::fs::create_dir_all(start.join("reports")).unwrap();
    std::fs::create_dir_all(root.join("elsewhere")).unwrap();
    let r = run_env(
        &start,
        &[OsStr::new("oob")],
        true,
        &[
            ("SCENARIO_CHDIR", root.join("elsewhere").into_os_string()),
            ("CUDABLAME_REPORT", os("reports/r.json")),
            ("CUDABLAME_TRACE", os("reports/")),
        ],
        |_| {},
    );
    assert!(said(&r.stderr).is_empty(), "{}", r.stderr);
    let mut found = reports_under(&root);
    found.sort();
    assert_eq!(found.len(), 2, "{found:?} {}", r.stderr);
    assert!(
        found.iter().all(|p| p.starts_with(start.join("reports"))),
        "{found:?}"
    );
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(start.join("reports/r.json")).unwrap()).unwrap();
    assert_eq!(written["culprit"]["op"]["kernel"], "oob_write");
}

/// The text report on a stderr redirected to a file under `ulimit -f`: the write past the limit
/// fails (EFBIG), it does not kill the program with SIGXFSZ (exit 153 from a shell, stdout cut).
#[test]
fn stderr_to_a_file_past_the_file_size_limit_keeps_the_program() {
    let dir = scratch().join("fsize-stderr");
    std::fs::create_dir_all(&dir).unwrap();
    let run = |shim_on: bool| {
        let err = std::fs::File::create(dir.join(format!("err-{shim_on}.txt"))).unwrap();
        let mut cmd = command(&scenarios(), &["oob"]);
        cmd.current_dir(&dir)
            .env("CUDABLAME_REPORT", "off")
            .stderr(err);
        if shim_on {
            cmd.env("LD_PRELOAD", shim());
        }
        limit_file_size(&mut cmd, 1024);
        let out = cmd.output().unwrap();
        (out.status.code(), out.status.signal(), out.stdout)
    };
    use std::os::unix::process::ExitStatusExt;
    let plain = run(false);
    let shimmed = run(true);
    assert_eq!(shimmed.1, None, "killed by signal {:?}", shimmed.1);
    assert_eq!(shimmed.0, plain.0);
    // Less the pid lines.
    let rest = |o: &[u8]| {
        String::from_utf8_lossy(o)
            .lines()
            .filter(|l| !l.starts_with("pid=") && !l.starts_with("main_tid="))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(rest(&shimmed.2), rest(&plain.2));
}

/// Runs `cmd` under a file size limit (`ulimit -f`) of `bytes`: a write past it fails with
/// EFBIG and raises SIGXFSZ.
fn limit_file_size(cmd: &mut Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc_rlimit {
                cur: bytes,
                max: bytes,
            };
            if setrlimit(1, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
