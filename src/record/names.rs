//! Kernel names by handle: the name the program looked the handle up by (`cuModuleGetFunction`,
//! `cuLibraryGetKernel`), else the driver's answer at first launch (`cuFuncGetName`, then
//! `cuKernelGetName`). Kept because the driver does not always answer after a sticky error (on the
//! H200 functions of a module loaded with `cuModuleLoadData` came back unnamed). Per launch this
//! costs a compare in a thread-local table of recent kernels, else one thread-local set lookup.

use crate::real::Driver;
use crate::safety::lock::RwLock;
use crate::safety::{per_thread, Resettable};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes pointer-sized keys by one multiplication (handles are already well spread).
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type Fast = BuildHasherDefault<AddressHasher>;

/// Mangled names by kernel handle (`None`: the driver did not say).
/// Resettable: a forked child drops it without taking its lock (`safety::Resettable`).
#[link_section = "cudablame_hot"] // read by every recorded op: see lib.rs
static NAMES: Resettable<RwLock<HashMap<usize, Option<String>, Fast>>> = Resettable::new();

/// Slots of [`Seen::recent`] (a power of two): 4 KiB, more than the kernels a training step
/// launches.
const RECENT_HANDLES: usize = 512;

/// The kernel handles this thread has named (or found named), with the recent ones in a
/// direct-mapped table in front of the set: a launch of a kernel this thread launched before
/// costs one compare in one cache line, not a set lookup (two lines: control bytes and bucket).
/// A PyTorch step cycles through a few hundred kernels, so the set's lines were cold at most
/// launches.
struct Seen {
    /// On the heap: see [`SEEN`].
    recent: Box<[Cell<usize>; RECENT_HANDLES]>,
    all: RefCell<HashSet<usize, Fast>>,
}

per_thread! {
    /// This thread's [`Seen`], dropped at thread exit by a key destructor (no thread-local
    /// destructor: `safety::PerThread`). Its 4 KiB table is built on the heap in place (collected):
    /// as an array in `Seen` it was a 4 KiB temporary on the stack of the thread's first
    /// launch, which a 16 KiB thread (`robust.rs`, small stacks) could not spare.
    static SEEN: Seen = || {
        let recent: Box<[Cell<usize>]> = (0..RECENT_HANDLES).map(|_| Cell::new(0)).collect();
        Seen {
            recent: recent.try_into().unwrap_or_else(|_| unreachable!("RECENT_HANDLES slots")),
            all: RefCell::new(HashSet::with_hasher(BuildHasherDefault::new())),
        }
    };
}

/// Whether this thread sees kernel `handle` for the first time (true without this thread's
/// [`Seen`]: a hook after this thread's value was dropped asks the process-wide table).
#[inline]
fn first_sight(handle: usize) -> bool {
    SEEN.with(|s| {
        let slot = &s.recent[(handle.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 55) % RECENT_HANDLES];
        if slot.get() == handle && handle != 0 {
            return false;
        }
        slot.set(handle);
        new_to_set(s, handle)
    })
    .unwrap_or(true)
}

/// [`first_sight`] past the table of recent kernels: whether `handle` is new to this thread's
/// set. Out of line (a step's few hundred kernels mostly hit the table).
#[inline(never)]
fn new_to_set(s: &Seen, handle: usize) -> bool {
    s.all
        .try_borrow_mut()
        .map_or(true, |mut all| all.insert(handle))
}

/// Called for every kernel launch: names `handle` the first time this thread sees it.
#[inline]
pub(crate) fn note(driver: &Driver, handle: usize) {
    if first_sight(handle) {
        first_seen(driver, handle);
    }
}

/// [`note`] for a kernel this thread launches for the first time: asks the driver unless the
/// handle is named already. Cold, out of line: the launch path's code stays dense.
#[cold]
#[inline(never)]
fn first_seen(driver: &Driver, handle: usize) {
    if !matches!(NAMES.get().read().get(&handle), Some(Some(_))) {
        if let Some(name) = driver.kernel_name(handle) {
            set(handle, name);
        }
    }
}

/// Names kept at most (a program that loads and unloads modules forever, e.g. a JIT, makes new
/// handles forever); past it an arbitrary old one is forgotten for each new one (the driver is
/// still asked at report time).
const NAMES_KEPT: usize = 64 * 1024;

/// Records the name the program looked a handle up by (`cuModuleGetFunction`, ...).
pub(crate) fn set(handle: usize, name: String) {
    let mut names = NAMES.get().write();
    if names.len() >= NAMES_KEPT && !names.contains_key(&handle) {
        if let Some(&old) = names.keys().next() {
            names.remove(&old);
        }
    }
    names.insert(handle, Some(name));
}

/// `handle` has the name of `of` (`cuKernelGetFunction`).
pub(crate) fn alias(handle: usize, of: usize) {
    let name = NAMES.get().read().get(&of).cloned().flatten();
    if let Some(n) = name {
        set(handle, n);
    }
}

/// The mangled name of `handle`: from the cache, else from the driver now.
pub(crate) fn name(driver: Option<&Driver>, handle: usize) -> Option<String> {
    if let Some(Some(n)) = NAMES.get().read().get(&handle) {
        return Some(n.clone());
    }
    driver.and_then(|d| d.kernel_name(handle))
}

/// Forgets the names and this thread's set (a forked child, tests). Takes no lock.
pub(crate) fn clear() {
    NAMES.reset_in_child();
    let _ = SEEN.if_made(|s| {
        s.recent.iter().for_each(|c| c.set(0));
        s.all.replace(HashSet::default());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_handle_is_new_once_per_thread_until_cleared() {
        clear();
        // One kernel in a loop (the last-handle check), then alternating kernels (the set).
        assert!(first_sight(0x10));
        assert!(!first_sight(0x10));
        assert!(first_sight(0x20));
        assert!(!first_sight(0x10));
        assert!(!first_sight(0x20));
        assert!(first_sight(0x30));
        // Another thread has its own set.
        assert!(std::thread::spawn(|| first_sight(0x10)).join().unwrap());
        // A forked child (clear) asks again, the last handle included.
        clear();
        assert!(first_sight(0x30));
        assert!(first_sight(0x10));
    }
}
