//! Per-stream state: the ring of recent ops with their stack copies, the progress-marker slot,
//! and the table that finds a stream's state from `(context, stream)`.
//!
//! Both the ring and the stack copies are bounded, but ops not proven complete are held beyond
//! them (see [`Ring`]): the op blame will name if the context dies is never dropped, however far
//! the host runs ahead of the GPU.

use super::OpRecord;
use crate::cuda::{CUstream, CUDA_SUCCESS, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
use crate::real::{self, Driver};
use crate::safety::Resettable;
use crate::stack::copy::StackCopy;
use crate::stack::{EntryRegs, NativeStack, StackRef};
use parking_lot::{Mutex, RwLock};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which stream an op went to. Default streams are told apart by the API variant: a NULL handle
/// is the legacy stream in plain variants and the per-thread stream in `_ptsz`/`_ptds` ones
/// (`cuda.h`, `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamId {
    Legacy,
    /// The per-thread default stream of this OS thread.
    PerThread(u32),
    Handle(usize),
}

impl StreamId {
    /// Resolves a raw handle as passed to a variant.
    pub fn resolve(raw: usize, per_thread_variant: bool, thread: u32) -> StreamId {
        match raw {
            0 if per_thread_variant => StreamId::PerThread(thread),
            0 | CU_STREAM_LEGACY => StreamId::Legacy,
            CU_STREAM_PER_THREAD => StreamId::PerThread(thread),
            h => StreamId::Handle(h),
        }
    }

    /// The handle that names this stream in plain (non-`_ptsz`) calls made from the thread that
    /// owns it.
    pub fn handle(self) -> usize {
        match self {
            StreamId::Legacy => CU_STREAM_LEGACY,
            StreamId::PerThread(_) => CU_STREAM_PER_THREAD,
            StreamId::Handle(h) => h,
        }
    }

    /// How the report names the stream: `0x…`, `legacy`, or `per-thread(tid)`.
    pub fn describe(self) -> String {
        match self {
            StreamId::Legacy => "legacy".into(),
            StreamId::PerThread(t) => format!("per-thread({t})"),
            StreamId::Handle(h) => format!("{h:#x}"),
        }
    }
}

/// Stack copies kept per stream, for the newest ops (nearly every op a report names is among
/// them or is held, see [`Ring`]).
pub const STACK_COPIES: usize = 32;
/// Ops, and unwound stacks, held per stream after they left the ring or the copies without
/// being proven complete (the oldest are kept, newer ones dropped when full).
pub const HELD_OPS: usize = 4096;
pub const HELD_STACKS: usize = 1024;

/// A bounded ring of the most recent ops of one stream, in sequence order, with the stack copies
/// of the newest of them.
///
/// An op that leaves the ring, or whose stack copy is reused, while not proven complete (the GPU
/// is far behind the host, or the context died) is held until a progress marker or a successful
/// synchronization proves it complete: its record in `held_ops`, its stack unwound into
/// `held_stacks` (an unwind costs more than a copy, but only while the GPU is far behind, when
/// the host has time to spare). Both keep the oldest unproven ops when full: the op that never
/// completes, the culprit, is always the oldest of them, however far the host runs ahead.
#[derive(Default)]
pub struct Ring {
    ops: VecDeque<OpRecord>,
    last_seq: u64,
    /// The highest sequence number known complete when last looked (marker or synchronization).
    known_completed: u64,
    held_ops: VecDeque<OpRecord>,
    held_stacks: VecDeque<(u64, NativeStack)>,
    /// Round robin; each copy holds the op its `seq` names.
    copies: Vec<StackCopy>,
    next_copy: usize,
}

impl Ring {
    /// Notes that the newest op's progress marker was enqueued behind it.
    pub fn mark_newest(&mut self) {
        if let Some(op) = self.ops.back_mut() {
            op.marked = true;
        }
    }

    /// Whether op `seq` is not proven complete; reads the marker (`completed`) only when what
    /// is known does not settle it, and forgets held ops that are proven by now.
    fn unproven(&mut self, seq: u64, completed: &dyn Fn() -> u64) -> bool {
        if seq <= self.known_completed {
            return false;
        }
        let known = self.known_completed.max(completed());
        self.known_completed = known;
        while self.held_ops.front().is_some_and(|o| o.seq <= known) {
            self.held_ops.pop_front();
        }
        while self.held_stacks.front().is_some_and(|h| h.0 <= known) {
            self.held_stacks.pop_front();
        }
        seq > known
    }

