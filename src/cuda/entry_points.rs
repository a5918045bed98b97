//! The one declared list of hooked driver entry points.
//!
//! Every exported wrapper (`src/interpose/exports.rs`), the real-function slots
//! (`src/real`), the address table that `dlsym`/`cuGetProcAddress` use to pick a wrapper, and the
//! entry-point tests are generated from this list by [`for_each_entry_point!`]; nothing else
//! names the hooked functions.
//!
//! Each entry reads
//! `[variant: stream_default, ...] (C parameters) => describe(args)`:
//! - the variants are the exported symbols of `libcuda.so.1` that share one C signature
//!   (`_v2` versions, `_ptsz` for stream-taking and `_ptds` for synchronous per-thread-default-stream
//!   variants; see the driver API doc section "Entry Point Access" and `cuda.h`'s
//!   `__CUDA_API_PER_THREAD_DEFAULT_STREAM` macros). `stream_default` says what a NULL stream
//!   means in that variant: `legacy` or `per_thread`.
//! - the parameters are the exact C parameters from `cuda.h` (CUDA 13.0).
//! - `describe` names a constructor of [`crate::record::Call`]: what the hook records (a launch,
//!   a copy, a synchronization, ...) and which stream it concerns.
//!
//! Signatures must be exact: a wrong one corrupts the program's call. When adding an entry, copy
//! the prototype from `cuda.h`, and add the name to the fake driver in `shim-tests/fake-driver`.

