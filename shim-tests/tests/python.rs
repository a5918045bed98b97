//! Python frames: python3 scripts launch through ctypes (which releases the GIL around the foreign
//! call, like PyTorch) against the fake driver under the shim, and the report must name the
//! launching Python line, innermost first, for the culprit and for the reporting call.
//! `programs/py_launch.py` holds the scenarios; its `# @name` comments mark the lines checked.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    programs_dir().join("py_launch.py")
}

/// The line of the `# @name` marker in py_launch.py.
fn marker(name: &str) -> u64 {
    let text = std::fs::read_to_string(script()).unwrap();
    let tag = format!("# @{name}");
    let hits: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim_end().ends_with(&tag))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(hits.len(), 1, "marker {tag} in py_launch.py");
    hits[0] as u64
}

/// An interpreter to run the scripts with: `what` says which (version, shared or static).
struct Python {
    exe: PathBuf,
    what: String,
    version: (u32, u32),
}

/// Asks an interpreter what it is: `Some` for CPython 3.x with the GIL.
fn probe(exe: &Path) -> Option<(Python, PathBuf)> {
    let code = "import sys, os; \
        print(sys.implementation.name, sys.version_info[0], sys.version_info[1], \
        int(any('libpython' in l for l in open('/proc/self/maps'))), \
        int(getattr(sys, '_is_gil_enabled', lambda: True)()), os.path.realpath(sys.executable))";
    let out = Command::new(exe).args(["-c", code]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let f: Vec<&str> = text.split_whitespace().collect();
    if !out.status.success() || f.len() < 6 || f[0] != "cpython" || f[4] != "1" {
        return None;
    }
    let version = (f[1].parse().ok()?, f[2].parse().ok()?);
    let linkage = if f[3] == "1" {
        "shared libpython"
    } else {
        "static"
    };
    let what = format!(
        "CPython {}.{} ({linkage}, {})",
        version.0,
        version.1,
        exe.display()
    );
    Some((
        Python {
            exe: exe.to_path_buf(),
            what,
            version,
        },
        PathBuf::from(f[5]),
    ))
}

/// `python3` from PATH, as CI has it (3.11). Panics if there is none: these tests need it.
fn python3() -> Python {
    probe(Path::new("python3"))
        .map(|p| p.0)
        .expect("python3 (CPython with the GIL) is needed for the Python-frame tests")
}

/// Every CPython 3.10 to 3.13 found on this machine (PATH, pyenv, /usr/bin, /usr/local/bin),
/// each executable once.
fn installed_pythons() -> Vec<Python> {
    let mut candidates: Vec<PathBuf> = vec!["python3".into()];
    for minor in 10..=13 {
        candidates.push(format!("python3.{minor}").into());
        candidates.push(format!("/usr/bin/python3.{minor}").into());
        candidates.push(format!("/usr/local/bin/python3.{minor}").into());
    }
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    if let Some(Ok(dirs)) = pyenv.map(|p| std::fs::read_dir(p.join("versions"))) {
        for d in dirs.flatten() {
            let name = d.file_name().to_string_lossy().into_owned();
            let mut parts = name.split('.');
            if let (Some("3"), Some(minor)) = (parts.next(), parts.next()) {
                candidates.push(d.path().join("bin").join(format!("python3.{minor}")));
            }
        }
    }
    let mut seen = Vec::new();
    let mut found = Vec::new();
    for c in candidates {
        if let Some((p, real)) = probe(&c) {
            if (10..=13).contains(&p.version.1) && p.version.0 == 3 && !seen.contains(&real) {
                seen.push(real);
                found.push(p);
            }
        }
    }
    found
}

fn run_py(py: &Python, scenario: &str, env: &[(&str, &str)]) -> Run {
    let work = tempfile::tempdir_in(scratch()).unwrap();
    let script = script();
    let r = run(
        &py.exe,
        &[
            script.to_str().unwrap(),
            scenario,
            work.path().to_str().unwrap(),
        ],
        true,
        env,
    );
    assert_eq!(
        r.printed("sync_rc"),
        "700",
        "{}: {}\n{}",
        py.what,
        r.stdout,
        r.stderr
    );
    r
}

fn frame(f: &Value) -> (String, String, u64) {
    (
        f["function"].as_str().unwrap_or("").to_string(),
        f["file"].as_str().unwrap_or("").to_string(),
        f["line"].as_u64().unwrap_or(0),
    )
}

/// The checks every scenario shares: the culprit is `bad`, its innermost Python frame is the
/// launch call in launch_bad(), and every frame above it is what Python itself reported
/// (`callers=` in the output: file, line and name of each caller); the reporting call's frame is
/// the cuCtxSynchronize line of main(). Returns the culprit op.
fn assert_python_frames(py: &Python, r: &Run) -> Value {
    let who = &py.what;
    let script = script().to_string_lossy().into_owned();
    let op = r.culprit().clone();
    assert_eq!(op["kernel"], "bad", "{who}: {}", r.stderr);
    assert_eq!(op["thread"].to_string(), r.printed("launch_tid"), "{who}");
    let stack = op["python_stack"]
        .as_array()
        .unwrap_or_else(|| panic!("{who}: no python_stack: {op}"));
    assert!(!stack.is_empty(), "{who}: empty python_stack\n{}", r.stderr);
    assert_eq!(
        frame(&stack[0]),
        ("launch_bad".into(), script.clone(), marker("launch_bad")),
        "{who}: {stack:?}"
    );
    let printed = r.printed("callers");
    let callers: Vec<&str> = printed.split('|').collect();
    for (i, c) in callers.iter().enumerate() {
        let (file_line, name) = c.rsplit_once(':').unwrap();
        let (file, line) = file_line.rsplit_once(':').unwrap();
        let (f_name, f_file, f_line) = frame(&stack[i + 1]);
        // `function` is the qualified name (3.11+: `Thread.run`), Python printed `co_name`.
        assert_eq!(
            f_name.rsplit('.').next(),
            Some(name),
            "{who}: frame {} of {stack:?}",
            i + 1
        );
        assert_eq!(
            (f_file.as_str(), f_line.to_string().as_str()),
            (file, line),
            "{who}: frame {} of {stack:?}",
            i + 1
        );
    }
    let rep = &r.report()["reporting_call"];
    assert_eq!(rep["entry_point"], "cuCtxSynchronize");
    assert_eq!(rep["thread"].to_string(), r.printed("main_tid"));
    let rstack = rep["python_stack"].as_array().unwrap();
    assert_eq!(
        frame(&rstack[0]),
        ("main".into(), script, marker("sync")),
        "{who}: {rstack:?}"
    );
    assert_eq!(frame(&rstack[1]).0, "<module>", "{who}");
    assert!(
        rep.get("python_note").is_none(),
        "{who}: {}",
        rep["python_note"]
    );
    op
}

#[test]
fn culprit_python_line_on_the_main_thread() {
    let py = python3();
    let r = run_py(&py, "main", &[]);
    let op = assert_python_frames(&py, &r);
    let stack = op["python_stack"].as_array().unwrap();
    assert_eq!(
        frame(&stack[1]),
        (
            "step".into(),
            script().to_string_lossy().into_owned(),
            marker("step")
        )
    );
    assert_eq!(frame(&stack[2]).0, "main");
    assert_eq!(
        stack.len(),
        4,
        "launch_bad, step, main, <module>: {stack:?}"
    );
    assert!(op.get("python_stack_from_thread").is_none());
    assert_eq!(r.report()["culprit"]["confidence"], "exact");
    // The text report leads with the program's Python line that launched the culprit, and its code.
    let lines: Vec<&str> = r.stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("launched:"))
        .unwrap_or_else(|| panic!("no launched: line in {}", r.stderr));
    assert_eq!(
        lines[at],
        format!(
            "launched: launch_bad at {}:{}",
            script().display(),
            marker("launch_bad")
        ),
        "{}",
        r.stderr
    );
    assert!(
        lines[at + 1]
            .trim()
            .starts_with("return cuda.cuLaunchKernel(bad, 8"),
        "{}",
        r.stderr
    );
    // Earlier ops in the stream listing carry no stacks; the culprit's native stack is still there.
    assert!(!op["stack"].as_array().unwrap().is_empty());
}

