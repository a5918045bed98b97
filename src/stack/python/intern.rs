//! The intern table (first sight of a code object): code object -> cudablame-owned copy.

use super::layout::*;
use super::runtime::*;
use crate::safety::ForkSafeOnce;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// The entry index meaning "code object not interned" (table full): shown as `<unknown>`.
pub(super) const UNKNOWN: u32 = u32::MAX;
pub(super) const SLOTS: usize = 1 << 15;
/// Distinct code addresses kept before new ones are left unknown (75% load).
pub(super) const MAX_KEYS: usize = SLOTS / 4 * 3;
/// Entries kept (reuse of an address makes a new entry; the old one stays for old records).
pub(super) const MAX_ENTRIES: usize = 1 << 16;
pub(super) const MAX_TEXT: usize = 4096;
pub(super) const MAX_LINETABLE: usize = 1 << 20;
pub(super) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// What identifies a code object beyond its address: fields that a different code object at the
/// same address would almost certainly not share all of: its first line and the addresses of its
/// constants and names tuples (created with it and owned by it) and its shape (the 8 bytes after
/// the object header: 3.11+ `ob_size`, its length in code units; 3.10 `co_argcount` and
/// `co_posonlyargcount`). Read on every capture, so chosen from the cache lines that the
/// interpreter itself reads while running the code (the object header with `co_consts` and
/// `co_names`; in 3.11+ `co_firstlineno` shares its line with `co_framesize`, read at every
/// call), not from the line of the file name, function name and line table, which it does not
/// touch (those were checked before). On the H200, in a GPU-bound PyTorch step, the Python phase
/// did not move measurably with the change (204 ns at best for 4.6 frames, 185 before: the
/// process-to-process spread is larger); the walk's cost is mostly its frames, not this check.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(super) struct Fingerprint {
    firstlineno: i32,
    shape: u64,
    consts: usize,
    names: usize,
}

/// Where a code object's shape word starts: right after `PyObject_HEAD` (16 bytes on LP64).
pub(super) const SHAPE: usize = 16;

impl Fingerprint {
    /// `self == other`, without a branch per field (the per-frame test of the walk).
    #[inline(always)]
    pub(super) fn same(&self, other: &Fingerprint) -> bool {
        ((self.firstlineno ^ other.firstlineno) as u64
            | (self.shape ^ other.shape)
            | (self.consts ^ other.consts) as u64
            | (self.names ^ other.names) as u64)
            == 0
    }
}

/// A thread's most recently seen code objects (address, fingerprint, entry index, flags), direct
/// mapped, for the full walk (a stack not in the thread's `cache::StackCache`): its answer
/// without the process-wide table, whose lines a large program
/// keeps evicting from the CPU caches. A slot answers only for the same address and fingerprint,
/// exactly what the table would check.
pub(super) type RecentCode = [RecentSlot; RECENT];

/// One slot of [`RecentCode`]: a code object's address and fingerprint, its entry index and
/// flags. A cache line of its own: packed (56 bytes) every other slot straddled two lines, so
/// a frame could cost two cache misses here where one does.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct RecentSlot {
    pub(super) code: usize,
    pub(super) fingerprint: Fingerprint,
    pub(super) entry: u32,
    pub(super) flags: u8,
}
pub(super) const RECENT: usize = 256;

