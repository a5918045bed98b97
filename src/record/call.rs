//! The `Call` vocabulary: what each hooked call means, from its arguments, and the memory sides of copies.

use super::*;
use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use crate::real;
use std::ffi::c_uint;

/// What a hooked call does, derived from its arguments before the real call (see the list in
/// `cuda::entry_points`). Stream handles are raw: `0` means the variant's default stream.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Call {
    /// Work enqueued on a stream: recorded and followed by a progress marker.
    Enqueue(Launch),
    /// A blocking copy on the variant's default stream (`stream` is 0) that is not simply
    /// enqueued: what its successful return proves follows the driver API's "API synchronization
    /// behavior" table ([`Proves`]). Copies that prove nothing about earlier work (device to
    /// device, memsets of device memory) are [`Call::Enqueue`] instead.
    BlockingCopy {
        launch: Launch,
        proves: Proves,
    },
    /// `cuCtxSynchronize` (current context, `ctx` 0) / `cuCtxSynchronize_v2(ctx)`.
    SyncContext {
        ctx: usize,
    },
    /// `cuStreamSynchronize` / `cuStreamQuery`.
    SyncStream {
        stream: usize,
    },
    /// Any other call: only its error code matters.
    Observe {
        stream: Option<usize>,
    },
    /// A call that names an event (`cuEventSynchronize`, `cuEventQuery`, `cuStreamWaitEvent`):
    /// only its error code matters, and that error may be the sticky error of the event's
    /// context, which need not be the current one nor the stream's (an event of device 0 waited
    /// for with device 1 current, or by a stream of device 1). cudablame does not know an
    /// event's context, so the error's context is unknown: every context's streams are judged.
    ObserveEvent {
        stream: Option<usize>,
    },
    /// `cuModuleGetFunction` / `cuLibraryGetKernel`: on success `*out` is a handle named `name`.
    NameHandle {
        out: usize,
        name: usize,
    },
    /// `cuKernelGetFunction`: on success `*out` is a function of kernel `of`.
    AliasHandle {
        out: usize,
        of: usize,
    },
    /// `cuStreamBeginCapture*`; `into`: into an existing graph (`cuStreamBeginCaptureToGraph`).
    BeginCapture {
        stream: usize,
        into: bool,
    },
    /// `cuStreamEndCapture`: on success `*graph_out` is the captured graph.
    EndCapture {
        stream: usize,
        graph_out: usize,
    },
    /// `cuGraphInstantiate*`: on success `*exec_out` is an executable graph of `graph`.
    Instantiate {
        exec_out: usize,
        graph: usize,
    },
    DestroyStream {
        stream: usize,
    },
    /// `cuGraphCreate`: on success `*graph_out` is an empty graph, to be built by hand.
    CreateGraph {
        graph_out: usize,
    },
    /// `cuGraphClone`: on success `*graph_out` is a copy of `original`.
    CloneGraph {
        graph_out: usize,
        original: usize,
    },
    /// `cuGraphDestroy`.
    DestroyGraph {
        graph: usize,
    },
    /// `cuGraphExecDestroy`.
    DestroyExec {
        exec: usize,
    },
    /// A node added to `graph` (`cuGraphAddKernelNode`, `cuGraphAddChildGraphNode`,
    /// `cuGraphAddNode`): what it runs changed.
    EditGraph {
        graph: usize,
    },
    /// A node of a graph changed or destroyed (`cuGraphKernelNodeSetParams`,
    /// `cuGraphNodeSetParams`, `cuGraphDestroyNode`); the call does not name the graph.
    EditNode,
    /// A node of the executable graph `exec` changed (`cuGraphExec*SetParams`; `enable_set`:
    /// `cuGraphNodeSetEnabled`).
    EditExec {
        exec: usize,
        enable_set: bool,
    },
    /// `cuGraphExecUpdate`: on success `exec` runs what `graph` runs.
    UpdateExec {
        exec: usize,
        graph: usize,
    },
    /// Work enqueued on `stream` that cudablame does not record as an op (`cuLaunchHostFunc`):
    /// it may sit between recorded ops, so verdicts on that stream are capped below exact.
    UnseenWork {
        stream: usize,
    },
    /// `cuCtxDestroy`: the context, its streams and marker slab are forgotten when it returns
    /// success or a sticky error (the driver destroys a faulted context and returns its error),
    /// after that error's report (`record::Teardown`).
    DestroyContext {
        ctx: usize,
    },
    /// `cuDevicePrimaryCtxReset` (`reset`: always destroys) / `cuDevicePrimaryCtxRelease` (destroys
    /// with the last reference): the primary context of `dev` is forgotten once it is gone (on
    /// success or a sticky error, as for [`Call::DestroyContext`]).
    PrimaryContext {
        dev: i32,
        reset: bool,
    },
}

