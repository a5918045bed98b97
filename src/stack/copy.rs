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
            copy_around_the_cache(regs.rsp as usize as *const u8, &mut self.bytes[..self.len])
        }
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

/// Copies `dst.len()` bytes from `src` into `dst` with non-temporal stores (x86-64 SSE2
/// `movntdq`, then `sfence`; elsewhere a plain copy). A launch's copy is read again only if a
/// report names its op: written around the cache, it neither waits for the 64 or 128 buffer
/// lines to be read in first nor evicts that much of the program's own data per launch, which
/// the program then pays back between launches (the stats' "between ops' hooks").
///
/// # Safety
/// `src` must be readable for `dst.len()` bytes and not overlap `dst`.
#[inline]
unsafe fn copy_around_the_cache(src: *const u8, dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let len = dst.len();
        let base = dst.as_mut_ptr();
        // The unaligned head and the tail go through the cache; the 16-byte aligned body not.
        let head = base.align_offset(16).min(len);
        let body = (len - head) & !15;
        // SAFETY: every range lies within `src` (readable for `len` bytes) and `dst`; the body's
        // destination is 16-byte aligned, as `_mm_stream_si128` requires; SSE2 is part of
        // x86-64. The `sfence` orders the streaming stores before the ring lock's release, after
        // which a report thread may read the copy.
        unsafe {
            std::ptr::copy_nonoverlapping(src, base, head);
            let mut i = head;
            while i < head + body {
                let v = _mm_loadu_si128(src.add(i) as *const __m128i);
                _mm_stream_si128(base.add(i) as *mut __m128i, v);
                i += 16;
            }
            std::ptr::copy_nonoverlapping(src.add(i), base.add(i), len - i);
            _mm_sfence();
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as the caller promises.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len())
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
        let mut names = Vec::new();
        for &ip in stack.ips().iter() {
            backtrace::resolve((ip - 1) as *mut std::ffi::c_void, |sym| {
                names.push(sym.name().map(|n| n.to_string()).unwrap_or_default())
            });
        }
        assert!(names.iter().any(|n| n.contains("outer")), "{names:?}");
        assert!(
            names.iter().any(|n| n.contains("unwinding_a_copy")),
            "{names:?}"
        );
    }

    #[test]
    fn the_copy_around_the_cache_copies_every_byte_at_any_alignment() {
        let src: Vec<u8> = (0..4200u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut buf = vec![0u8; 4300];
        for offset in 0..17 {
            for len in [0, 1, 15, 16, 17, 31, 33, 4096, 4100 - offset] {
                buf.fill(0xAA);
                // SAFETY: `src` has 4200 readable bytes, more than any `len`; no overlap.
                unsafe {
                    copy_around_the_cache(src.as_ptr().add(3), &mut buf[offset..offset + len])
                };
                assert_eq!(
                    &buf[offset..offset + len],
                    &src[3..3 + len],
                    "{offset} {len}"
                );
                assert!(
                    buf[..offset].iter().all(|&b| b == 0xAA),
                    "{offset} {len}: before"
                );
                assert!(
                    buf[offset + len..].iter().all(|&b| b == 0xAA),
                    "{offset} {len}: after"
                );
            }
        }
    }

    #[test]
    fn a_copy_too_short_for_the_callers_stops_early() {
        let mut copy = StackCopy::new(16);
        outer(&mut copy);
        assert!(copy.unwind(16).ips().len() <= 2);
    }
}
