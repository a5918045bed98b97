//! The thread's cache of whole stacks (hot path): a launch from a Python stack this thread has
//! captured before costs one walk of its frames compared with the copy kept here, and no lookup
//! per frame.
//!
//! Why: a training or inference loop launches from a few hundred distinct Python stacks, each
//! repeated every step, in the same order. Looking each frame's code object up (a per-thread
//! slot of 64 bytes per frame, then the stack in a process-wide table) touched one cache line
//! of cudablame's per frame on top of Python's own, and some 100 instructions per frame: the
//! largest part of the hook once the CPU caches are evicted between launches by the framework's
//! own work, as in PyTorch.
//!
//! What is kept ([`Entry`]), per distinct stack: a 16-byte [`Head`] (the interned stack's slot,
//! its innermost frame, its length, whether it was truncated, whether a frame is a backward
//! entry point, and which entry was captured right after it last time), then exactly what the
//! walk reads, raw: per frame a [`Rec`] of 16 bytes (code object address, instruction), the
//! first frame of each code object followed by its fingerprint ([`Fp`], 24 bytes: see
//! `intern::Fingerprint`). A 6-frame entry of 6 code objects is 256 bytes (4 cache lines); 24
//! frames of 5 code objects (a recursion, or nested `nn.Module` calls, which repeat
//! `Module._call_impl` at every level) 520 bytes (9 lines).
//!
//! How a launch finds its entry: first the one captured after the thread's previous stack last
//! time (a loop's launches come in the same order every step: no hash, no index read); failing
//! that, a hash of the frames' code objects and instruction pointers picks one 64-byte bucket of
//! 8 entries ([`StackCache::candidates`]). Either way an entry is used only if [`verify`]
//! finds every field of every frame equal to what is in memory now, walking the chain exactly
//! as the full walk does (the same frames skipped, the same end, the same truncation): a hash
//! alone is never trusted, and a code object freed and another allocated at its address
//! differs in its fingerprint (as the intern table checks it). Only a stack found nowhere takes
//! the full walk (`capture`'s, per frame through the per-thread code-object table and the intern
//! table, then `stacks::intern`), after which its entry is written here.
//!
//! Memory: one allocation per thread that captures frames (at its first entry, calloc'd, so
//! its pages are touched only as they fill): an index of 128 buckets of 8 ways (8 KiB) and
//! 4,096 lines (256 KiB) of entries, written one after another; when they are full all entries are dropped at once and the cache
//! fills again (no eviction per entry, no free list). Nothing here is shared between threads:
//! a forked child keeps the forking thread's cache, whose entries stay exact (verified against
//! memory at every use; the stack and code-object tables they name are kept across `fork`).

use super::capture::{FrameRef, PythonStack, MAX_WALK};
use super::intern::SHAPE;
use super::layout::*;
use super::runtime::*;
use crate::config::MAX_PYTHON_DEPTH;

/// One frame as an [`Entry`] keeps it (16 bytes), as the walk reads it: `[code, instr]`: the
/// code object's address ([`REPEAT`] set when an earlier frame of the entry ran the same code
/// object), and the instruction ([`instr_word`]). A frame whose code object is the first of its
/// kind in the entry is followed by that code object's [`Fp`]: a recursive function, or
/// `Module._call_impl` at every level of nested modules, keeps its fingerprint once per stack.
pub(super) type Rec = [u64; 2];

/// A code object's fingerprint as an [`Entry`] keeps it (24 bytes), as [`fp_words`] reads it:
/// `[shape_line, consts, names]`: the shape word (3.11+: `ob_size` with `co_firstlineno` in its
/// high half, which is zero: a code object of 2^32 code units does not exist; 3.10:
/// `co_argcount` and `co_posonlyargcount`, the first line being in the instruction word), the
/// addresses of `co_consts` and `co_names`: with the first line, `intern::Fingerprint`.
pub(super) type Fp = [u64; 3];

/// [`Rec`]'s flag (code objects are at least 8-byte aligned): the code object of an earlier
/// frame of the same entry, whose fingerprint and type that frame's comparison checked.
const REPEAT: u64 = 1;

