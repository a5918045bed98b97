//! The report-time copy of every stream's state (cold).

use super::markers::*;
use super::streams::*;
use super::OpRecord;
use std::sync::atomic::Ordering;

/// A consistent copy of one stream's state for blame and report.
#[derive(Clone)]
pub(crate) struct StreamView {
    pub(crate) id: StreamId,
    pub(crate) context: usize,
    pub(crate) device: i32,
    pub(crate) issued: u64,
    /// The progress marker's value (the last op it proves complete), if the stream has a slot.
    pub(crate) marker: Option<u64>,
    pub(crate) host_completed: u64,
    /// The ring, oldest first.
    pub(crate) ops: Vec<OpRecord>,
    /// The ring was busy (locked by another thread for longer than the report waits): `ops` is
    /// empty and not read.
    pub(crate) busy: bool,
    /// Unrecorded work was enqueued after op `unseen_after - 1` (0: none), by `unseen_what`.
    pub(crate) unseen_after: u64,
    pub(crate) unseen_what: Option<&'static str>,
}

impl StreamView {
    /// Highest sequence number known complete.
    pub(crate) fn completed(&self) -> u64 {
        self.marker
            .unwrap_or(0)
            .max(self.host_completed)
            .min(self.issued)
    }
}

/// How long [`snapshot`] waits for one ring's lock (another thread may be inside a launch that
/// blocks, or stopped by a debugger): past it the stream is reported "busy, not read".
pub(super) const RING_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Copies every stream's state: the ring under its lock (waiting [`RING_WAIT`] at most; its
/// stack copies unwound), the marker with a plain load.
pub(crate) fn snapshot() -> Vec<StreamView> {
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
