//! Python frames of the launching thread (CPython 3.10 to 3.13), read without the GIL.
//!
//! PyTorch releases the GIL around op dispatch, so the thread that launches a kernel usually does
//! not hold it, and taking it in a hook could deadlock. Nothing here takes the GIL or calls into
//! the interpreter beyond GIL-free lookups:
//!
//! * Once, cold ([`runtime`]): the CPython version from the `Py_Version` symbol (3.11+) or the
//!   `Py_GetVersion()` string (3.10), the addresses of `PyGILState_GetThisThreadState`,
//!   `PyCode_Type` and friends, all through [`crate::real::dlsym`] with `RTLD_DEFAULT` (never
//!   `libc::dlsym`: this library interposes `dlsym`). cudablame never links libpython: in a process
//!   that is not CPython the symbols are missing and capture is a no-op. Struct offsets come from
//!   `_Py_DebugOffsets` at the start of `_PyRuntime` for 3.13, and from per-version tables for
//!   3.10 to 3.12 (checked against each version's headers: see [`LAYOUT_310`] and below).
//! * Per launch, hot ([`PythonStack::capture`]): `PyGILState_GetThisThreadState()` (a TLS read,
//!   safe without the GIL and before initialization) gives the calling thread's own thread state;
//!   its frame chain cannot change while this thread is inside the hook, and every code object on
//!   it is kept alive by its frame. The walk stores, per frame, the code object's entry in an
//!   intern table and the instruction offset: plain data in a fixed-size `Copy` array, no
//!   allocation, no reference counting (refcounts are not atomic under the GIL: never
//!   `Py_INCREF`).
//! * First sight of a code object ([`intern`]): its file name, qualified name and line table are
//!   copied into memory cudablame owns (the code object is alive then: the frame references it),
//!   so a report never reads a code object that may have been freed since. Entries are keyed by
//!   address and checked against a fingerprint (`co_firstlineno` and the addresses of
//!   `co_filename`, `co_name`, `co_qualname`, `co_linetable`) on every capture: a code object
//!   freed and another allocated at its address gets a new entry. Entries are never freed.
//! * Report time ([`PythonStack::resolve`]): offsets become line numbers with CPython's own
//!   algorithm (`PyCode_Addr2Line`) over the copied line table: 3.10's PEP 626 `co_linetable`,
//!   3.11+'s location table (`Objects/locations.md`).
//!
//! Layout safety: every walk first checks that the thread state's `thread_id` is this thread
//! (`pthread_self`), and every frame's code object that its type is `PyCode_Type`; a mismatch
//! (an unexpected build, e.g. `Py_TRACE_REFS`) stops the walk and the report says so.
//!
//! ## Backward pass
//!
//! Autograd runs backward kernels on its own worker threads (`pt_autograd_N`, named by
//! `Engine::thread_init`), which have a thread state but no Python frames, except inside a
//! custom `torch.autograd.Function.backward` written in Python (real frames, shown as such).
//! Reading the frames of the thread blocked in `backward()` from a worker would mean walking
//! another thread's chain without the GIL: that thread may return from `backward()` and free
//! frames and code objects while we read, so we never do it. Instead, each capture on a thread
//! other than an autograd worker whose frames include torch's backward entry points
//! (`Tensor.backward`, `torch.autograd.backward` / `grad`, `_engine_run_backward`: recognized
//! once per code object, at intern time) publishes its stack as the process's latest *backward
//! context*; in a plain `loss.backward()` that happens at the launch of `ones_like` for the
//! initial gradient, before the engine starts. A capture on an autograd worker records the
//! generation of the latest context (one atomic load); the report appends that context's frames
//! after the worker's own and names the thread they came from (`python_stack_from_thread`).
//! Limits: a backward with explicit gradients may launch nothing on the caller before the engine
//! runs, and then the context is the previous backward's; two threads running backward at once
//! may get each other's context. The report says the frames were borrowed, from which thread.
//!
//! NVTX ranges are not recorded.
//!
//! Cost per launch (fake driver, launches from C through the shim with the GIL released, native
//! stack off, CPython 3.11 and 3.12 on a 2-core x86-64 VM; `shim-tests/programs/py_bench.py`):
//! about 75 ns with 10 Python frames, 200 ns with 50 frames of which the default 32 are kept,
//! 330 ns keeping all 50 (`CUDABLAME_PYTHON_DEPTH=64`): some 6 ns a frame plus 15 to 20 ns.
#![deny(unsafe_op_in_unsafe_fn)]

use crate::config::MAX_PYTHON_DEPTH;
use cudablame_report::model::{Frame, PythonFrames};
use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

// ------------------------------------------------------------------------------------------------
// Layouts

/// How a thread state leads to its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chain {
    /// 3.10: `tstate->frame` (`PyFrameObject`), `f_back`, `f_code`, `f_lasti` (code units).
    Frame310,
    /// 3.11, 3.12: `tstate->cframe->current_frame` (`_PyInterpreterFrame`), `previous`,
    /// `f_code`, `prev_instr`.
    CFrame,
    /// 3.13: `tstate->current_frame`, `previous`, `f_executable`, `instr_ptr`.
    Direct,
}

/// The line table format of `co_linetable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineTable {
    /// 3.10 (PEP 626): (bytecode delta, signed line delta) byte pairs, -128 = no line.
    Pep626,
    /// 3.11+: the location table (`Objects/locations.md` in CPython).
    Locations,
}

