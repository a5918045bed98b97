//! The ring of one stream: its recent ops with their stack copies, and the unproven ops held
//! beyond it.
//!
//! Both the ring and the stack copies are bounded, but ops not proven complete are held beyond
//! them (see [`Ring`]): the op blame will name if the context dies is never dropped, however far
//! the host runs ahead of the GPU.
//!
//! Held stacks stay copies: a copy whose op leaves the newest [`STACK_COPIES`] unproven is moved
//! into the held list and its slot takes a spare buffer (a pointer swap), so the launching thread
//! never unwinds while the GPU runs behind. Measured before (H200, launch loop behind a blocked
//! stream): 44,100 of 51,372 launches unwound a held stack on the launching thread; in that C
//! program an unwind is a few frames (its stack phase was 293-482 ns per launch with them,
//! 242-448 without), through libtorch 1.2 to 4.2 µs each. Held copies are bounded per stream
//! ([`HELD_COPIES`]) and process-wide ([`HELD_COPY_BYTES`]); past those a leaving copy is unwound
//! as before (into [`HELD_STACKS`] unwound stacks), the rare case of many streams far behind.

use super::OpRecord;
use crate::stack::copy::StackCopy;
use crate::stack::{EntryRegs, NativeStack, StackRef};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Stack copies kept per stream, for the newest ops (nearly every op a report names is among
/// them or is held, see [`Ring`]).
pub(crate) const STACK_COPIES: usize = 32;
/// Ops, and unwound stacks, held per stream after they left the ring or the copies without
/// being proven complete (the oldest are kept, newer ones dropped when full).
pub(crate) const HELD_OPS: usize = 4096;
pub(crate) const HELD_STACKS: usize = 1024;
/// Stack copies held per stream at most (their ops left the newest [`STACK_COPIES`] unproven):
/// the driver's queue holds about 1,021 launches per stream (H200, driver 580), so a stream
/// blocked behind a long kernel fits.
pub(crate) const HELD_COPIES: usize = 1024;
/// Bytes of held stack copies process-wide at most (16 MiB: 2,048 copies of the default 8 KiB).
pub(crate) const HELD_COPY_BYTES: usize = 16 << 20;

/// Bytes of stack-copy buffers allocated beyond each stream's [`STACK_COPIES`], process-wide
/// (held or spare), counted against [`HELD_COPY_BYTES`].
static EXTRA_COPY_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Forgets the count of extra stack-copy buffers (a forked child: its parent's rings are
/// forgotten, not freed, see `record::forget_after_fork`).
pub(crate) fn forget_after_fork() {
    EXTRA_COPY_BYTES.store(0, Ordering::Relaxed);
}

/// A bounded ring of the most recent ops of one stream, in sequence order, with the stack copies
/// of the newest of them.
///
/// An op that leaves the ring, or whose stack copy is reused, while not proven complete (the GPU
/// is far behind the host, or the context died) is held until a progress marker or a successful
/// synchronization proves it complete: its record in `held_ops`, its stack copy moved into
/// `held_copies` (a spare buffer takes its slot), or, past the held copies' bounds, unwound into
/// `held_stacks`. All keep the oldest unproven ops when full: the op that never completes, the
/// culprit, is always the oldest of them, however far the host runs ahead.
///
/// Laid out in declaration order (`repr(C)`), what every op touches first (its 120 bytes span two
/// cache lines), then the held lists: the hot path's cost is mostly cache misses on memory the
/// program's own work evicted between two launches, one per distinct line.
#[derive(Default)]
#[repr(C)]
pub(crate) struct Ring {
    pub(super) last_seq: u64,
    /// The highest sequence number known complete when last looked (marker or synchronization).
    known_completed: u64,
    next_copy: usize,
    /// The stream's markers so far, for the marker policy (`record::policy`).
    pub(crate) marks: super::policy::Marks,
    /// The ring itself, in place: a new op overwrites the oldest ([`push`](Self::push)), so each
    /// op's record is written once (a `VecDeque` moved every record out and in again).
    ops: Vec<OpRecord>,
    /// The index in `ops` of the oldest op (0 until the ring is full).
    oldest: usize,
    /// Round robin; each copy holds the op its `seq` names.
    copies: Vec<StackCopy>,
    held_ops: VecDeque<OpRecord>,
    /// Copies of unproven ops that left `copies`, oldest first (each names its op by `seq`).
    held_copies: VecDeque<StackCopy>,
    held_stacks: VecDeque<(u64, NativeStack)>,
    /// Buffers of held copies whose ops were proven since, ready for reuse.
    spare_copies: Vec<StackCopy>,
}

impl Drop for Ring {
    fn drop(&mut self) {
        let bytes = self.extra_bytes();
        let _ = EXTRA_COPY_BYTES.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            Some(n.saturating_sub(bytes))
        });
    }
}

