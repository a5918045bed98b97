//! The lead block: error, culprit and the program line that launched it, what to fix.

use super::fit;
use super::frames::python_library;
use super::names::{brief, op_brief};
use crate::model::{Frame, PythonFrames, Report};
use std::fmt::Write;

/// Files under these prefixes are not the program's: system and CUDA headers, Rust's standard
/// library, crates.io sources, nvcc's generated stubs.
pub(super) fn foreign_file(file: &str) -> bool {
    file.starts_with("/usr/")
        || file.starts_with("/rustc/")
        || file.contains("/.cargo/registry/")
        || file.contains(".stub.c")
        || file.contains("/tmpxft_")
        || python_library(file).is_some()
}

/// Shared objects of the system (libc's start-up frames, libstdc++, the CUDA runtime installed
/// system-wide): never the program's launching line, even with line tables.
pub(super) fn system_module(module: &str) -> bool {
    [
        "/lib/",
        "/lib64/",
        "/usr/lib/",
        "/usr/lib64/",
        "/usr/local/cuda",
    ]
    .iter()
    .any(|p| module.starts_with(p))
}

/// The Python interpreter's own code and what `ctypes` calls through: the executable
/// (`python3.11`), `libpython*`, the `_ctypes` extension module and libffi. A native frame there is
/// the interpreter's, never the program's line (built from source, CPython has line tables:
/// `_call_function_pointer at .../Modules/_ctypes/callproc.c:923`). Other extension modules
/// (`*.cpython-*.so`) stay candidates: a program's own C or CUDA extension is one.
pub(super) fn interpreter_module(module: &str) -> bool {
    let name = module.rsplit('/').next().unwrap_or(module);
    name.starts_with("libpython")
        || name.starts_with("libffi")
        || name.starts_with("_ctypes.")
        || (name.starts_with("python") && name[6..].chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The program's own frame that launched `o` (or made the reporting call): its innermost Python
/// frame outside libraries, else its innermost native frame with a source line of its own
/// (skipping nvcc's host stub, which is named like the kernel and sits at the kernel's line).
pub(super) fn program_frame<'a>(
    python: &'a PythonFrames,
    native: &'a [Frame],
    kernel: Option<&str>,
) -> Option<&'a Frame> {
    let own =
        |f: &&Frame| f.file.as_deref().is_some_and(|file| !foreign_file(file)) && f.line.is_some();
    python.python_stack.iter().find(own).or_else(|| {
        native.iter().filter(own).find(|f| {
            let func = f.function.as_deref().unwrap_or("");
            !f.module.as_deref().is_some_and(system_module)
                && !f.module.as_deref().is_some_and(interpreter_module)
                && !func.starts_with("__device_stub__")
                && !func.starts_with("__cudaLaunch")
                && kernel.is_none_or(|k| func != k)
        })
    })
}

/// The source line `line` of `file`, trimmed, when the file can be read here (small files only).
pub(super) fn source_line(file: &str, line: u32) -> Option<String> {
    let meta = std::fs::metadata(file).ok()?;
    if !meta.is_file() || meta.len() > 8 << 20 || line == 0 {
        return None;
    }
    let text = std::fs::read(file).ok()?;
    let l = text.split(|&b| b == b'\n').nth(line as usize - 1)?;
    let l = String::from_utf8_lossy(l).trim().to_string();
    (!l.is_empty()).then(|| fit(&l, 120))
}

/// `function at file:line` and, on the next line, the code there.
pub(super) fn site(out: &mut String, label: &str, f: &Frame, suffix: &str) {
    let func = fit(f.function.as_deref().unwrap_or("??"), 80);
    let file = f.file.as_deref().unwrap_or("?");
    let line = f.line.unwrap_or(0);
    let _ = writeln!(out, "{label:<10}{func} at {file}:{line}{suffix}");
    if let Some(code) = source_line(file, line) {
        let _ = writeln!(out, "{:<10}    {code}", "");
    }
}

/// The report's first lines, in the order an engineer needs them: the culprit kernel, the
/// program's line that launched it, the device-side assert, the hint, the line where the error
/// surfaced.
pub(super) fn lead(out: &mut String, r: &Report, device_assert: Option<&str>) {
    let confidence = format!("{:?}", r.culprit.confidence).to_lowercase();
    match &r.culprit.op {
        _ if r.culprit.is_one_of() => one_of(out, r, &confidence),
        Some(o) => {
            let name = match (&o.kernel, o.kind) {
                (Some(k), _) => brief(k),
                _ => op_brief(o),
            };
            let which = if failed_itself(r) {
                "the launch itself failed".to_string()
            } else {
                format!("op #{}", o.seq)
            };
            let _ = writeln!(out, "{:<10}{name}  ({which}, {confidence})", "culprit:");
            match program_frame(&o.python, &o.stack, o.kernel.as_deref()) {
                Some(f) => site(out, "launched:", f, ""),
                // No stack at all: stacks were off (`CUDABLAME_STACK=off`), or the launching
                // thread's stack could not be read (a launch from a signal handler on an
                // alternate signal stack, outside the thread's stack bounds); none below.
                None if o.stack.is_empty() && o.python.python_stack.is_empty() => {
                    let _ = writeln!(
                        out,
                        "{:<10}(no launch stack recorded: launch stacks are off, CUDABLAME_STACK=off / --stack off, \
                         or the launching thread's stack could not be read)",
                        "launched:"
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "{:<10}(no program frame: see the launch stack below)",
                        "launched:"
                    );
                }
            }
            graph_caveat(out, o);
        }
        None => {
            let _ = writeln!(out, "{:<10}not identified ({confidence})", "culprit:");
        }
    }
    if let Some(a) = device_assert {
        let _ = writeln!(out, "{:<10}{}", "assert:", fit(a.trim(), 300));
    }
    if let Some(hint) = &r.culprit.hint {
        let _ = writeln!(out, "{:<10}{hint}", "hint:");
    }
    let c = &r.reporting_call;
    let noticed = if failed_itself(r) {
        format!(" ({}, the failing launch itself)", c.entry_point)
    } else {
        format!(" ({}, which only noticed the error)", c.entry_point)
    };
    match program_frame(&c.python, &c.stack, None) {
        Some(f) => site(out, "reported:", f, &noticed),
        None => {
            let _ = writeln!(out, "{:<10}{}{noticed}", "reported:", c.entry_point);
        }
    }
}

