//! The human report on stderr: error, culprit with its launch stack, the reporting call, other
//! suspects, a timeline of the last ops (CPU launches beside GPU states), and a line per stream.
//!
//! Standalone (serde and std only), like `model.rs`: the `cudablame` command includes both.

use crate::model::{Frame, Op, OpKind, PythonFrames, Report};
use std::fmt::Write;

/// Frames shown per stack in the text (the JSON keeps them all).
const FRAMES_SHOWN: usize = 6;

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// Native frames shown when Python frames were shown above them (they are the interpreter and
/// library internals under the Python line).
const FRAMES_UNDER_PYTHON: usize = 4;
/// Function names longer than this are cut in the text.
const FUNCTION_SHOWN: usize = 160;

/// How many native frames to show under `python` frames (printing the heading when there are).
fn native_limit(out: &mut String, python: &[Frame], verbose: bool) -> usize {
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

/// Prints native frames: up to the program's `main`, at most `limit`.
fn frames(out: &mut String, frames: &[Frame], limit: usize) {
    if frames.is_empty() {
        out.push_str(
            "        (no native stack: CUDABLAME_STACK=off, or the copy of the stack \
             (CUDABLAME_STACK_BYTES) held no frame of the program)\n",
        );
    }
    // The program's `main` ends what is worth reading; runtime start-up frames stay in the JSON.
    let shown = frames
        .iter()
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
        let _ = writeln!(
            out,
            "        ... {} more frames in the JSON report",
            frames.len() - shown
        );
    }
}

/// Python frame lines shown per stack (a folded run is one line).
const PY_LINES_SHOWN: usize = 16;

/// The library a Python file belongs to, for folding: the package under `site-packages/` or
/// `dist-packages/` (`torch`, `triton`, ...), `python` for the standard library; `None` for the
/// program's own files.
fn python_library(file: &str) -> Option<&str> {
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
fn stacks(out: &mut String, python: &PythonFrames, native: &[Frame], verbose: bool) {
    python_frames(out, python);
    let limit = native_limit(out, &python.python_stack, verbose);
    frames(out, native, limit);
}

fn python_frames(out: &mut String, python: &PythonFrames) {
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

/// Kernel names longer than this are cut in the stream listings (the JSON keeps them whole).
const NAME_SHOWN: usize = 100;

fn short(name: &str) -> String {
    match name.char_indices().nth(NAME_SHOWN) {
        Some((i, _)) => format!("{}...", &name[..i]),
        None => name.to_string(),
    }
}

fn op_line(o: &Op) -> String {
    let what = match &o.kernel {
        Some(k) => format!("kernel {}", short(k)),
        None => match o.kind {
            OpKind::Kernel => "kernel (name unknown)".into(),
            OpKind::Graph => "graph launch".into(),
            _ => format!(
                "{:?} of {} bytes{}",
                o.kind,
                o.bytes,
                if o.synchronous { " (synchronous)" } else { "" }
            )
            .to_lowercase(),
        },
    };
    format!("#{} {what}", o.seq)
}

/// A kernel's name without return type, namespaces, template arguments or parameters:
/// `void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` gives
/// `vectorized_elementwise_kernel`.
pub fn brief(name: &str) -> String {
    // A graph launch is named by all its kernels ("graph: a, b, c"), each shortened: never by
    // the last one alone (that would name one node as the culprit).
    if let Some(kernels) = name.strip_prefix("graph: ") {
        let parts: Vec<String> = split_top_level(kernels).iter().map(|k| brief(k)).collect();
        return format!("graph: {}", parts.join(", "));
    }
    // The qualified name: the text outside `<...>` up to the parameter list.
    let name = name.replace("(anonymous namespace)", "{anonymous}");
    let mut head = String::new();
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            '(' if depth == 0 => break,
            _ if depth == 0 => head.push(c),
            _ => {}
        }
    }
    let head = head.trim();
    let last = head.rsplit(' ').next().unwrap_or(head);
    let base = last.rsplit("::").next().unwrap_or(last);
    if base.is_empty() {
        short(&name)
    } else {
        base.to_string()
    }
}

