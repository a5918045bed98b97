//! Exports: initialization, version, devices, contexts, error strings and `cuGetProcAddress`.
//!
//! All exports in the `api_*` modules are `unsafe extern "C"` functions with the signatures of
//! `cuda.h`; their safety contract is the one documented for the real driver (pointer arguments
//! must be NULL or valid for the access the CUDA documentation describes).
#![allow(non_snake_case, clippy::missing_safety_doc)]

use crate::capture;
use crate::context::{self, Context, CONTEXTS};
use crate::errors;
use crate::handles::handle_of;
use crate::resolve::{self, Resolution};
use crate::types::*;
use crate::{guard, write_out};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

/// `cuInit(unsigned int Flags)`: flags must be 0.
#[no_mangle]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CUresult {
    guard(|| {
        if flags != 0 {
            return Err(errors::INVALID_VALUE);
        }
        context::init()
    })
}

/// `cuDriverGetVersion(int*)`: 13000. Works before `cuInit`.
#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    guard(|| {
        // SAFETY: `version` is NULL or valid for a write, as cuDriverGetVersion's contract (cuda.h)
        // says.
        unsafe { write_out(version, DRIVER_VERSION) }
    })
}

/// `cuDeviceGetCount(int*)`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    guard(|| {
        context::require_init()?;
        // SAFETY: `count` is NULL or valid for a write, as cuDeviceGetCount's contract (cuda.h)
        // says.
        unsafe { write_out(count, context::device_count()) }
    })
}

/// `cuDeviceGet(CUdevice*, int ordinal)`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    guard(|| {
        context::check_device(ordinal)?;
        // SAFETY: `device` is NULL or valid for a write, as cuDeviceGet's contract (cuda.h) says.
        unsafe { write_out(device, ordinal) }
    })
}

/// `cuDeviceGetName(char*, int len, CUdevice)`: "Fake GPU N", truncated to `len - 1` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    guard(|| {
        context::check_device(dev)?;
        if name.is_null() || len <= 0 {
            return Err(errors::INVALID_VALUE);
        }
        let text = format!("Fake GPU {dev}");
        let n = text.len().min(len as usize - 1);
        // SAFETY: `name` is valid for `len` bytes (cuDeviceGetName's contract) and `n < len`.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr() as *const c_char, name, n);
            *name.add(n) = 0;
        }
        Ok(())
    })
}

/// `cuDeviceTotalMem_v2(size_t*, CUdevice)`: 80 GiB.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> CUresult {
    guard(|| {
        context::check_device(dev)?;
        // SAFETY: `bytes` is NULL or valid for a write, as cuDeviceTotalMem_v2's contract (cuda.h)
        // says.
        unsafe { write_out(bytes, 80 << 30) }
    })
}

/// Value of a device attribute: a few plausible values, 0 for everything else.
fn attribute_value(attrib: c_int) -> c_int {
    let memops = if stream_memops_supported() { 1 } else { 0 };
    match attrib {
        attr::MAX_THREADS_PER_BLOCK | attr::MAX_BLOCK_DIM_X | attr::MAX_BLOCK_DIM_Y => 1024,
        attr::MAX_BLOCK_DIM_Z => 64,
        attr::MAX_GRID_DIM_X => i32::MAX,
        attr::MAX_GRID_DIM_Y | attr::MAX_GRID_DIM_Z => 65535,
        attr::WARP_SIZE => 32,
        attr::MULTIPROCESSOR_COUNT => 132,
        attr::COMPUTE_CAPABILITY_MAJOR => 9,
        attr::COMPUTE_CAPABILITY_MINOR => 0,
        attr::CAN_MAP_HOST_MEMORY
        | attr::UNIFIED_ADDRESSING
        | attr::CONCURRENT_KERNELS
        | attr::COOPERATIVE_LAUNCH
        | attr::MEMORY_POOLS_SUPPORTED => 1,
        attr::CAN_USE_STREAM_MEM_OPS | attr::CAN_USE_64_BIT_STREAM_MEM_OPS => memops,
        _ => 0,
    }
}

