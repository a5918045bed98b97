//! Launch sites: one native stack copy per launch site, shared by every launch from it, instead
//! of a copy per launch.
//!
//! A launch site is what [`SiteKey`] names: the launching thread's whole Python stack where it
//! has one (every frame's code object and instruction, interned once by `python::stacks`), the
//! depth of the launching thread's stack at the entry point, the op's kind and handle (the
//! kernel), the entry point it came in by and the load generation (no module unloaded since the
//! site's copy was taken: its frames would read "unloaded module"). A training or inference
//! loop, like a C++ program's loop, launches from the same few hundred sites at every step. So
//! the first launch from a site copies its stack ([`super::copy`]) into this table, and later
//! launches from it copy nothing: the report unwinds the site's copy for any of them. The key
//! only finds a candidate; what makes a launch the site's is [`same_path`] (below). Launches past
//! the table's bounds, and a thread's first launch from a site it has too little stack to make
//! ([`NEW_SITE_STACK_ROOM`]), keep a copy per launch in their stream's ring.
//!
//! Why: the per-launch copy was the largest single cost of recording a host-bound PyTorch step
//! (H200, thirteenth session: the tiny step +6.3% with it, +4.4% without), 48 cache lines
//! written per launch into ring buffers that evict the framework's own data.
//!
//! What a report shows for a launch from a known site is the native stack of the site's first
//! launch, and only where it is this launch's too: a site keeps where its copy holds its return
//! addresses (`unwind::capture_copy_slots`, up to the configured stack depth), and a later
//! launch shares the copy only if its own stack holds the same return addresses at the same
//! distances from the entry point ([`same_path`]: at most 16 words of the stack the call just
//! used). Two launches from one Python stack of one kernel by different native paths (an op
//! that dispatches differently on its arguments to the same kernel: found by review) so get
//! their own stacks. `CUDABLAME_STACK=every` copies every launch's stack.

use super::copy::StackCopy;
use super::{EntryRegs, NativeStack};
use crate::safety::lock::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// One launch site (see the module doc). Plain data (24 bytes).
#[derive(Clone, Copy, Debug, Eq)]
pub(crate) struct SiteKey {
    /// The interned Python stack (`python::PythonStack::site`), [`NO_PYTHON`] for a launch
    /// without own Python frames.
    pub(crate) python: u32,
    /// Bytes of the launching thread's stack above the entry point (the same native path is at
    /// the same depth of its thread's stack).
    pub(crate) depth: u32,
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

impl SiteKey {
    /// The key as three words, compared at once (the derived comparison tested each field with a
    /// branch of its own: more code on every launch's path).
    #[inline(always)]
    fn words(&self) -> [u64; 3] {
        [
            (self.python as u64) << 32 | self.depth as u64,
            (self.loads as u64) << 32 | (self.entry_point as u64) << 8 | self.kind as u64,
            self.handle as u64,
        ]
    }
}

impl PartialEq for SiteKey {
    #[inline(always)]
    fn eq(&self, other: &SiteKey) -> bool {
        let (a, b) = (self.words(), other.words());
        ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2])) == 0
    }
}

/// Hashes what [`PartialEq`] compares (the site table's index).
impl std::hash::Hash for SiteKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.words().hash(h);
    }
}

/// [`SiteKey::python`] of a launch without own Python frames (a C or C++ program's, a
/// framework's own thread's such as PyTorch's autograd engine): its site is its native path
/// alone, which [`same_path`] checks.
pub(crate) const NO_PYTHON: u32 = u32::MAX;

/// Stack a thread must have left below the entry point for a new site to be made on it: the
/// site's first launch unwinds its copy on the launching thread (framehop and the module list:
/// several KiB), which a thread created with a small stack cannot afford (`robust.rs`,
/// `cuda_calls_on_small_stacks_are_handled_without_hurting_the_program`: a 16 KiB thread
/// crashed). Such a thread's launches share the sites other threads made, or copy per launch.
const NEW_SITE_STACK_ROOM: u64 = 64 << 10;

/// Sites kept at most, and their copies' bytes at most (past either, launches copy per launch).
pub(crate) const SITES_MAX: usize = 4096;
pub(crate) const SITE_BYTES_MAX: usize = 8 << 20;

