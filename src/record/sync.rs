//! The cold path: `before` and `after` a non-enqueueing call (synchronizations, blocking copies, captures, context teardown).

use super::hot::{prepare, stack_copy};
use super::*;
use crate::config::{self};
use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use crate::real;
use crate::stack::EntryRegs;
use std::sync::atomic::Ordering;

/// Records a blocking copy that succeeded: as a completed op of its stream when its return
/// proves it complete (`complete`; no stack: a completed op is never a culprit), else as an
/// ordinary op with a stack copy, followed by a progress marker. The record comes after the call
/// (the ring lock is not held while the copy blocks), so an op another thread enqueued meanwhile
/// may get the lower sequence number: markers then still only prove ops that preceded them.
fn record_blocking_copy(ep: EntryPoint, launch: Launch, complete: bool, entry: &EntryRegs) {
    let Some(driver) = real::driver() else { return };
    let mut op = std::mem::MaybeUninit::uninit();
    let (state, _) = prepare(
        driver,
        ep,
        &launch,
        true,
        &mut super::cost::Timeline::none(),
        &mut op,
    );
    // SAFETY: `prepare` returned, so it wrote the op.
    let mut op = unsafe { op.assume_init() };
    op.synchronous = complete;
    let cfg = config::get();
    let copy = if complete {
        None
    } else {
        stack_copy(cfg, entry, &mut op).0
    };
    let mut ops = state.ops.lock();
    op.seq = ops.push(&op, cfg.ring, copy, &|| state.completed_now());
    state.issued.store(op.seq, Ordering::Release);
    if !complete {
        // A blocking copy that proves nothing: always due under the budget (`record::policy`).
        // Recorded after the call returned: its time is its return.
        super::hot::mark_if_due(driver, cfg, &state, &mut ops, &op, op.time_ns, true);
    }
}

/// `cuStreamQuery`: a poll, not a wait (programs may call it in a loop).
fn is_query(ep: EntryPoint) -> bool {
    matches!(
        ep,
        EntryPoint::cuStreamQuery | EntryPoint::cuStreamQuery_ptsz
    )
}

/// Before the host waits for stream `s` (`cuStreamSynchronize`, `cuCtxSynchronize`): enqueues a
/// progress marker behind its newest op if that op has none and is not known complete (the
/// marker budget leaves most ops unmarked). The host waits anyway, so this costs it nothing,
/// and the GPU about 2 µs per wait and stream; in exchange a fault during the wait finds every
/// stream that drained before it proven drained. Measured on the H200 (`side_stream_matmul.py`):
/// a side stream's assert after 16 GEMMs had drained the default stream was "one of these 16
/// ops" without it, because none of the GEMMs carried a marker. Nothing is enqueued while any
/// stream may be capturing (a marker would become a graph node) or when markers are off, and
/// only where the stream's handle means that stream on this thread: a created stream (`s` is
/// live: a destroyed handle is never passed back), the legacy stream of the current context,
/// this thread's own per-thread stream (`CU_STREAM_PER_THREAD` names the calling thread's: a
/// marker meant for another thread's landed on this thread's idle stream, was written at once
/// and "proved" the other thread's kernels complete, H200 `threads_ptsz_fault.cu`).
fn mark_tail(driver: &'static real::Driver, s: &StreamState) {
    if CAPTURES_ACTIVE.load(Ordering::Relaxed) > 0 || !config::markers_enabled() {
        return;
    }
    let here = match s.id {
        StreamId::Handle(_) => true,
        StreamId::Legacy => s.context == driver.current_context(),
        StreamId::PerThread(t) => {
            t == crate::threads::thread_id() && s.context == driver.current_context()
        }
    };
    if !here {
        return;
    }
    let issued = s.issued.load(Ordering::Acquire);
    if issued == 0 || s.completed_now() >= issued {
        return;
    }
    let mut ring = s.ops.lock();
    let newest = ring.last_seq;
    if ring.marks.last_seq >= newest || s.completed_now() >= newest {
        return;
    }
    if s.write_marker(driver, newest) {
        ring.mark_newest();
        ring.marks.marker_taken(newest);
        super::cost::marked_because(super::policy::Why::Wait);
    }
}