#[test]
fn culprit_python_line_on_a_threading_thread() {
    let py = python3();
    let r = run_py(&py, "thread", &[]);
    let op = assert_python_frames(&py, &r);
    assert_ne!(r.printed("launch_tid"), r.printed("main_tid"));
    let stack = op["python_stack"].as_array().unwrap();
    assert_eq!(frame(&stack[1]).0, "step");
    assert_eq!(frame(&stack[2]).0, "in_thread");
    assert!(frame(&stack[3]).1.ends_with("threading.py"), "{stack:?}");
    assert!(op.get("python_stack_from_thread").is_none());
}

#[test]
fn python_off_gives_empty_python_stacks() {
    let py = python3();
    let r = run_py(&py, "main", &[("CUDABLAME_PYTHON", "off")]);
    assert_eq!(r.culprit()["kernel"], "bad");
    assert_eq!(r.culprit()["python_stack"], serde_json::json!([]));
    assert_eq!(
        r.report()["reporting_call"]["python_stack"],
        serde_json::json!([])
    );
    assert!(r.report()["reporting_call"].get("python_note").is_none());
    assert!(
        !r.stderr.contains("python, innermost first"),
        "{}",
        r.stderr
    );
    // The native stack is unaffected.
    assert!(!r.culprit()["stack"].as_array().unwrap().is_empty());
    // Without Python frames the launching line is not the interpreter's or ctypes' own C code
    // (before: `launched: _call_function_pointer at .../Modules/_ctypes/callproc.c:923` with a
    // CPython built from source): the native stack holds no frame of the program.
    let launched = (r.stderr.lines())
        .find(|l| l.starts_with("launched:"))
        .unwrap_or_else(|| panic!("no launched: line in {}", r.stderr));
    assert_eq!(
        launched, "launched: (no program frame: see the launch stack below)",
        "{}",
        r.stderr
    );
}

