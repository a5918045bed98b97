//! Exports: allocation, pinned host memory, copies and memsets.
//!
//! Blocking copies/memsets enqueue on the legacy stream (the per-thread stream in `_ptds`) and
//! wait only where the driver API's "API synchronization behavior" section says they do:
//! device-to-host copies return once the copy completed; host-to-device copies synchronize the
//! stream before copying (and here also wait for the copy, as for pinned memory); device-to-device
//! copies ("no host-side synchronization is performed") and memsets of device memory
//! (asynchronous with respect to the host unless the target is pinned host memory or a Unified
//! Memory region) enqueue and return. Asynchronous ones enqueue on their stream (or its capture) and return.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use crate::capture;
use crate::context;
use crate::errors;
use crate::memory::{self, Kind};
use crate::stream::{lookup, NullStream, Op, StreamKind};
use crate::types::*;
use crate::{guard, write_out};
use std::ffi::{c_uchar, c_uint, c_void};

/// `cuMemAlloc_v2(CUdeviceptr*, size_t)`: zeroed, 256-byte aligned; `CUDA_ERROR_INVALID_VALUE`
/// for 0 bytes. Capture-unsafe.
#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: usize) -> CUresult {
    guard(|| {
        context::current_checked()?;
        if dptr.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        capture::check_unsafe_call()?;
        // SAFETY: `dptr` is NULL or valid for a write, as cuMemAlloc_v2's contract (cuda.h) says.
        unsafe { write_out(dptr, memory::alloc(Kind::Device, size)? as CUdeviceptr) }
    })
}

/// `cuMemFree_v2(CUdeviceptr)`: 0 is a no-op. Capture-unsafe.
#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    guard(|| {
        context::current_checked()?;
        capture::check_unsafe_call()?;
        if dptr == 0 {
            return Ok(());
        }
        memory::free(Kind::Device, dptr as usize)
    })
}

unsafe fn mem_alloc_async(
    dptr: *mut CUdeviceptr,
    size: usize,
    h: CUstream,
    null: NullStream,
) -> Res<()> {
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    if dptr.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    if stream.kind == StreamKind::Legacy {
        capture::check_legacy_use(stream.ctx)?;
    }
    // SAFETY: `dptr` is NULL or valid for a write: `mem_alloc_async`'s callers pass an export's
    // out-pointer argument.
    unsafe { write_out(dptr, memory::alloc(Kind::Device, size)? as CUdeviceptr) }
}

dual_export! {
    /// `cuMemAllocAsync(CUdeviceptr*, size_t, CUstream)`: allocates at once (also in a capture).
    fn cuMemAllocAsync / cuMemAllocAsync_ptsz (dptr: *mut CUdeviceptr, size: usize, h: CUstream) => mem_alloc_async
}

fn mem_free_async(dptr: CUdeviceptr, h: CUstream, null: NullStream) -> Res<()> {
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    if memory::kind_of(dptr as usize, 1) != Some(Kind::Device) {
        return Err(errors::INVALID_VALUE);
    }
    if let Some(capture) = stream.active_capture() {
        // A graph may run many times; the fake leaks the memory instead of freeing it per run.
        return capture.append_nothing();
    }
    capture::submit(stream, Op::Free { ptr: dptr as usize }).map(drop)
}

dual_export! {
    /// `cuMemFreeAsync(CUdeviceptr, CUstream)`: frees when the stream reaches this point.
    fn cuMemFreeAsync / cuMemFreeAsync_ptsz (dptr: CUdeviceptr, h: CUstream) => mem_free_async
}

unsafe fn host_alloc(pp: *mut *mut c_void, size: usize, flags: c_uint) -> Res<()> {
    context::current_checked()?;
    if pp.is_null() {
        return Err(errors::INVALID_VALUE);
    }
    capture::check_unsafe_call()?;
    let owner = crate::handles::handle_of(context::current()?) as usize;
    let p = memory::alloc_owned(Kind::Host, size, owner)?;
    if flags & CU_MEMHOSTALLOC_PORTABLE != 0 {
        memory::set_portable(p);
    }
    // SAFETY: `pp` is NULL or valid for a write: `host_alloc`'s callers pass an export's out-
    // pointer argument.
    unsafe { write_out(pp, p as *mut c_void) }
}

/// `cuMemHostAlloc(void**, size_t, unsigned int flags)`: zeroed, page aligned; its device
/// pointer is the host pointer. Capture-unsafe.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> CUresult {
    // SAFETY: the arguments go to `host_alloc` unchanged, valid as cuMemHostAlloc's contract
    // (cuda.h) says.
    guard(|| unsafe { host_alloc(pp, size, flags) })
}

