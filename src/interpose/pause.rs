//! `cudablame_pause`: a switch that lets a benchmark compare recording with pass-through inside
//! one process.
//!
//! `int cudablame_pause(int paused)`: nonzero pauses cudablame, 0 resumes it; returns the
//! previous state (1 paused, 0 recording). Found with `dlsym(RTLD_DEFAULT, "cudablame_pause")`
//! (Python: `getattr(ctypes.CDLL(None), "cudablame_pause", None)`); absent without the shim.
//!
//! While paused, every hooked driver call goes straight to the driver before any of cudablame's
//! work ([`super::hook`]; a capture's begin and end still keep the capture count, so that a launch
//! into a capture begun while paused gets no marker after resuming, and graph edits and the end
//! of a stream or context are still tracked: `record::Call::kept_while_paused`): nothing is recorded, no progress marker is written, and an error code
//! that comes back then gets no report (except from those tracked calls). Resuming starts recording again with the next call; an op
//! enqueued while paused is unknown to blame (it is in no ring), so once paused, no verdict of the
//! process is `exact` any more: the culprit may be work enqueued then
//! (`blame::cap_for_unseen_work`). The resolvers and `dlsym` keep answering with cudablame's
//! wrappers, so resuming reaches every call again.
//!
//! Who it is for: benchmarks only (`cuda-samples/bench/train_step.py --paired`, the launch loop's
//! `BENCH_PAUSED=1`; `scripts/bench.sh`), to measure what recording costs against the same
//! process's own speed, which on a shared machine drifts far more between processes than
//! cudablame's cost. Nothing in the library calls it; a program starts recording. Its cost when
//! not paused is one relaxed load per hooked call.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static PAUSED: AtomicBool = AtomicBool::new(false);

/// Whether a benchmark paused cudablame (one relaxed load: on every hooked call).
#[inline]
pub(crate) fn paused() -> bool {
    PAUSED.load(Ordering::Relaxed)
}

/// Pauses (`paused` nonzero) or resumes (0) recording; returns the previous state, 1 paused or
/// 0 recording. Callable by anyone, from any thread, at any time.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn cudablame_pause(paused: c_int) -> c_int {
    if paused != 0 {
        crate::record::note_paused();
    }
    let was = PAUSED.swap(paused != 0, Ordering::Relaxed);
    crate::safety::set_gate(crate::safety::Gate::PAUSED, paused != 0);
    c_int::from(was)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_switch_returns_the_previous_state() {
        assert!(!super::paused());
        assert_eq!(super::cudablame_pause(1), 0);
        assert!(super::paused());
        assert_eq!(super::cudablame_pause(7), 1);
        assert_eq!(super::cudablame_pause(0), 1);
        assert_eq!(super::cudablame_pause(0), 0);
        assert!(!super::paused());
    }
}
