//! C ABI types and constants of the CUDA driver API (`cuda.h`), as far as the fake needs them.
//!
//! Handles are opaque pointers; the fake hands out addresses of leaked Rust objects and checks
//! every incoming handle against a registry (see [`crate::handles`]) before dereferencing it.

use std::ffi::{c_int, c_uint, c_void};

/// `CUresult`: every driver entry point returns one of these (`enum cudaError_enum`).
pub type CUresult = c_uint;
/// `CUdevice`: a device ordinal.
pub type CUdevice = c_int;
/// `CUdeviceptr`: a device address. In the fake it is simply a host address.
pub type CUdeviceptr = u64;
/// `CUcontext` handle.
pub type CUcontext = *mut c_void;
/// `CUstream` handle (0 = legacy default stream, 0x1 = legacy, 0x2 = per-thread).
pub type CUstream = *mut c_void;
/// `CUevent` handle.
pub type CUevent = *mut c_void;
/// `CUmodule` handle.
pub type CUmodule = *mut c_void;
/// `CUfunction` handle (a `CUkernel` is accepted too, as in real CUDA).
pub type CUfunction = *mut c_void;
/// `CUlibrary` handle.
pub type CUlibrary = *mut c_void;
/// `CUkernel` handle.
pub type CUkernel = *mut c_void;
/// `CUgraph` handle.
pub type CUgraph = *mut c_void;
/// `CUgraphExec` handle.
pub type CUgraphExec = *mut c_void;
/// `CUgraphNode` handle.
pub type CUgraphNode = *mut c_void;

/// Internal result type: `Err` carries the `CUresult` to return.
pub type Res<T> = Result<T, CUresult>;

/// `CU_STREAM_LEGACY`: the legacy default stream of the current context.
pub const CU_STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`: the calling thread's per-thread default stream.
pub const CU_STREAM_PER_THREAD: usize = 0x2;
/// `CU_STREAM_NON_BLOCKING`: the stream does not synchronize with the legacy stream.
pub const CU_STREAM_NON_BLOCKING: c_uint = 0x1;

/// `CU_STREAM_CAPTURE_MODE_GLOBAL`.
pub const CAPTURE_MODE_GLOBAL: c_uint = 0;
/// `CU_STREAM_CAPTURE_MODE_THREAD_LOCAL`.
pub const CAPTURE_MODE_THREAD_LOCAL: c_uint = 1;
/// `CU_STREAM_CAPTURE_MODE_RELAXED`.
pub const CAPTURE_MODE_RELAXED: c_uint = 2;

/// `CU_STREAM_CAPTURE_STATUS_NONE`.
pub const CAPTURE_STATUS_NONE: c_uint = 0;
/// `CU_STREAM_CAPTURE_STATUS_ACTIVE`.
pub const CAPTURE_STATUS_ACTIVE: c_uint = 1;
/// `CU_STREAM_CAPTURE_STATUS_INVALIDATED`.
pub const CAPTURE_STATUS_INVALIDATED: c_uint = 2;

/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM`.
pub const CU_GET_PROC_ADDRESS_LEGACY_STREAM: u64 = 1 << 0;
/// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`.
pub const CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: u64 = 1 << 1;

/// `CU_GET_PROC_ADDRESS_SUCCESS` (`CUdriverProcAddressQueryResult`).
pub const PROC_ADDRESS_SUCCESS: c_int = 0;
/// `CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`.
pub const PROC_ADDRESS_SYMBOL_NOT_FOUND: c_int = 1;
/// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`.
pub const PROC_ADDRESS_VERSION_NOT_SUFFICIENT: c_int = 2;

/// `CU_EVENT_DISABLE_TIMING`.
pub const CU_EVENT_DISABLE_TIMING: c_uint = 0x2;
/// All valid `CUevent_flags` bits (default, blocking sync, disable timing, interprocess).
pub const CU_EVENT_VALID_FLAGS: c_uint = 0x1 | 0x2 | 0x4;

/// `CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER`: the only valid write-value flag besides 0.
pub const CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER: c_uint = 0x1;
/// `cuMemHostAlloc` flag: pinned for all contexts (cuda.h).
pub const CU_MEMHOSTALLOC_PORTABLE: c_uint = 0x1;
/// `cuMemHostRegister` flag: pinned for all contexts (cuda.h).
pub const CU_MEMHOSTREGISTER_PORTABLE: c_uint = 0x1;

/// The driver version reported by `cuDriverGetVersion` (CUDA 13.0).
pub const DRIVER_VERSION: c_int = 13000;

/// `CUlaunchConfig` (`struct CUlaunchConfig_st`), read by `cuLaunchKernelEx`.
#[repr(C)]
pub struct CUlaunchConfig {
    /// Grid width in blocks.
    pub grid_dim_x: c_uint,
    /// Grid height in blocks.
    pub grid_dim_y: c_uint,
    /// Grid depth in blocks.
    pub grid_dim_z: c_uint,
    /// Block width in threads.
    pub block_dim_x: c_uint,
    /// Block height in threads.
    pub block_dim_y: c_uint,
    /// Block depth in threads.
    pub block_dim_z: c_uint,
    /// Dynamic shared memory per block.
    pub shared_mem_bytes: c_uint,
    /// Stream to launch on.
    pub h_stream: CUstream,
    /// Launch attributes (ignored by the fake).
    pub attrs: *mut c_void,
    /// Number of launch attributes.
    pub num_attrs: c_uint,
}

/// Common device attributes (`CUdevice_attribute`) the fake gives non-zero values.
pub mod attr {
    use std::ffi::c_int;
    /// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK`.
    pub const MAX_THREADS_PER_BLOCK: c_int = 1;
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X`.
    pub const MAX_BLOCK_DIM_X: c_int = 2;
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y`.
    pub const MAX_BLOCK_DIM_Y: c_int = 3;
    /// `CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z`.
    pub const MAX_BLOCK_DIM_Z: c_int = 4;
    /// `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X`.
    pub const MAX_GRID_DIM_X: c_int = 5;
    /// `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y`.
    pub const MAX_GRID_DIM_Y: c_int = 6;
    /// `CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z`.
    pub const MAX_GRID_DIM_Z: c_int = 7;
    /// `CU_DEVICE_ATTRIBUTE_WARP_SIZE`.
    pub const WARP_SIZE: c_int = 10;
    /// `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
    pub const MULTIPROCESSOR_COUNT: c_int = 16;
    /// `CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY`.
    pub const CAN_MAP_HOST_MEMORY: c_int = 19;
    /// `CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS`.
    pub const CONCURRENT_KERNELS: c_int = 31;
    /// `CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING`.
    pub const UNIFIED_ADDRESSING: c_int = 41;
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR`.
    pub const COMPUTE_CAPABILITY_MAJOR: c_int = 75;
    /// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR`.
    pub const COMPUTE_CAPABILITY_MINOR: c_int = 76;
    /// `CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS` (`_V1`).
    pub const CAN_USE_STREAM_MEM_OPS: c_int = 92;
    /// `CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS` (`_V1`).
    pub const CAN_USE_64_BIT_STREAM_MEM_OPS: c_int = 93;
    /// `CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`.
    pub const COOPERATIVE_LAUNCH: c_int = 95;
    /// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`.
    pub const MEMORY_POOLS_SUPPORTED: c_int = 115;
}
