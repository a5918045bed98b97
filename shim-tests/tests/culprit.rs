//! The shim names the culprit launch: test programs reach the fake driver each way real programs
//! do, fault asynchronously, and the JSON report must name the right op.

mod common;
use common::*;

fn scenarios() -> std::path::PathBuf {
    compile("scenarios", false)
}

/// The checks every "oob"-style run shares: error, culprit kernel and seq, launch site, confidence.
fn assert_culprit(r: &Run, kernel: &str, seq: u64, confidence: &str) {
    let rep = r.report();
    assert_eq!(rep["schema"], "cudablame.report/1");
    assert_eq!(rep["error"]["code"], 700, "{}", r.stderr);
    assert_eq!(rep["error"]["name"], "CUDA_ERROR_ILLEGAL_ADDRESS");
    assert_eq!(rep["error"]["sticky"], true);
    assert_eq!(
        rep["culprit"]["confidence"], confidence,
        "reason: {}",
        rep["culprit"]["reason"]
    );
    assert_eq!(r.culprit()["kernel"], kernel, "{}", r.stderr);
    assert_eq!(r.culprit()["seq"], seq);
    assert_eq!(r.culprit()["kind"], "kernel");
    let f = r.culprit_functions();
    assert!(
        f.iter().any(|n| n == "launch_bad_kernel"),
        "launch stack: {f:?}"
    );
    assert!(
        !f.iter().any(|n| n.contains("cudablame")),
        "own frames leaked: {f:?}"
    );
    assert_eq!(rep["process"]["pid"].to_string(), r.printed("pid"));
}

#[test]
fn static_runtime_way_names_the_culprit_not_the_memcpy() {
    let r = run(&scenarios(), &["oob"], true, &[]);
    assert_eq!(r.code, 1);
    assert_eq!(r.printed("memcpy_rc"), "700");
    assert_culprit(&r, "oob_write", 4, "exact");
    let rep = r.report();
    assert_eq!(rep["reporting_call"]["entry_point"], "cuMemcpyDtoH_v2");
    assert_eq!(
        rep["reporting_call"]["thread"].to_string(),
        r.printed("main_tid")
    );
    assert_eq!(r.culprit()["grid"], serde_json::json!([8, 1, 1]));
    assert_eq!(r.culprit()["block"], serde_json::json!([256, 1, 1]));
    assert_eq!(r.culprit()["entry_point"], "cuLaunchKernel");
    assert_eq!(r.culprit()["stream"], "legacy");
    // The reporting call's own stack shows where the program noticed it.
    let rf = functions(&rep["reporting_call"]["stack"]);
    assert!(rf.iter().any(|n| n == "main"), "{rf:?}");
    // #4..#6 were queued behind the culprit and never ran.
    assert_eq!(r.suspect_seqs(), vec![5, 6, 7]);
    let stream = rep["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stream"] == "legacy")
        .unwrap();
    assert_eq!(
        (stream["issued"].as_u64(), stream["completed"].as_u64()),
        (Some(7), Some(3))
    );
    // #1 is the synchronous upload of setup(): recorded, complete, never blamed.
    assert_eq!(stream["recent"][0]["kind"], "memcpy");
    assert_eq!(stream["recent"][0]["synchronous"], true);
    assert_eq!(stream["recent"][0]["bytes"], 64);
    assert_eq!(stream["recent"][0]["state"], "completed");
    // One report: the second sticky return (cuCtxSynchronize) is only counted.
    assert_eq!(r.printed("sync_rc"), "700");
    assert_eq!(
        r.stderr.matches("==== cudablame:").count(),
        1,
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("culprit [Exact]: #4 kernel oob_write"),
        "{}",
        r.stderr
    );
}

#[test]
fn per_thread_default_stream_variants() {
    let r = run(&scenarios(), &["--ptds", "oob"], true, &[]);
    assert_culprit(&r, "oob_write", 4, "exact");
    assert_eq!(
        r.report()["reporting_call"]["entry_point"],
        "cuMemcpyDtoH_v2_ptds"
    );
    assert_eq!(r.culprit()["entry_point"], "cuLaunchKernel_ptsz");
    assert_eq!(
        r.culprit()["stream"],
        format!("per-thread({})", r.printed("main_tid"))
    );
}

#[test]
fn dlsym_way_like_triton() {
    let r = run(&scenarios(), &["--dlsym", "oob"], true, &[]);
    assert_culprit(&r, "oob_write", 4, "exact");
    assert_eq!(
        r.report()["reporting_call"]["entry_point"],
        "cuMemcpyDtoH_v2"
    );
}