/// What precedes an entry's frames (16 bytes, at the start of a 64-byte line), laid out for the
/// few instructions a hit spends on it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct Head {
    /// The innermost frame (`PythonStack::top`).
    pub(super) top: FrameRef,
    /// The interned stack (`stacks::intern`); never `NO_STACK`: such stacks are not kept.
    pub(super) stack: u32,
    /// Bits 0-14: the entry captured right after this one last time (its line plus one; 0:
    /// none). Bit 15 ([`BACKWARD`]): one of its frames is one of torch's backward entry points.
    next: u16,
    /// Frames kept (at most 64).
    len: u8,
    /// The depth limits it stands for, from `len` on: 0 when it was truncated (then only
    /// `len` itself), [`ANY_DEPTH`] when its walk reached the outermost frame (any limit from
    /// `len` up). One compare tells whether a capture with another limit may use it.
    span: u8,
}

/// [`Head::next`]'s flag: a backward entry point among the frames.
const BACKWARD: u16 = 0x8000;
/// [`Head::span`] of a stack that was not truncated: more than any depth limit minus `len`.
const ANY_DEPTH: u8 = 0x7f;

impl Head {
    pub(super) fn new(s: &PythonStack, backward: bool) -> Head {
        Head {
            top: s.top,
            stack: s.stack,
            next: if backward { BACKWARD } else { 0 },
            len: s.len,
            span: if s.truncated { 0 } else { ANY_DEPTH },
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    pub(super) fn truncated(&self) -> bool {
        self.span == 0
    }

    /// Whether the full walk with at most `depth` frames gives this entry's frames if it finds
    /// them: a truncated stack only with the limit it was cut at, another with any limit not
    /// below its length.
    #[inline(always)]
    pub(super) fn fits(&self, depth: u8) -> bool {
        depth.wrapping_sub(self.len) <= self.span
    }

    /// The entry captured after this one last time (line plus one; 0: none).
    pub(super) fn next(&self) -> u16 {
        self.next & !BACKWARD
    }

    /// Makes `line` the entry captured after this one.
    pub(super) fn set_next(&mut self, line: u16) {
        self.next = (self.next & BACKWARD) | line;
    }

    /// Writes the capture this entry stands for into `s` (empty); returns whether a frame is
    /// a backward entry point.
    #[inline(always)]
    pub(super) fn write_to(&self, s: &mut PythonStack) -> bool {
        s.top = self.top;
        s.stack = self.stack;
        s.len = self.len;
        s.truncated = self.truncated();
        self.next & BACKWARD != 0
    }
}

/// An entry: a [`Head`], then its frames' [`Rec`]s (each code object's first one followed by its
/// [`Fp`]), from the start of a line.
pub(super) type Entry = *mut Head;

/// Words in a cache line.
const LINE: usize = 8;
/// Index buckets (a power of two): one line each, of [`WAYS`] ways.
const BUCKETS: usize = 128;
/// Ways of a bucket: `tag << 32 | line + 1` (0: empty).
const WAYS: usize = 8;
/// Lines of entries (256 KiB); line numbers plus one fit a `u16`.
pub(super) const LINES: usize = 4096;
/// Lines of the largest entry (64 frames).
const MAX_ENTRY_LINES: usize = lines_for(MAX_PYTHON_DEPTH);
const _: () = assert!(std::mem::size_of::<Head>() == 16 && std::mem::size_of::<Rec>() == 16);
// Line numbers plus one leave `Head::next`'s flag bit free; the largest entry fits.
const _: () = assert!(LINES < BACKWARD as usize && MAX_ENTRY_LINES <= LINES);
/// Frames a verifying walk may skip (entry frames of the interpreter, 3.13's non-code
/// executables) before it leaves the stack to the full walk: with the frames it compares, it
/// then stays below [`MAX_WALK`] steps, where the full walk would stop.
const SKIP_LIMIT: usize = MAX_WALK - MAX_PYTHON_DEPTH - 2;

/// Lines taken by an entry of `n` frames running `d` distinct code objects.
const fn lines_of(n: usize, d: usize) -> usize {
    (std::mem::size_of::<Head>() + n * std::mem::size_of::<Rec>() + d * std::mem::size_of::<Fp>())
        .div_ceil(64)
}

/// Lines taken by an entry of `n` frames at most.
const fn lines_for(n: usize) -> usize {
    lines_of(n, n)
}

/// A thread's stacks (see the module doc). Not shared: a thread's `ThreadCache` owns it. The
/// fields a hit reads first (`repr(C)`), on the thread cache's one line.
#[repr(C)]
pub(super) struct StackCache {
    /// `mem`'s first 64-byte aligned word.
    base: *mut u64,
    /// Lines of entries written.
    used: u16,
    /// The entry of the thread's last capture (line plus one; 0: none).
    last: u16,
    /// That entry's successor as it was then: the first entry tried (line plus one; 0: none).
    pred: u16,
    /// The way a full bucket gives up next.
    victim: u8,
    /// The index then the entries, from `base`; calloc'd (see the module doc).
    mem: Box<[u64]>,
}

impl StackCache {
    /// An empty cache; its memory is allocated when its first entry is written.
    pub(super) fn new() -> StackCache {
        StackCache {
            base: std::ptr::null_mut(),
            mem: Box::default(),
            used: 0,
            last: 0,
            pred: 0,
            victim: 0,
        }
    }

    /// Allocates the memory (at the first entry): calloc'd, so that its pages are touched only
    /// as entries are written (a thread that never has frames allocates nothing).
    #[cold]
    fn allocate(&mut self) {
        let words = BUCKETS * WAYS + LINES * LINE + LINE;
        // `vec![0; n]` is `calloc`: large blocks come as untouched zero pages.
        let mut mem = vec![0u64; words].into_boxed_slice();
        let at = mem.as_mut_ptr();
        let skip = at.align_offset(64);
        assert!(skip < LINE, "u64 aligned");
        // SAFETY: `skip < LINE`: inside `mem`, whose last `LINE` words are slack for it.
        self.base = unsafe { at.add(skip) };
        self.mem = mem;
    }

    /// The entry at `line` (plus one, not 0).
    #[inline(always)]
    fn entry(&self, line: u16) -> Entry {
        debug_assert!(line != 0 && line as usize <= LINES);
        // SAFETY: lines 1..=LINES are inside `mem` after the index (see `new`).
        unsafe { self.base.add(BUCKETS * WAYS + (line as usize - 1) * LINE) }.cast()
    }

    /// The entry to try first: the one that came after the last capture's entry last time.
    #[inline(always)]
    pub(super) fn predicted(&self) -> Option<Entry> {
        (self.pred != 0).then(|| self.entry(self.pred))
    }

    /// A capture found `e` (line `line`): it is now the last one, its successor the next
    /// prediction. Writes the capture into `s` (empty); returns whether a frame is a backward
    /// entry point.
    #[inline(always)]
    fn hit_at(&mut self, e: Entry, line: u16, s: &mut PythonStack) -> bool {
        // SAFETY: `e` is an entry written by `insert` (a `Head` at a line start, in `mem`).
        let head = unsafe { &*e };
        self.last = line;
        self.pred = head.next();
        head.write_to(s)
    }

    /// [`hit_at`](Self::hit_at) for the predicted entry.
    #[inline(always)]
    pub(super) fn hit_predicted(&mut self, e: Entry, s: &mut PythonStack) -> bool {
        let line = self.pred;
        self.hit_at(e, line, s)
    }

    /// A capture found `e` (line `line`) other than as predicted: the last capture's entry learns
    /// that `e` follows it.
    fn hit_linked(&mut self, e: Entry, line: u16, s: &mut PythonStack) -> bool {
        if self.last != 0 {
            // SAFETY: `last` names an entry written since the last flush.
            unsafe { (*self.entry(self.last)).set_next(line) };
        }
        self.hit_at(e, line, s)
    }

    /// The bucket of hash `h`.
    fn bucket(&self, h: u64) -> *mut [u64; WAYS] {
        let b = (h as usize >> 7) & (BUCKETS - 1);
        // SAFETY: the index is the first `BUCKETS * WAYS` words from `base`.
        unsafe { self.base.add(b * WAYS) }.cast()
    }

    /// Entries kept under hash `h` (line plus one, 0 for a way without one): more than one when
    /// stacks differ only in what the hash leaves out, or collide.
    pub(super) fn candidates(&self, h: u64) -> [u16; WAYS] {
        if self.base.is_null() {
            return [0; WAYS];
        }
        let tag = h >> 32;
        // SAFETY: `bucket` is inside `mem`.
        let ways = unsafe { self.bucket(h).read() };
        ways.map(|w| if w >> 32 == tag { w as u16 } else { 0 })
    }

    /// Room for an entry of `n` frames: the line plus one where it goes, after dropping every
    /// entry when the lines are full.
    fn room(&mut self, n: usize) -> u16 {
        if self.base.is_null() {
            self.allocate();
        } else if self.used as usize + lines_for(n) > LINES {
            self.flush();
        }
        self.used + 1
    }

    /// Drops every entry (the lines are full).
    pub(super) fn flush(&mut self) {
        if !self.base.is_null() {
            // SAFETY: the index is the first `BUCKETS * WAYS` words from `base`.
            unsafe { std::ptr::write_bytes(self.base, 0, BUCKETS * WAYS) };
        }
        self.used = 0;
        self.last = 0;
        self.pred = 0;
    }

    /// Lines of entries written (tests).
    #[cfg(test)]
    pub(super) fn used(&self) -> usize {
        self.used as usize
    }
}

/// The layout walk `V` reads ([`Walk`] as a number): a known version's constants, which the
/// compiler folds into every use (including its `chain`), or the runtime's own.
#[inline(always)]
pub(super) fn lay<const V: u8>(rt: &Runtime) -> Layout {
    match V {
        WALK_310 => LAYOUT_310,
        WALK_311 => LAYOUT_311,
        WALK_312 => LAYOUT_312,
        WALK_313 => LAYOUT_313,
        _ => rt.layout,
    }
}

/// The innermost frame of thread state `ts` (0: none).
///
/// Safety: `ts` is the calling thread's own thread state, of layout `l`.
#[inline(always)]
pub(super) unsafe fn first_frame(l: &Layout, ts: usize) -> usize {
    // SAFETY: this function's contract.
    unsafe {
        match l.chain {
            Chain::CFrame => match rd::<usize>(ts + l.ts_frame) {
                0 => 0,
                cframe => rd::<usize>(cframe + l.cframe_current),
            },
            Chain::Frame310 | Chain::Direct => rd::<usize>(ts + l.ts_frame),
        }
    }
}

/// The instruction of frame `f`, running the code object `code` (checked to be one), as kept
/// ([`Rec`]): 3.11+ the `prev_instr` / `instr_ptr` pointer (with the code object's address, its
/// byte offset); 3.10 `f_lasti` in the low half and `co_firstlineno` in the high half.
///
/// Safety: `f` is a live frame of this thread, of layout `l`, and `code` its code object.
#[inline(always)]
unsafe fn instr_word(l: &Layout, f: usize, code: usize) -> u64 {
    // SAFETY: this function's contract: a live frame and the code object it keeps alive.
    unsafe {
        match l.chain {
            Chain::Frame310 => {
                let firstlineno = rd::<i32>(code + l.co_firstlineno) as u32 as u64;
                rd::<i32>(f + l.fr_instr) as u32 as u64 | firstlineno << 32
            }
            Chain::CFrame | Chain::Direct => rd::<usize>(f + l.fr_instr) as u64,
        }
    }
}

/// The fingerprint of the code object `code` (checked to be one), as kept ([`Fp`]).
///
/// Safety: `code` is a code object kept alive by a frame of this thread, of layout `l`.
#[inline(always)]
unsafe fn fp_words(l: &Layout, code: usize) -> Fp {
    // SAFETY: this function's contract.
    unsafe {
        let shape = rd::<u64>(code + SHAPE);
        let shape_line = match l.chain {
            Chain::Frame310 => shape,
            Chain::CFrame | Chain::Direct => {
                shape ^ (rd::<i32>(code + l.co_firstlineno) as u32 as u64) << 32
            }
        };
        [
            shape_line,
            rd::<usize>(code + l.co_consts) as u64,
            rd::<usize>(code + l.co_names) as u64,
        ]
    }
}

/// Whether a frame is an entry frame of the interpreter (3.12+: owned by the C stack), which no
/// walk counts.
///
/// Safety: `f` is a live frame of this thread, of layout `l`.
#[inline(always)]
unsafe fn entry_frame(l: &Layout, f: usize) -> bool {
    match l.fr_owner {
        Some(o) if l.chain != Chain::Frame310 => {
            // SAFETY: this function's contract.
            (unsafe { rd::<u8>(f + o) }) == FRAME_OWNED_BY_CSTACK
        }
        _ => false,
    }
}

/// Whether `code` (a frame's code field) is a code object.
///
/// Safety: `code` is 0 or a live object.
#[inline(always)]
unsafe fn is_code(rt: &Runtime, l: &Layout, code: usize) -> bool {
    // SAFETY: this function's contract.
    code != 0 && unsafe { rd::<usize>(code + l.ob_type) } == rt.code_type
}

/// How the walk of [`scan`] ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum End {
    /// At the outermost frame.
    Complete,
    /// At the depth limit, with more frames.
    Truncated,
    /// Anywhere else (a frame of an unexpected layout, [`MAX_WALK`] steps): such a stack is
    /// left to the full walk every time, which says what it found.
    Other,
}

/// Mixes one frame (its code object and instruction word) into a stack's hash.
#[inline(always)]
fn mix(h: u64, code: usize, instr: u64) -> u64 {
    (h ^ code as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ instr
}

/// A stack's hash from its frames' mix and their number: the bucket from bits 7..14, the tag
/// from the high half.
#[inline(always)]
fn finish(h: u64, n: usize) -> u64 {
    #[cfg(test)]
    if ONE_HASH.with(|c| c.get()) {
        return 0x5EED_0000_0000_0080; // every stack in one bucket, under one tag
    }
    let h = (h ^ n as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 29)
}

#[cfg(test)]
thread_local! {
    /// Tests: every stack gets the same hash (a collision of all of them).
    pub(super) static ONE_HASH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The walk of the full capture (`capture`'s `walk_chain`: the same frames skipped, counted and
/// stopped at) from the innermost frame `f`, with at most `depth` frames: their hash, their
/// number and how it ended. Calls `each` with each frame counted, its code object (checked to be
/// one) and its [`instr_word`].
///
/// Safety: `f` is the innermost frame of the calling thread, of `rt`'s layout `l`.
#[inline(always)]
pub(super) unsafe fn scan(
    rt: &Runtime,
    l: &Layout,
    mut f: usize,
    depth: usize,
    mut each: impl FnMut(usize, u64),
) -> (u64, usize, End) {
    // SAFETY: this function's contract: the frames are this thread's own, each keeping its code
    // object alive (see `capture`).
    unsafe {
        let (mut h, mut n, mut steps) = (0u64, 0usize, 0usize);
        while f != 0 {
            if steps >= MAX_WALK {
                return (finish(h, n), n, End::Other);
            }
            steps += 1;
            let next = rd::<usize>(f + l.fr_previous);
            if entry_frame(l, f) {
                f = next;
                continue;
            }
            let code = rd::<usize>(f + l.fr_code);
            if !is_code(rt, l, code) {
                if l.chain == Chain::Direct {
                    f = next; // 3.13: f_executable may be None or another callable's object
                    continue;
                }
                return (finish(h, n), n, End::Other);
            }
            if n >= depth {
                return (finish(h, n), n, End::Truncated);
            }
            let instr = instr_word(l, f, code);
            each(code, instr);
            h = mix(h, code, instr);
            n += 1;
            f = next;
        }
        (finish(h, n), n, End::Complete)
    }
}

/// `a == b`, without a branch or a call per word.
#[inline(always)]
fn same(a: &Fp, b: &Fp) -> bool {
    ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2])) == 0
}

/// Whether entry `e` is exactly what the full walk would capture from the innermost frame `f`
/// with `depth` frames at most: `depth` is a limit it stands for ([`Head::fits`]), and walking
/// the chain as the full walk does, the frames counted are its frames (each code object's
/// address and type, instruction, and at its first frame its fingerprint, equal), and the walk
/// ends where it ended (the outermost frame, or one more code object past the depth limit when
/// it was truncated). Reads each frame and its code object once, compares, and stops at the
/// first difference; never trusts a hash. A later frame of a code object is compared by address
/// and instruction only: the code object is the one its first frame's comparison checked.
///
/// Per frame on 3.12: 4 reads of Python's frame (previous, owner, code object, instruction) and,
/// at a code object's first frame in the stack, 5 of the code object (its type, shape, constants,
/// names and first line: the lines the interpreter reads to run it); 2 reads of the entry (5 at
/// a first frame); about 21 instructions (29 at a first frame).
///
/// Safety: as [`scan`]; `e` an entry of this thread's cache.
#[inline(always)]
pub(super) unsafe fn verify(rt: &Runtime, l: &Layout, mut f: usize, e: Entry, depth: u8) -> bool {
    // SAFETY: this function's contract (`scan`'s), and `e` is a `Head` followed by its records
    // inside the cache's memory.
    unsafe {
        let head = e.read();
        if !head.fits(depth) {
            return false;
        }
        let mut r = e.add(1).cast::<u64>();
        let mut left = head.len();
        let mut skipped = 0usize;
        loop {
            if f == 0 {
                return left == 0 && !head.truncated();
            }
            let next = rd::<usize>(f + l.fr_previous);
            if !entry_frame(l, f) {
                let code = rd::<usize>(f + l.fr_code);
                // 0: the kept code object, first of its kind; `REPEAT`: an earlier frame's,
                // compared there (then `code` is not 0 and is that object).
                let kept = if left != 0 {
                    code as u64 ^ *r
                } else {
                    u64::MAX
                };
                if kept == 0 {
                    if rd::<usize>(code + l.ob_type) != rt.code_type
                        || instr_word(l, f, code) != *r.add(1)
                        || !same(&fp_words(l, code), &*r.add(2).cast::<Fp>())
                    {
                        return false;
                    }
                    r = r.add(5);
                    left -= 1;
                    f = next;
                    continue;
                }
                if kept == REPEAT {
                    if instr_word(l, f, code) != *r.add(1) {
                        return false;
                    }
                    r = r.add(2);
                    left -= 1;
                    f = next;
                    continue;
                }
                // Not the kept frame: past the kept frames, a frame to skip, or another stack.
                if is_code(rt, l, code) {
                    return left == 0 && head.truncated();
                }
                if l.chain != Chain::Direct {
                    return false; // the full walk's layout mismatch
                }
            }
            skipped += 1;
            if skipped > SKIP_LIMIT {
                return false;
            }
            f = next;
        }
    }
}

/// The miss path's use of the index: the entry kept for the stack whose innermost frame is `f`,
/// found by its hash `h`, verified ([`verify`]); then the last capture's entry learns that it
/// follows.
///
/// Safety: as [`verify`].
#[inline(always)]
pub(super) unsafe fn find(
    c: &mut StackCache,
    rt: &Runtime,
    l: &Layout,
    f: usize,
    h: u64,
    depth: u8,
    s: &mut PythonStack,
) -> Option<bool> {
    for line in c.candidates(h) {
        if line == 0 {
            continue;
        }
        let e = c.entry(line);
        // SAFETY: this function's contract.
        if unsafe { verify(rt, l, f, e, depth) } {
            return Some(c.hit_linked(e, line, s));
        }
    }
    None
}

/// Keeps the capture `s` (with `backward`) of the stack whose innermost frame is `f`, of hash
/// `h`, made by the full walk: writes its entry (its records read
/// again by [`scan`], which must find the same frames), puts it in its bucket and after the last
/// capture's entry.
///
/// Safety: as [`scan`].
#[cold]
#[inline(never)]
pub(super) unsafe fn insert(
    c: &mut StackCache,
    rt: &Runtime,
    l: &Layout,
    f: usize,
    h: u64,
    s: &PythonStack,
    backward: bool,
) {
    let n = s.len();
    debug_assert!(n > 0 && n <= MAX_PYTHON_DEPTH && lines_for(n) <= MAX_ENTRY_LINES);
    let line = c.room(n);
    let e = c.entry(line);
    // Code objects met so far (for `REPEAT`), on the stack of a miss only.
    let mut seen = [0usize; MAX_PYTHON_DEPTH];
    let mut d = 0;
    let mut w = e.cast::<u64>().wrapping_add(2);
    // SAFETY: this function's contract; `room` left `lines_for(n)` lines from `e` inside `mem`,
    // room for `n` records each followed by a fingerprint, and `scan` calls `each` `n` times at
    // most (its depth limit).
    let (again, m, end) = unsafe {
        scan(rt, l, f, n, |code, instr| {
            let repeat = seen[..d].contains(&code);
            if !repeat {
                seen[d] = code;
                d += 1;
            }
            w.write(code as u64 | if repeat { REPEAT } else { 0 });
            w.add(1).write(instr);
            w = w.add(2);
            if !repeat {
                w.cast::<Fp>().write(fp_words(l, code));
                w = w.add(3);
            }
        })
    };
    if m != n || again != h || (end == End::Truncated) != s.truncated {
        return; // cannot happen: the frames did not change; keep nothing rather than guess
    }
    let head = Head::new(s, backward);
    // SAFETY: as above.
    unsafe { e.write(head) };
    c.used += lines_of(n, d) as u16;
    // SAFETY: `bucket` is inside `mem`.
    let ways = unsafe { &mut *c.bucket(h) };
    let way = match ways.iter().position(|&w| w == 0) {
        Some(free) => free,
        None => {
            c.victim = c.victim.wrapping_add(1);
            c.victim as usize % WAYS
        }
    };
    ways[way] = (h >> 32) << 32 | line as u64;
    let mut again = PythonStack::EMPTY;
    c.hit_linked(e, line, &mut again);
}

/// What a thread's captures remember between launches: its [`StackCache`], the per-thread
/// code-object table of the full walk, and what was checked of the thread once. The fields a hit
/// reads are on one 64-byte line; the tables are on the heap (see [`THREAD`]).
#[repr(C, align(64))]
pub(super) struct ThreadCache {
    /// Set while a capture uses `state` (a capture re-entered on the thread, by a signal handler
    /// that launches, gets none: see [`ThreadCache::with`]).
    busy: std::cell::Cell<bool>,
    state: std::cell::UnsafeCell<ThreadState>,
}

/// See [`ThreadCache`].
#[repr(C)]
pub(super) struct ThreadState {
    /// The thread state whose `thread_id` was found to be this thread's (0: none yet): the
    /// layout check is made once per thread state, not per launch (the field shares no line with
    /// what the interpreter reads as it runs, so it cost a cache miss per launch).
    pub(super) checked_ts: usize,
    pub(super) stacks: StackCache,
    /// Whether this thread is one of PyTorch's autograd workers (`capture::is_autograd_worker`,
    /// read when this was made, at the thread's first capture).
    pub(super) worker: bool,
    /// The full walk's last interned stack plus one (`stacks::intern`; 0: none): consecutive
    /// full walks of one stack compare with it instead of hashing.
    pub(super) last_stack: u32,
    /// The full walk's recent code objects.
    pub(super) code: Box<super::intern::RecentCode>,
}

impl ThreadCache {
    fn new() -> ThreadCache {
        let code: Box<[super::intern::RecentSlot]> =
            vec![super::intern::NO_CODE; super::intern::RECENT].into_boxed_slice();
        ThreadCache {
            busy: std::cell::Cell::new(false),
            state: std::cell::UnsafeCell::new(ThreadState {
                checked_ts: 0,
                stacks: StackCache::new(),
                worker: super::capture::thread_is_autograd_worker(),
                last_stack: 0,
                code: code
                    .try_into()
                    .unwrap_or_else(|_| unreachable!("RECENT slots")),
            }),
        }
    }

