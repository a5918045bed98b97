//! Exports: streams, events and stream memory operations (write-value).
#![allow(non_snake_case, clippy::missing_safety_doc)]

use crate::api_driver::stream_memops_supported;
use crate::capture;
use crate::context;
use crate::errors;
use crate::handles::handle_of;
use crate::memory;
use crate::signal;
use crate::stream::{lookup, Event, NullStream, Op, Stream, StreamKind, EVENTS, STREAMS};
use crate::types::*;
use crate::{guard, write_out};
use std::ffi::{c_float, c_int, c_uint, c_void};

unsafe fn create_stream(ph: *mut CUstream, flags: c_uint, priority: c_int) -> Res<()> {
    let ctx = context::current_checked()?;
    if ph.is_null() || flags & !CU_STREAM_NON_BLOCKING != 0 {
        return Err(errors::INVALID_VALUE);
    }
    let stream = Stream::spawn(ctx, StreamKind::User, flags, priority)?;
    // SAFETY: `ph` is NULL or valid for a write: `create_stream`'s callers pass an export's out-
    // pointer argument.
    unsafe { write_out(ph, handle_of(stream)) }
}

/// `cuStreamCreate(CUstream*, unsigned int flags)`: flags 0 or `CU_STREAM_NON_BLOCKING`.
#[no_mangle]
pub unsafe extern "C" fn cuStreamCreate(ph: *mut CUstream, flags: c_uint) -> CUresult {
    // SAFETY: the arguments go to `create_stream` unchanged, valid as cuStreamCreate's contract
    // (cuda.h) says.
    guard(|| unsafe { create_stream(ph, flags, 0) })
}

/// `cuStreamCreateWithPriority(CUstream*, unsigned int flags, int priority)`.
#[no_mangle]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    ph: *mut CUstream,
    flags: c_uint,
    priority: c_int,
) -> CUresult {
    // SAFETY: the arguments go to `create_stream` unchanged, valid as cuStreamCreateWithPriority's
    // contract (cuda.h) says.
    guard(|| unsafe { create_stream(ph, flags, priority) })
}

/// `cuStreamDestroy_v2(CUstream)`: returns at once; queued work still completes. Works after a
/// fault.
#[no_mangle]
pub unsafe extern "C" fn cuStreamDestroy_v2(h: CUstream) -> CUresult {
    guard(|| {
        context::require_init()?;
        STREAMS.get(h).ok_or(errors::INVALID_HANDLE)?.close();
        Ok(())
    })
}

unsafe fn stream_synchronize(h: CUstream, null: NullStream) -> Res<()> {
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    capture::check_sync_on(stream)?;
    stream.synchronize();
    stream.ctx.check()
}

dual_export! {
    /// `cuStreamSynchronize(CUstream)`: waits for the stream's earlier work (legacy stream: for
    /// every stream of the context), then returns the sticky error if any.
    fn cuStreamSynchronize / cuStreamSynchronize_ptsz (h: CUstream) => stream_synchronize
}

unsafe fn stream_query(h: CUstream, null: NullStream) -> Res<()> {
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    capture::check_sync_on(stream)?;
    if stream.busy() {
        return Err(errors::NOT_READY);
    }
    stream.ctx.check()
}

dual_export! {
    /// `cuStreamQuery(CUstream)`: `CUDA_ERROR_NOT_READY` while the stream has queued or running
    /// work, the sticky error if poisoned, else success.
    fn cuStreamQuery / cuStreamQuery_ptsz (h: CUstream) => stream_query
}

unsafe fn stream_wait_event(
    h: CUstream,
    event: CUevent,
    _flags: c_uint,
    null: NullStream,
) -> Res<()> {
    let stream = lookup(h, null)?;
    let event = EVENTS.get(event).ok_or(errors::INVALID_HANDLE)?;
    stream.ctx.check()?;
    if let Some(capture) = event.active_capture() {
        return capture::join(stream, capture);
    }
    if let Some(capture) = stream.active_capture() {
        // An external dependency of the capture: nothing to record in the fake.
        return capture.append_nothing();
    }
    if stream.kind == StreamKind::Legacy {
        capture::check_legacy_use(stream.ctx)?;
    }
    if !event.is_complete() {
        stream.enqueue(Op::WaitEvent {
            event,
            seq: event.recorded(),
        })?;
    }
    Ok(())
}

dual_export! {
    /// `cuStreamWaitEvent(CUstream, CUevent, unsigned int flags)`: later work on the stream waits
    /// for the event's latest record. An event recorded in a capture forks the stream into it.
    fn cuStreamWaitEvent / cuStreamWaitEvent_ptsz (h: CUstream, event: CUevent, flags: c_uint) => stream_wait_event
}

