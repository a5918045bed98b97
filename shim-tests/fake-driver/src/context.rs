//! Driver initialization, devices, contexts and the per-thread context stack.

use crate::errors;
use crate::handles::Registry;
use crate::signal;
use crate::stream::{Stream, StreamKind};
use crate::types::{CUdevice, CUresult, Res};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

/// Set by `cuInit`.
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// Live `CUcontext` handles.
pub static CONTEXTS: Registry<Context> = Registry::new();

/// Destroyed contexts whose addresses `FAKE_CUDA_REUSE_HANDLES=1` hands out again to the next
/// context created on the same device with the same kind (primary or not), the most recently
/// destroyed first, as a real driver may hand out freed memory again.
static FREED: Mutex<Vec<&'static Context>> = parking_lot::const_mutex(Vec::new());

/// Whether `FAKE_CUDA_QUIET_DESTROY` is set (to anything but empty or `0`): destroying a context
/// whose work left a sticky error returns `CUDA_SUCCESS`, as a driver may (the driver API says
/// only that `cuCtxDestroy` "may also return error codes from previous, asynchronous
/// launches"). By default the fake returns the sticky error, and destroys the context all the
/// same.
fn quiet_destroy() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("FAKE_CUDA_QUIET_DESTROY").is_ok_and(|v| !v.is_empty() && v != "0")
    })
}

/// What a call that destroyed a context returns (`cuCtxDestroy_v2`, `cuDevicePrimaryCtxReset_v2`,
/// the last `cuDevicePrimaryCtxRelease_v2`), given the sticky error its work left
/// ([`Context::destroy`]): that error (unless [`quiet_destroy`]), else success.
pub fn destroyed_result(sticky: CUresult) -> Res<()> {
    match sticky {
        0 => Ok(()),
        _ if quiet_destroy() => Ok(()),
        code => Err(code),
    }
}

/// Primary contexts: device -> (context, retain count).
static PRIMARY: Mutex<BTreeMap<CUdevice, (&'static Context, u32)>> =
    parking_lot::const_mutex(BTreeMap::new());

/// A context stack of fixed capacity (no heap, no destructor).
pub struct CtxStack {
    items: [Option<&'static Context>; 32],
    len: usize,
}

impl CtxStack {
    fn last(&self) -> Option<&&'static Context> {
        self.items[..self.len].last().and_then(|c| c.as_ref())
    }
    fn last_mut(&mut self) -> Option<&mut &'static Context> {
        let len = self.len;
        self.items[..len].last_mut().and_then(|c| c.as_mut())
    }
    fn push(&mut self, ctx: &'static Context) {
        if self.len < self.items.len() {
            self.items[self.len] = Some(ctx);
            self.len += 1;
        }
    }
    fn pop(&mut self) -> Option<&'static Context> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        self.items[self.len].take()
    }
}