/// Where a site's copy holds its return addresses (bytes above the entry point's stack
/// pointer, value): [`StackCopy::return_slots`], at most the configured stack depth. Made once
/// per site and never freed (4,096 sites of 16 frames at most: 1 MiB).
type Path = &'static [(u32, u64)];

/// Native paths kept per key at most: a key's launches by a further path copy their own stack
/// each ([`OTHER_PATHS`]). One kernel launched from one Python line, or from one C++ helper at
/// one stack depth, by two or three native paths (a helper called from two places at the same
/// depth, a lambda inlined at two call sites) gets a site per path. Fewer than [`WAYS`]: a
/// key's sites and its [`NO_MORE_PATHS`] entry fit in its set of a thread's recent sites.
const PATHS_PER_KEY: usize = WAYS - 1;

#[derive(Default)]
struct Table {
    /// A key's first site; the others of its native paths follow it in [`Table::next`].
    index: HashMap<SiteKey, u32>,
    copies: Vec<StackCopy>,
    paths: Vec<Path>,
    /// Per site, the next site of the same key (another native path; [`NO_NEXT`]: none).
    next: Vec<u32>,
    bytes: usize,
}

/// [`Table::next`] of a key's last site.
const NO_NEXT: u32 = u32::MAX;

/// Launches from a known key that took none of its sites' native paths, past
/// [`PATHS_PER_KEY`] or the table's bounds (each copied its own stack).
static OTHER_PATHS: AtomicUsize = AtomicUsize::new(0);

/// Launches that missed their thread's recent sites and took the table's lock
/// ([`site_uncached`]): a site's first launch on each thread, an entry evicted by other keys of
/// its set since, and the first launch of a key that makes no site (then remembered as such).
static UNCACHED: AtomicUsize = AtomicUsize::new(0);

/// Whether the live stack above `entry` holds `path`'s return addresses where the site's copy
/// does: the launch went through the same native frames (`unwind::capture_copy_slots`). Reads
/// at most a cache line or two of this thread's stack, which the call just used.
#[inline]
fn same_path(entry: &EntryRegs, path: Path, (lo, hi): (u64, u64)) -> bool {
    // Sorted by offset when made: the last is the highest.
    let Some(&(top, _)) = path.last() else {
        return true;
    };
    let base = entry.rsp;
    if base < lo || base.saturating_add(top as u64 + 8) > hi {
        return false;
    }
    path.iter().all(|&(at, value)| {
        // SAFETY: [rsp, hi) is this thread's own stack, mapped and readable (the copy was taken
        // the same way, `StackCopy::fill`), and every slot lies below the highest, checked
        // above to lie within it.
        unsafe { ((base + at as u64) as *const u64).read_unaligned() == value }
    })
}

/// Resettable: a forked child drops it without taking its lock (`safety::Resettable`).
static TABLE: crate::safety::Resettable<Mutex<Table>> = crate::safety::Resettable::new();

/// Bumped when the table is forgotten (a forked child): a thread's cached site of an earlier
/// generation is not this table's.
static GENERATION: AtomicU32 = AtomicU32::new(0);

/// Sites in the table (read without its lock: `CUDABLAME_STATS` at exit).
static SITES: AtomicUsize = AtomicUsize::new(0);

/// Sets of a thread's cache of recent sites (by a hash of the key), of [`WAYS`] entries each,
/// the most recently made first. Direct mapped with 256 slots, the cache missed 60% of the
/// launches of a loop over 200 sites on the simulated driver (`past the thread's recent sites`
/// in `CUDABLAME_STATS`; a step launches from a few hundred), each then taking the table's lock;
/// 256 sets of 4 (48 KiB per launching thread, on the heap, against 12) missed 2.5% (200 sites)
/// to 6% (300) after the first round, a set scanned in one to three cache lines.
const SETS: usize = 256;
const WAYS: usize = 4;
/// Entries of a thread's cache of recent sites.
const RECENT: usize = SETS * WAYS;

#[derive(Clone, Copy)]
struct Recent {
    key: SiteKey,
    generation: u32,
    /// Site index plus one (0: empty; [`NO_SITE`]: none can be made; [`NO_MORE_PATHS`]: the
    /// key's sites are all made and a launch by none of their paths copies its own).
    site: u32,
    path: Path,
}