/// `cuMemAllocHost_v2(void**, size_t)`: as `cuMemHostAlloc` with flags 0.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize) -> CUresult {
    // SAFETY: the arguments go to `host_alloc` unchanged, valid as cuMemAllocHost_v2's contract
    // (cuda.h) says.
    guard(|| unsafe { host_alloc(pp, size, 0) })
}

/// `cuMemFreeHost(void*)`. Works after a fault. Capture-unsafe.
#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    guard(|| {
        context::require_init()?;
        capture::check_unsafe_call()?;
        memory::free(Kind::Host, p as usize)
    })
}

/// `cuMemHostGetDevicePointer_v2(CUdeviceptr*, void*, unsigned int flags)`: the identity for
/// pinned or registered memory; flags must be 0.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    dptr: *mut CUdeviceptr,
    p: *mut c_void,
    flags: c_uint,
) -> CUresult {
    guard(|| {
        let ctx = crate::handles::handle_of(context::current_checked()?) as usize;
        let pinned = matches!(
            memory::kind_of(p as usize, 1),
            Some(Kind::Host | Kind::Registered)
        );
        // Pinned for another context only (not portable): no device pointer in this one.
        if flags != 0 || !pinned || !memory::reachable_from(p as usize, 1, ctx) {
            return Err(errors::INVALID_VALUE);
        }
        // SAFETY: `dptr` is NULL or valid for a write, as cuMemHostGetDevicePointer_v2's contract
        // (cuda.h) says.
        unsafe { write_out(dptr, p as CUdeviceptr) }
    })
}

/// `cuMemHostRegister_v2(void*, size_t, unsigned int flags)`: makes a caller-owned range usable
/// as device memory (device pointer = host pointer), for the current context only unless
/// `CU_MEMHOSTREGISTER_PORTABLE` (see `memory::reachable_from`).
#[no_mangle]
pub unsafe extern "C" fn cuMemHostRegister_v2(
    p: *mut c_void,
    size: usize,
    flags: c_uint,
) -> CUresult {
    guard(|| {
        let owner = crate::handles::handle_of(context::current_checked()?) as usize;
        memory::register(p as usize, size, owner)?;
        if flags & CU_MEMHOSTREGISTER_PORTABLE != 0 {
            memory::set_portable(p as usize);
        }
        Ok(())
    })
}

/// `cuMemHostUnregister(void*)`.
#[no_mangle]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CUresult {
    guard(|| {
        context::current_checked()?;
        memory::unregister(p as usize)
    })
}

/// Which side(s) of a copy are device memory.
#[derive(Clone, Copy)]
enum Dir {
    HtoD,
    DtoH,
    DtoD,
    /// `cuMemcpy[Async]`: unified addressing, either side may be host memory.
    Unified,
}

/// Validates a copy and builds its op (`None` for 0 bytes).
fn copy_op(dir: Dir, dst: usize, src: usize, len: usize) -> Res<Option<Op>> {
    if len == 0 {
        return Ok(None);
    }
    let (dst_is_device, src_is_device) = match dir {
        Dir::HtoD => (true, false),
        Dir::DtoH => (false, true),
        Dir::DtoD => (true, true),
        Dir::Unified => (memory::is_mapped(dst, len), memory::is_mapped(src, len)),
    };
    let ok = |addr: usize, device: bool| addr != 0 && (!device || memory::is_mapped(addr, len));
    if !ok(dst, dst_is_device) || !ok(src, src_is_device) {
        return Err(errors::INVALID_VALUE);
    }
    Ok(Some(Op::Copy {
        dst,
        src,
        len,
        dst_is_device,
        src_is_device,
    }))
}

fn memset_op(dst: usize, width: usize, count: usize, op: Op) -> Res<Option<Op>> {
    if count == 0 {
        return Ok(None);
    }
    let len = count.checked_mul(width).ok_or(errors::INVALID_VALUE)?;
    if !dst.is_multiple_of(width) || !memory::is_mapped(dst, len) {
        return Err(errors::INVALID_VALUE);
    }
    Ok(Some(op))
}

/// A blocking copy/memset: enqueue on the legacy (per-thread) stream and wait for it (and,
/// on the legacy stream, for every stream of the context); then report the sticky error.
fn run_sync(null: NullStream, build: impl FnOnce() -> Res<Option<Op>>) -> Res<()> {
    run_blocking(null, true, build)
}