/// Whether stream memory operations are available (`FAKE_CUDA_NO_STREAM_MEMOPS` unset / 0),
/// read once: the environment scan is asked on every marker write, and an uncached `getenv`
/// there was most of what the "marker" phase of the shim's `CUDABLAME_STATS` measured against
/// the simulated driver.
pub fn stream_memops_supported() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        !std::env::var("FAKE_CUDA_NO_STREAM_MEMOPS").is_ok_and(|v| !v.is_empty() && v != "0")
    })
}

/// The host time (ns) each stream memory operation spends in its call before it returns
/// (`FAKE_CUDA_MEMOP_HOST_US`, default 0), read once: a host whose driver calls are slow, where
/// cudablame's progress markers cost the launching thread several µs each.
pub fn stream_memop_host_ns() -> u64 {
    static NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NS.get_or_init(|| {
        std::env::var("FAKE_CUDA_MEMOP_HOST_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(0, |us| us.saturating_mul(1000))
    })
}

/// `cuDeviceGetAttribute(int*, CUdevice_attribute, CUdevice)`.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    value: *mut c_int,
    attrib: c_int,
    dev: CUdevice,
) -> CUresult {
    guard(|| {
        context::check_device(dev)?;
        // SAFETY: `value` is NULL or valid for a write, as cuDeviceGetAttribute's contract (cuda.h)
        // says.
        unsafe { write_out(value, attribute_value(attrib)) }
    })
}

/// `cuDevicePrimaryCtxRetain(CUcontext*, CUdevice)`.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    guard(|| {
        if pctx.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        let ctx = context::primary_retain(dev)?;
        // SAFETY: `pctx` is NULL or valid for a write, as cuDevicePrimaryCtxRetain's contract
        // (cuda.h) says.
        unsafe { write_out(pctx, handle_of(ctx)) }
    })
}

/// `cuDevicePrimaryCtxRelease_v2(CUdevice)`: the last release destroys the primary context.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    guard(|| context::primary_release(dev))
}

/// `cuDevicePrimaryCtxReset_v2(CUdevice)`: destroys the primary context whatever its count.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) -> CUresult {
    guard(|| context::primary_reset(dev))
}

/// `cuDevicePrimaryCtxGetState(CUdevice, unsigned int* flags, int* active)`.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(
    dev: CUdevice,
    flags: *mut c_uint,
    active: *mut c_int,
) -> CUresult {
    guard(|| {
        context::require_init()?;
        let on = context::primary_active(dev)?;
        if !flags.is_null() {
            // SAFETY: `flags` is NULL or valid for a write, as cuDevicePrimaryCtxGetState's
            // contract (cuda.h) says.
            unsafe { write_out(flags, 0) }?;
        }
        // SAFETY: `active` is NULL or valid for a write, as cuDevicePrimaryCtxGetState's contract
        // (cuda.h) says.
        unsafe { write_out(active, on as c_int) }
    })
}

/// `cuCtxCreate_v2(CUcontext*, unsigned int flags, CUdevice)`: creates and pushes a context.
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v2(
    pctx: *mut CUcontext,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    guard(|| create_context(pctx, dev))
}

/// `cuCtxCreate_v3(CUcontext*, CUexecAffinityParam*, int numParams, unsigned int flags,
/// CUdevice)` (CUDA 11.4): as `_v2`; the fake has no execution affinity, the parameters are not
/// read.
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v3(
    pctx: *mut CUcontext,
    _params: *const c_void,
    _num_params: c_int,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    guard(|| create_context(pctx, dev))
}

/// `cuCtxCreate_v4(CUcontext*, CUctxCreateParams*, unsigned int flags, CUdevice)` (CUDA 12.5;
/// CUDA 13's `cuCtxCreate`): as `_v2`; the parameters (NULL: none) are not read.
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v4(
    pctx: *mut CUcontext,
    _params: *const c_void,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    guard(|| create_context(pctx, dev))
}

