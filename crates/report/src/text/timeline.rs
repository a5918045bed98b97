//! The timeline: the last ops, CPU launches beside GPU states.

use super::fit;
use super::names::{op_brief, recorded_ops};
use crate::model::{Op, Report};
use std::fmt::Write;

/// Ops shown in the timeline; with its headers, a gap line and the reporting call it stays
/// within 12 lines.
pub(super) const TIMELINE_OPS: usize = 8;
/// Timeline column widths: the whole table fits `WIDTH` columns, the op column takes what the
/// GPU side leaves.
pub(super) const WIDTH: usize = 100;
pub(super) const WHEN: usize = 11;
pub(super) const THREAD: usize = 7;
pub(super) const GPU: usize = 44;

/// A time before the error: `-41.485 ms`, `-3.200 s`.
pub(super) fn before(ns: u64) -> String {
    if ns == 0 {
        "0.000 ms".into()
    } else if ns < 1_000_000_000 {
        format!("-{:.3} ms", ns as f64 / 1e6)
    } else {
        format!("-{:.3} s", ns as f64 / 1e9)
    }
}

pub(super) fn state_word(o: &Op, culprit: bool) -> &str {
    if culprit {
        "<== CULPRIT"
    } else {
        o.state.as_str()
    }
}

/// The last ops before the error, CPU side (launch time relative to the error, thread, op) and
/// GPU side (each op's state, in its stream's column) side by side, ending with the reporting
/// call.
pub(super) fn timeline(out: &mut String, r: &Report) {
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
        "timeline (last {} of {} ops kept; CPU: launch time before the error, thread | GPU: state):",
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