    /// Appends `op` with the next sequence number (returned), keeping at most `capacity` ops and
    /// [`STACK_COPIES`] stack copies besides the held ones. With `copy` (the entry point's
    /// registers and the bytes to copy), the launching thread's stack is copied for the op.
    /// `completed`: the highest sequence number now proven complete.
    pub fn push(
        &mut self,
        mut op: OpRecord,
        capacity: usize,
        copy: Option<(&EntryRegs, usize)>,
        completed: &dyn Fn() -> u64,
    ) -> u64 {
        self.last_seq += 1;
        let seq = self.last_seq;
        op.seq = seq;
        if let Some((regs, bytes)) = copy {
            let copying = super::cost::start();
            self.copy_stack(seq, regs, bytes, completed);
            super::cost::add(super::cost::Phase::Stack, copying);
            op.stack = StackRef::Copied;
        }
        if self.ops.len() >= capacity {
            if let Some(old) = self.ops.pop_front() {
                // A synchronous op completed before it was recorded: never a candidate.
                if !old.synchronous
                    && self.unproven(old.seq, completed)
                    && self.held_ops.len() < HELD_OPS
                {
                    self.held_ops.push_back(old);
                }
            }
        }
        self.ops.push_back(op);
        seq
    }

    fn copy_stack(
        &mut self,
        seq: u64,
        regs: &EntryRegs,
        bytes: usize,
        completed: &dyn Fn() -> u64,
    ) {
        if self.copies.len() < STACK_COPIES {
            self.copies.push(StackCopy::new(bytes));
            self.next_copy = self.copies.len() % STACK_COPIES;
            if let Some(c) = self.copies.last_mut() {
                c.fill(seq, regs);
            }
            return;
        }
        let i = self.next_copy;
        self.next_copy = (i + 1) % STACK_COPIES;
        let leaving = self.copies[i].seq;
        // `unproven` first: it also forgets held stacks proven by now, making room.
        if leaving != 0 && self.unproven(leaving, completed) && self.held_stacks.len() < HELD_STACKS
        {
            let depth = crate::config::get().stack_depth;
            self.held_stacks
                .push_back((leaving, self.copies[i].unwind(depth)));
        }
        self.copies[i].fill(seq, regs);
    }

    /// The ops kept, oldest first: the held ones older than the ring, then the ring. Stacks are
    /// unwound (`depth` frames) and kept ([`crate::stack::keep`]); an op whose copy was reused
    /// without being held has none.
    fn view_ops(&self, depth: usize) -> Vec<OpRecord> {
        let front = self.ops.front().map_or(u64::MAX, |o| o.seq);
        self.held_ops
            .iter()
            .filter(|o| o.seq < front)
            .chain(self.ops.iter())
            .map(|&(mut o)| {
                if o.stack == StackRef::Copied {
                    let copy = self.copies.iter().find(|c| c.seq == o.seq);
                    let held = self.held_stacks.iter().find(|h| h.0 == o.seq);
                    o.stack = match (copy, held) {
                        (Some(c), _) => crate::stack::keep(c.unwind(depth)),
                        (None, Some(h)) => crate::stack::keep(h.1),
                        (None, None) => StackRef::None,
                    };
                }
                o
            })
            .collect()
    }
}

/// A progress-marker slot: 8 bytes of pinned host memory mapped for the device. The stream
/// writes each op's sequence number into it after the op (`cuStreamWriteValue64`); the host reads
/// it with a plain load.
pub struct Marker {
    host: *const AtomicU64,
    device: u64,
}

// SAFETY: the slot lies in memory cudablame mapped itself and never unmaps (see
// `real::alloc_marker_memory`), only read and written atomically on the host.
unsafe impl Send for Marker {}
// SAFETY: as for `Send`: the host side is only touched through `AtomicU64` operations.
unsafe impl Sync for Marker {}

impl Marker {
    /// The last sequence number the device wrote.
    pub fn read(&self) -> u64 {
        // SAFETY: the slot's memory is never unmapped (`real::alloc_marker_memory`).
        unsafe { (*self.host).load(Ordering::Acquire) }
    }
}

