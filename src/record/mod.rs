//! Recording: what each hooked call means ([`Call`]), the op records kept per stream, and the
//! progress markers that prove which ops completed.
//!
//! Hot path per recorded op (a launch, an async copy or memset, a graph launch; one load of
//! `safety::gate` first sends every call that is not the common case, recording and set up, the
//! general way): the Python frames
//! (CPython only), look the stream up (thread-local cache), lock that stream, make the real call,
//! push the op with the next sequence number and a copy of the top of the launching thread's
//! stack (unwound only if a report needs it: `stack::copy`), enqueue
//! `cuStreamWriteValue64(marker slot, seq)` behind it when the marker policy says so
//! (`policy`: by default about one op per 500 µs of host time, at most 32 ops apart), unlock. The lock spans the real call so
//! that sequence numbers follow the order in which ops enter the stream even when several threads
//! launch onto one stream. Nothing on this path allocates once the stream's ring is full, except
//! at the first sight of a Python code object or of a distinct Python stack (`stack::python`,
//! each interned once and bounded).
//!
//! What it costs is mostly the distinct cache lines it runs and touches: between two launches a
//! framework's own work evicts them (a host-bound PyTorch step, issue 21). So everything rare
//! (a refused launch, another context current, a capture, a graph launch, a site's or kernel's
//! first sight, a marker's write) is out of line, the common path has no timing code
//! (`cost::Timeline<false>`; `CUDABLAME_STATS` takes the same path timed), and the marker
//! decision's common answer is a few compares (`policy::Marks::surely_not_due`). Counted with
//! `scripts/callgrind-lines.py` on the simulated driver (`py_bench.py 6 20000 inline c`,
//! CPython 3.12), the library's code per launch went from 155 distinct 64-byte lines and 1,961
//! instructions to 96 lines and 1,202 instructions in the sixteenth session, the Python walk's
//! share the most of it (`stack::python::cache`; docs/history.md, Performance, sixteenth session).

pub(crate) mod cost;
pub(crate) mod graphs;
pub(crate) mod markers;
pub(crate) mod names;
pub(crate) mod policy;
pub(crate) mod ring;
pub(crate) mod snapshot;
pub(crate) mod streams;

mod call;
mod hot;
mod sync;

use crate::config::{self, StackMode};
use crate::cuda::entry_points::EntryPoint;
use crate::stack::{EntryRegs, NativeStack, StackRef};
pub(crate) use snapshot::StreamView;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
pub(crate) use streams::{StreamId, StreamState};

pub(crate) use call::*;
pub(crate) use cudablame_report::model::OpKind;
pub(crate) use hot::enqueue;
pub(crate) use sync::{after, before};

/// One recorded op: plain data, copied into the stream's ring. Sizes in bytes, times in ns since
/// the Unix epoch (`CLOCK_REALTIME`, comparable across processes of one host).
#[derive(Clone, Copy)]
pub(crate) struct OpRecord {
    /// Position in its stream, from 1; the progress marker of the stream holds the last completed one.
    pub(crate) seq: u64,
    pub(crate) launch: Launch,
    pub(crate) entry_point: EntryPoint,
    pub(crate) stream: StreamId,
    pub(crate) context: usize,
    pub(crate) device: i32,
    /// OS thread id (`gettid`) of the launching thread.
    pub(crate) thread: u32,
    pub(crate) time_ns: u64,
    /// A synchronous copy or memset: complete when recorded, never a culprit candidate.
    pub(crate) synchronous: bool,
    /// Its progress marker was enqueued right behind it. If op N lacks one, a fault in N+1 leaves
    /// the marker at N-1, so "first unfinished" only narrows the culprit to N..=N+1. Under the
    /// default marker budget (`policy`) most ops are unmarked: a fault is narrowed to the window
    /// from the first unfinished op to the first marked op after it (at most 32 ops).
    pub(crate) marked: bool,
    /// The native launch stack (a copy in the ring until a snapshot unwinds it).
    pub(crate) stack: StackRef,
    /// Python frames of the launching thread (CPython only; `stack::python`).
    pub(crate) python: crate::stack::python::PythonStack,
    /// A graph launch: what its executable graph ran when it was launched (`graphs::AtLaunch`,
    /// unknown for other ops).
    pub(crate) graph: graphs::AtLaunch,
}

