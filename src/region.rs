//! The memory every recorded launch reads, placed side by side in one region of huge pages.
//!
//! Why: between two launches a framework's own work evicts the TLBs as well as the caches, and
//! then every distinct 4 KiB page the hook touches is a page walk; on the simulated driver a
//! launch whose pages all walk costs several times one whose lines all miss (README,
//! Performance, nineteenth session). Left to the program's heap, each table a launch reads (the
//! thread's recent sites, kernels and Python stacks, the stream's state and ring, the driver's
//! function table, the launch site's path) lands in a page of its own among the program's
//! objects: some ten of the 34 data pages a launch touched in cachegrind's TLB-shaped count.
//! Here they share one region, backed by 2 MiB pages where the kernel gives them (transparent
//! huge pages, `madvise(MADV_HUGEPAGE)`: honoured when
//! `/sys/kernel/mm/transparent_hugepage/enabled` is `always` or `madvise`, see the kernel's
//! `Documentation/admin-guide/mm/transhuge.rst`): a few TLB entries for all of them, and, where
//! the kernel gives only 4 KiB pages, still fewer pages than scattered.
//!
//! How: this library's global allocator ([`Placement`]; Rust allocations of this library only,
//! the program's `malloc` is not touched) sends an allocation made inside [`placed`] to the
//! region and every other one to the system allocator. The owners of the hot tables make them
//! inside `placed` (`safety::PerThread` and `safety::ForkSafeOnce` values, `record::streams`'
//! stream states with their rings, `stack::sites`' paths). The region is [`REGION_BYTES`]
//! reserved at the first placed allocation (`MAP_NORESERVE`: pages are backed as they are
//! touched), 2 MiB aligned, carved front to back; a freed block goes onto the free list of its
//! size and alignment ([`LISTS`] of them) for the next placed allocation of that shape.
//!
//! Not an allocator crate: those serving a fixed span (`linked_list_allocator`, `talc`) spin on
//! a lock, and what this needs besides the span (the routing by scope, the huge-page region, a
//! lock that is only ever tried) would be most of the code; the carving and the free lists here
//! are some forty lines.
//!
//! It never waits for another thread and never fails where the system allocator would not: its
//! lock is only tried, and an allocation that finds it taken, the region full or not made
//! (`mmap` refused), or a shape too large goes to the system allocator; a free that finds the
//! lock taken, or no list free for its shape, leaves its block unused (at most the region is
//! ever lost). A forked child keeps the region as it was (copy-on-write); if another thread held
//! the lock at the fork, the child's placed allocations go to the system allocator from then on.
//! The first touch of each 2 MiB of the region is a page fault for a huge page, which under
//! `/sys/kernel/mm/transparent_hugepage/defrag` `madvise` or `always` may compact memory first
//! (the kernel's choice, once per huge page: a thread's first launch, a new stream).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Bytes of address space the region reserves (backed only as touched): room for the tables of
/// some 40 launching threads (about 330 KiB each: recent sites 48 KiB, the Python stack cache
/// 264 KiB, recent code objects 16 KiB, recent kernels 4 KiB) and their streams' rings (36 KiB
/// each at the default `CUDABLAME_RING`); what does not fit goes to the system allocator.
pub(crate) const REGION_BYTES: usize = 16 << 20;
/// A huge page of x86-64 and of arm64 with 4 KiB base pages: the region's alignment.
const HUGE_PAGE: usize = 2 << 20;
/// The largest single placed allocation (larger ones go to the system allocator).
const LARGEST: usize = 1 << 20;
/// The largest alignment a placed allocation may ask for.
const MOST_ALIGNED: usize = 4096;
/// Free lists, one per shape (size rounded up to 16 bytes, alignment) with blocks free.
const LISTS: usize = 32;

/// A region's state: its base (0: not made yet; [`FAILED`]: `mmap` refused), the next unused
/// byte's offset, and the free lists, each `(shape, head)`: `shape` from [`shape`] (0: unused),
/// `head` the first free block's address (each free block starts with the next one's, 0 ending
/// the list). Everything but `base` and `busy` is read and written only under `lock`.
pub(crate) struct Region {
    base: AtomicUsize,
    lock: AtomicBool,
    next: AtomicUsize,
    lists: [(AtomicUsize, AtomicUsize); LISTS],
    /// Placed allocations that went to the system allocator because the lock was taken.
    busy: AtomicUsize,
}