/// The [`RecentCode`] slot of code object `code`: a multiplicative hash of its address. (Its
/// bits 4-11, as before, are equal for objects at the same offset of different allocator
/// pools, which made two frames of one stack evict each other at every launch.)
#[inline(always)]
pub(super) fn recent_slot(code: usize) -> usize {
    ((code as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % RECENT
}

/// A slot of [`RecentCode`] that answers for no code object (address 0 is never one).
pub(super) const NO_CODE: RecentSlot = RecentSlot {
    code: 0,
    fingerprint: Fingerprint {
        firstlineno: 0,
        shape: 0,
        consts: 0,
        names: 0,
    },
    entry: 0,
    flags: 0,
};

/// Flags of an entry, decided once from its file and name.
pub(super) const FLAG_BACKWARD_ENTRY: u8 = 1;

/// A code object as cudablame keeps it: immutable once published.
pub(super) struct Entry {
    pub(super) index: u32,
    pub(super) fingerprint: Fingerprint,
    pub(super) flags: u8,
    pub(super) filename: Box<str>,
    pub(super) function: Box<str>,
    pub(super) firstlineno: i32,
    pub(super) lines: LineTable,
    pub(super) linetable: Box<[u8]>,
}

pub(super) struct Table {
    keys: Box<[AtomicUsize]>,
    vals: Box<[AtomicPtr<Entry>]>,
    entries: Box<[AtomicPtr<Entry>]>,
    /// Serializes inserts; holds (keys used, entries used).
    insert: crate::safety::lock::Mutex<(usize, usize)>,
}

/// Fork-safe, as `stacks::TABLE`.
pub(super) static TABLE: ForkSafeOnce<Table> = ForkSafeOnce::new();

pub(super) fn table() -> &'static Table {
    TABLE.get_or_init(|| Table {
        keys: (0..SLOTS).map(|_| AtomicUsize::new(0)).collect(),
        vals: (0..SLOTS)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect(),
        entries: (0..MAX_ENTRIES)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect(),
        insert: crate::safety::lock::Mutex::new((0, 0)),
    })
}

#[inline(always)]
pub(super) fn slot_of(code: usize) -> usize {
    // Objects are 16-byte aligned: drop the low bits, then a multiplicative hash.
    ((code >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & (SLOTS - 1)
}

pub(super) fn entry(index: u32) -> Option<&'static Entry> {
    let t = TABLE.get()?;
    let p = t.entries.get(index as usize)?.load(Ordering::Acquire);
    // SAFETY: published entries are leaked boxes, never freed or changed.
    unsafe { p.as_ref() }
}

impl Runtime {
    /// The fingerprint of a live code object.
    #[inline(always)]
    pub(super) unsafe fn fingerprint(&self, code: usize) -> Fingerprint {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let l = &self.layout;
            Fingerprint {
                firstlineno: rd::<i32>(code + l.co_firstlineno),
                shape: rd::<u64>(code + SHAPE),
                consts: rd::<usize>(code + l.co_consts),
                names: rd::<usize>(code + l.co_names),
            }
        }
    }

    /// The entry of a live code object, interned on first sight; `None` when the table is full
    /// or the object unreadable.
    #[inline]
    pub(super) unsafe fn intern(&self, code: usize, fp: Fingerprint) -> Option<&'static Entry> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let t = table();
            let mut i = slot_of(code);
            for _ in 0..SLOTS {
                match t.keys[i].load(Ordering::Acquire) {
                    k if k == code => {
                        if let Some(e) = t.vals[i].load(Ordering::Acquire).as_ref() {
                            if e.fingerprint == fp {
                                return Some(e);
                            }
                        }
                        break;
                    }
                    0 => break,
                    _ => i = (i + 1) & (SLOTS - 1),
                }
            }
            self.insert(code, fp)
        }
    }

    /// Cold: first sight of a code object (or of a new one at a reused address).
    #[cold]
    #[inline(never)]
    unsafe fn insert(&self, code: usize, fp: Fingerprint) -> Option<&'static Entry> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let t = table();
            // Bounded waits on cudablame's own locks: a lock left held by a thread that no longer
            // exists (a fork from another thread) costs a frame, never a hang.
            let mut used = t.insert.try_lock_for(LOCK_WAIT)?;
            let mut i = slot_of(code);
            let mut found = None;
            for _ in 0..SLOTS {
                let k = t.keys[i].load(Ordering::Relaxed);
                if k == code || k == 0 {
                    found = Some((i, k == 0));
                    break;
                }
                i = (i + 1) & (SLOTS - 1);
            }
            let (slot, fresh) = found?;
            if !fresh {
                if let Some(e) = t.vals[slot].load(Ordering::Acquire).as_ref() {
                    if e.fingerprint == fp {
                        return Some(e); // another thread interned it meanwhile
                    }
                }
            }
            if (fresh && used.0 >= MAX_KEYS) || used.1 >= MAX_ENTRIES {
                return None;
            }
            let Some(mut e) = self.copy_code(code, fp) else {
                LAYOUT_MISMATCH.store(true, Ordering::Relaxed);
                return None;
            };
            let index = used.1 as u32;
            e.index = index;
            let p = Box::into_raw(Box::new(e));
            t.entries[index as usize].store(p, Ordering::Release);
            t.vals[slot].store(p, Ordering::Release);
            if fresh {
                t.keys[slot].store(code, Ordering::Release);
                used.0 += 1;
            }
            used.1 += 1;
            p.as_ref()
        }
    }

    /// Copies what a report needs out of a live code object.
    unsafe fn copy_code(&self, code: usize, fp: Fingerprint) -> Option<Entry> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let l = &self.layout;
            let filename = self
                .read_str(rd::<usize>(code + l.co_filename))
                .unwrap_or_else(|| "<unknown>".into());
            let name = self
                .read_str(rd::<usize>(code + l.co_name))
                .unwrap_or_else(|| "<unknown>".into());
            let function = match l.co_qualname {
                Some(o) => self
                    .read_str(rd::<usize>(code + o))
                    .unwrap_or_else(|| name.clone()),
                None => name.clone(),
            };
            let linetable = self.read_bytes(rd::<usize>(code + l.co_linetable))?;
            Some(Entry {
                index: 0,
                fingerprint: fp,
                flags: classify(&filename, &name),
                filename: filename.into(),
                function: function.into(),
                firstlineno: fp.firstlineno,
                lines: self.layout.lines,
                linetable: linetable.into(),
            })
        }
    }

    /// The characters of a compact `str` (all names and file names of code objects are).
    unsafe fn read_str(&self, obj: usize) -> Option<String> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let l = &self.layout;
            if obj == 0 || rd::<usize>(obj + l.ob_type) != self.unicode_type {
                return None;
            }
            let len = rd::<isize>(obj + l.str_length);
            if !(0..=MAX_TEXT as isize).contains(&len) {
                return None;
            }
            let len = len as usize;
            // state: interned:2, kind:3, compact:1, ascii:1 (low bits first; 3.10 to 3.13).
            let state = rd::<u32>(obj + l.str_state);
            let (kind, compact, ascii) = ((state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1);
            if compact == 0 {
                return None;
            }
            let data = obj
                + if ascii == 1 {
                    l.ascii_size
                } else {
                    l.compact_size
                };
            let s = match kind {
                1 => std::slice::from_raw_parts(data as *const u8, len)
                    .iter()
                    .map(|&b| b as char)
                    .collect(),
                2 => String::from_utf16_lossy(std::slice::from_raw_parts(data as *const u16, len)),
                4 => std::slice::from_raw_parts(data as *const u32, len)
                    .iter()
                    .map(|&c| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER))
                    .collect(),
                _ => return None,
            };
            Some(s)
        }
    }

    /// The bytes of a `bytes` object (the line table).
    unsafe fn read_bytes(&self, obj: usize) -> Option<Vec<u8>> {
        // SAFETY: this function's own contract (its doc and the callers' SAFETY comments): the
        // addresses it reads are live objects of this thread's interpreter.
        unsafe {
            let l = &self.layout;
            if obj == 0 || rd::<usize>(obj + l.ob_type) != self.bytes_type {
                return None;
            }
            let len = rd::<isize>(obj + l.bytes_size);
            if !(0..=MAX_LINETABLE as isize).contains(&len) {
                return None;
            }
            Some(
                std::slice::from_raw_parts((obj + l.bytes_sval) as *const u8, len as usize)
                    .to_vec(),
            )
        }
    }
}

/// Torch's backward entry points (`torch/_tensor.py` `Tensor.backward`,
/// `torch/autograd/__init__.py` `backward` / `grad`, `torch/autograd/graph.py`
/// `_engine_run_backward`): a thread whose frames include one is starting a backward pass.
pub(super) fn classify(filename: &str, name: &str) -> u8 {
    let f = filename.replace('\\', "/");
    let backward = (f.ends_with("torch/_tensor.py") && name == "backward")
        || (f.ends_with("torch/autograd/__init__.py") && (name == "backward" || name == "grad"))
        || (f.ends_with("torch/autograd/graph.py") && name == "_engine_run_backward");
    if backward {
        FLAG_BACKWARD_ENTRY
    } else {
        0
    }
}