/// What the successful return of a blocking copy proves, per the driver API documentation,
/// section "API synchronization behavior" (memcpy, synchronous):
/// - device to host (pageable or pinned): "returns only once the copy has completed": the copy
///   and every earlier op of its stream completed ([`Proves::CopyAndEarlier`]);
/// - host to device: "a stream sync is performed before the copy is initiated": earlier ops
///   completed. The copy itself is taken as complete too ([`Proves::CopyAndEarlier`]): from
///   pinned memory it "is synchronous with respect to the host"; from pageable memory the DMA
///   out of the driver's staging buffer "may not have completed", but it writes memory the call
///   just validated and cannot be what kills the context;
/// - device to device: "no host-side synchronization is performed": an ordinary op
///   ([`Call::Enqueue`]); memsets likewise (asynchronous with respect to the host unless the
///   target is pinned host memory or a Unified Memory region: treated as asynchronous always,
///   which never claims a completion);
/// - a direction cudablame could not tell (unified addressing, pointer types unknown): nothing
///   ([`Proves::Nothing`]), recorded as an ordinary op with a marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proves {
    CopyAndEarlier,
    Nothing,
}

/// The arguments of an enqueued op that the record keeps.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Launch {
    pub(crate) kind: OpKind,
    /// `CUfunction` or `CUkernel` handle (kernels), `CUgraphExec` (graphs), 0 otherwise.
    pub(crate) handle: usize,
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) shared_mem_bytes: u32,
    /// Bytes moved or set (copies and memsets; 0 when the descriptor is opaque).
    pub(crate) bytes: u64,
    pub(crate) stream: usize,
}

impl Call {
    pub(crate) fn kernel(
        f: CUfunction,
        grid: [c_uint; 3],
        block: [c_uint; 3],
        shmem: c_uint,
        stream: CUstream,
    ) -> Call {
        Call::Enqueue(Launch {
            kind: OpKind::Kernel,
            handle: f as usize,
            grid,
            block,
            shared_mem_bytes: shmem,
            bytes: 0,
            stream: stream as usize,
        })
    }

    /// `cuLaunchKernelEx`: grid, block, shared memory and stream come from the `CUlaunchConfig`.
    ///
    /// # Safety
    /// `config` is NULL or points to a `CUlaunchConfig` (the driver requires a valid one; a NULL
    /// one is passed through and its error observed like any other).
    pub(crate) unsafe fn kernel_ex(config: *const CUlaunchConfig, f: CUfunction) -> Call {
        // SAFETY: per the contract.
        match unsafe { config.as_ref() } {
            Some(c) => Call::kernel(
                f,
                [c.grid_dim_x, c.grid_dim_y, c.grid_dim_z],
                [c.block_dim_x, c.block_dim_y, c.block_dim_z],
                c.shared_mem_bytes,
                c.h_stream,
            ),
            None => Call::Observe { stream: None },
        }
    }

    pub(crate) fn graph(exec: CUgraphExec, stream: CUstream) -> Call {
        Call::Enqueue(Launch {
            kind: OpKind::Graph,
            handle: exec as usize,
            ..Self::transfer(0, stream)
        })
    }

    pub(crate) fn memcpy_async(bytes: usize, stream: CUstream) -> Call {
        Call::Enqueue(Self::transfer(bytes, stream))
    }

    pub(crate) fn memset_async(bytes: usize, stream: CUstream) -> Call {
        Call::Enqueue(Launch {
            kind: OpKind::Memset,
            ..Self::transfer(bytes, stream)
        })
    }

