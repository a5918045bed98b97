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

// The thread's stack cache (`cache`), against a fake interpreter: thread states, frames, code
// objects, strings and line tables laid out in memory by a version's offsets, as CPython has
// them, and the capture compiled for that version run over them.

use super::cache::{LINES, ONE_HASH};
use super::runtime::{Runtime, Walk};
use std::cell::Cell;

/// Zeroed memory that is never freed (its address stays a valid object for the tables).
fn object(bytes: usize) -> usize {
    Box::leak(vec![0u64; bytes.div_ceil(8)].into_boxed_slice()).as_mut_ptr() as usize
}

fn put<T: Copy>(at: usize, v: T) {
    // SAFETY: `at` is inside an `object` (the offsets used are within the sizes allocated).
    unsafe { (at as *mut T).write_unaligned(v) }
}

fn get<T: Copy>(at: usize) -> T {
    // SAFETY: as `put`.
    unsafe { (at as *const T).read_unaligned() }
}

thread_local! {
    /// The fake interpreter's thread state of the calling thread (0: none).
    static FAKE_TS: Cell<usize> = const { Cell::new(0) };
}

extern "C" fn fake_this_thread_state() -> *mut std::ffi::c_void {
    FAKE_TS.with(|c| c.get()) as *mut std::ffi::c_void
}

/// A fake interpreter of layout `l`: its type objects, and the runtime capture reads it with.
struct Fake {
    l: Layout,
    rt: &'static Runtime,
}

/// Code objects are this large (the fields read are below 256; the bytecode starts at
/// `co_code` and runs 64 bytes).
const CODE_BYTES: usize = 512;

impl Fake {
    fn new(l: Layout) -> Fake {
        let rt = Box::leak(Box::new(Runtime {
            capture: PythonStack::capture_fn(Walk::of(&l)),
            this_thread_state: fake_this_thread_state,
            is_finalizing: None,
            code_type: object(64),
            version: (3, 0),
            layout: l,
            unicode_type: object(64),
            bytes_type: object(64),
        }));
        Fake { l, rt }
    }

    /// A compact ASCII `str`.
    fn str(&self, s: &str) -> usize {
        let l = &self.l;
        let o = object(l.ascii_size + s.len() + 1);
        put(o + l.ob_type, self.rt.unicode_type);
        put(o + l.str_length, s.len() as isize);
        put(o + l.str_state, (1u32 << 2) | (1 << 5) | (1 << 6)); // kind 1, compact, ascii
        for (i, b) in s.bytes().enumerate() {
            put(o + l.ascii_size + i, b);
        }
        o
    }

    /// A line table in which the instruction at byte offset `16 * k` (k < 4) is on line
    /// `firstlineno + k`.
    fn linetable(&self) -> usize {
        let table: &[u8] = match self.l.lines {
            // (bytecode delta, line delta) pairs.
            LineTable::Pep626 => &[16, 0, 16, 1, 16, 1, 16, 1],
            // Entries of 8 code units, "no column" form (code 13) with a signed varint delta.
            LineTable::Locations => &[0xEF, 0, 0xEF, 2, 0xEF, 2, 0xEF, 2],
        };
        let l = &self.l;
        let o = object(l.bytes_sval + table.len() + 1);
        put(o + l.ob_type, self.rt.bytes_type);
        put(o + l.bytes_size, table.len() as isize);
        for (i, &b) in table.iter().enumerate() {
            put(o + l.bytes_sval + i, b);
        }
        o
    }

    /// Writes a code object for function `name` of `file` at `code` (a new one, or one reused at
    /// the same address), first line `first`.
    fn write_code(&self, code: usize, file: &str, name: &str, first: i32) {
        let l = &self.l;
        put(code + l.ob_type, self.rt.code_type);
        put(code + 16, 32u64); // shape: 3.11+ ob_size (code units), 3.10 co_argcount
        put(code + l.co_consts, object(32));
        put(code + l.co_names, object(32));
        put(code + l.co_firstlineno, first);
        put(code + l.co_filename, self.str(file));
        put(code + l.co_name, self.str(name));
        if let Some(q) = l.co_qualname {
            put(code + q, self.str(name));
        }
        put(code + l.co_linetable, self.linetable());
    }