#[test]
fn direct_link_with_lcuda() {
    let r = run(&compile("scenarios", true), &["oob"], true, &[]);
    assert_culprit(&r, "oob_write", 4, "exact");
    assert_eq!(
        r.report()["reporting_call"]["entry_point"],
        "cuMemcpyDtoH_v2"
    );
}

#[test]
fn error_surfacing_at_the_next_launch() {
    let r = run(&scenarios(), &["next_launch"], true, &[]);
    assert_eq!(r.printed("launch_rc"), "700");
    assert_culprit(&r, "instant_oob", 2, "exact");
    assert_eq!(
        r.report()["reporting_call"]["entry_point"],
        "cuLaunchKernel"
    );
}

#[test]
fn a_destroyed_stream_is_never_passed_back_to_the_driver() {
    // cuStreamDestroy's hook runs after the handle is dangling: asking the driver about it
    // crashed PyTorch programs on the H200 (driver 580, inside cuBLASLt). The fake driver aborts
    // on any use of a destroyed stream.
    let r = run(&scenarios(), &["destroyed_stream"], true, &[]);
    assert_eq!(r.printed("sync_rc"), "700", "{}", r.stderr);
    assert_culprit(&r, "oob_write", 2, "exact");
}

#[test]
fn a_context_synchronization_proves_the_work_of_forgotten_destroyed_streams() {
    // 80 streams destroyed with a slow kernel still queued: past the 64 destroyed streams kept,
    // the rest are only counted, and that count keeps later verdicts of the context below
    // `exact`. A successful cuCtxSynchronize proves their work complete (it waits for all the
    // context's preceding work); it left every later verdict of the process `likely` ("80
    // destroyed stream(s) ... are no longer kept").
    let r = run(&scenarios(), &["destroyed_streams_synced"], true, &[]);
    assert_eq!(r.printed("sync_rc"), "700", "{}", r.stderr);
    assert_culprit(&r, "oob_write", 2, "exact");
    // Without the synchronization their work may still be running: not exact, and said why.
    let r = run(&scenarios(), &["destroyed_streams_unsynced"], true, &[]);
    assert_eq!(r.printed("sync_rc"), "700", "{}", r.stderr);
    let c = &r.report()["culprit"];
    assert_ne!(c["confidence"], "exact", "{}", r.stderr);
    assert!(
        c["reason"]
            .as_str()
            .is_some_and(|w| w.contains("destroyed stream(s)")),
        "{}",
        c["reason"]
    );
}

#[test]
fn a_destroyed_streams_finished_work_is_proven_by_a_marker_written_before_destruction() {
    // 80 streams, each destroyed right after 10 quick kernels, all long complete when the
    // culprit faults; no synchronization. With the default sparse markers the last of those
    // kernels had no marker behind them, so each destroyed stream stayed "possibly unfinished"
    // forever: the culprit was `likely`, "16 destroyed stream(s) ... are no longer kept". The
    // hook now marks a recorded stream's tail before cuStreamDestroy (its handle still valid).
    let r = run(
        &scenarios(),
        &["destroyed_streams_done"],
        true,
        &[("CUDABLAME_MARKERS", "budget")],
    );
    assert_eq!(r.printed("sync_rc"), "700", "{}", r.stderr);
    assert_culprit(&r, "oob_write", 2, "exact");
}

#[test]
fn long_run_ahead_never_loses_the_culprit() {
    // 100,000 launches queued behind the culprit, with the default ring of 256 ops and 32 stack
    // copies: the first op the markers do not prove complete is kept, with its launch stack.
    let r = run(&scenarios(), &["run_ahead"], true, &[]);
    assert_eq!(
        r.printed("launched_after"),
        "100000",
        "the fault fired before the run-ahead was enqueued: {}",
        r.stderr
    );
    assert_eq!(r.printed("sync_rc"), "700");
    assert_culprit(&r, "oob_write", 3, "exact");
    let rep = r.report();
    assert_eq!(rep["streams"][0]["issued"], 100_003);
    assert_eq!(rep["streams"][0]["completed"], 2);
    assert!(rep["suspects"].as_array().unwrap().len() <= 16);
}

#[test]
fn launch_stacks_of_twin_call_paths_are_not_mixed_up() {
    // Same hook registers, different callers: each launch's stack is its own (a stack copy per
    // launch; formerly a memo of unwinds that had to re-read every stack word it used).
    let r = run(&scenarios(), &["same_depth"], true, &[]);
    assert_eq!(r.printed("sync_rc"), "700");
    assert_culprit(&r, "instant_oob", 203, "exact");
    let f = r.culprit_functions();
    assert!(f.iter().any(|n| n == "launch_from_b"), "{f:?}");
    assert!(!f.iter().any(|n| n == "launch_from_a"), "{f:?}");
}

