//! Process life: fork after CUDA init, exec, exit without synchronizing, `_exit`, exit while
//! another thread launches, dlclose of the driver, a second interposer that also wraps `dlsym`,
//! libraries loaded `RTLD_LOCAL` and `RTLD_DEEPBIND`. The program must behave exactly as without
//! cudablame (same stdout, same exit status), never hang, and reports must name the right process.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn life() -> PathBuf {
    compile("life", false)
}

/// One run's results, with the reports written under `dir` (pattern `report-%p.json`).
struct Outcome {
    ending: String,
    stdout: String,
    stderr: String,
    reports: Vec<Value>,
    took: Duration,
}

impl Outcome {
    fn printed(&self, key: &str) -> String {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| {
                panic!(
                    "no {key}= in stdout:\n{}\nstderr:\n{}",
                    self.stdout, self.stderr
                )
            })
            .to_string()
    }

    fn report_of(&self, pid: &str) -> &Value {
        self.reports
            .iter()
            .find(|r| {
                r["process"]["pid"]
                    .as_u64()
                    .map(|p| p.to_string())
                    .as_deref()
                    == Some(pid)
            })
            .unwrap_or_else(|| panic!("no report of pid {pid}; stderr:\n{}", self.stderr))
    }
}

fn run_in(
    dir: &Path,
    program: &Path,
    args: &[&str],
    preload: Option<String>,
    env: &[(&str, &str)],
) -> Outcome {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = command(program, args);
    cmd.env("CUDABLAME_REPORT", dir.join("report-%p.json"));
    if let Some(p) = preload {
        cmd.env("LD_PRELOAD", p);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (out, took) = output_within(&mut cmd, Duration::from_secs(60));
    let mut reports = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json") {
            reports.push(
                serde_json::from_slice(&std::fs::read(&p).unwrap()).expect("complete JSON report"),
            );
        }
    }
    Outcome {
        ending: ending(&out.status),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        reports,
        took,
    }
}

fn shim_preload() -> Option<String> {
    Some(shim().display().to_string())
}

/// Runs with and without the shim: same ending and stdout (pids and tids aside). Returns the
/// run under the shim.
fn same_as_without(name: &str, program: &Path, args: &[&str]) -> Outcome {
    let plain = run_in(
        &scratch().join(format!("{name}-plain")),
        program,
        args,
        None,
        &[],
    );
    let shimmed = run_in(
        &scratch().join(format!("{name}-shim")),
        program,
        args,
        shim_preload(),
        &[],
    );
    assert_same_run(
        name,
        (&plain.ending, &plain.stdout),
        (&shimmed.ending, &shimmed.stdout),
        &shimmed.stderr,
    );
    assert!(plain.reports.is_empty());
    shimmed
}

/// `CUDABLAME_STATS` is printed by an exit handler, which a forked child inherits: every child
/// that left with `exit` printed a stats line of its own, counting the parent's calls (a
/// fresh-user trial: 200 forks, 201 lines). Only the process that registered it prints.
#[test]
fn a_forked_child_prints_no_stats_line() {
    let r = run_in(
        &scratch().join("fork-exit-stats"),
        &life(),
        &["fork_exit"],
        shim_preload(),
        &[("CUDABLAME_STATS", "on")],
    );
    assert_eq!(r.ending, "exit 0", "{}", r.stderr);
    assert_eq!(r.printed("child_status"), "0");
    let stats: Vec<&str> = (r.stderr.lines())
        .filter(|l| l.starts_with("cudablame stats:"))
        .collect();
    assert_eq!(stats.len(), 1, "{}", r.stderr);
    assert!(
        stats[0].starts_with("cudablame stats: 3 recorded ops;"),
        "{}",
        stats[0]
    );
}

