//! Host stacks. A launch keeps a copy of its stack's top ([`copy::StackCopy`]), unwound only when
//! a report names it; cold paths unwind their live stack ([`NativeStack::capture`]). Return
//! addresses that must outlive their stream's ring (graph captures, failed launches, report
//! views) are kept in a bounded table and referred to by [`StackRef`]. Everything becomes frames
//! only when a report is written ([`symbolize`]).

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
pub(crate) struct EntryRegs {
    /// An instruction address inside the entry point (the lookup address of frame 0).
    pub(crate) rip: u64,
    pub(crate) rsp: u64,
    pub(crate) rbp: u64,
}

impl EntryRegs {
    /// The registers at this point of the caller (always inlined into it).
    #[inline(always)]
    pub(crate) fn here() -> EntryRegs {
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
pub(crate) struct NativeStack {
    len: u8,
    /// The load generation the addresses were valid in (`unwind::load_generation`).
    gen: u64,
    ips: [usize; CAPACITY],
}

/// Stands for a frame whose module was unloaded after its stack was taken (another module may
/// now be mapped there): symbolized as "unloaded module", never as what is there now. Not a code
/// address (page 0 is never mapped).
pub(crate) const UNLOADED_MODULE: usize = 1;

/// A stack's return addresses as they can be symbolized now: those in a module loaded after the
/// stack was taken are [`UNLOADED_MODULE`], and the stack ends there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ips {
    len: usize,
    ips: [usize; CAPACITY],
}

impl std::ops::Deref for Ips {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.ips[..self.len]
    }
}

impl AsRef<[usize]> for Ips {
    fn as_ref(&self) -> &[usize] {
        self
    }
}

impl NativeStack {
    /// No frames (stack capture off).
    pub(crate) const EMPTY: NativeStack = NativeStack {
        len: 0,
        gen: 0,
        ips: [0; CAPACITY],
    };

    /// Captures up to `depth` frames of the calling thread's live stack below cudablame's own
    /// frames: with framehop from `entry` when given (then only the entry point's frame is
    /// cudablame's), else from here, falling back to the system unwinder. Cold paths only (see
    /// [`copy`] for launches). `now_ns` is a clock reading the caller already has (paces the
    /// module-list checks).
    #[inline(never)]
    pub(crate) fn capture(depth: usize, now_ns: u64, entry: Option<&EntryRegs>) -> NativeStack {
        if !unwind::has_room(LIVE_UNWIND_ROOM) {
            // Unwinding needs tens of KiB of stack (framehop's rule cache, gimli's unwind
            // context): on a thread with less left it crashed the program (SIGSEGV on a 16 KiB
            // thread; heap corruption on a small fiber stack). No stack is better.
            return NativeStack::EMPTY;
        }
        let want = (depth + OWN_FRAMES_ALLOWANCE).min(CAPACITY);
        #[cfg(target_arch = "x86_64")]
        {
            let mut s = NativeStack::EMPTY;
            s.gen = unwind::load_generation();
            let start = entry.filter(|e| e.rsp != 0);
            let want = start.map_or(want, |_| (depth + 1).min(CAPACITY));
            s.len = unwind::capture(&mut s.ips[..want], now_ns, start) as u8;
            if s.len > 0 {
                return s;
            }
        }
        let _ = (now_ns, entry);
        Self::capture_libgcc(want)
    }

    /// Room for return addresses (the most a stack holds).
    pub(crate) fn capacity(&self) -> usize {
        CAPACITY
    }

    /// The first `n` slots (at most [`capacity`](Self::capacity)) to fill, then [`set_len`](Self::set_len).
    pub(crate) fn slots(&mut self, n: usize) -> &mut [usize] {
        &mut self.ips[..n.min(CAPACITY)]
    }

    /// How many slots hold return addresses.
    pub(crate) fn set_len(&mut self, n: usize) {
        self.len = n.min(CAPACITY) as u8;
    }

    /// Sets the load generation the addresses were taken in (a stack copy's, unwound later).
    pub(crate) fn set_generation(&mut self, gen: u64) {
        self.gen = gen;
    }

