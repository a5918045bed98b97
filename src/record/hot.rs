//! The hot path: `enqueue`, run for every recorded op (a launch, an async copy or memset, a graph launch).

use super::*;
use crate::config::{self, StackMode};
use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use crate::real;
use crate::stack::{EntryRegs, StackRef};
use std::sync::atomic::Ordering;

/// Runs an enqueueing call: records it and enqueues its progress marker when the real call
/// succeeds. Returns the real result; when it failed, whether `refused` now holds the op that
/// was not enqueued (a launch error names that launch as the culprit; written only then, so a
/// successful launch copies no record out). `driver`: the driver the call goes to; `entered`:
/// the hook's entry ([`cost::start`]; 0 when not measuring), from which the op's cost is timed
/// when `TIMED` (`CUDABLAME_STATS`; the common path has no timing code at all).
///
/// One instance for every entry point (`real_call` is called through a reference, once): the
/// launch path's code is the same cache lines whichever entry point an op comes in by, where a
/// generic one had a 2.7 KiB copy per entry point. Everything rare is out of line (a refused
/// launch, another context made current, a capture, a graph launch, the first sight of a
/// kernel or launch site): its cost in a host-bound step is the distinct cache lines it runs.
#[link_section = "cudablame_hot_text"] // every launch runs it: see lib.rs
#[inline(never)]
pub(crate) fn enqueue<const TIMED: bool>(
    driver: &'static real::Driver,
    ep: EntryPoint,
    launch: &Launch,
    entry: &EntryRegs,
    entered: u64,
    real_call: &dyn Fn() -> CUresult,
    refused: &mut std::mem::MaybeUninit<OpRecord>,
) -> (CUresult, bool) {
    let mut time = cost::Timeline::<TIMED>::from(entered);
    // Built in place by `prepare`, then pushed by reference: the op's 144 bytes are written once
    // here and once into the ring.
    let mut op = std::mem::MaybeUninit::<OpRecord>::uninit();
    let prepared =
        crate::safety::contained(|| prepare(driver, ep, launch, false, &mut time, &mut op));
    let Some((mut state, unchecked)) = prepared else {
        return (real_call(), false);
    };
    // SAFETY: `prepare` returned, so it wrote the op.
    let op = unsafe { op.assume_init_mut() };
    let mut ring = state.ops.lock();
    time.lap_before_real(cost::Phase::Lock);
    let rc = real_call();
    time.lap_real();
    // When the call returned: the marker budget counts host time between calls only (`policy`).
    let returned = now_ns();
    if rc != CUDA_SUCCESS {
        drop(ring);
        refused.write(failed_launch(driver, *op, unchecked, entry));
        return (rc, true);
    }
    if unchecked {
        // The default stream's context, checked now the launch read it (`lookup_unchecked`).
        let context = driver.current_context();
        if context != state.context {
            // Another context was made current since this thread's last op: the op belongs to
            // that context's default stream (`moved_context`).
            drop(ring);
            let Some(moved) = moved_context(driver, op, context) else {
                return (rc, false);
            };
            state = moved;
            ring = state.ops.lock();
        }
        time.lap(cost::Phase::Lookup);
    }
    let cfg = config::get();
    let mut copied = 0;
    let mut marked = false;
    crate::safety::contained(|| {
        if op.launch.kind == OpKind::Graph {
            graph_at_launch(op);
        }
        if CAPTURES_ACTIVE.load(Ordering::Relaxed) > 0 && driver.is_capturing(state.id.handle()) {
            // The op went into a graph being captured: it did not run now.
            captured(*op, entry);
            return;
        }
        let (copy, site_bytes) = stack_copy(cfg, entry, op);
        copied = copy.map_or(site_bytes, |c| c.1);
        op.seq = ring.push(op, cfg.ring, copy, &|| state.completed_now());
        state.issued.store(op.seq, Ordering::Release);
        time.lap(cost::Phase::Record);
        marked = mark_if_due(driver, cfg, &state, &mut ring, op, returned, false);
        time.lap(cost::Phase::Marker);
    });
    drop(ring);
    drop(state);
    time.finish(copied, op.python.len(), marked);
    (rc, false)
}

/// What the executable graph of a graph launch runs as of this launch: a later edit, destroy or
/// reuse of its address does not change it (one lock, one hash lookup). Out of line: most ops
/// are kernels.
#[inline(never)]
fn graph_at_launch(op: &mut OpRecord) {
    op.graph = graphs::at_launch(op.launch.handle);
}

