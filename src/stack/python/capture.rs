//! Capture (hot path, per launch): the walk of the calling thread's own frame chain.

use super::backward::*;
use super::cache::{self, End, ThreadState, THREAD};
use super::intern::*;
use super::layout::*;
use super::runtime::*;
use super::stacks::{frames as stack_frames, intern as intern_stack, NO_STACK};
use crate::config::MAX_PYTHON_DEPTH;
use std::cell::Cell;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;

/// One captured frame: the interned code object and the instruction's byte offset in it
/// (-1: the frame has not started).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct FrameRef {
    pub(super) entry: u32,
    pub(super) offset: i32,
}

/// Python frames of one thread, innermost first, plus the backward context it borrows. Plain
/// data (`Copy`, 24 bytes), no allocation: the frames themselves are interned (`stacks`), once
/// per distinct stack.
#[derive(Clone, Copy)]
pub(crate) struct PythonStack {
    /// Frames captured (at most the configured depth).
    pub(super) len: u8,
    /// More frames than the configured depth.
    pub(super) truncated: bool,
    /// The interned frames' slot (`stacks::intern`; [`NO_STACK`]: the table was full and only
    /// `top` is kept). Meaningless while `len` is 0.
    pub(super) stack: u32,
    /// The innermost frame, also kept here: a full table still leaves the launching line.
    pub(super) top: FrameRef,
    /// Generation of the backward context whose frames follow these (0: none).
    pub(super) borrowed: u64,
}

/// Walks longer than this are cut (a corrupt chain must not loop forever).
pub(super) const MAX_WALK: usize = 4096;

thread_local! {
    /// 0 unknown, 1 an autograd worker (`pt_autograd_N`), 2 another thread. Read only where the
    /// thread's [`THREAD`] cache is gone (its exit) or busy; otherwise the cache's copy.
    static AUTOGRAD_WORKER: Cell<u8> = const { Cell::new(0) };
}

/// Whether the calling thread is one of PyTorch's autograd workers, by its name (set by
/// `Engine::thread_init` before it runs anything). Read once per thread.
pub(super) fn is_autograd_worker() -> bool {
    AUTOGRAD_WORKER
        .try_with(|c| {
            if c.get() == 0 {
                c.set(if thread_is_autograd_worker() { 1 } else { 2 });
            }
            c.get() == 1
        })
        .unwrap_or(false)
}

#[cfg(test)]
thread_local! {
    /// Tests: full walks made on this thread (captures the stack cache did not answer).
    pub(super) static FULL_WALKS: Cell<u32> = const { Cell::new(0) };
    /// Tests: captures on this thread that the predicted entry did not answer.
    pub(super) static UNPREDICTED: Cell<u32> = const { Cell::new(0) };
}

/// The calling thread's name starts with `pt_autograd_` (one `prctl`).
pub(super) fn thread_is_autograd_worker() -> bool {
    let mut name = [0u8; 17];
    // SAFETY: PR_GET_NAME writes at most 16 bytes.
    let ok = unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) } == 0;
    ok && name.starts_with(b"pt_autograd_")
}

impl PythonStack {
    /// No frames (not Python, capture off, or a thread without Python).
    pub(crate) const EMPTY: PythonStack = PythonStack {
        len: 0,
        truncated: false,
        stack: NO_STACK,
        top: FrameRef {
            entry: 0,
            offset: 0,
        },
        borrowed: 0,
    };

