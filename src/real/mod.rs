//! Finding the next implementation: the real `dlsym`, the driver library's handle, the real
//! function behind every hooked entry point, and the few driver calls cudablame makes itself.
//!
//! Never call `libc::dlsym` from this crate: inside an `LD_PRELOAD` library that symbol binds to
//! our own exported `dlsym`. Everything goes through [`dlsym`] here, which is glibc's, found once
//! with `dlvsym(RTLD_NEXT, "dlsym", version)`. (This is also why the `libloading` crate is not used:
//! its lookups go through the interposed `dlsym`.)

pub(crate) mod printf;

use crate::cuda::entry_points::EntryPoint;
use crate::cuda::*;
use std::ffi::{c_char, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// The address of glibc's `dlsym` once found (read by the naked `dlsym` entry, `interpose`).
pub(crate) static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);

/// glibc's own definition of `name`: the next one after libcudablame, found with
/// `dlvsym(RTLD_NEXT, name, version)` (never `dlsym`, which is our own export) and cached in
/// `slot` (0: not found yet). Returns its address, 0 if there is none. Versions tried:
/// `GLIBC_2.34` (glibc >= 2.34, x86-64 and aarch64), `GLIBC_2.2.5` (older x86-64),
/// `GLIBC_2.17` (older aarch64).
pub(crate) fn glibc_next(name: &CStr, slot: &AtomicUsize) -> usize {
    let f = slot.load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    for version in [c"GLIBC_2.34", c"GLIBC_2.2.5", c"GLIBC_2.17"] {
        // SAFETY: dlvsym only reads the loader's tables; both strings are NUL-terminated.
        let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, name.as_ptr(), version.as_ptr()) };
        if !p.is_null() {
            slot.store(p as usize, Ordering::Release);
            return p as usize;
        }
    }
    0
}

/// Finds glibc's own `dlsym` (see [`glibc_next`]) and returns its address, 0 if there is none.
/// `extern "C"`: the naked `dlsym` entry calls it.
pub extern "C" fn resolve_real_dlsym() -> usize {
    glibc_next(c"dlsym", &REAL_DLSYM)
}

/// Whether the module file at `path` (a loader's name, with or without folders) is a shared
/// CUDA runtime, `libcudart.so*`: the error strings' lookup (`detect`) and the runtime
/// resolvers' choice between two runtimes (`interpose::next_definition`) ask the same.
pub(crate) fn is_runtime_file(path: &[u8]) -> bool {
    let file = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    file.starts_with(b"libcudart.so")
}

/// glibc's `pthread_create` (the next definition after libcudablame's exported one), 0 if none.
///
/// Found by the library's constructor (`interpose::pthread`) when the library is loaded, so that
/// it is never looked up later: `dlvsym` takes glibc's loader lock, which a thread waiting inside
/// `dlopen` may hold (issue 19 item 2). A lookup here can only happen if `pthread_create` is
/// called before this library's constructor ran (from a constructor of a library initialized
/// earlier): that is the main thread, in the loader already (the lock is recursive), or a thread
/// it created through the hook, which found the function then.
pub(crate) fn pthread_create() -> usize {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    glibc_next(c"pthread_create", &REAL)
}

/// glibc's own `dlclose` (the next definition after libcudablame's exported one), 0 if none.
pub(crate) fn real_dlclose() -> usize {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    glibc_next(c"dlclose", &REAL)
}

/// Closes a handle with glibc's `dlclose` (never cudablame's own export).
fn close_handle(handle: *mut c_void) {
    let f = real_dlclose();
    if f != 0 && !handle.is_null() {
        // SAFETY: glibc's dlclose, a handle from dlopen closed once.
        unsafe {
            std::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void) -> i32>(f)(handle)
        };
    }
}

/// glibc's own `dlsym`, called from libcudablame (so `RTLD_NEXT` means "after libcudablame").
///
/// # Safety
/// As `dlsym(3)`: `handle` is a handle from `dlopen` or a pseudo-handle, `name` NUL-terminated.
pub(crate) unsafe fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    let f = resolve_real_dlsym();
    if f == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: f is glibc's dlsym.
    unsafe { std::mem::transmute::<usize, DlsymFn>(f)(handle, name) }
}