#[cfg(test)]
impl OpRecord {
    /// A test op (for `blame`'s tests): `seq` of `kind` on the legacy stream of context 1,
    /// device 0, thread 7, launched at `time_ns` (ns) by `cuLaunchKernel` with grid (1,1,1) and
    /// block (32,1,1), its progress marker enqueued, no stack; the handle is `seq`, so every op
    /// is its own kernel.
    pub(crate) fn for_test(seq: u64, kind: OpKind, time_ns: u64) -> Self {
        OpRecord {
            seq,
            launch: Launch {
                kind,
                handle: seq as usize,
                grid: [1, 1, 1],
                block: [32, 1, 1],
                shared_mem_bytes: 0,
                bytes: 0,
                stream: 0,
            },
            entry_point: EntryPoint::cuLaunchKernel,
            stream: StreamId::Legacy,
            context: 1,
            device: 0,
            thread: 7,
            time_ns,
            synchronous: false,
            marked: true,
            stack: StackRef::None,
            python: crate::stack::python::PythonStack::EMPTY,
            graph: graphs::AtLaunch::UNKNOWN,
        }
    }
}

/// Streams with an active capture (begun and not yet ended), process-wide. While it is 0 no
/// stream can be capturing and the per-launch `cuStreamIsCapturing` check is skipped.
#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static CAPTURES_ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Set for good once a benchmark paused cudablame (`cudablame_pause`): what the program enqueued
/// while paused is in no ring, on any stream, so no later verdict can be `exact`
/// (`blame::cap_for_unseen_work`).
static EVER_PAUSED: AtomicBool = AtomicBool::new(false);

/// Notes that cudablame was paused (`interpose::pause`).
pub(crate) fn note_paused() {
    EVER_PAUSED.store(true, Ordering::Relaxed);
}

/// Whether cudablame was ever paused in this process.
pub(crate) fn ever_paused() -> bool {
    EVER_PAUSED.load(Ordering::Relaxed)
}

/// Forgets every stream, marker slot, kernel name and capture of the parent (the
/// `pthread_atfork` child handler, see `safety`): the child never uses its parent's contexts.
pub(crate) fn forget_after_fork() {
    streams::clear();
    names::clear();
    graphs::clear();
    ring::forget_after_fork();
    crate::clock::after_fork();
    CAPTURES_ACTIVE.store(0, Ordering::Relaxed);
}

/// Wall-clock time in ns (`CLOCK_REALTIME`, read through the TSC: [`crate::clock`]).
#[inline]
pub(crate) fn now_ns() -> u64 {
    crate::clock::now_ns()
}

/// into the hooked entry point (`entry`) outwards, unwound now and kept, under the configured
/// `CUDABLAME_STACK` mode.
fn keep_live_stack(now_ns: u64, entry: &EntryRegs) -> StackRef {
    crate::stack::keep(live_stack(now_ns, entry))
}

/// The live native stack under the configured `CUDABLAME_STACK` mode (empty when off).
fn live_stack(now_ns: u64, entry: &EntryRegs) -> NativeStack {
    let cfg = config::get();
    match cfg.stack {
        StackMode::Native | StackMode::Every => {
            NativeStack::capture(cfg.stack_depth, now_ns, Some(entry))
        }
        StackMode::Off => NativeStack::EMPTY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every recorded op is built, moved through the panic guard and into its stream's ring
    /// (256 ops, up to 4,096 more held): its size is hot-path cost. It was 648 bytes while the
    /// Python frames were inline (`[FrameRef; 64]`); they are interned now (`stack::python`).
    #[test]
    fn an_op_record_stays_small() {
        let size = std::mem::size_of::<OpRecord>();
        assert!(size <= 160, "OpRecord is {size} bytes");
        assert!(std::mem::size_of::<crate::stack::python::PythonStack>() <= 24);
    }
}