/// Byte offsets of the fields read, for one CPython version (release builds, LP64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    chain: Chain,
    lines: LineTable,
    ts_thread_id: usize,
    /// 3.10 `frame`, 3.11/3.12 `cframe`, 3.13 `current_frame`.
    ts_frame: usize,
    /// `_PyCFrame.current_frame` (3.11/3.12).
    cframe_current: usize,
    fr_previous: usize,
    fr_code: usize,
    /// 3.10: `f_lasti` (int); later: the `prev_instr` / `instr_ptr` pointer.
    fr_instr: usize,
    /// `owner` (3.12+: `FRAME_OWNED_BY_CSTACK` entry frames are skipped).
    fr_owner: Option<usize>,
    co_firstlineno: usize,
    co_filename: usize,
    co_name: usize,
    /// 3.11+ (3.10 has only `co_name`).
    co_qualname: Option<usize>,
    co_linetable: usize,
    /// `co_code_adaptive`, the first code unit (3.11+).
    co_code: usize,
    ob_type: usize,
    bytes_size: usize,
    bytes_sval: usize,
    str_length: usize,
    str_state: usize,
    /// `sizeof(PyASCIIObject)`: where a compact ASCII string's characters start.
    ascii_size: usize,
    /// `sizeof(PyCompactUnicodeObject)`: where other compact strings' characters start.
    compact_size: usize,
}

/// `enum _frameowner`, `Include/internal/pycore_frame.h` (3.12, 3.13).
const FRAME_OWNED_BY_CSTACK: u8 = 3;

// Offsets printed by `offsetof` against each version's installed headers (3.10.13, 3.11.7,
// 3.12.1, 3.13.0; `Include/cpython/pystate.h`, `Include/internal/pycore_frame.h`,
// `Include/cpython/code.h` (3.10: `frameobject.h`), `Include/cpython/unicodeobject.h`,
// `Include/cpython/bytesobject.h`), identical on x86-64 and aarch64 (LP64). The integration tests
// in shim-tests/tests/python.rs check them against every installed interpreter.

/// CPython 3.10.
const LAYOUT_310: Layout = Layout {
    chain: Chain::Frame310,
    lines: LineTable::Pep626,
    ts_thread_id: 176,
    ts_frame: 24,
    cframe_current: 0,
    fr_previous: 24, // f_back
    fr_code: 32,
    fr_instr: 96, // f_lasti
    fr_owner: None,
    co_firstlineno: 40,
    co_filename: 104,
    co_name: 112,
    co_qualname: None,
    co_linetable: 120,
    co_code: 0,
    ob_type: 8,
    bytes_size: 16,
    bytes_sval: 32,
    str_length: 16,
    str_state: 32,
    ascii_size: 48,
    compact_size: 72,
};

/// CPython 3.11.
const LAYOUT_311: Layout = Layout {
    chain: Chain::CFrame,
    lines: LineTable::Locations,
    ts_thread_id: 152,
    ts_frame: 56,
    cframe_current: 8,
    fr_previous: 48,
    fr_code: 32,
    fr_instr: 56,
    fr_owner: None,
    co_firstlineno: 72,
    co_filename: 112,
    co_name: 120,
    co_qualname: Some(128),
    co_linetable: 136,
    co_code: 184,
    ob_type: 8,
    bytes_size: 16,
    bytes_sval: 32,
    str_length: 16,
    str_state: 32,
    ascii_size: 48,
    compact_size: 72,
};

/// CPython 3.12.
const LAYOUT_312: Layout = Layout {
    chain: Chain::CFrame,
    lines: LineTable::Locations,
    ts_thread_id: 136,
    ts_frame: 56,
    cframe_current: 0,
    fr_previous: 8,
    fr_code: 0,
    fr_instr: 56,
    fr_owner: Some(70),
    co_firstlineno: 68,
    co_filename: 112,
    co_name: 120,
    co_qualname: Some(128),
    co_linetable: 136,
    co_code: 192,
    ob_type: 8,
    bytes_size: 16,
    bytes_sval: 32,
    str_length: 16,
    str_state: 32,
    ascii_size: 40,
    compact_size: 56,
};

/// CPython 3.13 as its 3.13.0 headers have it. At run time the offsets come from
/// `_Py_DebugOffsets`; this is what those must agree with where they can be checked
/// ([`layout_313`]), and what the unit tests compare the parser against.
const LAYOUT_313: Layout = Layout {
    chain: Chain::Direct,
    lines: LineTable::Locations,
    ts_thread_id: 152,
    ts_frame: 72,
    cframe_current: 0,
    fr_previous: 8,
    fr_code: 0,
    fr_instr: 56,
    fr_owner: Some(70),
    co_firstlineno: 68,
    co_filename: 112,
    co_name: 120,
    co_qualname: Some(128),
    co_linetable: 136,
    co_code: 200,
    ob_type: 8,
    bytes_size: 16,
    bytes_sval: 32,
    str_length: 16,
    str_state: 32,
    ascii_size: 40,
    compact_size: 56,
};

