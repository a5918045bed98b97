//! Unit tests: version parsing, the 3.13 layout parser, line tables, backward entry points.

use super::capture::*;
use super::intern::*;
use super::layout::*;
use super::lines::*;
use super::runtime::*;

#[test]
fn versions_parse() {
    assert_eq!(
        parse_version("3.10.13 (main, Jan  1 2024, 00:00:00) [GCC 12.2.0]"),
        Some((3, 10))
    );
    assert_eq!(parse_version("3.14.0rc1"), Some((3, 14)));
    assert_eq!(parse_version("garbage"), None);
}

#[test]
fn not_python_here() {
    // The unit-test binary is not CPython: capture is empty and the report says nothing.
    assert!(PythonStack::capture(32).is_empty());
    assert_eq!(note(), None);
    assert_eq!(version(), None);
}

/// `_Py_DebugOffsets` of CPython 3.13.0 (pyenv build, x86-64), the first 71 `u64`s of a live
/// interpreter's `_PyRuntime` (read with ctypes: `(c_uint64 * 71).in_dll(pythonapi, "_PyRuntime")`).
fn debug_offsets_3130() -> Vec<u64> {
    let mut w = vec![u64::from_le_bytes(*b"xdebugpy"), 0x030d00f0, 0];
    w.extend_from_slice(&[
        283320, 608, 632, 194968, 7272, 7264, 7344, 7400, 7656, 7640, 7648, 16, 7752, 0, 7768,
        7760, 304, 0, 8, 16, 72, 152, 160, 232, 32, 80, 8, 0, 56, 72, 70, 208, 112, 120, 128, 136,
        68, 52, 96, 104, 200, 16, 8, 416, 24, 88, 168, 32, 24, 16, 40, 24, 16, 48, 32, 40, 24, 16,
        32, 16, 24, 40, 16, 32, 64, 32, 16, 40,
    ]);
    w
}

#[test]
fn debug_offsets_give_the_313_layout() {
    let w = debug_offsets_3130();
    assert_eq!(layout_313(&w), Ok(LAYOUT_313));
    let mut ft = w.clone();
    ft[dbg::FREE_THREADED] = 1;
    assert_eq!(layout_313(&ft), Err("free-threaded build".into()));
    let mut bad = w.clone();
    bad[0] = 0;
    assert!(layout_313(&bad).is_err());
    let mut odd = w;
    odd[dbg::OB_TYPE] = 24; // a Py_TRACE_REFS build
    assert!(layout_313(&odd).is_err());
}

#[test]
fn varints() {
    assert_eq!(signed_varint(&[4]), 2);
    assert_eq!(signed_varint(&[5]), -2);
    // 200 = 0b11_001000: low 6 bits 8 with continuation, then 3.
    assert_eq!(signed_varint(&[64 | 8, 3]), 100);
}

/// Line tables from real code objects (src/stack/python_linetables.txt, made by
/// shim-tests/programs/py_linetables.py on each version): every instruction's line must be
/// the one `co_lines()` gives.
#[test]
fn line_tables_match_cpython() {
    let data = include_str!("python_linetables.txt");
    let mut checked = 0;
    for (n, rec) in data
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .enumerate()
    {
        let mut parts = rec.split(' ');
        let version = parts.next().unwrap();
        let format = if version == "3.10" {
            LineTable::Pep626
        } else {
            LineTable::Locations
        };
        let name = parts.next().unwrap();
        let first: i32 = parts.next().unwrap().parse().unwrap();
        let hex = parts.next().unwrap();
        let table: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        for range in parts {
            let mut r = range.split(':');
            let (start, end): (i32, i32) = (
                r.next().unwrap().parse().unwrap(),
                r.next().unwrap().parse().unwrap(),
            );
            let line: Option<i32> = match r.next().unwrap() {
                "-" => None,
                l => Some(l.parse().unwrap()),
            };
            for offset in (start..end).step_by(2) {
                assert_eq!(
                    addr2line(format, &table, first, offset),
                    line,
                    "{version} {name} (record {n}) offset {offset}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 500, "only {checked} offsets checked");
    assert_eq!(addr2line(LineTable::Locations, &[], 7, -1), Some(7));
}

#[test]
fn backward_entry_points_are_recognized() {
    let site = "/usr/lib/python3/dist-packages/torch";
    assert_eq!(
        classify(&format!("{site}/_tensor.py"), "backward"),
        FLAG_BACKWARD_ENTRY
    );
    assert_eq!(
        classify(&format!("{site}/autograd/__init__.py"), "grad"),
        FLAG_BACKWARD_ENTRY
    );
    assert_eq!(
        classify(&format!("{site}/autograd/graph.py"), "_engine_run_backward"),
        FLAG_BACKWARD_ENTRY
    );
    assert_eq!(
        classify(&format!("{site}/autograd/function.py"), "backward"),
        0
    );
    assert_eq!(classify("/home/me/train.py", "backward"), 0);
}

#[test]
fn a_stack_the_table_could_not_keep_shows_its_innermost_frame_and_says_how_many_were_lost() {
    let s = PythonStack {
        len: 3,
        truncated: false,
        stack: super::stacks::NO_STACK,
        top: FrameRef {
            entry: UNKNOWN,
            offset: 8,
        },
        borrowed: 0,
    };
    let r = s.resolve();
    let names: Vec<_> = r
        .python_stack
        .iter()
        .map(|f| (f.function.clone().unwrap(), f.address.clone()))
        .collect();
    assert_eq!(
        names,
        [
            ("<unknown>".to_string(), "0x8".to_string()),
            (
                "<2 more frames lost: python stack table full>".to_string(),
                String::new()
            )
        ]
    );
    assert!(PythonStack::EMPTY.resolve().python_stack.is_empty());
}

#[test]
fn each_recent_code_slot_is_one_cache_line() {
    assert_eq!(std::mem::size_of::<RecentSlot>(), 64);
    assert_eq!(std::mem::align_of::<RecentSlot>(), 64);
}

/// Code objects at the same offset of different allocator pools (addresses equal in their low
/// 12 bits) get different recent-code slots: with the address's bits 4-11 as the slot, the 16
/// below shared one, and two frames of one stack placed so evicted each other at every launch
/// (on the simulated driver, one process-wide table probe per launch of `py_bench.py`).
#[test]
fn code_objects_at_one_pool_offset_spread_over_the_recent_slots() {
    let base = 0x7f12_3456_7a50usize;
    let mut slots: Vec<usize> = (0..16).map(|k| recent_slot(base + k * 4096)).collect();
    slots.sort_unstable();
    slots.dedup();
    assert!(slots.len() >= 12, "{slots:?}");
    // Neighbours in one pool spread too.
    let mut near: Vec<usize> = (0..16).map(|k| recent_slot(base + k * 16)).collect();
    near.sort_unstable();
    near.dedup();
    assert!(near.len() >= 12, "{near:?}");
}
