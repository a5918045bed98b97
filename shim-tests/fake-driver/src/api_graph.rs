//! Exports: stream capture and graphs.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use crate::capture::{self, Node, EXECS, GRAPHS};
use crate::context;
use crate::errors;
use crate::handles::handle_of;
use crate::module::FUNCS;
use crate::stream::{lookup, NullStream, Op};
use crate::types::*;
use crate::{guard, write_out};
use std::ffi::{c_uint, c_void};

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
        let exec = capture::new_exec(graph.nodes.lock().clone());
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
    let ops: Vec<Op> = exec.nodes.lock().iter().map(|n| n.op.clone()).collect();
    for op in ops {
        capture::submit(stream, op)?;
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
        let total = graph.nodes.lock().len();
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

/// `cuGraphDestroy(CUgraph)`. Its address may be handed out again under
/// `FAKE_CUDA_REUSE_HANDLES=1`.
#[no_mangle]
pub unsafe extern "C" fn cuGraphDestroy(graph: CUgraph) -> CUresult {
    guard(|| {
        context::require_init()?;
        capture::destroy_graph(graph)
    })
}

/// `cuGraphExecDestroy(CUgraphExec)`. Its address may be handed out again under
/// `FAKE_CUDA_REUSE_HANDLES=1`.
#[no_mangle]
pub unsafe extern "C" fn cuGraphExecDestroy(exec: CUgraphExec) -> CUresult {
    guard(|| {
        context::require_init()?;
        capture::destroy_exec(exec)
    })
}

/// `cuGraphCreate(CUgraph*, unsigned int flags)`: an empty graph, built by hand. `flags` must
/// be 0.
#[no_mangle]
pub unsafe extern "C" fn cuGraphCreate(pgraph: *mut CUgraph, flags: c_uint) -> CUresult {
    guard(|| {
        context::require_init()?;
        if flags != 0 || pgraph.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        // SAFETY: not NULL, so valid for a write (cuGraphCreate's contract).
        unsafe { write_out(pgraph, handle_of(capture::new_graph(Vec::new()))) }
    })
}

/// `cuGraphClone(CUgraph* clone, CUgraph original)`: a copy of the original's nodes, with new
/// node handles.
#[no_mangle]
pub unsafe extern "C" fn cuGraphClone(pclone: *mut CUgraph, original: CUgraph) -> CUresult {
    guard(|| {
        context::require_init()?;
        let graph = GRAPHS.get(original).ok_or(errors::INVALID_VALUE)?;
        if pclone.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        let nodes = graph
            .nodes
            .lock()
            .iter()
            .map(|n| Node::new(n.op.clone()))
            .collect();
        // SAFETY: not NULL, so valid for a write (cuGraphClone's contract).
        unsafe { write_out(pclone, handle_of(capture::new_graph(nodes))) }
    })
}

/// The kernel op of a `CUDA_KERNEL_NODE_PARAMS` (`v2`: the CUDA 12 layout, whose `kern` field is
/// used when `func` is NULL; else the CUDA 10 one): its function must be live and its dimensions
/// valid, else `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `params` is NULL or points to such a struct.
unsafe fn kernel_op(params: *const c_void, v2: bool) -> Res<Op> {
    if params.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    let at = |offset: usize| params as usize + offset;
    // SAFETY: cuda.h's layout (LP64): func at 0; gridDimX..Z at 8, 12, 16; blockDimX..Z at 20,
    // 24, 28; sharedMemBytes at 32; kernelParams 40, extra 48; then (v2) kern at 56, ctx 64.
    // Every read lies inside the struct the caller passed.
    let (mut func, dims, shared_mem) = unsafe {
        let u = |o: usize| (at(o) as *const c_uint).read_unaligned();
        (
            (at(0) as *const *mut c_void).read_unaligned(),
            [u(8), u(12), u(16), u(20), u(24), u(28)],
            u(32),
        )
    };
    if func.is_null() && v2 {
        // SAFETY: as above (the v2 struct is 72 bytes).
        func = unsafe { (at(56) as *const *mut c_void).read_unaligned() };
    }
    let func = FUNCS.get(func).ok_or(errors::INVALID_VALUE)?;
    let (grid, block) = ([dims[0], dims[1], dims[2]], [dims[3], dims[4], dims[5]]);
    crate::api_launch::check_dims(grid, block)?;
    Ok(Op::Kernel {
        func,
        grid,
        block,
        shared_mem,
    })
}

/// `cuGraphAddKernelNode[_v2]`: appends a kernel node (dependencies must be nodes of the graph;
/// the fake runs nodes in the order they were added).
unsafe fn add_kernel_node(
    pnode: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    ndeps: usize,
    params: *const c_void,
    v2: bool,
) -> Res<()> {
    context::require_init()?;
    let graph = GRAPHS.get(graph).ok_or(errors::INVALID_VALUE)?;
    if pnode.is_null() || (ndeps > 0 && deps.is_null()) {
        return Err(errors::INVALID_VALUE);
    }
    // SAFETY: the caller's struct (cuGraphAddKernelNode's contract).
    let op = unsafe { kernel_op(params, v2) }?;
    let mut nodes = graph.nodes.lock();
    for i in 0..ndeps {
        // SAFETY: `deps` holds `ndeps` handles (the contract).
        let dep = unsafe { *deps.add(i) } as usize;
        if !nodes.iter().any(|n| n.handle == dep) {
            return Err(errors::INVALID_VALUE);
        }
    }
    let node = Node::new(op);
    let handle = node.handle;
    nodes.push(node);
    // SAFETY: not NULL, so valid for a write (the contract).
    unsafe { write_out(pnode, handle as CUgraphNode) }
}

/// `cuGraphAddKernelNode_v2(CUgraphNode*, CUgraph, const CUgraphNode* deps, size_t numDeps,
/// const CUDA_KERNEL_NODE_PARAMS*)`: the CUDA 12 ABI (`cuda.h`'s `cuGraphAddKernelNode`).
#[no_mangle]
pub unsafe extern "C" fn cuGraphAddKernelNode_v2(
    pnode: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    ndeps: usize,
    params: *const c_void,
) -> CUresult {
    // SAFETY: the C caller's arguments, passed through under this entry point's contract.
    guard(|| unsafe { add_kernel_node(pnode, graph, deps, ndeps, params, true) })
}

/// `cuGraphAddKernelNode` with the CUDA 10 `CUDA_KERNEL_NODE_PARAMS_v1`.
#[no_mangle]
pub unsafe extern "C" fn cuGraphAddKernelNode(
    pnode: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    ndeps: usize,
    params: *const c_void,
) -> CUresult {
    // SAFETY: as for the v2 export.
    guard(|| unsafe { add_kernel_node(pnode, graph, deps, ndeps, params, false) })
}

/// Replaces the op of the kernel node `handle` among `nodes` (`CUDA_ERROR_INVALID_VALUE` when
/// there is none, or it is no kernel node).
fn set_kernel(nodes: &mut [Node], handle: usize, op: Op) -> Res<()> {
    match nodes.iter_mut().find(|n| n.handle == handle) {
        Some(n) if matches!(n.op, Op::Kernel { .. }) => {
            n.op = op;
            Ok(())
        }
        _ => Err(errors::INVALID_VALUE),
    }
}

/// `cuGraphKernelNodeSetParams[_v2]`: the node's kernel and dimensions, in its graph.
unsafe fn kernel_node_set(node: CUgraphNode, params: *const c_void, v2: bool) -> Res<()> {
    context::require_init()?;
    let graph = capture::graph_of_node(node as usize).ok_or(errors::INVALID_VALUE)?;
    // SAFETY: the caller's struct (cuGraphKernelNodeSetParams's contract).
    let op = unsafe { kernel_op(params, v2) }?;
    let mut nodes = graph.nodes.lock();
    set_kernel(&mut nodes, node as usize, op)
}

/// `cuGraphKernelNodeSetParams_v2(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*)`: the CUDA 12 ABI.
#[no_mangle]
pub unsafe extern "C" fn cuGraphKernelNodeSetParams_v2(
    node: CUgraphNode,
    params: *const c_void,
) -> CUresult {
    // SAFETY: the C caller's arguments, passed through under this entry point's contract.
    guard(|| unsafe { kernel_node_set(node, params, true) })
}

/// `cuGraphKernelNodeSetParams` with the CUDA 10 `CUDA_KERNEL_NODE_PARAMS_v1`.
#[no_mangle]
pub unsafe extern "C" fn cuGraphKernelNodeSetParams(
    node: CUgraphNode,
    params: *const c_void,
) -> CUresult {
    // SAFETY: as for the v2 export.
    guard(|| unsafe { kernel_node_set(node, params, false) })
}

/// `cuGraphExecKernelNodeSetParams[_v2]`: the kernel of `node` in the executable graph only
/// (its graph keeps the old one; launches already enqueued are not affected).
unsafe fn exec_kernel_node_set(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const c_void,
    v2: bool,
) -> Res<()> {
    context::require_init()?;
    let exec = EXECS.get(exec).ok_or(errors::INVALID_VALUE)?;
    // SAFETY: the caller's struct (cuGraphExecKernelNodeSetParams's contract).
    let op = unsafe { kernel_op(params, v2) }?;
    let mut nodes = exec.nodes.lock();
    set_kernel(&mut nodes, node as usize, op)
}

/// `cuGraphExecKernelNodeSetParams_v2(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*)`:
/// the CUDA 12 ABI.
#[no_mangle]
pub unsafe extern "C" fn cuGraphExecKernelNodeSetParams_v2(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const c_void,
) -> CUresult {
    // SAFETY: the C caller's arguments, passed through under this entry point's contract.
    guard(|| unsafe { exec_kernel_node_set(exec, node, params, true) })
}

/// `cuGraphExecKernelNodeSetParams` with the CUDA 10 `CUDA_KERNEL_NODE_PARAMS_v1`.
#[no_mangle]
pub unsafe extern "C" fn cuGraphExecKernelNodeSetParams(
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const c_void,
) -> CUresult {
    // SAFETY: as for the v2 export.
    guard(|| unsafe { exec_kernel_node_set(exec, node, params, false) })
}

/// `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`.
const GRAPH_EXEC_UPDATE_FAILURE: CUresult = 910;
/// `CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED` (`CUgraphExecUpdateResult`).
const UPDATE_ERROR_TOPOLOGY_CHANGED: c_uint = 2;

/// `cuGraphExecUpdate_v2(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*)`: the executable
/// graph takes the graph's ops when both have as many nodes, of the same kinds in order; else
/// `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE` (910) with `result` = topology changed. The info
/// (`result` at 0, `errorNode` at 8, `errorFromNode` at 16) must not be NULL.
#[no_mangle]
pub unsafe extern "C" fn cuGraphExecUpdate_v2(
    exec: CUgraphExec,
    graph: CUgraph,
    info: *mut c_void,
) -> CUresult {
    guard(|| {
        context::require_init()?;
        let exec = EXECS.get(exec).ok_or(errors::INVALID_VALUE)?;
        let graph = GRAPHS.get(graph).ok_or(errors::INVALID_VALUE)?;
        if info.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        let from = graph.nodes.lock().clone();
        let mut nodes = exec.nodes.lock();
        let kind = |op: &Op| std::mem::discriminant(op);
        let same = from.len() == nodes.len()
            && from
                .iter()
                .zip(nodes.iter())
                .all(|(a, b)| kind(&a.op) == kind(&b.op));
        let result = if same {
            0
        } else {
            UPDATE_ERROR_TOPOLOGY_CHANGED
        };
        // SAFETY: not NULL, so the caller's 24-byte CUgraphExecUpdateResultInfo (the contract).
        unsafe {
            (info as *mut c_uint).write_unaligned(result);
            (info.cast::<u8>().add(8) as *mut usize).write_unaligned(0);
            (info.cast::<u8>().add(16) as *mut usize).write_unaligned(0);
        }
        if !same {
            return Err(GRAPH_EXEC_UPDATE_FAILURE);
        }
        for (n, f) in nodes.iter_mut().zip(from) {
            n.op = f.op;
        }
        Ok(())
    })
}