/// Every `cuCtxCreate` ABI: creates a context on `dev` and pushes it.
fn create_context(pctx: *mut CUcontext, dev: CUdevice) -> Result<(), CUresult> {
    context::check_device(dev)?;
    if pctx.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    let ctx = Context::create(dev, false);
    context::push_current(ctx)?;
    // SAFETY: `pctx` is non-null and valid for a write, as every cuCtxCreate's contract
    // (cuda.h) says.
    unsafe { write_out(pctx, handle_of(ctx)) }
}

/// `cuCtxDestroy_v2(CUcontext)`: waits for the context's work, then destroys it. A poisoned
/// context is destroyed too (that is how a real application recovers), and the call returns its
/// sticky error (`context::destroyed_result`).
#[no_mangle]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: CUcontext) -> CUresult {
    guard(|| {
        context::require_init()?;
        let ctx = CONTEXTS.get(ctx).ok_or(errors::INVALID_CONTEXT)?;
        context::pop_if_current(ctx);
        context::destroyed_result(ctx.destroy())
    })
}

/// `cuCtxSetCurrent(CUcontext)`: replaces the top of the thread's stack (NULL pops).
#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    guard(|| {
        context::require_init()?;
        if ctx.is_null() {
            return context::set_current(None);
        }
        let ctx = CONTEXTS.get(ctx).ok_or(errors::INVALID_CONTEXT)?;
        context::set_current(Some(ctx))
    })
}

/// `cuCtxGetCurrent(CUcontext*)`: NULL if the thread has no context. Works after a fault.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetCurrent(pctx: *mut CUcontext) -> CUresult {
    guard(|| {
        context::require_init()?;
        let current = context::current_raw().map_or(std::ptr::null_mut(), handle_of);
        // SAFETY: `pctx` is NULL or valid for a write, as cuCtxGetCurrent's contract (cuda.h) says.
        unsafe { write_out(pctx, current) }
    })
}

/// `cuCtxPushCurrent_v2(CUcontext)`.
#[no_mangle]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: CUcontext) -> CUresult {
    guard(|| {
        context::require_init()?;
        let ctx = CONTEXTS.get(ctx).ok_or(errors::INVALID_CONTEXT)?;
        context::push_current(ctx)
    })
}

/// `cuCtxPopCurrent_v2(CUcontext*)`: `pctx` may be NULL.
#[no_mangle]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) -> CUresult {
    guard(|| {
        context::require_init()?;
        let popped = context::pop_current()?.ok_or(errors::INVALID_CONTEXT)?;
        if !pctx.is_null() {
            // SAFETY: not NULL, so valid for a write (cuCtxPopCurrent's contract).
            unsafe { *pctx = handle_of(popped) };
        }
        Ok(())
    })
}

/// `cuCtxGetDevice(CUdevice*)`. Works after a fault.
#[no_mangle]
pub unsafe extern "C" fn cuCtxGetDevice(device: *mut CUdevice) -> CUresult {
    guard(|| {
        let ctx = context::current()?;
        // SAFETY: `device` is NULL or valid for a write, as cuCtxGetDevice's contract (cuda.h)
        // says.
        unsafe { write_out(device, ctx.device) }
    })
}

/// `cuCtxSynchronize()`: waits for every stream of the current context.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    guard(|| {
        let ctx = context::current_checked()?;
        capture::check_unsafe_call()?;
        ctx.synchronize_all();
        ctx.check()
    })
}

/// `cuCtxSynchronize_v2(CUcontext)` (CUDA 13; what `cudaDeviceSynchronize` calls): waits for every
/// stream of `ctx`, or of the current context when `ctx` is NULL.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize_v2(ctx: CUcontext) -> CUresult {
    guard(|| {
        let ctx = if ctx.is_null() {
            context::current_checked()?
        } else {
            CONTEXTS.get(ctx).ok_or(errors::INVALID_CONTEXT)?
        };
        capture::check_unsafe_call()?;
        ctx.synchronize_all();
        ctx.check()
    })
}