/// Calls `$m! { ... }` with the whole list. See the module docs for the entry syntax.
#[macro_export]
macro_rules! for_each_entry_point {
    ($m:ident) => {
        $m! {
            // ---- launches: recorded in the stream's ring, followed by a progress marker ----
            [cuLaunchKernel: legacy, cuLaunchKernel_ptsz: per_thread]
                (f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
                 shared_mem_bytes: c_uint, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void)
                => kernel(f, [gx, gy, gz], [bx, by, bz], shared_mem_bytes, stream);
            [cuLaunchKernelEx: legacy, cuLaunchKernelEx_ptsz: per_thread]
                (config: *const CUlaunchConfig, f: CUfunction, params: *mut *mut c_void, extra: *mut *mut c_void)
                => kernel_ex(config, f);
            [cuLaunchCooperativeKernel: legacy, cuLaunchCooperativeKernel_ptsz: per_thread]
                (f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
                 shared_mem_bytes: c_uint, stream: CUstream, params: *mut *mut c_void)
                => kernel(f, [gx, gy, gz], [bx, by, bz], shared_mem_bytes, stream);
            [cuGraphLaunch: legacy, cuGraphLaunch_ptsz: per_thread]
                (exec: CUgraphExec, stream: CUstream)
                => graph(exec, stream);

            // ---- asynchronous copies and memsets: recorded like launches ----
            [cuMemcpyAsync: legacy, cuMemcpyAsync_ptsz: per_thread]
                (dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream)
                => memcpy_async(bytes, stream);
            [cuMemcpyHtoDAsync_v2: legacy, cuMemcpyHtoDAsync_v2_ptsz: per_thread]
                (dst: CUdeviceptr, src: *const c_void, bytes: usize, stream: CUstream)
                => memcpy_async(bytes, stream);
            [cuMemcpyDtoHAsync_v2: legacy, cuMemcpyDtoHAsync_v2_ptsz: per_thread]
                (dst: *mut c_void, src: CUdeviceptr, bytes: usize, stream: CUstream)
                => memcpy_async(bytes, stream);
            [cuMemcpyDtoDAsync_v2: legacy, cuMemcpyDtoDAsync_v2_ptsz: per_thread]
                (dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream)
                => memcpy_async(bytes, stream);
            [cuMemcpy2DAsync_v2: legacy, cuMemcpy2DAsync_v2_ptsz: per_thread]
                (copy: CopyDescriptor, stream: CUstream)
                => memcpy_async(0, stream);
            [cuMemcpy3DAsync_v2: legacy, cuMemcpy3DAsync_v2_ptsz: per_thread]
                (copy: CopyDescriptor, stream: CUstream)
                => memcpy_async(0, stream);
            [cuMemcpyPeerAsync: legacy, cuMemcpyPeerAsync_ptsz: per_thread]
                (dst: CUdeviceptr, dst_ctx: CUcontext, src: CUdeviceptr, src_ctx: CUcontext, bytes: usize,
                 stream: CUstream)
                => memcpy_async(bytes, stream);
            [cuMemsetD8Async: legacy, cuMemsetD8Async_ptsz: per_thread]
                (dst: CUdeviceptr, value: u8, count: usize, stream: CUstream)
                => memset_async(count, stream);
            [cuMemsetD16Async: legacy, cuMemsetD16Async_ptsz: per_thread]
                (dst: CUdeviceptr, value: u16, count: usize, stream: CUstream)
                => memset_async(count * 2, stream);
            [cuMemsetD32Async: legacy, cuMemsetD32Async_ptsz: per_thread]
                (dst: CUdeviceptr, value: c_uint, count: usize, stream: CUstream)
                => memset_async(count * 4, stream);
            [cuMemsetD2D8Async: legacy, cuMemsetD2D8Async_ptsz: per_thread]
                (dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize, stream: CUstream)
                => memset_async(width * height, stream);
            [cuMemsetD2D16Async: legacy, cuMemsetD2D16Async_ptsz: per_thread]
                (dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize, stream: CUstream)
                => memset_async(width * height * 2, stream);
            [cuMemsetD2D32Async: legacy, cuMemsetD2D32Async_ptsz: per_thread]
                (dst: CUdeviceptr, pitch: usize, value: c_uint, width: usize, height: usize, stream: CUstream)
                => memset_async(width * height * 4, stream);
            // The program's own stream memory writes (cudablame's markers use the driver's function
            // directly, never these wrappers): recorded as 4- and 8-byte memsets.
            [cuStreamWriteValue32: legacy, cuStreamWriteValue32_ptsz: per_thread,
             cuStreamWriteValue32_v2: legacy, cuStreamWriteValue32_v2_ptsz: per_thread]
                (stream: CUstream, addr: CUdeviceptr, value: u32, flags: c_uint)
                => memset_async(4, stream);
            [cuStreamWriteValue64: legacy, cuStreamWriteValue64_ptsz: per_thread,
             cuStreamWriteValue64_v2: legacy, cuStreamWriteValue64_v2_ptsz: per_thread]
                (stream: CUstream, addr: CUdeviceptr, value: u64, flags: c_uint)
                => memset_async(8, stream);
            [cuMemcpy3DPeerAsync: legacy, cuMemcpy3DPeerAsync_ptsz: per_thread]
                (copy: CopyDescriptor, stream: CUstream)
                => memcpy_async(0, stream);

            // ---- blocking copies and memsets: what their return proves follows the driver API's
            //      "API synchronization behavior" table (see `record::Proves`): device-to-host
            //      copies complete with earlier work, host-to-device copies wait for earlier work,
            //      device-to-device copies and memsets are ordinary ops with progress markers ----
            [cuMemcpy: legacy, cuMemcpy_ptds: per_thread]
                (dst: CUdeviceptr, src: CUdeviceptr, bytes: usize)
                => memcpy_unified(dst, src, bytes);
            [cuMemcpyHtoD_v2: legacy, cuMemcpyHtoD_v2_ptds: per_thread]
                (dst: CUdeviceptr, src: *const c_void, bytes: usize)
                => copy_htod(bytes);
            [cuMemcpyDtoH_v2: legacy, cuMemcpyDtoH_v2_ptds: per_thread]
                (dst: *mut c_void, src: CUdeviceptr, bytes: usize)
                => copy_dtoh(bytes);
            [cuMemcpyDtoD_v2: legacy, cuMemcpyDtoD_v2_ptds: per_thread]
                (dst: CUdeviceptr, src: CUdeviceptr, bytes: usize)
                => copy_dtod(bytes);
            [cuMemcpyPeer: legacy, cuMemcpyPeer_ptds: per_thread]
                (dst: CUdeviceptr, dst_ctx: CUcontext, src: CUdeviceptr, src_ctx: CUcontext, bytes: usize)
                => copy_dtod(bytes);
            [cuMemcpy2D_v2: legacy, cuMemcpy2D_v2_ptds: per_thread]
                (copy: CopyDescriptor)
                => memcpy_described(copy, false);
            [cuMemcpy2DUnaligned_v2: legacy, cuMemcpy2DUnaligned_v2_ptds: per_thread]
                (copy: CopyDescriptor)
                => memcpy_described(copy, false);
            [cuMemcpy3D_v2: legacy, cuMemcpy3D_v2_ptds: per_thread]
                (copy: CopyDescriptor)
                => memcpy_described(copy, true);
            [cuMemsetD8_v2: legacy, cuMemsetD8_v2_ptds: per_thread]
                (dst: CUdeviceptr, value: u8, count: usize)
                => memset_sync(count);
            [cuMemsetD16_v2: legacy, cuMemsetD16_v2_ptds: per_thread]
                (dst: CUdeviceptr, value: u16, count: usize)
                => memset_sync(count * 2);
            [cuMemsetD32_v2: legacy, cuMemsetD32_v2_ptds: per_thread]
                (dst: CUdeviceptr, value: c_uint, count: usize)
                => memset_sync(count * 4);
            [cuMemsetD2D8_v2: legacy, cuMemsetD2D8_v2_ptds: per_thread]
                (dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize)
                => memset_sync(width * height);
            [cuMemsetD2D16_v2: legacy, cuMemsetD2D16_v2_ptds: per_thread]
                (dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize)
                => memset_sync(width * height * 2);
            [cuMemsetD2D32_v2: legacy, cuMemsetD2D32_v2_ptds: per_thread]
                (dst: CUdeviceptr, pitch: usize, value: c_uint, width: usize, height: usize)
                => memset_sync(width * height * 4);
            // Peer copies are device to device (`CUDA_MEMCPY3D_PEER` names two contexts).
            [cuMemcpy3DPeer: legacy, cuMemcpy3DPeer_ptds: per_thread]
                (copy: CopyDescriptor)
                => copy_dtod(0);

            // ---- synchronization and queries: success proves completion, errors are observed ----
            [cuCtxSynchronize: legacy]
                ()
                => sync_context(std::ptr::null_mut());
            // CUDA 13: cudaDeviceSynchronize calls this one; a NULL context means the current one.
            [cuCtxSynchronize_v2: legacy]
                (ctx: CUcontext)
                => sync_context(ctx);
            [cuStreamSynchronize: legacy, cuStreamSynchronize_ptsz: per_thread]
                (stream: CUstream)
                => sync_stream(stream);
            [cuStreamQuery: legacy, cuStreamQuery_ptsz: per_thread]
                (stream: CUstream)
                => sync_stream(stream);
            // An event's error is its own context's, which need not be the current one.
            [cuEventSynchronize: legacy]
                (event: CUevent)
                => observe_event();
            [cuEventQuery: legacy]
                (event: CUevent)
                => observe_event();
            [cuEventRecord: legacy, cuEventRecord_ptsz: per_thread]
                (event: CUevent, stream: CUstream)
                => observe_stream(stream);
            [cuEventRecordWithFlags: legacy, cuEventRecordWithFlags_ptsz: per_thread]
                (event: CUevent, stream: CUstream, flags: c_uint)
                => observe_stream(stream);
            // A host function is not recorded as an op: unseen work on its stream.
            [cuLaunchHostFunc: legacy, cuLaunchHostFunc_ptsz: per_thread]
                (stream: CUstream, func: *mut c_void, user_data: *mut c_void)
                => unseen_work(stream);
            // The event may be of another context than the stream (another device's).
            [cuStreamWaitEvent: legacy, cuStreamWaitEvent_ptsz: per_thread]
                (stream: CUstream, event: CUevent, flags: c_uint)
                => observe_event_wait(stream);

            // ---- memory and modules: the usual places where a sticky error is noticed ----
            [cuMemAlloc_v2: legacy]
                (dptr: *mut CUdeviceptr, bytes: usize)
                => observe();
            [cuMemAllocManaged: legacy]
                (dptr: *mut CUdeviceptr, bytes: usize, flags: c_uint)
                => observe();
            [cuMemAllocPitch_v2: legacy]
                (dptr: *mut CUdeviceptr, pitch: *mut usize, width_bytes: usize, height: usize, element_bytes: c_uint)
                => observe();
            [cuMemFree_v2: legacy]
                (dptr: CUdeviceptr)
                => observe();
            [cuMemAllocAsync: legacy, cuMemAllocAsync_ptsz: per_thread]
                (dptr: *mut CUdeviceptr, bytes: usize, stream: CUstream)
                => observe_stream(stream);
            [cuMemAllocFromPoolAsync: legacy, cuMemAllocFromPoolAsync_ptsz: per_thread]
                (dptr: *mut CUdeviceptr, bytes: usize, pool: CUmemoryPool, stream: CUstream)
                => observe_stream(stream);
            [cuMemFreeAsync: legacy, cuMemFreeAsync_ptsz: per_thread]
                (dptr: CUdeviceptr, stream: CUstream)
                => observe_stream(stream);
            [cuMemHostAlloc: legacy]
                (pp: *mut *mut c_void, bytes: usize, flags: c_uint)
                => observe();
            [cuMemFreeHost: legacy]
                (p: *mut c_void)
                => observe();
            [cuModuleLoad: legacy]
                (module: *mut CUmodule, path: *const c_char)
                => observe();
            [cuModuleLoadData: legacy]
                (module: *mut CUmodule, image: *const c_void)
                => observe();
            [cuModuleLoadDataEx: legacy]
                (module: *mut CUmodule, image: *const c_void, num_options: c_uint, options: *mut CUjit_option,
                 option_values: *mut *mut c_void)
                => observe();
            [cuModuleLoadFatBinary: legacy]
                (module: *mut CUmodule, fat_cubin: *const c_void)
                => observe();
            [cuLibraryLoadData: legacy]
                (library: *mut CUlibrary, code: *const c_void, jit_options: *mut CUjit_option,
                 jit_values: *mut *mut c_void, num_jit: c_uint, library_options: *mut CUlibraryOption,
                 library_values: *mut *mut c_void, num_library: c_uint)
                => observe();
            [cuLibraryLoadFromFile: legacy]
                (library: *mut CUlibrary, path: *const c_char, jit_options: *mut CUjit_option,
                 jit_values: *mut *mut c_void, num_jit: c_uint, library_options: *mut CUlibraryOption,
                 library_values: *mut *mut c_void, num_library: c_uint)
                => observe();

            // ---- kernel handles: their names, kept for the report ----
            [cuModuleGetFunction: legacy]
                (function: *mut CUfunction, module: CUmodule, name: *const c_char)
                => name_handle(function, name);
            [cuLibraryGetKernel: legacy]
                (kernel: *mut CUkernel, library: CUlibrary, name: *const c_char)
                => name_handle(kernel, name);
            [cuKernelGetFunction: legacy]
                (function: *mut CUfunction, kernel: CUkernel)
                => alias_handle(function, kernel);

            // ---- stream life and capture: keep the rings honest ----
            // The CUDA 10.0 ABI (no mode; what `cuGetProcAddress` gives for a version below
            // 10010): a capture begun through it must raise the capture count too, or the next
            // launch's progress marker becomes a node of the program's graph.
            [cuStreamBeginCapture: legacy, cuStreamBeginCapture_ptsz: per_thread]
                (stream: CUstream)
                => begin_capture(stream);
            [cuStreamBeginCapture_v2: legacy, cuStreamBeginCapture_v2_ptsz: per_thread]
                (stream: CUstream, mode: CUstreamCaptureMode)
                => begin_capture(stream);
            [cuStreamBeginCaptureToGraph: legacy, cuStreamBeginCaptureToGraph_ptsz: per_thread]
                (stream: CUstream, graph: CUgraph, deps: *const CUgraphNode, dep_data: *const c_void,
                 num_deps: usize, mode: CUstreamCaptureMode)
                => begin_capture_into(stream);
            [cuStreamEndCapture: legacy, cuStreamEndCapture_ptsz: per_thread]
                (stream: CUstream, graph: *mut CUgraph)
                => end_capture(stream, graph);
            [cuGraphInstantiateWithFlags: legacy]
                (exec: *mut CUgraphExec, graph: CUgraph, flags: u64)
                => instantiate(exec, graph);
            [cuGraphInstantiateWithParams: legacy, cuGraphInstantiateWithParams_ptsz: per_thread]
                (exec: *mut CUgraphExec, graph: CUgraph, params: *mut c_void)
                => instantiate(exec, graph);
            // The CUDA 10.0 and 11.0 ABIs (an error node and a log buffer), which a runtime before
            // 12.0 asks for by version (cuda.h 12+ defines `cuGraphInstantiate` as
            // `cuGraphInstantiateWithFlags`).
            [cuGraphInstantiate: legacy, cuGraphInstantiate_v2: legacy]
                (exec: *mut CUgraphExec, graph: CUgraph, error_node: *mut CUgraphNode, log: *mut c_char,
                 log_bytes: usize)
                => instantiate(exec, graph);
            [cuStreamDestroy_v2: legacy]
                (stream: CUstream)
                => destroy_stream(stream);

            // ---- graph life and edits: what each graph and executable graph runs
            //      (`record::graphs`); a destroyed handle's address may be handed out again ----
            [cuGraphCreate: legacy]
                (graph: *mut CUgraph, flags: c_uint)
                => create_graph(graph);
            [cuGraphClone: legacy]
                (clone: *mut CUgraph, original: CUgraph)
                => clone_graph(clone, original);
            [cuGraphDestroy: legacy]
                (graph: CUgraph)
                => destroy_graph(graph);
            [cuGraphExecDestroy: legacy]
                (exec: CUgraphExec)
                => destroy_exec(exec);
            // `CUDA_KERNEL_NODE_PARAMS` (`_v2`, CUDA 12) or its CUDA 10 `_v1` (no `kern`, `ctx`):
            // passed by pointer, never read.
            [cuGraphAddKernelNode: legacy, cuGraphAddKernelNode_v2: legacy]
                (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize,
                 params: *const c_void)
                => edit_graph(graph);
            [cuGraphAddChildGraphNode: legacy]
                (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize,
                 child: CUgraph)
                => edit_graph(graph);
            // CUDA 12.2 (no edge data), and CUDA 12.3's `_v2` (cuda.h's `cuGraphAddNode` in 13.0).
            [cuGraphAddNode: legacy]
                (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, num_deps: usize,
                 params: *mut c_void)
                => edit_graph(graph);
            [cuGraphAddNode_v2: legacy]
                (node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, edge_data: *const c_void,
                 num_deps: usize, params: *mut c_void)
                => edit_graph(graph);
            [cuGraphKernelNodeSetParams: legacy, cuGraphKernelNodeSetParams_v2: legacy]
                (node: CUgraphNode, params: *const c_void)
                => edit_node();
            [cuGraphNodeSetParams: legacy]
                (node: CUgraphNode, params: *mut c_void)
                => edit_node();
            [cuGraphDestroyNode: legacy]
                (node: CUgraphNode)
                => edit_node();
            [cuGraphExecKernelNodeSetParams: legacy, cuGraphExecKernelNodeSetParams_v2: legacy]
                (exec: CUgraphExec, node: CUgraphNode, params: *const c_void)
                => edit_exec(exec);
            [cuGraphExecNodeSetParams: legacy]
                (exec: CUgraphExec, node: CUgraphNode, params: *mut c_void)
                => edit_exec(exec);
            [cuGraphExecChildGraphNodeSetParams: legacy]
                (exec: CUgraphExec, node: CUgraphNode, child: CUgraph)
                => edit_exec(exec);
            [cuGraphNodeSetEnabled: legacy]
                (exec: CUgraphExec, node: CUgraphNode, enabled: c_uint)
                => set_enabled(exec);
            // CUDA 10.2 (error node and result out-pointers), and CUDA 12's `_v2` (one result
            // info struct: cuda.h's `cuGraphExecUpdate`).
            [cuGraphExecUpdate: legacy]
                (exec: CUgraphExec, graph: CUgraph, error_node: *mut CUgraphNode, result: *mut c_void)
                => update_exec(exec, graph);
            [cuGraphExecUpdate_v2: legacy]
                (exec: CUgraphExec, graph: CUgraph, result_info: *mut c_void)
                => update_exec(exec, graph);

            // ---- context life: a destroyed or reset context's streams and markers are forgotten ----
            [cuCtxDestroy_v2: legacy]
                (ctx: CUcontext)
                => destroy_context(ctx);
            [cuDevicePrimaryCtxReset_v2: legacy]
                (dev: CUdevice)
                => primary_reset(dev);
            [cuDevicePrimaryCtxRelease_v2: legacy]
                (dev: CUdevice)
                => primary_release(dev);
        }
    };
}

