//! Fake device and pinned-host memory.
//!
//! "Device" memory (`cuMemAlloc_v2`, `cuMemAllocAsync`) and pinned host memory (`cuMemHostAlloc`,
//! `cuMemAllocHost_v2`) are zero-filled host allocations; a `CUdeviceptr` is the plain address and
//! the device pointer of pinned memory is the host pointer itself. `cuMemHostRegister_v2` adds a
//! caller-owned range. Every range is recorded here so that arguments naming device memory can be
//! validated: a device-side range that is not inside a live allocation is rejected at the call
//! (`CUDA_ERROR_INVALID_VALUE`), and one that was freed before a queued op executes makes that op
//! fault with `CUDA_ERROR_ILLEGAL_ADDRESS`, like a real GPU would.

use crate::errors;
use crate::types::Res;
use parking_lot::RwLock;
use std::collections::BTreeMap;

/// What kind of memory a range is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `cuMemAlloc_v2` / `cuMemAllocAsync`: freed with `cuMemFree_v2` / `cuMemFreeAsync`.
    Device,
    /// `cuMemHostAlloc` / `cuMemAllocHost_v2`: freed with `cuMemFreeHost`.
    Host,
    /// `cuMemHostRegister_v2`: caller-owned, removed with `cuMemHostUnregister`.
    Registered,
}

/// Start address -> (length, kind) of every live range.
static RANGES: RwLock<BTreeMap<usize, (usize, Kind)>> = parking_lot::const_rwlock(BTreeMap::new());
/// Start address -> owning context handle of pinned host ranges (`Host`, `Registered`): the
/// driver frees (`Host`, unmapped here so that a later host read faults like a real one may) or
/// unregisters them when that context is destroyed (`cuCtxDestroy`, `cuDevicePrimaryCtxReset`,
/// the last `cuDevicePrimaryCtxRelease`: "all resources allocated in the context are freed").
static OWNERS: parking_lot::Mutex<BTreeMap<usize, usize>> =
    parking_lot::const_mutex(BTreeMap::new());
/// Start addresses of pinned host ranges pinned for every context: registered with
/// `CU_MEMHOSTREGISTER_PORTABLE` or allocated with `CU_MEMHOSTALLOC_PORTABLE`. Driver API doc,
/// `cuMemHostRegister`: "CU_MEMHOSTREGISTER_PORTABLE: The memory returned by this call will be
/// considered as pinned memory by all CUDA contexts, not just the one that performed the
/// allocation" (and the same for `cuMemHostAlloc`'s `CU_MEMHOSTALLOC_PORTABLE`): without it the
/// range is pinned and mapped for its owning context only, and a device write to it from a
/// stream of another context faults here ([`reachable_from`]).
static PORTABLE: parking_lot::Mutex<std::collections::BTreeSet<usize>> =
    parking_lot::const_mutex(std::collections::BTreeSet::new());

/// Marks the pinned range starting at `ptr` as pinned for every context.
pub fn set_portable(ptr: usize) {
    PORTABLE.lock().insert(ptr);
}

/// Whether a device access to `[addr, addr + len)` from a stream of context `ctx` (a handle)
/// reaches memory: a live range, and for pinned host memory one pinned for that context (its
/// owner's, or portable). See [`PORTABLE`].
pub fn reachable_from(addr: usize, len: usize, ctx: usize) -> bool {
    reachable_in(&RANGES.read(), addr, len, ctx)
}

/// Runs `f` while no range can be freed; `f` gets a checker "does a device access to
/// `[addr, addr+len)` from a stream of context `ctx` reach memory?" ([`reachable_from`]).
pub fn with_reachable<R>(ctx: usize, f: impl FnOnce(&dyn Fn(usize, usize) -> bool) -> R) -> R {
    let ranges = RANGES.read();
    let check = |addr: usize, len: usize| reachable_in(&ranges, addr, len, ctx);
    f(&check)
}

fn reachable_in(
    ranges: &BTreeMap<usize, (usize, Kind)>,
    addr: usize,
    len: usize,
    ctx: usize,
) -> bool {
    let Some(kind) = contains(ranges, addr, len) else {
        return false;
    };
    if kind == Kind::Device {
        return true;
    }
    let Some((&start, _)) = ranges.range(..=addr).next_back() else {
        return false;
    };
    OWNERS.lock().get(&start).is_none_or(|&o| o == ctx) || PORTABLE.lock().contains(&start)
}

/// Alignment of device allocations (the real driver guarantees at least 256 bytes).
const DEVICE_ALIGN: usize = 256;
/// Alignment of pinned host allocations (page aligned, like the real driver).
const HOST_ALIGN: usize = 4096;

/// Allocates `size` zeroed bytes of `kind` owned by context `owner` (pinned host memory is
/// its own mapping: freeing unmaps it).
pub fn alloc_owned(kind: Kind, size: usize, owner: usize) -> Res<usize> {
    if kind != Kind::Host {
        return alloc(kind, size);
    }
    if size == 0 {
        return Err(errors::INVALID_VALUE);
    }
    let len = size.next_multiple_of(HOST_ALIGN);
    // SAFETY: a fresh private anonymous mapping.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(errors::OUT_OF_MEMORY);
    }
    RANGES.write().insert(ptr as usize, (size, kind));
    OWNERS.lock().insert(ptr as usize, owner);
    Ok(ptr as usize)
}

