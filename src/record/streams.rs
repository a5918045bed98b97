//! Per-stream state and the table that finds a stream's state from `(context, stream)`.

use super::markers::*;
use super::ring::*;
use crate::cuda::{CUstream, CUDA_SUCCESS, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
use crate::real::Driver;
use crate::safety::lock::{Mutex, RwLock};
use crate::safety::{per_thread, Resettable};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which stream an op went to. Default streams are told apart by the API variant: a NULL handle
/// is the legacy stream in plain variants and the per-thread stream in `_ptsz`/`_ptds` ones
/// (`cuda.h`, `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum StreamId {
    Legacy,
    /// The per-thread default stream of this OS thread.
    PerThread(u32),
    Handle(usize),
}

impl StreamId {
    /// Resolves a raw handle as passed to a variant.
    pub(crate) fn resolve(raw: usize, per_thread_variant: bool, thread: u32) -> StreamId {
        match raw {
            0 if per_thread_variant => StreamId::PerThread(thread),
            0 | CU_STREAM_LEGACY => StreamId::Legacy,
            CU_STREAM_PER_THREAD => StreamId::PerThread(thread),
            h => StreamId::Handle(h),
        }
    }

    /// The handle that names this stream in plain (non-`_ptsz`) calls made from the thread that
    /// owns it.
    pub(crate) fn handle(self) -> usize {
        match self {
            StreamId::Legacy => CU_STREAM_LEGACY,
            StreamId::PerThread(_) => CU_STREAM_PER_THREAD,
            StreamId::Handle(h) => h,
        }
    }

    /// How the report names the stream: `0x…`, `legacy`, or `per-thread(tid)`.
    pub(crate) fn describe(self) -> String {
        match self {
            StreamId::Legacy => "legacy".into(),
            StreamId::PerThread(t) => format!("per-thread({t})"),
            StreamId::Handle(h) => format!("{h:#x}"),
        }
    }
}

/// Everything cudablame knows of one stream. Laid out in declaration order (`repr(C)`): what every
/// op reads or writes first, so that with the `Arc`'s counts and the ring's own first fields
/// (`Ring`) it spans four cache lines.
#[repr(C)]
pub(crate) struct StreamState {
    /// Sequence number of the last op issued (mirror of the ring's, readable without the lock).
    pub(crate) issued: AtomicU64,
    /// Highest sequence number proven complete by a successful synchronization on the host.
    pub(crate) host_completed: AtomicU64,
    pub(crate) context: usize,
    pub(crate) device: i32,
    pub(crate) id: StreamId,
    pub(crate) marker: Option<Marker>,
    pub(crate) ops: Mutex<Ring>,
    /// Work cudablame could not record went onto this stream (an entry point it does not record:
    /// `cuLaunchHostFunc`, `cuMemsetD2D*`, ...): the sequence number of the last op issued before
    /// it, plus one (0: never). The report cannot call a verdict on this stream exact while that
    /// work may be unfinished.
    pub(crate) unseen_after: AtomicU64,
    /// The name of the last such entry point (an index into `EntryPoint::ALL`, plus one; 0: none).
    pub(crate) unseen_what: AtomicU64,
}

impl StreamState {
    /// The highest sequence number proven complete now: by the progress marker or by a
    /// successful host synchronization.
    pub(crate) fn completed_now(&self) -> u64 {
        let marker = self.marker.as_ref().map_or(0, Marker::read);
        marker.max(self.host_completed.load(Ordering::Acquire))
    }

    /// The progress marker's value: the last sequence number the device wrote (0: no slot).
    pub(crate) fn marker_value(&self) -> u64 {
        self.marker.as_ref().map_or(0, Marker::read)
    }

    /// Notes unrecorded work enqueued now (after op `issued`) by `what`.
    pub(crate) fn note_unseen(&self, what: crate::cuda::entry_points::EntryPoint) {
        self.unseen_after
            .store(self.issued.load(Ordering::Acquire) + 1, Ordering::Release);
        self.unseen_what.store(what as u64 + 1, Ordering::Release);
    }