/// Marks this library as the simulated driver (`cudablame demo` looks for it); not a CUDA API.
#[no_mangle]
pub extern "C" fn fakecuda_is_simulated() -> i32 {
    1
}

/// `cuGetErrorName(CUresult, const char**)`: `CUDA_ERROR_INVALID_VALUE` (and NULL) if unknown.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(error: CUresult, pstr: *mut *const c_char) -> CUresult {
    // SAFETY: the arguments go to `error_text` unchanged, valid as cuGetErrorName's contract
    // (cuda.h) says.
    guard(|| unsafe { error_text(error, pstr, |(name, _)| name) })
}

/// `cuGetErrorString(CUresult, const char**)`: `CUDA_ERROR_INVALID_VALUE` (and NULL) if unknown.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(error: CUresult, pstr: *mut *const c_char) -> CUresult {
    // SAFETY: the arguments go to `error_text` unchanged, valid as cuGetErrorString's contract
    // (cuda.h) says.
    guard(|| unsafe { error_text(error, pstr, |(_, desc)| desc) })
}

unsafe fn error_text(
    error: CUresult,
    pstr: *mut *const c_char,
    pick: impl FnOnce((&'static str, &'static str)) -> &'static str,
) -> Res<()> {
    match errors::lookup(error) {
        Some(entry) => {
            // SAFETY: `pstr` is NULL or valid for a write: `error_text`'s callers pass an export's
            // out-pointer argument.
            unsafe { write_out(pstr, pick(entry).as_ptr() as *const c_char) }
        }
        None => {
            if !pstr.is_null() {
                // SAFETY: not NULL, so valid for a write (the exports' contract, passed through).
                unsafe { *pstr = std::ptr::null() };
            }
            Err(errors::INVALID_VALUE)
        }
    }
}

unsafe fn proc_address(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> Res<Resolution> {
    if symbol.is_null() || pfn.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    // SAFETY: not NULL, so a NUL-terminated string (cuGetProcAddress's contract, passed through).
    let name = unsafe { CStr::from_ptr(symbol) }.to_str().unwrap_or("");
    let resolution = resolve::resolve(name, cuda_version, flags);
    let address = match resolution {
        Resolution::Found(address) => address,
        _ => std::ptr::null_mut(),
    };
    // SAFETY: not NULL, so valid for a write (cuGetProcAddress's contract, passed through).
    unsafe { *pfn = address };
    crate::trace!(
        "cuGetProcAddress({name}, {cuda_version}, {flags}) -> {:?}",
        resolution
    );
    Ok(resolution)
}

/// `cuGetProcAddress(const char*, void**, int cudaVersion, cuuint64_t flags)` (CUDA 11.3
/// signature): `CUDA_ERROR_NOT_FOUND` if the symbol is unknown or needs a newer version.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult {
    // SAFETY: the arguments go to `proc_address` unchanged, valid as cuGetProcAddress's contract
    // (cuda.h) says.
    guard(
        || match unsafe { proc_address(symbol, pfn, cuda_version, flags) }? {
            Resolution::Found(_) => Ok(()),
            _ => Err(errors::NOT_FOUND),
        },
    )
}

/// `cuGetProcAddress_v2(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*)`:
/// `CUDA_SUCCESS` with `*pfn = NULL` and the reason in `*status` (which may be NULL) when the
/// symbol is unknown or needs a newer `cudaVersion`.
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    guard(|| {
        // SAFETY: the arguments go to `proc_address` unchanged, valid as cuGetProcAddress_v2's
        // contract (cuda.h) says.
        let code = match unsafe { proc_address(symbol, pfn, cuda_version, flags) }? {
            Resolution::Found(_) => PROC_ADDRESS_SUCCESS,
            Resolution::NotFound => PROC_ADDRESS_SYMBOL_NOT_FOUND,
            Resolution::VersionNotSufficient => PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
        };
        if !status.is_null() {
            // SAFETY: not NULL, so valid for a write (cuGetProcAddress_v2's contract).
            unsafe { *status = code };
        }
        Ok(())
    })
}
