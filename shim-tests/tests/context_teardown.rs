//! A context that ends with a sticky error (`programs/ctx_teardown.c`; `src/record/sync.rs`
//! `Teardown`): `cuCtxDestroy`, `cuDevicePrimaryCtxReset` and the last
//! `cuDevicePrimaryCtxRelease` of a faulted context return the sticky error and still destroy the
//! context (the fake driver frees its pinned memory, cudablame's marker slab among it). The
//! report of that error is built from the context's rings, and only then are its streams and
//! marker slab forgotten. A new context, which the fake gives the destroyed one's handle
//! (`FAKE_CUDA_REUSE_HANDLES=1`), and its first stream, at the destroyed stream's handle, start
//! afresh. Before: the streams were forgotten on success only; the new context's launches found
//! the destroyed context's stream records and wrote their progress markers into the destroyed
//! slab (the fake refuses that write, turning markers off for the process: "the driver refused
//! a progress marker"; on a GPU, a write to memory no longer mapped).

mod common;
use common::*;

/// The fake hands out a destroyed context's (and stream's) handle again; `CUDABLAME_DEBUG` says
/// when cudablame forgets a context.
const ENV: &[(&str, &str)] = &[("FAKE_CUDA_REUSE_HANDLES", "1"), ("CUDABLAME_DEBUG", "on")];

fn program() -> std::path::PathBuf {
    compile_with("ctx_teardown", "ctx_teardown", &["-lcuda", "-ldl"])
}

/// The program's output without the handle values (which differ between runs).
fn without_handles(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| !l.starts_with("ctx_a=") && !l.starts_with("stream_a="))
        .collect()
}

