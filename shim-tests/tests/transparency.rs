//! The shim never changes what the program sees: same output and exit status with and without it.

mod common;
use common::*;

#[test]
fn same_results_with_and_without_the_shim() {
    let prog = compile("scenarios", false);
    // With the report each run must (or must not) leave: a sticky fault gets one, a correct run
    // and a launch refused by itself (not sticky, reported in one quiet line) none.
    for (args, reported) in [
        (&["ok"][..], false),
        (&["oob"], true),
        (&["--ptds", "oob"], true),
        (&["launch_error"], false),
        (&["side_stream"], true),
        (&["capture"], true),
    ] {
        let plain = run(&prog, args, false, &[]);
        let shimmed = run(&prog, args, true, &[]);
        // pid and tids differ between runs; everything else the program printed must not.
        let strip = |s: &str| -> Vec<String> {
            s.lines()
                .filter(|l| {
                    !l.contains("pid=") && !l.contains("_tid=") && !l.starts_with("stream_b=")
                })
                .map(String::from)
                .collect()
        };
        assert_eq!(strip(&plain.stdout), strip(&shimmed.stdout), "{args:?}");
        assert_eq!(plain.code, shimmed.code, "{args:?}");
        assert_eq!(
            shimmed.report.is_some(),
            reported,
            "{args:?}: {}",
            shimmed.stderr
        );
    }
}

#[test]
fn a_correct_program_gets_no_report_and_no_output_from_the_shim() {
    let r = run(&compile("scenarios", false), &["ok"], true, &[]);
    assert_eq!(r.code, 0);
    assert!(r.report.is_none());
    assert_eq!(
        r.stderr, "",
        "the shim printed something for a correct program"
    );
}

/// Names listed by `nm -D --defined-only LIB` (the exported functions).
fn exported(lib: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success(), "nm {}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(String::from))
        .collect()
}

/// Every hooked entry point, called through the shim and directly on the fake driver with
/// identical arguments (successful and failing calls, NULL and per-thread streams, during a
/// capture, after a sticky error), reached each way programs reach the driver: the return code
/// and every out-value (handles, pointers, copied data, node counts) must be the same.
#[test]
fn every_entry_point_returns_exactly_what_the_driver_returns() {
    let prog = compile("entry_points", false);
    let module = scratch().join("module.ptx");
    std::fs::write(&module, "// fake: quick\n").unwrap();
    let module = module.display().to_string();

    // The names the shim exports as hooked entry points (everything else it exports is the
    // resolvers and dlsym), and those the fake driver implements.
    let hooked: Vec<String> = exported(&shim())
        .into_iter()
        .filter(|n| {
            n.starts_with("cu") && !n.starts_with("cuda") && !n.starts_with("cuGetProcAddress")
        })
        .collect();
    let driver: std::collections::HashSet<String> = exported(&driver_dir().join("libcuda.so.1"))
        .into_iter()
        .collect();
    let listed = run(&prog, &["--list"], false, &[]).stdout;
    let listed: Vec<&str> = listed.lines().collect();
    for name in &hooked {
        assert!(
            listed.contains(&name.as_str()),
            "{name} is hooked but programs/entry_points.c does not call it: add it"
        );
    }
    for name in &listed {
        assert!(
            hooked.iter().any(|h| h == name),
            "programs/entry_points.c lists {name}, which the shim does not export"
        );
    }
    let implemented: Vec<&String> = hooked.iter().filter(|n| driver.contains(*n)).collect();

    let mut baseline: Option<(String, Vec<String>)> = None;
    let mut compared = 0;
    for way in ["dlsym", "default", "gpa"] {
        for shim_on in [false, true] {
            let r = run(&prog, &[way, &module], shim_on, &[]);
            let label = format!(
                "{way} {}",
                if shim_on { "with the shim" } else { "without" }
            );
            assert_eq!(r.code, 0, "{label}: {}\n{}", r.stdout, r.stderr);
            // Where each name was found: the shim's wrapper for every hooked function the driver
            // has, nothing for the others (the shim must not make absent functions appear).
            for line in r.stdout.lines().filter_map(|l| l.strip_prefix("resolved ")) {
                let (name, module) = line.split_once(' ').unwrap();
                if !hooked.iter().any(|h| h == name) {
                    continue;
                }
                let want = match (driver.contains(name), shim_on) {
                    (false, _) => "-",
                    (true, true) => "libcudablame.so",
                    (true, false) => "libcuda.so.1",
                };
                assert_eq!(module, want, "{label}: {name}");
            }
            let calls: Vec<String> = r
                .stdout
                .lines()
                .filter(|l| !l.starts_with("resolved "))
                .map(String::from)
                .collect();
            compared += calls.iter().filter(|l| l.starts_with("call ")).count();
            match &baseline {
                None => {
                    for name in &implemented {
                        assert!(
                            calls
                                .iter()
                                .any(|l| l.starts_with(&format!("call {name} "))),
                            "{name} was never called"
                        );
                    }
                    baseline = Some((label, calls));
                }
                Some((base_label, base)) => {
                    for (i, (a, b)) in base.iter().zip(&calls).enumerate() {
                        assert_eq!(a, b, "line {i}: {base_label} vs {label}");
                    }
                    assert_eq!(base.len(), calls.len(), "{base_label} vs {label}");
                }
            }
        }
    }
    println!(
        "transparency: {} hooked entry points ({} implemented by the fake driver, all called), \
         {compared} calls compared over 3 ways x with/without the shim",
        hooked.len(),
        implemented.len()
    );
}

