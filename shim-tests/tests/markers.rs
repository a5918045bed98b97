//! The progress-marker policy (`CUDABLAME_MARKERS`, issue 21) seen from a program: how many ops
//! get a marker under the default budget, `every` and `off`, read from the `cudablame stats:`
//! line (`CUDABLAME_STATS=on`). The decision itself is unit tested in `src/record/policy.rs`.

mod common;
use common::*;
use std::time::Duration;

/// `(marked, ops, held stacks unwound)` from a run of `programs/markers.c` under cudablame
/// with `env` (no `CUDABLAME_MARKERS` unless `env` sets it: cudablame's default).
fn marked(args: &[&str], env: &[(&str, &str)]) -> (u64, u64, u64) {
    let (m, ops, unwound, _) = stats(args, env);
    (m, ops, unwound)
}

/// The stdout and the `cudablame stats:` line of a successful run of `programs/markers.c` under
/// cudablame with `args` and `env` (no `CUDABLAME_MARKERS` unless `env` sets it).
fn stdout_and_stats_line(args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let prog = compile("markers", true);
    let mut cmd = command_default_markers(&prog, args);
    cmd.env("LD_PRELOAD", shim())
        .env("CUDABLAME_STATS", "on")
        .env("CUDABLAME_REPORT", "off");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (out, _) = output_within(&mut cmd, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} {env:?}: {stdout}\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("cudablame stats:"))
        .unwrap_or_else(|| panic!("no stats line:\n{stderr}"));
    (stdout, line.to_string())
}

/// `(marked, ops, held stacks unwound, held stack copies)` from the stats line of a run of
/// `programs/markers.c`, as [`marked`].
fn stats(args: &[&str], env: &[(&str, &str)]) -> (u64, u64, u64, u64) {
    let (stdout, line) = stdout_and_stats_line(args, env);
    let line = line.as_str();
    let after = |key: &str| -> Vec<u64> {
        let rest = &line[line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty())
            .take(2)
            .map(|w| w.parse().unwrap())
            .collect()
    };
    let m = after("marked ");
    let ops: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ops="))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(m[1], ops, "every op recorded: {line}");
    // `marked N of M ops (every E, first F, count C, copy P, gap G, idle I, wait W)`: N is the
    // sum of the reasons (a marker before a wait used to count only as a reason).
    let reasons = &line[line.find(" ops (every ").expect(line) + 5..];
    let reasons = &reasons[..reasons.find(')').expect(line)];
    let sum: u64 = reasons
        .split(", ")
        .map(|r| r.rsplit(' ').next().unwrap().parse::<u64>().expect(reasons))
        .sum();
    assert_eq!(sum, m[0], "{line}");
    (
        m[0],
        m[1],
        after("held stacks unwound ")[0],
        after("held stack copies ")[0],
    )
}

#[test]
fn a_fast_launch_loop_marks_few_ops() {
    // 3,000 launches behind a 200 ms kernel: the host far ahead of the stream.
    let (m, ops, _) = marked(&["loop", "3000"], &[]);
    assert_eq!(ops, 3001);
    // At most 32 ops apart (at least 94 markers), and one per 100 µs of host time: on this
    // machine launches take a few µs, so far fewer than one in four.
    assert!(m >= 94, "{m} of {ops}: windows are bounded at 32 ops");
    assert!(
        m <= ops / 4,
        "{m} of {ops} marked: the budget should mark few"
    );
}

#[test]
fn without_time_gaps_markers_are_exactly_32_ops_apart() {
    // A gap of 1 s never passes: only the bound on unmarked ops marks, ops 1, 33, 65, ... (94),
    // and the newest op before the program's final synchronization (`wait`: `marked N` counts
    // every marker, the sum of its reasons).
    let (m, ops, _) = marked(&["loop", "3000"], &[("CUDABLAME_MARKER_GAP_US", "1000000")]);
    assert_eq!((m, ops), (95, 3001));
}

#[test]
fn ops_separated_by_a_long_host_gap_are_each_marked() {
    // 2 ms of host time between launches, 20 times the default gap of 100 µs.
    let (m, ops, _) = marked(&["gaps", "20", "2000"], &[]);
    assert_eq!((m, ops), (20, 20));
    // With a gap longer than the whole program (20 pauses of 2 ms): the first op, and the last
    // before the final synchronization (`wait`); the stream is idle at every launch (the device
    // wrote the last marker), and half the gap (500 ms) never passes. (With 50 ms, half the gap
    // passed after about 13 pauses.)
    let (m, _, _) = marked(
        &["gaps", "20", "2000"],
        &[("CUDABLAME_MARKER_GAP_US", "1000000")],
    );
    assert_eq!(m, 2);
}

