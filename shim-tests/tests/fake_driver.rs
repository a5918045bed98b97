//! The fake driver on its own: `programs/fake_smoke.c` checks its semantics (entry-point
//! routing, asynchronous streams, sticky faults, markers, kernel names, events, capture
//! invalidation) without the shim.

mod common;
use common::*;

/// The number of checks `fake_smoke` made when this test was written; it may only grow.
const FAKE_SMOKE_CHECKS: u64 = 308;

#[test]
fn fake_smoke_passes_without_the_shim() {
    let prog = compile("fake_smoke", false);
    let r = run(&prog, &[], false, &[]);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let line = (r.stdout.lines())
        .find(|l| l.starts_with("fake_smoke: "))
        .unwrap_or_else(|| panic!("no \"fake_smoke: N checks ok\" line:\n{}", r.stdout));
    assert!(line.ends_with(" checks ok"), "{line}");
    let n = number_after(line, "fake_smoke: ");
    assert!(
        n >= FAKE_SMOKE_CHECKS,
        "{n} checks, fewer than {FAKE_SMOKE_CHECKS}: {line}"
    );
    // The FAKE_CUDA_NO_STREAM_MEMOPS=1 child ran and passed.
    assert!(
        (r.stdout.lines())
            .any(|l| l.starts_with("fake_smoke --no-memops: ") && l.ends_with(" checks ok")),
        "{}",
        r.stdout
    );
    assert!(r.report.is_none(), "no shim, no report");
}
