//! `cuGetProcAddress` resolution: a static name -> function table (no `dlsym`) plus the real
//! driver's rules for versioned and per-thread-default-stream variants.
//!
//! Resolution of `(symbol, cudaVersion, flags)`:
//! 1. If `symbol` is a base name with versioned exports ([`VERSIONED`]), pick the newest export
//!    whose minimum version is `<= cudaVersion`; none → `VersionNotSufficient`.
//!    Otherwise, if `symbol` is itself an export, that export is the candidate when
//!    `cudaVersion >=` its introduction version ([`introduced`]), else `VersionNotSufficient`.
//!    Explicitly suffixed names (`cuLaunchKernel_ptsz`, `cuMemAlloc_v2`) are exports and so are
//!    looked up literally. Anything else → `NotFound`.
//! 2. With `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM` (2) in `flags`, the candidate's
//!    `_ptds` (synchronous calls) or `_ptsz` (stream-taking calls) export replaces it when one
//!    exists. Flags 0 and 1 keep the plain candidate.
//!
//! Examples: `("cuMemcpyHtoD", 13000, 2)` → `cuMemcpyHtoD_v2_ptds`;
//! `("cuStreamWriteValue64", 12000, 2)` → `cuStreamWriteValue64_v2_ptsz`;
//! `("cuStreamWriteValue64", 11000, 0)` → `cuStreamWriteValue64`;
//! `("cuGetProcAddress", 12000, 0)` → `cuGetProcAddress_v2`;
//! `("cuLaunchKernelEx", 11000, 0)` → `VersionNotSufficient`.

use crate::api_driver::*;
use crate::api_graph::*;
use crate::api_launch::*;
use crate::api_mem::*;
use crate::api_module::*;
use crate::api_stream::*;
use crate::types::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
use std::ffi::c_void;

/// Outcome of a resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The function's address.
    Found(*mut c_void),
    /// No such symbol (`CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`).
    NotFound,
    /// The symbol exists but not at the requested version
    /// (`CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`).
    VersionNotSufficient,
}

/// Base names whose ABI changed: `(base, [(minimum cudaVersion, export)...])`, oldest first.
/// The `_v2` of the 3.2-era memory/context APIs is given version 4000 for all of them.
///
/// `cuCtxSynchronize` is not here: CUDA 13's `cuCtxSynchronize_v2(CUcontext)` is a separate API
/// under its own name (cuda.h declares both; NVIDIA's cuda-python resolves `"cuCtxSynchronize"`
/// at 2000 and `"cuCtxSynchronize_v2"` literally at 13000, as it does `cuCtxGetDevice_v2`),
/// not a new ABI of the base name, so `"cuCtxSynchronize"` gives the `(void)` function at every
/// version, 13000 included.
pub const VERSIONED: &[(&str, &[(i32, &str)])] = &[
    ("cuMemAlloc", &[(4000, "cuMemAlloc_v2")]),
    ("cuMemFree", &[(4000, "cuMemFree_v2")]),
    ("cuMemAllocHost", &[(4000, "cuMemAllocHost_v2")]),
    (
        "cuMemHostGetDevicePointer",
        &[(4000, "cuMemHostGetDevicePointer_v2")],
    ),
    ("cuMemHostRegister", &[(4000, "cuMemHostRegister_v2")]),
    ("cuMemcpyHtoD", &[(4000, "cuMemcpyHtoD_v2")]),
    ("cuMemcpyDtoH", &[(4000, "cuMemcpyDtoH_v2")]),
    ("cuMemcpyDtoD", &[(4000, "cuMemcpyDtoD_v2")]),
    ("cuMemcpyHtoDAsync", &[(4000, "cuMemcpyHtoDAsync_v2")]),
    ("cuMemcpyDtoHAsync", &[(4000, "cuMemcpyDtoHAsync_v2")]),
    ("cuMemcpyDtoDAsync", &[(4000, "cuMemcpyDtoDAsync_v2")]),
    ("cuMemsetD8", &[(4000, "cuMemsetD8_v2")]),
    ("cuMemsetD32", &[(4000, "cuMemsetD32_v2")]),
    ("cuDeviceTotalMem", &[(4000, "cuDeviceTotalMem_v2")]),
    // CUDA 11.4 added execution-affinity parameters (_v3), 12.5 `CUctxCreateParams` (_v4);
    // CUDA 13's cuda.h maps `cuCtxCreate` to `cuCtxCreate_v4` and cuda-python resolves the base
    // name at 13000 to it.
    (
        "cuCtxCreate",
        &[
            (4000, "cuCtxCreate_v2"),
            (11040, "cuCtxCreate_v3"),
            (12050, "cuCtxCreate_v4"),
        ],
    ),
    ("cuCtxDestroy", &[(4000, "cuCtxDestroy_v2")]),
    ("cuCtxPushCurrent", &[(4000, "cuCtxPushCurrent_v2")]),
    ("cuCtxPopCurrent", &[(4000, "cuCtxPopCurrent_v2")]),
    ("cuStreamDestroy", &[(4000, "cuStreamDestroy_v2")]),
    ("cuEventDestroy", &[(4000, "cuEventDestroy_v2")]),
    (
        "cuDevicePrimaryCtxRelease",
        &[(4000, "cuDevicePrimaryCtxRelease_v2")],
    ),
    (
        "cuDevicePrimaryCtxReset",
        &[(4000, "cuDevicePrimaryCtxReset_v2")],
    ),
    (
        "cuStreamBeginCapture",
        &[
            (10000, "cuStreamBeginCapture"),
            (10010, "cuStreamBeginCapture_v2"),
        ],
    ),
    (
        "cuStreamWriteValue64",
        &[
            (8000, "cuStreamWriteValue64"),
            (12000, "cuStreamWriteValue64_v2"),
        ],
    ),
    (
        "cuStreamWriteValue32",
        &[
            (8000, "cuStreamWriteValue32"),
            (12000, "cuStreamWriteValue32_v2"),
        ],
    ),
    (
        "cuEventElapsedTime",
        &[
            (2000, "cuEventElapsedTime"),
            (12080, "cuEventElapsedTime_v2"),
        ],
    ),
    (
        "cuGetProcAddress",
        &[(11030, "cuGetProcAddress"), (12000, "cuGetProcAddress_v2")],
    ),
    (
        "cuGraphAddKernelNode",
        &[
            (10000, "cuGraphAddKernelNode"),
            (12000, "cuGraphAddKernelNode_v2"),
        ],
    ),
    (
        "cuGraphKernelNodeSetParams",
        &[
            (10000, "cuGraphKernelNodeSetParams"),
            (12000, "cuGraphKernelNodeSetParams_v2"),
        ],
    ),
    (
        "cuGraphExecKernelNodeSetParams",
        &[
            (10010, "cuGraphExecKernelNodeSetParams"),
            (12000, "cuGraphExecKernelNodeSetParams_v2"),
        ],
    ),
    // The CUDA 10.2 `cuGraphExecUpdate` (error node and result out-pointers) is not faked.
    ("cuGraphExecUpdate", &[(12000, "cuGraphExecUpdate_v2")]),
];