    /// Captures with `_Unwind_Backtrace` (the `backtrace` crate).
    fn capture_libgcc(want: usize) -> NativeStack {
        let mut s = NativeStack::EMPTY;
        s.gen = unwind::load_generation();
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

    /// The captured return addresses, innermost first, as they can be symbolized now: the first
    /// one in a module loaded after the stack was taken becomes [`UNLOADED_MODULE`] and ends it
    /// (issue 19 item 6). Report time (it may read the module list).
    pub(crate) fn ips(&self) -> Ips {
        let mut out = Ips {
            len: 0,
            ips: [0; CAPACITY],
        };
        for &ip in &self.ips[..self.len as usize] {
            out.ips[out.len] = ip;
            out.len += 1;
            if ip != UNLOADED_MODULE && unwind::loaded_after(ip, self.gen) {
                out.ips[out.len - 1] = UNLOADED_MODULE;
                break;
            }
        }
        out
    }
}

pub(crate) use cudablame_report::model::Frame;

/// Stack (bytes) a live unwind ([`NativeStack::capture`]) needs left on its thread: it used more
/// than 22 KiB (a failed launch, a captured launch and a report on a 16-22 KiB thread crashed,
/// and two reports at once on 24 KiB threads), so with less it takes no stack (a report then
/// unwinds a copy of the stack on a thread of its own, `report::emit`).
pub(crate) const LIVE_UNWIND_ROOM: u64 = 64 << 10;

pub(crate) mod copy;
#[cfg(target_arch = "x86_64")]
pub(crate) mod python;
pub(crate) mod sites;
pub(crate) mod unwind;

/// Where an op's native launch stack is. Plain data (`Copy`, 8 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum StackRef {
    /// None was taken (`CUDABLAME_STACK=off`), or it is no longer kept.
    #[default]
    None,
    /// In its stream's ring, as a [`copy::StackCopy`] under the op's sequence number; a snapshot
    /// of the ring turns it into [`StackRef::Kept`] or [`StackRef::None`].
    Copied,
    /// Unwound, in the table of kept stacks: see [`keep`] and [`kept`].
    Kept(u32),
    /// The copy of the op's launch site ([`sites`]), shared by every launch from it and kept
    /// as long as the process (a forked child forgets it): [`kept`] unwinds it. `first`: this
    /// op's launch made the site (the copy is its own stack; the report marks only later
    /// launches' stacks as the site's).
    Site { site: u32, first: bool },
}

/// Unwound stacks kept for later reports, at most this many (the oldest are dropped).
const KEPT_MAX: usize = 16384;

#[derive(Default)]
struct KeptTable {
    /// `(id, stack)`; the entry of id `i` is at `i % KEPT_MAX` while it is the newest there.
    stacks: Vec<(u32, NativeStack)>,
    next: u32,
}

/// Resettable: a forked child drops it without taking its lock (`safety::Resettable`).
static KEPT: crate::safety::Resettable<crate::safety::lock::Mutex<KeptTable>> =
    crate::safety::Resettable::new();

/// Keeps `stack` for later reports (cold paths: graph captures, failed launches, snapshots).
pub(crate) fn keep(stack: NativeStack) -> StackRef {
    if stack.len == 0 {
        return StackRef::None;
    }
    let mut t = KEPT.get().lock();
    let id = t.next;
    t.next = t.next.wrapping_add(1);
    let at = id as usize % KEPT_MAX;
    if at < t.stacks.len() {
        t.stacks[at] = (id, stack);
    } else {
        t.stacks.push((id, stack));
    }
    StackRef::Kept(id)
}

/// The stack `r` refers to, if it is still kept ([`StackRef::Copied`] needs its ring: none here);
/// a launch site's copy is unwound now (`CUDABLAME_STACK_DEPTH` frames; report time only).
pub(crate) fn kept(r: StackRef) -> NativeStack {
    let id = match r {
        StackRef::Kept(id) => id,
        StackRef::Site { site, .. } => {
            return sites::unwind(site, crate::config::get().stack_depth)
        }
        StackRef::None | StackRef::Copied => return NativeStack::EMPTY,
    };
    let t = KEPT.get().lock();
    match t.stacks.get(id as usize % KEPT_MAX) {
        Some(&(at, s)) if at == id => s,
        _ => NativeStack::EMPTY,
    }
}

/// Tests: the function names of `stack`'s frames, symbolized by hand (in a unit-test binary
/// every frame is in the "own" module, which reports leave out), innermost first.
#[cfg(test)]
pub(crate) fn test_function_names(stack: &NativeStack) -> Vec<String> {
    let mut names = Vec::new();
    for &ip in stack.ips().iter() {
        backtrace::resolve((ip - 1) as *mut c_void, |sym| {
            names.push(sym.name().map(|n| n.to_string()).unwrap_or_default())
        });
    }
    names
}

/// Threads symbolizing now ([`symbolize`]: inside `backtrace::resolve`, whose process-wide lock
/// they hold or wait for).
static RESOLVING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Set in a forked child whose parent had a thread symbolizing at the fork: the backtrace
/// crate's lock may be held by a thread that does not exist in the child, so the child never
/// takes it (its frames keep their module and address, without function or line). Without
/// this, a child forked while another thread built a report hung at its own first report (found
/// by a break-it helper, twentieth session).
static RESOLVE_LOCKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Forgets kept stacks (a forked child). Takes no lock.
pub(crate) fn forget_after_fork() {
    use std::sync::atomic::Ordering;
    if RESOLVING.swap(0, Ordering::AcqRel) > 0 {
        RESOLVE_LOCKED.store(true, Ordering::Release);
    }
    KEPT.reset_in_child();
    sites::forget_after_fork();
    unwind::forget_after_fork();
}