#[test]
fn launch_stacks_of_one_kernel_from_twin_call_paths_are_their_own() {
    // One kernel launched from twin callers a and b in turn (same frame sizes, same depth),
    // until its 151st execution (from a) or 152nd (from b) faults: the culprit's stack names
    // its own caller, never the twin's.
    for (scenario, kernel, seq, own, other) in [
        (
            "twin_sites_a",
            "twin_a",
            152,
            "launch_from_a",
            "launch_from_b",
        ),
        (
            "twin_sites_b",
            "twin_b",
            153,
            "launch_from_b",
            "launch_from_a",
        ),
    ] {
        let r = run(&scenarios(), &[scenario], true, &[]);
        assert_eq!(r.printed("sync_rc"), "700", "{}", r.stderr);
        assert_culprit(&r, kernel, seq, "exact");
        let f = r.culprit_functions();
        assert!(f.iter().any(|n| n == own), "{scenario}: {f:?}");
        assert!(!f.iter().any(|n| n == other), "{scenario}: {f:?}");
    }
}

#[test]
fn a_window_that_may_not_hold_the_culprit_says_so() {
    // 201 threads, one after another, each leaving an unproven tail on its per-thread stream
    // and exiting; the 101st launched later_oob. Retired streams past the 64 kept are only
    // counted, and the culprit's can be one of them: the verdict is never exact, and whether
    // or not the window still holds later_oob, the report says that work it no longer holds
    // may hold the culprit (it used to print "one of these 640 ops" without late_oob among
    // them, the dropped streams named only at the end of the reason).
    let r = run(
        &scenarios(),
        &["--ptds", "exited_threads"],
        true,
        &[("CUDABLAME_MARKERS", "budget")],
    );
    assert_eq!(r.printed("sync_rc"), "700");
    let culprit = &r.report()["culprit"];
    assert_ne!(culprit["confidence"], "exact", "{culprit}");
    let beyond = culprit["beyond"]
        .as_str()
        .unwrap_or_else(|| panic!("no beyond: {culprit}"));
    assert!(
        beyond
            .contains("destroyed stream(s) of the device's contexts with possibly unfinished work"),
        "{beyond}"
    );
    assert!(
        r.stderr.contains("or work cudablame does not hold: "),
        "{}",
        r.stderr
    );
}

#[test]
fn fault_on_a_side_stream_reported_by_another_streams_sync() {
    let r = run(&scenarios(), &["side_stream"], true, &[]);
    assert_eq!(r.printed("sync_rc"), "700");
    assert_culprit(&r, "instant_oob", 1, "exact");
    assert_eq!(r.culprit()["stream"], r.printed("stream_b"));
    let rep = r.report();
    assert_eq!(rep["reporting_call"]["entry_point"], "cuStreamSynchronize");
    assert_ne!(rep["reporting_call"]["stream"], r.culprit()["stream"]);
}

#[test]
fn a_stream_that_drained_during_the_wait_is_proven_drained() {
    // Under the default marker budget stream A's six quick kernels carry one marker (#1); the
    // marker enqueued behind A's newest op as the host starts waiting proves A drained before
    // B's kernel faulted, so the culprit is exact (without it: two streams with unfinished
    // work, `likely`).
    let r = run(
        &scenarios(),
        &["drained_at_wait"],
        true,
        &[("CUDABLAME_MARKERS", "budget")],
    );
    assert_eq!(r.printed("sync_rc"), "700");
    assert_culprit(&r, "late_oob", 1, "exact");
    assert_eq!(r.culprit()["stream"], r.printed("stream_b"));
}

#[test]
fn no_marker_is_enqueued_for_another_threads_default_stream() {
    // The main thread's cuCtxSynchronize must not enqueue a marker "behind" the worker's
    // per-thread stream: the per-thread handle names the calling thread's stream, so such a
    // marker landed on the main thread's idle stream, was written at once and "proved" the
    // worker's slow kernel complete (an exact verdict the GPU showed in threads_ptsz_fault.cu).
    // A gap of 1 s: the budget must not mark the worker's #2 either. With the default 500 µs
    // it did in about 1 run of 7 on a loaded 2-core machine (the worker's first marker write,
    // which makes the fake's stream worker, counts as host time between its two launches), and
    // #2's own marker then rightly proved it complete: `exact`, not the `likely` tested here.
    let r = run(
        &scenarios(),
        &["--ptds", "ptds_worker"],
        true,
        &[
            ("CUDABLAME_MARKERS", "budget"),
            ("CUDABLAME_MARKER_GAP_US", "1000000"),
        ],
    );
    assert_eq!(r.printed("sync_rc"), "700");
    assert_culprit(&r, "late_oob", 1, "likely");
    let rep = r.report();
    let worker = rep["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stream"].as_str().unwrap_or("").starts_with("per-thread") && s["issued"] == 2)
        .expect("the worker's stream");
    assert_eq!(worker["completed"], 1, "{worker}");
}