impl Ring {
    /// Notes that the newest op's progress marker was enqueued behind it.
    pub(crate) fn mark_newest(&mut self) {
        let newest = (self.oldest + self.ops.len()).wrapping_sub(1) % self.ops.len().max(1);
        if let Some(op) = self.ops.get_mut(newest) {
            op.marked = true;
        }
    }

    /// The ops of the ring, oldest first.
    fn ring_ops(&self) -> impl Iterator<Item = &OpRecord> {
        let (newer, older) = self.ops.split_at(self.oldest);
        older.iter().chain(newer)
    }

    /// Whether op `seq` is not proven complete; reads the marker (`completed`) only when what
    /// is known does not settle it, and forgets held ops that are proven by now. Inline: what
    /// is known settles most calls (every launch asks about the op and copy it displaces).
    #[inline]
    fn unproven(&mut self, seq: u64, completed: &dyn Fn() -> u64) -> bool {
        seq > self.known_completed && self.unproven_now(seq, completed)
    }

    /// [`unproven`](Self::unproven) when what is known does not settle it: reads the marker.
    #[inline(never)]
    fn unproven_now(&mut self, seq: u64, completed: &dyn Fn() -> u64) -> bool {
        let known = self.known_completed.max(completed());
        self.known_completed = known;
        while self.held_ops.front().is_some_and(|o| o.seq <= known) {
            self.held_ops.pop_front();
        }
        while self.held_stacks.front().is_some_and(|h| h.0 <= known) {
            self.held_stacks.pop_front();
        }
        while self.held_copies.front().is_some_and(|c| c.seq <= known) {
            if let Some(c) = self.held_copies.pop_front() {
                self.spare_copies.push(c);
            }
        }
        seq > known
    }

    /// Bytes of this ring's buffers beyond its [`STACK_COPIES`] (held or spare), as counted in
    /// [`EXTRA_COPY_BYTES`].
    fn extra_bytes(&self) -> usize {
        (self.held_copies.iter().chain(&self.spare_copies))
            .map(StackCopy::capacity)
            .sum()
    }