/// What was found in the driver library: the real address of every hooked variant, and the
/// driver calls cudablame makes on its own account (progress markers, names, capture checks).
pub(crate) struct Driver {
    /// `real[ep as usize]`: the address of the exported symbol named like `ep`, or 0. Inline:
    /// every hook reads its entry, one cache line, with no vector header before it.
    pub(crate) real: [usize; EntryPoint::ALL.len()],
    /// `(address, entry point)` sorted by address: which wrapper stands for a resolved function.
    by_address: Vec<(usize, EntryPoint)>,
    pub(crate) get_proc_address: usize,
    pub(crate) get_proc_address_v2: usize,
    pub(crate) own: OwnCalls,
}

/// Driver functions cudablame calls itself (never through its own wrappers).
#[derive(Default)]
pub(crate) struct OwnCalls {
    pub(crate) ctx_get_current: Option<unsafe extern "C" fn(*mut CUcontext) -> CUresult>,
    /// `cuCtxSetCurrent(CUcontext)`: only to make a stream's context current for the calls that
    /// concern it, and back.
    pub(crate) ctx_set_current: Option<unsafe extern "C" fn(CUcontext) -> CUresult>,
    pub(crate) ctx_get_device: Option<unsafe extern "C" fn(*mut CUdevice) -> CUresult>,
    pub(crate) mem_host_alloc:
        Option<unsafe extern "C" fn(*mut *mut c_void, usize, u32) -> CUresult>,
    pub(crate) mem_host_get_device_pointer:
        Option<unsafe extern "C" fn(*mut CUdeviceptr, *mut c_void, u32) -> CUresult>,
    /// `cuStreamWriteValue64_v2` (CUDA >= 12.0) or `cuStreamWriteValue64` (driver API doc,
    /// "Stream Memory Operations"): `(stream, address, value, flags)`.
    pub(crate) stream_write_value64:
        Option<unsafe extern "C" fn(CUstream, CUdeviceptr, u64, u32) -> CUresult>,
    pub(crate) stream_is_capturing:
        Option<unsafe extern "C" fn(CUstream, *mut CUstreamCaptureStatus) -> CUresult>,
    pub(crate) thread_exchange_capture_mode:
        Option<unsafe extern "C" fn(*mut CUstreamCaptureMode) -> CUresult>,
    pub(crate) func_get_name:
        Option<unsafe extern "C" fn(*mut *const c_char, CUfunction) -> CUresult>,
    pub(crate) kernel_get_name:
        Option<unsafe extern "C" fn(*mut *const c_char, CUkernel) -> CUresult>,
    pub(crate) get_error_name:
        Option<unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult>,
    pub(crate) get_error_string:
        Option<unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult>,
    /// `cuPointerGetAttribute(void* data, CUpointer_attribute, CUdeviceptr)`.
    pub(crate) pointer_get_attribute:
        Option<unsafe extern "C" fn(*mut c_void, c_uint, CUdeviceptr) -> CUresult>,
    /// `cuStreamGetCtx(CUstream, CUcontext*)`: the context a stream belongs to.
    pub(crate) stream_get_ctx: Option<unsafe extern "C" fn(CUstream, *mut CUcontext) -> CUresult>,
    /// `cuMemHostRegister_v2(void*, size_t, unsigned int)`.
    pub(crate) mem_host_register:
        Option<unsafe extern "C" fn(*mut c_void, usize, c_uint) -> CUresult>,
    /// `cuDevicePrimaryCtxGetState(CUdevice, unsigned int* flags, int* active)`.
    pub(crate) primary_ctx_get_state:
        Option<unsafe extern "C" fn(CUdevice, *mut c_uint, *mut std::ffi::c_int) -> CUresult>,
    /// `cuDevicePrimaryCtxRetain(CUcontext*, CUdevice)` and `cuDevicePrimaryCtxRelease_v2`: only
    /// used as a pair, to learn the handle of an active primary context.
    pub(crate) primary_ctx_retain:
        Option<unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult>,
    pub(crate) primary_ctx_release: Option<unsafe extern "C" fn(CUdevice) -> CUresult>,
}

/// Built once (`safety::ForkSafeOnce`: other threads wait for the first); where it is built twice
/// (fork, a blocked builder) finding the driver's symbols again is harmless, and the import-slot
/// patch it makes is done once whatever happens (`printf::hook_driver`).
#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static DRIVER: crate::safety::ForkSafeOnce<Driver> = crate::safety::ForkSafeOnce::new();

