//! Exports: kernel launches (`cuLaunchKernel`, `cuLaunchKernelEx`, `cuLaunchCooperativeKernel`).
#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

use crate::capture;
use crate::context;
use crate::errors;
use crate::module::FUNCS;
use crate::stream::{lookup, NullStream, Op};
use crate::types::*;
use std::ffi::{c_uint, c_void};

/// Launch-configuration limits of the fake device (those of a real Hopper GPU).
const MAX_THREADS_PER_BLOCK: u64 = 1024;
const MAX_BLOCK: [c_uint; 3] = [1024, 1024, 64];
const MAX_GRID: [c_uint; 3] = [i32::MAX as c_uint, 65535, 65535];

/// `CUDA_ERROR_INVALID_VALUE` for a zero dimension, more than 1024 threads per block or a
/// dimension above the device limits.
pub(crate) fn check_dims(grid: [c_uint; 3], block: [c_uint; 3]) -> Res<()> {
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    let within =
        |dims: [c_uint; 3], max: [c_uint; 3]| dims.iter().zip(max).all(|(&d, m)| d >= 1 && d <= m);
    if threads > MAX_THREADS_PER_BLOCK || !within(grid, MAX_GRID) || !within(block, MAX_BLOCK) {
        return Err(errors::INVALID_VALUE);
    }
    Ok(())
}

/// Common body of every launch entry point.
fn launch(
    f: CUfunction,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared_mem: c_uint,
    h: CUstream,
    null: NullStream,
) -> Res<()> {
    context::require_init()?;
    let func = FUNCS.get(f).ok_or(errors::INVALID_HANDLE)?;
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    check_dims(grid, block)?;
    if let Some(code) = func.spec.launch_error {
        crate::trace!(
            "launch of {} fails synchronously with {}",
            func.name.to_string_lossy(),
            code
        );
        return Err(code);
    }
    let op = Op::Kernel {
        func,
        grid,
        block,
        shared_mem,
    };
    capture::submit(stream, op).map(drop)
}

fn launch_kernel(
    f: CUfunction,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared_mem: c_uint,
    h: CUstream,
    _params: *mut *mut c_void,
    _extra: *mut *mut c_void,
    null: NullStream,
) -> Res<()> {
    launch(f, [gx, gy, gz], [bx, by, bz], shared_mem, h, null)
}

dual_export! {
    /// `cuLaunchKernel(CUfunction, gridDimX..Z, blockDimX..Z, sharedMemBytes, CUstream,
    /// void** kernelParams, void** extra)`: enqueues the kernel and returns.
    fn cuLaunchKernel / cuLaunchKernel_ptsz (
        f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
        shared_mem: c_uint, h: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void,
    ) => launch_kernel
}

unsafe fn launch_kernel_ex(
    config: *const CUlaunchConfig,
    f: CUfunction,
    _params: *mut *mut c_void,
    _extra: *mut *mut c_void,
    null: NullStream,
) -> Res<()> {
    context::require_init()?;
    // SAFETY: NULL or a valid `CUlaunchConfig` (cuLaunchKernelEx's contract, passed through).
    let Some(c) = (unsafe { config.as_ref() }) else {
        return Err(errors::INVALID_VALUE);
    };
    let grid = [c.grid_dim_x, c.grid_dim_y, c.grid_dim_z];
    let block = [c.block_dim_x, c.block_dim_y, c.block_dim_z];
    launch(f, grid, block, c.shared_mem_bytes, c.h_stream, null)
}

dual_export! {
    /// `cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void** kernelParams, void** extra)`:
    /// launch attributes are ignored.
    fn cuLaunchKernelEx / cuLaunchKernelEx_ptsz (
        config: *const CUlaunchConfig, f: CUfunction, params: *mut *mut c_void, extra: *mut *mut c_void,
    ) => launch_kernel_ex
}

fn launch_cooperative(
    f: CUfunction,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared_mem: c_uint,
    h: CUstream,
    _params: *mut *mut c_void,
    null: NullStream,
) -> Res<()> {
    launch(f, [gx, gy, gz], [bx, by, bz], shared_mem, h, null)
}

dual_export! {
    /// `cuLaunchCooperativeKernel(CUfunction, gridDimX..Z, blockDimX..Z, sharedMemBytes,
    /// CUstream, void** kernelParams)`.
    fn cuLaunchCooperativeKernel / cuLaunchCooperativeKernel_ptsz (
        f: CUfunction, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
        shared_mem: c_uint, h: CUstream, params: *mut *mut c_void,
    ) => launch_cooperative
}

#[cfg(test)]
mod tests {
    use super::check_dims;

    #[test]
    fn dims() {
        assert!(check_dims([1, 1, 1], [1024, 1, 1]).is_ok());
        assert!(check_dims([1, 1, 1], [32, 32, 1]).is_ok());
        assert!(check_dims([1, 1, 1], [33, 32, 1]).is_err());
        assert!(check_dims([0, 1, 1], [1, 1, 1]).is_err());
        assert!(check_dims([1, 1, 1], [1, 0, 1]).is_err());
        assert!(check_dims([1, 1, 1], [1, 1, 65]).is_err());
        assert!(check_dims([1, 65536, 1], [1, 1, 1]).is_err());
        assert!(check_dims([u32::MAX, 1, 1], [1, 1, 1]).is_err());
    }
}