/// What the program reads in `errno` is its own: at `main` (ISO C: 0), and after each hooked
/// call what the driver left (the program's 4242 where the driver set none), also after the
/// sticky error's report was written, with a deleted start folder (whose `getcwd` fails) and
/// with the report's folder missing (one more failed file call). Found by a break-it review:
/// `errno` 2 (`ENOENT`) after the reporting `cuStreamSynchronize`, and at `main` in a deleted
/// folder. Likewise `dlerror()` after the reporting call says nothing, as without cudablame
/// (it said `...libcudablame.so: undefined symbol: cudaGetErrorString`).
#[test]
fn errno_is_the_programs_own_around_every_call() {
    let prog = compile_with("errno_kept", "errno_kept", &["-lcuda"]);
    let prog = prog.to_str().unwrap();
    // A stand-in CUDA runtime, for a case that opens it RTLD_LOCAL.
    let runtime = compile_with(
        "two_runtimes",
        "libcudart.so.12",
        &["-shared", "-fPIC", "-DRUNTIME=12"],
    );
    let runtime = runtime.to_str().unwrap();
    // (case, the start folder deleted before the program runs, CUDABLAME_REPORT, the driver's
    // errno on every call (FAKE_CUDA_ERRNO; "": it leaves errno alone), program argument)
    let cases = [
        ("plain", false, "r.json", "", ""),
        ("deleted folder", true, "r.json", "", ""),
        (
            "missing report folder",
            false,
            "/nonexistent-cudablame/r.json",
            "",
            "",
        ),
        ("driver sets errno", false, "r.json", "77", ""),
        // Paused before the first call (a review: the general path's guard put the program's
        // 4242 back over the driver's 77).
        ("driver sets errno, paused", false, "r.json", "77", "paused"),
        // A runtime only in a library's local scope: the report's failed lookup of its error
        // strings left its dlerror message (a review).
        ("runtime loaded RTLD_LOCAL", false, "r.json", "", runtime),
    ];
    for (n, (label, delete, report, driver_errno, arg)) in cases.into_iter().enumerate() {
        let outputs: Vec<String> = [false, true]
            .iter()
            .map(|&shim_on| {
                // Each run in a folder of its own (a report the library writes instead of a
                // missing folder's lands there), started by a shell that may delete it first.
                let dir = scratch().join(format!("errno-{n}-{shim_on}"));
                std::fs::create_dir_all(&dir).unwrap();
                let script = if delete {
                    "cd \"$0\" && rmdir \"$0\" && exec \"$1\" $2"
                } else {
                    "cd \"$0\" && exec \"$1\" $2"
                };
                let args = ["-c", script, dir.to_str().unwrap(), prog, arg];
                let mut sh = command_default_markers(std::path::Path::new("sh"), &args);
                sh.env("CUDABLAME_REPORT", report);
                if !driver_errno.is_empty() {
                    sh.env("FAKE_CUDA_ERRNO", driver_errno);
                }
                if shim_on {
                    sh.env("LD_PRELOAD", shim());
                }
                let out = sh.output().unwrap();
                assert_eq!(out.status.code(), Some(0), "{label}");
                String::from_utf8_lossy(&out.stdout).into_owned()
            })
            .collect();
        let (plain, shimmed) = (&outputs[0], &outputs[1]);
        assert_eq!(printed(plain, "fault_rc"), "700", "{label}: {plain}");
        let expect = if driver_errno.is_empty() {
            "4242"
        } else {
            driver_errno
        };
        assert_eq!(printed(plain, "launch_errno"), expect, "{label}: {plain}");
        assert_eq!(printed(plain, "fault_errno"), expect, "{label}: {plain}");
        assert_eq!(printed(plain, "fault_dlerror"), "none", "{label}: {plain}");
        assert_eq!(shimmed, plain, "{label}");
    }
}