/// What a call must remember before the real call.
pub(crate) struct SyncMark {
    /// The streams a synchronization waits for, each with how many ops it had issued.
    streams: Vec<(std::sync::Arc<StreamState>, u64)>,
    /// The context a primary-context release or reset may destroy, or the one a context
    /// synchronization waits for (0: none).
    context: usize,
    /// That context's destroyed streams forgotten with possibly unfinished work
    /// ([`streams::dropped_unfinished`]) when the synchronization began.
    dropped_streams: u64,
    /// Its device (-1: not asked), with that device's contexts destroyed with possibly
    /// unfinished work ([`streams::destroyed_unfinished_on`]) when the synchronization began.
    destroyed_contexts: (i32, u64),
}

impl SyncMark {
    /// A mark of `streams` alone.
    fn of_streams(streams: Vec<(std::sync::Arc<StreamState>, u64)>) -> SyncMark {
        SyncMark {
            streams,
            context: 0,
            dropped_streams: 0,
            destroyed_contexts: (-1, 0),
        }
    }
}

/// Before a non-enqueueing call: note the streams a synchronization covers.
///
/// Out of line, like [`after`] and [`Teardown::apply`]: their one caller
/// (`interpose::run`) serves every entry point, and inlined there their locals made its frame
/// 1,376 bytes, on top of which every hooked call (the sticky-error report included) runs.
#[inline(never)]
pub(crate) fn before(ep: EntryPoint, call: &Call) -> Option<SyncMark> {
    crate::config::test_panic(crate::config::PanicPoint::Record);
    let driver = real::driver()?;
    let issued = |s: std::sync::Arc<StreamState>| {
        let n = s.issued.load(Ordering::Acquire);
        (s, n)
    };
    match *call {
        Call::BlockingCopy {
            proves: Proves::CopyAndEarlier,
            ..
        }
        | Call::SyncStream { .. } => {
            let raw = call.stream().unwrap_or(0);
            let id = StreamId::resolve(raw, ep.per_thread_default(), crate::threads::thread_id());
            let s = streams::find(driver, id)?;
            if matches!(call, Call::SyncStream { .. }) && !is_query(ep) {
                mark_tail(driver, &s);
            }
            Some(SyncMark::of_streams(vec![issued(s)]))
        }
        Call::SyncContext { ctx } => {
            let ctx = if ctx != 0 {
                ctx
            } else {
                driver.current_context()
            };
            for s in streams::live().iter().filter(|s| s.context == ctx) {
                mark_tail(driver, s);
            }
            let list: Vec<_> = streams::all()
                .into_iter()
                .filter(|s| s.context == ctx)
                .map(issued)
                .collect();
            // Asked of the driver only while a destroyed context's work is unproven.
            let destroyed = if streams::destroyed_unfinished(None) > 0 {
                let device = list
                    .first()
                    .map_or_else(|| driver.context_device(ctx), |(s, _)| s.device);
                (device, streams::destroyed_unfinished_on(device))
            } else {
                (-1, 0)
            };
            Some(SyncMark {
                streams: list,
                context: ctx,
                dropped_streams: streams::dropped_unfinished(ctx),
                destroyed_contexts: destroyed,
            })
        }
        Call::BeginCapture { .. } => {
            // Raised before the real call: from the moment the stream may be capturing, every
            // launch checks `cuStreamIsCapturing` (lowered again in `after` on failure).
            CAPTURES_ACTIVE.fetch_add(1, Ordering::AcqRel);
            None
        }
        Call::PrimaryContext { dev, .. } => Some(SyncMark {
            context: driver.active_primary_context(dev),
            ..SyncMark::of_streams(Vec::new())
        }),
        Call::DestroyContext { ctx } => {
            // The last chance to prove the context's finished work complete (as for a destroyed
            // stream): a marker behind each unproven tail, which the destroy waits for. Work left
            // unproven counts for the device after the destroy (`streams::forget_context`).
            // Only the current context's streams (a refused marker turns markers off).
            if ctx != 0 && ctx == driver.current_context() {
                for s in streams::live().iter().filter(|s| s.context == ctx) {
                    mark_tail(driver, s);
                }
            }
            None
        }
        Call::DestroyStream { stream } => {
            // The last chance to prove a recorded stream's tail complete: the handle is still
            // valid now (after the call it dangles), and nothing else will be enqueued on it.
            // Without this marker its unmarked last ops stayed unfinished for blame forever,
            // kept on the retired list (or only counted past it), so every later verdict of the
            // context lost `exact`. A stream never recorded is not looked up (no driver call).
            let id =
                StreamId::resolve(stream, ep.per_thread_default(), crate::threads::thread_id());
            // Only in the stream's own context: a refused marker turns markers off for the
            // process (`config::markers_failed`).
            if let Some(s) = streams::find_recorded(id) {
                if s.context == driver.current_context() {
                    mark_tail(driver, &s);
                }
            }
            None
        }
        _ => None,
    }
}