    fn code(&self, file: &str, name: &str, first: i32) -> usize {
        let code = object(CODE_BYTES);
        self.write_code(code, file, name, first);
        code
    }

    /// Makes `f` run `code` at byte offset `offset`.
    fn set_instr(&self, f: usize, code: usize, offset: usize) {
        let l = &self.l;
        match l.chain {
            Chain::Frame310 => put(f + l.fr_instr, (offset / 2) as i32),
            _ => put(f + l.fr_instr, code + l.co_code + offset),
        }
    }

    /// A frame running `code` at byte offset `offset`, called from `previous` (0: outermost).
    fn frame(&self, code: usize, offset: usize, previous: usize) -> usize {
        let l = &self.l;
        let f = object(128);
        put(f + l.fr_previous, previous);
        put(f + l.fr_code, code);
        self.set_instr(f, code, offset);
        f
    }

    /// An entry frame of the interpreter (3.12+: owned by the C stack), called from `previous`.
    fn entry_frame(&self, previous: usize) -> usize {
        let l = &self.l;
        let f = object(128);
        put(f + l.fr_previous, previous);
        put(f + l.fr_owner.unwrap(), FRAME_OWNED_BY_CSTACK);
        f
    }

    /// A thread state of the calling thread whose innermost frame is `f`, made current.
    fn thread_state(&self, f: usize) -> usize {
        let l = &self.l;
        let ts = object(256);
        // SAFETY: pthread_self has no preconditions.
        put(ts + l.ts_thread_id, unsafe { libc::pthread_self() }
            as usize);
        match l.chain {
            Chain::CFrame => {
                let cframe = object(64);
                put(cframe + l.cframe_current, f);
                put(ts + l.ts_frame, cframe);
            }
            _ => put(ts + l.ts_frame, f),
        }
        FAKE_TS.with(|c| c.set(ts));
        ts
    }

    /// Makes `f` the innermost frame of thread state `ts`.
    fn set_top(&self, ts: usize, f: usize) {
        let l = &self.l;
        match l.chain {
            Chain::CFrame => put(get::<usize>(ts + l.ts_frame) + l.cframe_current, f),
            _ => put(ts + l.ts_frame, f),
        }
    }

    /// A chain of frames running `codes` (innermost first), each at byte offset 16 (its second
    /// line), the outermost called from an entry frame where the layout has them: the innermost.
    fn chain(&self, codes: &[usize]) -> usize {
        let mut f = match self.l.fr_owner {
            Some(_) => self.entry_frame(0),
            None => 0,
        };
        for &code in codes.iter().rev() {
            f = self.frame(code, 16, f);
        }
        f
    }

    fn capture(&self, depth: usize) -> PythonStack {
        PythonStack::capture_from(self.rt, depth)
    }
}

/// The full walks made by the calling thread so far.
fn full_walks() -> u32 {
    super::capture::FULL_WALKS.with(|c| c.get())
}

/// (function, file, line) of each captured frame, innermost first, and the truncation mark.
fn named(s: &PythonStack) -> Vec<(String, String, u32)> {
    s.resolve()
        .python_stack
        .iter()
        .map(|f| {
            (
                f.function.clone().unwrap_or_default(),
                f.file.clone().unwrap_or_default(),
                f.line.unwrap_or(0),
            )
        })
        .collect()
}

fn frame_names(names: &[(&str, &str, u32)]) -> Vec<(String, String, u32)> {
    names
        .iter()
        .map(|&(f, file, line)| (f.to_string(), file.to_string(), line))
        .collect()
}

/// The layouts the walk is compiled for with their offsets as constants, and one read from the
/// runtime (3.12's offsets with a moved `co_firstlineno`, as a 3.13 build could have them).
fn layouts() -> Vec<Layout> {
    let mut dynamic = LAYOUT_313;
    dynamic.co_firstlineno = 232;
    vec![LAYOUT_310, LAYOUT_311, LAYOUT_312, LAYOUT_313, dynamic]
}

/// Three functions of one file, `inner` called by `middle` called by `outer`, each at its
/// second line (first lines 10, 20, 30): returns them and the chain.
fn three_frames(fake: &Fake) -> ([usize; 3], usize) {
    let codes = [
        fake.code("/app/m.py", "inner", 10),
        fake.code("/app/m.py", "middle", 20),
        fake.code("/app/m.py", "outer", 30),
    ];
    let top = fake.chain(&codes);
    (codes, top)
}