/// Bytes of native stack copied per op, from the `cudablame stats:` line of `r`
/// (`native stack copy N for B bytes`).
fn copied_bytes(r: &Run) -> u64 {
    number_after(r.stats_line(), " for ")
}

/// Where launches carry Python frames the native stack copy is 3 KiB by default (the Python
/// frames name the launching line; `config::Config::python_stack_bytes`), and the culprit's
/// native stack still starts at the launch: the fake driver's `cuLaunchKernel` called through
/// ctypes (libffi). `CUDABLAME_STACK_BYTES` sets both sizes; with `CUDABLAME_PYTHON=off` the
/// native stack is all there is, and the copy keeps the 8 KiB default.
#[test]
fn python_launches_copy_3_kib_of_native_stack_unless_configured() {
    let py = python3();
    for (env, bytes) in [
        (vec![], 3072),
        (vec![("CUDABLAME_STACK_BYTES", "12288")], 12288),
        // The smallest size taken.
        (vec![("CUDABLAME_STACK_BYTES", "1024")], 1024),
        // A bad value keeps both defaults (before, the C default was used for both).
        (vec![("CUDABLAME_STACK_BYTES", "3")], 3072),
        (vec![("CUDABLAME_PYTHON", "off")], 8192),
    ] {
        let mut env = env.clone();
        // Every launch's own copy (by default launches from one native path share one: the
        // two good launches here, `stack::sites`).
        env.extend([("CUDABLAME_STATS", "on"), ("CUDABLAME_STACK", "every")]);
        let r = run_py(&py, "main", &env);
        assert_eq!(copied_bytes(&r), bytes, "{env:?}: {}", r.stderr);
        if env[0].1 == "3" {
            let warned: Vec<&str> = (r.stderr.lines())
                .filter(|l| l.contains("CUDABLAME_STACK_BYTES"))
                .collect();
            assert_eq!(
                warned,
                vec![
                    "cudablame: CUDABLAME_STACK_BYTES=\"3\" is not a number in 1024..=65536; using 8192 \
                     (3072 in a CPython process)"
                ],
                "{}",
                r.stderr
            );
        }
        assert_eq!(r.culprit()["kernel"], "bad");
        let stack = r.culprit()["stack"].as_array().unwrap();
        let modules: Vec<&str> = stack
            .iter()
            .map(|f| f["module"].as_str().unwrap_or(""))
            .collect();
        assert!(
            modules.iter().any(|m| m.contains("ffi")),
            "{env:?}: the launch through libffi is in the culprit's native stack: {stack:?}"
        );
    }
}

