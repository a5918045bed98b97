//! Capture (hot path, per launch): the walk of the calling thread's own frame chain.

use super::backward::*;
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
    /// 0 unknown, 1 an autograd worker (`pt_autograd_N`), 2 another thread.
    static AUTOGRAD_WORKER: Cell<u8> = const { Cell::new(0) };
}

/// Whether the calling thread is one of PyTorch's autograd workers, by its name (set by
/// `Engine::thread_init` before it runs anything). Read once per thread.
pub(super) fn is_autograd_worker() -> bool {
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
        match runtime() {
            Some(rt) => Self::capture_from(rt, depth),
            None => PythonStack::EMPTY,
        }
    }

    /// [`capture`](Self::capture)'s walk, out of line: its frame buffer (512 bytes) is on the
    /// launching thread's stack only in a CPython process, not in every launch's frame (a launch
    /// from a 16 KiB thread of a C program must fit: `robust.rs`, small stacks).
    #[inline(never)]
    fn capture_from(rt: &'static super::runtime::Runtime, depth: usize) -> PythonStack {
        let mut s = PythonStack::EMPTY;
        // Written by the walk up to `s.len`, read only that far.
        let mut walked = [const { MaybeUninit::<FrameRef>::uninit() }; MAX_PYTHON_DEPTH];
        let backward = RECENT_CODE
            .with(|recent| {
                let mut recent = recent.borrow_mut();
                // SAFETY: PyGILState_GetThisThreadState reads this thread's TSS slot; the frames
                // walked are this thread's own (see `walk`).
                let backward = unsafe {
                    let ts = (rt.this_thread_state)() as usize;
                    ts != 0
                        && rt.is_finalizing.is_none_or(|f| f() == 0)
                        && rt.walk(
                            ts,
                            depth.min(MAX_PYTHON_DEPTH),
                            &mut walked,
                            &mut s,
                            &mut recent.code,
                        )
                };
                if s.len > 0 {
                    // SAFETY: the walk wrote the first `s.len` frames.
                    let frames = unsafe {
                        std::slice::from_raw_parts(
                            walked.as_ptr().cast::<FrameRef>(),
                            s.len as usize,
                        )
                    };
                    s.top = frames[0];
                    s.stack = match recent.last_stack.wrapping_sub(1) {
                        last if last != NO_STACK && stack_frames(last) == frames => last,
                        _ => intern_stack(frames),
                    };
                    recent.last_stack = s.stack.wrapping_add(1);
                }
                backward
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
    /// Walks this thread's frame chain from its thread state `ts` into `walked`, innermost
    /// first, counting them in `s.len`; true if a frame is one of torch's backward entry points.
    ///
    /// Safety: `ts` is the calling thread's own thread state. Its frames cannot change while this
    /// thread is in the hook, and each frame keeps its code object alive.
    #[inline(always)]
    unsafe fn walk(
        &self,
        ts: usize,
        depth: usize,
        walked: &mut [MaybeUninit<FrameRef>; MAX_PYTHON_DEPTH],
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
            match l.chain {
                Chain::Frame310 => {
                    let f = rd::<usize>(ts + l.ts_frame);
                    self.walk_chain::<FRAME310>(f, depth, walked, s, recent)
                }
                Chain::CFrame => match rd::<usize>(ts + l.ts_frame) {
                    0 => false,
                    cframe => {
                        let f = rd::<usize>(cframe + l.cframe_current);
                        self.walk_chain::<CFRAME>(f, depth, walked, s, recent)
                    }
                },
                Chain::Direct => {
                    let f = rd::<usize>(ts + l.ts_frame);
                    self.walk_chain::<DIRECT>(f, depth, walked, s, recent)
                }
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