const THREE: [(&str, &str, u32); 3] = [
    ("inner", "/app/m.py", 11),
    ("middle", "/app/m.py", 21),
    ("outer", "/app/m.py", 31),
];

#[test]
fn the_walk_compiled_with_constant_offsets_is_chosen_only_for_its_layout() {
    assert_eq!(Walk::of(&LAYOUT_310), Walk::Py310);
    assert_eq!(Walk::of(&LAYOUT_311), Walk::Py311);
    assert_eq!(Walk::of(&LAYOUT_312), Walk::Py312);
    assert_eq!(Walk::of(&LAYOUT_313), Walk::Py313);
    assert_eq!(Walk::of(&layouts()[4]), Walk::Dynamic);
}

/// A stack captured again is answered by the thread's stack cache (no full walk) with the same
/// interned stack (the launch site) and the same frames; the first capture takes the full walk.
#[test]
fn a_stack_captured_again_comes_from_the_threads_cache() {
    for l in layouts() {
        let fake = Fake::new(l);
        let (_, top) = three_frames(&fake);
        fake.thread_state(top);
        let walks = full_walks();
        let first = fake.capture(32);
        assert_eq!(full_walks(), walks + 1, "{:?}", l.chain);
        assert_eq!(named(&first), frame_names(&THREE), "{:?}", l.chain);
        for _ in 0..3 {
            let again = fake.capture(32);
            assert_eq!(again.site(), first.site());
            assert_eq!(named(&again), frame_names(&THREE));
        }
        assert_eq!(
            full_walks(),
            walks + 1,
            "{:?}: hits take no full walk",
            l.chain
        );
    }
}

/// A code object freed while the cache holds a stack that ran it, and another allocated at its
/// address (same address, same frame, same instruction): the capture names the new one, for a
/// change of any one field of the fingerprint. Fails with the fingerprint left out of the
/// cache's comparison (the old function's name and line came back from the cache).
#[test]
fn a_code_object_replaced_at_its_address_while_cached_is_named_as_itself() {
    for l in layouts() {
        let fake = Fake::new(l);
        // Each field of the fingerprint changed alone, then all of them (a new function).
        type Change = fn(&Fake, usize);
        let changes: [(&str, Change); 5] = [
            ("consts", |f, code| put(code + f.l.co_consts, object(32))),
            ("names", |f, code| put(code + f.l.co_names, object(32))),
            ("shape", |_, code| put(code + 16, 48u64)),
            ("first line", |f, code| {
                put(code + f.l.co_firstlineno, 40i32)
            }),
            ("all", |f, code| {
                f.write_code(code, "/app/new.py", "replaced", 50)
            }),
        ];
        for (what, change) in changes {
            let (codes, top) = three_frames(&fake);
            fake.thread_state(top);
            let before = fake.capture(32);
            assert_eq!(named(&fake.capture(32)), frame_names(&THREE));
            // The middle function's code object is freed; another one takes its address, with
            // another name (not part of the fingerprint) and the change.
            put(codes[1] + l.co_name, fake.str("middle2"));
            if let Some(q) = l.co_qualname {
                put(codes[1] + q, fake.str("middle2"));
            }
            change(&fake, codes[1]);
            let walks = full_walks();
            let after = fake.capture(32);
            assert_eq!(
                full_walks(),
                walks + 1,
                "{:?} {what}: not from the cache",
                l.chain
            );
            let names = named(&after);
            assert_eq!(names[0], named(&before)[0], "{what}");
            let expected = match what {
                "all" => ("replaced".to_string(), "/app/new.py".to_string(), 51),
                "first line" => ("middle2".to_string(), "/app/m.py".to_string(), 41),
                _ => ("middle2".to_string(), "/app/m.py".to_string(), 21),
            };
            assert_eq!(names[1], expected, "{:?} {what}", l.chain);
            assert_ne!(after.site(), before.site(), "{what}");
            // And the new stack is cached in turn.
            assert_eq!(named(&fake.capture(32)), names);
            assert_eq!(full_walks(), walks + 1, "{what}");
        }
    }
}