#[test]
fn a_host_whose_marker_writes_are_slow_marks_fewer_ops() {
    // 30 launches 700 µs of host time apart, each marker write spinning 20 µs in the simulated
    // driver (a host whose driver calls are slow): after the first budget marker the stream's
    // gap is stretched to 250 times the write's cost, at most four times the default 500 µs, so
    // 2 ms (`record::policy::Marks::gap_ns`), and the stats line's last field says so. Ops 1
    // (first) and 2 (gap), then about every third op (2.1 ms): 12 of 30 where the sleeps keep
    // their length; a loaded machine's longer sleeps mark more (up to 25 seen with six busy
    // loops on two cores), but unstretched every op is marked (each sleep is past 500 µs).
    let slow = [("FAKE_CUDA_MEMOP_HOST_US", "20")];
    let (stdout, line) = stdout_and_stats_line(&["gaps", "30", "700"], &slow);
    assert!(stdout.contains("ops=30"), "{stdout}");
    assert!(line.ends_with("; marker gap now 2000 us"), "{line}");
    let (m, ops, _) = marked(&["gaps", "30", "700"], &slow);
    assert_eq!(ops, 30);
    assert!(m < 30, "{m} of {ops} marked");
    // A gap given in the environment is kept as given: each op is 700 µs after the last,
    // past the 500 µs gap, so each is marked.
    let given = [
        ("FAKE_CUDA_MEMOP_HOST_US", "20"),
        ("CUDABLAME_MARKER_GAP_US", "500"),
    ];
    assert_eq!(marked(&["gaps", "30", "700"], &given), (30, 30, 0));
    let (_, line) = stdout_and_stats_line(&["gaps", "30", "700"], &given);
    assert!(line.ends_with("; marker gap now 500 us"), "{line}");
}

#[test]
fn a_markers_own_write_is_not_host_time_between_ops() {
    // Each marker write spins 3 ms in the simulated driver, longer than any gap; 40 launches
    // 50 µs of host time apart (about 100 with the sleep's overshoot). The write's time is
    // cudablame's, so it does not count toward the next op's gap (it did: every op was then
    // due, 40 of 40). By default: op 1 (first), the op past 500 µs, then the gap is 2 ms (the
    // write's cost clipped): 2 to 4 gap markers in the run's few ms, and the newest op before
    // the final synchronization. A loaded machine's longer sleeps add one per 2 ms.
    for env in [
        &[("FAKE_CUDA_MEMOP_HOST_US", "3000")][..],
        // A configured gap of 2 ms, not stretched: the same bound.
        &[
            ("FAKE_CUDA_MEMOP_HOST_US", "3000"),
            ("CUDABLAME_MARKER_GAP_US", "2000"),
        ][..],
    ] {
        let (m, ops, _) = marked(&["gaps", "40", "50"], env);
        assert_eq!(ops, 40);
        assert!(m <= 12, "{env:?}: {m} of {ops} marked");
    }
}

#[test]
fn every_marks_each_op_and_off_none() {
    assert_eq!(
        marked(&["loop", "500"], &[("CUDABLAME_MARKERS", "every")]).0,
        501
    );
    assert_eq!(
        marked(&["loop", "500"], &[("CUDABLAME_MARKERS", "off")]).0,
        0
    );
}

#[test]
fn without_markers_the_launching_thread_unwinds_no_held_stack() {
    // Nothing proves progress without markers, so every op leaving the stack copies used to
    // be unwound on the launching thread (1,024 per synchronization, 1.2 to 4.2 µs each in
    // PyTorch: a GPU-bound step was 38% slower with markers off).
    let (_, _, unwound) = marked(&["loop", "3000"], &[("CUDABLAME_MARKERS", "off")]);
    assert_eq!(unwound, 0);
    // With markers the ops queued behind the slow kernel are held, with their stacks (the
    // culprit keeps its launch stack however far the host runs ahead): as copies, moved aside
    // without unwinding, the first 1,024 that leave the newest 32 copies; only past that (the
    // real driver's queue holds about 1,021 launches per stream; the simulated one has no
    // bound) are the next 1,024 unwound on the launching thread. All 3,001 ops stay unproven
    // while the 200 ms kernel runs, so the counts are exact. (`CUDABLAME_STACK=every`: by
    // default the loop's launches share one launch site's copy, `stack::sites`, and nothing is
    // held.)
    let (_, ops, unwound, copies) = stats(
        &["loop", "3000"],
        &[("CUDABLAME_MARKERS", "every"), ("CUDABLAME_STACK", "every")],
    );
    assert_eq!(ops, 3001);
    assert_eq!((copies, unwound), (1024, 1024));
}

