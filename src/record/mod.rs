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

pub use crate::report::model::OpKind;

/// What a hooked call does, derived from its arguments before the real call (see the list in
/// `cuda::entry_points`). Stream handles are raw: `0` means the variant's default stream.
#[derive(Clone, Copy, Debug)]
pub enum Call {
    /// Work enqueued on a stream: recorded and followed by a progress marker.
    Enqueue(Launch),
    /// A synchronous copy or memset on the variant's default stream (`stream` is 0): it has
    /// completed, with every earlier op of that stream, when it returns success.
    Synchronous(Launch),
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

    pub fn memcpy_sync(bytes: usize) -> Call {
        Call::Synchronous(Self::transfer(bytes, std::ptr::null_mut()))
    }
    pub fn memset_sync(bytes: usize) -> Call {
        Call::Synchronous(Launch {
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
    pub fn destroy_stream(stream: CUstream) -> Call {
        Call::DestroyStream {
            stream: stream as usize,
        }
    }

    /// The stream this call concerns, as a raw handle (`Some(0)` = the variant's default stream).
    pub fn stream(&self) -> Option<usize> {
        match *self {
            Call::Enqueue(l) => Some(l.stream),
            Call::Synchronous(_) => Some(0),
            Call::SyncStream { stream }
            | Call::BeginCapture { stream }
            | Call::EndCapture { stream, .. }
            | Call::DestroyStream { stream } => Some(stream),
            Call::Observe { stream } => stream,
            Call::SyncContext { .. }
            | Call::NameHandle { .. }
            | Call::AliasHandle { .. }
            | Call::Instantiate { .. } => None,
        }
    }
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
    // The forking thread has a new OS id in the child.
    let _ = TID.try_with(|t| t.set(0));
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

thread_local! {
    static TID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The calling thread's OS id, cached.
pub fn thread_id() -> u32 {
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(unsafe { libc::gettid() } as u32);
            crate::threads::bind_current(t.get());
        }
        t.get()
    })
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
    let prepared = crate::guarded(|| prepare(driver, ep, launch));
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
        op.stack = crate::guarded(|| keep_live_stack(op.time_ns, entry)).unwrap_or_default();
        return (rc, Some(op));
    }
    let cfg = config::get();
    let mut copied = 0;
    crate::guarded(|| {
        if CAPTURES_ACTIVE.load(Ordering::Relaxed) > 0 && driver.is_capturing(state.id.handle()) {
            // The op went into a graph being captured: it did not run now.
            op.stack = keep_live_stack(op.time_ns, entry);
            graphs::captured(op);
            return;
        }
        let copy = (cfg.stack == StackMode::Native).then_some((entry, cfg.stack_bytes));
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
    let cfg = config::get();
    match cfg.stack {
        StackMode::Native => {
            crate::stack::keep(NativeStack::capture(cfg.stack_depth, now_ns, Some(entry)))
        }
        StackMode::Off => StackRef::None,
    }
}

fn prepare(
    driver: &'static real::Driver,
    ep: EntryPoint,
    launch: Launch,
) -> (std::sync::Arc<StreamState>, OpRecord) {
    crate::safety::test_panic(crate::safety::PanicPoint::Record);
    let time_ns = now_ns();
    let pythoning = cost::start();
    let python = crate::stack::python::PythonStack::capture_configured();
    cost::add(cost::Phase::Python, pythoning);
    let thread = thread_id();
    if launch.kind == OpKind::Kernel {
        names::note(driver, launch.handle);
    }
    let context = driver.current_context();
    let id = StreamId::resolve(launch.stream, ep.per_thread_default(), thread);
    let state = streams::lookup(driver, context, id);
    let op = OpRecord {
        seq: 0,
        launch,
        entry_point: ep,
        stream: id,
        context,
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

/// Records a synchronous copy or memset that succeeded, as a completed op of its stream (no
/// stack: a completed op is never a culprit).
fn record_synchronous(ep: EntryPoint, launch: Launch) {
    let Some(driver) = real::driver() else { return };
    let (state, mut op) = prepare(driver, ep, launch);
    op.synchronous = true;
    let mut ring = state.ops.lock();
    op.seq = ring.push(op, config::get().ring, None, &|| state.completed_now());
    state.issued.store(op.seq, Ordering::Release);
}

/// What a synchronizing call must remember before the real call: the streams it waits for and
/// how many ops each had issued.
pub struct SyncMark(Vec<(std::sync::Arc<StreamState>, u64)>);

/// Before a non-enqueueing call: note the streams a synchronization covers.
pub fn before(ep: EntryPoint, call: &Call) -> Option<SyncMark> {
    crate::safety::test_panic(crate::safety::PanicPoint::Record);
    let driver = real::driver()?;
    let issued = |s: std::sync::Arc<StreamState>| {
        let n = s.issued.load(Ordering::Acquire);
        (s, n)
    };
    match *call {
        Call::Synchronous(_) | Call::SyncStream { .. } => {
            let raw = call.stream().unwrap_or(0);
            let id = StreamId::resolve(raw, ep.per_thread_default(), thread_id());
            let s = streams::find(driver.current_context(), id)?;
            Some(SyncMark(vec![issued(s)]))
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
            ))
        }
        _ => None,
    }
}

/// After a non-enqueueing call: a successful synchronization proves every op it covered completed;
/// capture begin/end and stream destruction keep the tables right.
pub fn after(ep: EntryPoint, call: &Call, mark: Option<SyncMark>, rc: CUresult, entry: &EntryRegs) {
    if rc == CUDA_SUCCESS {
        if let Some(SyncMark(list)) = mark {
            for (s, n) in list {
                s.host_completed.fetch_max(n, Ordering::AcqRel);
            }
        }
    }
    match *call {
        Call::Synchronous(launch) if rc == CUDA_SUCCESS => record_synchronous(ep, launch),
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
        Call::BeginCapture { stream } if rc == CUDA_SUCCESS => {
            CAPTURES_ACTIVE.fetch_add(1, Ordering::Relaxed);
            if let Some(driver) = real::driver() {
                let thread = thread_id();
                let id = StreamId::resolve(stream, ep.per_thread_default(), thread);
                let now = now_ns();
                let cfg = config::get();
                let stack = match cfg.stack {
                    StackMode::Native => NativeStack::capture(cfg.stack_depth, now, Some(entry)),
                    StackMode::Off => NativeStack::EMPTY,
                };
                graphs::begin(driver.current_context(), id, stack, thread, now);
            }
        }
        // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901) still ends the capture.
        Call::EndCapture { stream, graph_out } if rc == CUDA_SUCCESS || rc == 901 => {
            let _ = CAPTURES_ACTIVE
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            if let Some(driver) = real::driver() {
                let id = StreamId::resolve(stream, ep.per_thread_default(), thread_id());
                // SAFETY: on success the driver wrote the graph through `graph_out`.
                let graph = if rc == CUDA_SUCCESS && graph_out != 0 {
                    unsafe { *(graph_out as *const usize) }
                } else {
                    0
                };
                graphs::end(driver.current_context(), id, graph);
            }
        }
        Call::Instantiate { exec_out, graph } if rc == CUDA_SUCCESS && exec_out != 0 => {
            // SAFETY: on success the driver wrote the executable graph through `exec_out`.
            graphs::instantiate(graph, unsafe { *(exec_out as *const usize) });
        }
        Call::DestroyStream { stream } if rc == CUDA_SUCCESS => {
            if let Some(driver) = real::driver() {
                let id = StreamId::resolve(stream, ep.per_thread_default(), thread_id());
                streams::retire(driver.current_context(), id);
            }
        }
        _ => {}
    }
}
