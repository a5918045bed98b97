//! Deferred unwinding: a launch copies the top of its thread's stack (from the hooked entry
//! point's frame upwards, [`crate::config::Config::stack_bytes`] bytes at most) instead of
//! unwinding it; the copy is unwound only if a report names the launch, the way `perf` samples
//! user stacks. A copy costs one `memcpy` of hot stack memory; an unwind through a large library
//! costs a rule lookup per frame (see [`super::unwind`]).
//!
//! Measured and reverted (H200, GPU-bound PyTorch GPT step, 3 interleaved runs each): prefetching
//! the copy's source and buffer (`prefetcht0`, one per 64-byte line) before the real call, so that
//! the copy's cache misses would overlap the driver's work. The copy phase got slower, 518-830 ns
//! against 289-497 without: 256 prefetches of evicted lines stall the launching thread on the
//! core's few line-fill buffers instead of running ahead. On the simulated driver with
//! `BENCH_POLLUTE_KB=2048` (`shim-tests/programs/py_bench.py`) it had looked like a gain.
//! Also measured and reverted (eighth session, same machine, `scripts/gpu-calls/components.sh`
//! with `LIBS=base=... final=...`, 3 GPT and 2 tiny rounds, stats per op after the first pause):
//! the copy with non-temporal stores (`movntdq` per 16 bytes, then `sfence`), meant to neither
//! read the buffer's lines in first nor evict the program's data. The copy phase tripled:
//! 460-481 ns against 155-224 (GPT step), 296-321 against 130-189 (tiny step); the `sfence`
//! waits for all 256 write-combining stores to drain. On the simulated driver with 2 MiB of
//! pollution it had again looked like a gain (163-229 against 236-414 ns).
//!
//! The unwind from a copy reads exactly what an unwind at launch time would have read, as long as
//! the modules that the frames belong to are still loaded: the entry point's registers and the
//! stack words above them are what the launching thread had when it called the driver.

use super::{EntryRegs, NativeStack};

/// A copy of the top of one launch's stack, owned by its stream's ring (`record::streams`).
pub(crate) struct StackCopy {
    /// The sequence number of the op on its stream this copy belongs to (0: none).
    pub(crate) seq: u64,
    /// The load generation the copy was taken in (`unwind::load_generation`): its frames are
    /// read with the module list of when it is unwound, so a frame in a module loaded since is
    /// not that module's (issue 19 item 6).
    gen: u64,
    regs: EntryRegs,
    len: usize,
    bytes: Box<[u8]>,
}

impl StackCopy {
    /// An empty copy with room for `capacity` bytes (allocated here, never on a launch).
    pub(crate) fn new(capacity: usize) -> StackCopy {
        StackCopy {
            seq: 0,
            gen: 0,
            regs: EntryRegs::default(),
            len: 0,
            bytes: vec![0u8; capacity].into_boxed_slice(),
        }
    }

    /// The most bytes this copy can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.len()
    }

    /// Copies the calling thread's stack from `regs.rsp` upwards (at most this copy's capacity,
    /// never past the thread's stack) for op `seq`. `regs` must have been read in a frame of this
    /// thread that is still live. Leaves the copy empty when the stack bounds are unknown.
    #[inline]
    pub(crate) fn fill(&mut self, seq: u64, regs: &EntryRegs) {
        self.seq = seq;
        self.gen = super::unwind::load_generation();
        self.regs = *regs;
        let (lo, hi) = super::unwind::stack_bounds();
        self.len = if regs.rsp >= lo && regs.rsp < hi {
            ((hi - regs.rsp) as usize).min(self.bytes.len())
        } else {
            0
        };
        // SAFETY: [rsp, rsp + len) lies within this thread's own stack (checked above), which is
        // mapped and readable; the destination has room for `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                regs.rsp as usize as *const u8,
                self.bytes.as_mut_ptr(),
                self.len,
            );
        }
    }

    /// Where the return addresses of the copy's first `depth` frames below the entry point sit,
    /// as `(bytes above the entry point's stack pointer, value)`, innermost first (one unwind:
    /// [`super::unwind::capture_copy_slots`]). Empty when the copy is; `None` when the unwind
    /// found no frame (the module list unavailable during a `dlclose`) or a frame whose slot it
    /// could not tell (found by review: an empty path passed every later launch).
    pub(crate) fn return_slots(&self, depth: usize) -> Option<Vec<(u32, u64)>> {
        let mut s = NativeStack::EMPTY;
        if self.len == 0 {
            return Some(Vec::new());
        }
        let want = (depth + 1).min(s.capacity());
        let (n, slots) = super::unwind::capture_copy_slots(
            s.slots(want),
            self.regs,
            &self.bytes[..self.len],
            self.gen,
        );
        // No frame (module list unavailable), or a frame whose slot was not found: nothing
        // proves a later launch took this path.
        (n > 0 && slots.len() + 1 == n).then_some(slots)
    }

    /// Report time: unwinds the copy into return addresses (up to `depth` frames below the
    /// entry point's own frame, which is cudablame's).
    pub(crate) fn unwind(&self, depth: usize) -> NativeStack {
        let mut s = NativeStack::EMPTY;
        if self.len == 0 {
            return s;
        }
        let want = (depth + 1).min(s.capacity());
        let n = super::unwind::capture_copy(
            s.slots(want),
            self.regs,
            &self.bytes[..self.len],
            self.gen,
        );
        s.set_len(n);
        s.set_generation(self.gen);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn copied_here(copy: &mut StackCopy) {
        let regs = EntryRegs::here();
        copy.fill(7, &regs);
        std::hint::black_box(&*copy); // keeps this frame: not a tail call
    }

    #[inline(never)]
    fn outer(copy: &mut StackCopy) {
        copied_here(copy);
        std::hint::black_box(&*copy);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn unwinding_a_copy_finds_the_callers() {
        let _serial = super::super::unwind::TEST_LOCK.lock();
        let mut copy = StackCopy::new(16 * 1024);
        outer(&mut copy);
        assert_eq!(copy.seq, 7);
        // The live frames are gone now: only the copy can name them.
        let stack = copy.unwind(16);
        let names = super::super::test_function_names(&stack);
        assert!(names.iter().any(|n| n.contains("outer")), "{names:?}");
        assert!(
            names.iter().any(|n| n.contains("unwinding_a_copy")),
            "{names:?}"
        );
    }

    #[test]
    fn a_copy_too_short_for_the_callers_stops_early() {
        let mut copy = StackCopy::new(16);
        outer(&mut copy);
        assert!(copy.unwind(16).ips().len() <= 2);
    }
}