/// A context that a call ended, to be forgotten ([`streams::forget_context`]) once the call's
/// result has been observed: [`after`] finds it, `interpose::hook` applies it after
/// `detect::observe`, so that a report of the error the call returned (`cuCtxDestroy` of a
/// faulted context returns the sticky error, yet destroys the context: driver API,
/// `cuCtxDestroy`, "may also return error codes from previous, asynchronous launches") is built
/// from that context's rings, and only then are they dropped.
#[must_use]
pub(crate) enum Teardown {
    /// Forget this context.
    Context(usize),
    /// Forget every context known on this device (its primary context's handle was not learned).
    Device(i32),
}

impl Teardown {
    /// Forgets what the call ended (said on stderr under `CUDABLAME_DEBUG`). Out of line: see
    /// [`before`].
    #[inline(never)]
    pub(crate) fn apply(self) {
        if config::get().debug {
            crate::safety::say(&match self {
                Teardown::Context(ctx) => format!(
                    "cudablame: context {ctx:#x} ended: its streams and marker slots are forgotten"
                ),
                Teardown::Device(dev) => format!(
                    "cudablame: the primary context of device {dev} ended: the streams and marker \
                     slots of the device's contexts are forgotten"
                ),
            });
        }
        match self {
            Teardown::Context(ctx) => streams::forget_context(ctx),
            Teardown::Device(dev) => streams::forget_device(dev),
        }
    }
}

/// Whether a context-ending call that returned `rc` ended the context: on success, and on a
/// sticky error, which the driver returns from the context's earlier work while still destroying
/// it. Any other failure (`CUDA_ERROR_INVALID_CONTEXT`, an invalid device) destroyed nothing.
fn context_ended(rc: CUresult) -> bool {
    rc == CUDA_SUCCESS || is_sticky(rc)
}