/// [`Region::base`] when the region could not be made.
const FAILED: usize = 1;

/// The library's region, used by [`Placement`].
static REGION: Region = Region::new();

thread_local! {
    /// How deep this thread is in [`placed`] (`const`, no destructor: nothing registered).
    static PLACING: Cell<u32> = const { Cell::new(0) };
}

/// Runs `f` with the allocations it makes on this thread placed in the region (where they fit;
/// see the module's doc). For the tables a recorded launch reads; everything else stays on the
/// system allocator. Nests.
pub(crate) fn placed<R>(f: impl FnOnce() -> R) -> R {
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            let _ = PLACING.try_with(|p| p.set(p.get().saturating_sub(1)));
        }
    }
    let _ = PLACING.try_with(|p| p.set(p.get() + 1));
    let _leave = Leave;
    f()
}

/// Whether this thread is inside [`placed`].
fn placing() -> bool {
    PLACING.try_with(Cell::get).unwrap_or(0) > 0
}

/// Whether `p` lies in the library's region (a block it handed out).
#[cfg(test)]
pub(crate) fn contains(p: *const u8) -> bool {
    REGION.contains(p)
}

/// How many placed allocations went to the system allocator because another thread held the
/// region's lock (for tests that check where a block went).
#[cfg(test)]
pub(crate) fn busy() -> usize {
    REGION.busy.load(Ordering::Relaxed)
}

/// The free-list key of `layout`: its size rounded up to 16 bytes, times twice the largest
/// alignment, plus its alignment (distinct for distinct shapes, never 0); `None` when it is not
/// placed at all.
fn shape(layout: Layout) -> Option<usize> {
    if layout.size() == 0 || layout.size() > LARGEST || layout.align() > MOST_ALIGNED {
        return None;
    }
    let size = layout.size().next_multiple_of(16);
    Some(size * MOST_ALIGNED * 2 + layout.align())
}

/// Holds a region's lock; made only by [`Region::try_lock`] (never waits).
struct Locked<'a>(&'a Region);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.0.lock.store(false, Ordering::Release);
    }
}

impl Region {
    #[allow(clippy::declare_interior_mutable_const)] // a template for the array below
    const NO_LIST: (AtomicUsize, AtomicUsize) = (AtomicUsize::new(0), AtomicUsize::new(0));

    pub(crate) const fn new() -> Region {
        Region {
            base: AtomicUsize::new(0),
            lock: AtomicBool::new(false),
            next: AtomicUsize::new(0),
            lists: [Self::NO_LIST; LISTS],
            busy: AtomicUsize::new(0),
        }
    }

    /// Whether `p` lies in this region.
    fn contains(&self, p: *const u8) -> bool {
        let base = self.base.load(Ordering::Acquire);
        base > FAILED && (p as usize).wrapping_sub(base) < REGION_BYTES
    }

