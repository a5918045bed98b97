//! No panic crosses into the program: every export catches panics in cudablame's own code and
//! still returns the real result. `CUDABLAME_TEST_PANIC=describe|record|report|resolve` (a
//! test-only variable) makes cudablame's code panic at that point: the program must get the same
//! results and exit status, stderr gets exactly one line ("cudablame: internal error (...);
//! continuing without it") and no Rust panic message, and cudablame stays off afterwards.

mod common;
use common::*;

#[test]
fn a_panic_in_cudablame_changes_nothing_for_the_program() {
    let prog = compile("scenarios", false);
    let linked = compile("scenarios", true);
    let mut runs = 0;
    for point in ["describe", "record", "report", "resolve"] {
        for (program, args) in [
            (&prog, &["oob"][..]),
            (&prog, &["--dlsym", "oob"][..]),
            (&prog, &["threads"][..]),
            (&prog, &["capture"][..]),
            (&linked, &["launch_error"][..]),
        ] {
            let plain = run(program, args, false, &[]);
            let r = run(program, args, true, &[("CUDABLAME_TEST_PANIC", point)]);
            let label = format!("{point} {args:?}");
            assert_eq!(r.code, plain.code, "{label}: {}", r.stderr);
            assert_eq!(
                stable_lines(&r.stdout),
                stable_lines(&plain.stdout),
                "{label}"
            );
            // "resolve" is where a function found by dlsym / cuGetProcAddress is wrapped: a program
            // linked with -lcuda calls the exports directly and never gets there.
            if point == "resolve" && std::ptr::eq(program, &linked) {
                assert!(!r.stderr.contains("internal error"), "{label}");
                continue;
            }
            let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "{label}: exactly one line:\n{}", r.stderr);
            assert!(
                lines[0].starts_with("cudablame: internal error (")
                    && lines[0].ends_with("; continuing without it"),
                "{label}: {}",
                lines[0]
            );
            assert!(
                lines[0].contains("CUDABLAME_TEST_PANIC"),
                "{label}: {}",
                lines[0]
            );
            assert!(
                !r.stderr.contains("panicked at") && !r.stderr.contains("RUST_BACKTRACE"),
                "{label}"
            );
            assert!(
                r.report.is_none(),
                "{label}: cudablame must stay off after an internal error"
            );
            runs += 1;
        }
    }
    println!("panics: {runs} runs with a panic injected at 4 points, program unaffected each time");
}
