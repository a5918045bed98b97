//! Harness for running C test programs under `libcudablame.so` against the fake driver.
//!
//! Needs `cargo build --release --workspace` first (scripts/test.sh does it): the tests use
//! `target/release/libcudablame.so` and `target/release/libfakecuda.so`.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `target/<profile>`: where cargo put this test binary's siblings.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

pub fn shim() -> PathBuf {
    let p = target_dir().join("libcudablame.so");
    assert!(
        p.exists(),
        "{} missing: run `cargo build --release --workspace` (scripts/test.sh)",
        p.display()
    );
    p
}

/// A directory holding the fake driver as `libcuda.so.1` (and `libcuda.so` for `-lcuda`).
pub fn driver_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let fake = target_dir().join("libfakecuda.so");
        assert!(
            fake.exists(),
            "{} missing: run `cargo build --release --workspace`",
            fake.display()
        );
        let dir = scratch().join("driver");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["libcuda.so.1", "libcuda.so"] {
            let _ = std::fs::remove_file(dir.join(name));
            std::fs::copy(&fake, dir.join(name)).unwrap();
        }
        dir
    })
}

/// A per-test-binary scratch directory (kept for inspection after a failure).
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let name = std::env::current_exe()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let dir = target_dir().join("shim-tests-scratch").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

pub fn programs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("programs")
}

/// Compiles `programs/<name>.c` once per test binary (`-g -O1`, frame-pointer-free like real
/// code), linking `-lcuda` (the fake) when `link_cuda`.
pub fn compile(name: &str, link_cuda: bool) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let out = scratch().join(if link_cuda {
        format!("{name}-linked")
    } else {
        name.to_string()
    });
    if out.exists() {
        return out;
    }
    let src = programs_dir().join(format!("{name}.c"));
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.args(["-g", "-O1", "-fno-inline", "-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-I")
        .arg(programs_dir());
    if link_cuda {
        // scenarios.c calls the driver's symbols directly under LINKED.
        cc.arg("-DLINKED")
            .arg("-L")
            .arg(driver_dir())
            .arg("-lcuda")
            .arg(format!("-Wl,-rpath,{}", driver_dir().display()));
    }
    cc.args(["-ldl", "-lpthread"]);
    let st = cc.status().expect("run cc");
    assert!(st.success(), "compiling {} failed", src.display());
    out
}

/// What one run produced.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// The JSON report, if one was written.
    pub report: Option<Value>,
    pub report_path: PathBuf,
}

/// The marker policy every test program runs with unless the test sets `CUDABLAME_MARKERS`
/// itself: `every`, a progress marker after each op (issue 21 made a sparse budget the
/// default). Most integration tests check the exact proof machinery (which op a marker proves,
/// `exact` verdicts on the op after the last marker), so their assertions keep the values they
/// had with a marker after every op; the tests of the default policy set
/// `CUDABLAME_MARKERS=budget` (or leave it to `command_default_markers`).
pub const TEST_MARKERS: &str = "every";

/// Runs `program args` with the fake driver, under the shim when `shim` is true, with extra env
/// (`CUDABLAME_MARKERS` is [`TEST_MARKERS`] unless `env` sets it).
pub fn run(program: &Path, args: &[&str], shim_on: bool, env: &[(&str, &str)]) -> Run {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let report_path = scratch().join(format!("report-{n}.json"));
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", driver_dir())
        .env_remove("LD_PRELOAD");
    cmd.env("CUDABLAME_REPORT", &report_path);
    cmd.env("CUDABLAME_MARKERS", TEST_MARKERS);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if shim_on {
        cmd.env("LD_PRELOAD", shim());
    }
    let out = cmd.output().expect("run test program");
    let report = std::fs::read(&report_path)
        .ok()
        .map(|b| serde_json::from_slice(&b).expect("report is JSON"));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        report,
        report_path,
    }
}

impl Run {
    pub fn report(&self) -> &Value {
        self.report.as_ref().unwrap_or_else(|| {
            panic!(
                "no report at {}\nstdout:\n{}\nstderr:\n{}",
                self.report_path.display(),
                self.stdout,
                self.stderr
            )
        })
    }

    /// The culprit op.
    pub fn culprit(&self) -> &Value {
        &self.report()["culprit"]["op"]
    }

    /// Function names of the culprit's launch stack.
    pub fn culprit_functions(&self) -> Vec<String> {
        functions(&self.culprit()["stack"])
    }

    /// Sequence numbers of the report's suspects (the ops queued behind the culprit), in order.
    pub fn suspect_seqs(&self) -> Vec<u64> {
        (self.report()["suspects"].as_array())
            .map(|a| a.iter().filter_map(|o| o["seq"].as_u64()).collect())
            .unwrap_or_default()
    }

