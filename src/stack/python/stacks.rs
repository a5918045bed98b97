//! Interned Python stacks: every distinct captured stack (its frames, innermost first) is kept
//! once, process-wide, and an op record holds its slot (4 bytes) instead of the frames.
//!
//! Why: with the frames inline (`[FrameRef; 64]`, 512 bytes) an op record was 648 bytes (144 now),
//! copied several times per launch (built, returned through the panic guard, pushed into the
//! stream's ring, moved to the held ops), and the ring of 256 ops plus up to 4,096 held ops of a
//! stream spanned megabytes that each launch wrote into cold cache lines. The stacks of a
//! training or inference loop repeat: the launch sites of a program are few.
//!
//! Hot path ([`intern`]): a hash of the frames, one slot read and a compare with the stack kept
//! there (open addressing, linear probing). First sight of a stack: one allocation and a
//! compare-and-swap into an empty slot; no lock, so nothing a forked child can find held. Stacks
//! are never freed or changed once published (a record may name one until the report). When
//! [`MAX_STACKS`] are kept, new stacks are not interned ([`NO_STACK`]): their records keep the
//! innermost frame only (`PythonStack::top`), and the report says frames were lost.

use super::capture::FrameRef;
use crate::safety::ForkSafeOnce;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Slots of the table (a power of two); 512 KiB of pointers, allocated at the first capture.
pub(super) const STACK_SLOTS: usize = 1 << 16;
/// Distinct stacks kept at most (75% load); later new ones are not interned.
pub(super) const MAX_STACKS: usize = STACK_SLOTS / 4 * 3;
/// The slot of a stack that was not interned (table full).
pub(super) const NO_STACK: u32 = u32::MAX;

/// One interned stack: immutable once published.
struct Interned {
    hash: u64,
    frames: Box<[FrameRef]>,
}

struct Table {
    /// A power of two of them.
    slots: Box<[AtomicPtr<Interned>]>,
    /// Stacks published, plus those being published.
    used: AtomicUsize,
    /// Stacks kept at most.
    max: usize,
}

impl Table {
    fn new(slots: usize, max: usize) -> Table {
        Table {
            slots: (0..slots)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            used: AtomicUsize::new(0),
            max,
        }
    }

    /// The first slot probed for `hash`.
    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        (hash >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    fn next(&self, i: usize) -> usize {
        (i + 1) & (self.slots.len() - 1)
    }
}

/// Fork-safe (`safety::ForkSafeOnce`: a `OnceLock` being built when another thread forks stays
/// "running" in the child, whose first capture would then wait forever).
static TABLE: ForkSafeOnce<Table> = ForkSafeOnce::new();

fn table() -> &'static Table {
    TABLE.get_or_init(|| Table::new(STACK_SLOTS, MAX_STACKS))
}

