//! Device-side asserts: the fake driver prints the assert line on stdout through `vfprintf` from
//! inside `libcuda.so.1`, like the real one. The shim captures it (patching only the driver's own
//! import slot), puts it in the report, uses it to name the culprit exactly when several streams
//! were busy, and leaves the program's stdout byte for byte unchanged.

mod common;
use common::*;

fn asserts() -> std::path::PathBuf {
    compile("asserts", true)
}

/// Runs `scenario` without and with the shim: the same stdout, and an `exact` culprit. Returns
/// the shim's run.
fn exact_and_unchanged(scenario: &str) -> Run {
    let plain = run(&asserts(), &[scenario], false, &[]);
    let r = run(&asserts(), &[scenario], true, &[]);
    assert_eq!(r.stdout, plain.stdout);
    let rep = r.report();
    assert_eq!(
        rep["culprit"]["confidence"], "exact",
        "{}",
        rep["culprit"]["reason"]
    );
    r
}

const LINE: &str =
    "fake_kernels.cu:42: check_kernel: block: [0,0,0], thread: [1,0,0] Assertion `i<n` failed.";

#[test]
fn the_assert_line_is_in_the_report_and_stdout_is_unchanged() {
    let plain = run(&asserts(), &["one"], false, &[]);
    let r = run(&asserts(), &["one"], true, &[]);
    assert_eq!(plain.code, 1, "{}", plain.stdout);
    assert_eq!(r.code, 1);
    // Byte for byte, the driver's assert lines included.
    assert_eq!(r.stdout, plain.stdout);
    assert!(r.stdout.contains(LINE), "{}", r.stdout);
    assert_eq!(r.printed("sync_rc"), "710");
    let rep = r.report();
    assert_eq!(rep["error"]["code"], 710);
    assert_eq!(rep["culprit"]["confidence"], "exact");
    assert_eq!(r.culprit()["kernel"], "check_kernel");
    let a = &rep["culprit"]["device_assert"];
    assert_eq!(a["text"], LINE, "{rep:#}");
    assert_eq!(a["file"], "fake_kernels.cu");
    assert_eq!(a["line"], 42);
    assert_eq!(a["kernel"], "check_kernel");
    assert_eq!(a["block"], serde_json::json!([0, 0, 0]));
    assert_eq!(a["thread"], serde_json::json!([1, 0, 0]));
    assert_eq!(a["condition"], "i<n");
    assert_eq!(a["lines"], 2);
    assert_eq!(a["matches_culprit"], true);
    assert!(
        r.culprit_functions()
            .iter()
            .any(|f| f == "launch_asserting"),
        "{:?}",
        r.culprit_functions()
    );
    // The text report's lead block shows it after the launching line, before the reporting call.
    let lines: Vec<&str> = r.stderr.lines().collect();
    let at = |prefix: &str| lines.iter().position(|l| l.starts_with(prefix));
    let assert_at = lines
        .iter()
        .position(|l| *l == format!("assert:   {LINE}"))
        .unwrap_or_else(|| panic!("no assert line: {}", r.stderr));
    assert!(
        at("launched:").is_some_and(|l| l < assert_at),
        "{}",
        r.stderr
    );
    assert!(
        at("reported:").is_some_and(|l| l > assert_at),
        "{}",
        r.stderr
    );
}

#[test]
fn two_busy_streams_and_an_assert_are_exact() {
    let r = exact_and_unchanged("two_busy");
    let rep = r.report();
    assert_eq!(r.culprit()["kernel"], "check_kernel");
    let reason = rep["culprit"]["reason"].as_str().unwrap();
    assert!(reason.contains("device-side assert"), "{reason}");
    assert!(rep["culprit"].get("not_exact").is_none());
    // Both candidates are listed, the culprit first.
    let c = rep["culprit"]["candidates"].as_array().expect("candidates");
    assert_eq!(c.len(), 2);
    assert_eq!(c[0]["kernel"], "check_kernel");
    assert_eq!(c[1]["kernel"], "spin");
}