/// Base address of the module holding `addr` and its path (`None` where the loader knows none).
pub(crate) fn module_of(addr: usize) -> Option<(usize, String)> {
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

/// Symbolizes return addresses (innermost first) into frames, dropping cudablame's own frames at
/// the top and keeping at most `depth`. Slow (reads symbol tables and DWARF): report time only.
/// [`UNLOADED_MODULE`] becomes a frame of module "unloaded module".
pub(crate) fn symbolize(ips: impl AsRef<[usize]>, depth: usize) -> Vec<Frame> {
    use std::sync::atomic::Ordering;
    /// Counts this thread in [`RESOLVING`] while it lives.
    struct Resolving;
    impl Drop for Resolving {
        fn drop(&mut self) {
            let _ = RESOLVING.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(1))
            });
        }
    }
    RESOLVING.fetch_add(1, Ordering::AcqRel);
    let _resolving = Resolving;
    let resolve = !RESOLVE_LOCKED.load(Ordering::Acquire);
    // Per module: whether its symbols fit the address space left (`room_to_resolve`).
    let mut room: Vec<(usize, bool)> = Vec::new();
    let own = module_of(module_of as *const () as usize).map(|m| m.0);
    let mut frames = Vec::new();
    let mut skipping = true;
    for &ip in ips.as_ref() {
        if ip == UNLOADED_MODULE {
            if frames.len() < depth {
                frames.push(Frame {
                    function: None,
                    file: None,
                    line: None,
                    module: Some("unloaded module".into()),
                    address: "(unloaded)".into(),
                });
            }
            break;
        }
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
        let fits = |room: &mut Vec<(usize, bool)>, (base, path): &(usize, String)| {
            if let Some(&(_, f)) = room.iter().find(|r| r.0 == *base) {
                return f;
            }
            let f = room_to_resolve(*base, path);
            room.push((*base, f));
            f
        };
        if resolve && module.as_ref().is_none_or(|m| fits(&mut room, m)) {
            backtrace::resolve(lookup as *mut c_void, |sym| {
                here.push(Frame {
                    function: sym.name().map(|n| demangle(&format!("{n:#}"))), // {:#}: no Rust hash
                    file: sym.filename().map(|f| f.display().to_string()),
                    line: sym.lineno(),
                    module: module.as_ref().map(|m| m.1.clone()),
                    address: format!("{ip:#x}"),
                });
            });
        }
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

/// Whether symbolizing in the module file at `path` fits the address space the process has left:
/// the symbolizer maps the whole file and parses its symbol tables and debug information into
/// the heap, and Rust aborts the process on a failed allocation (no unwinding to contain). So
/// twice the file's size and 32 MiB must be mappable now (a trial mapping, reserving nothing,
/// given back at once). Found by a break-it review: a program under `RLIMIT_AS` with tens of
/// MiB to spare died of SIGABRT in its report (the library's own 16 MiB of debug information).
/// Where it does not fit, the module's frames keep their module and address, unnamed. `base`:
/// the module's load address, `path` its name from the loader (the main program's is `argv[0]`,
/// which may name another file from here: its size is `/proc/self/exe`'s). Separate debug files
/// are not counted (a margin of 32 MiB covers a system library's). Without an address-space
/// limit nothing is probed.
fn room_to_resolve(base: usize, path: &str) -> bool {
    // SAFETY: getrlimit writes the local struct.
    let limited = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_AS, &mut l) == 0 && l.rlim_cur != libc::RLIM_INFINITY
    };
    if !limited {
        return true;
    }
    // SAFETY: getauxval has no preconditions; AT_PHDR lies in the main program's image.
    let main = module_of(unsafe { libc::getauxval(libc::AT_PHDR) } as usize).map(|m| m.0);
    let file = if main == Some(base) {
        "/proc/self/exe"
    } else {
        path
    };
    let size = std::fs::metadata(file).map_or(0, |m| m.len()) as usize;
    let need = size.saturating_mul(2).saturating_add(32 << 20);
    // SAFETY: an anonymous mapping of no access, unmapped before return; nothing touches it.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            need,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return false;
        }
        libc::munmap(p, need);
    }
    true
}

/// Demangles an Itanium C++ symbol (kernel names, C++ host frames); other names are returned as is
/// (Rust names come demangled from `backtrace`).
pub(crate) fn demangle(name: &str) -> String {
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
        let s = NativeStack::capture(16, 0, None);
        std::hint::black_box(&s); // keeps this frame: the capture is not a tail call
        s
    }

    #[test]
    fn capture_then_symbolize_finds_the_caller() {
        let s = capture_here();
        assert!(s.ips().len() > 2);
        let names = test_function_names(&s);
        assert!(
            names.iter().any(|n| n.contains("capture_here")),
            "{names:?}"
        );
    }

    #[test]
    fn kept_stacks_come_back_until_overwritten() {
        let s = capture_here();
        let r = keep(s);
        assert_eq!(kept(r).ips(), s.ips());
        assert_eq!(keep(NativeStack::EMPTY), StackRef::None);
        assert!(kept(StackRef::Copied).ips().is_empty());
        for _ in 0..KEPT_MAX {
            keep(s);
        }
        assert!(kept(r).ips().is_empty(), "the oldest is dropped");
    }

    #[test]
    fn demangles_kernel_names() {
        assert_eq!(demangle("_Z9oob_writePii"), "oob_write(int*, int)");
        assert_eq!(demangle("plain_c_kernel"), "plain_c_kernel");
    }
}
