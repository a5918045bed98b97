//! The shim never changes what the program sees: same output and exit status with and without it.

mod common;
use common::*;

#[test]
fn same_results_with_and_without_the_shim() {
    let prog = compile("scenarios", false);
    for args in [&["ok"][..], &["oob"], &["--ptds", "oob"], &["launch_error"], &["side_stream"], &["capture"]] {
        let plain = run(&prog, args, false, &[]);
        let shimmed = run(&prog, args, true, &[]);
        // pid and tids differ between runs; everything else the program printed must not.
        let strip = |s: &str| -> Vec<String> {
            s.lines().filter(|l| !l.contains("pid=") && !l.contains("_tid=") && !l.starts_with("stream_b=")).map(String::from).collect()
        };
        assert_eq!(strip(&plain.stdout), strip(&shimmed.stdout), "{args:?}");
        assert_eq!(plain.code, shimmed.code, "{args:?}");
        assert!(plain.report.is_none());
    }
}

#[test]
fn a_correct_program_gets_no_report_and_no_output_from_the_shim() {
    let r = run(&compile("scenarios", false), &["ok"], true, &[]);
    assert_eq!(r.code, 0);
    assert!(r.report.is_none());
    assert_eq!(r.stderr, "", "the shim printed something for a correct program");
}