const EMPTY: Recent = Recent {
    key: SiteKey {
        python: 0,
        depth: 0,
        loads: 0,
        entry_point: 0,
        kind: 0,
        handle: 0,
    },
    generation: 0,
    site: 0,
    path: &[],
};

crate::safety::per_thread! {
    /// This thread's recent sites, on the heap (a preloaded library's thread-locals are carved
    /// out of every thread's stack: `stack::python::intern`'s `RECENT_CODE` says why).
    static RECENT_SITES: std::cell::RefCell<Box<[Recent]>> =
        || std::cell::RefCell::new(vec![EMPTY; RECENT].into_boxed_slice());
}

/// The set of `key` in a thread's recent sites (its first entry's index is `set * WAYS`).
#[inline(always)]
fn slot_of(key: &SiteKey) -> usize {
    let h = (key.handle as u64)
        .wrapping_add((key.python as u64) << 32 | (key.entry_point as u64) << 8 | key.kind as u64)
        .wrapping_add((key.loads as u64) << 24)
        .wrapping_add((key.depth as u64) << 40)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 56) as usize % SETS
}

/// Where [`site_of`] found a launch's site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// The site's index (`StackRef::Site`).
    pub(crate) site: u32,
    /// Bytes of stack copied now (the site's first launch; else 0).
    pub(crate) copied: usize,
}

/// The site of `key` and the bytes copied for it now: from this thread's recent sites (no lock,
/// nothing copied), else from the table, else new, its copy taken now from `entry` (`bytes` at
/// most, as [`StackCopy::fill`]: call it in the hooked entry point whose registers `entry`
/// holds). A known site is this launch's only if the live stack holds the site's return
/// addresses where its copy does ([`same_path`]). `None` past the table's bounds, and for a
/// launch that took another native path than its site's first: copy this launch's stack as
/// without sites. `bounds`: this thread's stack, `unwind::stack_bounds` (read once by the
/// caller, whose key holds the depth below its top).
#[inline]
pub(crate) fn site_of(
    key: SiteKey,
    entry: &EntryRegs,
    bytes: &dyn Fn() -> usize,
    bounds: (u64, u64),
) -> Option<Found> {
    let generation = GENERATION.load(Ordering::Relaxed);
    let slot = slot_of(&key);
    // The set's entries of this key, newest first: a site whose path this launch took wins
    // (a key may have a site per native path); else what the key is known to make.
    let seen = RECENT_SITES.with(|r| {
        let r = r.borrow();
        // The key's sites in the set, and how many it had when its paths ran out.
        let (mut sites, mut had) = (0, None);
        for e in &r[slot * WAYS..(slot + 1) * WAYS] {
            if e.site == 0 || e.key != key || e.generation != generation {
                continue;
            }
            match e.site {
                NO_SITE => return Seen::NoSite,
                s if s >= NO_MORE_PATHS => had = Some(s - NO_MORE_PATHS),
                site if same_path(entry, e.path, bounds) => return Seen::Site(site - 1),
                _ => sites += 1,
            }
        }
        // Only with all of those sites here: one of them may be this launch's, out of the set
        // (found by review: a thread's first launch of a key by a fourth path hid the three
        // known paths' sites from that thread for good).
        match had {
            Some(n) if sites >= n => Seen::NoMorePaths,
            _ => Seen::Unknown,
        }
    });
    match seen {
        Some(Seen::Site(site)) => Some(Found { site, copied: 0 }),
        Some(Seen::NoSite) => None,
        Some(Seen::NoMorePaths) => other_path(),
        _ => site_uncached(key, entry, bytes, bounds, generation, slot),
    }
}

/// What a thread's recent sites say of a launch's key ([`site_of`]).
enum Seen {
    /// Not there, or only sites of other native paths: the table decides.
    Unknown,
    /// This launch's site (its index).
    Site(u32),
    /// The key makes no site on this thread ([`NO_SITE`]).
    NoSite,
    /// The key has all the sites it may have, none of this path's, and all of them are in the
    /// set ([`NO_MORE_PATHS`]).
    NoMorePaths,
}