    /// Enqueues the marker write for op `seq` (caller holds the ring lock, right after the op);
    /// returns whether the driver took it.
    pub(crate) fn write_marker(&self, driver: &Driver, seq: u64) -> bool {
        let (Some(m), Some(write)) = (&self.marker, driver.own.stream_write_value64) else {
            return false;
        };
        if !crate::config::markers_enabled() {
            return false;
        }
        // Flags 0, CU_STREAM_WRITE_VALUE_DEFAULT: runs after the stream's earlier work, with a
        // memory fence. (CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER is refused for 64-bit writes by
        // driver 580: CUDA_ERROR_INVALID_VALUE, measured on the H200.)
        // SAFETY: plain-variant call with this stream's handle.
        let rc = unsafe { write(self.id.handle() as CUstream, m.device, seq, 0) };
        // A sticky error here means the context died meanwhile: only this op lacks its marker.
        if rc != CUDA_SUCCESS && !crate::cuda::is_sticky(rc) {
            crate::config::markers_failed(rc);
        }
        rc == CUDA_SUCCESS
    }
}

type Key = (usize, StreamId);

#[derive(Default)]
struct Table {
    live: HashMap<Key, Arc<StreamState>>,
    /// Destroyed streams still matter (their queued work runs on); the most recent few are kept.
    retired: VecDeque<Arc<StreamState>>,
    /// The context of each stream handle seen (`cuStreamGetCtx`, asked once per handle).
    handles: HashMap<usize, usize>,
    /// Per context: its device (-1: unknown) and its destroyed streams dropped from the retired
    /// list while they may still have had unfinished work (their work can hide the culprit of
    /// any context of that device: a fault stops the device).
    dropped_unfinished: HashMap<usize, (i32, u64)>,
    /// Per device (-1: unknown): contexts destroyed (or reset) while work of theirs may not have
    /// completed ([`forget_context`]). Their streams are forgotten, but a fault of that work
    /// stops the device, and another context of it reports the error (fake driver and H200:
    /// `Context::poison`, `cuda-samples/cross_context.cu`).
    destroyed_unfinished: HashMap<i32, u64>,
}

impl Table {
    /// Moves `s` to the retired list if it may still have unfinished work (else forgets it),
    /// dropping the oldest retired stream beyond [`RETIRED_KEPT`]. A full list first forgets
    /// the retired streams whose work completed since they were retired (their tail markers
    /// written): found flaky, `a_destroyed_streams_finished_work_is_proven_by_a_marker_written_before_destruction`
    /// failed about 1 run in 20, when the oldest of 80 streams destroyed in a row had not yet
    /// run its marker as the 65th was destroyed: it was counted as possibly unfinished for good
    /// and every later verdict of the device lost `exact`, while dozens of younger retired
    /// streams were long complete (0 of 80 runs since; it can still happen when all 64 are
    /// unfinished, and the verdict then says so). Cold: a stream's destruction, at most 64 cheap
    /// reads.
    fn retire_state(&mut self, s: Arc<StreamState>) {
        if !s.may_be_unfinished() {
            release_slot(&s);
            return;
        }
        if self.retired.len() >= RETIRED_KEPT {
            self.retired.retain(|r| {
                let keep = r.may_be_unfinished();
                if !keep {
                    release_slot(r);
                }
                keep
            });
        }
        if self.retired.len() >= RETIRED_KEPT {
            if let Some(old) = self.retired.pop_front() {
                if old.may_be_unfinished() {
                    let entry = self
                        .dropped_unfinished
                        .entry(old.context)
                        .or_insert((old.device, 0));
                    if entry.0 < 0 {
                        entry.0 = old.device;
                    }
                    entry.1 += 1;
                } else {
                    release_slot(&old);
                }
            }
        }
        self.retired.push_back(s);
    }
}

const RETIRED_KEPT: usize = 64;

/// Resettable: a forked child drops it without taking its lock (`safety::Resettable`).
static TABLE: Resettable<RwLock<Table>> = Resettable::new();
/// Bumped on every removal (and after a fork) so thread-local caches notice.
/// (Also: a destroyed stream handle's cached context is forgotten with it.)
#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// This thread's stream bookkeeping: the stream it used last, and the per-thread default
/// streams it used.
struct ThreadStreams {
    /// The last stream looked up: key, the [`EPOCH`] it was found in, its state.
    cache: RefCell<Option<(Key, u64, Arc<StreamState>)>>,
    /// Per-thread default streams this thread used: forgotten when the thread exits.
    per_thread_used: RefCell<Vec<Key>>,
}