/// Launches from one launch site (one Python stack, one kernel) share one native stack copy
/// (`stack::sites`): up to 50 launches of `nth` from one line copy 3 KiB once, the stats count
/// one site, and the culprit, the 40th launch, still has its native stack through libffi and its
/// Python line. `CUDABLAME_STACK=every` copies every launch's stack and makes no site.
#[test]
fn launches_from_one_site_share_one_native_stack_copy() {
    let py = python3();
    let script = script().to_string_lossy().into_owned();
    for (env, every, sites) in [
        (vec![], false, 1),
        (vec![("CUDABLAME_STACK", "every")], true, 0),
    ] {
        let mut env = env.clone();
        env.push(("CUDABLAME_STATS", "on"));
        let r = run_py(&py, "sites", &env);
        let stats = r.stats_line();
        // The fake driver runs kernels on a worker of its own: launches made after the 40th
        // execution faulted are refused (sticky), so 40 to 50 launches are recorded.
        let n = number_after(stats, "cudablame stats: ");
        assert!((40..=50).contains(&n), "{stats}");
        let bytes_per_op = if every {
            3072
        } else {
            (3072.0 / n as f64).round() as u64
        };
        assert_eq!(copied_bytes(&r), bytes_per_op, "{env:?}: {stats}");
        assert_eq!(
            number_after(stats, "launch sites "),
            sites,
            "{env:?}: {stats}"
        );
        let op = r.culprit();
        assert_eq!(op["kernel"], "nth", "{env:?}: {}", r.stderr);
        assert_eq!(op["seq"], 40, "{env:?}: {}", r.stderr);
        let python = op["python_stack"].as_array().unwrap();
        assert_eq!(
            frame(&python[0]),
            ("one_site".into(), script.clone(), marker("one_site")),
            "{env:?}: {python:?}"
        );
        let modules: Vec<&str> = (op["stack"].as_array().unwrap().iter())
            .map(|f| f["module"].as_str().unwrap_or(""))
            .collect();
        assert!(
            modules.iter().any(|m| m.contains("ffi")),
            "{env:?}: the culprit's native stack goes through libffi: {modules:?}"
        );
        // The report says whose native frames these are: the site's first launch's.
        assert_eq!(
            op["stack_from_site"].as_bool().unwrap_or(false),
            !every,
            "{op}"
        );
        assert_eq!(
            r.stderr
                .contains("launched by cuLaunchKernel from (native frames as at its launch site's first launch):"),
            !every,
            "{}",
            r.stderr
        );
    }
}

