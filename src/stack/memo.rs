//! Memoized unwinds ("interned stacks") for the launch hot path.
//!
//! A training loop launches from the same few hundred call paths again and again, and at the same
//! stack depth each time. An unwind is a pure function of its starting registers (`rip`, `rsp`,
//! and `rbp` when a frame-pointer rule uses it), the loaded modules and the stack words it reads.
//! So each unwind is stored with every `(address, value)` it read; a later unwind from the same
//! registers whose stack still holds the same values at those addresses would read the same
//! values in the same order and return the same frames: the stored frames are returned after
//! re-reading those words (one or two per frame, all in this thread's hot stack), instead of
//! looking up an unwind rule per frame in caches that a large program keeps evicting (measured on
//! the H200 in a PyTorch GPT step: 75 to 300 ns a frame for 17 frames).
//!
//! Every read is checked, saved `rbp` slots included, and so is the starting `rbp`: exact, at the
//! price of misses where a program keeps changing data in `rbp` (most libraries do not keep frame
//! pointers). An attempt to drop those checks by a second unwind with them poisoned had to use a
//! fresh rule cache (framehop caches a fallback rule where a poisoned value makes CFI evaluation
//! fail) and cost more on each miss than it saved (measured on the H200).
//!
//! Per thread: `SETS` x `WAYS` entries of about 1 KiB, allocated zeroed (pages are touched only
//! when used) on the thread's first stored unwind. Sets are chosen by a hash of `rip`, `rsp` and a
//! caller's hint (the innermost Python frame, which tells launch sites at one native depth apart);
//! replacement is round robin within a set.

use super::EntryRegs;

/// The most frames a memoized unwind holds; deeper requests are not memoized.
pub const MAX_FRAMES: usize = 24;
/// Stack words read per unwind that fit (a return address and a saved `rbp` per frame).
const MAX_READS: usize = 2 * MAX_FRAMES;
const SET_BITS: u32 = 7;
const SETS: usize = 1 << SET_BITS;
const WAYS: usize = 16;

/// What an unwind starts from.
pub struct Key {
    pub regs: EntryRegs,
    /// The module list's version (`unwind::Modules::version`).
    pub version: u64,
    /// Frames requested.
    pub frames: usize,
    pub hint: u64,
}

/// The stack words one unwind read, in order.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Reads {
    n: u8,
    overflow: bool,
    addr: [u64; MAX_READS],
    value: [u64; MAX_READS],
}

impl Default for Reads {
    fn default() -> Self {
        Reads {
            n: 0,
            overflow: false,
            addr: [0; MAX_READS],
            value: [0; MAX_READS],
        }
    }
}

impl Reads {
    pub fn push(&mut self, addr: u64, value: u64) {
        let i = self.n as usize;
        if i < MAX_READS {
            self.addr[i] = addr;
            self.value[i] = value;
            self.n += 1;
        } else {
            self.overflow = true;
        }
    }

    /// Whether every read was logged (else the unwind cannot be memoized).
    pub fn complete(&self) -> bool {
        !self.overflow
    }
}

/// One memoized unwind. All-zero is a valid, empty entry (`version` 0 matches no module list).
#[derive(Clone, Copy)]
struct Entry {
    version: u64,
    rip: u64,
    rsp: u64,
    rbp: u64,
    hint: u64,
    frames: u8,
    n_ips: u8,
    ips: [usize; MAX_FRAMES],
    reads: Reads,
}

/// A thread's memoized unwinds.
#[derive(Default)]
pub struct Table {
    entries: Vec<Entry>,
    next_way: Vec<u8>,
}

fn set_of(key: &Key) -> usize {
    let h = key.regs.rsp ^ key.regs.rip.rotate_left(23) ^ key.hint.wrapping_mul(0x9E37_79B9);
    (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SET_BITS)) as usize
}

impl Table {
    /// Whether an unwind of `frames` frames can be memoized.
    pub fn fits(frames: usize) -> bool {
        frames <= MAX_FRAMES
    }

