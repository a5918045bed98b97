//! Recording: what each hooked call means ([`Call`]), the op records kept per stream, and the
//! progress markers that prove which ops completed.
//!
//! Hot path per recorded op (a launch, an async copy or memset, a graph launch): the Python frames
//! (CPython only), look the stream up (thread-local cache), lock that stream, make the real call,
//! push the op with the next sequence number and a copy of the top of the launching thread's
//! stack (unwound only if a report needs it: `stack::copy`), enqueue
//! `cuStreamWriteValue64(marker slot, seq)` behind it, unlock. The lock spans the real call so
//! that sequence numbers follow the order in which ops enter the stream even when several threads
//! launch onto one stream. Nothing on this path allocates once the stream's ring is full.

pub mod cost;
pub mod graphs;
pub mod names;
pub mod streams;

use crate::config::{self, StackMode};
use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use crate::real;
use crate::stack::{EntryRegs, NativeStack, StackRef};
use std::ffi::c_uint;
use std::sync::atomic::{AtomicUsize, Ordering};
pub use streams::{StreamId, StreamState, StreamView};

pub use cudablame_report::model::OpKind;

/// What a hooked call does, derived from its arguments before the real call (see the list in
/// `cuda::entry_points`). Stream handles are raw: `0` means the variant's default stream.
#[derive(Clone, Copy, Debug)]
pub enum Call {
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
    BeginCapture {
        stream: usize,
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
    /// Work enqueued on `stream` that cudablame does not record as an op (`cuLaunchHostFunc`):
    /// it may sit between recorded ops, so verdicts on that stream are capped below exact.
    UnseenWork {
        stream: usize,
    },
    /// `cuCtxDestroy`: on success the context, its streams and marker slab are forgotten.
    DestroyContext {
        ctx: usize,
    },
    /// `cuDevicePrimaryCtxReset` (`reset`: always destroys) / `cuDevicePrimaryCtxRelease` (destroys
    /// with the last reference): the primary context of `dev` is forgotten once it is gone.
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
pub enum Proves {
    CopyAndEarlier,
    Nothing,
}

/// The arguments of an enqueued op that the record keeps.
#[derive(Clone, Copy, Debug)]
pub struct Launch {
    pub kind: OpKind,
    /// `CUfunction` or `CUkernel` handle (kernels), `CUgraphExec` (graphs), 0 otherwise.
    pub handle: usize,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
    /// Bytes moved or set (copies and memsets; 0 when the descriptor is opaque).
    pub bytes: u64,
    pub stream: usize,
}

impl Call {
    pub fn kernel(
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
    pub unsafe fn kernel_ex(config: *const CUlaunchConfig, f: CUfunction) -> Call {
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

    pub fn graph(exec: CUgraphExec, stream: CUstream) -> Call {
        Call::Enqueue(Launch {
            kind: OpKind::Graph,
            handle: exec as usize,
            ..Self::transfer(0, stream)
        })
    }

    pub fn memcpy_async(bytes: usize, stream: CUstream) -> Call {
        Call::Enqueue(Self::transfer(bytes, stream))
    }

    pub fn memset_async(bytes: usize, stream: CUstream) -> Call {
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
    pub fn memcpy_sync(dst: Side, src: Side, bytes: usize) -> Call {
        Self::copy_between(dst, src, Self::transfer(bytes, std::ptr::null_mut()))
    }

    /// `cuMemcpy` (unified addressing): the sides from the pointers' memory types.
    pub fn memcpy_unified(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize) -> Call {
        Self::memcpy_sync(side_of(dst), side_of(src), bytes)
    }

    /// `cuMemcpy2D/3D[Unaligned]`: the sides from the descriptor's memory types (`CUDA_MEMCPY2D`
    /// or `CUDA_MEMCPY3D`, `three_d`).
    ///
    /// # Safety
    /// `copy` is NULL or points to a descriptor of that kind (the driver requires a valid one).
    pub unsafe fn memcpy_described(copy: CopyDescriptor, three_d: bool) -> Call {
        // SAFETY: per the contract.
        let (dst, src) = unsafe { descriptor_sides(copy, three_d) };
        Self::memcpy_sync(dst, src, 0)
    }

    /// The table of [`Proves`]: what a blocking copy between `dst` and `src` means.
    pub fn copy_between(dst: Side, src: Side, launch: Launch) -> Call {
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
    pub fn copy_htod(bytes: usize) -> Call {
        Self::memcpy_sync(Side::Device, Side::Host, bytes)
    }
    /// `cuMemcpyDtoH`: the copy and earlier work complete on success.
    pub fn copy_dtoh(bytes: usize) -> Call {
        Self::memcpy_sync(Side::Host, Side::Device, bytes)
    }
    /// `cuMemcpyDtoD`, `cuMemcpyPeer`: an ordinary op of the default stream.
    pub fn copy_dtod(bytes: usize) -> Call {
        Self::memcpy_sync(Side::Device, Side::Device, bytes)
    }

    /// A memset on the variant's default stream: asynchronous (see [`Proves`]).
    pub fn memset_sync(bytes: usize) -> Call {
        Call::Enqueue(Launch {
            kind: OpKind::Memset,
            ..Self::transfer(bytes, std::ptr::null_mut())
        })
    }
    pub fn sync_context(ctx: CUcontext) -> Call {
        Call::SyncContext { ctx: ctx as usize }
    }
    pub fn sync_stream(stream: CUstream) -> Call {
        Call::SyncStream {
            stream: stream as usize,
        }
    }
    pub fn observe() -> Call {
        Call::Observe { stream: None }
    }
    pub fn observe_stream(stream: CUstream) -> Call {
        Call::Observe {
            stream: Some(stream as usize),
        }
    }
    pub fn name_handle<T>(out: *mut T, name: *const std::ffi::c_char) -> Call {
        Call::NameHandle {
            out: out as usize,
            name: name as usize,
        }
    }
    pub fn alias_handle<T>(out: *mut T, of: CUkernel) -> Call {
        Call::AliasHandle {
            out: out as usize,
            of: of as usize,
        }
    }
    pub fn begin_capture(stream: CUstream) -> Call {
        Call::BeginCapture {
            stream: stream as usize,
        }
    }
    pub fn end_capture(stream: CUstream, graph_out: *mut CUgraph) -> Call {
        Call::EndCapture {
            stream: stream as usize,
            graph_out: graph_out as usize,
        }
    }
    pub fn instantiate(exec_out: *mut CUgraphExec, graph: CUgraph) -> Call {
        Call::Instantiate {
            exec_out: exec_out as usize,
            graph: graph as usize,
        }
    }
    pub fn unseen_work(stream: CUstream) -> Call {
        Call::UnseenWork {
            stream: stream as usize,
        }
    }
    pub fn destroy_context(ctx: CUcontext) -> Call {
        Call::DestroyContext { ctx: ctx as usize }
    }
    pub fn primary_reset(dev: CUdevice) -> Call {
        Call::PrimaryContext { dev, reset: true }
    }
    pub fn primary_release(dev: CUdevice) -> Call {
        Call::PrimaryContext { dev, reset: false }
    }
    pub fn destroy_stream(stream: CUstream) -> Call {
        Call::DestroyStream {
            stream: stream as usize,
        }
    }

    /// The stream this call concerns, as a raw handle (`Some(0)` = the variant's default stream).
    pub fn stream(&self) -> Option<usize> {
        match *self {
            Call::Enqueue(l) => Some(l.stream),
            Call::BlockingCopy { .. } => Some(0),
            Call::SyncStream { stream }
            | Call::BeginCapture { stream }
            | Call::EndCapture { stream, .. }
            | Call::DestroyStream { stream }
            | Call::UnseenWork { stream } => Some(stream),
            Call::Observe { stream } => stream,
            Call::SyncContext { .. }
            | Call::NameHandle { .. }
            | Call::AliasHandle { .. }
            | Call::Instantiate { .. }
            | Call::DestroyContext { .. }
            | Call::PrimaryContext { .. } => None,
        }
    }

    /// The context whose error this call reports: the context of the stream it concerns, the
    /// context it names, else the current one (0: unknown).
    pub fn context(&self, ep: EntryPoint) -> usize {
        let Some(driver) = real::driver() else {
            return 0;
        };
        match *self {
            Call::SyncContext { ctx } | Call::DestroyContext { ctx } if ctx != 0 => ctx,
            _ => match self.stream() {
                Some(raw) => streams::context_of(
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
pub fn side_of(ptr: CUdeviceptr) -> Side {
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
pub unsafe fn descriptor_sides(copy: CopyDescriptor, three_d: bool) -> (Side, Side) {
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

/// One recorded op: plain data, copied into the stream's ring. Sizes in bytes, times in ns since
/// the Unix epoch (`CLOCK_REALTIME`, comparable across processes of one host).
#[derive(Clone, Copy)]
pub struct OpRecord {
    /// Position in its stream, from 1; the progress marker of the stream holds the last completed one.
    pub seq: u64,
    pub launch: Launch,
    pub entry_point: EntryPoint,
    pub stream: StreamId,
    pub context: usize,
    pub device: i32,
    /// OS thread id (`gettid`) of the launching thread.
    pub thread: u32,
    pub time_ns: u64,
    /// A synchronous copy or memset: complete when recorded, never a culprit candidate.
    pub synchronous: bool,
    /// Its progress marker was enqueued right behind it. If op N lacks one, a fault in N+1 leaves
    /// the marker at N-1, so "first unfinished" only narrows the culprit to N..=N+1.
    pub marked: bool,
    /// The native launch stack (a copy in the ring until a snapshot unwinds it).
    pub stack: StackRef,
    /// Python frames of the launching thread (CPython only; `stack::python`).
    pub python: crate::stack::python::PythonStack,
}

/// Streams with an active capture (begun and not yet ended), process-wide. While it is 0 no
/// stream can be capturing and the per-launch `cuStreamIsCapturing` check is skipped.
static CAPTURES_ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Forgets every stream, marker slot, kernel name and capture of the parent (the
/// `pthread_atfork` child handler, see `safety`): the child never uses its parent's contexts.
pub fn forget_after_fork() {
    streams::clear();
    names::clear();
    graphs::clear();
    CAPTURES_ACTIVE.store(0, Ordering::Relaxed);
}

/// Wall-clock time in ns (`CLOCK_REALTIME`).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Runs an enqueueing call: records it and enqueues its progress marker when the real call
/// succeeds. Returns the real result, and the op that was not enqueued when it failed (a launch
/// error names that launch as the culprit).
pub fn enqueue(
    ep: EntryPoint,
    launch: Launch,
    entry: &EntryRegs,
    real_call: impl FnOnce() -> CUresult,
) -> (CUresult, Option<OpRecord>) {
    let Some(driver) = real::driver() else {
        return (real_call(), None);
    };
    let entered = cost::start();
    let prepared = crate::safety::guarded(|| prepare(driver, ep, launch));
    let Some((state, mut op)) = prepared else {
        return (real_call(), None);
    };
    let mut ring = state.ops.lock();
    let called = cost::start();
    let rc = real_call();
    cost::add(cost::Phase::RealCall, called);
    if rc != CUDA_SUCCESS {
        drop(ring);
        // Cold: the launch failed by itself and will be reported with its live stack.
        op.stack =
            crate::safety::guarded(|| keep_live_stack(op.time_ns, entry)).unwrap_or_default();
        return (rc, Some(op));
    }
    let cfg = config::get();
    let mut copied = 0;
    crate::safety::guarded(|| {
        if CAPTURES_ACTIVE.load(Ordering::Relaxed) > 0 && driver.is_capturing(state.id.handle()) {
            // The op went into a graph being captured: it did not run now.
            op.stack = keep_live_stack(op.time_ns, entry);
            graphs::captured(op);
            return;
        }
        let copy = stack_copy(cfg, entry);
        copied = copy.map_or(0, |c| c.1);
        op.seq = ring.push(op, cfg.ring, copy, &|| state.completed_now());
        state.issued.store(op.seq, Ordering::Release);
        let marking = cost::start();
        if state.write_marker(driver, op.seq) {
            ring.mark_newest();
        }
        cost::add(cost::Phase::Marker, marking);
    });
    drop(ring);
    cost::add(cost::Phase::Total, entered);
    cost::op(copied, op.python.len());
    (rc, None)
}

/// Cold paths (a failed launch, a captured op): the live native stack from the program's call
/// into the hooked entry point (`entry`) outwards, unwound now and kept, under the configured
/// `CUDABLAME_STACK` mode.
fn keep_live_stack(now_ns: u64, entry: &EntryRegs) -> StackRef {
    crate::stack::keep(live_stack(now_ns, entry))
}

/// The live native stack under the configured `CUDABLAME_STACK` mode (empty when off).
fn live_stack(now_ns: u64, entry: &EntryRegs) -> NativeStack {
    let cfg = config::get();
    match cfg.stack {
        StackMode::Native => NativeStack::capture(cfg.stack_depth, now_ns, Some(entry)),
        StackMode::Off => NativeStack::EMPTY,
    }
}

/// What a recorded op's stack copy is taken from under the configured `CUDABLAME_STACK` mode:
/// the entry point's registers and `CUDABLAME_STACK_BYTES` (none when off).
fn stack_copy<'a>(cfg: &config::Config, entry: &'a EntryRegs) -> Option<(&'a EntryRegs, usize)> {
    (cfg.stack == StackMode::Native).then_some((entry, cfg.stack_bytes))
}

fn prepare(
    driver: &'static real::Driver,
    ep: EntryPoint,
    launch: Launch,
) -> (std::sync::Arc<StreamState>, OpRecord) {
    crate::config::test_panic(crate::config::PanicPoint::Record);
    let time_ns = now_ns();
    let pythoning = cost::start();
    let python = crate::stack::python::PythonStack::capture_configured();
    cost::add(cost::Phase::Python, pythoning);
    let thread = crate::threads::thread_id();
    if launch.kind == OpKind::Kernel {
        names::note(driver, launch.handle);
    }
    let id = StreamId::resolve(launch.stream, ep.per_thread_default(), thread);
    let state = streams::lookup(driver, id);
    let op = OpRecord {
        seq: 0,
        launch,
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
    };
    (state, op)
}

/// Records a blocking copy that succeeded: as a completed op of its stream when its return
/// proves it complete (`complete`; no stack: a completed op is never a culprit), else as an
/// ordinary op with a stack copy, followed by a progress marker. The record comes after the call
/// (the ring lock is not held while the copy blocks), so an op another thread enqueued meanwhile
/// may get the lower sequence number: markers then still only prove ops that preceded them.
fn record_blocking_copy(ep: EntryPoint, launch: Launch, complete: bool, entry: &EntryRegs) {
    let Some(driver) = real::driver() else { return };
    let (state, mut op) = prepare(driver, ep, launch);
    op.synchronous = complete;
    let cfg = config::get();
    let copy = stack_copy(cfg, entry).filter(|_| !complete);
    let mut ops = state.ops.lock();
    op.seq = ops.push(op, cfg.ring, copy, &|| state.completed_now());
    state.issued.store(op.seq, Ordering::Release);
    if !complete && state.write_marker(driver, op.seq) {
        ops.mark_newest();
    }
}

/// What a call must remember before the real call: the streams a synchronization waits for and
/// how many ops each had issued; the context a primary-context release or reset may destroy.
pub struct SyncMark(Vec<(std::sync::Arc<StreamState>, u64)>, usize);

/// Before a non-enqueueing call: note the streams a synchronization covers.
pub fn before(ep: EntryPoint, call: &Call) -> Option<SyncMark> {
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
            Some(SyncMark(vec![issued(s)], 0))
        }
        Call::SyncContext { ctx } => {
            let ctx = if ctx != 0 {
                ctx
            } else {
                driver.current_context()
            };
            Some(SyncMark(
                streams::all()
                    .into_iter()
                    .filter(|s| s.context == ctx)
                    .map(issued)
                    .collect(),
                0,
            ))
        }
        Call::BeginCapture { .. } => {
            // Raised before the real call: from the moment the stream may be capturing, every
            // launch checks `cuStreamIsCapturing` (lowered again in `after` on failure).
            CAPTURES_ACTIVE.fetch_add(1, Ordering::AcqRel);
            None
        }
        Call::PrimaryContext { dev, .. } => {
            Some(SyncMark(Vec::new(), driver.active_primary_context(dev)))
        }
        _ => None,
    }
}

/// After a non-enqueueing call: a successful synchronization proves every op it covered completed;
/// capture begin/end and stream destruction keep the tables right.
pub fn after(ep: EntryPoint, call: &Call, mark: Option<SyncMark>, rc: CUresult, entry: &EntryRegs) {
    if rc == CUDA_SUCCESS {
        if let Some(SyncMark(list, _)) = &mark {
            for &(ref s, n) in list {
                s.host_completed.fetch_max(n, Ordering::AcqRel);
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
        Call::BeginCapture { stream } => {
            if let Some(driver) = real::driver() {
                let thread = crate::threads::thread_id();
                let id = StreamId::resolve(stream, ep.per_thread_default(), thread);
                let now = now_ns();
                let stack = live_stack(now, entry);
                graphs::begin(streams::context_of(driver, id), id, stack, thread);
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
        Call::DestroyContext { ctx } if rc == CUDA_SUCCESS => streams::forget_context(ctx),
        Call::PrimaryContext { dev, reset } if rc == CUDA_SUCCESS => {
            let ctx = mark.as_ref().map_or(0, |m| m.1);
            let gone = reset || real::driver().and_then(|d| d.primary_active(dev)) == Some(false);
            match (gone, ctx) {
                (false, _) => {}
                // The handle could not be learned before the call: forget the device's contexts
                // (losing some history is harmless; a slot in unregistered memory is not).
                (true, 0) => streams::forget_device(dev),
                (true, ctx) => streams::forget_context(ctx),
            }
        }
        _ => {}
    }
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