/// Everything cudablame knows of one stream.
pub struct StreamState {
    pub id: StreamId,
    pub context: usize,
    pub device: i32,
    pub ops: Mutex<Ring>,
    /// Sequence number of the last op issued (mirror of the ring's, readable without the lock).
    pub issued: AtomicU64,
    /// Highest sequence number proven complete by a successful synchronization on the host.
    pub host_completed: AtomicU64,
    pub marker: Option<Marker>,
    /// Work cudablame could not record went onto this stream (an entry point it does not record:
    /// `cuLaunchHostFunc`, `cuMemsetD2D*`, ...): the sequence number of the last op issued before
    /// it, plus one (0: never). The report cannot call a verdict on this stream exact while that
    /// work may be unfinished.
    pub unseen_after: AtomicU64,
    /// The name of the last such entry point (an index into `EntryPoint::ALL`, plus one; 0: none).
    pub unseen_what: AtomicU64,
}

impl StreamState {
    /// The highest sequence number proven complete now: by the progress marker or by a
    /// successful host synchronization.
    pub fn completed_now(&self) -> u64 {
        let marker = self.marker.as_ref().map_or(0, Marker::read);
        marker.max(self.host_completed.load(Ordering::Acquire))
    }

    /// Notes unrecorded work enqueued now (after op `issued`) by `what`.
    pub fn note_unseen(&self, what: crate::cuda::entry_points::EntryPoint) {
        self.unseen_after
            .store(self.issued.load(Ordering::Acquire) + 1, Ordering::Release);
        self.unseen_what.store(what as u64 + 1, Ordering::Release);
    }