per_thread! {
    /// This thread's [`ThreadStreams`], dropped at thread exit by a key destructor (no
    /// thread-local destructor: `safety::PerThread`).
    static MINE: ThreadStreams = || ThreadStreams {
        cache: RefCell::new(None),
        per_thread_used: RefCell::new(Vec::new()),
    };
}

/// Dropping a thread's [`ThreadStreams`] (its key destructor, when the thread exits) retires the
/// per-thread default streams it used. The driver API documentation ("Stream synchronization
/// behavior") describes the per-thread default stream as an implicit stream local to both the
/// thread and the context, and says nothing of what becomes of it, or of work queued on it, when
/// the thread exits. cudablame relies on nothing there: work still possibly unfinished is kept
/// like a destroyed stream's (on the bounded retired list, still blamable), a stream whose work
/// all completed is forgotten, and a thread id the kernel reuses gets a fresh stream. The main
/// thread's are not retired at `exit()` (no key destructor runs there; see `safety::PerThread`).
impl Drop for ThreadStreams {
    fn drop(&mut self) {
        let keys = std::mem::take(&mut *self.per_thread_used.borrow_mut());
        if keys.is_empty() {
            return;
        }
        let _ = crate::safety::catching(|| {
            let mut t = TABLE.get().write();
            for key in keys {
                if let Some(s) = t.live.remove(&key) {
                    t.retire_state(s);
                }
            }
            EPOCH.fetch_add(1, Ordering::AcqRel);
        });
    }
}

/// The context stream `id` belongs to: a stream handle's own (`cuStreamGetCtx`, asked once per
/// handle and remembered until the stream is destroyed), a default stream's the current
/// context (NULL, `CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD` name the current context's).
pub(crate) fn context_of(driver: &Driver, id: StreamId) -> usize {
    let StreamId::Handle(h) = id else {
        return driver.current_context();
    };
    if let Some(&c) = TABLE.get().read().handles.get(&h) {
        return c;
    }
    match driver.stream_context(h) {
        // Not a stream the driver knows (or it would not say): the current context, not
        // remembered (a program passing bogus handles must not grow the table).
        0 => driver.current_context(),
        c => {
            TABLE.get().write().handles.insert(h, c);
            c
        }
    }
}

/// The context stream `id` belongs to as far as it is known, for a report: [`context_of`]'s
/// answer, except 0 (unknown) for a handle never recorded whose context the driver does not
/// say. `cuStreamGetCtx` fails with the sticky error on a stream of a faulted context (the fake
/// driver), so falling back to the current context there judged a context of ANOTHER device:
/// `exact` on its healthy kernel.
pub(crate) fn context_if_known(driver: &Driver, id: StreamId) -> usize {
    let StreamId::Handle(h) = id else {
        return driver.current_context();
    };
    if let Some(&c) = TABLE.get().read().handles.get(&h) {
        return c;
    }
    driver.stream_context(h)
}

/// A stream's state as the hot path holds it for one op: borrowed from this thread's cache of
/// the stream it used last (no reference count touched), or owned when there was no cache to
/// keep it in (a hook after this thread's [`ThreadStreams`] was dropped).
pub(crate) enum StreamRef {
    /// Points at the state this thread's [`ThreadStreams::cache`] holds an `Arc` of. Valid until
    /// this thread's next [`lookup`] replaces that entry: no other thread touches the cache, and
    /// the hook that holds a `StreamRef` makes no other lookup (a nested hooked call goes
    /// straight to the driver, `interpose::hook`).
    Cached(std::ptr::NonNull<StreamState>),
    Owned(Arc<StreamState>),
}

impl std::ops::Deref for StreamRef {
    type Target = StreamState;
    #[inline]
    fn deref(&self) -> &StreamState {
        match self {
            // SAFETY: see the variant's doc: the cache's `Arc` keeps the state alive while this
            // `StreamRef` exists.
            StreamRef::Cached(p) => unsafe { p.as_ref() },
            StreamRef::Owned(a) => a,
        }
    }
}