/// Stacks that collide in the cache (every hash made equal: one bucket, one tag), captured in
/// turn, are each told apart by their frames, and each is a hit once kept. Fails if the cache
/// trusted the hash (the first stack kept would answer for both) or kept one stack per hash.
#[test]
fn stacks_that_collide_in_the_cache_are_told_apart_by_their_frames() {
    for l in layouts() {
        ONE_HASH.with(|c| c.set(true));
        let fake = Fake::new(l);
        let (codes, top) = three_frames(&fake);
        // The same functions, the outer one at another line; and another function on top.
        let other_line = fake.chain(&codes);
        fake.set_instr(
            get::<usize>(get::<usize>(other_line + l.fr_previous) + l.fr_previous),
            codes[2],
            32,
        );
        let other_top = fake.chain(&[fake.code("/app/m.py", "other", 60), codes[1], codes[2]]);
        let ts = fake.thread_state(top);
        let stacks = [top, other_line, other_top];
        let expected = [
            frame_names(&THREE),
            frame_names(&[THREE[0], THREE[1], ("outer", "/app/m.py", 32)]),
            frame_names(&[("other", "/app/m.py", 61), THREE[1], THREE[2]]),
        ];
        let walks = full_walks();
        let mut sites = Vec::new();
        // In order, then against the learnt order (the prediction fails, the bucket answers).
        for round in 0..4 {
            let order: &[usize] = if round % 2 == 0 {
                &[0, 1, 2]
            } else {
                &[2, 0, 1]
            };
            for &i in order {
                fake.set_top(ts, stacks[i]);
                let s = fake.capture(32);
                assert_eq!(
                    named(&s),
                    expected[i],
                    "{:?} round {round} stack {i}",
                    l.chain
                );
                if round == 0 {
                    sites.push(s.site());
                } else {
                    assert_eq!(s.site(), sites[i]);
                }
            }
        }
        assert_eq!(
            full_walks(),
            walks + 3,
            "{:?}: each stack walked in full once",
            l.chain
        );
        ONE_HASH.with(|c| c.set(false));
    }
}

/// An outer frame that moved to another instruction (another line of the same function) makes
/// another stack; moving back finds the first one.
#[test]
fn an_outer_frame_at_another_instruction_is_another_stack() {
    for l in layouts() {
        let fake = Fake::new(l);
        let (codes, top) = three_frames(&fake);
        fake.thread_state(top);
        let first = fake.capture(32);
        let outer = get::<usize>(get::<usize>(top + l.fr_previous) + l.fr_previous);
        fake.set_instr(outer, codes[2], 48);
        let moved = fake.capture(32);
        assert_eq!(
            named(&moved),
            frame_names(&[THREE[0], THREE[1], ("outer", "/app/m.py", 33)]),
            "{:?}",
            l.chain
        );
        assert_ne!(moved.site(), first.site());
        fake.set_instr(outer, codes[2], 16);
        assert_eq!(fake.capture(32).site(), first.site());
        // Not started (3.11+: the instruction pointer before the first instruction): the first
        // line.
        if l.chain != Chain::Frame310 {
            put(outer + l.fr_instr, codes[2] + l.co_code - 2);
        } else {
            put(outer + l.fr_instr, -1i32);
        }
        for _ in 0..2 {
            assert_eq!(
                named(&fake.capture(32))[2],
                ("outer".to_string(), "/app/m.py".to_string(), 30)
            );
        }
    }
}

/// Captures on this thread that the predicted entry did not answer, so far.
fn unpredicted() -> u32 {
    super::capture::UNPREDICTED.with(|c| c.get())
}