/// A launch site's copy names the modules loaded when it was taken: a launch from the same
/// Python line through a library unloaded and loaded again since is another site. It showed
/// the first launch's copy, whose library frame then read "unloaded module" for a culprit that
/// launched through the library loaded now.
#[test]
fn a_site_launched_through_a_reloaded_library_shows_that_library() {
    let py = python3();
    let lib = compile_with("dlclose_lib", "libdlc_py.so", &["-shared", "-fPIC"]);
    let r = run_py(&py, "reloaded", &[("PY_LAUNCH_LIB", lib.to_str().unwrap())]);
    let op = r.culprit();
    assert_eq!(
        (op["kernel"].as_str(), op["seq"].as_u64()),
        (Some("second"), Some(2))
    );
    assert_eq!(
        frame(&op["python_stack"][0]).2,
        marker("reloaded"),
        "{}",
        r.stderr
    );
    let stack = op["stack"].as_array().unwrap();
    assert!(
        functions(&op["stack"])
            .iter()
            .any(|f| f == "launch_from_plugin")
            && !stack.iter().any(|f| f["module"] == "unloaded module"),
        "{}",
        r.stderr
    ); // The culprit made its site (the library's load is new): its stack is its own, not marked
       // as a site's (it was, on every site's first launch, before the fifteenth session).
    assert!(op.get("stack_from_site").is_none(), "{op}");
    assert!(
        !r.stderr.contains("as at its launch site's first launch"),
        "{}",
        r.stderr
    );
}

/// One Python line reaching one kernel by two native paths (found by review: the second
/// launch, the culprit, showed the first one's path, `via_first_path`): a launch with a known
/// site's key whose stack does not hold the site's return addresses gets a site of its own
/// (until the twenty-second session it copied its own stack at every launch).
#[test]
fn a_launch_by_another_native_path_from_a_site_shows_its_own_path() {
    let py = python3();
    let lib = compile_with("two_paths_lib", "libtwo_paths.so", &["-shared", "-fPIC"]);
    let r = run_py(
        &py,
        "two_paths",
        &[
            ("PY_LAUNCH_LIB", lib.to_str().unwrap()),
            ("CUDABLAME_STATS", "on"),
        ],
    );
    let op = r.culprit();
    assert_eq!(
        (op["kernel"].as_str(), op["seq"].as_u64()),
        (Some("second"), Some(2)),
        "{}",
        r.stderr
    );
    assert_eq!(frame(&op["python_stack"][0]).2, marker("two_paths"));
    let f = functions(&op["stack"]);
    assert!(
        f.iter().any(|n| n == "via_second_path") && !f.iter().any(|n| n == "via_first_path"),
        "{f:?}"
    );
    assert!(op.get("stack_from_site").is_none(), "{op}");
    let stats = r.stats_line();
    // A site per path; no launch copied its own stack; each path's first launch looked past
    // the thread's recent sites (the second found the first path's site there, not its own).
    assert_eq!(number_after(stats, "launch sites "), 2, "{stats}");
    assert_eq!(number_after(stats, "launch sites 2 ("), 0, "{stats}");
    assert_eq!(
        number_after(stats, "launches by another native path, "),
        2,
        "{stats}"
    );
}

/// A thread's cache of recent launch sites holds a loop's few hundred: 200 sites launched 5
/// times miss it little more than on their first launches (direct mapped with 256 slots, 60%
/// of such a loop's launches missed it and took the site table's lock, simulated driver).
#[test]
fn a_loop_over_200_launch_sites_stays_in_the_threads_cache() {
    let py = python3();
    let r = run_py(&py, "many_sites", &[("CUDABLAME_STATS", "on")]);
    assert_eq!(r.culprit()["kernel"], "bad", "{}", r.stderr);
    let stats = r.stats_line();
    let sites = number_after(stats, "launch sites ");
    assert!(sites >= 200, "{stats}");
    let missed = number_after(stats, "launches by another native path, ");
    // Every site's first launch misses; of the 800 later ones at most 5% may (a set of the
    // cache holding more sites than its 4 entries).
    assert!(missed >= sites && missed <= sites + 40, "{stats}");
}

#[test]
fn depth_limit_keeps_the_innermost_frames() {
    let py = python3();
    let r = run_py(&py, "main", &[("CUDABLAME_PYTHON_DEPTH", "2")]);
    let stack = r.culprit()["python_stack"].as_array().unwrap().clone();
    assert_eq!(frame(&stack[0]).0, "launch_bad");
    assert_eq!(frame(&stack[1]).0, "step");
    assert_eq!(
        stack.len(),
        3,
        "two frames and the truncation mark: {stack:?}"
    );
    assert!(frame(&stack[2]).0.contains("CUDABLAME_PYTHON_DEPTH"));
}