#[test]
fn forked_child_reports_its_own_error_under_its_own_pid() {
    let r = same_as_without("fork", &life(), &["fork"]);
    assert_eq!(r.ending, "exit 0");
    assert_eq!(r.printed("parent_rc"), "700");
    assert_eq!(r.printed("child_rc"), "700");
    assert_eq!(r.printed("child_status"), "0");
    assert_eq!(
        r.reports.len(),
        2,
        "one report per process; stderr:\n{}",
        r.stderr
    );
    let parent = r.report_of(&r.printed("pid"));
    assert_eq!(parent["culprit"]["op"]["kernel"], "oob");
    assert_eq!(parent["culprit"]["confidence"], "exact");
    let child = r.report_of(&r.printed("child_pid"));
    assert_eq!(
        child["culprit"]["confidence"], "exact",
        "{}",
        child["culprit"]["reason"]
    );
    let op = &child["culprit"]["op"];
    assert_eq!(op["kernel"], "instant_oob");
    assert_eq!(
        op["seq"], 2,
        "the child's own legacy stream: quick, then instant_oob"
    );
    assert_eq!(
        op["thread"].to_string(),
        r.printed("child_tid"),
        "the child's thread id, not the parent's"
    );
    assert_eq!(
        child["reporting_call"]["thread"].to_string(),
        r.printed("child_tid")
    );
    // Nothing of the parent: its context's streams and ops are forgotten.
    let contexts: Vec<&Value> = child["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["context"])
        .collect();
    assert!(
        contexts.iter().all(|c| *c == &op["context"]),
        "parent streams in the child's report: {contexts:?}"
    );
    assert_ne!(op["context"], parent["culprit"]["op"]["context"]);
}

#[test]
fn exec_after_cuda_init_reports_in_the_new_image() {
    let r = same_as_without("exec", &life(), &["exec"]);
    assert_eq!(r.ending, "exit 1");
    assert_eq!(r.printed("memcpy_rc"), "700");
    assert_eq!(r.reports.len(), 1);
    let rep = &r.reports[0];
    assert_eq!(rep["process"]["pid"].to_string(), r.printed("pid"));
    assert_eq!(rep["culprit"]["op"]["kernel"], "oob");
    assert_eq!(rep["culprit"]["op"]["seq"], 2, "the new image's ops only");
}

#[test]
fn exit_without_synchronizing_and_underscore_exit() {
    for (scenario, want) in [("exit_nosync", "exit 0"), ("underscore_exit", "exit 7")] {
        let r = same_as_without(scenario, &life(), &[scenario]);
        assert_eq!(r.ending, want);
        assert!(
            r.reports.is_empty(),
            "{scenario}: an error never returned to the program is not reported"
        );
        assert!(!r.stderr.contains("cudablame"), "{scenario}: {}", r.stderr);
        assert!(
            r.took < Duration::from_secs(5),
            "{scenario}: exit took {:?}",
            r.took
        );
    }
}

#[test]
fn exit_while_another_thread_launches() {
    for i in 0..5 {
        let r = run_in(
            &scratch().join(format!("exit-launching-{i}")),
            &life(),
            &["exit_launching"],
            shim_preload(),
            &[],
        );
        assert_eq!(r.ending, "exit 0", "{}", r.stderr);
        assert!(r.stdout.contains("exiting"), "{}", r.stdout);
    }
}

#[test]
fn dlclose_and_dlopen_of_the_driver_again() {
    let r = same_as_without("dlclose", &life(), &["dlclose"]);
    assert_eq!(r.ending, "exit 1");
    assert_eq!(r.printed("memcpy_rc"), "700");
    let rep = &r.reports[0];
    assert_eq!(rep["culprit"]["op"]["kernel"], "oob");
    assert_eq!(
        rep["culprit"]["op"]["seq"], 7,
        "3 + 3 quick launches across the reopen, then oob"
    );
    assert_eq!(rep["culprit"]["confidence"], "exact");
}

/// A second interposer wrapping dlsym, getpid and cuInit, before and after cudablame in
/// LD_PRELOAD, with a program reaching the driver by dlsym and one linked with -lcuda.
#[test]
fn a_second_interposer_that_also_wraps_dlsym() {
    let other = compile_with(
        "other_interposer",
        "libother_interposer.so",
        &["-shared", "-fPIC"],
    );
    let scenarios = compile("scenarios", false);
    let linked = compile("scenarios", true);
    let mut combinations = 0;
    for (program, args, linked_program) in [
        (&scenarios, &["--dlsym", "oob"][..], false),
        (&linked, &["oob"][..], true),
    ] {
        let plain = run_in(&scratch().join("other-plain"), program, args, None, &[]);
        for order in ["shim-first", "other-first"] {
            let preload = match order {
                "shim-first" => format!("{}:{}", shim().display(), other.display()),
                _ => format!("{}:{}", other.display(), shim().display()),
            };
            let label = format!("{order} {args:?}");
            let r = run_in(
                &scratch().join(format!("other-{order}")),
                program,
                args,
                Some(preload),
                &[],
            );
            assert_same_run(
                &label,
                (&plain.ending, &plain.stdout),
                (&r.ending, &r.stdout),
                &r.stderr,
            );
            if order == "other-first" && !linked_program {
                // The other interposer forwards the program's dlsym to glibc's by version
                // (dlvsym "GLIBC_2.34"), past cudablame's unversioned dlsym: cudablame never sees
                // these lookups, so it cannot watch this program (documented; `cudablame run` puts
                // libcudablame.so first). The program is unaffected, which is what this checks.
                assert!(
                    r.reports.is_empty(),
                    "{label}: cudablame now sees these lookups: update the docs"
                );
            } else {
                assert_eq!(r.reports.len(), 1, "{label}: {}", r.stderr);
                assert_eq!(
                    r.reports[0]["culprit"]["op"]["kernel"], "oob_write",
                    "{label}"
                );
                assert_eq!(r.reports[0]["culprit"]["confidence"], "exact", "{label}");
            }
            let counts = r
                .stderr
                .lines()
                .find(|l| l.starts_with("other_interposer:"))
                .unwrap_or_else(|| panic!("{label}: {}", r.stderr));
            assert!(
                !counts.contains("getpid=0"),
                "{label}: the program's getpid went through the other interposer: {counts}"
            );
            if linked_program {
                assert!(counts.contains("cuInit=1"), "{label}: {counts}");
            }
            combinations += 1;
        }
    }
    println!("second interposer: {combinations} combinations, same results as without cudablame");
}

fn plugin() -> PathBuf {
    compile_with(
        "fake_cudart",
        "libfakecudart.so",
        &["-shared", "-fPIC", "-lcuda"],
    );
    compile_with(
        "plugin",
        "libplugin.so",
        &["-shared", "-fPIC", "-lcuda", "-lfakecudart"],
    )
}

/// A library loaded RTLD_LOCAL whose driver and runtime are only in its own scope (a Python
/// extension module): its RTLD_DEFAULT lookups and its runtime's cudaGetDriverEntryPoint must find
/// what they find without cudablame, and the launches it makes through them are recorded.
#[test]
fn library_loaded_rtld_local_keeps_its_own_scope() {
    let plugin = plugin().display().to_string();
    let r = same_as_without("plugin-local", &life(), &["plugin_local", &plugin]);
    assert_eq!(r.printed("default_cuDeviceGet"), "found");
    assert_eq!(r.printed("default_cuLaunchKernel"), "found");
    assert_eq!(
        r.printed("default_cuMemcpyBatchAsync"),
        "missing",
        "cudablame must not make absent functions appear"
    );
    assert_eq!(r.printed("entry_point_rc"), "0");
    assert_eq!(r.printed("read_back_rc"), "700");
    let rep = &r.reports[0];
    assert_eq!(rep["culprit"]["op"]["kernel"], "oob", "{}", r.stderr);
    assert_eq!(rep["culprit"]["confidence"], "exact");
    assert!(functions(&rep["culprit"]["op"]["stack"])
        .iter()
        .any(|f| f == "launch_bad_kernel"));
}

/// A library loaded RTLD_LOCAL with a CUDA runtime of its own (an extension module built for
/// `libcudart.so.11.0`) in a process whose global scope has another (`libcudart.so.12`): its
/// `cudaGetDriverEntryPoint` reaches its own runtime through cudablame's export, as without
/// cudablame. Before (a break-it review): the global scope was searched first, and runtime 12's
/// function, which writes through a fourth parameter, was called with three.
/// (`cudaGetErrorString` keeps the global scope's runtime once found: Known limits.) Also a
/// library linked at startup, and a second tool preloaded after cudablame.
#[test]
fn a_library_with_its_own_runtime_keeps_it() {
    let dir = scratch().join("two-runtimes");
    std::fs::create_dir_all(&dir).unwrap();
    // Each runtime's symbols carry its version, as the real runtimes' do: the extension's
    // reference `cudaGetDriverEntryPoint@libcudart.so.11.0` binds to runtime 11 without
    // cudablame (an unversioned one would bind to the global scope's runtime 12).
    let lib = |name: &str, flags: &[&str]| {
        let soname = format!("-Wl,-soname,{name}");
        let mut extra = vec!["-shared", "-fPIC", &soname];
        extra.extend_from_slice(flags);
        compile_with("two_runtimes", &format!("two-runtimes/{name}"), &extra)
    };
    let versions = |name: &str| {
        let map = dir.join(format!("{name}.map"));
        std::fs::write(&map, format!("{name} {{ global: *; }};\n")).unwrap();
        format!("-Wl,--version-script={}", map.display())
    };
    lib(
        "libcudart.so.12",
        &["-DRUNTIME=12", &versions("libcudart.so.12")],
    );
    lib(
        "libcudart.so.11.0",
        &["-DRUNTIME=11", &versions("libcudart.so.11.0")],
    );
    let link = format!("-L{}", dir.display());
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    lib(
        "libext11.so",
        &["-DEXTENSION", &link, &rpath, "-l:libcudart.so.11.0"],
    );
    let program = compile_with("two_runtimes", "two-runtimes/two_runtimes", &[]);
    let r = same_as_without("two-runtimes", &program, &[dir.to_str().unwrap()]);
    assert_eq!(r.printed("entry_point"), "runtime 11", "{}", r.stderr);
    assert_eq!(r.printed("ext_entry_rc"), "500");

    // A library linked at startup that probes for a driver function (no driver loaded) and
    // asks its runtime for an entry point: its link map is no `dlsym` handle (SIGSEGV before,
    // found by a review of the caller-scope lookup).
    let runtime12 = "-l:libcudart.so.12";
    lib("libprobe.so", &["-DPROBE", &link, &rpath, runtime12]);
    let startup = compile_with(
        "two_runtimes",
        "two-runtimes/startup",
        &["-DSTARTUP", &link, &rpath, "-l:libprobe.so"],
    );
    let r = same_as_without("startup-library", &startup, &[]);
    assert_eq!(r.printed("probe_found"), "0", "{}", r.stderr);
    assert_eq!(r.printed("entry_point"), "runtime 12", "{}", r.stderr);
    assert_eq!(r.printed("probe_rc"), "500");

    // Another tool preloaded after cudablame, wrapping the runtime's function: still called
    // (the loader searches the global scope first; a review of the caller-scope lookup).
    let tool = lib("libtool.so", &["-DTOOL"]).display().to_string();
    let with_tool = |name: &str, first: Option<String>| {
        let preload = first.map_or(tool.clone(), |f| format!("{f}:{tool}"));
        run_in(&scratch().join(name), &startup, &[], Some(preload), &[])
    };
    let (plain, shimmed) = (
        with_tool("tool-plain", None),
        with_tool("tool-shim", shim_preload()),
    );
    assert_eq!(plain.printed("tool_called"), "1", "{}", plain.stderr);
    assert_same_run(
        "tool after cudablame",
        (&plain.ending, &plain.stdout),
        (&shimmed.ending, &shimmed.stdout),
        &shimmed.stderr,
    );
}

/// RTLD_DEEPBIND: the library's own references bind inside its scope, past cudablame (its
/// launches are not seen: documented). The program is unaffected, and the error it notices
/// through its own calls is still reported.
#[test]
fn library_loaded_rtld_deepbind() {
    let plugin = plugin().display().to_string();
    let r = same_as_without("plugin-deepbind", &life(), &["plugin_deepbind", &plugin]);
    assert_eq!(r.printed("read_back_rc"), "700");
    assert_eq!(r.printed("program_sync_rc"), "700");
    assert_eq!(r.reports.len(), 1, "{}", r.stderr);
    assert_eq!(r.reports[0]["error"]["code"], 700);
    assert_eq!(
        r.reports[0]["reporting_call"]["entry_point"],
        "cuCtxSynchronize"
    );
}

/// Two copies of libcudablame.so preloaded (a pip-installed one and a built one, or LD_PRELOAD
/// set by hand and again by `cudablame run`): the program ends as without cudablame, the first
/// copy reports the culprit once, the second says in one line that it stays off. Found by a
/// break-it test (twentieth session): the second copy, reached through the first's `RTLD_NEXT`
/// lookup of the runtime's error strings, searched the first copy's scope and crashed the
/// program in the loader (SIGSEGV) at its first sticky error.
#[test]
fn two_copies_of_cudablame_preloaded() {
    let copy_dir = scratch().join("second-copy");
    std::fs::create_dir_all(&copy_dir).unwrap();
    let copy = copy_dir.join("libcudablame.so");
    std::fs::copy(shim(), &copy).unwrap();
    let scenarios = compile("scenarios", false);
    let linked = compile("scenarios", true);
    for (program, args) in [
        (&scenarios, &["--dlsym", "oob"][..]),
        (&linked, &["oob"][..]),
    ] {
        let plain = run_in(&scratch().join("copies-plain"), program, args, None, &[]);
        let preload = format!("{}:{}", shim().display(), copy.display());
        let r = run_in(&scratch().join("copies"), program, args, Some(preload), &[]);
        let label = format!("{args:?}");
        assert_same_run(
            &label,
            (&plain.ending, &plain.stdout),
            (&r.ending, &r.stdout),
            &r.stderr,
        );
        assert_eq!(r.reports.len(), 1, "{label}: {}", r.stderr);
        assert_eq!(
            r.reports[0]["culprit"]["op"]["kernel"], "oob_write",
            "{label}"
        );
        assert_eq!(r.reports[0]["culprit"]["confidence"], "exact", "{label}");
        let off: Vec<&str> = (r.stderr.lines())
            .filter(|l| l.contains("stays off and passes every call through"))
            .collect();
        assert_eq!(off.len(), 1, "{label}: {}", r.stderr);
        assert!(
            off[0].contains(&copy.display().to_string()),
            "{label}: {}",
            off[0]
        );
    }
}

/// A child forked while another thread of the parent builds a report (symbolizing, under the
/// backtrace crate's process-wide lock) reports its own sticky error without waiting for that
/// lock, which no thread of the child will release: it hung there (found by a break-it helper,
/// twentieth session). The child's frames then keep their modules and addresses only.
#[test]
fn a_child_forked_while_the_parent_reports_does_not_hang() {
    let program = compile("fork_while_reporting", true);
    let plain = run_in(
        &scratch().join("fork-report-plain"),
        &program,
        &[],
        None,
        &[],
    );
    let r = run_in(
        &scratch().join("fork-report"),
        &program,
        &[],
        Some(shim().display().to_string()),
        &[],
    );
    assert_eq!(r.ending, plain.ending, "{}", r.stderr);
    assert_eq!(printed(&r.stdout, "child_status"), "0", "{}", r.stderr);
    assert_eq!(
        printed(&r.stdout, "child_query"),
        printed(&plain.stdout, "child_query")
    );
    // The parent's report names the culprit; the child's (which forgot the parent's ops, as
    // every forked child does) names its reporting call.
    assert_eq!(r.reports.len(), 2, "{}", r.stderr);
    let parent = r
        .reports
        .iter()
        .find(|rep| rep["culprit"]["op"]["kernel"] == "bad")
        .unwrap_or_else(|| panic!("no report names the culprit: {}", r.stderr));
    assert_eq!(parent["reporting_call"]["entry_point"], "cuMemcpyDtoH_v2");
    let child = r
        .reports
        .iter()
        .find(|rep| rep["reporting_call"]["entry_point"] == "cuStreamQuery")
        .unwrap_or_else(|| panic!("no report of the child: {}", r.stderr));
    assert!(child["culprit"]["op"].is_null(), "{child}");
}