#[test]
fn the_default_budget_holds_copies_and_unwinds_nothing_within_the_drivers_queue() {
    // 1,000 launches behind the 200 ms kernel (within the real driver's queue depth): every
    // op leaving the newest 32 stack copies is held as a copy; none is unwound on the
    // launching thread (before: 969 unwinds, 1.2 to 4.2 µs each in PyTorch). With a copy per
    // launch (`CUDABLAME_STACK=every`):
    let (_, ops, unwound, copies) = stats(&["loop", "1000"], &[("CUDABLAME_STACK", "every")]);
    assert_eq!(ops, 1001);
    assert_eq!((copies, unwound), (1001 - 32, 0));
    // By default the loop's launches share their launch site's copy (`stack::sites`, checked
    // per launch): nothing is copied per launch, so nothing is held.
    let (_, ops, unwound, copies) = stats(&["loop", "1000"], &[]);
    assert_eq!(ops, 1001);
    assert_eq!((copies, unwound), (0, 0));
}

#[test]
fn the_default_budget_never_gives_a_wrong_exact_verdict() {
    // The culprit scenarios under the default policy: where few ops are marked the verdict may
    // lose its proof (then it is not `exact`), but an `exact` verdict names the real culprit.
    let prog = compile("scenarios", false);
    for (scenario, culprit) in [
        ("oob", "oob_write"),
        ("run_ahead", "oob_write"),
        ("same_depth", "instant_oob"),
        ("next_launch", "instant_oob"),
    ] {
        let r = run(&prog, &[scenario], true, &[("CUDABLAME_MARKERS", "budget")]);
        let c = &r.report()["culprit"];
        if c["confidence"] == "exact" {
            assert_eq!(c["op"]["kernel"], culprit, "{scenario}: {c}");
        }
    }
}

/// The fake driver's `inline=1` kernels (for benchmarks: `programs/py_bench.py ... inline`) run
/// inside the launch call on an idle stream: without cudablame the stream is idle right after
/// the launches and an inline fault is sticky before the next call; under cudablame the
/// faulting launch is still recorded and named exactly, with its sequence number.
#[test]
fn inline_kernels_run_inside_the_launch_and_their_fault_is_named() {
    let prog = compile("markers", true);
    let plain = run(&prog, &["inline", "5"], false, &[]);
    assert_eq!(plain.printed("inline_query_rc"), "0", "{}", plain.stdout);
    assert_eq!(plain.printed("fault_launch_rc"), "0");
    assert_eq!(plain.printed("fault_query_rc"), "700");
    let shimmed = run(&prog, &["inline", "5"], true, &[]);
    assert_eq!(shimmed.printed("fault_launch_rc"), "0");
    assert_eq!(shimmed.printed("sync_rc"), "700");
    let op = shimmed.culprit();
    assert_eq!(op["kernel"], "bad_inline", "{}", shimmed.stderr);
    assert_eq!(op["seq"], 6);
    assert_eq!(shimmed.report()["culprit"]["confidence"], "exact");
    // The stats line: the report, built inside the cuStreamSynchronize that reported the 700
    // (its JSON written here), is not counted as cudablame's time in that call (before: 89 ms
    // "per call" on this machine; a fresh-user trial saw 181 ms for the demo's reporting copy:
    // the report's symbolization), and the 6 recorded launches are the 6 whole hooks.
    let report = scratch().join("inline-stats-%p.json");
    let report = report.to_str().unwrap();
    let (_, line) = stdout_and_stats_line(&["inline", "5"], &[("CUDABLAME_REPORT", report)]);
    let line = line.as_str();
    assert_eq!(number_after(line, "cudablame stats: "), 6, "{line}");
    assert_eq!(number_after(line, "whole hook: "), 6, "{line}");
    let sync = &line[line.find("cuStreamSynchronize 1 x ").expect(line) + 24..];
    let ns_in_sync: u64 = sync
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .expect(sync);
    assert!(ns_in_sync < 5_000_000, "{line}");
}

/// The stats line also counts the hooked calls that record no op, by entry point: the loop's
/// module load, its two kernel lookups and its final stream sync, and nothing for its 3,001
/// launches (each a recorded op, counted above).
#[test]
fn the_stats_line_counts_the_calls_that_record_no_op_by_entry_point() {
    let (_, line) = stdout_and_stats_line(&["loop", "3000"], &[]);
    let line = line.as_str();
    assert_eq!(number_after(line, "other calls "), 4, "{line}");
    assert_eq!(number_after(line, "cuStreamSynchronize "), 1, "{line}");
    assert_eq!(number_after(line, "cuModuleGetFunction "), 2, "{line}");
    assert_eq!(number_after(line, "cuModuleLoadData "), 1, "{line}");
    assert!(
        !line.contains("cuLaunchKernel "),
        "launches are ops: {line}"
    );
}
