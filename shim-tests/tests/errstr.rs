//! Issue 23: after the report of a sticky error, `cuGetErrorString` and `cudaGetErrorString` of
//! that code name the culprit; everything else stays the real thing.
//!
//! The program (`programs/errstr.c`) links the fake driver and a stand-in shared runtime
//! (`programs/errstr_cudart.c`, built as `libcudart.so.13` with a version script, so that the
//! program's reference is `cudaGetErrorString@libcudart.so.13`, like PyTorch's): the preloaded
//! shim's unversioned export must win and forward to it.

mod common;

use common::*;
use std::path::PathBuf;

/// The program, built once: the stand-in runtime first (with its version script), then the
/// program linked with it and with the fake driver.
fn program() -> PathBuf {
    let script = scratch().join("cudart.map");
    std::fs::write(
        &script,
        "libcudart.so.13 { global: cudaGetErrorString; cudaGetErrorName; local: *; };\n",
    )
    .unwrap();
    compile_with(
        "errstr_cudart",
        "libcudart.so.13",
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcudart.so.13",
            &format!("-Wl,--version-script={}", script.display()),
        ],
    );
    compile_with("errstr", "errstr", &["-lcuda", "-l:libcudart.so.13"])
}

/// The note cudablame appends: culprit, launching line, confidence, report path. The one
/// unfinished op is `exact`, except for 702 and 999, which the running op need not have caused
/// (issue 19 item 8: `likely`, see docs/guarantees.md).
fn note(run: &Run, kernel: &str) -> String {
    let confidence = match run.report()["error"]["code"].as_u64() {
        Some(702) | Some(999) => "likely",
        _ => "exact",
    };
    format!(
        "[cudablame: culprit {kernel}, launched at errstr.c:{} ({confidence}); report {}]",
        run.printed("launch_line"),
        run.report_path.display()
    )
}

fn run_errstr(code: &str, how: &str, shim_on: bool, env: &[(&str, &str)]) -> Run {
    run_args(&[code, how], shim_on, env)
}

fn run_args(args: &[&str], shim_on: bool, env: &[(&str, &str)]) -> Run {
    let r = run(&program(), args, shim_on, env);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

/// What must be byte for byte the same with and without the shim, and without a report.
fn assert_untouched(with: &Run, without: &Run) {
    for key in [
        "before_cu_rc",
        "before_cu",
        "before_rt",
        "sync_rc",
        "after_cu_rc",
        "again_cu_rc",
        "name_rt",
        "other_cu_rc",
        "other_cu",
        "other_rt",
        "unknown_cu_rc",
        "unknown_cu",
        "null_rc",
    ] {
        assert_eq!(with.printed(key), without.printed(key), "{key}");
    }
}

#[test]
fn assert_string_names_the_culprit_every_way_the_driver_is_reached() {
    for how in ["direct", "proc", "dlsym"] {
        let plain = run_errstr("710", how, false, &[]);
        let r = run_errstr("710", how, true, &[]);
        assert_untouched(&r, &plain);
        assert_eq!(r.printed("sync_rc"), "710");
        assert_eq!(r.report()["error"]["code"], 710);
        assert_eq!(r.culprit()["kernel"], "assert_kernel");
        let expected = format!("device-side assert triggered {}", note(&r, "assert_kernel"));
        assert_eq!(r.printed("after_cu"), expected, "{how}: cuGetErrorString");
        assert_eq!(r.printed("after_cu_rc"), "0");
        assert_eq!(r.printed("again_cu"), expected);
        assert_eq!(r.printed("stable_cu"), "1", "one buffer, built once");
        assert_eq!(
            r.printed("first_again"),
            expected,
            "the pointer stays valid"
        );
        // The runtime's export (versioned reference bound by the shim's unversioned one).
        assert_eq!(r.printed("after_rt"), expected, "{how}: cudaGetErrorString");
        assert_eq!(r.printed("stable_rt"), "1");
        // Before the report, other codes, the name, unknown codes: the real ones.
        assert_eq!(r.printed("before_cu"), "device-side assert triggered");
        assert_eq!(r.printed("before_rt"), "device-side assert triggered");
        assert_eq!(r.printed("name_rt"), "cudaErrorAssert");
        assert_eq!(
            r.printed("other_cu"),
            "an illegal memory access was encountered"
        );
        assert_eq!(r.printed("unknown_cu_rc"), "1");
        assert_eq!(r.printed("unknown_cu"), "(null)");
        assert_eq!(r.printed("null_rc"), "1");
    }
}

#[test]
fn the_runtime_s_own_text_is_the_one_decorated() {
    // The stand-in runtime's text for 702 differs from the fake driver's: each function keeps
    // its own text, followed by the same note.
    let plain = run_errstr("702", "direct", false, &[]);
    let r = run_errstr("702", "direct", true, &[]);
    assert_untouched(&r, &plain);
    assert_eq!(r.culprit()["kernel"], "slow_kernel");
    let n = note(&r, "slow_kernel");
    assert_eq!(
        r.printed("after_cu"),
        format!("{} {n}", plain.printed("after_cu"))
    );
    assert_eq!(
        r.printed("after_rt"),
        format!("the launch timed out and was terminated (runtime) {n}")
    );
}

#[test]
fn the_runtime_first_asked_after_the_report_is_found_then() {
    // No cudaGetErrorString before the fault: the report looks the runtime up itself
    // (dlsym(RTLD_NEXT)) to learn its text, which differs from the driver's for 702 here.
    let r = run_args(&["702", "direct", "late"], true, &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.printed("before_rt"), "(not asked)");
    assert_eq!(
        r.printed("after_rt"),
        format!(
            "the launch timed out and was terminated (runtime) {}",
            note(&r, "slow_kernel")
        )
    );
    assert_eq!(r.printed("stable_rt"), "1");
}

#[test]
fn error_string_off_keeps_every_string_real() {
    let plain = run_errstr("710", "direct", false, &[]);
    let r = run_errstr("710", "direct", true, &[("CUDABLAME_ERROR_STRING", "off")]);
    assert_eq!(
        r.culprit()["kernel"],
        "assert_kernel",
        "the report is still written"
    );
    assert_untouched(&r, &plain);
    for key in ["after_cu", "after_rt", "first_again"] {
        assert_eq!(r.printed(key), "device-side assert triggered", "{key}");
    }
}

#[test]
fn without_a_report_file_the_note_has_no_path() {
    let r = run_errstr("710", "direct", true, &[("CUDABLAME_REPORT", "off")]);
    assert_eq!(
        r.printed("after_cu"),
        format!(
            "device-side assert triggered [cudablame: culprit assert_kernel, launched at errstr.c:{} (exact)]",
            r.printed("launch_line")
        )
    );
}