/// A recent-sites entry for a key that can make no site on this thread for good (the table
/// full, the thread's stack bounds unknown or the stack pointer outside them, too little stack
/// left at that depth, a copy whose frames could not all be found): its launches copy their own
/// stack without taking the table's lock each time (found by a fourth and a fifth review). Not
/// while the module list cannot be brought up to date (a `dlclose` in progress): that key is
/// tried again.
const NO_SITE: u32 = u32::MAX;

/// A recent-sites entry for a key whose sites are all made ([`PATHS_PER_KEY`] or the table's
/// bounds) when a launch took none of their paths, plus how many sites the key had then (0 to
/// [`PATHS_PER_KEY`]): while the thread's set holds that many of the key's sites, a launch by
/// none of their paths copies its own stack without taking the table's lock; with fewer there,
/// the table is asked (a known path whose entry left the set finds its site there).
const NO_MORE_PATHS: u32 = NO_SITE - 1 - PATHS_PER_KEY as u32;

/// Remembers that `key` makes no site on this thread ([`NO_SITE`]), or no further site than
/// its `known` sites ([`NO_MORE_PATHS`], where it has some: remembered with them, so that the
/// entry is trusted at the thread's next launch by a further path, which otherwise took the
/// table's lock at every launch and filled the set with copies of the entry); returns `None`.
#[cold]
fn no_site(key: SiteKey, generation: u32, slot: usize, known: &[(u32, Path)]) -> Option<Found> {
    let sites = known.len();
    for &(site, path) in known {
        found(key, generation, slot, site, path, 0);
    }
    remember(
        slot,
        Recent {
            key,
            generation,
            site: if sites > 0 {
                NO_MORE_PATHS + sites as u32
            } else {
                NO_SITE
            },
            path: &[],
        },
    );
    if sites > 0 {
        return other_path();
    }
    None
}

/// Puts `entry` first in its set of this thread's recent sites (the set's older entries move
/// down one, its last is dropped; an older entry of the same key and site is moved, not kept
/// twice).
fn remember(slot: usize, entry: Recent) {
    let _ = RECENT_SITES.with(|r| {
        let mut r = r.borrow_mut();
        let set = &mut r[slot * WAYS..(slot + 1) * WAYS];
        let same = (set.iter()).position(|e| {
            e.key == entry.key && e.site == entry.site && e.generation == entry.generation
        });
        set[..=same.unwrap_or(WAYS - 1)].rotate_right(1);
        set[0] = entry;
    });
}

/// A launch from a known site by another native path: counted, and copied per launch. Cold.
#[cold]
#[inline(never)]
fn other_path() -> Option<Found> {
    OTHER_PATHS.fetch_add(1, Ordering::Relaxed);
    None
}