#[test]
fn two_busy_streams_without_an_assert_are_likely_with_every_candidate() {
    let r = run(&asserts(), &["no_assert"], true, &[]);
    let rep = r.report();
    assert_eq!(rep["error"]["code"], 700);
    assert_eq!(rep["culprit"]["confidence"], "likely");
    assert!(rep["culprit"].get("device_assert").is_none());
    let n = rep["culprit"]["not_exact"].as_str().expect("not_exact");
    assert!(n.contains("2 streams"), "{n}");
    let c = rep["culprit"]["candidates"].as_array().expect("candidates");
    assert_eq!(c.len(), 2);
    assert!(
        c.iter().any(|x| x["launched_at"]
            .as_str()
            .is_some_and(|l| l.contains("asserts.c"))),
        "{c:?}"
    );
    assert!(r.stderr.contains("    not exact: "), "{}", r.stderr);
    assert!(r.stderr.contains("    candidate 2: #"), "{}", r.stderr);
}

#[test]
fn an_assert_inside_a_graph_launch_is_exact() {
    let r = exact_and_unchanged("graph");
    let rep = r.report();
    assert_eq!(r.culprit()["kind"], "graph");
    assert_eq!(r.culprit()["kernel"], "graph: fill, check_kernel");
    assert_eq!(rep["culprit"]["device_assert"]["matches_culprit"], true);
}

#[test]
fn a_communication_kernel_ranks_after_the_other_candidate() {
    // Without the rule, the all-reduce (launched last) would rank first.
    let r = run(&asserts(), &["nccl"], true, &[]);
    let rep = r.report();
    assert_eq!(rep["culprit"]["confidence"], "likely");
    assert_eq!(r.culprit()["kernel"], "bad_kernel", "{}", r.stderr);
    let c = rep["culprit"]["candidates"].as_array().expect("candidates");
    assert_eq!(c[1]["kernel"], "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    assert!(
        c[1]["evidence"]
            .as_str()
            .unwrap()
            .contains("communication kernel"),
        "{c:?}"
    );
}

#[test]
fn an_assert_of_another_device_never_names_this_errors_culprit() {
    // Issue 19.4, first case: device 1 asserts in check_kernel; device 0 faults with 700 in
    // bad_kernel beside a healthy check_kernel of another module. Before the fix: `culprit:
    // check_kernel (exact)` with device 1's assert line.
    let r = run(&asserts(), &["two_devices"], true, &[]);
    assert_eq!(r.printed("sync_rc"), "700", "{}", r.stdout);
    assert!(
        r.stdout.contains(LINE),
        "device 1 printed its line: {}",
        r.stdout
    );
    let rep = r.report();
    assert_eq!(rep["error"]["code"], 700);
    let c = &rep["culprit"];
    assert_eq!(c["confidence"], "likely", "{}", c["reason"]);
    assert!(c.get("device_assert").is_none(), "{c:#}");
    // Without the assert, the ranking's own evidence: bad_kernel was launched last.
    assert_eq!(c["op"]["kernel"], "bad_kernel", "{c:#}");
    assert_eq!(c["one_of"], 2);
    let kernels: Vec<&str> = c["window"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kernel"].as_str().unwrap())
        .collect();
    assert_eq!(kernels, ["check_kernel", "bad_kernel"]);
}

#[test]
fn a_graph_with_a_cut_kernel_list_may_run_the_asserting_kernel() {
    // Issue 19.4, second case: a graph of 1,030 kernels ending in an asserting check_kernel,
    // beside a healthy check_kernel of another module. cudablame keeps 1,024 ops per graph, so
    // the graph "may run" check_kernel. Before the fix: exact on the healthy one.
    let r = run(&asserts(), &["graph_1030"], true, &[]);
    assert_eq!(r.printed("sync_rc"), "710", "{}", r.stdout);
    let c = &r.report()["culprit"];
    assert_eq!(c["device_assert"]["kernel"], "check_kernel");
    assert_eq!(c["confidence"], "likely", "{}", c["reason"]);
    assert_eq!(c["device_assert"]["matches_culprit"], false);
    let not_exact = c["not_exact"].as_str().unwrap();
    assert!(
        not_exact.contains("1 known op(s) run and 1 op(s) of unknown or cut kernel lists may run"),
        "{not_exact}"
    );
    assert_eq!(c["one_of"], 2);
}