/// A copy/memset on the default stream that does not wait (`waits` false): device-to-device
/// copies and memsets of device memory. It returns the sticky error only if one is already set.
fn run_blocking(null: NullStream, waits: bool, build: impl FnOnce() -> Res<Option<Op>>) -> Res<()> {
    let ctx = context::current_checked()?;
    let stream = match null {
        NullStream::Legacy => ctx.legacy()?,
        NullStream::PerThread => ctx.per_thread()?,
    };
    let op = build()?;
    capture::check_sync_on(stream)?;
    if let Some(op) = op {
        let seq = stream.enqueue(op)?;
        if waits {
            stream.wait_for(seq);
        }
    }
    if waits && stream.kind == StreamKind::Legacy {
        ctx.synchronize_all();
    }
    ctx.check()
}

/// Whether a memset of `[dst, dst + len)` waits: only for pinned host memory.
fn memset_waits(dst: usize) -> bool {
    matches!(memory::kind_of(dst, 1), Some(Kind::Host | Kind::Registered))
}

/// An asynchronous copy/memset: enqueue (or capture) on the stream and return.
fn run_async(h: CUstream, null: NullStream, build: impl FnOnce() -> Res<Option<Op>>) -> Res<()> {
    let stream = lookup(h, null)?;
    stream.ctx.check()?;
    match build()? {
        Some(op) => capture::submit(stream, op).map(drop),
        None => Ok(()),
    }
}

fn memcpy_htod(dst: CUdeviceptr, src: *const c_void, n: usize, null: NullStream) -> Res<()> {
    run_sync(null, || copy_op(Dir::HtoD, dst as usize, src as usize, n))
}
fn memcpy_dtoh(dst: *mut c_void, src: CUdeviceptr, n: usize, null: NullStream) -> Res<()> {
    run_sync(null, || copy_op(Dir::DtoH, dst as usize, src as usize, n))
}
fn memcpy_dtod(dst: CUdeviceptr, src: CUdeviceptr, n: usize, null: NullStream) -> Res<()> {
    run_blocking(null, false, || {
        copy_op(Dir::DtoD, dst as usize, src as usize, n)
    })
}
fn memcpy_unified(dst: CUdeviceptr, src: CUdeviceptr, n: usize, null: NullStream) -> Res<()> {
    // Device to device does not wait; any host side does.
    let device = |p: CUdeviceptr| memory::kind_of(p as usize, 1) == Some(Kind::Device);
    let waits = !(device(dst) && device(src));
    run_blocking(null, waits, || {
        copy_op(Dir::Unified, dst as usize, src as usize, n)
    })
}
fn memset_d8(dst: CUdeviceptr, value: c_uchar, n: usize, null: NullStream) -> Res<()> {
    let op = Op::Memset8 {
        dst: dst as usize,
        value,
        count: n,
    };
    run_blocking(null, memset_waits(dst as usize), || {
        memset_op(dst as usize, 1, n, op)
    })
}
fn memset_d32(dst: CUdeviceptr, value: c_uint, n: usize, null: NullStream) -> Res<()> {
    let op = Op::Memset32 {
        dst: dst as usize,
        value,
        count: n,
    };
    run_blocking(null, memset_waits(dst as usize), || {
        memset_op(dst as usize, 4, n, op)
    })
}

