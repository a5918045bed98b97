//! No CUDA at all: preloaded into programs that never load a driver (`/bin/true`, `sh`,
//! `python3 -c pass`, a C program probing with dlsym), cudablame is inert: no output, no file, the
//! same exit status and stdout, even with every CUDABLAME_* variable set to garbage (they are read
//! only when a driver call is first made).

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

/// Every variable set to something invalid, plus an unknown one.
const GARBAGE: &[(&str, &str)] = &[
    ("CUDABLAME_REPORT", ""),
    ("CUDABLAME_TRACE", ""),
    ("CUDABLAME_MARKERS", "maybe"),
    ("CUDABLAME_STACK", "sideways"),
    ("CUDABLAME_STACK_DEPTH", "-1"),
    ("CUDABLAME_UNWINDER", "?"),
    ("CUDABLAME_RING", "99999999999999999999999"),
    ("CUDABLAME_TEXT", ""),
    ("CUDABLAME_DEBUG", "2"),
    ("CUDABLAME_PYTHON", "x"),
    ("CUDABLAME_PYTHON_DEPTH", "0"),
    ("CUDABLAME_TEST_PANIC", "always"),
    ("CUDABLAME_NO_SUCH_VARIABLE", "1"),
];

fn compare(program: &Path, args: &[&str]) -> String {
    let dir = scratch().join(format!(
        "inert-{}",
        program.file_name().unwrap().to_string_lossy()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut outs = Vec::new();
    for (shim_on, garbage) in [(false, false), (true, false), (true, true)] {
        let mut cmd = command(program, args);
        cmd.current_dir(&dir);
        if shim_on {
            cmd.env("LD_PRELOAD", shim());
        }
        if garbage {
            cmd.envs(GARBAGE.iter().copied());
        }
        let (out, _) = output_within(&mut cmd, Duration::from_secs(60));
        outs.push((ending(&out.status), out.stdout, out.stderr));
    }
    let label = format!("{} {args:?}", program.display());
    for o in &outs[1..] {
        assert_eq!(o.0, outs[0].0, "{label}");
        assert_eq!(o.1, outs[0].1, "{label}");
        assert_eq!(
            String::from_utf8_lossy(&o.2),
            String::from_utf8_lossy(&outs[0].2),
            "{label}: cudablame printed something"
        );
    }
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "{label}: cudablame wrote a file"
    );
    outs[0].0.clone()
}

#[test]
fn inert_in_programs_without_cuda() {
    let mut programs = 0;
    for (program, args, want) in [
        ("/bin/true", &[][..], "exit 0"),
        ("/bin/false", &[][..], "exit 1"),
        (
            "/bin/sh",
            &["-c", "echo hello; echo oops >&2; exit 4"][..],
            "exit 4",
        ),
    ] {
        if Path::new(program).exists() {
            assert_eq!(compare(Path::new(program), args), want);
            programs += 1;
        }
    }
    let nocuda = compile("nocuda", false);
    assert_eq!(compare(&nocuda, &[]), "exit 5");
    programs += 1;
    println!("inert: {programs} programs without CUDA, each plain, preloaded, preloaded with {} bad variables", GARBAGE.len());
}

#[test]
fn inert_in_python_without_cuda() {
    let Ok(python) = which("python3") else {
        println!("python3 not found: skipped");
        return;
    };
    assert_eq!(compare(&python, &["-c", "pass"]), "exit 0");
    assert_eq!(
        compare(
            &python,
            &[
                "-c",
                "import sys, ctypes; print(ctypes.CDLL(None).getpid() > 0); sys.exit(3)"
            ]
        ),
        "exit 3"
    );
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        })
        .ok_or(())
}
