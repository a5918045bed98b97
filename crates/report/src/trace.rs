//! The Chrome trace / Perfetto export (`CUDABLAME_TRACE`): the last recorded ops of the report as
//! a Trace Event Format file (open it in https://ui.perfetto.dev or chrome://tracing).
//!
//! One track per launching CPU thread (launches as instants, the reporting call as an instant
//! named `REPORTED HERE ...`) and one track per stream, where each op is a complete (`X`) slice
//! from its launch to the next op's launch on the stream, or to the error for the last one. The
//! culprit's slice is named `CULPRIT ...`, colored red and carries `args.culprit: true`.
//! Timestamps are wall-clock µs since the Unix epoch, so traces of several ranks line up.
//!
//! Built from the report model only (serde and std).

use crate::model::{Frame, Op, Report};
use crate::text::{op_brief, recorded_ops};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Stream tracks use tids from here on: Linux thread ids stay below 2^22.
const STREAM_TID_BASE: u64 = 1 << 30;

/// Sort indexes: CPU threads first, then streams.
const STREAM_SORT_BASE: u64 = 1000;

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn stack_lines(stack: &[Frame]) -> Vec<String> {
    stack
        .iter()
        .map(|f| {
            let func = f.function.as_deref().unwrap_or("??");
            match (&f.file, f.line) {
                (Some(file), Some(line)) => format!("{func} at {file}:{line}"),
                _ => format!("{func} [{}]", f.module.as_deref().unwrap_or("?")),
            }
        })
        .collect()
}

/// The ops of one stream track, in launch order, the culprit marked.
struct Track<'a> {
    name: &'a str,
    device: i32,
    ops: Vec<(&'a Op, bool)>,
}

/// One track per stream of the report, in its order, then any other stream an op names (the
/// culprit of a launch the driver refused may be on none of them).
fn tracks(r: &Report) -> Vec<Track<'_>> {
    let mut tracks: Vec<Track> = r
        .streams
        .iter()
        .map(|s| Track {
            name: &s.stream,
            device: s.device,
            ops: Vec::new(),
        })
        .collect();
    for (o, culprit) in recorded_ops(r) {
        match tracks.iter_mut().find(|t| t.name == o.stream) {
            Some(t) => t.ops.push((o, culprit)),
            None => tracks.push(Track {
                name: &o.stream,
                device: o.device,
                ops: vec![(o, culprit)],
            }),
        }
    }
    tracks.retain(|t| !t.ops.is_empty());
    tracks
}