unsafe fn stream_get_ctx(h: CUstream, pctx: *mut CUcontext, null: NullStream) -> Res<()> {
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    // SAFETY: `pctx` is NULL or valid for a write: `stream_get_ctx`'s callers pass an export's out-
    // pointer argument.
    unsafe { write_out(pctx, handle_of(stream.ctx)) }
}

dual_export! {
    /// `cuStreamGetCtx(CUstream, CUcontext*)`.
    fn cuStreamGetCtx / cuStreamGetCtx_ptsz (h: CUstream, pctx: *mut CUcontext) => stream_get_ctx
}

/// Spins the calling thread for `ns` of host time (a slow host's driver call, not a sleep: the
/// thread stays busy as in a real driver call).
fn spin_host_ns(ns: u64) {
    if ns == 0 {
        return;
    }
    let start = std::time::Instant::now();
    while (start.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}

/// Common body of the write-value exports; `width` is 4 or 8.
fn write_value(
    h: CUstream,
    addr: CUdeviceptr,
    op: Op,
    width: usize,
    flags: c_uint,
    null: NullStream,
) -> Res<()> {
    context::require_init()?;
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    if !stream_memops_supported() {
        return Err(errors::NOT_SUPPORTED);
    }
    spin_host_ns(crate::api_driver::stream_memop_host_ns());
    let addr = addr as usize;
    if flags & !CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER != 0
        || !addr.is_multiple_of(width)
        || !memory::is_mapped(addr, width)
    {
        return Err(errors::INVALID_VALUE);
    }
    capture::submit(stream, op).map(drop)
}

fn write_value64(
    h: CUstream,
    addr: CUdeviceptr,
    value: u64,
    flags: c_uint,
    null: NullStream,
) -> Res<()> {
    let op = Op::Write64 {
        addr: addr as usize,
        value,
    };
    write_value(h, addr, op, 8, flags, null)
}

fn write_value32(
    h: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
    null: NullStream,
) -> Res<()> {
    let op = Op::Write32 {
        addr: addr as usize,
        value,
    };
    write_value(h, addr, op, 4, flags, null)
}

dual_export! {
    /// `cuStreamWriteValue64(CUstream, CUdeviceptr, cuuint64_t, unsigned int flags)` (CUDA 8/9 ABI):
    /// enqueues a volatile 64-bit store. 801 with `FAKE_CUDA_NO_STREAM_MEMOPS=1`.
    fn cuStreamWriteValue64 / cuStreamWriteValue64_ptsz (h: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) => write_value64
}

dual_export! {
    /// `cuStreamWriteValue64_v2` (CUDA 11.7+ ABI, same arguments): as `cuStreamWriteValue64`.
    fn cuStreamWriteValue64_v2 / cuStreamWriteValue64_v2_ptsz (h: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint) => write_value64
}

dual_export! {
    /// `cuStreamWriteValue32(CUstream, CUdeviceptr, cuuint32_t, unsigned int flags)`: enqueues a
    /// volatile 32-bit store. 801 with `FAKE_CUDA_NO_STREAM_MEMOPS=1`.
    fn cuStreamWriteValue32 / cuStreamWriteValue32_ptsz (h: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) => write_value32
}

dual_export! {
    /// `cuStreamWriteValue32_v2` (same arguments): as `cuStreamWriteValue32`.
    fn cuStreamWriteValue32_v2 / cuStreamWriteValue32_v2_ptsz (h: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint) => write_value32
}

/// `cuEventCreate(CUevent*, unsigned int flags)`.
#[no_mangle]
pub unsafe extern "C" fn cuEventCreate(ph: *mut CUevent, flags: c_uint) -> CUresult {
    guard(|| {
        let ctx = context::current_checked()?;
        if ph.is_null() || flags & !CU_EVENT_VALID_FLAGS != 0 {
            return Err(errors::INVALID_VALUE);
        }
        // SAFETY: `ph` is NULL or valid for a write, as cuEventCreate's contract (cuda.h) says.
        unsafe { write_out(ph, handle_of(Event::create(ctx, flags))) }
    })
}

/// `cuEventDestroy_v2(CUevent)`. Works after a fault.
#[no_mangle]
pub unsafe extern "C" fn cuEventDestroy_v2(event: CUevent) -> CUresult {
    guard(|| {
        context::require_init()?;
        EVENTS.remove(event).map(drop).ok_or(errors::INVALID_HANDLE)
    })
}

unsafe fn event_record(event: CUevent, h: CUstream, null: NullStream) -> Res<()> {
    context::require_init()?;
    let event = EVENTS.get(event).ok_or(errors::INVALID_HANDLE)?;
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    if let Some(capture) = stream.active_capture() {
        capture.append_nothing()?;
        event.set_capture(capture);
        return Ok(());
    }
    if stream.kind == StreamKind::Legacy {
        capture::check_legacy_use(stream.ctx)?;
    }
    let seq = event.next_record();
    stream.enqueue(Op::RecordEvent { event, seq }).map(drop)
}

dual_export! {
    /// `cuEventRecord(CUevent, CUstream)`: the event completes when the stream reaches this point.
    fn cuEventRecord / cuEventRecord_ptsz (event: CUevent, h: CUstream) => event_record
}

/// `cuEventSynchronize(CUevent)`: waits for the latest record (or a fault of its context).
#[no_mangle]
pub unsafe extern "C" fn cuEventSynchronize(event: CUevent) -> CUresult {
    guard(|| {
        context::require_init()?;
        let event = EVENTS.get(event).ok_or(errors::INVALID_HANDLE)?;
        event.ctx.check()?;
        if event.active_capture().is_some() {
            return Err(errors::CAPTURED_EVENT);
        }
        capture::check_unsafe_call()?;
        signal::wait_until(|| {
            event.is_complete() || event.ctx.poisoned() || event.ctx.is_destroyed()
        });
        event.ctx.check()
    })
}

/// `cuEventQuery(CUevent)`: `CUDA_ERROR_NOT_READY` until the latest record completed.
#[no_mangle]
pub unsafe extern "C" fn cuEventQuery(event: CUevent) -> CUresult {
    guard(|| {
        context::require_init()?;
        let event = EVENTS.get(event).ok_or(errors::INVALID_HANDLE)?;
        event.ctx.check()?;
        if event.active_capture().is_some() {
            return Err(errors::CAPTURED_EVENT);
        }
        if event.is_complete() {
            Ok(())
        } else {
            Err(errors::NOT_READY)
        }
    })
}

unsafe fn elapsed_time(ms: *mut c_float, start: CUevent, end: CUevent) -> Res<()> {
    context::require_init()?;
    let start = EVENTS.get(start).ok_or(errors::INVALID_HANDLE)?;
    let end = EVENTS.get(end).ok_or(errors::INVALID_HANDLE)?;
    start.ctx.check()?;
    end.ctx.check()?;
    let timed = |e: &Event| e.flags & CU_EVENT_DISABLE_TIMING == 0 && e.recorded() > 0;
    if !timed(start) || !timed(end) {
        return Err(errors::INVALID_HANDLE);
    }
    if !start.is_complete() || !end.is_complete() {
        return Err(errors::NOT_READY);
    }
    // SAFETY: `ms` is NULL or valid for a write: `elapsed_time`'s callers pass an export's out-
    // pointer argument.
    unsafe { write_out(ms, 0.0) }
}

/// `cuEventElapsedTime(float*, CUevent, CUevent)`: always 0.0 ms once both events completed.
#[no_mangle]
pub unsafe extern "C" fn cuEventElapsedTime(
    ms: *mut c_float,
    start: CUevent,
    end: CUevent,
) -> CUresult {
    // SAFETY: the arguments go to `elapsed_time` unchanged, valid as cuEventElapsedTime's contract
    // (cuda.h) says.
    guard(|| unsafe { elapsed_time(ms, start, end) })
}

/// `cuEventElapsedTime_v2` (CUDA 12.8+, same arguments): as `cuEventElapsedTime`.
#[no_mangle]
pub unsafe extern "C" fn cuEventElapsedTime_v2(
    ms: *mut c_float,
    start: CUevent,
    end: CUevent,
) -> CUresult {
    // SAFETY: the arguments go to `elapsed_time` unchanged, valid as cuEventElapsedTime_v2's
    // contract (cuda.h) says.
    guard(|| unsafe { elapsed_time(ms, start, end) })
}

fn launch_host_func(
    h: CUstream,
    func: *mut c_void,
    data: *mut c_void,
    null: NullStream,
) -> Res<()> {
    context::require_init()?;
    if func.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    let stream = lookup(h, null)?;
    let op = Op::HostFunc {
        func: func as usize,
        data: data as usize,
    };
    capture::submit(stream, op).map(drop)
}

dual_export! {
    /// `cuLaunchHostFunc(CUstream, CUhostFn, void*)`: the function runs on the stream's worker
    /// when the stream reaches it (it must not call CUDA, as in the driver).
    fn cuLaunchHostFunc / cuLaunchHostFunc_ptsz (h: CUstream, func: *mut c_void, data: *mut c_void) => launch_host_func
}
