//! Capture (hot path, per launch): the walk of the calling thread's own frame chain.

use super::backward::*;
use super::intern::*;
use super::layout::*;
use super::runtime::*;
use crate::config::MAX_PYTHON_DEPTH;
use std::cell::Cell;
use std::sync::atomic::Ordering;

/// One captured frame: the interned code object and the instruction's byte offset in it
/// (-1: the frame has not started).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct FrameRef {
    pub(super) entry: u32,
    pub(super) offset: i32,
}

/// Python frames of one thread, innermost first, plus the backward context it borrows. Plain
/// data (`Copy`), no allocation.
#[derive(Clone, Copy)]
pub(crate) struct PythonStack {
    pub(super) len: u8,
    /// More frames than the configured depth.
    pub(super) truncated: bool,
    /// Generation of the backward context whose frames follow these (0: none).
    pub(super) borrowed: u64,
    pub(super) frames: [FrameRef; MAX_PYTHON_DEPTH],
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
        borrowed: 0,
        frames: [FrameRef {
            entry: 0,
            offset: 0,
        }; MAX_PYTHON_DEPTH],
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
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// No frame captured, own or borrowed (tests).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0 && self.borrowed == 0
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