use std::ffi::CStr;

/// What a NULL stream means in a variant (see the list): the legacy default stream.
#[allow(non_upper_case_globals)]
const legacy: bool = false;
/// What a NULL stream means in a variant: the calling thread's per-thread default stream.
#[allow(non_upper_case_globals)]
const per_thread: bool = true;

macro_rules! define_entry_point_enum {
    ($( [$($v:ident : $sd:ident),+] $params:tt => $ctor:ident $args:tt; )*) => {
        /// One exported variant of a hooked driver entry point, e.g. `cuLaunchKernel_ptsz`.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub(crate) enum EntryPoint { $($($v,)+)* }

        const NAMES: &[&CStr] = &[$($(
            match CStr::from_bytes_with_nul(concat!(stringify!($v), "\0").as_bytes()) {
                Ok(s) => s,
                Err(_) => panic!("entry point name"),
            },
        )+)*];
        const PER_THREAD: &[bool] = &[$($($sd,)+)*];

        impl EntryPoint {
            /// Every variant, in declaration order (`ALL[ep as usize] == ep`).
            pub(crate) const ALL: &'static [EntryPoint] = &[$($(EntryPoint::$v,)+)*];
        }
    };
}
for_each_entry_point!(define_entry_point_enum);

impl EntryPoint {
    /// The exported symbol name, e.g. `"cuMemcpyDtoH_v2"`.
    pub(crate) fn name(self) -> &'static str {
        // Names are ASCII identifiers.
        NAMES[self as usize].to_str().unwrap_or("?")
    }

    /// The exported symbol name as a C string, for `dlsym`.
    pub(crate) fn c_name(self) -> &'static CStr {
        NAMES[self as usize]
    }

    /// Whether a NULL stream means the per-thread default stream in this variant (`_ptsz`/`_ptds`).
    pub(crate) fn per_thread_default(self) -> bool {
        PER_THREAD[self as usize]
    }

    /// The variant with this exported name.
    pub(crate) fn from_name(name: &[u8]) -> Option<EntryPoint> {
        Self::ALL
            .iter()
            .copied()
            .find(|ep| ep.c_name().to_bytes() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_order_agree() {
        for (i, ep) in EntryPoint::ALL.iter().enumerate() {
            assert_eq!(*ep as usize, i);
            assert_eq!(EntryPoint::from_name(ep.name().as_bytes()), Some(*ep));
        }
        assert_eq!(
            EntryPoint::cuLaunchKernel_ptsz.name(),
            "cuLaunchKernel_ptsz"
        );
    }

    #[test]
    fn per_thread_variants_are_the_suffixed_ones() {
        for ep in EntryPoint::ALL {
            let suffixed = ep.name().ends_with("_ptsz") || ep.name().ends_with("_ptds");
            assert_eq!(ep.per_thread_default(), suffixed, "{}", ep.name());
        }
    }
}

/// The C++ prototype check (issue 18): generated from the list above, compiled against the real
/// `cuda.h` by `scripts/check-prototypes.sh`, against `shim-tests/programs/cuda_min.h` by the
/// test below. Each hooked variant gets a `static_assert` that `decltype(&name)` (cuda.h's
/// prototype) passes its return value and every argument as cudablame's wrapper does: the same
/// type, or the same width for integers and enums, or pointers to such (any pointer where the
/// Rust side takes `void*`). The Rust types are read from the code (`type_name` of
/// `crate::cuda`'s aliases), not copied.
#[cfg(test)]
mod prototype_check {
    use crate::cuda::*;
    use std::any::type_name;

    macro_rules! signatures {
        ($( [$($v:ident : $sd:ident),+] $params:tt => $ctor:ident $args:tt; )*) => {
            &[$($((stringify!($v), stringify!($params)),)+)*]
        };
    }
    const SIGNATURES: &[(&str, &str)] = for_each_entry_point!(signatures);

    /// The C++ spelling of a Rust type as `stringify!` or `type_name` writes it.
    fn cpp(rust: &str) -> String {
        let t = rust.split_whitespace().collect::<Vec<_>>().join(" ");
        let t = t.as_str();
        for (prefix, suffix) in [
            ("*mut", "*"),
            ("*const", " const*"),
            ("* mut", "*"),
            ("* const", " const*"),
        ] {
            if let Some(rest) = t.strip_prefix(prefix) {
                return format!("{}{suffix}", cpp(rest));
            }
        }
        let last = t.rsplit("::").next().unwrap_or(t);
        match last {
            "c_void" => "void".into(),
            "u8" => "std::uint8_t".into(),
            "u16" => "std::uint16_t".into(),
            "u32" => "std::uint32_t".into(),
            "u64" => "std::uint64_t".into(),
            "i32" => "std::int32_t".into(),
            "i8" | "c_char" => "char".into(),
            "usize" => "std::size_t".into(),
            "c_uint" => cpp(type_name::<std::ffi::c_uint>()),
            "c_int" => cpp(type_name::<std::ffi::c_int>()),
            // A struct passed by pointer: its C name (the layout is checked elsewhere).
            "CUlaunchConfig" => "CUlaunchConfig".into(),
            alias => cpp(alias_definition(alias)),
        }
    }

    /// What one of `crate::cuda`'s aliases stands for, as the compiler sees it.
    fn alias_definition(alias: &str) -> &'static str {
        macro_rules! aliases {
            ($($a:ident),*) => {
                match alias {
                    $(stringify!($a) => type_name::<$a>(),)*
                    other => panic!("entry point type {other}: add it to prototype_check"),
                }
            };
        }
        aliases!(
            CUresult,
            CUdevice,
            CUdeviceptr,
            CUcontext,
            CUstream,
            CUfunction,
            CUkernel,
            CUevent,
            CUmodule,
            CUlibrary,
            CUgraph,
            CUgraphExec,
            CUgraphNode,
            CUmemoryPool,
            CUstreamCaptureMode,
            CUjit_option,
            CUlibraryOption,
            CopyDescriptor
        )
    }

    /// The parameter types of a `stringify!`ed `(name: type, ...)` list.
    fn param_types(params: &str) -> Vec<String> {
        let inner = params.trim().trim_start_matches('(').trim_end_matches(')');
        inner
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| cpp(p.split_once(':').expect("name: type").1))
            .collect()
    }

    const PRELUDE: &str = r#"// Generated by cudablame's `prototype_check` test from src/cuda/entry_points.rs: do not edit.
