//! Launch sites: in a process whose launches carry Python frames, one native stack copy per
//! launch site, shared by every launch from it, instead of a copy per launch.
//!
//! A launch site is what [`SiteKey`] names: the launching thread's whole Python stack (every
//! frame's code object and instruction, interned once by `python::stacks`), the op's kind and
//! handle (the kernel), the entry point it came in by and the load generation (no module unloaded
//! since the site's copy was taken: its frames would read "unloaded module"). The native frames
//! between the innermost Python frame and the driver (the extension module, a framework's
//! dispatcher, its op and kernel launcher, the CUDA runtime) follow from the Python call and the
//! kernel it launched; a training or inference loop launches from the same few hundred sites at
//! every step. So the first launch from a site copies its stack ([`super::copy`]) into this table,
//! and later launches from it copy nothing: the report unwinds the site's copy for any of them.
//! Launches without own Python frames (a C++ thread, PyTorch's autograd engine) and those past the
//! table's bounds keep a copy per launch in their stream's ring.
//!
//! Why: the per-launch copy was the largest single cost of recording a host-bound PyTorch step
//! (H200, thirteenth session: the tiny step +6.3% with it, +4.4% without), 48 cache lines
//! written per launch into ring buffers that evict the framework's own data.
//!
//! What a report shows for a launch from a known site is the native stack of the site's first
//! launch. Two launches from one Python stack of one kernel by different native paths (an op
//! that dispatches differently on its arguments' shapes or types to the same kernel) show the
//! first one's path: `CUDABLAME_STACK=every` copies every launch's stack.

use super::copy::StackCopy;
use super::{EntryRegs, NativeStack};
use crate::safety::lock::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// One launch site (see the module doc). Plain data (24 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SiteKey {
    /// The interned Python stack (`python::PythonStack::site`).
    pub(crate) python: u32,
    /// The load generation (`unwind::load_generation`, low bits): a copy taken before a module
    /// was unloaded reads its frames as "unloaded module", so a launch after an unload (a library
    /// on the native path loaded again) is another site.
    pub(crate) loads: u32,
    /// The entry point (`EntryPoint as u16`).
    pub(crate) entry_point: u16,
    /// The op's kind (`OpKind as u8`).
    pub(crate) kind: u8,
    /// The kernel's `CUfunction`, or 0 for copies and memsets.
    pub(crate) handle: usize,
}

/// Sites kept at most, and their copies' bytes at most (past either, launches copy per launch).
pub(crate) const SITES_MAX: usize = 4096;
pub(crate) const SITE_BYTES_MAX: usize = 8 << 20;

#[derive(Default)]
struct Table {
    index: HashMap<SiteKey, u32>,
    copies: Vec<StackCopy>,
    bytes: usize,
}

/// Resettable: a forked child drops it without taking its lock (`safety::Resettable`).
static TABLE: crate::safety::Resettable<Mutex<Table>> = crate::safety::Resettable::new();

/// Bumped when the table is forgotten (a forked child): a thread's cached site of an earlier
/// generation is not this table's.
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// Sites in the table (read without its lock: `CUDABLAME_STATS` at exit).
static SITES: AtomicUsize = AtomicUsize::new(0);

/// Slots of a thread's cache of recent sites (direct mapped by a hash of the key).
const RECENT: usize = 256;

#[derive(Clone, Copy)]
struct Recent {
    key: SiteKey,
    generation: u32,
    /// Site index plus one (0: empty).
    site: u32,
}

const EMPTY: Recent = Recent {
    key: SiteKey {
        python: 0,
        loads: 0,
        entry_point: 0,
        kind: 0,
        handle: 0,
    },
    generation: 0,
    site: 0,
};

crate::safety::per_thread! {
    /// This thread's recent sites, on the heap (a preloaded library's thread-locals are carved
    /// out of every thread's stack: `stack::python::intern`'s `RECENT_CODE` says why).
    static RECENT_SITES: std::cell::RefCell<Box<[Recent]>> =
        || std::cell::RefCell::new(vec![EMPTY; RECENT].into_boxed_slice());
}

#[inline(always)]
fn slot_of(key: &SiteKey) -> usize {
    let h = (key.handle as u64)
        .wrapping_add((key.python as u64) << 32 | (key.entry_point as u64) << 8 | key.kind as u64)
        .wrapping_add((key.loads as u64) << 24)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 56) as usize % RECENT
}