/// The trace of a report, as a Trace Event Format JSON object.
pub fn build(r: &Report) -> Value {
    let pid = r.process.pid;
    let end_ns = r.reporting_call.time_ns;
    let mut events = Vec::new();
    let program = r
        .process
        .argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a))
        .unwrap_or("program");
    events.push(json!({
        "name": "process_name", "ph": "M", "pid": pid, "tid": 0, "ts": 0,
        "args": { "name": format!("{program} (rank {}, pid {pid}, {})", r.process.rank, r.process.host) },
    }));
    events.push(json!({
        "name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "ts": 0,
        "args": { "sort_index": r.process.rank },
    }));

    let tracks = tracks(r);
    let mut threads: BTreeSet<u32> = tracks
        .iter()
        .flat_map(|t| t.ops.iter().map(|(o, _)| o.thread))
        .collect();
    threads.insert(r.reporting_call.thread);
    for (i, &tid) in threads.iter().enumerate() {
        let name = if tid == pid {
            format!("CPU thread {tid} (main)")
        } else {
            format!("CPU thread {tid}")
        };
        events.push(json!({ "name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "ts": 0, "args": { "name": name } }));
        events.push(json!({
            "name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "ts": 0, "args": { "sort_index": i },
        }));
    }

    for (i, t) in tracks.iter().enumerate() {
        let tid = STREAM_TID_BASE + i as u64;
        events.push(json!({
            "name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "ts": 0,
            "args": { "name": format!("GPU stream {} (device {})", t.name, t.device) },
        }));
        events.push(json!({
            "name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "ts": 0,
            "args": { "sort_index": STREAM_SORT_BASE + i as u64 },
        }));
        for (j, &(o, culprit)) in t.ops.iter().enumerate() {
            let until = t.ops.get(j + 1).map_or(end_ns, |(next, _)| next.time_ns);
            let name = op_brief(o);
            // No number (null) for a launch the driver refused: it was never enqueued.
            let seq = (o.seq > 0).then_some(o.seq);
            let mut args = json!({
                "seq": seq,
                "kind": o.kind,
                "state": if culprit { "culprit" } else { o.state.as_str() },
                "entry_point": o.entry_point,
                "thread": o.thread,
                "grid": o.grid,
                "block": o.block,
                "shared_mem_bytes": o.shared_mem_bytes,
                "bytes": o.bytes,
                "launched_before_error_ms": o.age_ns as f64 / 1e6,
            });
            if let Some(k) = &o.kernel {
                args["kernel"] = json!(k);
            }
            if !o.stack.is_empty() {
                args["stack"] = json!(stack_lines(&o.stack));
            }
            if !o.python.python_stack.is_empty() {
                args["python_stack"] = json!(stack_lines(&o.python.python_stack));
            }
            let mut slice = json!({
                "name": name, "cat": "gpu", "ph": "X", "pid": pid, "tid": tid,
                "ts": us(o.time_ns), "dur": us(until.saturating_sub(o.time_ns)),
            });
            if culprit {
                args["culprit"] = json!(true);
                args["confidence"] = json!(r.culprit.confidence);
                args["reason"] = json!(r.culprit.reason);
                slice["name"] = json!(format!("CULPRIT {name}"));
                slice["cname"] = json!("terrible");
            } else if o.state == "not completed" {
                slice["cname"] = json!("yellow");
            }
            slice["args"] = args;
            events.push(slice);
            events.push(json!({
                "name": format!("launch {name}"), "cat": "cpu", "ph": "i", "s": "t", "pid": pid, "tid": o.thread,
                "ts": us(o.time_ns), "args": { "seq": seq, "stream": o.stream, "entry_point": o.entry_point },
            }));
        }
    }

    let c = &r.reporting_call;
    events.push(json!({
        "name": format!("REPORTED HERE: {} returned {}", c.entry_point, r.error.name),
        "cat": "cpu", "ph": "i", "s": "t", "pid": pid, "tid": c.thread, "ts": us(c.time_ns),
        "args": {
            "entry_point": c.entry_point,
            "stream": c.stream,
            "error": r.error.name,
            "code": r.error.code,
            "description": r.error.description,
        },
    }));

    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": "cudablame",
            "error": r.error.name,
            "culprit": r.culprit.op.as_ref().map(op_brief),
            "confidence": r.culprit.confidence,
            "rank": r.process.rank,
            "host": r.process.host,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::sample;

    #[test]
    fn one_track_per_thread_and_stream_and_one_culprit() {
        let t = build(&sample());
        let events = t["traceEvents"].as_array().unwrap();
        for e in events {
            for k in ["name", "ph", "pid", "tid", "ts"] {
                assert!(e.get(k).is_some(), "{k} missing in {e}");
            }
            if e["ph"] == "X" {
                assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}");
            }
        }
        let culprits: Vec<&Value> = events
            .iter()
            .filter(|e| e["args"]["culprit"] == true)
            .collect();
        assert_eq!(culprits.len(), 1);
        assert_eq!(culprits[0]["name"], "CULPRIT #2 k2");
        // #2 lasts until #3's launch (1 ms later); every op listed has a slice (#1 of legacy is not).
        assert_eq!(culprits[0]["dur"].as_f64().unwrap(), 1000.0);
        assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 10 + 2);
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "CPU thread 42 (main)",
                "GPU stream legacy (device 0)",
                "GPU stream 0xabc (device 0)"
            ]
        );
        let reported: Vec<&Value> = events
            .iter()
            .filter(|e| e["name"].as_str().unwrap().starts_with("REPORTED HERE"))
            .collect();
        assert_eq!(reported.len(), 1);
        assert_eq!(
            (reported[0]["ph"].as_str(), reported[0]["tid"].as_u64()),
            (Some("i"), Some(42))
        );
        // The last op of a stream ends at the error.
        let last = events.iter().find(|e| e["name"] == "#12 k12").unwrap();
        assert_eq!(
            last["ts"].as_f64().unwrap() + last["dur"].as_f64().unwrap(),
            T_US
        );
    }

    const T_US: f64 = 1_700_000_000_000_000_000u64 as f64 / 1000.0;
}