/// The state of stream `id` in its own context ([`context_of`]), created on first use (with its
/// marker slot). Asks the driver for the current context only for default streams, and nothing
/// at all for a stream handle this thread used last. The answer stays valid until this thread's
/// next lookup ([`StreamRef`]).
pub(crate) fn lookup(driver: &Driver, id: StreamId) -> StreamRef {
    let current = match id {
        StreamId::Handle(_) => None,
        _ => Some(driver.current_context()),
    };
    cached(id, current).unwrap_or_else(|| lookup_uncached(driver, id, current))
}

/// The state of stream `id` in context `context`, the current one (`id` a default stream).
pub(crate) fn lookup_in(driver: &Driver, id: StreamId, context: usize) -> StreamRef {
    cached(id, Some(context)).unwrap_or_else(|| lookup_uncached(driver, id, Some(context)))
}

/// The hot path's lookup, which asks the driver nothing when this thread's last op was on the
/// same stream: the state and whether its context is still to be checked (`id` a default
/// stream found in the cache, whose context is the one current at this thread's last op; the
/// caller checks it with `cuCtxGetCurrent` after the real call, when the driver's own launch
/// path has just read the same thread-local state, and moves the op with [`lookup_in`] if the
/// program made another context current since). Measured on the H200 from a cold cache
/// (`cuda-samples/bench/ctxbench.c`): one `cuCtxGetCurrent` before the launch costs 275-460
/// ns, 9-10 ns back to back; in the PyTorch GPT step the change was within the noise (own time
/// over the real call's 0.194 against 0.197, docs/history.md, Performance, twelfth session).
pub(crate) fn lookup_unchecked(driver: &Driver, id: StreamId) -> (StreamRef, bool) {
    match cached(id, None) {
        Some(s) => (s, !matches!(id, StreamId::Handle(_))),
        None => (lookup(driver, id), false),
    }
}

/// This thread's cached state of stream `id` if the tables did not change since (and, with
/// `current`, if it is that context's).
#[inline]
fn cached(id: StreamId, current: Option<usize>) -> Option<StreamRef> {
    let epoch = EPOCH.load(Ordering::Acquire);
    MINE.with(|m| match &*m.cache.borrow() {
        Some(((ctx, k), e, s))
            if *k == id && *e == epoch && current.is_none_or(|cur| cur == *ctx) =>
        {
            Some(StreamRef::Cached(std::ptr::NonNull::from(&**s)))
        }
        _ => None,
    })
    .flatten()
}

/// [`lookup`] past the cache: finds or creates the state and caches it.
#[cold]
fn lookup_uncached(driver: &Driver, id: StreamId, current: Option<usize>) -> StreamRef {
    let epoch = EPOCH.load(Ordering::Acquire);
    let context = current.unwrap_or_else(|| context_of(driver, id));
    let key = (context, id);
    let found = TABLE.get().read().live.get(&key).cloned();
    let state = found.unwrap_or_else(|| {
        let created = Arc::new(StreamState {
            id,
            context,
            device: driver.context_device(context),
            ops: Mutex::new(Ring::default()),
            issued: AtomicU64::new(0),
            host_completed: AtomicU64::new(0),
            marker: if crate::config::markers_enabled() {
                marker_slot(driver, context)
            } else {
                None
            },
            unseen_after: AtomicU64::new(0),
            unseen_what: AtomicU64::new(0),
        });
        let state = TABLE
            .get()
            .write()
            .live
            .entry(key)
            .or_insert(created)
            .clone();
        if let StreamId::PerThread(_) = id {
            // No per-thread value left (a thread exiting): the stream stays until its context goes.
            let _ = MINE.with(|m| m.per_thread_used.borrow_mut().push(key));
        }
        state
    });
    let ptr = std::ptr::NonNull::from(&*state);
    match MINE.with(|m| *m.cache.borrow_mut() = Some((key, epoch, state.clone()))) {
        Some(()) => StreamRef::Cached(ptr),
        None => StreamRef::Owned(state),
    }
}

/// The state of stream `id` in its own context if it exists.
pub(crate) fn find(driver: &Driver, id: StreamId) -> Option<Arc<StreamState>> {
    let context = context_of(driver, id);
    TABLE.get().read().live.get(&(context, id)).cloned()
}