/// The per-thread default streams a thread created: closed when it exits (the worker finishes
/// the queued work, then stops), so that a long-running program with short-lived threads keeps
/// no stream per dead thread.
struct PerThreadStreams(RefCell<Vec<(&'static Context, u64)>>);

impl Drop for PerThreadStreams {
    fn drop(&mut self) {
        for (ctx, tid) in self.0.borrow_mut().drain(..) {
            let stream = ctx.per_thread.lock().remove(&tid);
            if let Some(stream) = stream {
                stream.close();
            }
        }
    }
}

thread_local! {
    static EXITING: PerThreadStreams = const { PerThreadStreams(RefCell::new(Vec::new())) };
    /// The calling thread's context stack; the top is the current context. Fixed capacity and
    /// without a destructor, so it outlives the thread's other thread-local storage: like the
    /// real driver's, the current context still answers in exit handlers and static destructors.
    static STACK: RefCell<CtxStack> = const { RefCell::new(CtxStack { items: [None; 32], len: 0 }) };
}

/// Marks the driver initialized (`cuInit`). Fails with `CUDA_ERROR_NO_DEVICE` without devices.
pub fn init() -> Res<()> {
    if device_count() == 0 {
        return Err(errors::NO_DEVICE);
    }
    INITIALIZED.store(true, Ordering::SeqCst);
    Ok(())
}

/// `Err(CUDA_ERROR_NOT_INITIALIZED)` until `cuInit` succeeded.
pub fn require_init() -> Res<()> {
    if INITIALIZED.load(Ordering::SeqCst) {
        Ok(())
    } else {
        Err(errors::NOT_INITIALIZED)
    }
}

/// Number of fake devices: 2, or `FAKE_CUDA_DEVICES` if set to a number.
pub fn device_count() -> CUdevice {
    static COUNT: OnceLock<CUdevice> = OnceLock::new();
    *COUNT.get_or_init(|| {
        std::env::var("FAKE_CUDA_DEVICES")
            .ok()
            .and_then(|v| v.trim().parse::<CUdevice>().ok())
            .map_or(2, |n| n.max(0))
    })
}

/// `Err(CUDA_ERROR_INVALID_DEVICE)` unless `dev` is a valid ordinal (after init).
pub fn check_device(dev: CUdevice) -> Res<()> {
    require_init()?;
    if (0..device_count()).contains(&dev) {
        Ok(())
    } else {
        Err(errors::INVALID_DEVICE)
    }
}

/// The calling thread's OS thread id (stable for the thread's life; safe in TLS destructors).
pub fn thread_id() -> u64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}

/// A fake CUDA context: its own streams and its sticky error (set for every context of the device
/// by a fault in any of them: [`Context::poison`]).
pub struct Context {
    /// Device ordinal.
    pub device: CUdevice,
    /// Whether this is a device's primary context.
    pub primary: bool,
    /// Sticky error (0 = healthy). Once set, never cleared.
    sticky: AtomicU32,
    destroyed: AtomicBool,
    /// The legacy default stream, created on first use.
    legacy: Mutex<Option<&'static Stream>>,
    /// Per-thread default streams by OS thread id, created on first use.
    per_thread: Mutex<HashMap<u64, &'static Stream>>,
    /// Every stream whose worker is still running (legacy, per-thread and user streams).
    streams: Mutex<Vec<&'static Stream>>,
}

impl Context {
    /// Creates and registers a new context on `dev` (at a destroyed one's address under
    /// `FAKE_CUDA_REUSE_HANDLES`, see [`FREED`]).
    pub fn create(dev: CUdevice, primary: bool) -> &'static Context {
        let freed = {
            let mut freed = FREED.lock();
            freed
                .iter()
                .rposition(|c| c.device == dev && c.primary == primary)
                .map(|i| freed.remove(i))
        };
        if let Some(ctx) = freed {
            ctx.revive();
            CONTEXTS.add(ctx);
            crate::trace!("context {:p} reused", ctx);
            return ctx;
        }
        CONTEXTS.insert(Context {
            device: dev,
            primary,
            sticky: AtomicU32::new(0),
            destroyed: AtomicBool::new(false),
            legacy: parking_lot::const_mutex(None),
            per_thread: parking_lot::const_mutex(HashMap::new()),
            streams: parking_lot::const_mutex(Vec::new()),
        })
    }

    /// A destroyed context made new again (healthy, no streams) for reuse of its address. Its
    /// streams' workers have all exited ([`Context::destroy`] waits for them under reuse).
    fn revive(&self) {
        self.sticky.store(0, Ordering::SeqCst);
        *self.legacy.lock() = None;
        self.per_thread.lock().clear();
        self.destroyed.store(false, Ordering::SeqCst);
    }

    /// The sticky error (0 if none).
    pub fn sticky(&self) -> CUresult {
        self.sticky.load(Ordering::SeqCst)
    }

    /// Whether a kernel fault has poisoned this context.
    pub fn poisoned(&self) -> bool {
        self.sticky() != 0
    }

    /// Whether `cuCtxDestroy_v2` (or the last primary release) destroyed this context.
    pub fn is_destroyed(&self) -> bool {
        self.destroyed.load(Ordering::SeqCst)
    }

    /// `Err(709)` if destroyed, `Err(sticky)` if poisoned, else `Ok`.
    pub fn check(&self) -> Res<()> {
        if self.is_destroyed() {
            return Err(errors::CONTEXT_IS_DESTROYED);
        }
        match self.sticky() {
            0 => Ok(()),
            code => Err(code),
        }
    }

    /// Sets the sticky error of this context and of every other live context of its device
    /// (the first fault wins in each) and wakes every waiter so queued work is discarded and
    /// synchronizing calls return. A fault stops the device, not one context: measured on the
    /// H200 (driver 580.159.04, `cuda-samples/cross_context.c`), a kernel of context A storing
    /// to an illegal address makes `cuMemAlloc` and `cuCtxSynchronize` in context B of the same
    /// device return 700 and ends B's running kernel. (The real driver also fails a
    /// `cuCtxCreate` on that device afterwards; the fake creates a healthy context.)
    pub fn poison(&self, code: CUresult) {
        let device = CONTEXTS
            .live()
            .into_iter()
            .filter(|c| c.device == self.device);
        for ctx in std::iter::once(self).chain(device) {
            if ctx
                .sticky
                .compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                crate::trace!("context {:p} poisoned with {}", ctx, code);
            }
        }
        signal::notify();
    }

    /// The legacy default stream (created on first use).
    pub fn legacy(&'static self) -> Res<&'static Stream> {
        let mut slot = self.legacy.lock();
        if let Some(stream) = *slot {
            return Ok(stream);
        }
        let stream = Stream::spawn(self, StreamKind::Legacy, 0, 0)?;
        *slot = Some(stream);
        Ok(stream)
    }

    /// The legacy stream if it was ever created.
    pub fn existing_legacy(&self) -> Option<&'static Stream> {
        *self.legacy.lock()
    }

    /// The calling thread's per-thread default stream (created on first use).
    pub fn per_thread(&'static self) -> Res<&'static Stream> {
        let tid = thread_id();
        let mut map = self.per_thread.lock();
        if let Some(stream) = map.get(&tid) {
            return Ok(stream);
        }
        let stream = Stream::spawn(self, StreamKind::PerThread, 0, 0)?;
        map.insert(tid, stream);
        let _ = EXITING.try_with(|e| e.0.borrow_mut().push((self, tid)));
        Ok(stream)
    }

    /// Records a stream whose worker runs (called before the worker starts).
    pub fn attach(&self, stream: &'static Stream) {
        self.streams.lock().push(stream);
    }

    /// Forgets a stream whose worker exited.
    pub fn detach(&self, stream: &Stream) {
        self.streams.lock().retain(|s| !std::ptr::eq(*s, stream));
    }

    /// A snapshot of the streams with running workers.
    pub fn streams(&self) -> Vec<&'static Stream> {
        self.streams.lock().clone()
    }

    /// Waits until every stream of the context has executed (or discarded) all work enqueued
    /// before this call.
    pub fn synchronize_all(&self) {
        let targets: Vec<_> = self
            .streams()
            .into_iter()
            .map(|s| (s, s.enqueued()))
            .collect();
        for (stream, seq) in targets {
            stream.wait_for(seq);
        }
    }

    /// Destroys the context, faulted or not: waits for its work, stops its stream workers,
    /// frees or unregisters its pinned memory and invalidates the handle. Threads that still
    /// have it current get `CUDA_ERROR_CONTEXT_IS_DESTROYED` (unless the address is reused).
    /// Returns the sticky error its work left (0: none), which the destroying call returns
    /// ([`destroyed_result`]). Under `FAKE_CUDA_REUSE_HANDLES` it waits for the stream workers
    /// to exit and offers the address (and its streams') for reuse.
    pub fn destroy(&'static self) -> CUresult {
        self.synchronize_all();
        let sticky = self.sticky();
        self.destroyed.store(true, Ordering::SeqCst);
        let streams = self.streams();
        for stream in &streams {
            stream.close();
        }
        crate::memory::release_context(crate::handles::handle_of(self) as usize);
        CONTEXTS.remove(crate::handles::handle_of(self));
        signal::notify();
        if crate::capture::reuse_handles() {
            signal::wait_until(|| streams.iter().all(|s| s.exited()));
            FREED.lock().push(self);
        }
        sticky
    }
}