    /// [`capture`](Self::capture) as configured: `CUDABLAME_PYTHON`, `CUDABLAME_PYTHON_DEPTH`.
    #[inline]
    pub(crate) fn capture_configured() -> PythonStack {
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
    pub(crate) fn capture(depth: usize) -> PythonStack {
        let mut s = PythonStack::EMPTY;
        if let Some(rt) = runtime() {
            (rt.capture)(rt, depth, &mut s);
        }
        s
    }

    /// [`capture`](Self::capture) with the interpreter `rt` (tests: a fake one).
    #[cfg(test)]
    pub(super) fn capture_from(rt: &Runtime, depth: usize) -> PythonStack {
        let mut s = PythonStack::EMPTY;
        (rt.capture)(rt, depth, &mut s);
        s
    }

    /// The capture of layout walk `walk`, as [`Runtime::capture`] for that walk.
    pub(super) fn capture_fn(walk: Walk) -> CaptureFn {
        match walk {
            Walk::Py310 => Self::cached::<WALK_310>,
            Walk::Py311 => Self::cached::<WALK_311>,
            Walk::Py312 => Self::cached::<WALK_312>,
            Walk::Py313 => Self::cached::<WALK_313>,
            Walk::Dynamic => Self::cached::<WALK_DYNAMIC>,
        }
    }

    /// [`capture`](Self::capture) of a CPython process of layout walk `V` ([`Walk`]), out of
    /// line (in a process that is not CPython a launch runs none of it), compiled once per walk
    /// so that a launch runs one compact piece of code with its offsets as constants. The
    /// thread's stack cache first (`cache`: a stack captured before costs one walk compared with
    /// its kept copy); the full walk ([`Self::full`], whose frame buffer of 512 bytes is on the
    /// stack only in its own frame: a launch from a 16 KiB thread of a C program must fit,
    /// `robust.rs`, small stacks) only for a stack the cache does not have.
    ///
    /// Writes the capture into `s`, which is [`PythonStack::EMPTY`] (the caller's: no copy).
    #[link_section = "cudablame_hot_text"] // every launch runs it: see lib.rs
    #[inline(never)]
    fn cached<const V: u8>(rt: &Runtime, depth: usize, s: &mut PythonStack) {
        let depth = depth.min(MAX_PYTHON_DEPTH) as u8;
        if THREAD
            .with(|t| t.with(|t| Self::on_thread::<V>(rt, t, depth, s)))
            .flatten()
            .is_none()
        {
            Self::without_cache(s);
        }
    }

    /// [`cached`](Self::cached) with the thread's state `t`, into `s` (empty): the thread
    /// state, its check, the innermost frame, then the entry predicted by the stack cache, else
    /// [`Self::miss`]; then the backward context.
    #[inline(always)]
    fn on_thread<const V: u8>(
        rt: &Runtime,
        t: &mut ThreadState,
        depth: u8,
        s: &mut PythonStack,
    ) -> Option<()> {
        let l = cache::lay::<V>(rt);
        // SAFETY: PyGILState_GetThisThreadState reads this thread's TSS slot; the frames walked
        // are this thread's own (see `walk_chain`).
        let backward = unsafe {
            let ts = (rt.this_thread_state)() as usize;
            if ts == 0 || rt.is_finalizing.is_some_and(|f| f() != 0) {
                false
            } else if ts != t.checked_ts
                && rd::<usize>(ts + l.ts_thread_id) != libc::pthread_self() as usize
            {
                std::hint::cold_path();
                LAYOUT_MISMATCH.store(true, Ordering::Relaxed);
                false
            } else {
                t.checked_ts = ts;
                match cache::first_frame(&l, ts) {
                    0 => false,
                    f => match t.stacks.predicted() {
                        Some(e) if cache::verify(rt, &l, f, e, depth) => {
                            t.stacks.hit_predicted(e, s)
                        }
                        _ => {
                            std::hint::cold_path();
                            Self::miss::<V>(rt, t, f, depth, s)
                        }
                    },
                }
            }
        };
        if backward | t.worker {
            Self::backward_context(s, backward, t.worker);
        }
        Some(())
    }

    /// The backward context of a capture `s` (see the module doc): an autograd worker's
    /// capture without a backward entry point of its own borrows the latest; another thread's
    /// capture with one publishes it.
    #[inline(never)]
    fn backward_context(s: &mut PythonStack, backward: bool, worker: bool) {
        if worker {
            if !backward {
                s.borrowed = BACKWARD_GEN.load(Ordering::Acquire);
            }
        } else if backward {
            publish_backward(s);
        }
    }

    /// A capture without the thread's cache (the thread is exiting, or a capture on it is
    /// under way): no frames, but an autograd worker still borrows the backward context.
    #[cold]
    #[inline(never)]
    fn without_cache(s: &mut PythonStack) {
        *s = PythonStack::EMPTY;
        Self::backward_context(s, false, is_autograd_worker());
    }

    /// A stack not predicted: its hash picks the cache's candidates; if none is it, the full
    /// walk, whose result the cache then keeps.
    ///
    /// Safety: `f` is the innermost frame of the calling thread's own thread state.
    #[inline(never)]
    unsafe fn miss<const V: u8>(
        rt: &Runtime,
        t: &mut ThreadState,
        f: usize,
        depth: u8,
        out: &mut PythonStack,
    ) -> bool {
        #[cfg(test)]
        UNPREDICTED.with(|c| c.set(c.get() + 1));
        let l = cache::lay::<V>(rt);
        // SAFETY: this function's contract.
        unsafe {
            let (h, n, end) = cache::scan(rt, &l, f, depth as usize, |_, _| {});
            if end != End::Other {
                if n == 0 {
                    // No frame to intern (depth 0 leaves only the truncation mark).
                    out.truncated = end == End::Truncated;
                    return false;
                }
                if let Some(backward) = cache::find(&mut t.stacks, rt, &l, f, h, depth, out) {
                    return backward;
                }
            }
            let (s, backward) = Self::full(rt, t, f, depth as usize);
            // Kept only if exactly what a later capture must give: no frame left unknown (the
            // intern table's lock may be free next time), the stack interned.
            let exact = end != End::Other
                && s.len() == n
                && s.truncated == (end == End::Truncated)
                && s.stack != NO_STACK
                && s.frames().iter().all(|f| f.entry != UNKNOWN);
            if exact {
                cache::insert(&mut t.stacks, rt, &l, f, h, &s, backward);
            }
            *out = s;
            backward
        }
    }

    /// The full walk from the innermost frame `f`: each frame's code object through the
    /// thread's recent code objects or the intern table, the stack through `stacks::intern`.
    ///
    /// Safety: as [`Self::miss`].
    #[inline(never)]
    unsafe fn full(
        rt: &Runtime,
        t: &mut ThreadState,
        f: usize,
        depth: usize,
    ) -> (PythonStack, bool) {
        #[cfg(test)]
        FULL_WALKS.with(|c| c.set(c.get() + 1));
        let mut s = PythonStack::EMPTY;
        // Written by the walk up to `s.len`, read only that far.
        let mut walked = [const { MaybeUninit::<FrameRef>::uninit() }; MAX_PYTHON_DEPTH];
        // SAFETY: this function's contract.
        let backward = unsafe { rt.walk(f, depth, &mut walked, &mut s, &mut t.code) };
        if s.len > 0 {
            // SAFETY: the walk wrote the first `s.len` frames.
            let frames = unsafe {
                std::slice::from_raw_parts(walked.as_ptr().cast::<FrameRef>(), s.len as usize)
            };
            s.top = frames[0];
            s.stack = match t.last_stack.wrapping_sub(1) {
                last if last != NO_STACK && stack_frames(last) == frames => last,
                _ => intern_stack(frames),
            };
            t.last_stack = s.stack.wrapping_add(1);
        }
        (s, backward)
    }

    /// Frames captured (own frames, not the borrowed ones).
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// The interned stack that names these frames as a launch site (`stack::sites`): `None`
    /// without own frames, or when the stack table was full (only the innermost frame kept).
    #[inline]
    pub(crate) fn site(&self) -> Option<u32> {
        (self.len > 0 && self.stack != NO_STACK).then_some(self.stack)
    }

    /// The frames kept, innermost first: all [`len`](Self::len) of them, or only the innermost
    /// when the stack table was full ([`lost_frames`](Self::lost_frames)).
    pub(super) fn frames(&self) -> &[FrameRef] {
        match (self.len, self.stack) {
            (0, _) => &[],
            (_, NO_STACK) => std::slice::from_ref(&self.top),
            (_, slot) => stack_frames(slot),
        }
    }

    /// Frames captured but not kept (the stack table was full).
    pub(super) fn lost_frames(&self) -> usize {
        self.len() - self.frames().len()
    }

    /// No frame captured, own or borrowed (tests).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0 && self.borrowed == 0
    }
}