/// Runs `mode` without and with cudablame and checks what every way to end a faulted context
/// must give: the error returned unchanged, the report naming the culprit from the ended
/// context's rings, that context forgotten after the report, and a new context at the same
/// handles never meeting its records or marker slots. Returns the run under cudablame.
fn ends_with_the_sticky_error(mode: &str, entry_point: &str) -> Run {
    let plain = run(&program(), &[mode], false, ENV);
    let r = run(&program(), &[mode], true, ENV);
    assert_eq!(plain.code, 0, "{mode}: {}\n{}", plain.stdout, plain.stderr);
    assert_eq!(r.code, 0, "{mode}: {}\n{}", r.stdout, r.stderr);
    assert_eq!(
        without_handles(&r.stdout),
        without_handles(&plain.stdout),
        "{mode}: the program saw other results under cudablame"
    );
    // The driver's 700, returned to the program unchanged.
    assert_eq!(r.printed("end_rc"), "700", "{mode}");
    // The test means something only if the fake really reused both handles.
    assert_eq!(r.printed("ctx_reused"), "1", "{mode}: {}", r.stdout);
    assert_eq!(r.printed("stream_reused"), "1", "{mode}: {}", r.stdout);
    assert_eq!(r.printed("healthy_sync_rc"), "0", "{mode}");

    // The report: at the call that ended the context, naming the culprit from its rings.
    let rep = r.report();
    assert_eq!(rep["error"]["code"], 700, "{mode}: {}", r.stderr);
    assert_eq!(
        rep["reporting_call"]["entry_point"], entry_point,
        "{mode}: {}",
        r.stderr
    );
    assert_eq!(
        rep["culprit"]["confidence"], "exact",
        "{mode}: {}",
        rep["culprit"]["reason"]
    );
    let culprit = r.culprit();
    assert_eq!(culprit["kernel"], "bad_a", "{mode}: {}", r.stderr);
    assert_eq!(culprit["seq"], 3, "{mode}: {}", r.stderr);
    let (ctx_a, stream_a) = (r.printed("ctx_a"), r.printed("stream_a"));
    assert_eq!(culprit["context"], ctx_a.as_str(), "{mode}");
    assert_eq!(culprit["stream"], stream_a.as_str(), "{mode}");
    // A's two streams (sa and the legacy stream), and only A's: its 4 ops.
    let streams = rep["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "{mode}: {}", r.stderr);
    assert!(
        streams.iter().all(|s| s["context"] == ctx_a.as_str()),
        "{mode}: {streams:?}"
    );
    let issued: u64 = streams.iter().map(|s| s["issued"].as_u64().unwrap()).sum();
    assert_eq!(issued, 4, "{mode}: {streams:?}");

    // The new context at A's handle got its own streams and marker slab: no marker was written
    // to A's destroyed slab (the fake refuses it), and cudablame stayed on.
    assert!(
        !r.stderr.contains("refused a progress marker"),
        "{mode}: a marker went to the destroyed context's slab:\n{}",
        r.stderr
    );

    // Forgotten after the report was written, not before and not never.
    let report_end = r
        .stderr
        .find("end of cudablame report")
        .unwrap_or_else(|| panic!("{mode}: no report text:\n{}", r.stderr));
    let forgotten = format!("context {ctx_a} ended");
    let forgot_at = r
        .stderr
        .find(&forgotten)
        .unwrap_or_else(|| panic!("{mode}: context A never forgotten:\n{}", r.stderr));
    assert!(
        forgot_at > report_end,
        "{mode}: forgotten before the report:\n{}",
        r.stderr
    );
    assert!(!r.stderr.contains("internal error"), "{mode}: {}", r.stderr);
    r
}

/// `cuCtxDestroy` of a faulted context returns 700: reported from A's rings (#3 `bad_a`), then
/// A forgotten. B at A's handle faults too and is destroyed after the report (700 again, no
/// second report: one per process): still forgotten, so C at the same handle starts afresh.
#[test]
fn a_context_destroyed_with_a_sticky_error_is_reported_then_forgotten() {
    let r = ends_with_the_sticky_error("destroy", "cuCtxDestroy_v2");
    assert_eq!(r.printed("fault_sync_rc"), "700");
    assert_eq!(r.printed("end_b_rc"), "700");
    assert_eq!(r.printed("ctx_reused_again"), "1", "{}", r.stdout);
    assert_eq!(r.printed("stream_reused_again"), "1", "{}", r.stdout);
    assert_eq!(r.printed("last_sync_rc"), "0");
    // A, then B (after the report; the same handle).
    let forgotten = format!("context {} ended", r.printed("ctx_a"));
    assert_eq!(r.stderr.matches(&forgotten).count(), 2, "{}", r.stderr);
}

/// `cuDevicePrimaryCtxReset` (what `cudaDeviceReset` calls) and the last
/// `cuDevicePrimaryCtxRelease` of a faulted primary context: the same.
#[test]
fn a_primary_context_reset_or_released_with_a_sticky_error_is_reported_then_forgotten() {
    for (mode, entry_point) in [
        ("reset", "cuDevicePrimaryCtxReset_v2"),
        ("release", "cuDevicePrimaryCtxRelease_v2"),
    ] {
        let r = ends_with_the_sticky_error(mode, entry_point);
        let forgotten = format!("context {} ended", r.printed("ctx_a"));
        assert_eq!(
            r.stderr.matches(&forgotten).count(),
            1,
            "{mode}: {}",
            r.stderr
        );
    }
}

/// A context destroyed while cudablame is paused (`cudablame_pause`, the benchmarks' switch: the
/// driver's call alone for everything else) is forgotten all the same
/// (`record::Call::kept_while_paused`): B, made after resuming at A's handle, gets its own
/// stream records and marker slab. Before, A's record of stream `sa` was found again for B's
/// stream at the same handle: B's ops continued A's sequence numbers (the culprit `bad_b` was
/// #7, not #4) and their markers went to A's destroyed slab.
#[test]
fn a_context_destroyed_while_paused_is_forgotten_all_the_same() {
    let plain = run(&program(), &["paused"], false, ENV);
    let r = run(&program(), &["paused"], true, ENV);
    assert_eq!(plain.code, 0, "{}\n{}", plain.stdout, plain.stderr);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(plain.printed("pause_found"), "0");
    assert_eq!(r.printed("pause_found"), "1");
    for key in ["healthy_a_rc", "end_rc"] {
        assert_eq!(r.printed(key), "0", "{key}: {}", r.stdout);
    }
    assert_eq!(r.printed("fault_sync_rc"), "700");
    // The test means something only if the fake really reused both handles.
    assert_eq!(r.printed("ctx_reused"), "1", "{}", r.stdout);
    assert_eq!(r.printed("stream_reused"), "1", "{}", r.stdout);
    assert!(
        !r.stderr.contains("refused a progress marker"),
        "a marker went to the destroyed context's slab:\n{}",
        r.stderr
    );
    let culprit = r.culprit();
    assert_eq!(culprit["kernel"], "bad_b", "{}", r.stderr);
    assert_eq!(culprit["seq"], 4, "{}", r.stderr);
    assert!(!r.stderr.contains("internal error"), "{}", r.stderr);
}