/// [`site_of`] past the thread's cache: the table's lock, the key's sites checked against this
/// launch's path, and a new copy on a path's first launch (a new key, or another native path of
/// a known one while it has fewer than [`PATHS_PER_KEY`]). Cold: once per site and thread.
#[cold]
#[inline(never)]
fn site_uncached(
    key: SiteKey,
    entry: &EntryRegs,
    bytes: &dyn Fn() -> usize,
    bounds: (u64, u64),
    generation: u32,
    slot: usize,
) -> Option<Found> {
    UNCACHED.fetch_add(1, Ordering::Relaxed);
    let mut t = TABLE.get().lock();
    // The key's sites, first to last: this launch's if it took one's path.
    let mut paths = 0;
    let mut known: [(u32, Path); PATHS_PER_KEY] = [(0, &[]); PATHS_PER_KEY];
    let mut at = t.index.get(&key).copied().unwrap_or(NO_NEXT);
    while at != NO_NEXT && paths < PATHS_PER_KEY {
        let path = t.paths[at as usize];
        if same_path(entry, path, bounds) {
            drop(t);
            return Some(found(key, generation, slot, at, path, 0));
        }
        known[paths] = (at, path);
        paths += 1;
        at = t.next[at as usize];
    }
    let bytes = bytes();
    // Unknown stack bounds, or a stack pointer outside them (a signal stack): no copy to take,
    // so no site (found by review: an empty site's launches were marked as sharing it).
    let (lo, hi) = bounds;
    if paths >= PATHS_PER_KEY
        || t.copies.len() >= SITES_MAX
        || t.bytes + bytes > SITE_BYTES_MAX
        || lo == 0
        || !(lo..hi).contains(&entry.rsp)
        || entry.rsp - lo < NEW_SITE_STACK_ROOM
    {
        drop(t);
        return no_site(key, generation, slot, &known[..paths]);
    }
    // The unwind below must know every module loaded now (found by a fourth review: a site made
    // within `RESCAN_NS` of a library's load unwound its copy without that library's rules,
    // found one or two slots, and passed launches by other native paths, whose report then
    // unwound the copy in full with the new list).
    let epoch = super::unwind::unload_epoch();
    if !super::unwind::module_list_current(crate::clock::now_ns()) {
        return None;
    }
    let mut copy = StackCopy::new(bytes);
    copy.fill(0, entry);
    // One unwind of the new copy, on the launching thread: once per site.
    let depth = crate::config::get().stack_depth;
    // No frame past the entry point's, or a frame whose return address was not found in the
    // copy: nothing to check a later launch against (an empty path passes every launch; found by
    // a fourth review). With the module list current, the same key (the same depth, so the same
    // frames) fares the same next time: remembered, else its every launch would take the lock
    // and unwind again (a fifth review); but not when a `dlclose` began meanwhile (the unwind
    // then found no module list): that key is tried again.
    let slots = copy.return_slots(depth).filter(|s| !s.is_empty());
    let Some(mut slots) = slots else {
        drop(t);
        if super::unwind::unload_epoch() != epoch {
            return None;
        }
        return no_site(key, generation, slot, &known[..paths]);
    };
    slots.sort_unstable_by_key(|&(at, _)| at); // `same_path` bounds the last
    let path: Path = Box::leak(slots.into_boxed_slice());
    let site = t.copies.len() as u32;
    t.copies.push(copy);
    t.paths.push(path);
    t.next.push(NO_NEXT);
    t.bytes += bytes;
    match known[..paths].last() {
        Some(&(last, _)) => t.next[last as usize] = site,
        None => {
            t.index.insert(key, site);
        }
    }
    SITES.store(t.copies.len(), Ordering::Relaxed);
    drop(t);
    Some(found(key, generation, slot, site, path, bytes))
}