/// The record of a launch the driver refused (`rc` not success), for its report: the context it
/// failed in (where it was still to be checked: `unchecked`) and its live stack from `entry`.
/// Cold and out of line: the successful launch's code stays dense (its cache lines are most of
/// the hook's cost, issue 21).
#[cold]
#[inline(never)]
fn failed_launch(
    driver: &'static real::Driver,
    mut op: OpRecord,
    unchecked: bool,
    entry: &EntryRegs,
) -> OpRecord {
    if unchecked {
        let context = driver.current_context();
        if context != op.context {
            op.context = context;
            op.device = driver.context_device(context);
        }
    }
    op.stack = crate::safety::guarded(|| keep_live_stack(op.time_ns, entry)).unwrap_or_default();
    op
}

/// The stream state of `op`'s default stream in `context`, the thread's current context after
/// the launch where it was not the one of the thread's last op; `op` moves there. Recorded there
/// after its call (like a blocking copy): an op another thread enqueued there meanwhile may get
/// the lower sequence number, so markers still only prove ops that preceded them. Cold.
#[cold]
#[inline(never)]
fn moved_context(
    driver: &'static real::Driver,
    op: &mut OpRecord,
    context: usize,
) -> Option<streams::StreamRef> {
    let moved = crate::safety::guarded(|| streams::lookup_in(driver, op.stream, context))?;
    op.context = moved.context;
    op.device = moved.device;
    Some(moved)
}

/// `op` went into a graph being captured (it did not run now): kept with its live stack for
/// the graph's launches. Out of line: rare in a launch's path.
#[inline(never)]
fn captured(mut op: OpRecord, entry: &EntryRegs) {
    op.stack = keep_live_stack(op.time_ns, entry);
    graphs::captured(op);
}

/// Enqueues the progress marker of `op`, the newest op of `ring`, if the marker policy wants one
/// (`record::policy`; caller holds the ring lock, right after the op; `returned_ns`: when the
/// op's call returned; `blocking_copy`: `op` is a blocking copy that proves nothing); returns
/// whether the driver took it.
///
/// Inline, the common answer only: under the default budget most ops are not due
/// ([`policy::Marks::surely_not_due`]: a few compares and the note of the unmarked op); the
/// policy's full decision and the marker's write are out of line ([`mark_if_due_now`]).
#[inline(always)]
pub(super) fn mark_if_due(
    driver: &'static real::Driver,
    cfg: &config::Config,
    state: &StreamState,
    ring: &mut ring::Ring,
    op: &OpRecord,
    returned_ns: u64,
    blocking_copy: bool,
) -> bool {
    let budget = policy::Budget::new(cfg.marker_gap_us, cfg.marker_window, cfg.marker_gap_stretch);
    if !blocking_copy
        && ring
            .marks
            .surely_not_due(cfg.markers, &budget, op.time_ns, returned_ns)
    {
        return false;
    }
    mark_if_due_now(
        driver,
        (cfg.markers, &budget),
        state,
        ring,
        op,
        returned_ns,
        blocking_copy,
    )
}

/// [`mark_if_due`] past its common answer: the policy's decision under `(mode, budget)`, the
/// marker's write.
#[inline(never)]
fn mark_if_due_now(
    driver: &'static real::Driver,
    (mode, budget): (config::MarkerMode, &policy::Budget),
    state: &StreamState,
    ring: &mut ring::Ring,
    op: &OpRecord,
    returned_ns: u64,
    blocking_copy: bool,
) -> bool {
    let due = policy::should_mark(
        mode,
        budget,
        &ring.marks,
        op.time_ns,
        op.seq,
        blocking_copy,
        || state.marker_value(),
    );
    let budgeted = mode == config::MarkerMode::Budget;
    // When the op's call is over for the budget: after its marker's write, whose host time is
    // cudablame's, not the program's (found by a break-it helper: with writes longer than the
    // gap every op was due).
    let mut returned_ns = returned_ns;
    let marked = match due {
        Some(why) => {
            // The write's host time stretches the stream's gap on a host where driver calls
            // are slow (`policy::Marks::note_marker_cost`): two clock readings a budget
            // marker (one where nothing stretches: a configured gap), none under `every`.
            let timed = budgeted && budget.max_gap_ns > budget.gap_ns && why != policy::Why::First;
            let began = if timed { now_ns() } else { 0 };
            let taken = cost::marker_write(|| state.write_marker(driver, op.seq));
            if taken {
                if budgeted {
                    let after = now_ns();
                    if timed {
                        ring.marks
                            .note_marker_cost(after.saturating_sub(began), budget);
                    }
                    returned_ns = returned_ns.max(after);
                    cost::marker_gap(ring.marks.gap_ns(budget));
                }
                ring.mark_newest();
                cost::marked_because(why);
            }
            taken
        }
        None => false,
    };
    ring.marks.note(op.seq, op.time_ns, returned_ns, marked);
    marked
}

