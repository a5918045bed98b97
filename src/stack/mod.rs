//! Host stacks: instruction pointers captured on the hot path ([`NativeStack::capture`]),
//! turned into frames only when a report is written ([`symbolize`]).

use crate::config::MAX_STACK_DEPTH;
use std::ffi::{c_void, CStr};

/// cudablame's own frames at the top of a capture (the hook and the unwinder) are dropped when
/// symbolizing; this many extra slots keep them from eating into the configured depth.
const OWN_FRAMES_ALLOWANCE: usize = 8;
const CAPACITY: usize = MAX_STACK_DEPTH + OWN_FRAMES_ALLOWANCE;

/// The registers an unwind starts from, read at one instruction of the exported entry point the
/// program called (`interpose::exports`), before any of cudablame's own frames exist: unwinding
/// from there costs one own frame instead of the half dozen of the hook's call chain. Valid while
/// that entry point's frame is live (the hook runs inside it; the frame's saved registers and
/// return address, at or above `rsp`, do not change meanwhile). All zero where not supported.
#[derive(Clone, Copy, Default)]
pub struct EntryRegs {
    /// An instruction address inside the entry point (the lookup address of frame 0).
    pub rip: u64,
    pub rsp: u64,
    pub rbp: u64,
}

impl EntryRegs {
    /// The registers at this point of the caller (always inlined into it).
    #[inline(always)]
    pub fn here() -> EntryRegs {
        #[cfg(target_arch = "x86_64")]
        {
            let (rip, rsp, rbp): (u64, u64, u64);
            // SAFETY: reads three registers; no memory access, no stack change.
            unsafe {
                std::arch::asm!("lea {0}, [rip]", "mov {1}, rsp", "mov {2}, rbp",
                    out(reg) rip, out(reg) rsp, out(reg) rbp,
                    options(nomem, nostack, preserves_flags));
            }
            EntryRegs { rip, rsp, rbp }
        }
        #[cfg(not(target_arch = "x86_64"))]
        EntryRegs::default()
    }
}

/// Return addresses of one thread's stack, innermost first. Plain data (`Copy`), no allocation.
#[derive(Clone, Copy)]
pub struct NativeStack {
    len: u8,
    ips: [usize; CAPACITY],
}

impl NativeStack {
    /// No frames (stack capture off).
    pub const EMPTY: NativeStack = NativeStack {
        len: 0,
        ips: [0; CAPACITY],
    };

    /// Captures up to `depth` frames of the calling thread below cudablame's own frames, with
    /// the configured unwinder (`CUDABLAME_UNWINDER`): framehop with cached rules (default on
    /// x86-64, see [`unwind`]), starting at `entry` when given, or the system unwinder from here.
    /// No symbolization, no allocation once warm. `now_ns` is a clock reading the caller already
    /// has (paces the module-list checks); `hint` tells launch sites apart for the memoized
    /// unwinds ([`memo`]; 0 if none).
    #[inline(never)]
    pub fn capture(depth: usize, now_ns: u64, entry: Option<&EntryRegs>, hint: u64) -> NativeStack {
        let want = (depth + OWN_FRAMES_ALLOWANCE).min(CAPACITY);
        #[cfg(target_arch = "x86_64")]
        if crate::config::get().unwinder == crate::config::Unwinder::Framehop {
            let mut s = NativeStack::EMPTY;
            let start = entry.filter(|e| e.rsp != 0);
            // From the entry point only its own frame is cudablame's.
            let want = start.map_or(want, |_| (depth + 1).min(CAPACITY));
            s.len = unwind::capture(&mut s.ips[..want], now_ns, start, hint) as u8;
            if s.len > 0 {
                return s;
            }
        }
        let _ = (now_ns, entry, hint);
        Self::capture_libgcc(want)
    }