/// A hash of the frames (their count included).
#[inline(always)]
fn hash(frames: &[FrameRef]) -> u64 {
    let mut h = frames.len() as u64;
    for f in frames {
        let word = ((f.entry as u64) << 32) | f.offset as u32 as u64;
        h = (h ^ word).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    // The slot comes from the top bits: mix the low ones (the last frame's) up.
    (h ^ (h >> 32)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// The slot of `frames` (at least one), interned on first sight; [`NO_STACK`] when the table
/// is full.
#[inline]
pub(super) fn intern(frames: &[FrameRef]) -> u32 {
    intern_in(table(), frames)
}

#[inline(always)]
fn intern_in(t: &Table, frames: &[FrameRef]) -> u32 {
    let h = hash(frames);
    let mut i = t.home(h);
    for _ in 0..t.slots.len() {
        let p = t.slots[i].load(Ordering::Acquire);
        // SAFETY: published stacks are leaked boxes, never freed or changed.
        match unsafe { p.as_ref() } {
            None => return insert(t, h, frames),
            Some(s) if s.hash == h && *s.frames == *frames => return i as u32,
            Some(_) => i = t.next(i),
        }
    }
    NO_STACK
}

/// Cold: first sight of a stack. Lock-free: the stack is published into the first empty slot
/// of its probe sequence by compare-and-swap; a thread that loses the race to an equal stack
/// drops its copy and uses the winner's.
#[cold]
#[inline(never)]
fn insert(t: &Table, h: u64, frames: &[FrameRef]) -> u32 {
    if t.used.fetch_add(1, Ordering::Relaxed) >= t.max {
        t.used.fetch_sub(1, Ordering::Relaxed);
        return NO_STACK;
    }
    let mine = Box::into_raw(Box::new(Interned {
        hash: h,
        frames: frames.into(),
    }));
    let mut i = t.home(h);
    for _ in 0..t.slots.len() {
        let found = match t.slots[i].compare_exchange(
            std::ptr::null_mut(),
            mine,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return i as u32,
            Err(theirs) => theirs,
        };
        // SAFETY: published stacks are leaked boxes, never freed or changed.
        let theirs = unsafe { &*found };
        if theirs.hash == h && *theirs.frames == *frames {
            t.used.fetch_sub(1, Ordering::Relaxed);
            // SAFETY: `mine` was never published.
            drop(unsafe { Box::from_raw(mine) });
            return i as u32;
        }
        i = t.next(i);
    }
    t.used.fetch_sub(1, Ordering::Relaxed);
    // SAFETY: `mine` was never published.
    drop(unsafe { Box::from_raw(mine) });
    NO_STACK
}

/// The frames interned in `slot` (empty for [`NO_STACK`] or a slot never filled).
pub(super) fn frames(slot: u32) -> &'static [FrameRef] {
    TABLE.get().map_or(&[], |t| frames_in(t, slot))
}

fn frames_in(t: &Table, slot: u32) -> &[FrameRef] {
    let Some(p) = t.slots.get(slot as usize) else {
        return &[];
    };
    // SAFETY: published stacks are leaked boxes, never freed or changed.
    unsafe { p.load(Ordering::Acquire).as_ref() }.map_or(&[], |s| &s.frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(entries: &[u32], offset: i32) -> Vec<FrameRef> {
        entries
            .iter()
            .map(|&entry| FrameRef { entry, offset })
            .collect()
    }

    #[test]
    fn equal_stacks_share_a_slot_and_keep_their_frames() {
        let a = stack(&[1, 2, 3], 10);
        let b = stack(&[1, 2, 3], 12); // another line of the same functions
        let c = stack(&[1, 2], 10); // a prefix
        let (sa, sb, sc) = (intern(&a), intern(&b), intern(&c));
        assert!(sa != NO_STACK && sb != NO_STACK && sc != NO_STACK);
        assert!(sa != sb && sa != sc && sb != sc);
        assert_eq!(intern(&a), sa);
        assert_eq!(frames(sa), &a[..]);
        assert_eq!(frames(sb), &b[..]);
        assert_eq!(frames(sc), &c[..]);
        assert!(frames(NO_STACK).is_empty());
    }

    #[test]
    fn a_full_table_interns_no_new_stack_but_still_finds_the_old_ones() {
        let t = Table::new(8, 6);
        let kept: Vec<u32> = (0..6).map(|k| intern_in(&t, &stack(&[k], 0))).collect();
        assert!(kept.iter().all(|&s| s != NO_STACK));
        assert_eq!(intern_in(&t, &stack(&[99], 0)), NO_STACK);
        for (k, &slot) in kept.iter().enumerate() {
            assert_eq!(intern_in(&t, &stack(&[k as u32], 0)), slot);
            assert_eq!(frames_in(&t, slot), &stack(&[k as u32], 0)[..]);
        }
        assert_eq!(t.used.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn threads_interning_the_same_stacks_agree() {
        let slots: Vec<Vec<u32>> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    (0..200)
                        .map(|k| intern(&stack(&[900, 901, k], k as i32)))
                        .collect()
                })
            })
            .map(|t| t.join().unwrap())
            .collect();
        assert!(slots.iter().all(|s| *s == slots[0]));
        for (k, &slot) in slots[0].iter().enumerate() {
            assert_eq!(frames(slot), &stack(&[900, 901, k as u32], k as i32)[..]);
        }
    }
}