/// A loop's stacks, launched in the same order every step, are each found as the one that
/// followed the previous stack last time (no hash, no index): after the first step every
/// capture is predicted but where a stack is followed by different ones, and a launch out of
/// order is still found exactly (through the index). Fails without the successor links (every
/// capture goes through the index).
#[test]
fn a_loops_stacks_are_predicted_in_order() {
    for l in layouts() {
        let fake = Fake::new(l);
        let (codes, top) = three_frames(&fake);
        let ts = fake.thread_state(top);
        let stacks = [
            top,
            fake.chain(&[codes[1], codes[2]]),
            fake.chain(&[fake.code("/app/n.py", "other", 70), codes[2]]),
            top, // twice in a step: followed by another stack each time
            fake.chain(&[codes[2]]),
        ];
        let mut sites = vec![None; stacks.len()];
        for step in 0..4 {
            let before = unpredicted();
            for (i, &f) in stacks.iter().enumerate() {
                fake.set_top(ts, f);
                let s = fake.capture(32);
                match sites[i] {
                    None => sites[i] = Some(s.site()),
                    Some(site) => assert_eq!(s.site(), site, "{:?} step {step} stack {i}", l.chain),
                }
            }
            let missed = unpredicted() - before;
            match step {
                0 => assert_eq!(missed, 5, "{:?}", l.chain),
                // `top` is followed by a different stack each time: each of those two launches
                // finds the successor of the other (and the first launch of step 1 follows the
                // last of step 0 for the first time); every other launch is predicted.
                1 => assert_eq!(missed, 3, "{:?} step {step}", l.chain),
                _ => assert_eq!(missed, 2, "{:?} step {step}", l.chain),
            }
        }
        // A one-stack loop: every launch after the second is predicted.
        fake.set_top(ts, top);
        fake.capture(32);
        fake.capture(32);
        let before = unpredicted();
        for _ in 0..5 {
            fake.capture(32);
        }
        assert_eq!(unpredicted(), before, "{:?}", l.chain);
    }
}

/// A kept stack whose outermost frame is not the outermost any more (the same frames called
/// from one more function) is not that stack, and the other way round: the cache's walk must
/// end where the kept one ended. Fails if the cache took a frame past its kept ones for
/// truncation without the entry being truncated, or took the chain's end for the kept one's
/// before all its frames were found.
#[test]
fn a_kept_stack_called_from_one_more_function_is_another_stack() {
    for l in layouts() {
        let fake = Fake::new(l);
        let (codes, _) = three_frames(&fake);
        let short = fake.chain(&codes[..2]);
        let long = fake.chain(&codes);
        let ts = fake.thread_state(short);
        for _ in 0..2 {
            for (f, frames) in [(short, &THREE[..2]), (long, &THREE[..])] {
                fake.set_top(ts, f);
                for _ in 0..2 {
                    assert_eq!(
                        named(&fake.capture(32)),
                        frame_names(frames),
                        "{:?}",
                        l.chain
                    );
                }
            }
        }
    }
}

/// A kept frame's code object replaced by an object that is not a code object (same address,
/// same fields after its header but the type): the cache does not count it; the full walk
/// skips it (3.13, where a frame may run another callable) or stops there (a layout mismatch).
/// Fails without the cache's type check.
#[test]
fn a_kept_code_object_that_is_not_one_any_more_is_not_counted() {
    for l in layouts() {
        let fake = Fake::new(l);
        let (codes, top) = three_frames(&fake);
        fake.thread_state(top);
        for _ in 0..2 {
            assert_eq!(named(&fake.capture(32)), frame_names(&THREE));
        }
        put(codes[1] + l.ob_type, fake.rt.unicode_type);
        let expected = match l.chain {
            Chain::Direct => frame_names(&[THREE[0], THREE[2]]),
            _ => frame_names(&THREE[..1]),
        };
        for _ in 0..2 {
            assert_eq!(named(&fake.capture(32)), expected, "{:?}", l.chain);
        }
    }
}