    /// A `key=value` line the test program printed on stdout.
    pub fn printed(&self, key: &str) -> String {
        printed(&self.stdout, key)
    }

    /// The `cudablame stats:` line on stderr (`CUDABLAME_STATS=on`, `record::cost::line`).
    pub fn stats_line(&self) -> &str {
        (self.stderr.lines())
            .find(|l| l.starts_with("cudablame stats:"))
            .unwrap_or_else(|| panic!("no stats line:\n{}", self.stderr))
    }
}

/// The number right after `key` in a line (a stats line's `marked N`).
pub fn number_after(line: &str, key: &str) -> u64 {
    let at = line
        .find(key)
        .unwrap_or_else(|| panic!("no {key:?} in {line}"))
        + key.len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("no number after {key:?} in {line}"))
}

/// The value of the `key=value` line in `stdout` (a test program's output), trimmed.
pub fn printed(stdout: &str, key: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("program printed no {key}=; stdout:\n{stdout}"))
        .trim()
        .to_string()
}

pub fn functions(stack: &Value) -> Vec<String> {
    stack
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["function"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Compiles `programs/<source>.c` once per test binary into `out_name` with extra compiler and
/// linker arguments (`-shared -fPIC` for a library, `-DNAME`, `-lcuda`, ...).
pub fn compile_with(source: &str, out_name: &str, extra: &[&str]) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let out = scratch().join(out_name);
    if out.exists() {
        return out;
    }
    let src = programs_dir().join(format!("{source}.c"));
    let mut cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cc.args(["-g", "-O1", "-fno-inline", "-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-I")
        .arg(programs_dir())
        .arg("-L")
        .arg(driver_dir())
        .arg(format!("-Wl,-rpath,{}", driver_dir().display()))
        .arg(format!("-Wl,-rpath,{}", scratch().display()))
        .arg("-L")
        .arg(scratch())
        .args(extra)
        .args(["-ldl", "-lpthread"]);
    let st = cc.status().expect("run cc");
    assert!(st.success(), "compiling {} failed", src.display());
    out
}

/// A command for `program args` with the fake driver on the library path, no preload and no
/// `CUDABLAME_*` variable of the test environment but `CUDABLAME_MARKERS` = [`TEST_MARKERS`]
/// (a later `cmd.env("CUDABLAME_MARKERS", ...)` or `env_remove` overrides it).
pub fn command(program: &Path, args: &[&str]) -> Command {
    let mut cmd = command_default_markers(program, args);
    cmd.env("CUDABLAME_MARKERS", TEST_MARKERS);
    cmd
}

/// [`command`] without `CUDABLAME_MARKERS`: cudablame's own default marker policy.
pub fn command_default_markers(program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", driver_dir())
        .env_remove("LD_PRELOAD");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("CUDABLAME_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// Runs `cmd` to completion, killing it and failing the test after `limit` (a hang is a bug).
/// Returns its output and how long it ran.
pub fn output_within(
    cmd: &mut Command,
    limit: std::time::Duration,
) -> (std::process::Output, std::time::Duration) {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let started = std::time::Instant::now();
    // Its own process group: a hang kills every process of the test (a hung forked child keeps
    // the output pipes open, and the readers below would wait for it forever).
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn test program");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if started.elapsed() > limit {
            // The whole group (its id is the program's pid): `kill -KILL -PID`.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.kill();
            let _ = child.wait();
            let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
            panic!("{cmd:?} still running after {limit:?}: killed (hang)\nstderr:\n{stderr}");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let stdout = reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    (
        std::process::Output {
            status,
            stdout,
            stderr,
        },
        started.elapsed(),
    )
}

/// How a process ended, comparable between runs: `exit N` or `signal N`.
pub fn ending(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "unknown".into(),
    }
}

/// Asserts that a run under cudablame ended as the run without it did and printed the same
/// stdout, lines that differ between runs by nature aside ([`stable_lines`]); `label` names the
/// case, `detail` (the shimmed run's stderr, say) is shown on failure. Each side is (ending,
/// stdout), as [`ending`] writes it.
#[track_caller]
pub fn assert_same_run(label: &str, plain: (&str, &str), shimmed: (&str, &str), detail: &str) {
    assert_eq!(plain.0, shimmed.0, "{label}: ending\n{detail}");
    assert_eq!(
        stable_lines(plain.1),
        stable_lines(shimmed.1),
        "{label}: stdout\n{detail}"
    );
}

/// The lines of `text` without those that differ between runs of one program by nature (pids,
/// thread ids, stream addresses).
pub fn stable_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.contains("pid=") && !l.contains("_tid=") && !l.starts_with("stream_b="))
        .map(String::from)
        .collect()
}