/// The driver, found on first use: `libcuda.so.1` if the process has loaded it, else the library
/// that holds `hint` (an address the program got from some driver) if it exports `cuInit`.
/// cudablame never loads the driver itself; until the program has, this is `None` (and asked again
/// next time).
#[inline(always)]
pub(crate) fn driver_near(hint: usize) -> Option<&'static Driver> {
    match DRIVER.get() {
        Some(d) => Some(d),
        None => load_driver(hint),
    }
}

/// The driver if it was found already (never looks for it): the common path's one load, where
/// [`driver`] may search.
#[inline(always)]
pub(crate) fn found_driver() -> Option<&'static Driver> {
    DRIVER.get()
}

/// [`driver_near`] before the driver is known: finds it, out of line (the hooks ask for the
/// driver several times per call).
#[cold]
#[inline(never)]
fn load_driver(hint: usize) -> Option<&'static Driver> {
    let handle = find_driver(hint)?;
    Some(DRIVER.get_or_init(|| Driver::from_handle(handle)))
}

/// The driver if the process has loaded it.
#[inline(always)]
pub(crate) fn driver() -> Option<&'static Driver> {
    driver_near(0)
}

fn find_driver(hint: usize) -> Option<*mut c_void> {
    let is_driver = |h: *mut c_void| !h.is_null() && sym(h, c"cuInit") != 0;
    // The handle of the driver is kept (never closed): the reference keeps the driver mapped
    // for the addresses cached in `Driver` even if the program dlcloses it. Others are closed.
    let close = close_handle;
    // SAFETY: dlopen with RTLD_NOLOAD only returns already-loaded objects; dladdr reads loader data.
    unsafe {
        let handle = libc::dlopen(
            c"libcuda.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_NOLOAD,
        );
        if is_driver(handle) {
            return Some(handle);
        }
        close(handle);
        if hint != 0 {
            let mut info: libc::Dl_info = std::mem::zeroed();
            if libc::dladdr(hint as *const c_void, &mut info) != 0 && !info.dli_fname.is_null() {
                let handle = libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD);
                if is_driver(handle) {
                    return Some(handle);
                }
                close(handle);
            }
        }
    }
    None
}

fn sym(handle: *mut c_void, name: &CStr) -> usize {
    // SAFETY: a handle from dlopen and a C string.
    unsafe { dlsym(handle, name.as_ptr()) as usize }
}

/// A function pointer of type `F` at `address`, if not 0.
///
/// # Safety
/// `F` must be the C function-pointer type of the function at `address`.
unsafe fn as_fn<F: Copy>(address: usize) -> Option<F> {
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<usize>());
    // SAFETY: per the contract, a function pointer of the right type.
    (address != 0).then(|| unsafe { std::mem::transmute_copy::<usize, F>(&address) })
}

macro_rules! own_fn {
    ($handle:expr, $($name:expr),+) => {{
        let mut p = 0usize;
        $( if p == 0 { p = sym($handle, $name); } )+
        // SAFETY: the symbol has the C signature of the field it is stored in (cuda.h).
        unsafe { as_fn(p) }
    }};
}