    fn transfer(bytes: usize, stream: CUstream) -> Launch {
        Launch {
            kind: OpKind::Memcpy,
            handle: 0,
            grid: [0; 3],
            block: [0; 3],
            shared_mem_bytes: 0,
            bytes: bytes as u64,
            stream: stream as usize,
        }
    }

    /// A blocking copy from `src` to `dst` on the variant's default stream, classified by
    /// [`Call::copy_between`].
    pub(crate) fn memcpy_sync(dst: Side, src: Side, bytes: usize) -> Call {
        Self::copy_between(dst, src, Self::transfer(bytes, std::ptr::null_mut()))
    }

    /// `cuMemcpy` (unified addressing): the sides from the pointers' memory types.
    pub(crate) fn memcpy_unified(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) -> Call {
        Self::memcpy_sync(side_of(dst), side_of(src), bytes)
    }

    /// `cuMemcpy2D/3D[Unaligned]`: the sides from the descriptor's memory types (`CUDA_MEMCPY2D`
    /// or `CUDA_MEMCPY3D`, `three_d`).
    ///
    /// # Safety
    /// `copy` is NULL or points to a descriptor of that kind (the driver requires a valid one).
    pub(crate) unsafe fn memcpy_described(copy: CopyDescriptor, three_d: bool) -> Call {
        // SAFETY: per the contract.
        let (dst, src) = unsafe { descriptor_sides(copy, three_d) };
        Self::memcpy_sync(dst, src, 0)
    }

    /// The table of [`Proves`]: what a blocking copy between `dst` and `src` means.
    pub(crate) fn copy_between(dst: Side, src: Side, launch: Launch) -> Call {
        match (dst, src) {
            (Side::Host, Side::Device) => Call::BlockingCopy {
                launch,
                proves: Proves::CopyAndEarlier,
            },
            (Side::Device, Side::Host) => Call::BlockingCopy {
                launch,
                proves: Proves::CopyAndEarlier,
            },
            (Side::Device, Side::Device) => Call::Enqueue(launch),
            // Host to host: no stream work at all.
            (Side::Host, Side::Host) => Call::Observe { stream: Some(0) },
            _ => Call::BlockingCopy {
                launch,
                proves: Proves::Nothing,
            },
        }
    }

    /// `cuMemcpyHtoD`: the copy and earlier work complete on success.
    pub(crate) fn copy_htod(bytes: usize) -> Call {
        Self::memcpy_sync(Side::Device, Side::Host, bytes)
    }
    /// `cuMemcpyDtoH`: the copy and earlier work complete on success.
    pub(crate) fn copy_dtoh(bytes: usize) -> Call {
        Self::memcpy_sync(Side::Host, Side::Device, bytes)
    }
    /// `cuMemcpyDtoD`, `cuMemcpyPeer`: an ordinary op of the default stream.
    pub(crate) fn copy_dtod(bytes: usize) -> Call {
        Self::memcpy_sync(Side::Device, Side::Device, bytes)
    }

