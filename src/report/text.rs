//! The human report on stderr: error, culprit with its launch stack, the reporting call, other
//! suspects, a timeline of the last ops (CPU launches beside GPU states), and a line per stream.
//!
//! Standalone (serde and std only), like `model.rs`: the `cudablame` command includes both.

use super::model::{Frame, Op, OpKind, Report};
use std::fmt::Write;

/// Frames shown per stack in the text (the JSON keeps them all).
const FRAMES_SHOWN: usize = 10;

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn frames(out: &mut String, frames: &[Frame]) {
    if frames.is_empty() {
        out.push_str("        (no stack: CUDABLAME_STACK=off)\n");
    }
    for (i, f) in frames.iter().take(FRAMES_SHOWN).enumerate() {
        let func = f.function.as_deref().unwrap_or("??");
        let place = match (&f.file, f.line) {
            (Some(file), Some(line)) => format!(" at {file}:{line}"),
            _ => String::new(),
        };
        let module = f.module.as_deref().map(|m| m.rsplit('/').next().unwrap_or(m)).unwrap_or("?");
        let _ = writeln!(out, "        #{i:<2} {func}{place}  [{module}]");
    }
    if frames.len() > FRAMES_SHOWN {
        let _ = writeln!(out, "        ... {} more frames in the JSON report", frames.len() - FRAMES_SHOWN);
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
            _ => format!("{:?} of {} bytes{}", o.kind, o.bytes, if o.synchronous { " (synchronous)" } else { "" })
                .to_lowercase(),
        },
    };
    format!("#{} {what}", o.seq)
}

/// A kernel's name without namespaces, template arguments or parameters:
/// `void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` gives
/// `vectorized_elementwise_kernel`.
pub fn brief(name: &str) -> String {
    let head = name.split(['(', '<']).next().unwrap_or(name).trim();
    let last = head.rsplit(' ').next().unwrap_or(head);
    let base = last.rsplit("::").next().unwrap_or(last);
    if base.is_empty() {
        short(name)
    } else {
        base.to_string()
    }
}

/// An op in a few words: `#4 oob_write`, `#1 memcpy 64 B (sync)`, `#2 graph launch`.
pub fn op_brief(o: &Op) -> String {
    let what = match (&o.kernel, o.kind) {
        (Some(k), _) => brief(k),
        (None, OpKind::Kernel) => "kernel (name unknown)".into(),
        (None, OpKind::Graph) => "graph launch".into(),
        (None, kind) => format!(
            "{} {} B{}",
            if kind == OpKind::Memset { "memset" } else { "memcpy" },
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
    let all = culprit.into_iter().chain(&r.suspects).chain(r.streams.iter().flat_map(|s| &s.recent));
    for o in all {
        if !ops.iter().any(|(p, _)| p.stream == o.stream && p.seq == o.seq) {
            ops.push((o, culprit.is_some_and(|c| c.stream == o.stream && c.seq == o.seq)));
        }
    }
    ops.sort_by_key(|(o, _)| (o.time_ns, o.seq));
    ops
}

/// Ops shown in the timeline; with its headers, a gap line and the reporting call it stays
/// within 12 lines.
const TIMELINE_OPS: usize = 8;
/// Timeline column widths (the whole table fits 100 columns).
const WHEN: usize = 11;
const THREAD: usize = 7;
const OP: usize = 28;
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
    let _ = writeln!(
        out,
        "timeline (last {} of {} ops; CPU: launch time before the error, thread | GPU: state):",
        rows.iter().flatten().count(),
        ops.len()
    );
    let mut head = format!("  {:>WHEN$}  {:>THREAD$}  {:<OP$} |", "when", "thread", "op");
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
                let _ = writeln!(out, "  {:>WHEN$}  {:>THREAD$}  ... {n} more op{}", "", "", if *n == 1 { "" } else { "s" });
                continue;
            }
        };
        let mut line =
            format!("  {:>WHEN$}  {:>THREAD$}  {:<OP$} |", before(o.age_ns), o.thread, fit(&op_brief(o), OP));
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
    let c = &r.reporting_call;
    let _ = writeln!(
        out,
        "  {:>WHEN$}  {:>THREAD$}  {:<OP$} | <== REPORTED HERE ({})",
        before(0),
        c.thread,
        fit(&c.entry_point, OP),
        r.error.name
    );
}

/// Renders the whole report.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let e = &r.error;
    let _ = writeln!(out, "\n==== cudablame: {} ({}): {} ====", e.name, e.code, e.description);
    match &r.culprit.op {
        Some(o) => {
            let what = match &o.kernel {
                Some(k) => format!("#{} kernel {k}", o.seq),
                None => op_line(o),
            };
            let _ = writeln!(out, "culprit [{:?}]: {what}", r.culprit.confidence);
            let _ = writeln!(
                out,
                "    grid ({},{},{}) block ({},{},{}) shared {} B, stream {}, device {}, thread {}, launched {} before the error",
                o.grid[0], o.grid[1], o.grid[2], o.block[0], o.block[1], o.block[2], o.shared_mem_bytes,
                o.stream, o.device, o.thread, ms(o.age_ns)
            );
            let _ = writeln!(out, "    launched by {} from:", o.entry_point);
            frames(&mut out, &o.stack);
        }
        None => {
            let _ = writeln!(out, "culprit [{:?}]: not identified", r.culprit.confidence);
        }
    }
    let _ = writeln!(out, "    why: {}", r.culprit.reason);
    let c = &r.reporting_call;
    let _ = writeln!(
        out,
        "reported by: {} (thread {}{}), which only noticed the error:",
        c.entry_point,
        c.thread,
        c.stream.as_deref().map(|s| format!(", stream {s}")).unwrap_or_default()
    );
    frames(&mut out, &c.stack);
    if !r.suspects.is_empty() {
        let list: Vec<String> = r.suspects.iter().take(6).map(|o| format!("{} (stream {})", op_line(o), o.stream)).collect();
        let more = r.suspects.len().saturating_sub(6);
        let _ = writeln!(
            out,
            "other unfinished ops: {}{}",
            list.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        );
    }
    timeline(&mut out, r);
    for s in &r.streams {
        let _ = writeln!(out, "stream {} (device {}): issued {}, completed {}", s.stream, s.device, s.issued, s.completed);
    }
    if let Some(p) = &r.path {
        let _ = writeln!(out, "json report: {p}");
    }
    if let Some(p) = &r.trace_path {
        let _ = writeln!(out, "trace: {p} (open in https://ui.perfetto.dev)");
    }
    out.push_str("==== end of cudablame report ====\n");
    out
}
