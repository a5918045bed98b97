//! Streams, events and the execution of queued operations.
//!
//! Every stream (legacy, per-thread or user) owns a FIFO of [`Op`]s and a worker thread that
//! executes them in order. Counters `enqueued` / `completed` number the ops of a stream (1-based),
//! so "wait until op `n` is done" is `completed >= n`, and a stream is drained when
//! `completed == enqueued`. Ops are counted as completed whether they executed or were discarded
//! because the context is poisoned, which is why synchronization can never hang on a fault.
//!
//! Legacy-stream semantics are modelled with dependencies: an op enqueued on the legacy stream
//! first waits for all work already enqueued on the context's blocking streams, and an op
//! enqueued on a blocking stream first waits for work already enqueued on the legacy stream.
//! Dependencies only ever point at earlier work, so they cannot form a cycle.

use crate::capture::Capture;
use crate::context::Context;
use crate::errors;
use crate::handles::Registry;
use crate::memory;
use crate::module::Func;
use crate::signal;
use crate::types::{CUstream, Res, CU_STREAM_LEGACY, CU_STREAM_NON_BLOCKING, CU_STREAM_PER_THREAD};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_uint};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::{Condvar, PoisonError};
use std::time::{Duration, Instant};

/// Live user `CUstream` handles (legacy and per-thread streams are reached through their
/// special handle values, never through a pointer).
pub static STREAMS: Registry<Stream> = Registry::new();
/// Handles of destroyed streams (stream objects are leaked, so a handle is never reused, except
/// under `FAKE_CUDA_REUSE_HANDLES=1`: [`FREED`]).
static DESTROYED: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
/// Destroyed user streams whose worker exited, whose addresses `FAKE_CUDA_REUSE_HANDLES=1` hands
/// out again to the next stream created in the same context object with the same flags and
/// priority (the most recently freed first). A context's address is reused too
/// (`context::Context::create`), so a stream of the new context may come back at the handle of
/// a stream of the destroyed one, as with a real driver's freed memory.
static FREED: Mutex<Vec<&'static Stream>> = parking_lot::const_mutex(Vec::new());

fn destroyed(handle: usize) -> bool {
    DESTROYED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&handle)
}

/// Live `CUevent` handles.
pub static EVENTS: Registry<Event> = Registry::new();

/// Longest kernel delay honoured (a typo must not hang a test for days).
const MAX_DELAY: Duration = Duration::from_secs(3600);

/// What a `NULL` stream handle means for an entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NullStream {
    /// Plain exports: `NULL` is the legacy default stream.
    Legacy,
    /// `_ptsz` / `_ptds` exports: `NULL` is the calling thread's per-thread stream.
    PerThread,
}

/// Resolves a `CUstream` argument. The special handles need a current context (201 if none);
/// user handles must be live (400 otherwise) and belong to a live context (709).
pub fn lookup(handle: CUstream, null: NullStream) -> Res<&'static Stream> {
    match handle as usize {
        0 => {
            let ctx = crate::context::current()?;
            match null {
                NullStream::Legacy => ctx.legacy(),
                NullStream::PerThread => ctx.per_thread(),
            }
        }
        CU_STREAM_LEGACY => crate::context::current()?.legacy(),
        CU_STREAM_PER_THREAD => crate::context::current()?.per_thread(),
        _ => {
            crate::context::require_init()?;
            let stream = STREAMS.get(handle).ok_or_else(|| {
                if destroyed(handle as usize) {
                    // The real driver does not check: driver 580 crashed (SIGSEGV) in
                    // cuStreamGetCtx given a stream cuBLASLt had destroyed. Fail as loudly.
                    eprintln!(
                        "fake libcuda: a destroyed stream {handle:p} was passed to the driver \
                         (undefined behaviour: the real driver crashes)"
                    );
                    std::process::abort();
                }
                errors::INVALID_HANDLE
            })?;
            if stream.ctx.is_destroyed() {
                return Err(errors::CONTEXT_IS_DESTROYED);
            }
            Ok(stream)
        }
    }
}