/// `cuPointerGetAttribute(void* data, CUpointer_attribute, CUdeviceptr)`: only
/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` (2): `CU_MEMORYTYPE_DEVICE` (2) for device allocations,
/// `CU_MEMORYTYPE_HOST` (1) for pinned or registered host memory, `CUDA_ERROR_INVALID_VALUE`
/// for memory the driver does not know (pageable host memory) and other attributes.
#[no_mangle]
pub unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attribute: c_uint,
    ptr: CUdeviceptr,
) -> CUresult {
    guard(|| {
        context::require_init()?;
        if attribute != 2 || data.is_null() {
            return Err(errors::INVALID_VALUE);
        }
        let memory_type: c_uint = match memory::kind_of(ptr as usize, 1) {
            Some(Kind::Device) => 2,
            Some(Kind::Host | Kind::Registered) => 1,
            None => return Err(errors::INVALID_VALUE),
        };
        // SAFETY: `data` is NULL or valid for a write, as cuPointerGetAttribute's contract (cuda.h)
        // says.
        unsafe { write_out(data as *mut c_uint, memory_type) }
    })
}

dual_export! {
    /// `cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t)`: synchronous.
    fn cuMemcpyHtoD_v2 / cuMemcpyHtoD_v2_ptds (dst: CUdeviceptr, src: *const c_void, n: usize) => memcpy_htod
}
dual_export! {
    /// `cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t)`: synchronous.
    fn cuMemcpyDtoH_v2 / cuMemcpyDtoH_v2_ptds (dst: *mut c_void, src: CUdeviceptr, n: usize) => memcpy_dtoh
}
dual_export! {
    /// `cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t)`: does not wait.
    fn cuMemcpyDtoD_v2 / cuMemcpyDtoD_v2_ptds (dst: CUdeviceptr, src: CUdeviceptr, n: usize) => memcpy_dtod
}
dual_export! {
    /// `cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t)`: unified addressing; waits unless
    /// both sides are device memory.
    fn cuMemcpy / cuMemcpy_ptds (dst: CUdeviceptr, src: CUdeviceptr, n: usize) => memcpy_unified
}
dual_export! {
    /// `cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t)`: waits only for pinned host memory.
    fn cuMemsetD8_v2 / cuMemsetD8_v2_ptds (dst: CUdeviceptr, value: c_uchar, n: usize) => memset_d8
}
dual_export! {
    /// `cuMemsetD32_v2(CUdeviceptr, unsigned int, size_t)`: waits only for pinned host memory;
    /// `dst` 4-byte aligned.
    fn cuMemsetD32_v2 / cuMemsetD32_v2_ptds (dst: CUdeviceptr, value: c_uint, n: usize) => memset_d32
}

fn memcpy_htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
    h: CUstream,
    null: NullStream,
) -> Res<()> {
    run_async(h, null, || {
        copy_op(Dir::HtoD, dst as usize, src as usize, n)
    })
}
fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
    h: CUstream,
    null: NullStream,
) -> Res<()> {
    run_async(h, null, || {
        copy_op(Dir::DtoH, dst as usize, src as usize, n)
    })
}
fn memcpy_dtod_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    h: CUstream,
    null: NullStream,
) -> Res<()> {
    run_async(h, null, || {
        copy_op(Dir::DtoD, dst as usize, src as usize, n)
    })
}
fn memcpy_unified_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    h: CUstream,
    null: NullStream,
) -> Res<()> {
    run_async(h, null, || {
        copy_op(Dir::Unified, dst as usize, src as usize, n)
    })
}
fn memset_d8_async(
    dst: CUdeviceptr,
    value: c_uchar,
    n: usize,
    h: CUstream,
    null: NullStream,
) -> Res<()> {
    let op = Op::Memset8 {
        dst: dst as usize,
        value,
        count: n,
    };
    run_async(h, null, || memset_op(dst as usize, 1, n, op))
}
fn memset_d32_async(
    dst: CUdeviceptr,
    value: c_uint,
    n: usize,
    h: CUstream,
    null: NullStream,
) -> Res<()> {
    let op = Op::Memset32 {
        dst: dst as usize,
        value,
        count: n,
    };
    run_async(h, null, || memset_op(dst as usize, 4, n, op))
}

dual_export! {
    /// `cuMemcpyHtoDAsync_v2(CUdeviceptr, const void*, size_t, CUstream)`.
    fn cuMemcpyHtoDAsync_v2 / cuMemcpyHtoDAsync_v2_ptsz (dst: CUdeviceptr, src: *const c_void, n: usize, h: CUstream) => memcpy_htod_async
}
dual_export! {
    /// `cuMemcpyDtoHAsync_v2(void*, CUdeviceptr, size_t, CUstream)`.
    fn cuMemcpyDtoHAsync_v2 / cuMemcpyDtoHAsync_v2_ptsz (dst: *mut c_void, src: CUdeviceptr, n: usize, h: CUstream) => memcpy_dtoh_async
}
dual_export! {
    /// `cuMemcpyDtoDAsync_v2(CUdeviceptr, CUdeviceptr, size_t, CUstream)`.
    fn cuMemcpyDtoDAsync_v2 / cuMemcpyDtoDAsync_v2_ptsz (dst: CUdeviceptr, src: CUdeviceptr, n: usize, h: CUstream) => memcpy_dtod_async
}
dual_export! {
    /// `cuMemcpyAsync(CUdeviceptr, CUdeviceptr, size_t, CUstream)`: unified addressing.
    fn cuMemcpyAsync / cuMemcpyAsync_ptsz (dst: CUdeviceptr, src: CUdeviceptr, n: usize, h: CUstream) => memcpy_unified_async
}
dual_export! {
    /// `cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream)`.
    fn cuMemsetD8Async / cuMemsetD8Async_ptsz (dst: CUdeviceptr, value: c_uchar, n: usize, h: CUstream) => memset_d8_async
}
dual_export! {
    /// `cuMemsetD32Async(CUdeviceptr, unsigned int, size_t, CUstream)`.
    fn cuMemsetD32Async / cuMemsetD32Async_ptsz (dst: CUdeviceptr, value: c_uint, n: usize, h: CUstream) => memset_d32_async
}
