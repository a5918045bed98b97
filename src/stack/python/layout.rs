//! CPython layouts: the byte offsets read, per version (3.10 to 3.12 tables, 3.13 from `_Py_DebugOffsets`).

/// How a thread state leads to its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Chain {
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
pub(crate) enum LineTable {
    /// 3.10 (PEP 626): (bytecode delta, signed line delta) byte pairs, -128 = no line.
    Pep626,
    /// 3.11+: the location table (`Objects/locations.md` in CPython).
    Locations,
}

/// Byte offsets of the fields read, for one CPython version (release builds, LP64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) chain: Chain,
    pub(super) lines: LineTable,
    pub(super) ts_thread_id: usize,
    /// 3.10 `frame`, 3.11/3.12 `cframe`, 3.13 `current_frame`.
    pub(super) ts_frame: usize,
    /// `_PyCFrame.current_frame` (3.11/3.12).
    pub(super) cframe_current: usize,
    pub(super) fr_previous: usize,
    pub(super) fr_code: usize,
    /// 3.10: `f_lasti` (int); later: the `prev_instr` / `instr_ptr` pointer.
    pub(super) fr_instr: usize,
    /// `owner` (3.12+: `FRAME_OWNED_BY_CSTACK` entry frames are skipped).
    pub(super) fr_owner: Option<usize>,
    pub(super) co_firstlineno: usize,
    /// `co_consts` and `co_names`: read on every capture for the fingerprint (next to the
    /// object header, where the interpreter reads them too).
    pub(super) co_consts: usize,
    pub(super) co_names: usize,
    pub(super) co_filename: usize,
    pub(super) co_name: usize,
    /// 3.11+ (3.10 has only `co_name`).
    pub(super) co_qualname: Option<usize>,
    pub(super) co_linetable: usize,
    /// `co_code_adaptive`, the first code unit (3.11+).
    pub(super) co_code: usize,
    pub(super) ob_type: usize,
    pub(super) bytes_size: usize,
    pub(super) bytes_sval: usize,
    pub(super) str_length: usize,
    pub(super) str_state: usize,
    /// `sizeof(PyASCIIObject)`: where a compact ASCII string's characters start.
    pub(super) ascii_size: usize,
    /// `sizeof(PyCompactUnicodeObject)`: where other compact strings' characters start.
    pub(super) compact_size: usize,
}

/// `enum _frameowner`, `Include/internal/pycore_frame.h` (3.12, 3.13).
pub(super) const FRAME_OWNED_BY_CSTACK: u8 = 3;

// Offsets printed by `offsetof` against each version's installed headers (3.10.13, 3.11.7,
// 3.12.1, 3.13.0; `Include/cpython/pystate.h`, `Include/internal/pycore_frame.h`,
// `Include/cpython/code.h` (3.10: `frameobject.h`), `Include/cpython/unicodeobject.h`,
// `Include/cpython/bytesobject.h`), identical on x86-64 and aarch64 (LP64). The integration tests
// in shim-tests/tests/python.rs check them against every installed interpreter.

/// CPython 3.10.
pub(super) const LAYOUT_310: Layout = Layout {
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
    co_consts: 56,
    co_names: 64,
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
pub(super) const LAYOUT_311: Layout = Layout {
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
    co_consts: 24,
    co_names: 32,
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
pub(super) const LAYOUT_312: Layout = Layout {
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
    co_consts: 24,
    co_names: 32,
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
pub(super) const LAYOUT_313: Layout = Layout {
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
    co_consts: 24,
    co_names: 32,
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
pub(super) mod dbg {
    pub(crate) const VERSION: usize = 1;
    pub(crate) const FREE_THREADED: usize = 2;
    // runtime_state: 3..6, interpreter_state: 6..19
    pub(crate) const TS_SIZE: usize = 19;
    pub(crate) const TS_CURRENT_FRAME: usize = 23;
    pub(crate) const TS_THREAD_ID: usize = 24;
    pub(crate) const FR_SIZE: usize = 28;
    pub(crate) const FR_PREVIOUS: usize = 29;
    pub(crate) const FR_EXECUTABLE: usize = 30;
    pub(crate) const FR_INSTR_PTR: usize = 31;
    pub(crate) const FR_OWNER: usize = 33;
    pub(crate) const CO_SIZE: usize = 34;
    pub(crate) const CO_FILENAME: usize = 35;
    pub(crate) const CO_NAME: usize = 36;
    pub(crate) const CO_QUALNAME: usize = 37;
    pub(crate) const CO_LINETABLE: usize = 38;
    pub(crate) const CO_FIRSTLINENO: usize = 39;
    pub(crate) const CO_CODE_ADAPTIVE: usize = 43;
    pub(crate) const OB_TYPE: usize = 45;
    // type_object 46..50, tuple 50..53, list 53..56, dict 56..59, float 59..61, long 61..64
    pub(crate) const BYTES_OB_SIZE: usize = 65;
    pub(crate) const BYTES_OB_SVAL: usize = 66;
    pub(crate) const STR_STATE: usize = 68;
    pub(crate) const STR_LENGTH: usize = 69;
    pub(crate) const STR_ASCII_SIZE: usize = 70;
    /// Fields read: the struct must be at least this many `u64`s long.
    pub(crate) const COUNT: usize = 71;
}

/// The 3.13 layout from `_Py_DebugOffsets` (`words`: the struct as `u64`s, cookie first).
/// Offsets that cannot differ in a 3.13 release build are checked against [`LAYOUT_313`];
/// `Err` says why the offsets are not usable.
pub(super) fn layout_313(words: &[u64]) -> Result<Layout, String> {
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
        // Not in `_Py_DebugOffsets`: right after `PyObject_VAR_HEAD` in every 3.11+ build.
        co_consts: LAYOUT_313.co_consts,
        co_names: LAYOUT_313.co_names,
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