/// The CUDA version that introduced an unversioned export (2000 unless listed).
pub fn introduced(export: &str) -> i32 {
    match export {
        "cuLaunchKernel" | "cuLaunchKernel_ptsz" | "cuMemcpy" | "cuMemcpyAsync" => 4000,
        "cuStreamCreateWithPriority" => 5050,
        "cuGetErrorName" | "cuGetErrorString" => 6000,
        "cuDevicePrimaryCtxRetain" | "cuDevicePrimaryCtxGetState" => 7000,
        "cuLaunchCooperativeKernel" => 9000,
        "cuStreamGetCtx" => 9020,
        "cuLaunchHostFunc" | "cuLaunchHostFunc_ptsz" => 10000,
        "cuStreamEndCapture"
        | "cuStreamIsCapturing"
        | "cuGraphLaunch"
        | "cuGraphGetNodes"
        | "cuGraphDestroy"
        | "cuGraphExecDestroy"
        | "cuGraphCreate"
        | "cuGraphClone" => 10000,
        "cuThreadExchangeStreamCaptureMode" => 10010,
        "cuMemAllocAsync" | "cuMemFreeAsync" => 11020,
        "cuGraphInstantiateWithFlags" => 11040,
        "cuLaunchKernelEx" => 11060,
        "cuLibraryLoadData" | "cuLibraryUnload" | "cuLibraryGetKernel" | "cuKernelGetFunction" => {
            12000
        }
        "cuFuncGetName" | "cuKernelGetName" => 12030,
        _ => 2000,
    }
}

/// Resolves `symbol` for `cuda_version` and `flags` (see the module docs).
pub fn resolve(symbol: &str, cuda_version: i32, flags: u64) -> Resolution {
    let candidate = match VERSIONED.iter().find(|(base, _)| *base == symbol) {
        Some((_, versions)) => versions
            .iter()
            .rev()
            .find(|(min, _)| *min <= cuda_version)
            .map(|(_, export)| *export),
        None if export_address(symbol).is_none() => return Resolution::NotFound,
        None => (introduced(symbol) <= cuda_version).then_some(symbol),
    };
    let Some(candidate) = candidate else {
        return Resolution::VersionNotSufficient;
    };
    if flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM != 0 {
        for suffix in ["_ptds", "_ptsz"] {
            if let Some(address) = export_address(&format!("{candidate}{suffix}")) {
                return Resolution::Found(address);
            }
        }
    }
    export_address(candidate).map_or(Resolution::NotFound, Resolution::Found)
}

