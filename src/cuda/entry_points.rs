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
            [cuEventSynchronize: legacy]
                (event: CUevent)
                => observe();
            [cuEventQuery: legacy]
                (event: CUevent)
                => observe();
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
            [cuStreamWaitEvent: legacy, cuStreamWaitEvent_ptsz: per_thread]
                (stream: CUstream, event: CUevent, flags: c_uint)
                => observe_stream(stream);

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
            [cuStreamBeginCapture_v2: legacy, cuStreamBeginCapture_v2_ptsz: per_thread]
                (stream: CUstream, mode: CUstreamCaptureMode)
                => begin_capture(stream);
            [cuStreamBeginCaptureToGraph: legacy, cuStreamBeginCaptureToGraph_ptsz: per_thread]
                (stream: CUstream, graph: CUgraph, deps: *const CUgraphNode, dep_data: *const c_void,
                 num_deps: usize, mode: CUstreamCaptureMode)
                => begin_capture(stream);
            [cuStreamEndCapture: legacy, cuStreamEndCapture_ptsz: per_thread]
                (stream: CUstream, graph: *mut CUgraph)
                => end_capture(stream, graph);
            [cuGraphInstantiateWithFlags: legacy]
                (exec: *mut CUgraphExec, graph: CUgraph, flags: u64)
                => instantiate(exec, graph);
            [cuGraphInstantiateWithParams: legacy, cuGraphInstantiateWithParams_ptsz: per_thread]
                (exec: *mut CUgraphExec, graph: CUgraph, params: *mut c_void)
                => instantiate(exec, graph);
            [cuStreamDestroy_v2: legacy]
                (stream: CUstream)
                => destroy_stream(stream);

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