/// A stack running a code object in more than one frame (recursion; `Module._call_impl` at each
/// level of nested modules) keeps that code object's fingerprint once, at its first frame, and
/// compares the later frames by address and instruction: still exact for each frame's line, for
/// another function in a repeated frame's place, and for the repeated code object replaced at
/// its address (both of its frames then name the new one).
#[test]
fn a_stack_running_a_code_object_twice_is_exact_in_every_frame() {
    for l in layouts() {
        let fake = Fake::new(l);
        let (codes, _) = three_frames(&fake);
        let (inner, middle, outer) = (codes[0], codes[1], codes[2]);
        // inner, middle, inner, middle, outer: a recursion through middle.
        let chain = |fake: &Fake, third: usize| fake.chain(&[inner, middle, third, middle, outer]);
        let top = chain(&fake, inner);
        let ts = fake.thread_state(top);
        let expected = frame_names(&[THREE[0], THREE[1], THREE[0], THREE[1], THREE[2]]);
        let walks = full_walks();
        let used = || {
            super::cache::THREAD
                .with(|t| t.with(|t| t.stacks.used()))
                .flatten()
        };
        let before = used().unwrap();
        for _ in 0..3 {
            assert_eq!(named(&fake.capture(32)), expected, "{:?}", l.chain);
        }
        assert_eq!(full_walks(), walks + 1, "{:?}: from the cache", l.chain);
        // 16 bytes of head, 5 frames of 16, 3 fingerprints of 24: 168 bytes, 3 lines (4 with a
        // fingerprint per frame).
        assert_eq!(used().unwrap(), before + 3, "{:?}", l.chain);
        // The second `inner` frame at another instruction.
        let third = get::<usize>(get::<usize>(top + l.fr_previous) + l.fr_previous);
        fake.set_instr(third, inner, 32);
        let mut moved = expected.clone();
        moved[2].2 = 12;
        assert_eq!(named(&fake.capture(32)), moved, "{:?}", l.chain);
        fake.set_instr(third, inner, 16);
        for _ in 0..2 {
            assert_eq!(named(&fake.capture(32)), expected, "{:?}", l.chain);
        }
        // Another function in the second `inner` frame's place (same first line and
        // instruction: on 3.10 the same instruction word).
        let other = fake.code("/app/m.py", "other", 10);
        fake.set_top(ts, chain(&fake, other));
        let mut replaced = expected.clone();
        replaced[2] = ("other".into(), "/app/m.py".into(), 11);
        for _ in 0..2 {
            assert_eq!(named(&fake.capture(32)), replaced, "{:?}", l.chain);
        }
        // `middle` (both of its frames) freed and another code object made at its address.
        fake.set_top(ts, top);
        assert_eq!(named(&fake.capture(32)), expected);
        put(middle + l.co_names, object(32));
        put(middle + l.co_name, fake.str("middle2"));
        if let Some(q) = l.co_qualname {
            put(middle + q, fake.str("middle2"));
        }
        let mut renamed = expected.clone();
        renamed[1].0 = "middle2".into();
        renamed[3].0 = "middle2".into();
        for _ in 0..2 {
            assert_eq!(named(&fake.capture(32)), renamed, "{:?}", l.chain);
        }
    }
}

/// The depth limit: a stack deeper than it is kept truncated for that limit only; with a
/// limit it fits in, the same frames come back whole (from the cache where it has them).
#[test]
fn truncation_by_the_depth_limit_is_kept_exactly() {
    for l in layouts() {
        let fake = Fake::new(l);
        let (_, top) = three_frames(&fake);
        fake.thread_state(top);
        let walks = full_walks();
        let cut = fake.capture(2);
        assert!(cut.truncated && cut.len() == 2, "{:?}", l.chain);
        let mut expected = frame_names(&THREE[..2]);
        expected.push((
            "<more frames: CUDABLAME_PYTHON_DEPTH>".into(),
            String::new(),
            0,
        ));
        assert_eq!(named(&cut), expected);
        let again = fake.capture(2);
        assert!(again.truncated && again.len() == 2 && again.site() == cut.site());
        assert_eq!(full_walks(), walks + 1, "{:?}", l.chain);
        // A limit of exactly its length: whole, not truncated (another entry).
        let whole = fake.capture(3);
        assert!(!whole.truncated && whole.len() == 3);
        assert_eq!(named(&whole), frame_names(&THREE));
        assert_eq!(full_walks(), walks + 2);
        // Any larger limit: the same whole stack, from the cache.
        for depth in [4, 32, 64] {
            let s = fake.capture(depth);
            assert!(!s.truncated && s.len() == 3 && s.site() == whole.site());
        }
        assert_eq!(full_walks(), walks + 2, "{:?}", l.chain);
        // A smaller one again: truncated at 1 (a third entry), and at 2 from the cache.
        let one = fake.capture(1);
        assert!(one.truncated && one.len() == 1);
        assert!(fake.capture(2).truncated);
        assert_eq!(full_walks(), walks + 3, "{:?}", l.chain);
        // Depth 0 keeps no frame, only the mark.
        let none = fake.capture(0);
        assert!(none.truncated && none.is_empty());
    }
}