    /// Captures with `_Unwind_Backtrace` (the `backtrace` crate).
    fn capture_libgcc(want: usize) -> NativeStack {
        let mut s = NativeStack::EMPTY;
        // SAFETY: trace_unsynchronized only requires that no other backtrace call races with it on
        // this thread, which holds: the hook does not nest.
        unsafe {
            backtrace::trace_unsynchronized(|frame| {
                s.ips[s.len as usize] = frame.ip() as usize;
                s.len += 1;
                (s.len as usize) < want
            });
        }
        s
    }

    /// The captured return addresses, innermost first.
    pub fn ips(&self) -> &[usize] {
        &self.ips[..self.len as usize]
    }
}

pub use crate::report::model::Frame;

pub mod memo;
#[cfg(target_arch = "x86_64")]
pub mod python;
pub mod unwind;

/// Base address of the module holding `addr` and its path.
fn module_of(addr: usize) -> Option<(usize, String)> {
    // SAFETY: dladdr only reads loader data structures.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some((
            info.dli_fbase as usize,
            CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned(),
        ))
    }
}

/// Whether `addr` lies in libcudablame itself.
pub fn is_own_address(addr: usize) -> bool {
    let own = module_of(is_own_address as *const () as usize).map(|m| m.0);
    own.is_some() && module_of(addr).map(|m| m.0) == own
}

/// Symbolizes return addresses (innermost first) into frames, dropping cudablame's own frames at
/// the top and keeping at most `depth`. Slow (reads symbol tables and DWARF): report time only.
pub fn symbolize(ips: &[usize], depth: usize) -> Vec<Frame> {
    let own = module_of(symbolize as *const () as usize).map(|m| m.0);
    let mut frames = Vec::new();
    let mut skipping = true;
    for &ip in ips {
        let module = module_of(ip);
        if skipping && own.is_some() && module.as_ref().map(|m| m.0) == own {
            continue;
        }
        skipping = false;
        if frames.len() >= depth {
            break;
        }
        // A return address points after the call; step back one byte to resolve the call's line.
        let lookup = ip.saturating_sub(1);
        // One frame per function at this address, inlined ones first (like `addr2line -i`).
        let mut here = Vec::new();
        backtrace::resolve(lookup as *mut c_void, |sym| {
            here.push(Frame {
                function: sym.name().map(|n| demangle(&format!("{n:#}"))), // {:#}: no Rust hash
                file: sym.filename().map(|f| f.display().to_string()),
                line: sym.lineno(),
                module: module.as_ref().map(|m| m.1.clone()),
                address: format!("{ip:#x}"),
            });
        });
        if here.is_empty() && module.is_some() {
            here.push(Frame {
                function: None,
                file: None,
                line: None,
                module: module.map(|m| m.1),
                address: format!("{ip:#x}"),
            });
        }
        frames.extend(here);
    }
    frames.truncate(depth);
    frames
}

/// Demangles an Itanium C++ symbol (kernel names, C++ host frames); other names are returned as is
/// (Rust names come demangled from `backtrace`).
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return s;
            }
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn capture_here() -> NativeStack {
        let s = NativeStack::capture(16, 0, None, 0);
        std::hint::black_box(&s); // keeps this frame: the capture is not a tail call
        s
    }

    #[test]
    fn capture_then_symbolize_finds_the_caller() {
        let s = capture_here();
        assert!(s.ips().len() > 2);
        // In the unit-test binary everything is "own" module, so symbolize everything by hand.
        let mut names = Vec::new();
        for &ip in s.ips() {
            backtrace::resolve((ip - 1) as *mut c_void, |sym| {
                names.push(sym.name().map(|n| n.to_string()).unwrap_or_default())
            });
        }
        assert!(
            names.iter().any(|n| n.contains("capture_here")),
            "{names:?}"
        );
    }

    #[test]
    fn demangles_kernel_names() {
        assert_eq!(demangle("_Z9oob_writePii"), "oob_write(int*, int)");
        assert_eq!(demangle("plain_c_kernel"), "plain_c_kernel");
    }
}
