//! # fakecuda — a fake `libcuda.so.1` for GPU-free tests of cudablame
//!
//! This cdylib exports a subset of the CUDA 13 driver API with the exact C ABI of `cuda.h`, and
//! behaves like the real driver where it matters for naming the culprit of an asynchronous
//! error: streams are executed asynchronously by worker threads, kernel faults are sticky and
//! poison the context, `cuGetProcAddress` routes by version and per-thread-stream flag,
//! `cuStreamWriteValue*` really write host memory, kernels have names, and stream capture
//! follows CUDA's invalidation rules. The build sets the soname `libcuda.so.1`; tests copy
//! `target/release/libfakecuda.so` to `<dir>/libcuda.so.1` and put `<dir>` on `LD_LIBRARY_PATH`.
//! The C declarations are in `shim-tests/programs/cuda_min.h`; `shim-tests/programs/fake_smoke.c`
//! checks the semantics below without any shim (`shim-tests/tests/fake_driver.rs` runs it).
//!
//! ## Module images
//!
//! `cuModuleLoadData`, `cuModuleLoadDataEx`, `cuLibraryLoadData` take a NUL-terminated text image
//! (real PTX works); `cuModuleLoad` reads one from a file (`CUDA_ERROR_FILE_NOT_FOUND` if it
//! cannot). Two kinds of lines matter, everything else is ignored:
//!
//! * a line containing `.entry NAME` declares kernel NAME; the name ends at `(` or whitespace
//!   (`.visible .entry oob_write(` declares `oob_write`; mangled names work as is);
//! * `// fake: NAME key=value ...` sets the behaviour of kernel NAME (and declares it, so an
//!   image may consist of `// fake:` lines only). Numbers are decimal or `0x` hex. Keys:
//!   - `delay_us=N`: the kernel runs N µs on its stream's worker (default 0). The sleep ends
//!     early if the context is poisoned meanwhile (a fault kills all running kernels);
//!   - `fault=CODE`: executing the kernel sets the context's sticky error to CODE (700 illegal
//!     address, 710 assert, 716 misaligned address, 719 launch failed, ...), after the delay;
//!   - `fault_on=K`: only the K-th execution of this kernel (1-based, counted per `CUfunction`,
//!     i.e. per kernel per loaded module) faults; the others succeed. Needs `fault=`;
//!   - `launch_error=CODE`: every launch returns CODE synchronously (not sticky) and enqueues
//!     nothing (1 invalid value, 9 invalid configuration, 701 out of resources, ...);
//!   - `inline=1`: a launch onto an idle stream (nothing queued or running, no implicit
//!     dependency) executes the kernel inside the launch call, as a tiny kernel on an idle GPU
//!     nearly does; otherwise it is queued as usual. For benchmarks of the launching thread
//!     (`programs/py_bench.py`): no stream worker competes for the CPU;
//!   - `assert=COND`: when the kernel faults, first print what the real driver prints for a
//!     device-side assert, through `vfprintf(stdout, ...)` from inside this library, one line per
//!     failing thread (two): `fake_kernels.cu:42: NAME: block: [0,0,0], thread: [T,0,0]
//!     Assertion `COND` failed.` (COND has no spaces; use with `fault=710`).
//! * `// fake: module_error=CODE` makes loading the image fail with CODE.
//!
//! An unknown key or malformed value in a `// fake:` line fails the load with
//! `CUDA_ERROR_INVALID_IMAGE` (200) and a message on stderr.
//!
//! `cuModuleGetFunction` / `cuLibraryGetKernel` return the same handle for the same name every
//! time (`CUDA_ERROR_NOT_FOUND` for an undeclared name); a `CUkernel` is accepted wherever a
//! `CUfunction` is. `cuFuncGetName` / `cuKernelGetName` return a stable NUL-terminated name and
//! keep working after a sticky error.
//!
//! ## Devices and contexts
//!
//! `cuInit` must come first (else `CUDA_ERROR_NOT_INITIALIZED`, 3). There are 2 devices
//! (`FAKE_CUDA_DEVICES=N` overrides; 0 makes `cuInit` return `CUDA_ERROR_NO_DEVICE`), named
//! "Fake GPU N", compute capability 9.0. Each context has its own streams and its own sticky
//! error, which a fault in any context of the same device sets (as on the H200: a fault stops
//! the device); the current context is per thread (a stack: `cuCtxPushCurrent_v2` / `cuCtxPopCurrent_v2`
//! / `cuCtxSetCurrent`). Calls that need a context fail with `CUDA_ERROR_INVALID_CONTEXT` (201)
//! when none is current, and with `CUDA_ERROR_CONTEXT_IS_DESTROYED` (709) when the current one was
//! destroyed. Primary contexts are reference counted; the last release destroys it.
//!
//! ## Streams and asynchronous execution
//!
//! Each stream has a FIFO of ops and a worker thread executing them in order: kernels (sleep
//! `delay_us`, maybe fault), copies and memsets (real byte copies: device memory is `malloc`ed host
//! memory and a `CUdeviceptr` is its address; pinned host memory's device pointer is the same
//! address), stream write-value (volatile store), event record, event wait, stream-ordered free.
//! Handles `NULL` and `CU_STREAM_LEGACY` (0x1) mean the context's legacy stream;
//! `CU_STREAM_PER_THREAD` (0x2) means the calling thread's per-thread stream (one per context and
//! OS thread, created lazily). In the `_ptsz` / `_ptds` exports `NULL` means the per-thread
//! stream. The legacy stream synchronizes implicitly with blocking streams (those created without
//! `CU_STREAM_NON_BLOCKING`, and per-thread streams): legacy work waits for earlier blocking-stream
//! work and vice versa.
//!
//! Launches, async copies/memsets, write-value and event records enqueue and return
//! `CUDA_SUCCESS` at once. Synchronizing calls wait: `cuStreamSynchronize` until the stream's
//! earlier work is done (for the legacy stream: also every other stream of the context);
//! `cuCtxSynchronize` for all streams of the context; synchronous copies/memsets enqueue on the
//! legacy stream (per-thread stream for `_ptds`) and wait for their op and, on the legacy stream,
//! for every stream of the context. After waiting they return the sticky error if one is set.
//! `cuStreamQuery` / `cuEventQuery` return `CUDA_ERROR_NOT_READY` (600) while work is pending.
//!
//! Device-side pointers (copy destinations/sources on the device side, memset targets,
//! write-value addresses) must lie inside a live allocation (`cuMemAlloc_v2`, `cuMemAllocAsync`,
//! `cuMemHostAlloc`, `cuMemAllocHost_v2`, `cuMemHostRegister_v2`), else the call returns
//! `CUDA_ERROR_INVALID_VALUE`; if the memory is freed before the queued op executes, the op
//! faults with `CUDA_ERROR_ILLEGAL_ADDRESS` like a real kernel would. `cuMemcpy` /
//! `cuMemcpyAsync` (unified addressing) accept any host pointers.
//!
//! ## Sticky faults
//!
//! When a kernel with `fault=CODE` executes, the sticky error of its context and of every other
//! live context of the same device becomes CODE (the first fault wins) and every queued and
//! future op of those contexts, on all streams, is discarded
//! without executing (write-value markers included); kernels sleeping on other streams stop. From
//! then on every API call on that context returns CODE, except `cuFuncGetName`, `cuKernelGetName`,
//! `cuCtxGetCurrent`, `cuCtxGetDevice`, `cuGetErrorName`, `cuGetErrorString`,
//! `cuGetProcAddress[_v2]`, `cuDriverGetVersion`, `cuDeviceGet*`, `cuMemFreeHost`,
//! `cuStreamDestroy_v2`, `cuEventDestroy_v2`, and the pure bookkeeping / teardown calls
//! `cuCtxSetCurrent`, `cuCtxPushCurrent_v2`, `cuCtxPopCurrent_v2`, `cuCtxDestroy_v2`,
//! `cuDevicePrimaryCtxRetain`, `cuDevicePrimaryCtxRelease_v2`, `cuDevicePrimaryCtxReset_v2`,
//! `cuThreadExchangeStreamCaptureMode`,
//! and the graph calls that enqueue nothing (`cuGraphDestroy`, `cuGraphExecDestroy`,
//! `cuGraphGetNodes`, `cuGraphCreate`, `cuGraphClone`, `cuGraphAddKernelNode[_v2]`,
//! `cuGraphKernelNodeSetParams[_v2]`, `cuGraphExecKernelNodeSetParams[_v2]`,
//! `cuGraphExecUpdate_v2`). A context of another device is unaffected, and so is one created
//! after the fault (the real driver 580 fails that `cuCtxCreate` with the error).
//!
//! The calls that destroy a context (`cuCtxDestroy_v2`, `cuDevicePrimaryCtxReset_v2`, the last
//! `cuDevicePrimaryCtxRelease_v2`) destroy a poisoned one too, as a real driver does (that is
//! how an application recovers): they wait for its work, close its streams, free or unregister
//! its pinned memory and invalidate its handle, and then return its sticky error (the driver API:
//! `cuCtxDestroy` "may also return error codes from previous, asynchronous launches"), or
//! `CUDA_SUCCESS` under `FAKE_CUDA_QUIET_DESTROY=1`.
//!
//! ## Launches
//!
//! `cuLaunchKernel`, `cuLaunchKernelEx`, `cuLaunchCooperativeKernel` (and `_ptsz`): a grid or block
//! dimension of 0, more than 1024 threads per block, a block dimension above 1024/1024/64 or a
//! grid dimension above 2^31-1/65535/65535 returns `CUDA_ERROR_INVALID_VALUE` synchronously;
//! then `launch_error=` applies; otherwise the kernel is enqueued (parameters are not read).
//!
//! ## Stream memory operations
//!
//! `cuStreamWriteValue64[_v2]` / `cuStreamWriteValue32[_v2]` (and `_ptsz`) enqueue a volatile
//! store (the address must be 8/4-byte aligned). With `FAKE_CUDA_NO_STREAM_MEMOPS=1` they return
//! `CUDA_ERROR_NOT_SUPPORTED` (801) and the stream-mem-op device attributes read 0.
//!
//! ## Stream capture and graphs
//!
//! While a stream captures, ops submitted to it become graph nodes instead of executing;
//! `cuStreamEndCapture` returns the graph, `cuGraphInstantiateWithFlags` + `cuGraphLaunch` enqueue
//! the nodes in order. Invalidation follows CUDA (details in [`capture`]): a potentially unsafe
//! call (`cuMemAlloc_v2`, `cuMemHostAlloc`, `cuMemAllocHost_v2`, `cuMemFree_v2`, `cuMemFreeHost`,
//! `cuCtxSynchronize`, `cuEventSynchronize`, `cuStreamSynchronize` / `cuStreamQuery` / synchronous
//! copies on the legacy stream) from a thread in `GLOBAL` mode while any `GLOBAL` capture is active
//! (or the thread's own non-relaxed capture; in `THREAD_LOCAL` mode only the latter; never in
//! `RELAXED` mode) returns 900 and invalidates the capture, whose `cuStreamEndCapture` then returns
//! 901. Synchronizing or querying the capturing stream itself returns 900 and invalidates. Work on
//! the legacy stream while a blocking stream of the same context captures returns 906 and
//! invalidates. `cuStreamIsCapturing` is always safe. Events recorded in a capture fork other
//! streams into it through `cuStreamWaitEvent`; querying/synchronizing such an event returns 907.
//!
//! Graphs can also be built and edited by hand. A graph is a list of nodes, run in the order they
//! were added (dependencies are checked to be nodes of the graph, not followed); node handles
//! are unique for the process (`cuGraphGetNodes` returns them).
//! * `cuGraphCreate(CUgraph*, 0)`: an empty graph; `cuGraphClone`: a copy with new node handles.
//! * `cuGraphAddKernelNode_v2` (CUDA 12 `CUDA_KERNEL_NODE_PARAMS`: `func`, or `kern` when `func`
//!   is NULL) and `cuGraphAddKernelNode` (the CUDA 10 struct, `func` only): appends a kernel node;
//!   a function the fake did not hand out or a bad dimension gives `CUDA_ERROR_INVALID_VALUE`.
//! * `cuGraphKernelNodeSetParams[_v2](node, params)`: replaces the kernel of a kernel node in its
//!   graph (executable graphs instantiated before keep the old one, as in CUDA).
//! * `cuGraphExecKernelNodeSetParams[_v2](exec, node, params)`: replaces it in the executable
//!   graph only (`node` is the graph's node it was instantiated from); launches already enqueued
//!   keep the old one.
//! * `cuGraphExecUpdate_v2(exec, graph, info)`: the executable graph takes the graph's ops when
//!   both have as many nodes of the same kinds in order, else `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`
//!   (910) with `info->result` = `CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED`.
//! * `cuGraphDestroy`, `cuGraphExecDestroy`: the handle is dead (`CUDA_ERROR_INVALID_HANDLE` for
//!   later use); with `FAKE_CUDA_REUSE_HANDLES=1` the next graph (captured, created or cloned) or
//!   executable graph is given the most recently destroyed one's address, as a real driver may
//!   hand out freed memory again.
//!
//! The CUDA 10.2 `cuGraphExecUpdate`, `cuGraphAddNode[_v2]`, `cuGraphNodeSetParams`,
//! `cuGraphExecNodeSetParams`, `cuGraphAddChildGraphNode`, `cuGraphExecChildGraphNodeSetParams`,
//! `cuGraphNodeSetEnabled` and `cuGraphDestroyNode` are not faked.
//!
//! ## Entry-point resolution
//!
//! `cuGetProcAddress[_v2]` resolves through a static table ([`resolve`]), never `dlsym`.
//!
//! ## Environment
//!
//! * `FAKE_CUDA_DEVICES=N`: number of devices (default 2).
//! * `FAKE_CUDA_NO_STREAM_MEMOPS=1`: stream memory operations unsupported (read once, at the first
//!   stream memory operation or attribute query: like a device property, it does not change later).
//! * `FAKE_CUDA_MEMOP_HOST_US=N`: each stream memory operation spins N µs on the calling thread
//!   before it returns (read once): a host whose driver calls are slow.
//! * `FAKE_CUDA_REUSE_HANDLES=1`: a destroyed graph's or executable graph's address is handed out
//!   again by the next one created (see "Stream capture and graphs"); so is a destroyed
//!   context's, to the next context created on its device (primary for primary, created for
//!   created), and a destroyed user stream's, to the next stream created with the same flags and
//!   priority in the context at its context's address (a context's destroy then waits for its
//!   stream workers to exit): a handle of the new context or stream may equal one of the
//!   destroyed context's, as with a real driver's freed memory.
//! * `FAKE_CUDA_QUIET_DESTROY=1`: destroying a context whose work left a sticky error returns
//!   `CUDA_SUCCESS` instead of that error (see "Sticky faults").
//! * `FAKE_CUDA_TRACE=1`: log enqueues, executions, discards and faults to stderr.