/// The live state of stream handle `id` if ops were recorded on it, asking the driver nothing
/// (its context as remembered when they were).
pub(crate) fn find_recorded(id: StreamId) -> Option<Arc<StreamState>> {
    let StreamId::Handle(h) = id else {
        return None;
    };
    let t = TABLE.get().read();
    let context = *t.handles.get(&h)?;
    t.live.get(&(context, id)).cloned()
}

/// A context of device `dev` that recorded ops (a live or a destroyed stream's), 0 when none:
/// where a call names a device, not a context ([`Call::context`](super::Call::context)), it
/// stands for that device in a verdict's scope (`blame::scope` judges a context's device).
pub(crate) fn a_context_on(dev: i32) -> usize {
    let t = TABLE.get().read();
    (t.live.values().chain(t.retired.iter()))
        .find(|s| s.device == dev)
        .map_or(0, |s| s.context)
}

/// Every live (not destroyed) stream known.
pub(crate) fn live() -> Vec<Arc<StreamState>> {
    TABLE.get().read().live.values().cloned().collect()
}

/// Every stream known, live ones first, then recently destroyed ones.
pub(crate) fn all() -> Vec<Arc<StreamState>> {
    let t = TABLE.get().read();
    t.live.values().chain(t.retired.iter()).cloned().collect()
}

/// Moves a destroyed stream to the retired list (forgotten if all its work completed).
///
/// Asks the driver nothing: this runs after `cuStreamDestroy` returned, when the handle is
/// dangling (`cuStreamGetCtx` on it crashed the H200's driver 580 inside cuBLASLt, which creates
/// and destroys streams it never launches on). A handle's context comes from what was
/// remembered when ops were recorded on it; a handle never recorded has nothing to retire.
pub(crate) fn retire(driver: &Driver, id: StreamId) {
    let mut t = TABLE.get().write();
    let context = match id {
        StreamId::Handle(h) => match t.handles.remove(&h) {
            Some(c) => c,
            None => {
                // Recorded under no remembered context: any live entry with this handle.
                let keys: Vec<(usize, StreamId)> =
                    t.live.keys().filter(|k| k.1 == id).copied().collect();
                for k in keys {
                    if let Some(s) = t.live.remove(&k) {
                        t.retire_state(s);
                    }
                }
                EPOCH.fetch_add(1, Ordering::AcqRel);
                return;
            }
        },
        _ => driver.current_context(),
    };
    if let Some(s) = t.live.remove(&(context, id)) {
        t.retire_state(s);
    }
    EPOCH.fetch_add(1, Ordering::AcqRel);
}

/// Forgets every stream of a destroyed (or reset) context, live or retired, with its stream
/// handles and its marker slab: the context's work is gone with it, and a new context that
/// reuses the handle starts afresh. The slab's host memory stays mapped (see
/// [`real::alloc_marker_memory`]): a report being built meanwhile still reads it safely.
pub(crate) fn forget_context(context: usize) {
    if context == 0 {
        return;
    }
    let mut t = TABLE.get().write();
    // Work of the context that may not have completed (the destroy waited for it, but only a
    // marker or a synchronization proves it did not fault): counted for its device.
    // (Every stream of a context is on the context's device.)
    let unfinished = {
        let mut of_context =
            (t.live.values().chain(t.retired.iter())).filter(|s| s.context == context);
        let device = of_context.clone().next().map_or_else(
            || t.dropped_unfinished.get(&context).map_or(-1, |d| d.0),
            |s| s.device,
        );
        (of_context.any(|s| s.may_be_unfinished()) || t.dropped_unfinished.contains_key(&context))
            .then_some(device)
    };
    if let Some(device) = unfinished {
        *t.destroyed_unfinished.entry(device).or_default() += 1;
    }
    t.live.retain(|k, _| k.0 != context);
    t.retired.retain(|s| s.context != context);
    t.handles.retain(|_, c| *c != context);
    t.dropped_unfinished.remove(&context);
    drop(t);
    MARKER_POOLS.get().lock().remove(&context);
    EPOCH.fetch_add(1, Ordering::AcqRel);
}

