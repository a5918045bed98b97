//! `cudablame_pause` (the benchmarks' switch, `src/interpose/pause.rs`) seen from a program that
//! looks it up with `dlsym(RTLD_DEFAULT, ...)` (`programs/pause.c`): ops launched while paused
//! are not recorded and get no marker, the switch returns the previous state, and after a paused
//! and a resumed stretch a fault is still blamed on the right launch with its sequence number.

mod common;
use common::*;
use std::time::Duration;

/// `([recorded ops, marked ops, recorded ops whose whole hook was timed, ops run paused, ops
/// recorded after the first pause], the program's stdout)` from `pause count A B` under cudablame (`CUDABLAME_MARKERS` =
/// [`TEST_MARKERS`], a marker after each recorded op); `None` for the counts when there is no
/// stats line (it is written at exit once a hooked call was timed: an
/// op recorded, or a call that records none, such as the module load).
fn count_run(a: &str, b: &str) -> (Option<[u64; 5]>, String) {
    let (counts, stdout, _) = count_run_with(a, b, "on");
    (counts, stdout)
}

/// [`count_run`] with `CUDABLAME_STATS=stats`, also returning the stats line (empty if none).
fn count_run_with(a: &str, b: &str, stats: &str) -> (Option<[u64; 5]>, String, String) {
    let prog = compile("pause", true);
    let mut cmd = command(&prog, &["count", a, b]);
    cmd.env("LD_PRELOAD", shim())
        .env("CUDABLAME_STATS", stats)
        .env("CUDABLAME_REPORT", "off");
    let (out, _) = output_within(&mut cmd, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let Some(line) = stderr.lines().find(|l| l.starts_with("cudablame stats:")) else {
        return (None, stdout, String::new());
    };
    (
        Some([
            number_after(line, "cudablame stats: "),
            number_after(line, "marked "),
            number_after(line, "whole hook: "),
            number_after(line, "paused: "),
            number_after(line, "recorded after the first pause: "),
        ]),
        stdout,
        line.to_string(),
    )
}

#[test]
fn ops_launched_while_paused_are_not_recorded() {
    // 300 launches paused, 40 recording: exactly the 40 are recorded, each with its marker and
    // its whole hook timed, all after the first pause; the 300 are counted as paused.
    let (counts, stdout) = count_run("300", "40");
    assert_eq!(counts, Some([40, 40, 40, 300, 40]), "{stdout}");
    assert_eq!(printed(&stdout, "pause_found"), "1");
    // Each call returns the state before it: recording, paused, paused, recording.
    assert_eq!(printed(&stdout, "pause_first"), "0");
    assert_eq!(printed(&stdout, "pause_again"), "1");
    assert_eq!(printed(&stdout, "resume_rc"), "1");
    assert_eq!(printed(&stdout, "resume_again"), "0");
    assert_eq!(printed(&stdout, "sync_rc"), "0");
    // Only paused launches: no op recorded (the line still counts the calls that record none,
    // made while recording); none paused: all 25 (after the switch was set, then reset).
    assert_eq!(count_run("25", "0").0, Some([0, 0, 0, 25, 0]));
    assert_eq!(count_run("0", "25").0, Some([25, 25, 25, 0, 25]));
}

#[test]
fn stats_total_counts_the_same_ops_without_timing_phases() {
    // `CUDABLAME_STATS=total` (goal 2's benchmark mode) counts exactly what `on` counts, and its
    // line says the phases were not timed instead of splitting the own time; `on` splits it.
    let (counts, stdout, line) = count_run_with("300", "40", "total");
    assert_eq!(counts, Some([40, 40, 40, 300, 40]), "{stdout}");
    assert_eq!(
        line.matches("(phases not timed: CUDABLAME_STATS=total)")
            .count(),
        2,
        "{line}"
    );
    assert!(!line.contains("native stack copy"), "{line}");
    assert!(line.contains("; one tick reading "), "{line}");
    let (_, _, on) = count_run_with("300", "40", "on");
    assert!(!on.contains("phases not timed"), "{on}");
    assert!(on.contains("native stack copy"), "{on}");
}

#[test]
fn without_the_shim_the_switch_is_absent_and_the_program_runs() {
    let prog = compile("pause", true);
    let r = run(&prog, &["count", "5", "5"], false, &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.printed("pause_found"), "0");
    assert_eq!(r.printed("sync_rc"), "0");
}

#[test]
fn after_a_paused_and_a_resumed_stretch_the_culprit_is_named_with_its_sequence_number() {
    // Paused: a 20 ms kernel on stream b and 50 quick kernels on each stream; recording: 30
    // quick on each, then the faulting kernel on b and 2 quick behind it. The rings hold only
    // the recorded ops, so the culprit is stream b's op #31 and its 2 followers #32-#33. Not
    // `exact`: once paused, any unrecorded op could be the culprit (see the test below).
    let prog = compile("pause", true);
    let r = run(&prog, &["fault", "50", "30"], true, &[]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.printed("pause_first"), "0");
    assert_eq!(r.printed("resume_rc"), "1");
    assert_eq!(r.printed("sync_rc"), "700");
    let rep = r.report();
    assert_eq!(rep["error"]["code"], 700, "{}", r.stderr);
    assert_eq!(
        rep["culprit"]["confidence"], "likely",
        "reason: {}",
        rep["culprit"]["reason"]
    );
    assert!(
        (rep["culprit"]["reason"].as_str().unwrap()).contains("cudablame was paused"),
        "{}",
        rep["culprit"]["reason"]
    );
    let op = r.culprit();
    assert_eq!(op["kernel"], "oob_write", "{}", r.stderr);
    assert_eq!(op["seq"], 31);
    assert_eq!(op["stream"], r.printed("stream_b"));
    let f = r.culprit_functions();
    assert!(
        f.iter().any(|n| n == "launch_bad_kernel"),
        "launch stack: {f:?}"
    );
    assert_eq!(rep["reporting_call"]["entry_point"], "cuCtxSynchronize");
    assert_eq!(r.suspect_seqs(), vec![32, 33]);
    let stream = |name: String| {
        let s = rep["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stream"] == name.as_str())
            .unwrap_or_else(|| panic!("no stream {name} in {}", rep["streams"]))
            .clone();
        (s["issued"].as_u64(), s["completed"].as_u64())
    };
    // Per stream, only the recorded ops count: a's 30 all completed; b's 30 before the culprit.
    assert_eq!(stream(r.printed("stream_a")), (Some(30), Some(30)));
    assert_eq!(stream(r.printed("stream_b")), (Some(33), Some(30)));
}

/// The culprit itself was launched while paused: the rings hold only the quick kernels launched
/// after, and the first of them is what the markers point at. Before, that op was named `exact`
/// (found by a new-user trial); now no verdict is exact once cudablame was paused, and the reason
/// says why.
#[test]
fn a_culprit_launched_while_paused_is_never_named_exact() {
    let prog = compile("pause", true);
    for markers in ["budget", "every"] {
        let r = run(
            &prog,
            &["hidden", "5", "3"],
            true,
            &[("CUDABLAME_MARKERS", markers)],
        );
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        assert_eq!(r.printed("sync_rc"), "700");
        let culprit = &r.report()["culprit"];
        assert_ne!(culprit["confidence"], "exact", "{markers}: {culprit}");
        assert!(
            (culprit["reason"].as_str().unwrap()).contains("cudablame was paused"),
            "{markers}: {}",
            culprit["reason"]
        );
        // What the rings saw: the 3 quick kernels recorded after the pause.
        assert_eq!(r.culprit()["kernel"], "quick", "{markers}");
    }
}