/// The `_Py_DebugOffsets` fields used, as `u64` indexes into the struct (3.13's
/// `Include/internal/pycore_runtime.h`: cookie[8], version, free_threaded, then the groups).
mod dbg {
    pub const VERSION: usize = 1;
    pub const FREE_THREADED: usize = 2;
    // runtime_state: 3..6, interpreter_state: 6..19
    pub const TS_SIZE: usize = 19;
    pub const TS_CURRENT_FRAME: usize = 23;
    pub const TS_THREAD_ID: usize = 24;
    pub const FR_SIZE: usize = 28;
    pub const FR_PREVIOUS: usize = 29;
    pub const FR_EXECUTABLE: usize = 30;
    pub const FR_INSTR_PTR: usize = 31;
    pub const FR_OWNER: usize = 33;
    pub const CO_SIZE: usize = 34;
    pub const CO_FILENAME: usize = 35;
    pub const CO_NAME: usize = 36;
    pub const CO_QUALNAME: usize = 37;
    pub const CO_LINETABLE: usize = 38;
    pub const CO_FIRSTLINENO: usize = 39;
    pub const CO_CODE_ADAPTIVE: usize = 43;
    pub const OB_TYPE: usize = 45;
    // type_object 46..50, tuple 50..53, list 53..56, dict 56..59, float 59..61, long 61..64
    pub const BYTES_OB_SIZE: usize = 65;
    pub const BYTES_OB_SVAL: usize = 66;
    pub const STR_STATE: usize = 68;
    pub const STR_LENGTH: usize = 69;
    pub const STR_ASCII_SIZE: usize = 70;
    /// Fields read: the struct must be at least this many `u64`s long.
    pub const COUNT: usize = 71;
}

/// The 3.13 layout from `_Py_DebugOffsets` (`words`: the struct as `u64`s, cookie first).
/// Offsets that cannot differ in a 3.13 release build are checked against [`LAYOUT_313`];
/// `Err` says why the offsets are not usable.
fn layout_313(words: &[u64]) -> Result<Layout, String> {
    if words.len() < dbg::COUNT || &words[0].to_le_bytes() != b"xdebugpy" {
        return Err("no _Py_DebugOffsets in _PyRuntime".into());
    }
    if words[dbg::FREE_THREADED] != 0 {
        return Err("free-threaded build".into());
    }
    let w = |i: usize| words[i] as usize;
    let l = Layout {
        chain: Chain::Direct,
        lines: LineTable::Locations,
        ts_thread_id: w(dbg::TS_THREAD_ID),
        ts_frame: w(dbg::TS_CURRENT_FRAME),
        cframe_current: 0,
        fr_previous: w(dbg::FR_PREVIOUS),
        fr_code: w(dbg::FR_EXECUTABLE),
        fr_instr: w(dbg::FR_INSTR_PTR),
        fr_owner: Some(w(dbg::FR_OWNER)),
        co_firstlineno: w(dbg::CO_FIRSTLINENO),
        co_filename: w(dbg::CO_FILENAME),
        co_name: w(dbg::CO_NAME),
        co_qualname: Some(w(dbg::CO_QUALNAME)),
        co_linetable: w(dbg::CO_LINETABLE),
        co_code: w(dbg::CO_CODE_ADAPTIVE),
        ob_type: w(dbg::OB_TYPE),
        bytes_size: w(dbg::BYTES_OB_SIZE),
        bytes_sval: w(dbg::BYTES_OB_SVAL),
        str_length: w(dbg::STR_LENGTH),
        str_state: w(dbg::STR_STATE),
        ascii_size: w(dbg::STR_ASCII_SIZE),
        // PyCompactUnicodeObject = PyASCIIObject + utf8_length + utf8 (3.12+).
        compact_size: w(dbg::STR_ASCII_SIZE) + 16,
    };
    let inside = |field: usize, width: usize, size: u64| (field + width) as u64 <= size;
    let fits = inside(l.ts_thread_id, 8, words[dbg::TS_SIZE])
        && inside(l.ts_frame, 8, words[dbg::TS_SIZE])
        && inside(l.fr_previous, 8, words[dbg::FR_SIZE])
        && inside(l.fr_code, 8, words[dbg::FR_SIZE])
        && inside(l.fr_instr, 8, words[dbg::FR_SIZE])
        && inside(w(dbg::FR_OWNER), 1, words[dbg::FR_SIZE])
        && [
            l.co_firstlineno,
            l.co_filename,
            l.co_name,
            w(dbg::CO_QUALNAME),
            l.co_linetable,
            l.co_code,
        ]
        .iter()
        .all(|&f| inside(f, 4, words[dbg::CO_SIZE]));
    // The object header and the bytes/str headers are the same in every 3.13 release build.
    let fixed = l.ob_type == LAYOUT_313.ob_type
        && l.bytes_size == LAYOUT_313.bytes_size
        && l.bytes_sval == LAYOUT_313.bytes_sval
        && l.str_length == LAYOUT_313.str_length
        && l.str_state == LAYOUT_313.str_state
        && l.ascii_size == LAYOUT_313.ascii_size;
    if !fits || !fixed {
        return Err("unexpected _Py_DebugOffsets".into());
    }
    Ok(l)
}

// ------------------------------------------------------------------------------------------------
// The interpreter, found once

type ThisThreadStateFn = unsafe extern "C" fn() -> *mut c_void;
type FlagFn = unsafe extern "C" fn() -> c_int;

/// What the process turned out to be.
enum State {
    /// No CPython symbols: not a Python process (or capture is off).
    NotPython,
    /// CPython, but its frames cannot be read: the report's note.
    Unavailable(String),
    Ready(Box<Runtime>),
}

struct Runtime {
    version: (u32, u32),
    layout: Layout,
    this_thread_state: ThisThreadStateFn,
    /// `Py_IsFinalizing` (3.13) / `_Py_IsFinalizing` (3.10-3.12): thread states of other threads
    /// are freed during finalization; capture stops then.
    is_finalizing: Option<FlagFn>,
    code_type: usize,
    unicode_type: usize,
    bytes_type: usize,
}