/// Frees (unmaps) or unregisters every pinned host range of a destroyed context.
pub fn release_context(owner: usize) {
    let mine: Vec<usize> = {
        let mut owners = OWNERS.lock();
        let mine: Vec<usize> = owners
            .iter()
            .filter(|(_, &o)| o == owner)
            .map(|(&p, _)| p)
            .collect();
        for p in &mine {
            owners.remove(p);
            PORTABLE.lock().remove(p);
        }
        mine
    };
    let mut ranges = RANGES.write();
    for p in mine {
        match ranges.remove(&p) {
            Some((size, Kind::Host)) => {
                // SAFETY: mapped by `alloc_owned` with this length, no longer recorded.
                unsafe { libc::munmap(p as *mut libc::c_void, size.next_multiple_of(HOST_ALIGN)) };
            }
            Some(_) => {}
            None => {}
        }
    }
}

/// Allocates `size` zeroed bytes of `kind` (`Device`) and records the range.
pub fn alloc(kind: Kind, size: usize) -> Res<usize> {
    if size == 0 {
        return Err(errors::INVALID_VALUE);
    }
    let align = if kind == Kind::Host {
        HOST_ALIGN
    } else {
        DEVICE_ALIGN
    };
    let mut ptr: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: plain libc allocation; `ptr` is written only on success.
    let rc = unsafe { libc::posix_memalign(&mut ptr, align, size) };
    if rc != 0 || ptr.is_null() {
        return Err(errors::OUT_OF_MEMORY);
    }
    // SAFETY: `ptr` points to `size` freshly allocated bytes.
    unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, size) };
    RANGES.write().insert(ptr as usize, (size, kind));
    Ok(ptr as usize)
}

/// Frees an allocation of `kind` starting exactly at `ptr`.
pub fn free(kind: Kind, ptr: usize) -> Res<()> {
    let mut ranges = RANGES.write();
    match ranges.get(&ptr) {
        Some(&(size, k)) if k == kind => {
            ranges.remove(&ptr);
            if kind == Kind::Host {
                OWNERS.lock().remove(&ptr);
                PORTABLE.lock().remove(&ptr);
                // SAFETY: mapped by `alloc_owned` with this length, live until now.
                unsafe {
                    libc::munmap(ptr as *mut libc::c_void, size.next_multiple_of(HOST_ALIGN))
                };
            } else {
                // SAFETY: `ptr` came from `posix_memalign` in `alloc` and was live until now.
                unsafe { libc::free(ptr as *mut libc::c_void) };
            }
            Ok(())
        }
        _ => Err(errors::INVALID_VALUE),
    }
}

/// Records a caller-owned host range (`cuMemHostRegister_v2`) of context `owner`.
pub fn register(ptr: usize, size: usize, owner: usize) -> Res<()> {
    if ptr == 0 || size == 0 {
        return Err(errors::INVALID_VALUE);
    }
    let mut ranges = RANGES.write();
    if overlaps(&ranges, ptr, size) {
        // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
        return Err(712);
    }
    ranges.insert(ptr, (size, Kind::Registered));
    OWNERS.lock().insert(ptr, owner);
    Ok(())
}

/// Removes a range recorded by [`register`].
pub fn unregister(ptr: usize) -> Res<()> {
    let mut ranges = RANGES.write();
    match ranges.get(&ptr) {
        Some(&(_, Kind::Registered)) => {
            ranges.remove(&ptr);
            OWNERS.lock().remove(&ptr);
            PORTABLE.lock().remove(&ptr);
            Ok(())
        }
        // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
        _ => Err(713),
    }
}

/// The kind of the live range containing `[addr, addr + len)`, if there is one.
pub fn kind_of(addr: usize, len: usize) -> Option<Kind> {
    contains(&RANGES.read(), addr, len)
}

/// Whether `[addr, addr + len)` lies inside one live range (any kind).
pub fn is_mapped(addr: usize, len: usize) -> bool {
    kind_of(addr, len).is_some()
}

/// Runs `f` while no range can be freed; `f` gets a checker "is `[addr, addr+len)` mapped?".
/// Queued memory ops execute inside this so a concurrent free cannot pull memory from under them.
pub fn with_mapped<R>(f: impl FnOnce(&dyn Fn(usize, usize) -> bool) -> R) -> R {
    let ranges = RANGES.read();
    let check = |addr: usize, len: usize| contains(&ranges, addr, len).is_some();
    f(&check)
}

fn contains(ranges: &BTreeMap<usize, (usize, Kind)>, addr: usize, len: usize) -> Option<Kind> {
    let end = addr.checked_add(len)?;
    let (&start, &(size, kind)) = ranges.range(..=addr).next_back()?;
    (end <= start + size && (addr < start + size || len == 0)).then_some(kind)
}

fn overlaps(ranges: &BTreeMap<usize, (usize, Kind)>, addr: usize, len: usize) -> bool {
    let end = addr.saturating_add(len);
    ranges
        .range(..end)
        .next_back()
        .is_some_and(|(&start, &(size, _))| start + size > addr)
}