/// What a recorded op's stack copy is taken from under the configured `CUDABLAME_STACK` mode:
/// the entry point's registers and the bytes to copy, `CUDABLAME_STACK_BYTES` (by default 8192,
/// 3072 in a CPython process whose Python frames are captured: `config::Config::python_stack_bytes`); none when off,
/// and none when `op` comes from a launch site whose copy it shares (`native`: `stack::sites`,
/// keyed by its Python stack if any and its thread's stack depth, checked by its return
/// addresses), which then sets `op.stack`; with the bytes copied for that site now (its first
/// launch; else 0).
#[link_section = "cudablame_hot_text"] // every launch runs it: see lib.rs
pub(super) fn stack_copy<'a>(
    cfg: &config::Config,
    entry: &'a EntryRegs,
    op: &mut OpRecord,
) -> (Option<(&'a EntryRegs, usize)>, usize) {
    if cfg.stack == StackMode::Off {
        return (None, 0);
    }
    // Asked only when a stack is copied: a site's first launch, or a launch without a site.
    let bytes = || {
        if crate::stack::python::frames_captured(cfg) {
            cfg.python_stack_bytes
        } else {
            cfg.stack_bytes
        }
    };
    if cfg.stack == StackMode::Native {
        let bounds = crate::stack::unwind::stack_bounds();
        let hi = bounds.1;
        let key = crate::stack::sites::SiteKey {
            python: op.python.site().unwrap_or(crate::stack::sites::NO_PYTHON),
            depth: hi.saturating_sub(entry.rsp) as u32,
            loads: crate::stack::unwind::load_generation() as u32,
            entry_point: op.entry_point as u16,
            kind: op.launch.kind as u8,
            handle: op.launch.handle,
        };
        if let Some(found) = crate::stack::sites::site_of(key, entry, &bytes, bounds) {
            op.stack = StackRef::Site {
                site: found.site,
                first: found.copied > 0,
            };
            return (None, found.copied);
        }
    }
    (Some((entry, bytes())), 0)
}

/// Writes the op's record into `op` before its real call (its Python frames, thread and
/// stream), timed by `time`; returns its stream's state and whether the stream's context is
/// still to be checked (`check_context` false: see [`streams::lookup_unchecked`]; true: asked
/// now where it is a default stream's).
#[inline(always)]
pub(super) fn prepare<const TIMED: bool>(
    driver: &'static real::Driver,
    ep: EntryPoint,
    launch: &Launch,
    check_context: bool,
    time: &mut cost::Timeline<TIMED>,
    op: &mut std::mem::MaybeUninit<OpRecord>,
) -> (streams::StreamRef, bool) {
    crate::config::test_panic(crate::config::PanicPoint::Record);
    let time_ns = now_ns();
    time.lap(cost::Phase::Rest);
    let python = crate::stack::python::PythonStack::capture_configured();
    time.lap(cost::Phase::Python);
    let thread = crate::threads::thread_id();
    if launch.kind == OpKind::Kernel {
        // Before the real call: the driver may not name a kernel after a sticky error, and a
        // kernel's first launch can be the one that faults (test
        // `a_kernel_whose_first_launch_faults_at_once_keeps_its_name`).
        names::note(driver, launch.handle);
    }
    let id = StreamId::resolve(launch.stream, ep.per_thread_default(), thread);
    let (state, unchecked) = if check_context {
        (streams::lookup(driver, id), false)
    } else {
        streams::lookup_unchecked(driver, id)
    };
    time.lap(cost::Phase::Lookup);
    op.write(OpRecord {
        seq: 0,
        launch: *launch,
        entry_point: ep,
        stream: id,
        context: state.context,
        device: state.device,
        thread,
        time_ns,
        synchronous: false,
        marked: false,
        stack: StackRef::None,
        python,
        graph: graphs::AtLaunch::UNKNOWN,
    });
    (state, unchecked)
}