    /// A buffer to hold a leaving copy's place: a spare one, else a new one of `bytes` while the
    /// held copies' bounds allow (the only allocation after the first [`STACK_COPIES`] ops, and
    /// only while the stream runs further behind than it ever did).
    fn spare_copy(&mut self, bytes: usize) -> Option<StackCopy> {
        if self.held_copies.len() >= HELD_COPIES {
            return None;
        }
        if let Some(c) = self.spare_copies.pop() {
            return Some(c);
        }
        let grown = EXTRA_COPY_BYTES.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n + bytes <= HELD_COPY_BYTES).then_some(n + bytes)
        });
        grown.ok()?;
        Some(StackCopy::new(bytes))
    }

    /// Appends `op` with the next sequence number (returned), keeping at most `capacity` ops and
    /// [`STACK_COPIES`] stack copies besides the held ones. With `copy` (the entry point's
    /// registers and the bytes to copy), the launching thread's stack is copied for the op.
    /// `completed`: the highest sequence number now proven complete.
    #[link_section = "cudablame_hot_text"] // every launch runs it: see lib.rs
    pub(crate) fn push(
        &mut self,
        op: &OpRecord,
        capacity: usize,
        copy: Option<(&EntryRegs, usize)>,
        completed: &dyn Fn() -> u64,
    ) -> u64 {
        self.last_seq += 1;
        let seq = self.last_seq;
        let copied = copy.is_some();
        if let Some((regs, bytes)) = copy {
            let copying = super::cost::phase_start();
            self.copy_stack(seq, regs, bytes, completed);
            super::cost::add(super::cost::Phase::Stack, copying);
        }
        let stack = if copied { StackRef::Copied } else { op.stack };
        let i = self.oldest;
        match self.ops.get(i) {
            Some(old) if self.ops.len() >= capacity.max(1) => {
                // A synchronous op completed before it was recorded: never a candidate.
                let (leaving, synchronous) = (old.seq, old.synchronous);
                if !synchronous
                    && self.unproven(leaving, completed)
                    && self.held_ops.len() < HELD_OPS
                {
                    self.held_ops.push_back(self.ops[i]);
                }
                // Copied whole, then the two fields set (a struct update built the record
                // field by field: 38 instructions, against 18 for the copy).
                let slot = &mut self.ops[i];
                *slot = *op;
                slot.seq = seq;
                slot.stack = stack;
                self.oldest = if i + 1 == self.ops.len() { 0 } else { i + 1 };
            }
            _ => {
                // Not full (`capacity` grew since the ring wrapped): the oldest first again, so
                // the new op goes behind the newest (once per growth, never on the hot path).
                if i != 0 {
                    self.ops.rotate_left(i);
                    self.oldest = 0;
                }
                self.ops.push(OpRecord { seq, stack, ..*op });
            }
        }
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
            self.first_copies(seq, regs, bytes);
            return;
        }
        let i = self.next_copy;
        self.next_copy = (i + 1) % STACK_COPIES;
        let leaving = self.copies[i].seq;
        // `unproven` first: it also forgets held stacks proven by now, making room. Without
        // progress markers only a host synchronization proves anything: every op would stay
        // unproven until then (an unwind here, on the launching thread, costs 1.2 to 4.2 µs in
        // PyTorch; it made a GPU-bound training step 38% slower with markers off than without
        // cudablame). Then no stack is held: the verdict can only be a suspect among all ops
        // since the last synchronization, and the newest ops keep their copies.
        if leaving != 0 && crate::config::markers_enabled() && self.unproven(leaving, completed) {
            self.hold_copy(i, leaving, bytes);
        }
        self.copies[i].fill(seq, regs);
    }

    /// [`copy_stack`](Self::copy_stack) for one of the stream's first [`STACK_COPIES`] ops: a
    /// new buffer (cold, out of line).
    #[cold]
    #[inline(never)]
    fn first_copies(&mut self, seq: u64, regs: &EntryRegs, bytes: usize) {
        self.copies.push(StackCopy::new(bytes));
        self.next_copy = self.copies.len() % STACK_COPIES;
        if let Some(c) = self.copies.last_mut() {
            c.fill(seq, regs);
        }
    }

    /// The copy in slot `i`, of op `leaving`, leaves the newest copies unproven: held (its
    /// buffer moves to the held list, the slot takes a spare one), else unwound while the held
    /// stacks' bound allows. Out of line: only while the GPU runs behind.
    #[inline(never)]
    fn hold_copy(&mut self, i: usize, leaving: u64, bytes: usize) {
        if let Some(spare) = self.spare_copy(bytes) {
            // The copy moves to the held list whole; the slot takes the spare buffer.
            let held = std::mem::replace(&mut self.copies[i], spare);
            super::cost::held_copy();
            self.held_copies.push_back(held);
        } else if self.held_stacks.len() < HELD_STACKS {
            let depth = crate::config::get().stack_depth;
            super::cost::held_unwind();
            self.held_stacks
                .push_back((leaving, self.copies[i].unwind(depth)));
        }
    }

    /// The ops kept, oldest first: the held ones older than the ring, then the ring. Stack
    /// copies are unwound (`depth` frames) and kept ([`crate::stack::keep`]); an op whose copy
    /// was reused without being held has none; a launch site's op keeps its `Site`.
    pub(super) fn view_ops(&self, depth: usize) -> Vec<OpRecord> {
        let front = self.ring_ops().next().map_or(u64::MAX, |o| o.seq);
        self.held_ops
            .iter()
            .filter(|o| o.seq < front)
            .chain(self.ring_ops())
            .map(|&(mut o)| {
                // A `Site` stays one: its copy outlives the ring, and `stack::kept` unwinds it
                // for the few ops a report shows (one kept stack per op here overran the kept
                // stacks' table within one report: a stream's ring and held ops are 4,352).
                if o.stack == StackRef::Copied {
                    let copy = (self.copies.iter())
                        .chain(self.held_copies.iter())
                        .find(|c| c.seq == o.seq);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::OpKind;
    use std::cell::Cell;

    fn op() -> OpRecord {
        OpRecord::for_test(0, OpKind::Kernel, 0)
    }

    #[test]
    fn a_slow_healthy_op_does_not_cost_the_later_culprit() {
        // #2 runs long while 300 ops queue behind it (ring of 16); then #2 completes and #151
        // faults (the marker stops at #150); 5,000 more launches follow.
        let mut ring = Ring::default();
        let completed = Cell::new(1u64);
        let done = || completed.get();
        for _ in 0..300 {
            ring.push(&op(), 16, None, &done);
        }
        completed.set(150);
        for _ in 0..5000 {
            ring.push(&op(), 16, None, &done);
        }
        let ops = ring.view_ops(16);
        let first_unproven = ops.iter().find(|o| o.seq > completed.get()).map(|o| o.seq);
        assert_eq!(first_unproven, Some(151));
        // Held ops are bounded and proven ones were forgotten.
        assert!(ring.held_ops.len() <= HELD_OPS);
        assert!(ring.held_ops.front().unwrap().seq > 150);
        assert_eq!(ops.last().unwrap().seq, 5300);
    }

    /// The sequence numbers of the ring's ops in view order, and those of the marked ones.
    fn seqs_and_marked(ring: &Ring) -> (Vec<u64>, Vec<u64>) {
        let ops = ring.view_ops(16);
        let seqs = ops.iter().map(|o| o.seq).collect();
        let marked = ops.iter().filter(|o| o.marked).map(|o| o.seq).collect();
        (seqs, marked)
    }

    #[test]
    fn a_full_ring_keeps_the_newest_ops_in_order_and_marks_the_newest() {
        let mut ring = Ring::default();
        let done = || u64::MAX;
        let mut unmarked = op();
        unmarked.marked = false;
        for n in 1..=37u64 {
            assert_eq!(ring.push(&unmarked, 16, None, &done), n);
            if n % 5 == 0 {
                ring.mark_newest();
            }
        }
        assert_eq!(
            seqs_and_marked(&ring),
            ((22..=37).collect(), vec![25, 30, 35])
        );
    }

    #[test]
    fn a_wrapped_ring_that_grows_keeps_its_order_and_marks_the_newest() {
        // `capacity` is a parameter of every push: a wrapped ring given a larger one grows, the
        // new op still the newest (the VecDeque appended it behind the newest).
        let mut ring = Ring::default();
        let done = || u64::MAX;
        let mut unmarked = op();
        unmarked.marked = false;
        for _ in 0..20 {
            ring.push(&unmarked, 16, None, &done);
        }
        for _ in 0..3 {
            ring.push(&unmarked, 32, None, &done);
            ring.mark_newest();
        }
        assert_eq!(
            seqs_and_marked(&ring),
            ((5..=23).collect(), vec![21, 22, 23])
        );
    }

    #[test]
    fn a_ring_that_shrinks_or_has_no_room_keeps_the_newest_in_order() {
        let done = || u64::MAX;
        // A smaller capacity later: the ring keeps its length (one op in, the oldest out).
        let mut ring = Ring::default();
        for _ in 0..20 {
            ring.push(&op(), 16, None, &done);
        }
        for _ in 0..5 {
            ring.push(&op(), 4, None, &done);
        }
        let seqs: Vec<u64> = ring.view_ops(16).iter().map(|o| o.seq).collect();
        assert_eq!(seqs, (10..=25).collect::<Vec<u64>>());
        // Capacity 0 or 1: the newest op alone.
        for cap in [0, 1] {
            let mut ring = Ring::default();
            for _ in 0..3 {
                ring.push(&op(), cap, None, &done);
            }
            let seqs: Vec<u64> = ring.view_ops(16).iter().map(|o| o.seq).collect();
            assert_eq!(seqs, vec![3]);
        }
    }

    #[test]
    fn proven_ops_are_not_held() {
        let mut ring = Ring::default();
        let done = || u64::MAX;
        for _ in 0..1000 {
            ring.push(&op(), 16, None, &done);
        }
        assert!(ring.held_ops.is_empty());
        assert_eq!(ring.view_ops(16).len(), 16);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn unproven_ops_keep_their_stack_copies_without_unwinding() {
        let _serial = crate::stack::unwind::TEST_LOCK.lock();
        let mut ring = Ring::default();
        let regs = EntryRegs::here();
        let completed = Cell::new(0u64);
        let done = || completed.get();
        // 300 launches behind a blocked stream: the 268 that leave the newest 32 copies are
        // held as copies, none unwound.
        for _ in 0..300 {
            ring.push(&op(), 16, Some((&regs, 4096)), &done);
        }
        assert_eq!(ring.held_copies.len(), 300 - STACK_COPIES);
        assert!(ring.held_stacks.is_empty());
        assert_eq!(ring.held_copies.front().map(|c| c.seq), Some(1));
        // The oldest (the culprit if the context dies now) is unwound only in a view, and
        // reads this test's frame like the newest does.
        let ops = ring.view_ops(16);
        let first = ops.iter().find(|o| o.seq == 1).expect("op 1 held");
        let last = ops.last().expect("ops");
        let first_stack = crate::stack::kept(first.stack);
        let last_stack = crate::stack::kept(last.stack);
        assert!(first_stack.ips().len() >= 2, "held copy unwound");
        assert_eq!(&*first_stack.ips(), &*last_stack.ips());
        // Proven: the held buffers become spares and are reused, nothing new is allocated.
        completed.set(300);
        let extra = ring.extra_bytes();
        for _ in 0..300 {
            ring.push(&op(), 16, Some((&regs, 4096)), &done);
        }
        assert_eq!(ring.held_copies.len(), 300 - STACK_COPIES);
        assert_eq!(ring.held_copies.front().map(|c| c.seq), Some(301));
        assert_eq!(ring.extra_bytes(), extra);
        assert_eq!(extra, (300 - STACK_COPIES) * 4096);
    }

    /// Ops from a launch site (`stack::sites`) share its copy; a view must not unwind and keep a
    /// stack per op: four streams far behind (each its ring and 4,096 held ops, the default
    /// bounds) are 17,408 ops, more than the kept-stacks table holds, and keeping one per op
    /// overwrote the oldest ops' stacks (the culprit's) and a graph capture's within one report.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_view_of_site_ops_keeps_the_culprits_stack_and_older_kept_ones() {
        let _serial = crate::stack::unwind::TEST_LOCK.lock();
        let regs = EntryRegs::here();
        let key = crate::stack::sites::SiteKey {
            python: 0x5151_7777,
            depth: 0,
            loads: 0,
            entry_point: 3,
            kind: 0,
            handle: 0xfeed0,
        };
        let site = crate::stack::sites::site_of(
            key,
            &regs,
            &|| 4096,
            crate::stack::unwind::stack_bounds(),
        )
        .expect("a site")
        .site;
        std::hint::black_box(&regs);
        let captured = crate::stack::keep(crate::stack::sites::unwind(site, 16));
        let mut o = op();
        o.stack = StackRef::Site { site, first: false };
        let done = || 0u64; // nothing proven: every op that leaves a ring is held
        let rings: Vec<Ring> = (0..4)
            .map(|_| {
                let mut ring = Ring::default();
                for _ in 0..256 + HELD_OPS {
                    ring.push(&o, 256, None, &done);
                }
                ring
            })
            .collect();
        let views: Vec<Vec<OpRecord>> = rings.iter().map(|r| r.view_ops(16)).collect();
        let culprit = views[0].first().expect("ops");
        assert_eq!(culprit.seq, 1);
        assert!(
            crate::stack::kept(culprit.stack).ips().len() >= 2,
            "the oldest op of the first stream keeps its stack"
        );
        assert!(
            crate::stack::kept(captured).ips().len() >= 2,
            "a stack kept before the report survives it"
        );
    }

    #[test]
    fn held_copies_are_bounded_then_unwound() {
        let _serial = crate::stack::unwind::TEST_LOCK.lock();
        let mut ring = Ring::default();
        let regs = EntryRegs::here();
        let done = || 0u64;
        let n = STACK_COPIES + HELD_COPIES + 10;
        for _ in 0..n {
            ring.push(&op(), 16, Some((&regs, 4096)), &done);
        }
        assert_eq!(ring.held_copies.len(), HELD_COPIES);
        assert_eq!(ring.held_stacks.len(), 10);
        // Oldest first in both: the culprit is op 1.
        assert_eq!(ring.held_copies.front().map(|c| c.seq), Some(1));
        assert_eq!(
            ring.held_stacks.front().map(|h| h.0),
            Some(HELD_COPIES as u64 + 1)
        );
    }
}
