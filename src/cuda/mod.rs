//! CUDA driver API types, constants and error codes, as declared in `cuda.h` (CUDA 13.0),
//! plus the one declared list of hooked entry points ([`entry_points`]).

#![allow(non_camel_case_types)]

pub(crate) mod entry_points;

use std::ffi::{c_int, c_uint, c_void};

/// `CUresult`: 0 is `CUDA_SUCCESS`; the codes used here are listed in [`error_name`].
pub(crate) type CUresult = c_uint;
/// `CUdevice`: a device ordinal.
pub(crate) type CUdevice = c_int;
/// `CUdeviceptr`: a device virtual address (unified with host addresses on 64-bit systems).
pub(crate) type CUdeviceptr = u64;
pub(crate) type CUcontext = *mut c_void;
pub(crate) type CUstream = *mut c_void;
pub(crate) type CUfunction = *mut c_void;
pub(crate) type CUkernel = *mut c_void;
pub(crate) type CUevent = *mut c_void;
pub(crate) type CUmodule = *mut c_void;
pub(crate) type CUlibrary = *mut c_void;
pub(crate) type CUgraph = *mut c_void;
pub(crate) type CUgraphExec = *mut c_void;
pub(crate) type CUgraphNode = *mut c_void;
pub(crate) type CUmemoryPool = *mut c_void;
/// `CUstreamCaptureMode`: `CU_STREAM_CAPTURE_MODE_GLOBAL` 0, `THREAD_LOCAL` 1, `RELAXED` 2.
pub(crate) type CUstreamCaptureMode = c_uint;
/// `CUstreamCaptureStatus`: `NONE` 0, `ACTIVE` 1, `INVALIDATED` 2.
pub(crate) type CUstreamCaptureStatus = c_uint;
/// `CUjit_option` / `CUlibraryOption`: enums passed by value in arrays.
pub(crate) type CUjit_option = c_uint;
pub(crate) type CUlibraryOption = c_uint;
/// `CUdriverProcAddressQueryResult`: `SUCCESS` 0, `SYMBOL_NOT_FOUND` 1, `VERSION_NOT_SUFFICIENT` 2.
pub(crate) type CUdriverProcAddressQueryResult = c_uint;

/// `CUlaunchConfig` (cuda.h, "Execution Control"): the first argument of `cuLaunchKernelEx`.
#[repr(C)]
pub(crate) struct CUlaunchConfig {
    pub(crate) grid_dim_x: c_uint,
    pub(crate) grid_dim_y: c_uint,
    pub(crate) grid_dim_z: c_uint,
    pub(crate) block_dim_x: c_uint,
    pub(crate) block_dim_y: c_uint,
    pub(crate) block_dim_z: c_uint,
    pub(crate) shared_mem_bytes: c_uint,
    pub(crate) h_stream: CUstream,
    pub(crate) attrs: *mut c_void,
    pub(crate) num_attrs: c_uint,
}

/// Opaque copy descriptors (`CUDA_MEMCPY2D`, `CUDA_MEMCPY3D`): only passed through.
pub(crate) type CopyDescriptor = *const c_void;

pub(crate) const CUDA_SUCCESS: CUresult = 0;
pub(crate) const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
pub(crate) const CUDA_ERROR_NOT_READY: CUresult = 600;
/// "A device-side assert triggered during kernel execution" (sticky).
pub(crate) const CUDA_ERROR_ASSERT: CUresult = 710;