    fn try_lock(&self) -> Option<Locked<'_>> {
        self.lock
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(Locked(self))
    }

    /// The region's base, made now if it is not yet; `None` when it cannot be.
    fn base(&self) -> Option<usize> {
        match self.base.load(Ordering::Acquire) {
            0 => {}
            FAILED => return None,
            b => return Some(b),
        }
        // Over-reserved by a huge page so that an aligned start fits; the rest stays reserved
        // (address space only, never touched).
        let len = REGION_BYTES + HUGE_PAGE;
        // SAFETY: a fresh anonymous private mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let _ = self
                .base
                .compare_exchange(0, FAILED, Ordering::AcqRel, Ordering::Acquire);
            return None;
        }
        let start = (p as usize).next_multiple_of(HUGE_PAGE);
        // SAFETY: `start..start + REGION_BYTES` lies within the mapping just made. Advice only:
        // a kernel without transparent huge pages refuses it and the region keeps 4 KiB pages.
        unsafe {
            libc::madvise(
                start as *mut libc::c_void,
                REGION_BYTES,
                libc::MADV_HUGEPAGE,
            )
        };
        match self
            .base
            .compare_exchange(0, start, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Some(start),
            Err(other) => {
                // Another thread made it first: ours goes.
                // SAFETY: the mapping made above, handed to no one.
                unsafe { libc::munmap(p, len) };
                (other > FAILED).then_some(other)
            }
        }
    }

    /// A block of `layout` from the region, and whether it was never used (so still zero);
    /// `None` to use the system allocator instead.
    fn take(&self, layout: Layout) -> Option<(*mut u8, bool)> {
        let key = shape(layout)?;
        let base = self.base()?;
        let Some(_locked) = self.try_lock() else {
            self.busy.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        for (shape, head) in &self.lists {
            if shape.load(Ordering::Relaxed) == key {
                let block = head.load(Ordering::Relaxed);
                if block != 0 {
                    // SAFETY: a free block of this list: its first word holds the next one's
                    // address.
                    head.store(unsafe { *(block as *const usize) }, Ordering::Relaxed);
                    return Some((block as *mut u8, false));
                }
                break;
            }
        }
        let next = self.next.load(Ordering::Relaxed);
        let start = next.next_multiple_of(layout.align().max(16));
        let end = start + layout.size().next_multiple_of(16);
        if end > REGION_BYTES {
            return None;
        }
        self.next.store(end, Ordering::Relaxed);
        Some(((base + start) as *mut u8, true))
    }

    /// Returns a block of the region to its shape's free list: the list of that shape, else
    /// an empty list (which takes the shape); left unused when the lock is taken or every list
    /// holds blocks of other shapes.
    fn give_back(&self, p: *mut u8, layout: Layout) {
        let Some(key) = shape(layout) else {
            return;
        };
        let Some(_locked) = self.try_lock() else {
            return;
        };
        let list = (self
            .lists
            .iter()
            .find(|(s, _)| s.load(Ordering::Relaxed) == key))
        .or_else(|| (self.lists.iter()).find(|(_, h)| h.load(Ordering::Relaxed) == 0));
        let Some((shape, head)) = list else {
            return;
        };
        shape.store(key, Ordering::Relaxed);
        // SAFETY: `p` is a block of at least 16 bytes, 16-byte aligned, no longer in use.
        unsafe { *(p as *mut usize) = head.load(Ordering::Relaxed) };
        head.store(p as usize, Ordering::Relaxed);
    }
}

/// This library's global allocator: placed allocations ([`placed`]) from the region, all
/// others, and whatever the region cannot take, from [`System`] (glibc's `malloc`).
pub(crate) struct Placement;

// SAFETY: every block handed out is either the system allocator's (and freed there) or a
// region block of at least the layout's size at its alignment, handed to one owner at a time
// (taken off a list or carved under the lock), freed to the region by address.
unsafe impl GlobalAlloc for Placement {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if placing() {
            if let Some((p, _)) = REGION.take(layout) {
                return p;
            }
        }
        // SAFETY: the caller's layout, as the trait requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if placing() {
            if let Some((p, fresh)) = REGION.take(layout) {
                if !fresh {
                    // SAFETY: the block holds at least `layout.size()` bytes.
                    unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
                }
                return p;
            }
        }
        // SAFETY: the caller's layout, as the trait requires.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let placed_here = REGION.contains(p);
        if !placed_here && (!placing() || new_size > LARGEST) {
            // SAFETY: the system allocator's block with this layout; the caller's new size.
            return unsafe { System.realloc(p, layout, new_size) };
        }
        if placed_here && new_size.next_multiple_of(16) == layout.size().next_multiple_of(16) {
            return p; // the same block fits
        }
        // A region block, or one to move into the region: a new block, the bytes, the old one
        // freed where it came from.
        // SAFETY: the caller's alignment with a size the caller vouches for.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as `alloc`.
        let q = unsafe { self.alloc(new_layout) };
        if !q.is_null() {
            // SAFETY: both blocks hold at least the smaller size; distinct blocks.
            unsafe { std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size)) };
            // SAFETY: `p` with its layout, no longer used.
            unsafe { self.dealloc(p, layout) };
        }
        q
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if REGION.contains(p) {
            REGION.give_back(p, layout);
        } else {
            // SAFETY: not a region block, so the system allocator's, with this layout.
            unsafe { System.dealloc(p, layout) }
        }
    }
}

#[global_allocator]
static ALLOCATOR: Placement = Placement;