    /// A memset on the variant's default stream: asynchronous (see [`Proves`]).
    pub(crate) fn memset_sync(bytes: usize) -> Call {
        Call::Enqueue(Launch {
            kind: OpKind::Memset,
            ..Self::transfer(bytes, std::ptr::null_mut())
        })
    }
    pub(crate) fn sync_context(ctx: CUcontext) -> Call {
        Call::SyncContext { ctx: ctx as usize }
    }
    pub(crate) fn sync_stream(stream: CUstream) -> Call {
        Call::SyncStream {
            stream: stream as usize,
        }
    }
    pub(crate) fn observe() -> Call {
        Call::Observe { stream: None }
    }
    pub(crate) fn observe_stream(stream: CUstream) -> Call {
        Call::Observe {
            stream: Some(stream as usize),
        }
    }
    pub(crate) fn observe_event() -> Call {
        Call::ObserveEvent { stream: None }
    }
    pub(crate) fn observe_event_wait(stream: CUstream) -> Call {
        Call::ObserveEvent {
            stream: Some(stream as usize),
        }
    }
    pub(crate) fn name_handle<T>(out: *mut T, name: *const std::ffi::c_char) -> Call {
        Call::NameHandle {
            out: out as usize,
            name: name as usize,
        }
    }
    pub(crate) fn alias_handle<T>(out: *mut T, of: CUkernel) -> Call {
        Call::AliasHandle {
            out: out as usize,
            of: of as usize,
        }
    }
    pub(crate) fn begin_capture(stream: CUstream) -> Call {
        Call::BeginCapture {
            stream: stream as usize,
            into: false,
        }
    }
    /// `cuStreamBeginCaptureToGraph`: the capture adds to an existing graph.
    pub(crate) fn begin_capture_into(stream: CUstream) -> Call {
        Call::BeginCapture {
            stream: stream as usize,
            into: true,
        }
    }
    pub(crate) fn create_graph(graph_out: *mut CUgraph) -> Call {
        Call::CreateGraph {
            graph_out: graph_out as usize,
        }
    }
    pub(crate) fn clone_graph(graph_out: *mut CUgraph, original: CUgraph) -> Call {
        Call::CloneGraph {
            graph_out: graph_out as usize,
            original: original as usize,
        }
    }
    pub(crate) fn destroy_graph(graph: CUgraph) -> Call {
        Call::DestroyGraph {
            graph: graph as usize,
        }
    }
    pub(crate) fn destroy_exec(exec: CUgraphExec) -> Call {
        Call::DestroyExec {
            exec: exec as usize,
        }
    }
    pub(crate) fn edit_graph(graph: CUgraph) -> Call {
        Call::EditGraph {
            graph: graph as usize,
        }
    }
    pub(crate) fn edit_node() -> Call {
        Call::EditNode
    }
    pub(crate) fn edit_exec(exec: CUgraphExec) -> Call {
        Call::EditExec {
            exec: exec as usize,
            enable_set: false,
        }
    }
    pub(crate) fn set_enabled(exec: CUgraphExec) -> Call {
        Call::EditExec {
            exec: exec as usize,
            enable_set: true,
        }
    }
    pub(crate) fn update_exec(exec: CUgraphExec, graph: CUgraph) -> Call {
        Call::UpdateExec {
            exec: exec as usize,
            graph: graph as usize,
        }
    }
    pub(crate) fn end_capture(stream: CUstream, graph_out: *mut CUgraph) -> Call {
        Call::EndCapture {
            stream: stream as usize,
            graph_out: graph_out as usize,
        }
    }
    pub(crate) fn instantiate(exec_out: *mut CUgraphExec, graph: CUgraph) -> Call {
        Call::Instantiate {
            exec_out: exec_out as usize,
            graph: graph as usize,
        }
    }
    pub(crate) fn unseen_work(stream: CUstream) -> Call {
        Call::UnseenWork {
            stream: stream as usize,
        }
    }
    pub(crate) fn destroy_context(ctx: CUcontext) -> Call {
        Call::DestroyContext { ctx: ctx as usize }
    }
    pub(crate) fn primary_reset(dev: CUdevice) -> Call {
        Call::PrimaryContext { dev, reset: true }
    }
    pub(crate) fn primary_release(dev: CUdevice) -> Call {
        Call::PrimaryContext { dev, reset: false }
    }
    pub(crate) fn destroy_stream(stream: CUstream) -> Call {
        Call::DestroyStream {
            stream: stream as usize,
        }
    }

    /// Whether the call is kept track of even while paused (`interpose::hook`): a capture's begin
    /// or end (else, after resuming, the capturing stream's next launch would get a progress
    /// marker inside the program's graph), what keeps the graph table right (a destroyed
    /// handle, a new or changed graph: else a launch after resuming would be named by a dead or
    /// stale kernel list), and the end of a stream or context (else a stream or context the
    /// driver gives the same handle after resuming would continue the dead one's record, its
    /// sequence numbers, and write its progress markers into the dead context's freed marker
    /// slab). None of them is on a hot path.
    pub(crate) fn kept_while_paused(&self) -> bool {
        matches!(
            self,
            Call::DestroyStream { .. }
                | Call::DestroyContext { .. }
                | Call::PrimaryContext { .. }
                | Call::BeginCapture { .. }
                | Call::EndCapture { .. }
                | Call::Instantiate { .. }
                | Call::CreateGraph { .. }
        ) || self.on_a_graph()
    }