/// Splits `a, b<c, d>, e(f, g)` at the commas outside brackets.
fn split_top_level(list: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in list.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(list[start..].trim());
    parts
}

/// An op in a few words: `#4 oob_write`, `#1 memcpy 64 B (sync)`, `#2 graph launch`.
pub fn op_brief(o: &Op) -> String {
    let what = match (&o.kernel, o.kind) {
        (Some(k), _) => brief(k),
        (None, OpKind::Kernel) => "kernel (name unknown)".into(),
        (None, OpKind::Graph) => "graph launch".into(),
        (None, kind) => format!(
            "{} {} B{}",
            if kind == OpKind::Memset {
                "memset"
            } else {
                "memcpy"
            },
            o.bytes,
            if o.synchronous { " (sync)" } else { "" }
        ),
    };
    if o.seq == 0 {
        format!("{what} (not enqueued)") // a launch the driver refused
    } else {
        format!("#{} {what}", o.seq)
    }
}

/// Every op the report lists (the streams' recent ops, the culprit, the suspects), each once, in
/// launch order; `true` marks the culprit.
pub fn recorded_ops(r: &Report) -> Vec<(&Op, bool)> {
    let culprit = r.culprit.op.as_ref();
    let mut ops: Vec<(&Op, bool)> = Vec::new();
    let all = culprit
        .into_iter()
        .chain(&r.suspects)
        .chain(r.streams.iter().flat_map(|s| &s.recent));
    for o in all {
        if !ops
            .iter()
            .any(|(p, _)| p.stream == o.stream && p.seq == o.seq)
        {
            ops.push((
                o,
                culprit.is_some_and(|c| c.stream == o.stream && c.seq == o.seq),
            ));
        }
    }
    ops.sort_by_key(|(o, _)| (o.time_ns, o.seq));
    ops
}

/// Ops shown in the timeline; with its headers, a gap line and the reporting call it stays
/// within 12 lines.
const TIMELINE_OPS: usize = 8;
/// Timeline column widths: the whole table fits `WIDTH` columns, the op column takes what the
/// GPU side leaves.
const WIDTH: usize = 100;
const WHEN: usize = 11;
const THREAD: usize = 7;
const GPU: usize = 44;

/// A time before the error: `-41.485 ms`, `-3.200 s`.
fn before(ns: u64) -> String {
    if ns == 0 {
        "0.000 ms".into()
    } else if ns < 1_000_000_000 {
        format!("-{:.3} ms", ns as f64 / 1e6)
    } else {
        format!("-{:.3} s", ns as f64 / 1e9)
    }
}

/// Cuts `s` to `width` characters, ending in `...` when cut.
fn fit(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let kept: String = s.chars().take(width.saturating_sub(3)).collect();
    format!("{kept}...")
}

fn state_word(o: &Op, culprit: bool) -> &str {
    if culprit {
        "<== CULPRIT"
    } else {
        o.state.as_str()
    }
}

