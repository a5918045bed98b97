//! Per-stream state: the ring of recent ops, the progress-marker slot, and the table that finds a
//! stream's state from `(context, stream)`.

use super::OpRecord;
use crate::cuda::{CUstream, CUDA_SUCCESS, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
use crate::real::{self, Driver};
use crate::safety::Resettable;
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

/// A bounded ring of the most recent ops of one stream, in sequence order.
pub struct Ring {
    ops: VecDeque<OpRecord>,
    last_seq: u64,
}

impl Ring {
    /// Appends `op` with the next sequence number (returned), dropping the oldest beyond `capacity`.
    pub fn push(&mut self, mut op: OpRecord, capacity: usize) -> u64 {
        self.last_seq += 1;
        op.seq = self.last_seq;
        if self.ops.len() >= capacity {
            self.ops.pop_front();
        }
        self.ops.push_back(op);
        self.last_seq
    }

    /// Notes that the newest op's progress marker was enqueued behind it.
    pub fn mark_newest(&mut self) {
        if let Some(op) = self.ops.back_mut() {
            op.marked = true;
        }
    }
}

/// A progress-marker slot: 8 bytes of pinned host memory mapped for the device. The stream
/// writes each op's sequence number into it after the op (`cuStreamWriteValue64`); the host reads
/// it with a plain load.
pub struct Marker {
    host: *const AtomicU64,
    device: u64,
}

// SAFETY: the slot is process-lifetime pinned memory, only read atomically on the host.
unsafe impl Send for Marker {}
unsafe impl Sync for Marker {}

impl Marker {
    /// The last sequence number the device wrote.
    pub fn read(&self) -> u64 {
        // SAFETY: the slot is never freed.
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
}

impl StreamState {
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
}

const RETIRED_KEPT: usize = 64;

/// Resettable: a forked child drops it without taking its lock (`safety::Resettable`).
static TABLE: Resettable<RwLock<Table>> = Resettable::new();
/// Bumped on every removal (and after a fork) so thread-local caches notice.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// A slab of marker slots: pinned host memory, its device address, the next free slot.
struct Slab {
    host: usize,
    device: u64,
    next: usize,
}

/// The current marker slab of each context.
static MARKER_POOLS: Resettable<Mutex<HashMap<usize, Slab>>> = Resettable::new();
const SLOTS_PER_SLAB: usize = 512;

thread_local! {
    static CACHE: RefCell<Option<(Key, u64, Arc<StreamState>)>> = const { RefCell::new(None) };
}

/// The state of `(context, stream)`, created on first use (with its marker slot).
pub fn lookup(driver: &Driver, context: usize, id: StreamId) -> Arc<StreamState> {
    let key = (context, id);
    let epoch = EPOCH.load(Ordering::Acquire);
    if let Some(s) = CACHE.with(|c| match &*c.borrow() {
        Some((k, e, s)) if *k == key && *e == epoch => Some(s.clone()),
        _ => None,
    }) {
        return s;
    }
    let found = TABLE.get().read().live.get(&key).cloned();
    let state = found.unwrap_or_else(|| {
        let created = Arc::new(StreamState {
            id,
            context,
            device: driver.current_device(),
            ops: Mutex::new(Ring {
                ops: VecDeque::new(),
                last_seq: 0,
            }),
            issued: AtomicU64::new(0),
            host_completed: AtomicU64::new(0),
            marker: if crate::config::markers_enabled() {
                marker_slot(driver, context)
            } else {
                None
            },
        });
        TABLE
            .get()
            .write()
            .live
            .entry(key)
            .or_insert(created)
            .clone()
    });
    CACHE.with(|c| *c.borrow_mut() = Some((key, epoch, state.clone())));
    state
}

/// The state of `(context, stream)` if it exists.
pub fn find(context: usize, id: StreamId) -> Option<Arc<StreamState>> {
    TABLE.get().read().live.get(&(context, id)).cloned()
}

/// Every stream known, live ones first, then recently destroyed ones.
pub fn all() -> Vec<Arc<StreamState>> {
    let t = TABLE.get().read();
    t.live.values().chain(t.retired.iter()).cloned().collect()
}

/// Moves a destroyed stream to the retired list.
pub fn retire(context: usize, id: StreamId) {
    let mut t = TABLE.get().write();
    if let Some(s) = t.live.remove(&(context, id)) {
        if t.retired.len() >= RETIRED_KEPT {
            t.retired.pop_front();
        }
        t.retired.push_back(s);
        EPOCH.fetch_add(1, Ordering::AcqRel);
    }
}

/// Forgets everything (a forked child must not use its parent's contexts or slots). Takes no
/// lock: in a forked child another parent thread may have held one (`safety::Resettable`).
pub fn clear() {
    TABLE.reset_in_child();
    MARKER_POOLS.reset_in_child();
    // Thread-local caches hold the epoch they saw: a new epoch makes them look up again.
    EPOCH.fetch_add(1, Ordering::AcqRel);
    CACHE.with(|c| *c.borrow_mut() = None);
}

fn marker_slot(driver: &Driver, context: usize) -> Option<Marker> {
    let mut pools = MARKER_POOLS.get().lock();
    let slab = pools.entry(context).or_insert(Slab {
        host: 0,
        device: 0,
        next: SLOTS_PER_SLAB,
    });
    if slab.next >= SLOTS_PER_SLAB {
        let (host, device) = real::alloc_marker_memory(driver, SLOTS_PER_SLAB * 8)?;
        *slab = Slab {
            host: host as usize,
            device,
            next: 0,
        };
    }
    let i = slab.next;
    slab.next += 1;
    Some(Marker {
        host: (slab.host + i * 8) as *const AtomicU64,
        device: slab.device + (i * 8) as u64,
    })
}

/// Copies every stream's state: the ring under its lock, the marker with a plain load.
pub fn snapshot() -> Vec<StreamView> {
    all()
        .into_iter()
        .map(|s| {
            let ring = s.ops.lock();
            let ops: Vec<OpRecord> = ring.ops.iter().copied().collect();
            let issued = ring.last_seq;
            drop(ring);
            StreamView {
                id: s.id,
                context: s.context,
                device: s.device,
                issued,
                marker: s.marker.as_ref().map(Marker::read),
                host_completed: s.host_completed.load(Ordering::Acquire),
                ops,
            }
        })
        .collect()
}
