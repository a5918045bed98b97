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
//! It never blocks and never fails where the system allocator would not: its lock is only
//! tried, and an allocation that finds it taken, the region full or not made (`mmap` refused),
//! or a shape too large goes to the system allocator; a free that finds the lock taken, or no
//! list for its shape, leaves its block unused (at most the region is ever lost). A forked child
//! keeps the region as it was (copy-on-write); if another thread held the lock at the fork, the
//! child's placed allocations go to the system allocator from then on.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Bytes of address space the region reserves (backed only as touched): room for the tables of
/// some 40 launching threads (about 330 KiB each: recent sites 48 KiB, the Python stack cache
/// 264 KiB, recent kernels 4 KiB) and their streams' rings (36 KiB each at the default
/// `CUDABLAME_RING`); what does not fit goes to the system allocator.
pub(crate) const REGION_BYTES: usize = 16 << 20;
/// A huge page of x86-64 and of arm64 with 4 KiB base pages: the region's alignment.
const HUGE_PAGE: usize = 2 << 20;
/// The largest single placed allocation (larger ones go to the system allocator).
const LARGEST: usize = 1 << 20;
/// The largest alignment a placed allocation may ask for.
const MOST_ALIGNED: usize = 4096;
/// Free lists, one per shape (size rounded up to 16 bytes, alignment) freed so far.
const LISTS: usize = 32;

/// The region's state: its base (0: not made yet; [`FAILED`]: `mmap` refused), the next
/// unused byte's offset, and the free lists, each `(shape, head)`: `shape` the rounded size
/// times [`MOST_ALIGNED`]` * 2` plus the alignment (0: list unused), `head` the first free
/// block's address (each free block starts with the next one's, 0 ending the list). Everything
/// but `base` is read and written only under `lock`.
struct Region {
    base: AtomicUsize,
    lock: AtomicBool,
    next: AtomicUsize,
    lists: [(AtomicUsize, AtomicUsize); LISTS],
}

/// [`Region::base`] when the region could not be made.
const FAILED: usize = 1;

#[allow(clippy::declare_interior_mutable_const)] // a template for the array below
const NO_LIST: (AtomicUsize, AtomicUsize) = (AtomicUsize::new(0), AtomicUsize::new(0));

static REGION: Region = Region {
    base: AtomicUsize::new(0),
    lock: AtomicBool::new(false),
    next: AtomicUsize::new(0),
    lists: [NO_LIST; LISTS],
};

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

/// Whether `p` lies in the region (a block it handed out).
pub(crate) fn contains(p: *const u8) -> bool {
    let base = REGION.base.load(Ordering::Acquire);
    base > FAILED && (p as usize).wrapping_sub(base) < REGION_BYTES
}

/// The shape key of `layout` in the free lists; `None` when it is not placed at all.
fn shape(layout: Layout) -> Option<usize> {
    if layout.size() == 0 || layout.size() > LARGEST || layout.align() > MOST_ALIGNED {
        return None;
    }
    let size = layout.size().next_multiple_of(16);
    Some(size * MOST_ALIGNED * 2 + layout.align())
}

/// The region's base, made now if it is not yet; `None` when it cannot be.
fn base() -> Option<usize> {
    match REGION.base.load(Ordering::Acquire) {
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
        let _ = REGION
            .base
            .compare_exchange(0, FAILED, Ordering::AcqRel, Ordering::Acquire);
        return None;
    }
    let start = (p as usize).next_multiple_of(HUGE_PAGE);
    // SAFETY: `start..start + REGION_BYTES` lies within the mapping just made. Advice only: a
    // kernel without transparent huge pages refuses it and the region keeps 4 KiB pages.
    unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            REGION_BYTES,
            libc::MADV_HUGEPAGE,
        )
    };
    match REGION
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

/// Holds the region's lock; `None` when another thread holds it (never waits).
struct Locked;

impl Locked {
    fn try_lock() -> Option<Locked> {
        REGION
            .lock
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(Locked)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        REGION.lock.store(false, Ordering::Release);
    }
}

/// A block of `layout` from the region, and whether it was never used (so still zero); `None`
/// to use the system allocator instead.
fn take(layout: Layout) -> Option<(*mut u8, bool)> {
    let key = shape(layout)?;
    let base = base()?;
    let _locked = Locked::try_lock()?;
    for (shape, head) in &REGION.lists {
        if shape.load(Ordering::Relaxed) == key {
            let block = head.load(Ordering::Relaxed);
            if block != 0 {
                // SAFETY: a free block of this list: its first word holds the next one's address.
                head.store(unsafe { *(block as *const usize) }, Ordering::Relaxed);
                return Some((block as *mut u8, false));
            }
            break;
        }
    }
    let next = REGION.next.load(Ordering::Relaxed);
    let start = next.next_multiple_of(layout.align().max(16));
    let end = start.checked_add(layout.size().next_multiple_of(16))?;
    if end > REGION_BYTES {
        return None;
    }
    REGION.next.store(end, Ordering::Relaxed);
    Some(((base + start) as *mut u8, true))
}