/// Generates [`export_address`] (name -> address of the exported function) and
/// [`EXPORT_NAMES`] from one list, so the two cannot drift apart.
macro_rules! export_table {
    ($($name:ident),* $(,)?) => {
        /// The address of the export called `name`, if the fake exports it.
        pub fn export_address(name: &str) -> Option<*mut c_void> {
            match name {
                $(stringify!($name) => Some($name as *const () as *mut c_void),)*
                _ => None,
            }
        }

        /// Every exported entry point, by name.
        pub const EXPORT_NAMES: &[&str] = &[$(stringify!($name)),*];
    };
}

export_table! {
    // api_driver
    cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName,
    cuDeviceTotalMem_v2, cuDeviceGetAttribute, cuDevicePrimaryCtxRetain,
    cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxGetState,
    cuCtxCreate_v2, cuCtxCreate_v3, cuCtxCreate_v4, cuCtxDestroy_v2, cuCtxSetCurrent,
    cuCtxGetCurrent, cuCtxPushCurrent_v2, cuCtxPopCurrent_v2, cuCtxGetDevice, cuCtxSynchronize,
    cuCtxSynchronize_v2,
    cuGetErrorName, cuGetErrorString, cuGetProcAddress, cuGetProcAddress_v2,
    // api_module
    cuModuleLoad, cuModuleLoadData, cuModuleLoadDataEx, cuModuleUnload, cuModuleGetFunction,
    cuLibraryLoadData, cuLibraryUnload, cuLibraryGetKernel, cuKernelGetFunction, cuFuncGetName,
    cuKernelGetName,
    // api_launch
    cuLaunchKernel, cuLaunchKernel_ptsz, cuLaunchKernelEx, cuLaunchKernelEx_ptsz,
    cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz,
    // api_mem
    cuMemAlloc_v2, cuMemFree_v2, cuMemAllocAsync, cuMemAllocAsync_ptsz, cuMemFreeAsync,
    cuMemFreeAsync_ptsz, cuMemHostAlloc, cuMemAllocHost_v2, cuMemFreeHost,
    cuMemHostGetDevicePointer_v2, cuMemHostRegister_v2, cuMemHostUnregister, cuPointerGetAttribute,
    cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds,
    cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, cuMemcpy, cuMemcpy_ptds,
    cuMemsetD8_v2, cuMemsetD8_v2_ptds, cuMemsetD32_v2, cuMemsetD32_v2_ptds,
    cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyDtoHAsync_v2,
    cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz,
    cuMemcpyAsync, cuMemcpyAsync_ptsz, cuMemsetD8Async, cuMemsetD8Async_ptsz,
    cuMemsetD32Async, cuMemsetD32Async_ptsz,
    // api_stream
    cuStreamCreate, cuStreamCreateWithPriority, cuStreamDestroy_v2,
    cuStreamSynchronize, cuStreamSynchronize_ptsz, cuStreamQuery, cuStreamQuery_ptsz,
    cuStreamWaitEvent, cuStreamWaitEvent_ptsz, cuStreamGetCtx, cuStreamGetCtx_ptsz,
    cuLaunchHostFunc, cuLaunchHostFunc_ptsz,
    cuStreamWriteValue64, cuStreamWriteValue64_ptsz, cuStreamWriteValue64_v2,
    cuStreamWriteValue64_v2_ptsz, cuStreamWriteValue32, cuStreamWriteValue32_ptsz,
    cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz,
    cuEventCreate, cuEventDestroy_v2, cuEventRecord, cuEventRecord_ptsz, cuEventSynchronize,
    cuEventQuery, cuEventElapsedTime, cuEventElapsedTime_v2,
    // api_graph
    cuStreamBeginCapture, cuStreamBeginCapture_ptsz, cuStreamBeginCapture_v2,
    cuStreamBeginCapture_v2_ptsz, cuStreamEndCapture, cuStreamEndCapture_ptsz,
    cuStreamIsCapturing, cuStreamIsCapturing_ptsz, cuThreadExchangeStreamCaptureMode,
    cuGraphInstantiateWithFlags, cuGraphLaunch, cuGraphLaunch_ptsz, cuGraphGetNodes,
    cuGraphDestroy, cuGraphExecDestroy, cuGraphCreate, cuGraphClone, cuGraphAddKernelNode,
    cuGraphAddKernelNode_v2, cuGraphKernelNodeSetParams, cuGraphKernelNodeSetParams_v2,
    cuGraphExecKernelNodeSetParams, cuGraphExecKernelNodeSetParams_v2, cuGraphExecUpdate_v2,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(symbol: &str, version: i32, flags: u64) -> *mut c_void {
        match resolve(symbol, version, flags) {
            Resolution::Found(address) => address,
            other => panic!("{symbol} {version} {flags}: {other:?}"),
        }
    }

    fn export(name: &str) -> *mut c_void {
        export_address(name).unwrap()
    }

    #[test]
    fn spec_examples() {
        assert_eq!(
            found("cuMemcpyHtoD", 13000, 2),
            export("cuMemcpyHtoD_v2_ptds")
        );
        assert_eq!(found("cuMemcpyHtoD", 13000, 0), export("cuMemcpyHtoD_v2"));
        assert_eq!(found("cuMemcpyHtoD", 13000, 1), export("cuMemcpyHtoD_v2"));
        assert_eq!(
            found("cuStreamWriteValue64", 12000, 2),
            export("cuStreamWriteValue64_v2_ptsz")
        );
        assert_eq!(
            found("cuStreamWriteValue64", 11080, 0),
            export("cuStreamWriteValue64")
        );
        assert_eq!(
            found("cuStreamWriteValue64", 8000, 0),
            export("cuStreamWriteValue64")
        );
        assert_eq!(
            found("cuLaunchKernel", 13000, 2),
            export("cuLaunchKernel_ptsz")
        );
        assert_eq!(found("cuLaunchKernel", 13000, 0), export("cuLaunchKernel"));
        assert_eq!(
            found("cuLaunchKernel_ptsz", 13000, 0),
            export("cuLaunchKernel_ptsz")
        );
        assert_eq!(
            found("cuGetProcAddress", 12000, 0),
            export("cuGetProcAddress_v2")
        );
        assert_eq!(
            found("cuGetProcAddress", 11030, 0),
            export("cuGetProcAddress")
        );
        assert_eq!(
            found("cuStreamBeginCapture", 10000, 2),
            export("cuStreamBeginCapture_ptsz")
        );
        assert_eq!(
            found("cuStreamBeginCapture", 13000, 2),
            export("cuStreamBeginCapture_v2_ptsz")
        );
        assert_eq!(found("cuMemcpy", 13000, 2), export("cuMemcpy_ptds"));
        assert_eq!(
            found("cuMemcpyAsync", 13000, 2),
            export("cuMemcpyAsync_ptsz")
        );
        assert_eq!(found("cuMemAlloc", 13000, 2), export("cuMemAlloc_v2"));
        assert_eq!(found("cuMemAlloc_v2", 13000, 0), export("cuMemAlloc_v2"));
        assert_eq!(
            found("cuCtxSynchronize", 13000, 0),
            export("cuCtxSynchronize")
        );
        assert_eq!(found("cuCtxCreate", 13000, 0), export("cuCtxCreate_v4"));
        assert_eq!(found("cuCtxCreate", 12000, 0), export("cuCtxCreate_v3"));
        assert_eq!(found("cuCtxCreate", 11030, 0), export("cuCtxCreate_v2"));
        assert_eq!(
            found("cuCtxSynchronize_v2", 13000, 0),
            export("cuCtxSynchronize_v2")
        );
        assert_eq!(resolve("cuNoSuchThing", 13000, 0), Resolution::NotFound);
        assert_eq!(
            resolve("cuLaunchKernelEx", 11000, 0),
            Resolution::VersionNotSufficient
        );
        assert_eq!(
            resolve("cuStreamWriteValue64", 7000, 0),
            Resolution::VersionNotSufficient
        );
        assert_eq!(
            resolve("cuMemAlloc", 3000, 0),
            Resolution::VersionNotSufficient
        );
    }

    #[test]
    fn table_is_consistent() {
        for (base, versions) in VERSIONED {
            assert!(!versions.is_empty(), "{base}");
            assert!(versions.windows(2).all(|w| w[0].0 < w[1].0), "{base}");
            for (_, export) in *versions {
                assert!(export_address(export).is_some(), "{base} -> {export}");
            }
        }
        for name in EXPORT_NAMES {
            assert!(
                matches!(resolve(name, 13000, 0), Resolution::Found(_)),
                "{name}"
            );
        }
        let mut names = EXPORT_NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EXPORT_NAMES.len(), "duplicate export");
    }
}