/// Defines a plain export and its per-thread-default-stream twin (`_ptsz` / `_ptds`), both
/// calling `$imp(args..., NullStream)`. `$imp` may be an `unsafe fn` taking the export's pointer
/// arguments, whose contract is then the export's own (hence `unused_unsafe` for the safe ones).
#[macro_export]
macro_rules! dual_export {
    ($(#[$doc:meta])* fn $plain:ident / $pt:ident ($($arg:ident : $ty:ty),* $(,)?) => $imp:path) => {
        $(#[$doc])*
        #[no_mangle]
        #[allow(unused_unsafe)]
        pub unsafe extern "C" fn $plain($($arg: $ty),*) -> $crate::types::CUresult {
            // SAFETY: the C caller's arguments go to `$imp` unchanged; its contract is this entry
            // point's own (cuda.h), which the caller keeps.
            $crate::guard(|| unsafe { $imp($($arg,)* $crate::stream::NullStream::Legacy) })
        }
        #[doc = concat!("`", stringify!($plain), "` with per-thread default stream semantics.")]
        #[no_mangle]
        #[allow(unused_unsafe)]
        pub unsafe extern "C" fn $pt($($arg: $ty),*) -> $crate::types::CUresult {
            // SAFETY: as for the plain export: arguments passed through, same contract.
            $crate::guard(|| unsafe { $imp($($arg,)* $crate::stream::NullStream::PerThread) })
        }
    };
}

pub mod api_driver;
pub mod api_graph;
pub mod api_launch;
pub mod api_mem;
pub mod api_module;
pub mod api_stream;
pub mod capture;
pub mod context;
pub mod errors;
pub mod handles;
pub mod memory;
pub mod module;
pub mod resolve;
pub mod signal;
pub mod stream;
pub mod types;

use std::io::Write;
use std::sync::OnceLock;
use types::{CUresult, Res};

/// Runs an entry point body: `Ok` becomes `CUDA_SUCCESS`, `Err(code)` becomes `code`, and a
/// panic (a bug in the fake) becomes `CUDA_ERROR_UNKNOWN` instead of unwinding into C. With
/// `FAKE_CUDA_ERRNO=N` every such entry point leaves `errno` at N, as a real driver's file
/// probes and ioctls may (a program then reads N after the call, with or without cudablame).
pub fn guard(body: impl FnOnce() -> Res<()>) -> CUresult {
    static ERRNO: OnceLock<Option<i32>> = OnceLock::new();
    let leave = *ERRNO.get_or_init(|| {
        std::env::var("FAKE_CUDA_ERRNO")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    let rc = guarded(body);
    if let Some(e) = leave {
        // SAFETY: glibc's per-thread errno slot.
        unsafe { *libc::__errno_location() = e };
    }
    rc
}

/// [`guard`]'s body call.
fn guarded(body: impl FnOnce() -> Res<()>) -> CUresult {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(())) => errors::SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => {
            diag(format_args!("internal panic; returning CUDA_ERROR_UNKNOWN"));
            errors::UNKNOWN
        }
    }
}

/// Stores `value` through the out-pointer `ptr` (`CUDA_ERROR_INVALID_VALUE` if it is NULL).
///
/// # Safety
/// `ptr` must be NULL or valid for a write of `T`.
pub unsafe fn write_out<T>(ptr: *mut T, value: T) -> Res<()> {
    if ptr.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    // SAFETY: not NULL (checked above), so valid for a write of `T` by this function's contract.
    unsafe { ptr.write(value) };
    Ok(())
}

/// Whether `FAKE_CUDA_TRACE` is set (to anything but empty or `0`).
pub fn tracing() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("FAKE_CUDA_TRACE").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Writes one diagnostic line to stderr (never panics).
pub fn diag(args: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "fakecuda: {args}");
}

/// Logs a line to stderr when `FAKE_CUDA_TRACE` is set.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)*) => {
        if $crate::tracing() {
            $crate::diag(format_args!($($arg)*));
        }
    };
}