static STATE: OnceLock<State> = OnceLock::new();
/// Set when a walk found memory that does not look like the expected layout.
static LAYOUT_MISMATCH: AtomicBool = AtomicBool::new(false);

fn sym(name: &CStr) -> usize {
    // SAFETY: a pseudo-handle and a C string.
    unsafe { crate::real::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

/// `(major, minor)` from the running interpreter: `Py_Version` (3.11+), else the
/// `Py_GetVersion()` string ("3.10.13 (main, ...)"). `None`: not CPython.
fn python_version() -> Option<(u32, u32)> {
    let v = sym(c"Py_Version");
    if v != 0 {
        // SAFETY: `const unsigned long Py_Version` (Include/pylifecycle.h, 3.11+): 64 bits on
        // LP64, the only data model the layouts here are for.
        let hex = unsafe { (v as *const u64).read() };
        return Some(((hex >> 24) as u32 & 0xff, (hex >> 16) as u32 & 0xff));
    }
    let f = sym(c"Py_GetVersion");
    if f == 0 {
        return None;
    }
    // SAFETY: `const char *Py_GetVersion(void)`: formats a static buffer, no GIL needed.
    let s = unsafe {
        let f: unsafe extern "C" fn() -> *const c_char = std::mem::transmute(f);
        let p = f();
        if p.is_null() {
            return None;
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    };
    parse_version(&s)
}

/// "3.10.13 (main, ...)" -> (3, 10).
fn parse_version(s: &str) -> Option<(u32, u32)> {
    let mut it = s.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

fn detect() -> State {
    let Some(version) = python_version() else {
        return State::NotPython;
    };
    let (major, minor) = version;
    let unavailable = |why: &str| {
        State::Unavailable(format!(
            "python frames unavailable (CPython {major}.{minor} {why})"
        ))
    };
    let layout = match version {
        (3, 10) => LAYOUT_310,
        (3, 11) => LAYOUT_311,
        (3, 12) => LAYOUT_312,
        (3, 13) => {
            let rt = sym(c"_PyRuntime");
            if rt == 0 {
                return unavailable("without _PyRuntime");
            }
            // SAFETY: `_PyRuntime` starts with `_Py_DebugOffsets` in 3.13, which is at least
            // `dbg::COUNT` u64s long; read as plain data.
            let words = unsafe { std::slice::from_raw_parts(rt as *const u64, dbg::COUNT) };
            match layout_313(words) {
                Ok(l) if (words[dbg::VERSION] >> 16) & 0xffff == 0x030d => l,
                Ok(_) => return unavailable("with a mismatched _Py_DebugOffsets version"),
                Err(why) => return unavailable(&format!("not supported: {why}")),
            }
        }
        _ => return unavailable("not supported"),
    };
    let this = sym(c"PyGILState_GetThisThreadState");
    let (code_type, unicode_type, bytes_type) = (
        sym(c"PyCode_Type"),
        sym(c"PyUnicode_Type"),
        sym(c"PyBytes_Type"),
    );
    if this == 0 || code_type == 0 || unicode_type == 0 || bytes_type == 0 {
        return unavailable("without the expected symbols");
    }
    let fin = match sym(c"Py_IsFinalizing") {
        0 => sym(c"_Py_IsFinalizing"),
        f => f,
    };
    // SAFETY: the signatures of these CPython API functions.
    unsafe {
        State::Ready(Box::new(Runtime {
            version,
            layout,
            this_thread_state: std::mem::transmute::<usize, ThisThreadStateFn>(this),
            is_finalizing: (fin != 0).then(|| std::mem::transmute::<usize, FlagFn>(fin)),
            code_type,
            unicode_type,
            bytes_type,
        }))
    }
}

fn state() -> &'static State {
    STATE.get_or_init(detect)
}

fn runtime() -> Option<&'static Runtime> {
    match state() {
        State::Ready(rt) => Some(rt),
        _ => None,
    }
}

/// What the report should say once about Python frames, if anything: an unsupported CPython, or
/// frames that could not be read. `None` in a process that is not CPython.
pub fn note() -> Option<String> {
    if !crate::config::get().python {
        return None;
    }
    match state() {
        State::NotPython => None,
        State::Unavailable(why) => Some(why.clone()),
        State::Ready(rt) if LAYOUT_MISMATCH.load(Ordering::Relaxed) => Some(format!(
            "some python frames unavailable (CPython {}.{}: a thread or frame did not have the expected layout)",
            rt.version.0, rt.version.1
        )),
        State::Ready(_) => None,
    }
}

/// The CPython version whose frames are read, if any.
#[cfg(test)]
pub fn version() -> Option<(u32, u32)> {
    runtime().map(|r| r.version)
}

/// Reads a `T` at `addr`. Only called on addresses derived from the calling thread's own thread
/// state and frames, or from objects those keep alive.
#[inline(always)]
unsafe fn rd<T: Copy>(addr: usize) -> T {
    // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
    // addresses it reads are live objects of this thread's interpreter.
    unsafe { (addr as *const T).read() }
}

// ------------------------------------------------------------------------------------------------
// The intern table: code object -> cudablame-owned copy

/// The entry index meaning "code object not interned" (table full): shown as `<unknown>`.
const UNKNOWN: u32 = u32::MAX;
const SLOTS: usize = 1 << 15;
/// Distinct code addresses kept before new ones are left unknown (75% load).
const MAX_KEYS: usize = SLOTS / 4 * 3;
/// Entries kept (reuse of an address makes a new entry; the old one stays for old records).
const MAX_ENTRIES: usize = 1 << 16;
const MAX_TEXT: usize = 4096;
const MAX_LINETABLE: usize = 1 << 20;
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// What identifies a code object beyond its address: fields that a different code object at the
/// same address would almost certainly not share all of.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
struct Fingerprint {
    firstlineno: i32,
    filename: usize,
    name: usize,
    qualname: usize,
    linetable: usize,
}

/// A thread's most recently seen code objects (address, fingerprint, entry index, flags), direct
/// mapped: the hot path's answer without the process-wide table, whose lines a large program
/// keeps evicting from the CPU caches. A slot answers only for the same address and fingerprint,
/// exactly what the table would check.
type RecentCode = [(usize, Fingerprint, u32, u8); RECENT];
const RECENT: usize = 256;

thread_local! {
    static RECENT_CODE: std::cell::RefCell<RecentCode> =
        std::cell::RefCell::new([(0, Fingerprint::default(), 0, 0); RECENT]);
}

/// Flags of an entry, decided once from its file and name.
const FLAG_BACKWARD_ENTRY: u8 = 1;

/// A code object as cudablame keeps it: immutable once published.
struct Entry {
    index: u32,
    fingerprint: Fingerprint,
    flags: u8,
    filename: Box<str>,
    function: Box<str>,
    firstlineno: i32,
    lines: LineTable,
    linetable: Box<[u8]>,
}

struct Table {
    keys: Box<[AtomicUsize]>,
    vals: Box<[AtomicPtr<Entry>]>,
    entries: Box<[AtomicPtr<Entry>]>,
    /// Serializes inserts; holds (keys used, entries used).
    insert: parking_lot::Mutex<(usize, usize)>,
}

static TABLE: OnceLock<Table> = OnceLock::new();

fn table() -> &'static Table {
    TABLE.get_or_init(|| Table {
        keys: (0..SLOTS).map(|_| AtomicUsize::new(0)).collect(),
        vals: (0..SLOTS)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect(),
        entries: (0..MAX_ENTRIES)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect(),
        insert: parking_lot::Mutex::new((0, 0)),
    })
}

#[inline(always)]
fn slot_of(code: usize) -> usize {
    // Objects are 16-byte aligned: drop the low bits, then a multiplicative hash.
    ((code >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & (SLOTS - 1)
}

fn entry(index: u32) -> Option<&'static Entry> {
    let t = TABLE.get()?;
    let p = t.entries.get(index as usize)?.load(Ordering::Acquire);
    // SAFETY: published entries are leaked boxes, never freed or changed.
    unsafe { p.as_ref() }
}

impl Runtime {
    /// The fingerprint of a live code object.
    #[inline(always)]
    unsafe fn fingerprint(&self, code: usize) -> Fingerprint {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let l = &self.layout;
            Fingerprint {
                firstlineno: rd::<i32>(code + l.co_firstlineno),
                filename: rd::<usize>(code + l.co_filename),
                name: rd::<usize>(code + l.co_name),
                qualname: l.co_qualname.map_or(0, |o| rd::<usize>(code + o)),
                linetable: rd::<usize>(code + l.co_linetable),
            }
        }
    }

    /// The entry of a live code object, interned on first sight; `None` when the table is full
    /// or the object unreadable.
    #[inline]
    unsafe fn intern(&self, code: usize, fp: Fingerprint) -> Option<&'static Entry> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let t = table();
            let mut i = slot_of(code);
            for _ in 0..SLOTS {
                match t.keys[i].load(Ordering::Acquire) {
                    k if k == code => {
                        if let Some(e) = t.vals[i].load(Ordering::Acquire).as_ref() {
                            if e.fingerprint == fp {
                                return Some(e);
                            }
                        }
                        break;
                    }
                    0 => break,
                    _ => i = (i + 1) & (SLOTS - 1),
                }
            }
            self.insert(code, fp)
        }
    }

    /// Cold: first sight of a code object (or of a new one at a reused address).
    #[cold]
    #[inline(never)]
    unsafe fn insert(&self, code: usize, fp: Fingerprint) -> Option<&'static Entry> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let t = table();
            // Bounded waits on cudablame's own locks: a lock left held by a thread that no longer
            // exists (a fork from another thread) costs a frame, never a hang.
            let mut used = t.insert.try_lock_for(LOCK_WAIT)?;
            let mut i = slot_of(code);
            let mut found = None;
            for _ in 0..SLOTS {
                let k = t.keys[i].load(Ordering::Relaxed);
                if k == code || k == 0 {
                    found = Some((i, k == 0));
                    break;
                }
                i = (i + 1) & (SLOTS - 1);
            }
            let (slot, fresh) = found?;
            if !fresh {
                if let Some(e) = t.vals[slot].load(Ordering::Acquire).as_ref() {
                    if e.fingerprint == fp {
                        return Some(e); // another thread interned it meanwhile
                    }
                }
            }
            if (fresh && used.0 >= MAX_KEYS) || used.1 >= MAX_ENTRIES {
                return None;
            }
            let Some(mut e) = self.copy_code(code, fp) else {
                LAYOUT_MISMATCH.store(true, Ordering::Relaxed);
                return None;
            };
            let index = used.1 as u32;
            e.index = index;
            let p = Box::into_raw(Box::new(e));
            t.entries[index as usize].store(p, Ordering::Release);
            t.vals[slot].store(p, Ordering::Release);
            if fresh {
                t.keys[slot].store(code, Ordering::Release);
                used.0 += 1;
            }
            used.1 += 1;
            p.as_ref()
        }
    }

    /// Copies what a report needs out of a live code object.
    unsafe fn copy_code(&self, code: usize, fp: Fingerprint) -> Option<Entry> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let filename = self
                .read_str(fp.filename)
                .unwrap_or_else(|| "<unknown>".into());
            let name = self.read_str(fp.name).unwrap_or_else(|| "<unknown>".into());
            let function = match self.layout.co_qualname {
                Some(_) => self.read_str(fp.qualname).unwrap_or_else(|| name.clone()),
                None => name.clone(),
            };
            let linetable = self.read_bytes(fp.linetable)?;
            let _ = code;
            Some(Entry {
                index: 0,
                fingerprint: fp,
                flags: classify(&filename, &name),
                filename: filename.into(),
                function: function.into(),
                firstlineno: fp.firstlineno,
                lines: self.layout.lines,
                linetable: linetable.into(),
            })
        }
    }

    /// The characters of a compact `str` (all names and file names of code objects are).
    unsafe fn read_str(&self, obj: usize) -> Option<String> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let l = &self.layout;
            if obj == 0 || rd::<usize>(obj + l.ob_type) != self.unicode_type {
                return None;
            }
            let len = rd::<isize>(obj + l.str_length);
            if !(0..=MAX_TEXT as isize).contains(&len) {
                return None;
            }
            let len = len as usize;
            // state: interned:2, kind:3, compact:1, ascii:1 (low bits first; 3.10 to 3.13).
            let state = rd::<u32>(obj + l.str_state);
            let (kind, compact, ascii) = ((state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1);
            if compact == 0 {
                return None;
            }
            let data = obj
                + if ascii == 1 {
                    l.ascii_size
                } else {
                    l.compact_size
                };
            let s = match kind {
                1 => std::slice::from_raw_parts(data as *const u8, len)
                    .iter()
                    .map(|&b| b as char)
                    .collect(),
                2 => String::from_utf16_lossy(std::slice::from_raw_parts(data as *const u16, len)),
                4 => std::slice::from_raw_parts(data as *const u32, len)
                    .iter()
                    .map(|&c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER))
                    .collect(),
                _ => return None,
            };
            Some(s)
        }
    }

    /// The bytes of a `bytes` object (the line table).
    unsafe fn read_bytes(&self, obj: usize) -> Option<Vec<u8>> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let l = &self.layout;
            if obj == 0 || rd::<usize>(obj + l.ob_type) != self.bytes_type {
                return None;
            }
            let len = rd::<isize>(obj + l.bytes_size);
            if !(0..=MAX_LINETABLE as isize).contains(&len) {
                return None;
            }
            Some(
                std::slice::from_raw_parts((obj + l.bytes_sval) as *const u8, len as usize)
                    .to_vec(),
            )
        }
    }
}