/// Which kind of stream this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// The context's legacy default stream (`NULL` / `CU_STREAM_LEGACY`).
    Legacy,
    /// A thread's per-thread default stream (`CU_STREAM_PER_THREAD`, or `NULL` in `_ptsz`).
    PerThread,
    /// A stream from `cuStreamCreate` / `cuStreamCreateWithPriority`.
    User,
}

/// One unit of stream work. Ops are also the nodes of captured graphs, hence `Clone`.
#[derive(Clone)]
pub enum Op {
    /// A kernel launch: sleeps `delay_us`, then maybe faults (see [`crate::module`]).
    Kernel {
        /// The launched function.
        func: &'static Func,
        /// Grid dimensions (stored only).
        grid: [c_uint; 3],
        /// Block dimensions (stored only).
        block: [c_uint; 3],
        /// Dynamic shared memory (stored only).
        shared_mem: c_uint,
    },
    /// `len` bytes from `src` to `dst` (overlap-safe).
    Copy {
        /// Destination address.
        dst: usize,
        /// Source address.
        src: usize,
        /// Byte count.
        len: usize,
        /// Whether `dst` must be mapped device/pinned memory when the op executes.
        dst_is_device: bool,
        /// Whether `src` must be mapped device/pinned memory when the op executes.
        src_is_device: bool,
    },
    /// `count` bytes at `dst` set to `value`.
    Memset8 {
        /// Destination address.
        dst: usize,
        /// Byte value.
        value: u8,
        /// Number of bytes.
        count: usize,
    },
    /// `count` 32-bit words at `dst` set to `value`.
    Memset32 {
        /// Destination address.
        dst: usize,
        /// Word value.
        value: u32,
        /// Number of words.
        count: usize,
    },
    /// A volatile 64-bit store (`cuStreamWriteValue64*`).
    Write64 {
        /// Target address (8-byte aligned).
        addr: usize,
        /// Value stored.
        value: u64,
    },
    /// A volatile 32-bit store (`cuStreamWriteValue32*`).
    Write32 {
        /// Target address (4-byte aligned).
        addr: usize,
        /// Value stored.
        value: u32,
    },
    /// Marks record number `seq` of `event` complete.
    RecordEvent {
        /// The recorded event.
        event: &'static Event,
        /// The record sequence number.
        seq: u64,
    },
    /// Blocks the stream until record number `seq` of `event` completed.
    WaitEvent {
        /// The awaited event.
        event: &'static Event,
        /// The record sequence number awaited.
        seq: u64,
    },
    /// A host function (`cuLaunchHostFunc`), called on the stream's worker.
    HostFunc {
        /// `void (*)(void*)`.
        func: usize,
        /// Its argument.
        data: usize,
    },
    /// Stream-ordered free of a device allocation (`cuMemFreeAsync`).
    Free {
        /// The allocation.
        ptr: usize,
    },
}

impl Op {
    fn describe(&self) -> String {
        match self {
            Op::Kernel { func, .. } => format!("kernel {}", func.name.to_string_lossy()),
            Op::Copy { len, .. } => format!("copy {len} bytes"),
            Op::Memset8 { count, .. } => format!("memset8 x{count}"),
            Op::Memset32 { count, .. } => format!("memset32 x{count}"),
            Op::Write64 { addr, value } => format!("write64 {value} to {addr:#x}"),
            Op::Write32 { addr, value } => format!("write32 {value} to {addr:#x}"),
            Op::RecordEvent { seq, .. } => format!("event record #{seq}"),
            Op::WaitEvent { seq, .. } => format!("event wait #{seq}"),
            Op::HostFunc { func, .. } => format!("host function {func:#x}"),
            Op::Free { ptr } => format!("free {ptr:#x}"),
        }
    }
}