/// The thread's thread state changed (another one made current, as `PyGILState_Ensure` does for
/// a thread without one): a stack with the same frames is the same stack, from the cache, and
/// the new state's own check is made (a thread state of another thread gives no frames); one
/// with other frames is its own stack.
#[test]
fn a_new_thread_state_with_the_same_frames_is_a_hit_and_is_checked() {
    for l in layouts() {
        let fake = Fake::new(l);
        let (codes, top) = three_frames(&fake);
        fake.thread_state(top);
        let first = fake.capture(32);
        let walks = full_walks();
        let ts2 = fake.thread_state(top);
        let s = fake.capture(32);
        assert_eq!(s.site(), first.site());
        assert_eq!(full_walks(), walks, "{:?}", l.chain);
        fake.set_top(ts2, fake.chain(&[codes[0], codes[2]]));
        assert_eq!(
            named(&fake.capture(32)),
            frame_names(&[THREE[0], ("outer", "/app/m.py", 31)])
        );
        // Another thread's state (its thread id is not this thread's): no frames.
        let theirs = fake.thread_state(top);
        put(theirs + l.ts_thread_id, 1usize);
        assert!(fake.capture(32).is_empty(), "{:?}", l.chain);
        // No thread state: no frames.
        FAKE_TS.with(|c| c.set(0));
        assert!(fake.capture(32).is_empty());
    }
}

/// Frames the walk does not count (3.12+ entry frames of the interpreter; 3.13 frames whose
/// executable is not a code object) are skipped alike by the cache: the same stack with more
/// of them is the same stack, from the cache.
#[test]
fn frames_not_counted_are_skipped_by_the_cache_as_by_the_walk() {
    for l in [LAYOUT_312, LAYOUT_313, layouts()[4]] {
        let fake = Fake::new(l);
        let (codes, top) = three_frames(&fake);
        fake.thread_state(top);
        let first = fake.capture(32);
        // inner, an entry frame, middle, (3.13) a frame running a non-code object, outer.
        let mut f = fake.chain(&codes[2..]);
        if l.chain == Chain::Direct {
            let not_code = fake.frame(object(64), 0, f);
            put(not_code + l.fr_code, fake.str("not code"));
            f = not_code;
        }
        f = fake.frame(codes[1], 16, f);
        f = fake.entry_frame(f);
        f = fake.frame(codes[0], 16, f);
        let ts = FAKE_TS.with(|c| c.get());
        fake.set_top(ts, f);
        let walks = full_walks();
        for _ in 0..2 {
            let s = fake.capture(32);
            assert_eq!(named(&s), frame_names(&THREE), "{:?}", l.chain);
            assert_eq!(s.site(), first.site());
        }
        assert_eq!(full_walks(), walks, "{:?}: from the cache", l.chain);
    }
}

/// More distinct stacks than the cache's lines hold: it drops them all and fills again, and
/// every capture still names its own frames.
#[test]
fn a_full_cache_starts_over_and_stays_exact() {
    let fake = Fake::new(LAYOUT_312);
    let outer = fake.code("/app/loop.py", "main", 1);
    let funcs: Vec<usize> = (0..LINES + 10)
        .map(|i| fake.code(&format!("/app/f{i}.py"), &format!("f{i}"), 100))
        .collect();
    let ts = fake.thread_state(fake.chain(&[funcs[0], outer]));
    let chains: Vec<usize> = funcs.iter().map(|&c| fake.chain(&[c, outer])).collect();
    for round in 0..2 {
        for (i, &f) in chains
            .iter()
            .enumerate()
            .step_by(if round == 0 { 1 } else { 97 })
        {
            fake.set_top(ts, f);
            let s = fake.capture(32);
            assert_eq!(
                named(&s),
                frame_names(&[
                    (&format!("f{i}"), &format!("/app/f{i}.py"), 101),
                    ("main", "/app/loop.py", 2)
                ]),
                "round {round} stack {i}"
            );
        }
    }
    super::cache::THREAD.with(|t| {
        t.with(|t| assert!(t.stacks.used() < LINES));
    });
}