/// The last ops before the error, CPU side (launch time relative to the error, thread, op) and
/// GPU side (each op's state, in its stream's column) side by side, ending with the reporting
/// call.
fn timeline(out: &mut String, r: &Report) {
    let ops = recorded_ops(r);
    if ops.is_empty() {
        return;
    }
    // The window: the last ops, and the culprit even when it is older. `Err(n)`: n ops left out.
    let mut rows: Vec<Result<(&Op, bool), usize>> = Vec::new();
    let cut = ops.len().saturating_sub(TIMELINE_OPS);
    match ops.iter().position(|&(_, c)| c) {
        Some(ci) if ci < cut => {
            if ci > 0 {
                rows.push(Err(ci));
            }
            rows.push(Ok(ops[ci]));
            rows.push(Err(cut - ci));
            rows.extend(ops[cut + 1..].iter().copied().map(Ok));
        }
        _ => {
            if cut > 0 {
                rows.push(Err(cut));
            }
            rows.extend(ops[cut..].iter().copied().map(Ok));
        }
    }
    let mut streams: Vec<&str> = Vec::new();
    for (o, _) in rows.iter().flatten() {
        if !streams.contains(&o.stream.as_str()) {
            streams.push(&o.stream);
        }
    }
    // One column per stream when they fit, else one column naming the stream.
    let widths: Vec<usize> = streams.iter().map(|s| s.chars().count().max(13)).collect();
    let columns = widths.iter().map(|w| w + 1).sum::<usize>() <= GPU + 1;
    let c = &r.reporting_call;
    let reported = format!(" <== REPORTED HERE (error {})", r.error.code);
    let gpu = if columns {
        widths.iter().map(|w| w + 1).sum()
    } else {
        GPU + 1
    };
    let room = WIDTH.saturating_sub(2 + WHEN + 2 + THREAD + 2 + 2 + gpu.max(reported.len()));
    let longest = rows
        .iter()
        .flatten()
        .map(|(o, _)| op_brief(o).chars().count())
        .chain([c.entry_point.len()])
        .max();
    let op_w = longest.unwrap_or(0).min(room).max(12);
    let _ = writeln!(
        out,
        "timeline (last {} of {} ops; CPU: launch time before the error, thread | GPU: state):",
        rows.iter().flatten().count(),
        ops.len()
    );
    let mut head = format!(
        "  {:>WHEN$}  {:>THREAD$}  {:<op_w$} |",
        "when", "thread", "op"
    );
    if columns {
        for (s, w) in streams.iter().zip(&widths) {
            let _ = write!(head, " {s:<w$}");
        }
    } else {
        head.push_str(" stream: state");
    }
    let _ = writeln!(out, "{}", head.trim_end());
    for row in &rows {
        let &(o, culprit) = match row {
            Ok(op) => op,
            Err(n) => {
                let _ = writeln!(
                    out,
                    "  {:>WHEN$}  {:>THREAD$}  ... {n} more op{}",
                    "",
                    "",
                    if *n == 1 { "" } else { "s" }
                );
                continue;
            }
        };
        let mut line = format!(
            "  {:>WHEN$}  {:>THREAD$}  {:<op_w$} |",
            before(o.age_ns),
            o.thread,
            fit(&op_brief(o), op_w)
        );
        let state = state_word(o, culprit);
        if columns {
            for (s, w) in streams.iter().zip(&widths) {
                let cell = if *s == o.stream { state } else { "" };
                let _ = write!(line, " {cell:<w$}");
            }
        } else {
            let _ = write!(line, " {}", fit(&format!("{}: {state}", o.stream), GPU));
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(
        out,
        "  {:>WHEN$}  {:>THREAD$}  {:<op_w$} |{reported}",
        before(0),
        c.thread,
        fit(&c.entry_point, op_w)
    );
}

/// The device-side assert's text (`file:line: function: block [..], thread [..] Assertion `cond`
/// failed.`), when the report has one (`culprit.device_assert`): the lead block renders it as
/// `assert:   <text>`, between the launching line and the hint.
pub fn device_assert(r: &Report) -> Option<String> {
    r.culprit.device_assert.as_ref().map(|a| a.text.clone())
}

/// Renders the report: the lead block (what to fix), then the details, shortened (the verbose
/// form is `cudablame show --verbose`).
pub fn render(r: &Report) -> String {
    render_with(r, device_assert(r).as_deref(), false)
}

/// Everything: all frames kept in the text, the full confidence reasoning and every other op.
pub fn render_verbose(r: &Report) -> String {
    render_with(r, device_assert(r).as_deref(), true)
}

/// Files under these prefixes are not the program's: system and CUDA headers, Rust's standard
/// library, crates.io sources, nvcc's generated stubs.
fn foreign_file(file: &str) -> bool {
    file.starts_with("/usr/")
        || file.starts_with("/rustc/")
        || file.contains("/.cargo/registry/")
        || file.contains(".stub.c")
        || file.contains("/tmpxft_")
        || python_library(file).is_some()
}

/// Shared objects of the system (libc's start-up frames, libstdc++, the CUDA runtime installed
/// system-wide): never the program's launching line, even with line tables.
fn system_module(module: &str) -> bool {
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

/// The program's own frame that launched `o` (or made the reporting call): its innermost Python
/// frame outside libraries, else its innermost native frame with a source line of its own
/// (skipping nvcc's host stub, which is named like the kernel and sits at the kernel's line).
fn program_frame<'a>(
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
                && !func.starts_with("__device_stub__")
                && !func.starts_with("__cudaLaunch")
                && kernel.is_none_or(|k| func != k)
        })
    })
}

