//! Load: many threads x streams x launches on the fake driver under the shim: no crash, no
//! deadlock, memory bounded by the rings (`CUDABLAME_RING`), and the rings still consistent: a
//! fault after all of it is named exactly, with the right sequence number.
//!
//! Default size (CI: 2 cores, well under a minute): 32 threads x 8 streams x 20,000 launches per
//! thread (640,000 launches), run with the default ring and with `CUDABLAME_RING=16`.
//! `SHIM_TESTS_LOAD=full` runs the size, 32 x 8 x 1,000,000 launches per thread (32
//! million launches, about 35 s on 2 cores); `SHIM_TESTS_LOAD=TxSxL` any other.

mod common;
use common::*;
use std::time::Duration;

fn size() -> (u32, u32, u64) {
    match std::env::var("SHIM_TESTS_LOAD").ok().as_deref() {
        None | Some("") => (32, 8, 20_000),
        Some("full") => (32, 8, 1_000_000),
        Some(s) => {
            let v: Vec<u64> = s
                .split('x')
                .map(|n| n.parse().expect("SHIM_TESTS_LOAD=TxSxL"))
                .collect();
            assert_eq!(v.len(), 3, "SHIM_TESTS_LOAD=THREADSxSTREAMSxLAUNCHES");
            (v[0] as u32, v[1] as u32, v[2])
        }
    }
}

fn value(stdout: &str, key: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in:\n{stdout}"))
        .to_string()
}

fn kb(stdout: &str, key: &str) -> u64 {
    value(stdout, key).parse().unwrap()
}

/// Runs the load program; returns (stdout, stderr, report).
fn load(ring: Option<&str>, limit: Duration) -> (String, String, serde_json::Value) {
    let (threads, streams, launches) = size();
    let prog = compile("load", true);
    let report = scratch().join(format!("load-{}.json", ring.unwrap_or("default")));
    let _ = std::fs::remove_file(&report);
    let mut cmd = command(
        &prog,
        &[
            &threads.to_string(),
            &streams.to_string(),
            &launches.to_string(),
        ],
    );
    cmd.env("LD_PRELOAD", shim())
        .env("CUDABLAME_REPORT", &report);
    if let Some(r) = ring {
        cmd.env("CUDABLAME_RING", r);
    }
    let (out, _) = output_within(&mut cmd, limit);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(ending(&out.status), "exit 0", "{stdout}\n{stderr}");
    let rep = std::fs::read(&report)
        .unwrap_or_else(|e| panic!("no report {}: {e}\n{stderr}", report.display()));
    (
        stdout,
        stderr,
        serde_json::from_slice(&rep).expect("report is JSON"),
    )
}

/// Checks one load run: every launch succeeded, the fault is named exactly, memory stayed flat
/// once the rings were full. Returns (RSS at the end in KiB, seconds, launches).
fn check_run(ring: usize, stdout: &str, stderr: &str, rep: &serde_json::Value) -> (u64, f64, u64) {
    let (threads, streams, launches) = size();
    assert_eq!(value(stdout, "failed_launches"), "0", "{stderr}");
    assert_eq!(value(stdout, "sync_rc"), "700");
    let expected_seq: u64 = value(stdout, "expected_seq").parse().unwrap();
    assert_eq!(
        rep["culprit"]["confidence"], "exact",
        "{}",
        rep["culprit"]["reason"]
    );
    let op = &rep["culprit"]["op"];
    assert_eq!(op["kernel"], "oob", "{stderr}");
    assert_eq!(
        op["seq"], expected_seq,
        "ring sequence numbers lost or reordered under load"
    );
    assert_eq!(op["stream"], value(stdout, "culprit_stream"));
    let stream = rep["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stream"] == op["stream"])
        .expect("the culprit's stream");
    assert_eq!(stream["issued"], expected_seq);
    assert_eq!(stream["completed"], expected_seq - 1);
    let recent: Vec<u64> = stream["recent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["seq"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (expected_seq + 1 - recent.len() as u64..=expected_seq).collect();
    assert_eq!(
        recent, want,
        "the ring's newest ops are not the last ones launched"
    );
    // Streams are reported for the faulting context: every one the load used.
    assert_eq!(
        rep["streams"].as_array().unwrap().len() as u64,
        u64::from(threads * streams)
    );

    // Memory: once the rings are full (half-way, every stream has had launches/streams/2 >= ring
    // launches), it must not grow with the number of launches.
    let (half, end, peak) = (
        kb(stdout, "rss_half_kb"),
        kb(stdout, "rss_end_kb"),
        kb(stdout, "hwm_kb"),
    );
    assert!(
        launches / u64::from(streams) / 2 >= ring as u64,
        "load too small to fill the rings"
    );
    assert!(
        end <= half + 16 * 1024,
        "RSS grew from {half} KiB to {end} KiB in the second half"
    );
    // And it is bounded by what the rings and the stack copies can hold: 2 KiB per op slot,
    // 32 stack copies of 8 KiB per stream (`record::streams::STACK_COPIES`, the default
    // CUDABLAME_STACK_BYTES), 1 MiB per launching thread, 64 MiB for everything else (program,
    // driver, allocator).
    let per_stream = ring as u64 * 2 + 32 * 8;
    let bound =
        u64::from(threads * streams) * per_stream + u64::from(threads + 1) * 1024 + 64 * 1024;
    assert!(
        peak <= bound,
        "peak RSS {peak} KiB over the bound {bound} KiB"
    );
    (
        end,
        value(stdout, "seconds").parse().unwrap(),
        u64::from(threads) * launches,
    )
}

#[test]
fn many_threads_streams_and_launches_stay_consistent_and_bounded() {
    let (threads, streams, launches) = size();
    let limit = Duration::from_secs(if launches > 100_000 { 600 } else { 120 });
    let (out, err, rep) = load(None, limit);
    let (rss, secs, total) = check_run(256, &out, &err, &rep);
    let (out16, err16, rep16) = load(Some("16"), limit);
    let (rss16, secs16, _) = check_run(16, &out16, &err16, &rep16);
    assert!(
        rss16 < rss,
        "a smaller ring must take less memory ({rss16} KiB vs {rss} KiB)"
    );
    println!(
        "load: {threads} threads x {streams} streams x {launches} launches per thread = {total} launches, \
         twice: ring 256: {secs:.2} s ({:.0} launches/s), RSS {} MiB; ring 16: {secs16:.2} s, RSS {} MiB; \
         fault named exactly both times",
        total as f64 / secs,
        rss / 1024,
        rss16 / 1024
    );
}