/// Torch's backward entry points (`torch/_tensor.py` `Tensor.backward`,
/// `torch/autograd/__init__.py` `backward` / `grad`, `torch/autograd/graph.py`
/// `_engine_run_backward`): a thread whose frames include one is starting a backward pass.
fn classify(filename: &str, name: &str) -> u8 {
    let f = filename.replace('\\', "/");
    let backward = (f.ends_with("torch/_tensor.py") && name == "backward")
        || (f.ends_with("torch/autograd/__init__.py") && (name == "backward" || name == "grad"))
        || (f.ends_with("torch/autograd/graph.py") && name == "_engine_run_backward");
    if backward {
        FLAG_BACKWARD_ENTRY
    } else {
        0
    }
}

// ------------------------------------------------------------------------------------------------
// Capture (hot path)

/// One captured frame: the interned code object and the instruction's byte offset in it
/// (-1: the frame has not started).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct FrameRef {
    entry: u32,
    offset: i32,
}

/// Python frames of one thread, innermost first, plus the backward context it borrows. Plain
/// data (`Copy`), no allocation.
#[derive(Clone, Copy)]
pub struct PythonStack {
    len: u8,
    /// More frames than the configured depth.
    truncated: bool,
    /// Generation of the backward context whose frames follow these (0: none).
    borrowed: u64,
    frames: [FrameRef; MAX_PYTHON_DEPTH],
}

