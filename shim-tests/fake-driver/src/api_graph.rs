//! Exports: stream capture and graphs.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use crate::capture::{self, EXECS, GRAPHS};
use crate::context;
use crate::errors;
use crate::handles::handle_of;
use crate::stream::{lookup, NullStream};
use crate::types::*;
use crate::{guard, write_out};
use std::ffi::c_uint;

fn begin_capture(h: CUstream, mode: c_uint, null: NullStream) -> Res<()> {
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    capture::begin(stream, mode)
}

fn begin_capture_v1(h: CUstream, null: NullStream) -> Res<()> {
    begin_capture(h, CAPTURE_MODE_GLOBAL, null)
}

dual_export! {
    /// `cuStreamBeginCapture(CUstream)` (CUDA 10.0 ABI): global mode.
    fn cuStreamBeginCapture / cuStreamBeginCapture_ptsz (h: CUstream) => begin_capture_v1
}

dual_export! {
    /// `cuStreamBeginCapture_v2(CUstream, CUstreamCaptureMode)`: later work on the stream is
    /// recorded instead of executed. Not allowed on the legacy stream (900).
    fn cuStreamBeginCapture_v2 / cuStreamBeginCapture_v2_ptsz (h: CUstream, mode: c_uint) => begin_capture
}

unsafe fn end_capture(h: CUstream, pgraph: *mut CUgraph, null: NullStream) -> Res<()> {
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    if pgraph.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    // SAFETY: not NULL, so valid for a write (cuStreamEndCapture's contract, passed through).
    unsafe { *pgraph = std::ptr::null_mut() };
    let graph = capture::end(stream)?;
    // SAFETY: `pgraph` is NULL or valid for a write: `end_capture`'s callers pass an export's out-
    // pointer argument.
    unsafe { write_out(pgraph, handle_of(graph)) }
}

dual_export! {
    /// `cuStreamEndCapture(CUstream, CUgraph*)`: the captured graph, or
    /// `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` (and NULL) if the capture was invalidated.
    fn cuStreamEndCapture / cuStreamEndCapture_ptsz (h: CUstream, pgraph: *mut CUgraph) => end_capture
}

unsafe fn is_capturing(h: CUstream, status: *mut c_uint, null: NullStream) -> Res<()> {
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    // SAFETY: `status` is NULL or valid for a write: `is_capturing`'s callers pass an export's out-
    // pointer argument.
    unsafe { write_out(status, capture::status(stream)) }
}

dual_export! {
    /// `cuStreamIsCapturing(CUstream, CUstreamCaptureStatus*)`: NONE / ACTIVE / INVALIDATED.
    /// Never invalidates anything.
    fn cuStreamIsCapturing / cuStreamIsCapturing_ptsz (h: CUstream, status: *mut c_uint) => is_capturing
}

/// `cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode*)`: swaps the calling thread's mode.
#[no_mangle]
pub unsafe extern "C" fn cuThreadExchangeStreamCaptureMode(mode: *mut c_uint) -> CUresult {
    guard(|| {
        context::require_init()?;
        if mode.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        // SAFETY: not NULL, so valid for a read and a write (cuThreadExchangeStreamCaptureMode's
        // contract).
        unsafe { *mode = capture::exchange_mode(*mode)? };
        Ok(())
    })
}

/// `cuGraphInstantiateWithFlags(CUgraphExec*, CUgraph, unsigned long long flags)`.
#[no_mangle]
pub unsafe extern "C" fn cuGraphInstantiateWithFlags(
    pexec: *mut CUgraphExec,
    graph: CUgraph,
    flags: u64,
) -> CUresult {
    guard(|| {
        context::current_checked()?;
        let graph = GRAPHS.get(graph).ok_or(errors::INVALID_HANDLE)?;
        // AUTO_FREE_ON_LAUNCH | UPLOAD | DEVICE_LAUNCH | USE_NODE_PRIORITY
        if pexec.is_null() || flags & !0xF != 0 {
            return Err(errors::INVALID_VALUE);
        }
        let exec = EXECS.insert(capture::GraphExec {
            nodes: graph.nodes.clone(),
        });
        // SAFETY: `pexec` is NULL or valid for a write, as cuGraphInstantiateWithFlags's contract
        // (cuda.h) says.
        unsafe { write_out(pexec, handle_of(exec)) }
    })
}

fn graph_launch(exec: CUgraphExec, h: CUstream, null: NullStream) -> Res<()> {
    context::require_init()?;
    let exec = EXECS.get(exec).ok_or(errors::INVALID_HANDLE)?;
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    for op in &exec.nodes {
        capture::submit(stream, op.clone())?;
    }
    Ok(())
}

dual_export! {
    /// `cuGraphLaunch(CUgraphExec, CUstream)`: enqueues the graph's nodes in capture order.
    fn cuGraphLaunch / cuGraphLaunch_ptsz (exec: CUgraphExec, h: CUstream) => graph_launch
}

/// `cuGraphGetNodes(CUgraph, CUgraphNode* nodes, size_t* numNodes)`: with `nodes == NULL`
/// returns the count; otherwise fills up to `*numNodes` handles (NULL-padding the rest) and
/// stores the number written.
#[no_mangle]
pub unsafe extern "C" fn cuGraphGetNodes(
    graph: CUgraph,
    nodes: *mut CUgraphNode,
    count: *mut usize,
) -> CUresult {
    guard(|| {
        context::require_init()?;
        let graph = GRAPHS.get(graph).ok_or(errors::INVALID_HANDLE)?;
        if count.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        let total = graph.nodes.len();
        // SAFETY: `count` is not NULL, so valid for a read and a write, and a non-NULL `nodes`
        // holds `*count` handles (cuGraphGetNodes's contract).
        unsafe {
            if nodes.is_null() {
                *count = total;
                return Ok(());
            }
            let capacity = *count;
            for i in 0..capacity {
                *nodes.add(i) = graph.node_handle(i);
            }
            *count = capacity.min(total);
        }
        Ok(())
    })
}

/// `cuGraphDestroy(CUgraph)`.
#[no_mangle]
pub unsafe extern "C" fn cuGraphDestroy(graph: CUgraph) -> CUresult {
    guard(|| {
        context::require_init()?;
        GRAPHS.remove(graph).map(drop).ok_or(errors::INVALID_HANDLE)
    })
}

/// `cuGraphExecDestroy(CUgraphExec)`.
#[no_mangle]
pub unsafe extern "C" fn cuGraphExecDestroy(exec: CUgraphExec) -> CUresult {
    guard(|| {
        context::require_init()?;
        EXECS.remove(exec).map(drop).ok_or(errors::INVALID_HANDLE)
    })
}