/// [`Chain`] as a const parameter of [`Runtime::walk_chain`]: the walk's loop is compiled once
/// per chain, with no per-frame test of the layout.
const FRAME310: u8 = 0;
const CFRAME: u8 = 1;
const DIRECT: u8 = 2;

impl Runtime {
    /// Walks this thread's frame chain from its innermost frame `f` into `walked`, innermost
    /// first, counting them in `s.len`; true if a frame is one of torch's backward entry points.
    ///
    /// Safety: `f` is the innermost frame of the calling thread's own thread state. Its frames
    /// cannot change while this thread is in the hook, and each frame keeps its code object
    /// alive.
    #[inline(always)]
    unsafe fn walk(
        &self,
        f: usize,
        depth: usize,
        walked: &mut [MaybeUninit<FrameRef>; MAX_PYTHON_DEPTH],
        s: &mut PythonStack,
        recent: &mut RecentCode,
    ) -> bool {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            match self.layout.chain {
                Chain::Frame310 => self.walk_chain::<FRAME310>(f, depth, walked, s, recent),
                Chain::CFrame => self.walk_chain::<CFRAME>(f, depth, walked, s, recent),
                Chain::Direct => self.walk_chain::<DIRECT>(f, depth, walked, s, recent),
            }
        }
    }

    /// [`walk`](Self::walk) from the innermost frame `f`, for the chain `CHAIN` (this runtime's
    /// layout's [`Chain`], as [`FRAME310`], [`CFRAME`] or [`DIRECT`]). Same safety contract.
    #[inline(always)]
    unsafe fn walk_chain<const CHAIN: u8>(
        &self,
        mut f: usize,
        depth: usize,
        walked: &mut [MaybeUninit<FrameRef>; MAX_PYTHON_DEPTH],
        s: &mut PythonStack,
        recent: &mut RecentCode,
    ) -> bool {
        // SAFETY: as `walk`.
        unsafe {
            let l = &self.layout;
            // Frame310 has no owner field (`fr_owner` None): no frame is skipped for it.
            let owner = l.fr_owner.filter(|_| CHAIN != FRAME310);
            let (fr_previous, fr_code, fr_instr) = (l.fr_previous, l.fr_code, l.fr_instr);
            let (ob_type, co_code, code_type) = (l.ob_type, l.co_code, self.code_type);
            let mut backward = false;
            let mut n = 0usize;
            let mut steps = 0;
            while f != 0 && steps < MAX_WALK {
                steps += 1;
                let next = rd::<usize>(f + fr_previous);
                if let Some(owner) = owner {
                    if rd::<u8>(f + owner) == FRAME_OWNED_BY_CSTACK {
                        f = next; // an entry frame of the interpreter, not Python code
                        continue;
                    }
                }
                let code = rd::<usize>(f + fr_code);
                if code == 0 || rd::<usize>(code + ob_type) != code_type {
                    if CHAIN == DIRECT {
                        f = next; // 3.13: f_executable may be None or another callable's object
                        continue;
                    }
                    LAYOUT_MISMATCH.store(true, Ordering::Relaxed);
                    break;
                }
                if n >= depth {
                    s.truncated = true;
                    break;
                }
                let offset = if CHAIN == FRAME310 {
                    match rd::<i32>(f + fr_instr) {
                        lasti if lasti < 0 => -1,
                        lasti => lasti.saturating_mul(2), // code units -> bytes
                    }
                } else {
                    let ip = rd::<usize>(f + fr_instr);
                    let start = code + co_code;
                    if ip < start {
                        -1
                    } else {
                        (ip - start).min(i32::MAX as usize) as i32
                    }
                };
                let fp = self.fingerprint(code);
                let slot = &mut recent[recent_slot(code)];
                let (entry, flags) = if slot.code == code && slot.fingerprint.same(&fp) {
                    (slot.entry, slot.flags)
                } else {
                    match self.intern(code, fp) {
                        Some(e) => {
                            *slot = RecentSlot {
                                code,
                                fingerprint: fp,
                                entry: e.index,
                                flags: e.flags,
                            };
                            (e.index, e.flags)
                        }
                        None => (UNKNOWN, 0),
                    }
                };
                backward |= flags & FLAG_BACKWARD_ENTRY != 0;
                let Some(w) = walked.get_mut(n) else { break };
                *w = MaybeUninit::new(FrameRef { entry, offset });
                n += 1;
                f = next;
            }
            s.len = n as u8;
            backward
        }
    }
}