/// The backward pass, with a stand-in for torch: the caller launches the initial gradient inside
/// `torch.autograd.backward` (torch/autograd/__init__.py), then waits while a thread named
/// `pt_autograd_0` runs a custom backward written in Python that launches the faulting kernel.
/// The culprit shows the worker's own frames, then the caller's, marked as borrowed.
fn assert_backward(py: &Python, r: &Run) {
    let who = &py.what;
    let op = assert_python_frames(py, r);
    let stack = op["python_stack"].as_array().unwrap();
    let script = script().to_string_lossy().into_owned();
    assert_eq!(
        frame(&stack[1]),
        (
            "custom_backward".into(),
            script.clone(),
            marker("custom_backward")
        ),
        "{who}"
    );
    assert!(
        frame(&stack[2])
            .1
            .ends_with("site-packages/torch/autograd/function.py"),
        "{who}: {stack:?}"
    );
    assert_eq!(
        op["python_stack_from_thread"].to_string(),
        r.printed("main_tid"),
        "{who}: {op}"
    );
    let at = op["python_stack_borrowed_from"]
        .as_u64()
        .unwrap_or_else(|| panic!("{who}: no borrowed frames: {op}")) as usize;
    let borrowed: Vec<(String, String, u64)> = stack[at..].iter().map(frame).collect();
    assert_eq!(
        borrowed[0],
        ("launch_good".into(), script.clone(), marker("launch_good")),
        "{who}: {borrowed:?}"
    );
    assert_eq!(borrowed[1].0, "backward", "{who}");
    assert!(
        borrowed[1]
            .1
            .ends_with("site-packages/torch/autograd/__init__.py"),
        "{who}: {borrowed:?}"
    );
    assert_eq!(
        borrowed[2],
        ("train_step".into(), script, marker("backward_call")),
        "{who}: {borrowed:?}"
    );
    assert_eq!(borrowed.last().unwrap().0, "<module>", "{who}");
    // The worker's own frames are exactly those Python printed (checked above): the borrowed
    // ones start right after them.
    assert_eq!(
        at,
        r.printed("callers").split('|').count() + 1,
        "{who}: {stack:?}"
    );
}

#[test]
fn backward_worker_shows_its_frames_then_the_callers() {
    let py = python3();
    let r = run_py(&py, "backward", &[]);
    assert_backward(&py, &r);
    // The text report: own frames first, torch and threading frames folded, the borrowed part said.
    let t = &r.stderr;
    let script = script().to_string_lossy().into_owned();
    assert!(
        t.contains(&format!(
            "#0  launch_bad at {script}:{}",
            marker("launch_bad")
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "#1  custom_backward at {script}:{}",
            marker("custom_backward")
        )),
        "{t}"
    );
    assert!(t.contains("... 2 frames in torch"), "{t}");
    assert!(t.contains("frames in python"), "{t}");
    assert!(
        t.contains(&format!(
            "frames of thread {}, which called backward()",
            r.printed("main_tid")
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "train_step at {script}:{}",
            marker("backward_call")
        )),
        "{t}"
    );
    // Python frames come before the native ones.
    let py_at = t.find("#0  launch_bad").unwrap();
    let native_at = t[py_at..].find("[").map(|i| py_at + i).unwrap();
    assert!(py_at < native_at);
}

/// What the `reused` scenarios of py_launch.py share: an address was reused, the culprit is the
/// `bad` kernel; returns the interpreter's name, the last generated function (`gen_N`), its N
/// and the culprit's Python stack.
fn reused_culprit(py: &Python, r: &Run) -> (String, String, String, Vec<Value>) {
    let who = py.what.clone();
    assert_ne!(
        r.printed("reused_address"),
        "none",
        "{who}: no address was reused"
    );
    let last = r.printed("last_function");
    let n = last.strip_prefix("gen_").unwrap().to_string();
    assert_eq!(r.culprit()["kernel"], "bad", "{who}");
    let stack = r.culprit()["python_stack"].as_array().unwrap().clone();
    (who, last, n, stack)
}

