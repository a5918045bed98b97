//! Never inside a capture: cudablame makes no call that invalidates a global-mode stream capture
//! of the program, from any thread. Its one potentially unsafe call, the allocation of a
//! context's marker memory at the first launch onto one of its streams, is made with the calling
//! thread's capture mode exchanged to relaxed.

mod common;
use common::*;
use std::time::Duration;

/// Thread A captures in GLOBAL mode; thread B makes the context's first launch, on another
/// stream: cudablame allocates marker memory then, and A's capture must still end successfully
/// with only A's two kernels in it.
#[test]
fn a_global_capture_survives_another_threads_first_launch() {
    let prog = compile("life", false);
    let runs = 10;
    for i in 0..runs {
        for shim_on in [false, true] {
            let mut cmd = command(&prog, &["capture_other"]);
            cmd.env("CUDABLAME_REPORT", "off");
            if shim_on {
                cmd.env("LD_PRELOAD", shim());
            }
            let (out, _) = output_within(&mut cmd, Duration::from_secs(30));
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let label = format!("run {i}, shim {shim_on}");
            assert!(
                stdout.contains("end_capture_rc=0\n"),
                "{label}: the capture was invalidated:\n{stdout}\n{stderr}"
            );
            assert!(stdout.contains("b_launch_rc=0\n"), "{label}: {stdout}");
            assert!(stdout.contains("graph_nodes=2\n"), "{label}: {stdout}");
            assert_eq!(ending(&out.status), "exit 0", "{label}");
            assert_eq!(stderr, "", "{label}");
        }
    }
    println!(
        "capture: {runs} runs of a global capture racing another thread's first launch, each valid"
    );
}

/// The capture scenario of the culprit tests, under every marker policy: the capture ends with 0,
/// the graph holds exactly the program's 3 kernels, and a fault after it is named.
#[test]
fn the_capture_scenario_stays_valid_with_and_without_markers() {
    let prog = compile("scenarios", false);
    for markers in ["every", "budget", "off"] {
        let r = run(&prog, &["capture"], true, &[("CUDABLAME_MARKERS", markers)]);
        assert_eq!(r.printed("end_capture_rc"), "0", "markers {markers}");
        assert_eq!(r.printed("graph_nodes"), "3", "markers {markers}");
        assert_eq!(r.culprit()["kernel"], "oob_write");
    }
}

/// A capture that cudablame's capture count could miss: begun through the CUDA 10.0 ABI
/// (`cuStreamBeginCapture`, `_ptsz`: no mode argument, what `cuGetProcAddress` gives below
/// 10010), or begun while a benchmark had paused cudablame and resumed before the launches. The
/// graph must hold exactly the program's 3 kernels, as without cudablame (a progress marker
/// written into it was a fourth node), and the fault after it is still reported.
#[test]
fn a_capture_begun_by_the_old_abi_or_while_paused_gets_no_marker() {
    let prog = compile("capture_abi", true);
    for mode in ["v1", "v1_ptsz", "paused"] {
        for markers in ["every", "budget"] {
            let without = run(&prog, &[mode], false, &[]);
            assert_eq!(
                without.printed("graph_nodes"),
                "3",
                "{mode}: {}",
                without.stdout
            );
            let r = run(&prog, &[mode], true, &[("CUDABLAME_MARKERS", markers)]);
            assert_eq!(
                r.stdout, without.stdout,
                "{mode}, markers {markers}: {}",
                r.stderr
            );
            assert_eq!(r.code, without.code, "{mode}, markers {markers}");
            assert_eq!(
                r.culprit()["kernel"],
                "oob_write",
                "{mode}, markers {markers}"
            );
        }
    }
}