    /// Enqueues the marker write for op `seq` (caller holds the ring lock, right after the op);
    /// returns whether the driver took it.
    pub fn write_marker(&self, driver: &Driver, seq: u64) -> bool {
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

/// A consistent copy of one stream's state for blame and report.
#[derive(Clone)]
pub struct StreamView {
    pub id: StreamId,
    pub context: usize,
    pub device: i32,
    pub issued: u64,
    /// The progress marker's value (the last op it proves complete), if the stream has a slot.
    pub marker: Option<u64>,
    pub host_completed: u64,
    /// The ring, oldest first.
    pub ops: Vec<OpRecord>,
    /// The ring was busy (locked by another thread for longer than the report waits): `ops` is
    /// empty and not read.
    pub busy: bool,
    /// Unrecorded work was enqueued after op `unseen_after - 1` (0: none), by `unseen_what`.
    pub unseen_after: u64,
    pub unseen_what: Option<&'static str>,
}

impl StreamView {
    /// Highest sequence number known complete.
    pub fn completed(&self) -> u64 {
        self.marker
            .unwrap_or(0)
            .max(self.host_completed)
            .min(self.issued)
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
    /// Per context: destroyed streams dropped from the retired list while they may still have
    /// had unfinished work (their work can hide the culprit).
    dropped_unfinished: HashMap<usize, u64>,
}

impl Table {
    /// Moves `s` to the retired list if it may still have unfinished work (else forgets it),
    /// dropping the oldest retired stream beyond [`RETIRED_KEPT`].
    fn retire_state(&mut self, s: Arc<StreamState>) {
        if !s.may_be_unfinished() {
            release_slot(&s);
            return;
        }
        if self.retired.len() >= RETIRED_KEPT {
            if let Some(old) = self.retired.pop_front() {
                if old.may_be_unfinished() {
                    *self.dropped_unfinished.entry(old.context).or_default() += 1;
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
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// A slab of marker slots: pinned host memory, its device address, the next free slot, and
/// slots given back by streams that were forgotten with all their work complete.
struct Slab {
    host: usize,
    device: u64,
    next: usize,
    free: Vec<(usize, u64)>,
}

/// The current marker slab of each context.
static MARKER_POOLS: Resettable<Mutex<HashMap<usize, Slab>>> = Resettable::new();
const SLOTS_PER_SLAB: usize = 512;

thread_local! {
    static CACHE: RefCell<Option<(Key, u64, Arc<StreamState>)>> = const { RefCell::new(None) };
    /// Per-thread default streams this thread used: forgotten when the thread exits.
    static PER_THREAD_USED: PerThreadStreams = const { PerThreadStreams(RefCell::new(Vec::new())) };
}

/// The keys of the per-thread default streams of one thread. Its thread-local destructor retires
/// them when the thread exits. The driver API documentation ("Stream synchronization behavior")
/// describes the per-thread default stream as an implicit stream local to both the thread and
/// the context, and says nothing of what becomes of it, or of work queued on it, when the thread
/// exits. cudablame relies on nothing there: work still possibly unfinished is kept like a
/// destroyed stream's (on the bounded retired list, still blamable), a stream whose work all
/// completed is forgotten, and a thread id the kernel reuses gets a fresh stream.
struct PerThreadStreams(RefCell<Vec<Key>>);

impl Drop for PerThreadStreams {
    fn drop(&mut self) {
        let keys = std::mem::take(&mut *self.0.borrow_mut());
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
pub fn context_of(driver: &Driver, id: StreamId) -> usize {
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

/// The state of stream `id` in its own context ([`context_of`]), created on first use (with its
/// marker slot). The hot path asks the driver for the current context only for default streams,
/// and nothing at all for a stream handle this thread used last.
pub fn lookup(driver: &Driver, id: StreamId) -> Arc<StreamState> {
    let epoch = EPOCH.load(Ordering::Acquire);
    let current = match id {
        StreamId::Handle(_) => None,
        _ => Some(driver.current_context()),
    };
    let cached = CACHE
        .try_with(|c| match &*c.borrow() {
            Some(((ctx, k), e, s))
                if *k == id && *e == epoch && current.is_none_or(|cur| cur == *ctx) =>
            {
                Some(s.clone())
            }
            _ => None,
        })
        .ok()
        .flatten();
    if let Some(s) = cached {
        return s;
    }
    let context = current.unwrap_or_else(|| context_of(driver, id));
    let key = (context, id);
    let found = TABLE.get().read().live.get(&key).cloned();
    let state = found.unwrap_or_else(|| {
        let created = Arc::new(StreamState {
            id,
            context,
            device: driver.current_device(),
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
            // No thread-local left (a thread exiting): the stream stays until its context goes.
            let _ = PER_THREAD_USED.try_with(|p| p.0.borrow_mut().push(key));
        }
        state
    });
    let _ = CACHE.try_with(|c| *c.borrow_mut() = Some((key, epoch, state.clone())));
    state
}

/// The state of stream `id` in its own context if it exists.
pub fn find(driver: &Driver, id: StreamId) -> Option<Arc<StreamState>> {
    let context = context_of(driver, id);
    TABLE.get().read().live.get(&(context, id)).cloned()
}

/// Every stream known, live ones first, then recently destroyed ones.
pub fn all() -> Vec<Arc<StreamState>> {
    let t = TABLE.get().read();
    t.live.values().chain(t.retired.iter()).cloned().collect()
}

/// Moves a destroyed stream to the retired list (forgotten if all its work completed).
///
/// Asks the driver nothing: this runs after `cuStreamDestroy` returned, when the handle is
/// dangling (`cuStreamGetCtx` on it crashed the H200's driver 580 inside cuBLASLt, which creates
/// and destroys streams it never launches on). A handle's context comes from what was
/// remembered when ops were recorded on it; a handle never recorded has nothing to retire.
pub fn retire(driver: &Driver, id: StreamId) {
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
pub fn forget_context(context: usize) {
    if context == 0 {
        return;
    }
    let mut t = TABLE.get().write();
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
pub fn forget_device(dev: i32) {
    let contexts: std::collections::HashSet<usize> = {
        let t = TABLE.get().read();
        t.live
            .values()
            .chain(t.retired.iter())
            .filter(|s| s.device == dev)
            .map(|s| s.context)
            .collect()
    };
    for c in contexts {
        forget_context(c);
    }
}

/// How many destroyed streams of `context` were dropped from the retired list while they may
/// still have had unfinished work.
pub fn dropped_unfinished(context: usize) -> u64 {
    TABLE
        .get()
        .read()
        .dropped_unfinished
        .get(&context)
        .copied()
        .unwrap_or(0)
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

/// Gives a forgotten stream's marker slot back to its context's slab: all its work completed, so
/// the device writes the slot no more.
fn release_slot(s: &StreamState) {
    if let Some(m) = &s.marker {
        if let Some(slab) = MARKER_POOLS.get().lock().get_mut(&s.context) {
            // Only slots of the slab's current memory come back (older slabs are never reused).
            let host = m.host as usize;
            if host >= slab.host && host < slab.host + SLOTS_PER_SLAB * 8 {
                // SAFETY: the slot is ours and no device write is pending.
                unsafe { (*m.host).store(0, Ordering::Release) };
                slab.free.push((host, m.device));
            }
        }
    }
}

/// Forgets everything (a forked child must not use its parent's contexts or slots). Takes no
/// lock: in a forked child another parent thread may have held one (`safety::Resettable`).
pub fn clear() {
    TABLE.reset_in_child();
    MARKER_POOLS.reset_in_child();
    // Thread-local caches hold the epoch they saw: a new epoch makes them look up again.
    EPOCH.fetch_add(1, Ordering::AcqRel);
    let _ = CACHE.try_with(|c| *c.borrow_mut() = None);
    let _ = PER_THREAD_USED.try_with(|p| p.0.borrow_mut().clear());
}

fn marker_slot(driver: &Driver, context: usize) -> Option<Marker> {
    let mut pools = MARKER_POOLS.get().lock();
    let slab = pools.entry(context).or_insert(Slab {
        host: 0,
        device: 0,
        next: SLOTS_PER_SLAB,
        free: Vec::new(),
    });
    if let Some((host, device)) = slab.free.pop() {
        return Some(Marker {
            host: host as *const AtomicU64,
            device,
        });
    }
    if slab.next >= SLOTS_PER_SLAB {
        let (host, device) = real::alloc_marker_memory(driver, SLOTS_PER_SLAB * 8)?;
        *slab = Slab {
            host: host as usize,
            device,
            next: 0,
            free: Vec::new(),
        };
    }
    let i = slab.next;
    slab.next += 1;
    Some(Marker {
        host: (slab.host + i * 8) as *const AtomicU64,
        device: slab.device + (i * 8) as u64,
    })
}

/// How long [`snapshot`] waits for one ring's lock (another thread may be inside a launch that
/// blocks, or stopped by a debugger): past it the stream is reported "busy, not read".
const RING_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Copies every stream's state: the ring under its lock (waiting [`RING_WAIT`] at most; its
/// stack copies unwound), the marker with a plain load.
pub fn snapshot() -> Vec<StreamView> {
    all()
        .into_iter()
        .map(|s| {
            let (ops, issued, busy) = match s.ops.try_lock_for(RING_WAIT) {
                Some(ring) => (
                    ring.view_ops(crate::config::get().stack_depth),
                    ring.last_seq,
                    false,
                ),
                None => (Vec::new(), s.issued.load(Ordering::Acquire), true),
            };
            let unseen_what = match s.unseen_what.load(Ordering::Acquire) {
                0 => None,
                n => crate::cuda::entry_points::EntryPoint::ALL
                    .get(n as usize - 1)
                    .map(|ep| ep.name()),
            };
            StreamView {
                id: s.id,
                context: s.context,
                device: s.device,
                issued,
                marker: s.marker.as_ref().map(Marker::read),
                host_completed: s.host_completed.load(Ordering::Acquire),
                ops,
                busy,
                unseen_after: s.unseen_after.load(Ordering::Acquire),
                unseen_what,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::entry_points::EntryPoint;
    use crate::record::{Launch, OpKind};
    use std::cell::Cell;

    fn op() -> OpRecord {
        OpRecord {
            seq: 0,
            launch: Launch {
                kind: OpKind::Kernel,
                handle: 1,
                grid: [1; 3],
                block: [1; 3],
                shared_mem_bytes: 0,
                bytes: 0,
                stream: 0,
            },
            entry_point: EntryPoint::cuLaunchKernel,
            stream: StreamId::Legacy,
            context: 1,
            device: 0,
            thread: 1,
            time_ns: 0,
            synchronous: false,
            marked: true,
            stack: StackRef::None,
            python: crate::stack::python::PythonStack::EMPTY,
        }
    }

    #[test]
    fn a_slow_healthy_op_does_not_cost_the_later_culprit() {
        // #2 runs long while 300 ops queue behind it (ring of 16); then #2 completes and #151
        // faults (the marker stops at #150); 5,000 more launches follow.
        let mut ring = Ring::default();
        let completed = Cell::new(1u64);
        let done = || completed.get();
        for _ in 0..300 {
            ring.push(op(), 16, None, &done);
        }
        completed.set(150);
        for _ in 0..5000 {
            ring.push(op(), 16, None, &done);
        }
        let ops = ring.view_ops(16);
        let first_unproven = ops.iter().find(|o| o.seq > completed.get()).map(|o| o.seq);
        assert_eq!(first_unproven, Some(151));
        // Held ops are bounded and proven ones were forgotten.
        assert!(ring.held_ops.len() <= HELD_OPS);
        assert!(ring.held_ops.front().unwrap().seq > 150);
        assert_eq!(ops.last().unwrap().seq, 5300);
    }

    #[test]
    fn proven_ops_are_not_held() {
        let mut ring = Ring::default();
        let done = || u64::MAX;
        for _ in 0..1000 {
            ring.push(op(), 16, None, &done);
        }
        assert!(ring.held_ops.is_empty());
        assert_eq!(ring.view_ops(16).len(), 16);
    }
}
