//! The backward context: the latest stack of a thread starting a backward pass, borrowed by autograd workers.

use super::capture::*;
use super::intern::*;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) struct BackwardContext {
    pub(super) gen: u64,
    pub(super) thread: u32,
    pub(super) stack: PythonStack,
}

/// Generation of the latest backward context (0: none yet).
pub(super) static BACKWARD_GEN: AtomicU64 = AtomicU64::new(0);
/// The latest contexts, oldest first: a worker's record names one by generation.
pub(super) static BACKWARD: crate::safety::lock::Mutex<VecDeque<BackwardContext>> =
    crate::safety::lock::Mutex::new(VecDeque::new());
pub(super) const BACKWARD_KEPT: usize = 64;

/// Cold-ish: a launch on a thread inside `backward()` (a few per backward call).
#[inline(never)]
pub(super) fn publish_backward(s: &PythonStack) {
    let thread = crate::threads::thread_id();
    let Some(mut h) = BACKWARD.try_lock_for(LOCK_WAIT) else {
        return;
    };
    if let Some(last) = h.back() {
        let same = last.thread == thread && last.stack.frames() == s.frames();
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