/// The source line `line` of `file`, trimmed, when the file can be read here (small files only).
fn source_line(file: &str, line: u32) -> Option<String> {
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
fn site(out: &mut String, label: &str, f: &Frame, suffix: &str) {
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
fn lead(out: &mut String, r: &Report, device_assert: Option<&str>) {
    let confidence = format!("{:?}", r.culprit.confidence).to_lowercase();
    match &r.culprit.op {
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
                None => {
                    let _ = writeln!(
                        out,
                        "{:<10}(no program frame: see the launch stack below)",
                        "launched:"
                    );
                }
            }
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

/// Whether the culprit is a launch the driver refused by itself: it was never enqueued, so it
/// has no sequence number (0) and is also the reporting call.
fn failed_itself(r: &Report) -> bool {
    r.culprit.op.as_ref().is_some_and(|o| o.seq == 0)
}

/// Text cut to about `n` characters at a word boundary.
fn sentence(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let cut: String = s.chars().take(n).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(a, _)| a);
    format!("{cut} ...")
}

/// Renders the report; `verbose` keeps every frame, the whole reasoning and all other ops.
pub fn render_with(r: &Report, device_assert: Option<&str>, verbose: bool) -> String {
    let mut out = String::new();
    let e = &r.error;
    let _ = writeln!(
        out,
        "\n==== cudablame: {} ({}): {} ====",
        e.name, e.code, e.description
    );
    lead(&mut out, r, device_assert);
    let _ = writeln!(out, "---- details ----");
    match &r.culprit.op {
        Some(o) => {
            let what = match &o.kernel {
                Some(k) if verbose => format!("#{} kernel {k}", o.seq),
                Some(k) => format!("#{} kernel {}", o.seq, short(k)),
                None => op_line(o),
            };
            let _ = writeln!(out, "culprit [{:?}]: {what}", r.culprit.confidence);
            let shared = if o.shared_mem_bytes > 0 || verbose {
                format!(" shared {} B", o.shared_mem_bytes)
            } else {
                String::new()
            };
            let thread = if verbose {
                format!(", thread {}", o.thread)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "    grid ({},{},{}) block ({},{},{}){shared}, stream {}, device {}{thread}, launched {} before the error",
                o.grid[0], o.grid[1], o.grid[2], o.block[0], o.block[1], o.block[2],
                o.stream, o.device, ms(o.age_ns)
            );
            let why = if verbose {
                r.culprit.reason.clone()
            } else {
                sentence(&r.culprit.reason, 110)
            };
            let _ = writeln!(out, "    why: {why}");
            let _ = writeln!(out, "    launched by {} from:", o.entry_point);
            stacks(&mut out, &o.python, &o.stack, verbose);
            if let Some(t) = &o.thread_start {
                let _ = writeln!(out, "    on a thread started as: {t}");
            }
        }
        None => {
            let _ = writeln!(out, "culprit [{:?}]: not identified", r.culprit.confidence);
            let _ = writeln!(out, "    why: {}", r.culprit.reason);
        }
    }
    if let Some(n) = &r.culprit.not_exact {
        let _ = writeln!(out, "    not exact: {n}");
    }
    for (i, c) in r.culprit.candidates.iter().enumerate() {
        let _ = writeln!(
            out,
            "    candidate {}: #{} {} (stream {}){}: {}",
            i + 1,
            c.seq,
            c.kernel.as_deref().map(brief).unwrap_or_else(|| "?".into()),
            c.stream,
            c.launched_at
                .as_deref()
                .map(|l| format!(", launched by {l}"))
                .unwrap_or_default(),
            c.evidence
        );
    }
    let c = &r.reporting_call;
    let _ = writeln!(
        out,
        "reported by: {} (thread {}{}), {}:",
        c.entry_point,
        c.thread,
        c.stream
            .as_deref()
            .map(|s| format!(", stream {s}"))
            .unwrap_or_default(),
        if failed_itself(r) {
            "the failing launch itself"
        } else {
            "which only noticed the error"
        }
    );
    stacks(&mut out, &c.python, &c.stack, verbose);
    if let Some(note) = &c.python_note {
        let _ = writeln!(out, "    {note}");
    }
    if !r.suspects.is_empty() {
        let shown = if verbose { r.suspects.len() } else { 3 };
        let list: Vec<String> = r
            .suspects
            .iter()
            .take(shown)
            .map(|o| {
                if verbose {
                    format!("{} (stream {})", op_line(o), o.stream)
                } else {
                    op_brief(o)
                }
            })
            .collect();
        let more = r.suspects.len().saturating_sub(shown);
        let _ = writeln!(
            out,
            "other unfinished ops: {}{}",
            list.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    timeline(&mut out, r);
    for s in &r.streams {
        let _ = writeln!(
            out,
            "stream {} (device {}): issued {}, completed {}",
            s.stream, s.device, s.issued, s.completed
        );
    }
    if let Some(p) = &r.path {
        let _ = writeln!(out, "json report: {p}");
        if !verbose {
            let _ = writeln!(out, "all frames and details: cudablame show --verbose {p}");
        }
    }
    if let Some(p) = &r.trace_path {
        let _ = writeln!(out, "trace: {p} (open in https://ui.perfetto.dev)");
    }
    let _ = writeln!(
        out,
        "==== end of cudablame report (built in {}) ====",
        ms(r.build_ns)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sample;

    #[test]
    fn a_graph_is_named_by_all_its_kernels_never_by_its_last() {
        assert_eq!(
            brief("graph: void at::k<int, float>(int*, float), oob_write(int*), quick"),
            "graph: k, oob_write, quick"
        );
        assert_eq!(brief("void at::native::k<4>(int)"), "k");
    }

    #[test]
    fn lead_block_names_kernel_line_assert_hint_and_reporting_line_in_order() {
        let mut r = sample();
        let frame = |function: &str, file: &str, line| Frame {
            function: Some(function.into()),
            file: Some(file.into()),
            line: Some(line),
            module: None,
            address: "0x0".into(),
        };
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("train.py");
        std::fs::write(
            &script,
            "import torch\n\n    loss = F.cross_entropy(logits, target)  \n",
        )
        .unwrap();
        let script = script.display().to_string();
        let op = r.culprit.op.as_mut().unwrap();
        op.kernel = Some(
            "void at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*)"
                .into(),
        );
        op.python.python_stack = vec![
            frame(
                "cross_entropy",
                "/venv/lib/python3.12/site-packages/torch/nn/functional.py",
                3494,
            ),
            frame("compute_loss", &script, 3),
            frame("main", &script, 1),
        ];
        r.culprit.hint = Some("check the target's range against the number of classes".into());
        r.reporting_call.python.python_stack = vec![frame("main", &script, 1)];
        let text = render_with(&r, Some("Loss.cu:250: block: [0,0,0], thread: [1,0,0] Assertion `t >= 0 && t < n_classes` failed."), false);
        let lines: Vec<&str> = text.lines().skip(1).take(8).collect();
        assert_eq!(
            lines[0],
            "==== cudablame: CUDA_ERROR_ILLEGAL_ADDRESS (700): illegal ===="
        );
        assert_eq!(
            lines[1],
            "culprit:  nll_loss_forward_reduce_cuda_kernel_2d  (op #2, exact)"
        );
        assert_eq!(lines[2], format!("launched: compute_loss at {script}:3"));
        assert_eq!(lines[3].trim(), "loss = F.cross_entropy(logits, target)");
        assert!(
            lines[4].starts_with("assert:   Loss.cu:250: block"),
            "{text}"
        );
        assert_eq!(
            lines[5],
            "hint:     check the target's range against the number of classes"
        );
        assert_eq!(
            lines[6],
            format!("reported: main at {script}:1 (cuMemcpyDtoH_v2, which only noticed the error)")
        );
        assert_eq!(lines[7].trim(), "import torch");
        // Without a device assert in the report, no assert line.
        assert!(r.culprit.device_assert.is_none());
        assert!(!render(&r).contains("assert:"));
        // Verbose keeps the whole name; the default cuts the reasoning and hides thread ids.
        assert!(render_verbose(&r).contains("kernel void at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*)"));
    }

    #[test]
    fn nvcc_host_stub_and_headers_are_not_the_launching_line() {
        let f = |function: &str, file: &str, line| Frame {
            function: Some(function.into()),
            file: Some(file.into()),
            line: Some(line),
            module: None,
            address: "0x0".into(),
        };
        let native = vec![
            f(
                "__cudaLaunchKernel_helper",
                "/usr/local/cuda/include/crt/device_functions.h",
                2963,
            ),
            f(
                "__device_stub__Z9oob_writePii(int*, int)",
                "/tmp/tmpxft_0000_stub.c",
                1,
            ),
            f("oob_write(int*, int)", "/src/oob_write.cu", 58),
            f("launch_oob_write(int)", "/src/oob_write.cu", 78),
        ];
        let mut native = native;
        native.insert(
            0,
            Frame {
                module: Some("/lib/x86_64-linux-gnu/libc.so.6".into()),
                ..f(
                    "__libc_start_call_main",
                    "./csu/../sysdeps/nptl/libc_start_call_main.h",
                    58,
                )
            },
        );
        let none = PythonFrames::default();
        let got = program_frame(&none, &native, Some("oob_write(int*, int)")).unwrap();
        assert_eq!(
            (got.function.as_deref(), got.line),
            (Some("launch_oob_write(int)"), Some(78))
        );
    }

    #[test]
    fn kernel_names_are_cut_to_their_base_name() {
        assert_eq!(
            brief("void at::native::vectorized_elementwise_kernel<4, F>(int, F)"),
            "vectorized_elementwise_kernel"
        );
        assert_eq!(brief("oob_write"), "oob_write");
        assert_eq!(brief("ns::k(int)"), "k");
        let torch = "void (anonymous namespace)::elementwise_kernel_with_index<int, at::native::arange_cuda_out(\
                     c10::Scalar const&)::{lambda()#1}>(int, F, R)";
        assert_eq!(brief(torch), "elementwise_kernel_with_index");
        let nested = "void at::native::index_elementwise_kernel<128, 4, void at::native::gpu_index_kernel<\
                      void at::native::index_kernel_impl<at::native::OpaqueType<4> >(at::TensorIteratorBase&)>(F)";
        assert_eq!(brief(nested), "index_elementwise_kernel");
    }

    #[test]
    fn old_reports_without_new_fields_deserialize() {
        let r = sample();
        assert_eq!(
            (
                r.process.local_rank,
                r.process.world_size,
                r.process.job_id.as_deref()
            ),
            (None, None, None)
        );
        assert!(!r.streams[0].recent[0].synchronous);
    }

    #[test]
    fn timeline_keeps_the_culprit_and_fits_100_columns() {
        let text = render(&sample());
        let start = text.find("timeline").expect("a timeline");
        let lines: Vec<&str> = text[start..]
            .lines()
            .take_while(|l| !l.starts_with("stream "))
            .collect();
        assert!(lines.len() <= 13, "{}", lines.join("\n"));
        assert!(
            lines.iter().all(|l| l.chars().count() <= 100),
            "{}",
            lines.join("\n")
        );
        assert!(
            lines[1].contains("legacy") && lines[1].contains("0xabc"),
            "{}",
            lines[1]
        );
        let culprit = lines
            .iter()
            .find(|l| l.contains("<== CULPRIT"))
            .expect("culprit row");
        assert!(
            culprit.contains("#2 k2") && culprit.contains("-98.000 ms"),
            "{culprit}"
        );
        assert!(
            lines.iter().any(|l| l.contains("... 4 more ops")),
            "{}",
            lines.join("\n")
        );
        let last = lines.last().unwrap();
        assert!(
            last.contains("cuMemcpyDtoH_v2") && last.contains("REPORTED HERE"),
            "{last}"
        );
        // Each op appears once, in launch order.
        assert_eq!(text.matches("#12 k12").count(), 1);
    }
}