    /// A call on an existing graph, executable graph or graph node (`cuGraphClone`,
    /// `cuGraphDestroy`, `cuGraphExecDestroy`, a node added, changed or destroyed,
    /// `cuGraphExecUpdate`): handles whose context cudablame does not know.
    fn on_a_graph(&self) -> bool {
        matches!(
            self,
            Call::CloneGraph { .. }
                | Call::DestroyGraph { .. }
                | Call::DestroyExec { .. }
                | Call::EditGraph { .. }
                | Call::EditNode
                | Call::EditExec { .. }
                | Call::UpdateExec { .. }
        )
    }

    /// The stream this call concerns, as a raw handle (`Some(0)` = the variant's default stream).
    pub(crate) fn stream(&self) -> Option<usize> {
        match *self {
            Call::Enqueue(l) => Some(l.stream),
            Call::BlockingCopy { .. } => Some(0),
            Call::SyncStream { stream }
            | Call::BeginCapture { stream, .. }
            | Call::EndCapture { stream, .. }
            | Call::DestroyStream { stream }
            | Call::UnseenWork { stream } => Some(stream),
            Call::Observe { stream } | Call::ObserveEvent { stream } => stream,
            Call::SyncContext { .. }
            | Call::NameHandle { .. }
            | Call::AliasHandle { .. }
            | Call::Instantiate { .. }
            | Call::CreateGraph { .. }
            | Call::CloneGraph { .. }
            | Call::DestroyGraph { .. }
            | Call::DestroyExec { .. }
            | Call::EditGraph { .. }
            | Call::EditNode
            | Call::EditExec { .. }
            | Call::UpdateExec { .. }
            | Call::DestroyContext { .. }
            | Call::PrimaryContext { .. } => None,
        }
    }

    /// The context whose error this call reports: the context of the stream it concerns, the
    /// context it names, a context of the device it names, else the current one (0: unknown,
    /// every context judged). A call on a handle of another context (a module, an executable
    /// graph) returns that context's sticky error, whichever is current: such a handle's
    /// context is unknown (0). Found by a break-it review: `cuDevicePrimaryCtxReset_v2(0)` or
    /// `cuModuleGetFunction` on device 0's module, with device 1's context current, returned
    /// device 0's 700 and cudablame said `exact` on device 1's one healthy kernel.
    pub(crate) fn context(&self, ep: EntryPoint) -> usize {
        let Some(driver) = real::driver() else {
            return 0;
        };
        match *self {
            Call::SyncContext { ctx } | Call::DestroyContext { ctx } if ctx != 0 => ctx,
            // Device `dev`'s primary context, which need not be the current one.
            Call::PrimaryContext { dev, .. } => streams::a_context_on(dev),
            // The event's context, which cudablame does not know (0: judge every context);
            // likewise a module's, a kernel's, a graph's or an executable graph's.
            Call::ObserveEvent { .. } | Call::NameHandle { .. } | Call::AliasHandle { .. } => 0,
            _ if self.on_a_graph() => 0,
            // A stream handle whose context is unknown: 0, never the current context's (it may
            // be another device's: `streams::context_if_known`).
            _ => match self.stream() {
                Some(raw) => streams::context_if_known(
                    driver,
                    StreamId::resolve(raw, ep.per_thread_default(), crate::threads::thread_id()),
                ),
                None => driver.current_context(),
            },
        }
    }
}

/// The side of a unified address (`cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)`);
/// [`Side::Unknown`] when the driver does not say (no driver, an error, managed memory).
pub(crate) fn side_of(ptr: CUdeviceptr) -> Side {
    real::driver().map_or(Side::Unknown, |d| d.memory_side(ptr))
}

/// `CUmemorytype` (`cuda.h`) to a side; `CU_MEMORYTYPE_UNIFIED` (4) asks about `unified`.
fn side_of_type(memory_type: c_uint, unified: CUdeviceptr) -> Side {
    match memory_type {
        1 => Side::Host,
        2 | 3 => Side::Device,
        4 => side_of(unified),
        _ => Side::Unknown,
    }
}