/// The site of `key` and the bytes copied for it now: from this thread's recent sites (no lock,
/// nothing copied), else from the table, else new, its copy taken now from `entry` (`bytes` at
/// most, as [`StackCopy::fill`]: call it in the hooked entry point whose registers `entry`
/// holds). `None` past the table's bounds: copy this launch's stack as without sites.
#[inline]
pub(crate) fn site_of(key: SiteKey, entry: &EntryRegs, bytes: usize) -> Option<(u32, usize)> {
    let generation = GENERATION.load(Ordering::Relaxed);
    let slot = slot_of(&key);
    let hit = RECENT_SITES.with(|r| {
        let r = r.borrow();
        let s = &r[slot];
        (s.site != 0 && s.key == key && s.generation == generation).then(|| s.site - 1)
    });
    match hit {
        Some(Some(site)) => Some((site, 0)),
        _ => site_uncached(key, entry, bytes, generation, slot),
    }
}

/// [`site_of`] past the thread's cache: the table's lock, and a new copy on a site's first
/// launch. Cold: once per site and thread.
#[cold]
#[inline(never)]
fn site_uncached(
    key: SiteKey,
    entry: &EntryRegs,
    bytes: usize,
    generation: u32,
    slot: usize,
) -> Option<(u32, usize)> {
    let mut copied = 0;
    let site = {
        let mut t = TABLE.get().lock();
        match t.index.get(&key) {
            Some(&site) => site,
            None => {
                if t.copies.len() >= SITES_MAX || t.bytes + bytes > SITE_BYTES_MAX {
                    return None;
                }
                let mut copy = StackCopy::new(bytes);
                copy.fill(0, entry);
                let site = t.copies.len() as u32;
                t.copies.push(copy);
                t.bytes += bytes;
                copied = bytes;
                t.index.insert(key, site);
                SITES.store(t.copies.len(), Ordering::Relaxed);
                site
            }
        }
    };
    let _ = RECENT_SITES.with(|r| {
        r.borrow_mut()[slot] = Recent {
            key,
            generation,
            site: site + 1,
        }
    });
    Some((site, copied))
}

/// Report time: the native stack of site `site` (its copy unwound, `depth` frames), empty if
/// there is no such site.
pub(crate) fn unwind(site: u32, depth: usize) -> NativeStack {
    let t = TABLE.get().lock();
    match t.copies.get(site as usize) {
        Some(c) => c.unwind(depth),
        None => NativeStack::EMPTY,
    }
}

/// Sites known so far (`CUDABLAME_STATS`).
pub(crate) fn count() -> usize {
    SITES.load(Ordering::Relaxed)
}

/// Forgets every site (a forked child: the parent's threads may have held the table's lock; the
/// interned Python stacks, which the keys name, are inherited as they are). Takes no lock.
pub(crate) fn forget_after_fork() {
    TABLE.reset_in_child();
    SITES.store(0, Ordering::Relaxed);
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(python: u32, handle: usize) -> SiteKey {
        SiteKey {
            python,
            loads: 0,
            entry_point: 3,
            kind: 0,
            handle,
        }
    }

    #[inline(never)]
    fn launch_from_here(k: SiteKey) -> Option<u32> {
        let regs = EntryRegs::here();
        let site = site_of(k, &regs, 4096).map(|(site, _)| site);
        std::hint::black_box(&regs); // keeps this frame: not a tail call
        site
    }

    #[inline(never)]
    fn outer_launch(k: SiteKey) -> Option<u32> {
        let site = launch_from_here(k);
        std::hint::black_box(&site);
        site
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_site_is_copied_once_and_its_later_launches_share_it() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let before = count();
        let a = outer_launch(key(0x5151_0001, 0xabc0)).expect("a site");
        // The same site again, from this thread (its cache) and from another (the table).
        assert_eq!(outer_launch(key(0x5151_0001, 0xabc0)), Some(a));
        let other = std::thread::spawn(|| outer_launch(key(0x5151_0001, 0xabc0)))
            .join()
            .unwrap();
        assert_eq!(other, Some(a));
        assert_eq!(count(), before + 1, "one copy for the three launches");
        // Another kernel or another Python stack is another site.
        let b = outer_launch(key(0x5151_0001, 0xabc8)).expect("b site");
        let c = outer_launch(key(0x5151_0002, 0xabc0)).expect("c site");
        assert!(a != b && b != c && a != c);
        // The site's stack is the first launch's: it unwinds through this test's frames.
        let stack = unwind(a, 16);
        let names = super::super::test_function_names(&stack);
        assert!(
            names.iter().any(|n| n.contains("outer_launch")),
            "{names:?}"
        );
    }

    #[test]
    fn keys_that_differ_in_any_field_take_different_slots_mostly() {
        // The cache only helps if a step's few hundred sites spread over its slots.
        let mut used = std::collections::HashSet::new();
        for python in 0..16u32 {
            for handle in 0..16usize {
                used.insert(slot_of(&key(python, 0x7f00_0000_0000 + handle * 0x40)));
            }
        }
        assert!(used.len() > RECENT / 2, "{} slots of {RECENT}", used.len());
    }
}