/// A code object freed and a new one made at its address (`reused` in py_launch.py: fresh
/// functions launch once each and are dropped, each followed by one compiled at a first line
/// none of them had, until that one lands on an address a launched one had and launches the
/// culprit): the report names the new function, its file and line, not what cudablame interned
/// for the address before (the code objects' fingerprint). Fails with the fingerprint check
/// removed (the culprit's frame was `gen_0` of `<gen 0>`).
fn assert_reused(py: &Python, r: &Run) {
    let (who, last, n, stack) = reused_culprit(py, r);
    assert_eq!(frame(&stack[0]).0, "launch_bad", "{who}: {stack:?}");
    // Compiled with 7 blank lines first: `return launch()` is line 9 of "<gen N>".
    assert_eq!(
        frame(&stack[1]),
        (last.clone(), format!("<gen {n}>"), 9),
        "{who}: {stack:?}"
    );
    assert_eq!(frame(&stack[2]).0, "reused", "{who}: {stack:?}");
}

#[test]
fn a_code_object_at_a_reused_address_is_named_as_itself() {
    let py = python3();
    let r = run_py(&py, "reused", &[]);
    assert_reused(&py, &r);
}

/// A code object freed and a new one made at its address while the launching thread's stack
/// cache (`stack::python::cache`) keeps a stack that ran the old one (`reused_cached` in
/// py_launch.py: every launch takes one path, so the culprit's stack is a kept one but for its
/// second frame's code object, of the same bytecode at the same address): the report names the
/// new function, its file and line, and the launch line above it. Fails if the cache compared
/// only code addresses and instructions (the culprit's frame was the freed `gen_N` of
/// `<gen N>` at line 2 to 8).
fn assert_reused_cached(py: &Python, r: &Run) {
    let (who, last, n, stack) = reused_culprit(py, r);
    let script = script().to_string_lossy().into_owned();
    assert_eq!(
        frame(&stack[0]),
        (
            "launch_chosen".into(),
            script.clone(),
            marker("launch_chosen")
        ),
        "{who}: {stack:?}"
    );
    assert_eq!(
        frame(&stack[1]),
        (last.clone(), format!("<gen {n}>"), 9),
        "{who}: {stack:?}"
    );
    assert_eq!(
        frame(&stack[2]),
        ("reused_cached".into(), script, marker("reused_cached")),
        "{who}: {stack:?}"
    );
}

#[test]
fn a_code_object_reused_while_its_stack_is_cached_is_named_as_itself() {
    let py = python3();
    let r = run_py(&py, "reused_cached", &[]);
    assert_reused_cached(&py, &r);
}

/// Every CPython 3.10 to 3.13 this machine has (pyenv's and the system's, shared and static
/// builds): the same exact frames from each, which checks the per-version layouts and line tables.
#[test]
fn every_installed_cpython_version() {
    let pythons = installed_pythons();
    let versions: Vec<&str> = pythons.iter().map(|p| p.what.as_str()).collect();
    eprintln!("interpreters tested: {versions:#?}");
    assert!(
        pythons.iter().any(|p| p.version == python3().version),
        "{versions:?}"
    );
    for py in &pythons {
        let r = run_py(py, "main", &[]);
        assert_python_frames(py, &r);
        let r = run_py(py, "thread", &[]);
        assert_python_frames(py, &r);
        let r = run_py(py, "backward", &[]);
        assert_backward(py, &r);
        let r = run_py(py, "reused", &[]);
        assert_reused(py, &r);
        let r = run_py(py, "reused_cached", &[]);
        assert_reused_cached(py, &r);
    }
}