impl Driver {
    fn from_handle(handle: *mut c_void) -> Driver {
        let mut real = [0usize; EntryPoint::ALL.len()];
        for (slot, ep) in real.iter_mut().zip(EntryPoint::ALL) {
            *slot = sym(handle, ep.c_name());
        }
        let mut by_address: Vec<(usize, EntryPoint)> = EntryPoint::ALL
            .iter()
            .zip(&real)
            .filter(|(_, &a)| a != 0)
            .map(|(&ep, &a)| (a, ep))
            .collect();
        by_address.sort_by_key(|&(a, _)| a);
        // Device-side assert text: the driver's own vfprintf (and friends) slots, see `printf`.
        printf::hook_driver(sym(handle, c"cuInit"));
        let own = OwnCalls {
            ctx_get_current: own_fn!(handle, c"cuCtxGetCurrent"),
            ctx_set_current: own_fn!(handle, c"cuCtxSetCurrent"),
            ctx_get_device: own_fn!(handle, c"cuCtxGetDevice"),
            mem_host_alloc: own_fn!(handle, c"cuMemHostAlloc"),
            mem_host_get_device_pointer: own_fn!(handle, c"cuMemHostGetDevicePointer_v2"),
            stream_write_value64: own_fn!(
                handle,
                c"cuStreamWriteValue64_v2",
                c"cuStreamWriteValue64"
            ),
            stream_is_capturing: own_fn!(handle, c"cuStreamIsCapturing"),
            thread_exchange_capture_mode: own_fn!(handle, c"cuThreadExchangeStreamCaptureMode"),
            func_get_name: own_fn!(handle, c"cuFuncGetName"),
            kernel_get_name: own_fn!(handle, c"cuKernelGetName"),
            get_error_name: own_fn!(handle, c"cuGetErrorName"),
            get_error_string: own_fn!(handle, c"cuGetErrorString"),
            pointer_get_attribute: own_fn!(handle, c"cuPointerGetAttribute"),
            stream_get_ctx: own_fn!(handle, c"cuStreamGetCtx"),
            mem_host_register: own_fn!(handle, c"cuMemHostRegister_v2", c"cuMemHostRegister"),
            primary_ctx_get_state: own_fn!(handle, c"cuDevicePrimaryCtxGetState"),
            primary_ctx_retain: own_fn!(handle, c"cuDevicePrimaryCtxRetain"),
            primary_ctx_release: own_fn!(
                handle,
                c"cuDevicePrimaryCtxRelease_v2",
                c"cuDevicePrimaryCtxRelease"
            ),
        };
        Driver {
            real,
            by_address,
            get_proc_address: sym(handle, c"cuGetProcAddress"),
            get_proc_address_v2: sym(handle, c"cuGetProcAddress_v2"),
            own,
        }
    }

    /// The hooked entry point whose real function lives at `address`, if any.
    pub(crate) fn entry_point_at(&self, address: usize) -> Option<EntryPoint> {
        self.by_address
            .binary_search_by_key(&address, |&(a, _)| a)
            .ok()
            .map(|i| self.by_address[i].1)
    }

    /// The current context (`cuCtxGetCurrent`), or 0.
    pub(crate) fn current_context(&self) -> usize {
        let mut ctx: CUcontext = std::ptr::null_mut();
        match self.own.ctx_get_current {
            // SAFETY: valid out pointer.
            Some(f) if unsafe { f(&mut ctx) } == CUDA_SUCCESS => ctx as usize,
            _ => 0,
        }
    }

    /// The current context's device ordinal (`cuCtxGetDevice`), or -1.
    pub(crate) fn current_device(&self) -> i32 {
        let mut dev: CUdevice = -1;
        match self.own.ctx_get_device {
            // SAFETY: valid out pointer.
            Some(f) if unsafe { f(&mut dev) } == CUDA_SUCCESS => dev,
            _ => -1,
        }
    }

    /// The device ordinal of context `ctx` (0: the current one), or -1: asked with `ctx` current
    /// ([`in_context`]), since a stream's first op may come while another context is current.
    pub(crate) fn context_device(&self, ctx: usize) -> i32 {
        in_context(self, ctx, || self.current_device()).unwrap_or(-1)
    }

    /// Which side of a copy a unified address is on (`cuPointerGetAttribute` with
    /// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`, 2): host for `CU_MEMORYTYPE_HOST` (1), device for
    /// `DEVICE` (2) and `ARRAY` (3); unknown for anything else, managed memory and errors
    /// (pageable host memory included: unknown never proves completion).
    pub(crate) fn memory_side(&self, ptr: CUdeviceptr) -> Side {
        let Some(f) = self.own.pointer_get_attribute else {
            return Side::Unknown;
        };
        let mut memory_type: c_uint = 0;
        // SAFETY: the attribute is a 4-byte CUmemorytype written through a valid pointer.
        let rc = unsafe { f(&mut memory_type as *mut c_uint as *mut c_void, 2, ptr) };
        match (rc, memory_type) {
            (CUDA_SUCCESS, 1) => Side::Host,
            (CUDA_SUCCESS, 2 | 3) => Side::Device,
            _ => Side::Unknown,
        }
    }

    /// The context that stream handle `stream` belongs to (`cuStreamGetCtx`), or 0.
    pub(crate) fn stream_context(&self, stream: usize) -> usize {
        let mut ctx: CUcontext = std::ptr::null_mut();
        match self.own.stream_get_ctx {
            // SAFETY: valid out pointer; a handle the program passed to the driver.
            Some(f) if unsafe { f(stream as CUstream, &mut ctx) } == CUDA_SUCCESS => ctx as usize,
            _ => 0,
        }
    }