#[test]
fn two_busy_streams_give_a_likely_verdict() {
    let r = run(&scenarios(), &["busy_stream"], true, &[]);
    assert_eq!(r.printed("sync_rc"), "700");
    assert_culprit(&r, "instant_oob", 1, "likely");
    let rep = r.report();
    assert_eq!(rep["reporting_call"]["entry_point"], "cuCtxSynchronize_v2");
    // The busy stream's running kernel is the first other suspect.
    assert_eq!(rep["suspects"][0]["kernel"], "slow");
    assert_eq!(rep["suspects"][0]["seq"], 1);
}

#[test]
fn culprit_launched_by_another_thread() {
    let r = run(&scenarios(), &["threads"], true, &[]);
    assert_culprit(&r, "oob_write", 3, "exact");
    assert_eq!(r.culprit()["thread"].to_string(), r.printed("launch_tid"));
    assert_eq!(
        r.report()["reporting_call"]["thread"].to_string(),
        r.printed("main_tid")
    );
    assert_ne!(r.printed("launch_tid"), r.printed("main_tid"));
}

#[test]
fn launch_kernel_ex_reads_its_config() {
    let r = run(&scenarios(), &["launch_ex"], true, &[]);
    let op = r.culprit();
    assert_eq!(op["kernel"], "oob_write");
    assert_eq!(op["entry_point"], "cuLaunchKernelEx");
    assert_eq!(op["grid"], serde_json::json!([3, 2, 1]));
    assert_eq!(op["block"], serde_json::json!([64, 2, 1]));
    assert_eq!(op["shared_mem_bytes"], 128);
    assert_eq!(r.report()["culprit"]["confidence"], "exact");
}

