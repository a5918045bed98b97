//! Progress-marker slots: pinned host memory the device writes each op's sequence number into,
//! handed out from one slab per context.

use super::streams::*;
use crate::real::{self, Driver};
use crate::safety::lock::Mutex;
use crate::safety::Resettable;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A progress-marker slot: 8 bytes of pinned host memory mapped for the device. The stream
/// writes each op's sequence number into it after the op (`cuStreamWriteValue64`); the host reads
/// it with a plain load.
pub(crate) struct Marker {
    host: *const AtomicU64,
    pub(super) device: u64,
}

// SAFETY: the slot lies in memory cudablame mapped itself and never unmaps (see
// `real::alloc_marker_memory`), only read and written atomically on the host.
unsafe impl Send for Marker {}
// SAFETY: as for `Send`: the host side is only touched through `AtomicU64` operations.
unsafe impl Sync for Marker {}

impl Marker {
    /// The last sequence number the device wrote.
    pub(crate) fn read(&self) -> u64 {
        // SAFETY: the slot's memory is never unmapped (`real::alloc_marker_memory`).
        unsafe { (*self.host).load(Ordering::Acquire) }
    }
}

/// A slab of marker slots: pinned host memory, its device address, the next free slot, and
/// slots given back by streams that were forgotten with all their work complete.
pub(super) struct Slab {
    host: usize,
    device: u64,
    next: usize,
    free: Vec<(usize, u64)>,
}

/// The current marker slab of each context.
pub(super) static MARKER_POOLS: Resettable<Mutex<HashMap<usize, Slab>>> = Resettable::new();
pub(super) const SLOTS_PER_SLAB: usize = 512;

/// Gives a forgotten stream's marker slot back to its context's slab: all its work completed, so
/// the device writes the slot no more.
pub(super) fn release_slot(s: &StreamState) {
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
pub(super) fn marker_slot(driver: &Driver, context: usize) -> Option<Marker> {
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
        let (host, device) = real::alloc_marker_memory(driver, context, SLOTS_PER_SLAB * 8)?;
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