/// Walks longer than this are cut (a corrupt chain must not loop forever).
const MAX_WALK: usize = 4096;

thread_local! {
    /// 0 unknown, 1 an autograd worker (`pt_autograd_N`), 2 another thread.
    static AUTOGRAD_WORKER: Cell<u8> = const { Cell::new(0) };
}

/// Whether the calling thread is one of PyTorch's autograd workers, by its name (set by
/// `Engine::thread_init` before it runs anything). Read once per thread.
fn is_autograd_worker() -> bool {
    AUTOGRAD_WORKER
        .try_with(|c| {
            if c.get() == 0 {
                let mut name = [0u8; 17];
                // SAFETY: PR_GET_NAME writes at most 16 bytes.
                let ok = unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) } == 0;
                c.set(if ok && name.starts_with(b"pt_autograd_") {
                    1
                } else {
                    2
                });
            }
            c.get() == 1
        })
        .unwrap_or(false)
}

impl PythonStack {
    /// No frames (not Python, capture off, or a thread without Python).
    pub const EMPTY: PythonStack = PythonStack {
        len: 0,
        truncated: false,
        borrowed: 0,
        frames: [FrameRef {
            entry: 0,
            offset: 0,
        }; MAX_PYTHON_DEPTH],
    };

    /// [`capture`](Self::capture) as configured: `CUDABLAME_PYTHON`, `CUDABLAME_PYTHON_DEPTH`.
    #[inline]
    pub fn capture_configured() -> PythonStack {
        let cfg = crate::config::get();
        if cfg.python {
            Self::capture(cfg.python_depth)
        } else {
            PythonStack::EMPTY
        }
    }