/// Remembers `site` (of `key`, by `path`) first in its set of this thread's recent sites;
/// returns it with the bytes copied now.
fn found(
    key: SiteKey,
    generation: u32,
    slot: usize,
    site: u32,
    path: Path,
    copied: usize,
) -> Found {
    remember(
        slot,
        Recent {
            key,
            generation,
            site: site + 1,
            path,
        },
    );
    Found { site, copied }
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

/// Sites known so far, launches from one of them that took another native path and copied
/// their own stack, and launches that looked past their thread's recent sites ([`UNCACHED`])
/// (`CUDABLAME_STATS`).
pub(crate) fn count() -> (usize, usize, usize) {
    (
        SITES.load(Ordering::Relaxed),
        OTHER_PATHS.load(Ordering::Relaxed),
        UNCACHED.load(Ordering::Relaxed),
    )
}

/// Forgets every site (a forked child: the parent's threads may have held the table's lock; the
/// interned Python stacks, which the keys name, are inherited as they are). Takes no lock.
pub(crate) fn forget_after_fork() {
    TABLE.reset_in_child();
    SITES.store(0, Ordering::Relaxed);
    OTHER_PATHS.store(0, Ordering::Relaxed);
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(python: u32, handle: usize) -> SiteKey {
        SiteKey {
            python,
            depth: 0,
            loads: 0,
            entry_point: 3,
            kind: 0,
            handle,
        }
    }

    #[inline(never)]
    fn launch_from_here(k: SiteKey) -> Option<u32> {
        let regs = EntryRegs::here();
        let site =
            site_of(k, &regs, &|| 4096, crate::stack::unwind::stack_bounds()).map(|f| f.site);
        std::hint::black_box(&regs); // keeps this frame: not a tail call
        site
    }

    #[inline(never)]
    fn outer_launch(k: SiteKey) -> Option<u32> {
        let site = launch_from_here(k);
        std::hint::black_box(&site);
        site
    }

    /// How many of this thread's recent-site entries remember `k` as making no site.
    fn remembered_as_no_site(k: SiteKey) -> usize {
        RECENT_SITES
            .with(|r| {
                (r.borrow().iter())
                    .filter(|e| e.key == k && e.site == NO_SITE)
                    .count()
            })
            .unwrap()
    }

    /// Forgets this thread's recent sites: its next launch finds its site in the table.
    fn forget_recent() {
        let _ = RECENT_SITES.with(|r| r.borrow_mut().fill(EMPTY));
    }

    /// Launches through `launch` from one call site, `n` times (the second to last after
    /// forgetting this thread's recent sites: from the table). Out of line and `n` opaque: a
    /// loop unrolled into the test (`n` a constant there) made each launch a call site of its
    /// own, with its own return address, so another native path (seen once the crate's
    /// inlining changed).
    #[inline(never)]
    fn launches(n: usize, launch: fn(SiteKey) -> Option<u32>, k: SiteKey) -> Vec<Option<u32>> {
        let mut got = Vec::new();
        for i in 0..std::hint::black_box(n) {
            if i + 2 == n {
                forget_recent();
            }
            got.push(launch(k));
        }
        got
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_site_is_copied_once_and_its_later_launches_share_it() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let before = count().0;
        let k = key(0x5151_0001, 0xabc0);
        let got = launches(4, outer_launch, k);
        let a = got[0].expect("a site");
        assert_eq!(
            got,
            vec![Some(a); 4],
            "from this thread's cache and from the table"
        );
        assert_eq!(count().0, before + 1, "one copy for the four launches");
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

    #[inline(never)]
    fn another_outer_launch(k: SiteKey) -> Option<u32> {
        let mut pad = [0u8; 40]; // another frame size too
        std::hint::black_box(&mut pad);
        let site = launch_from_here(k);
        std::hint::black_box(&site);
        site
    }

    /// A launch with a site's key but through other native frames is not given the site's
    /// stack (found by review: one Python line reaching one kernel by two native paths showed
    /// the first path for both): it gets a site of its own, copied once and shared by that
    /// path's later launches, whether its thread's cache or the table knows the sites; and the
    /// first path still shares the first. (Each launch by the second path copied its own 8 KiB
    /// before: a C++ loop whose one launch line was reached from two call sites at one depth
    /// spent half its launches copying, twenty-second session.)
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_launch_by_another_native_path_gets_its_own_site() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let k = key(0x5151_0003, 0xabd0);
        let (sites, others, _) = count();
        // One call site for all (the frames above it are part of the path).
        let paths: [fn(SiteKey) -> Option<u32>; 3] =
            [outer_launch, another_outer_launch, outer_launch];
        let got: Vec<Vec<Option<u32>>> = paths.iter().map(|&f| launches(3, f, k)).collect();
        let a = got[0][0].expect("a site");
        let b = got[1][0].expect("the second path's site");
        assert_ne!(a, b);
        assert_eq!(
            got,
            vec![vec![Some(a); 3], vec![Some(b); 3], vec![Some(a); 3]]
        );
        assert_eq!(count().0, sites + 2, "one copy per path");
        assert_eq!(count().1, others, "no launch copied its own stack");
        // Each site's copy is its own path's.
        let names = super::super::test_function_names(&unwind(b, 16));
        assert!(
            names.iter().any(|n| n.contains("another_outer_launch")),
            "{names:?}"
        );
    }

    /// A launch through `via::<N>` (a function of its own per `N`, with an N-byte frame).
    #[inline(never)]
    fn via<const N: usize>(k: SiteKey) -> Option<u32> {
        let mut pad = [0u8; N];
        std::hint::black_box(&mut pad);
        let site = launch_from_here(k);
        std::hint::black_box(&site);
        site
    }

    /// Launches of `k` by `plan`, from one call site (the frames above a launch are part of its
    /// path: every round must run in this one call): per round, whether this thread's recent
    /// sites are forgotten first (then the table answers), and the indices of `paths` to launch
    /// through, in order.
    #[inline(never)]
    fn rounds(
        paths: &[fn(SiteKey) -> Option<u32>],
        k: SiteKey,
        plan: &[(bool, &[usize])],
    ) -> Vec<Vec<Option<u32>>> {
        // Every bound opaque: a loop the compiler can peel or unroll makes a launch of each
        // round or element a call site of its own (see `launches`).
        let mut got = Vec::new();
        for &(forget, order) in &plan[..std::hint::black_box(plan.len())] {
            if std::hint::black_box(forget) {
                forget_recent();
            }
            let mut row = Vec::new();
            for &i in &order[..std::hint::black_box(order.len())] {
                row.push(paths[i](k));
            }
            got.push(row);
        }
        got
    }

    /// A key keeps at most `PATHS_PER_KEY` sites: a launch by a further path copies its own
    /// stack (counted), remembered so that the thread does not take the table's lock for it
    /// again, and the known paths keep their sites, also on a thread whose first launch of the
    /// key was by a further path.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_key_keeps_a_bounded_number_of_paths() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let k = key(0x5151_0005, 0xabd8);
        forget_recent();
        let (sites, others, _) = count();
        let paths: [fn(SiteKey) -> Option<u32>; 5] =
            [via::<8>, via::<24>, via::<40>, via::<56>, via::<72>];
        assert_eq!(PATHS_PER_KEY, 3, "the paths below");
        let ordered: &[usize] = &[0, 1, 2, 3, 4];
        // A further path first (found by review: the thread's entry for the further paths hid
        // the three known paths' sites from it for good).
        let reversed: &[usize] = &[3, 0, 1, 2, 4];
        let got = rounds(
            &paths,
            k,
            &[
                (false, ordered),
                (false, ordered),
                (true, ordered),
                (true, reversed),
                (false, reversed),
            ],
        );
        let known: Vec<u32> = got[0][..3].iter().map(|s| s.expect("a site")).collect();
        assert_eq!(
            known.iter().collect::<std::collections::HashSet<_>>().len(),
            3
        );
        // Every round alike: from the thread's cache (the further paths remembered as past the
        // key's sites), and after forgetting it, from the table.
        for (r, row) in got.iter().enumerate() {
            let order = if r < 3 { ordered } else { reversed };
            let want: Vec<Option<u32>> = (order.iter())
                .map(|&i| if i < 3 { Some(known[i]) } else { None })
                .collect();
            assert_eq!(row, &want, "round {r}");
        }
        assert_eq!(count().0, sites + 3);
        assert_eq!(count().1, others + 10);
        // Remembered once on this thread, with the key's three sites.
        let remembered = recent_entries(k);
        assert_eq!(
            remembered
                .iter()
                .filter(|&&e| e == NO_MORE_PATHS + 3)
                .count(),
            1,
            "{remembered:?}"
        );
    }

    /// This thread's recent-sites entries of key `k` (their `site` fields), set order.
    fn recent_entries(k: SiteKey) -> Vec<u32> {
        RECENT_SITES
            .with(|r| {
                (r.borrow().iter())
                    .filter(|e| e.key == k && e.site != 0)
                    .map(|e| e.site)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A thread whose launches of a key come only by a further path, the key's known sites not
    /// in its set (made by other threads, or evicted by other keys of the set), takes the
    /// table's lock once for it, not at every launch; nor does it fill the set with copies of
    /// its entry for the further paths (which evict other keys' sites).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_further_path_alone_takes_the_tables_lock_once() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let k = key(0x5151_0007, 0xabe8);
        forget_recent();
        let paths: [fn(SiteKey) -> Option<u32>; 4] = [via::<8>, via::<24>, via::<40>, via::<56>];
        let first: &[usize] = &[0, 1, 2];
        let further: &[usize] = &[3, 3, 3, 3, 3];
        let got = rounds(&paths, k, &[(false, first), (true, further)]);
        assert!(got[0].iter().all(|s| s.is_some()), "{got:?}");
        assert_eq!(got[1], vec![None; 5]);
        let entries = recent_entries(k);
        let further_entries = entries
            .iter()
            .filter(|&&e| e >= NO_MORE_PATHS && e != NO_SITE);
        assert_eq!(further_entries.count(), 1, "{entries:x?}");
        // And the next launch by it answers from the set (no lock): the entry is trusted.
        let (_, _, uncached) = count();
        let again = rounds(&paths, k, &[(false, &[3, 3, 3])]);
        assert_eq!(again[0], vec![None; 3]);
        assert_eq!(
            count().2,
            uncached,
            "launches by the further path took the table's lock"
        );
    }

    /// A site made while the module list is unavailable (a `dlclose` in progress on another
    /// thread, even one that only drops a reference: the load generation stays) has no return
    /// slots, and `same_path` then passes every later launch, whatever its native path.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_site_made_during_a_dlclose_does_not_take_other_paths() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let k = key(0x5151_0009, 0xabe0);
        if let Some(a) = super::super::unwind::unloading(|| outer_launch(k)) {
            // The copy unwinds fully now (module list back): it shows outer_launch's path.
            let names = super::super::test_function_names(&unwind(a, 16));
            assert!(
                names.iter().any(|n| n.contains("outer_launch")),
                "{names:?}"
            );
        }
        let a = outer_launch(k).expect("a site, made once the module list is back");
        forget_recent();
        assert_other_paths_own(k, a);
    }

    /// A launch of key `k` by another path than site `a`'s is not given `a`: it gets a site of
    /// its own, whose copy shows its path, or copies its own stack.
    fn assert_other_paths_own(k: SiteKey, a: u32) {
        let other = another_outer_launch(k);
        assert_ne!(other, Some(a), "another path was given the site's stack");
        if let Some(b) = other {
            let names = super::super::test_function_names(&unwind(b, 16));
            assert!(
                names.iter().any(|n| n.contains("another_outer_launch")),
                "{names:?}"
            );
        }
    }

    /// A site made while the module list does not know the launching code (a library loaded
    /// less than `RESCAN_NS` before the launch, as Triton's launcher modules are) keeps the
    /// return slots of that short or frame-pointer-guessed unwind; the report later unwinds the
    /// site's copy with the full list. A launch by another native path must not be given it.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_site_made_with_a_stale_module_list_does_not_take_other_paths() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let k = key(0x5151_000b, 0xabf0);
        let made = super::super::unwind::with_stale_module_list(|| outer_launch(k));
        // The module list is brought up to date first, so the site is made, with every frame's
        // slot (without that, the stale unwind either made a site of one or two slots or, since
        // a copy that misses a frame's slot makes none, no site: the test returned early
        // and no longer checked anything).
        let a = made.expect("a site, its copy unwound with the current module list");
        // The module list is the real one again: the site's copy unwinds through outer_launch.
        let names = super::super::test_function_names(&unwind(a, 16));
        assert!(
            names.iter().any(|n| n.contains("outer_launch")),
            "{names:?}"
        );
        forget_recent();
        assert_other_paths_own(k, a);
    }

    /// A key that can make no site on this thread (here: the stack pointer outside the
    /// thread's stack) is remembered as such: its later launches take no table lock.
    #[test]
    fn a_key_that_can_make_no_site_does_not_take_the_tables_lock_again() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let bounds = crate::stack::unwind::stack_bounds();
        let outside = EntryRegs {
            rip: 0,
            rsp: 64,
            rbp: 0,
        };
        let k = key(0x5151_2000, 0xd00d0);
        forget_recent();
        for _ in 0..5 {
            assert_eq!(site_of(k, &outside, &|| 4096, bounds), None);
        }
        // Remembered in the thread's cache as making no site (a hit returns at once); the
        // process-wide miss count is not asserted: other tests may launch meanwhile.
        assert_eq!(remembered_as_no_site(k), 1);
    }

    /// A copy too short to hold the caller's return address (8 bytes) gives no path: the key
    /// is remembered as making no site, not tried again at every launch (a fifth review: each
    /// launch took the table's lock, copied and unwound).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_key_whose_copy_gives_no_path_is_remembered() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let k = key(0x5151_3000, 0xd00e0);
        forget_recent();
        for _ in 0..3 {
            let regs = EntryRegs::here();
            let got = site_of(k, &regs, &|| 8, crate::stack::unwind::stack_bounds());
            std::hint::black_box(&regs);
            assert_eq!(got, None);
        }
        assert_eq!(remembered_as_no_site(k), 1);
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
        assert!(used.len() > 256 / 2, "{} sets of {SETS}", used.len());
    }
}