/// For a graph launch whose kernel list is not known to be what it ran, one line saying so.
fn graph_caveat(out: &mut String, o: &crate::model::Op) {
    let Some(g) = &o.graph else { return };
    let caveat = if g.built_by_hand {
        "built by hand (cuGraphCreate): its kernels are unknown"
    } else if g.changed_after_capture {
        "changed after capture: the kernels named are the captured ones, what ran may differ"
    } else {
        return;
    };
    let _ = writeln!(out, "{:<10}{caveat}", "graph:");
}

/// Window entries the lead block lists (the rest are counted; `cudablame show --verbose` and
/// the JSON have them all).
const WINDOW_SHOWN: usize = 8;

/// The lead block's culprit for a "one of these N ops" verdict: one line per op, in stream order,
/// with its kernel and launching line, then the one ranked first and why.
fn one_of(out: &mut String, r: &Report, confidence: &str) {
    let c = &r.culprit;
    let streams: Vec<&str> = {
        let mut s: Vec<&str> = Vec::new();
        for w in &c.window {
            if !s.contains(&w.stream.as_str()) {
                s.push(&w.stream);
            }
        }
        s
    };
    let on = if streams.len() == 1 {
        format!("stream {}", streams[0])
    } else {
        format!("{} streams", streams.len())
    };
    let _ = writeln!(
        out,
        "{:<10}one of these {} ops, in stream order ({on}; {confidence}: no progress marker between them)",
        "culprit:", c.one_of
    );
    if let Some(beyond) = &c.beyond {
        // The window is not all that can have faulted: say so before listing it.
        let _ = writeln!(
            out,
            "{:<10}or work cudablame does not hold: {}",
            "",
            fit(beyond, 160)
        );
    }
    for w in c.window.iter().take(WINDOW_SHOWN) {
        let stream = if streams.len() > 1 {
            format!(" [stream {}]", w.stream)
        } else {
            String::new()
        };
        if w.unknown_ops > 0 {
            let which = if w.unknown_ops == 1 {
                format!("#{}", w.seq)
            } else {
                format!("#{}..#{}", w.seq, w.seq + w.unknown_ops - 1)
            };
            let _ = writeln!(
                out,
                "{:<10}{which}{stream}: {} ops no longer held, kernels unknown",
                "", w.unknown_ops
            );
            continue;
        }
        let kernel = w.kernel.as_deref().map(brief).unwrap_or_else(|| "?".into());
        let at = w
            .launched_at
            .as_deref()
            .map(|l| format!("  launched: {}", fit(l, 90)))
            .unwrap_or_default();
        let _ = writeln!(out, "{:<10}#{} {kernel}{stream}{at}", "", w.seq);
    }
    let more = c.window.len().saturating_sub(WINDOW_SHOWN);
    if more > 0 {
        let _ = writeln!(
            out,
            "{:<10}... and {more} more (cudablame show --verbose)",
            ""
        );
    }
    if let (Some(o), Some(first)) = (&c.op, c.candidates.first()) {
        let name = o
            .kernel
            .as_deref()
            .map(brief)
            .unwrap_or_else(|| op_brief(o));
        let _ = writeln!(
            out,
            "{:<10}#{} {name}: {}",
            "ranked:",
            o.seq,
            sentence(&first.evidence, 100)
        );
    }
}

/// Whether the culprit is a launch the driver refused by itself: it was never enqueued, so it
/// has no sequence number (0) and is also the reporting call.
pub(super) fn failed_itself(r: &Report) -> bool {
    r.culprit.op.as_ref().is_some_and(|o| o.seq == 0)
}

/// Text cut to about `n` characters at a word boundary.
pub(super) fn sentence(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let cut: String = s.chars().take(n).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(a, _)| a);
    format!("{cut} ...")
}

#[cfg(test)]
mod tests {
    use super::interpreter_module;

    #[test]
    fn the_interpreter_and_ctypes_are_not_the_program() {
        for m in [
            "/opt/py/bin/python3.11",
            "/usr/bin/python3",
            "/opt/py/lib/libpython3.12.so.1.0",
            "/usr/lib/x86_64-linux-gnu/libffi.so.8",
            "/opt/py/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so",
        ] {
            assert!(interpreter_module(m), "{m}");
        }
        for m in [
            "/home/u/proj/my_ext.cpython-311-x86_64-linux-gnu.so",
            "/home/u/proj/build/app",
            "/home/u/python_tools/libkernels.so",
            "/home/u/pythonic",
        ] {
            assert!(!interpreter_module(m), "{m}");
        }
    }
}