/// A queued op with the cross-stream work it must wait for first.
struct Queued {
    op: Op,
    deps: Vec<(&'static Stream, u64)>,
}

struct Queue {
    items: VecDeque<Queued>,
    closed: bool,
}

/// A stream: a FIFO of ops executed in order by a worker thread.
pub struct Stream {
    /// Owning context.
    pub ctx: &'static Context,
    /// Legacy, per-thread or user stream.
    pub kind: StreamKind,
    /// `cuStreamCreate` flags.
    pub flags: c_uint,
    /// `cuStreamCreateWithPriority` priority (stored only).
    pub priority: c_int,
    /// std's mutex and condvar (not parking_lot): workers block here; see `signal` on fork.
    queue: std::sync::Mutex<Queue>,
    work: Condvar,
    enqueued: AtomicU64,
    completed: AtomicU64,
    capture: Mutex<Option<Arc<Capture>>>,
    /// Its worker has exited (after its close): the object may be reused ([`FREED`]).
    exited: std::sync::atomic::AtomicBool,
}

impl Stream {
    /// A freed user stream of `ctx` with these flags and priority, made live again (its
    /// counters go on from where they were: dependencies on its old ops stay satisfied).
    fn reuse(ctx: &'static Context, flags: c_uint, priority: c_int) -> Option<&'static Stream> {
        let mut freed = FREED.lock();
        let i = freed.iter().rposition(|s| {
            std::ptr::eq(s.ctx, ctx) && s.flags == flags && s.priority == priority
        })?;
        let stream = freed.remove(i);
        drop(freed);
        let handle = crate::handles::handle_of(stream) as usize;
        DESTROYED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|&h| h != handle);
        *stream.capture.lock() = None;
        stream.queue_lock().closed = false;
        stream.exited.store(false, Ordering::SeqCst);
        crate::trace!("stream {:p} reused", stream);
        Some(stream)
    }

    /// Creates a stream of `ctx` and starts its worker thread. User streams get a handle (a
    /// freed one's under `FAKE_CUDA_REUSE_HANDLES`).
    pub fn spawn(
        ctx: &'static Context,
        kind: StreamKind,
        flags: c_uint,
        priority: c_int,
    ) -> Res<&'static Stream> {
        let reused = (kind == StreamKind::User)
            .then(|| Self::reuse(ctx, flags, priority))
            .flatten();
        let stream: &'static Stream =
            reused.unwrap_or_else(|| Self::leak(ctx, kind, flags, priority));
        ctx.attach(stream);
        let spawned = std::thread::Builder::new()
            .name("fakecuda-stream".into())
            .spawn(move || stream.worker());
        if spawned.is_err() {
            ctx.detach(stream);
            return Err(errors::OUT_OF_MEMORY);
        }
        if kind == StreamKind::User {
            STREAMS.add(stream);
        }
        Ok(stream)
    }