// Compile with cuda.h included first (scripts/check-prototypes.sh). A translation unit with
// CUDA_API_PER_THREAD_DEFAULT_STREAM checks the _ptsz/_ptds variants, one without it the others,
// CUDABLAME_CHECK_ALL both; -DCUDABLAME_SKIP_<name> skips a name the header does not declare.
#include <cstddef>
#include <cstdint>
#include <type_traits>
#if defined(CUDABLAME_CHECK_ALL)
#define CUDABLAME_CHECK_PLAIN 1
#define CUDABLAME_CHECK_PER_THREAD 1
#elif defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#define CUDABLAME_CHECK_PLAIN 0
#define CUDABLAME_CHECK_PER_THREAD 1
#else
#define CUDABLAME_CHECK_PLAIN 1
#define CUDABLAME_CHECK_PER_THREAD 0
#endif
namespace cudablame_check {
// Whether cuda.h's type C and cudablame's R pass alike.
template <class C, class R> constexpr bool arg_ok() {
  using c = std::remove_cv_t<C>;
  using r = std::remove_cv_t<R>;
  if constexpr (std::is_same_v<c, r>) {
    return true;
  } else if constexpr (std::is_pointer_v<c> && std::is_pointer_v<r>) {
    using rp = std::remove_cv_t<std::remove_pointer_t<r>>;
    if constexpr (std::is_void_v<rp>) {
      return true;  // an opaque pointer on cudablame's side
    } else {
      return arg_ok<std::remove_pointer_t<c>, rp>();
    }
  } else if constexpr ((std::is_integral_v<c> || std::is_enum_v<c>) &&
                       (std::is_integral_v<r> || std::is_enum_v<r>)) {
    return sizeof(c) == sizeof(r);
  } else {
    return false;
  }
}
template <class... T> struct types {};
template <class C, class R> struct args_ok : std::false_type {};
template <> struct args_ok<types<>, types<>> : std::true_type {};
template <class C0, class... C, class R0, class... R>
struct args_ok<types<C0, C...>, types<R0, R...>>
    : std::bool_constant<arg_ok<C0, R0>() && args_ok<types<C...>, types<R...>>::value> {};
template <class C, class R> struct same_abi : std::false_type {};
template <class CR, class... C, class RR, class... R>
struct same_abi<CR (*)(C...), RR (*)(R...)>
    : std::bool_constant<arg_ok<CR, RR>() && args_ok<types<C...>, types<R...>>::value> {};
}  // namespace cudablame_check
"#;

    /// The whole C++ file.
    pub fn cpp_file() -> String {
        let ret = cpp("CUresult");
        let mut out = String::from(PRELUDE);
        for (name, params) in SIGNATURES {
            let per_thread = name.ends_with("_ptsz") || name.ends_with("_ptds");
            let gate = if per_thread { "PER_THREAD" } else { "PLAIN" };
            // A name cuda.h defines as a macro is the public alias of another ABI (the CUDA 10.0
            // `cuStreamBeginCapture` is `cuStreamBeginCapture_v2` there; its own prototype is
            // declared only for the driver's internal build): not checked, and said.
            out.push_str(&format!(
                "#if CUDABLAME_CHECK_{gate} && defined({name})\n\
                 #warning \"{name} is a macro in cuda.h (another ABI's name): not checked\"\n\
                 #endif\n"
            ));
            out.push_str(&format!(
                "#if CUDABLAME_CHECK_{gate} && !defined(CUDABLAME_SKIP_{name}) && !defined({name})\n\
                 static_assert(cudablame_check::same_abi<decltype(&{name}), {ret} (*)({})>::value,\n    \
                 \"{name}: cudablame's prototype (src/cuda/entry_points.rs) differs from cuda.h's\");\n\
                 #endif\n",
                param_types(params).join(", ")
            ));
        }
        out
    }

    /// Where the file is written: `target/entry_point_check.cpp` of the workspace.
    pub fn cpp_path() -> std::path::PathBuf {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/target").into());
        target.join("entry_point_check.cpp")
    }

    /// Compiles `file` with g++ against `header`, skipping the names it does not declare; the
    /// skipped names, or the compiler's complaint.
    fn compile(
        file: &std::path::Path,
        header: &str,
        extra: &[&str],
    ) -> Result<Vec<String>, String> {
        let mut skipped: Vec<String> = Vec::new();
        loop {
            let o = std::process::Command::new("g++")
                .args([
                    "-std=c++17",
                    "-fsyntax-only",
                    "-x",
                    "c++",
                    "-include",
                    header,
                ])
                .args(extra)
                .args(skipped.iter().map(|n| format!("-DCUDABLAME_SKIP_{n}")))
                .arg(file)
                .output()
                .map_err(|e| e.to_string())?;
            if o.status.success() {
                return Ok(skipped);
            }
            let err = String::from_utf8_lossy(&o.stderr).into_owned();
            let undeclared: Vec<String> = err
                .lines()
                .filter(|l| l.contains("was not declared in this scope"))
                .filter_map(|l| {
                    l.split('\'')
                        .nth(1)
                        .or_else(|| l.split('‘').nth(1)?.split('’').next())
                })
                .map(str::to_string)
                .filter(|n| !skipped.contains(n))
                .collect();
            if undeclared.is_empty() {
                return Err(err);
            }
            skipped.extend(undeclared);
        }
    }

    #[test]
    fn generates_the_prototype_check_and_it_holds_for_cuda_min_h() {
        let text = cpp_file();
        assert_eq!(
            text.matches("static_assert(").count(),
            super::EntryPoint::ALL.len()
        );
        assert!(text.contains(
            "decltype(&cuLaunchKernel), std::uint32_t (*)(void*, std::uint32_t, std::uint32_t, \
             std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, std::uint32_t, void*, \
             void**, void**)>"
        ));
        let path = cpp_path();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        if std::process::Command::new("g++")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("no g++: {} written, not compiled", path.display());
            return;
        }
        let header = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/shim-tests/programs/cuda_min.h"
        );
        let flags = ["-DCUDABLAME_CHECK_ALL", "-DCUDA_MIN_NO_API_MACROS"];
        let skipped = compile(&path, header, &flags).unwrap_or_else(|e| panic!("{e}"));
        // cuda_min.h is the fake driver's header: it declares most hooked entry points.
        assert!(
            skipped.len() * 2 < super::EntryPoint::ALL.len(),
            "{skipped:?}"
        );
        // A wrong prototype is caught: cuLaunchKernel with one argument too few.
        let wrong = path.with_file_name("entry_point_check_wrong.cpp");
        std::fs::write(
            &wrong,
            text.replacen("void*, void**, void**)>", "void*, void**)>", 1),
        )
        .unwrap();
        let e = compile(&wrong, header, &flags).expect_err("a wrong prototype compiles");
        assert!(e.contains("cuLaunchKernel: cudablame's prototype"), "{e}");
    }
}