/// The thread's cache against the full walk (a helper thread whose cache is flushed before every
/// capture), over random frame chains mutated between captures: instructions moved, frames
/// relinked, entry frames, a code object freed and another made at its address, a non-code
/// executable (3.13). `FUZZ_MUT`: about 7 mutations in so many captures (10); `FUZZ_ROUNDS`:
/// captures per layout (20,000). Each of four planted faults in `cache` (fingerprint check off,
/// a repeated frame's instruction unchecked, the truncation end unchecked, the depth fit
/// loosened) made it fail (seventeenth session's review).
#[test]
fn the_cache_agrees_with_the_full_walk_over_random_mutations() {
    let mut_n: u64 = std::env::var("FUZZ_MUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let rounds: usize = std::env::var("FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let mut next = crate::test_util::xorshift(0x9E37_79B9_7F4A_7C15u64);
    for l in layouts() {
        let fake = Fake::new(l);
        let fake = &fake;
        let (req_tx, req_rx) = std::sync::mpsc::channel::<(usize, usize)>();
        let (res_tx, res_rx) = std::sync::mpsc::channel();
        std::thread::scope(|sc| {
            sc.spawn(move || {
                for (top, depth) in req_rx {
                    fake.thread_state(top);
                    super::cache::THREAD.with(|t| t.with(|t| t.stacks.flush()));
                    let s = fake.capture(depth);
                    res_tx
                        .send((named(&s), s.truncated, s.len(), s.site()))
                        .unwrap();
                }
            });
            let codes: Vec<usize> = (0..6)
                .map(|i| fake.code("/app/z.py", &format!("c{i}"), 10 * i))
                .collect();
            let mut gen = 0;
            const N: usize = 14;
            let frames: Vec<usize> = (0..N).map(|_| fake.frame(codes[0], 16, 0)).collect();
            let randomize = |i: usize, next: &mut dyn FnMut(u64) -> u64| {
                let f = frames[i];
                // previous: a frame of a higher index, or none
                let prev = if i + 1 < N && next(6) != 0 {
                    frames[i + 1 + next((N - i - 1) as u64) as usize]
                } else {
                    0
                };
                put(f + l.fr_previous, prev);
                let c = codes[next(codes.len() as u64) as usize];
                put(f + l.fr_code, c);
                fake.set_instr(f, c, 16 * next(4) as usize);
                if let Some(o) = l.fr_owner {
                    put::<u8>(
                        f + o,
                        if next(8) == 0 {
                            FRAME_OWNED_BY_CSTACK
                        } else {
                            0
                        },
                    );
                }
            };
            for i in 0..N {
                randomize(i, &mut next);
            }
            let ts = fake.thread_state(frames[0]);
            let mut checked = 0;
            for round in 0..rounds {
                match next(mut_n) {
                    0..=3 => {
                        let i = next(N as u64) as usize;
                        let f = frames[i];
                        let c: usize = get(f + l.fr_code);
                        if get::<usize>(c + l.ob_type) == fake.rt.code_type {
                            fake.set_instr(f, c, 16 * next(4) as usize);
                        }
                    }
                    4 => randomize(next(N as u64) as usize, &mut next),
                    5 => {
                        // a code object freed and another made at its address
                        gen += 1;
                        let c = codes[next(codes.len() as u64) as usize];
                        fake.write_code(c, "/app/z.py", &format!("r{gen}"), next(3) as i32);
                    }
                    6 if l.chain == Chain::Direct => {
                        // a frame running a non-code object (3.13), or a code object again
                        let f = frames[next(N as u64) as usize];
                        if next(2) == 0 {
                            put(f + l.fr_code, fake.str("x"));
                        } else {
                            let c = codes[next(codes.len() as u64) as usize];
                            put(f + l.fr_code, c);
                            fake.set_instr(f, c, 16);
                        }
                    }
                    _ => {}
                }
                let top = frames[next(4) as usize];
                fake.set_top(ts, top);
                let depth = [1usize, 2, 3, 5, 32][next(5) as usize];
                let s = fake.capture(depth);
                let got = (named(&s), s.truncated, s.len(), s.site());
                req_tx.send((top, depth)).unwrap();
                let want = res_rx.recv().unwrap();
                assert_eq!(got, want, "{:?} round {round} depth {depth}", l.chain);
                checked += 1;
            }
            drop(req_tx);
            assert!(checked > 0);
        });
    }
}