    /// A new stream object (leaked: its address stays valid for the life of the process).
    fn leak(
        ctx: &'static Context,
        kind: StreamKind,
        flags: c_uint,
        priority: c_int,
    ) -> &'static Stream {
        Box::leak(Box::new(Stream {
            ctx,
            kind,
            flags,
            priority,
            queue: std::sync::Mutex::new(Queue {
                items: VecDeque::new(),
                closed: false,
            }),
            work: Condvar::new(),
            enqueued: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            capture: parking_lot::const_mutex(None),
            exited: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Whether its worker has exited (it was closed and its work drained).
    pub fn exited(&self) -> bool {
        self.exited.load(Ordering::SeqCst)
    }

    /// Whether the stream synchronizes implicitly with the legacy stream.
    pub fn is_blocking(&self) -> bool {
        self.kind != StreamKind::User || self.flags & CU_STREAM_NON_BLOCKING == 0
    }

    /// Number of ops ever enqueued.
    pub fn enqueued(&self) -> u64 {
        self.enqueued.load(Ordering::SeqCst)
    }

    /// Number of ops executed or discarded.
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::SeqCst)
    }

    /// Whether ops are queued or running.
    pub fn busy(&self) -> bool {
        self.completed() < self.enqueued()
    }

    /// Blocks until op number `seq` (and all before it) executed or was discarded.
    pub fn wait_for(&self, seq: u64) {
        signal::wait_until(|| self.completed() >= seq);
    }

    /// Blocks until all work enqueued before the call is done (`cuStreamSynchronize`).
    /// For the legacy stream this also waits for every other stream of the context.
    pub fn synchronize(&self) {
        self.wait_for(self.enqueued());
        if self.kind == StreamKind::Legacy {
            self.ctx.synchronize_all();
        }
    }

    /// The capture this stream currently records into, if any.
    pub fn active_capture(&self) -> Option<Arc<Capture>> {
        self.capture.lock().clone().filter(|c| !c.is_ended())
    }

    /// Makes the stream record into `capture` (or stop recording).
    pub fn set_capture(&self, capture: Option<Arc<Capture>>) {
        *self.capture.lock() = capture;
    }

    fn queue_lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops accepting work and lets the worker exit once the queue is drained.
    pub fn close(&'static self) {
        let handle = crate::handles::handle_of(self);
        STREAMS.remove(handle);
        DESTROYED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(handle as usize);
        self.queue_lock().closed = true;
        self.work.notify_all();
    }

    /// Enqueues `op` for execution, adding the implicit legacy-stream dependencies.
    /// Returns the op's sequence number. Capture and sticky errors are the caller's business.
    pub fn enqueue(&'static self, op: Op) -> Res<u64> {
        let deps = self.implicit_deps();
        crate::trace!(
            "enqueue on {:?} stream {:p}: {}",
            self.kind,
            self,
            op.describe()
        );
        let inline = matches!(&op, Op::Kernel { func, .. } if func.spec.inline);
        let mut queue = self.queue_lock();
        if queue.closed {
            return Err(errors::INVALID_HANDLE);
        }
        // `inline=1`: nothing queued or running (the worker counts an op completed only after
        // running it, under no lock, so equal counts mean it holds none) and nothing to wait
        // for: run it here, holding the queue lock so that the worker takes nothing meanwhile.
        if inline
            && deps.is_empty()
            && queue.items.is_empty()
            && self.completed() == self.enqueued()
        {
            let seq = self.enqueued.fetch_add(1, Ordering::SeqCst) + 1;
            self.run(Queued { op, deps });
            self.completed.fetch_add(1, Ordering::SeqCst);
            drop(queue);
            signal::notify();
            return Ok(seq);
        }
        queue.items.push_back(Queued { op, deps });
        let seq = self.enqueued.fetch_add(1, Ordering::SeqCst) + 1;
        drop(queue);
        self.work.notify_one();
        Ok(seq)
    }

    fn implicit_deps(&'static self) -> Vec<(&'static Stream, u64)> {
        let pending = |s: &'static Stream| {
            let target = s.enqueued();
            (s.completed() < target).then_some((s, target))
        };
        match self.kind {
            StreamKind::Legacy => self
                .ctx
                .streams()
                .into_iter()
                .filter(|s| !std::ptr::eq(*s, self) && s.is_blocking())
                .filter_map(pending)
                .collect(),
            _ if self.is_blocking() => self
                .ctx
                .existing_legacy()
                .and_then(pending)
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }

    fn worker(&'static self) {
        loop {
            let next = {
                let mut queue = self.queue_lock();
                loop {
                    if let Some(item) = queue.items.pop_front() {
                        break Some(item);
                    }
                    if queue.closed {
                        // The stream object lives on (its handle is reused only under
                        // `FAKE_CUDA_REUSE_HANDLES`): give its queue's memory back.
                        queue.items = VecDeque::new();
                        break None;
                    }
                    queue = self
                        .work
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            let Some(item) = next else { break };
            // Never let a bug in an op kill the worker: that would hang every synchronize.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run(item)));
            self.completed.fetch_add(1, Ordering::SeqCst);
            signal::notify();
        }
        self.ctx.detach(self);
        // Offered for reuse only once detached (a new life attaches it again), and marked exited
        // under the list's lock, so that a reuse's reset of the mark comes after this one.
        {
            let mut freed = FREED.lock();
            self.exited.store(true, Ordering::SeqCst);
            if self.kind == StreamKind::User && crate::capture::reuse_handles() {
                freed.push(self);
            }
        }
        signal::notify();
    }

    fn run(&'static self, item: Queued) {
        let ctx = self.ctx;
        for (dep, seq) in &item.deps {
            signal::wait_until(|| dep.completed() >= *seq || ctx.poisoned());
        }
        if ctx.poisoned() {
            crate::trace!("discard (sticky {}): {}", ctx.sticky(), item.op.describe());
            return;
        }
        crate::trace!("execute on {:p}: {}", self, item.op.describe());
        let ctx_handle = crate::handles::handle_of(ctx) as usize;
        match item.op {
            Op::Kernel { func, .. } => run_kernel(ctx, func),
            Op::Copy {
                dst,
                src,
                len,
                dst_is_device,
                src_is_device,
            } => memory::with_mapped(|mapped| {
                if (dst_is_device && !mapped(dst, len)) || (src_is_device && !mapped(src, len)) {
                    ctx.poison(errors::ILLEGAL_ADDRESS);
                } else if len > 0 {
                    // SAFETY: device-side ranges are checked above (and cannot be freed while
                    // we hold the map); host-side ranges are the caller's promise, as in CUDA.
                    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
                }
            }),
            Op::Memset8 { dst, value, count } => memory::with_mapped(|mapped| {
                if !mapped(dst, count) {
                    ctx.poison(errors::ILLEGAL_ADDRESS);
                } else {
                    // SAFETY: the range is mapped (checked above).
                    unsafe { std::ptr::write_bytes(dst as *mut u8, value, count) };
                }
            }),
            Op::Memset32 { dst, value, count } => memory::with_mapped(|mapped| {
                if !mapped(dst, count.saturating_mul(4)) {
                    ctx.poison(errors::ILLEGAL_ADDRESS);
                } else {
                    for i in 0..count {
                        // SAFETY: the range is mapped (checked above); alignment was checked
                        // at enqueue, and write_unaligned does not need it anyway.
                        unsafe { std::ptr::write_unaligned((dst as *mut u32).add(i), value) };
                    }
                }
            }),
            // Pinned host memory of another context (not portable) is not mapped for this one:
            // the device write faults (see `memory::reachable_from`).
            Op::Write64 { addr, value } => memory::with_reachable(ctx_handle, |reachable| {
                if !reachable(addr, 8) {
                    ctx.poison(errors::ILLEGAL_ADDRESS);
                } else {
                    // SAFETY: mapped and 8-byte aligned (checked at enqueue).
                    unsafe { std::ptr::write_volatile(addr as *mut u64, value) };
                }
            }),
            // Pinned host memory of another context (not portable) is not mapped for this one:
            // the device write faults (see `memory::reachable_from`).
            Op::Write32 { addr, value } => memory::with_reachable(ctx_handle, |reachable| {
                if !reachable(addr, 4) {
                    ctx.poison(errors::ILLEGAL_ADDRESS);
                } else {
                    // SAFETY: mapped and 4-byte aligned (checked at enqueue).
                    unsafe { std::ptr::write_volatile(addr as *mut u32, value) };
                }
            }),
            Op::RecordEvent { event, seq } => event.complete(seq),
            Op::WaitEvent { event, seq } => signal::wait_until(|| {
                event.done() >= seq
                    || ctx.poisoned()
                    || event.ctx.poisoned()
                    || event.ctx.is_destroyed()
            }),
            Op::HostFunc { func, data } => {
                // SAFETY: the program passed a `void (*)(void*)` and its argument
                // (cuLaunchHostFunc's contract); NULL was refused at enqueue.
                let f: extern "C" fn(*mut std::ffi::c_void) = unsafe { std::mem::transmute(func) };
                f(data as *mut std::ffi::c_void);
            }
            Op::Free { ptr } => {
                let _ = memory::free(memory::Kind::Device, ptr);
            }
        }
    }
}

/// Executes one kernel: counts the execution, sleeps its delay (ending early if the context is
/// poisoned meanwhile), then applies its fault rule.
fn run_kernel(ctx: &'static Context, func: &'static Func) {
    let n = func.executions.fetch_add(1, Ordering::SeqCst) + 1;
    let spec = &func.spec;
    if spec.delay_us > 0 {
        let delay = Duration::from_micros(spec.delay_us).min(MAX_DELAY);
        let now = Instant::now();
        let deadline = now.checked_add(delay).unwrap_or(now);
        signal::wait_deadline(deadline, || ctx.poisoned());
    }
    if ctx.poisoned() {
        return;
    }
    if let Some(code) = spec.fault {
        if spec.fault_on.is_none_or(|k| k == n) {
            crate::trace!(
                "kernel {} execution #{} faults with {}",
                func.name.to_string_lossy(),
                n,
                code
            );
            if let Some(condition) = &spec.assert {
                print_assert(func, condition);
            }
            ctx.poison(code);
        }
    }
}

extern "C" {
    /// `src/assert_print.c`.
    fn fakecuda_print_assert(kernel: *const c_char, condition: *const c_char, thread: c_uint);
}

/// Prints the device-side assert lines of a faulting kernel, as the real driver does: two
/// failing threads, through `vfprintf(stdout, ...)` (thread 2: `__vfprintf_chk`, the fortified
/// form) from inside this library, before the fault
/// becomes visible to any API call.
fn print_assert(func: &Func, condition: &str) {
    let Ok(condition) = std::ffi::CString::new(condition) else {
        return;
    };
    for thread in [1, 2] {
        // SAFETY: two NUL-terminated strings.
        unsafe { fakecuda_print_assert(func.name.as_ptr(), condition.as_ptr(), thread) };
    }
}

/// A fake `CUevent`: records are numbered; the event is complete when the latest record ran.
pub struct Event {
    /// Owning context.
    pub ctx: &'static Context,
    /// `cuEventCreate` flags.
    pub flags: c_uint,
    recorded: AtomicU64,
    done: AtomicU64,
    capture: Mutex<Option<Arc<Capture>>>,
}

impl Event {
    /// Creates and registers an event of `ctx`.
    pub fn create(ctx: &'static Context, flags: c_uint) -> &'static Event {
        EVENTS.insert(Event {
            ctx,
            flags,
            recorded: AtomicU64::new(0),
            done: AtomicU64::new(0),
            capture: parking_lot::const_mutex(None),
        })
    }

    /// Starts a new record; returns its sequence number (the op must carry it).
    pub fn next_record(&self) -> u64 {
        *self.capture.lock() = None;
        self.recorded.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Number of the latest record.
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::SeqCst)
    }

    /// Number of the latest completed record.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::SeqCst)
    }

    /// Whether the latest record has completed (an event never recorded is complete).
    pub fn is_complete(&self) -> bool {
        self.done() >= self.recorded()
    }

    fn complete(&self, seq: u64) {
        self.done.fetch_max(seq, Ordering::SeqCst);
    }

    /// Marks the event as last recorded inside `capture` (cuEventRecord on a capturing stream).
    pub fn set_capture(&self, capture: Arc<Capture>) {
        *self.capture.lock() = Some(capture);
    }

    /// The still-active capture this event was last recorded in, if any.
    pub fn active_capture(&self) -> Option<Arc<Capture>> {
        self.capture.lock().clone().filter(|c| !c.is_ended())
    }
}