/// Forgets every context cudablame knows on device `dev` ([`forget_context`] each): after a
/// primary-context reset whose context handle could not be learned, so that no stream of a new
/// context (possibly with the old handle) keeps a marker slot in memory the reset unregistered.
pub(crate) fn forget_device(dev: i32) {
    let contexts: std::collections::HashSet<usize> = {
        let t = TABLE.get().read();
        t.live
            .values()
            .chain(t.retired.iter())
            .filter(|s| s.device == dev)
            .map(|s| s.context)
            // A context known only by its dropped streams' count.
            .chain(
                (t.dropped_unfinished.iter())
                    .filter(|(_, d)| d.0 == dev)
                    .map(|(&c, _)| c),
            )
            .collect()
    };
    for c in contexts {
        forget_context(c);
    }
}

/// How many destroyed streams of `context` were dropped from the retired list while they may
/// still have had unfinished work.
pub(crate) fn dropped_unfinished(context: usize) -> u64 {
    TABLE
        .get()
        .read()
        .dropped_unfinished
        .get(&context)
        .map_or(0, |d| d.1)
}

/// How many destroyed streams of the contexts of `device` (`None`: of any device) were dropped
/// from the retired list while they may still have had unfinished work; those of a context of
/// unknown device count for every device. A verdict on a device counts them whichever of its
/// contexts reports: a fault of that work stops the device, and the reporting context need not
/// be the dropped stream's nor one with a stream still kept.
pub(crate) fn dropped_unfinished_on(device: Option<i32>) -> u64 {
    let t = TABLE.get().read();
    t.dropped_unfinished
        .values()
        .filter(|&&(d, _)| device.is_none_or(|dev| d == dev || d < 0))
        .map(|&(_, n)| n)
        .sum()
}

/// How many contexts of `device` (`None`: of any device) were destroyed while their work may
/// not have completed ([`forget_context`]); those of unknown device count for every device.
pub(crate) fn destroyed_unfinished(device: Option<i32>) -> u64 {
    let t = TABLE.get().read();
    t.destroyed_unfinished
        .iter()
        .filter(|&(&d, _)| device.is_none_or(|dev| d == dev || d < 0))
        .map(|(_, &n)| n)
        .sum()
}

/// The count of [`destroyed_unfinished`] kept for `device` itself.
pub(crate) fn destroyed_unfinished_on(device: i32) -> u64 {
    TABLE
        .get()
        .read()
        .destroyed_unfinished
        .get(&device)
        .copied()
        .unwrap_or(0)
}

/// Forgets `n` of the destroyed contexts of `device` counted by [`destroyed_unfinished`]: a
/// successful context synchronization on that device that began after they were destroyed
/// proves their work did not fault (a fault would have stopped the device and failed it).
pub(crate) fn forget_destroyed_unfinished(device: i32, n: u64) {
    if n == 0 {
        return;
    }
    let mut t = TABLE.get().write();
    if let Some(left) = t.destroyed_unfinished.get_mut(&device) {
        *left = left.saturating_sub(n);
        if *left == 0 {
            t.destroyed_unfinished.remove(&device);
        }
    }
}

/// Forgets `n` of the destroyed streams of `context` counted by [`dropped_unfinished`]: a
/// successful context synchronization that began when they were counted proved their work
/// complete (`cuCtxSynchronize` waits for all the context's preceding work).
pub(crate) fn forget_dropped_unfinished(context: usize, n: u64) {
    if n == 0 {
        return;
    }
    let mut t = TABLE.get().write();
    if let Some((_, left)) = t.dropped_unfinished.get_mut(&context) {
        *left = left.saturating_sub(n);
        if *left == 0 {
            t.dropped_unfinished.remove(&context);
        }
    }
}

impl StreamState {
    /// Whether some op may not have completed (by marker or host synchronization).
    fn may_be_unfinished(&self) -> bool {
        let issued = self.issued.load(Ordering::Acquire);
        let done = self
            .marker
            .as_ref()
            .map_or(0, Marker::read)
            .max(self.host_completed.load(Ordering::Acquire));
        done < issued || self.unseen_after.load(Ordering::Acquire) > done
    }
}

/// lock: in a forked child another parent thread may have held one (`safety::Resettable`).
pub(crate) fn clear() {
    TABLE.reset_in_child();
    MARKER_POOLS.reset_in_child();
    // Thread-local caches hold the epoch they saw: a new epoch makes them look up again.
    EPOCH.fetch_add(1, Ordering::AcqRel);
    let _ = MINE.if_made(|m| {
        *m.cache.borrow_mut() = None;
        m.per_thread_used.borrow_mut().clear();
    });
}