/// `CU_STREAM_LEGACY`: the legacy default stream, valid in every API variant.
pub(crate) const CU_STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`: the calling thread's per-thread default stream.
pub(crate) const CU_STREAM_PER_THREAD: usize = 0x2;
/// `cuMemHostAlloc` flags (Memory Management): portable across contexts, mapped for the device.
pub(crate) const CU_MEMHOSTALLOC_PORTABLE: c_uint = 0x01;
pub(crate) const CU_MEMHOSTALLOC_DEVICEMAP: c_uint = 0x02;
/// `cuMemHostRegister` flag: map the range into the device's address space.
pub(crate) const CU_MEMHOSTREGISTER_DEVICEMAP: c_uint = 0x02;
/// `cuMemHostRegister` flag (cuda.h): "The memory returned by this call will be considered as
/// pinned memory by all CUDA contexts, not just the one that performed the allocation" (driver
/// API doc, `cuMemHostRegister`).
pub(crate) const CU_MEMHOSTREGISTER_PORTABLE: c_uint = 0x01;
pub(crate) const CU_STREAM_CAPTURE_MODE_RELAXED: CUstreamCaptureMode = 2;
pub(crate) const CU_STREAM_CAPTURE_STATUS_NONE: CUstreamCaptureStatus = 0;

/// Codes that poison the context: after one, every call on that context returns it
/// (driver API docs, "Error Handling"; measured on the H200, see shared/notes/cuda-facts.md).
pub(crate) fn is_sticky(code: CUresult) -> bool {
    matches!(
        code,
        700 | 702 | 710 | 714 | 715 | 716 | 717 | 718 | 719 | 999
    )
}

/// Stream-capture errors (900..=909) are the program's own business: never blamed on a launch.
pub(crate) fn is_capture_error(code: CUresult) -> bool {
    (900..=909).contains(&code)
}

/// `(name, description)` for the codes cudablame reports, from `cuda.h`'s `cudaError_enum` docs.
/// Used when the driver's own `cuGetErrorName`/`cuGetErrorString` are unavailable.
pub(crate) fn error_name(code: CUresult) -> (&'static str, &'static str) {
    match code {
        0 => ("CUDA_SUCCESS", "no error"),
        1 => ("CUDA_ERROR_INVALID_VALUE", "invalid argument"),
        2 => ("CUDA_ERROR_OUT_OF_MEMORY", "out of memory"),
        3 => ("CUDA_ERROR_NOT_INITIALIZED", "initialization error"),
        98 => (
            "CUDA_ERROR_INVALID_DEVICE_FUNCTION",
            "invalid device function",
        ),
        200 => ("CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"),
        201 => ("CUDA_ERROR_INVALID_CONTEXT", "invalid device context"),
        209 => (
            "CUDA_ERROR_NO_BINARY_FOR_GPU",
            "no kernel image is available for execution on the device",
        ),
        400 => ("CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"),
        500 => ("CUDA_ERROR_NOT_FOUND", "named symbol not found"),
        600 => ("CUDA_ERROR_NOT_READY", "device not ready"),
        700 => (
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "an illegal memory access was encountered",
        ),
        701 => (
            "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
            "too many resources requested for launch",
        ),
        702 => (
            "CUDA_ERROR_LAUNCH_TIMEOUT",
            "the launch timed out and was terminated",
        ),
        709 => ("CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"),
        710 => ("CUDA_ERROR_ASSERT", "device-side assert triggered"),
        714 => ("CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"),
        715 => (
            "CUDA_ERROR_ILLEGAL_INSTRUCTION",
            "an illegal instruction was encountered",
        ),
        716 => ("CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"),
        717 => (
            "CUDA_ERROR_INVALID_ADDRESS_SPACE",
            "operation not supported on global/shared address space",
        ),
        718 => ("CUDA_ERROR_INVALID_PC", "invalid program counter"),
        719 => ("CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"),
        720 => (
            "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
            "too many blocks in cooperative launch",
        ),
        801 => ("CUDA_ERROR_NOT_SUPPORTED", "operation not supported"),
        900 => (
            "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
            "operation not permitted when stream is capturing",
        ),
        901 => (
            "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
            "operation failed due to a previous error during capture",
        ),
        999 => ("CUDA_ERROR_UNKNOWN", "unknown error"),
        _ => ("CUDA_ERROR_UNRECOGNIZED", "unrecognized error code"),
    }
}

/// Where one side of a copy lives, as far as cudablame can tell
/// (`cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)`, see `real::Driver::memory_side`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Host,
    Device,
    Unknown,
}