/// The current context of the calling thread (top of its stack), unchecked.
pub fn current_raw() -> Option<&'static Context> {
    STACK
        .try_with(|s| s.try_borrow().ok().and_then(|s| s.last().copied()))
        .ok()
        .flatten()
}

/// The current context: `Err(3)` before `cuInit`, `Err(201)` if none, `Err(709)` if destroyed.
pub fn current() -> Res<&'static Context> {
    require_init()?;
    let ctx = current_raw().ok_or(errors::INVALID_CONTEXT)?;
    if ctx.is_destroyed() {
        return Err(errors::CONTEXT_IS_DESTROYED);
    }
    Ok(ctx)
}

/// [`current`], additionally failing with the sticky error of a poisoned context.
pub fn current_checked() -> Res<&'static Context> {
    let ctx = current()?;
    ctx.check()?;
    Ok(ctx)
}

fn with_stack<R>(f: impl FnOnce(&mut CtxStack) -> R) -> Res<R> {
    STACK
        .try_with(|s| s.try_borrow_mut().map(|mut s| f(&mut s)).ok())
        .ok()
        .flatten()
        .ok_or(errors::UNKNOWN)
}

/// `cuCtxSetCurrent`: replaces the top of the stack (pushes onto an empty stack); `None` pops.
pub fn set_current(ctx: Option<&'static Context>) -> Res<()> {
    with_stack(|stack| match ctx {
        Some(ctx) => match stack.last_mut() {
            Some(top) => *top = ctx,
            None => stack.push(ctx),
        },
        None => {
            stack.pop();
        }
    })
}

