//! Data not lost: the JSON report is complete on disk before the failing call returns to the
//! program (written to a temporary file, flushed, then linked), so a program that aborts right
//! after still leaves it; two threads hitting the error at once get one complete report, and both
//! get the sticky code.

mod common;
use common::*;
use std::time::Duration;

fn life() -> std::path::PathBuf {
    compile("life", false)
}

#[test]
fn the_report_is_on_disk_when_the_program_aborts_right_after() {
    let dir = scratch().join("abort");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for shim_on in [false, true] {
        let mut cmd = command(&life(), &["abort_after"]);
        cmd.current_dir(&dir)
            .env("CUDABLAME_REPORT", dir.join("r.json"));
        if shim_on {
            cmd.env("LD_PRELOAD", shim());
        }
        let (out, _) = output_within(&mut cmd, Duration::from_secs(30));
        assert_eq!(ending(&out.status), "signal 6", "shim {shim_on}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("memcpy_rc=700"));
    }
    let rep: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r.json")).expect("report on disk"))
            .expect("complete JSON");
    assert_eq!(rep["culprit"]["op"]["kernel"], "oob");
    assert_eq!(rep["culprit"]["confidence"], "exact");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec!["r.json".to_string()],
        "no temporary file left behind"
    );
}

#[test]
fn two_threads_hitting_the_error_at_once_get_one_complete_report() {
    let runs = 20;
    for i in 0..runs {
        let dir = scratch().join(format!("two-threads-{i}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = command(&life(), &["two_threads"]);
        cmd.current_dir(&dir)
            .env("LD_PRELOAD", shim())
            .env("CUDABLAME_REPORT", dir.join("r.json"));
        let (out, _) = output_within(&mut cmd, Duration::from_secs(30));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            ending(&out.status),
            "exit 0",
            "both threads must get 700:\n{stdout}"
        );
        assert!(
            stdout.contains("thread0_rc=700") && stdout.contains("thread1_rc=700"),
            "{stdout}"
        );
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec!["r.json".to_string()],
            "run {i}: exactly one report file"
        );
        let rep: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap())
                .expect("complete JSON");
        assert_eq!(rep["culprit"]["op"]["kernel"], "instant_oob");
        assert_eq!(rep["culprit"]["confidence"], "exact");
        assert_eq!(
            stderr.matches("==== cudablame:").count(),
            1,
            "run {i}: one text report\n{stderr}"
        );
    }
    println!("two threads: {runs} runs, one complete report each");
}
