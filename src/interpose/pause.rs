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

use crate::safety::{gate, set_gate, Gate};
use std::ffi::c_int;

/// Whether a benchmark paused cudablame: the gate's [`Gate::PAUSED`] bit, the switch's only
/// state. (A flag of its own beside the bit, set by a second atomic operation, disagreed with it
/// after two threads switched at once: 2-5% of a million racing rounds, 0.2% paused with the
/// gate open, so every call recorded while "paused"; found by review.)
#[inline]
pub(crate) fn paused() -> bool {
    gate() & Gate::PAUSED != 0
}

/// Pauses (`paused` nonzero) or resumes (0) recording; returns the previous state, 1 paused or
/// 0 recording. Callable by anyone, from any thread, at any time.
#[cfg_attr(not(test), no_mangle)]
pub extern "C" fn cudablame_pause(paused: c_int) -> c_int {
    if paused != 0 {
        crate::record::note_paused();
    }
    c_int::from(set_gate(Gate::PAUSED, paused != 0) & Gate::PAUSED != 0)
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
