//! The interpreter, found once (cold): CPython version, symbols and layout of the running process.

use super::layout::*;
use crate::safety::ForkSafeOnce;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};

pub(super) type ThisThreadStateFn = unsafe extern "C" fn() -> *mut c_void;
pub(super) type FlagFn = unsafe extern "C" fn() -> c_int;
/// A launch's capture of at most so many frames, compiled for one layout, into a
/// `PythonStack::EMPTY` (`PythonStack::cached`).
pub(super) type CaptureFn = fn(&Runtime, usize, &mut super::capture::PythonStack);

/// What the process turned out to be.
pub(super) enum State {
    /// No CPython symbols: not a Python process (or capture is off).
    NotPython,
    /// CPython, but its frames cannot be read: the report's note.
    Unavailable(String),
    Ready(Box<Runtime>),
}

/// The interpreter as capture reads it. The fields every launch reads come first, in one cache
/// line (`repr(C)`, 64-byte aligned): a known version's offsets are constants of the walk
/// ([`Walk`]), so a launch reads nothing else here.
#[repr(C, align(64))]
pub(super) struct Runtime {
    /// `PythonStack::cached` compiled for this layout (`PythonStack::capture_fn`).
    pub(super) capture: CaptureFn,
    pub(super) this_thread_state: ThisThreadStateFn,
    /// `Py_IsFinalizing` (3.13) / `_Py_IsFinalizing` (3.10-3.12): thread states of other threads
    /// are freed during finalization; capture stops then.
    pub(super) is_finalizing: Option<FlagFn>,
    pub(super) code_type: usize,
    pub(super) version: (u32, u32),
    pub(super) layout: Layout,
    pub(super) unicode_type: usize,
    pub(super) bytes_type: usize,
}

/// Which compiled walk a runtime's frames take: one per known layout, whose offsets are then
/// constants folded into the instructions (no register or memory read per offset), and one that
/// reads them from [`Runtime::layout`] (a 3.13 build whose `_Py_DebugOffsets` differ from
/// 3.13.0's headers). See `cache::lay`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Walk {
    Py310 = WALK_310,
    Py311 = WALK_311,
    Py312 = WALK_312,
    Py313 = WALK_313,
    Dynamic = WALK_DYNAMIC,
}

/// [`Walk`] as the const parameter of the walks (`cache`).
pub(super) const WALK_310: u8 = 0;
pub(super) const WALK_311: u8 = 1;
pub(super) const WALK_312: u8 = 2;
pub(super) const WALK_313: u8 = 3;
pub(super) const WALK_DYNAMIC: u8 = 4;

impl Walk {
    /// The walk for `layout`: a constant one where `layout` is a known version's exactly.
    pub(super) fn of(layout: &Layout) -> Walk {
        match *layout {
            l if l == LAYOUT_310 => Walk::Py310,
            l if l == LAYOUT_311 => Walk::Py311,
            l if l == LAYOUT_312 => Walk::Py312,
            l if l == LAYOUT_313 => Walk::Py313,
            _ => Walk::Dynamic,
        }
    }
}

/// Fork-safe, as `stacks::TABLE` (detection is idempotent: `ForkSafeOnce` may run it twice).
#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
pub(super) static STATE: ForkSafeOnce<State> = ForkSafeOnce::new();
/// Set when a walk found memory that does not look like the expected layout.
pub(super) static LAYOUT_MISMATCH: AtomicBool = AtomicBool::new(false);

pub(super) fn sym(name: &CStr) -> usize {
    // SAFETY: a pseudo-handle and a C string.
    unsafe { crate::real::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

/// `(major, minor)` from the running interpreter: `Py_Version` (3.11+), else the
/// `Py_GetVersion()` string ("3.10.13 (main, ...)"). `None`: not CPython.
pub(super) fn python_version() -> Option<(u32, u32)> {
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
pub(super) fn parse_version(s: &str) -> Option<(u32, u32)> {
    let mut it = s.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

pub(super) fn detect() -> State {
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
            capture: super::capture::PythonStack::capture_fn(Walk::of(&layout)),
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

pub(super) fn state() -> &'static State {
    STATE.get_or_init(detect)
}

/// The interpreter whose frames are read, if any: an atomic load and a compare once known.
#[inline(always)]
pub(super) fn runtime() -> Option<&'static Runtime> {
    match STATE.get() {
        Some(State::Ready(rt)) => Some(rt),
        Some(_) => None,
        None => runtime_first(),
    }
}

/// [`runtime`] at the first launch: finds out what the process is.
#[cold]
#[inline(never)]
fn runtime_first() -> Option<&'static Runtime> {
    match state() {
        State::Ready(rt) => Some(rt),
        _ => None,
    }
}

/// Whether launches of this process carry Python frames under `cfg`: it is a supported CPython
/// and `CUDABLAME_PYTHON` is on (then the Python frames name the launching line, and the native
/// stack copy can be shorter: `config::Config::python_stack_bytes`). One atomic load once known;
/// `cfg` is the caller's, not read again.
#[inline]
pub(crate) fn frames_captured(cfg: &crate::config::Config) -> bool {
    cfg.python && runtime().is_some()
}

/// What the report should say once about Python frames, if anything: an unsupported CPython, or
/// frames that could not be read. `None` in a process that is not CPython.
pub(crate) fn note() -> Option<String> {
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
pub(crate) fn version() -> Option<(u32, u32)> {
    runtime().map(|r| r.version)
}

/// Reads a `T` at `addr`. Only called on addresses derived from the calling thread's own thread
/// state and frames, or from objects those keep alive.
#[inline(always)]
pub(super) unsafe fn rd<T: Copy>(addr: usize) -> T {
    // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
    // addresses it reads are live objects of this thread's interpreter.
    unsafe { (addr as *const T).read() }
}
