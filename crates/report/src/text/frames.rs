//! Launch stacks in the text: native frames, Python frames with their source lines.

use crate::model::{Frame, PythonFrames};
use std::fmt::Write;

/// Frames shown per stack in the text (the JSON keeps them all).
pub(super) const FRAMES_SHOWN: usize = 6;

/// Native frames shown when Python frames were shown above them (they are the interpreter and
/// library internals under the Python line).
pub(super) const FRAMES_UNDER_PYTHON: usize = 4;
/// Function names longer than this are cut in the text.
pub(super) const FUNCTION_SHOWN: usize = 160;

/// How many native frames to show under `python` frames (printing the heading when there are).
pub(super) fn native_limit(out: &mut String, python: &[Frame], verbose: bool) -> usize {
    if verbose {
        if !python.is_empty() {
            out.push_str("      native, innermost first:\n");
        }
        return usize::MAX;
    }
    if python.is_empty() {
        return FRAMES_SHOWN;
    }
    out.push_str("      native, innermost first:\n");
    FRAMES_UNDER_PYTHON
}

/// Prints native frames: up to the program's `main`, at most `limit`; every frame when `limit` is
/// `usize::MAX` (`show --verbose`, [`native_limit`]). The frames left out are in the JSON report
/// when `json_kept`; else none was written (`CUDABLAME_REPORT=off`, or the write failed) and the
/// line says so.
pub(super) fn frames(out: &mut String, frames: &[Frame], limit: usize, json_kept: bool) {
    if frames.is_empty() {
        out.push_str(
            "        (no native stack: CUDABLAME_STACK=off, or the copy of the stack \
             (CUDABLAME_STACK_BYTES) held no frame of the program)\n",
        );
    }
    // The program's `main` ends what is worth reading; runtime start-up frames stay in the JSON
    // (the verbose form shows them too).
    let everything = limit == usize::MAX;
    let shown = frames
        .iter()
        .filter(|_| !everything)
        .position(|f| {
            f.function
                .as_deref()
                .is_some_and(|n| n == "main" || n.ends_with("::main"))
        })
        .map_or(frames.len(), |i| i + 1)
        .min(limit);
    for (i, f) in frames.iter().take(shown).enumerate() {
        let func = f.function.as_deref().unwrap_or("??");
        let func = match func.char_indices().nth(FUNCTION_SHOWN) {
            Some((cut, _)) => format!("{}...", &func[..cut]),
            None => func.to_string(),
        };
        let place = match (&f.file, f.line) {
            (Some(file), Some(line)) => format!(" at {file}:{line}"),
            _ => String::new(),
        };
        let module = f
            .module
            .as_deref()
            .map(|m| m.rsplit('/').next().unwrap_or(m))
            .unwrap_or("?");
        let _ = writeln!(out, "        #{i:<2} {func}{place}  [{module}]");
    }
    if frames.len() > shown {
        let where_ = if json_kept {
            "in the JSON report"
        } else {
            "not shown: no JSON report was written (CUDABLAME_REPORT=off or unwritable)"
        };
        let _ = writeln!(
            out,
            "        ... {} more frames {where_}",
            frames.len() - shown
        );
    }
}

/// Python frame lines shown per stack (a folded run is one line).
pub(super) const PY_LINES_SHOWN: usize = 16;

/// The library a Python file belongs to, for folding: the package under `site-packages/` or
/// `dist-packages/` (`torch`, `triton`, ...), `python` for the standard library; `None` for the
/// program's own files.
pub(super) fn python_library(file: &str) -> Option<&str> {
    for dir in ["/site-packages/", "/dist-packages/"] {
        if let Some(i) = file.rfind(dir) {
            let rest = &file[i + dir.len()..];
            return Some(
                rest.split('/')
                    .next()
                    .unwrap_or(rest)
                    .trim_end_matches(".py"),
            );
        }
    }
    (file.starts_with("<frozen ") || file.contains("/lib/python3")).then_some("python")
}

/// Python frames, innermost first, above the native ones: the program's own frames one a line
/// (the innermost of them named first, in the heading), each run of library frames folded into
/// one line (`... 5 frames in torch`), and where frames were borrowed from the thread that called
/// `backward()`, a line saying so.
/// Prints a thread's Python frames, then its native ones (fewer under Python frames).
pub(super) fn stacks(
    out: &mut String,
    python: &PythonFrames,
    native: &[Frame],
    verbose: bool,
    json_kept: bool,
) {
    python_frames(out, python);
    let limit = native_limit(out, &python.python_stack, verbose);
    frames(out, native, limit, json_kept);
}

pub(super) fn python_frames(out: &mut String, python: &PythonFrames) {
    let (frames, borrowed_from, from_thread) = (
        &python.python_stack[..],
        python.python_stack_borrowed_from,
        python.python_stack_from_thread,
    );
    let own = |f: &Frame| {
        f.file
            .as_deref()
            .is_some_and(|file| python_library(file).is_none())
    };
    let describe = |f: &Frame| {
        let func = f.function.as_deref().unwrap_or("??");
        match (&f.file, f.line) {
            (Some(file), Some(line)) => format!("{func} at {file}:{line}"),
            (Some(file), None) => format!("{func} in {file}"),
            _ => func.to_string(),
        }
    };
    if frames.is_empty() {
        return;
    }
    // When library frames come first, the heading names the program's innermost frame.
    let site = match frames.iter().position(own) {
        Some(i) if i > 0 => format!(" (program frame: {})", describe(&frames[i])),
        _ => String::new(),
    };
    let _ = writeln!(out, "      python, innermost first{site}:");
    let (mut i, mut lines) = (0, 0);
    while i < frames.len() && lines < PY_LINES_SHOWN {
        if Some(i) == borrowed_from {
            let who = from_thread
                .map(|t| format!("thread {t}"))
                .unwrap_or_else(|| "another thread".into());
            let _ = writeln!(out, "        -- launched for a backward pass: frames of {who}, which called backward() --");
        }
        let lib = frames[i].file.as_deref().and_then(python_library);
        match lib {
            Some(lib) => {
                let mut j = i + 1;
                while j < frames.len()
                    && Some(j) != borrowed_from
                    && frames[j].file.as_deref().and_then(python_library) == Some(lib)
                {
                    j += 1;
                }
                let _ = writeln!(
                    out,
                    "        ... {} frame{} in {lib}",
                    j - i,
                    if j - i == 1 { "" } else { "s" }
                );
                i = j;
            }
            None => {
                let _ = writeln!(out, "        #{i:<2} {}", describe(&frames[i]));
                i += 1;
            }
        }
        lines += 1;
    }
    if i < frames.len() {
        let _ = writeln!(
            out,
            "        ... {} more python frames in the JSON report",
            frames.len() - i
        );
    }
}