    /// Captures up to `depth` Python frames of the calling thread without the GIL (see the
    /// module doc). In a process that is not CPython this is one atomic load.
    #[inline]
    pub fn capture(depth: usize) -> PythonStack {
        let mut s = PythonStack::EMPTY;
        let Some(rt) = runtime() else { return s };
        let backward = RECENT_CODE
            .try_with(|recent| {
                // SAFETY: PyGILState_GetThisThreadState reads this thread's TSS slot; the frames
                // walked are this thread's own (see `walk`).
                unsafe {
                    let ts = (rt.this_thread_state)() as usize;
                    ts != 0
                        && rt.is_finalizing.is_none_or(|f| f() == 0)
                        && rt.walk(
                            ts,
                            depth.min(MAX_PYTHON_DEPTH),
                            &mut s,
                            &mut recent.borrow_mut(),
                        )
                }
            })
            .unwrap_or(false);
        if is_autograd_worker() {
            if !backward {
                s.borrowed = BACKWARD_GEN.load(Ordering::Acquire);
            }
        } else if backward {
            publish_backward(&s);
        }
        s
    }

    /// Frames captured (own frames, not the borrowed ones).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// No frame captured, own or borrowed (tests).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.borrowed == 0
    }

    /// Report time: the frames as file, function and line, innermost first, with the borrowed
    /// backward context appended.
    pub fn resolve(&self) -> PythonFrames {
        let mut frames: Vec<Frame> = self.frames[..self.len as usize]
            .iter()
            .map(|f| resolve_frame(*f))
            .collect();
        if self.truncated {
            frames.push(Frame {
                function: Some("<more frames: CUDABLAME_PYTHON_DEPTH>".into()),
                file: None,
                line: None,
                module: None,
                address: String::new(),
            });
        }
        let mut r = PythonFrames {
            python_stack: frames,
            python_stack_from_thread: None,
            python_stack_borrowed_from: None,
        };
        let history = match self.borrowed {
            0 => None,
            _ => BACKWARD.try_lock_for(LOCK_WAIT),
        };
        if let Some(history) = history {
            if let Some(ctx) = history.iter().find(|c| c.gen == self.borrowed) {
                r.python_stack_borrowed_from = Some(r.python_stack.len());
                r.python_stack_from_thread = Some(ctx.thread);
                r.python_stack.extend(
                    ctx.stack.frames[..ctx.stack.len as usize]
                        .iter()
                        .map(|f| resolve_frame(*f)),
                );
            }
        }
        r
    }
}

impl Runtime {
    /// Walks this thread's frame chain from its thread state `ts` into `s`, innermost first;
    /// true if a frame is one of torch's backward entry points.
    ///
    /// Safety: `ts` is the calling thread's own thread state. Its frames cannot change while this
    /// thread is in the hook, and each frame keeps its code object alive.
    #[inline(always)]
    unsafe fn walk(
        &self,
        ts: usize,
        depth: usize,
        s: &mut PythonStack,
        recent: &mut RecentCode,
    ) -> bool {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let l = &self.layout;
            if rd::<usize>(ts + l.ts_thread_id) != libc::pthread_self() as usize {
                LAYOUT_MISMATCH.store(true, Ordering::Relaxed);
                return false;
            }
            let mut f = match l.chain {
                Chain::Frame310 | Chain::Direct => rd::<usize>(ts + l.ts_frame),
                Chain::CFrame => match rd::<usize>(ts + l.ts_frame) {
                    0 => 0,
                    cframe => rd::<usize>(cframe + l.cframe_current),
                },
            };
            let mut backward = false;
            let mut steps = 0;
            while f != 0 && steps < MAX_WALK {
                steps += 1;
                let next = rd::<usize>(f + l.fr_previous);
                if let Some(owner) = l.fr_owner {
                    if rd::<u8>(f + owner) == FRAME_OWNED_BY_CSTACK {
                        f = next; // an entry frame of the interpreter, not Python code
                        continue;
                    }
                }
                let code = rd::<usize>(f + l.fr_code);
                if code == 0 || rd::<usize>(code + l.ob_type) != self.code_type {
                    if l.chain == Chain::Direct {
                        f = next; // 3.13: f_executable may be None or another callable's object
                        continue;
                    }
                    LAYOUT_MISMATCH.store(true, Ordering::Relaxed);
                    break;
                }
                if s.len as usize >= depth {
                    s.truncated = true;
                    break;
                }
                let offset = match l.chain {
                    Chain::Frame310 => match rd::<i32>(f + l.fr_instr) {
                        lasti if lasti < 0 => -1,
                        lasti => lasti.saturating_mul(2), // code units -> bytes
                    },
                    _ => {
                        let ip = rd::<usize>(f + l.fr_instr);
                        let start = code + l.co_code;
                        if ip < start {
                            -1
                        } else {
                            (ip - start).min(i32::MAX as usize) as i32
                        }
                    }
                };
                let fp = self.fingerprint(code);
                let slot = &mut recent[(code >> 4) % RECENT];
                let (entry, flags) = if slot.0 == code && slot.1 == fp {
                    (slot.2, slot.3)
                } else {
                    match self.intern(code, fp) {
                        Some(e) => {
                            *slot = (code, fp, e.index, e.flags);
                            (e.index, e.flags)
                        }
                        None => (UNKNOWN, 0),
                    }
                };
                backward |= flags & FLAG_BACKWARD_ENTRY != 0;
                s.frames[s.len as usize] = FrameRef { entry, offset };
                s.len += 1;
                f = next;
            }
            backward
        }
    }
}