#[test]
fn a_launch_that_fails_by_itself_is_its_own_culprit() {
    let r = run(
        &scenarios(),
        &["launch_error"],
        true,
        &[("CUDABLAME_REPORT_NONSTICKY", "on")],
    );
    assert_eq!(r.printed("launch_rc"), "1");
    let rep = r.report();
    assert_eq!(rep["error"]["code"], 1);
    assert_eq!(rep["error"]["sticky"], false);
    assert_eq!(rep["culprit"]["confidence"], "exact");
    assert_eq!(r.culprit()["kernel"], "quick");
    assert_eq!(r.culprit()["block"], serde_json::json!([2048, 1, 1]));
    assert!(r
        .culprit_functions()
        .iter()
        .any(|n| n == "launch_bad_kernel"));
    assert_eq!(rep["reporting_call"]["entry_point"], "cuLaunchKernel");
    // The driver refused it, so it was never enqueued and has no sequence number: the JSON has
    // none (it once said 0, a number no op has) and the text numbers it nowhere (it said `#0`).
    // Before it the legacy stream holds #1 (a copy) and #2 (the warm-up launch): the refused
    // launch did not take #3.
    assert!(r.culprit().get("seq").is_none(), "{}", r.culprit());
    assert!(!r.stderr.contains("#0 kernel"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("culprit [Exact]: kernel quick (not enqueued)"),
        "{}",
        r.stderr
    );
    let legacy = rep["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stream"] == "legacy")
        .unwrap();
    assert_eq!(legacy["issued"], 2, "{legacy}");
    // The text says the launch failed by itself, not that it "only noticed" an earlier error.
    assert!(
        r.stderr
            .contains("culprit:  quick  (the launch itself failed, exact)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("(cuLaunchKernel, the failing launch itself)"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("only noticed"), "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("==== cudablame:").count(),
        1,
        "{}",
        r.stderr
    );
}

#[test]
fn global_capture_stays_valid_and_graph_launch_is_recorded() {
    let r = run(&scenarios(), &["capture"], true, &[]);
    assert_eq!(
        r.printed("end_capture_rc"),
        "0",
        "the shim invalidated the capture"
    );
    assert_eq!(
        r.printed("graph_nodes"),
        "3",
        "markers leaked into the user's graph"
    );
    assert_culprit(&r, "oob_write", 2, "exact");
    let streams = r.report()["streams"].as_array().unwrap();
    let mine = streams
        .iter()
        .find(|s| s["stream"] == r.culprit()["stream"])
        .expect("culprit's stream");
    let recent = mine["recent"].as_array().unwrap().clone();
    assert_eq!(recent[0]["kind"], "graph");
    assert_eq!(recent[0]["state"], "completed");
}

#[test]
fn without_markers_the_verdict_is_suspect() {
    let r = run(
        &scenarios(),
        &["oob"],
        true,
        &[("CUDABLAME_MARKERS", "off")],
    );
    assert_eq!(r.code, 1);
    let rep = r.report();
    assert_eq!(rep["culprit"]["confidence"], "suspect");
    // All six kernels are unfinished as far as the host knows; the culprit is among them.
    let mut names: Vec<String> = rep["suspects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["kind"] == "kernel")
        .map(|o| o["kernel"].to_string())
        .collect();
    names.push(r.culprit()["kernel"].to_string());
    assert_eq!(names.len(), 6);
    assert!(names.contains(&"\"oob_write\"".to_string()));
}

#[test]
fn driver_refusing_markers_falls_back_to_suspect() {
    let r = run(
        &scenarios(),
        &["oob"],
        true,
        &[("FAKE_CUDA_NO_STREAM_MEMOPS", "1")],
    );
    assert_eq!(r.code, 1);
    assert_eq!(r.printed("memcpy_rc"), "700");
    assert_eq!(r.report()["culprit"]["confidence"], "suspect");
    assert_eq!(
        r.stderr.matches("refused a progress marker").count(),
        1,
        "{}",
        r.stderr
    );
}

#[test]
fn report_off_writes_no_file_but_text() {
    let r = run(&scenarios(), &["oob"], true, &[("CUDABLAME_REPORT", "off")]);
    assert!(r.report.is_none());
    assert!(
        r.stderr.contains("culprit [Exact]: #4 kernel oob_write"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_faulting_graph_is_named_by_its_captured_kernels() {
    let r = run(&scenarios(), &["graph_fault"], true, &[]);
    assert_eq!(r.printed("sync_rc"), "700");
    let rep = r.report();
    assert_eq!(rep["culprit"]["confidence"], "exact");
    let op = r.culprit();
    assert_eq!(op["kind"], "graph");
    assert_eq!(op["seq"], 1);
    assert_eq!(op["entry_point"], "cuGraphLaunch");
    assert_eq!(op["kernel"], "graph: slow, oob_write, quick");
    let captured = op["graph"]["ops"].as_array().unwrap();
    assert_eq!(captured.len(), 3);
    assert_eq!(captured[1]["kernel"], "oob_write");
    assert_eq!(captured[1]["seq"], 2);
    assert!(functions(&captured[1]["stack"])
        .iter()
        .any(|f| f == "launch_bad_kernel"));
    assert!(functions(&captured[1]["stack"])
        .iter()
        .any(|f| f == "capture_graph"));
    assert!(functions(&op["graph"]["captured_at"])
        .iter()
        .any(|f| f == "capture_graph"));
    // The launch of the graph itself happened in main.
    assert!(r.culprit_functions().iter().any(|f| f == "main"));
}

/// A kernel cudablame saw no lookup of faults at its first launch, inside the launch call, and
/// the driver names nothing after the fault (`FAKE_CUDA_NAMELESS=after_fault`): the name was
/// asked at that launch before its real call. (Asked after it, the report said
/// `kernel (name unknown)`: found by review of the sixteenth session's hot path.)
#[test]
fn a_kernel_whose_first_launch_faults_at_once_keeps_its_name() {
    let prog = compile("first_launch_fault", true);
    let r = run(&prog, &[], true, &[("FAKE_CUDA_NAMELESS", "after_fault")]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert_eq!(r.printed("sync_rc"), "700");
    let op = r.culprit();
    assert_eq!(op["kernel"], "bad_kernel", "{op:#}\n{}", r.stderr);
    assert!(r
        .culprit_functions()
        .iter()
        .any(|f| f == "launch_bad_kernel"));
}

#[test]
fn kernel_names_come_from_the_lookup_when_the_driver_will_not_say() {
    // Driver 580 did not name PTX-module functions (cuFuncGetName failed on the H200): the name
    // the program looked the function up by must reach the report.
    let r = run(&scenarios(), &["oob"], true, &[("FAKE_CUDA_NAMELESS", "1")]);
    assert_culprit(&r, "oob_write", 4, "exact");
    let names: Vec<&str> = r.report()["suspects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kernel"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["quick", "quick", "quick"]);
}