/// `(dst, src)` sides of a `CUDA_MEMCPY2D` or `CUDA_MEMCPY3D` (`three_d`) descriptor.
///
/// # Safety
/// `copy` is NULL or points to a descriptor of that kind.
pub(crate) unsafe fn descriptor_sides(copy: CopyDescriptor, three_d: bool) -> (Side, Side) {
    if copy.is_null() {
        return (Side::Unknown, Side::Unknown);
    }
    // Byte offsets in cuda.h's layout (x86-64 and aarch64, LP64): CUDA_MEMCPY2D has
    // srcMemoryType at 16, srcDevice at 32, dstMemoryType at 72, dstDevice at 88; CUDA_MEMCPY3D
    // has them at 32, 48, 120, 136.
    let (src_type, src_dev, dst_type, dst_dev) = if three_d {
        (32, 48, 120, 136)
    } else {
        (16, 32, 72, 88)
    };
    let base = copy as *const u8;
    // SAFETY: per the contract, the offsets lie inside the descriptor; unaligned reads.
    let read_type = |at: usize| unsafe { (base.add(at) as *const c_uint).read_unaligned() };
    // SAFETY: as for `read_type`.
    let read_ptr = |at: usize| unsafe { (base.add(at) as *const u64).read_unaligned() };
    (
        side_of_type(read_type(dst_type), read_ptr(dst_dev)),
        side_of_type(read_type(src_type), read_ptr(src_dev)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proves(call: Call) -> Option<Proves> {
        match call {
            Call::BlockingCopy { proves, .. } => Some(proves),
            _ => None,
        }
    }

    #[test]
    fn blocking_copies_follow_the_synchronization_table() {
        let l = Call::transfer(16, std::ptr::null_mut());
        let between = |d, s| Call::copy_between(d, s, l);
        assert_eq!(
            proves(between(Side::Host, Side::Device)),
            Some(Proves::CopyAndEarlier)
        );
        assert_eq!(
            proves(between(Side::Device, Side::Host)),
            Some(Proves::CopyAndEarlier)
        );
        assert!(matches!(
            between(Side::Device, Side::Device),
            Call::Enqueue(_)
        ));
        assert!(matches!(
            between(Side::Host, Side::Host),
            Call::Observe { .. }
        ));
        for (d, s) in [
            (Side::Unknown, Side::Device),
            (Side::Host, Side::Unknown),
            (Side::Unknown, Side::Unknown),
        ] {
            assert_eq!(proves(between(d, s)), Some(Proves::Nothing), "{d:?} {s:?}");
        }
        assert!(matches!(Call::memset_sync(64), Call::Enqueue(_)));
        assert!(matches!(Call::copy_dtod(64), Call::Enqueue(_)));
    }

    #[test]
    fn descriptor_memory_types_are_read_from_cuda_h_offsets() {
        // CUDA_MEMCPY2D: srcMemoryType at 16, dstMemoryType at 72 (128 bytes in all).
        let mut d2 = [0u8; 128];
        d2[16..20].copy_from_slice(&2u32.to_ne_bytes()); // device
        d2[72..76].copy_from_slice(&1u32.to_ne_bytes()); // host
                                                         // SAFETY: a buffer as large as the descriptor.
        let sides = unsafe { descriptor_sides(d2.as_ptr() as CopyDescriptor, false) };
        assert_eq!(sides, (Side::Host, Side::Device));
        // CUDA_MEMCPY3D: srcMemoryType at 32, dstMemoryType at 120 (200 bytes in all); array
        // counts as device, unified without a driver is unknown.
        let mut d3 = [0u8; 200];
        d3[32..36].copy_from_slice(&3u32.to_ne_bytes());
        d3[120..124].copy_from_slice(&4u32.to_ne_bytes());
        // SAFETY: as above.
        let sides = unsafe { descriptor_sides(d3.as_ptr() as CopyDescriptor, true) };
        assert_eq!(sides, (Side::Unknown, Side::Device));
        // SAFETY: NULL is allowed.
        let none = unsafe { descriptor_sides(std::ptr::null(), true) };
        assert_eq!(none, (Side::Unknown, Side::Unknown));
    }
}