    /// The frames of a stored unwind that `key` would reproduce, copied into `out`; their count.
    pub fn find(&self, key: &Key, out: &mut [usize]) -> Option<usize> {
        if self.entries.is_empty() || !Self::fits(key.frames) {
            return None;
        }
        let set = set_of(key);
        self.entries[set * WAYS..(set + 1) * WAYS]
            .iter()
            .find(|e| {
                e.version == key.version
                    && e.rsp == key.regs.rsp
                    && e.rip == key.regs.rip
                    && e.frames as usize == key.frames
                    && e.hint == key.hint
                    && e.rbp == key.regs.rbp
                    && (0..e.reads.n as usize).all(|i| {
                        // SAFETY: the address was inside this thread's stack, 8-byte aligned,
                        // when the unwind read it; a thread's stack does not move (the table is
                        // thread-local).
                        let now = unsafe { std::ptr::read_volatile(e.reads.addr[i] as *const u64) };
                        now == e.reads.value[i]
                    })
            })
            .map(|e| {
                let n = e.n_ips as usize;
                out[..n].copy_from_slice(&e.ips[..n]);
                n
            })
    }

    /// Stores the unwind `ips` that started from `key` and read `reads`.
    pub fn store(&mut self, key: &Key, ips: &[usize], reads: &Reads) {
        if !Self::fits(key.frames) || ips.len() > MAX_FRAMES {
            return;
        }
        if self.entries.is_empty() {
            let Some(entries) = zeroed_entries(SETS * WAYS) else {
                return;
            };
            self.entries = entries;
            self.next_way = vec![0; SETS];
        }
        let set = set_of(key);
        let way = self.next_way[set] as usize % WAYS;
        self.next_way[set] = (way + 1) as u8;
        let mut e = Entry {
            version: key.version,
            rip: key.regs.rip,
            rsp: key.regs.rsp,
            rbp: key.regs.rbp,
            hint: key.hint,
            frames: key.frames as u8,
            n_ips: ips.len() as u8,
            ips: [0; MAX_FRAMES],
            reads: *reads,
        };
        e.ips[..ips.len()].copy_from_slice(ips);
        self.entries[set * WAYS + way] = e;
    }
}

/// `n` empty entries from zeroed memory (untouched pages stay unmapped until used).
fn zeroed_entries(n: usize) -> Option<Vec<Entry>> {
    let layout = std::alloc::Layout::array::<Entry>(n).ok()?;
    // SAFETY: a non-zero-sized layout; all-zero bytes are a valid `Entry` (integers, arrays of
    // integers, `false`); the Vec takes ownership with the same layout (capacity = length = n).
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut Entry;
        if p.is_null() {
            return None;
        }
        Some(Vec::from_raw_parts(p, n, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rsp: u64, hint: u64) -> Key {
        Key {
            regs: EntryRegs {
                rip: 0x1000,
                rsp,
                rbp: 77,
            },
            version: 1,
            frames: 4,
            hint,
        }
    }

    #[test]
    fn a_stored_unwind_is_found_only_while_its_stack_words_are_unchanged() {
        let words = [0x11u64, 0x22, 0x33];
        let mut reads = Reads::default();
        for w in &words {
            reads.push(w as *const u64 as u64, *w);
        }
        let mut t = Table::default();
        let k = key(0x7000, 5);
        t.store(&k, &[1, 2, 3], &reads);
        let mut out = [0usize; 4];
        assert_eq!(t.find(&k, &mut out), Some(3));
        assert_eq!(out[..3], [1, 2, 3]);
        // Another hint, rsp or module list: not this unwind.
        assert_eq!(t.find(&key(0x7000, 6), &mut out), None);
        assert_eq!(t.find(&key(0x7008, 5), &mut out), None);
        assert_eq!(
            t.find(
                &Key {
                    version: 2,
                    ..key(0x7000, 5)
                },
                &mut out
            ),
            None
        );
        // Another starting rbp: not this unwind (a frame-pointer rule may use it).
        let other_rbp = Key {
            regs: EntryRegs { rbp: 99, ..k.regs },
            ..key(0x7000, 5)
        };
        assert_eq!(t.find(&other_rbp, &mut out), None);
        // A changed stack word (a different caller at the same depth): not this unwind.
        let mut changed = Reads::default();
        let moved = [0x11u64, 0x99, 0x33];
        for (w, v) in moved.iter().zip(&words) {
            changed.push(w as *const u64 as u64, *v);
        }
        let mut t3 = Table::default();
        t3.store(&k, &[1, 2, 3], &changed);
        assert_eq!(t3.find(&k, &mut out), None);
    }

    #[test]
    fn overflowing_reads_are_not_complete() {
        let mut r = Reads::default();
        for i in 0..MAX_READS as u64 {
            r.push(i * 8, i);
        }
        assert!(r.complete());
        r.push(0, 0);
        assert!(!r.complete());
    }
}
