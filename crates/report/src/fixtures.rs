//! A sample report for tests of the rendering and of the command (`show`, `summary`): not part of
//! the report format.

use crate::model::Report;
use serde_json::json;

const T: u64 = 1_700_000_000_000_000_000;

fn op(seq: u64, stream: &str, age_ms: u64, state: &str) -> serde_json::Value {
    json!({
        "seq": seq, "kind": "kernel", "kernel": format!("void ns::k{seq}<float>(float*, int)"),
        "kernel_symbol": null, "grid": [1, 1, 1], "block": [32, 1, 1], "shared_mem_bytes": 0, "bytes": 0,
        "stream": stream, "context": "0x1", "device": 0, "thread": 42, "entry_point": "cuLaunchKernel",
        "time_ns": T - age_ms * 1_000_000, "age_ns": age_ms * 1_000_000, "state": state,
        "stack": [], "python_stack": [],
    })
}

/// A report with 12 ops on `legacy` (the culprit is #2, older than the timeline's window)
/// and 2 on `0xabc`; the JSON has no `synchronous` and no job fields (an older report).
pub fn sample() -> Report {
    let legacy: Vec<_> = (1..=12)
        .map(|s| {
            let state = match s {
                1 => "completed",
                2 => "culprit",
                _ => "not completed",
            };
            op(s, "legacy", 100 - s, state)
        })
        .collect();
    let other = vec![
        op(1, "0xabc", 95, "completed"),
        op(2, "0xabc", 50, "not completed"),
    ];
    serde_json::from_value(json!({
        "schema": "cudablame.report/1",
        "process": { "pid": 42, "host": "node1", "rank": 3, "argv": ["./app"] },
        "error": { "code": 700, "name": "CUDA_ERROR_ILLEGAL_ADDRESS", "description": "illegal", "sticky": true },
        "reporting_call": {
            "entry_point": "cuMemcpyDtoH_v2", "thread": 42, "stream": "legacy", "time_ns": T, "stack": [],
        },
        "culprit": { "confidence": "exact", "reason": "markers", "op": op(2, "legacy", 98, "culprit") },
        "suspects": [op(3, "legacy", 97, "not completed")],
        "streams": [
            { "stream": "legacy", "context": "0x1", "device": 0, "issued": 12, "completed": 1,
              "marker": 1, "recent": legacy[4..].to_vec() },
            { "stream": "0xabc", "context": "0x1", "device": 0, "issued": 2, "completed": 1,
              "marker": 1, "recent": other },
        ],
    }))
    .expect("sample report deserializes")
}