/// `cuCtxPushCurrent_v2`.
pub fn push_current(ctx: &'static Context) -> Res<()> {
    with_stack(|stack| stack.push(ctx))
}

/// `cuCtxPopCurrent_v2`: pops and returns the top of the stack.
pub fn pop_current() -> Res<Option<&'static Context>> {
    with_stack(|stack| stack.pop())
}

/// Removes `ctx` from the top of the calling thread's stack if it is current there.
pub fn pop_if_current(ctx: &'static Context) {
    let _ = with_stack(|stack| {
        if stack.last().is_some_and(|top| std::ptr::eq(*top, ctx)) {
            stack.pop();
        }
    });
}

/// `cuDevicePrimaryCtxRetain`: the device's primary context, created on first retain.
pub fn primary_retain(dev: CUdevice) -> Res<&'static Context> {
    check_device(dev)?;
    let mut map = PRIMARY.lock();
    let entry = map
        .entry(dev)
        .or_insert_with(|| (Context::create(dev, true), 0));
    if entry.0.is_destroyed() {
        // Destroyed behind our back with cuCtxDestroy_v2: start a fresh one.
        *entry = (Context::create(dev, true), 0);
    }
    entry.1 += 1;
    Ok(entry.0)
}

/// `cuDevicePrimaryCtxReset_v2`: destroys the primary context (all its allocations and state)
/// whatever its reference count, returning the sticky error its work left
/// ([`destroyed_result`]); the next retain creates a fresh one.
pub fn primary_reset(dev: CUdevice) -> Res<()> {
    check_device(dev)?;
    let reset = PRIMARY.lock().remove(&dev).map(|(ctx, _)| ctx);
    let Some(ctx) = reset else { return Ok(()) };
    pop_if_current(ctx);
    if ctx.is_destroyed() {
        return Ok(());
    }
    destroyed_result(ctx.destroy())
}

/// `cuDevicePrimaryCtxGetState`: whether the primary context is active (retained, not destroyed).
pub fn primary_active(dev: CUdevice) -> Res<bool> {
    check_device(dev)?;
    Ok(PRIMARY
        .lock()
        .get(&dev)
        .is_some_and(|(ctx, n)| *n > 0 && !ctx.is_destroyed()))
}

/// `cuDevicePrimaryCtxRelease_v2`: the last release destroys the primary context (and returns
/// the sticky error its work left, [`destroyed_result`]).
pub fn primary_release(dev: CUdevice) -> Res<()> {
    check_device(dev)?;
    let released = {
        let mut map = PRIMARY.lock();
        let Some(entry) = map.get_mut(&dev) else {
            return Err(errors::INVALID_CONTEXT);
        };
        entry.1 -= 1;
        if entry.1 == 0 {
            map.remove(&dev).map(|(ctx, _)| ctx)
        } else {
            None
        }
    };
    match released {
        Some(ctx) if !ctx.is_destroyed() => destroyed_result(ctx.destroy()),
        _ => Ok(()),
    }
}