    /// The handle of `dev`'s primary context if it is active, else 0 (retained and released
    /// again: the reference count is unchanged and an inactive one is never created).
    pub(crate) fn active_primary_context(&self, dev: CUdevice) -> usize {
        let (Some(state), Some(retain), Some(release)) = (
            self.own.primary_ctx_get_state,
            self.own.primary_ctx_retain,
            self.own.primary_ctx_release,
        ) else {
            return 0;
        };
        let (mut flags, mut active): (c_uint, std::ffi::c_int) = (0, 0);
        // SAFETY: valid out pointers.
        if unsafe { state(dev, &mut flags, &mut active) } != CUDA_SUCCESS || active == 0 {
            return 0;
        }
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: valid out pointer; the retain is undone right away.
        if unsafe { retain(&mut ctx, dev) } != CUDA_SUCCESS {
            return 0;
        }
        // SAFETY: releases the reference just taken.
        unsafe { release(dev) };
        ctx as usize
    }

    /// Whether `dev`'s primary context is active (`cuDevicePrimaryCtxGetState`); `None` unknown.
    pub(crate) fn primary_active(&self, dev: CUdevice) -> Option<bool> {
        let f = self.own.primary_ctx_get_state?;
        let (mut flags, mut active): (c_uint, std::ffi::c_int) = (0, 0);
        // SAFETY: valid out pointers.
        (unsafe { f(dev, &mut flags, &mut active) } == CUDA_SUCCESS).then_some(active != 0)
    }

    /// Runs `f` with this thread's capture mode set to RELAXED, so that the shim's own
    /// potentially unsafe calls (allocation) never invalidate a global-mode capture of the program
    /// (driver API doc, `cuThreadExchangeStreamCaptureMode`).
    pub(crate) fn relaxed_capture<T>(&self, f: impl FnOnce() -> T) -> T {
        let Some(exchange) = self.own.thread_exchange_capture_mode else {
            return f();
        };
        let mut mode: CUstreamCaptureMode = CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: valid in/out pointer.
        let swapped = unsafe { exchange(&mut mode) } == CUDA_SUCCESS;
        let out = f();
        if swapped {
            // SAFETY: restores the mode we swapped out.
            unsafe { exchange(&mut mode) };
        }
        out
    }

    /// Whether `stream` (a handle as passed to plain, non-`_ptsz` variants) is capturing.
    /// Errors (e.g. `CUDA_ERROR_STREAM_CAPTURE_IMPLICIT` for the legacy stream) count as capturing.
    pub(crate) fn is_capturing(&self, stream: usize) -> bool {
        let Some(f) = self.own.stream_is_capturing else {
            return false;
        };
        let mut status: CUstreamCaptureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: valid out pointer.
        let rc = unsafe { f(stream as CUstream, &mut status) };
        rc != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE
    }

