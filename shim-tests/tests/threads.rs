//! Launches from threads name what the thread was started to run (`pthread_create` is noted):
//! a `std::thread`'s callable from its state's type name, even in a stripped binary whose
//! launch stack is only unnamed frames, and a plain pthread's start routine.

mod common;
use common::*;
use std::path::PathBuf;
use std::process::Command;

fn build(out: &str, strip: bool) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let bin = scratch().join(out);
    if bin.exists() {
        return bin;
    }
    let st = Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
        .args(["-O2", "-rdynamic", "-o"])
        .arg(&bin)
        .arg(programs_dir().join("thread_launch.cpp"))
        .arg("-I")
        .arg(programs_dir())
        .arg("-L")
        .arg(driver_dir())
        .arg(format!("-Wl,-rpath,{}", driver_dir().display()))
        .args(["-lcuda", "-lpthread"])
        .status()
        .expect("run c++");
    assert!(st.success(), "compiling thread_launch.cpp failed");
    if strip {
        assert!(Command::new("strip").arg(&bin).status().unwrap().success());
    }
    bin
}

#[test]
fn a_std_thread_launch_names_the_threads_callable() {
    for (name, strip) in [("thread_launch", false), ("thread_launch_stripped", true)] {
        let bin = build(name, strip);
        let plain = run(&bin, &[], false, &[]);
        let r = run(&bin, &[], true, &[]);
        assert_eq!((r.code, &r.stdout), (plain.code, &plain.stdout));
        assert_eq!(r.culprit()["kernel"], "bad", "{}", r.stderr);
        let start = r.culprit()["thread_start"].as_str().unwrap_or_default();
        assert!(
            start.starts_with("std::thread running main::{lambda()#1}"),
            "{name}: {start:?}\n{}",
            r.stderr
        );
        assert!(
            r.stderr
                .contains("    on a thread started as: std::thread running main::{lambda()#1}"),
            "{}",
            r.stderr
        );
    }
}

/// Issue 19 item 3: `std::thread t(producer, p)` names `producer(int*)`, the function pointer
/// read from the thread's state object by the tuple layout of the state's type, not
/// `void (*)(int*), int*` (the callable's type). Stripped too (its dynamic symbol remains).
#[test]
fn a_std_thread_running_a_function_pointer_names_the_function() {
    for (name, strip) in [("thread_launch", false), ("thread_launch_stripped", true)] {
        let bin = build(name, strip);
        let plain = run(&bin, &["fnptr"], false, &[]);
        let r = run(&bin, &["fnptr"], true, &[]);
        assert_eq!((r.code, &r.stdout), (plain.code, &plain.stdout));
        assert_eq!(r.culprit()["kernel"], "bad", "{}", r.stderr);
        let start = r.culprit()["thread_start"].as_str().unwrap_or_default();
        assert!(
            start.starts_with("std::thread running producer(int*)"),
            "{name}: {start:?}\n{}",
            r.stderr
        );
    }
}

#[test]
fn a_pthread_launch_names_the_start_routine_and_the_main_thread_none() {
    let r = run(&compile("scenarios", false), &["threads"], true, &[]);
    let start = r.culprit()["thread_start"].as_str().unwrap_or_default();
    assert!(
        start.starts_with("thread start routine thread_body at ") && start.contains("scenarios.c:"),
        "{start:?}"
    );
    let r = run(&compile("scenarios", false), &["oob"], true, &[]);
    assert!(r.culprit().get("thread_start").is_none());
}