    /// Runs `f` with the thread's state; `None` (and `f` not run) if a capture on this thread is
    /// already using it.
    #[inline(always)]
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut ThreadState) -> R) -> Option<R> {
        struct Done<'a>(&'a std::cell::Cell<bool>);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.set(false);
            }
        }
        if self.busy.replace(true) {
            return None;
        }
        let _done = Done(&self.busy);
        // SAFETY: `busy` was false: no other reference to `state` exists (the value is this
        // thread's own, and a re-entered capture finds `busy` set until `_done` is dropped).
        Some(f(unsafe { &mut *self.state.get() }))
    }
}

crate::safety::per_thread! {
    /// This thread's [`ThreadCache`], made at its first capture, its tables on the heap. Not a
    /// `thread_local!` holding them: a preloaded library's thread-locals are static TLS, which
    /// glibc carves out of every thread's stack, so 16 KiB of them left a thread created with a
    /// small stack 16 KiB less (`pthread_create` refused 16 KiB stacks with EINVAL; test
    /// `a_thread_with_a_small_stack_keeps_it`). Built without a large temporary on the stack
    /// (`vec!` fills the heap buffers in place): a lazily built array once inlined its
    /// initializer into the hook's stack frame.
    pub(super) static THREAD: ThreadCache = ThreadCache::new;
}