/// Asserts that `p` is in the library's region, unless a placed allocation went elsewhere
/// because another thread (another test's) held the region's lock meanwhile (`busy_before`:
/// [`busy`] before the allocation).
#[cfg(test)]
pub(crate) fn assert_placed(p: *const u8, busy_before: usize, what: &str) {
    assert!(
        contains(p) || busy() != busy_before,
        "{what} is not in the hot region"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placed_allocations_come_from_the_region_and_others_do_not() {
        let busy = busy();
        let outside = Box::new([7u64; 8]);
        let inside = placed(|| Box::new([9u64; 8]));
        assert!(!contains(&*outside as *const _ as *const u8));
        assert_placed(&*inside as *const _ as *const u8, busy, "a placed box");
        assert_eq!(*inside, [9u64; 8]);
        // Nested scopes stay placed; leaving the outer one stops placing.
        let nested = placed(|| placed(|| Box::new(1u32)));
        assert_placed(&*nested as *const u32 as *const u8, busy, "a nested one");
        let after = Box::new(2u32);
        assert!(!contains(&*after as *const u32 as *const u8));
        // A placed vector growing outside the scope moves to the system allocator, and back.
        let mut v: Vec<u64> = placed(|| Vec::with_capacity(4));
        v.extend(0..1000);
        assert!(!contains(v.as_ptr().cast()));
        placed(|| v.shrink_to(1000));
        assert_eq!(v, (0..1000).collect::<Vec<u64>>());
        assert_eq!(
            REGION.base.load(Ordering::Acquire) % HUGE_PAGE,
            0,
            "aligned"
        );
        // A zeroed allocation reusing a freed block gets it cleared.
        let dirty = placed(|| vec![0xffu8; 200]);
        let at = dirty.as_ptr();
        drop(dirty);
        let clean = placed(|| vec![0u8; 200]);
        assert!(
            clean.as_ptr() == at || super::busy() != busy,
            "the block reused"
        );
        assert!(clean.iter().all(|&b| b == 0));
    }

    #[test]
    fn a_freed_block_is_reused_for_its_shape_and_zeroed_when_asked() {
        static R: Region = Region::new();
        let shape = Layout::from_size_align(200, 64).unwrap();
        let (a, fresh) = R.take(shape).unwrap();
        assert!(fresh && R.contains(a) && (a as usize).is_multiple_of(64));
        // SAFETY: a block of 200 bytes.
        unsafe { std::ptr::write_bytes(a, 0xff, 200) };
        R.give_back(a, shape);
        // Another shape does not get it; the same shape does, not fresh (so a zeroed allocation
        // clears it: `Placement::alloc_zeroed`).
        let (b, _) = R.take(Layout::from_size_align(200, 16).unwrap()).unwrap();
        assert_ne!(b, a);
        assert_eq!(R.take(shape).unwrap(), (a, false));
        // Lists freed empty take other shapes: more shapes than lists are all reused.
        for n in 1..=2 * LISTS {
            let l = Layout::from_size_align(n * 16, 16).unwrap();
            let (p, _) = R.take(l).unwrap();
            R.give_back(p, l);
            assert_eq!(R.take(l).unwrap(), (p, false), "shape {n}");
        }
    }

    #[test]
    fn what_a_region_cannot_take_goes_elsewhere_without_waiting() {
        static R: Region = Region::new();
        let small = Layout::from_size_align(64, 16).unwrap();
        assert!(R
            .take(Layout::from_size_align(LARGEST + 1, 16).unwrap())
            .is_none());
        assert!(R
            .take(Layout::from_size_align(64, 2 * MOST_ALIGNED).unwrap())
            .is_none());
        assert!(R.take(Layout::from_size_align(0, 1).unwrap()).is_none());
        // The lock taken (another thread inside the region): no wait, no block, counted.
        let held = R.try_lock().expect("lock free");
        assert!(R.take(small).is_none());
        assert_eq!(R.busy.load(Ordering::Relaxed), 1);
        drop(held);
        assert!(R.take(small).is_some());
        // Full: the rest goes elsewhere.
        let big = Layout::from_size_align(LARGEST, 16).unwrap();
        let fitted = (0..).take_while(|_| R.take(big).is_some()).count();
        assert_eq!(
            fitted,
            REGION_BYTES / LARGEST - 1,
            "all but the first block's room"
        );
        assert!(
            R.take(small).is_some(),
            "small blocks still fit in the rest"
        );
        // The library's allocator: too large for one placed block, from the system allocator.
        let large = placed(|| vec![3u8; LARGEST + 1]);
        assert!(!contains(large.as_ptr()));
        assert_eq!(large[LARGEST], 3);
    }
}
