//! The human report on stderr: error, culprit with its launch stack, the reporting call, other
//! suspects, and the last ops per stream.

use super::model::{Op, Report};
use crate::stack::Frame;
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

fn op_line(o: &Op) -> String {
    let what = match &o.kernel {
        Some(k) => format!("kernel {k}"),
        None => match o.kind {
            crate::record::OpKind::Kernel => "kernel (name unknown)".into(),
            crate::record::OpKind::Graph => "graph launch".into(),
            _ => format!("{:?} of {} bytes", o.kind, o.bytes).to_lowercase(),
        },
    };
    format!("#{} {what}", o.seq)
}

/// Renders the whole report.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let e = &r.error;
    let _ = writeln!(out, "\n==== cudablame: {} ({}): {} ====", e.name, e.code, e.description);
    match &r.culprit.op {
        Some(o) => {
            let _ = writeln!(out, "culprit [{:?}]: {}", r.culprit.confidence, op_line(o));
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
    for s in &r.streams {
        let _ = writeln!(out, "stream {} (device {}): issued {}, completed {}", s.stream, s.device, s.issued, s.completed);
        for o in &s.recent {
            let state = if o.state == "culprit" { "<== culprit" } else { o.state };
            let _ = writeln!(out, "    {:<60} {state}", op_line(o));
        }
    }
    match &r.path {
        Some(p) => {
            let _ = writeln!(out, "json report: {p}");
        }
        None => {}
    }
    out.push_str("==== end of cudablame report ====\n");
    out
}