/// After a non-enqueueing call: a successful synchronization proves every op it covered completed;
/// capture begin/end and stream destruction keep the tables right. A context the call ended is
/// returned, not forgotten here ([`Teardown`]). Out of line: see [`before`].
#[inline(never)]
pub(crate) fn after(
    ep: EntryPoint,
    call: &Call,
    mark: Option<SyncMark>,
    rc: CUresult,
    entry: &EntryRegs,
) -> Option<Teardown> {
    if rc == CUDA_SUCCESS {
        if let Some(m) = &mark {
            for &(ref s, n) in &m.streams {
                s.host_completed.fetch_max(n, Ordering::AcqRel);
            }
            // The context's synchronization waited for the work of its destroyed streams that
            // were only counted when it began (a destroyed stream gets no new work), and its
            // success proves that the device had no fault: the work of the device's contexts
            // destroyed before it began did not fault.
            if matches!(call, Call::SyncContext { .. }) {
                streams::forget_dropped_unfinished(m.context, m.dropped_streams);
                let (device, destroyed) = m.destroyed_contexts;
                streams::forget_destroyed_unfinished(device, destroyed);
            }
        }
    }
    match *call {
        Call::BlockingCopy { launch, proves } if rc == CUDA_SUCCESS => {
            record_blocking_copy(ep, launch, proves == Proves::CopyAndEarlier, entry)
        }
        // SAFETY: on success the driver wrote a handle through `out`; `name` is the program's
        // NUL-terminated kernel name.
        Call::NameHandle { out, name } if rc == CUDA_SUCCESS && out != 0 && name != 0 => unsafe {
            let handle = *(out as *const usize);
            names::set(
                handle,
                std::ffi::CStr::from_ptr(name as *const std::ffi::c_char)
                    .to_string_lossy()
                    .into_owned(),
            );
        },
        Call::AliasHandle { out, of } if rc == CUDA_SUCCESS && out != 0 => {
            // SAFETY: as above.
            names::alias(unsafe { *(out as *const usize) }, of);
        }
        Call::BeginCapture { .. } if rc != CUDA_SUCCESS => {
            let _ = CAPTURES_ACTIVE
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1));
        }
        Call::BeginCapture { stream, into } => {
            if let Some(driver) = real::driver() {
                let thread = crate::threads::thread_id();
                let id = StreamId::resolve(stream, ep.per_thread_default(), thread);
                let now = now_ns();
                let stack = live_stack(now, entry);
                graphs::begin(streams::context_of(driver, id), id, into, stack, thread);
            }
        }
        // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901) still ends the capture.
        Call::EndCapture { stream, graph_out } if rc == CUDA_SUCCESS || rc == 901 => {
            let _ = CAPTURES_ACTIVE
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            if let Some(driver) = real::driver() {
                let id =
                    StreamId::resolve(stream, ep.per_thread_default(), crate::threads::thread_id());
                let graph = if rc == CUDA_SUCCESS && graph_out != 0 {
                    // SAFETY: on success the driver wrote the graph through `graph_out`.
                    unsafe { *(graph_out as *const usize) }
                } else {
                    0
                };
                graphs::end(streams::context_of(driver, id), id, graph);
            }
        }
        Call::Instantiate { exec_out, graph } if rc == CUDA_SUCCESS && exec_out != 0 => {
            // SAFETY: on success the driver wrote the executable graph through `exec_out`.
            graphs::instantiate(graph, unsafe { *(exec_out as *const usize) });
        }
        Call::CreateGraph { graph_out } if rc == CUDA_SUCCESS && graph_out != 0 => {
            // SAFETY: on success the driver wrote the new graph through `graph_out`.
            let graph = unsafe { *(graph_out as *const usize) };
            let stack = live_stack(now_ns(), entry);
            graphs::create(graph, stack, crate::threads::thread_id());
        }
        Call::CloneGraph {
            graph_out,
            original,
        } if rc == CUDA_SUCCESS && graph_out != 0 => {
            // SAFETY: on success the driver wrote the clone through `graph_out`.
            graphs::clone_graph(original, unsafe { *(graph_out as *const usize) });
        }
        Call::DestroyGraph { graph } if rc == CUDA_SUCCESS => graphs::destroy_graph(graph),
        Call::DestroyExec { exec } if rc == CUDA_SUCCESS => graphs::destroy_exec(exec),
        Call::EditGraph { graph } if rc == CUDA_SUCCESS => graphs::edit_graph(graph),
        Call::EditNode if rc == CUDA_SUCCESS => graphs::edit_node(),
        Call::EditExec { exec, enable_set } if rc == CUDA_SUCCESS => {
            graphs::edit_exec(exec, enable_set)
        }
        Call::UpdateExec { exec, graph } if rc == CUDA_SUCCESS => graphs::update_exec(exec, graph),
        Call::DestroyStream { stream } if rc == CUDA_SUCCESS => {
            if let Some(driver) = real::driver() {
                let id =
                    StreamId::resolve(stream, ep.per_thread_default(), crate::threads::thread_id());
                streams::retire(driver, id);
            }
        }
        Call::UnseenWork { stream } if rc == CUDA_SUCCESS => {
            if let Some(driver) = real::driver() {
                let id =
                    StreamId::resolve(stream, ep.per_thread_default(), crate::threads::thread_id());
                streams::lookup(driver, id).note_unseen(ep);
            }
        }
        Call::DestroyContext { ctx } if context_ended(rc) => {
            return Some(Teardown::Context(ctx));
        }
        Call::PrimaryContext { dev, reset } if context_ended(rc) => {
            let ctx = mark.as_ref().map_or(0, |m| m.context);
            // A release destroys with the last reference only. After a sticky error the state
            // may not be known: then taken as gone (losing some history is harmless; a marker
            // slot in memory the destroy unregistered is not).
            let active = real::driver().and_then(|d| d.primary_active(dev));
            let gone = reset || active == Some(false) || (active.is_none() && rc != CUDA_SUCCESS);
            return match (gone, ctx) {
                (false, _) => None,
                // The handle could not be learned before the call: forget the device's contexts.
                (true, 0) => Some(Teardown::Device(dev)),
                (true, ctx) => Some(Teardown::Context(ctx)),
            };
        }
        _ => {}
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A context-ending call ended the context on success and on a sticky error (which the
    /// driver returns while destroying it); on any other failure it destroyed nothing, and
    /// cudablame keeps the context's streams.
    #[test]
    fn only_success_or_a_sticky_error_ends_a_context() {
        assert!(context_ended(CUDA_SUCCESS));
        for sticky in [700, 702, 710, 716, 719, 999] {
            assert!(context_ended(sticky), "{sticky}");
        }
        // Invalid value, invalid device, invalid context, context already destroyed, not
        // initialized, launch out of resources (not sticky).
        for failed in [1, 101, 201, 709, 3, 701] {
            assert!(!context_ended(failed), "{failed}");
        }
    }
}