    /// The mangled name of a kernel handle (`cuFuncGetName`, then `cuKernelGetName`: a `CUkernel`
    /// may be passed where a `CUfunction` is expected). Works after a sticky error.
    pub(crate) fn kernel_name(&self, func: usize) -> Option<String> {
        for f in [self.own.func_get_name, self.own.kernel_get_name]
            .into_iter()
            .flatten()
        {
            let mut name: *const c_char = std::ptr::null();
            // SAFETY: valid out pointer; the driver returns a NUL-terminated string it owns.
            if unsafe { f(&mut name, func as CUfunction) } == CUDA_SUCCESS && !name.is_null() {
                return Some(
                    // SAFETY: non-NULL, NUL-terminated, owned by the driver (checked above).
                    unsafe { CStr::from_ptr(name) }
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
        None
    }

    /// `(name, description)` of an error code, from the driver when it knows it.
    pub(crate) fn error_text(&self, code: CUresult) -> (String, String) {
        let ours = error_name(code);
        let ask = |f: Option<unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult>,
                   fallback: &str| {
            let mut s: *const c_char = std::ptr::null();
            match f {
                // SAFETY: valid out pointer; static string owned by the driver.
                Some(f) if unsafe { f(code, &mut s) } == CUDA_SUCCESS && !s.is_null() => {
                    // SAFETY: a non-NULL static NUL-terminated string owned by the driver.
                    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
                }
                _ => fallback.to_string(),
            }
        };
        (
            ask(self.own.get_error_name, ours.0),
            ask(self.own.get_error_string, ours.1),
        )
    }
}

/// Runs `f` with context `ctx` current on this thread (`cuCtxSetCurrent`), then makes the
/// previous one current again; `f` runs as is when `ctx` is 0 or already current. `None` when
/// the context cannot be made current (`f` not run).
pub(crate) fn in_context<T>(driver: &Driver, ctx: usize, f: impl FnOnce() -> T) -> Option<T> {
    let previous = driver.current_context();
    if ctx == 0 || ctx == previous {
        return Some(f());
    }
    let set = driver.own.ctx_set_current?;
    // SAFETY: a context handle the program used (a stream's); an invalid one is refused.
    if unsafe { set(ctx as CUcontext) } != CUDA_SUCCESS {
        return None;
    }
    let out = f();
    // SAFETY: the context that was current (or NULL: none), as it was.
    unsafe { set(previous as CUcontext) };
    Some(out)
}

/// Pinned, device-mapped host memory for progress markers: `(host pointer, device address)`,
/// for context `ctx` (the stream's context the slots are for; 0: the current one). Allocated
/// with the capture mode relaxed; `None` when the driver refuses.
///
/// The slots of a context are written by that context's streams, which need not be the context
/// current on the thread making a stream's first op (a copy may be issued on another device's
/// stream). So the memory is registered `CU_MEMHOSTREGISTER_PORTABLE` ("considered as pinned
/// memory by all CUDA contexts", driver API doc, `cuMemHostRegister`; the fallback allocation
/// is `CU_MEMHOSTALLOC_PORTABLE`), and its device address is asked with `ctx` current
/// (`cuMemHostGetDevicePointer` answers for the current context), the previous context made
/// current again after (issue 19 item 7: before, a slab registered in the current context only
/// could be given to another context's stream, whose marker write the device could not make).
///
/// The host side is cudablame's own anonymous mapping, registered with
/// `cuMemHostRegister(CU_MEMHOSTREGISTER_DEVICEMAP)` and **never unmapped**: when the context is
/// destroyed or reset (`cuCtxDestroy`, `cuDevicePrimaryCtxReset`, the last
/// `cuDevicePrimaryCtxRelease`) the driver drops the registration, but a host read of an old
/// marker (a report being built, a stream not yet forgotten) still reads valid memory, and no new
/// context ever gets markers there (slabs belong to one context and are forgotten with it). The
/// cost is a page per slab per context ever destroyed. Memory from `cuMemHostAlloc` (the fallback
/// where registration is refused) would be freed by the driver with its context: the streams
/// using it are forgotten when the destruction goes through a hooked call.
pub(crate) fn alloc_marker_memory(
    driver: &Driver,
    ctx: usize,
    bytes: usize,
) -> Option<(*mut u64, u64)> {
    let devptr = driver.own.mem_host_get_device_pointer?;
    in_context(driver, ctx, || {
        driver.relaxed_capture(|| {
            if let Some(register) = driver.own.mem_host_register {
                let len = bytes.next_multiple_of(4096);
                // SAFETY: a fresh private anonymous mapping (zero-filled), owned by cudablame.
                let host = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                if host != libc::MAP_FAILED {
                    let mut dev: CUdeviceptr = 0;
                    // SAFETY: a page-aligned range we own; valid out pointer.
                    let ok = unsafe {
                        register(
                            host,
                            len,
                            CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE,
                        ) == CUDA_SUCCESS
                            && devptr(&mut dev, host, 0) == CUDA_SUCCESS
                    };
                    if ok {
                        return Some((host as *mut u64, dev));
                    }
                    // Not registered (or registered without a device pointer): never used, but a
                    // registration may remain, so the mapping is kept too (a page, once).
                }
            }
            let alloc = driver.own.mem_host_alloc?;
            let mut host: *mut c_void = std::ptr::null_mut();
            // SAFETY: valid out pointers; flags from cuda.h.
            unsafe {
                if alloc(
                    &mut host,
                    bytes,
                    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP,
                ) != CUDA_SUCCESS
                    || host.is_null()
                {
                    return None;
                }
                std::ptr::write_bytes(host as *mut u8, 0, bytes);
                let mut dev: CUdeviceptr = 0;
                if devptr(&mut dev, host, 0) != CUDA_SUCCESS {
                    return None;
                }
                Some((host as *mut u64, dev))
            }
        })
    })
    .flatten()
}