fn resolve_frame(f: FrameRef) -> Frame {
    let Some(e) = entry(f.entry) else {
        return Frame {
            function: Some("<unknown>".into()),
            file: None,
            line: None,
            module: None,
            address: format!("{:#x}", f.offset.max(0)),
        };
    };
    Frame {
        function: Some(e.function.to_string()),
        file: Some(e.filename.to_string()),
        line: addr2line(e.lines, &e.linetable, e.firstlineno, f.offset)
            .and_then(|l| u32::try_from(l).ok()),
        module: None,
        // The bytecode offset of the instruction in its code object.
        address: format!("{:#x}", f.offset.max(0)),
    }
}

// ------------------------------------------------------------------------------------------------
// Backward context

struct BackwardContext {
    gen: u64,
    thread: u32,
    stack: PythonStack,
}

/// Generation of the latest backward context (0: none yet).
static BACKWARD_GEN: AtomicU64 = AtomicU64::new(0);
/// The latest contexts, oldest first: a worker's record names one by generation.
static BACKWARD: parking_lot::Mutex<VecDeque<BackwardContext>> =
    parking_lot::Mutex::new(VecDeque::new());
const BACKWARD_KEPT: usize = 64;

/// Cold-ish: a launch on a thread inside `backward()` (a few per backward call).
#[inline(never)]
fn publish_backward(s: &PythonStack) {
    let thread = crate::threads::thread_id();
    let Some(mut h) = BACKWARD.try_lock_for(LOCK_WAIT) else {
        return;
    };
    if let Some(last) = h.back() {
        let same = last.thread == thread
            && last.stack.frames[..last.stack.len as usize] == s.frames[..s.len as usize];
        if same && BACKWARD_GEN.load(Ordering::Relaxed) == last.gen {
            return;
        }
    }
    let gen = BACKWARD_GEN.load(Ordering::Relaxed) + 1;
    if h.len() == BACKWARD_KEPT {
        h.pop_front();
    }
    h.push_back(BackwardContext {
        gen,
        thread,
        stack: *s,
    });
    BACKWARD_GEN.store(gen, Ordering::Release);
}

// ------------------------------------------------------------------------------------------------
// Line numbers (report time)

/// `PyCode_Addr2Line`: the line of the instruction at byte offset `offset` (`-1`: not started,
/// the first line), `None` for instructions without a line.
pub fn addr2line(format: LineTable, table: &[u8], firstlineno: i32, offset: i32) -> Option<i32> {
    if offset < 0 {
        return Some(firstlineno);
    }
    let line = match format {
        LineTable::Pep626 => pep626_line(table, firstlineno, offset),
        LineTable::Locations => locations_line(table, firstlineno, offset),
    };
    (line >= 0).then_some(line)
}

/// 3.10, `Objects/lnotab_notes.txt`: pairs (bytecode delta, line delta as a signed byte);
/// -128 marks a range without a line.
fn pep626_line(table: &[u8], firstlineno: i32, offset: i32) -> i32 {
    let (mut end, mut line) = (0i32, firstlineno);
    for pair in table.chunks_exact(2) {
        end += pair[0] as i32;
        let delta = pair[1] as i8;
        let here = if delta == -128 {
            -1
        } else {
            line += delta as i32;
            line
        };
        if offset < end {
            return here;
        }
    }
    -1
}

/// 3.11+, `Objects/locations.md`: entries of one header byte `1cccclll` (code, length - 1 in
/// code units) and their data; code 15 = no location, 14 long form and 13 no-column form start
/// with a signed varint line delta, 10..12 = line delta 0..2, 0..9 = same line.
fn locations_line(table: &[u8], firstlineno: i32, offset: i32) -> i32 {
    let (mut i, mut end, mut line) = (0usize, 0i32, firstlineno);
    while i < table.len() {
        let head = table[i];
        let code = (head >> 3) & 15;
        let delta = match code {
            13 | 14 => signed_varint(&table[i + 1..]),
            10..=12 => code as i32 - 10,
            _ => 0,
        };
        line += delta;
        end += ((head & 7) as i32 + 1) * 2;
        if offset < end {
            return if code == 15 { -1 } else { line };
        }
        i += 1;
        while i < table.len() && table[i] & 0x80 == 0 {
            i += 1;
        }
    }
    -1
}

fn signed_varint(b: &[u8]) -> i32 {
    let (mut val, mut shift) = (0u32, 0u32);
    for &byte in b {
        val |= ((byte & 63) as u32).wrapping_shl(shift);
        shift += 6;
        if byte & 64 == 0 {
            break;
        }
    }
    if val & 1 != 0 {
        -((val >> 1) as i32)
    } else {
        (val >> 1) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            7760, 304, 0, 8, 16, 72, 152, 160, 232, 32, 80, 8, 0, 56, 72, 70, 208, 112, 120, 128,
            136, 68, 52, 96, 104, 200, 16, 8, 416, 24, 88, 168, 32, 24, 16, 40, 24, 16, 48, 32, 40,
            24, 16, 32, 16, 24, 40, 16, 32, 64, 32, 16, 40,
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
}