/// Returns a block of the region to its shape's free list (left unused when the lock is taken
/// or every list holds another shape).
fn give_back(p: *mut u8, layout: Layout) {
    let Some(key) = shape(layout) else {
        return;
    };
    let Some(_locked) = Locked::try_lock() else {
        return;
    };
    for (shape, head) in &REGION.lists {
        let s = shape.load(Ordering::Relaxed);
        if s == 0 {
            shape.store(key, Ordering::Relaxed);
        } else if s != key {
            continue;
        }
        // SAFETY: `p` is a block of at least 16 bytes, 8-byte aligned, no longer in use.
        unsafe { *(p as *mut usize) = head.load(Ordering::Relaxed) };
        head.store(p as usize, Ordering::Relaxed);
        return;
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
        if PLACING.try_with(Cell::get).unwrap_or(0) > 0 {
            if let Some((p, _)) = take(layout) {
                return p;
            }
        }
        // SAFETY: the caller's layout, as the trait requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if PLACING.try_with(Cell::get).unwrap_or(0) > 0 {
            if let Some((p, fresh)) = take(layout) {
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
        if !contains(p) && PLACING.try_with(Cell::get).unwrap_or(0) == 0 {
            // SAFETY: the system allocator's block with this layout; the caller's new size.
            return unsafe { System.realloc(p, layout, new_size) };
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
        if contains(p) {
            give_back(p, layout);
        } else {
            // SAFETY: not a region block, so the system allocator's, with this layout.
            unsafe { System.dealloc(p, layout) }
        }
    }
}

#[global_allocator]
static ALLOCATOR: Placement = Placement;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The tests that check where a block went, one at a time: one holds the region's lock on
    /// purpose (a placed allocation meanwhile goes to the system allocator).
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn placed_allocations_come_from_the_region_and_others_do_not() {
        let _serial = serial();
        let outside = Box::new([7u64; 8]);
        let inside = placed(|| Box::new([9u64; 8]));
        assert!(!contains(&*outside as *const _ as *const u8));
        assert!(contains(&*inside as *const _ as *const u8));
        assert_eq!(*inside, [9u64; 8]);
        // Nested scopes stay placed; leaving the outer one stops placing.
        let nested = placed(|| placed(|| Box::new(1u32)));
        assert!(contains(&*nested as *const u32 as *const u8));
        let after = Box::new(2u32);
        assert!(!contains(&*after as *const u32 as *const u8));
    }

    #[test]
    fn a_freed_block_is_reused_for_the_same_shape() {
        let _serial = serial();
        // A shape no other test uses (size 208, alignment 64).
        #[repr(align(64))]
        struct Odd([u8; 200]);
        let a = placed(|| Box::new(Odd([1; 200])));
        let at = &*a as *const Odd as usize;
        assert!(contains(at as *const u8));
        assert_eq!(at % 64, 0);
        drop(a);
        let b = placed(|| Box::new(Odd([2; 200])));
        assert_eq!(&*b as *const Odd as usize, at, "the freed block is reused");
        assert_eq!(b.0[199], 2);
        // Zeroed allocations of a reused block are zero.
        drop(b);
        let z: Box<[u8]> = placed(|| vec![0u8; 200].into_boxed_slice());
        assert!(z.iter().all(|&x| x == 0));
    }

    #[test]
    fn what_the_region_cannot_take_goes_to_the_system_allocator() {
        let _serial = serial();
        // Too large for one placed block.
        let big = placed(|| vec![3u8; LARGEST + 1]);
        assert!(!contains(big.as_ptr()));
        assert_eq!(big[LARGEST], 3);
        // The lock taken (another thread inside the region): no wait, the system's block.
        let held = Locked::try_lock().expect("lock free");
        let while_held = placed(|| Box::new(5u64));
        assert!(!contains(&*while_held as *const u64 as *const u8));
        drop(held);
    }

    #[test]
    fn the_region_is_huge_page_aligned() {
        let _serial = serial();
        let p = placed(|| Box::new(0u8));
        assert!(contains(&*p as *const u8));
        assert_eq!(REGION.base.load(Ordering::Acquire) % HUGE_PAGE, 0);
    }
}
